//! An agent given several coordinators (`--coordinator A --coordinator B`, a comma list, a
//! name) connects to the first that answers and moves to the next within seconds when its
//! own is gone: killed under it, or dead from the start. Each coordinator here has a store
//! of its own (a plan of one is refused by the other, which is why nothing is planned before
//! a move); `platter agents` on each says where the agent is.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;

/// How long an agent may take to be connected to the next coordinator once its own was
/// killed (the "within a few seconds").
const MOVE_WITHIN: Duration = Duration::from_secs(5);

/// A coordinator with a store of its own in `dir/NAME` (its log there too): plaintext, or
/// mutual TLS with the identity directory `tls`.
fn coordinator(dir: &Path, name: &str, tls: Option<&Path>) -> (Proc, u16) {
    let own = dir.join(name);
    std::fs::create_dir_all(&own).unwrap();
    let mut c = platter();
    c.args(["serve", "--listen", "127.0.0.1:0"])
        .arg("--db")
        .arg(own.join("coordinator.db"))
        // With a line for each resumed TLS session.
        .env("PLATTER_LOG", "info,platter::service::tls=debug");
    match tls {
        Some(tls) => c.arg("--tls-dir").arg(tls),
        None => c.arg("--dangerously-insecure"),
    };
    spawn_listening(&mut c, &own, "coordinator")
}

/// How an operator reaches the coordinators of a test.
enum Client {
    Plaintext,
    /// An operator identity directory; coordinators are dialled by name (`localhost`).
    Tls(PathBuf),
}

impl Client {
    fn url(&self, port: u16) -> String {
        match self {
            Client::Plaintext => format!("http://127.0.0.1:{port}"),
            Client::Tls(_) => format!("https://localhost:{port}"),
        }
    }

