//! Helpers for tests that run real `platter` processes on 127.0.0.1.
#![allow(dead_code)]

pub mod browser;
pub mod flagged;
pub mod fleet;
pub mod web;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn platter() -> Command {
    Command::new(env!("CARGO_BIN_EXE_platter"))
}

/// Skips the calling test: prints `SKIPPED <test>: <why>` past the test harness's capture,
/// so that a passing run still shows what it left out, and returns false. With
/// `PLATTER_TEST_STRICT=1` (`platter_agent::testing::strict`), which `.ci/run` sets, it
/// fails the test instead: CI can never skip one quietly.
pub fn skip(why: &str) -> bool {
    // libtest names each test's thread after the test.
    let current = std::thread::current();
    let test = current.name().unwrap_or("a test");
    if platter_agent::testing::strict() {
        panic!("{test} {why}, and PLATTER_TEST_STRICT=1 forbids skipping it");
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
    false
}

/// The PostgreSQL server the tests may make schemas on, `PLATTER_TEST_POSTGRES` (CI starts
/// one); without it the test is skipped, saying so (`skip`).
pub fn postgres_or_skip() -> Option<String> {
    match std::env::var("PLATTER_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            skip(
                "needs PostgreSQL; set PLATTER_TEST_POSTGRES to a database URL \
                 (postgres://USER:PASSWORD@HOST/DB) to include it",
            );
            None
        }
    }
}

/// Whether a test that needs root (loop devices, mounts) can run here. As a normal user —
/// a contributor running the README's `cargo test --workspace` — it is skipped, saying so
/// (`skip`).
pub fn root_or_skip(why: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    skip(&format!(
        "needs root ({why}); run the tests as root to include it"
    ))
}

/// Whether each of `tools` (program, Debian package) is where the agent finds programs
/// (PATH, then /usr/local/sbin, /usr/sbin and /sbin, where Debian puts bonnie++ and the
/// mkfs tools); if one is not, the test is skipped naming them and their packages
/// (`skip`).
pub fn tools_or_skip(tools: &[(&str, &str)]) -> bool {
    let missing: Vec<String> = tools
        .iter()
        .filter(|(program, _)| platter_agent::testing::find_program(program).is_none())
        .map(|(program, package)| format!("{program} (apt install {package})"))
        .collect();
    if missing.is_empty() {
        return true;
    }
    skip(&format!(
        "needs {}, which the agent cannot find",
        missing.join(", ")
    ))
}

/// Kills the child on drop, so a failing test leaves no process behind.
pub struct Proc {
    pub child: Child,
    pub name: String,
}

impl Proc {
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn log_file(dir: &Path, name: &str) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{name}.log")))
        .unwrap()
}

/// The test's fleet CA in `dir/pki` (made by `platter certs init` on first use) and the
/// identity directory of `role` `name` (made by `platter certs issue`).
pub fn identity(dir: &Path, role: &str, name: &str) -> PathBuf {
    let pki = dir.join("pki");
    if !pki.join("ca/ca.pem").exists() {
        certs(&["init", "--dir"], &pki);
    }
    let out = pki.join(format!("{role}-{name}"));
    if !out.join("cert.pem").exists() {
        let names: Vec<&str> = if role == "coordinator" {
            vec![name, "127.0.0.1"]
        } else {
            vec![name]
        };
        let mut args = vec!["issue", role];
        args.extend(names);
        args.push("--dir");
        certs(&args, &pki);
    }
    out
}

fn certs(args: &[&str], pki: &Path) {
    run_ok(platter().arg("certs").args(args).arg(pki));
}

/// Runs `cmd` to its end and returns what it printed; panics, showing the command and its
/// stderr, unless it succeeded.
pub fn run_ok(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The coordinator's address for clients.
pub fn url(port: u16) -> String {
    format!("https://127.0.0.1:{port}")
}

/// A coordinator with mutual TLS (the identity in dir/pki/coordinator-localhost) on a port of the
/// kernel's choosing, and that port.
pub fn serve(dir: &Path) -> (Proc, u16) {
    serve_with(dir, &[])
}

pub fn serve_with(dir: &Path, extra: &[&str]) -> (Proc, u16) {
    spawn_listening(
        &mut serve_command(dir, "127.0.0.1:0", extra),
        dir,
        "coordinator",
    )
}

/// A fresh, migrated PostgreSQL store for coordinators to share, as its location and URL;
/// `None` (the test skips, or fails when strict) without a server.
pub fn shared_postgres_or_skip() -> Option<(platter::store::db::Location, String)> {
    let Some(server) = platter::store::testing::postgres_url() else {
        postgres_or_skip();
        return None;
    };
    let location = platter::store::testing::fresh_postgres(&server);
    let platter::store::db::Location::Postgres(db) = &location else {
        unreachable!()
    };
    let db = db.clone();
    run_ok(platter().args(["db", "migrate", "--db", &db]));
    Some((location, db))
}

/// `platter serve` named `name` on the PostgreSQL store `db` (several share one), with
/// the test's coordinator identity, on a port of the kernel's choosing; its log is
/// `dir/NAME.log`.
pub fn serve_named(dir: &Path, db: &str, name: &str) -> (Proc, u16) {
    let mut c = platter();
    c.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--db",
        db,
        "--name",
        name,
    ])
    .arg("--tls-dir")
    .arg(identity(dir, "coordinator", "localhost"))
    .env("PLATTER_LOG", "info");
    spawn_listening(&mut c, dir, name)
}

