//! The `platter` command line as a user runs it: validate, run, report.

mod common;

use assert_cmd::prelude::*;
use common::platter;
use predicates::prelude::*;

fn corpus(kind: &str) -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/spec-corpus")
        .join(kind);
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

#[test]
fn validate_rejects_every_invalid_campaign_with_its_position() {
    let files = corpus("invalid");
    assert!(files.len() >= 20);
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        // First line: `# expect: LINE:COLUMN PATH -- SUBSTRING`
        let expect = text
            .lines()
            .next()
            .unwrap()
            .strip_prefix("# expect: ")
            .unwrap();
        let position = expect.split_whitespace().next().unwrap();
        let at = format!("{}:{position}:", f.display());
        platter()
            .arg("validate")
            .arg(&f)
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(at));
    }
}

#[test]
fn validate_prints_cells_and_plans() {
    let f = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/quickstart.yaml");
    platter()
        .args(["validate", "--local-host", "testhost"])
        .arg(&f)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "4 cell(s) × 6 repetition(s), after 1 warm-up run(s) on 1 host(s): testhost",
        ))
        .stdout(predicate::str::contains(
            "cell 3: bs=1M sync=fdatasync conv=fdatasync",
        ))
        .stdout(predicate::str::contains(
            "plan for host testhost (88 steps)",
        ))
        .stdout(predicate::str::contains(
            "measure: dd if=/dev/zero of=platter-data/quickstart/4k-fdatasync bs=4k",
        ));
}

/// The lab's campaigns select drives (and hosts, by label) that only a coordinator knows:
/// offline they are valid as far as can be told, with the way to check the rest.
#[test]
fn validate_without_a_coordinator_says_what_it_cannot_check() {
    let lab = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/lab");
    platter()
        .env_remove("PLATTER_COORDINATOR")
        .arg("validate")
        .arg(lab.join("campaign.yaml"))
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "campaign lab-fsync: valid as far as this machine can tell",
        ))
        .stdout(predicate::str::contains(
            "which hosts have the labels: only the coordinator knows",
        ));
    platter()
        .env_remove("PLATTER_COORDINATOR")
        .arg("validate")
        .arg(lab.join("qualify.yaml"))
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "the drives of rc66, rcmonster, flygecko: only the coordinator knows",
        ))
        .stdout(predicate::str::contains("--coordinator URL"));
}

