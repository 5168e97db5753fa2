//! What a done campaign raises as flags (`store::flags`), and which live flags its runs show
//! fixed: its qualification FAILs, its drives' health flags, and — for a run of a series —
//! the regressions of its run against the one before (`history`), each with its evidence and
//! a link to it. Every number is one the report or the history already printed; nothing is
//! judged here again.
//!
//! A flag's evidence key names its subject and, where the evidence is a run range, where
//! the range starts: a regression is keyed by the run it appeared in, so the same step is
//! one flag however often it is looked at, and a false positive is never raised again for
//! it. A FAIL or a health flag is keyed by its subject alone (series, host, drive, limit):
//! failing again night after night refreshes one flag rather than raising one a night, and
//! a later run that passes fixes it.

use serde_json::json;

use super::history::{DriftKind, Flag as Shift, History, Line};
use super::{human, Report};
use crate::store::flags::{flag_id, Fixed, FlagFilter, FlagKind, NewFlag, Severity};
use crate::store::{Result, Store};

/// How many runs of a series a campaign's flags look back over.
const WINDOW: usize = 30;

/// What a campaign's checks found: flags to raise, live flags fixed.
#[derive(Default)]
struct Found {
    raised: Vec<NewFlag>,
    fixed: Vec<Fixed>,
}

/// The flags `campaign` raises and the live flags it shows fixed.
pub fn of_campaign(store: &Store, campaign: &str) -> Result<(Vec<NewFlag>, Vec<Fixed>)> {
    let report = Report::load(store, campaign)?;
    let series = store
        .series_of(&report.campaign_id)?
        .unwrap_or_else(|| report.name.clone());
    let mut found = Found::default();
    qualification(&report, &series, &mut found);
    health(&report, &series, &mut found);
    regressions(store, &report, &series, &mut found)?;
    peer_outliers(store, &report, &series, &mut found)?;
    Ok((found.raised, found.fixed))
}

/// The console's page of a campaign's evidence.
fn campaign_link(id: &str) -> String {
    format!("/campaigns/{id}")
}

fn qualification(report: &Report, series: &str, found: &mut Found) {
    for v in &report.verdicts {
        let key = format!(
            "qualification|{series}|{}|{}|{}|{}",
            v.host, v.device, v.cell, v.threshold
        );
        let measured = match (&v.measured, v.value) {
            (m, _) if !m.is_empty() => m.clone(),
            (_, Some(value)) => human(value, &v.unit),
            (_, None) => "not measured".into(),
        };
        if v.pass {
            found.fixed.push(Fixed {
                flag_id: flag_id(&key),
                note: format!("passes in run {}: {measured}", report.campaign_id),
            });
            continue;
        }
        found.raised.push(NewFlag {
            kind: FlagKind::Qualification,
            severity: Severity::Critical,
            evidence_key: key,
            series: series.to_string(),
            host: v.host.clone(),
            model: String::new(),
            drive: v.device.clone(),
            metric: v.threshold.clone(),
            cell: v.cell.clone(),
            campaign_id: report.campaign_id.clone(),
            summary: format!(
                "FAIL {}: {} {} on {} ({})",
                series, v.threshold, measured, v.host, v.cell
            ),
            evidence: json!({ "campaign": report.campaign_id, "verdict": v }),
            link: campaign_link(&report.campaign_id),
        });
    }
}

fn health(report: &Report, series: &str, found: &mut Found) {
    for d in &report.health {
        let drive = if d.serial.is_empty() {
            format!("{}:{}", d.host, d.path)
        } else {
            format!("{} {}", d.model, d.serial)
        };
        for delta in &d.deltas {
            if delta.ignored {
                continue;
            }
            let key = format!("health|{drive}|{}", delta.attribute);
            if !delta.flagged {
                // Read after the run and not worse: what flagged it before is gone.
                if delta.read_after {
                    found.fixed.push(Fixed {
                        flag_id: flag_id(&key),
                        note: format!(
                            "not flagged in run {}: {}",
                            report.campaign_id,
                            delta.text()
                        ),
                    });
                }
                continue;
            }
            found.raised.push(NewFlag {
                kind: FlagKind::Health,
                severity: Severity::Warning,
                evidence_key: key,
                series: series.to_string(),
                host: d.host.clone(),
                model: d.model.clone(),
                drive: drive.clone(),
                metric: delta.attribute.to_string(),
                cell: String::new(),
                campaign_id: report.campaign_id.clone(),
                summary: format!("health of {drive} on {}: {}", d.host, delta.text()),
                evidence: json!({
                    "campaign": report.campaign_id,
                    "path": d.path,
                    "serial": d.serial,
                    "attribute": delta.attribute,
                    "before": delta.before,
                    "after": delta.after,
                    "max": delta.max,
                    "baseline": delta.baseline,
                }),
                link: campaign_link(&report.campaign_id),
            });
        }
    }
}

