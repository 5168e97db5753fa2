//! The cross-host view: when a campaign ran on several hosts (or on several devices of a
//! host), each configuration once, one column per host or device, each median with its
//! interval and each column's ratio to a reference — the baseline host (`report: {
//! baseline: { host: rc66 } }`) or, without one, the first column's host — as the
//! comparison of the two cells' runs estimates it ([`SideRatio`]: Hodges–Lehmann, its
//! interval at its Holm step's level, marked `~` when not significant after Holm; an
//! estimate, unmarked, when its runs are too few to pass that step). Outliers (see
//! `judge::fleet_outliers`) are marked, and a column without a value says why.
//!
//! A row is a configuration (the cell's parameters without its device); the columns are the
//! hosts, or, when a host ran on several devices, each host's devices in the order its
//! cells first name them (the planner orders them by the selector's matches).

use std::collections::HashMap;

use indexmap::IndexMap;
use serde::Serialize;

use super::{CellReport, Report, Scale};
use crate::spec::ReportSpec;
use crate::stats;

/// A cell's parameters without its device: what a row of the view stands for.
type Configuration = Vec<(String, String)>;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideBySide {
    /// One per host, or `host device` when a host ran on several devices.
    pub columns: Vec<String>,
    /// The baseline host (`report: { baseline: { host } }`), if the campaign names one.
    pub baseline: Option<String>,
    /// The host ratios are against (its device in the same position, when hosts ran on
    /// several): the baseline, else the first column's host.
    pub reference: String,

    pub rows: Vec<SideRow>,
}

/// One metric of one configuration across the columns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideRow {
    /// The configuration: the cell's parameters without its device.
    pub params: IndexMap<String, String>,
    pub metric: String,
    pub unit: String,
    /// Per column, in `columns` order.
    pub values: Vec<SideValue>,
    /// Per column, the column its ratio is against.
    #[serde(skip)]
    pub against: Vec<Option<usize>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SideValue {
    Measured {
        median: f64,
        #[serde(skip_serializing_if = "Option::is_none")]
        ci: Option<(f64, f64)>,
        #[serde(skip_serializing_if = "Option::is_none")]
        ci_level: Option<f64>,
        n: usize,
        /// This column against the reference column (none for the reference itself).
        #[serde(flatten, skip_serializing_if = "Option::is_none")]
        ratio: Option<SideRatio>,
        /// Far from the other columns (`judge::fleet_outliers`).
        outlier: bool,
    },
    /// The cell ran but gave this metric no value: its repetitions failed or the tool
    /// could not measure it.
    NotMeasured { why: String },
    /// This host or device has no such cell.
    Absent,
}

/// A column over its reference, as the comparison of the two cells' repetitions says it:
/// the Hodges–Lehmann ratio (the median of every ratio of one run of this column over one
/// run of the reference) with its distribution-free interval, decided by Mann–Whitney
/// with Holm's correction over the view's ratios of the same metric (`stats::decide_family`:
/// the interval at its Holm step's level, so `significant` ⇔ it excludes ×1; an estimate,
/// `too_few_runs`, when the runs cannot reach that level). With a host baseline
/// the ratios of the compared metric are the report's comparisons themselves, so the
/// view and the comparison lines cannot disagree. Not the ratio of the two medians: with
/// few, noisy runs that can be far from 1 while the runs overlap.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideRatio {
    pub ratio: f64,
    /// The ratio's interval, with its real coverage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_ci: Option<(f64, f64)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_ci_level: Option<f64>,
    /// Mann–Whitney's two-sided p of this test alone.
    pub p_value: f64,
    /// Holm's adjusted p over `family` tests.
    pub holm_p: f64,
    pub family: usize,
    /// `holm_p` ≤ 5% and the interval excludes ×1: a difference, not noise.
    pub significant: bool,
    /// Set when the ratio is an estimate: too few runs to pass its Holm step, so neither
    /// significant nor "no difference".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub too_few_runs: Option<stats::TooFewRuns>,
}