#[test]
fn run_measures_and_reports_in_every_format() {
    let tmp = tempfile::tempdir().unwrap();
    let yaml = r#"
name: sleepy
matrix:
  seconds: [0.05, 0.15]
workload:
  command:
    run: sleep ${seconds}
repeat: 3
"#;
    let f = common::write(tmp.path(), "c.yaml", yaml);
    let out = platter()
        .current_dir(tmp.path())
        .args(["run", "--format", "json"])
        .arg(&f)
        .assert()
        .success();
    let report: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(report["schema_version"], 1);
    assert_eq!(report["state"], "done");
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for (cell, ms) in cells.iter().zip([0.050, 0.150]) {
        let wall = common::wall_of(cell);
        assert_eq!(wall["n"], 3);
        let median = wall["median"].as_f64().unwrap();
        assert!(median >= ms && median < ms + 0.1, "{median} for sleep {ms}");
    }
    assert!(tmp.path().join("platter-data/platter.db").exists());

    // CSV and Markdown of the same campaign from the store.
    let id = report["campaign_id"].as_str().unwrap().to_string();
    platter()
        .current_dir(tmp.path())
        .args([
            "report",
            &id,
            "--db",
            "platter-data/platter.db",
            "--format",
            "csv",
        ])
        .assert()
        .success()
        .stdout(predicate::str::starts_with(
            "campaign,host,cell,seconds,metric,unit,n,failed,median,mean,stddev,min,max,cv,mad,median_ci_low,median_ci_high,median_ci_level,mean_ci_student_t_low,mean_ci_student_t_high,value,ops,not_measured,not_measured_reason,kernel,device_model,device_serial,device_firmware,mounted,mkfs,write_cache_read_back\n",
        ))
        .stdout(predicate::function(|s: &str| {
            s.lines().count() == 1 + 2 * 4
        }));
    // Markdown, the table and HTML of it from the store: each host, and each cell's
    // metrics with the medians its samples gave (as the JSON has them); the page has its
    // chart and fetches nothing.
    let rendered = |format: &str| {
        let out = platter()
            .current_dir(tmp.path())
            .args(["report", &id, "--db", "platter-data/platter.db"])
            .args(["--format", format])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let (markdown, table, html) = (rendered("markdown"), rendered("table"), rendered("html"));
    assert!(markdown.contains("| seconds | metric | n | median (CI) |"));
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(html.trim_end().ends_with("</html>"), "{html}");
    assert!(html.contains("<figure id=\"dots-wall\""), "{html}");
    // A dot chart per metric: wall, user, sys, max_rss.
    assert_eq!(html.matches("<svg").count(), 4, "{html}");
    let offline = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for fetch in ["http://", "https://", "src=", "<link", "url("] {
        assert!(
            !offline.contains(fetch),
            "the page fetches {fetch}…: {html}"
        );
    }
    for (cell, seconds) in cells.iter().zip(["0.05", "0.15"]) {
        let host = cell["host"].as_str().unwrap();
        assert!(markdown.contains(&format!("\n## {host}\n")), "{markdown}");
        assert!(table.contains(&format!("\nhost {host}\n")), "{table}");
        assert!(
            html.contains(&format!("<summary>{host} — 2 cell(s)</summary>")),
            "{html}"
        );
        assert!(html.contains(&format!("<td>{seconds}</td>")), "{html}");
        let metrics = cell["metrics"].as_array().unwrap();
        let names: Vec<&str> = metrics
            .iter()
            .map(|m| m["metric"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["wall", "user", "sys", "max_rss"]);
        for m in metrics {
            let (metric, n) = (m["metric"].as_str().unwrap(), &m["n"]);
            let value = m["median"].as_f64().unwrap();
            let median = platter::report::human(value, m["unit"].as_str().unwrap());
            // A row is written in the unit its median chose; a zero median (a run too short
            // for a CPU tick) takes the unit of the row's other values (`0.0 µs`), so only
            // its leading zero is known here.
            let text_median = if value == 0.0 {
                "0".to_string()
            } else {
                format!("{median} ")
            };
            let md_row = format!("| {metric} | {n} | {text_median}");
            assert!(markdown.contains(&md_row), "{md_row} in {markdown}");
            let html_row = format!(
                "<td>{metric}</td><td class=\"num\" data-v=\"{n}\">{n}</td><td class=\"num\" data-v=\"{value}\">{text_median}"
            );
            assert!(html.contains(&html_row), "{html_row} in {html}");
            let in_table = table.lines().any(|l| {
                let words: Vec<&str> = l.split_whitespace().collect();
                words.windows(2).any(|w| w == [metric, &n.to_string()])
                    && l.contains(&format!(" {text_median}"))
            });
            assert!(in_table, "{metric} {n} {median} in {table}");
        }
    }
    // A campaign is found by its name as well as its id (before: "no campaign sleepy").
    let by_name = platter()
        .current_dir(tmp.path())
        .args([
            "report",
            "sleepy",
            "--db",
            "platter-data/platter.db",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(by_name.status.success(), "{by_name:?}");
    let by_name: serde_json::Value = serde_json::from_slice(&by_name.stdout).unwrap();
    assert_eq!(by_name["campaign_id"], id.as_str());
    platter()
        .current_dir(tmp.path())
        .args(["report", "sleepless", "--db", "platter-data/platter.db"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("no campaign sleepless"));
    // JSON from the store is streamed as it is rendered: to stdout and to a file alike.
    let json = |extra: &[&str]| {
        let out = platter()
            .current_dir(tmp.path())
            .args([
                "report",
                &id,
                "--db",
                "platter-data/platter.db",
                "--format",
                "json",
            ])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        out.stdout
    };
    let streamed: serde_json::Value = serde_json::from_slice(&json(&[])).unwrap();
    assert_eq!(streamed["campaign_id"], id.as_str());
    assert_eq!(streamed["cells"], report["cells"]);
    assert!(json(&["--output", "r.json"]).is_empty());
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(file, streamed);
}

#[test]
fn run_exits_non_zero_and_shows_the_error_when_a_workload_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let f = common::write(
        tmp.path(),
        "c.yaml",
        "name: failing\nworkload: { command: { run: \"echo disk on fire >&2; exit 3\" } }\nrepeat: 2\n",
    );
    platter()
        .current_dir(tmp.path())
        .arg("run")
        .arg(&f)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("2 step(s) failed"))
        .stdout(predicate::str::contains("workload failed: exit status 3"))
        .stdout(predicate::str::contains("disk on fire"));
}

/// `platter run` started under `nohup` from a background job (SIGHUP, SIGINT and SIGQUIT
/// ignored) by a program that blocks SIGUSR1 still starts its workload, its setup and its
/// phases with every signal at its default and none blocked: they used to inherit those
/// ignored, and glibc's internal signals 32 and 33 too (`SigIgn: 0000000180000000`).
#[test]
fn run_starts_commands_with_default_signals_whatever_it_inherited() {
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().display();
    let grep = |to: &str| format!("grep -E '^Sig(Blk|Ign)' /proc/self/status > {dir}/{to}");
    let f = common::write(
        tmp.path(),
        "c.yaml",
        &format!(
            "name: signals\nworkload:\n  command:\n    setup: \"{}\"\n    run: \"{}\"\n\
             phases:\n  before_each: [{{ command: \"{}\" }}]\nrepeat: 1\n",
            grep("setup.txt"),
            grep("run.txt"),
            grep("phase.txt")
        ),
    );
    let mut run = platter();
    run.current_dir(tmp.path()).arg("run").arg(&f);
    // SAFETY: the closure runs in the forked child before exec and only calls `signal` and
    // `sigprocmask` with SIG_IGN and a set on its stack: async-signal-safe, no allocation.
    unsafe {
        run.pre_exec(|| {
            for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT] {
                libc::signal(sig, libc::SIG_IGN);
            }
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGUSR1);
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            Ok(())
        })
    };
    run.assert().success();
    for file in ["setup.txt", "run.txt", "phase.txt"] {
        let lines = std::fs::read_to_string(tmp.path().join(file)).unwrap();
        assert_eq!(
            lines, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n",
            "{file}"
        );
    }
}

#[test]
fn run_refuses_an_invalid_campaign_before_starting_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let f = common::write(
        tmp.path(),
        "c.yaml",
        "name: x\nworkload: { command: { run: true } }\nrepet: 2\n",
    );
    platter()
        .current_dir(tmp.path())
        .arg("run")
        .arg(&f)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("c.yaml:3:1"))
        .stderr(predicate::str::contains("did you mean `repeat`"));
    assert!(
        !tmp.path().join("platter-data").exists(),
        "nothing may be created for an invalid campaign"
    );
}

