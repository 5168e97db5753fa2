//! A series over time (`platter history`): runs of one campaign name, each against the run
//! before it. Known answers: a workload made 10% slower from the fourth run on is flagged
//! at run 4 on every cell and nowhere else, with the kernel that changed under it named;
//! a series of noise only flags nothing; `--fail-on-regression` exits 4 while the latest
//! run regressed, JSON and CSV carry the same.

mod common;

use assert_cmd::Command;
use platter::planning::planner::{self, PlannedCampaign};
use platter::report::history::{Flag, History};
use platter::store::Store;
use platter_proto::model::{Record, RecordKind, Sample, StepEvent, StepKind, StepState};
use platter_proto::provenance::{DeviceFacts, HostFacts, MountFacts, Provenance, StorageFacts};

const SERIES: &str = r#"
name: nightly
hosts: { names: [h1] }
matrix:
  size: [1, 4096]
workload: { command: { run: "true ${size}" } }
repeat: 8
"#;

/// Eight repetitions a couple of percent around 1: the run-to-run noise of every run.
const SPREAD: [f64; 8] = [1.00, 0.98, 1.02, 0.99, 1.01, 1.00, 0.985, 1.015];

/// Stores run `generation` of the series as an agent would send it: accepted, what it ran
/// on (`kernel`), every measure step with its wall time (`scale` × the spread, shuffled by
/// `shift` so no two runs hold the same values), finished.
async fn run(
    store: &Store,
    generation: u32,
    scale: f64,
    kernel: &str,
    shift: usize,
) -> PlannedCampaign {
    run_of(SERIES, store, generation, scale, kernel, shift, "").await
}

/// What a run's host snapshot says beside its kernel: the drive's serial, the mount's
/// options ("" for neither).
#[derive(Clone, Copy)]
struct On<'a> {
    serial: &'a str,
    mount_options: &'a str,
}

impl<'a> From<&'a str> for On<'a> {
    /// A drive's serial alone.
    fn from(serial: &'a str) -> On<'a> {
        On {
            serial,
            mount_options: "",
        }
    }
}

/// `run` of the campaign file `yaml`.
async fn run_of(
    yaml: &str,
    store: &Store,
    generation: u32,
    scale: f64,
    kernel: &str,
    shift: usize,
    on: impl Into<On<'_>>,
) -> PlannedCampaign {
    let On {
        serial,
        mount_options,
    } = on.into();
    let campaign = platter::spec::parse("nightly.yaml", yaml).unwrap();
    let planned = planner::plan(&campaign, "", "seed", generation, &Default::default()).unwrap();
    store
        .insert_campaign(&planned, "nightly.yaml", yaml)
        .unwrap();
    for plan in &planned.plans {
        let mut records = vec![Record {
            seq: 1,
            kind: RecordKind::PlanAccepted {
                plan_id: plan.id.clone(),
            },
        }];
        records.push(Record {
            seq: 2,
            kind: RecordKind::Provenance {
                plan_id: plan.id.clone(),
                step_index: 0,
                facts: Box::new(Provenance {
                    trigger: "plan_start".into(),
                    host: Some(HostFacts {
                        agent_version: "0.1.0".into(),
                        kernel_release: kernel.into(),
                        cpu_model: "test cpu".into(),
                        cpu_count: 2,
                        ..Default::default()
                    }),
                    // The filesystem it measured on, when the run names its options.
                    storage: (!mount_options.is_empty()).then(|| StorageFacts {
                        mounts: vec![MountFacts {
                            mount_point: "/var/lib/platter/mnt/sdb".into(),
                            fs_type: "ext4".into(),
                            source: "/dev/sdb".into(),
                            options: mount_options.into(),
                            super_options: "rw".into(),
                        }],
                        mkfs_version: "mke2fs 1.47.0 (5-Feb-2023)".into(),
                        write_cache: "on".into(),
                    }),
                    // The drive under test, when the run names one.
                    devices: (!serial.is_empty())
                        .then(|| DeviceFacts {
                            device: serde_json::from_value(serde_json::json!({
                                "name": "sdb", "path": "/dev/sdb", "major_minor": "8:16",
                                "vendor": "", "model": "Samsung SSD 870", "serial": serial,
                                "firmware": "SVT02B6Q", "size_bytes": 500_000_000_000u64,
                                "rotational": false, "transport": "ata", "controller": [],
                                "pci_address": null, "by_id": [], "by_path": [],
                                "write_cache": "unknown", "write_cache_source": "",
                                "partitions": [], "mounted": [], "holders": [],
                                "holds_root": false, "backing_file": null,
                            }))
                            .unwrap(),
                            logical_block_size: 512,
                            physical_block_size: 4096,
                            scheduler: String::new(),
                        })
                        .into_iter()
                        .collect(),
                    ..Default::default()
                }),
            },
        });
        for step in &plan.steps {
            let measure = matches!(step.kind, StepKind::Measure(_));
            let value = scale * 0.05 * SPREAD[(step.repetition as usize + shift) % SPREAD.len()];
            records.push(Record {
                seq: records.len() as u64 + 1,
                kind: RecordKind::Step(StepEvent {
                    plan_id: plan.id.clone(),
                    kind: if measure { "measure" } else { "prepare" }.into(),
                    step_index: step.index,
                    cell_id: step.cell_id.clone(),
                    repetition: step.repetition,
                    attempt: 1,
                    state: StepState::Succeeded,
                    started_unix_ns: 1,
                    finished_unix_ns: 2,
                    exit_status: 0,
                    stderr_tail: String::new(),
                    error: String::new(),
                    samples: if measure {
                        vec![Sample {
                            metric: "wall".into(),
                            value,
                            unit: "s".into(),
                            histogram: vec![],
                            missing: String::new(),
                        }]
                    } else {
                        vec![]
                    },
                }),
            });
        }
        records.push(Record {
            seq: records.len() as u64 + 1,
            kind: RecordKind::PlanFinished {
                plan_id: plan.id.clone(),
                cancelled: false,
            },
        });
        store.write_records(&plan.host, records).await.unwrap();
    }
    planned
}