/// The coordinator started again on the port it had (its agents know that one). Were the
/// port taken in between, the restart fails saying so rather than the agents never
/// finding it.
pub fn serve_again(dir: &Path, port: u16) -> Proc {
    let listen = format!("127.0.0.1:{port}");
    let (proc, again) = spawn_listening(&mut serve_command(dir, &listen, &[]), dir, "coordinator");
    assert_eq!(again, port);
    proc
}

/// `platter serve` on `dir/coordinator.db` with the test's coordinator identity, not started.
pub fn serve_command(dir: &Path, listen: &str, extra: &[&str]) -> Command {
    let tls = identity(dir, "coordinator", "localhost");
    let mut c = platter();
    c.args(["serve", "--listen", listen])
        .arg("--tls-dir")
        .arg(tls)
        .args(extra)
        .arg("--db")
        .arg(dir.join("coordinator.db"))
        .env("PLATTER_LOG", "info");
    c
}

/// Starts a server (`platter serve --listen 127.0.0.1:0 …`) with its stderr in
/// `dir/LOG.log` and waits for the address it announces there once it is bound
/// ("listening on ADDRESS"): the test gets the port the server holds, never one that was
/// free a moment before and could have been taken since.
pub fn spawn_listening(cmd: &mut Command, dir: &Path, log: &str) -> (Proc, u16) {
    let path = dir.join(format!("{log}.log"));
    // Only what this process writes: a restart appends to the same log.
    let from = std::fs::metadata(&path).map_or(0, |m| m.len() as usize);
    let child = cmd
        .stdout(Stdio::null())
        .stderr(log_file(dir, log))
        .spawn()
        .unwrap();
    let mut proc = Proc {
        child,
        name: log.into(),
    };
    let what = format!("{log} to say where it listens");
    let port = wait_in(dir, &what, Duration::from_secs(20), || {
        if let Some(status) = proc.exited() {
            panic!("{log} ended ({status}) before it listened\n{}", logs(dir));
        }
        let text = std::fs::read(&path).ok()?;
        let text = String::from_utf8_lossy(text.get(from..)?).into_owned();
        // Whole lines only: a line may be written in pieces.
        text.split_inclusive('\n')
            .filter(|l| l.ends_with('\n'))
            .find_map(|l| l.trim_end().strip_prefix("listening on ")?.parse().ok())
            .map(|addr: std::net::SocketAddr| addr.port())
    });
    (proc, port)
}

