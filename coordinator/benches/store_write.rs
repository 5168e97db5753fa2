//! How many samples per second the coordinator's store commits durably (synchronous=FULL,
//! WAL) when many agents stream at once. Run: `cargo bench -p platter --bench store_write`.
//! Prints one line: agents, records, samples, seconds, samples/s. With
//! `PLATTER_BENCH_POSTGRES=postgres://…` the same records go to a new schema on that
//! PostgreSQL server instead (`synchronous_commit` as the server has it: on by default).

use std::time::Instant;

use indexmap::IndexMap;
use platter::planner::{PlannedCampaign, PlannedCell};
use platter::store::Store;
use platter_proto::model::{
    OnFailure, Plan, Record, RecordKind, Sample, Step, StepEvent, StepKind, StepState, Workload,
};

const AGENTS: usize = 16;
const BATCHES_PER_AGENT: usize = 100;
const RECORDS_PER_BATCH: usize = 256;
const SAMPLES_PER_RECORD: usize = 4;
const CELLS_PER_AGENT: u64 = 64;

fn cell_id(agent: usize, cell: u64) -> String {
    format!("{:016x}", (agent as u64) << 32 | cell)
}

/// Each agent's plan: one measure step per record it sends (the store applies a record only
/// to a plan planned for the sending host).
fn plan(agent: usize) -> Plan {
    let steps = (1..=(BATCHES_PER_AGENT * RECORDS_PER_BATCH) as u64)
        .map(|seq| Step {
            index: (seq - 1) as u32,
            cell_id: cell_id(agent, seq % CELLS_PER_AGENT).into(),
            repetition: (seq / CELLS_PER_AGENT) as u32 + 1,
            warmup: false,
            kind: StepKind::Measure(Workload::Command("true".into())),
        })
        .collect();
    Plan {
        id: format!("plan-{agent}").into(),
        campaign_id: "bench-1".into(),
        campaign_name: "bench".into(),
        host: format!("agent-{agent}").into(),
        steps,
        on_failure: OnFailure::Continue,
        run_as: Default::default(),
    }
}

/// A campaign whose cells and plans the records refer to, as a submission would store it.
fn campaign() -> PlannedCampaign {
    let cells = (0..AGENTS)
        .flat_map(|a| {
            (0..CELLS_PER_AGENT).map(move |c| PlannedCell {
                id: cell_id(a, c),
                host: format!("agent-{a}"),
                index: c as usize,
                params: IndexMap::from([("cell".to_string(), c.to_string())]),
                point: c as usize,
                device: None,
            })
        })
        .collect();
    PlannedCampaign {
        id: "bench-1".into(),
        name: "bench".into(),
        content_hash: "bench".into(),
        generation: 1,
        params: vec!["cell".into()],
        repeat: 1,
        cells,
        plans: (0..AGENTS).map(plan).collect(),
    }
}

fn record(agent: usize, seq: u64) -> Record {
    Record {
        seq,
        kind: RecordKind::Step(StepEvent {
            plan_id: format!("plan-{agent}").into(),
            kind: "measure".into(),
            step_index: (seq - 1) as u32,
            cell_id: cell_id(agent, seq % CELLS_PER_AGENT).into(),
            repetition: (seq / CELLS_PER_AGENT) as u32 + 1,
            attempt: 1,
            state: StepState::Succeeded,
            started_unix_ns: 1,
            finished_unix_ns: 2,
            exit_status: 0,
            stderr_tail: String::new(),
            error: String::new(),
            samples: (0..SAMPLES_PER_RECORD)
                .map(|m| Sample {
                    metric: format!("m{m}"),
                    value: seq as f64 * 1e-3,
                    unit: "s".into(),
                    histogram: Vec::new(),
                    missing: String::new(),
                })
                .collect(),
        }),
    }
}

fn main() {
    let dir = std::env::var_os("PLATTER_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("platter-bench-{}.db", std::process::id()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = match std::env::var("PLATTER_BENCH_POSTGRES") {
        Ok(url) if !url.is_empty() => {
            Store::open_at(&platter::store::testing::fresh_postgres(&url)).unwrap()
        }
        _ => Store::open(&path).unwrap(),
    };
    let engine = if store.location().is_postgres() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    store
        .insert_campaign(&campaign(), "bench.yaml", "")
        .unwrap();
    // Build every batch before the clock starts: the benchmark times the store alone.
    let work: Vec<Vec<Vec<Record>>> = (0..AGENTS)
        .map(|a| {
            (0..BATCHES_PER_AGENT)
                .map(|b| {
                    (0..RECORDS_PER_BATCH)
                        .map(|r| record(a, (b * RECORDS_PER_BATCH + r + 1) as u64))
                        .collect()
                })
                .collect()
        })
        .collect();
    let started = Instant::now();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for (a, batches) in work.into_iter().enumerate() {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                for batch in batches {
                    store
                        .write_records(&format!("agent-{a}"), batch)
                        .await
                        .unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    let secs = started.elapsed().as_secs_f64();
    let records = AGENTS * BATCHES_PER_AGENT * RECORDS_PER_BATCH;
    let samples = records * SAMPLES_PER_RECORD;
    let stored: i64 = store
        .read(|c| c.query_row("SELECT COUNT(*) FROM samples", (), |r| r.get(0)))
        .unwrap();
    assert_eq!(stored as usize, samples, "every sample stored once");
    println!(
        "store_write ({engine}): {AGENTS} agents, {records} records, {samples} samples in {secs:.2} s = {:.0} samples/s",
        samples as f64 / secs
    );
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}
