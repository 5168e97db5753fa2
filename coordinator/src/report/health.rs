//! The drives' health over a run: each drive under test's readings (`smartctl --json`, taken
//! by the agent at the plan's start, when it took the plan up again, and at its end; carried
//! in the provenance snapshots), before → after for every attribute it reports, the changes
//! that matter flagged, and `qualify: { health }` limits judged on them. A drive whose health
//! could not be read says why; it is never shown as zeros.

use serde::Serialize;

use platter_proto::provenance::{DriveHealth, HealthReading};

use super::judge::Verdict;
use super::provenance::Snapshot;
use crate::spec::health::{show, Attribute, Bound, Limit, Worse, ATTRIBUTES};

/// The heading of a report's health section.
pub const TITLE: &str = "drive health (smartctl before → after the run)";

/// One drive under test of one host, over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DriveHealthReport {
    pub host: String,
    /// The device node the plan used (`/dev/sdb`).
    pub path: String,
    pub model: String,
    pub serial: String,
    pub firmware: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub wwn: String,
    /// Why the health could not be read (the latest reason), "" when it was.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub unreadable: String,
    /// How many readings the run took of it.
    pub readings: usize,
    /// The first reading and the last (`None` when there was no second).
    pub before: Option<HealthReading>,
    pub after: Option<HealthReading>,
    /// Every attribute either reading reports, in `ATTRIBUTES`' order.
    pub deltas: Vec<HealthDelta>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HealthDelta {
    pub attribute: &'static str,
    pub unit: &'static str,
    pub before: Option<f64>,
    pub after: Option<f64>,
    /// The highest of every reading of the run (temperature's "max seen").
    pub max: Option<f64>,
    /// Worse by the attribute's own direction (an error counter grew, spare shrank), or a
    /// critical warning or failed self-assessment at the end.
    pub flagged: bool,
    /// Whether there was a reading after the run at all (else `after` is `None` for that).
    #[serde(skip)]
    pub read_after: bool,
}

impl HealthDelta {
    /// "media_errors 0 → 2 (+2)", "temperature 34°C → 41°C (max 43°C)".
    pub fn text(&self) -> String {
        let mut t = self.change_text();
        if self.flagged {
            t.push_str(" FLAGGED");
        }
        t
    }

    /// `text` without the flag.
    pub fn change_text(&self) -> String {
        let v = |x: Option<f64>| x.map_or("—".to_string(), |x| show(x, self.unit));
        let mut t = match (self.before, self.after) {
            (Some(b), Some(a)) if b == a => format!("{} {}", self.attribute, v(Some(a))),
            // One reading only: its value, without an arrow to nothing.
            (Some(b), None) if !self.read_after => format!("{} {}", self.attribute, v(Some(b))),
            (b, a) => format!("{} {} → {}", self.attribute, v(b), v(a)),
        };
        if let (Some(b), Some(a)) = (self.before, self.after) {
            if a != b && self.unit != "B" && self.unit != "°C" {
                t.push_str(&format!(" ({:+})", a - b));
            }
        }
        if self.unit == "°C" && self.read_after {
            if let Some(m) = self.max.filter(|m| Some(*m) != self.after) {
                t.push_str(&format!(" (max {})", show(m, self.unit)));
            }
        }
        t
    }
}

impl DriveHealthReport {
    /// "rc66 /dev/sdb Samsung SSD 860 EVO 500GB serial S4EV… firmware RVT04B6Q".
    pub fn drive(&self) -> String {
        let mut t = format!("{} {}", self.host, self.path);
        if !self.model.is_empty() {
            t.push_str(&format!(" {}", self.model));
        }
        if !self.serial.is_empty() {
            t.push_str(&format!(" serial {}", self.serial));
        }
        if !self.firmware.is_empty() {
            t.push_str(&format!(" firmware {}", self.firmware));
        }
        t
    }

    /// A single reading's line (`platter inventory --health`): no before and after.
    pub fn reading_text(&self) -> String {
        format!("{}: {}", self.drive(), self.readings_text(false))
    }

