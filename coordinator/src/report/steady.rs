//! Steady state in the report (`prepare.steady_state`, issue 48): each drive's tracked
//! value round by round, judged by the same rule that decided the rounds
//! (`planning::steady::judge`), and the rounds its cells' results are taken from — the
//! steady window, or, when there is none, the last `window` rounds, said plainly.

use std::collections::HashMap;

use serde::Serialize;

use crate::planning::steady::{self, Steady};
use crate::report::ledger;
use crate::spec::{Campaign, SteadyRule};
use crate::store::db::Conn;
use crate::store::rounds::{self, StoredDrive};
use crate::store::Result;
use platter_proto::model::CampaignId;

/// One drive's rounds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DriveRounds {
    pub host: String,
    /// The drive's name (`loop3`, `nvme1n1`).
    pub device: String,
    /// The tracked metric and cell (`bs=4k rw=randwrite`).
    pub metric: String,
    pub tracked: String,
    /// The tracked value per round, from round 1; `None` for a round without one.
    pub values: Vec<Option<f64>>,
    /// Whether the rounds reached steady state (false while they still run).
    pub steady: bool,
    /// Whether the rounds have ended (steady, or `max_rounds` ran).
    pub ended: bool,
    /// The rounds its results are taken from, from 1: the steady window, else the last
    /// `window` rounds.
    pub first: usize,
    pub last: usize,
    /// The counted rounds' average, range and least-squares excursion (percent of the
    /// average), when they have one.
    pub average: Option<f64>,
    pub range_pct: Option<f64>,
    pub excursion_pct: Option<f64>,
    /// The counted rounds' least-squares slope, per round.
    pub slope_per_round: Option<f64>,
    #[serde(skip)]
    pub rule: SteadyRule,
}

impl DriveRounds {
    /// "steady state in rounds 4–8 (range 3.1%, slope 1.2% of the average; asked at most
    /// 20%, 10%)", "no steady state after 25 rounds (…)", or how far it has come.
    pub fn describe(&self) -> String {
        let measured = match (self.range_pct, self.excursion_pct) {
            (Some(r), Some(e)) => format!(
                "range {r:.1}%, slope {e:.1}% of the average; asked at most {}%, {}%",
                self.rule.range_pct, self.rule.slope_pct
            ),
            _ => "no value in some of its rounds".into(),
        };
        let rounds = self.values.len();
        if self.steady {
            format!(
                "steady state in rounds {}–{} of {} ({measured})",
                self.first, self.last, self.metric
            )
        } else if self.ended {
            format!(
                "no steady state after {rounds} rounds: results from the last {} rounds, {}–{} ({measured})",
                self.last + 1 - self.first,
                self.first,
                self.last
            )
        } else {
            format!(
                "not yet steady after {rounds} round(s) of at most {}",
                self.rule.max_rounds
            )
        }
    }

    /// Whether round `round` (from 1) counts as a result.
    pub fn counts(&self, round: u32) -> bool {
        (self.first..=self.last).contains(&(round as usize))
    }
}

/// A verdict on a drive that reached no steady state is not judged, never a PASS: its
/// numbers are of a drive in no defined state.
pub fn not_judged(verdicts: &mut [crate::report::judge::Verdict], rounds: &[DriveRounds]) {
    for v in verdicts {
        let unsteady = rounds
            .iter()
            .find(|d| d.host == v.host && d.device == v.device && !d.steady);
        if let Some(d) = unsteady {
            v.pass = false;
            v.measured = if d.ended {
                format!(
                    "not judged: no steady state after {} rounds",
                    d.values.len()
                )
            } else {
                "not judged: not yet at steady state".into()
            };
        }
    }
}

/// A comparison with a side on a drive whose rounds have no steady state says so: its
/// ratio is between drives in different states, or one in none.
pub fn mark_comparisons(
    comparisons: &mut [crate::report::judge::JudgedComparison],
    cells: &[crate::report::CellReport],
    rounds: &[DriveRounds],
) {
    let unsteady = |cell_id: &str| {
        let cell = cells.iter().find(|c| c.cell_id == cell_id)?;
        rounds
            .iter()
            .find(|d| !d.steady && d.host == cell.host && Some(d.device.as_str()) == cell.device())
    };
    for c in comparisons {
        let Some(pair) = &c.cells else {
            continue;
        };
        let sides: Vec<String> = [("candidate", &pair.candidate), ("baseline", &pair.baseline)]
            .into_iter()
            .filter_map(|(side, id)| {
                let d = unsteady(id)?;
                Some(format!(
                    "the {side}'s drive ({} {}) is not at steady state",
                    d.host, d.device
                ))
            })
            .collect();
        if !sides.is_empty() {
            c.row.text.push_str(&format!("; {}", sides.join(", ")));
        }
    }
}

