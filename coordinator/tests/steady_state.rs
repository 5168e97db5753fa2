//! Rounds towards steady state (`prepare.steady_state`, SNIA PTS), end to end through
//! `platter run` on a loop device: the rounds stop at the first steady window, only the
//! window's rounds are results, a drift is never called steady and its verdicts are not
//! judged, and a level but noisy value is steady at rounds 1–5.
//!
//! The tracked value is `wall` of a command whose sleep is read from a list by round
//! (`${repetition}` is the round): the tests choose each round's value exactly. A busy
//! machine adds a few milliseconds to a sleep of 200 ms or more, well inside the rule's
//! 20% range and 10% slope.

mod common;

use std::path::Path;

use common::{platter, root_or_skip, wall_of, Loop};

/// A campaign on `drive` whose round r sleeps `sleeps[r - 1]` seconds (the last one
/// after the list ends), judged by PTS's rule with `max_rounds`.
fn campaign(dir: &Path, drive: &str, sleeps: &[f64], max_rounds: u32) -> std::path::PathBuf {
    campaign_judged(
        dir,
        drive,
        sleeps,
        max_rounds,
        "report:\n  qualify: [\"wall < 10s\"]\n",
    )
}

/// As [`campaign`], with `report` (a `report:` section, or "") at its end.
fn campaign_judged(
    dir: &Path,
    drive: &str,
    sleeps: &[f64],
    max_rounds: u32,
    report: &str,
) -> std::path::PathBuf {
    let list: Vec<String> = sleeps.iter().map(|s| s.to_string()).collect();
    common::write(
        dir,
        "sleep.sh",
        "r=$1; shift; n=1\nfor s in \"$@\"; do last=$s; if [ $n = \"$r\" ]; then break; fi; n=$((n+1)); done\nsleep $last\n",
    );
    common::write(
        dir,
        "steady.yaml",
        &format!(
            r#"
name: steady
devices: {{ path: {drive} }}
storage: {{ fs: none }}
workload:
  command:
    run: sh {dir}/sleep.sh ${{repetition}} {list}
prepare:
  steady_state: {{ metric: wall, window: 5, range: 20%, slope: 10%, max_rounds: {max_rounds} }}
{report}"#,
            dir = dir.display(),
            list = list.join(" "),
        ),
    )
}

