//! Flags at scale (issue 50): 1,000 open flags (and 4,000 closed ones around them, as a
//! lab's history has) with realistic evidence, then listed as `platter flags` lists them,
//! goal ≤ 0.2 s. Run: `cargo bench -p platter --bench flags_scale` (SQLite), with
//! `PLATTER_BENCH_POSTGRES=postgres://…` on a new schema of that server instead.
//!
//! Prints the listing's time, best of 5, and beside it, as the reference, the time of
//! `Store::alert_rules` on the same store (a read of one row): the ratio is what the
//! listing costs over the store's own round trip. `PLATTER_BENCH_FLAGS` changes the size.
//! The whole command, process start included, is timed with hyperfine against
//! `platter alerts list` on the same store (BENCHMARKS.md).

use std::time::{Duration, Instant};

use platter::store::flags::{FlagFilter, FlagKind, FlagState, NewFlag, Severity};
use platter::store::Store;
use serde_json::json;

fn main() {
    let open: usize = env_or("PLATTER_BENCH_FLAGS", 1_000);
    let dir = tempfile::tempdir().unwrap();
    let store = match std::env::var("PLATTER_BENCH_POSTGRES") {
        Ok(url) if !url.is_empty() => {
            Store::open_at(&platter::store::testing::fresh_postgres(&url)).unwrap()
        }
        _ => Store::open(&dir.path().join("flags.db")).unwrap(),
    };
    let engine = if store.location().is_postgres() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    let written = Instant::now();
    let all = open * 5;
    let flags: Vec<NewFlag> = (0..all)
        .map(|i| NewFlag {
            kind: FlagKind::Regression,
            severity: if i % 7 == 0 {
                Severity::Critical
            } else {
                Severity::Warning
            },
            evidence_key: format!("regression|nightly-{}|host-{}|bs=4k rw=randwrite|wall|c-{i}", i % 20, i % 97),
            series: format!("nightly-{}", i % 20),
            host: format!("host-{}", i % 97),
            model: String::new(),
            drive: String::new(),
            metric: "wall".into(),
            cell: "bs=4k rw=randwrite".into(),
            campaign_id: format!("c-{i}"),
            summary: format!(
                "REGRESSION nightly-{} on host-{} (bs=4k rw=randwrite): wall 20.00 ms → 22.40 ms, +12.0% [+9.1%, +14.8%] (96.8%); changed: kernel: 6.1.0 → 6.12.1",
                i % 20,
                i % 97
            ),
            evidence: json!({
                "runs": [format!("c-{}", i.saturating_sub(1)), format!("c-{i}")],
                "before": 0.020, "after": 0.0224, "unit": "s", "threshold_pct": 3.0,
                "since": { "change_pct": 12.0, "ci_pct": [9.1, 14.8], "ci_level": 0.968,
                           "holm_p": 0.008, "significant": true, "flag": "regression",
                           "changed": ["kernel: 6.1.0 → 6.12.1"] }
            }),
            link: format!("/campaigns/c-{i}"),
        })
        .collect();
    for chunk in flags.chunks(500) {
        store.raise_flags(None, chunk, &[]).unwrap();
    }
    // Four in five closed: acknowledged, fixed or false positive by now.
    for (i, f) in flags.iter().enumerate().filter(|(i, _)| i % 5 != 0) {
        let id = platter::store::flags::flag_id(&f.evidence_key);
        let state = [
            FlagState::Fixed,
            FlagState::FalsePositive,
            FlagState::Fixed,
            FlagState::Fixed,
        ][i % 4];
        store.set_flag_state(&id, state, "bench", "bench").unwrap();
    }
    eprintln!(
        "{engine}: {all} flags written in {:.1} s, {open} of them open",
        written.elapsed().as_secs_f64()
    );
    let best = |f: &dyn Fn() -> usize| -> (Duration, usize) {
        (0..5)
            .map(|_| {
                let t = Instant::now();
                let n = f();
                (t.elapsed(), n)
            })
            .min()
            .unwrap()
    };
    let (list, n) = best(&|| {
        store
            .flags(&FlagFilter {
                state: Some(FlagState::Open),
                ..Default::default()
            })
            .unwrap()
            .len()
    });
    assert_eq!(n, open);
    let (reference, _) = best(&|| store.alert_rules().unwrap().len());
    println!(
        "{engine}: {open} open flags listed in {:.1} ms (best of 5; goal ≤ 200 ms); one-row read {:.2} ms",
        list.as_secs_f64() * 1e3,
        reference.as_secs_f64() * 1e3
    );
    if let Ok(keep) = std::env::var("PLATTER_BENCH_KEEP") {
        if !store.location().is_postgres() {
            drop(store);
            std::fs::copy(dir.path().join("flags.db"), &keep).unwrap();
            println!("store kept at {keep}");
        }
    }
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
