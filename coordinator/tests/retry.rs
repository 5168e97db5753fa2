//! How a repetition's preparation and its measurement hang together: a measurement cut off
//! by the agent stopping runs again only after its preparation ran again (reboot
//! included); a measurement whose preparation failed is not a sample; a preparation the
//! platform does not support (fstrim on a RAM disk) is skipped with its reason, and the
//! measurement stands.

mod common;

use std::path::Path;
use std::time::Duration;

use assert_cmd::prelude::*;
use common::*;

/// Rows of `sql` as strings joined by spaces, one per row.
fn rows(dir: &Path, sql: &str) -> Vec<String> {
    let c = db(dir);
    let mut stmt = c.prepare(sql).unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |r| {
        (0..n)
            .map(|i| {
                r.get_ref(i).map(|v| match v {
                    rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                    rusqlite::types::ValueRef::Integer(i) => i.to_string(),
                    other => format!("{other:?}"),
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|v| v.join(" "))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn done(dir: &Path, campaign: &str) -> bool {
    query_i64(
        dir,
        &format!("SELECT COUNT(*) FROM campaigns WHERE id = '{campaign}' AND state = 'done'"),
    ) == 1
}

/// `platter report CAMPAIGN --format FORMAT` through the coordinator: (exit code, stdout).
fn report(dir: &Path, port: u16, campaign: &str, format: &str) -> (i32, String) {
    let out = operator(dir, port)
        .args(["report", campaign, "--format", format])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn a_measurement_cut_off_runs_again_after_its_preparation_ran_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve(dir);
    let (marker, prep) = (dir.join("measuring"), dir.join("prep.log"));
    // Repetition 1's first attempt says it is measuring and sleeps until the test kills
    // the agent; every other attempt measures at once.
    let file = write(
        dir,
        "retry.yaml",
        &format!(
            r#"
name: retried
hosts: {{ names: [worker] }}
workload:
  command:
    run: "if [ $PLATTER_REPETITION$PLATTER_ATTEMPT = 11 ]; then echo $$ > {marker}; exec sleep 30; fi"
phases:
  before_each: [sync, {{ command: "echo $PLATTER_REPETITION $PLATTER_ATTEMPT >> {prep}" }}]
repeat: 2
"#,
            marker = marker.display(),
            prep = prep.display()
        ),
    );
    let mut worker = agent(dir, port, "worker", &[]);
    wait_agents(dir, 1);
    let campaign = submit(dir, port, &file);
    let sleeper: i32 = wait_in(
        dir,
        "the first measurement",
        Duration::from_secs(30),
        || std::fs::read_to_string(&marker).ok()?.trim().parse().ok(),
    );
    worker.kill9();
    // SAFETY: kill has no memory-safety preconditions; the pid is the workload's sleep.
    unsafe { libc::kill(sleeper, libc::SIGKILL) };
    let _worker = agent(dir, port, "worker", &[]);
    wait_in(
        dir,
        "the campaign to finish",
        Duration::from_secs(60),
        || done(dir, &campaign).then_some(()),
    );

    // The preparation of repetition 1 ran again (attempt 2) before its measurement did.
    let prep = std::fs::read_to_string(&prep).unwrap();
    assert_eq!(
        prep, "1 1\n1 2\n2 1\n",
        "repetition, attempt of each preparation"
    );
    assert_eq!(
        rows(
            dir,
            "SELECT kind, repetition, attempt, state FROM steps WHERE state != 'started' ORDER BY n"
        ),
        [
            "sync 1 1 succeeded",
            "command 1 1 succeeded",
            "sync 1 2 succeeded",
            "command 1 2 succeeded",
            "measure 1 2 succeeded",
            "sync 2 1 succeeded",
            "command 2 1 succeeded",
            "measure 2 1 succeeded",
        ]
    );
    let first_measure: i64 = query_i64(
        dir,
        "SELECT started_unix_ns FROM steps WHERE kind = 'measure' AND repetition = 1 AND attempt = 1",
    );
    let prep_again: i64 = query_i64(
        dir,
        "SELECT started_unix_ns FROM steps WHERE kind = 'sync' AND repetition = 1 AND attempt = 2 AND state = 'started'",
    );
    assert!(
        first_measure > 0 && prep_again > first_measure,
        "{first_measure} {prep_again}"
    );
    assert_eq!(
        query_i64(
            dir,
            "SELECT COUNT(*) FROM sample_rows WHERE metric = 'wall'"
        ),
        2
    );
    assert_eq!(
        query_i64(
            dir,
            "SELECT attempt FROM sample_rows WHERE metric = 'wall' AND repetition = 1"
        ),
        2
    );

    // Every step counts once in the progress, whatever its attempts.
    let status = operator_json(dir, port, &["status", &campaign, "--output", "json"]);
    let status = status.as_array().map(|a| a[0].clone()).unwrap_or(status);
    assert_eq!(status["steps_done"], status["steps_total"], "{status}");
    assert_eq!(status["steps_total"], 6, "{status}");
    assert_eq!(status["steps_failed"], 0, "{status}");

    let (code, json) = report(dir, port, &campaign, "json");
    assert_eq!(code, 0, "{json}");
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let warnings = json["cells"][0]["warnings"].to_string();
    assert!(
        warnings.contains(
            "repetition 1 measured on attempt 2: the agent stopped during the measurement before; \
             its preparation (sync, command) ran again first"
        ),
        "{warnings}"
    );
    let (_, table) = report(dir, port, &campaign, "table");
    assert!(
        table.contains("repetition 1 measured on attempt 2"),
        "{table}"
    );
}

#[test]
fn a_measurement_cut_off_reboots_again_and_the_reboot_sees_its_attempt() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve(dir);
    let (boot, log) = (dir.join("rebooter.boot_id"), dir.join("log"));
    let reboot = format!(
        "echo reboot $PLATTER_ATTEMPT >> {log} && echo boot-$(date +%s%N) > {boot} && kill -9 $PLATTER_AGENT_PID",
        log = log.display(),
        boot = boot.display()
    );
    // The first measurement kills the agent (a crash mid-measure); the test restarts it.
    let file = write(
        dir,
        "reboot.yaml",
        &format!(
            r#"
name: cold-retry
hosts: {{ names: [rebooter] }}
workload:
  command:
    run: "echo measure $PLATTER_ATTEMPT >> {log}; if [ $PLATTER_ATTEMPT = 1 ]; then kill -9 $PLATTER_AGENT_PID; sleep 5; fi"
phases:
  before_each: [{{ command: "echo prep $PLATTER_ATTEMPT >> {log}" }}, reboot]
repeat: 1
"#,
            log = log.display()
        ),
    );
    let start = || agent(dir, port, "rebooter", &["--reboot-command", &reboot]);
    let mut agent = start();
    wait_agents(dir, 1);
    let campaign = submit(dir, port, &file);
    let mut restarts = 0;
    wait_in(
        dir,
        "the campaign to finish",
        Duration::from_secs(60),
        || {
            if agent.exited().is_some() {
                restarts += 1;
                agent = start();
            }
            done(dir, &campaign).then_some(())
        },
    );
    let log = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        log, "prep 1\nreboot 1\nmeasure 1\nprep 2\nreboot 2\nmeasure 2\n",
        "the reboot ran again before the measurement, and saw its attempt"
    );
    assert_eq!(restarts, 3, "two reboots and a crash");
    assert_eq!(
        rows(
            dir,
            "SELECT kind, attempt, state FROM steps WHERE state != 'started' ORDER BY n"
        ),
        [
            "command 1 succeeded",
            "reboot 1 succeeded",
            "command 2 succeeded",
            "reboot 2 succeeded",
            "measure 2 succeeded",
        ]
    );
}

#[test]
fn a_reboot_that_did_not_happen_leaves_its_repetition_unmeasured() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve(dir);
    let _agent = agent(
        dir,
        port,
        "rebooter",
        &["--reboot-command", "true", "--reboot-timeout", "1"],
    );
    let file = write(
        dir,
        "reboot.yaml",
        r#"
name: cold-cache
hosts: { names: [rebooter] }
matrix: { size: [4096], labels: [size] }
workload:
  command:
    run: "cat /dev/null"
phases:
  before_each: [sync, reboot]
repeat: 2
"#,
    );
    wait_agents(dir, 1);
    let campaign = submit(dir, port, &file);
    wait_in(
        dir,
        "the campaign to finish",
        Duration::from_secs(30),
        || done(dir, &campaign).then_some(()),
    );
    let measures = rows(
        dir,
        "SELECT repetition, state, exit_status, error FROM steps WHERE kind = 'measure' ORDER BY n",
    );
    assert_eq!(measures.len(), 2, "{measures:?}");
    for (m, step) in measures.iter().zip([1, 4]) {
        assert!(
            m.contains(&format!(
                "skipped 0 not measured: its preparation failed: reboot (step {step}): \
                 asked for a reboot with `true` but the host was still up 1s later"
            )),
            "{m}"
        );
    }
    assert_eq!(query_i64(dir, "SELECT COUNT(*) FROM samples"), 0);

    let (code, json) = report(dir, port, &campaign, "json");
    assert_eq!(code, 1, "missing repetitions do not exit 0\n{json}");
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["cells"][0]["failed"], 2, "{json}");
    let (code, table) = report(dir, port, &campaign, "table");
    assert_eq!(code, 1);
    for rep in [1, 2] {
        assert!(
            table.contains(&format!(
                "size=4096: warning: repetition {rep} not measured: its preparation failed: reboot"
            )),
            "{table}"
        );
    }
}

#[test]
fn platter_run_exits_non_zero_when_a_preparation_failed() {
    let tmp = tempfile::tempdir().unwrap();
    let f = write(
        tmp.path(),
        "c.yaml",
        "name: no-reboot\nworkload: { command: { run: \"true\" } }\n\
         phases: { before_each: [reboot] }\nrepeat: 1\n",
    );
    let out = platter()
        .current_dir(tmp.path())
        .args(["run", "--reboot-command", "false"])
        .arg(&f)
        .assert()
        .code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout);
    assert!(
        stdout.contains(
            "repetition 1 not measured: its preparation failed: reboot (step 0): reboot command failed: exit status 1"
        ),
        "{stdout}"
    );
}

