//! Fleet outliers within one campaign: a cell that stands apart from the other hosts' and
//! drives' cells of the same configuration, judged as `platter peers` judges a drive among
//! its peers (`stats::peers`: the Hodges–Lehmann shift of its repetitions against the rest
//! of the group's, Holm over the group at 1%), so a report has one kind of outlier and its
//! mark agrees with its interval. A cell is an outlier when it is significant **and** at
//! least `qualify: { peers: { max_slower } }` (else `stats::OUTLIER_MIN_RELATIVE_DEVIATION`,
//! 10%) from the rest, either way.

use serde::Serialize;

use crate::report::CellReport;
use crate::spec::ReportSpec;
use crate::stats;

/// The configuration a cell's fleet group shares: "bs=4k sync=none" (its parameters but
/// the device).
pub fn group_of(cell: &CellReport) -> String {
    let group: Vec<String> = cell
        .configuration()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    group.join(" ")
}

/// A cell whose repetitions stand apart from the rest of its configuration's cells.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetOutlier {
    pub host: String,
    pub device: String,
    /// The configuration the group shares (parameters other than `device`).
    pub group: String,
    pub metric: String,
    /// The cell's median.
    pub value: f64,
    pub unit: String,
    /// The cell's values over the rest of the group's (Hodges–Lehmann), with its interval
    /// at `level` (its Holm step's) and the Holm-adjusted p.
    pub ratio: f64,
    pub ci: (f64, f64),
    pub level: f64,
    pub p_holm: f64,
}

/// Groups the cells that share every parameter except host and device, and judges each
/// cell of a group of at least 3 on `metric`'s repetitions (a merged latency percentile has
/// none per repetition, so it is not judged here).
pub fn fleet_outliers(cells: &[CellReport], settings: &ReportSpec) -> Vec<FleetOutlier> {
    let metric = if settings.metric.is_empty() {
        "wall"
    } else {
        settings.metric.as_str()
    };
    // `qualify: { peers: { max_slower } }`, else 10%.
    let floor = settings
        .peers_max_slower
        .map_or(stats::OUTLIER_MIN_RELATIVE_DEVIATION, |p| p / 100.0);
    let mut groups: indexmap::IndexMap<String, Vec<&CellReport>> = indexmap::IndexMap::new();
    for cell in cells {
        if !cell
            .metrics
            .iter()
            .any(|m| m.metric == metric && !m.values.is_empty())
        {
            continue;
        }
        groups.entry(group_of(cell)).or_default().push(cell);
    }
    let mut out = Vec::new();
    for (group, members) in groups {
        if members.len() < 3 {
            continue;
        }
        let of = |c: &CellReport| c.metrics.iter().find(|m| m.metric == metric).cloned();
        let values: Vec<Vec<f64>> = members
            .iter()
            .map(|c| of(c).map(|m| m.values).unwrap_or_default())
            .collect();
        for (i, s) in stats::peers::standings(&values).into_iter().enumerate() {
            let Some(s) = s else { continue };
            let apart = (s.ratio - 1.0).abs() >= floor && (1.0 / s.ratio - 1.0).abs() >= floor;
            if !(s.significant && apart) {
                continue;
            }
            let cell = members[i];
            let Some(m) = of(cell) else { continue };
            out.push(FleetOutlier {
                host: cell.host.clone(),
                device: cell.device().unwrap_or_default().to_string(),
                group: group.clone(),
                metric: metric.to_string(),
                value: m.stats.median,
                unit: m.unit,
                ratio: s.ratio,
                ci: s.ci,
                level: s.level,
                p_holm: s.p_holm,
            });
        }
    }
    out
}
