//! The page's SVG charts, drawn with plotters: dot-and-interval plots (a metric per cell and
//! host, and ratios to a reference as a forest plot), per-operation latency percentile
//! curves, and latency against size. Each returns the SVG text; the page adds captions and
//! legends (HTML, so that many series never cover the data).

use std::error::Error;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::super::Scale;

/// Series colours; none is black so that plotted lines never look like axes.
pub(super) const PALETTE: [RGBColor; 12] = [
    RGBColor(0x1F, 0x77, 0xB4),
    RGBColor(0xFF, 0x7F, 0x0E),
    RGBColor(0x2C, 0xA0, 0x2C),
    RGBColor(0xD6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xBD),
    RGBColor(0x8C, 0x56, 0x4B),
    RGBColor(0xE3, 0x77, 0xC2),
    RGBColor(0x7F, 0x7F, 0x7F),
    RGBColor(0xBC, 0xBD, 0x22),
    RGBColor(0x17, 0xBE, 0xCF),
    RGBColor(0x39, 0x3B, 0x79),
    RGBColor(0xA5, 0x51, 0x94),
];

/// Whiskers are near-black rather than black so they stay distinct from axes and ticks.
pub(super) const WHISKER: RGBColor = RGBColor(0x33, 0x33, 0x33);
/// The reference line of a forest plot (1×).
pub(super) const REFERENCE: RGBColor = RGBColor(0xC0, 0x39, 0x2B);

pub(super) const CHART_WIDTH: u32 = 960;
/// Small multiples: two per line of the page.
pub(super) const PANEL_WIDTH: u32 = 470;
pub(super) const PANEL_HEIGHT: u32 = 320;
pub(super) const LINE_CHART_HEIGHT: u32 = 560;
/// Longer category labels are cut so the plot keeps most of the width.
const MAX_LABEL_CHARS: usize = 48;

/// The colour of series `i`.
pub(super) fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// `#RRGGBB`.
pub(super) fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// One unit for values read together (an axis, a table row or column): `Scale` with the
/// name the values are written in. Rates of bytes scale as bytes (`MiB/s`); counts are
/// "count".
pub(super) struct Unit {
    pub scale: Scale,
    pub label: String,
}

impl Unit {
    pub fn for_values(values: &[f64], unit: &str) -> Unit {
        let (base, per) = match unit {
            "B/s" => ("B", "/s"),
            u => (u, ""),
        };
        let scale = Scale::for_values(values, base);
        let label = if !scale.suffix.is_empty() {
            format!("{}{per}", scale.suffix)
        } else if base == "1" {
            "count".to_string()
        } else {
            base.to_string()
        };
        Unit { scale, label }
    }

    /// The number alone, in this unit.
    pub fn bare(&self, v: f64) -> String {
        self.scale.bare(v)
    }

    /// The number with this unit's name (`12.30 ms`; counts without one).
    pub fn show(&self, v: f64) -> String {
        if self.label == "count" {
            self.bare(v)
        } else {
            format!("{} {}", self.bare(v), self.label)
        }
    }
}

/// A linear axis with the given key points, or plotters' own when `None`. (plotters'
/// `WithKeyPoints<RangedCoordf64>` has no default formatting, so no mesh can be drawn on
/// it; the chart's label formatter writes every tick anyway.)
pub(super) struct Linear {
    pub lo: f64,
    pub hi: f64,
    pub keys: Option<Vec<f64>>,
}

