//! A coordinator and three agent processes on 127.0.0.1 run a 2×2 matrix × 3 repetitions
//! on each host while one agent is SIGKILLed mid-measurement and the coordinator is
//! SIGKILLed once; after restarts every sample is stored exactly once.

mod common;

use std::time::Duration;

use common::*;

const CAMPAIGN: &str = r#"
name: fleet-faults
hosts: { names: [h1, h2, h3] }
matrix:
  a: [1, 2]
  b: [x, y]
workload:
  command:
    run: "sleep 0.25; echo ${a}${b} > /dev/null"
phases:
  before_each: [sync]
repeat: 3
"#;

#[test]
fn samples_survive_agent_and_coordinator_kills_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (mut coordinator, port) = serve(dir);
    let mut agents: Vec<Proc> = ["h1", "h2", "h3"]
        .iter()
        .map(|h| agent(dir, port, h, &[]))
        .collect();
    let file = write(dir, "fleet.yaml", CAMPAIGN);
    wait_agents(dir, 3);
    let campaign = submit(dir, port, &file);

    // Kill h2 while a measure step is running (started, not ended), after some progress.
    let running_measure = "SELECT COUNT(*) FROM steps s WHERE s.host = 'h2' AND s.kind = 'measure' AND s.state = 'started'
        AND NOT EXISTS (SELECT 1 FROM steps e WHERE e.plan_id = s.plan_id AND e.step_index = s.step_index AND e.state != 'started')";
    wait_for(
        "h2 to be measuring after 3 samples",
        Duration::from_secs(30),
        || {
            let done = query_i64(dir, "SELECT COUNT(*) FROM sample_rows s JOIN plans p ON p.id = s.plan_id WHERE p.host = 'h2' AND s.metric = 'wall'");
            (done >= 3 && query_i64(dir, running_measure) == 1).then_some(())
        },
    );
    agents[1].kill9();

    // Then kill the coordinator while the others keep measuring, and restart it.
    std::thread::sleep(Duration::from_millis(600));
    let unfinished =
        format!("SELECT COUNT(*) FROM campaigns WHERE id = '{campaign}' AND state = 'running'");
    assert_eq!(
        query_i64(dir, &unfinished),
        1,
        "the coordinator must die mid-campaign"
    );
    let stored_before = query_i64(
        dir,
        "SELECT COUNT(*) FROM sample_rows WHERE metric = 'wall'",
    );
    assert!(stored_before < 30, "{stored_before}");
    coordinator.kill9();
    std::thread::sleep(Duration::from_millis(800));
    let _coordinator = serve_again(dir, port);
    agents[1] = agent(dir, port, "h2", &[]);

    let finished =
        format!("SELECT COUNT(*) FROM campaigns WHERE id = '{campaign}' AND state = 'done'");
    wait_for("the campaign to finish", Duration::from_secs(90), || {
        (query_i64(dir, &finished) == 1).then_some(())
    });

    let db = db(dir);
    let count = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    let logs = logs(dir);
    // 3 hosts × 4 cells × 3 repetitions = 36 measurements, each with 4 metrics.
    assert_eq!(
        count("SELECT COUNT(*) FROM sample_rows WHERE metric = 'wall'"),
        36,
        "{logs}"
    );
    assert_eq!(
        count("SELECT COUNT(DISTINCT cell || '/' || repetition) FROM sample_rows"),
        36
    );
    assert_eq!(count("SELECT COUNT(*) FROM sample_rows"), 36 * 4);
    for h in ["h1", "h2", "h3"] {
        let n = count(&format!(
            "SELECT COUNT(*) FROM sample_rows s JOIN cells c ON c.n = s.cell WHERE c.host = '{h}' AND s.metric = 'wall'"
        ));
        assert_eq!(n, 12, "host {h}");
    }
    // Every wall time is a real measurement of `sleep 0.25`.
    let min_wall: f64 = db
        .query_row(
            "SELECT MIN(value) FROM sample_rows WHERE metric = 'wall'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(min_wall >= 0.25, "{min_wall}");
    // The step cut off on h2 ran again: a measure with attempt 2 succeeded, and its
    // sample says so.
    assert_eq!(
        count("SELECT COUNT(*) FROM steps WHERE host = 'h2' AND kind = 'measure' AND attempt = 2 AND state = 'succeeded'"),
        1,
        "{logs}"
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM sample_rows WHERE attempt = 2 AND metric = 'wall'"),
        1
    );
    // No attempt of a step ended twice and no measure twice (the preparation of the
    // measure cut off on h2 ran again, as attempt 2), none failed, and every step of
    // every plan ended.
    assert_eq!(
        count("SELECT COUNT(*) FROM (SELECT plan_id, step_index, attempt FROM steps WHERE state != 'started' GROUP BY 1, 2, 3 HAVING COUNT(*) > 1)"),
        0
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM (SELECT plan_id, step_index FROM steps WHERE state != 'started' AND kind = 'measure' GROUP BY 1, 2 HAVING COUNT(*) > 1)"),
        0
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM steps WHERE state = 'failed'"),
        0,
        "{logs}"
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM (SELECT DISTINCT plan_id, step_index FROM steps WHERE state = 'succeeded')"),
        count("SELECT SUM(steps_total) FROM plans")
    );
}
