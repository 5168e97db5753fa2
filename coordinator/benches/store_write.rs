//! How many samples per second the coordinator's store commits durably (synchronous=FULL,
//! WAL) when many agents stream at once. Run: `cargo bench -p platter --bench store_write`.
//! Prints one line: agents, records, samples, seconds, samples/s. With
//! `PLATTER_BENCH_POSTGRES=postgres://…` the same records go to a new schema on that
//! PostgreSQL server instead (`synchronous_commit` as the server has it: on by default),
//! and then, side by side, the same rows go into another new schema of that server with
//! nothing of platter in between (`reference`): each agent's batches as transactions of two
//! binary `COPY`s, on as many connections as the store has writers. The ratio of the two
//! is what platter's writer costs over what the server itself takes for these rows. A
//! second reference stores each step's samples as one row of arrays instead (a layout
//! platter does not have): what fewer rows would let the server take.

use std::time::Instant;

use indexmap::IndexMap;
use platter::planning::planner::{PlannedCampaign, PlannedCell};
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
                id: cell_id(a, c).into(),
                host: format!("agent-{a}").into(),
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
        series: "bench".into(),
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
    // PostgreSQL: `PLATTER_DB_WRITERS` writers, as `platter serve --db-writers` has them.
    let writers = std::env::var("PLATTER_DB_WRITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(platter::store::DEFAULT_PG_WRITERS);
    let store = match std::env::var("PLATTER_BENCH_POSTGRES") {
        Ok(url) if !url.is_empty() => {
            Store::open_with_writers(&platter::store::testing::fresh_postgres(&url), writers)
                .unwrap()
        }
        _ => Store::open(&path).unwrap(),
    };
    let engine = if store.location().is_postgres() {
        format!("PostgreSQL, {writers} writers")
    } else {
        "SQLite".to_string()
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
                        .write_records(&format!("agent-{a}").into(), batch)
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
        .read(|c| c.query_row("SELECT COUNT(*) FROM samples", (), |r| r.only()))
        .unwrap();
    assert_eq!(stored as usize, samples, "every sample stored once");
    println!(
        "store_write ({engine}): {AGENTS} agents, {records} records, {samples} samples in {secs:.2} s = {:.0} samples/s",
        samples as f64 / secs
    );
    if let Ok(url) = std::env::var("PLATTER_BENCH_POSTGRES") {
        if !url.is_empty() {
            drop(store);
            let mut hosts = vec![0; writers];
            for a in 0..AGENTS {
                hosts[platter::store::writer_of(&format!("agent-{a}"), writers)] += 1;
            }
            println!("agents per writer: {hosts:?}");
            let floor = reference(&url, writers, Layout::Rows);
            println!(
                "reference (PostgreSQL, {writers} connections, two COPYs per batch): {samples} samples in {floor:.2} s = {:.0} samples/s; platter / reference: {:.2}× the time",
                samples as f64 / floor,
                secs / floor
            );
            let arrays = reference(&url, writers, Layout::Arrays);
            println!(
                "reference with a step's samples as one row of arrays (not platter's layout): {samples} samples in {arrays:.2} s = {:.0} samples/s",
                samples as f64 / arrays
            );
        }
    }
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// How the reference stores samples.
#[derive(Clone, Copy)]
enum Layout {
    /// As platter does: a row per sample, keyed by (step, metric).
    Rows,
    /// A row per step, its samples' columns as arrays (`step_samples`, made for the
    /// reference only): what a layout with fewer rows would let the server do.
    Arrays,
}

/// The same rows stored with nothing of platter in between: a new schema migrated as the
/// store's, then each agent's batches, one transaction each (`COPY` of its steps with their
/// keys chosen here, `COPY` of their samples), agents spread over `connections`
/// connections as the store spreads hosts over its writers. Returns the seconds taken.
fn reference(url: &str, connections: usize, layout: Layout) -> f64 {
    use platter::store::db::pg;
    use tokio_postgres::types::{ToSql, Type};
    let location = platter::store::testing::fresh_postgres(url);
    let schema_url = match &location {
        platter::store::db::Location::Postgres(u) => u.clone(),
        platter::store::db::Location::Sqlite(_) => unreachable!(),
    };
    let store = Store::open_at(&location).unwrap();
    store
        .insert_campaign(&campaign(), "bench.yaml", "")
        .unwrap();
    let cells: std::collections::HashMap<String, i64> = store
        .read(|c| {
            c.query_map("SELECT id, n FROM cells", (), |r| {
                Ok((r.get("id")?, r.get("n")?))
            })
        })
        .unwrap()
        .into_iter()
        .collect();
    drop(store);
    if let Layout::Arrays = layout {
        let rt = pg::PgRuntime::new().unwrap();
        let c = pg::connect(&schema_url, rt.handle(), pg::DEFAULT_DEADLINE, None).unwrap();
        c.batch(
            "CREATE TABLE step_samples (step BIGINT PRIMARY KEY, metric TEXT[] COLLATE \"C\" NOT NULL,
                 value DOUBLE PRECISION[], unit TEXT[] COLLATE \"C\" NOT NULL, histogram BYTEA[],
                 missing TEXT[] COLLATE \"C\")",
        )
        .unwrap();
    }
    // Every row is built before the clock starts, as for the store above; each agent's
    // batches go on the connection of the writer the store gives its host, so both runs
    // share the same imbalance.
    type Row = (i64, StepEvent, i64);
    // Layout::Arrays: per step, its samples' columns (empty for Layout::Rows).
    type Arrays = (
        Vec<String>,
        Vec<f64>,
        Vec<String>,
        Vec<Option<Vec<u8>>>,
        Vec<Option<String>>,
    );
    // An agent's batch: its host, its steps, their arrays.
    type Batch = (String, Vec<Row>, Vec<Arrays>);
    let mut work: Vec<Vec<Batch>> = vec![Vec::new(); connections];
    for agent in 0..AGENTS {
        for b in 0..BATCHES_PER_AGENT {
            let rows = (b * RECORDS_PER_BATCH + 1..=(b + 1) * RECORDS_PER_BATCH)
                .map(|seq| {
                    let RecordKind::Step(e) = record(agent, seq as u64).kind else {
                        unreachable!("the bench sends step records")
                    };
                    let cell = cells[e.cell_id.as_str()];
                    ((agent as i64) << 32 | seq as i64, e, cell)
                })
                .collect::<Vec<Row>>();
            let arrays = match layout {
                Layout::Rows => Vec::new(),
                Layout::Arrays => rows
                    .iter()
                    .map(|(_, e, _)| {
                        let s = &e.samples;
                        (
                            s.iter().map(|s| s.metric.clone()).collect(),
                            s.iter().map(|s| s.value).collect(),
                            s.iter().map(|s| s.unit.clone()).collect(),
                            vec![None; s.len()],
                            vec![None; s.len()],
                        )
                    })
                    .collect(),
            };
            let host = format!("agent-{agent}");
            // The connection the store's writers would use for this host.
            work[platter::store::writer_of(&host, connections)].push((host, rows, arrays));
        }
    }
    let started = Instant::now();
    let threads: Vec<_> = work
        .into_iter()
        .map(|batches| {
            let url = schema_url.clone();
            std::thread::spawn(move || {
                let rt = pg::PgRuntime::new().unwrap();
                let c = pg::connect(&url, rt.handle(), pg::DEFAULT_DEADLINE, None).unwrap();
                let (zero, no) = (0i64, String::new());
                let (no_bytes, no_text): (Option<&[u8]>, Option<&str>) = (None, None);
                let (no_bytes, no_text) = (&no_bytes, &no_text);
                for (host, rows, arrays) in &batches {
                    let texts: Vec<[&str; 2]> = rows
                        .iter()
                        .map(|(_, e, _)| [e.plan_id.as_str(), e.state.as_str()])
                        .collect();
                    let ints: Vec<[i64; 3]> = rows
                        .iter()
                        .map(|(_, e, _)| {
                            [
                                i64::from(e.step_index),
                                i64::from(e.attempt),
                                i64::from(e.repetition),
                            ]
                        })
                        .collect();
                    c.batch("BEGIN").unwrap();
                    c.copy_in(
                        "COPY steps (n, plan_id, step_index, attempt, state, kind, cell, repetition, host,
                                     started_unix_ns, finished_unix_ns, exit_status, stderr_tail, error, warmup)
                         FROM STDIN (FORMAT binary)",
                        &[
                            Type::INT8, Type::TEXT, Type::INT8, Type::INT8, Type::TEXT, Type::TEXT,
                            Type::INT8, Type::INT8, Type::TEXT, Type::INT8, Type::INT8, Type::INT8,
                            Type::TEXT, Type::TEXT, Type::INT8,
                        ],
                        rows.iter().zip(&ints).zip(&texts).map(|(((n, e, cell), [index, attempt, repetition]), [plan_id, state])| {
                            [
                                n as &(dyn ToSql + Sync),
                                plan_id,
                                index,
                                attempt,
                                state,
                                &e.kind,
                                cell,
                                repetition,
                                host,
                                &e.started_unix_ns,
                                &e.finished_unix_ns,
                                &zero,
                                &no,
                                &no,
                                &zero,
                            ]
                        }),
                    )
                    .unwrap();
                    match layout {
                        Layout::Rows => c.copy_in(
                            "COPY samples (step, metric, value, unit, histogram, missing) FROM STDIN (FORMAT binary)",
                            &[Type::INT8, Type::TEXT, Type::FLOAT8, Type::TEXT, Type::BYTEA, Type::TEXT],
                            rows.iter().flat_map(|(n, e, _)| {
                                e.samples.iter().map(move |s| {
                                    [
                                        n as &(dyn ToSql + Sync),
                                        &s.metric,
                                        &s.value,
                                        &s.unit,
                                        no_bytes,
                                        no_text,
                                    ]
                                })
                            }),
                        ),
                        Layout::Arrays => {
                            c.copy_in(
                                "COPY step_samples (step, metric, value, unit, histogram, missing) FROM STDIN (FORMAT binary)",
                                &[
                                    Type::INT8, Type::TEXT_ARRAY, Type::FLOAT8_ARRAY, Type::TEXT_ARRAY,
                                    Type::BYTEA_ARRAY, Type::TEXT_ARRAY,
                                ],
                                rows.iter().zip(arrays).map(|((n, _, _), (m, v, u, h, x))| {
                                    [n as &(dyn ToSql + Sync), m, v, u, h, x]
                                }),
                            )
                        }
                    }
                    .unwrap();
                    c.batch("COMMIT").unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    started.elapsed().as_secs_f64()
}
