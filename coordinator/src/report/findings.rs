//! The answer first: what a report found, in a few lines at its top. The significant
//! differences ranked by size — each host against the reference host, each compared value
//! against the baseline (`report: { baseline }`), and each matrix parameter's effect where
//! the matrix varies it ("sync=fdatasync vs none: ×2.6 (2.4–2.8) at bs=4k, ×2.5 at bs=1M")
//! — then what was tested and found equal, then the verdicts.
//!
//! A finding prints no number of its own: a host's ratio is the side-by-side view's, a
//! baseline's the comparison's, so the findings and the rest of the report cannot disagree.
//! A parameter's effect is the same estimator (Hodges–Lehmann ratio of one cell's runs over
//! the other's, its interval, Mann–Whitney with Holm's correction over every parameter
//! effect of the report). Pure: a function of the report's cells and judgements.

use indexmap::IndexMap;
use serde::Serialize;

use super::side::{SideBySide, SideRatio, SideValue};
use super::{judge, CellReport};
use crate::spec::ReportSpec;
use crate::stats;

/// What the report found on one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Findings {
    /// The metric every finding is about (the comparisons' metric, else `wall`, else the
    /// cells' first).
    pub metric: String,
    /// Significant differences, largest first.
    pub differences: Vec<Finding>,
    /// Tested and found equal: no configuration shows a significant difference, and every
    /// one of them was decided (or all of them together were).
    pub no_difference: Vec<Finding>,
    /// Neither: a question whose every configuration is undecided or no difference, some
    /// of them estimates, with no verdict over all of them (one configuration only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub estimates: Vec<Finding>,
    /// The lines that are estimates, not verdicts (too few runs to pass their Holm step),
    /// said once for all of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undecided: Option<Undecided>,
}

/// Lines too few runs left undecided, said once (`stats::Undecided`).
pub use crate::stats::Undecided;

/// One question the report answers: a host against the reference, a value against the
/// baseline, or a parameter's value against its first — in every configuration it was
/// tested in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// "host=beta vs alpha", "sync=fdatasync vs none (conv=fdatasync vs notrunc)".
    pub what: String,
    pub kind: FindingKind,
    /// Each configuration it was tested in, largest effect first.
    pub at: Vec<Instance>,
    /// The question asked once over all its configurations, when there are several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overall: Option<Overall>,
}

/// One verdict over every configuration a finding was tested in: each configuration's
/// Mann–Whitney test combined by Stouffer's method (`stats::stouffer`), Holm's correction
/// over the report's findings. Five runs a side cannot be significant alone after Holm over
/// 24 tests (the exact test's smallest p is 0.008); the same ×3 in eight configurations is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Overall {
    pub configurations: usize,
    pub p_value: f64,
    pub holm_p: f64,
    pub significant: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// A host (or its drive) against the reference host: the side-by-side view's ratios.
    Host,
    /// `report: { baseline }`: the comparisons.
    Baseline,
    /// A matrix parameter's value against its first value.
    Parameter,
}

/// The effect in one configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Instance {
    /// What the two cells share: "bs=4k", "rc66 /dev/sdb size=4096"; "" when nothing.
    pub context: String,
    #[serde(flatten)]
    pub ratio: SideRatio,
    /// The two medians, candidate and reference (what the ratio is about, in `unit`).
    pub medians: (f64, f64),
    pub unit: String,
}

/// Shown per finding in text; the rest are counted ("and 9 more, ×1.9 … ×2.7").
pub const INSTANCES_SHOWN: usize = 3;
/// Findings of no difference shown with their estimates; the rest are named.
pub const EQUAL_SHOWN: usize = 4;
/// Differences shown in text before "and N more".
pub const DIFFERENCES_SHOWN: usize = 8;

impl Findings {
    pub fn is_empty(&self) -> bool {
        self.differences.is_empty() && self.no_difference.is_empty() && self.estimates.is_empty()
    }
}

impl Finding {
    fn significant(&self) -> bool {
        self.overall.as_ref().is_some_and(|o| o.significant)
            || self.at.iter().any(|i| i.ratio.significant)
    }

    /// Not significant, and not decided either: some configuration is an estimate and no
    /// verdict over all of them says "no difference".
    fn undecided(&self) -> bool {
        !self.significant()
            && self.overall.is_none()
            && self.at.iter().any(|i| i.ratio.too_few_runs.is_some())
    }

    /// The size that ranks it: the largest |ln ratio| of its significant instances (of all,
    /// when it is significant over all of them).
    fn size(&self) -> f64 {
        let overall = self.overall.as_ref().is_some_and(|o| o.significant);
        self.at
            .iter()
            .filter(|i| overall || i.ratio.significant)
            .map(|i| i.ratio.ratio.ln().abs())
            .fold(0.0, f64::max)
    }