/// The metric a series' flags are of: the one a run's "since the last run" section shows
/// (`history::SinceLastRun`), wall when the cells have it, else their first.
fn series_metric(report: &Report) -> Option<String> {
    if report
        .cells
        .iter()
        .any(|c| c.metrics.iter().any(|m| m.metric == "wall"))
    {
        return Some("wall".into());
    }
    report
        .cells
        .iter()
        .find_map(|c| c.metrics.first())
        .map(|m| m.metric.clone())
}

fn regressions(store: &Store, report: &Report, series: &str, found: &mut Found) -> Result<()> {
    let Some(metric) = series_metric(report) else {
        return Ok(());
    };
    let history = History::load(
        store,
        series,
        &metric,
        None,
        None,
        Some(WINDOW),
        Some(&report.campaign_id),
    )?;
    if history.runs.len() < 2 {
        return Ok(());
    }
    let threshold = history.threshold_pct;
    for (line, point) in history.latest_flags() {
        let Some(since) = &point.since_previous else {
            continue;
        };
        // An improvement is a finding, not an alarm.
        if since.flag == Shift::Improvement {
            continue;
        }
        let before = line
            .points
            .iter()
            .rev()
            .nth(1)
            .map(|p| p.median)
            .unwrap_or(f64::NAN);
        let changed = if since.changed.is_empty() {
            "nothing recorded changed on the host".to_string()
        } else {
            format!("changed: {}", since.changed.join("; "))
        };
        found.raised.push(NewFlag {
            summary: format!(
                "{} {series} on {}{}: {metric} {} → {}, {}; {changed}",
                since.flag.word(),
                line.host,
                if line.cell.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", line.cell)
                },
                human(before, &line.unit),
                human(point.median, &line.unit),
                since.shift_text(),
            ),
            evidence: json!({
                "runs": [since.baseline, point.campaign_id],
                "before": before,
                "after": point.median,
                "unit": line.unit,
                "threshold_pct": threshold,
                "since": since,
            }),
            link: campaign_link(&report.campaign_id),
            ..of_line(
                FlagKind::Regression,
                format!(
                    "regression|{series}|{}|{}|{metric}|{}",
                    line.host, line.cell, point.campaign_id
                ),
                series,
                line,
                &metric,
                report,
            )
        });
    }
    let live = store.flags(&FlagFilter {
        series: Some(series.to_string()),
        ..FlagFilter::default()
    })?;
    // A drift of the series (`history`'s steps and ramps over its runs) past the threshold:
    // keyed by where it starts, so a ramp that goes on is one flag brought up to date. A
    // step already flagged run to run at its own run is that regression, not another flag.
    for (line, d) in history.drift_flags() {
        if d.flag == Shift::Improvement {
            continue;
        }
        let step_flagged = d.kind == DriftKind::Step
            && line.points.iter().any(|p| {
                p.campaign_id == d.first_campaign
                    && p.since_previous
                        .as_ref()
                        .is_some_and(|s| s.flag != Shift::None)
            });
        if step_flagged {
            continue;
        }
        let kind = match d.kind {
            DriftKind::Step => "step",
            DriftKind::Ramp => "ramp",
        };
        let mut key = format!(
            "drift|{series}|{}|{}|{metric}|{kind}|{}",
            line.host, line.cell, d.first_campaign
        );
        // A ramp's start is estimated again as runs arrive and may move by a run or two:
        // a live ramp flag of the same line is the same finding, brought up to date.
        if d.kind == DriftKind::Ramp {
            if let Some(same) = live.iter().find(|f| {
                f.kind == FlagKind::Drift
                    && f.state.is_live()
                    && f.host == line.host
                    && f.cell == line.cell
                    && f.metric == metric
                    && f.evidence["drift"]["kind"] == "ramp"
            }) {
                if let Some(k) = same.evidence["key"].as_str() {
                    key = k.to_string();
                }
            }
        }
        found.raised.push(NewFlag {
            summary: format!(
                "DRIFT {series} on {}{}: {metric} {} from {}",
                line.host,
                if line.cell.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", line.cell)
                },
                d.text(),
                human(d.baseline, &line.unit),
            ),
            evidence: json!({
                "key": key,
                "runs": [d.first_campaign, d.last_campaign],
                "before": d.baseline,
                "unit": line.unit,
                "threshold_pct": threshold,
                "drift": d,
            }),
            link: format!("/series/{series}"),
            ..of_line(FlagKind::Drift, key.clone(), series, line, &metric, report)
        });
    }
    // A live regression or drift of this series is fixed once its line's latest run is back
    // within the threshold of the value before it.
    for f in live.iter().filter(|f| {
        f.state.is_live()
            && f.metric == metric
            && matches!(f.kind, FlagKind::Regression | FlagKind::Drift)
    }) {
        let Some(before) = f.evidence.get("before").and_then(|v| v.as_f64()) else {
            continue;
        };
        let Some(line) = history
            .lines
            .iter()
            .find(|l| l.host == f.host && l.cell == f.cell)
        else {
            continue;
        };
        let Some(latest) = line
            .points
            .last()
            .filter(|p| p.campaign_id == report.campaign_id && p.campaign_id != f.campaign_id)
        else {
            continue;
        };
        let off_pct = (latest.median / before - 1.0) * 100.0;
        if off_pct.abs() < threshold {
            found.fixed.push(Fixed {
                flag_id: f.id.clone(),
                note: format!(
                    "run {} is back within {threshold}%: {} against {} before ({off_pct:+.1}%)",
                    report.campaign_id,
                    human(latest.median, &line.unit),
                    human(before, &line.unit),
                ),
            });
        }
    }
    Ok(())
}

