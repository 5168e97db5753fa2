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

#[test]
fn a_campaign_submitted_to_one_coordinator_runs_on_the_others_agents() {
    let Some(url) = platter::store::testing::postgres_url() else {
        return;
    };
    let db = match platter::store::testing::fresh_postgres(&url) {
        platter::db::Location::Postgres(u) => u,
        other => unreachable!("{other:?}"),
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // `platter db migrate` first, as an operator upgrading a shared store would.
    let out = platter()
        .args(["db", "migrate", "--db", &db])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("PostgreSQL schema at version 1 (1 migration(s) applied now)"),
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
        let wall = cell["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["metric"] == "wall")
            .unwrap_or_else(|| panic!("no wall in {cell}"));
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
    let status_a = status(dir, port_a, &campaign);
    let status_b = status(dir, port_b, &campaign);
    let strip = |mut s: serde_json::Value| {
        // Which hosts are connected differs by coordinator: each knows its own.
        if let Some(hosts) = s.pointer_mut("/hosts").and_then(|h| h.as_array_mut()) {
            for h in hosts {
                h.as_object_mut().unwrap().remove("connected");
            }
        }
        s
    };
    assert_eq!(strip(status_a), strip(status_b));
}
