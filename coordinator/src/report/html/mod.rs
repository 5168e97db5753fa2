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

mod assets;
mod charts;
pub(crate) use charts::trend_svgs;

use std::fmt::{self, Write as _};

use indexmap::IndexMap;

use self::assets::CSS;
pub use self::assets::SORT_SCRIPT;
use self::charts::{Axis, Dot, DotPlot, Series, Unit};
use super::notes::{
    fail_text, findings, notes, outlier_text, qualification_line, MissingMeasurements, Note,
};
use super::side::{Columns, SideBySide, SideRatio, SideValue, ValueMarks};
use super::{esc, CellReport, Exporter, MetricStats, Report, MAX_FAILURES_SHOWN, PER_RUN};

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
        let mut out = String::new();
        // Writing into a String cannot fail; fmt::Result only exists for other sinks.
        write_page(&mut out, report).expect("formatting into a String cannot fail");
        out
    }
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

fn write_page(out: &mut String, r: &Report) -> fmt::Result {
    let v = View::new(r);
    let title = format!("platter — {}", r.name);
    writeln!(out, "<!DOCTYPE html>")?;
    writeln!(out, "<html lang=\"en\"><head><meta charset=\"utf-8\">")?;
    writeln!(out, "<title>{}</title>", esc(&title))?;
    writeln!(out, "<style>{CSS}</style></head><body>")?;
    writeln!(out, "<h1>{}</h1>", esc(&r.name))?;
    writeln!(
        out,
        "<p class=\"meta\">campaign <code>{}</code> · state <b>{}</b> · repeat {} · \
         generated by platter {} (report schema {})</p>",
        esc(&r.campaign_id),
        esc(r.state.as_str()),
        esc(&r.repeat_text()),
        env!("CARGO_PKG_VERSION"),
        r.schema_version,
    )?;
    write_nav(out, &v)?;
    write_findings(out, r)?;
    write_since_last_run(out, r)?;
    write_summary(out, &v)?;
    write_pivot(out, r)?;
    write_forests(out, &v)?;
    write_metric_charts(out, &v)?;
    write_percentiles(out, &v)?;
    write_size_chart(out, &v)?;
    write_health(out, r)?;
    write_details(out, &v)?;
    writeln!(out, "<script>{SORT_SCRIPT}</script>")?;
    writeln!(out, "</body></html>")
}

/// Links to the page's sections (in-page anchors only).
fn write_nav(out: &mut String, v: &View<'_>) -> fmt::Result {
    let r = v.r;
    let mut links = vec![("summary", "Summary")];
    if r.since_last_run.is_some() {
        links.insert(0, ("since", "Since the last run"));
    }
    if !findings(r).is_empty() {
        links.insert(0, ("findings", "Findings"));
    }
    if r.pivot.is_some() {
        links.push(("pivot", "Pivot"));
    }
    if r.side_by_side.is_some() || !r.comparisons.is_empty() {
        links.push(("forest", "Ratios"));
    }
    if !v.metrics.is_empty() {
        links.push(("metrics", "Per metric"));
    }
    if !percentile_operations(v).is_empty() {
        links.push(("percentiles", "Latency percentiles"));
    }
    if !r.health.is_empty() || !r.health_not_judged.is_empty() {
        links.push(("health", "Drive health"));
    }
    links.push(("details", "Every metric of every cell"));
    let links: Vec<String> = links
        .into_iter()
        .map(|(id, name)| format!("<a href=\"#{id}\">{name}</a>"))
        .collect();
    writeln!(out, "<nav>{}</nav>", links.join(" · "))
}

// ---------------------------------------------------------------------------
// findings

/// The answer first: the same lines as every text format, what is no significant
/// difference greyed.
fn write_findings(out: &mut String, r: &Report) -> fmt::Result {
    let lines = findings(r);
    if lines.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "<section id=\"findings\"><h2>Findings</h2><p class=\"muted\">{}</p><ul class=\"facts\">",
        esc(&super::findings_title(r))
    )?;
    for l in lines {
        let class = if l.is_equal() {
            " class=\"muted\""
        } else if l.is_failure() {
            " class=\"fail\""
        } else {
            ""
        };
        writeln!(out, "<li{class}>{}</li>", esc(&l.to_string()))?;
    }
    writeln!(out, "</ul></section>")
}

/// Each drive under test: its health before → after the run, a row per attribute it reports,
/// the changes that matter marked; a drive that could not be read says why.
fn write_health(out: &mut String, r: &Report) -> fmt::Result {
    if r.health.is_empty() && r.health_not_judged.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "<section id=\"health\"><h2>Drive health</h2><p class=\"muted\">{}</p>",
        esc(super::health::TITLE)
    )?;
    for d in &r.health {
        let class = if d.flagged() { " class=\"fail\"" } else { "" };
        writeln!(out, "<h3{class}>{}</h3>", esc(&d.drive()))?;
        if d.before.is_none() {
            writeln!(out, "<p class=\"muted\">{}</p>", esc(&d.text()))?;
            continue;
        }
        writeln!(
            out,
            "<table><thead><tr><th>attribute</th><th>before</th><th>after</th><th>max seen</th><th></th></tr></thead><tbody>"
        )?;
        for x in &d.deltas {
            let v =
                |v: Option<f64>| v.map_or("—".into(), |v| crate::spec::health::show(v, x.unit));
            writeln!(
                out,
                "<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                if x.flagged { " class=\"fail\"" } else { "" },
                esc(x.attribute),
                esc(&v(x.before)),
                esc(&v(x.after)),
                esc(&v(x.max)),
                if x.flagged { "FLAGGED" } else { "" },
            )?;
        }
        writeln!(out, "</tbody></table>")?;
        if d.after.is_none() {
            writeln!(out, "<p class=\"muted\">no reading after the run</p>")?;
        }
    }
    for n in &r.health_not_judged {
        writeln!(out, "<p class=\"muted\">{}</p>", esc(n))?;
    }
    writeln!(out, "</section>")
}

