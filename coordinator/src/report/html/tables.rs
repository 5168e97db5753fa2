//! The page's tables of values: side by side, the pivot, and every metric of every cell
//! per host, as values for `templates/report/`. Writes no HTML.

use indexmap::IndexMap;

use super::super::notes::{notes, Note};
use super::super::side::{SideBySide, SideValue, ValueMarks};
use super::super::{CellReport, MetricStats, Report, PER_RUN};
use super::{unit_suffix, Line, Text, Unit, View, OPEN_TABLE_ROWS};

/// The side-by-side view as a table: a row per configuration and metric, a column per host
/// or drive, one unit per row.
pub(super) struct SideTable {
    pub(super) title: Text,
    pub(super) params: Vec<Text>,
    /// (colour, name) of each column.
    pub(super) columns: Vec<(String, Text)>,
    pub(super) rows: Vec<SideRow>,
}

pub(super) struct SideRow {
    pub(super) params: Vec<Text>,
    pub(super) metric: Text,
    pub(super) unit: Text,
    pub(super) cells: Vec<SideCell>,
}

/// A value of the view: measured, or why not (`missing`: "— (2 failed)", "—").
pub(super) struct SideCell {
    pub(super) measured: Option<SideMeasured>,
    pub(super) missing: Text,
}

/// A measured value in the row's unit: the median, its interval, its ratio to the
/// reference, whether it is an outlier of the fleet.
pub(super) struct SideMeasured {
    pub(super) value: f64,
    pub(super) median: Text,
    pub(super) ci: Option<(Text, Text)>,
    pub(super) ratio: Option<RatioText>,
    pub(super) outlier: bool,
}

/// A ratio to the reference, greyed when decided not significant (an estimate is not).
pub(super) struct RatioText {
    pub(super) text: Text,
    pub(super) muted: bool,
}

impl SideTable {
    /// The rows of `keys` only, or every row when `keys` is empty.
    pub(super) fn of(v: &View<'_>, s: &SideBySide, keys: &[&str]) -> SideTable {
        let params: Vec<&String> = super::super::configuration_names(&v.order).collect();
        let rows = s
            .rows
            .iter()
            .filter(|row| keys.is_empty() || keys.contains(&row.metric.as_str()))
            .map(|row| {
                let medians: Vec<f64> = row
                    .values
                    .iter()
                    .filter_map(|x| match x {
                        SideValue::Measured { median, .. } => Some(*median),
                        _ => None,
                    })
                    .collect();
                let u = Unit::for_values(&medians, &row.unit);
                SideRow {
                    params: params
                        .iter()
                        .map(|p| Text::new(row.params.get(*p).map_or("-", |x| x)))
                        .collect(),
                    metric: Text::new(&row.metric),
                    unit: Text::new(&u.label),
                    cells: row.values.iter().map(|x| SideCell::of(x, &u)).collect(),
                }
            })
            .collect();
        SideTable {
            title: Text::new(side_title(s)),
            params: params.iter().map(Text::new).collect(),
            // The view's columns are `v.columns` (both from `side::Columns`): the same colours.
            columns: s
                .columns
                .iter()
                .enumerate()
                .map(|(col, c)| (super::charts::hex(super::charts::colour(col)), Text::new(c)))
                .collect(),
            rows,
        }
    }
}

impl SideCell {
    /// The value's pieces in the row's unit `u`, as `SideValue::text` orders them.
    fn of(x: &SideValue, u: &Unit) -> SideCell {
        match x {
            SideValue::Measured {
                median,
                ci,
                ratio,
                outlier,
                ..
            } => SideCell {
                measured: Some(SideMeasured {
                    value: *median,
                    median: Text::new(u.bare(*median)),
                    ci: ci.map(|(lo, hi)| (Text::new(u.bare(lo)), Text::new(u.bare(hi)))),
                    ratio: ratio.as_ref().map(|r| RatioText {
                        text: Text::new(r.text()),
                        muted: r.no_difference(),
                    }),
                    outlier: *outlier,
                }),
                missing: Text::default(),
            },
            SideValue::NotMeasured { .. } | SideValue::Absent => SideCell {
                measured: None,
                missing: Text::new(x.text(&Bare(u))),
            },
        }
    }
}

