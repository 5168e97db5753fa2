//! Results belong to the store that planned them: a new store never inherits an agent's
//! journal of an old one, records of a plan the store never made are refused (kept apart
//! and logged, never merged into a report), and a campaign that lacks measurements says
//! so and exits non-zero.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use platter::report::Report;
use platter::store::Store;
use platter_proto::model::{Record, RecordKind};

const TINY: &str = r#"
name: tiny
hosts: { names: [local] }
matrix: { n: [1, 2] }
workload: { command: { run: "sleep 0.0${n}" } }
repeat: 3
"#;

/// `platter run FILE --format json` with the store and the agent's state in `dir`.
fn run_json(dir: &Path, file: &Path) -> (i32, serde_json::Value, String) {
    let out = platter()
        .arg("run")
        .arg(file)
        .args(["--format", "json", "--db"])
        .arg(dir.join("platter.db"))
        .arg("--state-dir")
        .arg(dir.join("agent"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap_or(-1), json, stderr)
}

fn wall_ns(report: &serde_json::Value) -> Vec<u64> {
    report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            c["metrics"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["metric"] == "wall")
                .map_or(0, |m| m["n"].as_u64().unwrap())
        })
        .collect()
}

/// The agent's journal: (highest record seq, highest acked seq).
fn journal_seqs(state_dir: &Path) -> (u64, u64) {
    let text = std::fs::read_to_string(state_dir.join("journal.jsonl")).unwrap();
    let (mut records, mut acked) = (0, 0);
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(seq) = v["record"]["seq"].as_u64() {
            records = records.max(seq);
        }
        if let Some(a) = v["acked"].as_u64() {
            acked = acked.max(a);
        }
    }
    (records, acked)
}

#[test]
fn a_new_store_runs_everything_again_and_inherits_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let file = write(dir, "tiny.yaml", TINY);

    let (code, first, stderr) = run_json(dir, &file);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(wall_ns(&first), [3, 3], "{first:#}");
    // `platter run` waits for the acks of its last records before it exits: nothing is
    // left to be resent to whatever store the next run has.
    let (records, acked) = journal_seqs(&dir.join("agent"));
    assert!(records > 0);
    assert_eq!(acked, records, "every record the agent journaled was acked");

    // The user deletes the store and runs the same file again, with the same agent state.
    for f in ["platter.db", "platter.db-wal", "platter.db-shm"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    let (code, second, stderr) = run_json(dir, &file);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        wall_ns(&second),
        [3, 3],
        "all six measurements ran again\n{second:#}\n{stderr}"
    );
    assert_ne!(first["campaign_id"], second["campaign_id"]);
    assert_eq!(second["measurements_missing"], 0);
    let db = rusqlite::Connection::open(dir.join("platter.db")).unwrap();
    let n = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(n("SELECT COUNT(*) FROM samples WHERE metric = 'wall'"), 6);
    assert_eq!(n("SELECT COUNT(*) FROM refused_records"), 0);
}

#[test]
fn a_store_lost_mid_run_cancels_the_orphan_plan_and_refuses_its_records() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (mut coordinator, port) = serve(dir);
    let _agent = agent(dir, port, "rc66", &[]);
    wait_agents(dir, 1);
    let file = write(
        dir,
        "slow.yaml",
        "name: slow\nhosts: { names: [rc66] }\nworkload: { command: { run: sleep 0.3 } }\nrepeat: 12\n",
    );
    let old = submit(dir, port, &file);
    wait_in(dir, "two measurements", Duration::from_secs(30), || {
        (query_i64(dir, "SELECT COUNT(*) FROM samples WHERE metric = 'wall'") >= 2).then_some(())
    });

    // The coordinator's database is lost while the agent measures; a new one is made.
    coordinator.kill9();
    for f in ["coordinator.db", "coordinator.db-wal", "coordinator.db-shm"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    let _coordinator = serve_again(dir, port);
    wait_agents(dir, 1);
    // The agent comes back holding a plan the new store never made: it is told to cancel
    // it, and what it sends of that plan is refused, not stored as results.
    wait_in(dir, "refused records", Duration::from_secs(30), || {
        (query_i64(
            dir,
            "SELECT COUNT(*) FROM refused_records WHERE kind = 'plan_finished'",
        ) == 1)
            .then_some(())
    });
    assert_eq!(query_i64(dir, "SELECT COUNT(*) FROM samples"), 0);
    assert!(logs(dir).contains("holds a plan this store never made; cancelling it"));
    assert!(logs(dir).contains("refusing records of a plan this store never made"));

    // The same campaign submitted to the new store runs from the start, on the same host.
    let new = submit(dir, port, &file);
    assert_ne!(old, new);
    wait_in(
        dir,
        "the resubmitted campaign",
        Duration::from_secs(60),
        || {
            (query_i64(
                dir,
                &format!("SELECT COUNT(*) FROM campaigns WHERE id = '{new}' AND state = 'done'"),
            ) == 1)
                .then_some(())
        },
    );
    assert_eq!(
        query_i64(dir, "SELECT COUNT(*) FROM samples WHERE metric = 'wall'"),
        12,
        "{}",
        logs(dir)
    );
    let report = operator_json(dir, port, &["report", &new, "--format", "json"]);
    assert_eq!(wall_ns(&report), [12]);
    assert_eq!(report["measurements_missing"], 0);
}

