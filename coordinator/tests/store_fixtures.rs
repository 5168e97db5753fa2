//! The store contract, held by stores earlier builds wrote (COMPATIBILITY.md).
//!
//! `fixtures/stores/sqlite-v<N>.db` is a SQLite store at schema version N (its
//! `user_version`), and `sqlite-v<N>.json` what it held as the build that recorded it read
//! it: row counts, each campaign's samples (count and sum per metric, and the SHA-256 of
//! `platter report --format csv-samples` over the columns it had), each series' runs, the
//! drives of the ledger, accounts, API tokens and schedules. Every later build copies each
//! store to a temporary directory, opens it (`platter db migrate`, which brings it to this
//! build's schema), and must find all of it again, through the same commands operators use:
//! `platter status`, `report`, `history`, `drives`, `users list`, `tokens list`, and
//! `schedule list` from a coordinator serving the store.
//!
//! Fixtures are written only with `PLATTER_UPDATE_FIXTURES=1` and only where missing (an
//! existing fixture is never rewritten: a store that no longer reads as recorded is a broken
//! contract). `this_builds_schema_version_has_a_fixture` fails when the build's schema
//! version has none, so every schema bump records its own.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{platter, run_ok};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const UPDATE: &str = "PLATTER_UPDATE_FIXTURES";

fn updating() -> bool {
    std::env::var(UPDATE).is_ok_and(|v| v == "1")
}

fn stores_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stores")
}

/// `platter` reading the store named by `--db`, whatever coordinator the environment names.
fn local() -> Command {
    let mut c = platter();
    c.env_remove("PLATTER_COORDINATOR")
        .env_remove("PLATTER_DB")
        .env_remove("PLATTER_TLS_DIR");
    c
}

fn stdout(cmd: &mut Command) -> String {
    String::from_utf8(run_ok(cmd).stdout).expect("UTF-8 output")
}

fn json_of(cmd: &mut Command) -> Value {
    let text = stdout(cmd);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{cmd:?}: not JSON ({e}): {text}"))
}

/// The schema version this build brings a store to: a new store's `user_version`, which
/// `platter db migrate` also says.
fn build_schema_version() -> u32 {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("new.db");
    let said = stdout(local().args(["db", "migrate", "--db"]).arg(&db));
    let version = user_version(&db);
    assert!(
        said.contains(&format!("SQLite schema at version {version}")),
        "{said}"
    );
    version
}

fn user_version(db: &Path) -> u32 {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    c.query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

/// Every recorded store: (schema version, its .db).
fn fixtures() -> Vec<(u32, PathBuf)> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(stores_dir())
        .into_iter()
        .flatten()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?;
            let v = name
                .strip_prefix("sqlite-v")?
                .strip_suffix(".db")?
                .parse()
                .ok()?;
            Some((v, p))
        })
        .collect();
    found.sort();
    found
}

fn sidecar(db: &Path) -> PathBuf {
    db.with_extension("json")
}

// ---------------------------------------------------------------------------------------
// What a store holds, read through this build.

/// Tables whose rows a store keeps (counted with SQL: the one thing here not read through
/// a command). A later schema that moves rows to another table counts them here under the
/// recorded name; the recorded numbers never change.
const TABLES: &[&str] = &[
    "campaigns",
    "cells",
    "plans",
    "steps",
    "samples",
    "provenance",
    "agents",
    "drives",
    "drive_sightings",
    "schedules",
    "schedule_firings",
    "accounts",
    "api_tokens",
];

/// A CSV document's rows (RFC 4180: quoted fields, doubled quotes), header first.
fn csv_rows(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let (mut row, mut field) = (Vec::new(), String::new());
    let (mut quoted, mut chars) = (false, text.chars().peekable());
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, '\r') => {}
            (false, c) => field.push(c),
        }
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    rows
}