impl Ranged for Linear {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        RangedCoordf64::from(self.lo..self.hi).map(v, limit)
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        match &self.keys {
            Some(k) => k.clone(),
            None => RangedCoordf64::from(self.lo..self.hi).key_points(hint),
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// The x axis of a dot plot.
pub(super) enum Axis {
    /// Values in one unit; the range spans the data, never forced to include zero.
    Values(Unit),
    /// Ratios, on a log scale that always includes 1× (the reference line).
    Ratio,
}

/// One dot of a dot plot: a median (or ratio) with its interval.
pub(super) struct Dot {
    /// Category (row, top-down).
    pub row: usize,
    /// Series: its place within the row.
    pub series: usize,
    /// Its palette index.
    pub colour: usize,
    pub value: f64,
    pub interval: Option<(f64, f64)>,
    /// Drawn with a ring around it (an outlier, a significant difference).
    pub ring: bool,
    /// Drawn hollow: a ratio that is no significant difference (greyed in tables).
    pub faint: bool,
}

/// Dots with whiskers, one row per category and one colour per series: a metric per
/// configuration and host/drive, or ratios to a reference (a forest plot).
pub(super) struct DotPlot {
    pub rows: Vec<String>,
    pub series: usize,
    pub dots: Vec<Dot>,
    pub axis: Axis,
    /// The x axis title (its unit added for values).
    pub title: String,
}

impl DotPlot {
    /// The x range shared by every panel of the plot: the values and intervals, padded,
    /// with 1× included for ratios.
    pub fn range(&self) -> (f64, f64) {
        let finite = |v: &f64| v.is_finite() && (!matches!(self.axis, Axis::Ratio) || *v > 0.0);
        let all: Vec<f64> = self
            .dots
            .iter()
            .flat_map(|d| {
                std::iter::once(d.value).chain(d.interval.into_iter().flat_map(|(l, h)| [l, h]))
            })
            .filter(finite)
            .collect();
        let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        match self.axis {
            Axis::Ratio => {
                let (lo, hi) = if lo.is_finite() {
                    (lo.min(1.0), hi.max(1.0))
                } else {
                    (1.0, 1.0)
                };
                let (lo, hi) = if hi / lo < 1.2 {
                    (lo.min(1.0 / 1.1), hi.max(1.1))
                } else {
                    (lo, hi)
                };
                let pad = (hi / lo).powf(0.05);
                (lo / pad, hi * pad)
            }
            Axis::Values(_) => {
                if !lo.is_finite() {
                    return (0.0, 1.0);
                }
                let span = hi - lo;
                let span = if span > 0.0 {
                    span
                } else if lo != 0.0 {
                    lo.abs() * 0.1
                } else {
                    1.0
                };
                (lo - span * 0.06, hi + span * 0.06)
            }
        }
    }
}

/// Rows per panel: a plot with more categories is drawn as several panels of this many,
/// so no chart grows past about 900 px.
pub(super) const ROWS_PER_PANEL: usize = 36;

/// The dot plot's panels (rows `ROWS_PER_PANEL` at a time), each an SVG.
pub(super) fn dot_svgs(plot: &DotPlot) -> Result<Vec<String>, Box<dyn Error>> {
    let range = plot.range();
    let mut out = Vec::new();
    let mut first = 0;
    while first < plot.rows.len() {
        let last = (first + ROWS_PER_PANEL).min(plot.rows.len());
        out.push(dot_panel(plot, first..last, range)?);
        first = last;
    }
    Ok(out)
}

fn dot_panel(
    plot: &DotPlot,
    rows: std::ops::Range<usize>,
    (xmin, xmax): (f64, f64),
) -> Result<String, Box<dyn Error>> {
    let n = rows.len();
    let series = plot.series.max(1);
    // A row is tall enough to tell its series apart: 7 px per series, at least 20.
    let row_px = (series as u32 * 7 + 6).max(20);
    let height = 90 + row_px * n as u32;
    let label_chars = plot.rows[rows.clone()]
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0)
        .min(MAX_LABEL_CHARS);
    // 15 px sans-serif averages under 9 px a character: a label of the longest row's
    // length fits whole.
    let label_px = label_chars as u32 * 9 + 16;
    // Row i of the panel is centred at y = n - 1 - i (plotters counts y upwards); series
    // spread over ±0.35 of a row; the axis has 0.2 of a row more below (for the rings).
    let y_of = |row: usize, s: usize| -> f64 {
        let centre = (n - 1 - (row - rows.start)) as f64;
        if series == 1 {
            centre
        } else {
            centre + 0.35 - 0.7 * s as f64 / (series - 1) as f64
        }
    };
    let keys: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let label_of = |v: &f64| -> String {
        let i = v.round() as i64;
        if (v - i as f64).abs() > 1e-6 || i < 0 || i as usize >= n {
            return String::new();
        }
        truncate(&plot.rows[rows.start + n - 1 - i as usize], MAX_LABEL_CHARS)
    };
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (CHART_WIDTH, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let y_range = || Linear {
            lo: -0.7,
            hi: n as f64 - 0.3,
            keys: Some(keys.clone()),
        };
        match &plot.axis {
            Axis::Values(unit) => {
                let mut chart = ChartBuilder::on(&root)
                    .margin(12)
                    .x_label_area_size(44)
                    .y_label_area_size(label_px)
                    .build_cartesian_2d(
                        Linear {
                            lo: xmin,
                            hi: xmax,
                            keys: Some(round_ticks(xmin, xmax, unit.scale.factor())),
                        },
                        y_range(),
                    )?;
                // Round ticks in the axis' unit, written with the digits their step needs.
                let step = tick_step(xmin, xmax, unit.scale.factor());
                let fmt = |v: &f64| tick_text(*v / unit.scale.factor(), step);
                chart
                    .configure_mesh()
                    .disable_y_mesh()
                    .light_line_style(WHITE.mix(0.0))
                    .bold_line_style(RGBColor(0xEE, 0xEE, 0xEE))
                    .x_labels(8)
                    .y_label_formatter(&label_of)
                    .x_label_formatter(&fmt)
                    .x_desc(format!("{} [{}]", plot.title, unit.label))
                    .label_style(("sans-serif", 15))
                    .axis_desc_style(("sans-serif", 17))
                    .draw()?;
                draw_dots(&mut chart, plot, &rows, &y_of)?;
            }
            Axis::Ratio => {
                let ticks = ratio_ticks(xmin, xmax);
                let mut chart = ChartBuilder::on(&root)
                    .margin(12)
                    .x_label_area_size(44)
                    .y_label_area_size(label_px)
                    .build_cartesian_2d(
                        (xmin..xmax).log_scale().with_key_points(ticks),
                        y_range(),
                    )?;
                let fmt = |v: &f64| ratio_text(*v);
                chart
                    .configure_mesh()
                    .disable_y_mesh()
                    .light_line_style(WHITE.mix(0.0))
                    .bold_line_style(RGBColor(0xEE, 0xEE, 0xEE))
                    .y_label_formatter(&label_of)
                    .x_label_formatter(&fmt)
                    .x_desc(format!("{} (×, log scale)", plot.title))
                    .label_style(("sans-serif", 15))
                    .axis_desc_style(("sans-serif", 17))
                    .draw()?;
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(1.0, -0.7), (1.0, n as f64 - 0.3)],
                    REFERENCE.stroke_width(2),
                )))?;
                draw_dots(&mut chart, plot, &rows, &y_of)?;
            }
        }
        root.present()?;
    }
    Ok(shown(buf))
}