impl SideRatio {
    /// A line of a family, as `stats::decide_family` decided it.
    pub(crate) fn decided(d: &stats::Decision) -> SideRatio {
        let t = &d.comparison;
        SideRatio {
            ratio: t.ratio,
            ratio_ci: t.ci_pct.map(ratio_of_pct),
            ratio_ci_level: t.ci_level,
            p_value: t.p_value,
            holm_p: d.holm_p,
            family: d.family,
            significant: d.significant,
            too_few_runs: d.too_few_runs(),
        }
    }

    pub fn of_comparison(c: &super::judge::JudgedComparison) -> Option<SideRatio> {
        let holm_p = c.holm_p?;
        Some(SideRatio {
            ratio: c.row.ratio,
            ratio_ci: c.row.ci_pct.map(ratio_of_pct),
            ratio_ci_level: c.ci_level,
            p_value: c.p_value.unwrap_or(1.0),
            holm_p,
            family: c.family,
            significant: c.row.significant,
            too_few_runs: c.too_few_runs,
        })
    }

    /// Decided, and no significant difference: what `~` (and a muted or hollow mark) says.
    pub fn no_difference(&self) -> bool {
        self.too_few_runs.is_none() && !self.significant
    }

    /// "×1.43 (1.21–1.70)", or "×1.02 (0.82–1.55) ~" when it is decided not significant;
    /// an estimate is unmarked (the report says once why): the one way every text format
    /// writes a ratio.
    pub fn text(&self) -> String {
        let mut t = format!("×{}", ratio_digits(self.ratio));
        if let Some((lo, hi)) = self.ratio_ci {
            t.push_str(&format!(" ({}–{})", ratio_digits(lo), ratio_digits(hi)));
        }
        if self.no_difference() {
            t.push_str(" ~");
        }
        t
    }
}

/// A penalty interval in % as ratios: (−18.5, 54.9) → (0.815, 1.549).
fn ratio_of_pct((lo, hi): (f64, f64)) -> (f64, f64) {
    (1.0 + lo / 100.0, 1.0 + hi / 100.0)
}

/// A ratio with two decimals, three under 0.1 (×0.043).
pub fn ratio_digits(r: f64) -> String {
    if r.abs() < 0.1 {
        format!("{r:.3}")
    } else {
        format!("{r:.2}")
    }
}

/// The view's columns: one per host, or `host device` when a host ran on several devices;
/// the baseline host first, then hosts in order of appearance, a host's devices by
/// position. The text and HTML views take their columns from here.
pub(crate) struct Columns<'a> {
    pub names: Vec<String>,
    /// Each host's devices, in the order its cells name them ("" for none).
    devices: IndexMap<&'a str, Vec<&'a str>>,
    /// The column of each (host, device).
    column_of: IndexMap<(&'a str, &'a str), usize>,
    /// Each column's host and the device's position on it.
    place: Vec<(&'a str, usize)>,
}

impl<'a> Columns<'a> {
    pub(crate) fn of(cells: &'a [CellReport], baseline_host: Option<&'a str>) -> Columns<'a> {
        let mut devices: IndexMap<&str, Vec<&str>> = IndexMap::new();
        if let Some(b) = baseline_host {
            if cells.iter().any(|c| c.host == b) {
                devices.insert(b, Vec::new());
            }
        }
        for c in cells {
            let list = devices.entry(c.host.as_str()).or_default();
            let d = device(c);
            if !list.contains(&d) {
                list.push(d);
            }
        }
        let width = devices.values().map(Vec::len).max().unwrap_or(0);
        let mut names = Vec::new();
        let mut column_of: IndexMap<(&str, &str), usize> = IndexMap::new();
        let mut place: Vec<(&str, usize)> = Vec::new();
        for (host, list) in &devices {
            for (position, d) in list.iter().enumerate() {
                place.push((host, position));
                column_of.insert((host, d), names.len());
                names.push(if width > 1 {
                    format!("{host} {d}")
                } else {
                    host.to_string()
                });
            }
        }
        Columns {
            names,
            devices,
            column_of,
            place,
        }
    }

    /// Column `i`'s host.
    pub(crate) fn host(&self, i: usize) -> &'a str {
        self.place[i].0
    }

    /// Column `i`'s device, when the columns name devices (some host ran on several).
    pub(crate) fn device(&self, i: usize) -> Option<&'a str> {
        let (host, position) = self.place[i];
        let list = &self.devices[host];
        (self.devices.values().any(|l| l.len() > 1)).then(|| list[position])
    }

    /// The column of `c`, one of `cells` these columns were made of.
    pub(crate) fn of_cell(&self, c: &CellReport) -> usize {
        self.column_of[&(c.host.as_str(), device(c))]
    }
}

