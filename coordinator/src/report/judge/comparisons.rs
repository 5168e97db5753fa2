//! Comparisons of cells against a baseline: ratio and penalty with a distribution-free
//! interval, decided with Holm's correction over all the report's comparisons. Also the
//! pending rows and the family judgement that `campaigns` (`platter compare`) shares.

use serde::Serialize;

use super::{merged, values};
use crate::report::CellReport;
use crate::spec::{ReportSpec, DEVICE};
use crate::stats;

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

/// What a row compares, written once by each caller; its numbers come later.
pub(super) struct Compared {
    pub host: String,
    pub context: String,
    pub key: String,
    pub baseline: String,
    pub candidate: String,
}

impl Compared {
    /// The row of this comparison on `metric` with its numbers: no interval, not
    /// significant, no text yet.
    fn row(self, metric: &str, ratio: f64, penalty_pct: f64) -> ComparisonRow {
        ComparisonRow {
            host: self.host,
            context: self.context,
            key: self.key,
            baseline: self.baseline,
            candidate: self.candidate,
            metric: metric.to_string(),
            ratio,
            penalty_pct,
            ci_pct: None,
            significant: false,
            text: String::new(),
        }
    }
}

fn key_of(cell: &CellReport, key: &str) -> Option<String> {
    match key {
        "host" => Some(cell.host.clone()),
        k => cell.params.get(k).cloned(),
    }
}

/// Everything that identifies a cell except `key` (and except `device` when the compared
/// cells' devices have different names: the comparison's label names both then).
pub(super) fn context(cell: &CellReport, key: &str, same_device: bool) -> String {
    let mut parts: Vec<String> = Vec::new();
    if key != "host" {
        parts.push(cell.host.clone());
    }
    let params: Vec<(&String, &String)> = if same_device {
        cell.params.iter().collect()
    } else {
        cell.configuration().collect()
    };
    parts.extend(
        params
            .into_iter()
            .filter(|(k, _)| *k != key)
            .map(|(k, v)| format!("{k}={v}")),
    );
    parts.join(" ")
}

/// A comparison row with what the wire row has no room for: the interval's real
/// coverage and the test behind "significant".
///
/// A report's comparisons ([`compare_cells`]) are decided line by line at Holm's steps
/// (`stats::decide_family`): the interval is at its step's level, so `significant` holds
/// exactly when it excludes ×1; a line whose runs cannot reach its step is an estimate
/// (`too_few_runs`), neither significant nor "no difference". `platter compare` and
/// `platter history` ([`super::compare_campaigns`]) decide theirs the same way.
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
    /// Set when the line is an estimate: its runs are too few for its Holm step, so
    /// `significant` says nothing of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub too_few_runs: Option<stats::TooFewRuns>,
    /// False when no comparison could be made: the cell has no counterpart, or one side
    /// has no usable values of the metric. `text` says which; the numbers are NaN.
    pub compared: bool,
    /// The candidate cell and its baseline cell (ids), when both exist: what the
    /// side-by-side view and the findings take this comparison's numbers by (when
    /// `compared`). None for a cell without a counterpart. Written (JSON) only for a
    /// comparison made.
    #[serde(skip_serializing_if = "ComparedCells::unmade")]
    pub cells: Option<ComparedCells>,
}

/// The two cells of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparedCells {
    pub candidate: String,
    pub baseline: String,
    /// Both had values of the metric: the comparison was made (`JudgedComparison::compared`).
    #[serde(skip)]
    pub made: bool,
}

/// A cell that a comparison found no counterpart for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnmatchedCell {
    pub host: String,
    pub params: indexmap::IndexMap<String, String>,
}