/// An agent of the test's fleet: its own certificate, boot id file, state dir and log.
pub fn agent(dir: &Path, port: u16, name: &str, extra: &[&str]) -> Proc {
    let args = agent_args(dir, port, name, extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    spawn_agent(dir, name, &args)
}

/// The arguments `agent` gives `platter agent` (all but its state directory).
pub fn agent_args(dir: &Path, port: u16, name: &str, extra: &[&str]) -> Vec<String> {
    let boot = dir.join(format!("{name}.boot_id"));
    if !boot.exists() {
        std::fs::write(&boot, format!("boot-of-{name}-1\n")).unwrap();
    }
    let tls = identity(dir, "agent", name).display().to_string();
    let (boot, url) = (boot.display().to_string(), url(port));
    let mut args = vec!["--coordinator", &url, "--name", name, "--tls-dir", &tls];
    args.extend(["--boot-id-file", &boot]);
    args.extend_from_slice(extra);
    args.into_iter().map(String::from).collect()
}

/// `platter agent ARGS` with its state in `dir/LOG.state` and its log in `dir/LOG.log`.
pub fn spawn_agent(dir: &Path, log: &str, args: &[&str]) -> Proc {
    spawn_agent_with_env(dir, log, args, &[])
}

/// `spawn_agent` with `env` set for the agent.
pub fn spawn_agent_with_env(dir: &Path, log: &str, args: &[&str], env: &[(&str, &str)]) -> Proc {
    let child = agent_command(dir, log, args)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(log_file(dir, log))
        .spawn()
        .unwrap();
    Proc {
        child,
        name: log.into(),
    }
}

/// `platter agent ARGS` with its state in `dir/LOG.state`, not started.
pub fn agent_command(dir: &Path, log: &str, args: &[&str]) -> Command {
    let mut c = platter();
    c.arg("agent")
        .args(args)
        .arg("--state-dir")
        .arg(dir.join(format!("{log}.state")))
        .env("PLATTER_LOG", "info");
    c
}

/// Runs `cmd` to its end, which must come within `limit` (else it is killed and the test
/// fails): for a command that should stop at once, not serve.
pub fn run_within(cmd: &mut Command, limit: Duration) -> std::process::Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}; it said: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Polls `f` until it returns Some, or panics with `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `wait_for` in a test directory: on timeout the panic shows what the logs and the store
/// say at that moment (not when the wait began).
pub fn wait_in<T>(
    dir: &Path,
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() >= deadline {
            panic!(
                "timed out after {timeout:?} waiting for {what}\n{}\n{}",
                store_summary(dir),
                logs(dir)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the coordinator has stored the hellos of `n` agents.
pub fn wait_agents(dir: &Path, n: i64) {
    wait_in(
        dir,
        &format!("{n} agent(s)"),
        Duration::from_secs(20),
        || (query_i64(dir, "SELECT COUNT(*) FROM agents") == n).then_some(()),
    );
}

/// Campaigns, plans and step counts in the coordinator's store, for a failure message.
pub fn store_summary(dir: &Path) -> String {
    let Some(c) = try_db(dir) else {
        return "(no coordinator.db)".into();
    };
    let rows = |sql: &str| -> Vec<String> {
        let Ok(mut stmt) = c.prepare(sql) else {
            return vec![format!("(cannot query: {sql})")];
        };
        let n = stmt.column_count();
        stmt.query_map([], |r| {
            (0..n)
                .map(|i| {
                    r.get_ref(i).map(|v| match v {
                        rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into(),
                        other => format!("{other:?}"),
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .map(|v| v.join(" "))
        })
        .map(|it| it.flatten().collect())
        .unwrap_or_default()
    };
    let mut out = String::from("--- store\n");
    for sql in [
        "SELECT id, name, state FROM campaigns",
        "SELECT id, campaign_id, host, state, queued_seq FROM plans ORDER BY queued_seq",
        "SELECT host, state, COUNT(*), MAX(finished_unix_ns) FROM steps GROUP BY host, state",
    ] {
        for line in rows(sql) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// Opens the coordinator's database read-only (WAL allows it while the coordinator runs).
pub fn db(dir: &Path) -> rusqlite::Connection {
    try_db(dir).expect("the coordinator's database")
}

/// `db`, or None while the coordinator has not made its database yet.
pub fn try_db(dir: &Path) -> Option<rusqlite::Connection> {
    let c = rusqlite::Connection::open_with_flags(
        dir.join("coordinator.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .ok()?;
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    Some(c)
}

/// The query's single number, or -1 while the database does not exist yet.
pub fn query_i64(dir: &Path, sql: &str) -> i64 {
    let Some(c) = try_db(dir) else {
        return -1;
    };
    c.query_row(sql, [], |r| r.get(0)).unwrap_or(-1)
}

/// Submits a campaign file through the CLI and returns its id.
pub fn submit(dir: &Path, port: u16, file: &Path) -> String {
    let out = run_ok(operator(dir, port).arg("submit").arg(file));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `platter` with an operator's client settings in the environment (PLATTER_COORDINATOR,
/// PLATTER_TLS_DIR), as an operator's shell would have them.
pub fn operator(dir: &Path, port: u16) -> Command {
    let tls = identity(dir, "operator", "tester");
    let mut c = platter();
    c.env("PLATTER_COORDINATOR", url(port))
        .env("PLATTER_TLS_DIR", tls);
    c
}

/// `platter ARGS` as an operator, its stdout parsed as JSON; panics if the command fails.
pub fn operator_json(dir: &Path, port: u16, args: &[&str]) -> serde_json::Value {
    let out = run_ok(operator(dir, port).args(args));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `platter agents --output json` as an operator.
pub fn agents_json(dir: &Path, port: u16) -> serde_json::Value {
    operator_json(dir, port, &["agents", "--output", "json"])
}

/// The campaign's report on the coordinator on `port` has `n` wall samples in every cell,
/// none missing, no step failed: each repetition stored exactly once.
pub fn every_repetition_once(dir: &Path, port: u16, campaign: &str, n: u64) {
    let report = operator_json(dir, port, &["report", campaign, "--format", "json"]);
    for cell in report["cells"].as_array().unwrap() {
        let wall = wall_of(cell);
        assert_eq!(wall["n"], n, "every repetition once: {cell}");
    }
    assert_eq!(report["measurements_missing"], 0, "{report}");
    assert_eq!(report["steps_failed"], 0, "{report}");
}

/// A cell's `wall` metric in a report's JSON.
pub fn wall_of(cell: &serde_json::Value) -> &serde_json::Value {
    cell["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "wall")
        .unwrap_or_else(|| panic!("no wall metric in {cell}"))
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The logs of a test's processes, for a failure message.
pub fn logs(dir: &Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "log") {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            out.push_str(&format!("--- {}\n", p.display()));
            for l in tail.into_iter().rev() {
                out.push_str(l);
                out.push('\n');
            }
        }
    }
    out
}

/// A loop device on a sparse image file in `dir`: the tests' drive, never a real disk.
/// Anything still mounted from it is unmounted, and it is detached, on drop.
pub struct Loop {
    pub path: String,
}

impl Loop {
    pub fn new(dir: &Path, name: &str, mib: u64) -> Loop {
        let image = dir.join(name);
        std::fs::File::create(&image)
            .unwrap()
            .set_len(mib << 20)
            .unwrap();
        let out = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&image)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Loop {
            path: String::from_utf8(out.stdout).unwrap().trim().to_string(),
        }
    }

    /// Lines of /proc/self/mounts whose source is this device.
    pub fn mounts(&self) -> Vec<String> {
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        mounts
            .lines()
            .filter(|l| l.split(' ').next() == Some(self.path.as_str()))
            .map(String::from)
            .collect()
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        for m in self.mounts() {
            let _ = Command::new("umount")
                .arg(m.split(' ').nth(1).unwrap())
                .status();
        }
        let _ = Command::new("losetup").args(["-d", &self.path]).status();
    }
}

/// The end record of a measure `step` that succeeded with `samples`, as an agent sends it.
pub fn measured(
    seq: u64,
    plan_id: &str,
    step: &platter_proto::model::Step,
    started_unix_ns: i64,
    samples: Vec<platter_proto::model::Sample>,
) -> platter_proto::model::Record {
    use platter_proto::model::{Record, RecordKind, StepEvent, StepState};
    Record {
        seq,
        kind: RecordKind::Step(StepEvent {
            plan_id: plan_id.to_string().into(),
            kind: "measure".into(),
            step_index: step.index,
            cell_id: step.cell_id.clone(),
            repetition: step.repetition,
            attempt: 1,
            state: StepState::Succeeded,
            started_unix_ns,
            finished_unix_ns: started_unix_ns,
            exit_status: 0,
            stderr_tail: String::new(),
            error: String::new(),
            samples,
        }),
    }
}

/// The hello of a fake agent (a test speaking AgentLink itself): host `host` holding
/// `held`, no devices, labels or tools.
pub fn fake_hello(host: &str, boot_id: &str, held: Vec<String>) -> platter_proto::v1::Hello {
    platter_proto::v1::Hello {
        host: host.into(),
        boot_id: boot_id.into(),
        agent_version: "test".into(),
        held_plan_ids: held,
        next_seq: 1,
        acked_seq: 0,
        devices: Vec::new(),
        labels: Default::default(),
        tools: Vec::new(),
    }
}

/// Opens an AgentLink stream to the plaintext coordinator at `url` with `hello`, as a fake
/// agent: the coordinator's stream, and the sender that keeps the agent's side open.
pub async fn fake_link(
    url: &str,
    hello: platter_proto::v1::Hello,
) -> (
    tonic::Streaming<platter_proto::v1::CoordinatorMessage>,
    tokio::sync::mpsc::Sender<platter_proto::v1::AgentMessage>,
) {
    use platter_proto::v1 as pb;
    let mut client = pb::agent_link_client::AgentLinkClient::connect(url.to_string())
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(pb::AgentMessage {
        kind: Some(pb::agent_message::Kind::Hello(hello)),
    })
    .await
    .unwrap();
    let inbound = client
        .open(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    (inbound, tx)
}

/// A user of this host made for a test (`useradd`, no home: the campaign names one), removed
/// when dropped. Needs root.
pub struct TestUser(pub String);

impl TestUser {
    /// `prefix` and this process's id: tests running at once get users of their own.
    pub fn new(prefix: &str) -> TestUser {
        let name = format!("{prefix}{}", std::process::id() % 100_000);
        let ok = Command::new("useradd")
            .args(["--no-create-home", "--shell", "/bin/sh", &name])
            .status()
            .expect("useradd")
            .success();
        assert!(ok, "useradd {name}");
        TestUser(name)
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.0).status();
    }
}