/// Each cell against the series' run before this one: the shift with its interval, the
/// flag, what changed on the host.
fn write_since_last_run(out: &mut String, r: &Report) -> fmt::Result {
    let Some(since) = &r.since_last_run else {
        return Ok(());
    };
    writeln!(
        out,
        "<section id=\"since\"><h2>Since the last run</h2><p class=\"muted\">{}</p>\
         <table><thead><tr><th>host</th><th>cell</th><th>shift</th><th>flag</th><th>what changed</th></tr></thead><tbody>",
        esc(&since.title())
    )?;
    for l in &since.lines {
        let class = match l.since.flag {
            super::history::Flag::Regression => " class=\"fail\"",
            super::history::Flag::None => "",
            _ => " class=\"muted\"",
        };
        writeln!(
            out,
            "<tr{class}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&l.host),
            esc(&l.cell),
            esc(&l.since.shift_text()),
            esc(l.since.flag.word()),
            esc(&l.since.changed_text())
        )?;
    }
    writeln!(out, "</tbody></table></section>")
}

// ---------------------------------------------------------------------------
// summary

fn write_summary(out: &mut String, v: &View<'_>) -> fmt::Result {
    let r = v.r;
    writeln!(
        out,
        "<section id=\"summary\"><h2>Summary</h2><ul class=\"facts\">"
    )?;
    write_extent(out, v)?;
    write_verdicts(out, r)?;
    write_losses(out, r)?;
    write_outliers(out, r)?;
    write_comparison_count(out, r)?;
    for change in &r.provenance_changes {
        writeln!(out, "<li class=\"warn\">{}</li>", esc(change))?;
    }
    writeln!(out, "</ul>")?;
    write_problems(out, r)?;
    write_hosts(out, v)?;
    write_summary_table(out, v)?;
    writeln!(out, "</section>")
}

/// What the run spans (cells, hosts, drives, measurements ended), or that it has no samples.
fn write_extent(out: &mut String, v: &View<'_>) -> fmt::Result {
    let r = v.r;
    let hosts: Vec<&str> = {
        let mut h: Vec<&str> = r.cells.iter().map(|c| c.host.as_str()).collect();
        h.dedup();
        h.sort_unstable();
        h.dedup();
        h
    };
    let drives = if v.columns.len() > hosts.len() {
        format!(", {} drives", v.columns.len())
    } else {
        String::new()
    };
    let stored = r
        .measurements_expected
        .saturating_sub(r.measurements_missing);
    writeln!(
        out,
        "<li><b>{} cells</b> ({} configurations) on {} host{}{drives}; {} of {} measurements ended</li>",
        r.cells.len(),
        v.configs.len(),
        hosts.len(),
        if hosts.len() == 1 { "" } else { "s" },
        stored,
        r.measurements_expected,
    )?;
    if !r.cells.iter().any(|c| !c.metrics.is_empty()) {
        let why = if r.cells.is_empty() {
            "this campaign has no cells"
        } else {
            "no cell recorded a metric"
        };
        writeln!(out, "<li class=\"fail\">There are no samples: {why}.</li>")?;
    }
    Ok(())
}

/// The qualification: passed, or how many checks failed with the first few listed.
fn write_verdicts(out: &mut String, r: &Report) -> fmt::Result {
    if r.verdicts.is_empty() {
        return Ok(());
    }
    let failed: Vec<_> = r.verdicts.iter().filter(|x| !x.pass).collect();
    if failed.is_empty() {
        return writeln!(
            out,
            "<li class=\"pass\">{}</li>",
            qualification_line(0, r.verdicts.len(), "")
        );
    }
    writeln!(
        out,
        "<li class=\"fail\">{}<ul>",
        qualification_line(failed.len(), r.verdicts.len(), "")
    )?;
    for (i, x) in failed.iter().enumerate() {
        if i == MAX_LISTED {
            writeln!(
                out,
                "<li><details><summary>{} more</summary><ul>",
                failed.len() - MAX_LISTED
            )?;
        }
        writeln!(out, "<li>{}</li>", esc(&fail_text(x, &show)))?;
    }
    if failed.len() > MAX_LISTED {
        writeln!(out, "</ul></details></li>")?;
    }
    writeln!(out, "</ul></li>")
}

