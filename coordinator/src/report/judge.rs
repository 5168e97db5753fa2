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
    /// NaN (null in JSON) when no comparison was made (see `JudgedComparison::compared`).
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

/// Everything that identifies a cell except `key` (and except `device` when the compared
/// cells' devices have different names: the comparison's label names both then).
fn context(cell: &CellReport, key: &str, same_device: bool) -> String {
    let mut parts: Vec<String> = Vec::new();
    if key != "host" {
        parts.push(cell.host.clone());
    }
    parts.extend(
        cell.params
            .iter()
            .filter(|(k, _)| *k != key && (same_device || *k != "device"))
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
    /// False when no comparison could be made: the cell has no counterpart, or one side
    /// has no usable values of the metric. `text` says which; the numbers are NaN.
    pub compared: bool,
    /// The candidate cell and the baseline cell it was compared with (ids), when both
    /// exist: what the side-by-side view and the findings take this comparison's numbers by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cells: Option<ComparedCells>,
}

/// The two cells of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparedCells {
    pub candidate: String,
    pub baseline: String,
}

/// A cell that a comparison found no counterpart for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnmatchedCell {
    pub host: String,
    pub params: indexmap::IndexMap<String, String>,
}

impl UnmatchedCell {
    fn of(cell: &CellReport) -> UnmatchedCell {
        UnmatchedCell {
            host: cell.host.clone(),
            params: cell.params.clone(),
        }
    }

    /// "rc66 bs=4k sync=none".
    pub fn describe(&self) -> String {
        let mut parts = vec![self.host.clone()];
        parts.extend(self.params.iter().map(|(k, v)| format!("{k}={v}")));
        parts.join(" ")
    }
}

/// One comparison before the family is known.
struct Pending {
    row: ComparisonRow,
    label: String,
    test: Option<stats::Comparison>,
    compared: bool,
    cells: Option<ComparedCells>,
}

/// A row that stands for a comparison not made, with the reason in its text.
fn not_compared(row_of: impl FnOnce(f64, f64) -> ComparisonRow, text: String) -> Pending {
    let mut row = row_of(f64::NAN, f64::NAN);
    row.text = text;
    Pending {
        row,
        label: String::new(),
        test: None,
        compared: false,
        cells: None,
    }
}

impl ComparedCells {
    fn of(candidate: &CellReport, baseline: &CellReport) -> ComparedCells {
        ComparedCells {
            candidate: candidate.cell_id.clone(),
            baseline: baseline.cell_id.clone(),
        }
    }
}

/// The comparison of `cell` with `base` on `metric`; a row saying so when either has no
/// usable values of it.
fn pending(
    row_of: impl FnOnce(f64, f64) -> ComparisonRow,
    base: &CellReport,
    cell: &CellReport,
    metric: &str,
    label: String,
) -> Pending {
    let missing = |row_of, what: &str| {
        not_compared(
            row_of,
            format!("{label}: not compared: {what} of {metric} on both sides"),
        )
    };
    if super::MergedLatency::is_merged_name(metric) {
        // One value per cell over all its operations: a ratio, no interval.
        let (Some(b), Some(c)) = (merged(base, metric), merged(cell, metric)) else {
            return missing(row_of, "no merged per-operation value");
        };
        if b <= 0.0 || !b.is_finite() || !c.is_finite() {
            return missing(row_of, "no positive finite value");
        }
        let ratio = c / b;
        let mut row = row_of(ratio, (ratio - 1.0) * 100.0);
        row.text = format!(
            "{label} penalty {:.1}% ({metric} over all operations of all runs: one value per cell, no interval)",
            row.penalty_pct
        );
        return Pending {
            row,
            label,
            test: None,
            compared: true,
            cells: Some(ComparedCells::of(cell, base)),
        };
    }
    let Some(c) = values(base, metric)
        .zip(values(cell, metric))
        .and_then(|(b, c)| stats::compare(b, c))
    else {
        return missing(row_of, "no positive values");
    };
    let mut row = row_of(c.ratio, c.penalty_pct);
    row.ci_pct = c.ci_pct;
    Pending {
        row,
        label,
        test: Some(c),
        compared: true,
        cells: Some(ComparedCells::of(cell, base)),
    }
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
                compared,
                cells,
            } = p;
            let Some(t) = test else {
                return JudgedComparison {
                    row,
                    ci_level: None,
                    p_value: None,
                    holm_p: None,
                    family,
                    compared,
                    cells,
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
                compared,
                cells,
            }
        })
        .collect()
}

