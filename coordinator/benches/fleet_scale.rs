//! Fleet scale: can one coordinator on 2 cores hold N connected agents in under 1 GiB and
//! hand plans to M of them within a second? And with two coordinators on one PostgreSQL
//! store: a campaign to agents on both, and what it costs when one of them dies.
//!
//! Run: `cargo bench -p platter --bench fleet_scale -- [N] [M]` (defaults 10000 1000).
//!
//! It starts the release `platter serve` with mutual TLS as a child process (the binary
//! cargo built for this bench, or `PLATTER_BIN`) and opens N AgentLink streams from this
//! process, each on its own TCP+TLS connection with its own agent certificate, like real
//! agents (same HTTP/2 keep-alive settings, a heartbeat every 5 s). The first M agents say
//! `wave=one` in their hello; a campaign selecting that label is submitted with
//! `platter submit` and the bench waits until each of the M streams has received its plan
//! (the fan-out's "all" is the moment the last of them arrived). The fake agents do not
//! run or accept plans.
//!
//! Prints the coordinator's RSS, peak RSS, threads and CPU per phase (from /proc), the
//! connect time, how long after it `platter agents` lists every agent (a stream is open
//! before its hello is stored) and the plan fan-out times; also the CPU that other
//! processes used meanwhile (on 2 shared cores it skews every figure). Exits non-zero when something broke (the
//! coordinator died, agents could not connect or were dropped, plans went missing, to the
//! wrong agents or twice to one, an agent could not reconnect after a failover), not when a
//! target is missed.
//!
//! Two coordinators (both need `PLATTER_BENCH_POSTGRES`: only PostgreSQL is shared):
//! * `FLEET_COORDINATORS=2` — coordinators A and B on one new schema, same PKI, each on a
//!   port of its own; N agents connect to A (from this process) and N to B (from a second
//!   process running this bench's binary: one process may hold at most `RLIMIT_NOFILE`
//!   connections, 20,000 in the container this was written in, and its hard limit cannot
//!   be raised there without `CAP_SYS_RESOURCE`). Agent names are a00000 … for A's,
//!   a{N} … for B's; the first M of *each* coordinator carry `wave=one`, so the campaign,
//!   submitted through A, has 2·M hosts and B learns of its plans by `NOTIFY`. Agents are
//!   given both addresses (their own coordinator first).
//! * `FLEET_FAILOVER=1` — A and B on one store, the N agents given both addresses (A
//!   first) all connect to A; after the idle window and the fan-out through A, A is
//!   SIGKILLed and the bench times until every agent that was on A has its stream to B
//!   open (B read its hello and answered with the response headers, as `platter-agent`
//!   counts itself connected). The fake agents move like `platter-agent` (agent/src/link.rs:
//!   the next coordinator at once when a stream ends, jittered exponential backoff
//!   100 ms … 5 s only after a whole round of them failed; no limit on dials in flight;
//!   the plan they hold named in the new hello). Prints first / median / p90 / last
//!   reconnect after the kill and B's CPU, RSS and PostgreSQL connections during the storm.
//!
//! Environment:
//! * `PLATTER_BIN` — the `platter` binary (default: the one built with this bench).
//! * `FLEET_IDLE_SECS` — the idle window (default 30).
//! * `FLEET_CONCURRENCY` — handshakes in flight at once while connecting, per agent
//!   process (default 200; not applied to reconnects after a failover).
//! * `FLEET_DEVICES` — devices in each hello's inventory (default 0).
//! * `FLEET_KEEPALIVE=0` — no HTTP/2 keep-alive pings from the agents (by default the
//!   fake ones ping every 10 s with a 20 s timeout, as real agents did until
//!   agent/src/link.rs's `PING_INTERVAL` and `PING_TIMEOUT` became 5 s: kept so the idle
//!   figures stay comparable; a coordinator that is SIGKILLed closes its connections, so
//!   the failover does not depend on it).
//! * `FLEET_DIR` — where the PKI, database and coordinator log go (default: a temporary
//!   directory on the disk of `TMPDIR`, removed at the end unless `FLEET_KEEP=1`).
//! * `PLATTER_BENCH_POSTGRES` — a PostgreSQL server URL: the coordinators' store is a new
//!   schema there instead of an SQLite file. Each coordinator's connections carry the
//!   `application_name` fleet-a / fleet-b, and the bench samples their number from
//!   `pg_stat_activity` (with `psql`, when it is installed) against `max_connections`.
//! * `FLEET_COORDINATORS=2`, `FLEET_FAILOVER=1` — see above.
//! * `FLEET_RESUME=0` — each fake agent makes a new TLS configuration per connection, so
//!   no session resumes (as every agent did before issue 32); by default one per agent,
//!   as `platter-agent` keeps, and a failover's reconnects resume their sessions on B
//!   (A and B serve one certificate).
//! * `FLEET_PERF` — a directory: record a `perf record -e cpu-clock -g` profile of the
//!   coordinator (A) per phase (connect.data, idle.data, fanout.data) there.
//!
//! File descriptors: the bench raises its soft `RLIMIT_NOFILE` to the hard limit (children
//! inherit it); a process needs one per agent connection and some 20 more.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use common::agents::{agent, issue_agents, mono_ns, AgentSpec, Fleet, C};
use common::children::AgentProcess;
use common::procs::{
    built_platter_bin, clk_tck, cpu_secs, env_or, fleet_pki, log_tail, machine_ticks, mib,
    percentile, psql, raise_nofile, snap, Coordinator, ProcSnap, WorkDir,
};
use platter::pki::Ca;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