#[test]
fn fstrim_on_a_ramdisk_is_skipped_with_its_reason_and_the_measurement_stands() {
    if !common::root_or_skip("the RAM disk is a tmpfs mount") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let f = write(
        tmp.path(),
        "c.yaml",
        "name: trim\nstorage: { ramdisk: { size: 16M } }\nworkload: { command: { run: \"true\" } }\n\
         phases: { before_each: [{ fstrim: \"${mount}\" }] }\nrepeat: 3\n",
    );
    let out = platter()
        .current_dir(tmp.path())
        .args(["run", "--format", "json"])
        .arg(&f)
        .assert()
        .success();
    let report: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let cell = &report["cells"][0];
    assert_eq!(cell["failed"], 0, "{report}");
    assert_eq!(report["steps_failed"], 0, "{report}");
    let wall = common::wall_of(cell);
    assert_eq!(
        wall["n"], 3,
        "the measurements after the skipped fstrim stand"
    );
    let warnings = cell["warnings"].to_string();
    assert!(
        warnings.contains("fstrim skipped 3× (not a failure): fstrim not supported on ")
            && warnings.contains(" (tmpfs): fstrim: ")
            && warnings.contains("the discard operation is not supported"),
        "{warnings}"
    );
    let c = rusqlite::Connection::open(tmp.path().join("platter-data/platter.db")).unwrap();
    let fstrims: Vec<(String, String)> = c
        .prepare("SELECT state, error FROM steps WHERE kind = 'fstrim' AND state != 'started'")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(fstrims.len(), 3);
    assert!(
        fstrims
            .iter()
            .all(|(s, e)| s == "skipped" && e.starts_with("fstrim not supported on ")),
        "{fstrims:?}"
    );
}

