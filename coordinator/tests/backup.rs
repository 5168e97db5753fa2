//! A backup of a served store, restored in its place after the fleet went on without it:
//! what was done before the backup reports the same from both stores, a campaign in flight
//! at the backup reports as it stood and then what it lacks, and the agent's later work
//! (records the original acked, a plan made after the backup, a plan the restored store
//! thinks running) is told, refused or ended as `platter db restore --help` says — never
//! taken for the restored store's own results.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;

/// Wall samples of `campaign` in the store file `db` (read-only).
fn wall_samples(db: &Path, campaign: &str) -> i64 {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    c.query_row(
        "SELECT COUNT(*) FROM sample_rows s JOIN plans p ON p.id = s.plan_id
          WHERE p.campaign_id = ?1 AND s.metric = 'wall'",
        [campaign],
        |r| r.get(0),
    )
    .unwrap()
}

fn wait_done(dir: &Path, campaign: &str) {
    wait_in(
        dir,
        &format!("{campaign} done"),
        Duration::from_secs(90),
        || {
            (query_i64(
                dir,
                &format!(
                    "SELECT COUNT(*) FROM campaigns WHERE id = '{campaign}' AND state = 'done'"
                ),
            ) == 1)
                .then_some(())
        },
    );
}

fn wait_measured(dir: &Path, campaign: &str, n: i64) {
    wait_in(
        dir,
        &format!("{n} measurements of {campaign}"),
        Duration::from_secs(60),
        || (wall_samples(&dir.join("coordinator.db"), campaign) >= n).then_some(()),
    );
}

