//! The page's charts with their captions and legends: forest plots of ratios, a
//! dot-and-interval chart per metric, latency percentile panels, latency against size.
//! `charts` draws the SVG; this decides what goes in each and what the figure says, as
//! values for `templates/report/`. Writes no HTML.

use indexmap::IndexMap;

use super::super::side::{SideBySide, SideValue};
use super::super::{CellReport, MetricStats};
use super::charts::{self, Axis, Dot, DotPlot, Series, Unit};
use super::{
    cell_label, find_metric, parse_size, slug, Text, View, LATENCY_METRICS, PANELS_SHOWN,
    SIZE_PARAM,
};

/// A chart's SVG panels, or why it could not be drawn.
pub(super) type Chart = Result<Vec<String>, Text>;

/// A chart with its caption and legend (`id` empty: a panel of a grid).
pub(super) struct Figure {
    pub(super) id: String,
    pub(super) caption: Text,
    pub(super) chart: Chart,
    pub(super) legend: Option<Legend>,
}

/// A legend: a swatch (a dot, or a line) per entry, and the ring's meaning if any is drawn.
pub(super) struct Legend {
    pub(super) line: bool,
    /// (colour, label).
    pub(super) entries: Vec<(String, Text)>,
    pub(super) ring: Option<Text>,
}

impl Legend {
    /// The legend of `entries` (palette index, label); none when one entry and no ring
    /// need no key (the caption names it).
    fn of(entries: &[(usize, String)], line: bool, ring: Option<&str>) -> Option<Legend> {
        if entries.len() < 2 && ring.is_none() {
            return None;
        }
        Some(Legend {
            line,
            entries: entries
                .iter()
                .map(|(colour, label)| (charts::hex(charts::colour(*colour)), Text::new(label)))
                .collect(),
            ring: ring.map(Text::new),
        })
    }
}

/// The plot's panels, or why it could not be drawn.
fn dot_chart(plot: &DotPlot) -> Chart {
    charts::dot_svgs(plot).map_err(|e| Text::new(e.to_string()))
}

/// "93.8% " or "93.8–96.9% ": the whiskers' real coverage.
fn coverage(levels: impl Iterator<Item = f64>) -> String {
    let (low, high) = levels.fold((f64::INFINITY, 0.0f64), |(lo, hi), l| {
        (lo.min(l), hi.max(l))
    });
    if high == 0.0 {
        String::new()
    } else if low == high {
        format!("{}% ", crate::stats::level_pct(low))
    } else {
        format!(
            "{}–{}% ",
            crate::stats::level_pct(low),
            crate::stats::level_pct(high)
        )
    }
}

/// Comparisons with the baseline (judge: Hodges–Lehmann ratio with its interval), one
/// forest per metric; and, for several hosts or drives, each column's ratio to the
/// reference for the key metrics.
pub(super) struct Forests {
    pub(super) heading: Text,
    pub(super) figures: Vec<Figure>,
    /// (context, why) of each comparison that could not be made.
    pub(super) uncompared: Vec<(Text, Text)>,
    pub(super) side_figures: Vec<Figure>,
}

impl Forests {
    pub(super) fn of(v: &View<'_>) -> Option<Forests> {
        let r = v.r;
        let side = r.side_by_side.as_ref();
        if side.is_none() && r.comparisons.is_empty() {
            return None;
        }
        let heading = match (side, side.and_then(|s| s.baseline.as_deref())) {
            (Some(s), None) if r.comparisons.is_empty() => {
                format!("Against the first host ({})", s.reference)
            }
            (_, None) => "Against the baseline".to_string(),
            (_, Some(b)) => format!("Against the baseline ({b})"),
        };
        let compared: Vec<_> = r.comparisons.iter().filter(|c| c.compared).collect();
        let mut metrics: Vec<&str> = Vec::new();
        for c in &compared {
            if !metrics.contains(&c.row.metric.as_str()) {
                metrics.push(&c.row.metric);
            }
        }
        Some(Forests {
            heading: Text::new(heading),
            figures: metrics
                .into_iter()
                .map(|metric| baseline_forest(&compared, metric))
                .collect(),
            uncompared: r
                .comparisons
                .iter()
                .filter(|c| !c.compared)
                .map(|c| (Text::new(&c.row.context), Text::new(&c.row.text)))
                .collect(),
            side_figures: side.map_or(Vec::new(), |s| {
                v.key_metrics()
                    .into_iter()
                    .filter_map(|metric| side_forest(v, s, metric))
                    .collect()
            }),
        })
    }
}

