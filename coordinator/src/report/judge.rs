//! Judgements on a report: comparisons of cells against a baseline (ratio and penalty
//! with a bootstrap interval) and qualification thresholds (PASS/FAIL per cell, device
//! and host). Pure functions of the cells and the campaign's `report:` settings.

use serde::Serialize;

use super::stats;
use super::CellReport;
use crate::spec::threshold::{Stat, Threshold};
use crate::spec::ReportSpec;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparisonRow {
    pub host: String,
    /// The cell's parameters other than the baseline key: what both cells share.
    pub context: String,
    pub key: String,
    pub baseline: String,
    pub candidate: String,
    pub metric: String,
    pub ratio: f64,
    pub penalty_pct: f64,
    pub ci_pct: Option<(f64, f64)>,
    pub significant: bool,
    pub text: String,
}

fn key_of(cell: &CellReport, key: &str) -> Option<String> {
    match key {
        "host" => Some(cell.host.clone()),
        k => cell.params.get(k).cloned(),
    }
}

/// Everything that identifies a cell except `key`.
fn context(cell: &CellReport, key: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    if key != "host" {
        parts.push(cell.host.clone());
    }
    parts.extend(
        cell.params
            .iter()
            .filter(|(k, _)| *k != key)
            .map(|(k, v)| format!("{k}={v}")),
    );
    parts.join(" ")
}

fn values<'a>(cell: &'a CellReport, metric: &str) -> Option<&'a [f64]> {
    cell.metrics
        .iter()
        .find(|m| m.metric == metric)
        .map(|m| m.values.as_slice())
}

/// Each cell whose `key` differs from the baseline value, against the baseline cell that
/// shares everything else.
pub fn compare_cells(cells: &[CellReport], settings: &ReportSpec) -> Vec<ComparisonRow> {
    let Some(b) = &settings.baseline else {
        return Vec::new();
    };
    let metric = if settings.metric.is_empty() {
        "wall"
    } else {
        settings.metric.as_str()
    };
    let mut rows = Vec::new();
    for cell in cells {
        let Some(candidate) = key_of(cell, &b.key).filter(|v| *v != b.value) else {
            continue;
        };
        let ctx = context(cell, &b.key);
        // The baseline cell on the same host (and device) that shares the most other
        // parameters: all of them in a full matrix; fewer when `include` ties a parameter
        // to the compared one (e.g. `s: 0.13` only with `variant: slower`).
        let shared = |c: &CellReport| {
            cell.params
                .iter()
                .filter(|(k, v)| **k != b.key && c.params.get(*k) == Some(*v))
                .count()
        };
        let Some(base) = cells
            .iter()
            .filter(|c| key_of(c, &b.key).as_deref() == Some(b.value.as_str()))
            .filter(|c| b.key == "host" || c.host == cell.host)
            .filter(|c| b.key == "device" || c.params.get("device") == cell.params.get("device"))
            .max_by_key(|c| shared(c))
        else {
            continue;
        };
        let (Some(bv), Some(cv)) = (values(base, metric), values(cell, metric)) else {
            continue;
        };
        let seed = u64::from_str_radix(cell.cell_id.get(..16).unwrap_or("0"), 16).unwrap_or(7);
        let Some(c) = stats::compare(bv, cv, seed) else {
            continue;
        };
        let label = format!("{}={} vs {}", b.key, candidate, b.value);
        rows.push(ComparisonRow {
            host: cell.host.clone(),
            context: ctx,
            key: b.key.clone(),
            baseline: b.value.clone(),
            candidate,
            metric: metric.to_string(),
            ratio: c.ratio,
            penalty_pct: c.penalty_pct,
            ci_pct: c.ci_pct,
            significant: c.significant,
            text: c.describe(&label),
        });
    }
    rows
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub host: String,
    /// The device parameter of the cell ("" without `devices:`).
    pub device: String,
    pub cell: String,
    pub threshold: String,
    /// The judged value in base units; None when the cell did not measure it.
    pub value: Option<f64>,
    pub pass: bool,
}

fn judged_value(cell: &CellReport, t: &Threshold) -> Option<f64> {
    let summary = |metric: &str| {
        cell.metrics
            .iter()
            .find(|m| m.metric == metric)
            .map(|m| &m.stats)
    };
    match t.stat {
        Stat::Median => summary(&t.metric).map(|s| s.median),
        Stat::Mean => summary(&t.metric).map(|s| s.mean),
        Stat::Min => summary(&t.metric).map(|s| s.min),
        Stat::Max => summary(&t.metric).map(|s| s.max),
        Stat::Percentile(q) => {
            let merged = (t.metric == "latency")
                .then(|| cell.latency.as_ref().and_then(|l| l.at(q)))
                .flatten();
            merged.or_else(|| {
                let name = format!(
                    "{}.p{}",
                    t.metric,
                    format!("{:.3}", q * 100.0)
                        .trim_end_matches('0')
                        .trim_end_matches('.')
                );
                summary(&name).map(|s| s.median)
            })
        }
    }
}

/// Every threshold on every cell.
pub fn qualify(cells: &[CellReport], settings: &ReportSpec) -> Vec<Verdict> {
    let mut out = Vec::new();
    for cell in cells {
        let label: Vec<String> = cell
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        for t in &settings.qualify {
            let value = judged_value(cell, t);
            out.push(Verdict {
                host: cell.host.clone(),
                device: cell.params.get("device").cloned().unwrap_or_default(),
                cell: label.join(" "),
                threshold: t.text.clone(),
                value,
                pass: value.is_some_and(|v| t.op.holds(v, t.value)),
            });
        }
    }
    out
}