fn run(dir: &Path, file: &Path, drive: &str) -> (serde_json::Value, bool) {
    let out = platter()
        .current_dir(dir)
        .args(["run", "--format", "json", "--allow-device", drive])
        .arg(file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    (report, out.status.success())
}

fn rounds(report: &serde_json::Value) -> &serde_json::Value {
    let r = &report["rounds"];
    assert_eq!(r.as_array().map(Vec::len), Some(1), "{report}");
    &r[0]
}

fn wall_n(report: &serde_json::Value) -> u64 {
    wall_of(&report["cells"][0])["n"].as_u64().unwrap()
}

#[test]
fn the_window_starts_where_the_value_settles_and_only_its_rounds_count() {
    if !root_or_skip("needs a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let drive = Loop::new(tmp.path(), "drive.img", 16);
    // Falls by a third a round until round 4, then stays at 0.25 s.
    let file = campaign(tmp.path(), &drive.path, &[0.75, 0.55, 0.4, 0.25], 12);
    let (report, ok) = run(tmp.path(), &file, &drive.path);
    assert!(ok, "{report}");
    let r = rounds(&report);
    assert_eq!(r["steady"], true, "{r}");
    assert_eq!(r["values"].as_array().unwrap().len(), 8, "{r}");
    assert_eq!(
        (r["first"].as_u64(), r["last"].as_u64()),
        (Some(4), Some(8)),
        "{r}"
    );
    // The results are the window's five rounds, not the eight that ran.
    assert_eq!(wall_n(&report), 5);
    let stopped = report["cells"][0]["stopped"].as_str().unwrap();
    assert!(
        stopped.starts_with("steady state in rounds 4–8 of wall"),
        "{stopped}"
    );
    assert_eq!(report["verdicts"][0]["pass"], true, "{report}");
    // `platter campaigns`: the cell is done at round 8, not at `max_rounds` (12).
    let listed = platter()
        .current_dir(tmp.path())
        .args(["campaigns", "--output", "json"])
        .output()
        .unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let c = &listed[0];
    assert_eq!(
        (&c["cells_done"], &c["cells_total"]),
        (&1.into(), &1.into()),
        "{c}"
    );
}

#[test]
fn a_drift_of_five_percent_a_round_is_never_steady_and_not_judged() {
    if !root_or_skip("needs a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let drive = Loop::new(tmp.path(), "drive.img", 16);
    // +5% a round from 0.3 s: a range of about 20% over five rounds, but an excursion of
    // about 20% too, twice what the slope allows.
    let sleeps: Vec<f64> = (0..8)
        .map(|r| (0.3 * 1.05f64.powi(r) * 1000.0).round() / 1000.0)
        .collect();
    let file = campaign(tmp.path(), &drive.path, &sleeps, 8);
    let (report, ok) = run(tmp.path(), &file, &drive.path);
    assert!(!ok, "a verdict not judged must not pass: {report}");
    let r = rounds(&report);
    assert_eq!(r["steady"], false, "{r}");
    assert_eq!(r["ended"], true, "{r}");
    assert_eq!(r["values"].as_array().unwrap().len(), 8, "{r}");
    let stopped = report["cells"][0]["stopped"].as_str().unwrap();
    assert!(
        stopped.starts_with("no steady state after 8 rounds"),
        "{stopped}"
    );
    let v = &report["verdicts"][0];
    assert_eq!(v["pass"], false, "{v}");
    assert_eq!(
        v["measured"], "not judged: no steady state after 8 rounds",
        "{v}"
    );
}

#[test]
fn rounds_without_steady_state_do_not_exit_zero_even_with_nothing_to_qualify() {
    if !root_or_skip("needs a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let drive = Loop::new(tmp.path(), "drive.img", 16);
    let sleeps: Vec<f64> = (0..6)
        .map(|r| (0.3 * 1.05f64.powi(r) * 1000.0).round() / 1000.0)
        .collect();
    let file = campaign_judged(tmp.path(), &drive.path, &sleeps, 6, "");
    let (report, ok) = run(tmp.path(), &file, &drive.path);
    assert!(
        !ok,
        "a drive without steady state must not exit 0: {report}"
    );
    assert_eq!(rounds(&report)["steady"], false);
    assert!(
        report["verdicts"].as_array().is_none_or(Vec::is_empty),
        "{report}"
    );
    // `platter report` of the stored run says the same, by its exit status too.
    let again = platter()
        .current_dir(tmp.path())
        .args(["report", "steady"])
        .output()
        .unwrap();
    assert!(!again.status.success());
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(text.contains("no steady state after 6 rounds"), "{text}");
}

#[test]
fn a_noisy_but_level_value_is_steady_at_rounds_one_to_five() {
    if !root_or_skip("needs a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let drive = Loop::new(tmp.path(), "drive.img", 16);
    // ±6% around 0.3 s in no order: a range of 12%, a flat line.
    let file = campaign(
        tmp.path(),
        &drive.path,
        &[0.31, 0.284, 0.316, 0.29, 0.305],
        25,
    );
    let (report, ok) = run(tmp.path(), &file, &drive.path);
    assert!(ok, "{report}");
    let r = rounds(&report);
    assert_eq!(r["steady"], true, "{r}");
    assert_eq!(
        (r["first"].as_u64(), r["last"].as_u64()),
        (Some(1), Some(5)),
        "{r}"
    );
    assert_eq!(wall_n(&report), 5);
}

/// Another campaign submitted for the host while a drive is in its rounds waits until the
/// rounds end: its plan, queued before round 2 was, runs after the last round, so nothing
/// touches the drive between two rounds.
#[test]
fn another_campaign_waits_until_the_rounds_of_a_prepared_drive_end() {
    use common::{agent, db, logs, serve, submit, wait_agents, wait_for, write};
    use std::time::Duration;
    if !root_or_skip("needs a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let drive = Loop::new(dir, "drive.img", 16);
    let (_coordinator, port) = serve(dir);
    let _agent = agent(dir, port, "lab1", &["--allow-device", &drive.path]);
    wait_agents(dir, 1);
    let rounds = write(
        dir,
        "rounds.yaml",
        &format!(
            r#"
name: rounds
hosts: {{ names: [lab1] }}
devices: {{ path: {} }}
storage: {{ fs: none }}
workload: {{ command: {{ run: "sleep 0.4" }} }}
prepare:
  steady_state: {{ metric: wall, window: 3, range: 20%, slope: 10%, max_rounds: 6 }}
"#,
            drive.path
        ),
    );
    let other = write(
        dir,
        "other.yaml",
        "name: other\nhosts: { names: [lab1] }\nworkload: { command: { run: \"true\" } }\nrepeat: 1\n",
    );
    let first = submit(dir, port, &rounds);
    // Submitted while round 1 runs: its plan is queued before round 2's.
    wait_for("round 1 to start", Duration::from_secs(30), || {
        (common::query_i64(dir, "SELECT COUNT(*) FROM steps WHERE kind = 'measure'") > 0)
            .then_some(())
    });
    let second = submit(dir, port, &other);
    let done = "SELECT COUNT(*) FROM campaigns WHERE state = 'done'";
    wait_for("both campaigns to end", Duration::from_secs(60), || {
        (common::query_i64(dir, done) == 2).then_some(())
    });
    let db = db(dir);
    let span = |campaign: &str| -> (i64, i64) {
        db.query_row(
            "SELECT MIN(st.started_unix_ns), MAX(st.finished_unix_ns) FROM steps st
               JOIN plans p ON p.id = st.plan_id WHERE p.campaign_id = ?1",
            [campaign],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    };
    let plans = |campaign: &str| -> i64 {
        db.query_row(
            "SELECT COUNT(*) FROM plans WHERE campaign_id = ?1",
            [campaign],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(plans(&first), 3, "three rounds\n{}", logs(dir));
    let (_, rounds_end) = span(&first);
    let (other_start, _) = span(&second);
    assert!(
        other_start >= rounds_end,
        "the other campaign ran between the rounds\n{}",
        logs(dir)
    );
}
