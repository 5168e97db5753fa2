//! The page's pieces: summary first, dot-and-interval charts whose axis spans the data,
//! one unit per axis and table row, the forest plot's line at 1×, percentile curves.

use plotters::style::RGBColor;

use super::charts::{self, Axis, Dot, DotPlot, Unit, PALETTE, REFERENCE};
use super::*;
use crate::report::{Failure, Refusal};
use crate::stats::Summary;

/// Seed 001's table: (host, disk, write_cache, seconds per write at 1, 1024, 4096, 8192 bytes).
const SEED_001: [(&str, &str, &str, [f64; 4]); 12] = [
    ("rcmonster", "520", "on", [440e-6, 570e-6, 1.0e-3, 1.0e-3]),
    (
        "rcmonster",
        "530",
        "on",
        [9.7e-3, 12.0e-3, 19.6e-3, 19.8e-3],
    ),
    ("rc66", "M4", "on", [3.7e-3, 5.1e-3, 9.2e-3, 10.4e-3]),
    ("rc66", "530", "on", [9.8e-3, 12.5e-3, 21.0e-3, 21.2e-3]),
    ("flygecko", "X25-M", "on", [210e-6, 370e-6, 910e-6, 950e-6]),
    ("flygecko", "530", "on", [9.7e-3, 12.1e-3, 19.6e-3, 19.7e-3]),
    ("rcmonster", "520", "off", [100e-6, 160e-6, 400e-6, 420e-6]),
    (
        "rcmonster",
        "530",
        "off",
        [10.5e-3, 17.5e-3, 55.9e-3, 68.9e-3],
    ),
    ("rc66", "M4", "off", [1.5e-3, 2.6e-3, 5.6e-3, 7.2e-3]),
    ("rc66", "530", "off", [1.9e-3, 3.0e-3, 6.9e-3, 8.6e-3]),
    ("flygecko", "X25-M", "off", [1.0e-3, 1.7e-3, 3.5e-3, 3.7e-3]),
    ("flygecko", "530", "off", [1.7e-3, 2.4e-3, 4.9e-3, 5.0e-3]),
];
const SIZES: [&str; 4] = ["1", "1024", "4K", "8192"];
/// The seed timed 1000 writes per run; `wall` is that run's duration.
const WRITES_PER_RUN: f64 = 1000.0;

fn stats(median: f64, ci: bool) -> Summary {
    Summary {
        n: 5,
        min: median * 0.95,
        max: median * 1.2,
        median,
        mean: median * 1.03,
        stddev: median * 0.05,
        cv: 0.05,
        mad: median * 0.02,
        median_ci: ci.then_some((median * 0.97, median * 1.05)),
        median_ci_level: ci.then_some(0.9375),
        mean_ci_student_t: None,
    }
}

fn metric(name: &str, median: f64, ci: bool) -> MetricStats {
    MetricStats {
        metric: name.into(),
        unit: "s".into(),
        stats: stats(median, ci),
        values: vec![median],
        not_measured: 0,
        not_measured_reason: String::new(),
        samples: vec![],
        same_as: None,
    }
}

fn cell(host: &str, params: &[(&str, &str)], metrics: Vec<MetricStats>) -> CellReport {
    CellReport::for_test(format!("c-{host}-{}", params.len()), host, params, metrics)
}

fn report(params: &[&str], cells: Vec<CellReport>) -> Report {
    Report {
        schema_version: 1,
        campaign_id: "cmp-001".into(),
        name: "fdatasync latency by write size".into(),
        state: "done".into(),
        params: params.iter().map(|p| p.to_string()).collect(),
        repeat: 5,
        repetition: String::new(),
        warmup: 0,
        cells,
        ..Default::default()
    }
}