/// What was lost: failed steps and repetitions, missing or unmeasurable values, refusals.
fn write_losses(out: &mut String, r: &Report) -> fmt::Result {
    if r.steps_failed > 0 {
        writeln!(
            out,
            "<li class=\"fail\">{} step(s) failed (see below)</li>",
            r.steps_failed
        )?;
    }
    let failed_reps: u32 = r.cells.iter().map(|c| c.failed).sum();
    if failed_reps > 0 {
        let cells = r.cells.iter().filter(|c| c.failed > 0).count();
        writeln!(
            out,
            "<li class=\"fail\">{failed_reps} repetition(s) without samples in {cells} cell(s)</li>"
        )?;
    }
    if let Some(m) = MissingMeasurements::of(r) {
        writeln!(out, "<li class=\"fail\">{}</li>", esc(&m.to_string()))?;
    }
    let unmeasured: usize = r.cells.iter().map(|c| c.unmeasured.len()).sum();
    if unmeasured > 0 {
        writeln!(
            out,
            "<li class=\"warn\">{unmeasured} metric(s) of some cells could not be measured by the tool (named in the tables)</li>"
        )?;
    }
    for x in &r.refused {
        writeln!(
            out,
            "<li class=\"fail\">host <b>{}</b> refused the plan, nothing ran: {}</li>",
            esc(&x.host),
            esc(&x.reason)
        )?;
    }
    Ok(())
}

/// The fleet outliers, the first few listed and the rest folded.
fn write_outliers(out: &mut String, r: &Report) -> fmt::Result {
    if r.outliers.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "<li class=\"warn\">{} outlier(s): far from the other hosts/drives with the same configuration<ul>",
        r.outliers.len()
    )?;
    for (i, o) in r.outliers.iter().enumerate() {
        if i == MAX_LISTED {
            writeln!(
                out,
                "<li><details><summary>{} more</summary><ul>",
                r.outliers.len() - MAX_LISTED
            )?;
        }
        writeln!(out, "<li>{}</li>", esc(&outlier_text(o, &show)))?;
    }
    if r.outliers.len() > MAX_LISTED {
        writeln!(out, "</ul></details></li>")?;
    }
    writeln!(out, "</ul></li>")
}

/// How many comparisons with the baseline were made, were significant, could not be made.
fn write_comparison_count(out: &mut String, r: &Report) -> fmt::Result {
    if r.comparisons.is_empty() {
        return Ok(());
    }
    let compared = r.comparisons.iter().filter(|c| c.compared).count();
    let significant = r.comparisons.iter().filter(|c| c.row.significant).count();
    let uncompared = r.comparisons.len() - compared;
    let class = if uncompared > 0 {
        " class=\"fail\""
    } else {
        ""
    };
    writeln!(
        out,
        "<li{class}>comparisons with the baseline: {compared} made, {significant} significant after Holm's correction{}</li>",
        if uncompared > 0 {
            format!("; {uncompared} could not be made")
        } else {
            String::new()
        }
    )
}

fn write_problems(out: &mut String, r: &Report) -> fmt::Result {
    if r.failures.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "<div class=\"problems\"><h3>Failures ({})</h3>",
        r.failures.len()
    )?;
    for (i, f) in r.failures.iter().enumerate() {
        if i == MAX_FAILURES_SHOWN {
            writeln!(
                out,
                "<details><summary>{} more</summary>",
                r.failures.len() - MAX_FAILURES_SHOWN
            )?;
        }
        writeln!(out, "<p>{}</p>", esc(&f.headline()))?;
        if !f.stderr_tail.is_empty() {
            writeln!(out, "<pre>{}</pre>", esc(&f.stderr_tail))?;
        }
    }
    if r.failures.len() > MAX_FAILURES_SHOWN {
        writeln!(out, "</details>")?;
    }
    writeln!(out, "</div>")
}

/// The hosts and drives compared, with what the run saw of each (provenance).
fn write_hosts(out: &mut String, v: &View<'_>) -> fmt::Result {
    let r = v.r;
    let lines = super::provenance::lines(&r.provenance, &r.devices_used);
    let mut hosts: IndexMap<&str, Vec<&str>> = IndexMap::new();
    for c in &r.cells {
        hosts.entry(c.host.as_str()).or_default();
    }
    for x in &r.refused {
        hosts.entry(x.host.as_str()).or_default();
    }
    if hosts.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "<h3>Hosts and drives compared</h3><table id=\"hosts\"><thead><tr><th>host</th><th>drives (columns)</th><th>ran on</th></tr></thead><tbody>"
    )?;
    for (host, _) in &hosts {
        let facts: Vec<String> = lines
            .iter()
            .filter(|l| l.host == *host)
            .map(|l| esc(l.text.trim_start()))
            .collect();
        let columns: Vec<String> = (0..v.columns.len())
            .filter(|i| v.column_hosts[*i] == *host)
            .map(|i| {
                format!(
                    "<span class=\"swatch\" style=\"background:{}\"></span>{}",
                    charts::hex(charts::colour(i)),
                    esc(v.column_labels[i].as_deref().unwrap_or(&v.columns[i]))
                )
            })
            .collect();
        let facts = if facts.is_empty() {
            "<span class=\"muted\">no provenance recorded</span>".to_string()
        } else {
            facts.join("<br>")
        };
        writeln!(
            out,
            "<tr><td><b>{}</b></td><td>{}</td><td>{facts}</td></tr>",
            esc(host),
            columns.join("<br>")
        )?;
    }
    writeln!(out, "</tbody></table>")
}