/// A value's pieces as bare numbers in the row's unit (their text, not their layout).
struct Bare<'a>(&'a Unit);

impl ValueMarks for Bare<'_> {
    fn median(&self, v: f64) -> String {
        self.0.bare(v)
    }
    fn bound(&self, v: f64) -> String {
        self.0.bare(v)
    }
}

fn side_title(s: &SideBySide) -> String {
    format!(
        "Side by side: median (CI); ×: Hodges–Lehmann ratio to {} (interval at its Holm step's level), greyed and ~ = no significant difference (Holm); unmarked where the runs are too few to decide it",
        super::super::side::reference_words(s)
    )
}

/// The pivot with one unit for the whole table, named in its title; with several
/// metrics, one unit per column (named in its header) or per row (after its labels).
pub(super) struct Pivot {
    pub(super) stat: Text,
    pub(super) metric: Text,
    pub(super) by_rows: Text,
    pub(super) by_columns: Text,
    /// " [ms]": the whole table's unit, or nothing.
    pub(super) unit: Text,
    pub(super) row_keys: Vec<Text>,
    /// Whether each row names its unit.
    pub(super) row_units: bool,
    /// The columns' headers, with their unit when each has one.
    pub(super) columns: Vec<Text>,
    pub(super) rows: Vec<PivotRow>,
}

pub(super) struct PivotRow {
    pub(super) labels: Vec<Text>,
    pub(super) unit: Option<Text>,
    /// (value, its text) per column; without a value, why.
    pub(super) slots: Vec<(Option<f64>, Text)>,
}

impl Pivot {
    pub(super) fn of(r: &Report) -> Option<Pivot> {
        let p = r.pivot.as_ref()?;
        let values_where = |keep: &dyn Fn(usize, usize) -> bool| -> Vec<f64> {
            p.rows
                .iter()
                .enumerate()
                .flat_map(|(ri, (_, v))| {
                    v.iter()
                        .enumerate()
                        .filter(move |(ci, _)| keep(ri, *ci))
                        .filter_map(|(_, x)| *x)
                })
                .collect()
        };
        let whole = Unit::for_values(&values_where(&|_, _| true), &p.unit);
        let columns: Vec<Unit> = p
            .column_units
            .iter()
            .enumerate()
            .map(|(c, unit)| Unit::for_values(&values_where(&|_, ci| ci == c), unit))
            .collect();
        let rows: Vec<Unit> = p
            .row_units
            .iter()
            .enumerate()
            .map(|(r, unit)| Unit::for_values(&values_where(&|ri, _| ri == r), unit))
            .collect();
        let unit_at = |r: usize, c: usize| rows.get(r).or(columns.get(c)).unwrap_or(&whole);
        Some(Pivot {
            stat: Text::new(&p.stat),
            metric: Text::new(&p.metric),
            by_rows: Text::new(p.row_keys.join(", ")),
            by_columns: Text::new(p.column_keys.join(", ")),
            unit: Text::new(if p.unit.is_empty() {
                String::new()
            } else {
                unit_suffix(&whole)
            }),
            row_keys: p.row_keys.iter().map(Text::new).collect(),
            row_units: !rows.is_empty(),
            columns: p
                .columns
                .iter()
                .enumerate()
                .map(|(c, h)| {
                    Text::new(format!(
                        "{h}{}",
                        columns.get(c).map_or(String::new(), unit_suffix)
                    ))
                })
                .collect(),
            rows: p
                .rows
                .iter()
                .enumerate()
                .map(|(ri, (labels, values))| PivotRow {
                    labels: labels.iter().map(Text::new).collect(),
                    unit: rows.get(ri).map(|u| Text::new(&u.label)),
                    slots: values
                        .iter()
                        .enumerate()
                        .map(|(ci, x)| {
                            let text = p.slot_text(ri, ci, x.map(|x| unit_at(ri, ci).bare(x)));
                            (*x, Text::new(text))
                        })
                        .collect(),
                })
                .collect(),
        })
    }
}

