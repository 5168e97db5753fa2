//! One question, one estimate: the ratio a report prints for a host against the baseline
//! is the comparison's own (Hodges–Lehmann, with its interval and Holm's verdict) in the
//! side-by-side view, the comparison lines, the findings, JSON and the HTML page — never a
//! bare ratio of medians beside a "no significant difference".
//!
//! The case that was reported: two hosts, alpha the baseline, six runs each of a dd whose
//! medians are 24.50 ms and 35.05 ms (a ratio of ×1.43) while the runs overlap so much that
//! the comparison finds no difference. A second configuration differs for real (×2).

mod common;

use common::measured;
use platter::planning::planner;
use platter::report::side::SideValue;
use platter::report::{Format, Report};
use platter::store::Store;
use platter_proto::model::{Sample, StepKind};

const CAMPAIGN: &str = r#"
name: one-voice
hosts: { names: [alpha, beta] }
matrix:
  conv: [notrunc, fdatasync]
workload: { command: { run: "dd if=/dev/zero of=f bs=1M count=32 conv=${conv}" } }
repeat: 6
report:
  baseline: { host: alpha }
"#;

/// Wall times in ms per (host, conv), in run order.
fn runs(host: &str, conv: &str) -> [f64; 6] {
    match (host, conv) {
        // Medians 24.50 and 35.05 ms: ×1.43 of medians, but the runs overlap.
        ("alpha", "notrunc") => [22.82, 43.90, 23.9, 24.2, 24.8, 30.0],
        ("beta", "notrunc") => [23.44, 24.0, 37.24, 34.9, 35.2, 36.0],
        // A real difference: every beta run is twice an alpha run.
        ("alpha", "fdatasync") => [50.0, 51.0, 49.5, 50.5, 52.0, 50.2],
        ("beta", "fdatasync") => [100.0, 102.0, 99.0, 101.0, 104.0, 100.4],
        _ => unreachable!(),
    }
}

/// `yaml` planned (for `local` as this host's name), each measure step's samples as
/// `samples(host, cell parameters, repetition)` gives them, stored as agents send them;
/// the report read back.
async fn stored(
    yaml: &str,
    local: &str,
    samples: impl Fn(&str, &indexmap::IndexMap<String, String>, u32) -> Vec<Sample>,
) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("p.db")).unwrap();
    let campaign = platter::spec::parse("c.yaml", yaml).unwrap();
    let planned = planner::plan(&campaign, local, "voice", 1, &Default::default()).unwrap();
    store.insert_campaign(&planned, "c.yaml", yaml).unwrap();
    for plan in &planned.plans {
        let records = plan
            .steps
            .iter()
            .filter(|s| matches!(s.kind, StepKind::Measure(_)))
            .enumerate()
            .map(|(i, step)| {
                let cell = planned.cells.iter().find(|c| c.id == step.cell_id).unwrap();
                let samples = samples(&plan.host, &cell.params, step.repetition);
                measured(
                    i as u64 + 1,
                    &plan.id,
                    step,
                    step.repetition as i64,
                    samples,
                )
            })
            .collect();
        store.write_records(&plan.host, records).await.unwrap();
    }
    Report::load(&store, &planned.id).unwrap()
}

/// A wall time of `seconds`.
fn wall(metric: &str, seconds: f64) -> Sample {
    Sample {
        metric: metric.into(),
        value: seconds,
        unit: "s".into(),
        histogram: vec![],
        missing: String::new(),
    }
}

async fn report() -> Report {
    stored(CAMPAIGN, "", |host, params, rep| {
        vec![wall(
            "wall",
            runs(host, &params["conv"])[rep as usize - 1] / 1e3,
        )]
    })
    .await
}

