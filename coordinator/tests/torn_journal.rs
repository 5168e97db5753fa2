//! An agent SIGKILLed mid-campaign whose journal then ends in a record cut inside a
//! multi-byte character (a torn append, issue 10): it starts again, drops the torn tail,
//! and completes the campaign with every sample stored once.

mod common;

use std::time::Duration;

use common::*;

const REPS: i64 = 6;

#[test]
fn an_agent_whose_journal_was_cut_mid_record_completes_its_campaign_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve(dir);
    let mut first = agent(dir, port, "h1", &[]);
    wait_agents(dir, 1);
    // The workload's stderr ("café µs") puts multi-byte characters in the end records.
    let file = write(
        dir,
        "torn.yaml",
        &format!(
            "name: torn\nhosts: {{ names: [h1] }}\n\
             workload: {{ command: {{ run: \"echo café µs >&2; sleep 0.2\" }} }}\n\
             repeat: {REPS}\n"
        ),
    );
    let campaign = submit(dir, port, &file);
    let walls = "SELECT COUNT(*) FROM sample_rows WHERE metric = 'wall'";
    wait_in(dir, "two measurements", Duration::from_secs(30), || {
        (query_i64(dir, walls) >= 2).then_some(())
    });
    first.kill9();
    let running =
        format!("SELECT COUNT(*) FROM campaigns WHERE id = '{campaign}' AND state = 'running'");
    assert_eq!(
        query_i64(dir, &running),
        1,
        "the agent must die mid-campaign"
    );

    // Cut the journal inside the first multi-byte character of its last record.
    let journal = dir.join("h1.state/journal.jsonl");
    let bytes = std::fs::read(&journal).unwrap();
    let lines: Vec<usize> = std::iter::once(0)
        .chain(
            bytes
                .iter()
                .enumerate()
                .filter(|(_, &b)| b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect();
    let last_record = lines
        .windows(2)
        .rev()
        .find(|w| {
            let line = &bytes[w[0]..w[1]];
            line.starts_with(b"{\"record\"") && !line.is_ascii()
        })
        .map(|w| w[0])
        .expect("a record with a multi-byte character in the journal");
    let cut = last_record
        + bytes[last_record..]
            .iter()
            .position(|b| !b.is_ascii())
            .unwrap()
        + 1;
    println!(
        "cutting the journal at byte {cut} of {}, inside its record at byte {last_record}",
        bytes.len()
    );
    std::fs::write(&journal, &bytes[..cut]).unwrap();

    let _second = agent(dir, port, "h1", &[]);
    let finished =
        format!("SELECT COUNT(*) FROM campaigns WHERE id = '{campaign}' AND state = 'done'");
    wait_in(
        dir,
        "the campaign to finish",
        Duration::from_secs(60),
        || (query_i64(dir, &finished) == 1).then_some(()),
    );

    let db = db(dir);
    let count = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    let logs = logs(dir);
    assert!(logs.contains("dropping the journal's torn tail"), "{logs}");
    assert_eq!(count(walls), REPS, "{logs}");
    assert_eq!(
        count("SELECT COUNT(DISTINCT repetition) FROM sample_rows WHERE metric = 'wall'"),
        REPS
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM (SELECT plan_id, step_index FROM steps WHERE state != 'started' AND kind = 'measure' GROUP BY 1, 2 HAVING COUNT(*) > 1)"),
        0,
        "no measure ended twice"
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM steps WHERE state = 'failed'"),
        0,
        "{logs}"
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM (SELECT DISTINCT plan_id, step_index FROM steps WHERE state = 'succeeded')"),
        count("SELECT SUM(steps_total) FROM plans"),
        "every step of the plan ended"
    );
    // What the agent appended after the cut reads back: no padding, every line whole.
    let bytes = std::fs::read(&journal).unwrap();
    assert!(!bytes.contains(&0), "no NUL padding in the journal");
    assert!(bytes.ends_with(b"\n"));
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        serde_json::from_slice::<serde_json::Value>(line).unwrap();
    }
}
