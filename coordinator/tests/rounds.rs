//! Warm-up runs and bounded adaptive repetition, end to end through `platter run`: a
//! cell with steady times stops at `min`, a noisy one at `max`, warm-ups are stored and
//! shown but in no statistic, and a run killed between rounds resumes without losing or
//! repeating a round.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{platter, wall_of};

/// `steady`: 0.3 s every time. `noisy`: 0.02 s and 0.4 s by turns, so the interval of
/// its median (from its lowest to its highest values) stays ±90% wide. The first run of
/// each cell ever (its warm-up) takes 1 s more. The bound asked, ±50%, leaves the steady
/// cell 0.15 s of slack for a busy machine.
const WORK: &str = r#"
first="$DIR/first-$1"
if [ ! -e "$first" ]; then touch "$first"; sleep 1; fi
case "$1" in
  steady) sleep 0.3 ;;
  noisy) if [ $(( $2 % 2 )) = 0 ]; then sleep 0.4; else sleep 0.02; fi ;;
esac
"#;

fn campaign(dir: &Path, max: u32) -> std::path::PathBuf {
    common::write(dir, "work.sh", WORK);
    common::write(
        dir,
        "rounds.yaml",
        &format!(
            r#"
name: rounds
matrix:
  kind: [steady, noisy]
workload:
  command:
    run: DIR={dir} sh {dir}/work.sh ${{kind}} ${{repetition}}
warmup: 1
repeat: {{ min: 6, max: {max}, until: {{ metric: wall, ci: 50% }} }}
"#,
            dir = dir.display()
        ),
    )
}

/// `platter run --format json FILE` in `dir`, which must succeed: the report, and stderr.
fn run_json(dir: &Path, file: &Path) -> (serde_json::Value, String) {
    let out = platter()
        .current_dir(dir)
        .args(["run", "--format", "json"])
        .arg(file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (serde_json::from_slice(&out.stdout).unwrap(), stderr)
}

fn cell<'a>(report: &'a serde_json::Value, kind: &str) -> &'a serde_json::Value {
    report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["params"]["kind"] == kind)
        .unwrap_or_else(|| panic!("no cell {kind}: {report}"))
}

/// `platter run`'s store in `dir`, read-only; None until it exists.
fn store(dir: &Path) -> Option<rusqlite::Connection> {
    let path = dir.join("platter-data/platter.db");
    if !path.exists() {
        return None;
    }
    let c = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .ok()?;
    c.busy_timeout(Duration::from_secs(5)).ok()?;
    Some(c)
}

