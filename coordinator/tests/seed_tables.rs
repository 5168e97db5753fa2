//! Seed 000's table from its own numbers: samples written through the store as agents
//! would send them, then the report's pivot and baseline comparisons. With repetitions
//! spread a few percent around the seed's means, the 11% encryption penalty of Spring
//! is significant and the 1–2% "spinning rust penalty" of Scala and GCC is not.

mod common;

use common::measured;
use platter::planning::planner;
use platter::report::{Format, Report};
use platter::store::Store;
use platter_proto::model::{Sample, StepKind};

const CAMPAIGN: &str = r#"
name: ssd-build-times
hosts: { names: [w520] }
matrix:
  drive: [ssd, encrypted, usb]
  project: [spring, scala, gcc]
workload: { command: { run: "make -C /mnt/${drive}/${project}" } }
repeat: 5
report:
  baseline: { drive: ssd }
  pivot: { rows: [drive], columns: [project], metric: wall, stat: mean }
"#;

/// Seed 000's real time in seconds: (drive, project) → mean of the runs.
fn seed(drive: &str, project: &str) -> f64 {
    match (drive, project) {
        ("ssd", "spring") => 273.0,
        ("ssd", "scala") => 471.0,
        ("ssd", "gcc") => 6355.0,
        ("encrypted", "spring") => 303.0,
        ("encrypted", "scala") => 491.0,
        ("encrypted", "gcc") => 6558.0,
        ("usb", "spring") => 304.0,
        ("usb", "scala") => 477.0,
        ("usb", "gcc") => 6462.0,
        _ => unreachable!(),
    }
}

/// Five repetitions a few percent around the seed's mean (their mean is the seed's).
const SPREAD: [f64; 5] = [1.00, 0.97, 1.02, 0.99, 1.02];

#[tokio::test]
async fn seed_000_table_and_penalties_from_its_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("p.db")).unwrap();
    let campaign = platter::spec::parse("seed000.yaml", CAMPAIGN).unwrap();
    let planned = planner::plan(&campaign, "", "seed", 1, &Default::default()).unwrap();
    store
        .insert_campaign(&planned, "seed000.yaml", CAMPAIGN)
        .unwrap();
    let plan = &planned.plans[0];
    let mut records = Vec::new();
    for step in plan
        .steps
        .iter()
        .filter(|s| matches!(s.kind, StepKind::Measure(_)))
    {
        let cell = planned.cells.iter().find(|c| c.id == step.cell_id).unwrap();
        let wall = seed(&cell.params["drive"], &cell.params["project"])
            * SPREAD[step.repetition as usize - 1];
        let wall = Sample {
            metric: "wall".into(),
            value: wall,
            unit: "s".into(),
            histogram: vec![],
            missing: String::new(),
        };
        records.push(measured(
            records.len() as u64 + 1,
            &plan.id,
            step,
            0,
            vec![wall],
        ));
    }
    assert_eq!(records.len(), 45);
    store.write_records(&"w520".into(), records).await.unwrap();

    let report = Report::load(&store, &planned.id).unwrap();
    // The seed's layout: a row per drive, a column per project, the mean real time.
    let pivot = report.pivot.as_ref().unwrap();
    assert_eq!(pivot.columns, ["spring", "scala", "gcc"]);
    let labels: Vec<&str> = pivot.rows.iter().map(|(l, _)| l[0].as_str()).collect();
    assert_eq!(labels, ["ssd", "encrypted", "usb"]);
    for (label, values) in &pivot.rows {
        for (project, v) in pivot.columns.iter().zip(values) {
            let want = seed(&label[0], project);
            assert!(
                (v.unwrap() - want).abs() < 1e-9 * want,
                "{label:?} {project}: {v:?} vs {want}"
            );
        }
    }
    // Penalties against the SSD, as in the seed's last two rows.
    let row = |drive: &str, project: &str| {
        report
            .comparisons
            .iter()
            .map(|c| &c.row)
            .find(|c| c.candidate == drive && c.context.contains(&format!("project={project}")))
            .unwrap()
    };
    let spring = row("encrypted", "spring");
    assert!((spring.penalty_pct - 11.0).abs() < 0.1, "{spring:?}");
    assert!(spring.significant, "{spring:?}");
    for project in ["scala", "gcc"] {
        let rust = row("usb", project);
        assert!(rust.penalty_pct.abs() < 2.5, "{rust:?}");
        assert!(!rust.significant, "{rust:?}");
        assert!(
            rust.text.contains("no significant difference"),
            "{}",
            rust.text
        );
    }
    let table = Format::Table.exporter().render(&report);
    assert!(table.contains("mean of wall by drive × project"), "{table}");
    assert!(
        table.contains("drive=encrypted vs ssd penalty 11.0%"),
        "{table}"
    );
}
