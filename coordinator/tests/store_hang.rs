//! A store that hangs instead of failing is a fault too. PostgreSQL frozen with SIGSTOP
//! (the kernel keeps acknowledging its packets, so no TCP timeout fires: a stalled disk or
//! a dead switch looks the same) while two coordinators run a campaign on it: before,
//! `platter health` said "serving" for the whole freeze and `status` blocked until the
//! database came back. Now health says NOT_SERVING within seconds, `status` answers at
//! once saying since when the store is not answering, and after SIGCONT the campaign ends
//! with every measurement once. A coordinator started while its store is down or frozen
//! listens and says why it does not serve yet, and serves within about a second of the
//! store's return; the same deadline holds for SQLite with its lock held by another
//! process.
//!
//! The PostgreSQL tests freeze the test server's processes (`PLATTER_TEST_POSTGRES`, local,
//! as root): one test at a time in this file (`FREEZE`), and every freeze ends with its
//! guard, a failing test's included.

mod common;

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;

/// One frozen server at a time: the tests of this file share it.
static FREEZE: Mutex<()> = Mutex::new(());

/// This file's tests one at a time, taken before a test touches the server (a store made
/// while another test holds the server frozen waits out its connect deadline and fails):
/// `FREEZE` among the threads of `cargo test`, and a lock file among the processes of
/// `cargo nextest`.
struct OneAtATime {
    _thread: std::sync::MutexGuard<'static, ()>,
    _process: std::fs::File,
}

fn one_at_a_time() -> OneAtATime {
    use std::os::fd::AsRawFd;
    let thread = FREEZE.lock().unwrap_or_else(|p| p.into_inner());
    let file = std::fs::File::create(std::env::temp_dir().join("platter-store-hang.lock")).unwrap();
    // SAFETY: flock(2) on a descriptor this function owns; no memory is shared.
    assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) }, 0);
    OneAtATime {
        _thread: thread,
        _process: file,
    }
}

const CAMPAIGN: &str = r#"
name: hang
hosts: { names: [h1] }
matrix:
  n: [1, 2]
workload:
  command:
    run: "sleep 0.2; echo ${n} > /dev/null"
repeat: 40
"#;

/// A new, empty store on the test server (a schema of its own), and the server's URL.
fn fresh_store() -> Option<(String, String)> {
    let server = platter::store::testing::postgres_url()?;
    match platter::store::testing::fresh_postgres(&server) {
        platter::store::db::Location::Postgres(url) => Some((url, server)),
        other => unreachable!("{other:?}"),
    }
}

/// The test server's processes (its postmaster and every child), found through a backend
/// of its own: `pg_backend_pid()`'s parent is the postmaster.
fn server_processes(server: &str) -> Vec<i32> {
    use std::io::{BufRead, Write};
    // A session kept open while its backend's parent is read.
    let mut psql = Command::new("psql")
        .args([server, "-tAq"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("psql");
    let mut stdin = psql.stdin.take().unwrap();
    writeln!(stdin, "SELECT pg_backend_pid();").unwrap();
    let mut line = String::new();
    std::io::BufReader::new(psql.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let backend: i32 = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("psql said {line:?}"));
    let parent = |pid: i32| -> Option<i32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // "pid (comm) state ppid …": comm may hold spaces, so after its last ')'.
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let postmaster = parent(backend).expect("the backend's parent");
    drop(stdin);
    let _ = psql.wait();
    let mut pids = vec![postmaster];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() {
            if parent(pid) == Some(postmaster) {
                pids.push(pid);
            }
        }
    }
    pids
}

/// The server's processes stopped (SIGSTOP) until `thaw` or drop (SIGCONT).
struct Frozen(Vec<i32>);

impl Frozen {
    fn freeze(server: &str) -> Frozen {
        let pids = server_processes(server);
        for &pid in &pids {
            // SAFETY: kill(2) with a pid and a signal number; no memory is shared.
            unsafe { libc::kill(pid, libc::SIGSTOP) };
        }
        Frozen(pids)
    }

    fn thaw(&mut self) {
        for pid in self.0.drain(..) {
            // SAFETY: as in `freeze`.
            unsafe { libc::kill(pid, libc::SIGCONT) };
        }
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        self.thaw();
    }
}

/// `platter serve` with mutual TLS on a free port and store `db`, its log `dir/LOG.log`.
fn serve_db(dir: &Path, db: &str, log: &str, extra: &[&str]) -> (Proc, u16) {
    let tls = identity(dir, "coordinator", "localhost");
    let mut c = platter();
    c.args(["serve", "--listen", "127.0.0.1:0", "--db", db])
        .arg("--tls-dir")
        .arg(tls)
        .args(extra)
        .env("PLATTER_LOG", "info");
    spawn_listening(&mut c, dir, log)
}

/// `platter ARGS` as an operator of the coordinator on `port`: exit code, output (stdout
/// then stderr) and how long it took. Killed after 20 s (a hang is a failure, not a wait).
fn timed(dir: &Path, port: u16, args: &[&str]) -> (i32, String, Duration) {
    let started = Instant::now();
    let out = run_within(operator(dir, port).args(args), Duration::from_secs(20));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text, started.elapsed())
}

