//! How long `platter report` and `platter compare` take, and how much memory, over a store
//! holding N synthetic samples. Fills a store like real agents would (a campaign planned
//! from YAML, measure steps ended with samples through the store's writer), then times the
//! release binary as a user runs it, in a process of its own (wall time and peak RSS from
//! `wait4`).
//!
//! ```sh
//! cargo build --release --bin platter
//! cargo bench -p platter --bench report_scale -- --samples 1000000 [--keep DIR]
//! ```
//!
//! Settings: `--samples N` (default 100,000; two campaigns of N each are stored, for
//! `compare`), `--cells C` (default 100), `--metrics M` samples per measurement (default
//! 4), `--formats json,table` (default), `--keep DIR` (keep the store there and print the
//! commands to re-run by hand), `--fleet H` (also a campaign on H hosts, every one of them
//! running its first step, and the times of `platter status` and `platter report` on it:
//! what an operator asks of a fleet-wide campaign while it runs). With `PLATTER_BENCH_POSTGRES=postgres://…` the store is a
//! new schema on that PostgreSQL server, and the reports read it from there, after an
//! `ANALYZE` of it (what autovacuum does within a minute of a bulk insert, long before a
//! real campaign of a million samples ends; `--no-analyze` reports straight after the
//! fill, with the statistics of an empty schema).

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use platter::store::Store;
use platter_proto::model::{Record, RecordKind, Sample, StepEvent, StepKind, StepState};

struct Args {
    samples: u64,
    cells: u64,
    metrics: u64,
    formats: Vec<String>,
    keep: Option<PathBuf>,
    analyze: bool,
    fleet: u64,
}

fn args() -> Args {
    let mut a = Args {
        samples: 100_000,
        cells: 100,
        metrics: 4,
        formats: vec!["json".into(), "table".into()],
        keep: None,
        analyze: true,
        fleet: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--samples" => a.samples = v().parse().expect("--samples N"),
            "--cells" => a.cells = v().parse().expect("--cells N"),
            "--metrics" => a.metrics = v().parse().expect("--metrics N"),
            "--formats" => a.formats = v().split(',').map(String::from).collect(),
            "--keep" => a.keep = Some(v().into()),
            "--no-analyze" => a.analyze = false,
            "--fleet" => a.fleet = v().parse().expect("--fleet H"),
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

const METRICS: [&str; 6] = [
    "wall",
    "user",
    "sys",
    "max_rss",
    "disk.write_bytes",
    "disk.writes",
];

/// Plans the campaign `yaml` and stores it, as a submission does.
fn submit(store: &Store, file: &str, yaml: &str) -> platter::planning::planner::PlannedCampaign {
    let c = platter::spec::parse(file, yaml).expect("a campaign");
    let planned =
        platter::planning::planner::plan(&c, "", store.id(), 1, &Default::default()).unwrap();
    store.insert_campaign(&planned, file, yaml).unwrap();
    planned
}

/// Stores one campaign of `cells` cells whose measurements carry `metrics` samples each,
/// `samples` in all; returns its id. `shift` scales the values (a slower second run).
async fn campaign(store: &Store, a: &Args, name: &str, shift: f64) -> String {
    let per_measure = a.metrics.min(METRICS.len() as u64);
    let repeat = (a.samples / per_measure / a.cells).max(1);
    let xs: Vec<String> = (1..=a.cells).map(|i| i.to_string()).collect();
    let yaml = format!(
        "name: {name}\nhosts: {{ names: [h] }}\nmatrix: {{ x: [{}], labels: [x] }}\nworkload: {{ command: {{ run: 'true' }} }}\nrepeat: {repeat}\n",
        xs.join(", ")
    );
    let planned = submit(store, "synthetic.yaml", &yaml);
    let plan = &planned.plans[0];
    let mut seq = 0u64;
    let mut batch = Vec::new();
    // A deterministic, skewed, noisy value per (cell, repetition, metric).
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut noise = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    for step in plan.steps.iter() {
        if !matches!(step.kind, StepKind::Measure(_)) {
            continue;
        }
        seq += 1;
        let cell = step.cell_id.clone();
        let samples = METRICS[..per_measure as usize]
            .iter()
            .enumerate()
            .map(|(m, metric)| Sample {
                metric: metric.to_string(),
                value: shift * (1.0 + m as f64) * (1.0 + 0.05 * noise() + 0.2 * noise().powi(8)),
                unit: if m == 0 { "s".into() } else { String::new() },
                histogram: Vec::new(),
                missing: String::new(),
            })
            .collect();
        batch.push(Record {
            seq,
            kind: RecordKind::Step(StepEvent {
                plan_id: plan.id.clone(),
                kind: "measure".into(),
                step_index: step.index,
                cell_id: cell,
                repetition: step.repetition,
                attempt: 1,
                state: StepState::Succeeded,
                started_unix_ns: seq as i64 * 1000,
                finished_unix_ns: seq as i64 * 1000 + 500,
                exit_status: 0,
                stderr_tail: String::new(),
                error: String::new(),
                samples,
            }),
        });
        if batch.len() == 4096 {
            store
                .write_records(&"h".into(), std::mem::take(&mut batch))
                .await
                .unwrap();
        }
    }
    let last = Record {
        seq: seq + 1,
        kind: RecordKind::PlanFinished {
            plan_id: plan.id.clone(),
            cancelled: false,
        },
    };
    batch.push(last);
    store.write_records(&"h".into(), batch).await.unwrap();
    planned.id.into_string()
}

/// Stores a campaign on `hosts` hosts (`f00000`, …), one measurement each, and has every
/// host accept its plan and start its measurement; returns its id.
async fn fleet_campaign(store: &Store, hosts: u64) -> String {
    let names: Vec<String> = (0..hosts).map(|i| format!("f{i:05}")).collect();
    let yaml = format!(
        "name: fleet\nhosts: {{ names: [{}] }}\nworkload: {{ command: {{ run: 'true' }} }}\nrepeat: 1\n",
        names.join(", ")
    );
    let planned = submit(store, "fleet.yaml", &yaml);
    // A thousand hosts' records at a time: the writer commits them together.
    for chunk in planned.plans.chunks(1000) {
        let writes = chunk.iter().map(|plan| {
            let step = plan
                .steps
                .iter()
                .find(|s| matches!(s.kind, StepKind::Measure(_)))
                .expect("a measure step");
            let records = vec![
                Record {
                    seq: 1,
                    kind: RecordKind::PlanAccepted {
                        plan_id: plan.id.clone(),
                    },
                },
                Record {
                    seq: 2,
                    kind: RecordKind::Step(StepEvent {
                        plan_id: plan.id.clone(),
                        kind: "measure".into(),
                        step_index: step.index,
                        cell_id: step.cell_id.clone(),
                        repetition: step.repetition,
                        attempt: 1,
                        state: StepState::Started,
                        started_unix_ns: 1_000,
                        finished_unix_ns: 0,
                        exit_status: 0,
                        stderr_tail: String::new(),
                        error: String::new(),
                        samples: Vec::new(),
                    }),
                },
            ];
            async move { store.write_records(&plan.host, records).await.unwrap() }
        });
        futures::future::join_all(writes).await;
    }
    planned.id.into_string()
}

fn platter_bin() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let release = root.join("target/release/platter");
    assert!(
        release.exists(),
        "build it first: cargo build --release --bin platter"
    );
    release
}

/// Runs `platter ARGS` with stdout discarded; returns wall time and peak RSS (MiB).
fn timed(bin: &Path, args: &[&str]) -> (Duration, f64) {
    let t = Instant::now();
    // Reaped by wait4 below, which also gives this child's own peak RSS.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(bin)
        .args(args)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage (integers and timevals) is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, with valid pointers; `child` is not waited twice.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid);
    let took = t.elapsed();
    let status = std::process::ExitStatus::from_raw(status);
    assert!(
        status.code().is_some_and(|c| c == 0 || c == 3),
        "platter {args:?}: {status}"
    );
    (took, ru.ru_maxrss as f64 / 1024.0)
}

