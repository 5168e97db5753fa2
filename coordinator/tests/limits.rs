//! Limits that are checked, not discovered: a plan larger than gRPC's default 4 MiB is
//! delivered (up to `MAX_PLAN_BYTES`), and cancelling always frees the host for its next
//! campaign.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn a_plan_over_4_mib_is_delivered_and_cancel_frees_its_host() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let port = free_port();
    let _coordinator = serve(dir, port);
    let _agent = agent(dir, port, "rc66", &[]);
    wait_agents(dir, 1);
    // 4 cells × 1,000 repetitions of a 1,200-character command: a ~5 MB plan, which
    // tonic's default message limit left undeliverable for good.
    let long = format!("true {}", "x".repeat(1200));
    let big = write(
        dir,
        "big.yaml",
        &format!(
            "name: big\nhosts: {{ names: [rc66] }}\nmatrix: {{ n: [1, 2, 3, 4] }}\n\
             workload: {{ command: {{ run: \"sleep 0.2; {long} ${{n}}\" }} }}\nrepeat: 1000\n"
        ),
    );
    let small = write(
        dir,
        "small.yaml",
        "name: small\nhosts: { names: [rc66] }\nworkload: { command: { run: \"true\" } }\nrepeat: 2\n",
    );
    let big_id = submit(dir, port, &big);
    let small_id = submit(dir, port, &small);
    let body: i64 = query_i64(dir, "SELECT MAX(LENGTH(body)) FROM plans");
    assert!(body > 4 << 20, "the plan is over 4 MiB: {body} bytes");
    wait_in(
        dir,
        "the big plan accepted",
        Duration::from_secs(60),
        || {
            (query_i64(
            dir,
            &format!("SELECT COUNT(*) FROM plans WHERE campaign_id = '{big_id}' AND state = 'accepted'"),
        ) == 1)
            .then_some(())
        },
    );
    let out = operator(dir, port)
        .args(["cancel", &big_id])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The host is free again: the queued campaign runs to its end.
    wait_in(
        dir,
        "the next campaign to finish",
        Duration::from_secs(120),
        || {
            (query_i64(
                dir,
                &format!(
                    "SELECT COUNT(*) FROM campaigns WHERE id = '{small_id}' AND state = 'done'"
                ),
            ) == 1)
                .then_some(())
        },
    );
    assert_eq!(
        query_i64(
            dir,
            &format!(
                "SELECT COUNT(*) FROM plans WHERE campaign_id = '{big_id}' AND state = 'cancelled'"
            )
        ),
        1
    );
    assert!(!logs(dir).contains("decoded message length too large"));
}
