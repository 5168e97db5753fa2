//! Two coordinators (`platter serve --db postgres://…`) on one PostgreSQL store, as a fleet
//! past one machine runs them: a campaign submitted through one runs on agents connected
//! to the other, and both give the same status and report. Runs when
//! `PLATTER_TEST_POSTGRES` names a server (CI starts one); skips saying so otherwise.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;

const CAMPAIGN: &str = r#"
name: shared
hosts: { names: [h1, h2] }
matrix:
  n: [1, 2]
workload:
  command:
    run: "sleep 0.05; echo ${n} > /dev/null"
repeat: 3
"#;

/// `platter serve` with mutual TLS on a free port, its store `db`, its log `dir/LOG.log`.
fn serve_db(dir: &Path, db: &str, log: &str) -> (Proc, u16) {
    let tls = identity(dir, "coordinator", "localhost");
    let mut c = platter();
    c.args(["serve", "--listen", "127.0.0.1:0", "--db", db])
        .arg("--tls-dir")
        .arg(tls)
        .env("PLATTER_LOG", "info");
    spawn_listening(&mut c, dir, log)
}

fn status(dir: &Path, port: u16, campaign: &str) -> serde_json::Value {
    operator_json(dir, port, &["status", campaign, "--output", "json"])
}

/// The URL of a new, empty store on the test server (a schema of its own), if one is
/// named.
fn fresh_store() -> Option<String> {
    let server = platter::store::testing::postgres_url()?;
    match platter::store::testing::fresh_postgres(&server) {
        platter::store::db::Location::Postgres(url) => Some(url),
        other => unreachable!("{other:?}"),
    }
}

/// Whether the coordinator on `port` has h1 connected (its state is `idle` or `running`,
/// not `offline` or `lost`).
fn connected(dir: &Path, port: u16) -> bool {
    let agents = agents_json(dir, port);
    let state = agents[0]["state"].as_str().unwrap_or("");
    !state.is_empty() && state != "offline" && state != "lost"
}

#[test]
fn a_campaign_submitted_to_one_coordinator_runs_on_the_others_agents() {
    let Some(db) = fresh_store() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // `platter db migrate` first, as an operator upgrading a shared store would.
    let out = common::run_ok(platter().args(["db", "migrate", "--db", &db]));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!(
            "PostgreSQL schema at version {0} ({0} migration(s) applied now)",
            platter::store::migrations::POSTGRES.len()
        )),
        "{said}"
    );
    assert!(
        !said.contains("platter:platter@"),
        "the password is not shown: {said}"
    );

    let (_a, port_a) = serve_db(dir, &db, "coordinator-a");
    let (_b, port_b) = serve_db(dir, &db, "coordinator-b");
    // h1 talks to a, h2 to b; the campaign goes to a.
    let _h1 = agent(dir, port_a, "h1", &[]);
    let _h2 = agent(dir, port_b, "h2", &[]);
    wait_in(dir, "both agents", Duration::from_secs(20), || {
        let a = agents_json(dir, port_a);
        let n = a.as_array()?.len();
        (n == 2).then_some(())
    });
    let file = write(dir, "shared.yaml", CAMPAIGN);
    let campaign = submit(dir, port_a, &file);

    wait_in(dir, "the campaign to end", Duration::from_secs(60), || {
        (status(dir, port_b, &campaign)["state"] == "done").then_some(())
    });
    // Every repetition of every cell once, whichever coordinator is asked.
    let report_a = operator_json(dir, port_a, &["report", &campaign, "--format", "json"]);
    let report_b = operator_json(dir, port_b, &["report", &campaign, "--format", "json"]);
    assert_eq!(report_a, report_b, "both coordinators give the same report");
    let cells = report_a["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4, "2 hosts × 2 points");
    for cell in cells {
        let wall = common::wall_of(cell);
        assert_eq!(wall["n"], 3, "3 repetitions stored once: {cell}");
    }
    let hosts: std::collections::BTreeSet<&str> =
        cells.iter().map(|c| c["host"].as_str().unwrap()).collect();
    assert_eq!(hosts, ["h1", "h2"].into());
    // h2's plan went out through b, which heard of it from a.
    let log_b = std::fs::read_to_string(dir.join("coordinator-b.log")).unwrap();
    assert!(
        log_b.contains("sending plan") && log_b.contains("h2"),
        "b sent h2's plan:\n{log_b}"
    );
    // Status and agents too, who is connected where included: each coordinator knows
    // the agents it holds and, from the store, those the other holds (published within
    // `presence::GATHER` of a change; the campaign may have ended sooner).
    let status_a = wait_in(
        dir,
        "the same status from both",
        Duration::from_secs(10),
        || {
            let a = status(dir, port_a, &campaign);
            (a == status(dir, port_b, &campaign)).then_some(a)
        },
    );
    let via: Vec<(&str, &str)> = status_a["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            assert_eq!(h["connected"], true, "{h}");
            (
                h["host"].as_str().unwrap(),
                h["coordinator"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(via.len(), 2);
    assert!(
        via[0].1.ends_with(&format!(":{port_a}")),
        "h1 via a: {via:?}"
    );
    assert!(
        via[1].1.ends_with(&format!(":{port_b}")),
        "h2 via b: {via:?}"
    );
    let agents_a = agents_json(dir, port_a);
    assert_eq!(agents_a, agents_json(dir, port_b));
    for a in agents_a.as_array().unwrap() {
        assert_eq!(a["state"], "idle", "{a}");
        assert!(
            !a["tools"].as_array().unwrap().is_empty(),
            "tools known to both: {a}"
        );
    }
    let out = operator(dir, port_b).arg("agents").output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains(&format!("idle via {}", via[0].1)),
        "b says h1 is on a:\n{table}"
    );
}

const LONG: &str = r#"
name: outlives
hosts: { names: [h1] }
matrix:
  n: [1, 2]
workload:
  command:
    run: "sleep 0.1; echo ${n} > /dev/null"
repeat: 12
"#;

/// The coordinator an agent is connected to is SIGKILLed mid-campaign: the agent moves to
/// the other coordinator on the same store, resends what was not acked, and the campaign
/// completes there with every repetition stored exactly once.
#[test]
fn a_campaign_outlives_the_coordinator_its_agent_was_connected_to() {
    let Some(db) = fresh_store() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (mut a, port_a) = serve_db(dir, &db, "coordinator-a");
    let (_b, port_b) = serve_db(dir, &db, "coordinator-b");
    // a first, then b: `agent` names a, the extra flag adds b.
    let _h1 = agent(dir, port_a, "h1", &["--coordinator", &url(port_b)]);
    wait_in(dir, "h1 on a", Duration::from_secs(20), || {
        connected(dir, port_a).then_some(())
    });
    let file = write(dir, "outlives.yaml", LONG);
    let campaign = submit(dir, port_b, &file);
    // Some repetitions done, then a dies under its agent.
    wait_in(dir, "5 steps done", Duration::from_secs(30), || {
        let s = status(dir, port_b, &campaign);
        (s["hosts"][0]["steps_done"].as_u64()? >= 5).then_some(())
    });
    a.kill9();
    let killed = std::time::Instant::now();
    wait_in(dir, "h1 on b", Duration::from_secs(20), || {
        connected(dir, port_b).then_some(())
    });
    eprintln!(
        "h1 connected to b {:?} after a was killed",
        killed.elapsed()
    );
    wait_in(
        dir,
        "the campaign to end on b",
        Duration::from_secs(60),
        || (status(dir, port_b, &campaign)["state"] == "done").then_some(()),
    );
    every_repetition_once(dir, port_b, &campaign, 12);
}