/// `platter history nightly --db DB ARGS…`: its exit status and what it printed.
fn history(args: &[&str]) -> (i32, String) {
    let (db, rest) = args.split_first().unwrap();
    let out = Command::cargo_bin("platter")
        .unwrap()
        .args(["history", "nightly", "--db", db])
        .args(rest)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    (out.status.code().unwrap_or(-1), stdout)
}

#[tokio::test]
async fn a_run_made_10_percent_slower_is_flagged_there_only_with_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let store = Store::open(&db).unwrap();
    let mut ids = Vec::new();
    for g in 1..=6u32 {
        // From the fourth run on: 10% slower, on a new kernel.
        let (scale, kernel) = if g >= 4 {
            (1.10, "6.12.1")
        } else {
            (1.0, "6.1.0")
        };
        ids.push(
            run(&store, g, scale, kernel, g as usize)
                .await
                .id
                .to_string(),
        );
    }
    let h = History::load(&store, "nightly", "wall", None, Some(3.0), None, None).unwrap();
    assert_eq!(h.runs.len(), 6, "{h:#?}");
    assert_eq!(h.lines.len(), 2, "one line per cell: {h:#?}");
    for line in &h.lines {
        assert_eq!(line.points.len(), 6);
        assert!(line.points[0].since_previous.is_none());
        for (i, p) in line.points.iter().enumerate().skip(1) {
            let s = p.since_previous.as_ref().unwrap();
            assert_eq!(s.baseline, ids[i - 1]);
            if i == 3 {
                assert_eq!(s.flag, Flag::Regression, "run 4 of {}: {s:#?}", line.cell);
                let (lo, hi) = s.ci_pct.unwrap();
                assert!(lo <= 10.0 && 10.0 <= hi && lo > 3.0, "{s:#?}");
                assert_eq!(s.changed, ["kernel: 6.1.0 → 6.12.1"], "{s:#?}");
            } else {
                assert_eq!(s.flag, Flag::None, "run {} of {}: {s:#?}", i + 1, line.cell);
            }
        }
    }
    // The last three runs only: run 4 is their first, against nothing.
    let window = History::load(&store, "nightly", "wall", None, Some(3.0), Some(3), None).unwrap();
    assert_eq!(window.runs.len(), 3);
    assert_eq!(window.runs[0].campaign_id, ids[3]);
    assert!(window.lines[0].points[0].since_previous.is_none());
    // The latest run (6) is not slower than run 5: nothing flagged now, exit 0 for CI.
    assert!(h.latest_flags().is_empty());
    let db = db.to_str().unwrap();
    let (code, table) = history(&[db, "--fail-on-regression"]);
    assert_eq!(code, 0, "{table}");
    assert_eq!(table.matches("  REGRESSION\n").count(), 2, "{table}");
    assert!(table.contains("changed: kernel: 6.1.0 → 6.12.1"), "{table}");
    // The series as a whole: a step at run 4 on each cell, told already by run 4's own flag.
    assert_eq!(
        table
            .matches("drift: step +10% at run 4 (p < 0.0001) REGRESSION")
            .count(),
        2,
        "{table}"
    );
    assert!(table.contains("latest run"), "{table}");

    // `platter report RUN --fail-on-regression` judges that run against the one before.
    let report = |id: &str| {
        Command::cargo_bin("platter")
            .unwrap()
            .args(["report", id, "--db", db, "--fail-on-regression"])
            .output()
            .unwrap()
    };
    let fourth = report(&ids[3]);
    let said = String::from_utf8_lossy(&fourth.stderr);
    assert_eq!(fourth.status.code(), Some(4), "{said}");
    assert_eq!(said.matches("REGRESSION").count(), 2, "{said}");
    assert!(said.contains("kernel: 6.1.0 → 6.12.1"), "{said}");
    assert!(!fourth.stdout.is_empty(), "the report is printed too");
    let fifth = report(&ids[4]);
    let said = String::from_utf8_lossy(&fifth.stderr);
    assert_eq!(fifth.status.code(), Some(0), "{said}");
    assert!(
        said.contains(&format!(
            "since the run before ({}), on wall: nothing flagged",
            ids[3]
        )),
        "{said}"
    );
    let first = report(&ids[0]);
    assert_eq!(first.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&first.stderr).contains("is the first run of nightly"));

    // A seventh run, 10% slower again: the latest run regressed, and CI hears it.
    run(&store, 7, 1.21, "6.12.1", 0).await;
    let (code, table) = history(&[db, "--fail-on-regression"]);
    assert_eq!(code, 4, "{table}");
    assert!(
        table.contains("nothing recorded changed on this host between the two runs"),
        "{table}"
    );
    // JSON and CSV say the same.
    let (_, json) = history(&[db, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let flags: Vec<&str> = v["lines"][0]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["since_previous"]["flag"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(
        flags,
        [
            "-",
            "none",
            "none",
            "regression",
            "none",
            "none",
            "regression"
        ]
    );
    // One cell only; a cell nobody ran is said so.
    let (code, one) = history(&[db, "--cell", "size=4096"]);
    assert_eq!(code, 0, "{one}");
    assert!(
        one.contains("size=4096") && !one.contains("size=1 "),
        "{one}"
    );
    let (code, _) = history(&[db, "--cell", "size=7"]);
    assert_eq!(code, 2);
    let (_, csv) = history(&[db, "--format", "csv"]);
    assert_eq!(csv.lines().count(), 1 + 2 * 7, "{csv}");
    assert_eq!(csv.matches(",regression,").count(), 4, "{csv}");
    // A series nobody ran is said so.
    Command::cargo_bin("platter")
        .unwrap()
        .args(["history", "weekly", "--db", db])
        .assert()
        .failure()
        .stderr(predicates::str::contains("no series \"weekly\""));
    // A mistyped store is refused, not made into a new, empty one.
    let typo = dir.path().join("typo.db");
    Command::cargo_bin("platter")
        .unwrap()
        .args(["history", "nightly", "--db", typo.to_str().unwrap()])
        .assert()
        .failure()
        .stderr(predicates::str::contains("no store at"));
    assert!(!typo.exists());
}

#[tokio::test]
async fn a_series_of_noise_only_flags_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("p.db")).unwrap();
    for g in 1..=20u32 {
        // The same noise, in a different order each run, and ±1% of drift.
        let drift = 1.0 + 0.01 * ((g % 3) as f64 - 1.0);
        run(&store, g, drift, "6.1.0", (g * 3) as usize).await;
    }
    let h = History::load(&store, "nightly", "wall", None, Some(3.0), None, None).unwrap();
    assert_eq!(h.runs.len(), 20);
    let flagged: Vec<_> = h
        .lines
        .iter()
        .flat_map(|l| l.points.iter())
        .filter(|p| {
            p.since_previous
                .as_ref()
                .is_some_and(|s| s.flag != Flag::None)
        })
        .collect();
    assert!(flagged.is_empty(), "{flagged:#?}");
}