/// Every drive's rounds (of `drives`, `store::rounds::campaign_drives`), with the drive
/// each cell (`cells.n`) belongs to.
pub fn load(
    c: &Conn,
    campaign_id: &CampaignId,
    campaign: &Campaign,
    drives: &[StoredDrive],
) -> Result<(Vec<DriveRounds>, HashMap<i64, usize>)> {
    let Some(s) = campaign.steady_state() else {
        return Ok(Default::default());
    };
    let mut out = Vec::new();
    let mut of_cell = HashMap::new();
    for drive in drives {
        let Some(tracked) = drive.at(s.tracked) else {
            continue;
        };
        let values = rounds::round_values(c, campaign_id, tracked.n, &s.metric)?;
        of_cell.extend(drive.cells.iter().map(|k| (k.n, out.len())));
        let names = Names {
            host: drive.host.to_string(),
            device: drive.name().to_string(),
            metric: s.metric.clone(),
            tracked: tracked
                .cell
                .params
                .iter()
                .filter(|(k, _)| *k != crate::spec::DEVICE)
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" "),
        };
        out.push(DriveRounds::judged(names, &values, s.rule));
    }
    Ok((out, of_cell))
}

/// Whose rounds they are: a drive's host and name, and what is tracked on it.
pub(crate) struct Names {
    pub host: String,
    pub device: String,
    pub metric: String,
    /// The tracked cell's configuration (`bs=4k mix=0`).
    pub tracked: String,
}

impl DriveRounds {
    /// The rule's verdict on the drive's values (per round, NaN where none), as the
    /// report counts its rounds: the steady window, else the last `window` rounds.
    pub(crate) fn judged(names: Names, values: &[f64], rule: SteadyRule) -> DriveRounds {
        let n = values.len();
        let (steady, ended, window) = match steady::judge(values, &rule) {
            Steady::Reached(w) => (true, true, Some(w)),
            Steady::NotReached { latest, .. } => (false, true, latest),
            Steady::Continue { latest } => (false, false, latest),
        };
        let (first, last) = match &window {
            Some(w) => (w.first, w.last),
            None => ((n + 1).saturating_sub(rule.window).max(1), n),
        };
        DriveRounds {
            host: names.host,
            device: names.device,
            metric: names.metric,
            tracked: names.tracked,
            values: values.iter().map(|v| v.is_finite().then_some(*v)).collect(),
            steady,
            ended,
            first,
            last,
            average: window.map(|w| w.average),
            range_pct: window.map(|w| w.range_pct),
            excursion_pct: window.map(|w| w.excursion_pct),
            slope_per_round: window.map(|w| w.slope),
            rule,
        }
    }
}

