//! Nothing disappears from a report: every failure is listed with its cell (the terminal
//! report says how many it does not spell out), a value a tool could not measure is
//! counted and named, and every sample is exported raw.

mod common;

use common::*;
use platter::report::{Format, Report};
use platter::store::Store;
use platter_proto::model::{Sample, StepKind};

#[test]
fn every_failure_is_listed_with_its_cell() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let file = write(
        dir,
        "fails.yaml",
        "name: fails\nhosts: { names: [local] }\nmatrix: { bs: [4k, 1M] }\n\
         workload: { command: { run: \"sh -c 'echo no ${bs} >&2; exit 3'\" } }\nrepeat: 6\n",
    );
    let run = |format: &str| {
        platter()
            .arg("run")
            .arg(&file)
            .args(["--format", format, "--db"])
            .arg(dir.join("p.db"))
            .arg("--state-dir")
            .arg(dir.join("agent"))
            .output()
            .unwrap()
    };
    let out = run("table");
    assert_eq!(out.status.code(), Some(1));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("12 step(s) failed:"), "{table}");
    // The first ten, each with its cell; then how many more.
    assert_eq!(
        table.matches(": measure (repetition ").count(),
        platter::report::MAX_FAILURES_SHOWN,
        "{table}"
    );
    assert!(
        table.contains(" bs=4k: measure (repetition 1): "),
        "{table}"
    );
    assert!(table.contains(" bs=1M: measure (repetition "), "{table}");
    assert!(
        table.contains("… and 2 more (`--format json` lists every one)"),
        "{table}"
    );

    // Resumed (the same file again): the report is read again, now as JSON, complete.
    let out = run("json");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let failures = json["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 12);
    for f in failures {
        let cell = f["cell"].as_str().unwrap();
        assert!(cell == "bs=4k" || cell == "bs=1M", "{f}");
        assert!(
            f["stderr_tail"]
                .as_str()
                .unwrap()
                .contains(&format!("no {}", cell.trim_start_matches("bs="))),
            "{f}"
        );
    }
}

/// A bonnie++-like measure whose block reads were too fast to time in two of three runs,
/// and whose seeks were never timed.
#[tokio::test]
async fn values_too_fast_to_measure_are_counted_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("p.db")).unwrap();
    let yaml = "name: b\nhosts: { names: [h] }\nworkload: { command: { run: x } }\nrepeat: 3\n";
    let campaign = platter::spec::parse("b.yaml", yaml).unwrap();
    let planned =
        platter::planning::planner::plan(&campaign, "", store.id(), 1, &Default::default())
            .unwrap();
    store.insert_campaign(&planned, "b.yaml", yaml).unwrap();
    let plan = &planned.plans[0];
    let too_fast = "too fast to measure (bonnie++ printed +++++)";
    let sample = |metric: &str, value: Option<f64>| Sample {
        metric: metric.into(),
        value: value.unwrap_or(f64::NAN),
        unit: "B/s".into(),
        histogram: Vec::new(),
        missing: if value.is_some() {
            String::new()
        } else {
            too_fast.into()
        },
    };
    let mut records = Vec::new();
    let measures = plan
        .steps
        .iter()
        .filter(|s| matches!(s.kind, StepKind::Measure(_)));
    for (i, step) in measures.enumerate() {
        let read = (i == 1).then_some(900e6);
        let samples = vec![
            sample("block_read", read),
            sample("seeks", None),
            sample("block_write", Some(300e6 + i as f64)),
        ];
        records.push(measured(
            records.len() as u64 + 1,
            &plan.id,
            step,
            1_000 + i as i64,
            samples,
        ));
    }
    store.write_records(&"h".into(), records).await.unwrap();
    let report = Report::load(&store, &planned.id).unwrap();
    let cell = &report.cells[0];
    let read = cell
        .metrics
        .iter()
        .find(|m| m.metric == "block_read")
        .unwrap();
    assert_eq!((read.stats.n, read.not_measured), (1, 2));
    assert_eq!(read.not_measured_reason, too_fast);
    assert_eq!(read.samples.len(), 3, "every sample, the unmeasured too");
    assert_eq!(cell.unmeasured.len(), 1);
    assert_eq!(
        (cell.unmeasured[0].metric.as_str(), cell.unmeasured[0].count),
        ("seeks", 3)
    );

    let table = Format::Table.exporter().render(&report);
    assert!(
        table.contains(&format!("block_read  1 (+2 {too_fast})")),
        "{table}"
    );
    assert!(
        table.contains(&format!("seeks       0 (+3 {too_fast})")),
        "{table}"
    );
    assert!(
        table.contains("block_read: 2 of 3 repetitions too fast to measure"),
        "{table}"
    );
    let csv = Format::CsvSamples.exporter().render(&report);
    assert_eq!(csv.lines().count(), 1 + 3 * 3, "{csv}");
    assert_eq!(csv.matches(too_fast).count(), 5, "{csv}");
    let json: serde_json::Value =
        serde_json::from_str(&Format::Json.exporter().render(&report)).unwrap();
    let m = &json["cells"][0]["metrics"];
    let write = m
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "block_write")
        .unwrap();
    let times: Vec<f64> = write["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["value"].as_f64().unwrap())
        .collect();
    assert_eq!(times, [300e6, 300e6 + 1.0, 300e6 + 2.0]);
}