    /// The line a text report writes of it.
    pub fn text(&self) -> String {
        format!("{}: {}", self.drive(), self.readings_text(true))
    }

    /// What the readings say, without the drive: each attribute before → after, or why
    /// none was read; `after_expected`: a run, whose missing end reading is said.
    pub fn readings_text(&self, after_expected: bool) -> String {
        if self.before.is_none() {
            let why = if self.unreadable.is_empty() {
                "no reading was stored"
            } else {
                &self.unreadable
            };
            return format!("health not readable: {why}");
        }
        let mut parts: Vec<String> = self.deltas.iter().map(HealthDelta::text).collect();
        if after_expected && self.after.is_none() {
            parts.push("no reading after the run".into());
        }
        parts.join("; ")
    }

    /// The changes flagged, each as `HealthDelta::change_text` says it.
    pub fn flags(&self) -> Vec<String> {
        self.deltas
            .iter()
            .filter(|d| d.flagged)
            .map(HealthDelta::change_text)
            .collect()
    }

    pub fn flagged(&self) -> bool {
        self.deltas.iter().any(|d| d.flagged)
    }
}

/// The drives under test of the run's snapshots, each host's in the order it first read them.
pub fn drives(snapshots: &[Snapshot]) -> Vec<DriveHealthReport> {
    let mut seen: Vec<((String, String), Vec<&DriveHealth>)> = Vec::new();
    for s in snapshots {
        for h in &s.facts.health {
            // A drive is its model and serial (two models may share a serial); one without
            // a serial is its path on the host.
            let key = (
                s.host.clone(),
                if h.serial.is_empty() {
                    h.path.clone()
                } else {
                    format!("{}\u{0}{}", h.model, h.serial)
                },
            );
            match seen.iter_mut().find(|(k, _)| *k == key) {
                Some((_, list)) => list.push(h),
                None => seen.push((key, vec![h])),
            }
        }
    }
    seen.into_iter()
        .map(|((host, _), list)| one_drive(host, &list))
        .collect()
}

fn one_drive(host: String, list: &[&DriveHealth]) -> DriveHealthReport {
    let last = list.last().expect("a drive has a reading");
    let readings: Vec<&HealthReading> = list.iter().filter_map(|h| h.reading.as_ref()).collect();
    let before = readings.first().copied().cloned();
    let after = (readings.len() > 1)
        .then(|| readings.last().copied().cloned())
        .flatten();
    let deltas = match &before {
        None => Vec::new(),
        Some(b) => ATTRIBUTES
            .iter()
            .filter_map(|a| delta(a, b, after.as_ref(), &readings))
            .collect(),
    };
    let unreadable = list
        .iter()
        .rev()
        .find(|h| !h.unreadable.is_empty())
        .map(|h| h.unreadable.clone())
        .unwrap_or_default();
    DriveHealthReport {
        host,
        path: last.path.clone(),
        model: last.model.clone(),
        serial: last.serial.clone(),
        firmware: last.firmware.clone(),
        wwn: last.wwn.clone(),
        unreadable,
        readings: readings.len(),
        before,
        after,
        deltas,
    }
}

fn delta(
    a: &'static Attribute,
    before: &HealthReading,
    after: Option<&HealthReading>,
    all: &[&HealthReading],
) -> Option<HealthDelta> {
    let (b, x) = (a.of(before), after.and_then(|r| a.of(r)));
    if b.is_none() && x.is_none() {
        return None;
    }
    let max = all.iter().filter_map(|r| a.of(r)).reduce(f64::max);
    let worse = match (a.worse, b, x) {
        (Worse::Up, Some(b), Some(x)) => x > b,
        (Worse::Down, Some(b), Some(x)) => x < b,
        _ => false,
    };
    // A critical warning or a failed self-assessment at the end is bad whatever it was before.
    let alarm =
        matches!(a.name, "critical_warning" | "smart_failed") && x.or(b).is_some_and(|v| v > 0.0);
    Some(HealthDelta {
        attribute: a.name,
        unit: a.unit,
        before: b,
        after: x,
        max,
        flagged: worse || alarm,
        read_after: after.is_some(),
    })
}