/// Side by side (key metrics) when the campaign spans several hosts or drives, else one row
/// per cell with its key metrics; one unit per row (side by side) or per column.
fn write_summary_table(out: &mut String, v: &View<'_>) -> fmt::Result {
    let keys = v.key_metrics();
    if keys.is_empty() {
        return Ok(());
    }
    if let Some(s) = &v.r.side_by_side {
        writeln!(
            out,
            "<h3 id=\"side-by-side\">{}</h3>",
            esc(&side_title(v.r, s))
        )?;
        return write_side_table(out, v, s, &keys);
    }
    writeln!(
        out,
        "<h3>Key metrics per cell</h3><p class=\"muted\">median (CI of the median); one unit per column. Every metric is in the tables at the end.</p>"
    )?;
    let params: Vec<&String> = v
        .order
        .iter()
        .filter(|k| v.r.cells.iter().any(|c| c.params.contains_key(*k)))
        .collect();
    let units: Vec<Unit> = keys
        .iter()
        .map(|k| {
            let values: Vec<f64> =
                v.r.cells
                    .iter()
                    .filter_map(|c| find_metric(c, k).map(|m| m.stats.median))
                    .collect();
            let unit =
                v.r.cells
                    .iter()
                    .find_map(|c| find_metric(c, k).map(|m| m.unit.clone()))
                    .unwrap_or_default();
            Unit::for_values(&values, &unit)
        })
        .collect();
    write!(
        out,
        "<table class=\"sortable\" id=\"summary-table\"><thead><tr><th>host</th>"
    )?;
    for p in &params {
        write!(out, "<th>{}</th>", esc(p))?;
    }
    for (k, u) in keys.iter().zip(&units) {
        write!(out, "<th>{}{}</th>", esc(k), unit_suffix(u))?;
    }
    writeln!(out, "</tr></thead><tbody>")?;
    for c in &v.r.cells {
        write!(out, "<tr><td>{}</td>", esc(&c.host))?;
        for p in &params {
            write!(out, "<td>{}</td>", esc(c.params.get(*p).map_or("", |x| x)))?;
        }
        for (k, u) in keys.iter().zip(&units) {
            match find_metric(c, k) {
                Some(m) => {
                    let class = if v.is_outlier(c, k) {
                        "num outlier"
                    } else {
                        "num"
                    };
                    write!(
                        out,
                        "<td class=\"{class}\" data-v=\"{}\">{}</td>",
                        m.stats.median,
                        esc(&median_ci(&m.stats, u, false))
                    )?;
                }
                None => write!(out, "<td class=\"muted\">{}</td>", esc(&why_absent(c, k)))?,
            }
        }
        writeln!(out, "</tr>")?;
    }
    writeln!(out, "</tbody></table>")
}

fn why_absent(c: &CellReport, metric: &str) -> String {
    if let Some(u) = c.unmeasured.iter().find(|u| u.metric == metric) {
        return format!("— (not measured ×{}: {})", u.count, u.reason);
    }
    if c.failed > 0 {
        format!("— ({} failed)", c.failed)
    } else {
        "—".into()
    }
}

/// "12.30 (11.90 … 12.60)" in the column's unit, or with the unit named.
fn median_ci(s: &super::Stats, u: &Unit, with_unit: bool) -> String {
    let show = |x: f64| if with_unit { u.show(x) } else { u.bare(x) };
    match s.median_ci {
        Some((lo, hi)) => format!("{} ({} … {})", show(s.median), u.bare(lo), u.bare(hi)),
        None => show(s.median),
    }
}

fn side_title(r: &Report, s: &SideBySide) -> String {
    let _ = r;
    format!(
        "Side by side: median (CI); ×: Hodges–Lehmann ratio to {} (interval), greyed and ~ = no significant difference (Holm)",
        super::side::reference_words(s)
    )
}

/// " [ms]" after a header, or nothing for a unit without a name (not "seeks []").
fn unit_suffix(u: &Unit) -> String {
    if u.label.is_empty() {
        String::new()
    } else {
        format!(" [{}]", esc(&u.label))
    }
}

/// A value in a sentence, in the unit that suits it alone.
fn show(v: f64, unit: &str) -> String {
    Unit::for_values(&[v], unit).show(v)
}

/// The pieces of a side-by-side value in HTML: the median bold, the interval greyed, a
/// ratio greyed when not significant; the unit is the row's.
struct SideMarks<'a>(&'a Unit);

impl ValueMarks for SideMarks<'_> {
    fn median(&self, v: f64) -> String {
        format!("<b>{}</b>", esc(&self.0.bare(v)))
    }
    fn bound(&self, v: f64) -> String {
        esc(&self.0.bare(v))
    }
    fn interval(&self, text: String) -> String {
        format!("<span class=\"muted\">{text}</span>")
    }
    fn ratio(&self, r: &SideRatio) -> String {
        let class = if r.significant {
            "ratio"
        } else {
            "ratio muted"
        };
        format!("<span class=\"{class}\">{}</span>", esc(&r.text()))
    }
    fn words(&self, text: &str) -> String {
        esc(text)
    }
}