/// How long until `platter health` on `port` exits with `code`, asking every 250 ms;
/// panics after `limit`.
fn health_becomes(dir: &Path, port: u16, code: i32, limit: Duration) -> (Duration, String) {
    let started = Instant::now();
    loop {
        let (rc, said, _) = timed(dir, port, &["health"]);
        if rc == code {
            return (started.elapsed(), said);
        }
        assert!(
            started.elapsed() < limit,
            "health on :{port} still exits {rc}, not {code}, after {:?}: {said}\n{}",
            started.elapsed(),
            logs(dir)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn postgres_and_root(why: &str) -> Option<(String, String)> {
    let store = fresh_store()?;
    if !root_or_skip(why) {
        return None;
    }
    Some(store)
}

#[test]
fn a_frozen_postgresql_is_a_fault_health_and_status_say_so_within_seconds_and_nothing_is_lost() {
    let _one = one_at_a_time();
    let Some((db, server)) = postgres_and_root("freezing PostgreSQL's processes") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_a, port_a) = serve_db(dir, &db, "coordinator-a", &[]);
    let (_b, port_b) = serve_db(dir, &db, "coordinator-b", &[]);
    let _h1 = agent(dir, port_a, "h1", &["--coordinator", &url(port_b)]);
    let campaign = submit(dir, port_a, &write(dir, "hang.yaml", CAMPAIGN));
    wait_in(dir, "5 steps done", Duration::from_secs(60), || {
        let s = operator_json(dir, port_a, &["status", &campaign, "--output", "json"]);
        (s["hosts"][0]["steps_done"].as_u64()? >= 5).then_some(())
    });

    // b has read the campaign and the agents too (an operator asked it once): both know
    // them. (A coordinator that never read them says only that its store is not answering.)
    operator_json(dir, port_b, &["status", &campaign, "--output", "json"]);
    agents_json(dir, port_b);
    let mut frozen = Frozen::freeze(&server);
    let froze = Instant::now();
    for (name, port) in [("a", port_a), ("b", port_b)] {
        let (after, said) = health_becomes(dir, port, 1, Duration::from_secs(10));
        eprintln!(
            "coordinator {name}: health exit 1 {:?} into the freeze: {said}",
            froze.elapsed()
        );
        assert!(
            froze.elapsed() <= Duration::from_secs(5),
            "{name}: health took {after:?}"
        );
        assert!(said.contains("not answering"), "{said}");
        let (rc, said, took) = timed(dir, port, &["status", &campaign]);
        eprintln!("coordinator {name}: status answered in {took:?} (exit {rc}):\n{said}");
        assert!(took <= Duration::from_secs(2), "status took {took:?}");
        assert!(said.contains("not answering since"), "{said}");
        // What it knew: the campaign and its host, not an error.
        assert!(said.contains("h1"), "{said}");
        let (_, said, took) = timed(dir, port, &["agents"]);
        assert!(took <= Duration::from_secs(2), "agents took {took:?}");
        assert!(
            said.contains("not answering since") && said.contains("h1"),
            "{said}"
        );
    }
    let log = std::fs::read_to_string(dir.join("coordinator-a.log")).unwrap();
    assert!(log.contains("the store is not answering"), "{log}");

    // Frozen for 20 s in all, then thawed.
    std::thread::sleep(Duration::from_secs(20).saturating_sub(froze.elapsed()));
    frozen.thaw();
    let thawed = Instant::now();
    for port in [port_a, port_b] {
        health_becomes(dir, port, 0, Duration::from_secs(10));
    }
    eprintln!("both serving again {:?} after SIGCONT", thawed.elapsed());
    wait_in(dir, "the campaign to end", Duration::from_secs(120), || {
        let s = operator_json(dir, port_b, &["status", &campaign, "--output", "json"]);
        (s["state"] == "done").then_some(())
    });
    every_repetition_once(dir, port_b, &campaign, 40);
    let log = std::fs::read_to_string(dir.join("coordinator-a.log")).unwrap();
    assert!(log.contains("the store answers again"), "{log}");
}

/// Forwards connections on `listener` to `to`, each both ways, on threads of its own:
/// PostgreSQL "coming back" on a port where nothing listened.
fn forward(listener: TcpListener, to: std::net::SocketAddr) {
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(to) else {
                continue;
            };
            let (mut client_in, mut client_out) = (client.try_clone().unwrap(), client);
            let (mut server_in, mut server_out) = (server.try_clone().unwrap(), server);
            std::thread::spawn(move || std::io::copy(&mut client_in, &mut server_out));
            std::thread::spawn(move || std::io::copy(&mut server_in, &mut client_out));
        }
    });
}