/// One metric's comparisons with the baseline: candidate over baseline per row.
fn baseline_forest(compared: &[&super::super::judge::JudgedComparison], metric: &str) -> Figure {
    let rows: Vec<_> = compared.iter().filter(|c| c.row.metric == metric).collect();
    let plot = DotPlot {
        rows: rows
            .iter()
            .map(|c| {
                // What differs first: a long context is what truncation cuts.
                let what = format!("{}={} vs {}", c.row.key, c.row.candidate, c.row.baseline);
                if c.row.context.is_empty() {
                    what
                } else {
                    format!("{what} · {}", c.row.context)
                }
            })
            .collect(),
        series: 1,
        dots: rows
            .iter()
            .enumerate()
            .map(|(i, c)| Dot {
                row: i,
                series: 0,
                colour: match (c.row.significant, c.too_few_runs) {
                    (true, _) => 3,
                    (false, Some(_)) => 1,
                    (false, None) => 0,
                },
                value: c.row.ratio,
                interval: c
                    .row
                    .ci_pct
                    .map(|(lo, hi)| (1.0 + lo / 100.0, 1.0 + hi / 100.0)),
                ring: false,
                faint: !c.row.significant,
            })
            .collect(),
        axis: Axis::Ratio,
        title: format!("{metric}: ratio to the baseline"),
    };
    let cov = coverage(rows.iter().filter_map(|c| c.ci_level));
    let mut entries = vec![
        (3, "significant after Holm's correction".to_string()),
        (0, "no significant difference".to_string()),
    ];
    if rows.iter().any(|c| c.too_few_runs.is_some()) {
        entries.push((
            1,
            "an estimate: too few runs to decide it alone".to_string(),
        ));
    }
    Figure {
        id: format!("forest-{}", slug(metric)),
        caption: Text::new(format!(
            "{metric}: candidate over baseline (Hodges–Lehmann ratio), whiskers = {cov}CI (at its Holm step's level where decided), line at 1× = no difference"
        )),
        chart: dot_chart(&plot),
        legend: Legend::of(&entries, false, None),
    }
}

/// Each column's median over the reference's (the baseline column, or the columns'
/// median) per configuration: a forest of the side-by-side ratios; none without a ratio.
fn side_forest(v: &View<'_>, s: &SideBySide, metric: &str) -> Option<Figure> {
    let rows: Vec<_> = s.rows.iter().filter(|r| r.metric == metric).collect();
    let mut labels = Vec::new();
    let mut dots = Vec::new();
    for row in &rows {
        let mut any = false;
        for (i, x) in row.values.iter().enumerate() {
            let SideValue::Measured {
                ratio: Some(ratio),
                outlier,
                ..
            } = x
            else {
                continue;
            };
            let col = v
                .columns
                .iter()
                .position(|c| *c == s.columns[i])
                .unwrap_or(i);
            dots.push(Dot {
                row: labels.len(),
                series: col,
                colour: col,
                value: ratio.ratio,
                interval: ratio.ratio_ci,
                ring: *outlier,
                faint: !ratio.significant,
            });
            any = true;
        }
        if any {
            let cfg: Vec<String> = row.params.iter().map(|(k, x)| format!("{k}={x}")).collect();
            labels.push(if cfg.is_empty() {
                "(one configuration)".to_string()
            } else {
                cfg.join(" ")
            });
        }
    }
    if dots.is_empty() {
        return None;
    }
    let reference = super::super::side::reference_words(s);
    let estimates = rows.iter().flat_map(|r| &r.values).any(
        |x| matches!(x, SideValue::Measured { ratio: Some(r), .. } if r.too_few_runs.is_some()),
    );
    let estimates = if estimates {
        " or too few runs to decide it alone (an estimate, its own 95% interval)"
    } else {
        ""
    };
    // Only the columns with a ratio take a lane of a row (the reference has none): one
    // compared host sits on its row's label, not between two.
    let mut with_dots: Vec<usize> = dots.iter().map(|d| d.series).collect();
    with_dots.sort_unstable();
    with_dots.dedup();
    for d in &mut dots {
        d.series = with_dots.iter().position(|c| *c == d.series).unwrap_or(0);
    }
    let plot = DotPlot {
        rows: labels,
        series: with_dots.len(),
        dots,
        axis: Axis::Ratio,
        title: format!("{metric}: ratio"),
    };
    let entries: Vec<(usize, String)> = v.columns.iter().cloned().enumerate().collect();
    let ring = plot
        .dots
        .iter()
        .any(|d| d.ring)
        .then_some("outlier of the fleet");
    Some(Figure {
        id: format!("side-forest-{}", slug(metric)),
        caption: Text::new(format!(
            "{metric}: each host/drive over {reference} (Hodges–Lehmann ratio of their runs); whiskers = its interval at its Holm step's level; hollow = no significant difference after Holm{estimates}; line at 1×"
        )),
        chart: dot_chart(&plot),
        legend: Legend::of(&entries, false, ring),
    })
}