/// Every metric of every cell: the side-by-side view whole, a table per host, and the
/// comparisons and warnings.
pub(super) struct Details {
    pub(super) side: Option<SideTable>,
    pub(super) hosts: Vec<HostTable>,
    /// Whether the host tables start open (few rows).
    pub(super) open: bool,
    pub(super) notes: Vec<Line>,
}

/// A host's cells, a row per metric, and what was noted of them.
pub(super) struct HostTable {
    pub(super) host: Text,
    /// The parameters this host's cells carry.
    pub(super) params: Vec<Text>,
    pub(super) cells: Vec<HostCell>,
    pub(super) notes: Vec<Text>,
}

/// A cell's rows, each carrying the cell's parameters (so a sorted table still names them).
pub(super) struct HostCell {
    pub(super) params: Vec<Text>,
    pub(super) rows: Vec<MetricRow>,
}

/// A row of a host's table.
pub(super) enum MetricRow {
    /// No metric and nothing unmeasured: how many repetitions failed.
    NoSamples(u32),
    /// A per-run latency percentile given way to the merged one of the same name.
    Merged(Merged),
    Stats(Box<MetricCells>),
    /// A metric the tool could not measure.
    Unmeasured(Unmeasured),
}

pub(super) struct Merged {
    pub(super) name: Text,
    pub(super) runs: usize,
    pub(super) value: f64,
    pub(super) shown: Text,
    pub(super) ops: u64,
}

/// A metric's statistics, one unit for the row: each value with its text.
pub(super) struct MetricCells {
    pub(super) metric: Text,
    pub(super) n: usize,
    pub(super) n_text: Text,
    pub(super) median: f64,
    pub(super) median_text: Text,
    /// (CI level in percent, low, high).
    pub(super) ci: Option<(String, Text, Text)>,
    pub(super) mean: f64,
    pub(super) mean_text: Text,
    pub(super) stddev_text: Text,
    pub(super) min: f64,
    pub(super) min_text: Text,
    pub(super) max: f64,
    pub(super) max_text: Text,
}

pub(super) struct Unmeasured {
    pub(super) metric: Text,
    pub(super) count: u32,
    pub(super) reason: Text,
}

impl Details {
    pub(super) fn of(v: &View<'_>) -> Details {
        let r = v.r;
        let mut hosts: IndexMap<&str, Vec<&CellReport>> = IndexMap::new();
        for c in &r.cells {
            hosts.entry(c.host.as_str()).or_default().push(c);
        }
        let rows: usize = r.cells.iter().map(|c| c.metrics.len().max(1)).sum();
        // The comparisons of two cells, made or not (a cell without a counterpart is listed
        // under "Not compared" only), their family, the cells' warnings and the advice.
        let notes = notes(r)
            .into_iter()
            .filter(|n| match n {
                Note::Comparison(c) => c.cells.is_some(),
                Note::CellWarning { .. } | Note::Family { .. } | Note::Advice(_) => true,
                _ => false,
            })
            .map(|n| Line {
                class: match n {
                    Note::CellWarning { .. } | Note::Advice(_) => Some("warn"),
                    _ => None,
                },
                text: Text::new(n.to_string()),
            })
            .collect();
        Details {
            side: r.side_by_side.as_ref().map(|s| SideTable::of(v, s, &[])),
            hosts: hosts
                .into_iter()
                .map(|(host, cells)| HostTable::of(host, &cells, &v.order))
                .collect(),
            open: rows <= OPEN_TABLE_ROWS,
            notes,
        }
    }
}