/// A series' runs on one host and cell, as the console's series page shows them: a dot
/// plot with a row per run (oldest at the top, named by its campaign) at its median with
/// its interval. A flagged run is ringed: red for a regression, green for an improvement,
/// orange for a change without a better direction. One SVG per `ROWS_PER_PANEL` runs.
pub(crate) fn trend_svgs(
    line: &crate::report::history::Line,
    metric: &str,
) -> Result<Vec<String>, Box<dyn Error>> {
    use crate::report::history::Flag;
    let values: Vec<f64> = line.points.iter().map(|p| p.median).collect();
    let dots = line
        .points
        .iter()
        .enumerate()
        .map(|(row, p)| {
            let flag = p.since_previous.as_ref().map_or(Flag::None, |s| s.flag);
            Dot {
                row,
                series: 0,
                colour: match flag {
                    Flag::None => 0,
                    Flag::Regression => 3,
                    Flag::Improvement => 2,
                    Flag::Changed => 1,
                },
                value: p.median,
                interval: p.median_ci,
                ring: flag != Flag::None,
                faint: false,
            }
        })
        .collect();
    dot_svgs(&DotPlot {
        rows: line.points.iter().map(|p| p.campaign_id.clone()).collect(),
        series: 1,
        dots,
        axis: Axis::Values(Unit::for_values(&values, &line.unit)),
        title: metric.to_string(),
    })
}