/// The console's page of a series: a chart and a table per cell, the regression marked
/// with what changed, the campaign's page linking to it; its JSON twin says the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_a_series_with_its_flags() {
    use common::web::{add_user, call, http_addr, sign_in};
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let mut last = String::new();
    {
        let store = Store::open(&dir.join("coordinator.db")).unwrap();
        for g in 1..=4u32 {
            let (scale, kernel) = if g >= 4 {
                (1.10, "6.12.1")
            } else {
                (1.0, "6.1.0")
            };
            last = run(&store, g, scale, kernel, g as usize)
                .await
                .id
                .to_string();
        }
    }
    let (mut coordinator, _port) = common::serve_with(dir, &["--http", "127.0.0.1:0"]);
    let http = http_addr(dir);
    add_user(dir, "vera", "viewer", "vera's long password");
    let vera = sign_in(&http, "vera", "vera's long password");
    let cookie = [("Cookie", vera.cookie.as_str())];
    let page = call(&http, "GET", "/series/nightly", &cookie, "");
    assert_eq!(page.status, 200, "{page:?}");
    assert_eq!(
        page.body.matches("<figure class=\"trend\"").count(),
        2,
        "{}",
        page.body
    );
    assert_eq!(
        page.body.matches("class=\"flagged\"").count(),
        2,
        "{}",
        page.body
    );
    // The charts (the report's dot plot) ring the flagged runs, a regression in red.
    assert_eq!(page.body.matches(" r=\"7\"").count(), 2, "{}", page.body);
    assert!(page.body.contains("fill=\"#D62728\""), "{}", page.body);
    assert!(
        page.body.contains("kernel: 6.1.0 → 6.12.1"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("<span class=\"fail\">regression</span>"),
        "{}",
        page.body
    );
    let campaign = call(&http, "GET", &format!("/campaigns/{last}"), &cookie, "");
    assert!(
        campaign.body.contains("href=\"/series/nightly\""),
        "{}",
        campaign.body
    );
    let json = call(&http, "GET", "/api/v1/series/nightly", &cookie, "");
    assert_eq!(json.status, 200, "{json:?}");
    let v: serde_json::Value = serde_json::from_str(&json.body).unwrap();
    assert_eq!(v["runs"].as_array().unwrap().len(), 4);
    assert_eq!(
        v["lines"][0]["points"][3]["since_previous"]["flag"],
        "regression"
    );
    // The overview lists the latest run's flags first.
    let overview = call(&http, "GET", "/", &cookie, "");
    let flagged = overview
        .body
        .split("<table id=\"flagged\">")
        .nth(1)
        .and_then(|t| t.split("</table>").next())
        .unwrap_or_else(|| panic!("no flagged results: {}", overview.body));
    assert_eq!(flagged.matches("<tr><td>").count(), 2, "{flagged}");
    assert!(
        flagged.contains("Regression (wall)") && flagged.contains("kernel: 6.1.0 → 6.12.1"),
        "{flagged}"
    );
    assert!(
        overview.body.find("Flagged results") < overview.body.find("Needing attention"),
        "{}",
        overview.body
    );
    let api = call(&http, "GET", "/api/v1/overview", &cookie, "");
    let v: serde_json::Value = serde_json::from_str(&api.body).unwrap();
    assert_eq!(v["flagged"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["flagged"][0]["flag"], "regression", "{v}");
    let none = call(&http, "GET", "/series/weekly", &cookie, "");
    assert_eq!(none.status, 404, "{none:?}");
    // Each run's mark beside what it is read from: the recent runs' 95% and 99% intervals
    // on the page, and on `platter history` from the coordinator as from the store itself.
    assert!(
        page.body.contains("(95%), [") && page.body.contains("(99%) vs the last 2 runs"),
        "{}",
        page.body
    );
    let from_coordinator =
        common::run_ok(common::operator(dir, _port).args(["history", "nightly"]));
    let from_store = common::run_ok(
        common::platter()
            .args(["history", "nightly", "--db"])
            .arg(dir.join("coordinator.db")),
    );
    let text = String::from_utf8(from_store.stdout).unwrap();
    assert!(text.contains("(99%) vs the last 2 runs' level"), "{text}");
    assert_eq!(String::from_utf8(from_coordinator.stdout).unwrap(), text);
    coordinator.kill9();
}

/// Campaigns of different names with one `series:` are one series; its `track:` threshold
/// is the one a flag must pass unless the reader asks for another.
#[tokio::test]
async fn a_series_key_joins_runs_and_its_track_threshold_decides_the_flags() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("p.db")).unwrap();
    for g in 1..=4u32 {
        // Two files (an older name, then a new one), one series; run 4 10% slower.
        let yaml = SERIES.replace(
            "name: nightly\n",
            if g <= 2 {
                "name: fsync-rc66\nseries: fleet-fsync\ntrack: { threshold: 20% }\n"
            } else {
                "name: fsync-rc66-v2\nseries: fleet-fsync\ntrack: { threshold: 20% }\n"
            },
        );
        let scale = if g == 4 { 1.10 } else { 1.0 };
        run_of(&yaml, &store, g, scale, "6.1.0", g as usize, "").await;
    }
    let tracked = History::load(&store, "fleet-fsync", "wall", None, None, None, None).unwrap();
    assert_eq!(tracked.runs.len(), 4, "{tracked:#?}");
    assert_eq!(tracked.threshold_pct, 20.0);
    assert!(
        tracked.latest_flags().is_empty(),
        "10% is within ±20%: {tracked:#?}"
    );
    let strict = History::load(&store, "fleet-fsync", "wall", None, Some(3.0), None, None).unwrap();
    assert_eq!(strict.latest_flags().len(), 2, "{strict:#?}");
    // The campaign's own name is no series of its own.
    let by_name = History::load(&store, "fsync-rc66", "wall", None, None, None, None).unwrap();
    assert!(by_name.runs.is_empty(), "{by_name:#?}");
}