/// A cell's device parameter, "" without one.
fn device(c: &CellReport) -> &str {
    c.device().unwrap_or("")
}

/// The side-by-side view of `cells`, or `None` when they all ran in one column (one host,
/// one device): then the per-host table says everything.
pub fn build(
    cells: &[CellReport],
    settings: &ReportSpec,
    outliers: &[super::judge::FleetOutlier],
    comparisons: &[super::judge::JudgedComparison],
) -> Option<SideBySide> {
    let baseline_host = settings
        .baseline
        .as_ref()
        .filter(|b| b.key == "host")
        .map(|b| b.value.as_str());
    let Columns {
        names: columns,
        devices,
        column_of,
        place,
    } = Columns::of(cells, baseline_host);
    if columns.len() < 2 {
        return None;
    }
    // Rows: configurations (parameters without the device) in order of appearance, then
    // their metrics.
    let mut groups: IndexMap<Configuration, Vec<(usize, &CellReport)>> = IndexMap::new();
    for c in cells {
        let params: Vec<(String, String)> = c
            .configuration()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        groups
            .entry(params)
            .or_default()
            .push((column_of[&(c.host.as_str(), device(c))], c));
    }
    let baseline = settings
        .baseline
        .as_ref()
        .filter(|b| b.key == "host" && devices.contains_key(b.value.as_str()))
        .map(|b| b.value.as_str());
    // The reference: the baseline host, else the first column's host.
    let reference_host = baseline.unwrap_or(place[0].0);
    // The column each column is compared with: the reference host's device in the same
    // position (none past its last device, none for the reference's own columns).
    let reference_of: Vec<Option<usize>> = place
        .iter()
        .map(|(host, position)| {
            if *host == reference_host {
                return None;
            }
            place
                .iter()
                .position(|(h, p)| *h == reference_host && p == position)
        })
        .collect();
    // With a host baseline, the report's comparisons decide the pairs (devices by name,
    // then by position) and, on their metric, the numbers.
    let compared: HashMap<&str, &super::judge::JudgedComparison> = comparisons
        .iter()
        .filter(|c| baseline.is_some() && c.compared)
        .filter_map(|c| Some((c.cells.as_ref()?.candidate.as_str(), c)))
        .collect();
    let compared_metric = if settings.metric.is_empty() {
        "wall"
    } else {
        settings.metric.as_str()
    };
    let mut rows = Vec::new();
    // Tests still to be decided, per metric: (row, column, baseline's and column's values).
    type Values<'v> = (&'v [f64], &'v [f64]);
    let mut tests: IndexMap<String, Vec<(usize, usize, Values<'_>)>> = IndexMap::new();
    for (params, members) in &groups {
        let mut metrics: Vec<(&str, &str)> = Vec::new();
        for (_, c) in members {
            for m in c.metrics.iter().filter(|m| m.same_as.is_none()) {
                if !metrics.iter().any(|(n, _)| *n == m.metric) {
                    metrics.push((&m.metric, &m.unit));
                }
            }
            for u in &c.unmeasured {
                if !metrics.iter().any(|(n, _)| *n == u.metric) {
                    metrics.push((&u.metric, &u.unit));
                }
            }
        }
        for (metric, unit) in metrics {
            let mut values = vec![SideValue::Absent; columns.len()];
            for (col, c) in members {
                values[*col] = value_of(c, metric, outliers);
            }
            let row = rows.len();
            let mut against = vec![None; columns.len()];
            for (col, c) in members {
                let SideValue::Measured { ratio, .. } = &mut values[*col] else {
                    continue;
                };
                // The reference cell: the comparison's baseline cell, or the reference
                // host's drive in the same position.
                let comparison = compared.get(c.cell_id.as_str());
                let base = if baseline.is_some() {
                    comparison
                        .and_then(|x| x.cells.as_ref())
                        .and_then(|p| members.iter().find(|(_, b)| b.cell_id == p.baseline))
                } else {
                    reference_of[*col].and_then(|r| members.iter().find(|(rc, _)| *rc == r))
                };
                let Some((base_col, base)) = base else {
                    continue;
                };
                against[*col] = Some(*base_col);
                if let (Some(comparison), true) = (comparison, metric == compared_metric) {
                    *ratio = SideRatio::of_comparison(comparison);
                } else if let Some(v) = metric_values(base, metric).zip(metric_values(c, metric)) {
                    tests
                        .entry(metric.to_string())
                        .or_default()
                        .push((row, *col, v));
                }
            }
            rows.push(SideRow {
                params: params.iter().cloned().collect(),
                metric: metric.to_string(),
                unit: unit.to_string(),
                values,
                against,
            });
        }
    }
    // Each metric's ratios are one family: "significant" anywhere in it is wrong with
    // probability at most 5% in all (as the comparisons, which are one metric's).
    for family in tests.into_values() {
        let pairs: Vec<Values<'_>> = family.iter().map(|(_, _, v)| *v).collect();
        for ((row, col, _), d) in family.into_iter().zip(stats::decide_family(&pairs)) {
            if let (SideValue::Measured { ratio, .. }, Some(d)) = (&mut rows[row].values[col], d) {
                *ratio = Some(SideRatio::decided(&d));
            }
        }
    }
    Some(SideBySide {
        baseline: baseline.map(str::to_string),
        reference: reference_host.to_string(),
        columns,
        rows,
    })
}

/// One decision per cell: the fleet outliers whose cell the view does not find decidedly
/// equal to its reference. A cell is marked OUTLIER when the peers' test sets it apart
/// from the rest of its configuration's cells; its ratio in the view asks whether it
/// differs from the reference's cell. When that question is decided "no difference" (`~`),
/// the mark would stand beside a line that says the opposite, so the cell is not called an
/// outlier — in the view, the notes and the summary alike. An estimate or a significant
/// ratio keeps the mark; so does the reference's own cell, which has no ratio.
pub fn agreeing_outliers(
    view: Option<&mut SideBySide>,
    cells: &[CellReport],
    settings: &ReportSpec,
    outliers: Vec<super::judge::FleetOutlier>,
) -> Vec<super::judge::FleetOutlier> {
    let Some(view) = view else {
        return outliers;
    };
    let baseline_host = settings
        .baseline
        .as_ref()
        .filter(|b| b.key == "host")
        .map(|b| b.value.as_str());
    let columns = Columns::of(cells, baseline_host);
    outliers
        .into_iter()
        .filter(|o| {
            let Some(c) = cells.iter().find(|c| is_outlier_of(o, c, &o.metric)) else {
                return true;
            };
            let col = columns.of_cell(c);
            let row = view
                .rows
                .iter_mut()
                .find(|r| r.metric == o.metric && r.params.iter().eq(c.configuration()));
            let Some(SideValue::Measured { ratio, outlier, .. }) =
                row.and_then(|r| r.values.get_mut(col))
            else {
                return true;
            };
            let contradicted = ratio.as_ref().is_some_and(SideRatio::no_difference);
            if contradicted {
                *outlier = false;
            }
            !contradicted
        })
        .collect()
}

/// A cell's repetitions of `metric`.
fn metric_values<'a>(c: &'a CellReport, metric: &str) -> Option<&'a [f64]> {
    c.metrics
        .iter()
        .find(|m| m.metric == metric)
        .map(|m| m.values.as_slice())
}