/// The step of round ticks for `lo..hi` (base units) written in a unit `factor` times the
/// base: 1, 2, 2.5 or 5 × 10^k of that unit, about six of them.
fn tick_step(lo: f64, hi: f64, factor: f64) -> f64 {
    let span = ((hi - lo) / factor).abs();
    if !span.is_finite() || span == 0.0 {
        return 1.0;
    }
    let raw = span / 6.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let nice = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .find(|m| m * magnitude >= raw)
        .unwrap_or(10.0);
    nice * magnitude
}

/// Round ticks within `lo..hi` (base units), each a multiple of the step in the unit
/// `factor` times the base: 660, 680, 700 ms, not 667.57, 715.26.
pub(super) fn round_ticks(lo: f64, hi: f64, factor: f64) -> Vec<f64> {
    let step = tick_step(lo, hi, factor);
    let (a, b) = (lo / factor, hi / factor);
    let mut t = (a / step).ceil() * step;
    let mut out = Vec::new();
    while t <= b + step * 1e-9 && out.len() < 50 {
        out.push(t * factor);
        t += step;
    }
    out
}

/// A tick in its unit with as many decimals as its step needs: "660", "1.25", "0.5".
fn tick_text(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        // 0.25 needs 2, 0.5 needs 1, 0.02 needs 2.
        (1..=9)
            .find(|d| {
                let scaled = step * 10f64.powi(*d);
                (scaled - scaled.round()).abs() < 1e-6
            })
            .unwrap_or(9)
    };
    format!("{:.*}", decimals as usize, v)
}

/// Ticks of a ratio axis: round ratios, 1× always, each at least a twelfth of the axis
/// (on its log scale) from the next so their labels never overlap.
pub(super) fn ratio_ticks(lo: f64, hi: f64) -> Vec<f64> {
    const NICE: [f64; 22] = [
        0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 0.8, 0.9, 0.95, 0.98, 1.0, 1.02, 1.05, 1.1, 1.25, 1.5,
        2.0, 5.0, 10.0, 20.0, 50.0, 100.0,
    ];
    let gap = (hi / lo).ln() / 12.0;
    let mut up = vec![1.0];
    for t in NICE.into_iter().filter(|t| *t > 1.0 && *t <= hi) {
        if (t / up[up.len() - 1]).ln() >= gap {
            up.push(t);
        }
    }
    let mut down = Vec::new();
    let mut last = 1.0f64;
    for t in NICE.into_iter().rev().filter(|t| *t < 1.0 && *t >= lo) {
        if (last / t).ln() >= gap {
            down.push(t);
            last = t;
        }
    }
    down.reverse();
    down.extend(up);
    down.retain(|t| (lo..=hi).contains(t));
    down
}

/// "1×", "0.8×", "1.25×".
pub(super) fn ratio_text(v: f64) -> String {
    let t = format!("{v:.2}");
    let t = t.trim_end_matches('0').trim_end_matches('.');
    format!("{t}×")
}