const PLAN_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the agents of a killed coordinator may take to be connected to another.
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(300);

fn main() {
    common::children::main("fleet_scale", run)
}

/// The processes' state at one point: each coordinator (None once dead), this bench with
/// its agent process, the machine.
struct Mark {
    t: Instant,
    coords: Vec<Option<ProcSnap>>,
    me: ProcSnap,
    machine: u64,
}

fn mark(coords: &[Coordinator], agents: Option<&AgentProcess>) -> Mark {
    let mut me = snap(std::process::id()).unwrap_or_default();
    if let Some(a) = agents {
        let s = snap(a.pid).unwrap_or_default();
        me.cpu_ticks += s.cpu_ticks;
        me.rss_kib += s.rss_kib;
    }
    Mark {
        t: Instant::now(),
        coords: coords.iter().map(|c| snap(c.pid).ok()).collect(),
        me,
        machine: machine_ticks(),
    }
}

impl Mark {
    /// Coordinator c's CPU seconds from `self` to `later`.
    fn cpu(&self, later: &Mark, c: usize) -> f64 {
        match (self.coords[c], later.coords[c]) {
            (Some(a), Some(b)) => cpu_secs(a, b),
            _ => f64::NAN,
        }
    }

    fn me_cpu(&self, later: &Mark) -> f64 {
        cpu_secs(self.me, later.me)
    }

    /// Cores' worth of CPU that processes other than the coordinators and this bench (with
    /// its agent process) used from `self` to `later`. A coordinator killed in between
    /// counts as other load (its CPU after `self` cannot be read any more).
    fn others_cores(&self, later: &Mark) -> f64 {
        let mut ours = later.me.cpu_ticks.saturating_sub(self.me.cpu_ticks);
        for (a, b) in self.coords.iter().zip(&later.coords) {
            if let (Some(a), Some(b)) = (a, b) {
                ours += b.cpu_ticks.saturating_sub(a.cpu_ticks);
            }
        }
        let wall = later.t.duration_since(self.t).as_secs_f64();
        later
            .machine
            .saturating_sub(self.machine)
            .saturating_sub(ours) as f64
            / clk_tck()
            / wall
    }

    fn rss(&self, c: usize) -> String {
        self.coords[c].map_or("-".into(), |s| format!("{:.1}", mib(s.rss_kib)))
    }
}

