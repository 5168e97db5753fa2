//! One coordinator, three agents over mutual TLS, two campaigns submitted at the same
//! moment by two operators. From the stored step times: no host ever ran two steps (let
//! alone two measurements) at once, while different hosts did run at the same time.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn two_campaigns_share_the_fleet_without_overlapping_on_any_host() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve(dir);
    let hosts = ["h1", "h2", "h3"];
    let _agents: Vec<Proc> = hosts.iter().map(|h| agent(dir, port, h, &[])).collect();
    wait_agents(dir, 3);

    let campaign = |name: &str| {
        write(
            dir,
            &format!("{name}.yaml"),
            &format!(
                "name: {name}\nhosts: {{ names: [h1, h2, h3] }}\nmatrix: {{ ms: [30, 60] }}\n\
                 workload: {{ command: {{ run: \"sleep 0.0${{ms}}\" }} }}\nrepeat: 3\n"
            ),
        )
    };
    let (a, b) = (campaign("alpha"), campaign("beta"));
    identity(dir, "operator", "tester");
    // Two operators at once: both submissions are in flight together.
    let spawn = |f: &std::path::Path| operator(dir, port).arg("submit").arg(f).output();
    let (ra, rb) = std::thread::scope(|s| {
        let ta = s.spawn(|| spawn(&a));
        let tb = s.spawn(|| spawn(&b));
        (ta.join().unwrap().unwrap(), tb.join().unwrap().unwrap())
    });
    for r in [&ra, &rb] {
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    }
    wait_in(
        dir,
        "both campaigns to finish",
        Duration::from_secs(60),
        || {
            (query_i64(dir, "SELECT COUNT(*) FROM campaigns WHERE state = 'done'") == 2)
                .then_some(())
        },
    );

    // Every step's [start, end] from its end record, per host.
    let c = db(dir);
    let mut stmt = c
        .prepare(
            "SELECT s.host, p.campaign_id, s.kind, s.started_unix_ns, s.finished_unix_ns
               FROM steps s JOIN plans p ON p.id = s.plan_id
              WHERE s.state != 'started' ORDER BY s.host, s.started_unix_ns",
        )
        .unwrap();
    let steps: Vec<(String, String, String, i64, i64)> = stmt
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let measures = steps.iter().filter(|s| s.2 == "measure").count();
    assert_eq!(
        measures,
        2 * 3 * 2 * 3,
        "2 campaigns × 3 hosts × 2 cells × 3 reps"
    );
    for h in hosts {
        let mine: Vec<_> = steps.iter().filter(|s| s.0 == h).collect();
        let campaigns: std::collections::BTreeSet<_> = mine.iter().map(|s| &s.1).collect();
        assert_eq!(campaigns.len(), 2, "{h} ran steps of both campaigns");
        for w in mine.windows(2) {
            assert!(
                w[0].4 <= w[1].3,
                "{h}: a {} step of {} ({}..{}) overlaps a {} step of {} starting at {}",
                w[0].2,
                w[0].1,
                w[0].3,
                w[0].4,
                w[1].2,
                w[1].1,
                w[1].3
            );
        }
    }
    // Hosts ran in parallel: some measurement on one host overlaps one on another.
    let parallel = steps.iter().any(|x| {
        steps
            .iter()
            .any(|y| x.0 != y.0 && x.2 == "measure" && y.2 == "measure" && x.3 < y.4 && y.3 < x.4)
    });
    assert!(parallel, "no two hosts ever measured at the same time");

    // The same matrix twice: `platter compare` through the coordinator pairs every cell.
    let id = |o: &std::process::Output| String::from_utf8_lossy(&o.stdout).trim().to_string();
    let compared = operator_json(
        dir,
        port,
        &["compare", &id(&ra), &id(&rb), "--format", "json"],
    );
    assert_eq!(compared["only_in_a"], serde_json::json!([]), "{compared}");
    assert_eq!(compared["only_in_b"], serde_json::json!([]), "{compared}");
    let rows = compared["rows"].as_array().unwrap();
    assert_eq!(
        rows.len(),
        3 * 2,
        "every host × cell of beta has its alpha counterpart"
    );
    assert!(rows
        .iter()
        .all(|r| r["baseline"] == id(&ra).as_str() && r["ratio"].as_f64().unwrap() > 0.0));
}