/// The device names of `host`'s cells in plan order: the planner makes a host's cells
/// device by device, in the order the host's selected devices were found, and reports
/// read them in that order.
fn devices_of<'a>(cells: &'a [CellReport], host: &str) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for c in cells.iter().filter(|c| c.host == host) {
        if let Some(d) = c.params.get("device") {
            if !out.contains(&d.as_str()) {
                out.push(d);
            }
        }
    }
    out
}

/// For each device of a host, the baseline host's device its cells are compared with: the
/// one of the same name when the baseline host has it; otherwise the one at the same
/// position among the devices that have no namesake on the other host (loop3, loop4 on
/// one host against sdb, sdc on another). A device left over has no counterpart.
fn pair_devices<'a>(devices: &[&'a str], base: &[&'a str]) -> Vec<(&'a str, &'a str)> {
    let mut pairs: Vec<(&str, &str)> = devices
        .iter()
        .filter(|d| base.contains(d))
        .map(|d| (*d, *d))
        .collect();
    let rest = devices.iter().filter(|d| !base.contains(d));
    let base_rest = base.iter().filter(|d| !devices.contains(d));
    pairs.extend(rest.zip(base_rest).map(|(d, b)| (*d, *b)));
    pairs
}

/// `host` and, when the cell has one, its device: "rcmonster sdc".
fn host_device(cell: &CellReport) -> String {
    match cell.params.get("device") {
        Some(d) => format!("{} {d}", cell.host),
        None => cell.host.clone(),
    }
}

/// Whether two cells share every parameter except `device`.
fn same_but_device(a: &CellReport, b: &CellReport) -> bool {
    let rest = |c: &CellReport| {
        c.params
            .iter()
            .filter(|(k, _)| *k != "device")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
    };
    let (mut x, mut y) = (rest(a), rest(b));
    x.sort();
    y.sort();
    x == y
}

/// Each cell whose `key` differs from the baseline value, against the baseline cell that
/// shares everything else. A baseline by `host` compares the same cell on each host:
/// same parameters, devices paired by name or else by position ([`pair_devices`]). A
/// cell without a counterpart (and, by host, a baseline cell no cell of another host was
/// compared with) is a row with `compared: false` that says so — never left out.
pub fn compare_cells(cells: &[CellReport], settings: &ReportSpec) -> Vec<JudgedComparison> {
    let Some(b) = &settings.baseline else {
        return Vec::new();
    };
    let metric = if settings.metric.is_empty() {
        "wall"
    } else {
        settings.metric.as_str()
    };
    let by_host = b.key == "host";
    let base_devices = devices_of(cells, &b.value);
    // By host: for each other host, its device pairs and the baseline cells compared.
    let mut pairings: indexmap::IndexMap<&str, Vec<(&str, &str)>> = indexmap::IndexMap::new();
    let mut used: std::collections::HashSet<(&str, usize)> = std::collections::HashSet::new();
    let mut rows = Vec::new();
    for cell in cells {
        let Some(candidate) = key_of(cell, &b.key).filter(|v| *v != b.value) else {
            continue;
        };
        let row_of = |ctx: String| {
            let candidate = candidate.clone();
            move |ratio, penalty_pct| ComparisonRow {
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
            }
        };
        let base = if by_host {
            let pairs = pairings
                .entry(cell.host.as_str())
                .or_insert_with(|| pair_devices(&devices_of(cells, &cell.host), &base_devices));
            let device = cell.params.get("device").map(String::as_str);
            let base_device = match device {
                Some(d) => pairs.iter().find(|p| p.0 == d).map(|p| Some(p.1)),
                None => Some(None),
            };
            base_device.and_then(|bd| {
                cells.iter().enumerate().find(|(_, c)| {
                    c.host == b.value
                        && c.params.get("device").map(String::as_str) == bd
                        && same_but_device(c, cell)
                })
            })
        } else {
            // The baseline cell on the same host (and device) that shares the most other
            // parameters: all of them in a full matrix; fewer when `include` ties a
            // parameter to the compared one (e.g. `s: 0.13` only with `variant: slower`).
            let shared = |c: &CellReport| {
                cell.params
                    .iter()
                    .filter(|(k, v)| **k != b.key && c.params.get(*k) == Some(*v))
                    .count()
            };
            cells
                .iter()
                .enumerate()
                .filter(|(_, c)| key_of(c, &b.key).as_deref() == Some(b.value.as_str()))
                .filter(|(_, c)| c.host == cell.host)
                .filter(|(_, c)| {
                    b.key == "device" || c.params.get("device") == cell.params.get("device")
                })
                .max_by_key(|(_, c)| shared(c))
        };
        let Some((i, base)) = base else {
            let text = if by_host {
                format!(
                    "{}: no cell on {} to compare with",
                    host_device(cell),
                    b.value
                )
            } else {
                format!(
                    "{}={candidate}: no cell with {}={} on {} to compare with",
                    b.key,
                    b.key,
                    b.value,
                    host_device(cell)
                )
            };
            rows.push(not_compared(row_of(context(cell, &b.key, true)), text));
            continue;
        };
        used.insert((cell.host.as_str(), i));
        let same_device = base.params.get("device") == cell.params.get("device");
        let label = if by_host && !same_device {
            format!("host={} vs {}", host_device(cell), host_device(base))
        } else {
            format!("{}={} vs {}", b.key, candidate, b.value)
        };
        let row_of = row_of(context(cell, &b.key, same_device));
        rows.push(pending(row_of, base, cell, metric, label));
    }
    // By host: the baseline's cells that some other host has no counterpart for.
    for (host, _) in &pairings {
        for (i, base) in cells.iter().enumerate() {
            if base.host != b.value || used.contains(&(*host, i)) {
                continue;
            }
            let row_of = |ratio, penalty_pct| ComparisonRow {
                host: base.host.clone(),
                context: context(base, &b.key, true),
                key: b.key.clone(),
                baseline: b.value.clone(),
                candidate: host.to_string(),
                metric: metric.to_string(),
                ratio,
                penalty_pct,
                ci_pct: None,
                significant: false,
                text: String::new(),
            };
            let text = format!("{}: no cell on {host} compared with it", host_device(base));
            rows.push(not_compared(row_of, text));
        }
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
    /// The unit of every value, when the pivot shows one metric; empty otherwise.
    pub unit: String,
    /// With several metrics laid out by columns: each column's unit.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub column_units: Vec<String>,
    /// With several metrics laid out by rows: each row's unit.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub row_units: Vec<String>,
    /// Slots whose cells have the metric but no value in any run, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<PivotMissing>,
    /// Column labels (the column keys' values joined by spaces).
    pub columns: Vec<String>,
    /// Row labels (one per row key) and one value per column (None: no cell there).
    pub rows: Vec<(Vec<String>, Vec<Option<f64>>)>,
}

/// A pivot slot some of whose runs came back without a value: the tool could not
/// measure it (bonnie++'s `+++++`); the value, if any, rests on the others.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PivotMissing {
    pub row: usize,
    pub column: usize,
    pub measured: usize,
    pub runs: usize,
    pub reason: String,
}