fn draw_dots<X, Y>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, Y>>,
    plot: &DotPlot,
    rows: &std::ops::Range<usize>,
    y_of: &dyn Fn(usize, usize) -> f64,
) -> Result<(), Box<dyn Error>>
where
    X: plotters::coord::ranged1d::Ranged<ValueType = f64>,
    Y: plotters::coord::ranged1d::Ranged<ValueType = f64>,
{
    let ratio = matches!(plot.axis, Axis::Ratio);
    let ok = |v: f64| v.is_finite() && (!ratio || v > 0.0);
    let dots = || {
        plot.dots
            .iter()
            .filter(|d| rows.contains(&d.row) && ok(d.value))
    };
    for d in dots() {
        let Some((lo, hi)) = d.interval.filter(|(l, h)| ok(*l) && ok(*h)) else {
            continue;
        };
        let y = y_of(d.row, d.series);
        let ink = WHISKER.stroke_width(1);
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(lo, y), (hi, y)],
            ink,
        )))?;
        // End caps are a few pixels tall whatever the row height.
        chart.draw_series(
            [lo, hi]
                .into_iter()
                .map(|x| EmptyElement::at((x, y)) + PathElement::new(vec![(0, -3), (0, 3)], ink)),
        )?;
    }
    for d in dots() {
        let y = y_of(d.row, d.series);
        let c = colour(d.colour);
        let style = if d.faint {
            c.stroke_width(2)
        } else {
            c.filled()
        };
        chart.draw_series(std::iter::once(Circle::new((d.value, y), 4, style)))?;
        if d.ring {
            chart.draw_series(std::iter::once(Circle::new(
                (d.value, y),
                7,
                BLACK.stroke_width(1),
            )))?;
        }
    }
    Ok(())
}

/// One line of a line chart.
pub(super) struct Series {
    pub label: String,
    pub colour: usize,
    pub points: Vec<(f64, f64)>,
}

/// Where a quantile sits on a percentile axis: `-log10(1 - q)` (p90 → 1, p99 → 2, …), the
/// log scale of the distance to 100% that latency tools draw tails on.
pub(super) fn nines(q: f64) -> f64 {
    -(1.0 - q).log10()
}

/// The x ticks of a percentile axis whose last point is at `qmax`: p50, p90, p99, … up to
/// it, and `qmax` itself, so the curve's last point is always labelled (p99.95, not a
/// point past the last tick); a standard tick closer to it than half a decade gives way.
pub(super) fn percentile_ticks(qmax: f64) -> Vec<f64> {
    let last = nines(qmax);
    let mut ticks: Vec<f64> = [0.5, 0.9, 0.99, 0.999, 0.9999]
        .into_iter()
        .map(nines)
        .filter(|t| *t <= last + 1e-9)
        .collect();
    if ticks.last().is_none_or(|t| (last - t).abs() > 1e-9) {
        ticks.retain(|t| last - t >= 0.5);
        ticks.push(last);
    }
    ticks
}

/// "p50", "p99.9", "p99.99".
pub(super) fn percentile_name(q: f64) -> String {
    let t = format!("{:.2}", q * 100.0);
    let t = t.trim_end_matches('0').trim_end_matches('.');
    format!("p{t}")
}

/// The y range shared by an operation's percentile panels (so they compare by eye): every
/// point of every panel, padded. Its ticks are written each in its own unit
/// ([`LogTicks`]).
pub(super) fn percentile_axis(series: &[&Series]) -> (f64, f64) {
    let all: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|v| *v > 0.0 && v.is_finite())
        .collect();
    let (ymin, ymax) = widen(
        all.iter().copied().fold(f64::INFINITY, f64::min),
        all.iter().copied().fold(0.0, f64::max),
    );
    let ypad = (ymax / ymin).powf(0.06);
    (ymin / ypad, ymax * ypad)
}

