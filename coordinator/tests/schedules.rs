//! Schedules as an operator uses them (issue 30): `platter schedule add FILE --every …`
//! against `platter serve`, triggers from the CLI and over HTTP, the `skip` and `queue`
//! policies, catch-up after downtime, and each slot fired exactly once by two
//! coordinators on one PostgreSQL store while they are killed and restarted.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::web::*;
use common::*;

/// A run that ends at once on host `host`.
fn quick(dir: &Path, name: &str, host: &str, run: &str) -> std::path::PathBuf {
    write(
        dir,
        &format!("{name}.yaml"),
        &format!(
            "name: {name}\nhosts: {{ names: [{host}] }}\nworkload: {{ command: {{ run: \"{run}\" }} }}\nrepeat: 1\n"
        ),
    )
}

/// A firing as the store keeps it.
#[derive(Debug, Clone)]
struct Firing {
    slot: i64,
    fired: i64,
    coordinator: String,
    outcome: String,
    campaign: Option<String>,
    labels: BTreeMap<String, String>,
    note: String,
}

fn firings(dir: &Path, schedule: &str) -> Vec<Firing> {
    let c = db(dir);
    let mut q = c
        .prepare(
            "SELECT slot_unix_ms, fired_unix_ms, coordinator, outcome, campaign_id, labels, note
               FROM schedule_firings WHERE schedule = ?1 ORDER BY slot_unix_ms",
        )
        .unwrap();
    q.query_map([schedule], |r| {
        Ok(Firing {
            slot: r.get(0)?,
            fired: r.get(1)?,
            coordinator: r.get(2)?,
            outcome: r.get(3)?,
            campaign: r.get(4)?,
            labels: serde_json::from_str(&r.get::<_, String>(5)?).unwrap(),
            note: r.get(6)?,
        })
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn schedule_cmd(dir: &Path, port: u16, args: &[&str]) -> std::process::Output {
    run_ok(operator(dir, port).arg("schedule").args(args))
}

/// The slots are consecutive on the schedule's grid: `step` apart, none missing.
fn consecutive(f: &[Firing], step: i64) {
    for w in f.windows(2) {
        assert_eq!(
            w[1].slot - w[0].slot,
            step,
            "a slot missed or doubled: {f:#?}"
        );
    }
}

#[test]
fn every_two_seconds_for_a_minute_fires_thirty_runs_each_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (mut coordinator, port) = serve(dir);
    let _agent = agent(dir, port, "h1", &[]);
    wait_agents(dir, 1);
    let file = quick(dir, "tick", "h1", "true");
    let out = schedule_cmd(
        dir,
        port,
        &[
            "add",
            file.to_str().unwrap(),
            "--every",
            "2s",
            "--policy",
            "queue",
        ],
    );
    let added = Instant::now();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "tick");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("schedule tick added: series tick, fires every 2s, first at"),
        "{said}"
    );

    std::thread::sleep(Duration::from_secs(60).saturating_sub(added.elapsed()));
    schedule_cmd(dir, port, &["pause", "tick"]);
    let f = firings(dir, "tick");
    eprintln!("{} firings in 60 s, slots 2 s apart, none twice", f.len());
    assert!(
        (29..=31).contains(&f.len()),
        "{} firings in 60 s: {f:#?}",
        f.len()
    );
    consecutive(&f, 2_000);
    assert!(
        f.iter()
            .all(|f| f.outcome == "submitted" && f.note.is_empty()),
        "{f:#?}"
    );
    // Each firing is late by at most a tick or so, and its run is its own.
    for x in &f {
        assert!(
            x.fired - x.slot < 1_500,
            "fired {} ms late: {x:?}",
            x.fired - x.slot
        );
        assert_eq!(x.labels["fired_by"], "schedule");
        assert!(x.coordinator.ends_with(&format!(":{port}")), "{x:?}");
    }
    let runs: std::collections::BTreeSet<_> =
        f.iter().map(|f| f.campaign.clone().unwrap()).collect();
    assert_eq!(runs.len(), f.len(), "one run per firing");
    assert_eq!(
        query_i64(dir, "SELECT COUNT(*) FROM campaigns WHERE series = 'tick'"),
        f.len() as i64,
        "no run without its firing"
    );

    // Every run ends, and `platter history` lines them up.
    wait_for("every run to end", Duration::from_secs(60), || {
        (query_i64(dir, "SELECT COUNT(*) FROM campaigns WHERE state != 'done'") == 0).then_some(())
    });
    let show = operator_json(dir, port, &["schedule", "show", "tick", "--format", "json"]);
    assert_eq!(show["firings"]["submitted"], f.len() as u64, "{show}");
    assert_eq!(show["paused"], true, "{show}");
    let list = String::from_utf8(schedule_cmd(dir, port, &["list"]).stdout).unwrap();
    assert!(
        list.contains("tick") && list.contains("every 2s") && list.contains("paused"),
        "{list}"
    );
    // `platter history` asks the coordinator when no store is given; each run carries its
    // firing's labels. One repetition a run allows no interval: nothing is judged.
    let asked = operator_json(dir, port, &["history", "tick", "--format", "json"]);
    let runs = asked["runs"].as_array().unwrap();
    assert_eq!(runs.len(), f.len(), "{asked}");
    assert!(
        runs.iter().all(|r| r["labels"]["fired_by"] == "schedule"),
        "{asked}"
    );
    let last = f.last().unwrap().campaign.clone().unwrap();
    let out = run_ok(operator(dir, port).args(["report", &last, "--fail-on-regression"]));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("since the run before (") && said.contains("nothing flagged"),
        "{said}"
    );
    coordinator.kill9();
    let history = run_ok(platter().current_dir(dir).args([
        "history",
        "tick",
        "--db",
        dir.join("coordinator.db").to_str().unwrap(),
        "--format",
        "json",
    ]));
    let h: serde_json::Value = serde_json::from_slice(&history.stdout).unwrap();
    assert_eq!(h["runs"].as_array().unwrap().len(), f.len(), "{h}");
}