/// Each drive this campaign measured, judged again among its identical peers
/// (`report::peers`, whatever campaign measured them): an outlier is flagged, keyed by the
/// drive and what it was measured on; a drive judged and not an outlier fixes its flag.
fn peer_outliers(store: &Store, report: &Report, series: &str, found: &mut Found) -> Result<()> {
    super::peers::index(store)?;
    let measured = store.campaign_drives(&report.campaign_id)?;
    let mut models: Vec<&str> = measured.iter().map(|(m, _)| m.as_str()).collect();
    models.dedup();
    for model in models.into_iter().filter(|m| !m.is_empty()) {
        let peers = super::peers::peers(
            store,
            &super::peers::Ask {
                model: model.to_string(),
                ..Default::default()
            },
        )?;
        for group in &peers.groups {
            for d in &group.drives {
                if !measured.iter().any(|(m, id)| m == model && *id == d.drive) {
                    continue;
                }
                let key = format!(
                    "peer|{}|{}|{}|{}|{}",
                    d.drive, group.firmware, group.metric, group.configuration, group.workload
                );
                if d.standing.is_none() {
                    continue;
                }
                if !d.outlier {
                    found.fixed.push(Fixed {
                        flag_id: flag_id(&key),
                        note: format!(
                            "after run {} it stands {} among {} peers",
                            report.campaign_id,
                            d.standing_text(),
                            group.drives.len() - 1
                        ),
                    });
                    continue;
                }
                found.raised.push(NewFlag {
                    kind: FlagKind::Peer,
                    severity: Severity::Warning,
                    evidence_key: key,
                    series: series.to_string(),
                    host: d.hosts.last().cloned().unwrap_or_default(),
                    model: model.to_string(),
                    drive: d.drive.clone(),
                    metric: group.metric.clone(),
                    cell: group.configuration.clone(),
                    campaign_id: report.campaign_id.clone(),
                    summary: format!(
                        "{model} {} is slower than its {} peers on {} {}: {}",
                        d.drive,
                        group.drives.len() - 1,
                        group.metric,
                        group.configuration,
                        d.standing_text()
                    ),
                    evidence: json!({ "campaign": report.campaign_id, "drive": d, "group": {
                        "firmware": group.firmware,
                        "metric": group.metric,
                        "configuration": group.configuration,
                        "median": group.median,
                        "unit": group.unit,
                        "drives": group.drives.len(),
                    }}),
                    link: format!(
                        "/models/{}",
                        percent_encoding::utf8_percent_encode(
                            model,
                            percent_encoding::NON_ALPHANUMERIC
                        )
                    ),
                });
            }
        }
    }
    Ok(())
}

/// A warning about a line of a series, raised by `report`'s run: its subject filled in, its
/// words, evidence and link left for the caller.
fn of_line(
    kind: FlagKind,
    evidence_key: String,
    series: &str,
    line: &Line,
    metric: &str,
    report: &Report,
) -> NewFlag {
    NewFlag {
        kind,
        severity: Severity::Warning,
        evidence_key,
        series: series.to_string(),
        host: line.host.clone(),
        model: String::new(),
        drive: String::new(),
        metric: metric.to_string(),
        cell: line.cell.clone(),
        campaign_id: report.campaign_id.clone(),
        summary: String::new(),
        evidence: serde_json::Value::Null,
        link: String::new(),
    }
}