/// An agent that stops answering (SIGSTOP: its TCP connection stays open) is shown as lost
/// after the heartbeat timeout; a campaign submitted meanwhile waits for it and runs when
/// it is back (SIGCONT).
#[test]
fn a_silent_agent_is_lost_and_its_plans_wait_for_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve_with(dir, &["--heartbeat-timeout", "10"]);
    let sleeper = agent(dir, port, "sleepy", &[]);
    wait_agents(dir, 1);
    let state = || {
        let v = agents_json(dir, port);
        v[0]["state"].as_str().unwrap().to_string()
    };
    assert_eq!(state(), "idle");
    let pid = sleeper.child.id().to_string();
    let signal = |sig: &str| {
        assert!(std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap()
            .success());
    };
    signal("-STOP");
    wait_in(dir, "the agent to be lost", Duration::from_secs(20), || {
        (state() == "lost").then_some(())
    });
    let f = write(dir, "c.yaml", "name: waits\nhosts: { names: [sleepy] }\nworkload: { command: { run: \"true\" } }\nrepeat: 2\n");
    let id = submit(dir, port, &f);
    let status = operator(dir, port)
        .args(["status", &id, "--output", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(v["state"], "running");
    assert_eq!(v["hosts"][0]["connected"], false);
    assert_eq!(v["hosts"][0]["steps_done"], 0);
    signal("-CONT");
    wait_in(
        dir,
        "the campaign to finish",
        Duration::from_secs(30),
        || {
            (query_i64(dir, "SELECT COUNT(*) FROM campaigns WHERE state = 'done'") == 1)
                .then_some(())
        },
    );
    assert!(
        logs(dir).contains("agent lost: nothing heard for 10 s"),
        "{}",
        logs(dir)
    );
    drop(sleeper);
}

/// A campaign cancelled while one of its agents is down (killed mid-plan): the agent
/// resumes the plan from its journal when it comes back, and must hear of the cancel then
/// rather than run the rest of the plan.
#[test]
fn a_cancel_while_the_agent_is_down_reaches_it_when_it_returns() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve(dir);
    let first = agent(dir, port, "h1", &[]);
    wait_agents(dir, 1);
    identity(dir, "operator", "tester");
    const REPS: i64 = 30;
    let f = write(
        dir,
        "long.yaml",
        &format!(
            "name: long\nhosts: {{ names: [h1] }}\nworkload: {{ command: {{ run: \"sleep 0.5\" }} }}\nrepeat: {REPS}\n"
        ),
    );
    let id = submit(dir, port, &f);
    let ended = |state: &str| {
        query_i64(
            dir,
            &format!("SELECT COUNT(*) FROM steps WHERE kind = 'measure' AND state = '{state}'"),
        )
    };
    wait_in(dir, "a measurement", Duration::from_secs(20), || {
        (ended("succeeded") >= 1).then_some(())
    });
    drop(first); // SIGKILL: the plan stays held in the agent's journal
    common::run_ok(operator(dir, port).args(["cancel", &id]));

    let _second = agent(dir, port, "h1", &[]);
    wait_in(dir, "the plan to end", Duration::from_secs(30), || {
        (query_i64(
            dir,
            "SELECT COUNT(*) FROM plans WHERE state IN ('done', 'cancelled')",
        ) == 1)
            .then_some(())
    });
    assert_eq!(
        query_i64(dir, "SELECT COUNT(*) FROM plans WHERE state = 'cancelled'"),
        1,
        "the agent ended the plan as cancelled\n{}",
        store_summary(dir)
    );
    let (succeeded, skipped) = (ended("succeeded"), ended("skipped"));
    println!("{succeeded} measurements ran and {skipped} were skipped of {REPS}");
    assert!(
        skipped > 0 && succeeded + skipped <= REPS,
        "{succeeded} measurements ran and {skipped} were skipped of {REPS}"
    );
    assert!(
        succeeded < REPS / 2,
        "the rest of the plan was skipped, not run: {succeeded} of {REPS} ran"
    );
}
