//! The pivot (`report: { pivot }`): row labels × column labels of one statistic.

use std::collections::HashMap;

use serde::Serialize;

use super::merged;
use crate::report::CellReport;
use crate::spec::{Pivot, PivotKey, ReportSpec};

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

pub(super) fn statistic(values: &mut [f64], stat: &str) -> Option<f64> {
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
                let name = cell.device().unwrap_or_default();
                device_field(&cell.host, name, field).unwrap_or_else(|| "?".into())
            }
            None => cell.params.get(k).cloned().unwrap_or_else(|| "-".into()),
        },
    }
}

/// A row's slots: column label → (the slot's metric, its values, runs without a value).
type Slots = indexmap::IndexMap<String, (String, Vec<f64>, u32)>;

/// The cells' values gathered into slots, with the labels, units and reasons met on the way.
#[derive(Default)]
struct Gathered {
    /// Row labels → the row's slots.
    rows: indexmap::IndexMap<Vec<String>, Slots>,
    columns: Vec<String>,
    units: indexmap::IndexMap<String, String>,
    /// With `metric` among the column keys, each column holds one metric.
    col_metric: HashMap<String, String>,
    /// Why a metric has no value at all in some cell (bonnie++'s `+++++`).
    why: HashMap<String, String>,
}

pub fn pivot(
    cells: &[CellReport],
    settings: &ReportSpec,
    device_field: &dyn Fn(&str, &str, &str) -> Option<String>,
) -> Option<PivotTable> {
    let p = settings.pivot.as_ref()?;
    let metrics = p.all_metrics();
    let Gathered {
        mut rows,
        mut columns,
        units,
        col_metric,
        why,
    } = gather(cells, p, &metrics, device_field);
    // The metrics in the order they were listed, whatever cell first had each: a key's
    // labels keep their first-seen order, the metric varies fastest.
    if p.rows.iter().any(|k| k.name == "metric") {
        order_metric_rows(&mut rows, &p.rows, &metrics);
    }
    if p.columns.iter().any(|k| k.name == "metric") {
        order_metric_columns(&mut columns, &col_metric, &metrics);
    }
    let unit_of = |m: &str| units.get(m).cloned().unwrap_or_default();
    let by_key = |keys: &[PivotKey], label: &[String]| -> Option<String> {
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
        missing: missing_slots(&rows, &columns, &why),
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

/// Each cell's values of each of `metrics` into the slot its row and column labels name.
fn gather(
    cells: &[CellReport],
    p: &Pivot,
    metrics: &[String],
    device_field: &dyn Fn(&str, &str, &str) -> Option<String>,
) -> Gathered {
    let mut g = Gathered::default();
    for cell in cells {
        for metric in metrics {
            let Some((cell_values, unmeasured)) = slot_values(cell, metric, &mut g) else {
                continue;
            };
            let value = |k: &String| match k.as_str() {
                "metric" => metric.clone(),
                k => pivot_value(cell, k, device_field),
            };
            let row: Vec<String> = p.rows.iter().map(|k| value(&k.name)).collect();
            let col: Vec<String> = p.columns.iter().map(|k| value(&k.name)).collect();
            let col = col.join(" ");
            if !g.columns.contains(&col) {
                g.columns.push(col.clone());
            }
            g.col_metric.insert(col.clone(), metric.clone());
            let slot = g
                .rows
                .entry(row)
                .or_default()
                .entry(col)
                .or_insert_with(|| (metric.clone(), Vec::new(), 0));
            slot.1.extend(cell_values);
            slot.2 += unmeasured;
        }
    }
    g
}

/// A cell's values of `metric` and its runs without one, noting unit and why in `g`.
fn slot_values(cell: &CellReport, metric: &str, g: &mut Gathered) -> Option<(Vec<f64>, u32)> {
    // Merged latency names pool one value per cell (its percentile over all its
    // operations); other metrics pool every repetition.
    if crate::report::MergedLatency::is_merged_name(metric) {
        let v = merged(cell, metric)?;
        g.units.insert(metric.to_string(), "s".into());
        return Some((vec![v], 0));
    }
    match cell.metrics.iter().find(|m| m.metric == metric) {
        Some(m) => {
            g.units.insert(metric.to_string(), m.unit.clone());
            if m.not_measured > 0 {
                g.why
                    .insert(metric.to_string(), m.not_measured_reason.clone());
            }
            Some((m.values.clone(), m.not_measured))
        }
        // Every run of it came back without a value: the slot says why.
        None => {
            let u = cell.unmeasured.iter().find(|u| u.metric == metric)?;
            g.why.insert(metric.to_string(), u.reason.clone());
            Some((Vec::new(), u.count))
        }
    }
}

/// Rows by the metric's place in the list, the other keys' labels in first-seen order.
fn order_metric_rows(
    rows: &mut indexmap::IndexMap<Vec<String>, Slots>,
    keys: &[PivotKey],
    metrics: &[String],
) {
    let order = |label: &[String]| -> Option<(Vec<String>, usize)> {
        let i = keys.iter().position(|k| k.name == "metric")?;
        let mut rest = label.to_vec();
        let m = rest.remove(i);
        Some((
            rest,
            metrics.iter().position(|x| *x == m).unwrap_or(usize::MAX),
        ))
    };
    let mut seen: Vec<Vec<String>> = Vec::new();
    for labels in rows.keys() {
        if let Some((rest, _)) = order(labels) {
            if !seen.contains(&rest) {
                seen.push(rest);
            }
        }
    }
    rows.sort_by_cached_key(|labels, _| {
        order(labels).map(|(rest, m)| (seen.iter().position(|s| *s == rest), m))
    });
}

/// Columns by the metric's place in the list, the other keys' labels in first-seen order.
fn order_metric_columns(
    columns: &mut [String],
    col_metric: &HashMap<String, String>,
    metrics: &[String],
) {
    let split = |c: &String| -> (String, usize) {
        let m = col_metric.get(c).cloned().unwrap_or_default();
        let rest: Vec<&str> = c.split(' ').filter(|w| *w != m).collect();
        (
            rest.join(" "),
            metrics.iter().position(|x| *x == m).unwrap_or(usize::MAX),
        )
    };
    let mut seen: Vec<String> = Vec::new();
    for c in columns.iter() {
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

/// The slots some of whose runs came back without a value, with how many and why.
fn missing_slots(
    rows: &indexmap::IndexMap<Vec<String>, Slots>,
    columns: &[String],
    why: &HashMap<String, String>,
) -> Vec<PivotMissing> {
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
}