/// `platter ARGS` to its end: exit status, stdout, stderr.
fn platter_out(args: &[&str]) -> (i32, String, String) {
    let out = platter().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `platter report CAMPAIGN --db DB` in `format`: exit status and the report.
fn report_from(db: &Path, campaign: &str, format: &str) -> (i32, String) {
    let db = db.to_str().unwrap();
    let (code, out, err) = platter_out(&["report", campaign, "--db", db, "--format", format]);
    assert!(code == 0 || code == 1, "report {campaign} from {db}: {err}");
    (code, out)
}

#[test]
fn a_restored_backup_reports_what_it_held_and_refuses_what_came_after() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let store = dir.join("coordinator.db");
    let (mut coordinator, port) = serve(dir);
    let mut agent_proc = agent(dir, port, "rc66", &[]);
    wait_agents(dir, 1);
    let first = write(
        dir,
        "first.yaml",
        "name: first\nhosts: { names: [rc66] }\nmatrix: { n: [1, 2] }\n\
         workload: { command: { run: \"sleep 0.0${n}\" } }\nrepeat: 3\n",
    );
    let slow = write(
        dir,
        "slow.yaml",
        "name: slow\nhosts: { names: [rc66] }\nworkload: { command: { run: sleep 0.25 } }\nrepeat: 20\n",
    );
    let later = write(
        dir,
        "later.yaml",
        "name: later\nhosts: { names: [rc66] }\nworkload: { command: { run: sleep 0.25 } }\nrepeat: 30\n",
    );

    // A campaign done, then a backup while the next one runs.
    let done_before = submit(dir, port, &first);
    wait_done(dir, &done_before);
    let in_flight = submit(dir, port, &slow);
    wait_measured(dir, &in_flight, 3);
    let backup = dir.join("backup.db");
    let (code, said, err) = platter_out(&[
        "db",
        "backup",
        backup.to_str().unwrap(),
        "--db",
        store.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(said.contains("campaigns  2 (1 running)"), "{said}");
    let stood = wall_samples(&backup, &in_flight);
    assert!((3..20).contains(&stood), "{stood} of 20 at the backup");
    let samples: i64 = rusqlite::Connection::open(&backup)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM samples", [], |r| r.get(0))
        .unwrap();
    assert!(said.contains(&format!("samples    {samples}\n")), "{said}");

    // The fleet goes on without the backup: the slow campaign ends, the first runs again
    // (its second generation), and a third is under way when the store is lost.
    wait_done(dir, &in_flight);
    let done_after = submit(dir, port, &first);
    wait_done(dir, &done_after);
    let planned_after = submit(dir, port, &later);
    wait_measured(dir, &planned_after, 2);

    // Not while a coordinator serves the store: refused, naming it.
    let restore = |force: bool| {
        let mut args = vec![
            "db",
            "restore",
            backup.to_str().unwrap(),
            "--db",
            store.to_str().unwrap(),
        ];
        if force {
            args.push("--force");
        }
        platter_out(&args)
    };
    let (code, _, err) = restore(true);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("(the store) is in use by `platter serve"),
        "{err}"
    );

    // The coordinator's host is lost; agent and coordinator come back on the backup.
    // The agent stops as a host shutting down stops it (SIGTERM): its journal says what
    // was acknowledged. (Killed, it would send again the records since it last said so,
    // at most 256, and the restored store would take those of plans it knows.)
    coordinator.kill9();
    // SAFETY: kill(2) with a pid and a signal number; no memory is shared.
    unsafe { libc::kill(agent_proc.child.id() as i32, libc::SIGTERM) };
    let _ = agent_proc.child.wait();
    let (code, _, err) = restore(false);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("holds a store already: give --force"), "{err}");
    let (code, said, err) = restore(true);
    assert_eq!(code, 0, "{err}");
    assert!(
        said.contains("What a restore means for the agents:"),
        "{said}"
    );
    let kept: PathBuf = said
        .lines()
        .find_map(|l| l.strip_prefix("the store it replaced is kept as "))
        .and_then(|l| l.split(" (").next())
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("{said}"));
    assert!(!dir.join("coordinator.db-wal").exists());

    // What was done before the backup reads the same from the store lost and the restored.
    for format in ["json", "table"] {
        assert_eq!(
            report_from(&kept, &done_before, format),
            report_from(&store, &done_before, format),
            "{format}"
        );
    }
    // The campaign in flight reads as it stood, its measurements still to come.
    let (code, text) = report_from(&store, &in_flight, "table");
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(&format!(
            "incomplete: the campaign is still running; {} of 20 measurements not stored yet",
            20 - stood
        )),
        "{text}"
    );
    assert_eq!(wall_samples(&store, &in_flight), stood);
    assert_eq!(wall_samples(&kept, &in_flight), 20);

    let _coordinator = serve_again(dir, port);
    let _agent = agent(dir, port, "rc66", &[]);
    // The agent finished the slow campaign's plan for the original: it says so when the
    // restored store sends it again, and the campaign ends with what it lacks said.
    wait_done(dir, &in_flight);
    let out = operator(dir, port)
        .args(["report", &in_flight, "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "missing measurements fail");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["measurements_missing"], 20 - stood, "{report}");
    assert_eq!(wall_of(&report["cells"][0])["n"], stood, "{report}");
    // The plan made after the backup, which the agent still held, is cancelled, and what it
    // sends of it is refused, not stored.
    wait_in(
        dir,
        "the later plan's end refused",
        Duration::from_secs(30),
        || {
            (query_i64(
                dir,
                "SELECT COUNT(*) FROM refused_records WHERE kind = 'plan_finished'",
            ) >= 1)
                .then_some(())
        },
    );
    assert_eq!(
        query_i64(
            dir,
            &format!("SELECT COUNT(*) FROM campaigns WHERE id = '{planned_after}'")
        ),
        0
    );
    let log = std::fs::read_to_string(dir.join("coordinator.log")).unwrap();
    assert!(
        log.contains("holds a plan this store never made; cancelling it"),
        "{log}"
    );
    // The records the original acked after the backup are said lacking, once.
    let lacking: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("were acknowledged by another store and are not in this one"))
        .collect();
    assert_eq!(lacking.len(), 1, "{log}");
    assert!(lacking[0].contains("agent=rc66"), "{}", lacking[0]);

    // The first campaign submitted again gets an id the original never gave (the agent
    // holds the original's second run as finished) and runs whole.
    let again = submit(dir, port, &first);
    assert_ne!(again, done_after);
    wait_done(dir, &again);
    every_repetition_once(dir, port, &again, 3);
}