/// `url` with its host and port replaced by `addr`.
fn at(url: &str, addr: std::net::SocketAddr) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (auth, path) = rest.split_once('/').unwrap();
    let user = auth
        .rsplit_once('@')
        .map(|(u, _)| format!("{u}@"))
        .unwrap_or_default();
    format!("{scheme}://{user}{addr}/{path}")
}

#[test]
fn a_coordinator_waits_for_its_store_out_loud_and_serves_within_a_second_of_its_return() {
    let _one = one_at_a_time();
    let Some((db, server)) = postgres_and_root("freezing PostgreSQL's processes") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();

    // Down: nothing listens where the store should be.
    let spare = TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = spare.local_addr().unwrap();
    drop(spare);
    let down = at(&db, gone);
    // Told to, it exits at once instead.
    let started = Instant::now();
    let out = run_within(
        platter().args([
            "serve",
            "--dangerously-insecure",
            "--listen",
            "127.0.0.1:0",
            "--exit-without-store",
            "--db",
            &down,
        ]),
        Duration::from_secs(20),
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("Connection refused") || said.contains("connect"),
        "{said}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    let (_c, port) = serve_db(dir, &down, "coordinator-down", &[]);
    let (_, said) = health_becomes(dir, port, 1, Duration::from_secs(5));
    assert!(said.contains("waiting for its store"), "{said}");
    std::thread::sleep(Duration::from_secs(3));
    let log = std::fs::read_to_string(dir.join("coordinator-down.log")).unwrap();
    assert!(log.contains("waiting for the store"), "{log}");
    let back = Instant::now();
    let real: std::net::SocketAddr = {
        let rest = server.split_once("://").unwrap().1;
        let hostport = rest
            .rsplit_once('@')
            .map_or(rest, |(_, h)| h)
            .split('/')
            .next()
            .unwrap();
        let hostport = if hostport.contains(':') {
            hostport.to_string()
        } else {
            format!("{hostport}:5432")
        };
        std::net::ToSocketAddrs::to_socket_addrs(&hostport)
            .unwrap()
            .next()
            .unwrap()
    };
    forward(TcpListener::bind(gone).unwrap(), real);
    let (after, _) = health_becomes(dir, port, 0, Duration::from_secs(10));
    eprintln!(
        "store down at start: serving {:?} after it came back",
        back.elapsed()
    );
    assert!(after <= Duration::from_secs(3), "{after:?}");

    // Frozen: connecting hangs in PostgreSQL's start-up exchange.
    let mut frozen = Frozen::freeze(&server);
    let (_f, port) = serve_db(dir, &db, "coordinator-frozen", &[]);
    let (_, said) = health_becomes(dir, port, 1, Duration::from_secs(5));
    assert!(
        said.contains("waiting for its store") && said.contains("no answer within"),
        "{said}"
    );
    std::thread::sleep(Duration::from_secs(4));
    frozen.thaw();
    let back = Instant::now();
    let (after, _) = health_becomes(dir, port, 0, Duration::from_secs(10));
    eprintln!(
        "store frozen at start: serving {:?} after SIGCONT",
        back.elapsed()
    );
    assert!(after <= Duration::from_secs(3), "{after:?}");
}

#[test]
fn an_sqlite_store_locked_by_another_process_is_a_fault_within_seconds() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_c, port) = serve(dir);
    health_becomes(dir, port, 0, Duration::from_secs(5));
    // Another process's write transaction: this test's, on the coordinator's file.
    let other = rusqlite::Connection::open(dir.join("coordinator.db")).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let locked = Instant::now();
    let (after, said) = health_becomes(dir, port, 1, Duration::from_secs(10));
    eprintln!("SQLite locked: health exit 1 after {after:?}: {said}");
    assert!(after <= Duration::from_secs(5), "{after:?}");
    assert!(said.contains("locked"), "{said}");
    // Reads go on beside the lock (WAL): status answers at once, and says why.
    let (rc, said, took) = timed(dir, port, &["status"]);
    assert!(took <= Duration::from_secs(2), "status took {took:?}");
    assert!(said.contains("STORE FAULT"), "exit {rc}: {said}");
    other.execute_batch("ROLLBACK").unwrap();
    let (after, _) = health_becomes(dir, port, 0, Duration::from_secs(10));
    eprintln!(
        "SQLite unlocked: serving after {after:?} ({:?} locked)",
        locked.elapsed()
    );
}

