//! The HTML exporter: one self-contained page (inline CSS and SVG) that can be mailed or
//! archived as one file. It fetches nothing. Its one script (inline, a dozen lines) only
//! sorts tables when a header is clicked; the page reads fully without it.
//!
//! The page is the cross-host comparison: a summary first (counts, verdicts, outliers,
//! what is missing or failed, the hosts and drives with what they ran on, a summary table),
//! then the ratios to the reference as a forest plot, a dot-and-interval chart per metric
//! (one row per configuration, one colour per host or drive), per-operation latency
//! percentile curves, and last the per-cell tables, collapsed. Every table and axis uses one
//! unit per row, column or axis (`Unit`).
//!
//! This module and its `summary`, `tables` and `figures` compute the page's values into
//! view structs; askama templates (`templates/report/`) lay them out and escape every
//! text. No HTML is written here; the charts' SVG comes from `charts`, which escapes its
//! own text.

mod assets;
mod charts;
mod figures;
mod summary;
mod tables;
pub(crate) use charts::trend_svgs;

use std::fmt;

use askama::Template;

use self::assets::CSS;
pub use self::assets::SORT_SCRIPT;
use self::charts::Unit;
use self::tables::MetricRow;
use super::side::Columns;
use super::{CellReport, Exporter, MetricStats, Report};

/// Renders a report as a single HTML document.
pub struct Html;

/// The latency metric plotted against `size`: the first one any cell has wins.
const LATENCY_METRICS: [&str; 2] = ["latency.mean", "latency"];
/// The parameter used as the x axis of the latency chart.
const SIZE_PARAM: &str = "size";
/// Key metrics in the summary table, at most.
const MAX_KEY_METRICS: usize = 4;
/// Verdicts and outliers listed in the summary before the rest are folded.
const MAX_LISTED: usize = 5;
/// Percentile panels shown before the rest are folded into a `<details>`.
const PANELS_SHOWN: usize = 8;
/// Host tables with more rows than this start collapsed.
const OPEN_TABLE_ROWS: usize = 40;

impl Exporter for Html {
    fn render(&self, report: &Report) -> String {
        // The page's values are text and numbers whose formatting cannot fail.
        Page::of(report)
            .render()
            .expect("rendering the report's page cannot fail")
    }
}

/// The page: its heading, links to its sections, and each section's view (`None`: the
/// report has nothing for it).
#[derive(Template)]
#[template(path = "report/page.html")]
struct Page {
    title: Text,
    name: Text,
    campaign_id: Text,
    state: Text,
    repeat: Text,
    version: &'static str,
    schema_version: u32,
    /// (anchor, link text) of each section present, in the order the page links them.
    nav: Vec<(&'static str, &'static str)>,
    findings: Option<summary::Findings>,
    since: Option<summary::Since>,
    summary: summary::Summary,
    pivot: Option<tables::Pivot>,
    forests: Option<figures::Forests>,
    metric_charts: Option<figures::MetricCharts>,
    percentiles: Option<figures::Percentiles>,
    size_chart: Option<figures::Figure>,
    /// `prepare.steady_state`: a chart per drive.
    rounds: Vec<figures::Figure>,
    health: Option<summary::Health>,
    details: tables::Details,
}

impl Page {
    fn of(r: &Report) -> Page {
        let v = View::new(r);
        let mut page = Page {
            title: Text::new(format!("platter — {}", r.name)),
            name: Text::new(&r.name),
            campaign_id: Text::new(&r.campaign_id),
            state: Text::new(r.state.as_str()),
            repeat: Text::new(r.repeat_text()),
            version: env!("CARGO_PKG_VERSION"),
            schema_version: r.schema_version,
            nav: Vec::new(),
            findings: summary::Findings::of(r),
            since: summary::Since::of(r),
            summary: summary::Summary::of(&v),
            pivot: tables::Pivot::of(r),
            forests: figures::Forests::of(&v),
            metric_charts: figures::MetricCharts::of(&v),
            percentiles: figures::Percentiles::of(&v),
            size_chart: figures::size_chart(&v),
            rounds: figures::rounds_charts(&v),
            health: summary::Health::of(r),
            details: tables::Details::of(&v),
        };
        page.nav = page.links();
        page
    }

    /// Links to the page's sections (in-page anchors only).
    fn links(&self) -> Vec<(&'static str, &'static str)> {
        let sections = [
            (self.findings.is_some(), "findings", "Findings"),
            (self.since.is_some(), "since", "Since the last run"),
            (true, "summary", "Summary"),
            (self.pivot.is_some(), "pivot", "Pivot"),
            (!self.rounds.is_empty(), "rounds", "Rounds"),
            (self.forests.is_some(), "forest", "Ratios"),
            (self.metric_charts.is_some(), "metrics", "Per metric"),
            (
                self.percentiles.is_some(),
                "percentiles",
                "Latency percentiles",
            ),
            (self.health.is_some(), "health", "Drive health"),
            (true, "details", "Every metric of every cell"),
        ];
        sections
            .into_iter()
            .filter(|(shown, _, _)| *shown)
            .map(|(_, id, name)| (id, name))
            .collect()
    }
}

/// Text from the report for a template to escape, with the control characters a page
/// cannot show made visible (`report::printable`: a tool's stderr may carry terminal escapes).
#[derive(Debug, Clone, Default, PartialEq)]
struct Text(String);