impl HostTable {
    fn of(host: &str, cells: &[&CellReport], order: &[String]) -> HostTable {
        // Only the parameters this host's cells actually carry get a column.
        let cols: Vec<&String> = order
            .iter()
            .filter(|k| cells.iter().any(|c| c.params.contains_key(*k)))
            .collect();
        let rows = cells.iter().map(|cell| {
            let mut rows = Vec::new();
            if cell.metrics.is_empty() && cell.unmeasured.is_empty() {
                rows.push(MetricRow::NoSamples(cell.failed));
            }
            rows.extend(
                cell.metrics
                    .iter()
                    .filter(|m| m.same_as.is_none())
                    .map(|m| metric_row(cell, m)),
            );
            rows.extend(cell.unmeasured.iter().map(|u| {
                MetricRow::Unmeasured(Unmeasured {
                    metric: Text::new(&u.metric),
                    count: u.count,
                    reason: Text::new(&u.reason),
                })
            }));
            HostCell {
                params: cols
                    .iter()
                    .map(|k| Text::new(cell.params.get(*k).map_or("", |v| v)))
                    .collect(),
                rows,
            }
        });
        HostTable {
            host: Text::new(host),
            params: cols.iter().map(Text::new).collect(),
            cells: rows.collect(),
            notes: cells.iter().flat_map(|c| cell_notes(c)).collect(),
        }
    }
}

/// What is noted of a cell, each line named by the cell as people name it: its
/// parameters (the table's row labels).
fn cell_notes(c: &CellReport) -> Vec<Text> {
    let failed = (c.failed > 0).then(|| format!("{} failed repetition(s)", c.failed));
    let label = super::super::label(&c.params);
    let label = if label.is_empty() {
        c.cell_id.clone()
    } else {
        label
    };
    failed
        .into_iter()
        .chain(c.warnings.iter().map(ToString::to_string))
        .chain(c.advice.iter().map(|a| a.text().to_string()))
        .chain(super::super::runs_notes(c))
        .map(|w| Text::new(format!("{label}: {w}")))
        .collect()
}

/// A metric's row, one unit for the row (chosen by its median, as the text report
/// does); a per-run latency percentile gives way to the merged one of the same name
/// (`latency.p99`: every operation of every run), as in every format.
fn metric_row(cell: &CellReport, m: &MetricStats) -> MetricRow {
    let merged = m.metric.strip_suffix(PER_RUN).and_then(|name| {
        let l = cell.latency.as_ref()?;
        Some((name, l.get(name)?, l))
    });
    if let Some((name, value, l)) = merged {
        let u = Unit::for_values(&[value], "s");
        return MetricRow::Merged(Merged {
            name: Text::new(name),
            runs: l.runs,
            value,
            shown: Text::new(u.show(value)),
            ops: l.ops,
        });
    }
    let s = &m.stats;
    let u = if s.median != 0.0 {
        Unit::for_values(&[s.median], &m.unit)
    } else {
        Unit::for_values(&[s.mean, s.max], &m.unit)
    };
    let mut n = s.n.to_string();
    if m.not_measured > 0 {
        n.push_str(&format!(" (+{} {})", m.not_measured, m.not_measured_reason));
    }
    if cell.failed > 0 {
        n.push_str(&format!(" ({} failed)", cell.failed));
    }
    let ci = match (s.median_ci, s.median_ci_level) {
        (Some((lo, hi)), Some(level)) => Some((
            crate::stats::level_pct(level),
            Text::new(u.bare(lo)),
            Text::new(u.bare(hi)),
        )),
        _ => None,
    };
    MetricRow::Stats(Box::new(MetricCells {
        metric: Text::new(&m.metric),
        n: s.n,
        n_text: Text::new(n),
        median: s.median,
        median_text: Text::new(u.show(s.median)),
        ci,
        mean: s.mean,
        mean_text: Text::new(u.show(s.mean)),
        stddev_text: Text::new(u.show(s.stddev)),
        min: s.min,
        min_text: Text::new(u.show(s.min)),
        max: s.max,
        max_text: Text::new(u.show(s.max)),
    }))
}