/// A run on another physical drive (same path, another serial) is not compared with the
/// run before: it says so, and flags nothing however much slower it is.
#[tokio::test]
async fn a_run_on_another_drive_is_not_compared_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("p.db")).unwrap();
    run_of(SERIES, &store, 1, 1.0, "6.1.0", 1, "S1").await;
    run_of(SERIES, &store, 2, 1.0, "6.1.0", 2, "S1").await;
    run_of(SERIES, &store, 3, 1.5, "6.1.0", 3, "S2").await;
    let h = History::load(&store, "nightly", "wall", None, None, None, None).unwrap();
    assert!(h.latest_flags().is_empty(), "{h:#?}");
    for line in &h.lines {
        let second = line.points[1].since_previous.as_ref().unwrap();
        assert!(second.not_compared.is_none(), "{second:#?}");
        let s = line.points[2].since_previous.as_ref().unwrap();
        assert_eq!(
            s.shift_text(),
            "not compared: another drive at /dev/sdb: serial S1 → S2"
        );
        assert_eq!(s.flag, Flag::None);
    }
    let (code, table) = history(&[dir.path().join("p.db").to_str().unwrap()]);
    assert_eq!(code, 0, "{table}");
    assert!(
        table.contains("not compared: another drive at /dev/sdb: serial S1 → S2"),
        "{table}"
    );
}