#[test]
fn run_resumes_an_interrupted_campaign() {
    let tmp = tempfile::tempdir().unwrap();
    let f = common::write(
        tmp.path(),
        "c.yaml",
        "name: slow\nworkload: { command: { run: sleep 0.3 } }\nrepeat: 4\n",
    );
    let mut first = platter()
        .current_dir(tmp.path())
        .arg("run")
        .arg(&f)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let db = tmp.path().join("platter-data/platter.db");
    let samples = |db: &std::path::Path| -> i64 {
        rusqlite::Connection::open(db)
            .and_then(|c| {
                c.query_row(
                    "SELECT COUNT(*) FROM samples WHERE metric = 'wall'",
                    [],
                    |r| r.get(0),
                )
            })
            .unwrap_or(0)
    };
    common::wait_for("a first sample", std::time::Duration::from_secs(30), || {
        (samples(&db) >= 1).then_some(())
    });
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(first.id() as i32, libc::SIGINT) };
    let status = first.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let before = samples(&db);
    assert!((1..4).contains(&before), "{before}");

    platter()
        .current_dir(tmp.path())
        .args(["run", "--format", "csv"])
        .arg(&f)
        .assert()
        .success()
        .stderr(predicate::str::contains("resuming campaign slow"))
        .stdout(predicate::str::contains(",wall,s,4,0,"));
    assert_eq!(samples(&db), 4);
}

#[test]
fn on_failure_abort_skips_the_rest_of_the_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let f = common::write(
        tmp.path(),
        "c.yaml",
        "name: abort\nmatrix: { code: [3, 0] }\nworkload: { command: { run: \"exit ${code}\" } }\nrepeat: 2\norder: sequential\non_failure: abort\n",
    );
    platter()
        .current_dir(tmp.path())
        .arg("run")
        .arg(&f)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("1 step(s) failed"));
    let c = rusqlite::Connection::open(tmp.path().join("platter-data/platter.db")).unwrap();
    let states: Vec<String> = c
        .prepare("SELECT state FROM steps WHERE state != 'started' ORDER BY step_index")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(states, ["failed", "skipped", "skipped", "skipped"]);
    let samples: i64 = c
        .query_row("SELECT COUNT(*) FROM samples", [], |r| r.get(0))
        .unwrap();
    assert_eq!(samples, 0);
}

/// Issue 10: skipped steps are stored with start time 0; with six or more of them the
/// progress query overflowed ("database: integer overflow") and `run` died watching.
#[test]
fn an_abort_that_skips_many_steps_still_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let f = common::write(
        tmp.path(),
        "c.yaml",
        "name: abort7\nworkload: { command: { run: 'false' } }\nrepeat: 7\non_failure: abort\n",
    );
    platter()
        .current_dir(tmp.path())
        .arg("run")
        .arg(&f)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("1 step(s) failed"))
        .stderr(predicate::str::contains("overflow").not());
}