fn query(dir: &Path, sql: &str) -> i64 {
    store(dir)
        .expect("the store")
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

/// Each (cell, repetition) of the counted wall samples, and how often it was stored.
fn counted_repetitions(dir: &Path) -> Vec<(i64, i64, i64)> {
    let db = store(dir).expect("the store");
    let mut stmt = db
        .prepare(
            "SELECT cell, repetition, COUNT(*) FROM sample_rows WHERE metric = 'wall'
              GROUP BY cell, repetition ORDER BY cell, repetition",
        )
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn steady_cells_stop_early_noisy_ones_at_max_and_warmups_count_nowhere() {
    let tmp = tempfile::tempdir().unwrap();
    let f = campaign(tmp.path(), 10);
    let (report, stderr) = run_json(tmp.path(), &f);
    assert!(stderr.contains("6–10 repetition(s) (until"), "{stderr}");
    assert_eq!(report["state"], "done");
    assert_eq!(report["warmup"], 1);

    let steady = cell(&report, "steady");
    assert_eq!(wall_of(steady)["n"], 6, "{steady}");
    let stopped = steady["stopped"].as_str().unwrap();
    assert!(
        stopped.starts_with("stopped after 6 repetition(s)"),
        "{stopped}"
    );
    // The warm-up's extra second is stored and shown, and in no statistic.
    let warm = &steady["warmup"][0];
    assert_eq!(warm["metric"], "wall");
    assert_eq!(warm["values"].as_array().unwrap().len(), 1);
    assert!(warm["values"][0].as_f64().unwrap() >= 1.3, "{warm}");
    assert!(warm["ratio_to_counted"].as_f64().unwrap() > 2.0, "{warm}");
    assert!(wall_of(steady)["max"].as_f64().unwrap() < 1.0, "{steady}");

    let noisy = cell(&report, "noisy");
    assert_eq!(wall_of(noisy)["n"], 10, "{noisy}");
    let stopped = noisy["stopped"].as_str().unwrap();
    assert!(stopped.starts_with("hit max (10 repetitions)"), "{stopped}");
    assert!(wall_of(noisy)["max"].as_f64().unwrap() < 1.0, "{noisy}");

    // One plan for the first round, then one per round of the noisy cell (7 … 10); each
    // counted repetition stored once.
    let plans = query(tmp.path(), "SELECT COUNT(*) FROM plans");
    assert_eq!(plans, 5);
    let reps = counted_repetitions(tmp.path());
    assert_eq!(reps.len(), 16, "{reps:?}");
    assert!(reps.iter().all(|&(_, _, n)| n == 1), "{reps:?}");
    let warmups = query(
        tmp.path(),
        "SELECT COUNT(*) FROM warmup_rows WHERE metric = 'wall'",
    );
    assert_eq!(warmups, 2);

    // The text report says the same.
    let id = report["campaign_id"].as_str().unwrap();
    let text = platter()
        .current_dir(tmp.path())
        .args(["report", id])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("after 1 warm-up run(s) not counted"),
        "{text}"
    );
    assert!(
        text.contains("kind=steady: stopped after 6 repetition(s)"),
        "{text}"
    );
    assert!(
        text.contains("kind=noisy: hit max (10 repetitions)"),
        "{text}"
    );
    assert!(
        text.contains("kind=steady: warm-up (not counted): wall"),
        "{text}"
    );

    // `platter campaigns`: both cells done (the steady one stopped at 6 of its 10), and
    // the host once, with the steps of all five plans.
    let listed = platter()
        .current_dir(tmp.path())
        .args(["campaigns", "--output", "json"])
        .output()
        .unwrap();
    assert!(listed.status.success());
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let c = &listed.as_array().unwrap()[0];
    assert_eq!(
        (&c["cells_done"], &c["cells_total"]),
        (&2.into(), &2.into()),
        "{c}"
    );
    let hosts = c["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 1, "{c}");
    assert_eq!(hosts[0]["steps_done"], c["steps_done"], "{c}");
    assert_eq!(hosts[0]["steps_total"], c["steps_total"], "{c}");
    let table = platter()
        .current_dir(tmp.path())
        .arg("campaigns")
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    let host = hosts[0]["host"].as_str().unwrap();
    assert!(table.contains(" 2/2 "), "{table}");
    assert!(!table.contains(&format!("{host},{host}")), "{table}");
}

#[test]
fn a_run_killed_between_rounds_resumes_without_losing_or_repeating_one() {
    let tmp = tempfile::tempdir().unwrap();
    let f = campaign(tmp.path(), 14);
    let mut first = platter()
        .current_dir(tmp.path())
        .arg("run")
        .arg(&f)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once the third round is planned: its first rounds decided, the rest not.
    common::wait_for("the third round", Duration::from_secs(60), || {
        let n = store(tmp.path())
            .and_then(|db| {
                db.query_row("SELECT COUNT(*) FROM plans", [], |r| r.get::<_, i64>(0))
                    .ok()
            })
            .unwrap_or(0);
        (n >= 3).then_some(())
    });
    first.kill().unwrap();
    first.wait().unwrap();

    let (report, stderr) = run_json(tmp.path(), &f);
    assert!(stderr.contains("resuming"), "{stderr}");
    assert_eq!(report["state"], "done");
    // The steady cell usually stops at 6; a busy machine may keep it a round or two.
    let steady = wall_of(cell(&report, "steady"))["n"].as_i64().unwrap();
    assert!((6..14).contains(&steady), "{report}");
    assert_eq!(wall_of(cell(&report, "noisy"))["n"], 14);
    // Rounds 7 … 14 of the noisy cell: one plan each, never two.
    assert_eq!(query(tmp.path(), "SELECT COUNT(*) FROM plans"), 9);
    let reps = counted_repetitions(tmp.path());
    assert_eq!(reps.len() as i64, steady + 14, "{reps:?}");
    assert!(reps.iter().all(|&(_, _, n)| n == 1), "{reps:?}");
}
