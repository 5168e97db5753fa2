//! The `reboot` phase: the agent journals the request, runs its reboot command and, when
//! it starts again with a new boot id, completes the step and goes on with the plan.

mod common;

use std::time::Duration;

use common::*;

const CAMPAIGN: &str = r#"
name: cold-cache
hosts: { names: [rebooter] }
workload:
  command:
    run: "cat /dev/null"
phases:
  before_each: [sync, reboot]
repeat: 2
"#;

#[test]
fn plan_continues_after_a_reboot_with_a_new_boot_id() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve(dir);
    let boot = dir.join("rebooter.boot_id");
    // The "reboot": a new boot id, then the agent dies like a host going down. The test
    // plays systemd and starts the agent again.
    let reboot = format!(
        "echo boot-$(date +%s%N) > {} && kill -9 $PLATTER_AGENT_PID",
        boot.display()
    );
    let start = || agent(dir, port, "rebooter", &["--reboot-command", &reboot]);
    let mut agent = start();
    let file = write(dir, "reboot.yaml", CAMPAIGN);
    wait_agents(dir, 1);
    // Read before submitting: the first "reboot" may come within milliseconds.
    let mut boot_ids = vec![std::fs::read_to_string(&boot).unwrap()];
    let campaign = submit(dir, port, &file);

    let finished =
        format!("SELECT COUNT(*) FROM campaigns WHERE id = '{campaign}' AND state = 'done'");
    let mut restarts = 0;
    wait_for("the campaign to finish", Duration::from_secs(60), || {
        if agent.exited().is_some() {
            restarts += 1;
            boot_ids.push(std::fs::read_to_string(&boot).unwrap());
            agent = start();
        }
        (query_i64(dir, &finished) == 1).then_some(())
    });

    let logs = logs(dir);
    assert_eq!(restarts, 2, "one reboot per repetition\n{logs}");
    boot_ids.dedup();
    assert_eq!(
        boot_ids.len(),
        3,
        "each reboot gave a new boot id: {boot_ids:?}\n{logs}"
    );
    let db = db(dir);
    let count = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(
        count("SELECT COUNT(*) FROM steps WHERE kind = 'reboot' AND state = 'succeeded'"),
        2,
        "{logs}"
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM steps WHERE kind = 'reboot' AND attempt > 1"),
        0,
        "a completed reboot is not re-run"
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM samples WHERE metric = 'wall'"),
        2
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM steps WHERE state = 'failed'"),
        0
    );
    // Each measurement came after its repetition's reboot.
    let order: Vec<(String, i64)> = db
        .prepare("SELECT kind, repetition FROM steps WHERE state = 'succeeded' ORDER BY step_index")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let kinds: Vec<String> = order.iter().map(|(k, r)| format!("{k}@{r}")).collect();
    assert_eq!(
        kinds,
        [
            "sync@1",
            "reboot@1",
            "measure@1",
            "sync@2",
            "reboot@2",
            "measure@2"
        ]
    );
}

#[test]
fn a_reboot_that_does_not_happen_fails_the_step_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve(dir);
    let _agent = agent(
        dir,
        port,
        "rebooter",
        &["--reboot-command", "true", "--reboot-timeout", "1"],
    );
    let file = write(
        dir,
        "reboot.yaml",
        &CAMPAIGN.replace("repeat: 2", "repeat: 1"),
    );
    wait_agents(dir, 1);
    let campaign = submit(dir, port, &file);
    let finished =
        format!("SELECT COUNT(*) FROM campaigns WHERE id = '{campaign}' AND state = 'done'");
    wait_for("the campaign to finish", Duration::from_secs(30), || {
        (query_i64(dir, &finished) == 1).then_some(())
    });
    let error: String = db(dir)
        .query_row(
            "SELECT error FROM steps WHERE kind = 'reboot' AND state = 'failed'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(error.contains("still up 1s later"), "{error}");
    assert!(
        error.contains("boot id boot-of-rebooter-1 unchanged"),
        "{error}"
    );
}

/// `prepare:` across reboots: the drive is purged and filled once, each round reboots the
/// host before its measurement, and the rounds, each a plan of its own, go on after every
/// reboot until the drive is steady. Nothing of the preparation runs again.
#[test]
fn a_prepared_drive_is_purged_and_filled_once_and_its_rounds_ride_through_reboots() {
    if !root_or_skip("it purges and fills a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let drive = Loop::new(dir, "drive.img", 16);
    let (_coordinator, port) = serve(dir);
    let boot = dir.join("rebooter.boot_id");
    let reboot = format!(
        "echo boot-$(date +%s%N) > {} && kill -9 $PLATTER_AGENT_PID",
        boot.display()
    );
    let start = || {
        agent(
            dir,
            port,
            "rebooter",
            &[
                "--reboot-command",
                &reboot,
                "--allow-device",
                &drive.path,
                "--allow-purge",
            ],
        )
    };
    let mut agent = start();
    let file = write(
        dir,
        "prepared.yaml",
        &format!(
            r#"
name: prepared-cold
hosts: {{ names: [rebooter] }}
devices: {{ path: {} }}
storage: {{ fs: none }}
workload:
  command:
    run: "sleep 0.2"
phases:
  before_each: [reboot]
prepare:
  purge: discard
  precondition: {{ fill: 1x, bs: 128k }}
  steady_state: {{ metric: wall, window: 3, range: 20%, slope: 10%, max_rounds: 6 }}
"#,
            drive.path
        ),
    );
    wait_agents(dir, 1);
    let campaign = submit(dir, port, &file);
    let finished =
        format!("SELECT COUNT(*) FROM campaigns WHERE id = '{campaign}' AND state = 'done'");
    let mut restarts = 0;
    wait_for("the campaign to finish", Duration::from_secs(90), || {
        if agent.exited().is_some() {
            restarts += 1;
            agent = start();
        }
        (query_i64(dir, &finished) == 1).then_some(())
    });
    let logs = logs(dir);
    let db = db(dir);
    let count = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    // Three rounds of a steady 0.2 s: steady at the first window, one reboot each.
    assert_eq!(restarts, 3, "{logs}");
    assert_eq!(
        count("SELECT COUNT(*) FROM plans"),
        3,
        "a plan per round\n{logs}"
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM steps WHERE kind = 'measure' AND state = 'succeeded'"),
        3
    );
    for kind in ["purge", "precondition"] {
        assert_eq!(
            count(&format!(
                "SELECT COUNT(*) FROM steps WHERE kind = '{kind}' AND state = 'succeeded'"
            )),
            1,
            "{kind} once\n{logs}"
        );
        assert_eq!(
            count(&format!(
                "SELECT COUNT(*) FROM steps WHERE kind = '{kind}' AND attempt > 1"
            )),
            0,
            "{kind} never again\n{logs}"
        );
    }
    assert_eq!(
        count("SELECT COUNT(*) FROM steps WHERE state = 'failed'"),
        0,
        "{logs}"
    );
}