/// A host that restarts without a planned reboot (a power loss) loses its mounts. The
/// rest of the plan must not run on whatever filesystem holds the empty mount point: the
/// steps fail saying why, the measurements are not taken, and the run exits non-zero.
#[test]
fn storage_lost_under_the_plan_is_never_measured_on_another_filesystem() {
    if !common::root_or_skip("the RAM disk is a tmpfs mount") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Each measurement writes a marker into ${mount}; the first one also "loses power":
    // it unmounts the RAM disk (as a restart would) and kills the agent like a crash.
    let f = write(
        dir,
        "c.yaml",
        "name: lost\nstorage: { ramdisk: { size: 16M } }\n\
         workload: { command: { run: \"touch ${mount}/m-${repetition}; if [ ${repetition} = 1 ]; then umount ${mount}; kill -9 $PLATTER_AGENT_PID; fi\" } }\n\
         phases: { before_each: [sync] }\nrepeat: 3\n",
    );
    let run = || {
        platter()
            .current_dir(dir)
            .args(["run", "--format", "json"])
            .arg(&f)
            .output()
            .unwrap()
    };
    let first = run();
    assert!(
        !first.status.success(),
        "the agent in `platter run` was killed"
    );
    let second = run();
    assert_eq!(
        second.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&second.stdout).unwrap();
    let text = report.to_string();
    assert!(
        text.contains("is no longer mounted at"),
        "the report says why: {report:#}"
    );
    // Nothing was measured after the storage went: no marker landed on the filesystem
    // under the empty mount point, and no sample was stored for repetitions 2 and 3.
    let mounts = dir.join("platter-data/agent/mnt");
    let strays: Vec<_> = walk(&mounts)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("m-"))
        })
        .collect();
    assert!(
        strays.is_empty(),
        "written outside the RAM disk: {strays:?}"
    );
    let c = rusqlite::Connection::open(dir.join("platter-data/platter.db")).unwrap();
    let walls: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM sample_rows WHERE metric = 'wall'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(walls, 0, "{report:#}");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}
