//! Operator commands ride through what passes: given several coordinators (`--coordinator
//! A,B`, or a list in the client file) they move to the next when one is gone, and they
//! keep trying — saying so once — until one answers, for at most `--retry-for`. What the
//! user must act on is not retried. (`watch` under a frozen PostgreSQL and a killed
//! coordinator: `store_hang.rs`.)

mod common;

use std::time::{Duration, Instant};

use common::*;

/// A port nothing listens on (bound and let go: the kernel does not hand it out again at
/// once).
fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn commands_move_to_the_next_coordinator_and_wait_for_one_that_comes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_b, port_b) = serve(dir);
    let dead = url(dead_port());
    let both = format!("{dead},{}", url(port_b));

    // The first named is gone: each command asks the next, and says it did.
    for args in [
        &["agents"][..],
        &["status"],
        &["agents", "--output", "json"],
    ] {
        let out = run_ok(
            operator(dir, port_b)
                .env("PLATTER_COORDINATOR", &both)
                .args(args),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("trying {}", url(port_b))),
            "{args:?}: {err}"
        );
    }

    // None answers: tried for --retry-for, then an error naming the coordinator.
    let started = Instant::now();
    let out = run_within(
        operator(dir, port_b).args(["agents", "--coordinator", &dead, "--retry-for", "2s"]),
        Duration::from_secs(30),
    );
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        took >= Duration::from_secs(2),
        "gave up after {took:?}: {err}"
    );
    assert!(err.contains("trying again"), "{err}");
    assert!(
        err.contains(&format!("connecting to coordinator {dead}")),
        "{err}"
    );
    // --retry-for 0: at once.
    let started = Instant::now();
    let out = run_within(
        operator(dir, port_b).args(["status", "--coordinator", &dead, "--retry-for", "0"]),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(started.elapsed() < Duration::from_secs(2));

    // A coordinator that comes while the command waits: it goes on, and says so.
    let port = dead_port();
    let waiting = operator(dir, port_b)
        .args(["agents", "--coordinator", &url(port), "--retry-for", "60s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    // A store of its own: b holds the test's.
    let mut c = platter();
    c.args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--tls-dir")
        .arg(identity(dir, "coordinator", "localhost"))
        .arg("--db")
        .arg(dir.join("late.db"));
    let (_late, late) = spawn_listening(&mut c, dir, "late-coordinator");
    assert_eq!(late, port);
    let out = waiting.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("trying again"), "{err}");
    assert!(err.contains("answers again"), "{err}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("no agent has connected yet"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // What the user must act on is not retried: an unknown campaign.
    let started = Instant::now();
    let out = run_within(
        operator(dir, port_b)
            .env("PLATTER_COORDINATOR", &both)
            .args(["status", "no-such-campaign"]),
        Duration::from_secs(30),
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no campaign"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