    /// `host`'s state as the coordinator on `port` sees it (`idle` once connected), None if
    /// it does not know the host or does not answer.
    fn state(&self, port: u16, host: &str) -> Option<String> {
        let mut c = platter();
        c.args([
            "agents",
            "--output",
            "json",
            "--coordinator",
            &self.url(port),
        ])
        .env_remove("PLATTER_COORDINATOR")
        .env_remove("PLATTER_TLS_DIR");
        match self {
            Client::Plaintext => c.arg("--dangerously-insecure"),
            Client::Tls(dir) => c.arg("--tls-dir").arg(dir),
        };
        let out = c.output().unwrap();
        if !out.status.success() {
            return None;
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        v.as_array()?
            .iter()
            .find(|a| a["host"] == host)
            .and_then(|a| a["state"].as_str().map(String::from))
    }

    /// Waits until `host` is connected (idle) to the coordinator on `port`.
    fn wait_connected(&self, dir: &Path, port: u16, host: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.state(port, host).as_deref() != Some("idle") {
            assert!(
                Instant::now() < deadline,
                "{host} was not connected to the coordinator on {port} within {timeout:?}\n{}",
                all_logs(dir)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The logs of the test's processes (the coordinators' are in their own directories).
fn all_logs(dir: &Path) -> String {
    let mut out = logs(dir);
    for name in ["a", "b"] {
        if dir.join(name).is_dir() {
            out.push_str(&logs(&dir.join(name)));
        }
    }
    out
}

fn agent_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("agent.log")).unwrap_or_default()
}

/// `platter agent` named `mover`, with its log in `dir/agent.log`.
fn start_agent(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Proc {
    let boot = dir.join("mover.boot_id");
    std::fs::write(&boot, "boot-of-mover-1\n").unwrap();
    let boot = boot.display().to_string();
    let mut all = vec!["--name", "mover", "--boot-id-file", &boot];
    all.extend_from_slice(args);
    spawn_agent_with_env(dir, "agent", &all, env)
}

/// Kills the coordinator the agent is connected to and measures how long the agent takes
/// to be connected to the other; asserts it is within `MOVE_WITHIN` and the agent's log
/// names the move.
fn kill_and_measure_the_move(dir: &Path, client: &Client, first: &mut Proc, second: u16) {
    let killed = Instant::now();
    first.kill9();
    client.wait_connected(dir, second, "mover", Duration::from_secs(20));
    let took = killed.elapsed();
    eprintln!("connected to the second coordinator {took:?} after the first was killed");
    assert!(
        took < MOVE_WITHIN,
        "the agent took {took:?} to move\n{}",
        all_logs(dir)
    );
    let second_url = client.url(second);
    let moved = agent_log(dir)
        .lines()
        .filter(|l| l.contains("connected to another coordinator"))
        .map(String::from)
        .collect::<Vec<_>>();
    assert_eq!(moved.len(), 1, "one line per move\n{}", agent_log(dir));
    assert!(
        moved[0].contains(&format!("coordinator={second_url}")),
        "{}",
        moved[0]
    );
}

#[test]
fn an_agent_moves_to_the_next_coordinator_within_seconds_when_its_own_is_killed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (mut a, port_a) = coordinator(dir, "a", None);
    let (_b, port_b) = coordinator(dir, "b", None);
    let client = Client::Plaintext;
    let (url_a, url_b) = (client.url(port_a), client.url(port_b));
    let _agent = start_agent(
        dir,
        &[
            "--dangerously-insecure",
            "--coordinator",
            &url_a,
            "--coordinator",
            &url_b,
        ],
        &[],
    );
    // The first that answers, and only that one.
    client.wait_connected(dir, port_a, "mover", Duration::from_secs(20));
    assert_eq!(client.state(port_b, "mover"), None, "{}", all_logs(dir));
    assert!(
        agent_log(dir).contains(&format!("coordinator={url_a}")),
        "the log says where it is connected\n{}",
        agent_log(dir)
    );

    kill_and_measure_the_move(dir, &client, &mut a, port_b);

    // Not just a hello: the agent works for its new coordinator.
    let campaign = write(
        dir,
        "after-move.yaml",
        "name: after-move\nhosts: { names: [mover] }\nworkload:\n  command:\n    run: \"true\"\nrepeat: 1\n",
    );
    common::run_ok(
        platter()
            .args(["submit", "--dangerously-insecure", "--coordinator", &url_b])
            .arg(&campaign),
    );
    let b = dir.join("b");
    let done = "SELECT COUNT(*) FROM campaigns WHERE state = 'done'";
    let deadline = Instant::now() + Duration::from_secs(30);
    while query_i64(&b, done) != 1 {
        assert!(
            Instant::now() < deadline,
            "the campaign was not done on the second coordinator within 30 s\n{}\n{}",
            store_summary(&b),
            all_logs(dir)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_agent_whose_first_coordinator_is_down_from_the_start_connects_to_the_next() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // A port nothing listens on: bound by the kernel's choice, then let go.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (_b, port_b) = coordinator(dir, "b", None);
    let client = Client::Plaintext;
    // Both in one value of the environment variable, as a unit file could set it.
    let list = format!("{},{}", client.url(dead), client.url(port_b));
    let started = Instant::now();
    let _agent = start_agent(
        dir,
        &["--dangerously-insecure"],
        &[("PLATTER_COORDINATOR", &list)],
    );
    client.wait_connected(dir, port_b, "mover", Duration::from_secs(20));
    eprintln!(
        "connected to the second coordinator {:?} after the agent started",
        started.elapsed()
    );
    let log = agent_log(dir);
    assert!(
        log.contains(&format!("coordinator={}", client.url(dead)))
            && log.contains("trying the next coordinator"),
        "the failed dial is logged\n{log}"
    );
    assert!(
        !log.contains("connected to another coordinator"),
        "connecting for the first time is no move\n{log}"
    );
}

/// With TLS the agent dials the addresses a name resolves to, and checks the coordinator's
/// certificate against the name: the coordinators' certificate here names `localhost`
/// only, not 127.0.0.1, so a check against the address dialled would refuse it.
#[test]
fn with_tls_an_agent_moves_between_coordinators_dialled_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let pki = dir.join("pki");
    for args in [
        &["certs", "init", "--dir"][..],
        &["certs", "issue", "coordinator", "localhost", "--dir"][..],
    ] {
        common::run_ok(platter().args(args).arg(&pki));
    }
    let server = pki.join("coordinator-localhost");
    let agent_tls = identity(dir, "agent", "mover").display().to_string();
    let client = Client::Tls(identity(dir, "operator", "tester"));
    let (mut a, port_a) = coordinator(dir, "a", Some(&server));
    let (_b, port_b) = coordinator(dir, "b", Some(&server));
    let list = format!("{},{}", client.url(port_a), client.url(port_b));
    let _agent = start_agent(dir, &["--coordinator", &list, "--tls-dir", &agent_tls], &[]);
    client.wait_connected(dir, port_a, "mover", Duration::from_secs(20));
    kill_and_measure_the_move(dir, &client, &mut a, port_b);
    // A and B serve one certificate: the agent's session with A resumed on B, no
    // certificates sent or verified again (issue 32).
    let b_log = logs(&dir.join("b"));
    assert!(b_log.contains("TLS session resumed"), "{b_log}");
    // The address dialled is in the log beside the name given.
    assert!(
        agent_log(dir).contains(&format!(
            "{} (https://127.0.0.1:{port_b})",
            client.url(port_b)
        )),
        "{}",
        agent_log(dir)
    );
}

/// A coordinator that is there but silent (stopped, or its host gone without closing the
/// connection) is noticed by the agent's HTTP/2 pings and left after 10–15 s.
#[test]
fn an_agent_leaves_a_coordinator_that_stopped_answering() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (a, port_a) = coordinator(dir, "a", None);
    let (_b, port_b) = coordinator(dir, "b", None);
    let client = Client::Plaintext;
    let list = format!("{},{}", client.url(port_a), client.url(port_b));
    let _agent = start_agent(
        dir,
        &["--dangerously-insecure", "--coordinator", &list],
        &[],
    );
    client.wait_connected(dir, port_a, "mover", Duration::from_secs(20));
    let pid = a.child.id() as libc::pid_t;
    let stopped = Instant::now();
    // SAFETY: kill has no memory preconditions; the pid is our child's, not yet reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    client.wait_connected(dir, port_b, "mover", Duration::from_secs(30));
    let took = stopped.elapsed();
    eprintln!("connected to the second coordinator {took:?} after the first was stopped");
    assert!(
        took < Duration::from_secs(20),
        "the agent took {took:?} to leave a silent coordinator\n{}",
        all_logs(dir)
    );
    // SAFETY: as above; the process is killed when `a` is dropped.
    unsafe { libc::kill(pid, libc::SIGCONT) };
}
