//! Steady state in the report (`prepare.steady_state`, issue 48): each drive's tracked
//! value round by round, judged by the same rule that decided the rounds
//! (`planning::steady::judge`), and the rounds its cells' results are taken from — the
//! steady window, or, when there is none, the last `window` rounds, said plainly.

use std::collections::HashMap;

use serde::Serialize;

use crate::planning::planner;
use crate::planning::steady::{self, Steady};
use crate::spec::{Campaign, SteadyRule};
use crate::store::db::Conn;
use crate::store::rounds;
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

/// Every drive's rounds, with the cells (`cells.n`) each drive's rounds decide for.
pub fn load(
    c: &Conn,
    campaign_id: &CampaignId,
    campaign: &Campaign,
) -> Result<(Vec<DriveRounds>, HashMap<i64, usize>)> {
    let Some(s) = campaign
        .prepare
        .as_ref()
        .and_then(|p| p.steady_state.as_ref())
    else {
        return Ok(Default::default());
    };
    let mut drives = Vec::new();
    let mut of_cell = HashMap::new();
    for host in rounds::campaign_hosts(c, campaign_id)? {
        let stored = rounds::host_cells(c, campaign_id, &host)?;
        let cells: Vec<planner::PlannedCell> = stored.iter().map(|s| s.cell.clone()).collect();
        for (_, of_drive) in planner::drives(&cells) {
            let Some(&tracked) = of_drive.iter().find(|&&k| cells[k].point == s.tracked) else {
                continue;
            };
            let values = rounds::round_values(c, campaign_id, stored[tracked].n, &s.metric)?;
            let d = judged(&values, &s.rule);
            let cell = &cells[tracked];
            for &k in &of_drive {
                of_cell.insert(stored[k].n, drives.len());
            }
            drives.push(DriveRounds {
                host: host.to_string(),
                device: cell
                    .params
                    .get(crate::spec::DEVICE)
                    .cloned()
                    .unwrap_or_default(),
                metric: s.metric.clone(),
                tracked: cell
                    .params
                    .iter()
                    .filter(|(k, _)| *k != crate::spec::DEVICE)
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                values: values.iter().map(|v| v.is_finite().then_some(*v)).collect(),
                rule: s.rule,
                ..d
            });
        }
    }
    Ok((drives, of_cell))
}

/// The rule's verdict on `values` as the report shows it (host, device and names left
/// empty).
fn judged(values: &[f64], rule: &SteadyRule) -> DriveRounds {
    let n = values.len();
    let (steady, ended, window) = match steady::judge(values, rule) {
        Steady::Reached(w) => (true, true, Some(w)),
        Steady::NotReached { latest, .. } => (false, true, latest),
        Steady::Continue { latest } => (false, false, latest),
    };
    let (first, last) = match &window {
        Some(w) => (w.first, w.last),
        None => ((n + 1).saturating_sub(rule.window).max(1), n),
    };
    DriveRounds {
        host: String::new(),
        device: String::new(),
        metric: String::new(),
        tracked: String::new(),
        values: Vec::new(),
        steady,
        ended,
        first,
        last,
        average: window.map(|w| w.average),
        range_pct: window.map(|w| w.range_pct),
        excursion_pct: window.map(|w| w.excursion_pct),
        rule: *rule,
    }
}

/// What state each prepared drive was measured in (`prepare:`), one line per drive: its
/// purge (how, when, and that a discard is no PTS purge), its fill (bytes, time,
/// bandwidth), the bytes the measurements wrote since, and its steady state.
pub fn drive_states(
    c: &Conn,
    campaign_id: &CampaignId,
    campaign: &Campaign,
    rounds: &[DriveRounds],
) -> Result<Vec<String>> {
    let Some(prepare) = &campaign.prepare else {
        return Ok(Vec::new());
    };
    let steps = rounds::preparation_steps(c, campaign_id)?;
    let mut out = Vec::new();
    for host in rounds::campaign_hosts(c, campaign_id)? {
        let stored = rounds::host_cells(c, campaign_id, &host)?;
        let cells: Vec<planner::PlannedCell> = stored.iter().map(|s| s.cell.clone()).collect();
        for (_, of_drive) in planner::drives(&cells) {
            let ns: Vec<i64> = of_drive.iter().map(|&k| stored[k].n).collect();
            let device = cells[of_drive[0]]
                .params
                .get(crate::spec::DEVICE)
                .cloned()
                .unwrap_or_default();
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
                        utc(s.finished_unix_ns)
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
    }
    Ok(out)
}

/// `2026-12-06 09:10:05 UTC`.
fn utc(unix_ns: i64) -> String {
    chrono::DateTime::from_timestamp(unix_ns.div_euclid(1_000_000_000), 0)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| "an unknown time".into())
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

    #[test]
    fn the_window_counts_and_the_words_say_which_rounds() {
        let d = judged(&[3.0, 2.0, 1.0, 1.0, 1.01, 0.99], &RULE);
        assert!(d.steady && d.ended);
        assert_eq!((d.first, d.last), (4, 6));
        assert!(!d.counts(3) && d.counts(4) && d.counts(6));
        let d = DriveRounds {
            metric: "wall".into(),
            values: vec![Some(1.0); 6],
            ..d
        };
        assert!(
            d.describe()
                .starts_with("steady state in rounds 4–6 of wall (range 2.0%"),
            "{}",
            d.describe()
        );
    }

    #[test]
    fn without_steady_state_the_last_window_counts_and_says_so() {
        let drift = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5];
        let d = DriveRounds {
            values: drift.iter().map(|v| Some(*v)).collect(),
            ..judged(&drift, &RULE)
        };
        assert!(!d.steady && d.ended);
        assert_eq!((d.first, d.last), (4, 6));
        assert!(
            d.describe()
                .starts_with("no steady state after 6 rounds: results from the last 3 rounds, 4–6"),
            "{}",
            d.describe()
        );
        // Still running: not yet judged, and said so.
        let d = judged(&drift[..2], &RULE);
        assert!(!d.ended && !d.steady);
        assert_eq!((d.first, d.last), (1, 2));
    }
}