/// Per-operation latency against percentile: x the percentile on a log scale of its
/// distance to 100% (p50 … p99.99), y the latency (log) over `axis` (`percentile_axis`).
/// `points` are (quantile, seconds).
pub(super) fn percentile_svg(
    series: &[Series],
    (ylo, yhi): &(f64, f64),
    width: u32,
    height: u32,
) -> Result<String, Box<dyn Error>> {
    let (ylo, yhi) = (*ylo, *yhi);
    let yticks = LogTicks::new(log_ticks(ylo, yhi), "s");
    let all = || {
        series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|p| p.1 > 0.0)
    };
    let qmax = all().map(|p| p.0).fold(0.5, f64::max);
    let (x0, x1) = (nines(0.5) - 0.1, nines(qmax) + 0.15);
    let xticks = percentile_ticks(qmax);
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (width, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(
                Linear {
                    lo: x0,
                    hi: x1,
                    keys: Some(xticks),
                },
                (ylo..yhi).log_scale().with_key_points(yticks.ticks.clone()),
            )?;
        let x_label = |t: &f64| percentile_name(1.0 - 10f64.powf(-*t));
        let y_label = |v: &f64| yticks.text(*v);
        chart
            .configure_mesh()
            .light_line_style(WHITE.mix(0.0))
            .bold_line_style(RGBColor(0xEE, 0xEE, 0xEE))
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .x_desc("percentile (log scale of 100% − p)")
            .y_desc("latency, log scale")
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .draw()?;
        for s in series {
            let c = colour(s.colour);
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .filter(|p| p.1 > 0.0)
                .map(|(q, v)| (nines(*q), *v))
                .collect();
            chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?;
            chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, c.filled())))?;
        }
        root.present()?;
    }
    Ok(shown(buf))
}