fn seed_001() -> Report {
    let mut cells = Vec::new();
    for (host, disk, cache, medians) in SEED_001 {
        for (size, median) in SIZES.iter().zip(medians) {
            // flygecko's cells have no CIs, as when too few repetitions succeed.
            let ci = host != "flygecko";
            let mut c = cell(
                host,
                &[("size", size), ("disk", disk), ("write_cache", cache)],
                vec![
                    metric("wall", median * WRITES_PER_RUN, ci),
                    metric("latency.mean", median, ci),
                ],
            );
            c.cell_id = format!("{host}-{disk}-{cache}-{size}");
            cells.push(c);
        }
    }
    cells[31]
        .warnings
        .push(crate::report::CellWarning::NotMeasured {
            repetition: 2,
            why: "not measured: its preparation failed: reboot (step 12)".into(),
        });
    cells[31].failed = 1;
    let mut r = report(&["size", "disk", "write_cache"], cells);
    r.steps_failed = 1;
    r.failures.push(Failure {
        host: "rcmonster".into(),
        cell: "size=4k".into(),
        step: "measure".into(),
        repetition: 3,
        attempt: 1,
        error: "exit status 1".into(),
        stderr_tail: "fdatasync: <script>alert('x')</script> & more".into(),
    });
    r.refused.push(Refusal {
        host: "x1".into(),
        reason: "laptop <not idle>".into(),
    });
    r
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// The text of the `<figure id=…>` element, which must exist.
fn figure<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page
        .find(&format!("<figure id=\"{id}\""))
        .unwrap_or_else(|| panic!("no figure {id}"));
    let len = page[start..].find("</figure>").expect("figure is closed");
    &page[start..start + len]
}

fn stroke(c: RGBColor) -> String {
    format!("stroke=\"{}\"", charts::hex(c))
}

fn assert_no_external_urls(page: &str) {
    let stripped = page.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    assert!(!stripped.contains("http://"), "page has an http URL");
    assert!(!stripped.contains("https://"), "page has an https URL");
}

#[test]
fn seed_001_page_has_summary_first_charts_and_escaping() {
    let page = Html.render(&seed_001());
    // To look at it: PLATTER_HTML_DIR=/tmp cargo test -p platter seed_001_page
    if let Some(dir) = std::env::var_os("PLATTER_HTML_DIR") {
        let path = std::path::Path::new(&dir).join("seed001.html");
        std::fs::write(&path, &page).expect("write seed001.html");
        println!("seed 001 page: {}", path.display());
    }
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.trim_end().ends_with("</html>"));
    // The summary comes before every chart and table of values.
    let summary = page.find("<section id=\"summary\"").expect("summary");
    let first_svg = page.find("<svg").expect("charts");
    assert!(summary < first_svg);
    assert!(summary < page.find("<section id=\"details\"").unwrap());
    for host in ["rc66", "rcmonster", "flygecko"] {
        assert!(
            page.contains(&format!("<summary>{host} — 16 cell(s)</summary>")),
            "{host} table"
        );
    }
    // One script: the sorter; stderr is escaped, not run.
    assert_eq!(count(&page, "<script>"), 1);
    assert!(!page.contains("<script>alert"), "stderr was not escaped");
    assert!(page.contains("&#60;script&#62;alert(&#39;x&#39;)&#60;/script&#62; &#38; more"));
    assert!(page.contains("laptop &#60;not idle&#62;"));
    assert!(page.contains("repetition 2 not measured: its preparation failed: reboot (step 12)"));
    assert!(page.contains("1 failed repetition(s)"));
    // rcmonster 530 on, 1024 bytes, with its CI, all in the row's unit.
    assert!(
        page.contains("12.00 ms <span class=\"muted\">(93.8% CI 11.64 … 12.60)</span>"),
        "median with CI"
    );
    assert_no_external_urls(&page);
}

#[test]
fn seed_001_size_chart_has_one_line_per_host_disk_and_cache() {
    let page = Html.render(&seed_001());
    let chart = figure(&page, "latency-vs-size");
    assert_eq!(count(chart, "<svg"), 1);
    // 12 series fill the 12-colour palette: each colour draws exactly one polyline.
    let lines: Vec<&str> = chart
        .lines()
        .filter(|l| l.trim_start().starts_with("<polyline"))
        .collect();
    for c in PALETTE {
        let n = lines.iter().filter(|l| l.contains(&stroke(c))).count();
        assert_eq!(n, 1, "colour {}", stroke(c));
    }
    for l in &lines {
        if PALETTE.iter().any(|c| l.contains(&stroke(*c))) {
            assert_eq!(count(l, ","), 4, "{l}");
        }
    }
    assert_eq!(count(chart, "<circle"), 48);
    assert_eq!(count(chart, "<li>"), 12);
    assert!(chart.contains("rcmonster · disk=530 write_cache=off"));
    // The ticks name their units, each its own.
    assert!(chart.contains("size, log scale"), "x title");
    assert!(chart.contains("latency.mean median, log scale"), "y title");
    assert!(chart.contains("\n4 KiB\n"), "x ticks are bytes: {chart}");
    assert!(chart.contains(" ms\n"), "y ticks are times: {chart}");
}

