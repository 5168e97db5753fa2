//! Drive health in a campaign: the attributes platter reads with `smartctl --json` before and
//! after a run (`platter_proto::provenance::HealthReading`), by the names a campaign's
//! `report: { qualify: { health: { … } } }` gives them, the limits set on them (over the run,
//! or since the drive's baseline: its first reading in the store), and the attributes
//! ignored on models known to report nonsense. What a limit is judged on is the report's.

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

/// What a limit's increase is counted from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Since {
    /// The run's first reading (`ATTRIBUTE: { … }`).
    #[default]
    Run,
    /// The drive's baseline: the first reading of it the store has, whichever campaign took
    /// it (`since_baseline: { ATTRIBUTE: { max_increase: … } }`). Only `max_increase` is
    /// counted so: `max` and `min` bound the value now, whatever its past.
    Baseline,
}

/// The key under `qualify.health` whose limits count from the baseline; no attribute is
/// called so.
pub const SINCE_BASELINE: &str = "since_baseline";
/// The key under `qualify.health` listing the attributes not to judge on some models.
pub const IGNORE: &str = "ignore";

/// One `qualify: { health: { [since_baseline: {] ATTRIBUTE: { BOUND: VALUE } } }` limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    pub attribute: &'static Attribute,
    pub bound: Bound,
    /// In the attribute's unit (bytes for `data_written`).
    pub value: f64,
    pub since: Since,
}

impl Limit {
    /// "health media_errors max_increase 0", "health temperature max 70°C", "health
    /// reallocated_sectors since baseline max_increase 8": how verdicts name it.
    pub fn text(&self) -> String {
        let since = match self.since {
            Since::Run => "",
            Since::Baseline => " since baseline",
        };
        format!(
            "health {}{since} {} {}",
            self.attribute.name,
            self.bound.word(),
            show(self.value, self.attribute.unit)
        )
    }
}

/// `qualify: { health: { … } }` as a whole.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HealthSpec {
    /// Every limit, over the run and since the baseline, in the order written.
    pub limits: Vec<Limit>,
    /// `ignore: [{ model: "KINGSTON SA400*", attributes: [temperature] }]`.
    pub ignore: Vec<Ignore>,
}

impl HealthSpec {
    /// Whether any limit counts from the baseline (only then does a report read the
    /// drives' baselines from the store).
    pub fn needs_baseline(&self) -> bool {
        self.limits.iter().any(|l| l.since == Since::Baseline)
    }

    /// The `ignore` entry that ignores `attribute` on a drive of `model`, if one does.
    pub fn ignoring(&self, model: &str, attribute: &str) -> Option<&Ignore> {
        self.ignore
            .iter()
            .find(|i| i.attributes.iter().any(|a| a.name == attribute) && i.matches(model))
    }
}

/// Attributes never flagged nor judged on drives whose model matches `model`: for vendors
/// known to report nonsense in them (a temperature of 128°C on an idle drive, a CRC count
/// that jumps by millions).
#[derive(Debug, Clone, PartialEq)]
pub struct Ignore {
    /// A glob over the model smartctl reads (`*`, `?`, `[…]`), case-insensitive.
    pub model: String,
    pub attributes: Vec<&'static Attribute>,
}

impl Ignore {
    pub fn matches(&self, model: &str) -> bool {
        let options = glob::MatchOptions {
            case_sensitive: false,
            ..glob::MatchOptions::new()
        };
        glob::Pattern::new(&self.model).is_ok_and(|p| p.matches_with(model.trim(), options))
    }

    /// "ignored for model KINGSTON SA400* (qualify.health.ignore)".
    pub fn text(&self) -> String {
        format!("ignored for model {} (qualify.health.ignore)", self.model)
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
            since: Since::Run,
        };
        assert_eq!(l.text(), "health temperature max 70°C");
        let l = Limit {
            attribute: attribute("reallocated_sectors").unwrap(),
            bound: Bound::MaxIncrease,
            value: 8.0,
            since: Since::Baseline,
        };
        assert_eq!(
            l.text(),
            "health reallocated_sectors since baseline max_increase 8"
        );
        assert!(
            attribute(SINCE_BASELINE).is_none() && attribute(IGNORE).is_none(),
            "no attribute is called as the keys beside them"
        );
    }

    #[test]
    fn an_ignore_entry_matches_its_models_by_glob_whatever_their_case() {
        let spec = HealthSpec {
            limits: Vec::new(),
            ignore: vec![Ignore {
                model: "KINGSTON SA400*".into(),
                attributes: vec![attribute("temperature").unwrap()],
            }],
        };
        assert!(spec
            .ignoring("KINGSTON SA400S37240G", "temperature")
            .is_some());
        assert!(spec
            .ignoring("kingston sa400s37120g ", "temperature")
            .is_some());
        assert!(spec
            .ignoring("KINGSTON SA400S37240G", "media_errors")
            .is_none());
        assert!(spec.ignoring("KINGSTON SUV500", "temperature").is_none());
        assert_eq!(
            spec.ignore[0].text(),
            "ignored for model KINGSTON SA400* (qualify.health.ignore)"
        );
    }
}