/// The side-by-side view as a table: a row per configuration and metric (only `keys` when
/// given), a column per host or drive, one unit per row.
fn write_side_table(out: &mut String, v: &View<'_>, s: &SideBySide, keys: &[&str]) -> fmt::Result {
    let params: Vec<&String> = super::configuration_names(&v.order).collect();
    write!(
        out,
        "<div class=\"wide\"><table class=\"sortable side\"><thead><tr>"
    )?;
    for p in &params {
        write!(out, "<th>{}</th>", esc(p))?;
    }
    write!(out, "<th>metric</th><th>unit</th>")?;
    // The view's columns are `v.columns` (both from `side::Columns`): the same colours.
    for (col, c) in s.columns.iter().enumerate() {
        write!(
            out,
            "<th><span class=\"swatch\" style=\"background:{}\"></span>{}</th>",
            charts::hex(charts::colour(col)),
            esc(c)
        )?;
    }
    writeln!(out, "</tr></thead><tbody>")?;
    for row in s
        .rows
        .iter()
        .filter(|row| keys.is_empty() || keys.contains(&row.metric.as_str()))
    {
        let medians: Vec<f64> = row
            .values
            .iter()
            .filter_map(|x| match x {
                SideValue::Measured { median, .. } => Some(*median),
                _ => None,
            })
            .collect();
        let u = Unit::for_values(&medians, &row.unit);
        write!(out, "<tr>")?;
        for p in &params {
            write!(
                out,
                "<td>{}</td>",
                esc(row.params.get(*p).map_or("-", |x| x))
            )?;
        }
        write!(
            out,
            "<td>{}</td><td>{}</td>",
            esc(&row.metric),
            esc(&u.label)
        )?;
        for x in &row.values {
            let t = x.text(&SideMarks(&u));
            match x {
                SideValue::Measured {
                    median, outlier, ..
                } => {
                    let class = if *outlier { "side outlier" } else { "side" };
                    write!(out, "<td class=\"{class}\" data-v=\"{median}\">{t}</td>")?;
                }
                SideValue::NotMeasured { .. } | SideValue::Absent => {
                    write!(out, "<td class=\"muted\">{t}</td>")?
                }
            }
        }
        writeln!(out, "</tr>")?;
    }
    writeln!(out, "</tbody></table></div>")
}

// ---------------------------------------------------------------------------
// pivot

/// The pivot with one unit for the whole table, named in its title; with several
/// metrics, one unit per column (named in its header) or per row (after its labels).
fn write_pivot(out: &mut String, r: &Report) -> fmt::Result {
    let Some(p) = &r.pivot else { return Ok(()) };
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
    let title_unit = if p.unit.is_empty() {
        String::new()
    } else {
        unit_suffix(&whole)
    };
    writeln!(
        out,
        "<section id=\"pivot\"><h2>{} of {} by {} × {}{title_unit}</h2><table class=\"sortable\"><thead><tr>",
        esc(&p.stat),
        esc(&p.metric),
        esc(&p.row_keys.join(", ")),
        esc(&p.column_keys.join(", ")),
    )?;
    for h in &p.row_keys {
        write!(out, "<th>{}</th>", esc(h))?;
    }
    if !rows.is_empty() {
        write!(out, "<th>unit</th>")?;
    }
    for (c, h) in p.columns.iter().enumerate() {
        match columns.get(c) {
            Some(u) => write!(out, "<th>{}{}</th>", esc(h), unit_suffix(u))?,
            None => write!(out, "<th>{}</th>", esc(h))?,
        }
    }
    writeln!(out, "</tr></thead><tbody>")?;
    for (ri, (labels, values)) in p.rows.iter().enumerate() {
        write!(out, "<tr>")?;
        for l in labels {
            write!(out, "<td>{}</td>", esc(l))?;
        }
        if let Some(u) = rows.get(ri) {
            write!(out, "<td>{}</td>", esc(&u.label))?;
        }
        for (ci, x) in values.iter().enumerate() {
            let text = esc(&p.slot_text(ri, ci, x.map(|x| unit_at(ri, ci).bare(x))));
            match x {
                Some(x) => write!(out, "<td class=\"num\" data-v=\"{x}\">{text}</td>")?,
                None => write!(out, "<td class=\"muted\">{text}</td>")?,
            }
        }
        writeln!(out, "</tr>")?;
    }
    writeln!(out, "</tbody></table></section>")
}

// ---------------------------------------------------------------------------
// charts

/// An HTML legend: a swatch (dot or line) per entry, and the ring's meaning if any is drawn.
fn write_legend(
    out: &mut String,
    entries: &[(usize, String)],
    line: bool,
    ring: Option<&str>,
) -> fmt::Result {
    // One host (or one line) needs no key: the caption names it.
    if entries.len() < 2 && ring.is_none() {
        return Ok(());
    }
    writeln!(out, "<ul class=\"legend\">")?;
    for (colour, label) in entries {
        let class = if line { "line" } else { "swatch" };
        writeln!(
            out,
            "<li><span class=\"{class}\" style=\"background:{}\"></span>{}</li>",
            charts::hex(charts::colour(*colour)),
            esc(label)
        )?;
    }
    if let Some(ring) = ring {
        writeln!(out, "<li><span class=\"ring\"></span>{}</li>", esc(ring))?;
    }
    writeln!(out, "</ul>")
}