#[tokio::test]
async fn the_side_by_side_ratio_is_the_comparisons_estimate_in_every_format() {
    let r = report().await;
    let comparison = |conv: &str| {
        r.comparisons
            .iter()
            .find(|c| c.row.context.contains(&format!("conv={conv}")))
            .unwrap_or_else(|| panic!("no comparison for {conv}: {:#?}", r.comparisons))
    };
    let noise = comparison("notrunc");
    let real = comparison("fdatasync");
    assert!(!noise.row.significant, "{noise:?}");
    assert!(real.row.significant, "{real:?}");
    // Hodges–Lehmann: the median of the 36 run-over-run ratios, not 35.05 / 24.50.
    assert!((noise.row.ratio - 1.1866).abs() < 1e-3, "{noise:?}");
    assert!((real.row.ratio - 2.0).abs() < 0.02, "{real:?}");

    // The side-by-side view carries the same numbers, and the verdict.
    let side = r.side_by_side.as_ref().expect("two hosts");
    assert_eq!(side.columns, ["alpha", "beta"]);
    let ratio_of = |conv: &str| {
        let row = side
            .rows
            .iter()
            .find(|row| row.metric == "wall" && row.params["conv"] == conv)
            .unwrap();
        assert!(
            matches!(&row.values[0], SideValue::Measured { ratio: None, .. }),
            "the baseline's own column has no ratio: {row:?}"
        );
        match &row.values[1] {
            SideValue::Measured {
                ratio: Some(ratio), ..
            } => ratio.clone(),
            other => panic!("{other:?}"),
        }
    };
    for (conv, c) in [("notrunc", noise), ("fdatasync", real)] {
        let s = ratio_of(conv);
        assert_eq!(s.ratio, c.row.ratio, "{conv}");
        assert_eq!(s.significant, c.row.significant, "{conv}");
        assert_eq!(Some(s.holm_p), c.holm_p, "{conv}");
        let (lo, hi) = c.row.ci_pct.unwrap();
        let (slo, shi) = s.ratio_ci.unwrap();
        assert!(
            (slo - (1.0 + lo / 100.0)).abs() < 1e-12 && (shi - (1.0 + hi / 100.0)).abs() < 1e-12
        );
    }
    let noise_text = ratio_of("notrunc").text();
    let real_text = ratio_of("fdatasync").text();
    assert!(
        noise_text.starts_with("×1.19 (") && noise_text.ends_with(") ~"),
        "{noise_text}"
    );
    assert!(
        real_text.starts_with("×2.0") && !real_text.ends_with('~'),
        "{real_text}"
    );

    // Text and Markdown: the ratio with its interval and mark; the ratio of medians nowhere.
    for format in [Format::Table, Format::Markdown] {
        let text = format.exporter().render(&r);
        assert!(text.contains(&noise_text), "{format:?}:\n{text}");
        assert!(text.contains(&real_text), "{format:?}:\n{text}");
        assert!(!text.contains("×1.43"), "{format:?}:\n{text}");
        assert!(
            text.contains("no significant difference"),
            "{format:?}:\n{text}"
        );
    }
    // JSON: the same estimate, its interval and verdict beside the median.
    let json: serde_json::Value =
        serde_json::from_str(&Format::Json.exporter().render(&r)).unwrap();
    let rows = json["side_by_side"]["rows"].as_array().unwrap();
    let beta_notrunc = rows
        .iter()
        .find(|row| row["params"]["conv"] == "notrunc" && row["metric"] == "wall")
        .map(|row| &row["values"][1])
        .unwrap();
    assert_eq!(beta_notrunc["ratio"].as_f64(), Some(noise.row.ratio));
    assert_eq!(beta_notrunc["significant"], false);
    assert!(beta_notrunc["ratio_ci"].is_array(), "{beta_notrunc}");
    // HTML: the not-significant ratio is greyed, the significant one is not.
    let html = Format::Html.exporter().render(&r);
    assert!(
        html.contains(&format!(
            "<span class=\"ratio muted\">{}</span>",
            noise_text
        )),
        "greyed ratio missing"
    );
    assert!(html.contains(&format!("<span class=\"ratio\">{}</span>", real_text)));
    assert!(!html.contains("×1.43"));
}

#[tokio::test]
async fn findings_lead_with_the_answer_and_advice_is_said_once() {
    let r = report().await;
    let table = Format::Table.exporter().render(&r);
    // The findings come first, before the side-by-side view.
    let findings = &table
        [table.find("findings (wall)").expect("findings")..table.find("side by side").unwrap()];
    let lines: Vec<&str> = findings
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    // Ranked by size: conv (×3–4 on both hosts) before beta's ×2.
    assert!(
        lines[0].starts_with("conv=fdatasync vs notrunc: ×"),
        "{findings}"
    );
    assert!(
        lines[1].starts_with("host=beta vs alpha: ×2.00 ("),
        "{findings}"
    );
    // The same ratio as the side-by-side view and the comparison, noise marked.
    assert!(
        lines[1].contains("×1.19 (0.80–1.53) ~ at conv=notrunc"),
        "{findings}"
    );
    assert_eq!(lines.len(), 2, "{findings}");
    // JSON carries them structured.
    let json: serde_json::Value =
        serde_json::from_str(&Format::Json.exporter().render(&r)).unwrap();
    assert_eq!(json["findings"]["differences"][1]["kind"], "host");
    assert_eq!(
        json["findings"]["differences"][1]["at"][0]["ratio"].as_f64(),
        Some(real_ratio(&r))
    );

    // Six runs: no single run is called an outlier; the noise is said once, in one line
    // counting the cells, and each cell's own advice is in the details and in JSON.
    assert!(!table.contains("far from the others"), "{table}");
    let advice: Vec<&str> = table
        .lines()
        .filter(|l| l.trim_start().starts_with("advice: "))
        .collect();
    assert_eq!(advice.len(), 1, "{advice:#?}");
    assert!(
        advice[0].contains("noise: in 2 of 4 cells the median's interval reaches more than ±10%"),
        "{advice:#?}"
    );
    let details = &table[table.find("details: each cell's advice").expect("details")..];
    assert_eq!(
        details
            .lines()
            .filter(|l| l.contains("the median's interval reaches"))
            .count(),
        2,
        "{details}"
    );
    let noisy: usize = json["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            c["advice"]
                .as_array()
                .map_or(0, |a| a.iter().filter(|a| a["kind"] == "noisy").count())
        })
        .sum();
    assert_eq!(noisy, 2);
}