/// What state each prepared drive was measured in (`prepare:`), one line per drive: its
/// purge (how, when, and that a discard is no PTS purge), its fill (bytes, time,
/// bandwidth), the bytes the measurements wrote since, and its steady state.
pub fn drive_states(
    c: &Conn,
    campaign_id: &CampaignId,
    campaign: &Campaign,
    drives: &[StoredDrive],
    rounds: &[DriveRounds],
) -> Result<Vec<String>> {
    let Some(prepare) = &campaign.prepare else {
        return Ok(Vec::new());
    };
    let steps = rounds::preparation_steps(c, campaign_id)?;
    let mut out = Vec::new();
    for drive in drives {
        let (host, device) = (&drive.host, drive.name());
        let ns: Vec<i64> = drive.cells.iter().map(|k| k.n).collect();
        let mut parts = Vec::new();
        let of = |kind: &str| {
            steps
                .iter()
                .rfind(|s| s.kind == kind && ns.contains(&s.cell))
        };
        if let Some(method) = prepare.purge {
            let pts = if method.is_pts_purge() {
                ""
            } else {
                " (not a PTS purge: the drive may keep blocks mapped)"
            };
            parts.push(match of("purge") {
                Some(s) if s.succeeded => format!(
                    "purged with {}{pts} at {}",
                    method.name(),
                    ledger::utc(s.finished_unix_ns.div_euclid(1_000_000))
                ),
                Some(s) => format!("purge with {} failed: {}", method.name(), s.error),
                None => format!("not purged ({} did not run)", method.name()),
            });
        }
        if let Some(p) = prepare.precondition {
            parts.push(match of("precondition") {
                Some(s) if s.succeeded => {
                    let value = |m: &str| {
                        s.samples
                            .iter()
                            .find(|(name, _)| name == m)
                            .map(|(_, v)| *v)
                    };
                    match (value("precondition.bytes"), value("precondition.seconds")) {
                        (Some(bytes), Some(secs)) => format!(
                            "preconditioned: {} written ({}× in {} KiB writes) in {}, {}/s",
                            crate::report::human(bytes, "B"),
                            p.passes,
                            p.block_size >> 10,
                            crate::report::human(secs, "s"),
                            crate::report::human(bytes / secs.max(1e-9), "B"),
                        ),
                        _ => "preconditioned (its bytes and time were not recorded)".into(),
                    }
                }
                Some(s) => format!("precondition failed: {}", s.error),
                None => "not preconditioned (the fill did not run)".into(),
            });
        }
        let written = rounds::bytes_written(c, campaign_id, &ns)?;
        parts.push(format!(
            "the measurements wrote {} to it since",
            crate::report::human(written, "B")
        ));
        if let Some(r) = rounds
            .iter()
            .find(|r| r.host == host.as_str() && r.device == device)
        {
            parts.push(r.describe());
        }
        out.push(format!("{host} {device}: {}", parts.join("; ")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: SteadyRule = SteadyRule {
        window: 3,
        range_pct: 20.0,
        slope_pct: 10.0,
        max_rounds: 6,
    };

    fn rounds_of(values: &[f64]) -> DriveRounds {
        let names = Names {
            host: "rc66".into(),
            device: "sdb".into(),
            metric: "wall".into(),
            tracked: "bs=4k".into(),
        };
        DriveRounds::judged(names, values, RULE)
    }

    #[test]
    fn the_window_counts_and_the_words_say_which_rounds() {
        let values = [3.0, 2.0, 1.0, 1.0, 1.01, 0.99];
        let d = rounds_of(&values);
        assert!(d.steady && d.ended);
        assert_eq!((d.first, d.last), (4, 6));
        assert!(!d.counts(3) && d.counts(4) && d.counts(6));
        assert!(
            d.describe()
                .starts_with("steady state in rounds 4–6 of wall (range 2.0%"),
            "{}",
            d.describe()
        );
    }

    #[test]
    fn a_comparison_with_a_drive_at_no_steady_state_says_so() {
        use crate::report::{CellReport, MetricStats};
        use crate::spec::{Baseline, ReportSpec, DEVICE};
        let cell = |id: &str, device: &str, v: f64| {
            CellReport::for_test(
                id.into(),
                "rc66",
                &[(DEVICE, device), ("bs", "4k")],
                vec![MetricStats::of_values(
                    "wall",
                    "s",
                    &[v, v * 1.01, v * 0.99, v, v * 1.02],
                )],
            )
        };
        let cells = vec![cell("c1", "sdb", 1.0), cell("c2", "sdc", 2.0)];
        let settings = ReportSpec {
            baseline: Some(Baseline {
                key: DEVICE.into(),
                value: "sdb".into(),
                line: 1,
                column: 1,
            }),
            metric: "wall".into(),
            ..ReportSpec::default()
        };
        let steady_sdb = DriveRounds {
            device: "sdb".into(),
            ..rounds_of(&[1.0, 1.0, 1.0])
        };
        let drifting_sdc = DriveRounds {
            device: "sdc".into(),
            ..rounds_of(&[1.0, 1.1, 1.2, 1.3, 1.4, 1.5])
        };
        let mut comparisons = crate::report::judge::compare_cells(&cells, &settings);
        assert_eq!(comparisons.len(), 1);
        let before = comparisons[0].row.text.clone();
        mark_comparisons(
            &mut comparisons,
            &cells,
            &[steady_sdb.clone(), drifting_sdc],
        );
        assert_eq!(
            comparisons[0].row.text,
            format!("{before}; the candidate's drive (rc66 sdc) is not at steady state")
        );
        // Both steady: nothing added.
        let mut comparisons = crate::report::judge::compare_cells(&cells, &settings);
        let sdc = DriveRounds {
            device: "sdc".into(),
            ..steady_sdb.clone()
        };
        mark_comparisons(&mut comparisons, &cells, &[steady_sdb, sdc]);
        assert_eq!(comparisons[0].row.text, before);
    }

    #[test]
    fn without_steady_state_the_last_window_counts_and_says_so() {
        let drift = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5];
        let d = rounds_of(&drift);
        assert!(!d.steady && d.ended);
        assert_eq!((d.first, d.last), (4, 6));
        assert!(
            d.describe()
                .starts_with("no steady state after 6 rounds: results from the last 3 rounds, 4–6"),
            "{}",
            d.describe()
        );
        // Still running: not yet judged, and said so.
        let d = rounds_of(&drift[..2]);
        assert!(!d.ended && !d.steady);
        assert_eq!((d.first, d.last), (1, 2));
    }
}