/// `platter run` killed in the middle of a plan, its store deleted, run again: the agent's
/// journal holds the old plan, which the new store cancels, and every record of it (one
/// per step left) is refused. That is said in a few lines at WARN, with counts, not in one
/// ERROR line per batch and per record (137 of them after a deleted store in the issue,
/// 144 here for a quickstart).
#[test]
fn an_old_journal_refused_by_a_new_store_is_said_in_a_few_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let file = write(
        dir,
        "many.yaml",
        "name: many\nworkload: { command: { run: sleep 0.02 } }\nrepeat: 40\n",
    );
    let db = dir.join("platter.db");
    let run = || {
        let mut c = platter();
        c.arg("run")
            .arg(&file)
            .arg("--db")
            .arg(&db)
            .arg("--state-dir")
            .arg(dir.join("agent"));
        c
    };
    let mut first = Proc {
        child: run()
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
        name: "first run".into(),
    };
    let samples = || {
        let c =
            rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .ok()?;
        c.query_row("SELECT COUNT(*) FROM samples", [], |r| r.get::<_, i64>(0))
            .ok()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while samples().unwrap_or(0) < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the first run measured nothing"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    first.kill9();
    for f in ["platter.db", "platter.db-wal", "platter.db-shm"] {
        let _ = std::fs::remove_file(dir.join(f));
    }

    let out = run().output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let refused: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM refused_records", [], |r| r.get(0))
        .unwrap();
    assert!(refused >= 10, "only {refused} records refused: {stderr}");
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("never made") || l.contains("never planned"))
        .collect();
    // The coordinator: the held plan cancelled, the first refusal, the sum at the stream's
    // end; the agent: the first refusal, the sum when it stops.
    assert!(
        said.len() <= 5,
        "{} lines:\n{}",
        said.len(),
        said.join("\n")
    );
    assert!(!stderr.contains("ERROR"), "{stderr}");
}

#[tokio::test]
async fn an_ended_campaign_without_its_measurements_says_so_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("p.db")).unwrap();
    let yaml = "name: t\nhosts: { names: [h] }\nworkload: { command: { run: x } }\nrepeat: 4\n";
    let campaign = platter::spec::parse("t.yaml", yaml).unwrap();
    let planned =
        platter::planning::planner::plan(&campaign, "", store.id(), 1, &Default::default())
            .unwrap();
    store.insert_campaign(&planned, "t.yaml", yaml).unwrap();
    let plan_id = planned.plans[0].id.clone();
    // The plan ended, yet none of its four measurements reached the store.
    let records = vec![
        Record {
            seq: 1,
            kind: RecordKind::PlanAccepted {
                plan_id: plan_id.clone(),
            },
        },
        Record {
            seq: 2,
            kind: RecordKind::PlanFinished {
                plan_id,
                cancelled: false,
            },
        },
    ];
    store.write_records(&"h".into(), records).await.unwrap();
    let report = Report::load(&store, &planned.id).unwrap();
    assert_eq!(report.state, "done");
    assert_eq!(
        (report.measurements_expected, report.measurements_missing),
        (4, 4)
    );
    assert!(report.problems() > 0, "a non-zero exit status");
    let table = platter::report::Format::Table.exporter().render(&report);
    assert!(
        table.contains("MISSING: 4 of 4 expected measurements never reached this store"),
        "{table}"
    );

    // A record of a plan this store never made is refused: kept apart, not a result.
    let foreign = Record {
        seq: 3,
        kind: RecordKind::PlanAccepted {
            plan_id: "0123456789abcdef".into(),
        },
    };
    let outcome = store
        .write_records(&"h".into(), vec![foreign])
        .await
        .unwrap();
    assert_eq!(outcome.refused.get("0123456789abcdef"), Some(&1));
}
