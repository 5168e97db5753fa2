//! Comparisons leave nothing out: a baseline by host pairs each host's cells with the
//! baseline host's whatever the devices are called there, and lists the cells it cannot
//! pair; `platter compare A B` lists the cells either campaign lacks and exits non-zero.

mod common;

use platter::planner::{self, Inventories};
use platter::report::{Format, Report};
use platter::store::Store;
use platter_agent::model::{Record, RecordKind, Sample, StepEvent, StepKind, StepState};
use platter_agent::probes::inventory::Device;

const BY_HOST: &str = r#"
name: fleet-fsync
hosts: { names: [rc66, rcmonster] }
devices: { model: "INTEL SSDSC2BW120A4" }
matrix:
  size: [1, 4096]
workload: { command: { run: "true" } }
repeat: 6
report: { baseline: { host: rc66 }, metric: wall }
"#;

fn drive(name: &str) -> Device {
    serde_json::from_value(serde_json::json!({
        "name": name, "path": format!("/dev/{name}"), "major_minor": "7:0",
        "vendor": "", "model": "INTEL SSDSC2BW120A4", "serial": format!("S-{name}"),
        "firmware": "", "size_bytes": 120_000_000_000u64, "rotational": false,
        "transport": "ata", "controller": [], "pci_address": null, "by_id": [],
        "by_path": [], "write_cache": "unknown", "write_cache_source": "",
        "partitions": [], "mounted": [], "holders": [], "holds_root": false,
        "backing_file": null,
    }))
    .unwrap()
}

/// Six repetitions a few percent around 1.
const SPREAD: [f64; 6] = [1.00, 0.97, 1.02, 0.99, 1.02, 1.01];

/// rc66 tests loop3 and loop4; rcmonster the same model as sdb, sdc and a third, sdd,
/// each twice as slow. Samples go through the store as agents would send them.
#[tokio::test]
async fn a_baseline_by_host_pairs_devices_named_differently_and_lists_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("p.db")).unwrap();
    let campaign = platter::spec::parse("fleet.yaml", BY_HOST).unwrap();
    let inventories: Inventories = [
        ("rc66".to_string(), vec![drive("loop3"), drive("loop4")]),
        (
            "rcmonster".to_string(),
            vec![drive("sdb"), drive("sdc"), drive("sdd")],
        ),
    ]
    .into_iter()
    .collect();
    let planned = planner::plan(&campaign, "", "seed", 1, &inventories).unwrap();
    store
        .insert_campaign(&planned, "fleet.yaml", BY_HOST)
        .unwrap();
    for plan in &planned.plans {
        let slow = if plan.host == "rcmonster" { 2.0 } else { 1.0 };
        let mut records = Vec::new();
        for step in plan
            .steps
            .iter()
            .filter(|s| matches!(s.kind, StepKind::Measure(_)))
        {
            records.push(Record {
                seq: records.len() as u64 + 1,
                kind: RecordKind::Step(StepEvent {
                    plan_id: plan.id.clone(),
                    kind: "measure".into(),
                    step_index: step.index,
                    cell_id: step.cell_id.clone(),
                    repetition: step.repetition,
                    attempt: 1,
                    state: StepState::Succeeded,
                    started_unix_ns: 0,
                    finished_unix_ns: 0,
                    exit_status: 0,
                    stderr_tail: String::new(),
                    error: String::new(),
                    samples: vec![Sample {
                        metric: "wall".into(),
                        value: 0.01 * slow * SPREAD[step.repetition as usize - 1],
                        unit: "s".into(),
                        histogram: vec![],
                        missing: String::new(),
                    }],
                }),
            });
        }
        store.write_records(&plan.host, records).await.unwrap();
    }

    let report = Report::load(&store, &planned.id).unwrap();
    let lines: Vec<String> = report
        .comparisons
        .iter()
        .map(|c| format!("{}: {}", c.row.context, c.row.text))
        .collect();
    let compared: Vec<_> = report.comparisons.iter().filter(|c| c.compared).collect();
    assert_eq!(compared.len(), 4, "{lines:#?}");
    for c in &compared {
        assert!((c.row.ratio - 2.0).abs() < 1e-9, "{c:?}");
        assert!(c.row.significant, "{c:?}");
    }
    for (dev, base) in [("sdb", "loop3"), ("sdc", "loop4")] {
        for size in ["1", "4096"] {
            let want = format!("size={size}: host=rcmonster {dev} vs rc66 {base} penalty 100.0%");
            assert!(
                lines.iter().any(|l| l.starts_with(&want)),
                "{want}\n{lines:#?}"
            );
        }
    }
    let unmatched: Vec<&String> = lines.iter().filter(|l| l.contains("no cell")).collect();
    assert_eq!(
        unmatched,
        [
            "device=sdd size=1: rcmonster sdd: no cell on rc66 to compare with",
            "device=sdd size=4096: rcmonster sdd: no cell on rc66 to compare with",
        ]
    );
    // The reader sees them too.
    let table = Format::Table.exporter().render(&report);
    assert!(
        table.contains("device=sdd size=4096: rcmonster sdd: no cell on rc66 to compare with"),
        "{table}"
    );
}