/// Whether `o` is the fleet outlier of `c` on `metric`: its host, drive and configuration.
fn is_outlier_of(o: &super::judge::FleetOutlier, c: &CellReport, metric: &str) -> bool {
    o.host == c.host
        && o.device == device(c)
        && o.metric == metric
        && o.group == super::judge::group_of(c)
}

fn value_of(c: &CellReport, metric: &str, outliers: &[super::judge::FleetOutlier]) -> SideValue {
    if let Some(m) = c.metrics.iter().find(|m| m.metric == metric) {
        return SideValue::Measured {
            median: m.stats.median,
            ci: m.stats.median_ci,
            ci_level: m.stats.median_ci_level,
            n: m.stats.n,
            ratio: None,
            outlier: outliers.iter().any(|o| is_outlier_of(o, c, metric)),
        };
    }
    if let Some(u) = c.unmeasured.iter().find(|u| u.metric == metric) {
        return SideValue::NotMeasured {
            why: format!("not measured ×{}: {}", u.count, u.reason),
        };
    }
    SideValue::NotMeasured {
        why: if c.failed > 0 {
            format!("{} failed", c.failed)
        } else {
            "no value".into()
        },
    }
}

/// How a format writes the pieces of a value of the view; `SideValue::text` puts them
/// together, the same way for every format.
pub(crate) trait ValueMarks {
    /// A median, as the format shows it.
    fn median(&self, v: f64) -> String;
    /// An end of the interval, as the format shows it.
    fn bound(&self, v: f64) -> String;
    /// The interval, "(lo … hi)".
    fn interval(&self, text: String) -> String {
        text
    }
    fn ratio(&self, r: &SideRatio) -> String {
        r.text()
    }
    /// Text from the model (why a value is missing), escaped as the format needs.
    fn words(&self, text: &str) -> String {
        text.to_string()
    }
}

