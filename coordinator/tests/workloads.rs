//! Storage workloads end to end through `platter run`: the built-in fsync loop, fio and
//! bonnie++ (CI installs both; elsewhere a test whose tool the agent cannot find skips,
//! saying so), with their output parsed into samples.

mod common;

use assert_cmd::prelude::*;
use common::platter;
use predicates::prelude::*;

/// Runs `yaml` with `platter run --format json` in `dir` and returns the report.
fn run_json(dir: &std::path::Path, yaml: &str) -> serde_json::Value {
    let f = common::write(dir, "c.yaml", yaml);
    let out = platter()
        .current_dir(dir)
        .args(["run", "--format", "json"])
        .arg(&f)
        .assert()
        .success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

fn metric<'a>(cell: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    cell["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == name)
        .unwrap_or_else(|| panic!("no metric {name} in {cell}"))
}

fn db(dir: &std::path::Path) -> rusqlite::Connection {
    rusqlite::Connection::open(dir.join("platter-data/platter.db")).unwrap()
}

#[test]
fn fsync_workload_reports_latency_percentiles_and_stores_histograms() {
    let tmp = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
name: fsync-sizes
matrix:
  size: [1, 4K]
workload:
  fsync: {{ path: "{}/f-${{size}}.dat", size: "${{size}}", count: 200, sync: fdatasync }}
repeat: 2
"#,
        tmp.path().display()
    );
    let report = run_json(tmp.path(), &yaml);
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for cell in cells {
        let mean = metric(cell, "latency.mean")["median"].as_f64().unwrap();
        // `latency.p99` is over every operation of every run; each run's own is
        // `latency.p99 per run`.
        let p99 = cell["latency"]["p99"].as_f64().unwrap();
        let max = cell["latency"]["max"].as_f64().unwrap();
        assert!(mean > 0.0 && mean <= p99 && p99 <= max, "{cell}");
        assert_eq!(cell["latency"]["ops"], 400);
        let per_run = metric(cell, "latency.p99 per run")["max"].as_f64().unwrap();
        assert!(per_run <= max, "{cell}");
        assert_eq!(metric(cell, "ops")["median"], 200.0);
        assert_eq!(metric(cell, "latency.mean")["n"], 2);
    }
    // The preallocated file covers every write.
    assert_eq!(
        std::fs::metadata(tmp.path().join("f-4K.dat"))
            .unwrap()
            .len(),
        4096 * 200
    );

    // advance: write i lands at offset + i·size, so an unpreallocated file grows to the
    // whole range; without it every write rewrites the same bytes.
    let seq = tmp.path().join("seq");
    std::fs::create_dir(&seq).unwrap();
    let yaml = format!(
        "name: fsync-advance\nmatrix: {{ advance: [true, false] }}\nworkload:\n  fsync: {{ path: \"{}/f-${{advance}}.dat\", size: 4K, count: 10, offset: 1K, prealloc: false, advance: \"${{advance}}\" }}\nrepeat: 1\n",
        seq.display()
    );
    run_json(&seq, &yaml);
    assert_eq!(
        std::fs::metadata(seq.join("f-true.dat")).unwrap().len(),
        1024 + 4096 * 10
    );
    assert_eq!(
        std::fs::metadata(seq.join("f-false.dat")).unwrap().len(),
        1024 + 4096
    );
    // Every repetition's histogram is stored and holds every operation.
    let c = db(tmp.path());
    let mut stmt = c
        .prepare("SELECT histogram FROM sample_rows WHERE metric = 'latency'")
        .unwrap();
    let hists: Vec<Vec<u8>> = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(hists.len(), 4);
    for h in hists {
        let h = platter_agent::testing::deserialize_histogram(&h).unwrap();
        assert_eq!(h.len(), 200);
    }
}

#[test]
fn fio_workload_is_parsed_and_its_errors_fail_the_step() {
    if !common::tools_or_skip(&[("fio", "fio")]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
name: fio-write
workload:
  fio:
    directory: "{}"
    options: {{ rw: write, bs: 4k, size: 256k, ioengine: sync, fdatasync: 1 }}
repeat: 1
"#,
        tmp.path().display()
    );
    let report = run_json(tmp.path(), &yaml);
    let cell = &report["cells"][0];
    assert_eq!(metric(cell, "write.ios")["median"], 64.0);
    // fio 3.33 times every fdatasync but the first (64 writes give 63 sync latencies).
    let syncs = metric(cell, "sync.ios")["median"].as_f64().unwrap();
    assert!((63.0..=64.0).contains(&syncs), "{syncs}");
    assert!(metric(cell, "write.iops")["median"].as_f64().unwrap() > 0.0);
    assert!(metric(cell, "sync.lat.mean")["median"].as_f64().unwrap() > 0.0);

    let bad = common::write(
        tmp.path(),
        "bad.yaml",
        "name: fio-bad\nworkload: { fio: { directory: /nonexistent/dir, options: { rw: write, size: 1m } } }\nrepeat: 1\n",
    );
    platter()
        .current_dir(tmp.path())
        .arg("run")
        .arg(&bad)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("fio failed"));
}

#[test]
fn bonnie_workload_records_too_fast_fields_as_missing() {
    // `-r` holds bonnie++ to that much memory in a cgroup the agent makes (`memlimit`): as a
    // normal user the step fails, saying so.
    if !common::root_or_skip("bonnie++ -r runs in a memory cgroup the agent makes")
        || !common::tools_or_skip(&[("bonnie++", "bonnie++")])
    {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let yaml = format!(
        r#"
name: bonnie-small
workload:
  bonnie: {{ directory: "{}", args: "-s 64M -r 32M -n 1 -f" }}
repeat: 1
"#,
        tmp.path().display()
    );
    let report = run_json(tmp.path(), &yaml);
    let cell = &report["cells"][0];
    let reported: Vec<&str> = cell["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["metric"].as_str().unwrap())
        .collect();
    // -f skips the per-character tests entirely.
    assert!(!reported.contains(&"putc"));
    // On a small file in the page cache bonnie++ prints +++++ for some results: each
    // block test is either a number in the report or missing with the reason, never 0.
    let c = db(tmp.path());
    let missing: Vec<(String, String)> = c
        .prepare("SELECT metric, missing FROM samples WHERE missing IS NOT NULL AND value IS NULL")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for m in ["put_block", "rewrite", "get_block"] {
        let is_missing = missing
            .iter()
            .any(|(name, why)| name == m && why.contains("too fast"));
        let is_reported =
            reported.contains(&m) && metric(cell, m)["median"].as_f64().unwrap() > 0.0;
        assert!(
            is_missing != is_reported,
            "{m}: missing {is_missing}, reported {is_reported}"
        );
    }
    let zeros: i64 = c
        .query_row(
            "SELECT COUNT(*) FROM samples WHERE value = 0 AND unit = 'B/s'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(zeros, 0);
    assert!(reported.contains(&"seq_create.latency"));
}
