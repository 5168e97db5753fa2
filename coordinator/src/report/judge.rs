//! Judgements on a report: comparisons of cells against a baseline (ratio and penalty
//! with a distribution-free interval, decided with Holm's correction over all the
//! report's comparisons) and qualification thresholds (PASS/FAIL per cell, device and
//! host). Pure functions of the cells and the campaign's `report:` settings.
//!
//! A name means one number everywhere: `latency.p99` (p50, p90, p99.9, max) is the
//! percentile of every operation of every repetition (the merged histograms) in
//! thresholds, pivots, comparisons and fleet outliers, as in the tables.

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

/// The merged per-operation value of `metric` (`latency.p99`, …) when it is one.
fn merged(cell: &CellReport, metric: &str) -> Option<f64> {
    cell.latency.as_ref().and_then(|l| l.get(metric))
}

/// The one number that stands for a cell's `metric`: the merged per-operation value
/// for merged latency names, else the median of the repetitions. With its unit.
fn cell_value(cell: &CellReport, metric: &str) -> Option<(f64, String)> {
    if super::MergedLatency::is_merged_name(metric) {
        return merged(cell, metric).map(|v| (v, "s".to_string()));
    }
    cell.metrics
        .iter()
        .find(|m| m.metric == metric)
        .map(|m| (m.stats.median, m.unit.clone()))
}

/// A comparison row with what the wire row has no room for: the interval's real
/// coverage and the test behind "significant".
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JudgedComparison {
    #[serde(flatten)]
    pub row: ComparisonRow,
    /// Coverage of `ci_pct` (0.968 for 5 + 5 runs, 0.90 for 3 + 3); None without one.
    pub ci_level: Option<f64>,
    /// Two-sided Mann–Whitney p; None for merged per-operation values (one per cell).
    pub p_value: Option<f64>,
    /// Holm's adjusted p over `family` comparisons: `significant` is `holm_p ≤ 0.05`.
    pub holm_p: Option<f64>,
    /// How many comparisons with a test the report made together.
    pub family: usize,
}

/// One comparison before the family is known.
struct Pending {
    row: ComparisonRow,
    label: String,
    test: Option<stats::Comparison>,
}

fn pending(
    row_of: impl FnOnce(f64, f64) -> ComparisonRow,
    base: &CellReport,
    cell: &CellReport,
    metric: &str,
    label: String,
) -> Option<Pending> {
    if super::MergedLatency::is_merged_name(metric) {
        // One value per cell over all its operations: a ratio, no interval.
        let (b, c) = (merged(base, metric)?, merged(cell, metric)?);
        if b <= 0.0 || !b.is_finite() || !c.is_finite() {
            return None;
        }
        let ratio = c / b;
        let mut row = row_of(ratio, (ratio - 1.0) * 100.0);
        row.text = format!(
            "{label} penalty {:.1}% ({metric} over all operations of all runs: one value per cell, no interval)",
            row.penalty_pct
        );
        return Some(Pending {
            row,
            label,
            test: None,
        });
    }
    let c = stats::compare(values(base, metric)?, values(cell, metric)?)?;
    let mut row = row_of(c.ratio, c.penalty_pct);
    row.ci_pct = c.ci_pct;
    Some(Pending {
        row,
        label,
        test: Some(c),
    })
}

/// Decides every comparison of a report together: Holm's correction over those with
/// a test, so that "significant" anywhere in the report is wrong with probability at
/// most 5% in all, not 5% each.
fn judge_family(pending: Vec<Pending>) -> Vec<JudgedComparison> {
    let ps: Vec<f64> = pending
        .iter()
        .filter_map(|p| p.test.as_ref().map(|t| t.p_value))
        .collect();
    let family = ps.len();
    let mut adjusted = stats::holm(&ps).into_iter();
    pending
        .into_iter()
        .map(|p| {
            let Pending {
                mut row,
                label,
                test,
            } = p;
            let Some(t) = test else {
                return JudgedComparison {
                    row,
                    ci_level: None,
                    p_value: None,
                    holm_p: None,
                    family,
                };
            };
            let holm_p = adjusted.next().unwrap_or(1.0);
            row.significant = t.significant && holm_p <= stats::ALPHA;
            row.text = t.describe(
                &label,
                Some(stats::Family {
                    adjusted_p: holm_p,
                    size: family,
                }),
            );
            JudgedComparison {
                row,
                ci_level: t.ci_level,
                p_value: Some(t.p_value),
                holm_p: Some(holm_p),
                family,
            }
        })
        .collect()
}