/// The figure's dots: filled circles in the palette's colours.
fn dots(chart: &str) -> usize {
    chart
        .lines()
        .filter(|l| {
            l.contains("<circle")
                && PALETTE
                    .iter()
                    .any(|c| l.contains(&format!("fill=\"{}\"", charts::hex(*c))))
        })
        .count()
}

#[test]
fn a_metric_chart_has_a_dot_per_cell_a_row_per_configuration_and_whiskers_with_ci() {
    let page = Html.render(&seed_001());
    let chart = figure(&page, "dots-wall");
    assert_eq!(dots(chart), 48);
    // 32 cells with a CI: one whisker plus two caps each.
    assert_eq!(count(chart, &stroke(charts::WHISKER)), 32 * 3);
    // Rows are configurations (16), colours the hosts (3), named in the legend.
    assert!(
        chart.contains("\nsize=4K disk=530 write_cache=on\n"),
        "row label"
    );
    for host in ["rcmonster", "rc66", "flygecko"] {
        assert!(
            chart.contains(&format!("</span>{host}</li>")),
            "legend {host}"
        );
    }
    assert!(chart.contains("whiskers = 93.8% CI of the median"));
    // The key metric is open, latency.mean first.
    let metrics = page.find("<section id=\"metrics\"").unwrap();
    assert!(
        page[metrics..].find("dots-latency-mean").unwrap()
            < page[metrics..].find("dots-wall").unwrap()
    );
}

#[test]
fn a_value_axis_spans_the_data_not_zero() {
    let plot = DotPlot {
        rows: vec!["a".into(), "b".into()],
        series: 1,
        dots: vec![
            Dot {
                row: 0,
                series: 0,
                colour: 0,
                value: 0.0110,
                interval: Some((0.0105, 0.0118)),
                ring: false,
                faint: false,
            },
            Dot {
                row: 1,
                series: 0,
                colour: 0,
                value: 0.0120,
                interval: None,
                ring: false,
                faint: false,
            },
        ],
        axis: Axis::Values(Unit::for_values(&[0.011, 0.012], "s")),
        title: "wall median".into(),
    };
    let (lo, hi) = plot.range();
    assert!(lo > 0.010 && lo < 0.0105, "{lo}");
    assert!(hi > 0.0120 && hi < 0.0121, "{hi}");
    let svg = &charts::dot_svgs(&plot).unwrap()[0];
    // Ticks and title in ms: no tick reads 0, and none is written in seconds.
    assert!(svg.contains("wall median [ms]"));
    let ticks: Vec<f64> = svg
        .lines()
        .filter_map(|l| l.trim().parse::<f64>().ok())
        .collect();
    assert!(ticks.len() >= 3, "{ticks:?}");
    assert!(ticks.iter().all(|t| (10.0..=12.2).contains(t)), "{ticks:?}");
}

#[test]
fn one_unit_per_axis_and_per_row() {
    // A row of 0 and 487 µs reads in µs; bytes per second scale as bytes.
    let u = Unit::for_values(&[0.0, 0.000_487, 0.0], "s");
    assert_eq!(
        (u.show(0.000_487), u.show(0.0)),
        ("487.0 µs".into(), "0.0 µs".into())
    );
    let bw = Unit::for_values(&[3.0 * 1048576.0, 5.0 * 1048576.0], "B/s");
    assert_eq!(bw.label, "MiB/s");
    assert_eq!(bw.show(512.0 * 1024.0), "0.50 MiB/s");
    assert_eq!(Unit::for_values(&[3.0], "1").show(3.0), "3");
    // A table row with a zero stddev keeps the median's unit.
    let page = Html.render(&seed_001());
    assert!(page.contains("12.36 ms ± 0.60 ms"), "mean ± stddev in ms");
    // The pivot-free summary table names one unit per column in its header.
    assert!(
        page.contains("<th>latency.mean [ms]</th>"),
        "summary column unit"
    );
    assert!(page.contains("<th>wall [s]</th>"), "summary column unit");
}

