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
use platter::planner;
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

async fn report() -> Report {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("p.db")).unwrap();
    let campaign = platter::spec::parse("one-voice.yaml", CAMPAIGN).unwrap();
    let planned = planner::plan(&campaign, "", "voice", 1, &Default::default()).unwrap();
    store
        .insert_campaign(&planned, "one-voice.yaml", CAMPAIGN)
        .unwrap();
    for plan in &planned.plans {
        let mut records = Vec::new();
        for step in plan
            .steps
            .iter()
            .filter(|s| matches!(s.kind, StepKind::Measure(_)))
        {
            let cell = planned.cells.iter().find(|c| c.id == step.cell_id).unwrap();
            let ms = runs(&plan.host, &cell.params["conv"])[step.repetition as usize - 1];
            let wall = Sample {
                metric: "wall".into(),
                value: ms / 1e3,
                unit: "s".into(),
                histogram: vec![],
                missing: String::new(),
            };
            records.push(measured(
                records.len() as u64 + 1,
                &plan.id,
                step,
                step.repetition as i64,
                vec![wall],
            ));
        }
        store.write_records(&plan.host, records).await.unwrap();
    }
    Report::load(&store, &planned.id).unwrap()
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
