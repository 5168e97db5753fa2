//! The drives' health over a run: each drive under test's readings (`smartctl --json`, taken
//! by the agent at the plan's start, when it took the plan up again, and at its end; carried
//! in the provenance snapshots), before → after for every attribute it reports, the changes
//! that matter flagged, and `qualify: { health }` limits judged on them, over the run or since
//! the drive's baseline (its first reading in the store, which `Report::load` reads when a
//! limit needs it); attributes `ignore`d on the drive's model are shown as ignored, never
//! flagged nor judged. A drive whose health could not be read says why; it is never shown as
//! zeros.

use serde::Serialize;

use platter_proto::provenance::{DriveHealth, HealthReading};

use super::judge::Verdict;
use super::provenance::Snapshot;
use crate::spec::health::{show, Attribute, Bound, HealthSpec, Limit, Since, Worse, ATTRIBUTES};

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
    /// The drive's first reading in the store, whichever run took it; read only when a
    /// limit counts since it (`since_baseline`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
}

/// A drive's baseline: the first health reading of it the store has.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Baseline {
    pub campaign_id: String,
    pub campaign: String,
    pub host: String,
    /// When its run was submitted, as the ledger writes times ("2026-12-06 11:00 UTC").
    pub submitted: String,
    pub reading: HealthReading,
}

impl Baseline {
    /// "2026-12-06 11:00 UTC, drive-health (0193…) on rc66".
    pub fn source(&self) -> String {
        format!(
            "{}, {} ({}) on {}",
            self.submitted, self.campaign, self.campaign_id, self.host
        )
    }
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
    /// critical warning or failed self-assessment at the end; never when `ignored`.
    pub flagged: bool,
    /// Ignored on this drive's model (`qualify.health.ignore`): shown, never flagged nor
    /// judged.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ignored: bool,
    /// Its value in the drive's baseline reading, for an attribute a limit counts since it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<f64>,
    /// Whether there was a reading after the run at all (else `after` is `None` for that).
    #[serde(skip)]
    pub read_after: bool,
}

impl HealthDelta {
    /// "media_errors 0 → 2 (+2)", "temperature 34°C → 41°C (max 43°C)", "temperature 128°C
    /// (ignored)".
    pub fn text(&self) -> String {
        let mut t = self.change_text();
        if self.flagged {
            t.push_str(" FLAGGED");
        } else if self.ignored {
            t.push_str(" (ignored)");
        }
        t
    }

    /// "reallocated_sectors 0 → 10 (+10)": from the baseline to the run's last reading.
    pub fn since_baseline_text(&self) -> Option<String> {
        let b = self.baseline?;
        let now = self.after.filter(|_| self.read_after).or(self.before)?;
        let mut t = format!(
            "{} {} → {}",
            self.attribute,
            show(b, self.unit),
            show(now, self.unit)
        );
        if self.unit != "B" && self.unit != "°C" {
            t.push_str(&format!(" ({:+})", now - b));
        }
        Some(t)
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
        if let Some(since) = self.since_baseline_text() {
            parts.push(since);
        }
        parts.join("; ")
    }

    /// "since baseline (2026-12-06 11:00 UTC, drive-health (0193…) on rc66):
    /// reallocated_sectors 0 → 10 (+10)": the attributes limits count since the baseline.
    pub fn since_baseline_text(&self) -> Option<String> {
        let b = self.baseline.as_ref()?;
        let changes: Vec<String> = self
            .deltas
            .iter()
            .filter_map(HealthDelta::since_baseline_text)
            .collect();
        let changes = if changes.is_empty() {
            "none of the attributes limited since it is in the baseline reading".to_string()
        } else {
            changes.join(", ")
        };
        Some(format!("since baseline ({}): {changes}", b.source()))
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
        baseline: None,
    }
}

/// `qualify.health.ignore` on the drives: each attribute ignored on a drive's model is marked
/// so and never flagged.
pub fn ignore(drives: &mut [DriveHealthReport], spec: &HealthSpec) {
    for d in drives {
        for x in &mut d.deltas {
            if spec.ignoring(&d.model, x.attribute).is_some() {
                x.ignored = true;
                x.flagged = false;
            }
        }
    }
}