#[test]
fn comparisons_against_a_baseline_say_which_differences_are_real() {
    let tmp = tempfile::tempdir().unwrap();
    let f = common::write(
        tmp.path(),
        "c.yaml",
        r#"
name: compare
matrix:
  variant: [base, same, slower]
  include:
    - { variant: base, s: 0.1 }
    - { variant: same, s: 0.1 }
    - { variant: slower, s: 0.13 }
  # `base` and `same` run the same sleep: `variant` names them.
  labels: [variant]
workload: { command: { run: "sleep ${s}" } }
# 8 runs a side: with 6, one run slowed by a busy machine left the 30% difference at
# Holm's p 0.052 (the smallest p of 6 against 6 is 0.002; of 8 against 8, 0.0002).
repeat: 8
report: { baseline: { variant: base } }
"#,
    );
    let out = platter()
        .current_dir(tmp.path())
        .args(["run", "--format", "json"])
        .arg(&f)
        .assert()
        .success();
    let report: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let rows = report["comparisons"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let row = |v: &str| rows.iter().find(|r| r["candidate"] == v).unwrap();
    let slower = row("slower");
    let penalty = slower["penalty_pct"].as_f64().unwrap();
    assert!((20.0..40.0).contains(&penalty), "{slower}");
    assert_eq!(slower["significant"], true, "{slower}");
    // Two identical commands: a small penalty, and almost always "no significant
    // difference". A test at the 5% level calls identical runs different 5% of the time
    // (more on a busy machine), so the verdict itself is pinned on seeded data in
    // `report::stats`; here the words must match the verdict, whichever it is.
    let same = row("same");
    assert!(same["penalty_pct"].as_f64().unwrap().abs() < 5.0, "{same}");
    let text = same["text"].as_str().unwrap();
    if same["significant"] == false {
        assert!(
            text.contains("no significant difference") || text.contains("not significant"),
            "{same}"
        );
    } else {
        assert!(text.contains("penalty"), "{same}");
    }
}

#[test]
fn qualification_fails_the_run_and_writes_junit_naming_the_cell_and_threshold() {
    let tmp = tempfile::tempdir().unwrap();
    let f = common::write(
        tmp.path(),
        "c.yaml",
        "name: qualify\nmatrix: { s: [0.01, 0.2] }\nworkload: { command: { run: \"sleep ${s}\" } }\nrepeat: 2\n\
         report: { qualify: [\"wall.median < 100ms\", \"wall.max < 5s\"] }\n",
    );
    let junit = tmp.path().join("junit.xml");
    platter()
        .current_dir(tmp.path())
        .arg("run")
        .arg("--junit")
        .arg(&junit)
        .arg(&f)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "qualification: FAIL (1 of 4 checks)",
        ))
        .stdout(predicate::str::contains("[s=0.2]: wall.median < 100ms"));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.starts_with("<?xml"), "{xml}");
    assert!(xml.contains(r#"tests="4" failures="1""#), "{xml}");
    assert!(
        xml.contains(r#"name="wall.median &lt; 100ms [s=0.2]""#),
        "{xml}"
    );
    assert_eq!(xml.matches("<failure").count(), 1, "{xml}");

    let bad = common::write(tmp.path(), "bad.yaml", "name: q\nworkload: { command: { run: x } }\nreport: { qualify: [\"wall.median 100ms\"] }\n");
    platter()
        .arg("validate")
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.yaml:3:21: report.qualify[0]"));
}

#[test]
fn a_pivot_table_lays_out_one_statistic_by_rows_and_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let f = common::write(
        tmp.path(),
        "c.yaml",
        "name: pivot\nmatrix: { a: [x, y], b: [1, 2] }\nworkload: { command: { run: \"true ${a} ${b}\" } }\nrepeat: 2\n\
         report: { pivot: { rows: [host, a], columns: [b], metric: wall, stat: min } }\n",
    );
    let out = platter()
        .current_dir(tmp.path())
        .args(["run", "--format", "markdown"])
        .arg(&f)
        .assert()
        .success();
    let md = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(md.contains("## min of wall by host, a × b"), "{md}");
    assert!(md.contains("| host | a | 1 | 2 |"), "{md}");
    let rows: Vec<&str> = md
        .lines()
        .filter(|l| l.contains(" | x | ") || l.contains(" | y | "))
        .collect();
    assert_eq!(rows.len(), 2, "{md}");
    let bad = common::write(tmp.path(), "bad.yaml", "name: p\nmatrix: { a: [x] }\nworkload: { command: { run: x } }\nreport: { pivot: { rows: [aa], columns: [a], metric: wall } }\n");
    platter()
        .arg("validate")
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "bad.yaml:4:27: report.pivot: `aa` is not a pivot key",
        ));
}