/// A log–log line chart of a latency against the `size` parameter.
pub(super) fn size_svg(
    series: &[Series],
    metric: &str,
    size_param: &str,
) -> Result<String, Box<dyn Error>> {
    let all = || series.iter().flat_map(|s| s.points.iter());
    let (xmin, xmax) = widen(
        all().map(|p| p.0).fold(f64::INFINITY, f64::min),
        all().map(|p| p.0).fold(0.0, f64::max),
    );
    let (ymin, ymax) = widen(
        all().map(|p| p.1).fold(f64::INFINITY, f64::min),
        all().map(|p| p.1).fold(0.0, f64::max),
    );
    let xpad = (xmax / xmin).powf(0.04);
    let ypad = (ymax / ymin).powf(0.08);
    // Sizes are powers of two in practice, so ticks at powers of four land on them.
    let step = if xmax / xmin > 64.0 { 4.0 } else { 2.0 };
    let mut xticks = Vec::new();
    let mut t = 2f64.powi(xmin.log2().floor() as i32);
    while t <= xmax * 1.0001 {
        if t >= xmin / 1.0001 {
            xticks.push(t);
        }
        t *= step;
    }
    let (ylo, yhi) = (ymin / ypad, ymax * ypad);
    let yticks = LogTicks::new(log_ticks(ylo, yhi), "s");
    let xticks = LogTicks::new(xticks, "B");

    let mut buf = String::new();
    {
        let root =
            SVGBackend::with_string(&mut buf, (CHART_WIDTH, LINE_CHART_HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(
                (xmin / xpad..xmax * xpad)
                    .log_scale()
                    .with_key_points(xticks.ticks.clone()),
                (ylo..yhi).log_scale().with_key_points(yticks.ticks.clone()),
            )?;
        let x_label = |v: &f64| xticks.text(*v);
        let y_label = |v: &f64| yticks.text(*v);
        chart
            .configure_mesh()
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .x_desc(format!("{size_param}, log scale"))
            .y_desc(format!("{metric} median, log scale"))
            .label_style(("sans-serif", 16))
            .axis_desc_style(("sans-serif", 18))
            .light_line_style(WHITE.mix(0.0))
            .bold_line_style(RGBColor(0xEE, 0xEE, 0xEE))
            .draw()?;
        for s in series {
            let i = s.colour;
            let c = colour(i);
            chart.draw_series(LineSeries::new(s.points.clone(), c.stroke_width(2)))?;
            // Past the palette's length colours repeat, so repeats get hollow markers.
            let marker = if i < PALETTE.len() {
                c.filled()
            } else {
                c.stroke_width(2)
            };
            chart.draw_series(s.points.iter().map(|p| Circle::new(*p, 4, marker)))?;
        }
        root.present()?;
    }
    Ok(shown(buf))
}

/// A drive's rounds towards steady state, as the PTS report pages plot them: the tracked
/// value per round, the counted window shaded, its average with the band the rule's range
/// allows around it (± half the range), and its least-squares line.
pub(super) fn rounds_svg(
    d: &crate::report::steady::DriveRounds,
    unit: &str,
) -> Result<String, Box<dyn Error>> {
    let points: Vec<(f64, f64)> = d
        .values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.map(|v| ((i + 1) as f64, v)))
        .collect();
    if points.is_empty() {
        return Err("no round has a value".into());
    }
    let half_band = d.rule.range_pct / 200.0;
    let band = d
        .average
        .map(|a| (a * (1.0 - half_band), a * (1.0 + half_band)));
    let ys = points
        .iter()
        .map(|p| p.1)
        .chain(band.iter().flat_map(|(lo, hi)| [*lo, *hi]));
    let (lo, hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| {
        (lo.min(y), hi.max(y))
    });
    let pad = ((hi - lo) * 0.08)
        .max(hi.abs() * 0.01)
        .max(f64::MIN_POSITIVE);
    let (ylo, yhi) = ((lo - pad).min(0.0f64.max(lo - pad)), hi + pad);
    let n = d.values.len();
    let y_unit = Unit::for_values(&points.iter().map(|p| p.1).collect::<Vec<_>>(), unit);
    let mut buf = String::new();
    {
        let root =
            SVGBackend::with_string(&mut buf, (CHART_WIDTH, LINE_CHART_HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let xticks: Vec<f64> = (1..=n)
            .filter(|r| n <= 30 || r % 5 == 0 || *r == 1)
            .map(|r| r as f64)
            .collect();
        let mut chart = ChartBuilder::on(&root)
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(
                Linear {
                    lo: 0.5,
                    hi: n as f64 + 0.5,
                    keys: Some(xticks),
                },
                ylo..yhi,
            )?;
        let x_label = |v: &f64| format!("{v:.0}");
        let y_label = |v: &f64| y_unit.bare(*v);
        chart
            .configure_mesh()
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .x_desc("round")
            .y_desc(format!("{} [{}]", d.metric, y_unit.label))
            .label_style(("sans-serif", 16))
            .axis_desc_style(("sans-serif", 18))
            .light_line_style(WHITE.mix(0.0))
            .bold_line_style(RGBColor(0xEE, 0xEE, 0xEE))
            .draw()?;
        let window = colour(if d.steady { 2 } else { 1 });
        chart.draw_series(std::iter::once(Rectangle::new(
            [(d.first as f64 - 0.5, ylo), (d.last as f64 + 0.5, yhi)],
            window.mix(0.15).filled(),
        )))?;
        if let (Some(avg), Some((blo, bhi))) = (d.average, band) {
            let across = |y: f64| vec![(d.first as f64 - 0.5, y), (d.last as f64 + 0.5, y)];
            chart.draw_series(LineSeries::new(across(avg), REFERENCE.stroke_width(2)))?;
            for y in [blo, bhi] {
                chart.draw_series(LineSeries::new(
                    across(y),
                    REFERENCE.mix(0.5).stroke_width(1),
                ))?;
            }
            // The window's least-squares line runs through its middle at its average.
            if let Some(slope) = d.slope_per_round {
                let middle = (d.first + d.last) as f64 / 2.0;
                let line = [d.first as f64, d.last as f64].map(|x| (x, avg + slope * (x - middle)));
                chart.draw_series(LineSeries::new(line, WHISKER.stroke_width(1)))?;
            }
        }
        let c = colour(0);
        chart.draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))?;
        chart.draw_series(points.iter().map(|p| Circle::new(*p, 4, c.filled())))?;
        root.present()?;
    }
    Ok(shown(buf))
}

/// An SVG with the control characters a label may carry (a host or a parameter value from
/// a campaign file or a tool: terminal escapes) shown as U+FFFD, as the page shows them
/// outside charts (`report::printable`): plotters escapes markup in its text, not those,
/// which XML forbids.
fn shown(svg: String) -> String {
    crate::report::printable(&svg)
}

/// Tick values for a log axis: 1-2-5 per decade, or finer steps when the range is too
/// narrow for that to give two ticks (plotters shows none inside a single decade), or
/// four ticks spread across the range when even those miss it.
pub(super) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let ticks = |mantissas: &[f64]| -> Vec<f64> {
        let mut out = Vec::new();
        for k in (lo.log10().floor() as i32)..=(hi.log10().ceil() as i32) {
            for m in mantissas {
                let t = m * 10f64.powi(k);
                if t >= lo && t <= hi {
                    out.push(t);
                }
            }
        }
        out
    };
    let coarse = ticks(&[1.0, 2.0, 5.0]);
    if coarse.len() >= 2 {
        return coarse;
    }
    let fine = ticks(&[1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    if fine.len() >= 2 {
        return fine;
    }
    // Narrower still: four evenly spaced (in log terms) ticks across the range.
    (0..4)
        .map(|i| lo * (hi / lo).powf(f64::from(i) / 3.0))
        .collect()
}

/// The ticks of a log axis of seconds or bytes, each written in the unit that fits its own
/// value ("500 ns", "2 µs", "10 ms"; "4 KiB", "1 MiB"): an axis spanning decades has no
/// one unit that fits it (sub-microsecond operations read "0.00, 0.00, 0.01 ms" in the
/// unit of their slowest). Each with as few significant digits as keep every tick's text
/// within 0.5% of its value and apart from the others' (1 for 1-2-5 ticks, 2 for 1.5,
/// more for ticks spread evenly across a narrow range).
pub(super) struct LogTicks {
    pub ticks: Vec<f64>,
    unit: &'static str,
    digits: usize,
}

impl LogTicks {
    pub(super) fn new(ticks: Vec<f64>, unit: &'static str) -> LogTicks {
        let mut t = LogTicks {
            ticks,
            unit,
            digits: 1,
        };
        while t.digits < 6 {
            let texts: Vec<String> = t.ticks.iter().map(|v| t.text(*v)).collect();
            let close = t.ticks.iter().zip(&texts).all(|(v, text)| {
                let scale = crate::report::Scale::for_value(*v * (1.0 + 1e-9), unit);
                text.split(' ')
                    .next()
                    .and_then(|n| n.parse::<f64>().ok())
                    .is_some_and(|n| (n * scale.factor() - v).abs() <= 0.005 * v.abs())
            });
            let apart = texts
                .iter()
                .enumerate()
                .all(|(i, x)| !texts[..i].contains(x));
            if close && apart {
                break;
            }
            t.digits += 1;
        }
        t
    }

    /// "500 ns", "1.5 µs", "10 ms", "4 KiB".
    pub(super) fn text(&self, v: f64) -> String {
        // 10⁻³ made as 1 × 10^-3 may fall a bit short of 1 ms: still ms.
        let scale = crate::report::Scale::for_value(v * (1.0 + 1e-9), self.unit);
        let x = v / scale.factor();
        let magnitude = if x == 0.0 {
            0
        } else {
            x.abs().log10().floor() as i32
        };
        let decimals = (self.digits as i32 - 1 - magnitude).max(0) as usize;
        let n = format!("{x:.decimals$}");
        let n = if n.contains('.') {
            n.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            n
        };
        match scale.suffix() {
            "" => n,
            s => format!("{n} {s}"),
        }
    }
}

/// Gives a log axis a non-empty range when every value is the same.
fn widen(lo: f64, hi: f64) -> (f64, f64) {
    if lo < hi {
        (lo, hi)
    } else {
        (lo / 2.0, hi * 2.0)
    }
}

pub(super) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}