/// Writes the plot's panels, or why it could not be drawn.
fn write_dot_plot(out: &mut String, plot: &DotPlot) -> fmt::Result {
    match charts::dot_svgs(plot) {
        Ok(svgs) => {
            for svg in svgs {
                writeln!(out, "{svg}")?;
            }
            Ok(())
        }
        Err(e) => writeln!(
            out,
            "<p class=\"muted\">chart could not be drawn: {}</p>",
            esc(&e.to_string())
        ),
    }
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
fn write_forests(out: &mut String, v: &View<'_>) -> fmt::Result {
    let r = v.r;
    let compared: Vec<_> = r.comparisons.iter().filter(|c| c.compared).collect();
    let side = r.side_by_side.as_ref();
    if compared.is_empty() && side.is_none() && r.comparisons.is_empty() {
        return Ok(());
    }
    let heading = match (side, side.and_then(|s| s.baseline.as_deref())) {
        (Some(s), None) if r.comparisons.is_empty() => {
            format!("Against the first host ({})", s.reference)
        }
        (_, None) => "Against the baseline".to_string(),
        (_, Some(b)) => format!("Against the baseline ({b})"),
    };
    writeln!(out, "<section id=\"forest\"><h2>{}</h2>", esc(&heading))?;
    let mut metrics: Vec<&str> = Vec::new();
    for c in &compared {
        if !metrics.contains(&c.row.metric.as_str()) {
            metrics.push(&c.row.metric);
        }
    }
    for metric in metrics {
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
                    colour: if c.row.significant { 3 } else { 0 },
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
        writeln!(
            out,
            "<figure id=\"forest-{}\"><figcaption>{}: candidate over baseline (Hodges–Lehmann ratio), whiskers = {cov}CI, line at 1× = no difference</figcaption>",
            slug(metric),
            esc(metric)
        )?;
        write_dot_plot(out, &plot)?;
        write_legend(
            out,
            &[
                (3, "significant after Holm's correction".to_string()),
                (0, "not significant".to_string()),
            ],
            false,
            None,
        )?;
        writeln!(out, "</figure>")?;
    }
    let uncompared: Vec<_> = r.comparisons.iter().filter(|c| !c.compared).collect();
    if !uncompared.is_empty() {
        writeln!(out, "<p class=\"fail\">Not compared:</p><ul>")?;
        for c in uncompared {
            writeln!(
                out,
                "<li>{}: {}</li>",
                esc(&c.row.context),
                esc(&c.row.text)
            )?;
        }
        writeln!(out, "</ul>")?;
    }
    if let Some(s) = side {
        for metric in v.key_metrics() {
            write_side_forest(out, v, s, metric)?;
        }
    }
    writeln!(out, "</section>")
}

/// Each column's median over the reference's (the baseline column, or the columns'
/// median) per configuration: a forest of the side-by-side ratios.
fn write_side_forest(out: &mut String, v: &View<'_>, s: &SideBySide, metric: &str) -> fmt::Result {
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
        return Ok(());
    }
    let reference = super::side::reference_words(s);
    // Only the columns with a ratio take a lane of a row (the reference has none): one
    // compared host sits on its row's label, not between two.
    let mut with_dots: Vec<usize> = dots.iter().map(|d| d.series).collect();
    with_dots.sort_unstable();
    with_dots.dedup();
    for d in &mut dots {
        d.series = with_dots.iter().position(|c| *c == d.series).unwrap_or(0);
    }
    let lanes = with_dots.len();
    let plot = DotPlot {
        rows: labels,
        series: lanes,
        dots,
        axis: Axis::Ratio,
        title: format!("{metric}: ratio"),
    };
    writeln!(
        out,
        "<figure id=\"side-forest-{}\"><figcaption>{}: each host/drive over {} (Hodges–Lehmann ratio of their runs); whiskers = its interval; hollow = no significant difference after Holm; line at 1×</figcaption>",
        slug(metric),
        esc(metric),
        esc(&reference)
    )?;
    write_dot_plot(out, &plot)?;
    let entries: Vec<(usize, String)> = v.columns.iter().cloned().enumerate().collect();
    let ring = plot
        .dots
        .iter()
        .any(|d| d.ring)
        .then_some("outlier of the fleet");
    write_legend(out, &entries, false, ring)?;
    writeln!(out, "</figure>")
}

/// One dot-and-interval chart per metric: a row per configuration, a colour per host or
/// drive. Key metrics open, the rest folded.
fn write_metric_charts(out: &mut String, v: &View<'_>) -> fmt::Result {
    if v.metrics.is_empty() {
        return Ok(());
    }
    let keys = v.key_metrics();
    writeln!(
        out,
        "<section id=\"metrics\"><h2>Per metric</h2><p class=\"muted\">Median of the repetitions per configuration (row) and host/drive (colour); whiskers: the CI of the median. Axes span the data, not from zero.</p>"
    )?;
    let entries: Vec<(usize, String)> = v.columns.iter().cloned().enumerate().collect();
    let rest = v
        .metrics
        .iter()
        .filter(|m| !keys.contains(&m.as_str()))
        .count();
    let ordered = keys.iter().copied().chain(
        v.metrics
            .iter()
            .map(String::as_str)
            .filter(|m| !keys.contains(m)),
    );
    for (i, metric) in ordered.enumerate() {
        if i == keys.len() && rest > 0 {
            writeln!(
                out,
                "<details id=\"more-metrics\"><summary>{rest} more metric(s)</summary>"
            )?;
        }
        write_metric_chart(out, v, metric, &entries)?;
    }
    if rest > 0 {
        writeln!(out, "</details>")?;
    }
    writeln!(out, "</section>")
}