impl PivotTable {
    /// A slot's text: its value, with how many runs it rests on when some could not be
    /// measured; without a value, why (or `-`: no cell there).
    pub fn slot_text(&self, row: usize, column: usize, value: Option<String>) -> String {
        let missing = self
            .missing
            .iter()
            .find(|m| m.row == row && m.column == column);
        match (value, missing) {
            (Some(v), None) => v,
            (Some(v), Some(m)) => format!(
                "{v} ({} of {} runs; {} {})",
                m.measured,
                m.runs,
                m.runs - m.measured,
                m.reason
            ),
            (None, Some(m)) => m.reason.clone(),
            (None, None) => "-".into(),
        }
    }

    /// The unit of the value in row `row`, column `column`.
    pub fn unit_at(&self, row: usize, column: usize) -> &str {
        self.row_units
            .get(row)
            .or(self.column_units.get(column))
            .unwrap_or(&self.unit)
    }
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
    let metrics = p.all_metrics();
    // Row labels → column label → (the slot's metric, its values, runs without a value).
    type Slots = indexmap::IndexMap<String, (String, Vec<f64>, u32)>;
    let mut rows: indexmap::IndexMap<Vec<String>, Slots> = indexmap::IndexMap::new();
    let mut columns: Vec<String> = Vec::new();
    let mut units: indexmap::IndexMap<String, String> = indexmap::IndexMap::new();
    // With `metric` among the column keys, each column holds one metric.
    let mut col_metric: std::collections::HashMap<String, String> = Default::default();
    // Why a metric has no value at all in some cell (bonnie++'s `+++++`).
    let mut why: std::collections::HashMap<String, String> = Default::default();
    for cell in cells {
        for metric in &metrics {
            // Merged latency names pool one value per cell (its percentile over all its
            // operations); other metrics pool every repetition.
            let mut unmeasured = 0;
            let cell_values: Vec<f64> = if super::MergedLatency::is_merged_name(metric) {
                let Some(v) = merged(cell, metric) else {
                    continue;
                };
                units.insert(metric.clone(), "s".into());
                vec![v]
            } else {
                match cell.metrics.iter().find(|m| &m.metric == metric) {
                    Some(m) => {
                        units.insert(metric.clone(), m.unit.clone());
                        if m.not_measured > 0 {
                            why.insert(metric.clone(), m.not_measured_reason.clone());
                        }
                        unmeasured = m.not_measured;
                        m.values.clone()
                    }
                    // Every run of it came back without a value: the slot says why.
                    None => match cell.unmeasured.iter().find(|u| &u.metric == metric) {
                        Some(u) => {
                            why.insert(metric.clone(), u.reason.clone());
                            unmeasured = u.count;
                            Vec::new()
                        }
                        None => continue,
                    },
                }
            };
            let value = |k: &String| match k.as_str() {
                "metric" => metric.clone(),
                k => pivot_value(cell, k, device_field),
            };
            let row: Vec<String> = p.rows.iter().map(|k| value(&k.name)).collect();
            let col: Vec<String> = p.columns.iter().map(|k| value(&k.name)).collect();
            let col = col.join(" ");
            if !columns.contains(&col) {
                columns.push(col.clone());
            }
            col_metric.insert(col.clone(), metric.clone());
            let slot = rows
                .entry(row)
                .or_default()
                .entry(col)
                .or_insert_with(|| (metric.clone(), Vec::new(), 0));
            slot.1.extend(cell_values);
            slot.2 += unmeasured;
        }
    }
    // The metrics in the order they were listed, whatever cell first had each: a key's
    // labels keep their first-seen order, the metric varies fastest.
    let order =
        |keys: &[crate::spec::PivotKey], label: &[String]| -> Option<(Vec<String>, usize)> {
            let i = keys.iter().position(|k| k.name == "metric")?;
            let mut rest = label.to_vec();
            let m = rest.remove(i);
            Some((
                rest,
                metrics.iter().position(|x| *x == m).unwrap_or(usize::MAX),
            ))
        };
    if p.rows.iter().any(|k| k.name == "metric") {
        let mut seen: Vec<Vec<String>> = Vec::new();
        for labels in rows.keys() {
            if let Some((rest, _)) = order(&p.rows, labels) {
                if !seen.contains(&rest) {
                    seen.push(rest);
                }
            }
        }
        rows.sort_by_cached_key(|labels, _| {
            order(&p.rows, labels).map(|(rest, m)| (seen.iter().position(|s| *s == rest), m))
        });
    }
    if p.columns.iter().any(|k| k.name == "metric") {
        let split = |c: &String| -> (String, usize) {
            let m = col_metric.get(c).cloned().unwrap_or_default();
            let rest: Vec<&str> = c.split(' ').filter(|w| *w != m).collect();
            (
                rest.join(" "),
                metrics.iter().position(|x| *x == m).unwrap_or(usize::MAX),
            )
        };
        let mut seen: Vec<String> = Vec::new();
        for c in &columns {
            let (rest, _) = split(c);
            if !seen.contains(&rest) {
                seen.push(rest);
            }
        }
        columns.sort_by_cached_key(|c| {
            let (rest, m) = split(c);
            (seen.iter().position(|s| *s == rest), m)
        });
    }
    let unit_of = |m: &str| units.get(m).cloned().unwrap_or_default();
    let by_key = |keys: &[crate::spec::PivotKey], label: &[String]| -> Option<String> {
        let i = keys.iter().position(|k| k.name == "metric")?;
        label.get(i).map(|m| unit_of(m))
    };
    let metric_in_columns = p.columns.iter().any(|k| k.name == "metric");
    let metric_in_rows = p.rows.iter().any(|k| k.name == "metric");
    Some(PivotTable {
        row_keys: p.rows.iter().map(|k| k.name.clone()).collect(),
        column_keys: p.columns.iter().map(|k| k.name.clone()).collect(),
        metric: metrics.join(", "),
        stat: p.stat.clone(),
        unit: if metrics.len() == 1 {
            unit_of(&metrics[0])
        } else {
            String::new()
        },
        column_units: if metric_in_columns {
            columns
                .iter()
                .map(|c| col_metric.get(c).map(|m| unit_of(m)).unwrap_or_default())
                .collect()
        } else {
            Vec::new()
        },
        row_units: if metric_in_rows {
            rows.keys()
                .map(|labels| by_key(&p.rows, labels).unwrap_or_default())
                .collect()
        } else {
            Vec::new()
        },
        missing: {
            let (why, columns) = (&why, &columns);
            rows.values()
                .enumerate()
                .flat_map(|(r, by_col)| {
                    columns.iter().enumerate().filter_map(move |(c, label)| {
                        let (metric, values, unmeasured) = by_col.get(label)?;
                        (*unmeasured > 0).then(|| PivotMissing {
                            row: r,
                            column: c,
                            measured: values.len(),
                            runs: values.len() + *unmeasured as usize,
                            reason: why.get(metric).cloned().unwrap_or_default(),
                        })
                    })
                })
                .collect()
        },
        rows: rows
            .into_iter()
            .map(|(labels, mut by_col)| {
                let values = columns
                    .iter()
                    .map(|c| {
                        by_col
                            .get_mut(c)
                            .and_then(|(_, v, _)| statistic(v, &p.stat))
                    })
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

/// `platter compare A B`: what it compared and what it could not.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CampaignComparison {
    /// Campaign A's id.
    pub baseline: String,
    /// Campaign B's id.
    pub candidate: String,
    pub metric: String,
    /// Each cell of B that A has too, decided together with Holm's correction; a row with
    /// `compared: false` when either side has no usable values of the metric.
    pub rows: Vec<JudgedComparison>,
    /// Cells of A without a cell of the same host and parameters in B, and the reverse.
    pub only_in_a: Vec<UnmatchedCell>,
    pub only_in_b: Vec<UnmatchedCell>,
}

impl CampaignComparison {
    /// Cells that were not compared: without a counterpart, or without values.
    pub fn incomplete(&self) -> usize {
        self.only_in_a.len()
            + self.only_in_b.len()
            + self.rows.iter().filter(|r| !r.compared).count()
    }
}

/// A side of `platter compare`: a campaign (id, or name for its latest run), narrowed to
/// one host by `@HOST` (`fleet-fsync@rc66`).
pub fn split_side(reference: &str) -> (&str, Option<&str>) {
    match reference.rsplit_once('@') {
        Some((campaign, host)) if !campaign.is_empty() && !host.is_empty() => {
            (campaign, Some(host))
        }
        _ => (reference, None),
    }
}

/// Checks that `host` ran cells in `report`, or says which hosts did.
pub fn check_side_host(report: &super::Report, host: Option<&str>) -> Result<(), String> {
    let Some(host) = host else { return Ok(()) };
    if report.cells.iter().any(|c| c.host == host) {
        return Ok(());
    }
    let mut hosts: Vec<&str> = report.cells.iter().map(|c| c.host.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    Err(format!(
        "campaign {} ({}) ran nothing on host {host}; its hosts: {}",
        report.name,
        report.campaign_id,
        hosts.join(", ")
    ))
}

/// `platter compare A B`: every cell of `b` against the cell of `a` with the same host
/// and parameters (the same matrix run on another day or fleet), on `metric`, decided
/// together with Holm's correction (the verdict is in `significant` and `text`); the
/// cells of either without a counterpart in the other are listed.
pub fn compare_campaigns(a: &super::Report, b: &super::Report, metric: &str) -> CampaignComparison {
    compare_sides((a, None), (b, None), metric)
}

/// `platter compare A@HOST B@HOST2`: the cells of `b` on its host against the cells of `a`
/// on its host with the same parameters (a device matched by its position on its host, as
/// in `report: { baseline: { host } }`) — two hosts or drives of one campaign, or of two.
/// Without hosts, a cell faces the cell of the same host and parameters.
pub fn compare_sides(
    (a, a_host): (&super::Report, Option<&str>),
    (b, b_host): (&super::Report, Option<&str>),
    metric: &str,
) -> CampaignComparison {
    let by_host = a_host.is_some() || b_host.is_some();
    let a_cells: Vec<&CellReport> = a
        .cells
        .iter()
        .filter(|c| a_host.is_none_or(|h| c.host == h))
        .collect();
    let b_cells: Vec<&CellReport> = b
        .cells
        .iter()
        .filter(|c| b_host.is_none_or(|h| c.host == h))
        .collect();
    // Across hosts: the parameters without the device, and the device's position on its
    // host (its n-th drive in the order its cells name them).
    let key = |cells: &[&CellReport], c: &CellReport| {
        let params: Vec<(&String, &String)> =
            c.params.iter().filter(|(k, _)| *k != "device").collect();
        let mut devices: Vec<&str> = Vec::new();
        for x in cells.iter().filter(|x| x.host == c.host) {
            let d = x.params.get("device").map(String::as_str).unwrap_or("");
            if !devices.contains(&d) {
                devices.push(d);
            }
        }
        let d = c.params.get("device").map(String::as_str).unwrap_or("");
        let position = devices.iter().position(|x| *x == d).unwrap_or(0);
        (
            params
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>(),
            position,
        )
    };
    let same = |x: &CellReport, y: &CellReport| {
        if by_host {
            key(&a_cells, x) == key(&b_cells, y)
        } else {
            x.host == y.host && x.params == y.params
        }
    };
    let side = |r: &super::Report, host: Option<&str>| match host {
        Some(h) => format!("{}@{h}", r.campaign_id),
        None => r.campaign_id.clone(),
    };
    let (a_name, b_name) = (side(a, a_host), side(b, b_host));
    let mut rows = Vec::new();
    let mut only_in_b = Vec::new();
    for cell in &b_cells {
        let Some(base) = a_cells.iter().find(|c| same(c, cell)) else {
            only_in_b.push(UnmatchedCell::of(cell));
            continue;
        };
        let label = if by_host {
            format!(
                "{} {} vs {} {}",
                b_name,
                device_of(cell),
                a_name,
                device_of(base)
            )
        } else {
            format!("{b_name} vs {a_name}")
        };
        let row_of = |ratio, penalty_pct| ComparisonRow {
            host: cell.host.clone(),
            context: if by_host {
                context(cell, "host", false)
            } else {
                context(cell, "", true)
            },
            key: if by_host { "host" } else { "campaign" }.into(),
            baseline: a_name.clone(),
            candidate: b_name.clone(),
            metric: metric.to_string(),
            ratio,
            penalty_pct,
            ci_pct: None,
            significant: false,
            text: String::new(),
        };
        rows.push(pending(row_of, base, cell, metric, label));
    }
    let only_in_a = a_cells
        .iter()
        .filter(|c| !b_cells.iter().any(|x| same(c, x)))
        .map(|c| UnmatchedCell::of(c))
        .collect();
    CampaignComparison {
        baseline: a_name,
        candidate: b_name,
        metric: metric.to_string(),
        rows: judge_family(rows),
        only_in_a,
        only_in_b,
    }
}

fn device_of(c: &CellReport) -> String {
    c.params.get("device").cloned().unwrap_or_default()
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
                same_as: None,
            }],
            unmeasured: vec![],
            failed: 0,
            latency: None,
            warnings: vec![],
            advice: vec![],
            warmup: vec![],
            stopped: None,
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
                metrics: vec![],
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
    fn seed_003_table_filesystem_by_metric_each_column_in_its_unit() {
        // bonnie++ on three filesystems: block writes in B/s and seeks in op/s.
        let cells: Vec<CellReport> = [("ext4", 1.2e9, 900.0), ("btrfs", 0.9e9, 700.0)]
            .iter()
            .map(|(fs, bw, seeks)| {
                let mut c = cell("rc66", "sdb", "on", "1", "0", &[1.0]);
                c.params = [("fs".to_string(), fs.to_string())].into_iter().collect();
                c.metrics = [("put_block", "B/s", *bw), ("seeks", "op/s", *seeks)]
                    .iter()
                    .map(|(m, unit, v)| MetricStats {
                        metric: m.to_string(),
                        unit: unit.to_string(),
                        stats: stats::summarize(&[*v, v * 1.1]).unwrap(),
                        values: vec![*v, v * 1.1],
                        not_measured: 0,
                        not_measured_reason: String::new(),
                        samples: vec![],
                        same_as: None,
                    })
                    .collect();
                c
            })
            .collect();
        let settings = ReportSpec {
            pivot: Some(Pivot {
                rows: vec![key("fs")],
                columns: vec![key("metric")],
                metric: "put_block".into(),
                metrics: vec!["put_block".into(), "seeks".into()],
                stat: "min".into(),
                line: 1,
                column: 1,
            }),
            ..ReportSpec::default()
        };
        let p = pivot(&cells, &settings, &|_: &str, _: &str, _: &str| None).unwrap();
        assert_eq!(p.columns, ["put_block", "seeks"]);
        assert_eq!(p.column_units, ["B/s", "op/s"]);
        assert_eq!(p.unit, "");
        assert_eq!(p.metric, "put_block, seeks");
        assert_eq!(p.rows[0].0, ["ext4"]);
        assert_eq!(p.rows[0].1, [Some(1.2e9), Some(900.0)]);
        assert_eq!(p.rows[1].1, [Some(0.9e9), Some(700.0)]);
        assert_eq!((p.unit_at(1, 0), p.unit_at(1, 1)), ("B/s", "op/s"));
        assert_eq!(p.slot_text(0, 1, Some("900 op/s".into())), "900 op/s");
        // A metric bonnie++ could not measure in some runs, or in every run: the slot says
        // so, and on how many runs its value rests.
        let mut gaps = cells.clone();
        gaps[0].metrics[1].not_measured = 1;
        gaps[0].metrics[1].not_measured_reason = "too fast to measure".into();
        let seeks = gaps[1].metrics.remove(1);
        gaps[1].unmeasured.push(crate::report::Unmeasured {
            metric: "seeks".into(),
            unit: String::new(),
            count: 3,
            reason: "too fast to measure".into(),
            samples: vec![],
        });
        let p = pivot(&gaps, &settings, &|_: &str, _: &str, _: &str| None).unwrap();
        assert_eq!(
            p.slot_text(0, 1, Some("900 op/s".into())),
            "900 op/s (2 of 3 runs; 1 too fast to measure)"
        );
        assert_eq!(p.rows[1].1[1], None);
        assert_eq!(p.slot_text(1, 1, None), "too fast to measure");
        assert_eq!(seeks.metric, "seeks");
        // The metrics as rows instead: each row in its unit.
        let mut s = settings.clone();
        let pv = s.pivot.as_mut().unwrap();
        (pv.rows, pv.columns) = (vec![key("metric")], vec![key("fs")]);
        let p = pivot(&cells, &s, &|_: &str, _: &str, _: &str| None).unwrap();
        assert_eq!(p.columns, ["ext4", "btrfs"]);
        assert_eq!(p.row_units, ["B/s", "op/s"]);
        assert_eq!(
            p.rows[1],
            (vec!["seeks".to_string()], vec![Some(900.0), Some(700.0)])
        );
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

    fn baseline(key: &str, value: &str) -> ReportSpec {
        ReportSpec {
            baseline: Some(crate::spec::Baseline {
                key: key.into(),
                value: value.into(),
                line: 1,
                column: 1,
            }),
            metric: "latency.mean".into(),
            ..ReportSpec::default()
        }
    }

    /// Cells of `host` on `devices` (in plan order) at sizes 1 and 4096, `scale` times a
    /// common set of repetitions.
    fn host_cells(host: &str, devices: &[&str], scale: f64) -> Vec<CellReport> {
        let runs = [1.00, 1.02, 0.98, 1.01, 0.99, 1.03];
        let mut out = Vec::new();
        for d in devices {
            for size in ["1", "4096"] {
                let v: Vec<f64> = runs.iter().map(|r| r * scale * 1e-3).collect();
                out.push(cell(host, d, "on", size, "0", &v));
            }
        }
        out
    }

    #[test]
    fn a_baseline_host_compares_the_same_cell_on_each_host_whatever_its_devices_are_called() {
        // rc66 tests loop3 and loop4; rcmonster sdb, sdc and a third drive, sdd; flygecko
        // only a loop4. Devices pair by name where both hosts have it, else by position.
        let mut cells = host_cells("rc66", &["loop3", "loop4"], 1.0);
        cells.extend(host_cells("rcmonster", &["sdb", "sdc", "sdd"], 2.0));
        cells.extend(host_cells("flygecko", &["loop4"], 1.0));
        let rows = compare_cells(&cells, &baseline("host", "rc66"));
        let text = |r: &JudgedComparison| format!("{}: {}", r.row.context, r.row.text);
        let all: Vec<String> = rows.iter().map(text).collect();

        let compared: Vec<&JudgedComparison> = rows.iter().filter(|r| r.compared).collect();
        assert_eq!(compared.len(), 6, "{all:#?}");
        for r in compared.iter().filter(|r| r.row.host == "rcmonster") {
            assert!((r.row.ratio - 2.0).abs() < 1e-9, "{}", text(r));
            assert!(r.ci_level.is_some() && r.p_value.is_some(), "{r:?}");
            assert!(!r.row.context.contains("device"), "{}", text(r));
        }
        for (dev, base) in [("sdb", "loop3"), ("sdc", "loop4")] {
            for size in ["1", "4096"] {
                let want = format!(
                    "write_cache=on size={size} offset=0: host=rcmonster {dev} vs rc66 {base} penalty 100.0%"
                );
                assert!(all.iter().any(|l| l.starts_with(&want)), "{want}\n{all:#?}");
            }
        }
        let flygecko: Vec<&&JudgedComparison> = compared
            .iter()
            .filter(|r| r.row.host == "flygecko")
            .collect();
        assert_eq!(flygecko.len(), 2, "{all:#?}");
        for r in flygecko {
            assert!(r.row.context.starts_with("device=loop4 "), "{}", text(r));
            assert!(
                r.row.text.starts_with("host=flygecko vs rc66 penalty"),
                "{}",
                text(r)
            );
        }

        // Nothing disappears: rcmonster's third drive, and rc66's loop3 on flygecko.
        let unmatched: Vec<String> = rows.iter().filter(|r| !r.compared).map(text).collect();
        assert_eq!(
            unmatched,
            [
                "device=sdd write_cache=on size=1 offset=0: rcmonster sdd: no cell on rc66 to compare with",
                "device=sdd write_cache=on size=4096 offset=0: rcmonster sdd: no cell on rc66 to compare with",
                "device=loop3 write_cache=on size=1 offset=0: rc66 loop3: no cell on flygecko compared with it",
                "device=loop3 write_cache=on size=4096 offset=0: rc66 loop3: no cell on flygecko compared with it",
            ]
        );
        assert!(rows
            .iter()
            .filter(|r| !r.compared)
            .all(|r| r.row.ratio.is_nan() && !r.row.significant && r.p_value.is_none()));
        // Holm's family counts the tests made, not the cells listed as unmatched.
        assert!(rows.iter().all(|r| r.family == 6), "{rows:?}");
    }

    #[test]
    fn devices_pair_by_name_first_then_by_position_among_the_rest() {
        assert_eq!(
            pair_devices(&["sdb", "sdc"], &["loop3", "loop4"]),
            [("sdb", "loop3"), ("sdc", "loop4")]
        );
        // sdb is on both; sdc and sda pair by position among the rest; sdd has nothing.
        assert_eq!(
            pair_devices(&["sdc", "sdb", "sdd"], &["sdb", "sda"]),
            [("sdb", "sdb"), ("sdc", "sda")]
        );
        assert_eq!(pair_devices(&[], &["sda"]), []);
    }

    #[test]
    fn a_cell_without_its_baseline_value_is_listed_not_dropped() {
        // An `exclude` took write_cache=off from sdc: its `on` cell has no baseline. A
        // cell without values of the metric is listed as not compared.
        let mut cells = vec![
            cell("h", "sdb", "off", "1", "0", &[1e-3, 1.1e-3, 0.9e-3]),
            cell("h", "sdb", "on", "1", "0", &[2e-3, 2.1e-3, 1.9e-3]),
            cell("h", "sdc", "on", "1", "0", &[2e-3, 2.1e-3, 1.9e-3]),
            cell("h", "sdb", "off", "8", "0", &[1e-3, 1.1e-3, 0.9e-3]),
            cell("h", "sdb", "on", "8", "0", &[2e-3, 2.1e-3, 1.9e-3]),
        ];
        cells[4].metrics.clear();
        let rows = compare_cells(&cells, &baseline("write_cache", "off"));
        let lines: Vec<(bool, String)> = rows
            .iter()
            .map(|r| (r.compared, format!("{}: {}", r.row.context, r.row.text)))
            .collect();
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert!(
            lines[0].0
                && lines[0]
                    .1
                    .starts_with("h device=sdb size=1 offset=0: write_cache=on vs off penalty"),
            "{lines:#?}"
        );
        assert_eq!(
            lines[1],
            (false, "h device=sdc size=1 offset=0: write_cache=on: no cell with write_cache=off on h sdc to compare with".to_string())
        );
        assert_eq!(
            lines[2],
            (false, "h device=sdb size=8 offset=0: write_cache=on vs off: not compared: no positive values of latency.mean on both sides".to_string())
        );
    }

    fn report(id: &str, cells: Vec<CellReport>) -> crate::report::Report {
        crate::report::Report {
            schema_version: 1,
            campaign_id: id.into(),
            name: id.into(),
            state: "done".into(),
            params: vec![],
            repeat: 6,
            repetition: String::new(),
            warmup: 0,
            cells,
            ..Default::default()
        }
    }

    #[test]
    fn compare_campaigns_lists_the_cells_either_side_lacks() {
        let a = report("A", host_cells("rc66", &["sdb", "sdc"], 1.0));
        let mut b_cells = host_cells("rc66", &["sdb"], 1.5);
        b_cells.extend(host_cells("rcmonster", &["sdb"], 1.0));
        let b = report("B", b_cells);
        let c = compare_campaigns(&a, &b, "latency.mean");
        assert_eq!(c.rows.len(), 2);
        for r in &c.rows {
            assert!(r.compared && (r.row.ratio - 1.5).abs() < 1e-9, "{r:?}");
            // 6 + 6 runs: the interval's real coverage, and the test behind the verdict.
            assert!(r.ci_level.is_some_and(|l| l > 0.95), "{r:?}");
            assert!(
                r.p_value.is_some() && r.holm_p.is_some() && r.family == 2,
                "{r:?}"
            );
            assert!(r.row.significant && r.row.text.contains("% CI"), "{r:?}");
        }
        let names = |cells: &[UnmatchedCell]| -> Vec<String> {
            cells.iter().map(UnmatchedCell::describe).collect()
        };
        assert_eq!(
            names(&c.only_in_a),
            [
                "rc66 device=sdc write_cache=on size=1 offset=0",
                "rc66 device=sdc write_cache=on size=4096 offset=0"
            ]
        );
        assert_eq!(
            names(&c.only_in_b),
            [
                "rcmonster device=sdb write_cache=on size=1 offset=0",
                "rcmonster device=sdb write_cache=on size=4096 offset=0"
            ]
        );
        assert_eq!(c.incomplete(), 4);
        let same = compare_campaigns(&a, &a, "latency.mean");
        assert_eq!((same.rows.len(), same.incomplete()), (4, 0));
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