/// One campaign's samples as `platter report --format csv-samples` prints them: the
/// columns (those `columns` names when given: what was recorded, so a column added later
/// changes nothing), the SHA-256 of those columns of every row, and per metric the number
/// of values and their sum.
fn samples_of(db: &Path, campaign: &str, columns: Option<Vec<String>>) -> Value {
    let text = stdout(
        local()
            .args(["report", campaign, "--format", "csv-samples", "--db"])
            .arg(db),
    );
    let rows = csv_rows(&text);
    let header = rows.first().cloned().unwrap_or_default();
    let columns = columns.unwrap_or_else(|| header.clone());
    let at = |name: &str| header.iter().position(|h| h == name);
    let picked: Vec<Option<usize>> = columns.iter().map(|c| at(c)).collect();
    let gone: Vec<&String> = columns
        .iter()
        .zip(&picked)
        .filter(|(_, p)| p.is_none())
        .map(|(c, _)| c)
        .collect();
    let mut sha = Sha256::new();
    let mut metrics = serde_json::Map::new();
    let (metric, value) = (at("metric"), at("value"));
    for row in &rows[1.min(rows.len())..] {
        let line: Vec<&str> = picked
            .iter()
            .map(|p| p.and_then(|i| row.get(i)).map_or("", String::as_str))
            .collect();
        sha.update(line.join("\u{1f}").as_bytes());
        sha.update(b"\n");
        let (Some(m), Some(v)) = (
            metric.and_then(|i| row.get(i)),
            value.and_then(|i| row.get(i)),
        ) else {
            continue;
        };
        let entry = metrics
            .entry(m.clone())
            .or_insert_with(|| json!({"n": 0, "sum": 0.0, "missing": 0}));
        match v.parse::<f64>() {
            Ok(x) => {
                entry["n"] = json!(entry["n"].as_u64().unwrap() + 1);
                entry["sum"] = json!(entry["sum"].as_f64().unwrap() + x);
            }
            Err(_) => entry["missing"] = json!(entry["missing"].as_u64().unwrap() + 1),
        }
    }
    json!({
        "csv_columns": columns,
        "csv_columns_gone": gone,
        "csv_rows": rows.len().saturating_sub(1),
        "csv_sha256": hex::encode(sha.finalize()),
        "metrics": metrics,
    })
}

/// Each cell's merged latency histogram as the report gives it (`null` for a cell without
/// histograms), by cell id.
fn cell_latencies(report: &Value) -> Value {
    let mut cells: Vec<(String, Value)> = report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["cell_id"].as_str().unwrap().to_string(),
                c["latency"].clone(),
            )
        })
        .collect();
    cells.sort_by(|a, b| a.0.cmp(&b.0));
    Value::Object(cells.into_iter().collect())
}