fn write_metric_chart(
    out: &mut String,
    v: &View<'_>,
    metric: &str,
    entries: &[(usize, String)],
) -> fmt::Result {
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
        return Ok(());
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
    writeln!(
        out,
        "<figure id=\"dots-{}\"><figcaption>{}: median per configuration and host/drive, {whiskers}</figcaption>",
        slug(metric),
        esc(metric)
    )?;
    write_dot_plot(out, &plot)?;
    write_legend(out, entries, false, ring)?;
    writeln!(out, "</figure>")
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
/// configuration).
fn write_percentiles(out: &mut String, v: &View<'_>) -> fmt::Result {
    let ops = percentile_operations(v);
    if ops.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "<section id=\"percentiles\"><h2>Latency percentiles</h2><p class=\"muted\">Per-operation latency at p50 … p99.99 (as far as the operations resolve: at least one operation above the percentile); x: log scale of 100% − p, y: log scale.</p>"
    )?;
    for (op, curves) in &ops {
        writeln!(out, "<h3>{}</h3>", esc(op))?;
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
        if several {
            // One legend for every panel, before them.
            let mut cols: Vec<usize> = curves.iter().map(|(i, _)| v.place[*i].0).collect();
            cols.sort_unstable();
            cols.dedup();
            let entries: Vec<(usize, String)> = cols
                .into_iter()
                .map(|c| (c, v.columns[c].clone()))
                .collect();
            write_legend(out, &entries, true, None)?;
        }
        writeln!(out, "<div class=\"grid\">")?;
        for (k, (title, series)) in panels.iter().enumerate() {
            if k == PANELS_SHOWN {
                writeln!(
                    out,
                    "</div><details><summary>{} more configurations</summary><div class=\"grid\">",
                    panels.len() - PANELS_SHOWN
                )?;
            }
            let (w, h) = if wide {
                (charts::CHART_WIDTH, charts::LINE_CHART_HEIGHT)
            } else {
                (charts::PANEL_WIDTH, charts::PANEL_HEIGHT)
            };
            let style = if wide { " style=\"width:auto\"" } else { "" };
            writeln!(
                out,
                "<figure class=\"percentiles\"{style}><figcaption>{}</figcaption>",
                esc(title)
            )?;
            match charts::percentile_svg(series, &axis, w, h) {
                Ok(svg) => writeln!(out, "{svg}")?,
                Err(e) => writeln!(
                    out,
                    "<p class=\"muted\">chart could not be drawn: {}</p>",
                    esc(&e.to_string())
                )?,
            }
            if !several {
                let entries: Vec<(usize, String)> =
                    series.iter().map(|s| (s.colour, s.label.clone())).collect();
                write_legend(out, &entries, true, None)?;
            }
            writeln!(out, "</figure>")?;
        }
        writeln!(out, "</div>")?;
        if panels.len() > PANELS_SHOWN {
            writeln!(out, "</details>")?;
        }
    }
    writeln!(out, "</section>")
}

/// Latency against the `size` parameter, log–log, a line per host/drive and the other
/// parameters.
fn write_size_chart(out: &mut String, v: &View<'_>) -> fmt::Result {
    let r = v.r;
    let Some(metric) = LATENCY_METRICS
        .into_iter()
        .find(|m| r.cells.iter().any(|c| find_metric(c, m).is_some()))
    else {
        return Ok(());
    };
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
        return Ok(());
    }
    writeln!(
        out,
        "<section id=\"size\"><h2>Latency against {SIZE_PARAM}</h2><figure id=\"latency-vs-size\"><figcaption>{} against {SIZE_PARAM} (medians, log–log)</figcaption>",
        esc(metric)
    )?;
    match charts::size_svg(&series, metric, SIZE_PARAM) {
        Ok(svg) => writeln!(out, "{svg}")?,
        Err(e) => writeln!(
            out,
            "<p class=\"muted\">chart could not be drawn: {}</p>",
            esc(&e.to_string())
        )?,
    }
    let entries: Vec<(usize, String)> =
        series.iter().map(|s| (s.colour, s.label.clone())).collect();
    write_legend(out, &entries, true, None)?;
    writeln!(out, "</figure></section>")
}

// ---------------------------------------------------------------------------
// details

fn write_details(out: &mut String, v: &View<'_>) -> fmt::Result {
    let r = v.r;
    writeln!(
        out,
        "<section id=\"details\"><h2>Every metric of every cell</h2>"
    )?;
    if let Some(s) = &r.side_by_side {
        writeln!(
            out,
            "<details><summary>{} — every metric</summary>",
            esc(&side_title(r, s))
        )?;
        write_side_table(out, v, s, &[])?;
        writeln!(out, "</details>")?;
    }
    let mut hosts: IndexMap<&str, Vec<&CellReport>> = IndexMap::new();
    for c in &r.cells {
        hosts.entry(c.host.as_str()).or_default().push(c);
    }
    let rows: usize = r.cells.iter().map(|c| c.metrics.len().max(1)).sum();
    let open = if rows <= OPEN_TABLE_ROWS { " open" } else { "" };
    for (host, cells) in &hosts {
        writeln!(
            out,
            "<details class=\"host\"{open}><summary>{} — {} cell(s)</summary>",
            esc(host),
            cells.len()
        )?;
        write_host_table(out, cells, &v.order)?;
        writeln!(out, "</details>")?;
    }
    // The comparisons of two cells, made or not (a cell without a counterpart is listed
    // under "Not compared" only), their family, the cells' warnings and the advice.
    let notes: Vec<Note<'_>> = notes(r)
        .into_iter()
        .filter(|n| match n {
            Note::Comparison(c) => c.cells.is_some(),
            Note::CellWarning { .. } | Note::Family { .. } | Note::Advice(_) => true,
            _ => false,
        })
        .collect();
    if !notes.is_empty() {
        writeln!(
            out,
            "<details id=\"notes\"><summary>Comparisons and warnings ({})</summary><ul>",
            notes.len()
        )?;
        for n in notes {
            let class = match n {
                Note::CellWarning { .. } | Note::Advice(_) => " class=\"warn\"",
                _ => "",
            };
            writeln!(out, "<li{class}>{}</li>", esc(&n.to_string()))?;
        }
        writeln!(out, "</ul></details>")?;
    }
    writeln!(out, "</section>")
}