    /// "sync=fdatasync vs none: ×2.61 (2.40–2.80) at bs=4k (57.19 ms vs 21.90 ms), ×2.50
    /// (…) at bs=1M".
    pub fn text(&self) -> String {
        // "and 1 more" would take the room of the one it hides.
        let shown = if self.at.len() == INSTANCES_SHOWN + 1 {
            self.at.len()
        } else {
            INSTANCES_SHOWN
        };
        let mut parts: Vec<String> = self
            .at
            .iter()
            .take(shown)
            .map(|i| {
                let mut t = i.ratio.text();
                if !i.context.is_empty() {
                    t.push_str(&format!(" at {}", i.context));
                }
                t.push_str(&format!(
                    " ({} vs {})",
                    super::human(i.medians.0, &i.unit),
                    super::human(i.medians.1, &i.unit)
                ));
                t
            })
            .collect();
        let rest = &self.at[self.at.len().min(shown)..];
        if !rest.is_empty() {
            let lo = rest
                .iter()
                .map(|i| i.ratio.ratio)
                .fold(f64::INFINITY, f64::min);
            let hi = rest.iter().map(|i| i.ratio.ratio).fold(0.0, f64::max);
            let significant = rest.iter().filter(|i| i.ratio.significant).count();
            // Estimates are neither: only decided lines are counted.
            let counted = if rest.iter().all(|i| i.ratio.too_few_runs.is_some()) {
                String::new()
            } else {
                format!(" ({significant} significant)")
            };
            parts.push(format!(
                "and {} more{counted}, ×{} … ×{}",
                rest.len(),
                super::side::ratio_digits(lo),
                super::side::ratio_digits(hi)
            ));
        }
        if let Some(o) = &self.overall {
            parts.push(if o.significant {
                format!(
                    "together significant over all {} configurations (Holm p {})",
                    o.configurations,
                    p_text(o.holm_p)
                )
            } else {
                format!(
                    "no significant difference over all {} configurations together",
                    o.configurations
                )
            });
        }
        format!("{}: {}", self.what, parts.join(", "))
    }

    /// "bs=1M vs 4k (6 configurations)": a finding of no difference, without numbers.
    pub fn equal_text(&self) -> String {
        match self.at.len() {
            1 if self.at[0].context.is_empty() => self.what.clone(),
            1 => format!("{} at {}", self.what, self.at[0].context),
            n => format!("{} ({n} configurations)", self.what),
        }
    }
}

/// "0.003", "2e-9".
fn p_text(p: f64) -> String {
    if p >= 0.001 {
        format!("{p:.3}")
    } else {
        format!("{p:.0e}")
    }
}

/// The comparisons' metric (`report: { metric }`, `wall` by default).
fn compared_metric(settings: &ReportSpec) -> &str {
    if settings.metric.is_empty() {
        "wall"
    } else {
        &settings.metric
    }
}

/// The metric findings are about: the comparisons' when `report: { metric }` names it,
/// else the workload's headline metric ([`headline_rank`]: an fsync loop's mean latency,
/// fio's rate, bonnie++'s block writes), else `wall`, else the cells' first.
pub fn key_metric(cells: &[CellReport], settings: &ReportSpec) -> Option<String> {
    if !settings.metric.is_empty() {
        return Some(settings.metric.clone());
    }
    let shown = || {
        cells
            .iter()
            .flat_map(|c| c.metrics.iter().filter(|m| m.same_as.is_none()))
    };
    if let Some((_, m)) = shown()
        .filter_map(|m| Some((headline_rank(&m.metric)?, m.metric.as_str())))
        .min_by_key(|(rank, _)| *rank)
    {
        return Some(m.to_string());
    }
    if shown().any(|m| m.metric == "wall") {
        return Some("wall".into());
    }
    shown().next().map(|m| m.metric.clone())
}

/// A workload's headline metrics, most telling first: fsync latency, fio rates and
/// completion latency, bonnie++ block throughput, compilebench throughput.
pub(crate) fn headline_rank(m: &str) -> Option<u8> {
    if m == "latency.mean" || m.ends_with(".iops") {
        Some(0)
    } else if m.ends_with(".bw") || ["put_block", "get_block", "rewrite"].contains(&m) {
        Some(1)
    } else if m.ends_with("clat.mean") || m == "sync.lat.mean" {
        Some(2)
    } else if m.ends_with(".throughput") && !m.starts_with("native") {
        Some(3)
    } else {
        None
    }
}