/// `platter watch` rides through what passes: PostgreSQL frozen for 5 s under two
/// coordinators (before, watch exited 1 "the store is not answering" right after SIGCONT,
/// in 5 of 7 tries), then the coordinator it follows killed (`--coordinator A,B`: it moves
/// to B). It says each fault once, goes on, and ends with exit 0 when the campaign ends,
/// with every repetition stored once. (Whether the freeze shows as a STORE FAULT line
/// depends on whether a status was read during it — in 1 of 8 runs here the one read
/// waited the freeze out — so only the move to B is asserted as said.)
#[test]
fn watch_rides_through_a_frozen_store_and_moves_to_the_next_coordinator() {
    let _one = one_at_a_time();
    let Some((db, server)) = postgres_and_root("freezing PostgreSQL's processes") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (mut a, port_a) = serve_db(dir, &db, "coordinator-a", &[]);
    let (_b, port_b) = serve_db(dir, &db, "coordinator-b", &[]);
    let _h1 = agent(dir, port_a, "h1", &["--coordinator", &url(port_b)]);
    let campaign = submit(dir, port_a, &write(dir, "hang.yaml", CAMPAIGN));
    let watch_log = dir.join("watch.log");
    let mut watch = Proc {
        child: operator(dir, port_a)
            .args(["watch", &campaign])
            .env(
                "PLATTER_COORDINATOR",
                format!("{},{}", url(port_a), url(port_b)),
            )
            .stdout(std::fs::File::create(dir.join("watch.out")).unwrap())
            .stderr(std::fs::File::create(&watch_log).unwrap())
            .spawn()
            .unwrap(),
        name: "watch".into(),
    };
    wait_in(dir, "5 steps done", Duration::from_secs(60), || {
        let s = operator_json(dir, port_a, &["status", &campaign, "--output", "json"]);
        (s["hosts"][0]["steps_done"].as_u64()? >= 5).then_some(())
    });
    let mut frozen = Frozen::freeze(&server);
    std::thread::sleep(Duration::from_secs(5));
    frozen.thaw();
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        watch.exited().is_none(),
        "watch ended at the thaw: {}",
        std::fs::read_to_string(&watch_log).unwrap()
    );
    wait_in(dir, "10 steps done", Duration::from_secs(60), || {
        let s = operator_json(dir, port_b, &["status", &campaign, "--output", "json"]);
        (s["hosts"][0]["steps_done"].as_u64()? >= 10).then_some(())
    });
    a.kill9();
    let ended = wait_in(dir, "watch to end", Duration::from_secs(180), || {
        watch.exited()
    });
    let said = std::fs::read_to_string(&watch_log).unwrap();
    eprintln!("watch said:\n{said}");
    assert_eq!(ended.code(), Some(0), "{said}");
    assert!(
        said.contains(&format!("trying {}", url(port_b))),
        "the move to b was said: {said}"
    );
    assert!(said.contains("campaign") && said.contains("done"), "{said}");
    every_repetition_once(dir, port_b, &campaign, 40);
}