#[test]
fn a_firing_while_the_series_runs_is_skipped_or_queued_as_its_policy_says() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve(dir);
    let _h1 = agent(dir, port, "h1", &[]);
    let _h2 = agent(dir, port, "h2", &[]);
    wait_agents(dir, 2);
    // Each run takes 2.5 s; the schedules fire every second.
    let skipping = quick(dir, "skipping", "h1", "sleep 2.5");
    let queueing = quick(dir, "queueing", "h2", "sleep 2.5");
    schedule_cmd(
        dir,
        port,
        &["add", skipping.to_str().unwrap(), "--every", "1s"],
    );
    schedule_cmd(
        dir,
        port,
        &[
            "add",
            queueing.to_str().unwrap(),
            "--every",
            "1s",
            "--policy",
            "queue",
        ],
    );
    std::thread::sleep(Duration::from_millis(6_500));
    schedule_cmd(dir, port, &["pause", "skipping"]);
    schedule_cmd(dir, port, &["pause", "queueing"]);

    let skip = firings(dir, "skipping");
    consecutive(&skip, 1_000);
    let submitted: Vec<_> = skip.iter().filter(|f| f.outcome == "submitted").collect();
    let skipped: Vec<_> = skip.iter().filter(|f| f.outcome == "skipped").collect();
    assert!(submitted.len() >= 2 && skipped.len() >= 3, "{skip:#?}");
    assert_eq!(submitted.len() + skipped.len(), skip.len(), "{skip:#?}");
    for s in &skipped {
        assert!(s.campaign.is_none(), "{s:?}");
        assert!(
            s.note.starts_with("skipped: the series' run ")
                && s.note.ends_with("was still running (policy skip)"),
            "{s:?}"
        );
    }
    assert_eq!(
        query_i64(
            dir,
            "SELECT COUNT(*) FROM campaigns WHERE series = 'skipping'"
        ),
        submitted.len() as i64
    );

    let queue = firings(dir, "queueing");
    consecutive(&queue, 1_000);
    assert!(queue.len() >= 5, "{queue:#?}");
    assert!(queue.iter().all(|f| f.outcome == "submitted"), "{queue:#?}");
    assert!(
        queue[1..]
            .iter()
            .all(|f| f.note.starts_with("queued behind the series' run ")),
        "{queue:#?}"
    );
    assert_eq!(
        query_i64(
            dir,
            "SELECT COUNT(*) FROM campaigns WHERE series = 'queueing'"
        ),
        queue.len() as i64
    );
    let show = String::from_utf8(schedule_cmd(dir, port, &["show", "skipping"]).stdout).unwrap();
    assert!(
        show.contains("skipped") && show.contains("was still running (policy skip)"),
        "{show}"
    );
}