/// What `db` holds, read by this build. `recorded` (the sidecar's `holds`) names the CSV
/// columns each campaign's digest is taken over.
fn describe(db: &Path, work: &Path, recorded: Option<&Value>) -> Value {
    let mut counts = serde_json::Map::new();
    {
        let c =
            rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .unwrap();
        for t in TABLES {
            let n: i64 = c
                .query_row(&format!("SELECT COUNT(*) FROM {t}"), [], |r| r.get(0))
                .unwrap_or_else(|e| panic!("counting {t}: {e}"));
            counts.insert(t.to_string(), json!(n));
        }
        let n: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM samples WHERE histogram IS NOT NULL",
                [],
                |r| r.get(0),
            )
            .unwrap();
        counts.insert("samples_with_histogram".into(), json!(n));
    }

    let status = json_of(local().args(["status", "--output", "json", "--db"]).arg(db));
    let mut campaigns: Vec<Value> = Vec::new();
    for s in status.as_array().expect("a list of campaigns") {
        let id = s["campaign_id"].as_str().unwrap();
        let columns = recorded
            .and_then(|r| r["campaigns"].as_array())
            .and_then(|cs| cs.iter().find(|c| c["id"] == id))
            .and_then(|c| c["samples"]["csv_columns"].as_array())
            .map(|cols| {
                cols.iter()
                    .map(|c| c.as_str().unwrap().to_string())
                    .collect()
            });
        let report = json_of(
            local()
                .args(["report", id, "--format", "json", "--db"])
                .arg(db),
        );
        // The table operators read: it must still print.
        let table = stdout(local().args(["report", id, "--db"]).arg(db));
        assert!(table.contains(s["name"].as_str().unwrap()), "{table}");
        campaigns.push(json!({
            "id": id,
            "name": s["name"],
            "series": s["series"],
            "state": s["state"],
            "cells_total": s["cells_total"],
            "steps_total": s["steps_total"],
            "steps_done": s["steps_done"],
            "steps_failed": s["steps_failed"],
            "report_cells": report["cells"].as_array().map(Vec::len),
            "measurements_missing": report["measurements_missing"],
            // Per cell, the latency histograms of its runs merged (none without them).
            "latency": cell_latencies(&report),
            "samples": samples_of(db, id, columns),
        }));
    }
    campaigns.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));

    let mut series = serde_json::Map::new();
    for c in &campaigns {
        let name = c["series"].as_str().unwrap();
        if series.contains_key(name) {
            continue;
        }
        let h = json_of(
            local()
                .args(["history", name, "--format", "json", "--db"])
                .arg(db),
        );
        let runs: Vec<&Value> = h["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| &r["campaign_id"])
            .collect();
        series.insert(
            name.to_string(),
            json!({"runs": runs, "lines": h["lines"].as_array().map(Vec::len)}),
        );
    }

    let drives = json_of(local().args(["drives", "--format", "json", "--db"]).arg(db));
    let mut drives: Vec<Value> = drives
        .as_array()
        .unwrap()
        .iter()
        .map(|d| json!({"id": d["id"], "identity": d["identity"], "hosts": d["hosts"]}))
        .collect();
    drives.sort_by_key(|d| d["id"].to_string());
    let accounts = json_of(
        local()
            .args(["users", "list", "--output", "json", "--db"])
            .arg(db),
    );
    let accounts: Vec<Value> = accounts
        .as_array()
        .unwrap()
        .iter()
        .map(|a| json!({"name": a["name"], "role": a["role"]}))
        .collect();
    let tokens = json_of(
        local()
            .args(["tokens", "list", "--output", "json", "--db"])
            .arg(db),
    );
    let tokens: Vec<Value> = tokens
        .as_array()
        .unwrap()
        .iter()
        .map(|t| json!({"id": t["id"], "account": t["account"], "role": t["role"], "label": t["label"]}))
        .collect();

    json!({
        "counts": counts,
        "campaigns": campaigns,
        "series": series,
        "drives": drives,
        "accounts": accounts,
        "tokens": tokens,
        "schedules": schedules(db, work),
    })
}

/// A plaintext coordinator on 127.0.0.1 serving `db`, and its address.
fn serve(db: &Path, work: &Path) -> (common::Proc, String) {
    let mut cmd = local();
    cmd.args(["serve", "--dangerously-insecure", "--listen", "127.0.0.1:0"])
        .arg("--db")
        .arg(db)
        .env("PLATTER_LOG", "info");
    let (proc, port) = common::spawn_listening(&mut cmd, work, "coordinator");
    (proc, format!("http://127.0.0.1:{port}"))
}

/// Schedules, as `platter schedule list` shows them from a coordinator serving `db` (a
/// copy: a coordinator records itself in its store).
fn schedules(db: &Path, work: &Path) -> Value {
    let (_coordinator, url) = serve(db, work);
    let mut list = local();
    list.args([
        "schedule",
        "list",
        "--format",
        "json",
        "--coordinator",
        &url,
    ])
    .arg("--dangerously-insecure");
    let list = json_of(&mut list);
    let mut out: Vec<Value> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            json!({
                "name": s["name"], "series": s["series"], "when": s["when"],
                "paused": s["paused"], "policy": s["policy"], "firings": s["firings"],
            })
        })
        .collect();
    out.sort_by_key(|s| s["name"].to_string());
    Value::Array(out)
}

/// Where `today` differs from `recorded`: every value recorded must be there as it was
/// (numbers to 1e-9 relative); what a later build adds is not compared.
fn differences(recorded: &Value, today: &Value, path: &str, out: &mut Vec<String>) {
    match (recorded, today) {
        (Value::Object(r), Value::Object(t)) => {
            for (k, v) in r {
                let p = format!("{path}.{k}");
                match t.get(k) {
                    Some(tv) => differences(v, tv, &p, out),
                    None => out.push(format!("{p}: recorded {v}, gone today")),
                }
            }
        }
        (Value::Array(r), Value::Array(t)) if r.len() == t.len() => {
            for (i, (rv, tv)) in r.iter().zip(t).enumerate() {
                differences(rv, tv, &format!("{path}[{i}]"), out);
            }
        }
        (Value::Number(r), Value::Number(t)) => {
            let (r, t) = (r.as_f64().unwrap(), t.as_f64().unwrap());
            if (r - t).abs() > 1e-9 * r.abs().max(t.abs()) {
                out.push(format!("{path}: recorded {r}, today {t}"));
            }
        }
        (r, t) if r == t => {}
        (r, t) => out.push(format!("{path}: recorded {r}, today {t}")),
    }
}