impl Text {
    fn new(s: impl AsRef<str>) -> Text {
        Text(super::printable(s.as_ref()))
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A line of a list, classed (`muted`, `fail`, `warn`) or not.
struct Line {
    class: Option<&'static str>,
    text: Text,
}

/// A table row of text cells, classed or not (`templates/report/row.html`).
struct Row {
    class: Option<&'static str>,
    cells: Vec<Text>,
}

/// What the sections share: the columns (hosts, or hosts' drives), the configurations
/// (parameters without the drive), and which of each a cell is.
struct View<'a> {
    r: &'a Report,
    /// Parameter names in campaign order, then any a cell has that the campaign does not list.
    order: Vec<String>,
    columns: Vec<String>,
    /// Per column, its host.
    column_hosts: Vec<String>,
    /// Per column, its device when the columns name devices (a host ran on several).
    column_labels: Vec<Option<String>>,
    configs: Vec<String>,
    /// Per cell: (column, configuration).
    place: Vec<(usize, usize)>,
    /// Metric names in order of first appearance.
    metrics: Vec<String>,
}

impl<'a> View<'a> {
    fn new(r: &'a Report) -> View<'a> {
        let mut order = r.params.clone();
        for c in &r.cells {
            for k in c.params.keys() {
                if !order.contains(k) {
                    order.push(k.clone());
                }
            }
        }
        // The side-by-side view's columns, also when it has only one (and is not shown).
        let baseline = r.side_by_side.as_ref().and_then(|s| s.baseline.as_deref());
        let columns = Columns::of(&r.cells, baseline);
        let mut configs: Vec<String> = Vec::new();
        let mut place = Vec::new();
        let mut metrics: Vec<String> = Vec::new();
        for c in &r.cells {
            let col = columns.of_cell(c);
            let cfg = config_label(c, &order);
            let cfg = match configs.iter().position(|x| *x == cfg) {
                Some(i) => i,
                None => {
                    configs.push(cfg);
                    configs.len() - 1
                }
            };
            place.push((col, cfg));
            for m in c.metrics.iter().filter(|m| m.same_as.is_none()) {
                if !metrics.contains(&m.metric) {
                    metrics.push(m.metric.clone());
                }
            }
        }
        View {
            r,
            order,
            column_hosts: (0..columns.names.len())
                .map(|i| columns.host(i).to_string())
                .collect(),
            column_labels: (0..columns.names.len())
                .map(|i| columns.device(i).map(str::to_string))
                .collect(),
            columns: columns.names,
            configs,
            place,
            metrics,
        }
    }

    /// The metrics the summary table and the open charts show: the workload's own headline
    /// numbers, then wall time.
    fn key_metrics(&self) -> Vec<&str> {
        let mut keys: Vec<(u8, &str)> = self
            .metrics
            .iter()
            .filter(|m| *m != "wall")
            .filter_map(|m| Some((key_rank(m)?, m.as_str())))
            .collect();
        keys.sort_by_key(|(rank, _)| *rank);
        let mut keys: Vec<&str> = keys
            .into_iter()
            .map(|(_, m)| m)
            .take(MAX_KEY_METRICS - 1)
            .collect();
        if self.metrics.iter().any(|m| m == "wall") {
            keys.push("wall");
        }
        keys
    }

    fn is_outlier(&self, c: &CellReport, metric: &str) -> bool {
        let device = c.device().unwrap_or("");
        self.r
            .outliers
            .iter()
            .any(|o| o.host == c.host && o.device == device && o.metric == metric)
    }

    /// A column's colour (`#RRGGBB`) and name, as swatches and legends show it.
    fn swatch(&self, col: usize) -> (String, Text) {
        (
            charts::hex(charts::colour(col)),
            Text::new(
                self.column_labels[col]
                    .as_deref()
                    .unwrap_or(&self.columns[col]),
            ),
        )
    }
}

/// A workload's headline metrics (the findings' choice too).
fn key_rank(m: &str) -> Option<u8> {
    super::findings::headline_rank(m)
}

/// The cell's parameters without its drive, `k=v k=v` in campaign order.
fn config_label(c: &CellReport, order: &[String]) -> String {
    let params: Vec<String> = super::configuration_names(order)
        .filter_map(|k| c.params.get(k).map(|v| format!("{k}={v}")))
        .collect();
    if params.is_empty() {
        "(one configuration)".to_string()
    } else {
        params.join(" ")
    }
}

/// " [ms]" after a header, or nothing for a unit without a name (not "seeks []").
fn unit_suffix(u: &Unit) -> String {
    if u.label.is_empty() {
        String::new()
    } else {
        format!(" [{}]", u.label)
    }
}

/// A value in a sentence, in the unit that suits it alone.
fn show(v: f64, unit: &str) -> String {
    Unit::for_values(&[v], unit).show(v)
}

/// A positive size such as `4096`, `4K`, `4KiB` or `1M` in bytes (K means 1024), as the
/// campaign's own parser reads it.
pub fn parse_size(s: &str) -> Option<f64> {
    crate::spec::parse_bytes(s)
        .filter(|b| *b > 0)
        .map(|b| b as f64)
}

fn find_metric<'a>(c: &'a CellReport, name: &str) -> Option<&'a MetricStats> {
    c.metrics.iter().find(|m| m.metric == name)
}

/// An id fragment: `latency.p99 per run` → `latency-p99-per-run`.
fn slug(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// `host · k=v k=v`, parameters in campaign order, leaving out `skip`.
fn cell_label(c: &CellReport, order: &[String], skip: &[&str]) -> String {
    let params: Vec<String> = order
        .iter()
        .filter(|k| !skip.contains(&k.as_str()))
        .filter_map(|k| c.params.get(k).map(|v| format!("{k}={v}")))
        .collect();
    if params.is_empty() {
        c.host.clone()
    } else {
        format!("{} · {}", c.host, params.join(" "))
    }
}

#[cfg(test)]
mod tests;