#[test]
fn slots_missed_while_no_coordinator_ran_fire_once_at_start_up() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (mut coordinator, port) = serve(dir);
    let _agent = agent(dir, port, "h1", &[]);
    wait_agents(dir, 1);
    let file = quick(dir, "nightly", "h1", "true");
    schedule_cmd(
        dir,
        port,
        &[
            "add",
            file.to_str().unwrap(),
            "--every",
            "1s",
            "--policy",
            "queue",
        ],
    );
    wait_for("two firings", Duration::from_secs(10), || {
        (firings(dir, "nightly").len() >= 2).then_some(())
    });
    coordinator.kill9();
    let down = firings(dir, "nightly").len();
    std::thread::sleep(Duration::from_secs(5));
    let _again = serve_again(dir, port);
    std::thread::sleep(Duration::from_millis(2_500));
    schedule_cmd(dir, port, &["pause", "nightly"]);

    let f = firings(dir, "nightly");
    let gaps: Vec<_> = f
        .windows(2)
        .filter(|w| w[1].slot - w[0].slot != 1_000)
        .collect();
    assert_eq!(gaps.len(), 1, "one gap, the downtime: {f:#?}");
    // The slot due when the coordinator died fired once, late, its note counting the
    // slots it stands for; none of those fired on its own.
    let late = &gaps[0][0];
    assert_eq!(late.slot, f[down].slot, "{f:#?}");
    assert!(late.fired - late.slot >= 4_000, "{late:?}");
    assert!(
        late.note.starts_with("late by ")
            && late.note.contains("and the ")
            && late
                .note
                .contains(" after it that fell while no coordinator fired"),
        "{late:?}"
    );
    assert!(gaps[0][1].slot - late.slot >= 5_000, "{f:#?}");
    assert_eq!(
        f.iter().filter(|f| f.note.starts_with("late by")).count(),
        1,
        "{f:#?}"
    );
}

#[test]
fn triggers_fire_from_the_cli_and_over_https_with_their_labels() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve_with(dir, &["--http", "127.0.0.1:0"]);
    let _agent = agent(dir, port, "h1", &[]);
    wait_agents(dir, 1);
    let file = quick(dir, "kernel-qual", "h1", "true");
    schedule_cmd(
        dir,
        port,
        &[
            "add",
            file.to_str().unwrap(),
            "--on-trigger",
            "kernel-update",
            "--policy",
            "queue",
        ],
    );

    let out = run_ok(operator(dir, port).args([
        "trigger",
        "kernel-update",
        "--label",
        "kernel=6.12.1",
        "--label",
        "commit=abc123",
    ]));
    let run = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(!run.is_empty());
    let f = firings(dir, "kernel-qual");
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].campaign.as_deref(), Some(run.as_str()));
    assert_eq!(f[0].labels["kernel"], "6.12.1");
    assert_eq!(f[0].labels["commit"], "abc123");
    assert_eq!(f[0].labels["fired_by"], "trigger kernel-update");

    // A CI system without the CLI: an operator's API token.
    let http = http_addr(dir);
    add_user(dir, "ci", "operator", "correct horse battery");
    add_user(dir, "eve", "viewer", "correct horse battery");
    let token = |user: &str| {
        let db = dir.join("coordinator.db");
        let out = run_ok(platter().args([
            "tokens",
            "add",
            "--user",
            user,
            "--label",
            "ci",
            "--db",
            db.to_str().unwrap(),
        ]));
        format!("Bearer {}", String::from_utf8(out.stdout).unwrap().trim())
    };
    let (ci, eve) = (token("ci"), token("eve"));
    let pulled = call(
        &http,
        "POST",
        "/api/v1/triggers/kernel-update",
        &[("Authorization", &ci), ("Content-Type", "application/json")],
        r#"{"labels": {"commit": "def456"}}"#,
    );
    assert_eq!(pulled.status, 200, "{pulled:?}");
    let v: serde_json::Value = serde_json::from_str(&pulled.body).unwrap();
    assert_eq!(v["fired"][0]["labels"]["commit"], "def456", "{v}");
    assert_eq!(v["fired"][0]["outcome"], "submitted", "{v}");
    let viewer = call(
        &http,
        "POST",
        "/api/v1/triggers/kernel-update",
        &[("Authorization", &eve)],
        "",
    );
    assert_eq!(viewer.status, 403, "{viewer:?}");
    let nothing = call(
        &http,
        "POST",
        "/api/v1/triggers/no-such",
        &[("Authorization", &ci)],
        "",
    );
    assert_eq!(nothing.status, 404, "{nothing:?}");
    assert!(nothing.body.contains("fires no schedule"), "{nothing:?}");
    let garbled = call(
        &http,
        "POST",
        "/api/v1/triggers/kernel-update",
        &[("Authorization", &ci)],
        "{labels",
    );
    assert_eq!(garbled.status, 400, "{garbled:?}");
    assert_eq!(firings(dir, "kernel-qual").len(), 2);

    // Paused, a trigger fires nothing and says why; the CLI's unknown trigger exits 2.
    schedule_cmd(dir, port, &["pause", "kernel-qual"]);
    let out = run_ok(operator(dir, port).args(["trigger", "kernel-update", "--format", "json"]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["fired"].as_array().unwrap().len(), 0, "{v}");
    assert!(
        v["not_fired"][0].as_str().unwrap().contains("paused"),
        "{v}"
    );
    let out = operator(dir, port)
        .args(["trigger", "no-such"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("fires no schedule"));
    assert_eq!(firings(dir, "kernel-qual").len(), 2);
}

#[test]
fn a_trigger_whose_run_could_not_be_planned_exits_1_saying_why() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve_with(dir, &[]);
    let _agent = agent(dir, port, "h1", &[]);
    wait_agents(dir, 1);
    // No agent has the label: the run cannot be planned when the trigger fires it.
    let file = write(
        dir,
        "nowhere.yaml",
        "name: nowhere\nhosts: { labels: { rack: nowhere } }\nworkload: { command: { run: \"true\" } }\nrepeat: 1\n",
    );
    schedule_cmd(
        dir,
        port,
        &["add", file.to_str().unwrap(), "--on-trigger", "t"],
    );
    let out = operator(dir, port).args(["trigger", "t"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("schedule nowhere: failed"), "{err}");
    assert!(out.stdout.is_empty(), "no run to print");
    let f = firings(dir, "nowhere");
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].outcome, "failed", "{f:#?}");
}