// ---------------------------------------------------------------------------------------
// Recording (PLATTER_UPDATE_FIXTURES=1, only what is missing).

const BUILD_YAML: &str = "name: build-like
description: a command workload, two block sizes
matrix:
  bs: [4k, 64k]
workload:
  command:
    setup: mkdir -p work
    clean: rm -f work/out-${bs}
    run: dd if=/dev/zero of=work/out-${bs} bs=${bs} count=64 status=none
phases:
  before_each: [clean, sync]
repeat: 3
";

const FSYNC_YAML: &str = "name: fsync-small
description: write+fdatasync latency, 1 byte and 4 KiB
matrix:
  size: [1, 4K]
workload:
  fsync: { path: \"fsync-${size}.dat\", size: \"${size}\", count: 50, sync: fdatasync }
repeat: 3
";

/// Records the fixtures of this build's schema version if they are missing (and, once, the
/// store of the version before it: see `record_earlier`). One recorder at a time: the
/// tests of this file run as separate processes.
fn record_missing() {
    if !updating() {
        return;
    }
    let lock =
        std::fs::File::create(std::env::temp_dir().join("platter-store-fixtures.lock")).unwrap();
    lock.lock().unwrap();
    let version = build_schema_version();
    let db = stores_dir().join(format!("sqlite-v{version}.db"));
    match (db.exists(), sidecar(&db).exists()) {
        (true, true) => {}
        (false, false) => record(&db, version),
        _ => panic!(
            "{} and its .json must be recorded together; one is missing (an interrupted \
             recording that was never committed?): delete the other and record again",
            db.display()
        ),
    }
    if version == 11 {
        record_earlier(&db, 10);
    }
}

/// A store written by this build: two runs of a command campaign and one of an fsync
/// campaign (latency histograms), by `platter run`; an account and an API token; a schedule
/// fired by interval (paused) and one by a trigger, pulled once (the firing failed: `local`
/// needs `platter run`); the drives the local agent reported. Compacted (1 KiB pages), with
/// its sidecar.
fn record(db: &Path, version: u32) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let store = dir.join("store.db");
    let build = common::write(dir, "build-like.yaml", BUILD_YAML);
    let fsync = common::write(dir, "fsync-small.yaml", FSYNC_YAML);
    let run = |file: &Path, extra: &[&str]| {
        run_ok(
            local()
                .current_dir(dir)
                .arg("run")
                .arg(file)
                .args(extra)
                .arg("--db")
                .arg(&store)
                .arg("--state-dir")
                .arg(dir.join("agent")),
        );
    };
    run(&build, &[]);
    run(&build, &["--fresh"]);
    run(&fsync, &[]);
    let password = common::write(dir, "password", "correct horse battery staple\n");
    run_ok(
        local()
            .args([
                "users",
                "add",
                "alice",
                "--role",
                "admin",
                "--password-file",
            ])
            .arg(&password)
            .arg("--db")
            .arg(&store),
    );
    run_ok(
        local()
            .args(["tokens", "add", "--user", "alice", "--role", "operator"])
            .args(["--label", "nightly CI", "--db"])
            .arg(&store),
    );
    run_ok(
        local()
            .args(["alerts", "add", "ops", "--channel", "webhook"])
            .args([
                "--target",
                "http://127.0.0.1:9/hook",
                "--secret",
                "env:HOOK_KEY",
            ])
            .args(["--kind", "regression", "--kind", "drift", "--db"])
            .arg(&store),
    );
    run_ok(
        local()
            .args([
                "alerts",
                "silence",
                "rebuild-rc66",
                "--host",
                "rc66",
                "--for",
                "1h",
            ])
            .arg("--db")
            .arg(&store),
    );
    {
        let (coordinator, url) = serve(&store, dir);
        let op = |args: &[&str]| {
            run_ok(local().current_dir(dir).args(args).args([
                "--coordinator",
                &url,
                "--dangerously-insecure",
            ]));
        };
        op(&["schedule", "add", "fsync-small.yaml", "--every", "24h"]);
        op(&["schedule", "pause", "fsync-small"]);
        op(&[
            "schedule",
            "add",
            "build-like.yaml",
            "--name",
            "build-on-kernel",
            "--on-trigger",
            "kernel-update",
            "--policy",
            "queue",
        ]);
        // The firing fails (`local` needs `platter run`), and `trigger` says so in its
        // exit status: the failed firing is what the fixture records.
        let pulled = local()
            .current_dir(dir)
            .args(["trigger", "kernel-update", "--label", "kernel=6.12.1"])
            .args(["--coordinator", &url, "--dangerously-insecure"])
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&pulled.stderr).contains("build-on-kernel: failed"),
            "{pulled:?}"
        );
        stop(coordinator);
    }
    // One file, no WAL beside it, small.
    let compact = dir.join("compact.db");
    {
        let c = rusqlite::Connection::open(&store).unwrap();
        c.execute("VACUUM INTO ?1", [compact.to_str().unwrap()])
            .unwrap();
    }
    {
        let c = rusqlite::Connection::open(&compact).unwrap();
        c.execute_batch("PRAGMA page_size = 1024; VACUUM;").unwrap();
        let check: String = c
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
    }
    assert_eq!(user_version(&compact), version);
    let holds = {
        let copy = dir.join("describe.db");
        std::fs::copy(&compact, &copy).unwrap();
        describe(&copy, dir, None)
    };
    write_fixture(
        db,
        &compact,
        &json!({
            "schema_version": version,
            "recorded_by": format!("platter {}", env!("CARGO_PKG_VERSION")),
            "how": "coordinator/tests/store_fixtures.rs `record`: platter run of build-like \
                    (twice) and fsync-small, users add, tokens add, alerts add and silence, schedule add (every 24h, \
                    paused; on trigger, pulled once), VACUUM INTO at 1 KiB pages",
            "holds": holds,
        }),
    );
}