#[test]
fn compare_puts_two_runs_of_the_same_campaign_side_by_side() {
    let tmp = tempfile::tempdir().unwrap();
    let f = common::write(tmp.path(), "c.yaml", "name: twice\nmatrix: { s: [0.1, 0.2] }\nworkload: { command: { run: \"sleep ${s}\" } }\nrepeat: 3\n");
    let id = |out: &std::process::Output| -> String {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["campaign_id"].as_str().unwrap().to_string()
    };
    let first = platter()
        .current_dir(tmp.path())
        .args(["run", "--format", "json"])
        .arg(&f)
        .output()
        .unwrap();
    let second = platter()
        .current_dir(tmp.path())
        .args(["run", "--fresh", "--format", "json"])
        .arg(&f)
        .output()
        .unwrap();
    let (a, b) = (id(&first), id(&second));
    assert_ne!(a, b);
    let out = platter()
        .current_dir(tmp.path())
        .args(["compare", &a, &b, "--format", "json"])
        .assert()
        .success();
    let compared: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let rows = compared["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(compared["only_in_a"], serde_json::json!([]));
    assert_eq!(compared["only_in_b"], serde_json::json!([]));
    for r in rows {
        assert_eq!(r["baseline"], a.as_str());
        assert_eq!(r["candidate"], b.as_str());
        // The same sleep both times: well within 20% even on a loaded machine (a process
        // start costs a few ms, which is why the sleeps are not shorter).
        assert!(r["penalty_pct"].as_f64().unwrap().abs() < 20.0, "{r}");
    }
    platter()
        .current_dir(tmp.path())
        .args(["compare", &a, &b, "--metric", "nonexistent"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("measured nonexistent"));
}

/// Issue 10: `platter validate FILE | head` panicked on the closed pipe with a backtrace.
/// A printing command ends quietly, as `ls` does (killed by SIGPIPE, or exit 0).
#[test]
fn a_closed_stdout_ends_printing_quietly() {
    use std::io::Read;
    let tmp = tempfile::tempdir().unwrap();
    // Far more than a pipe's 64 KiB, so writes go on after the reader is gone.
    let n: Vec<String> = (0..3000).map(|i| i.to_string()).collect();
    let f = common::write(
        tmp.path(),
        "big.yaml",
        &format!(
            "name: big\nmatrix: {{ n: [{}] }}\nworkload: {{ command: {{ run: 'echo ${{n}}' }} }}\n",
            n.join(", ")
        ),
    );
    let mut child = platter()
        .args(["validate", "--local-host", "t"])
        .arg(&f)
        .env("RUST_BACKTRACE", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut byte = [0u8; 1];
    stdout.read_exact(&mut byte).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("backtrace"), "{stderr}");
    use std::os::unix::process::ExitStatusExt;
    assert!(
        out.status.success() || out.status.signal() == Some(libc::SIGPIPE),
        "{:?}: {stderr}",
        out.status
    );
}

/// `platter run FILE | head`: the report's reader is gone when the campaign ends; the run
/// still ends as its steps say, without an error about the pipe.
#[test]
fn run_ends_quietly_when_nobody_reads_the_report() {
    let tmp = tempfile::tempdir().unwrap();
    let f = common::write(
        tmp.path(),
        "c.yaml",
        "name: unread\nworkload: { command: { run: 'true' } }\nrepeat: 2\n",
    );
    let mut child = platter()
        .current_dir(tmp.path())
        .arg("run")
        .arg(&f)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}

/// Issue 10: `--heartbeat-timeout` below two heartbeat intervals (even 0) was accepted
/// and idle agents flapped lost/online.
#[test]
fn serve_refuses_a_heartbeat_timeout_below_two_heartbeats() {
    let tmp = tempfile::tempdir().unwrap();
    for bad in ["0", "9"] {
        let mut serve = platter();
        serve
            .args(["serve", "--dangerously-insecure", "--listen", "127.0.0.1:0"])
            .arg("--db")
            .arg(tmp.path().join("p.db"))
            .args(["--heartbeat-timeout", bad]);
        common::run_within(&mut serve, std::time::Duration::from_secs(10))
            .assert()
            .code(2)
            .stderr(predicate::str::contains(format!(
                "invalid value '{bad}' for '--heartbeat-timeout"
            )))
            .stderr(predicate::str::contains("the minimum is 10 s"));
    }
    assert!(
        !tmp.path().join("p.db").exists(),
        "nothing may start with an invalid flag"
    );
}

/// Issue 10: a campaign file that cannot be read was reported at a made-up `0:0`.
#[test]
fn a_missing_campaign_file_is_named_without_a_position() {
    let tmp = tempfile::tempdir().unwrap();
    platter()
        .current_dir(tmp.path())
        .args(["validate", "no-such.yaml"])
        .assert()
        .code(2)
        .stdout("")
        .stderr("error: no-such.yaml: cannot read: No such file or directory (os error 2)\n");
    // The same from `run` (before anything starts) and `submit` (before it connects).
    for args in [
        &["run", "--db", "p.db", "no-such.yaml"][..],
        &[
            "submit",
            "--dangerously-insecure",
            "--coordinator",
            "http://127.0.0.1:1",
            "no-such.yaml",
        ],
    ] {
        platter()
            .current_dir(tmp.path())
            .args(args)
            .assert()
            .code(2)
            .stdout("")
            .stderr("error: no-such.yaml: cannot read: No such file or directory (os error 2)\n");
    }
    assert!(!tmp.path().join("p.db").exists());
}

/// After `platter run`, the commands that read results find its store by themselves:
/// `campaigns` lists the runs, `report NAME` and `compare` read the latest of each name,
/// with no `--db`; elsewhere, with no coordinator named, they say where to look.
#[test]
fn report_compare_and_campaigns_find_the_store_platter_run_left() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let yaml = |name: &str| {
        format!("name: {name}\nmatrix: {{ n: [1, 2] }}\nworkload: {{ command: {{ run: \"true ${{n}}\" }} }}\nrepeat: 3\n")
    };
    for name in ["first", "second"] {
        let f = common::write(tmp.path(), &format!("{name}.yaml"), &yaml(name));
        platter()
            .current_dir(tmp.path())
            .env("HOME", home.path())
            .env_remove("PLATTER_COORDINATOR")
            .args(["run", "--format", "json"])
            .arg(&f)
            .assert()
            .success();
    }
    let here = |args: &[&str]| {
        let mut c = platter();
        c.current_dir(tmp.path())
            .env("HOME", home.path())
            .env_remove("PLATTER_COORDINATOR")
            .args(args);
        c
    };
    let listed = here(&["campaigns"]).assert().success();
    let text = String::from_utf8_lossy(&listed.get_output().stdout).to_string();
    let rows: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(
        rows[0].contains("second") && rows[0].contains("done"),
        "{text}"
    );
    assert!(rows[1].contains("first"), "newest first: {text}");

    let report = here(&["report", "first", "--format", "json"])
        .assert()
        .success();
    let report: serde_json::Value = serde_json::from_slice(&report.get_output().stdout).unwrap();
    assert_eq!(report["name"], "first");
    assert_eq!(report["cells"].as_array().unwrap().len(), 2);

    here(&["compare", "first", "second"])
        .assert()
        .success()
        .stdout(predicate::str::contains("n=1").and(predicate::str::contains("n=2")));

    // Somewhere else, nothing to read and no coordinator: say where results are.
    let elsewhere = tempfile::tempdir().unwrap();
    platter()
        .current_dir(elsewhere.path())
        .env("HOME", home.path())
        .env_remove("PLATTER_COORDINATOR")
        .args(["report", "first"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "no platter-data/platter.db here (`platter run` writes it in the directory it runs in)",
        ));
}

/// `platter db migrate`: an SQLite store's directory is made as `serve` makes it; a
/// PostgreSQL store it cannot reach is named (password hidden) with the reason said once.
#[test]
fn db_migrate_makes_the_directory_and_names_the_store_it_cannot_reach() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("new/dir/platter.db");
    platter()
        .args(["db", "migrate", "--db"])
        .arg(&db)
        .assert()
        .success()
        .stdout(predicate::str::contains("SQLite schema at version"));
    assert!(db.exists());
    // Nothing listens on port 1.
    let out = platter()
        .args([
            "db",
            "migrate",
            "--db",
            "postgres://platter:s3cret@127.0.0.1:1/platter",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("migrating the store postgres://platter:***@127.0.0.1:1/platter"),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
    assert_eq!(
        err.matches("Connection refused").count(),
        1,
        "said once: {err}"
    );
}

/// `--set` replaces a parameter's values for this run; what the store keeps is the
/// campaign with them, so the report and every later round of adaptive repetition run
/// and show the values set, never the file's (here a 3 s sleep that would show).
#[test]
fn set_overrides_a_parameter_for_the_run_its_report_and_its_later_rounds() {
    let tmp = tempfile::tempdir().unwrap();
    let f = common::write(
        tmp.path(),
        "c.yaml",
        "name: settable\nmatrix: { s: [3] }\nworkload: { command: { run: \"sleep ${s}\" } }\n\
         repeat: { min: 2, max: 3, until: { metric: wall, ci: 0.001% } }\n",
    );
    let out = common::run_ok(
        platter()
            .current_dir(tmp.path())
            .args([
                "run", "--format", "json", "--set", "s=0.01", "--set", "s=0.02",
            ])
            .arg(&f),
    );
    let check = |report: &serde_json::Value| {
        let cells = report["cells"].as_array().unwrap();
        let s: Vec<&str> = cells
            .iter()
            .map(|c| c["params"]["s"].as_str().unwrap())
            .collect();
        assert_eq!(s, ["0.01", "0.02"], "{report}");
        for cell in cells {
            let wall = common::wall_of(cell);
            // Two rounds' worth (min 2, then one more round to max 3), all of the set
            // sleep: a round planned from the file's text would have slept 3 s.
            assert_eq!(wall["n"], 3, "{cell}");
            assert!(wall["max"].as_f64().unwrap() < 1.0, "{cell}");
            assert!(
                cell["stopped"].as_str().unwrap().starts_with("hit max (3"),
                "{cell}"
            );
        }
    };
    check(&serde_json::from_slice(&out.stdout).unwrap());
    // Read again from the store, as a report a year later is.
    let again = platter()
        .current_dir(tmp.path())
        .args(["report", "settable", "--format", "json"])
        .output()
        .unwrap();
    assert!(again.status.success());
    check(&serde_json::from_slice(&again.stdout).unwrap());
    let db = rusqlite::Connection::open(tmp.path().join("platter-data/platter.db")).unwrap();
    let yaml: String = db
        .query_row("SELECT yaml FROM campaigns", [], |r| r.get(0))
        .unwrap();
    assert!(yaml.contains("matrix: { s: [0.01, 0.02] }"), "{yaml}");
    assert!(
        yaml.ends_with("# set on the command line, and written above: --set s=0.01 --set s=0.02\n"),
        "{yaml}"
    );
}

/// A key `--set` cannot set is refused before anything runs, naming those it can; a
/// device path is one of them.
#[test]
fn set_refuses_a_key_it_cannot_set_and_sets_a_device_path() {
    let tmp = tempfile::tempdir().unwrap();
    let f = common::write(
        tmp.path(),
        "d.yaml",
        "name: on-a-drive\ndevices: { path: /dev/loop7 }\nmatrix: { bs: [4k] }\nstorage: { fs: ext4 }\n\
         workload: { command: { run: \"dd if=/dev/zero of=${mount}/f bs=${bs} count=1\" } }\n",
    );
    for cmd in ["validate", "run", "submit"] {
        platter()
            .current_dir(tmp.path())
            .args([cmd, "--set", "device=/dev/loop0"])
            .arg(&f)
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(
                "error: --set device: `device` is neither a parameter of the matrix nor a field of `devices:`\n  \
                 hint: did you mean `devices.path`? (this campaign can set `bs`, `devices.path`)",
            ));
    }
    assert!(!tmp.path().join("platter-data").exists());
    // A value `--set` writes is judged as if the file had it.
    platter()
        .args(["validate", "--set", "devices.path=loop0"])
        .arg(&f)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "d.yaml:2:18: devices.path: `loop0` is not a device path",
        ));
    platter()
        .arg("run")
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("--set <KEY=VALUE>"));
}