/// Each cell whose `key` differs from the baseline value, against the baseline cell that
/// shares everything else.
pub fn compare_cells(cells: &[CellReport], settings: &ReportSpec) -> Vec<JudgedComparison> {
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
        let label = format!("{}={} vs {}", b.key, candidate, b.value);
        let row_of = |ratio, penalty_pct| ComparisonRow {
            host: cell.host.clone(),
            context: ctx,
            key: b.key.clone(),
            baseline: b.value.clone(),
            candidate,
            metric: metric.to_string(),
            ratio,
            penalty_pct,
            ci_pct: None,
            significant: false,
            text: String::new(),
        };
        rows.extend(pending(row_of, base, cell, metric, label));
    }
    judge_family(rows)
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
    /// The unit of `value` (s, B, op/s …).
    pub unit: String,
    pub pass: bool,
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
                device: cell.params.get("device").cloned().unwrap_or_default(),
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
            });
        }
    }
    out
}

/// `report.pivot` computed: row labels × column labels of one statistic.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PivotTable {
    pub row_keys: Vec<String>,
    pub column_keys: Vec<String>,
    pub metric: String,
    pub stat: String,
    pub unit: String,
    /// Column labels (the column keys' values joined by spaces).
    pub columns: Vec<String>,
    /// Row labels (one per row key) and one value per column (None: no cell there).
    pub rows: Vec<(Vec<String>, Vec<Option<f64>>)>,
}

fn statistic(values: &mut [f64], stat: &str) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let q = match stat {
        "min" => 0.0,
        "max" => 1.0,
        "mean" => return Some(values.iter().sum::<f64>() / values.len() as f64),
        "median" => 0.5,
        p => p
            .strip_prefix('p')
            .and_then(|n| n.parse::<f64>().ok())
            .map(|x| x / 100.0)?,
    };
    // Linear interpolation between closest ranks (numpy's default; the median of an even
    // count is the mean of the middle two).
    let pos = q * (values.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    Some(values[lo] + (values[hi] - values[lo]) * (pos - lo as f64))
}

/// The value of a pivot key for a cell: `host`, a parameter, `device` or `device.FIELD`
/// (looked up in the inventory the agent last reported).
fn pivot_value(
    cell: &CellReport,
    key: &str,
    device_field: &dyn Fn(&str, &str, &str) -> Option<String>,
) -> String {
    match key {
        "host" => cell.host.clone(),
        k => match k.strip_prefix("device.") {
            Some(field) => {
                let name = cell.params.get("device").cloned().unwrap_or_default();
                device_field(&cell.host, &name, field).unwrap_or_else(|| "?".into())
            }
            None => cell.params.get(k).cloned().unwrap_or_else(|| "-".into()),
        },
    }
}