/// One dot-and-interval chart per metric: a row per configuration, a colour per host or
/// drive. Key metrics open, the rest (`rest` of them) folded.
pub(super) struct MetricCharts {
    pub(super) open: Vec<Figure>,
    pub(super) folded: Vec<Figure>,
    pub(super) rest: usize,
}

impl MetricCharts {
    pub(super) fn of(v: &View<'_>) -> Option<MetricCharts> {
        if v.metrics.is_empty() {
            return None;
        }
        let keys = v.key_metrics();
        let entries: Vec<(usize, String)> = v.columns.iter().cloned().enumerate().collect();
        let others: Vec<&str> = v
            .metrics
            .iter()
            .map(String::as_str)
            .filter(|m| !keys.contains(m))
            .collect();
        let charts = |metrics: &[&str]| -> Vec<Figure> {
            metrics
                .iter()
                .filter_map(|m| metric_chart(v, m, &entries))
                .collect()
        };
        Some(MetricCharts {
            open: charts(&keys),
            folded: charts(&others),
            rest: others.len(),
        })
    }
}

/// A metric's chart; none when no cell has it.
fn metric_chart(v: &View<'_>, metric: &str, entries: &[(usize, String)]) -> Option<Figure> {
    // Rows: the configurations that have this metric, in order; no empty row.
    let mut rows: Vec<usize> = Vec::new();
    let mut found: Vec<(&CellReport, &MetricStats, usize, usize)> = Vec::new();
    for (c, (col, cfg)) in v.r.cells.iter().zip(&v.place) {
        let Some(m) = find_metric(c, metric).filter(|m| m.stats.median.is_finite()) else {
            continue;
        };
        let row = match rows.iter().position(|r| r == cfg) {
            Some(i) => i,
            None => {
                rows.push(*cfg);
                rows.len() - 1
            }
        };
        found.push((c, m, row, *col));
    }
    if found.is_empty() {
        return None;
    }
    let unit_name = found[0].1.unit.clone();
    let medians: Vec<f64> = found.iter().map(|(_, m, _, _)| m.stats.median).collect();
    let unit = Unit::for_values(&medians, &unit_name);
    let levels = found
        .iter()
        .filter(|(_, m, _, _)| m.stats.median_ci.is_some())
        .filter_map(|(_, m, _, _)| m.stats.median_ci_level);
    let cov = coverage(levels);
    let plot = DotPlot {
        rows: rows.iter().map(|i| v.configs[*i].clone()).collect(),
        series: v.columns.len(),
        dots: found
            .iter()
            .map(|(c, m, row, col)| Dot {
                row: *row,
                series: *col,
                colour: *col,
                value: m.stats.median,
                interval: m
                    .stats
                    .median_ci
                    .filter(|(lo, hi)| lo.is_finite() && hi.is_finite()),
                ring: v.is_outlier(c, metric),
                faint: false,
            })
            .collect(),
        axis: Axis::Values(unit),
        title: format!("{metric} median"),
    };
    let ring = plot
        .dots
        .iter()
        .any(|d| d.ring)
        .then_some("outlier of the fleet");
    let whiskers = if cov.is_empty() {
        "no CI: too few repetitions".to_string()
    } else {
        format!("whiskers = {cov}CI of the median")
    };
    Some(Figure {
        id: format!("dots-{}", slug(metric)),
        caption: Text::new(format!(
            "{metric}: median per configuration and host/drive, {whiskers}"
        )),
        chart: dot_chart(&plot),
        legend: Legend::of(entries, false, ring),
    })
}