/// `qualify: { health }` on every drive read before and after the run: a verdict per drive
/// and limit; what could not be judged (no reading, no second reading, an attribute the
/// drive does not report) is said in `not_judged`, never a PASS.
pub fn judge(drives: &[DriveHealthReport], limits: &[Limit]) -> (Vec<Verdict>, Vec<String>) {
    let (mut verdicts, mut not_judged) = (Vec::new(), Vec::new());
    if limits.is_empty() {
        return (verdicts, not_judged);
    }
    if drives.is_empty() {
        not_judged.push(
            "health limits not judged: no drive under test had its health read (only drives the \
             campaign's storage is made on are read, by agents that read health)"
                .into(),
        );
    }
    for d in drives {
        if d.before.is_none() {
            // Why is said once, on the drive's own line.
            not_judged.push(format!(
                "{}: health limits not judged: health not readable",
                d.drive()
            ));
            continue;
        }
        for l in limits {
            let delta = d.deltas.iter().find(|x| x.attribute == l.attribute.name);
            let (value, measured) = match (l.bound, delta) {
                (_, None) => (None, None),
                (Bound::MaxIncrease, Some(x)) => match (x.before, x.after) {
                    (Some(b), Some(a)) => (
                        Some(a - b),
                        Some(format!(
                            "{} → {}",
                            show(b, l.attribute.unit),
                            show(a, l.attribute.unit)
                        )),
                    ),
                    _ => (None, None),
                },
                // The value after the run; temperature's highest reading of the run.
                (Bound::Max, Some(x)) => {
                    let v = if l.attribute.name == "temperature" {
                        x.max.filter(|_| x.read_after)
                    } else {
                        x.after
                    };
                    (v, v.map(|v| show(v, l.attribute.unit)))
                }
                (Bound::Min, Some(x)) => (x.after, x.after.map(|v| show(v, l.attribute.unit))),
            };
            let (Some(value), Some(measured)) = (value, measured) else {
                let why = if d.after.is_none() {
                    "no reading after the run"
                } else {
                    "the drive does not report it"
                };
                not_judged.push(format!("{}: {} not judged: {why}", d.drive(), l.text()));
                continue;
            };
            let pass = match l.bound {
                Bound::Max | Bound::MaxIncrease => value <= l.value,
                Bound::Min => value >= l.value,
            };
            verdicts.push(Verdict {
                host: d.host.clone(),
                device: d.path.clone(),
                cell: if d.serial.is_empty() {
                    "no serial".into()
                } else {
                    format!("serial {}", d.serial)
                },
                threshold: l.text(),
                value: Some(value),
                unit: l.attribute.unit.to_string(),
                pass,
                measured,
            });
        }
    }
    (verdicts, not_judged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::health::attribute;
    use platter_proto::provenance::Provenance;

    fn snapshot(host: &str, health: Vec<DriveHealth>) -> Snapshot {
        Snapshot {
            host: host.into(),
            plan_id: "p".into(),
            step_index: 0,
            storage_config: String::new(),
            cells: Vec::new(),
            facts: Provenance {
                health,
                ..Provenance::default()
            },
        }
    }

    fn read(serial: &str, media: u64, temp: i64) -> DriveHealth {
        DriveHealth {
            path: "/dev/sdb".into(),
            model: "SAMSUNG MZ7LH960".into(),
            serial: serial.into(),
            firmware: "HXT7404Q".into(),
            reading: Some(HealthReading {
                tool: "smartctl 7.3".into(),
                protocol: "ATA".into(),
                media_errors: Some(media),
                temperature_c: Some(temp),
                power_on_hours: Some(1200),
                ..HealthReading::default()
            }),
            ..DriveHealth::default()
        }
    }

    #[test]
    fn grown_media_errors_are_flagged_and_fail_their_limit_naming_the_serial() {
        let snaps = [
            snapshot("rc66", vec![read("S1", 0, 34)]),
            snapshot("rc66", vec![read("S1", 1, 52)]),
            snapshot("rc66", vec![read("S1", 2, 41)]),
        ];
        let drives = drives(&snaps);
        assert_eq!(drives.len(), 1);
        let d = &drives[0];
        assert_eq!(d.readings, 3);
        assert!(d.flagged());
        assert_eq!(
            d.text(),
            "rc66 /dev/sdb SAMSUNG MZ7LH960 serial S1 firmware HXT7404Q: \
             media_errors 0 → 2 (+2) FLAGGED; temperature 34°C → 41°C (max 52°C); \
             power_on_hours 1200 h"
        );
        let limits = [
            Limit {
                attribute: attribute("media_errors").unwrap(),
                bound: Bound::MaxIncrease,
                value: 0.0,
            },
            Limit {
                attribute: attribute("temperature").unwrap(),
                bound: Bound::Max,
                value: 70.0,
            },
            Limit {
                attribute: attribute("percentage_used").unwrap(),
                bound: Bound::MaxIncrease,
                value: 1.0,
            },
        ];
        let (v, not) = judge(&drives, &limits);
        assert_eq!(v.len(), 2);
        assert!(!v[0].pass);
        assert_eq!(v[0].cell, "serial S1");
        assert_eq!(v[0].measured, "0 → 2");
        assert_eq!(v[0].threshold, "health media_errors max_increase 0");
        assert!(v[1].pass, "max 52°C ≤ 70°C");
        assert_eq!((v[1].value, v[1].unit.as_str()), (Some(52.0), "°C"));
        assert_eq!(not.len(), 1);
        assert!(
            not[0].ends_with(
                "health percentage_used max_increase 1% not judged: the drive does not report it"
            ),
            "{not:?}"
        );
    }

    #[test]
    fn an_unreadable_drive_says_why_and_is_never_judged() {
        let lo = DriveHealth {
            path: "/dev/loop3".into(),
            unreadable: "a loop device has no drive health (it is a file)".into(),
            ..DriveHealth::default()
        };
        let drives = drives(&[
            snapshot("rc66", vec![lo.clone()]),
            snapshot("rc66", vec![lo]),
        ]);
        assert_eq!(
            drives[0].text(),
            "rc66 /dev/loop3: health not readable: a loop device has no drive health (it is a file)"
        );
        assert!(drives[0].deltas.is_empty());
        let limit = Limit {
            attribute: attribute("media_errors").unwrap(),
            bound: Bound::MaxIncrease,
            value: 0.0,
        };
        let (v, not) = judge(&drives, std::slice::from_ref(&limit));
        assert!(v.is_empty());
        assert!(not[0].contains("health limits not judged: health not readable"));
        // No drive read at all (a campaign on tmpfs, an older agent): said, not a PASS.
        let (v, not) = judge(&[], &[limit]);
        assert!(v.is_empty());
        assert!(
            not[0].starts_with("health limits not judged: no drive under test had its health read")
        );
    }

    #[test]
    fn spare_going_down_and_a_critical_warning_are_flagged_and_equal_readings_are_not() {
        let nvme = |spare: u64, warn: u64| DriveHealth {
            path: "/dev/nvme0n1".into(),
            serial: "N1".into(),
            reading: Some(HealthReading {
                available_spare: Some(spare),
                critical_warning: Some(warn),
                reallocated_sectors: Some(5),
                ..HealthReading::default()
            }),
            ..DriveHealth::default()
        };
        let d = &drives(&[
            snapshot("h", vec![nvme(100, 0)]),
            snapshot("h", vec![nvme(99, 1)]),
        ])[0];
        let flagged: Vec<_> = d
            .deltas
            .iter()
            .filter(|x| x.flagged)
            .map(|x| x.attribute)
            .collect();
        assert_eq!(flagged, ["critical_warning", "available_spare"]);
        let same = &drives(&[
            snapshot("h", vec![nvme(100, 0)]),
            snapshot("h", vec![nvme(100, 0)]),
        ])[0];
        assert!(!same.flagged(), "{:?}", same.deltas);
        // Two drives of one host by serial; one host's drive is not another's.
        assert_eq!(
            drives(&[
                snapshot("a", vec![nvme(1, 0)]),
                snapshot("b", vec![nvme(1, 0)])
            ])
            .len(),
            2
        );
    }
}