#[test]
fn a_forest_plot_has_its_line_at_one_and_ratio_ticks() {
    let plot = DotPlot {
        rows: vec!["fs=btrfs vs ext4".into(), "fs=xfs vs ext4".into()],
        series: 1,
        dots: vec![
            Dot {
                row: 0,
                series: 0,
                colour: 3,
                value: 1.12,
                interval: Some((1.09, 1.15)),
                ring: false,
                faint: false,
            },
            Dot {
                row: 1,
                series: 0,
                colour: 0,
                value: 0.98,
                interval: Some((0.95, 1.02)),
                ring: false,
                faint: false,
            },
        ],
        axis: Axis::Ratio,
        title: "wall: ratio".into(),
    };
    let (lo, hi) = plot.range();
    assert!(lo < 0.95 && hi > 1.15 && lo > 0.8 && hi < 1.3, "{lo} {hi}");
    let svg = &charts::dot_svgs(&plot).unwrap()[0];
    let line: Vec<&str> = svg
        .lines()
        .filter(|l| l.contains(&stroke(REFERENCE)))
        .collect();
    assert_eq!(line.len(), 1, "one reference line");
    // Vertical: both of its points have the same x.
    let points = line[0]
        .split("points=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let xs: Vec<&str> = points
        .split(' ')
        .filter(|p| !p.is_empty())
        .map(|p| p.split(',').next().unwrap())
        .collect();
    assert_eq!(xs.len(), 2);
    assert_eq!(xs[0], xs[1], "{points}");
    assert!(svg.contains("wall: ratio (×, log scale)"));
    for tick in ["\n0.95×\n", "\n1×\n", "\n1.1×\n"] {
        assert!(svg.contains(tick), "tick {tick}");
    }
    assert_eq!(
        charts::ratio_ticks(0.3, 40.0),
        [0.5, 1.0, 2.0, 5.0, 10.0, 20.0]
    );
    assert_eq!(charts::ratio_ticks(0.97, 1.04), [0.98, 1.0, 1.02]);
    // 0.85× … 2.9× (a slow host): no labels crowding around 1×.
    assert_eq!(charts::ratio_ticks(0.85, 2.9), [0.9, 1.0, 1.25, 1.5, 2.0]);
    // A ratio range far from 1 still includes the line.
    let far = DotPlot {
        dots: vec![Dot {
            row: 0,
            series: 0,
            colour: 0,
            value: 3.0,
            interval: None,
            ring: false,
            faint: false,
        }],
        rows: vec!["x".into()],
        ..plot
    };
    assert!(far.range().0 < 1.0);
}

#[test]
fn percentile_curves_come_from_the_merged_histograms() {
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
    // 20000 operations: 100 µs, with a tail to 10 ms.
    for i in 0..20_000u64 {
        let ns = if i % 1000 == 0 {
            10_000_000
        } else if i % 100 == 0 {
            1_000_000
        } else {
            100_000 + i % 50
        };
        h.record(ns).unwrap();
    }
    let mut bytes = Vec::new();
    use hdrhistogram::serialization::Serializer as _;
    hdrhistogram::serialization::V2Serializer::new()
        .serialize(&h, &mut bytes)
        .unwrap();
    let merged = crate::report::merged_latency(&[bytes]).unwrap();
    let qs: Vec<f64> = merged.curve.iter().map(|p| p.0).collect();
    // 20000 operations resolve p99.99 (two above it), so all nine quantiles.
    assert_eq!(qs, crate::report::CURVE_QUANTILES);
    assert!(
        merged.curve.windows(2).all(|w| w[0].1 <= w[1].1),
        "{:?}",
        merged.curve
    );
    assert!((merged.curve[0].1 - 100e-6).abs() < 1e-6);
    assert!((merged.curve[8].1 - 10e-3).abs() < 1e-4);
    // A cell of 5000 operations stops at p99.95.
    let mut c = cell(
        "rc66",
        &[("size", "1")],
        vec![metric("latency.mean", 1e-4, true)],
    );
    c.latency = Some(merged.clone());
    let mut other = cell(
        "flygecko",
        &[("size", "1")],
        vec![metric("latency.mean", 2e-4, true)],
    );
    let mut slow = merged.clone();
    slow.curve.truncate(8);
    other.latency = Some(slow);
    let page = Html.render(&report(&["size"], vec![c, other]));
    let section = &page[page
        .find("<section id=\"percentiles\"")
        .expect("percentiles")..];
    let section = &section[..section.find("</section>").unwrap()];
    // One panel (one configuration), a line per host, named in the legend.
    assert_eq!(count(section, "<svg"), 1);
    let lines: Vec<&str> = section
        .lines()
        .filter(|l| {
            l.trim_start().starts_with("<polyline")
                && PALETTE.iter().any(|c| l.contains(&stroke(*c)))
        })
        .collect();
    assert_eq!(lines.len(), 2);
    let points: Vec<usize> = lines.iter().map(|l| count(l, ",")).collect();
    assert_eq!(points, [9, 8]);
    assert!(section.contains("</span>rc66</li>") && section.contains("</span>flygecko</li>"));
    for tick in ["\np50\n", "\np90\n", "\np99\n", "\np99.9\n", "\np99.99\n"] {
        assert!(section.contains(tick), "{tick}");
    }
    // Each tick in the unit that fits it: 100 µs … 10 ms.
    assert!(section.contains("latency, log scale"));
    assert!(
        section.contains("\n100 µs\n") && section.contains("\n10 ms\n"),
        "ticks in their units: {section}"
    );
}

#[test]
fn log_ticks_are_written_in_the_unit_that_fits_each() {
    let texts = |t: &charts::LogTicks| t.ticks.iter().map(|v| t.text(*v)).collect::<Vec<_>>();
    // Sub-microsecond operations up to a slow tail: no "0.00 ms".
    let t = charts::LogTicks::new(charts::log_ticks(1.5e-7, 1.2e-5), "s");
    assert_eq!(
        texts(&t),
        ["200 ns", "500 ns", "1 µs", "2 µs", "5 µs", "10 µs"]
    );
    let t = charts::LogTicks::new(charts::log_ticks(3e-4, 2.5), "s");
    assert_eq!(
        texts(&t),
        [
            "500 µs", "1 ms", "2 ms", "5 ms", "10 ms", "20 ms", "50 ms", "100 ms", "200 ms",
            "500 ms", "1 s", "2 s"
        ]
    );
    // Within a decade: the finer mantissas, as many digits as they need.
    let t = charts::LogTicks::new(charts::log_ticks(1.2e-6, 2.6e-6), "s");
    assert_eq!(texts(&t), ["1.5 µs", "2 µs", "2.5 µs"]);
    // Narrower still: four ticks spread evenly, each within 0.5% of its text, none alike.
    let t = charts::LogTicks::new(charts::log_ticks(1.001e-3, 1.004e-3), "s");
    let shown = texts(&t);
    assert_eq!(shown.len(), 4);
    for (v, text) in t.ticks.iter().zip(&shown) {
        let n: f64 = text.trim_end_matches(" ms").parse().unwrap();
        assert!((n * 1e-3 - v).abs() <= 0.005 * v, "{v} {text}");
    }
    let mut unique = shown.clone();
    unique.dedup();
    assert_eq!(unique, shown, "{shown:?}");
    // Sizes in bytes.
    let t = charts::LogTicks::new(vec![512.0, 4096.0, 65536.0, 1048576.0], "B");
    assert_eq!(texts(&t), ["512 B", "4 KiB", "64 KiB", "1 MiB"]);
}

#[test]
fn percentile_names_and_positions() {
    assert_eq!(charts::percentile_name(0.5), "p50");
    assert_eq!(charts::percentile_name(0.999), "p99.9");
    assert_eq!(charts::percentile_name(0.9999), "p99.99");
    assert!((charts::nines(0.99) - 2.0).abs() < 1e-9);
}

/// 60 configurations (`bs`) on 3 hosts.
fn large_matrix() -> Report {
    let mut cells = Vec::new();
    for host in ["a", "b", "c"] {
        for i in 0..60 {
            let bs = i.to_string();
            cells.push(cell(
                host,
                &[("bs", &bs)],
                vec![metric("wall", 1.0 + i as f64 / 100.0, true)],
            ));
        }
    }
    report(&["bs"], cells)
}

#[test]
fn a_large_matrix_stays_navigable() {
    // 60 configurations on 3 hosts: no chart taller than about 1000 px.
    let page = Html.render(&large_matrix());
    for svg in page.split("<svg").skip(1) {
        let h: u32 = svg
            .split("height=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(h <= 1100, "chart of {h} px");
    }
    let chart = figure(&page, "dots-wall");
    assert_eq!(count(chart, "<svg"), 2, "two panels of at most 36 rows");
    assert_eq!(dots(chart), 180);
    // The per-host tables are folded.
    assert!(page.contains("<details class=\"host\"><summary>a — 60 cell(s)</summary>"));
    assert!(page.contains("<table class=\"sortable\""));
}

#[test]
fn empty_report_says_there_are_no_samples() {
    let page = Html.render(&report(&[], vec![]));
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("There are no samples"));
    assert_eq!(count(&page, "<svg"), 0);
    assert_no_external_urls(&page);
}

#[test]
fn cells_without_metrics_render_without_charts() {
    let mut c = cell("rc66", &[("size", "1")], vec![]);
    c.failed = 5;
    let page = Html.render(&report(&["size"], vec![c]));
    assert!(page.contains("There are no samples: no cell recorded a metric"));
    assert!(page.contains("no samples</td>"));
    assert!(page.contains("5 failed repetition(s)"));
    assert_eq!(count(&page, "<svg"), 0);
}

#[test]
fn single_cell_and_zero_medians_do_not_panic() {
    let one = report(
        &["size"],
        vec![cell(
            "rc66",
            &[("size", "4K")],
            vec![metric("latency", 0.004, false)],
        )],
    );
    let page = Html.render(&one);
    assert!(figure(&page, "latency-vs-size").contains("latency against size"));
    assert!(figure(&page, "dots-latency").contains("no CI: too few repetitions"));

    let zeros = report(
        &["size"],
        vec![
            cell(
                "a",
                &[("size", "1")],
                vec![
                    metric("latency.mean", 0.0, true),
                    metric("wall", 0.0, false),
                ],
            ),
            cell(
                "a",
                &[("size", "2")],
                vec![metric("latency.mean", 0.0, true)],
            ),
        ],
    );
    let page = Html.render(&zeros);
    // Dot charts of zeros still draw; the log chart has nothing positive to show.
    assert_eq!(count(&page, "<svg"), 2);
    assert!(!page.contains("latency-vs-size"));
}

#[test]
fn log_axes_get_ticks_even_within_one_decade() {
    assert_eq!(
        charts::log_ticks(1e-4, 1e-1),
        [1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1]
    );
    let t = charts::log_ticks(3.43e-4, 3.92e-4);
    assert_eq!(t.len(), 4, "{t:?}");
    let t = charts::log_ticks(2.5e-4, 9.0e-4);
    assert!(
        t.len() >= 2 && t.iter().all(|v| (2.5e-4..=9.0e-4).contains(v)),
        "{t:?}"
    );
}

#[test]
fn sizes_accept_suffixes() {
    assert_eq!(parse_size("4K"), Some(4096.0));
    assert_eq!(parse_size("4KiB"), Some(4096.0));
    assert_eq!(parse_size("1M"), Some(1048576.0));
    assert_eq!(parse_size("8192"), Some(8192.0));
    assert_eq!(parse_size("0"), None);
    assert_eq!(parse_size("big"), None);
}

#[test]
fn the_side_by_side_table_has_one_unit_per_row_and_long_lists_fold() {
    let cells: Vec<CellReport> = [("a", 0.0005), ("b", 0.002), ("c", 0.0011)]
        .into_iter()
        .map(|(host, wall)| cell(host, &[("bs", "4k")], vec![metric("wall", wall, true)]))
        .collect();
    let mut r = report(&["bs"], cells);
    r.side_by_side = crate::report::side::build(&r.cells, &Default::default(), &[], &[]);
    r.outliers = (0..8)
        .map(|i| crate::report::judge::FleetOutlier {
            host: format!("h{i}"),
            device: String::new(),
            group: "bs=4k".into(),
            metric: "wall".into(),
            value: 0.002,
            unit: "s".into(),
            ratio: 2.0,
            ci: (1.8, 2.2),
            level: 0.9967,
            p_holm: 0.002,
        })
        .collect();
    let page = Html.render(&r);
    let table = &page[page
        .find("<table class=\"sortable side\"")
        .expect("side by side")..];
    let table = &table[..table.find("</table>").unwrap()];
    // The row's unit (ms, by its median of 1.1 ms) is named once; every value is in it.
    assert!(table.contains("<td>wall</td><td>ms</td>"), "{table}");
    for v in ["<b>0.50</b>", "<b>2.00</b>", "<b>1.10</b>"] {
        assert!(table.contains(v), "{v} in {table}");
    }
    assert!(!table.contains("µs") && !table.contains(" s<"), "{table}");
    // Eight outliers: five listed, three folded.
    let summary = &page[..page.find("</section>").unwrap()];
    assert!(summary.contains("8 outlier(s)"));
    assert!(summary.contains("<details><summary>3 more</summary>"));
    // The forest of the columns against the first host, with its line at 1×: a dot for
    // each other host, hollow (one run each is no evidence of a difference).
    let forest = figure(&page, "side-forest-wall");
    assert_eq!(count(forest, &stroke(REFERENCE)), 1);
    assert_eq!(dots(forest), 0, "no filled dot: {forest}");
    assert_eq!(count(forest, "<circle"), 2, "{forest}");
}

#[test]
fn value_axes_tick_at_round_numbers_of_their_own_unit() {
    let ms = charts::round_ticks(0.6601, 0.7199, 1e-3);
    let shown: Vec<String> = ms.iter().map(|t| format!("{:.3}", t / 1e-3)).collect();
    assert_eq!(
        shown,
        ["670.000", "680.000", "690.000", "700.000", "710.000"]
    );
    // MiB/s from bytes: round in MiB, not in bytes.
    let mib = 1048576.0;
    let t = charts::round_ticks(667.57 * mib, 715.26 * mib, mib);
    let shown: Vec<f64> = t.iter().map(|v| v / mib).collect();
    assert_eq!(shown, [670.0, 680.0, 690.0, 700.0, 710.0]);
    // A narrow span gets decimals' worth of steps.
    let t = charts::round_ticks(1.30, 1.58, 1.0);
    let shown: Vec<String> = t.iter().map(|v| format!("{v:.2}")).collect();
    assert_eq!(shown, ["1.30", "1.35", "1.40", "1.45", "1.50", "1.55"]);
}

#[test]
fn a_percentile_curve_labels_its_last_point() {
    let names = |qmax: f64| -> Vec<String> {
        charts::percentile_ticks(qmax)
            .into_iter()
            .map(|t| charts::percentile_name(1.0 - 10f64.powf(-t)))
            .collect()
    };
    assert_eq!(names(0.9999), ["p50", "p90", "p99", "p99.9", "p99.99"]);
    // p99.95 is the last point: labelled, and p99.9 (0.3 of a decade away) gives way.
    assert_eq!(names(0.9995), ["p50", "p90", "p99", "p99.95"]);
    assert_eq!(names(0.95), ["p50", "p95"]);
}

/// A pivot of seed 001's latencies by size (rows) and host (columns), with a unit per
/// row (`by_row`) or per column, a slot without a value and one resting on fewer runs.
fn pivot(by_row: bool) -> crate::report::judge::PivotTable {
    let units = vec!["s".to_string(), "s".to_string()];
    crate::report::judge::PivotTable {
        row_keys: vec!["size".into()],
        column_keys: vec!["host".into()],
        metric: "latency.mean".into(),
        stat: "median".into(),
        unit: String::new(),
        column_units: if by_row { vec![] } else { units.clone() },
        row_units: if by_row { units } else { vec![] },
        missing: vec![crate::report::judge::PivotMissing {
            row: 1,
            column: 0,
            measured: 3,
            runs: 5,
            reason: "+++++ <too fast>".into(),
        }],
        columns: vec!["rc66".into(), "flygecko".into()],
        rows: vec![
            (vec!["1".into()], vec![Some(0.0037), None]),
            (vec!["4K".into()], vec![Some(0.0092), Some(0.00091)]),
        ],
    }
}

/// Every page this module renders, written to `PLATTER_HTML_DUMP` (a directory) to compare
/// two builds' pages byte for byte; without it, nothing.
#[test]
fn pages_to_compare_between_builds() {
    let Some(dir) = std::env::var_os("PLATTER_HTML_DUMP") else {
        return;
    };
    let dir = std::path::Path::new(&dir);
    std::fs::create_dir_all(dir).unwrap();
    let mut pages = vec![("unit-seed001", seed_001())];
    let mut side = seed_001();
    side.side_by_side = crate::report::side::build(&side.cells, &Default::default(), &[], &[]);
    side.pivot = Some(pivot(true));
    side.verdicts = (0..8)
        .map(|i| crate::report::judge::Verdict {
            host: format!("h{i}"),
            device: String::new(),
            cell: "size=1 <x>".into(),
            threshold: "latency.mean < 1ms".into(),
            value: Some(0.002),
            unit: "s".into(),
            pass: i % 3 == 0,
            measured: String::new(),
        })
        .collect();
    side.provenance_changes
        .push("rc66: kernel 6.1 → 6.2 <&>".into());
    pages.push(("unit-seed001-side", side));
    let mut by_column = seed_001();
    by_column.pivot = Some(pivot(false));
    by_column.verdicts = vec![crate::report::judge::Verdict {
        host: "rc66".into(),
        device: String::new(),
        cell: "size=1".into(),
        threshold: "latency.mean < 1s".into(),
        value: Some(0.002),
        unit: "s".into(),
        pass: true,
        measured: String::new(),
    }];
    pages.push(("unit-seed001-pivot-columns", by_column));
    pages.push(("unit-large", large_matrix()));
    // Percentile curves of fio's kind: one host with 14 configurations (two panels of
    // lines), and three hosts with 10 (panels past the eighth folded).
    let curve_cell = |host: &str, bs: &str, x: f64| {
        let m = |q: &str, v: f64| metric(&format!("write.clat.{q}"), v * x, true);
        cell(
            host,
            &[("bs", bs)],
            vec![
                m("p50", 1e-4),
                m("p90", 2e-4),
                m("p99", 9e-4),
                m("p99.9", 4e-3),
            ],
        )
    };
    let one: Vec<CellReport> = (0..14)
        .map(|i| curve_cell("solo", &format!("{}k", 4 << i), 1.0 + i as f64))
        .collect();
    pages.push(("unit-percentiles-one-host", report(&["bs"], one)));
    let fleet: Vec<CellReport> = ["a", "b", "c"]
        .into_iter()
        .flat_map(|h| (0..10).map(move |i| (h, i)))
        .map(|(h, i)| curve_cell(h, &format!("{}k", 4 << i), 1.0 + i as f64 + h.len() as f64))
        .collect();
    pages.push(("unit-percentiles-fleet", report(&["bs"], fleet)));
    pages.push(("unit-empty", report(&[], vec![])));
    let mut c = cell("rc66", &[("size", "1")], vec![]);
    c.failed = 5;
    pages.push(("unit-no-metrics", report(&["size"], vec![c])));
    for (name, r) in pages {
        std::fs::write(dir.join(format!("{name}.html")), Html.render(&r)).unwrap();
    }
}

/// A drive's rounds: `values` per round of `write.iops` on rc66's sdb.
fn drive_rounds(values: &[f64]) -> crate::report::steady::DriveRounds {
    use crate::report::steady::{DriveRounds, Names};
    let names = Names {
        host: "rc66".into(),
        device: "sdb".into(),
        metric: "write.iops".into(),
        tracked: "bs=4k".into(),
    };
    DriveRounds::judged(names, values, crate::spec::SteadyRule::PTS)
}

#[test]
fn each_drive_has_a_rounds_chart_with_its_window_shaded_and_its_band() {
    let settles = [300.0, 210.0, 150.0, 101.0, 100.0, 99.0, 100.5, 100.0];
    let drifts: Vec<f64> = (0..25).map(|r| 100.0 * 1.05f64.powi(r)).collect();
    let mut r = report(&[], vec![]);
    r.rounds = vec![drive_rounds(&settles), {
        let mut d = drive_rounds(&drifts);
        d.device = "sdc".into();
        d
    }];
    let page = Html.render(&r);
    assert!(page.contains("<section id=\"rounds\">"));
    assert!(page.contains("<a href=\"#rounds\">Rounds</a>"));
    let steady = figure(&page, "rounds-rc66-sdb");
    // A dot per round, the counted window (rounds 4–8) shaded in the "good" colour.
    assert_eq!(count(steady, "<circle"), settles.len(), "{steady}");
    assert!(steady.contains("steady state in rounds 4–8 of write.iops"));
    let shade = format!("fill=\"{}\"", charts::hex(charts::colour(2)));
    assert!(steady.contains(&shade), "{steady}");
    // The average and the two edges of the band the rule allows, in the reference red.
    assert!(count(steady, &stroke(REFERENCE)) >= 1, "{steady}");
    let unsteady = figure(&page, "rounds-rc66-sdc");
    assert_eq!(count(unsteady, "<circle"), 25);
    assert!(unsteady.contains("no steady state after 25 rounds"));
    let warn = format!("fill=\"{}\"", charts::hex(charts::colour(1)));
    assert!(unsteady.contains(&warn), "{unsteady}");
}