/// A run's report carries "since the last run": each cell against the series' run before
/// it, in the terminal's table, markdown, JSON and the HTML page alike; the first run of a
/// series has no such section.
#[tokio::test]
async fn a_runs_report_says_what_moved_since_the_last_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let store = Store::open(&db).unwrap();
    let first = run(&store, 1, 1.0, "6.1.0", 1).await.id.to_string();
    // 30% slower: with one run before it, a line's run-to-run spread is the prior's (1.5%),
    // and 10% is within what that allows at 99%.
    let second = run(&store, 2, 1.30, "6.12.1", 2).await.id.to_string();
    let report = |id: &str, format: &str| {
        let out = Command::cargo_bin("platter")
            .unwrap()
            .args([
                "report",
                id,
                "--db",
                db.to_str().unwrap(),
                "--format",
                format,
            ])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let table = report(&second, "table");
    let title = format!("since the last run of series nightly ({first}): wall, flagged beyond ±3%: 2 flagged, 2 regression(s)");
    assert!(table.contains(&title), "{table}");
    assert!(
        table.contains("h1 size=4096: +")
            && table.contains("REGRESSION; changed: kernel: 6.1.0 → 6.12.1"),
        "{table}"
    );
    let md = report(&second, "markdown");
    assert!(md.contains(&title), "{md}");
    let json: serde_json::Value = serde_json::from_str(&report(&second, "json")).unwrap();
    let lines = json["since_last_run"]["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 2, "{json}");
    assert_eq!(lines[0]["since"]["flag"], "regression");
    let html = report(&second, "html");
    assert!(
        html.contains("<section id=\"since\"><h2>Since the last run</h2>"),
        "{html}"
    );
    assert!(html.contains("<td>REGRESSION</td>"), "{html}");
    // The first run has nothing before it.
    assert!(!report(&first, "table").contains("since the last run"));
    assert!(report(&first, "json").find("since_last_run").is_none());
}

/// `track: { against: last-3 }`: each run faces the last three pooled, a narrower interval
/// than the run before alone, and says so.
#[tokio::test]
async fn a_baseline_of_the_last_runs_pooled_narrows_the_interval_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("p.db")).unwrap();
    let pooled = SERIES.replace(
        "name: nightly\n",
        "name: nightly\ntrack: { against: last-3 }\n",
    );
    for g in 1..=4u32 {
        let scale = if g == 4 { 1.10 } else { 1.0 };
        run_of(&pooled, &store, g, scale, "6.1.0", g as usize, "").await;
    }
    let h = History::load(&store, "nightly", "wall", None, None, None, None).unwrap();
    let plain = SERIES.to_string();
    let dir2 = tempfile::tempdir().unwrap();
    let store2 = Store::open(&dir2.path().join("p.db")).unwrap();
    for g in 1..=4u32 {
        let scale = if g == 4 { 1.10 } else { 1.0 };
        run_of(&plain, &store2, g, scale, "6.1.0", g as usize, "").await;
    }
    let one = History::load(&store2, "nightly", "wall", None, None, None, None).unwrap();
    for (line, single) in h.lines.iter().zip(&one.lines) {
        let s = line.points[3].since_previous.as_ref().unwrap();
        assert_eq!(s.pooled.len(), 3, "{s:#?}");
        assert_eq!(s.flag, Flag::Regression, "{s:#?}");
        assert!(
            s.shift_text().ends_with(" vs the last 3 runs pooled"),
            "{}",
            s.shift_text()
        );
        let width = |s: &platter::report::history::Since| {
            let (lo, hi) = s.ci_pct.unwrap();
            hi - lo
        };
        let alone = single.points[3].since_previous.as_ref().unwrap();
        assert!(alone.pooled.is_empty());
        assert!(
            width(s) < width(alone),
            "{} vs {}",
            s.shift_text(),
            alone.shift_text()
        );
        // The second run has only the first before it: nothing to pool.
        assert!(line.points[1]
            .since_previous
            .as_ref()
            .unwrap()
            .pooled
            .is_empty());
    }
}