/// Plain text in one scale.
struct Plain<'a>(&'a Scale);

impl ValueMarks for Plain<'_> {
    fn median(&self, v: f64) -> String {
        self.0.show(v)
    }
    fn bound(&self, v: f64) -> String {
        self.0.bare(v)
    }
}

impl SideValue {
    /// "12.1 ms (11.9 … 12.4) ×1.43 (1.21–1.70) OUTLIER", "— (2 failed)", "—": a value of
    /// the view, its pieces written by `marks`.
    pub(crate) fn text(&self, marks: &impl ValueMarks) -> String {
        match self {
            SideValue::Measured {
                median,
                ci,
                ratio,
                outlier,
                ..
            } => {
                // The median first; its interval, ratio and flag may wrap under it.
                let mut t = marks.median(*median);
                if let Some((lo, hi)) = ci {
                    t.push(' ');
                    t.push_str(&marks.interval(format!(
                        "({} … {})",
                        marks.bound(*lo),
                        marks.bound(*hi)
                    )));
                }
                if let Some(x) = ratio {
                    t.push(' ');
                    t.push_str(&marks.ratio(x));
                }
                if *outlier {
                    t.push_str(" OUTLIER");
                }
                t
            }
            SideValue::NotMeasured { why } => format!("— ({})", marks.words(why)),
            SideValue::Absent => "—".into(),
        }
    }
}

/// The view as a header and rows of text for the markup formats. A row's values share one
/// unit, chosen for the row's reference value, so they can be compared by eye.
pub(crate) fn text(r: &Report, s: &SideBySide) -> (String, Vec<String>, Vec<Vec<String>>) {
    // The intervals' coverage, when every cell's is the same (it depends on n).
    let mut levels = s
        .rows
        .iter()
        .flat_map(|r| &r.values)
        .filter_map(|v| match v {
            SideValue::Measured { ci_level, .. } => *ci_level,
            _ => None,
        });
    let ci = match levels.next() {
        Some(first) if levels.all(|l| l == first) => {
            format!("{}% CI", stats::level_pct(first))
        }
        Some(_) => "CI; its coverage per cell in the tables below".to_string(),
        None => "no CI: too few repetitions".to_string(),
    };
    let title = format!(
        "side by side: median ({ci}); ×: Hodges–Lehmann ratio to {} (interval at its Holm step's level), ~ = no significant difference (Holm); unmarked where the runs are too few to decide it",
        reference_words(s)
    );
    let mut header: Vec<String> = super::configuration_names(&r.params).cloned().collect();
    header.push("metric".into());
    header.extend(s.columns.iter().cloned());
    let mut rows = Vec::new();
    let mut last: Option<&IndexMap<String, String>> = None;
    for row in &s.rows {
        let first = last != Some(&row.params);
        last = Some(&row.params);
        let mut cells: Vec<String> = header[..header.len() - s.columns.len() - 1]
            .iter()
            .map(|p| {
                if first {
                    row.params.get(p).cloned().unwrap_or_else(|| "-".into())
                } else {
                    String::new()
                }
            })
            .collect();
        cells.push(row.metric.clone());
        let scale = Scale::for_row(row);
        for v in &row.values {
            cells.push(v.text(&Plain(&scale)));
        }
        rows.push(cells);
    }
    (title, header, rows)
}