/// `d`'s baseline, with each attribute's value in it for the attributes `spec` limits since
/// the baseline.
pub fn set_baseline(d: &mut DriveHealthReport, baseline: Baseline, spec: &HealthSpec) {
    for l in spec.limits.iter().filter(|l| l.since == Since::Baseline) {
        if let Some(x) = d
            .deltas
            .iter_mut()
            .find(|x| x.attribute == l.attribute.name)
        {
            x.baseline = l.attribute.of(&baseline.reading);
        }
    }
    d.baseline = Some(baseline);
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
        ignored: false,
        baseline: None,
        read_after: after.is_some(),
    })
}

/// What became of a flag by the drive's next reading (in its next run): the state a drive's
/// health history says it is in. Computed from the readings whenever the history is read;
/// nothing is stored, and nothing acknowledges a flag (a later issue's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlagState {
    /// The next reading cleared it: back to where it was before the run (an error counter no
    /// higher, spare no lower), or no critical warning or failed self-assessment any more.
    Transient,
    /// The next reading still shows it.
    Sticky,
    /// No reading of the attribute after it yet.
    Unconfirmed,
}

impl FlagState {
    pub fn word(self) -> &'static str {
        match self {
            FlagState::Transient => "transient",
            FlagState::Sticky => "sticky",
            FlagState::Unconfirmed => "unconfirmed",
        }
    }

    /// What a history says of it: "transient: cleared by the next reading".
    pub fn text(self) -> &'static str {
        match self {
            FlagState::Transient => "transient: cleared by the next reading",
            FlagState::Sticky => "sticky: the next reading still shows it",
            FlagState::Unconfirmed => "unconfirmed: not read again since",
        }
    }
}

/// The state of a flag on `a` raised over a run that began at `before`, given the drive's
/// next reading of it (`None`: none yet, or the drive did not report it then).
pub fn flag_state(a: &Attribute, before: Option<f64>, next: Option<f64>) -> FlagState {
    let Some(next) = next else {
        return FlagState::Unconfirmed;
    };
    let cleared = if matches!(a.name, "critical_warning" | "smart_failed") {
        // Raised whatever it was before: cleared when it is no longer raised.
        next == 0.0
    } else {
        match (a.worse, before) {
            (Worse::Up, Some(b)) => next <= b,
            (Worse::Down, Some(b)) => next >= b,
            _ => false,
        }
    };
    if cleared {
        FlagState::Transient
    } else {
        FlagState::Sticky
    }
}

