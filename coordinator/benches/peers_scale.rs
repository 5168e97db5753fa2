//! `platter peers` at fleet scale (issue 49): one model with 10,000 drives measured 20 times
//! each (200,000 drive-runs, written as 20 done campaigns' drive results through
//! `Store::put_drive_results`), then the model's peers asked. Run:
//! `cargo bench -p platter --bench peers_scale` (SQLite), with
//! `PLATTER_BENCH_POSTGRES=postgres://…` on a new schema of that server instead.
//!
//! Prints the answer's time, and beside it, as the reference, the time of reading the same
//! rows alone (the indexed SELECT, no statistics): the ratio is what judging the peers
//! costs over reading them. `PLATTER_BENCH_DRIVES` and `PLATTER_BENCH_RUNS` change the size.

use std::time::Instant;

use platter::report::peers::{self, Ask};
use platter::store::peers::{DriveResult, PeerQuery};
use platter::store::Store;

const MODEL: &str = "SAMSUNG MZ7LH960HAJR";

fn main() {
    let drives: usize = env_or("PLATTER_BENCH_DRIVES", 10_000);
    let runs: usize = env_or("PLATTER_BENCH_RUNS", 20);
    let dir = tempfile::tempdir().unwrap();
    let store = match std::env::var("PLATTER_BENCH_POSTGRES") {
        Ok(url) if !url.is_empty() => {
            Store::open_at(&platter::store::testing::fresh_postgres(&url)).unwrap()
        }
        _ => Store::open(&dir.path().join("peers.db")).unwrap(),
    };
    let engine = if store.location().is_postgres() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    // A deterministic fleet: 5% run-to-run noise, every 500th drive 15% slower.
    let mut state: u64 = 49;
    let mut uniform = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let written = Instant::now();
    for run in 0..runs {
        let campaign = format!("night-{run}");
        let rows: Vec<DriveResult> = (0..drives)
            .map(|d| {
                let (u1, u2) = (uniform(), uniform());
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                let factor = if d % 500 == 7 { 1.15 } else { 1.0 };
                DriveResult {
                    campaign_id: campaign.clone().into(),
                    host: format!("host-{}", d / 24),
                    cell: d as i64,
                    drive_id: format!("{MODEL}/S4{d:06}"),
                    metric: "wall".into(),
                    model: MODEL.into(),
                    firmware: "HXT7404Q".into(),
                    controller: "sd>ahci".into(),
                    series: "fleet".into(),
                    workload: r#"{"Command":"fio --rw=randwrite --bs=4k"}"#.into(),
                    configuration: "bs=4k".into(),
                    state: String::new(),
                    key_metric: true,
                    unit: "s".into(),
                    median: 0.020 * factor * (0.05 * z).exp(),
                    n: 3,
                    finished_unix_ms: run as i64,
                }
            })
            .collect();
        store
            .put_drive_results(&campaign.clone().into(), &rows)
            .unwrap();
    }
    eprintln!(
        "wrote {} drive-runs in {:.1} s",
        drives * runs,
        written.elapsed().as_secs_f64()
    );
    let ask = Ask {
        model: MODEL.into(),
        ..Default::default()
    };
    // Once to warm the caches, then the best of three of each, interleaved.
    peers::peers(&store, &ask).unwrap();
    let (mut answer, mut read) = (f64::MAX, f64::MAX);
    let mut outliers = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let p = peers::peers(&store, &ask).unwrap();
        answer = answer.min(t.elapsed().as_secs_f64());
        outliers = p.outliers().len();
        let t = Instant::now();
        let rows = store
            .peer_runs(&PeerQuery {
                model: MODEL,
                ..Default::default()
            })
            .unwrap();
        read = read.min(t.elapsed().as_secs_f64());
        assert_eq!(rows.runs.len(), drives * runs);
    }
    println!(
        "peers_scale ({engine}): {drives} drives × {runs} runs = {} drive-runs: platter peers {answer:.3} s; reading the rows alone {read:.3} s; {:.2}× the read; {outliers} outliers (expected {})",
        drives * runs,
        answer / read,
        drives.div_ceil(500)
    );
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