/// Writes `db` (copied from `from`) and its sidecar `about`, each under a temporary name
/// first, never over an existing fixture.
fn write_fixture(db: &Path, from: &Path, about: &Value) {
    assert!(!db.exists() && !sidecar(db).exists(), "never rewritten");
    std::fs::create_dir_all(stores_dir()).unwrap();
    let partial = db.with_extension("db.partial");
    std::fs::copy(from, &partial).unwrap();
    std::fs::rename(&partial, db).unwrap();
    let text = serde_json::to_string_pretty(about).unwrap() + "\n";
    std::fs::write(sidecar(db).with_extension("json.partial"), text).unwrap();
    std::fs::rename(sidecar(db).with_extension("json.partial"), sidecar(db)).unwrap();
    eprintln!("recorded {} and {}", db.display(), sidecar(db).display());
}

/// The store of schema version 10, made from this build's (11) by undoing migration 11,
/// which only added two indexes (`migrations/sqlite/011_unusual_steps.sql`): the rows are what a build
/// at 10 wrote, so opening it runs a real migration on a real store. Recorded once; later
/// schema versions record their own stores instead.
fn record_earlier(v11: &Path, version: u32) {
    let db = stores_dir().join(format!("sqlite-v{version}.db"));
    if db.exists() || sidecar(&db).exists() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let made = tmp.path().join("v10.db");
    std::fs::copy(v11, &made).unwrap();
    {
        let c = rusqlite::Connection::open(&made).unwrap();
        c.execute_batch(
            "DROP INDEX steps_unusual; DROP INDEX steps_warmup; PRAGMA user_version = 10; VACUUM;",
        )
        .unwrap();
    }
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(sidecar(v11)).unwrap()).unwrap();
    write_fixture(
        &db,
        &made,
        &json!({
            "schema_version": version,
            "recorded_by": recorded["recorded_by"],
            "how": "sqlite-v11.db with migration 11 undone (DROP INDEX steps_unusual, \
                    steps_warmup; user_version 10): the rows of a build at schema 10",
            "holds": recorded["holds"],
        }),
    );
}