/// Samples, every 100 ms, how many connections each coordinator holds to PostgreSQL
/// (`pg_stat_activity` by `application_name`, through `psql`) and how many sessions the
/// database has seen (`pg_stat_database.sessions`: connections opened, whoever opened them).
struct PgSampler {
    samples: Arc<Mutex<Vec<PgSample>>>,
    /// None without psql or PostgreSQL.
    max_connections: Option<usize>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

#[derive(Clone, Copy)]
struct PgSample {
    /// Nanoseconds since the fleet's epoch.
    t: u64,
    /// Connections of A and of B.
    held: [usize; 2],
    /// Sessions opened in the database so far (each sample's psql is one).
    sessions: u64,
}

impl PgSampler {
    fn start(server: Option<&str>, fleet: &Arc<Fleet>) -> PgSampler {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let Some(server) = server else {
            return PgSampler {
                samples,
                max_connections: None,
                stop,
            };
        };
        let max_connections =
            psql(server, "SHOW max_connections").and_then(|s| s.trim().parse().ok());
        if max_connections.is_some() {
            let (samples, stop, fleet, server) = (
                samples.clone(),
                stop.clone(),
                fleet.clone(),
                server.to_string(),
            );
            std::thread::spawn(move || {
                const SQL: &str = "SELECT application_name, count(*) FROM pg_stat_activity \
                    WHERE application_name IN ('fleet-a', 'fleet-b') GROUP BY 1 \
                    UNION ALL SELECT 'sessions', sessions FROM pg_stat_database \
                    WHERE datname = current_database()";
                while !stop.load(Ordering::Relaxed) {
                    let t = fleet.since_epoch();
                    if let Some(out) = psql(&server, SQL) {
                        let mut sample = PgSample {
                            t,
                            held: [0, 0],
                            sessions: 0,
                        };
                        for l in out.lines() {
                            match l.split_once('|') {
                                Some(("fleet-a", n)) => sample.held[0] = n.parse().unwrap_or(0),
                                Some(("fleet-b", n)) => sample.held[1] = n.parse().unwrap_or(0),
                                Some(("sessions", n)) => sample.sessions = n.parse().unwrap_or(0),
                                _ => {}
                            }
                        }
                        samples.lock().unwrap().push(sample);
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
        }
        PgSampler {
            samples,
            max_connections,
            stop,
        }
    }

    /// "peak A / peak B (max_connections), sessions opened" between two times since the
    /// epoch.
    fn peak(&self, from_ns: u64, to_ns: u64) -> String {
        let Some(max) = self.max_connections else {
            return "not sampled".into();
        };
        let s = self.samples.lock().unwrap();
        let within: Vec<&PgSample> = s
            .iter()
            .filter(|p| (from_ns..=to_ns).contains(&p.t))
            .collect();
        let (a, b) = within
            .iter()
            .fold((0, 0), |(a, b), p| (a.max(p.held[0]), b.max(p.held[1])));
        // Sessions opened from the last sample before the window to the last within it,
        // less the samples' own.
        let before = s.iter().rev().find(|p| p.t < from_ns);
        let opened = match (before, within.last()) {
            (Some(b), Some(l)) => {
                let samples = within.len() as u64;
                format!(
                    ", {} sessions opened in the database",
                    l.sessions
                        .saturating_sub(b.sessions)
                        .saturating_sub(samples)
                )
            }
            _ => String::new(),
        };
        format!("{a} / {b} (max_connections {max}){opened}")
    }
}

impl Drop for PgSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// `perf record` (CPU profile) and `perf stat` (syscall counts) of the coordinator for one
/// phase, when FLEET_PERF names a directory.
struct Perf(Vec<Child>);

impl Perf {
    fn start(pid: u32, phase: &str) -> Perf {
        let Ok(dir) = std::env::var("FLEET_PERF") else {
            return Perf(Vec::new());
        };
        let _ = std::fs::create_dir_all(&dir);
        let dir = Path::new(&dir);
        let record = Command::new("perf")
            .args(["record", "-q", "-e", "cpu-clock", "-F", "999", "-g", "-p"])
            .arg(pid.to_string())
            .arg("-o")
            .arg(dir.join(format!("{phase}.data")))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let events = [
            "syscalls:sys_enter_fsync",
            "syscalls:sys_enter_fdatasync",
            "syscalls:sys_enter_read",
            "syscalls:sys_enter_write",
            "syscalls:sys_enter_recvfrom",
            "syscalls:sys_enter_sendmsg",
            "syscalls:sys_enter_sendto",
            "syscalls:sys_enter_writev",
            "syscalls:sys_enter_epoll_wait",
            "syscalls:sys_enter_futex",
            "raw_syscalls:sys_enter",
            "context-switches",
            "task-clock",
        ];
        let stat = Command::new("perf")
            .args(["stat", "-e", &events.join(","), "-p"])
            .arg(pid.to_string())
            .arg("-o")
            .arg(dir.join(format!("{phase}.stat")))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        // perf needs a moment to attach.
        std::thread::sleep(Duration::from_millis(500));
        Perf([record, stat].into_iter().filter_map(Result::ok).collect())
    }

    fn stop(mut self) {
        for c in &mut self.0 {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
        }
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}

/// Agents the coordinator reports as connected to itself (`platter agents --output json`;
/// where coordinators on one store list each other's agents too, each agent names its
/// coordinator: those of others are not counted).
fn connected_per_coordinator(
    bin: &Path,
    c: &Coordinator,
    operator: &Path,
) -> anyhow::Result<(usize, usize, Duration)> {
    let t = Instant::now();
    let out = Command::new(bin)
        .args(["agents", "--output", "json"])
        .env("PLATTER_COORDINATOR", &c.url)
        .env("PLATTER_TLS_DIR", operator)
        .output()?;
    let took = t.elapsed();
    if !out.status.success() {
        bail!(
            "platter agents: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let v: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout)?;
    let connected = v
        .iter()
        .filter(|a| matches!(a["state"].as_str(), Some("idle" | "busy")))
        .filter(|a| a["coordinator"].as_str().is_none_or(|n| n == c.id))
        .count();
    Ok((connected, v.len(), took))
}

fn run() -> anyhow::Result<bool> {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let n: usize = args.next().map_or(Ok(10_000), |s| s.parse())?;
    let m: usize = args.next().map_or(Ok(1_000), |s| s.parse())?;
    if m > n || n > 100_000 {
        bail!("usage: fleet_scale [N ≤ 100000] [M ≤ N]");
    }
    let idle_secs: u64 = env_or("FLEET_IDLE_SECS", 30);
    let concurrency: usize = env_or("FLEET_CONCURRENCY", 200);
    let n_devices: usize = env_or("FLEET_DEVICES", 0);
    let keepalive = env_or("FLEET_KEEPALIVE", 1) != 0;
    let failover = env_or("FLEET_FAILOVER", 0) != 0;
    let two = match env_or("FLEET_COORDINATORS", 1) {
        1 => false,
        2 => true,
        k => bail!("FLEET_COORDINATORS={k}: 1 or 2"),
    };
    if two && failover {
        bail!("FLEET_COORDINATORS=2 and FLEET_FAILOVER=1 are separate runs (after a failover one coordinator would hold 2·N agents)");
    }
    let postgres = std::env::var("PLATTER_BENCH_POSTGRES")
        .ok()
        .filter(|u| !u.is_empty());
    if (two || failover) && postgres.is_none() {
        bail!("FLEET_COORDINATORS=2 and FLEET_FAILOVER=1 need PLATTER_BENCH_POSTGRES: coordinators share a store only on PostgreSQL");
    }
    let n_coords = if two || failover { 2 } else { 1 };
    // Agents of A are 0..n; with FLEET_COORDINATORS=2, B's are n..2n (another process).
    let total = if two { 2 * n } else { n };
    let waves = if two { 2 * m } else { m };
    let nofile = raise_nofile();
    if nofile < n as libc::rlim_t + 256 {
        eprintln!("warning: RLIMIT_NOFILE is {nofile}: too few descriptors for {n} agents");
    }
    let bin = built_platter_bin()?;
    let work = WorkDir::new("fleet-scale-")?;
    let (dir, keep) = (work.dir.clone(), work.keep);
    let pki_dir = dir.join("pki");
    let mode = if two {
        "two coordinators, N agents each"
    } else if failover {
        "failover: two coordinators, N agents on A"
    } else {
        "one coordinator"
    };
    eprintln!(
        "fleet_scale: N={n} M={m}, {mode}, {}, {} cores, RLIMIT_NOFILE {nofile}, dir {}{}",
        if postgres.is_some() {
            "PostgreSQL"
        } else {
            "SQLite"
        },
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        dir.display(),
        if keep { " (kept)" } else { "" }
    );

    // 1. PKI: CA, coordinator and operator through the CLI (issued afresh, replacing those
    // of a kept FLEET_DIR), agents through the library.
    fleet_pki(&bin, &pki_dir)?;
    let ca = Ca {
        cert_pem: std::fs::read_to_string(pki_dir.join("ca/ca.pem"))?,
        key_pem: std::fs::read_to_string(pki_dir.join("ca/ca-key.pem"))?,
    };
    let t = Instant::now();
    let agent_certs = issue_agents(&ca, 0..n)?;
    let issue_time = t.elapsed();
    eprintln!(
        "issued {n} agent certificates in {:.2} s",
        issue_time.as_secs_f64()
    );

    // 2. The coordinators, on one store.
    let db = dir.join("db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    // PLATTER_BENCH_POSTGRES=postgres://…: the store is a new schema there.
    let pg_url =
        postgres
            .as_deref()
            .map(|url| match platter::store::testing::fresh_postgres(url) {
                platter::store::db::Location::Postgres(u) => u,
                platter::store::db::Location::Sqlite(p) => p.display().to_string(),
            });
    let names = ["A", "B"];
    let mut coords = Vec::new();
    for (k, &name) in names.iter().take(n_coords).enumerate() {
        let db: std::ffi::OsString = match &pg_url {
            // fresh_postgres's URL always has a query (search_path).
            Some(u) => format!("{u}&application_name=fleet-{}", name.to_lowercase()).into(),
            None => db.clone().into(),
        };
        let log = if n_coords == 1 {
            dir.join("coordinator.log")
        } else {
            dir.join(format!("coordinator-{}.log", name.to_lowercase()))
        };
        coords.push(Coordinator::start(
            &bin,
            name,
            &db,
            Some(&pki_dir.join("coordinator-localhost")),
            log,
            &[],
        )?);
        if k == 0 {
            // B is started after A has made the schema.
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    let m_start = mark(&coords, None);
    for (k, c) in coords.iter().enumerate() {
        eprintln!(
            "coordinator {} pid {} on {}: RSS {} MiB",
            c.name,
            c.pid,
            c.url,
            m_start.rss(k)
        );
    }
    let url_a = coords[0].url.clone();
    let targets_a: Arc<[(usize, String)]> = coords
        .iter()
        .enumerate()
        .map(|(k, c)| (k, c.url.clone()))
        .collect::<Vec<_>>()
        .into();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let fleet = Arc::new(Fleet::new(mono_ns(), total, 1));
    let pg = PgSampler::start(postgres.as_deref(), &fleet);
    // A first sample before anything is measured.
    std::thread::sleep(Duration::from_millis(300));
    let mut agent_process = if two {
        let t = Instant::now();
        let targets_b = [(1, coords[1].url.clone()), (0, url_a.clone())];
        let p = AgentProcess::start(0, n..2 * n, n, m, &targets_b, &pki_dir, &fleet)?;
        eprintln!(
            "second agent process pid {} ready ({n} certificates) in {:.2} s",
            p.pid,
            t.elapsed().as_secs_f64()
        );
        Some(p)
    } else {
        None
    };
    let stop = CancellationToken::new();
    let gate = Arc::new(Semaphore::new(concurrency));
    let ca_pem: Arc<str> = Arc::from(ca.cert_pem.as_str());
    let operator = pki_dir.join("operator-bench");

    // 3. Connect the agents, `concurrency` handshakes at a time per agent process.
    let perf = Perf::start(coords[0].pid, "connect");
    let m_before_connect = mark(&coords, agent_process.as_ref());
    let connect_start_ns = fleet.since_epoch();
    if let Some(p) = &mut agent_process {
        p.go()?;
    }
    for (i, (cert_pem, key_pem)) in agent_certs.into_iter().enumerate() {
        let spec = AgentSpec {
            i,
            targets: targets_a.clone(),
            ca_pem: ca_pem.clone(),
            cert_pem,
            key_pem,
            wave: i < m,
            devices: n_devices,
            keepalive,
        };
        rt.spawn(agent(spec, fleet.clone(), gate.clone(), stop.clone()));
    }
    let mut last_report = Instant::now();
    loop {
        let c = fleet.count(C::Connected);
        let f = fleet.count(C::Failed);
        if c + f >= total {
            break;
        }
        if let Some(dead) = coords
            .iter_mut()
            .find_map(|c| (!c.alive()).then_some(c.name))
        {
            let c = coords.iter().find(|c| c.name == dead).unwrap();
            bail!(
                "coordinator {dead} died while agents connected:\n{}",
                log_tail(&c.log, 20)
            );
        }
        if last_report.elapsed() > Duration::from_secs(5) {
            let now = mark(&coords, None);
            let rss: Vec<String> = (0..n_coords)
                .map(|k| format!("{} {} MiB", names[k], now.rss(k)))
                .collect();
            eprintln!(
                "  {:5.1} s: {c} connected, {f} failed; coordinator RSS {}",
                m_before_connect.t.elapsed().as_secs_f64(),
                rss.join(", ")
            );
            last_report = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let m_connected = mark(&coords, agent_process.as_ref());
    let connect_end_ns = fleet.since_epoch();
    let connect_time = m_connected.t.duration_since(m_before_connect.t);
    perf.stop();
    let connected = fleet.count(C::Connected);
    let failed = fleet.count(C::Failed);
    let connect_lat = fleet.latencies(&fleet.connected_at, 0..total, connect_start_ns);
    eprintln!(
        "connected {connected} of {total} in {:.2} s ({failed} failed){}",
        connect_time.as_secs_f64(),
        fleet
            .first_error
            .lock()
            .unwrap()
            .as_ref()
            .map(|e| format!("; first error: {e}"))
            .unwrap_or_default()
    );

    // 4. Verify through the operator API, then an idle window: heartbeats only. A stream
    // is open before its hello is stored (the listing reads the store's agents), so ask
    // until every connected agent is listed, for up to a minute.
    let mut seen = Vec::new();
    let mut listed_after = None;
    while listed_after.is_none() {
        seen.clear();
        for c in &coords {
            seen.push(connected_per_coordinator(&bin, c, &operator)?);
        }
        let listed: usize = seen.iter().map(|s| s.0).sum();
        let waited = m_connected.t.elapsed();
        if listed >= connected {
            listed_after = Some(waited);
        } else if waited > Duration::from_secs(60) {
            break;
        } else {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    for (c, (seen_connected, seen_total, took)) in coords.iter().zip(&seen) {
        eprintln!(
            "coordinator {} says {seen_connected} connected of {seen_total} known (`platter agents` took {:.2} s)",
            c.name,
            took.as_secs_f64()
        );
    }
    let seen_connected: usize = seen.iter().map(|s| s.0).sum();
    std::thread::sleep(Duration::from_secs(2));
    let perf = Perf::start(coords[0].pid, "idle");
    let hb0 = fleet.count(C::Heartbeats);
    let m_idle0 = mark(&coords, agent_process.as_ref());
    std::thread::sleep(Duration::from_secs(idle_secs));
    let m_idle1 = mark(&coords, agent_process.as_ref());
    let idle_wall = m_idle1.t.duration_since(m_idle0.t).as_secs_f64();
    let hb = fleet.count(C::Heartbeats) - hb0;
    perf.stop();
    for (k, name) in names.iter().enumerate().take(n_coords) {
        let cpu = m_idle0.cpu(&m_idle1, k);
        eprintln!(
            "idle {idle_wall:.0} s: {hb} heartbeats, coordinator {name} CPU {cpu:.2} s ({:.1}% of one core), RSS {} MiB",
            100.0 * cpu / idle_wall,
            m_idle1.rss(k)
        );
    }
    let dropped_before_submit = fleet.count(C::Dropped);

    // 5. Submit a campaign (through A) for the agents labelled wave=one; wait for their
    // plans.
    let campaign = dir.join("fleet.yaml");
    std::fs::write(
        &campaign,
        "name: fleet-scale\nhosts: { labels: { wave: one } }\nworkload: { command: { run: \"true\" } }\nrepeat: 1\n",
    )?;
    let perf = Perf::start(coords[0].pid, "fanout");
    let m_fan0 = mark(&coords, agent_process.as_ref());
    let submit_start_ns = fleet.since_epoch();
    let mut submit = Command::new(&bin)
        .arg("submit")
        .arg(&campaign)
        .env("PLATTER_COORDINATOR", &url_a)
        .env("PLATTER_TLS_DIR", &operator)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut submit_done: Option<(Duration, std::process::ExitStatus)> = None;
    let mut timed_out = false;
    loop {
        if submit_done.is_none() {
            if let Some(status) = submit.try_wait()? {
                submit_done = Some((m_fan0.t.elapsed(), status));
                if !status.success() {
                    break;
                }
            }
        }
        if submit_done.is_some() && fleet.count(C::Plans) >= waves {
            break;
        }
        if m_fan0.t.elapsed() > PLAN_TIMEOUT {
            timed_out = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // The agent process reports every 50 ms: let its last plans' times come in.
    if two {
        std::thread::sleep(Duration::from_millis(150));
    }
    let m_fan1 = mark(&coords, agent_process.as_ref());
    let fan_end_ns = fleet.since_epoch();
    perf.stop();
    let submit_out = submit.wait_with_output()?;
    let plan_lat = fleet.latencies(&fleet.plan_at, 0..total, submit_start_ns);
    let plans = fleet.count(C::Plans);
    // The moment the last of the M (2·M) plans arrived, from the submission's start.
    let all_plans = (plans >= waves).then(|| plan_lat.last().copied().unwrap_or(f64::NAN));
    let side_all = |range: std::ops::Range<usize>| {
        fleet
            .latencies(&fleet.plan_at, range, submit_start_ns)
            .last()
            .copied()
    };
    // A moment for stray plans to show up.
    std::thread::sleep(Duration::from_millis(500));
    let m_end = mark(&coords, agent_process.as_ref());
    let mut still_connected = Vec::new();
    for c in &coords {
        still_connected.push(connected_per_coordinator(&bin, c, &operator)?.0);
    }
    let coordinators_ok: Vec<bool> = coords.iter_mut().map(|c| c.alive()).collect();
    let unexpected_after_fanout = fleet.count(C::Unexpected);
    let dropped_before_failover = fleet.count(C::Dropped);

    // 6. Failover: SIGKILL A; every agent that was on A must get to B.
    struct Storm {
        on_a: usize,
        moved: usize,
        cut: usize,
        wall: f64,
        lat: Vec<f64>,
        m0: Mark,
        m1: Mark,
        b_says: usize,
        pg: String,
        timed_out: bool,
        b_alive: bool,
    }
    let storm = if failover {
        std::thread::sleep(Duration::from_secs(1));
        let on_a = fleet.on[..n]
            .iter()
            .filter(|o| o.load(Ordering::Relaxed) == 1)
            .count();
        let m0 = mark(&coords, None);
        let kill_ns = fleet.since_epoch();
        fleet.killed.store(1, Ordering::Relaxed);
        coords[0].kill9();
        let mut last_report = Instant::now();
        let mut timed_out = false;
        loop {
            if fleet.count(C::Moved) >= on_a {
                break;
            }
            if !coords[1].alive() {
                break;
            }
            if m0.t.elapsed() > FAILOVER_TIMEOUT {
                timed_out = true;
                break;
            }
            if last_report.elapsed() > Duration::from_secs(5) {
                let now = mark(&coords, None);
                eprintln!(
                    "  {:5.1} s after the kill: {} of {on_a} on B, {} pauses, {} failed dials; B RSS {} MiB",
                    m0.t.elapsed().as_secs_f64(),
                    fleet.count(C::Moved),
                    fleet.count(C::Pauses),
                    fleet.count(C::DialFailures),
                    now.rss(1)
                );
                last_report = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let m1 = mark(&coords, None);
        let end_ns = fleet.since_epoch();
        let lat = fleet.latencies(&fleet.moved_at, 0..n, kill_ns);
        // Late plans (a second one to an agent that held its plan) would show up now.
        std::thread::sleep(Duration::from_secs(2));
        let b_alive = coords[1].alive();
        let b_says = if b_alive {
            connected_per_coordinator(&bin, &coords[1], &operator)?.0
        } else {
            0
        };
        Some(Storm {
            on_a,
            moved: fleet.count(C::Moved),
            cut: fleet.count(C::Cut),
            wall: m1.t.duration_since(m0.t).as_secs_f64(),
            lat,
            m0,
            m1,
            b_says,
            pg: pg.peak(kill_ns, end_ns),
            timed_out,
            b_alive,
        })
    } else {
        None
    };

    // 7. The table.
    let f = |x: f64| format!("{x:.3} s");
    let co = |k: usize| {
        if n_coords == 1 {
            "coordinator".to_string()
        } else {
            format!("coordinator {}", names[k])
        }
    };
    println!();
    println!(
        "fleet_scale: N={n} M={m}, {mode}, {}, coordinator {}",
        if postgres.is_some() {
            "PostgreSQL"
        } else {
            "SQLite"
        },
        bin.display()
    );
    println!("| what | value |");
    println!("|---|---|");
    println!(
        "| agent certificates issued (library, {} threads) | {n} in {:.2} s |",
        std::thread::available_parallelism().map_or(2, |n| n.get()),
        issue_time.as_secs_f64()
    );
    let per_coordinator: Vec<String> = seen
        .iter()
        .enumerate()
        .map(|(k, s)| format!("{} {}", names[k], s.0))
        .collect();
    println!(
        "| agents connected (bench / coordinators say) | {connected} / {} of {total} ({failed} failed) |",
        per_coordinator.join(", ")
    );
    println!(
        "| all connected agents listed by `platter agents` (hellos stored), after the last connected | {} |",
        listed_after.map_or("not within 60 s".into(), |d| f(d.as_secs_f64()))
    );
    println!(
        "| connect time, all (p50 / p99 of each stream's open time) | {} ({} / {}), {concurrency} handshakes in flight per agent process |",
        f(connect_time.as_secs_f64()),
        f(percentile(&connect_lat, 0.5)),
        f(percentile(&connect_lat, 0.99))
    );
    for k in 0..n_coords {
        // Its own agents: half each with two, all of them on A in a failover run.
        let its_agents = match (two, k) {
            (true, _) => connected / 2,
            (false, 0) => connected,
            (false, _) => 0,
        };
        let per_agent_kib = match (m_start.coords[k], m_connected.coords[k]) {
            (Some(a), Some(b)) => (b.rss_kib as f64 - a.rss_kib as f64) / its_agents.max(1) as f64,
            _ => f64::NAN,
        };
        let c = co(k);
        println!(
            "| CPU while connecting: {c} | {:.2} s |",
            m_before_connect.cpu(&m_connected, k)
        );
        println!(
            "| {c} RSS: started / all connected / after idle / after fan-out | {} / {} / {} / {} MiB |",
            m_start.rss(k),
            m_connected.rss(k),
            m_idle1.rss(k),
            m_end.rss(k)
        );
        println!("| {c} RSS per connected agent | {per_agent_kib:.1} KiB |");
        if let Some(s) = m_end.coords[k] {
            println!("| {c} VmHWM (peak RSS) | {:.1} MiB |", mib(s.hwm_kib));
        }
        if let Some(s) = m_connected.coords[k] {
            println!(
                "| {c} threads / open fds (connected) | {} / {} |",
                s.threads, s.fds
            );
        }
        let idle_cpu = m_idle0.cpu(&m_idle1, k);
        println!(
            "| idle {idle_wall:.0} s: {c} CPU | {idle_cpu:.2} s = {:.1}% of one core |",
            100.0 * idle_cpu / idle_wall
        );
        println!(
            "| {c} CPU during fan-out | {:.2} s |",
            m_fan0.cpu(&m_fan1, k)
        );
    }
    println!(
        "| CPU while connecting: this bench (the agents' side{}) | {:.2} s |",
        if two { ", both agent processes" } else { "" },
        m_before_connect.me_cpu(&m_connected)
    );
    println!("| idle {idle_wall:.0} s: heartbeats sent | {hb} |");
    println!(
        "| this bench's RSS / CPU in the idle window (agents' side) | {:.0} MiB / {:.2} s |",
        mib(m_idle1.me.rss_kib),
        m_idle0.me_cpu(&m_idle1)
    );
    println!(
        "| PostgreSQL connections, peak A / B: connect / fan-out | {} / {} |",
        pg.peak(connect_start_ns, connect_end_ns),
        pg.peak(submit_start_ns, fan_end_ns)
    );
    println!(
        "| `platter submit` (to A) returned (submit RPC incl. dispatch) | {} |",
        submit_done.map_or("-".into(), |(d, _)| f(d.as_secs_f64()))
    );
    println!(
        "| plans received | {plans} of {waves} ({} unexpected or doubled) |",
        fleet.count(C::Unexpected)
    );
    println!(
        "| plan fan-out, from submit start: first / p50 / p90 / all {waves} | {} / {} / {} / {} |",
        f(percentile(&plan_lat, 0.0)),
        f(percentile(&plan_lat, 0.5)),
        f(percentile(&plan_lat, 0.9)),
        all_plans.map_or_else(|| "not all".into(), f)
    );
    if two {
        println!(
            "| fan-out, last plan on A's agents / on B's (by NOTIFY) | {} / {} |",
            side_all(0..n).map_or("-".into(), f),
            side_all(n..2 * n).map_or("-".into(), f)
        );
    }
    let still: Vec<String> = still_connected
        .iter()
        .enumerate()
        .map(|(k, s)| format!("{} {s}", names[k]))
        .collect();
    println!(
        "| agents connected after the fan-out (coordinators say) | {} |",
        still.join(", ")
    );
    println!(
        "| other processes' CPU on this machine: connect / idle / fan-out | {:.2} / {:.2} / {:.2} cores |",
        m_before_connect.others_cores(&m_connected),
        m_idle0.others_cores(&m_idle1),
        m_fan0.others_cores(&m_fan1),
    );
    if let Some(s) = &storm {
        println!(
            "| failover: agents on A when it was SIGKILLed / streams cut / connected to B | {} / {} / {} |",
            s.on_a, s.cut, s.moved
        );
        println!(
            "| failover: connected to B after the kill: first / p50 / p90 / p99 / last | {} / {} / {} / {} / {} |",
            f(percentile(&s.lat, 0.0)),
            f(percentile(&s.lat, 0.5)),
            f(percentile(&s.lat, 0.9)),
            f(percentile(&s.lat, 0.99)),
            s.lat.last().map_or("-".into(), |&x| f(x))
        );
        println!(
            "| failover: redials that failed / backoff pauses (whole rounds failed) | {} / {} |",
            fleet.count(C::DialFailures),
            fleet.count(C::Pauses)
        );
        // How the reconnects spread over time: one count per second after the kill.
        let mut per_second: Vec<usize> = Vec::new();
        for &x in &s.lat {
            let k = x as usize;
            if per_second.len() <= k {
                per_second.resize(k + 1, 0);
            }
            per_second[k] += 1;
        }
        let per_second: Vec<String> = per_second.iter().map(usize::to_string).collect();
        println!(
            "| failover: connected to B in each second after the kill (0–1 s, 1–2 s, …) | {} |",
            per_second.join(", ")
        );
        let mut why: Vec<(String, usize)> = fleet
            .redial_errors
            .lock()
            .unwrap()
            .clone()
            .into_iter()
            .collect();
        why.sort_by_key(|w| std::cmp::Reverse(w.1));
        for (e, k) in why.iter().take(4) {
            println!(
                "| failover: a redial failed ({k}×) | {} |",
                e.replace('|', "/")
            );
        }
        let b_cpu = s.m0.cpu(&s.m1, 1);
        println!(
            "| failover: B's CPU during the storm | {b_cpu:.2} s in {:.2} s = {:.0}% of one core |",
            s.wall,
            100.0 * b_cpu / s.wall
        );
        if let (Some(b0), Some(b1)) = (s.m0.coords[1], s.m1.coords[1]) {
            println!(
                "| failover: B's RSS before / after the storm, VmHWM / threads / fds after | {:.1} / {:.1} MiB, {:.1} MiB / {} / {} |",
                mib(b0.rss_kib),
                mib(b1.rss_kib),
                mib(b1.hwm_kib),
                b1.threads,
                b1.fds
            );
        }
        println!(
            "| failover: this bench's CPU during the storm (the agents' reconnects) | {:.2} s |",
            s.m0.me_cpu(&s.m1)
        );
        println!(
            "| failover: PostgreSQL connections, peak A / B | {} |",
            s.pg
        );
        println!(
            "| failover: B says connected (2 s after the last) | {} |",
            s.b_says
        );
        println!(
            "| failover: other processes' CPU (A's death counts here) | {:.2} cores |",
            s.m0.others_cores(&s.m1)
        );
    }

    // What broke, if anything.
    let mut ok = true;
    let mut broke = |what: String| {
        println!("BROKE: {what}");
        ok = false;
    };
    for (k, c) in coords.iter().enumerate() {
        if !coordinators_ok[k] {
            broke(format!(
                "coordinator {} exited:\n{}",
                c.name,
                log_tail(&c.log, 20)
            ));
        }
    }
    if connected < total {
        broke(format!("{} agents could not connect", total - connected));
    }
    if seen_connected < connected {
        broke(format!(
            "the coordinators listed only {seen_connected} of {connected} connected agents"
        ));
    }
    if dropped_before_failover > 0 {
        broke(format!(
            "{dropped_before_failover} streams ended ({dropped_before_submit} before the submission)"
        ));
    }
    match submit_done {
        Some((_, s)) if s.success() => {}
        Some((_, s)) => broke(format!(
            "platter submit failed ({s}): {}",
            String::from_utf8_lossy(&submit_out.stderr).trim()
        )),
        None => broke("platter submit did not return".into()),
    }
    if timed_out || plans < waves.min(connected) {
        broke(format!(
            "only {plans} of {waves} plans arrived within {} s",
            PLAN_TIMEOUT.as_secs()
        ));
    }
    if unexpected_after_fanout > 0 {
        broke("plans went to agents the campaign did not select, or twice to one".into());
    }
    if let Some(s) = &storm {
        if !s.b_alive {
            broke(format!(
                "coordinator B exited during the failover:\n{}",
                log_tail(&coords[1].log, 20)
            ));
        }
        if s.timed_out || s.moved < s.on_a {
            broke(format!(
                "only {} of {} agents were connected to B within {} s of the kill",
                s.moved,
                s.on_a,
                FAILOVER_TIMEOUT.as_secs()
            ));
        }
        if s.b_says < s.on_a {
            broke(format!(
                "B listed only {} of {} agents as connected",
                s.b_says, s.on_a
            ));
        }
        let dropped = fleet.count(C::Dropped) - dropped_before_failover;
        if dropped > 0 {
            broke(format!("{dropped} streams to B ended during the failover"));
        }
        let late = fleet.count(C::Unexpected) - unexpected_after_fanout;
        if late > 0 {
            broke(format!(
                "{late} plans arrived again after the failover (doubled)"
            ));
        }
    }
    if let Some(e) = fleet.first_error.lock().unwrap().as_ref() {
        println!("first agent error: {e}");
    }

    stop.cancel();
    drop(agent_process);
    drop(coords);
    drop(pg);
    rt.shutdown_timeout(Duration::from_secs(5));
    if keep {
        eprintln!("kept {}", dir.display());
    }
    drop(work);
    Ok(ok)
}
