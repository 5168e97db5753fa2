//! A series' history on the wire (`HistoryResponse.history`) and back.

use platter_proto::v1 as pb;

/// A series' history on the wire (`HistoryResponse.history`).
pub fn history_to_pb(h: &crate::report::history::History) -> pb::SeriesHistory {
    use crate::report::history::Flag;
    let interval = |c: Option<(f64, f64)>| c.map(|(lo, hi)| pb::Interval { lo, hi });
    pb::SeriesHistory {
        series: h.series.clone(),
        metric: h.metric.clone(),
        threshold_pct: h.threshold_pct,
        runs: h
            .runs
            .iter()
            .map(|r| pb::SeriesRun {
                campaign_id: r.campaign_id.clone(),
                submitted_unix_ms: r.submitted_unix_ms,
                labels: r.labels.clone().into_iter().collect(),
            })
            .collect(),
        left_out: h
            .left_out
            .iter()
            .map(|l| pb::SeriesLeftOut {
                campaign_id: l.campaign_id.clone(),
                why: l.why.clone(),
            })
            .collect(),
        lines: h
            .lines
            .iter()
            .map(|l| pb::SeriesLine {
                host: l.host.clone(),
                cell: l.cell.clone(),
                unit: l.unit.clone(),
                points: l
                    .points
                    .iter()
                    .map(|p| pb::SeriesPoint {
                        campaign_id: p.campaign_id.clone(),
                        n: p.n as u64,
                        median: p.median,
                        median_ci: interval(p.median_ci),
                        median_ci_level: p.median_ci_level,
                        since_previous: p.since_previous.as_ref().map(|s| pb::SeriesShift {
                            baseline: s.baseline.clone(),
                            change_pct: s.change_pct,
                            ci_pct: interval(s.ci_pct),
                            ci_level: s.ci_level,
                            holm_p: s.holm_p,
                            significant: s.significant,
                            flag: match s.flag {
                                Flag::None => pb::ShiftFlag::None,
                                Flag::Regression => pb::ShiftFlag::Regression,
                                Flag::Improvement => pb::ShiftFlag::Improvement,
                                Flag::Changed => pb::ShiftFlag::Changed,
                            } as i32,
                            changed: s.changed.clone(),
                            text: s.text.clone(),
                            not_compared: s.not_compared.clone(),
                            pooled: s.pooled.clone(),
                            spread: s.spread.as_ref().map(|r| pb::SeriesSpread {
                                runs: r.runs as u32,
                                level: r.level,
                                change_pct: r.change_pct,
                                ci_pct: interval(Some(r.ci_pct)),
                                ci_level: r.ci_level,
                                flag_ci_pct: interval(Some(r.flag_ci_pct)),
                                sd_pct: r.sd_pct,
                                p: r.p,
                            }),
                            estimate: s.estimate,
                        }),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// A series' history as a coordinator answered it: its message, or the JSON document of a
/// coordinator older than the message (COMPATIBILITY.md).
pub fn history_of(
    r: pb::HistoryResponse,
) -> Result<crate::report::history::History, serde_json::Error> {
    use crate::report::history::{Flag, History, LeftOut, Line, Point, Run, Since, Spread};
    let Some(h) = r.history else {
        let mut h: History = serde_json::from_str(&r.history_json)?;
        with_drift(&mut h);
        return Ok(h);
    };
    let interval = |c: Option<pb::Interval>| c.map(|i| (i.lo, i.hi));
    let mut h = History {
        series: h.series,
        metric: h.metric,
        threshold_pct: h.threshold_pct,
        runs: h
            .runs
            .into_iter()
            .map(|r| Run {
                campaign_id: r.campaign_id,
                submitted_unix_ms: r.submitted_unix_ms,
                labels: r.labels.into_iter().collect(),
            })
            .collect(),
        left_out: h
            .left_out
            .into_iter()
            .map(|l| LeftOut {
                campaign_id: l.campaign_id,
                why: l.why,
            })
            .collect(),
        lines: h
            .lines
            .into_iter()
            .map(|l| Line {
                host: l.host,
                cell: l.cell,
                unit: l.unit,
                points: l
                    .points
                    .into_iter()
                    .map(|p| Point {
                        campaign_id: p.campaign_id,
                        n: p.n as usize,
                        median: p.median,
                        median_ci: interval(p.median_ci),
                        median_ci_level: p.median_ci_level,
                        since_previous: p.since_previous.map(|s| Since {
                            flag: match pb::ShiftFlag::try_from(s.flag) {
                                Ok(pb::ShiftFlag::Regression) => Flag::Regression,
                                Ok(pb::ShiftFlag::Improvement) => Flag::Improvement,
                                Ok(pb::ShiftFlag::Changed) => Flag::Changed,
                                Ok(pb::ShiftFlag::None) => Flag::None,
                                // A flag a later coordinator added reads as a change.
                                Err(_) => Flag::Changed,
                            },
                            baseline: s.baseline,
                            change_pct: s.change_pct,
                            ci_pct: interval(s.ci_pct),
                            ci_level: s.ci_level,
                            holm_p: s.holm_p,
                            significant: s.significant,
                            changed: s.changed,
                            text: s.text,
                            not_compared: s.not_compared,
                            pooled: s.pooled,
                            estimate: s.estimate,
                            // Unset by a coordinator before it: `significant` and `flag`
                            // still carry its verdict.
                            spread: s.spread.and_then(|r| {
                                Some(Spread {
                                    runs: r.runs as usize,
                                    level: r.level,
                                    change_pct: r.change_pct,
                                    ci_pct: interval(r.ci_pct)?,
                                    ci_level: r.ci_level,
                                    flag_ci_pct: interval(r.flag_ci_pct)?,
                                    sd_pct: r.sd_pct,
                                    p: r.p,
                                })
                            }),
                        }),
                    })
                    .collect(),
                drift: Vec::new(),
            })
            .collect(),
    };
    with_drift(&mut h);
    Ok(h)
}

/// Each line's drift, which is not on the wire (nor in an older coordinator's JSON): a pure
/// function of its medians (`drift_of`), the same here as on the coordinator.
fn with_drift(h: &mut crate::report::history::History) {
    for i in 0..h.lines.len() {
        h.lines[i].drift = crate::report::history::drift_of(&h.lines[i], &h.runs, h.threshold_pct);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_reads_back_from_its_message_and_from_an_old_coordinators_json() {
        use crate::report::history::{Flag, History, LeftOut, Line, Point, Run, Since, Spread};
        let since = |flag, ci: Option<(f64, f64)>, not_compared: Option<&str>| Since {
            baseline: "c-1".into(),
            change_pct: 10.5,
            ci_pct: ci,
            ci_level: ci.map(|_| 0.95),
            holm_p: Some(0.01),
            significant: ci.is_some(),
            flag,
            changed: vec!["kernel: 6.1.0 → 6.12.1".into()],
            text: "slower".into(),
            not_compared: not_compared.map(str::to_string),
            pooled: vec!["c-0".into()],
            estimate: not_compared.is_some(),
            spread: ci.map(|(lo, hi)| Spread {
                runs: 4,
                level: 0.05,
                change_pct: 10.0,
                ci_pct: (lo, hi),
                ci_level: 0.95,
                flag_ci_pct: (lo - 1.0, hi + 1.0),
                sd_pct: 1.5,
                p: 0.001,
            }),
        };
        let point = |id: &str, since_previous| Point {
            campaign_id: id.into(),
            n: 7,
            median: 0.05,
            median_ci: Some((0.049, 0.051)),
            median_ci_level: Some(0.98),
            since_previous,
        };
        let h = History {
            series: "nightly".into(),
            metric: "wall".into(),
            threshold_pct: 3.0,
            runs: vec![Run {
                campaign_id: "c-1".into(),
                submitted_unix_ms: 1_700_000_000_000,
                labels: [("fired_by".to_string(), "schedule".to_string())].into(),
            }],
            left_out: vec![LeftOut {
                campaign_id: "c-3".into(),
                why: "still running".into(),
            }],
            lines: vec![Line {
                host: "rc66".into(),
                cell: "bs=4k".into(),
                unit: "s".into(),
                points: vec![
                    point("c-1", None),
                    point(
                        "c-2",
                        Some(since(Flag::Regression, Some((8.0, 12.0)), None)),
                    ),
                    point(
                        "c-3",
                        Some(since(Flag::Improvement, None, Some("another drive"))),
                    ),
                    point("c-4", Some(since(Flag::Changed, None, None))),
                    point("c-5", Some(since(Flag::None, None, None))),
                ],
                drift: Vec::new(),
            }],
        };
        let answer = pb::HistoryResponse {
            history_json: String::new(),
            until_id: String::new(),
            history: Some(history_to_pb(&h)),
        };
        assert_eq!(history_of(answer).unwrap(), h);
        let old = pb::HistoryResponse {
            history_json: serde_json::to_string(&h).unwrap(),
            until_id: String::new(),
            history: None,
        };
        assert_eq!(history_of(old).unwrap(), h);
        let mut later = history_to_pb(&h);
        later.lines[0].points[4]
            .since_previous
            .as_mut()
            .unwrap()
            .flag = 9;
        let read = history_of(pb::HistoryResponse {
            history: Some(later),
            ..Default::default()
        })
        .unwrap();
        let flag = read.lines[0].points[4]
            .since_previous
            .as_ref()
            .unwrap()
            .flag;
        assert_eq!(flag, Flag::Changed, "a flag this build does not know");
    }
}