/// Two `platter run`s in one directory would share one campaign with two agents acting as
/// one host; the second is refused at once, naming the first, and once the first ended a
/// run goes ahead.
#[test]
fn a_second_run_in_the_same_directory_is_refused_while_the_first_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let slow = common::write(
        tmp.path(),
        "slow.yaml",
        "name: slow\nworkload: { command: { run: \"sleep 1.5\" } }\nrepeat: 2\n",
    );
    let quick = common::write(
        tmp.path(),
        "quick.yaml",
        "name: quick\nworkload: { command: { run: \"true\" } }\nrepeat: 1\n",
    );
    let mut first = platter()
        .current_dir(tmp.path())
        .arg("run")
        .arg(&slow)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The first has its locks once it wrote who it is.
    let lock = tmp.path().join("platter-data/agent.lock");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::fs::read_to_string(&lock).map_or(true, |s| s.is_empty()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the first run took no lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let started = std::time::Instant::now();
    platter()
        .current_dir(tmp.path())
        .arg("run")
        .arg(&quick)
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains(format!(
            "platter: platter-data/platter.db (the store) is in use by `platter run {}` (pid {}, started ",
            slow.display(),
            first.id()
        )))
        .stderr(predicate::str::contains(
            "; wait for it to end, or give this run a --db and --state-dir of its own",
        ));
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    // Another store, the same agent state: refused too, for the state.
    platter()
        .current_dir(tmp.path())
        .args(["run", "--db", "other.db"])
        .arg(&quick)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "platter: platter-data/agent (the agent's state) is in use by `platter run",
        ));
    assert!(first.wait().unwrap().success());
    platter()
        .current_dir(tmp.path())
        .arg("run")
        .arg(&quick)
        .assert()
        .success();
    // A run killed with -9 leaves no lock behind.
    let mut killed = platter()
        .current_dir(tmp.path())
        .arg("run")
        .arg(&slow)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    while std::fs::read_to_string(&lock).map_or(true, |s| s.is_empty()) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    killed.kill().unwrap();
    killed.wait().unwrap();
    platter()
        .current_dir(tmp.path())
        .args(["run", "--fresh"])
        .arg(&quick)
        .assert()
        .success();
}