pub fn pivot(
    cells: &[CellReport],
    settings: &ReportSpec,
    device_field: &dyn Fn(&str, &str, &str) -> Option<String>,
) -> Option<PivotTable> {
    let p = settings.pivot.as_ref()?;
    let mut rows: indexmap::IndexMap<Vec<String>, indexmap::IndexMap<String, Vec<f64>>> =
        indexmap::IndexMap::new();
    let mut columns: Vec<String> = Vec::new();
    let mut unit = String::new();
    for cell in cells {
        // Merged latency names pool one value per cell (its percentile over all its
        // operations); other metrics pool every repetition.
        let cell_values: Vec<f64> = if super::MergedLatency::is_merged_name(&p.metric) {
            let Some(v) = merged(cell, &p.metric) else {
                continue;
            };
            unit = "s".into();
            vec![v]
        } else {
            let Some(m) = cell.metrics.iter().find(|m| m.metric == p.metric) else {
                continue;
            };
            unit = m.unit.clone();
            m.values.clone()
        };
        let row: Vec<String> = p
            .rows
            .iter()
            .map(|k| pivot_value(cell, &k.name, device_field))
            .collect();
        let col: Vec<String> = p
            .columns
            .iter()
            .map(|k| pivot_value(cell, &k.name, device_field))
            .collect();
        let col = col.join(" ");
        if !columns.contains(&col) {
            columns.push(col.clone());
        }
        rows.entry(row)
            .or_default()
            .entry(col)
            .or_default()
            .extend(cell_values);
    }
    Some(PivotTable {
        row_keys: p.rows.iter().map(|k| k.name.clone()).collect(),
        column_keys: p.columns.iter().map(|k| k.name.clone()).collect(),
        metric: p.metric.clone(),
        stat: p.stat.clone(),
        unit,
        rows: rows
            .into_iter()
            .map(|(labels, mut by_col)| {
                let values = columns
                    .iter()
                    .map(|c| by_col.get_mut(c).and_then(|v| statistic(v, &p.stat)))
                    .collect();
                (labels, values)
            })
            .collect(),
        columns,
    })
}

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
            .params
            .iter()
            .filter(|(k, _)| *k != "device")
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
                device: cell.params.get("device").cloned().unwrap_or_default(),
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