fn write_host_table(out: &mut String, cells: &[&CellReport], order: &[String]) -> fmt::Result {
    // Only the parameters this host's cells actually carry get a column.
    let cols: Vec<&String> = order
        .iter()
        .filter(|k| cells.iter().any(|c| c.params.contains_key(*k)))
        .collect();
    write!(out, "<table class=\"sortable\"><thead><tr>")?;
    for k in &cols {
        write!(out, "<th>{}</th>", esc(k))?;
    }
    writeln!(out, "<th>metric</th><th>n</th><th>median (CI)</th><th>mean ± stddev</th><th>min</th><th>max</th></tr></thead><tbody>")?;
    for cell in cells {
        // Every row carries its cell's parameters, so a sorted table still names them.
        let params: String = cols
            .iter()
            .map(|k| format!("<td>{}</td>", esc(cell.params.get(*k).map_or("", |v| v))))
            .collect();
        if cell.metrics.is_empty() && cell.unmeasured.is_empty() {
            writeln!(
                out,
                "<tr>{params}<td>-</td><td class=\"num\">0 ({} failed)</td><td colspan=\"4\" class=\"muted\">no samples</td></tr>",
                cell.failed
            )?;
        }
        for m in cell.metrics.iter().filter(|m| m.same_as.is_none()) {
            writeln!(out, "<tr>{params}{}</tr>", metric_cells(cell, m))?;
        }
        for u in &cell.unmeasured {
            writeln!(
                out,
                "<tr>{params}<td>{}</td><td class=\"num\">0 (+{} {})</td><td colspan=\"4\" class=\"muted\">{}</td></tr>",
                esc(&u.metric),
                u.count,
                esc(&u.reason),
                esc(&u.reason)
            )?;
        }
    }
    writeln!(out, "</tbody></table>")?;
    let notes: Vec<String> = cells
        .iter()
        .flat_map(|c| {
            let failed = (c.failed > 0).then(|| format!("{} failed repetition(s)", c.failed));
            failed
                .into_iter()
                .chain(c.warnings.iter().map(ToString::to_string))
                .chain(c.advice.iter().map(|a| a.text().to_string()))
                .chain(super::runs_notes(c))
                .map(move |w| {
                    // The cell as people name it: its parameters (the table's row labels).
                    let label = super::label(&c.params);
                    let label = if label.is_empty() {
                        c.cell_id.clone()
                    } else {
                        label
                    };
                    format!("{label}: {w}")
                })
        })
        .collect();
    if !notes.is_empty() {
        writeln!(out, "<ul class=\"warn\">")?;
        for n in notes {
            writeln!(out, "<li>{}</li>", esc(&n))?;
        }
        writeln!(out, "</ul>")?;
    }
    Ok(())
}

/// A metric's cells, one unit for the row (chosen by its median, as the text report
/// does); a per-run latency percentile gives way to the merged one of the same name
/// (`latency.p99`: every operation of every run), as in every format.
fn metric_cells(cell: &CellReport, m: &MetricStats) -> String {
    let merged = m.metric.strip_suffix(PER_RUN).and_then(|name| {
        let l = cell.latency.as_ref()?;
        Some((name, l.get(name)?, l))
    });
    if let Some((name, value, l)) = merged {
        let u = Unit::for_values(&[value], "s");
        return format!(
            "<td>{}</td><td class=\"num\">{}</td><td class=\"num\" data-v=\"{value}\">{} over all {} ops</td><td></td><td></td><td></td>",
            esc(name),
            l.runs,
            esc(&u.show(value)),
            l.ops,
        );
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
    let median = match (s.median_ci, s.median_ci_level) {
        (Some((lo, hi)), Some(level)) => format!(
            "{} <span class=\"muted\">({}% CI {} … {})</span>",
            esc(&u.show(s.median)),
            crate::stats::level_pct(level),
            esc(&u.bare(lo)),
            esc(&u.bare(hi))
        ),
        _ => esc(&u.show(s.median)),
    };
    format!(
        "<td>{}</td><td class=\"num\" data-v=\"{}\">{}</td><td class=\"num\" data-v=\"{}\">{median}</td><td class=\"num\" data-v=\"{}\">{} ± {}</td><td class=\"num\" data-v=\"{}\">{}</td><td class=\"num\" data-v=\"{}\">{}</td>",
        esc(&m.metric),
        s.n,
        esc(&n),
        s.median,
        s.mean,
        esc(&u.show(s.mean)),
        esc(&u.show(s.stddev)),
        s.min,
        esc(&u.show(s.min)),
        s.max,
        esc(&u.show(s.max)),
    )
}

// ---------------------------------------------------------------------------
// helpers

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
