//! Drive health in a campaign: the attributes platter reads with `smartctl --json` before and
//! after a run (`platter_proto::provenance::HealthReading`), by the names a campaign's
//! `report: { qualify: { health: { … } } }` gives them, and the limits set on them.

use platter_proto::provenance::HealthReading;

/// One health attribute: its name in a campaign file and in reports, its unit, and how a
/// change in it reads.
#[derive(Debug, Clone, Copy)]
pub struct Attribute {
    pub name: &'static str,
    /// "" for a count, "%" , "°C", "h", "B".
    pub unit: &'static str,
    /// Which way is worse: an error counter or wear going up (`Up`), spare going down
    /// (`Down`); `Neither` for what only describes use (hours, bytes written, temperature).
    pub worse: Worse,
    read: fn(&HealthReading) -> Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Worse {
    Up,
    Down,
    Neither,
}

/// Attributes are told apart by name (each is one of `ATTRIBUTES`).
impl PartialEq for Attribute {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Attribute {}

impl Attribute {
    pub fn of(&self, r: &HealthReading) -> Option<f64> {
        (self.read)(r)
    }
}

fn n(v: Option<u64>) -> Option<f64> {
    v.map(|v| v as f64)
}

/// Every attribute, in the order reports list them: the errors first, then wear, then use.
pub const ATTRIBUTES: [Attribute; 13] = [
    Attribute {
        name: "media_errors",
        unit: "",
        worse: Worse::Up,
        read: |r| n(r.media_errors),
    },
    Attribute {
        name: "reallocated_sectors",
        unit: "",
        worse: Worse::Up,
        read: |r| n(r.reallocated_sectors),
    },
    Attribute {
        name: "pending_sectors",
        unit: "",
        worse: Worse::Up,
        read: |r| n(r.pending_sectors),
    },
    Attribute {
        name: "uncorrectable_errors",
        unit: "",
        worse: Worse::Up,
        read: |r| n(r.uncorrectable_errors),
    },
    Attribute {
        name: "crc_errors",
        unit: "",
        worse: Worse::Up,
        read: |r| n(r.crc_errors),
    },
    Attribute {
        name: "critical_warning",
        unit: "",
        worse: Worse::Up,
        read: |r| n(r.critical_warning),
    },
    Attribute {
        name: "smart_failed",
        unit: "",
        worse: Worse::Up,
        read: |r| r.passed.map(|p| if p { 0.0 } else { 1.0 }),
    },
    Attribute {
        name: "percentage_used",
        unit: "%",
        worse: Worse::Up,
        read: |r| n(r.percentage_used),
    },
    Attribute {
        name: "available_spare",
        unit: "%",
        worse: Worse::Down,
        read: |r| n(r.available_spare),
    },
    Attribute {
        name: "unsafe_shutdowns",
        unit: "",
        worse: Worse::Up,
        read: |r| n(r.unsafe_shutdowns),
    },
    Attribute {
        name: "temperature",
        unit: "°C",
        worse: Worse::Neither,
        read: |r| r.temperature_c.map(|t| t as f64),
    },
    Attribute {
        name: "power_on_hours",
        unit: "h",
        worse: Worse::Neither,
        read: |r| n(r.power_on_hours),
    },
    Attribute {
        name: "data_written",
        unit: "B",
        worse: Worse::Neither,
        read: |r| n(r.data_written_bytes),
    },
];

pub fn attribute(name: &str) -> Option<&'static Attribute> {
    ATTRIBUTES.iter().find(|a| a.name == name)
}

/// What a limit bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// The value after the run (for temperature: the highest reading of the run); not
    /// judged without a reading after the run.
    Max,
    /// The value after the run; not judged without one.
    Min,
    /// After minus before.
    MaxIncrease,
}

impl Bound {
    pub const WORDS: [&'static str; 3] = ["max_increase", "max", "min"];

    pub fn word(self) -> &'static str {
        match self {
            Bound::Max => "max",
            Bound::Min => "min",
            Bound::MaxIncrease => "max_increase",
        }
    }