/// The lock file of `what` (`PATH.lock`) once its holder wrote who it is.
fn wait_for_lock(what: &std::path::Path) -> String {
    let mut name = what.file_name().unwrap().to_os_string();
    name.push(".lock");
    let lock = what.with_file_name(name);
    common::wait_for(
        "the lock to be taken",
        std::time::Duration::from_secs(20),
        || {
            std::fs::read_to_string(&lock)
                .ok()
                .filter(|s| !s.is_empty())
        },
    )
}

/// Two coordinators on one SQLite file would each schedule its plans as if alone; the
/// second `platter serve` is refused at once, naming the first. (Coordinators share a
/// store through PostgreSQL, on purpose: no lock there.)
#[test]
fn a_second_coordinator_on_the_same_sqlite_store_is_refused_naming_the_first() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (mut first, _port) = common::serve(dir);
    wait_for_lock(&dir.join("coordinator.db"));
    let started = std::time::Instant::now();
    let out = common::run_within(
        &mut common::serve_command(dir, "127.0.0.1:0", &[]),
        std::time::Duration::from_secs(20),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{} (the store) is in use by `platter serve --listen 127.0.0.1:0",
            dir.join("coordinator.db").display()
        )) && stderr.contains(&format!("(pid {}, started ", first.child.id())),
        "{stderr}"
    );
    assert!(
        stderr.contains("give this coordinator a --db of its own"),
        "{stderr}"
    );
    assert!(!stderr.contains("listening on"), "{stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // Once the first is gone (kill -9 included), a coordinator takes the store again.
    first.kill9();
    let (again, _) = common::serve(dir);
    let said = wait_for_lock(&dir.join("coordinator.db"));
    assert!(
        said.starts_with(&format!("{}\n", again.child.id())),
        "{said}"
    );
}

/// Two agents on one state directory would append to one journal and run one plan twice;
/// the second is refused at once, naming the first.
#[test]
fn a_second_agent_on_the_same_state_directory_is_refused_naming_the_first() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = common::serve(dir);
    let mut first = common::agent(dir, port, "a1", &[]);
    wait_for_lock(&dir.join("a1.state"));
    let args = common::agent_args(dir, port, "a1", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = std::time::Instant::now();
    let out = common::run_within(
        &mut common::agent_command(dir, "a1", &args),
        std::time::Duration::from_secs(20),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{} (the agent's state) is in use by `platter agent --coordinator",
            dir.join("a1.state").display()
        )) && stderr.contains(&format!("(pid {}, started ", first.child.id())),
        "{stderr}"
    );
    assert!(
        stderr.contains("give this agent a --state-dir of its own"),
        "{stderr}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert!(first.exited().is_none(), "the first agent is undisturbed");
    // Once the first is gone (kill -9 included), an agent takes the directory again.
    first.kill9();
    let mut again = common::agent(dir, port, "a1", &[]);
    let mine = format!("{}\n", again.child.id());
    common::wait_for(
        "the new agent to hold the lock",
        std::time::Duration::from_secs(20),
        || {
            let said = wait_for_lock(&dir.join("a1.state"));
            said.starts_with(&mine).then_some(())
        },
    );
    assert!(again.exited().is_none());
}
