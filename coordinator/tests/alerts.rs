//! Alerts end to end (issue 50), as an on-call engineer meets them: a schedule's series
//! slows down, `platter serve` flags the regression at its run and sends it — to a webhook
//! receiver that is down at first and gets it later, its signature verified by the
//! receiver (Python's hmac, not ours), and by mail through a real SMTP server with STARTTLS
//! (aiosmtpd) — each with one idempotency key per event and rule; the flag acknowledged,
//! then fixed by itself when the series is back, which is sent too. And on a shared
//! PostgreSQL store, two coordinators, the one delivering killed mid-way: every event's key
//! arrives, any repeat with the same key.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use platter::store::flags::{FlagKind, NewFlag, Severity};
use serde_json::Value;

/// Debian's python3 (aiosmtpd is its package, not pyenv's).
const PYTHON: &str = "/usr/bin/python3";

fn receivers_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/receivers/alerts.py")
}

/// Whether Debian's python3 with aiosmtpd is here (`.ci/run` installs it).
fn python_or_skip() -> bool {
    let ok = Command::new(PYTHON)
        .args(["-c", "import aiosmtpd"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok || skip("python3-aiosmtpd is not installed (apt-get install python3-aiosmtpd)")
}

/// A receiver process, killed when dropped.
struct Receiver(std::process::Child);

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn receiver(out: &Path, args: &[&str]) -> Receiver {
    let _ = std::fs::remove_file(out.with_extension("jsonl.ready"));
    let child = Command::new(PYTHON)
        .arg(receivers_script())
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(out.with_extension("log")).unwrap())
        .spawn()
        .unwrap();
    let ready = PathBuf::from(format!("{}.ready", out.display()));
    wait_for("the receiver to listen", Duration::from_secs(20), || {
        ready.exists().then_some(())
    });
    Receiver(child)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn cli(db: &str, args: &[&str]) -> std::process::Output {
    platter().args(args).args(["--db", db]).output().unwrap()
}

fn cli_json(db: &str, args: &[&str]) -> Value {
    let out = cli(db, args);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn a_series_that_slows_is_flagged_sent_once_to_each_channel_and_fixed_by_itself() {
    if !python_or_skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let db = dir.join("coordinator.db").display().to_string();
    let delay = dir.join("delay");
    std::fs::write(&delay, "0.05").unwrap();
    let key = write(dir, "hook.key", "s3cret-signing-key\n");
    let hook_port = free_port();
    let hook_out = dir.join("hook.jsonl");
    let mail_out = dir.join("mail.jsonl");
    let pki = identity(dir, "coordinator", "localhost");
    let smtp_port = free_port().to_string();
    let _smtp = receiver(
        &mail_out,
        &[
            "smtp",
            &smtp_port,
            mail_out.to_str().unwrap(),
            pki.join("cert.pem").to_str().unwrap(),
            pki.join("key.pem").to_str().unwrap(),
        ],
    );

    let (_coordinator, port) = serve_with(dir, &["--public-url", "https://platter.lab.example"]);
    let _agent = agent(dir, port, "h1", &[]);
    wait_agents(dir, 1);
    // The webhook's receiver is not up yet: its alert waits and is retried.
    run_ok(platter().args([
        "alerts",
        "add",
        "hook",
        "--channel",
        "webhook",
        "--target",
        &format!("http://127.0.0.1:{hook_port}/platter"),
        "--secret",
        &format!("file:{}", key.display()),
        "--kind",
        "regression",
        "--db",
        &db,
    ]));
    run_ok(platter().args([
        "alerts",
        "add",
        "oncall-mail",
        "--channel",
        "email",
        "--target",
        &format!(
            "smtp://localhost:{smtp_port}?ca={}",
            pki.join("ca.pem").display()
        ),
        "--to",
        "oncall@lab.example",
        "--from",
        "platter@lab.example",
        "--db",
        &db,
    ]));

    let file = write(
        dir,
        "slowing.yaml",
        &format!(
            "name: slowing\nhosts: {{ names: [h1] }}\nworkload: {{ command: {{ run: \"sleep $(cat {})\" }} }}\nrepeat: 5\n",
            delay.display()
        ),
    );
    run_ok(operator(dir, port).args(["schedule", "add", file.to_str().unwrap(), "--every", "2s"]));
    let done = |n: i64| {
        query_i64(
            dir,
            "SELECT COUNT(*) FROM campaigns WHERE series = 'slowing' AND state = 'done'",
        ) >= n
    };
    wait_for("3 runs at 50 ms", Duration::from_secs(120), || {
        done(3).then_some(())
    });
    // From the next run on, each repetition takes twice as long.
    std::fs::write(&delay, "0.10").unwrap();
    let flag = wait_for("the regression flagged", Duration::from_secs(120), || {
        let flags = cli_json(&db, &["flags", "--kind", "regression", "--format", "json"]);
        flags.as_array().unwrap().first().cloned()
    });
    run_ok(operator(dir, port).args(["schedule", "pause", "slowing"]));
    let id = flag["id"].as_str().unwrap().to_string();
    let summary = flag["summary"].as_str().unwrap();
    eprintln!("flagged: {id} {summary}");
    assert_eq!(flag["state"], "open");
    assert_eq!(flag["severity"], "warning");
    assert!(
        summary.starts_with("REGRESSION slowing on h1: wall "),
        "{summary}"
    );
    assert!(
        flag["evidence"]["after"].as_f64().unwrap()
            > 1.6 * flag["evidence"]["before"].as_f64().unwrap()
    );
    // `platter flags` exits 1 while a flag is open.
    assert_eq!(cli(&db, &["flags"]).status.code(), Some(1));

    // Mail went out at once, over STARTTLS, its Message-ID the idempotency key.
    let mail = wait_for("the mail", Duration::from_secs(30), || {
        lines(&mail_out).first().cloned()
    });
    let log = cli_json(&db, &["alerts", "log", "--output", "json"]);
    let key_of = |rule: &str, what: &str| -> String {
        log.as_array()
            .unwrap()
            .iter()
            .find(|d| d["rule"] == rule && d["event"]["what"] == what)
            .unwrap_or_else(|| panic!("no {what} for {rule} in {log:#}"))["idempotency_key"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(mail["tls"], true);
    assert_eq!(mail["to"], serde_json::json!(["oncall@lab.example"]));
    assert_eq!(
        mail["message_id"],
        format!("<{}@platter>", key_of("oncall-mail", "raised"))
    );
    assert!(
        mail["subject"]
            .as_str()
            .unwrap()
            .contains("[WARNING] regression: REGRESSION slowing"),
        "{mail}"
    );
    assert!(
        mail["body"]
            .as_str()
            .unwrap()
            .contains(&format!("https://platter.lab.example/flags/{id}")),
        "{mail}"
    );

    // The webhook's is retried while its receiver is down…
    wait_for("a failed try logged", Duration::from_secs(30), || {
        let log = cli_json(
            &db,
            &["alerts", "log", "--rule", "hook", "--output", "json"],
        );
        log.as_array()
            .unwrap()
            .iter()
            .any(|d| d["state"] == "pending" && d["attempts"].as_i64().unwrap() >= 1)
            .then_some(())
    });
    let said =
        String::from_utf8_lossy(&cli(&db, &["alerts", "log", "--rule", "hook"]).stdout).to_string();
    assert!(said.contains("retrying at"), "{said}");
    assert!(said.contains("Connection refused"), "{said}");
    // …and arrives once it is up, signed.
    let _hook = receiver(
        &hook_out,
        &[
            "webhook",
            &hook_port.to_string(),
            hook_out.to_str().unwrap(),
            key.to_str().unwrap(),
        ],
    );
    let got = wait_for("the webhook", Duration::from_secs(60), || {
        lines(&hook_out).first().cloned()
    });
    assert_eq!(got["signature_ok"], true, "{got:#}");
    assert_eq!(got["path"], "/platter");
    assert_eq!(got["key"], key_of("hook", "raised"));
    let event = &got["body"]["events"][0];
    assert_eq!(event["flag_id"], id.as_str());
    assert_eq!(event["kind"], "regression");
    assert_eq!(
        event["url"],
        format!("https://platter.lab.example/flags/{id}")
    );

    // Acknowledged; then the series is back, and platter says it is fixed (and sends it).
    run_ok(platter().args([
        "flag",
        &id[..6],
        "ack",
        "--note",
        "bisecting",
        "--by",
        "ana",
        "--db",
        &db,
    ]));
    std::fs::write(&delay, "0.05").unwrap();
    run_ok(operator(dir, port).args(["schedule", "resume", "slowing"]));
    let fixed = wait_for("the flag fixed by itself", Duration::from_secs(120), || {
        let f = cli_json(&db, &["flags", "--state", "all", "--format", "json"]);
        f.as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == id.as_str() && f["state"] == "fixed")
            .cloned()
    });
    run_ok(operator(dir, port).args(["schedule", "pause", "slowing"]));
    assert_eq!(fixed["state_by"], "");
    assert!(
        fixed["note"]
            .as_str()
            .unwrap()
            .contains("is back within 3%"),
        "{fixed}"
    );
    wait_for(
        "the fix sent to the webhook",
        Duration::from_secs(30),
        || {
            lines(&hook_out)
                .iter()
                .any(|m| m["body"]["events"][0]["what"] == "fixed")
                .then_some(())
        },
    );
    // Each event and rule once: no key twice at either receiver (nothing was cut off).
    let keys: Vec<String> = lines(&hook_out)
        .iter()
        .map(|m| m["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        keys.iter().collect::<BTreeSet<_>>().len(),
        keys.len(),
        "{keys:?}"
    );
    let ids: Vec<String> = lines(&mail_out)
        .iter()
        .map(|m| m["message_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        ids.iter().collect::<BTreeSet<_>>().len(),
        ids.len(),
        "{ids:?}"
    );
}

fn new_flag(kind: FlagKind, i: usize) -> NewFlag {
    NewFlag {
        kind,
        severity: Severity::Warning,
        evidence_key: format!("{}|test|h{i}", kind.as_str()),
        series: "nightly".into(),
        host: format!("h{i}"),
        model: String::new(),
        drive: String::new(),
        metric: "wall".into(),
        cell: String::new(),
        campaign_id: String::new(),
        summary: format!("flag {i}"),
        evidence: serde_json::json!({ "i": i }),
        link: String::new(),
    }
}

/// The events a receiver got: (event id, key) per event, digests opened.
fn received(out: &Path) -> Vec<(String, String, i64)> {
    lines(out)
        .iter()
        .flat_map(|m| {
            let at = m["received_unix_ms"].as_i64().unwrap();
            m["body"]["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    (
                        e["event_id"].as_str().unwrap().to_string(),
                        e["idempotency_key"].as_str().unwrap().to_string(),
                        at,
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn two_coordinators_deliver_every_event_at_least_once_with_its_key_when_one_is_killed() {
    if !python_or_skip() {
        return;
    }
    let Some((location, db)) = shared_postgres_or_skip() else {
        return;
    };
    let db = db.as_str();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let key = write(dir, "hook.key", "k3y\n");
    let fast_out = dir.join("fast.jsonl");
    let slow_out = dir.join("slow.jsonl");
    let (fast_port, slow_port) = (free_port(), free_port());
    let _fast = receiver(
        &fast_out,
        &[
            "webhook",
            &fast_port.to_string(),
            fast_out.to_str().unwrap(),
            key.to_str().unwrap(),
        ],
    );
    // Answers each message 0.5 s after it recorded it: a coordinator killed meanwhile never
    // heard that it arrived.
    let _slow = receiver(
        &slow_out,
        &[
            "webhook",
            &slow_port.to_string(),
            slow_out.to_str().unwrap(),
            key.to_str().unwrap(),
            "0.5",
        ],
    );
    let add = |name: &str, port: u16, kind: &str| {
        run_ok(platter().args([
            "alerts",
            "add",
            name,
            "--channel",
            "webhook",
            "--target",
            &format!("http://127.0.0.1:{port}/"),
            "--secret",
            &format!("file:{}", key.display()),
            "--kind",
            kind,
            "--digest-after",
            "1000",
            "--db",
            db,
        ]));
    };
    add("fast", fast_port, "regression");
    add("slow", slow_port, "health");
    let mut coordinators = BTreeMap::from([
        (
            "coordinator-a".to_string(),
            serve_named(dir, db, "coordinator-a").0,
        ),
        (
            "coordinator-b".to_string(),
            serve_named(dir, db, "coordinator-b").0,
        ),
    ]);
    let store = platter::store::Store::open_at(&location).unwrap();

    // 100 flags, one every 100 ms: each one's alert as soon as it is stored.
    for i in 0..100 {
        store
            .raise_flags(None, &[new_flag(FlagKind::Regression, i)], &[])
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    let got = wait_for("100 alerts", Duration::from_secs(60), || {
        let r = received(&fast_out);
        (r.len() >= 100).then_some(r)
    });
    let log = store.alert_log(Some("fast"), 1000).unwrap();
    let stored: BTreeMap<&str, i64> = log
        .iter()
        .map(|d| (d.event.event_id.as_str(), d.event.created_unix_ms))
        .collect();
    let mut latency: Vec<i64> = got
        .iter()
        .map(|(e, _, at)| at - stored[e.as_str()])
        .collect();
    latency.sort();
    let p = |q: f64| latency[((latency.len() - 1) as f64 * q).round() as usize];
    eprintln!(
        "flag stored → webhook received, 100 flags, two coordinators: p50 {} ms, p99 {} ms, max {} ms",
        p(0.5),
        p(0.99),
        latency[latency.len() - 1]
    );
    let keys: BTreeSet<&str> = got.iter().map(|(_, k, _)| k.as_str()).collect();
    assert_eq!(keys.len(), 100, "each event once, with a key of its own");
    assert!(lines(&fast_out).iter().all(|m| m["signature_ok"] == true));

    // 12 more for the slow receiver; the coordinator sending them is killed mid-way.
    let flags: Vec<NewFlag> = (0..12).map(|i| new_flag(FlagKind::Health, i)).collect();
    store.raise_flags(None, &flags, &[]).unwrap();
    wait_for("3 slow alerts", Duration::from_secs(30), || {
        (received(&slow_out).len() >= 3).then_some(())
    });
    let (holder, _) = store
        .rule_lease("slow", platter::store::error::now_ms())
        .unwrap()
        .expect("a coordinator holds the rule while it sends");
    coordinators.get_mut(&holder).unwrap().kill9();
    eprintln!("killed {holder} while it was sending");
    let want: BTreeMap<String, String> = store
        .alert_log(Some("slow"), 100)
        .unwrap()
        .into_iter()
        .map(|d| (d.event.event_id, d.idempotency_key))
        .collect();
    assert_eq!(want.len(), 12);
    let got = wait_for("every slow alert", Duration::from_secs(90), || {
        let r = received(&slow_out);
        let ids: BTreeSet<&String> = r.iter().map(|(e, _, _)| e).collect();
        (ids.len() == 12).then_some(r)
    });
    // Every key arrived; a repeat (the message the killed coordinator never heard
    // answered) carries the same key as the first.
    for (event, key, _) in &got {
        assert_eq!(&want[event], key, "{event}");
    }
    let repeats = got.len() - 12;
    eprintln!(
        "{} messages for 12 events: {repeats} repeated, each with its key",
        got.len()
    );
    assert!(
        repeats >= 1,
        "the message in flight when its sender was killed is sent again"
    );
    // And each is marked delivered once its receiver answered.
    wait_for("every delivery marked", Duration::from_secs(30), || {
        store
            .alert_log(None, 1000)
            .unwrap()
            .iter()
            .all(|d| d.state == "delivered")
            .then_some(())
    });
}

#[test]
fn a_channel_down_gets_what_waited_as_one_digest_in_order_and_silenced_events_never() {
    if !python_or_skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let db = dir.join("coordinator.db");
    let key = write(dir, "hook.key", "k\n");
    let out = dir.join("hook.jsonl");
    let port = free_port();
    let (_coordinator, _) = serve(dir);
    let dbs = db.display().to_string();
    run_ok(platter().args([
        "alerts",
        "add",
        "hook",
        "--channel",
        "webhook",
        "--target",
        &format!("http://127.0.0.1:{port}/"),
        "--secret",
        &format!("file:{}", key.display()),
        "--digest-after",
        "3",
        "--db",
        &dbs,
    ]));
    run_ok(platter().args([
        "alerts",
        "silence",
        "rebuild-h5",
        "--host",
        "h5",
        "--for",
        "1h",
        "--db",
        &dbs,
    ]));
    // Eight flags while the receiver is down: the first is tried at once and fails, the
    // rest queue behind it.
    let store = platter::store::Store::open(&db).unwrap();
    for i in 0..8 {
        store
            .raise_flags(None, &[new_flag(FlagKind::Regression, i)], &[])
            .unwrap();
    }
    wait_for("a failed try", Duration::from_secs(30), || {
        store
            .alert_log(Some("hook"), 100)
            .unwrap()
            .iter()
            .any(|d| d.attempts > 0)
            .then_some(())
    });
    let _hook = receiver(
        &out,
        &[
            "webhook",
            &port.to_string(),
            out.to_str().unwrap(),
            key.to_str().unwrap(),
        ],
    );
    wait_for("the digest", Duration::from_secs(60), || {
        (!lines(&out).is_empty()).then_some(())
    });
    // Anything more would have come in the same pass.
    std::thread::sleep(Duration::from_secs(2));
    let messages = lines(&out);
    assert_eq!(messages.len(), 1, "one digest, not a flood: {messages:#?}");
    let digest = &messages[0]["body"];
    assert_eq!(digest["digest"], true);
    assert!(messages[0]["key"].as_str().unwrap().starts_with("digest-"));
    assert_eq!(messages[0]["signature_ok"], true);
    // Seven events (h5's was silenced), oldest first, each with its own key.
    let hosts: Vec<&str> = digest["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["h0", "h1", "h2", "h3", "h4", "h6", "h7"]);
    let log = store.alert_log(Some("hook"), 100).unwrap();
    assert_eq!(log.iter().filter(|d| d.state == "delivered").count(), 7);
    let silenced: Vec<_> = log.iter().filter(|d| d.state == "silenced").collect();
    assert_eq!(silenced.len(), 1);
    assert_eq!(silenced[0].event.host, "h5");
    for e in digest["events"].as_array().unwrap() {
        let d = log
            .iter()
            .find(|d| d.event.event_id == e["event_id"].as_str().unwrap())
            .unwrap();
        assert_eq!(e["idempotency_key"], d.idempotency_key.as_str());
    }
}

/// A host offline past the grace while holding a plan is a critical flag, fixed when it is
/// back; a trigger whose run could not be planned is a firing flag.
#[test]
fn a_host_away_holding_a_plan_and_a_failed_firing_are_flagged() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let db = dir.join("coordinator.db").display().to_string();
    let (_coordinator, port) = serve_with(dir, &["--host-offline-alert-after", "2s"]);
    let mut h1 = agent(dir, port, "h1", &[]);
    wait_agents(dir, 1);
    let long = write(
        dir,
        "long.yaml",
        "name: long\nhosts: { names: [h1] }\nworkload: { command: { run: \"sleep 3\" } }\nrepeat: 3\n",
    );
    submit(dir, port, &long);
    wait_for("h1 to hold the plan", Duration::from_secs(30), || {
        (query_i64(dir, "SELECT COUNT(*) FROM plans WHERE state = 'accepted'") == 1).then_some(())
    });
    h1.kill9();
    let flag = wait_for("the host flagged", Duration::from_secs(60), || {
        let f = cli_json(&db, &["flags", "--kind", "host", "--format", "json"]);
        f.as_array().unwrap().first().cloned()
    });
    assert_eq!(flag["severity"], "critical");
    assert_eq!(flag["host"], "h1");
    let summary = flag["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("h1 is offline while holding a plan of campaign "),
        "{summary}"
    );
    let _h1 = agent(dir, port, "h1", &[]);
    let fixed = wait_for("the host flag fixed", Duration::from_secs(60), || {
        let f = cli_json(
            &db,
            &[
                "flags", "--state", "fixed", "--kind", "host", "--format", "json",
            ],
        );
        f.as_array().unwrap().first().cloned()
    });
    assert!(
        fixed["note"].as_str().unwrap().starts_with("h1 is back"),
        "{fixed}"
    );

    let nowhere = write(
        dir,
        "nowhere.yaml",
        "name: nowhere\nhosts: { labels: { rack: nowhere } }\nworkload: { command: { run: \"true\" } }\nrepeat: 1\n",
    );
    run_ok(operator(dir, port).args([
        "schedule",
        "add",
        nowhere.to_str().unwrap(),
        "--on-trigger",
        "t",
    ]));
    let _ = operator(dir, port).args(["trigger", "t"]).output().unwrap();
    let firing = wait_for("the failed firing flagged", Duration::from_secs(30), || {
        let f = cli_json(&db, &["flags", "--kind", "firing", "--format", "json"]);
        f.as_array().unwrap().first().cloned()
    });
    let summary = firing["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("schedule nowhere could not submit its run at "),
        "{summary}"
    );
    assert_eq!(firing["series"], "nowhere");
}