/// `qualify: { health }` on every drive read before and after the run: a verdict per drive
/// and limit; what could not be judged (no reading, no second reading, an attribute the
/// drive does not report, or one ignored on its model, no baseline) is said in `not_judged`,
/// never a PASS.
pub fn judge(drives: &[DriveHealthReport], spec: &HealthSpec) -> (Vec<Verdict>, Vec<String>) {
    let (mut verdicts, mut not_judged) = (Vec::new(), Vec::new());
    if spec.limits.is_empty() {
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
        for l in &spec.limits {
            if let Some(i) = spec.ignoring(&d.model, l.attribute.name) {
                not_judged.push(format!(
                    "{}: {} not judged: {}",
                    d.drive(),
                    l.text(),
                    i.text()
                ));
                continue;
            }
            let delta = d.deltas.iter().find(|x| x.attribute == l.attribute.name);
            let (value, measured) = match delta {
                None => (None, None),
                Some(x) => judged_value(l, x, d.baseline.as_ref()),
            };
            let (Some(value), Some(measured)) = (value, measured) else {
                let why = if d.after.is_none() {
                    "no reading after the run"
                } else if l.since == Since::Baseline && d.baseline.is_none() {
                    "no baseline reading of the drive in the store"
                } else if l.since == Since::Baseline && delta.is_some() {
                    "its baseline reading does not report it"
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

/// The value `l` bounds in `x`, and how a verdict says it was measured ("0 → 2"; since the
/// baseline, "0 → 10 since baseline of 2026-12-06 11:00 UTC, drive-health (…) on rc66").
fn judged_value(
    l: &Limit,
    x: &HealthDelta,
    baseline: Option<&Baseline>,
) -> (Option<f64>, Option<String>) {
    let unit = l.attribute.unit;
    match (l.since, l.bound) {
        (Since::Baseline, _) => {
            let (Some(b), Some(a), Some(source)) = (x.baseline, x.after, baseline) else {
                return (None, None);
            };
            (
                Some(a - b),
                Some(format!(
                    "{} → {} since baseline of {}",
                    show(b, unit),
                    show(a, unit),
                    source.source()
                )),
            )
        }
        (Since::Run, Bound::MaxIncrease) => match (x.before, x.after) {
            (Some(b), Some(a)) => (
                Some(a - b),
                Some(format!("{} → {}", show(b, unit), show(a, unit))),
            ),
            _ => (None, None),
        },
        // The value after the run; temperature's highest reading of the run.
        (Since::Run, Bound::Max) => {
            let v = if l.attribute.name == "temperature" {
                x.max.filter(|_| x.read_after)
            } else {
                x.after
            };
            (v, v.map(|v| show(v, unit)))
        }
        (Since::Run, Bound::Min) => (x.after, x.after.map(|v| show(v, unit))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::health::attribute;
    use crate::spec::health::Ignore;
    use platter_proto::provenance::Provenance;

    fn spec(limits: &[Limit]) -> HealthSpec {
        HealthSpec {
            limits: limits.to_vec(),
            ignore: Vec::new(),
        }
    }

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
                since: Since::Run,
            },
            Limit {
                attribute: attribute("temperature").unwrap(),
                bound: Bound::Max,
                value: 70.0,
                since: Since::Run,
            },
            Limit {
                attribute: attribute("percentage_used").unwrap(),
                bound: Bound::MaxIncrease,
                value: 1.0,
                since: Since::Run,
            },
        ];
        let (v, not) = judge(&drives, &spec(&limits));
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
            since: Since::Run,
        };
        let (v, not) = judge(&drives, &spec(std::slice::from_ref(&limit)));
        assert!(v.is_empty());
        assert!(not[0].contains("health limits not judged: health not readable"));
        // No drive read at all (a campaign on tmpfs, an older agent): said, not a PASS.
        let (v, not) = judge(&[], &spec(&[limit]));
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

    fn ata(model: &str, realloc: u64, temp: i64, crc: u64) -> DriveHealth {
        DriveHealth {
            path: "/dev/sdc".into(),
            model: model.into(),
            serial: "K1".into(),
            reading: Some(HealthReading {
                reallocated_sectors: Some(realloc),
                temperature_c: Some(temp),
                crc_errors: Some(crc),
                ..HealthReading::default()
            }),
            ..DriveHealth::default()
        }
    }

    fn limit(name: &str, bound: Bound, value: f64, since: Since) -> Limit {
        Limit {
            attribute: attribute(name).unwrap(),
            bound,
            value,
            since,
        }
    }

    #[test]
    fn an_ignored_attribute_is_shown_as_ignored_and_never_flagged_nor_judged() {
        let mut drives = drives(&[
            snapshot("h", vec![ata("KINGSTON SA400S37240G", 0, 30, 0)]),
            snapshot("h", vec![ata("KINGSTON SA400S37240G", 0, 128, 9_000_000)]),
        ]);
        let spec = HealthSpec {
            limits: vec![
                limit("temperature", Bound::Max, 70.0, Since::Run),
                limit("crc_errors", Bound::MaxIncrease, 0.0, Since::Run),
                limit("reallocated_sectors", Bound::MaxIncrease, 0.0, Since::Run),
            ],
            ignore: vec![Ignore {
                model: "KINGSTON SA400*".into(),
                attributes: vec![
                    attribute("crc_errors").unwrap(),
                    attribute("temperature").unwrap(),
                ],
            }],
        };
        assert!(
            drives[0].flagged(),
            "crc_errors grew, before the ignore list"
        );
        ignore(&mut drives, &spec);
        let d = &drives[0];
        assert!(!d.flagged(), "{:?}", d.deltas);
        assert_eq!(
            d.readings_text(true),
            "reallocated_sectors 0; crc_errors 0 → 9000000 (+9000000) (ignored); \
             temperature 30°C → 128°C (ignored)"
        );
        let (v, not) = judge(&drives, &spec);
        let judged: Vec<&str> = v.iter().map(|v| v.threshold.as_str()).collect();
        assert_eq!(judged, ["health reallocated_sectors max_increase 0"]);
        assert_eq!(not.len(), 2, "{not:?}");
        assert!(
            not[0].ends_with(
                "health temperature max 70°C not judged: ignored for model KINGSTON SA400* (qualify.health.ignore)"
            ),
            "{not:?}"
        );
        // Another model is judged as ever.
        let mut other = super::drives(&[
            snapshot("h", vec![ata("KINGSTON SUV500", 0, 30, 0)]),
            snapshot("h", vec![ata("KINGSTON SUV500", 0, 128, 9)]),
        ]);
        ignore(&mut other, &spec);
        assert!(other[0].flagged());
        let (v, not) = judge(&other, &spec);
        assert_eq!(v.iter().filter(|v| !v.pass).count(), 2);
        assert!(not.is_empty());
    }

    #[test]
    fn a_limit_since_the_baseline_counts_from_the_drives_first_reading() {
        let mut drives = drives(&[
            snapshot("h", vec![ata("M", 8, 30, 0)]),
            snapshot("h", vec![ata("M", 10, 31, 0)]),
        ]);
        let spec = HealthSpec {
            limits: vec![
                limit("reallocated_sectors", Bound::MaxIncrease, 3.0, Since::Run),
                limit(
                    "reallocated_sectors",
                    Bound::MaxIncrease,
                    8.0,
                    Since::Baseline,
                ),
            ],
            ignore: Vec::new(),
        };
        // No baseline found: said, not judged.
        let (v, not) = judge(&drives, &spec);
        assert_eq!(v.len(), 1);
        assert!(
            not[0].ends_with(
                "health reallocated_sectors since baseline max_increase 8 not judged: no baseline reading of the drive in the store"
            ),
            "{not:?}"
        );
        let baseline = Baseline {
            campaign_id: "c1".into(),
            campaign: "burn-in".into(),
            host: "h".into(),
            submitted: "2026-12-01 09:00 UTC".into(),
            reading: HealthReading {
                reallocated_sectors: Some(0),
                ..HealthReading::default()
            },
        };
        set_baseline(&mut drives[0], baseline, &spec);
        let (v, not) = judge(&drives, &spec);
        assert!(not.is_empty(), "{not:?}");
        assert!(v[0].pass, "within the run: +2 ≤ 3");
        assert!(!v[1].pass, "since the baseline: +10 > 8");
        assert_eq!(v[1].value, Some(10.0));
        assert_eq!(
            v[1].threshold,
            "health reallocated_sectors since baseline max_increase 8"
        );
        assert_eq!(
            v[1].measured,
            "0 → 10 since baseline of 2026-12-01 09:00 UTC, burn-in (c1) on h"
        );
        assert!(
            drives[0].text().ends_with(
                "; since baseline (2026-12-01 09:00 UTC, burn-in (c1) on h): reallocated_sectors 0 → 10 (+10)"
            ),
            "{}",
            drives[0].text()
        );
    }

    #[test]
    fn a_flag_the_next_reading_clears_is_transient_and_one_that_stays_is_sticky() {
        let a = |n| attribute(n).unwrap();
        use FlagState::*;
        // (attribute, before the flagged run, next reading, state)
        let table = [
            ("pending_sectors", Some(0.0), Some(0.0), Transient),
            ("pending_sectors", Some(0.0), Some(3.0), Sticky),
            ("pending_sectors", Some(1.0), Some(1.0), Transient),
            ("media_errors", Some(0.0), Some(2.0), Sticky),
            ("media_errors", Some(0.0), Some(5.0), Sticky),
            ("available_spare", Some(100.0), Some(100.0), Transient),
            ("available_spare", Some(100.0), Some(99.0), Sticky),
            ("critical_warning", Some(0.0), Some(0.0), Transient),
            ("critical_warning", Some(1.0), Some(1.0), Sticky),
            ("critical_warning", None, Some(0.0), Transient),
            ("smart_failed", Some(0.0), Some(1.0), Sticky),
            ("media_errors", Some(0.0), None, Unconfirmed),
        ];
        for (name, before, next, want) in table {
            assert_eq!(
                flag_state(a(name), before, next),
                want,
                "{name} {before:?} → next {next:?}"
            );
        }
        assert_eq!(Transient.text(), "transient: cleared by the next reading");
        assert_eq!(
            serde_json::to_string(&Sticky).unwrap(),
            "\"sticky\"",
            "the word the JSON documents carry"
        );
    }
}