impl UnmatchedCell {
    pub(super) fn of(cell: &CellReport) -> UnmatchedCell {
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
pub(super) struct Pending<'a> {
    row: ComparisonRow,
    label: String,
    test: Option<stats::Comparison>,
    /// The values tested, baseline and candidate (with `test`).
    values: Option<(&'a [f64], &'a [f64])>,
    compared: bool,
    cells: Option<ComparedCells>,
}

/// A row that stands for a comparison not made, with the reason in its text.
fn not_compared<'a>(what: Compared, metric: &str, text: String) -> Pending<'a> {
    let mut row = what.row(metric, f64::NAN, f64::NAN);
    row.text = text;
    Pending {
        row,
        label: String::new(),
        test: None,
        values: None,
        compared: false,
        cells: None,
    }
}

impl ComparedCells {
    fn of(candidate: &CellReport, baseline: &CellReport, made: bool) -> ComparedCells {
        ComparedCells {
            candidate: candidate.cell_id.clone(),
            baseline: baseline.cell_id.clone(),
            made,
        }
    }

    /// No cells, or cells whose comparison was not made.
    fn unmade(cells: &Option<ComparedCells>) -> bool {
        cells.as_ref().is_none_or(|c| !c.made)
    }
}

/// The comparison of `cell` with `base` on `metric`; a row saying so when either has no
/// usable values of it.
pub(super) fn pending<'a>(
    what: Compared,
    base: &'a CellReport,
    cell: &'a CellReport,
    metric: &str,
    label: String,
) -> Pending<'a> {
    let missing = |compared, why: &str| Pending {
        cells: Some(ComparedCells::of(cell, base, false)),
        ..not_compared(
            compared,
            metric,
            format!("{label}: not compared: {why} of {metric} on both sides"),
        )
    };
    if crate::report::MergedLatency::is_merged_name(metric) {
        // One value per cell over all its operations: a ratio, no interval.
        let (Some(b), Some(c)) = (merged(base, metric), merged(cell, metric)) else {
            return missing(what, "no merged per-operation value");
        };
        if b <= 0.0 || !b.is_finite() || !c.is_finite() {
            return missing(what, "no positive finite value");
        }
        let ratio = c / b;
        let mut row = what.row(metric, ratio, (ratio - 1.0) * 100.0);
        row.text = format!(
            "{label} penalty {:.1}% ({metric} over all operations of all runs: one value per cell, no interval)",
            row.penalty_pct
        );
        return Pending {
            row,
            label,
            test: None,
            values: None,
            compared: true,
            cells: Some(ComparedCells::of(cell, base, true)),
        };
    }
    let tested = values(base, metric).zip(values(cell, metric));
    let Some(c) = tested.and_then(|(b, c)| stats::compare(b, c)) else {
        return missing(what, "no positive values");
    };
    let mut row = what.row(metric, c.ratio, c.penalty_pct);
    row.ci_pct = c.ci_pct;
    Pending {
        row,
        label,
        test: Some(c),
        values: tested,
        compared: true,
        cells: Some(ComparedCells::of(cell, base, true)),
    }
}

/// Decides every comparison of a report together: Holm's correction over those with
/// a test, so that "significant" anywhere in the report is wrong with probability at
/// most 5% in all, not 5% each; each line's interval at its Holm step's level, or the line
/// an estimate where its runs cannot reach that level (`stats::decide_family`).
pub(super) fn judge_family(pending: Vec<Pending<'_>>) -> Vec<JudgedComparison> {
    let ps: Vec<f64> = pending
        .iter()
        .filter_map(|p| p.test.as_ref().map(|t| t.p_value))
        .collect();
    let family = ps.len();
    let mut adjusted = stats::holm(&ps).into_iter();
    let pairs: Vec<(&[f64], &[f64])> = pending.iter().filter_map(|p| p.values).collect();
    let mut decisions = stats::decide_family(&pairs).into_iter();
    pending
        .into_iter()
        .map(|p| {
            let Pending {
                mut row,
                label,
                test,
                values,
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
                    too_few_runs: None,
                    compared,
                    cells,
                };
            };
            let holm_p = adjusted.next().unwrap_or(1.0);
            let decision = values.and_then(|_| decisions.next().flatten());
            if let Some(d) = decision {
                row.ci_pct = d.comparison.ci_pct;
                row.significant = d.significant;
                row.text = decided_text(&label, &d);
                return JudgedComparison {
                    row,
                    ci_level: d.comparison.ci_level,
                    p_value: Some(t.p_value),
                    holm_p: Some(d.holm_p),
                    family,
                    too_few_runs: d.too_few_runs(),
                    compared,
                    cells,
                };
            }
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
                too_few_runs: None,
                compared,
                cells,
            }
        })
        .collect()
}