#[test]
fn bad_schedules_are_refused_with_what_to_write() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve(dir);
    let file = quick(dir, "good", "h1", "true");
    let bad = write(
        dir,
        "bad.yaml",
        "name: bad\nworkload: { comand: { run: x } }\n",
    );
    let refused = |args: &[&str], words: &str| {
        let out = operator(dir, port)
            .arg("schedule")
            .args(args)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        assert!(said.contains(words), "{args:?}: {said}");
    };
    let good = file.to_str().unwrap();
    refused(
        &["add", bad.to_str().unwrap(), "--every", "1h"],
        "bad.yaml:2:",
    );
    refused(&["add", good, "--every", "daily"], "`24h`");
    refused(
        &["add", good, "--cron", "0 25 * * *"],
        "--cron \"0 25 * * *\"",
    );
    refused(
        &["add", good],
        "--every 24h, --cron \"0 2 * * *\" or --on-trigger NAME",
    );
    refused(&["show", "nope"], "no schedule named \"nope\"");
    refused(&["pause", "nope"], "no schedule named \"nope\"");
    schedule_cmd(dir, port, &["add", good, "--cron", "0 2 * * *"]);
    refused(
        &["add", good, "--every", "1h"],
        "a schedule named \"good\" exists",
    );
    let show = operator_json(dir, port, &["schedule", "show", "good", "--format", "json"]);
    assert_eq!(show["when"], "cron 0 2 * * * (UTC)", "{show}");
    let next = show["next_due_unix_ms"].as_i64().unwrap();
    assert_eq!(next % 86_400_000, 2 * 3_600_000, "02:00 UTC: {show}");
    schedule_cmd(dir, port, &["remove", "good"]);
    refused(&["remove", "good"], "no schedule named \"good\"");
}