/// One operation's latency percentiles in one cell: (quantile, seconds).
type Curve = Vec<(f64, f64)>;

/// The operations with latency percentiles: `latency` (the merged HDR histograms of every
/// operation of every run: fsync) and each fio `….p50` family (the median over the runs of
/// each run's percentile), per cell.
fn percentile_operations(v: &View<'_>) -> IndexMap<String, Vec<(usize, Curve)>> {
    let mut ops: IndexMap<String, Vec<(usize, Curve)>> = IndexMap::new();
    for (i, c) in v.r.cells.iter().enumerate() {
        if let Some(l) = c.latency.as_ref().filter(|l| l.curve.len() >= 2) {
            ops.entry("latency (every operation of every run)".into())
                .or_default()
                .push((i, l.curve.clone()));
        }
        for m in &c.metrics {
            let Some(prefix) = m.metric.strip_suffix(".p50") else {
                continue;
            };
            if m.unit != "s" {
                continue;
            }
            let curve: Curve = [(0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p99.9")]
                .into_iter()
                .filter_map(|(q, name)| {
                    let m = find_metric(c, &format!("{prefix}.{name}"))?;
                    (m.stats.median > 0.0).then_some((q, m.stats.median))
                })
                .collect();
            if curve.len() >= 2 {
                ops.entry(format!("{prefix} (median of the runs' percentiles)"))
                    .or_default()
                    .push((i, curve));
            }
        }
    }
    ops
}

/// Latency percentile curves, fio's clat view: per operation, small multiples of one
/// configuration each with a line per host/drive (or, with one host and drive, lines per
/// configuration); panels past the `shown`th folded.
pub(super) struct Percentiles {
    pub(super) operations: Vec<Operation>,
    pub(super) shown: usize,
}

/// An operation's panels: one legend before them (several hosts or drives), or one in each
/// (`wide`: one host and drive, lines per configuration).
pub(super) struct Operation {
    pub(super) name: Text,
    pub(super) legend: Option<Legend>,
    pub(super) wide: bool,
    pub(super) panels: Vec<Figure>,
}

impl Percentiles {
    pub(super) fn of(v: &View<'_>) -> Option<Percentiles> {
        let ops = percentile_operations(v);
        if ops.is_empty() {
            return None;
        }
        Some(Percentiles {
            operations: ops
                .iter()
                .map(|(op, curves)| Operation::of(v, op, curves))
                .collect(),
            shown: PANELS_SHOWN,
        })
    }
}

impl Operation {
    fn of(v: &View<'_>, op: &str, curves: &[(usize, Curve)]) -> Operation {
        let several = curves
            .iter()
            .any(|(i, _)| v.place[*i].0 != v.place[curves[0].0].0);
        // Panels: (title, series).
        let mut panels: Vec<(String, Vec<Series>)> = Vec::new();
        if several {
            let mut by_cfg: IndexMap<usize, Vec<Series>> = IndexMap::new();
            for (i, curve) in curves {
                let (col, cfg) = v.place[*i];
                by_cfg.entry(cfg).or_default().push(Series {
                    label: v.columns[col].clone(),
                    colour: col,
                    points: curve.clone(),
                });
            }
            panels.extend(
                by_cfg
                    .into_iter()
                    .map(|(cfg, s)| (v.configs[cfg].clone(), s)),
            );
        } else {
            let all: Vec<Series> = curves
                .iter()
                .enumerate()
                .map(|(k, (i, curve))| Series {
                    label: v.configs[v.place[*i].1].clone(),
                    colour: k % charts::PALETTE.len(),
                    points: curve.clone(),
                })
                .collect();
            let column = &v.columns[v.place[curves[0].0].0];
            let chunks = all.len().div_ceil(charts::PALETTE.len());
            let mut all = all.into_iter().peekable();
            for k in 0..chunks {
                let chunk: Vec<Series> = all.by_ref().take(charts::PALETTE.len()).collect();
                let title = if chunks > 1 {
                    format!("{column} ({} of {chunks})", k + 1)
                } else {
                    column.clone()
                };
                panels.push((title, chunk));
            }
        }
        let wide = !several;
        let axis = charts::percentile_axis(&panels.iter().flat_map(|(_, s)| s).collect::<Vec<_>>());
        // With several hosts or drives, one legend for every panel, before them.
        let legend = several
            .then(|| {
                let mut cols: Vec<usize> = curves.iter().map(|(i, _)| v.place[*i].0).collect();
                cols.sort_unstable();
                cols.dedup();
                let entries: Vec<(usize, String)> = cols
                    .into_iter()
                    .map(|c| (c, v.columns[c].clone()))
                    .collect();
                Legend::of(&entries, true, None)
            })
            .flatten();
        let (w, h) = if wide {
            (charts::CHART_WIDTH, charts::LINE_CHART_HEIGHT)
        } else {
            (charts::PANEL_WIDTH, charts::PANEL_HEIGHT)
        };
        let panels = panels
            .iter()
            .map(|(title, series)| Figure {
                id: String::new(),
                caption: Text::new(title),
                chart: charts::percentile_svg(series, &axis, w, h)
                    .map(|svg| vec![svg])
                    .map_err(|e| Text::new(e.to_string())),
                legend: if several {
                    None
                } else {
                    let entries: Vec<(usize, String)> =
                        series.iter().map(|s| (s.colour, s.label.clone())).collect();
                    Legend::of(&entries, true, None)
                },
            })
            .collect();
        Operation {
            name: Text::new(op),
            legend,
            wide,
            panels,
        }
    }
}

/// Latency against the `size` parameter, log–log, a line per host/drive and the other
/// parameters; none without a latency metric or sizes.
pub(super) fn size_chart(v: &View<'_>) -> Option<Figure> {
    let r = v.r;
    let metric = LATENCY_METRICS
        .into_iter()
        .find(|m| r.cells.iter().any(|c| find_metric(c, m).is_some()))?;
    let mut groups: IndexMap<String, Vec<(f64, f64)>> = IndexMap::new();
    for c in &r.cells {
        let Some(size) = c.params.get(SIZE_PARAM).and_then(|s| parse_size(s)) else {
            continue;
        };
        let Some(m) = find_metric(c, metric) else {
            continue;
        };
        let points = groups
            .entry(cell_label(c, &v.order, &[SIZE_PARAM]))
            .or_default();
        // A log axis has no place for zero or negative latencies.
        if m.stats.median.is_finite() && m.stats.median > 0.0 {
            points.push((size, m.stats.median));
        }
    }
    let series: Vec<Series> = groups
        .into_iter()
        .filter(|(_, p)| !p.is_empty())
        .enumerate()
        .map(|(i, (label, mut points))| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                label,
                colour: i,
                points,
            }
        })
        .collect();
    if series.is_empty() {
        return None;
    }
    let entries: Vec<(usize, String)> =
        series.iter().map(|s| (s.colour, s.label.clone())).collect();
    Some(Figure {
        id: "latency-vs-size".into(),
        caption: Text::new(format!("{metric} against {SIZE_PARAM} (medians, log–log)")),
        chart: charts::size_svg(&series, metric, SIZE_PARAM)
            .map(|svg| vec![svg])
            .map_err(|e| Text::new(e.to_string())),
        legend: Legend::of(&entries, true, None),
    })
}

/// Each drive's rounds towards steady state (`prepare.steady_state`): its tracked value
/// per round with the counted window, as `report::steady` judged it.
pub(super) fn rounds_charts(v: &View<'_>) -> Vec<Figure> {
    let r = v.r;
    r.rounds
        .iter()
        .map(|d| {
            let unit = r
                .cells
                .iter()
                .filter(|c| c.host == d.host && c.device().unwrap_or_default() == d.device)
                .find_map(|c| find_metric(c, &d.metric))
                .map_or("", |m| m.unit.as_str());
            Figure {
                id: slug(&format!("rounds-{}-{}", d.host, d.device)),
                caption: Text::new(format!(
                    "{} {}: {} of {} per round — {}. Shaded: the rounds counted as results; \
                     red: their average, and the ±{}% around it the rule's range allows; grey: \
                     their least-squares line",
                    d.host,
                    d.device,
                    d.metric,
                    d.tracked,
                    d.describe(),
                    d.rule.range_pct / 2.0
                )),
                chart: charts::rounds_svg(d, unit)
                    .map(|svg| vec![svg])
                    .map_err(|e| Text::new(e.to_string())),
                legend: None,
            }
        })
        .collect()
}