pub fn build(
    cells: &[CellReport],
    settings: &ReportSpec,
    comparisons: &[judge::JudgedComparison],
    side: Option<&SideBySide>,
) -> Findings {
    let Some(metric) = key_metric(cells, settings) else {
        return Findings::default();
    };
    let mut all: Vec<Finding> = Vec::new();
    let by_id: IndexMap<&str, &CellReport> =
        cells.iter().map(|c| (c.cell_id.as_str(), c)).collect();
    let median = |c: &CellReport| {
        c.metrics
            .iter()
            .find(|m| m.metric == metric)
            .map(|m| (m.stats.median, m.unit.clone()))
    };

    // The baseline's comparisons, grouped by what they compare.
    let mut groups: IndexMap<String, Finding> = IndexMap::new();
    for c in comparisons.iter().filter(|c| c.row.metric == metric) {
        let (Some(ratio), Some(pair)) = (SideRatio::of_comparison(c), c.cells.as_ref()) else {
            continue;
        };
        let (Some(cand), Some(base)) = (
            by_id.get(pair.candidate.as_str()),
            by_id.get(pair.baseline.as_str()),
        ) else {
            continue;
        };
        let (Some((m1, unit)), Some((m0, _))) = (median(cand), median(base)) else {
            continue;
        };
        let what = format!("{}={} vs {}", c.row.key, c.row.candidate, c.row.baseline);
        let kind = if c.row.key == "host" {
            FindingKind::Host
        } else {
            FindingKind::Baseline
        };
        groups
            .entry(what.clone())
            .or_insert_with(|| Finding {
                what,
                overall: None,
                kind,
                at: Vec::new(),
            })
            .at
            .push(Instance {
                context: c.row.context.clone(),
                ratio,
                medians: (m1, m0),
                unit,
            });
    }
    // The hosts against the reference host on any other metric, as the view says.
    if let Some(s) = side.filter(|s| s.baseline.is_none() || metric != compared_metric(settings)) {
        for row in s.rows.iter().filter(|r| r.metric == metric) {
            for (col, v) in row.values.iter().enumerate() {
                let SideValue::Measured {
                    median,
                    ratio: Some(ratio),
                    ..
                } = v
                else {
                    continue;
                };
                let Some(SideValue::Measured { median: m0, .. }) =
                    row.against[col].map(|r| &row.values[r])
                else {
                    continue;
                };
                let what = format!("host={} vs {}", s.columns[col], s.reference);
                let context = row
                    .params
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ");
                groups
                    .entry(what.clone())
                    .or_insert_with(|| Finding {
                        what,
                        overall: None,
                        kind: FindingKind::Host,
                        at: Vec::new(),
                    })
                    .at
                    .push(Instance {
                        context,
                        ratio: ratio.clone(),
                        medians: (*median, *m0),
                        unit: row.unit.clone(),
                    });
            }
        }
    }
    all.extend(groups.into_values());
    all.extend(parameter_effects(cells, settings, &metric));
    // Each question over all its configurations, Holm over the questions.
    let combined: Vec<(usize, usize, f64)> = all
        .iter()
        .enumerate()
        .filter(|(_, f)| f.at.len() > 1)
        .filter_map(|(i, f)| {
            let tests: Vec<(f64, f64)> =
                f.at.iter()
                    .map(|x| (x.ratio.p_value, x.ratio.ratio.ln()))
                    .collect();
            Some((i, f.at.len(), stats::stouffer(&tests)?))
        })
        .collect();
    let ps: Vec<f64> = combined.iter().map(|(_, _, p)| *p).collect();
    for ((i, k, p), holm_p) in combined.into_iter().zip(stats::holm(&ps)) {
        all[i].overall = Some(Overall {
            configurations: k,
            p_value: p,
            holm_p,
            significant: holm_p <= stats::ALPHA,
        });
    }
    for f in &mut all {
        f.at.sort_by(|a, b| {
            (b.ratio.significant, b.ratio.ratio.ln().abs())
                .partial_cmp(&(a.ratio.significant, a.ratio.ratio.ln().abs()))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
    }
    let undecided = Undecided::of(
        all.iter()
            .flat_map(|f| f.at.iter().map(|i| i.ratio.too_few_runs)),
    );
    let (mut differences, rest): (Vec<Finding>, Vec<Finding>) =
        all.into_iter().partition(Finding::significant);
    let (estimates, no_difference): (Vec<Finding>, Vec<Finding>) =
        rest.into_iter().partition(Finding::undecided);
    differences.sort_by(|a, b| {
        b.size()
            .partial_cmp(&a.size())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    Findings {
        metric,
        differences,
        no_difference,
        estimates,
        undecided,
    }
}

/// Each matrix parameter's effect: every pair of cells on the same host (and drive) that
/// differ in this parameter alone — and in parameters it decides, as `include:` ties
/// `conv` to `sync` — its value against the parameter's first value. One Holm family.
fn parameter_effects(cells: &[CellReport], settings: &ReportSpec, metric: &str) -> Vec<Finding> {
    let baseline_key = settings.baseline.as_ref().map(|b| b.key.as_str());
    // Parameters in order, each with its values in order of appearance.
    let mut values: IndexMap<&str, Vec<&str>> = IndexMap::new();
    for c in cells {
        for (k, v) in &c.params {
            let list = values.entry(k.as_str()).or_default();
            if !list.contains(&v.as_str()) {
                list.push(v);
            }
        }
    }
    let varied: Vec<&str> = values
        .iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(k, _)| *k)
        .collect();
    // `q` is decided by `p` when each value of `p` comes with one value of `q`.
    let decides = |p: &str, q: &str| {
        let mut seen: IndexMap<&str, &str> = IndexMap::new();
        cells
            .iter()
            .all(|c| match (c.params.get(p), c.params.get(q)) {
                (Some(a), Some(b)) => *seen.entry(a.as_str()).or_insert(b.as_str()) == b.as_str(),
                _ => true,
            })
    };
    // (finding, context, baseline, candidate) of each comparison asked for.
    let mut asked: Vec<(usize, String, &super::MetricStats, &super::MetricStats)> = Vec::new();
    let mut findings: Vec<Finding> = Vec::new();
    for (i, p) in varied.iter().enumerate() {
        if Some(*p) == baseline_key {
            continue;
        }
        // A parameter an earlier one decides and that decides it back is the same
        // question under another name (`conv` with `sync`): asked once, named in the label.
        if varied[..i].iter().any(|q| decides(q, p) && decides(p, q)) {
            continue;
        }
        let tied: Vec<&str> = varied
            .iter()
            .filter(|q| *q != p && decides(p, q))
            .copied()
            .collect();
        let first = values[*p][0];
        // Cells keyed by everything but p and what p decides.
        let key = |c: &CellReport| -> (String, Vec<(String, String)>) {
            let rest = c
                .params
                .iter()
                .filter(|(k, _)| k.as_str() != *p && !tied.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            (c.host.clone(), rest)
        };
        let hosts = cells
            .iter()
            .map(|c| c.host.as_str())
            .collect::<std::collections::HashSet<_>>()
            .len();
        for value in &values[*p][1..] {
            let mut what = format!("{p}={value} vs {first}");
            let tied_words: Vec<String> = tied
                .iter()
                .filter_map(|q| {
                    let of = |v: &str| {
                        cells
                            .iter()
                            .find(|c| c.params.get(*p).map(String::as_str) == Some(v))?
                            .params
                            .get(*q)
                            .cloned()
                    };
                    Some(format!("{q}={} vs {}", of(value)?, of(first)?))
                })
                .collect();
            if !tied_words.is_empty() {
                what.push_str(&format!(" ({})", tied_words.join(", ")));
            }
            let at = findings.len();
            findings.push(Finding {
                what,
                overall: None,
                kind: FindingKind::Parameter,
                at: Vec::new(),
            });
            for cand in cells
                .iter()
                .filter(|c| c.params.get(*p).map(String::as_str) == Some(value))
            {
                let Some(base) = cells.iter().find(|b| {
                    b.params.get(*p).map(String::as_str) == Some(first) && key(b) == key(cand)
                }) else {
                    continue;
                };
                let (Some(mc), Some(mb)) = (metric_of(cand, metric), metric_of(base, metric))
                else {
                    continue;
                };
                let (host, rest) = key(cand);
                let mut context: Vec<String> = Vec::new();
                if hosts > 1 {
                    context.push(host);
                }
                context.extend(rest.into_iter().map(|(k, v)| format!("{k}={v}")));
                asked.push((at, context.join(" "), mb, mc));
            }
        }
    }
    // One family, each line at its Holm step (the tests are made on every core: each
    // compares two cells' values whole; a million-sample report's 99 comparisons of 1,666
    // values each took a tenth of it).
    let pairs: Vec<(&[f64], &[f64])> = asked
        .iter()
        .map(|(_, _, mb, mc)| (mb.values.as_slice(), mc.values.as_slice()))
        .collect();
    let decided = stats::decide_family(&pairs);
    for ((at, context, mb, mc), d) in asked.into_iter().zip(decided) {
        let Some(d) = d else { continue };
        findings[at].at.push(Instance {
            context,
            ratio: SideRatio::decided(&d),
            medians: (mc.stats.median, mb.stats.median),
            unit: mc.unit.clone(),
        });
    }
    findings.retain(|f| !f.at.is_empty());
    findings
}

fn metric_of<'a>(c: &'a CellReport, metric: &str) -> Option<&'a super::MetricStats> {
    c.metrics.iter().find(|m| m.metric == metric)
}