fn real_ratio(r: &Report) -> f64 {
    r.comparisons
        .iter()
        .find(|c| c.row.context.contains("conv=fdatasync"))
        .unwrap()
        .row
        .ratio
}

const QUICK: &str = r#"
name: quick
hosts: { names: [vm] }
matrix:
  bs: [4k, 1M]
  sync: [none, fdatasync]
  include:
    - { sync: none, conv: notrunc }
    - { sync: fdatasync, conv: fdatasync }
workload: { command: { run: "dd if=/dev/zero of=f-${sync} bs=${bs} count=32M iflag=count_bytes conv=${conv}" } }
repeat: 6
"#;

#[tokio::test]
async fn a_parameter_and_the_one_include_ties_to_it_are_one_finding_and_duplicates_show_once() {
    let r = stored(QUICK, "vm", |_, params, rep| {
        // fdatasync costs ×3 at 4k and ×2 at 1M; 1M blocks take 0.8 of the time of 4k.
        let base = if params["bs"] == "4k" { 20.0 } else { 16.0 };
        let cost = match (params["bs"].as_str(), params["sync"].as_str()) {
            (_, "none") => 1.0,
            ("4k", _) => 3.0,
            _ => 2.0,
        };
        let s = base * cost * (1.0 + 0.01 * rep as f64) / 1e3;
        // `total` the very same values as `wall`, as the fsync loop reports them.
        vec![wall("wall", s), wall("total", s)]
    })
    .await;
    let whats: Vec<&str> = r
        .findings
        .differences
        .iter()
        .map(|f| f.what.as_str())
        .collect();
    assert_eq!(
        whats,
        [
            "sync=fdatasync vs none (conv=fdatasync vs notrunc)",
            "bs=1M vs 4k"
        ],
        "{:#?}",
        r.findings
    );
    let sync = &r.findings.differences[0];
    assert_eq!(sync.at.len(), 2);
    assert_eq!(sync.at[0].context, "bs=4k", "largest first");
    assert!(
        (sync.at[0].ratio.ratio - 3.0).abs() < 1e-9 && (sync.at[1].ratio.ratio - 2.0).abs() < 1e-9
    );
    let table = Format::Table.exporter().render(&r);
    assert!(
        table.contains("sync=fdatasync vs none (conv=fdatasync vs notrunc): ×3.00 (2.91–3.09) at bs=4k (62.10 ms vs 20.70 ms), ×2.00 (1.94–2.06) at bs=1M"),
        "{table}"
    );
    // `total` is `wall` again: one row per cell, and JSON says which it repeats.
    assert_eq!(
        table.lines().filter(|l| l.contains(" total ")).count(),
        0,
        "{table}"
    );
    assert_eq!(
        table.lines().filter(|l| l.contains(" wall ")).count(),
        4,
        "{table}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&Format::Json.exporter().render(&r)).unwrap();
    let total = json["cells"][0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "total")
        .unwrap()
        .clone();
    assert_eq!(total["same_as"], "wall");
}

const EIGHT: &str = r#"
name: eight
hosts: { names: [a, b] }
matrix:
  size: [1, 2, 3, 4, 5, 6, 7, 8]
workload: { command: { run: "dd if=/dev/zero of=f bs=${size}k count=1" } }
repeat: 5
"#;

#[tokio::test]
async fn one_difference_in_every_configuration_is_significant_together_though_not_alone() {
    let r = stored(EIGHT, "", |host, _, rep| {
        let factor = if host == "b" { 3.0 } else { 1.0 };
        vec![wall("wall", 0.01 * factor * (1.0 + 0.02 * rep as f64))]
    })
    .await;
    // Five runs a side: the exact test's smallest p is 2/252, over Holm's 8 tests 0.063.
    let side = r.side_by_side.as_ref().unwrap();
    for row in &side.rows {
        let SideValue::Measured { ratio: Some(x), .. } = &row.values[1] else {
            panic!("{row:?}");
        };
        assert!((x.ratio - 3.0).abs() < 1e-9 && !x.significant, "{x:?}");
    }
    // Together, eight configurations agreeing on ×3 are a finding, not "no difference".
    let f = &r.findings.differences;
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    assert_eq!(f[0].what, "host=b vs a");
    let overall = f[0].overall.as_ref().unwrap();
    assert!(
        overall.significant && overall.configurations == 8,
        "{overall:?}"
    );
    let table = Format::Table.exporter().render(&r);
    assert!(
        table.contains("together significant over all 8 configurations"),
        "{table}"
    );
    assert!(
        !table.contains("no significant difference: host=b"),
        "{table}"
    );
}
