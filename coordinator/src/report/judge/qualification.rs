//! Qualification: each threshold of `report: { qualify }` on each cell, PASS or FAIL.

use serde::Serialize;

use crate::report::CellReport;
use crate::spec::threshold::{Stat, Threshold};
use crate::spec::ReportSpec;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub host: String,
    /// The device parameter of the cell ("" without `devices:`).
    pub device: String,
    pub cell: String,
    pub threshold: String,
    /// The judged value in base units; None when the cell did not measure it.
    pub value: Option<f64>,
    /// The unit of `value` (s, B, op/s …).
    pub unit: String,
    pub pass: bool,
    /// What was measured, when a value and its unit do not say it (a health limit's
    /// "0 → 2"); "" otherwise.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub measured: String,
}

fn judged_value(cell: &CellReport, t: &Threshold) -> Option<f64> {
    let summary = |metric: &str| {
        cell.metrics
            .iter()
            .find(|m| m.metric == metric)
            .map(|m| &m.stats)
    };
    // `latency.pNN` and `latency.max`: over every operation of every run, the number
    // the report's `latency.pNN` row shows; never the median of per-run percentiles.
    if t.metric == "latency" {
        let q = match t.stat {
            Stat::Percentile(q) => Some(q),
            Stat::Max => Some(1.0),
            _ => None,
        };
        if let Some(q) = q {
            return cell.latency.as_ref().and_then(|l| l.at(q));
        }
    }
    match t.stat {
        Stat::Median => summary(&t.metric).map(|s| s.median),
        Stat::Mean => summary(&t.metric).map(|s| s.mean),
        Stat::Min => summary(&t.metric).map(|s| s.min),
        Stat::Max => summary(&t.metric).map(|s| s.max),
        // A percentile a tool reports per run (fio's `write.clat.p99`): the median of
        // the runs, as that metric's row shows it.
        Stat::Percentile(q) => {
            let name = format!(
                "{}.p{}",
                t.metric,
                format!("{:.3}", q * 100.0)
                    .trim_end_matches('0')
                    .trim_end_matches('.')
            );
            summary(&name).map(|s| s.median)
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
                device: cell.device().unwrap_or_default().to_string(),
                cell: label.join(" "),
                threshold: t.text.clone(),
                value,
                unit: cell
                    .metrics
                    .iter()
                    .find(|m| m.metric == t.metric)
                    .map(|m| m.unit.clone())
                    .unwrap_or_else(|| {
                        if t.metric == "latency" {
                            "s".into()
                        } else {
                            String::new()
                        }
                    }),
                pass: value.is_some_and(|v| t.op.holds(v, t.value)),
                measured: String::new(),
            });
        }
    }
    out
}