/// Two coordinators on one PostgreSQL store both fire schedules; each is SIGKILLed and
/// started again in turn. Every slot of the schedule's grid is fired once, by one of
/// them, and each firing's run is stored once.
#[test]
fn two_coordinators_fire_each_slot_exactly_once_while_killed_and_restarted() {
    let Some((location, db)) = shared_postgres_or_skip() else {
        return;
    };
    let db = db.as_str();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (mut a, port_a) = serve_named(dir, db, "coordinator-a");
    let (mut b, port_b) = serve_named(dir, db, "coordinator-b");
    let _agent = agent(dir, port_a, "h1", &["--coordinator", &url(port_b)]);
    wait_for("h1 to be known", Duration::from_secs(20), || {
        let v = agents_json(dir, port_b);
        (v.as_array().map_or(0, Vec::len) == 1).then_some(())
    });
    let file = quick(dir, "ha", "h1", "true");
    schedule_cmd(
        dir,
        port_b,
        &[
            "add",
            file.to_str().unwrap(),
            "--every",
            "1s",
            "--policy",
            "queue",
        ],
    );

    std::thread::sleep(Duration::from_secs(5));
    a.kill9();
    std::thread::sleep(Duration::from_secs(3));
    let (mut a, _) = serve_named(dir, db, "coordinator-a");
    std::thread::sleep(Duration::from_secs(4));
    b.kill9();
    std::thread::sleep(Duration::from_secs(3));
    let (_b, port_b) = serve_named(dir, db, "coordinator-b");
    std::thread::sleep(Duration::from_secs(4));
    schedule_cmd(dir, port_b, &["pause", "ha"]);
    a.kill9();

    let store = platter::store::Store::open_at(&location).unwrap();
    let mut f = store.firings("ha", 10_000).unwrap();
    f.reverse();
    let slots: Vec<i64> = f.iter().map(|f| f.slot_unix_ms).collect();
    assert!(
        slots.len() >= 17,
        "{} firings in ~19 s: {f:#?}",
        slots.len()
    );
    for w in slots.windows(2) {
        assert_eq!(w[1] - w[0], 1_000, "a slot missed or doubled: {f:#?}");
    }
    let mut by = BTreeMap::<String, usize>::new();
    for x in &f {
        *by.entry(x.coordinator.clone()).or_default() += 1;
        assert_eq!(x.outcome.as_str(), "submitted", "{x:?}");
    }
    assert_eq!(by.len(), 2, "both coordinators fired: {by:?}");
    let runs = store.series_runs("ha").unwrap();
    assert_eq!(runs.len(), f.len(), "one run per firing, none twice");
    eprintln!(
        "{} slots over {:.1} s, each fired once: {by:?}",
        slots.len(),
        (slots[slots.len() - 1] - slots[0]) as f64 / 1000.0
    );
}

/// A campaign that selects its hosts by label runs again and again: submitted a second
/// time, and fired twice by a trigger, each run gets the next generation. (Its generation
/// was looked up under the hash of the campaign as written, not of the campaign with its
/// hosts resolved, under which its runs are stored: every run after the first was given
/// generation 1 and refused as a duplicate — in the lab's fault suite, a submission whose
/// answer a killed coordinator never sent could not be made again.)
#[test]
fn a_campaign_that_selects_hosts_by_label_runs_again_under_its_next_generation() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_c, port) = serve(dir);
    let _h1 = agent(dir, port, "h1", &["--label", "role=lab"]);
    wait_agents(dir, 1);
    let file = write(
        dir,
        "by-label.yaml",
        "name: by-label\nhosts: { labels: { role: lab } }\nworkload: { command: { run: \"true\" } }\nrepeat: 1\n",
    );
    let first = submit(dir, port, &file);
    let second = submit(dir, port, &file);
    assert!(first.contains("-1-"), "{first}");
    assert!(second.contains("-2-"), "{second}");
    assert_eq!(first.replace("-1-", "-2-"), second);

    schedule_cmd(
        dir,
        port,
        &[
            "add",
            file.to_str().unwrap(),
            "--on-trigger",
            "again",
            "--policy",
            "queue",
        ],
    );
    for n in 3..=4 {
        let out = run_ok(operator(dir, port).args(["trigger", "again"]));
        let run = String::from_utf8(out.stdout).unwrap().trim().to_string();
        assert!(run.contains(&format!("-{n}-")), "firing {n}: {run}");
    }
    let f = firings(dir, "by-label");
    assert_eq!(f.len(), 2, "{f:#?}");
    assert!(f.iter().all(|f| f.campaign.is_some()), "{f:#?}");
}