/// Stops a coordinator as systemd would (SIGTERM) and waits for it.
fn stop(mut coordinator: common::Proc) {
    run_ok(
        Command::new("kill")
            .arg("-TERM")
            .arg(coordinator.child.id().to_string()),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while coordinator.exited().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the coordinator did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------------------
// The tests.

#[test]
fn this_builds_schema_version_has_a_fixture() {
    record_missing();
    let version = build_schema_version();
    let db = stores_dir().join(format!("sqlite-v{version}.db"));
    assert!(
        db.exists() && sidecar(&db).exists(),
        "this build's store schema is at version {version}, and no store of that version is \
         recorded ({} with its .json). Every schema bump records one (COMPATIBILITY.md): \
         {UPDATE}=1 cargo nextest run -p platter --test store_fixtures, then commit both \
         files.",
        db.display()
    );
}

#[test]
fn every_recorded_store_opens_migrates_and_reads_as_recorded() {
    record_missing();
    let version = build_schema_version();
    let found = fixtures();
    assert!(
        !found.is_empty(),
        "no store fixtures in {}",
        stores_dir().display()
    );
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = found
            .iter()
            .map(|(v, db)| s.spawn(move || check_store(*v, db, version)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(
        failures.is_empty(),
        "a store an earlier build wrote no longer reads as it did — the store contract broke \
         (COMPATIBILITY.md). Do not re-record the fixture or its .json: a changed fixture is \
         a broken contract; make the migration keep what the store held.\n{}",
        failures.join("\n")
    );
}

/// What is wrong with the store `db` (schema `recorded_at`) opened by this build.
fn check_store(recorded_at: u32, db: &Path, version: u32) -> Vec<String> {
    let name = db.file_name().unwrap().to_string_lossy().into_owned();
    let about: Value = match std::fs::read_to_string(sidecar(db)) {
        Ok(text) => serde_json::from_str(&text).unwrap(),
        Err(e) => return vec![format!("{name}: its .json: {e}")],
    };
    let mut failures = Vec::new();
    if user_version(db) != recorded_at || about["schema_version"] != recorded_at {
        failures.push(format!(
            "{name}: its user_version is {}, its .json says {}",
            user_version(db),
            about["schema_version"]
        ));
    }
    if recorded_at > version {
        // A store of a later build: this build cannot be expected to open it (see
        // `a_store_newer_than_this_build_is_refused`). Only in a checkout going backwards.
        return failures;
    }
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("store.db");
    std::fs::copy(db, &copy).unwrap();
    let said = stdout(local().args(["db", "migrate", "--db"]).arg(&copy));
    if !said.contains(&format!("SQLite schema at version {version}"))
        || user_version(&copy) != version
    {
        failures.push(format!("{name}: not migrated to {version}: {said}"));
    }
    let today = describe(&copy, tmp.path(), Some(&about["holds"]));
    let mut diffs = Vec::new();
    differences(&about["holds"], &today, "holds", &mut diffs);
    failures.extend(diffs.into_iter().map(|d| format!("{name}: {d}")));
    failures
}

/// What an older build does with a store a newer one migrated (COMPATIBILITY.md): it refuses
/// it, saying so, rather than reading a schema it does not know — `db migrate`, the reading
/// commands and `serve` alike.
#[test]
fn a_store_newer_than_this_build_is_refused() {
    record_missing();
    let version = build_schema_version();
    let Some((_, db)) = fixtures().into_iter().rev().find(|(v, _)| *v <= version) else {
        panic!("no store fixture; see this_builds_schema_version_has_a_fixture");
    };
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("newer.db");
    std::fs::copy(&db, &copy).unwrap();
    local()
        .args(["db", "migrate", "--db"])
        .arg(&copy)
        .output()
        .unwrap();
    rusqlite::Connection::open(&copy)
        .unwrap()
        .pragma_update(None, "user_version", version + 1)
        .unwrap();
    let refused = |cmd: &mut Command| {
        let out = common::run_within(cmd, Duration::from_secs(20));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            !out.status.success(),
            "{cmd:?} opened a newer store: {stderr}"
        );
        assert!(
            stderr.contains("migration number that is too high"),
            "{stderr}"
        );
    };
    refused(local().args(["db", "migrate", "--db"]).arg(&copy));
    refused(local().args(["status", "--db"]).arg(&copy));
    refused(
        local()
            .args([
                "serve",
                "--dangerously-insecure",
                "--listen",
                "127.0.0.1:0",
                "--db",
            ])
            .arg(&copy),
    );
    assert_eq!(user_version(&copy), version + 1, "left as it was");
}

/// The JSON documents inside two wire fixtures (proto/tests/fixtures/wire): the
/// coordinator's History and drive ledger answers, which the CLI reads with these types.
/// A later CLI must still read what an earlier coordinator answered.
#[test]
fn recorded_history_and_ledger_answers_are_read_by_todays_cli_types() {
    use platter::report::history::History;
    use platter::report::ledger::{Answer, DriveSummary, Question};
    use platter_proto::v1 as pb;
    use prost::Message;
    let wire = Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto/tests/fixtures/wire");
    let mut read = 0;
    for dir in std::fs::read_dir(&wire).unwrap() {
        let dir = dir.unwrap().path();
        if let Ok(bytes) = std::fs::read(dir.join("history_response.bin")) {
            let r = pb::HistoryResponse::decode(&bytes[..]).unwrap();
            let h: History = serde_json::from_str(&r.history_json)
                .unwrap_or_else(|e| panic!("{}: history_json: {e}", dir.display()));
            // As today's CLI reads it: the message where there is one, else the document.
            assert_eq!(platter::views::history_of(r).unwrap(), h);
            assert_eq!(h.runs.len(), 2, "{}", dir.display());
            assert!(h.lines[0].points[1].since_previous.is_some());
            read += 1;
        }
        if let Ok(bytes) = std::fs::read(dir.join("ledger_response.bin")) {
            let r = pb::LedgerResponse::decode(&bytes[..]).unwrap();
            let drives: Vec<DriveSummary> = serde_json::from_str(&r.json)
                .unwrap_or_else(|e| panic!("{}: ledger json: {e}", dir.display()));
            let question = Question::Drives(Default::default());
            assert_eq!(
                platter::views::ledger_of(r, &question).unwrap(),
                Answer::Drives(drives.clone())
            );
            assert_eq!(drives[0].serial, "CVDA4215003M1207GN", "{}", dir.display());
            assert!(drives[0].health.is_some());
            read += 1;
        }
    }
    assert!(
        read >= 2,
        "no recorded History or Ledger answers in {}",
        wire.display()
    );
}

/// The check itself catches what it is for: the latest recorded store, opened by this
/// build and then damaged as a careless migration would (a sample lost, a value changed, a
/// schedule dropped), no longer reads as recorded.
#[test]
fn a_store_that_lost_or_changed_rows_is_caught() {
    record_missing();
    let version = build_schema_version();
    let Some((_, db)) = fixtures().into_iter().rev().find(|(v, _)| *v <= version) else {
        panic!("no store fixture; see this_builds_schema_version_has_a_fixture");
    };
    let about: Value =
        serde_json::from_str(&std::fs::read_to_string(sidecar(&db)).unwrap()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("store.db");
    std::fs::copy(&db, &copy).unwrap();
    run_ok(local().args(["db", "migrate", "--db"]).arg(&copy));
    rusqlite::Connection::open(&copy)
        .unwrap()
        .execute_batch(
            "DELETE FROM samples WHERE (step, metric) IN
                 (SELECT step, metric FROM samples WHERE metric = 'wall' LIMIT 1);
             UPDATE samples SET value = value * 2 WHERE metric = 'user'
                 AND step = (SELECT MIN(step) FROM samples WHERE metric = 'user');
             DELETE FROM schedules WHERE name = 'fsync-small';",
        )
        .unwrap();
    let today = describe(&copy, tmp.path(), Some(&about["holds"]));
    let mut diffs = Vec::new();
    differences(&about["holds"], &today, "holds", &mut diffs);
    let said = diffs.join("\n");
    for expected in [
        "holds.counts.samples:",
        ".samples.csv_sha256:",
        ".metrics.wall.n:",
        ".metrics.user.sum:",
        "holds.schedules:",
    ] {
        assert!(said.contains(expected), "{expected} not found in:\n{said}");
    }
}