/// `platter compare A B`: every cell of `b` against the cell of `a` with the same host
/// and parameters (the same matrix run on another day or fleet), on `metric`, decided
/// together with Holm's correction (the verdict is in `significant` and `text`).
pub fn compare_campaigns(a: &super::Report, b: &super::Report, metric: &str) -> Vec<ComparisonRow> {
    let mut rows = Vec::new();
    for cell in &b.cells {
        let Some(base) = a
            .cells
            .iter()
            .find(|c| c.host == cell.host && c.params == cell.params)
        else {
            continue;
        };
        let label = format!("{} vs {}", b.campaign_id, a.campaign_id);
        let row_of = |ratio, penalty_pct| ComparisonRow {
            host: cell.host.clone(),
            context: context(cell, ""),
            key: "campaign".into(),
            baseline: a.campaign_id.clone(),
            candidate: b.campaign_id.clone(),
            metric: metric.to_string(),
            ratio,
            penalty_pct,
            ci_pct: None,
            significant: false,
            text: String::new(),
        };
        rows.extend(pending(row_of, base, cell, metric, label));
    }
    judge_family(rows).into_iter().map(|j| j.row).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{stats, MetricStats};
    use crate::spec::{Pivot, PivotKey};

    fn cell(
        host: &str,
        device: &str,
        cache: &str,
        size: &str,
        offset: &str,
        values: &[f64],
    ) -> CellReport {
        CellReport {
            cell_id: "0000000000000001".into(),
            host: host.into(),
            params: [
                ("device", device),
                ("write_cache", cache),
                ("size", size),
                ("offset", offset),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            metrics: vec![MetricStats {
                metric: "latency.mean".into(),
                unit: "s".into(),
                stats: stats::summarize(values).unwrap(),
                values: values.to_vec(),
                not_measured: 0,
                not_measured_reason: String::new(),
                samples: vec![],
            }],
            unmeasured: vec![],
            failed: 0,
            latency: None,
            warnings: vec![],
        }
    }

    fn key(name: &str) -> PivotKey {
        PivotKey {
            name: name.into(),
            line: 1,
            column: 1,
        }
    }

    #[test]
    fn seed_001_table_layout_min_over_offsets_and_repetitions() {
        // Two hosts, each with an Intel 520 or 530, write cache on; sizes as columns; the
        // best (min) of every repetition at offsets 0 and 512, as the seed's table shows.
        let mut cells = Vec::new();
        for (host, dev, base) in [("rcmonster", "sdb", 0.00044), ("rc66", "sdc", 0.0098)] {
            for (i, size) in ["1", "1024", "4096", "8192"].iter().enumerate() {
                let v = base * (1.0 + i as f64);
                cells.push(cell(host, dev, "on", size, "0", &[v * 1.1, v * 1.2]));
                cells.push(cell(host, dev, "on", size, "512", &[v, v * 1.3]));
            }
        }
        let models = |host: &str, dev: &str, field: &str| -> Option<String> {
            (field == "model").then(|| match (host, dev) {
                ("rcmonster", "sdb") => "INTEL SSDSC2CW120A3".to_string(),
                _ => "INTEL SSDSC2BW120A4".to_string(),
            })
        };
        let settings = ReportSpec {
            pivot: Some(Pivot {
                rows: vec![key("host"), key("device.model"), key("write_cache")],
                columns: vec![key("size")],
                metric: "latency.mean".into(),
                stat: "min".into(),
                line: 1,
                column: 1,
            }),
            ..ReportSpec::default()
        };
        let p = pivot(&cells, &settings, &models).unwrap();
        assert_eq!(p.columns, ["1", "1024", "4096", "8192"]);
        assert_eq!(p.rows.len(), 2);
        let (labels, values) = &p.rows[0];
        assert_eq!(labels, &["rcmonster", "INTEL SSDSC2CW120A3", "on"]);
        let want = [0.00044, 0.00088, 0.00132, 0.00176];
        for (got, want) in values.iter().zip(want) {
            assert!((got.unwrap() - want).abs() < 1e-12, "{got:?} vs {want}");
        }
        assert_eq!(p.rows[1].0[1], "INTEL SSDSC2BW120A4");
    }

    #[test]
    fn a_slow_drive_stands_out_in_its_fleet() {
        // Seed 001 in miniature: the same configuration on eight drives, one of them an
        // Intel 530 that takes 10 ms where the others take 0.2–1 ms.
        let medians = [
            0.00044, 0.00021, 0.0037, 0.00083, 0.0098, 0.0006, 0.0003, 0.0005,
        ];
        let cells: Vec<CellReport> = medians
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let mut c = cell(&format!("host{i}"), "sda", "on", "1", "0", &[*m, *m]);
                c.metrics[0].stats.median = *m;
                c
            })
            .collect();
        let settings = ReportSpec {
            metric: "latency.mean".into(),
            ..ReportSpec::default()
        };
        let flagged = fleet_outliers(&cells, &settings);
        let hosts: Vec<&str> = flagged.iter().map(|o| o.host.as_str()).collect();
        assert!(hosts.contains(&"host4"), "{flagged:?}");
        let slow = flagged.iter().find(|o| o.host == "host4").unwrap();
        assert!(slow.times_median > 10.0, "{slow:?}");
        assert_eq!(slow.group, "write_cache=on size=1 offset=0");
        // Drives that agree raise nothing.
        let calm: Vec<CellReport> = cells
            .iter()
            .filter(|c| c.host != "host4" && c.host != "host2")
            .cloned()
            .collect();
        assert!(fleet_outliers(&calm, &settings).is_empty());
    }

    #[test]
    fn statistics_of_a_slot() {
        let mut v = vec![4.0, 1.0, 3.0, 2.0];
        assert_eq!(statistic(&mut v, "min"), Some(1.0));
        assert_eq!(statistic(&mut v, "max"), Some(4.0));
        assert_eq!(statistic(&mut v, "median"), Some(2.5));
        assert_eq!(statistic(&mut v, "mean"), Some(2.5));
        assert_eq!(statistic(&mut v, "p50"), Some(2.5));
        assert_eq!(statistic(&mut [], "min"), None);
    }
}