/// What the ratios are against: "alpha", "alpha (the first column; `report: { baseline:
/// { host } }` chooses)", with "its drive in the same position" when hosts ran on several.
pub fn reference_words(s: &SideBySide) -> String {
    let mut t = s.reference.clone();
    if s.columns.iter().any(|c| c.contains(' ')) {
        t.push_str("'s drive in the same position");
    }
    if s.baseline.is_none() {
        t.push_str(" (the first host; `report: { baseline: { host } }` chooses another)");
    }
    t
}

impl Scale {
    /// One unit for a row of the view, chosen by its median of medians.
    fn for_row(row: &SideRow) -> Scale {
        let medians: Vec<f64> = row
            .values
            .iter()
            .filter_map(|v| match v {
                SideValue::Measured { median, .. } => Some(median.abs()),
                _ => None,
            })
            .collect();
        Scale::for_values(&medians, &row.unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::MetricStats;
    use crate::spec::DEVICE;

    fn cell(host: &str, device: Option<&str>, bs: &str, wall: &[f64]) -> CellReport {
        let mut params = vec![("bs", bs)];
        params.extend(device.map(|d| (DEVICE, d)));
        CellReport::for_test(
            format!("{host}-{bs}"),
            host,
            &params,
            vec![MetricStats::of_values("wall", "s", wall)],
        )
    }

    const SIX: usize = 6;

    fn around(x: f64) -> Vec<f64> {
        (0..SIX).map(|i| x * (1.0 + i as f64 * 0.001)).collect()
    }

    /// Two hosts slow alike, four fast: the slow one that is not the reference stands apart
    /// from the rest by the peers' test, but the view finds it no different from the
    /// reference (decided, `~`). It is not marked an outlier, nor listed; the reference,
    /// with no ratio of its own, is both.
    #[test]
    fn an_outlier_is_never_marked_on_a_cell_its_ratio_finds_equal_to_the_reference() {
        let twelve =
            |x: f64| -> Vec<f64> { (0..12).map(|i| x * (1.0 + i as f64 * 0.001)).collect() };
        let cells = [
            cell("a", None, "4k", &twelve(0.015)),
            cell("b", None, "4k", &twelve(0.015)),
            cell("c", None, "4k", &twelve(0.010)),
            cell("d", None, "4k", &twelve(0.010)),
            cell("e", None, "4k", &twelve(0.010)),
            cell("f", None, "4k", &twelve(0.010)),
        ];
        let settings = ReportSpec::default();
        let outliers = crate::report::judge::fleet_outliers(&cells, &settings);
        let hosts = |o: &[crate::report::judge::FleetOutlier]| {
            o.iter().map(|o| o.host.clone()).collect::<Vec<_>>()
        };
        assert_eq!(
            hosts(&outliers),
            ["a", "b"],
            "the peers' test alone: {outliers:?}"
        );
        let mut view = build(&cells, &settings, &outliers, &[]);
        let kept = agreeing_outliers(view.as_mut(), &cells, &settings, outliers);
        assert_eq!(hosts(&kept), ["a"]);
        let view = view.expect("six hosts");
        let marks: Vec<(bool, Option<String>)> = view.rows[0]
            .values
            .iter()
            .map(|v| match v {
                SideValue::Measured { outlier, ratio, .. } => {
                    (*outlier, ratio.as_ref().map(SideRatio::text))
                }
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(marks[0], (true, None), "the reference: {marks:?}");
        let (b_marked, b_ratio) = &marks[1];
        assert!(
            !b_marked && b_ratio.as_deref().is_some_and(|t| t.ends_with(" ~")),
            "{marks:?}"
        );
        // No value of the view is marked OUTLIER beside a `~`.
        for (outlier, ratio) in &marks {
            assert!(
                !(*outlier && ratio.as_deref().is_some_and(|t| t.ends_with(" ~"))),
                "{marks:?}"
            );
        }
    }

    #[test]
    fn one_host_one_device_has_no_side_by_side() {
        let cells = [
            cell("a", None, "4k", &around(0.01)),
            cell("a", None, "1M", &around(0.02)),
        ];
        assert_eq!(build(&cells, &ReportSpec::default(), &[], &[]), None);
    }

    #[test]
    fn hosts_become_columns_with_ratios_to_the_baseline_host() {
        // beta's cell comes first; the baseline's column still leads.
        let cells = [
            cell("beta", None, "4k", &around(0.012)),
            cell("alpha", None, "4k", &around(0.010)),
            cell("alpha", None, "1M", &around(0.020)),
            // beta has no 1M cell at all.
        ];
        let settings = ReportSpec {
            baseline: Some(crate::spec::Baseline {
                key: "host".into(),
                value: "alpha".into(),
                line: 1,
                column: 1,
            }),
            ..ReportSpec::default()
        };
        let comparisons = crate::report::judge::compare_cells(&cells, &settings);
        let s = build(&cells, &settings, &[], &comparisons).expect("two hosts");
        assert_eq!(s.columns, ["alpha", "beta"]);
        assert_eq!(s.baseline.as_deref(), Some("alpha"));
        assert_eq!(s.rows.len(), 2, "one row per configuration and metric");
        let SideValue::Measured {
            ratio: Some(ratio), ..
        } = &s.rows[0].values[1]
        else {
            panic!("{:?}", s.rows[0]);
        };
        // The comparison's own estimate and verdict.
        assert_eq!(ratio.ratio, comparisons[0].row.ratio);
        assert!((ratio.ratio - 1.2).abs() < 1e-9, "{ratio:?}");
        assert!(ratio.significant, "{ratio:?}");
        assert_eq!(s.rows[1].values[1], SideValue::Absent);
        let report = Report {
            params: vec!["bs".into()],
            ..Report::default()
        };
        let (title, header, rows) = text(&report, &s);
        assert!(title.contains("ratio to alpha"), "{title}");
        assert_eq!(header, ["bs", "metric", "alpha", "beta"]);
        assert!(rows[0][2].starts_with("10.02 ms ("), "{:?}", rows[0]);
        assert!(
            rows[0][2].ends_with(')'),
            "the baseline has no ratio: {:?}",
            rows[0]
        );
        assert!(rows[0][3].starts_with("12.03 ms ("), "{:?}", rows[0]);
        assert!(rows[0][3].contains(" ×1.20 (1.20–1.20)"), "{:?}", rows[0]);
        assert_eq!(rows[1][3], "—");
    }

    #[test]
    fn devices_are_matched_by_position_and_ratios_go_to_the_first_host() {
        let cells = [
            cell("rc66", Some("/dev/sdb"), "4k", &around(0.001)),
            cell("rc66", Some("/dev/sdc"), "4k", &around(0.002)),
            cell("flygecko", Some("/dev/nvme0n1"), "4k", &around(0.004)),
            cell("flygecko", Some("/dev/nvme1n1"), "4k", &around(0.003)),
        ];
        let s = build(&cells, &ReportSpec::default(), &[], &[]).expect("four drives");
        assert_eq!(
            s.columns,
            [
                "rc66 /dev/sdb",
                "rc66 /dev/sdc",
                "flygecko /dev/nvme0n1",
                "flygecko /dev/nvme1n1"
            ]
        );
        assert_eq!(s.rows.len(), 1, "one configuration: {:?}", s.rows);
        // Without a baseline, against the first host's drive in the same position: its
        // own drives have no ratio.
        let ratios: Vec<Option<f64>> = s.rows[0]
            .values
            .iter()
            .map(|v| match v {
                SideValue::Measured { ratio, .. } => ratio.as_ref().map(|r| r.ratio),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(ratios[..2], [None, None]);
        assert!((ratios[2].unwrap() - 4.0).abs() < 1e-9, "{ratios:?}");
        assert!((ratios[3].unwrap() - 1.5).abs() < 1e-9, "{ratios:?}");
        let report = Report {
            params: vec!["bs".into(), DEVICE.into()],
            ..Report::default()
        };
        let (_, header, rows) = text(&report, &s);
        assert_eq!(header[..2], ["bs".to_string(), "metric".to_string()]);
        // One unit for the row, chosen by its values: µs would be wrong for 4 ms.
        assert!(rows[0][2].starts_with("1.00 ms ("), "{:?}", rows[0]);
        assert!(rows[0][4].starts_with("4.01 ms ("), "{:?}", rows[0]);
    }
}