fn main() {
    let a = args();
    let bin = platter_bin();
    let tmp = tempfile::tempdir().unwrap();
    let dir = a.keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir).unwrap();
    // PLATTER_BENCH_POSTGRES=postgres://…: the same campaigns in a new schema on that
    // server, reported from there.
    let location = match std::env::var("PLATTER_BENCH_POSTGRES") {
        Ok(url) if !url.is_empty() => platter::store::testing::fresh_postgres(&url),
        _ => {
            let db = dir.join("report-scale.db");
            let _ = std::fs::remove_file(&db);
            platter::store::db::Location::Sqlite(db)
        }
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let t = Instant::now();
    let store = Store::open_at(&location).unwrap();
    let (first, second, fleet) = rt.block_on(async {
        let first = campaign(&store, &a, "first", 1.0).await;
        let second = campaign(&store, &a, "second", 1.03).await;
        let fleet = match a.fleet {
            0 => None,
            hosts => Some(fleet_campaign(&store, hosts).await),
        };
        (first, second, fleet)
    });
    let samples: i64 = store
        .read(|c| c.query_row("SELECT COUNT(*) FROM sample_rows", (), |r| r.only()))
        .unwrap();
    if location.is_postgres() && a.analyze {
        store.read(|c| c.execute("ANALYZE", ())).unwrap();
    }
    drop(store);
    println!(
        "filled {location} with {samples} samples (two campaigns, {} cells each) in {:.1} s",
        a.cells,
        t.elapsed().as_secs_f64()
    );
    let db_arg = match &location {
        platter::store::db::Location::Sqlite(p) => p.display().to_string(),
        platter::store::db::Location::Postgres(url) => url.clone(),
    };
    for f in &a.formats {
        let (took, rss) = timed(&bin, &["report", &first, "--db", &db_arg, "--format", f]);
        println!(
            "report --format {f:<8} {:>7.2} s  peak RSS {rss:>7.1} MiB  ({} samples)",
            took.as_secs_f64(),
            samples / 2
        );
    }
    let (took, rss) = timed(&bin, &["compare", &first, &second, "--db", &db_arg]);
    println!(
        "compare                {:>7.2} s  peak RSS {rss:>7.1} MiB  (2 × {} samples)",
        took.as_secs_f64(),
        samples / 2
    );
    if let Some(fleet) = &fleet {
        for what in ["status", "report"] {
            let (took, rss) = timed(&bin, &[what, fleet, "--db", &db_arg]);
            println!(
                "{what} of a campaign on {} hosts, all running {:>7.2} s  peak RSS {rss:>7.1} MiB",
                a.fleet,
                took.as_secs_f64()
            );
        }
    }
    if a.keep.is_some() {
        println!(
            "again by hand: platter report {first} --db {db_arg}; platter compare {first} {second} --db {db_arg}"
        );
        if let Some(fleet) = &fleet {
            println!("the fleet: platter status {fleet} --db {db_arg}");
        }
    }
}