/// A line decided at its Holm step, in words: "host=b vs a penalty 11.0% (99.79% CI 8.2% …
/// 13.9%)", with ": no significant difference after Holm's correction for 8 comparisons"
/// when its interval holds 0, or, for an estimate, "(96.8% CI …; an estimate)".
fn decided_text(label: &str, d: &stats::Decision) -> String {
    let c = &d.comparison;
    let (Some((lo, hi)), Some(level)) = (c.ci_pct, c.ci_level) else {
        return format!(
            "{label} penalty {:.1}% (too few repetitions for an interval)",
            c.penalty_pct
        );
    };
    let level_words = stats::level_text(level);
    let interval = format!("{level_words} CI {lo:.1}% … {hi:.1}%");
    let family = d.family;
    match d.too_few_runs() {
        // Why is said once for all the estimates (`stats::Undecided`).
        Some(_) => format!("{label} penalty {:.1}% ({interval}; an estimate)", c.penalty_pct),
        None if d.significant => format!("{label} penalty {:.1}% ({interval})", c.penalty_pct),
        None => format!(
            "{label} penalty {:.1}% ({interval}): no significant difference after Holm's correction for {family} comparisons",
            c.penalty_pct
        ),
    }
}

/// The device names of `host`'s cells in plan order: the planner makes a host's cells
/// device by device, in the order the host's selected devices were found, and reports
/// read them in that order.
fn devices_of<'a>(cells: &'a [CellReport], host: &str) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for c in cells.iter().filter(|c| c.host == host) {
        if let Some(d) = c.device() {
            if !out.contains(&d) {
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
pub(super) fn pair_devices<'a>(devices: &[&'a str], base: &[&'a str]) -> Vec<(&'a str, &'a str)> {
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
    match cell.device() {
        Some(d) => format!("{} {d}", cell.host),
        None => cell.host.clone(),
    }
}

/// Whether two cells share every parameter except `device`.
fn same_but_device(a: &CellReport, b: &CellReport) -> bool {
    let rest = |c: &CellReport| {
        c.configuration()
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
        let what = |context: String| Compared {
            host: cell.host.clone(),
            context,
            key: b.key.clone(),
            baseline: b.value.clone(),
            candidate: candidate.clone(),
        };
        let base = if by_host {
            let pairs = pairings
                .entry(cell.host.as_str())
                .or_insert_with(|| pair_devices(&devices_of(cells, &cell.host), &base_devices));
            let device = cell.device();
            let base_device = match device {
                Some(d) => pairs.iter().find(|p| p.0 == d).map(|p| Some(p.1)),
                None => Some(None),
            };
            base_device.and_then(|bd| {
                cells.iter().enumerate().find(|(_, c)| {
                    c.host == b.value && c.device() == bd && same_but_device(c, cell)
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
                .filter(|(_, c)| b.key == DEVICE || c.device() == cell.device())
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
            rows.push(not_compared(
                what(context(cell, &b.key, true)),
                metric,
                text,
            ));
            continue;
        };
        used.insert((cell.host.as_str(), i));
        let same_device = base.device() == cell.device();
        let label = if by_host && !same_device {
            format!("host={} vs {}", host_device(cell), host_device(base))
        } else {
            format!("{}={} vs {}", b.key, candidate, b.value)
        };
        let what = what(context(cell, &b.key, same_device));
        rows.push(pending(what, base, cell, metric, label));
    }
    // By host: the baseline's cells that some other host has no counterpart for.
    for (host, _) in &pairings {
        for (i, base) in cells.iter().enumerate() {
            if base.host != b.value || used.contains(&(*host, i)) {
                continue;
            }
            let what = Compared {
                host: base.host.clone(),
                context: context(base, &b.key, true),
                key: b.key.clone(),
                baseline: b.value.clone(),
                candidate: host.to_string(),
            };
            let text = format!("{}: no cell on {host} compared with it", host_device(base));
            rows.push(not_compared(what, metric, text));
        }
    }
    judge_family(rows)
}