    pub fn from_word(w: &str) -> Option<Bound> {
        Some(match w {
            "max" => Bound::Max,
            "min" => Bound::Min,
            "max_increase" => Bound::MaxIncrease,
            _ => return None,
        })
    }
}

/// One `qualify: { health: { ATTRIBUTE: { BOUND: VALUE } } }` limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    pub attribute: &'static Attribute,
    pub bound: Bound,
    /// In the attribute's unit (bytes for `data_written`).
    pub value: f64,
}

impl Limit {
    /// "health media_errors max_increase 0", "health temperature max 70°C": how verdicts
    /// name it.
    pub fn text(&self) -> String {
        format!(
            "health {} {} {}",
            self.attribute.name,
            self.bound.word(),
            show(self.value, self.attribute.unit)
        )
    }
}

/// `value` with its unit: "70°C", "1%", "2", "100 GB".
pub fn show(value: f64, unit: &str) -> String {
    let number = if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    };
    match unit {
        // Decimal, as drives are sold and as smartctl writes data written.
        "B" => {
            let (scale, suffix) = [
                (1e15, "PB"),
                (1e12, "TB"),
                (1e9, "GB"),
                (1e6, "MB"),
                (1e3, "kB"),
            ]
            .into_iter()
            .find(|(s, _)| value.abs() >= *s)
            .unwrap_or((1.0, "B"));
            if scale == 1.0 {
                format!("{number} B")
            } else {
                format!("{:.2} {suffix}", value / scale)
            }
        }
        "h" => format!("{number} h"),
        _ => format!("{number}{unit}"),
    }
}

/// A limit's value as written: a number, with the attribute's unit if it has one (`70C`,
/// `70°C`, `1%`; `data_written` takes `500GB`, `2TB`, decimal).
pub fn value(text: &str, a: &Attribute) -> Result<f64, String> {
    let t = text.trim();
    let (number, unit) = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .map_or((t, ""), |i| (&t[..i], t[i..].trim()));
    let x: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    if !x.is_finite() || x < 0.0 && a.name != "temperature" {
        return Err(format!("`{text}` is not a limit {} can have", a.name));
    }
    let scale = match (a.unit, unit) {
        (_, "") => 1.0,
        ("°C", "C" | "°C") => 1.0,
        ("%", "%") => 1.0,
        ("h", "h") => 1.0,
        ("B", u) => match u {
            "B" => 1.0,
            "kB" | "KB" => 1e3,
            "MB" => 1e6,
            "GB" => 1e9,
            "TB" => 1e12,
            "PB" => 1e15,
            _ => {
                return Err(format!(
                    "`{unit}` is not a unit of bytes (B, kB, MB, GB, TB, PB)"
                ))
            }
        },
        (want, got) => {
            let want = if want.is_empty() {
                "none (a count)"
            } else {
                want
            };
            return Err(format!(
                "`{got}` is not the unit of {}: it takes {want}",
                a.name
            ));
        }
    };
    Ok(x * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_read_their_units_and_refuse_others() {
        let temp = attribute("temperature").unwrap();
        assert_eq!(value("70C", temp), Ok(70.0));
        assert_eq!(value("70°C", temp), Ok(70.0));
        assert_eq!(value("70", temp), Ok(70.0));
        let written = attribute("data_written").unwrap();
        assert_eq!(value("500GB", written), Ok(500e9));
        let media = attribute("media_errors").unwrap();
        assert_eq!(value("0", media), Ok(0.0));
        assert!(value("2%", media).unwrap_err().contains("media_errors"));
        assert!(value("lots", media).unwrap_err().contains("not a number"));
        assert!(value("-1", media).is_err());
        let r = HealthReading {
            media_errors: Some(2),
            passed: Some(false),
            ..HealthReading::default()
        };
        assert_eq!(media.of(&r), Some(2.0));
        assert_eq!(attribute("smart_failed").unwrap().of(&r), Some(1.0));
        assert_eq!(attribute("pending_sectors").unwrap().of(&r), None);
        let l = Limit {
            attribute: temp,
            bound: Bound::Max,
            value: 70.0,
        };
        assert_eq!(l.text(), "health temperature max 70°C");
    }
}