/// A mount option changed between two runs is named in the flag it explains.
#[tokio::test]
async fn a_changed_mount_option_is_named_in_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("p.db")).unwrap();
    for (g, options, scale) in [
        (1, "rw,noatime", 1.0),
        (2, "rw,noatime", 1.0),
        (3, "rw,relatime,sync", 1.3),
    ] {
        let on = On {
            serial: "",
            mount_options: options,
        };
        run_of(SERIES, &store, g, scale, "6.1.0", g as usize, on).await;
    }
    let h = History::load(&store, "nightly", "wall", None, None, None, None).unwrap();
    let flags = h.latest_flags();
    assert_eq!(flags.len(), 2, "{h:#?}");
    for (_, p) in flags {
        let s = p.since_previous.as_ref().unwrap();
        assert_eq!(s.flag, Flag::Regression);
        assert_eq!(
            s.changed,
            ["mount /var/lib/platter/mnt/sdb: ext4 rw,noatime (rw) → ext4 rw,relatime,sync (rw)"],
            "{s:#?}"
        );
    }
    // Nothing changed between the first two: said so, not left blank.
    let s = h.lines[0].points[1].since_previous.as_ref().unwrap();
    assert_eq!(s.changed_text(), "nothing recorded");
}

/// The issue's creeping regression through the store: 15 runs, each 1.2% slower than the one
/// before (21.09 → 24.76 ms over the series), every shift under the 3% threshold. Nothing is
/// flagged run to run; the series as a whole is a ramp of +17% over runs 1–15, which
/// `platter history` shows and `--fail-on-regression` fails on, in JSON and CSV too.
#[tokio::test]
async fn a_creeping_regression_is_flagged_as_a_ramp_and_fails_ci() {
    use platter::report::history::DriftKind;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let store = Store::open(&db).unwrap();
    let ratio = (24.76f64 / 21.09).powf(1.0 / 14.0);
    let mut ids = Vec::new();
    for g in 1..=15u32 {
        let scale = ratio.powi(g as i32 - 1);
        ids.push(
            run(&store, g, scale, "6.1.0", g as usize)
                .await
                .id
                .to_string(),
        );
    }
    let h = History::load(&store, "nightly", "wall", None, None, None, None).unwrap();
    assert!(h.latest_flags().is_empty(), "{h:#?}");
    assert!(
        h.lines.iter().flat_map(|l| &l.points).all(|p| p
            .since_previous
            .as_ref()
            .is_none_or(|s| s.flag == Flag::None)),
        "no run-to-run flag: {h:#?}"
    );
    let drift = h.drift_flags();
    assert_eq!(drift.len(), 2, "one ramp a cell: {h:#?}");
    for (_, d) in &drift {
        assert_eq!(
            (d.kind, d.flag),
            (DriftKind::Ramp, Flag::Regression),
            "{d:#?}"
        );
        assert_eq!(d.text(), "+17% over runs 1–15, 1.2% a run");
        assert_eq!((&d.first_campaign, &d.last_campaign), (&ids[0], &ids[14]));
    }
    assert_eq!(h.latest_drift_flags().len(), 2);
    let db = db.to_str().unwrap();
    let (code, table) = history(&[db, "--fail-on-regression"]);
    assert_eq!(code, 4, "{table}");
    assert!(
        table.contains("drift: ramp +17% over runs 1–15, 1.2% a run")
            && table.contains("REGRESSION"),
        "{table}"
    );
    assert!(
        table.contains("the series as a whole: 2 drift flag(s)"),
        "{table}"
    );
    assert!(
        table.contains(": 2 step(s) it brought or ramp(s) still climbing"),
        "{table}"
    );
    let (_, json) = history(&[db, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["lines"][0]["drift"][0]["kind"], "ramp", "{v}");
    assert_eq!(v["lines"][0]["drift"][0]["flag"], "regression", "{v}");
    assert_eq!(v["lines"][0]["drift"][0]["first_run"], 1, "{v}");
    assert_eq!(v["lines"][0]["drift"][0]["last_run"], 15, "{v}");
    let (_, csv) = history(&[db, "--format", "csv"]);
    assert_eq!(csv.matches("ramp +17% over runs 1–15").count(), 2, "{csv}");
    // A window of the last five runs shows too little to call it (a ramp needs six).
    let (code, window) = history(&[db, "--last", "5", "--fail-on-regression"]);
    assert_eq!(code, 0, "{window}");
    assert!(!window.contains("drift:"), "{window}");

    // As a coordinator raises each run's flags when it is done: one drift flag a cell,
    // brought up to date run after run (a ramp's start is estimated anew each time), never
    // a run-to-run regression.
    for id in &ids {
        let (raised, fixed) = platter::report::flags::of_campaign(&store, id).unwrap();
        store.raise_flags(Some(id), &raised, &fixed).unwrap();
    }
    let flags = store
        .flags(&platter::store::flags::FlagFilter::default())
        .unwrap();
    assert_eq!(flags.len(), 2, "{flags:#?}");
    for f in &flags {
        assert_eq!(f.kind, platter::store::flags::FlagKind::Drift);
        assert_eq!(f.state, platter::store::flags::FlagState::Open);
        assert!(
            f.summary.starts_with("DRIFT nightly on ")
                && f.summary
                    .contains(": wall +17% over runs 1–15, 1.2% a run from "),
            "{}",
            f.summary
        );
        assert_eq!(f.campaign_id, ids[14]);
        assert_eq!(f.link, "/series/nightly");
    }
}
