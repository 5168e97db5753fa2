//! Fleet outliers: a cell far from the other hosts' and drives' cells of the same
//! configuration.

use serde::Serialize;

use super::cell_value;
use crate::report::CellReport;
use crate::spec::ReportSpec;
use crate::stats;

/// A cell whose value (median, or merged per-operation latency) stands far from the
/// other hosts'/devices' for the same configuration: a robust score on the median
/// absolute deviation and at least 10% from the group's median.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetOutlier {
    pub host: String,
    pub device: String,
    /// The configuration the group shares (parameters other than `device`).
    pub group: String,
    pub metric: String,
    pub value: f64,
    pub unit: String,
    pub times_median: f64,
    pub score: f64,
}

/// Groups the cells that share every parameter except host and device, and flags those
/// whose median of `metric` is an outlier in its group (at least 3 cells).
pub fn fleet_outliers(cells: &[CellReport], settings: &ReportSpec) -> Vec<FleetOutlier> {
    let metric = if settings.metric.is_empty() {
        "wall"
    } else {
        settings.metric.as_str()
    };
    let mut groups: indexmap::IndexMap<String, Vec<(&CellReport, f64, String)>> =
        indexmap::IndexMap::new();
    for cell in cells {
        let Some((value, unit)) = cell_value(cell, metric) else {
            continue;
        };
        let group: Vec<String> = cell
            .configuration()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        groups
            .entry(group.join(" "))
            .or_default()
            .push((cell, value, unit));
    }
    let mut out = Vec::new();
    for (group, members) in groups {
        let medians: Vec<f64> = members.iter().map(|(_, v, _)| *v).collect();
        for o in stats::fleet_outliers(&medians, stats::OUTLIER_THRESHOLD) {
            let (cell, value, unit) = &members[o.index];
            out.push(FleetOutlier {
                host: cell.host.clone(),
                device: cell.device().unwrap_or_default().to_string(),
                group: group.clone(),
                metric: metric.to_string(),
                value: *value,
                unit: unit.clone(),
                times_median: o.times_median,
                score: o.score,
            });
        }
    }
    out
}
