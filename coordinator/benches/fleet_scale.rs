//! Fleet scale: can one coordinator on 2 cores hold N connected agents in under 1 GiB and
//! hand plans to M of them within a second?
//!
//! Run: `cargo bench -p platter --bench fleet_scale -- [N] [M]` (defaults 10000 1000).
//!
//! It starts the release `platter serve` with mutual TLS as a child process (the binary
//! cargo built for this bench, or `PLATTER_BIN`) and opens N AgentLink streams from this
//! process, each on its own TCP+TLS connection with its own agent certificate, like real
//! agents (same HTTP/2 keep-alive settings, a heartbeat every 5 s). The first M agents say
//! `wave=one` in their hello; a campaign selecting that label is submitted with
//! `platter submit` and the bench waits until each of the M streams has received its plan.
//! The fake agents do not run or accept plans.
//!
//! Prints the coordinator's RSS, peak RSS, threads and CPU per phase (from /proc), the
//! connect time and the plan fan-out times. Exits non-zero when something broke (the
//! coordinator died, agents could not connect or were dropped, plans went missing or to
//! the wrong agents), not when a target is missed.
//!
//! Environment:
//! * `PLATTER_BIN` — the `platter` binary (default: the one built with this bench).
//! * `FLEET_IDLE_SECS` — the idle window (default 30).
//! * `FLEET_CONCURRENCY` — handshakes in flight at once (default 200).
//! * `FLEET_DEVICES` — devices in each hello's inventory (default 0).
//! * `FLEET_KEEPALIVE=0` — no HTTP/2 keep-alive pings from the agents (real agents ping
//!   every 10 s; by default the fake ones do too).
//! * `FLEET_DIR` — where the PKI, database and coordinator log go (default: a temporary
//!   directory on the disk of `TMPDIR`, removed at the end unless `FLEET_KEEP=1`).
//! * `PLATTER_BENCH_POSTGRES` — a PostgreSQL server URL: the coordinator's store is a new
//!   schema there instead of an SQLite file.
//! * `FLEET_PERF` — a directory: record a `perf record -e cpu-clock -g` profile of the
//!   coordinator per phase (connect.data, idle.data, fanout.data) there.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use platter::pki::{self, Ca, Role, Validity};
use platter_proto::v1 as pb;
use platter_proto::v1::agent_link_client::AgentLinkClient;
use tokio::sync::{mpsc, Semaphore};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

const HEARTBEAT: Duration = platter_proto::protocol::HEARTBEAT_INTERVAL;
const CONNECT_ATTEMPTS: u32 = 3;
const PLAN_TIMEOUT: Duration = Duration::from_secs(300);

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    match run() {
        Ok(true) => std::process::exit(0),
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("fleet_scale: {e:#}");
            std::process::exit(2);
        }
    }
}

/// What the fake agents share with the bench's main task.
struct Fleet {
    epoch: Instant,
    /// Nanoseconds since `epoch` + 1 when agent i's stream was open; 0 = not (yet).
    connected_at: Vec<AtomicU64>,
    /// Nanoseconds since `epoch` + 1 when agent i received its (first) plan; 0 = none.
    plan_at: Vec<AtomicU64>,
    connected: AtomicUsize,
    failed: AtomicUsize,
    /// Streams that ended after they were open.
    dropped: AtomicUsize,
    plans: AtomicUsize,
    /// Plans received by agents that the campaign did not select.
    unexpected_plans: AtomicUsize,
    heartbeats: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl Fleet {
    fn since_epoch(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64 + 1
    }

    fn error(&self, i: usize, e: String) {
        let mut first = self.first_error.lock().unwrap();
        if first.is_none() {
            *first = Some(format!("agent {}: {e}", host_name(i)));
        }
    }
}

fn host_name(i: usize) -> String {
    format!("a{i:05}")
}

struct AgentSpec {
    i: usize,
    url: String,
    ca_pem: Arc<str>,
    cert_pem: String,
    key_pem: String,
    wave: bool,
    devices: usize,
    keepalive: bool,
}

/// One fake agent: connect (a few attempts), keep the stream, heartbeat, note plans.
async fn agent(spec: AgentSpec, fleet: Arc<Fleet>, gate: Arc<Semaphore>, stop: CancellationToken) {
    let i = spec.i;
    let permit = gate.acquire().await.expect("gate");
    let mut attempt = 0;
    let (tx, mut inbound) = loop {
        attempt += 1;
        let r = tokio::time::timeout(Duration::from_secs(60), open(&spec)).await;
        match r {
            Ok(Ok(s)) => break s,
            Ok(Err(e)) if attempt >= CONNECT_ATTEMPTS => {
                fleet.error(i, e);
                fleet.failed.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(_) if attempt >= CONNECT_ATTEMPTS => {
                fleet.error(i, "connect + hello took over 60 s".into());
                fleet.failed.fetch_add(1, Ordering::Relaxed);
                return;
            }
            _ => tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await,
        }
    };
    drop(permit);
    fleet.connected_at[i].store(fleet.since_epoch(), Ordering::Relaxed);
    fleet.connected.fetch_add(1, Ordering::Relaxed);
    let mut heartbeat =
        tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    use pb::coordinator_message::Kind;
    loop {
        tokio::select! {
            m = inbound.message() => match m {
                Ok(Some(pb::CoordinatorMessage { kind: Some(Kind::Plan(p)) })) => {
                    if fleet.plan_at[i]
                        .compare_exchange(0, fleet.since_epoch(), Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                    {
                        fleet.plans.fetch_add(1, Ordering::Relaxed);
                    }
                    if !spec.wave || p.host != host_name(i) {
                        fleet.unexpected_plans.fetch_add(1, Ordering::Relaxed);
                        fleet.error(i, format!("unexpected plan {} for {}", p.id, p.host));
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => {
                    fleet.error(i, "the coordinator closed the stream".into());
                    fleet.dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Err(s) => {
                    if !stop.is_cancelled() {
                        fleet.error(i, format!("stream ended: {}: {}", s.code(), s.message()));
                        fleet.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    return;
                }
            },
            _ = heartbeat.tick() => {
                let hb = pb::Heartbeat { current_plan_id: String::new(), current_step_index: 0 };
                let m = pb::AgentMessage { kind: Some(pb::agent_message::Kind::Heartbeat(hb)) };
                if tx.send(m).await.is_err() {
                    fleet.error(i, "outbound stream closed".into());
                    fleet.dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                fleet.heartbeats.fetch_add(1, Ordering::Relaxed);
            }
            _ = stop.cancelled() => return,
        }
    }
}

type Opened = (
    mpsc::Sender<pb::AgentMessage>,
    tonic::Streaming<pb::CoordinatorMessage>,
);

/// Dials like `platter-agent` does (agent/src/link.rs) and says hello.
async fn open(spec: &AgentSpec) -> Result<Opened, String> {
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(spec.ca_pem.as_bytes()))
        .identity(Identity::from_pem(&spec.cert_pem, &spec.key_pem));
    let mut endpoint = Endpoint::from_shared(spec.url.clone())
        .map_err(|e| e.to_string())?
        .tls_config(tls)
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(5));
    if spec.keepalive {
        endpoint = endpoint
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(20));
    }
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| platter_proto::tls::chain(&e))?;
    let mut client = AgentLinkClient::new(channel);
    let (tx, rx) = mpsc::channel(4);
    let host = host_name(spec.i);
    let mut labels = std::collections::HashMap::from([("bench".to_string(), "yes".to_string())]);
    if spec.wave {
        labels.insert("wave".into(), "one".into());
    }
    let hello = pb::Hello {
        host: host.clone(),
        boot_id: format!("boot-{host}"),
        agent_version: "fleet-bench".into(),
        held_plan_ids: Vec::new(),
        next_seq: 1,
        devices: devices(&host, spec.devices),
        labels,
        tools: Vec::new(),
    };
    let _ = tx
        .send(pb::AgentMessage {
            kind: Some(pb::agent_message::Kind::Hello(hello)),
        })
        .await;
    let inbound = client
        .open(ReceiverStream::new(rx))
        .await
        .map_err(|s| format!("{}: {}", s.code(), s.message()))?
        .into_inner();
    Ok((tx, inbound))
}

/// A plausible inventory: SATA SSDs with their ids (about 0.5 KiB of JSON each).
fn devices(host: &str, n: usize) -> Vec<pb::Device> {
    (0..n)
        .map(|d| {
            let letter = (b'a' + (d % 26) as u8) as char;
            let serial = format!("S6P{host}{d:04}");
            pb::Device {
                name: format!("sd{letter}"),
                path: format!("/dev/sd{letter}"),
                major_minor: format!("8:{}", d * 16),
                vendor: "ATA".into(),
                model: "Samsung SSD 870 EVO 1TB".into(),
                serial: serial.clone(),
                firmware: "SVT02B6Q".into(),
                size_bytes: 1_000_204_886_016,
                rotational: false,
                transport: "ata".into(),
                controller: vec!["sd".into(), "ahci".into()],
                pci_address: "0000:00:17.0".into(),
                by_id: vec![format!("ata-Samsung_SSD_870_EVO_1TB_{serial}")],
                by_path: vec![format!("pci-0000:00:17.0-ata-{}", d + 1)],
                write_cache: "write_back".into(),
                write_cache_source: "scsi_disk cache_type".into(),
                ..Default::default()
            }
        })
        .collect()
}

/// What /proc says about a process.
#[derive(Debug, Clone, Copy, Default)]
struct ProcSnap {
    rss_kib: u64,
    hwm_kib: u64,
    threads: u64,
    /// utime + stime, clock ticks.
    cpu_ticks: u64,
    fds: u64,
}

fn snap(pid: u32) -> anyhow::Result<ProcSnap> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status (did the coordinator die?)"))?;
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces): state is field 3, utime 14.
    let rest = &stat[stat.rfind(')').context("malformed stat")? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let cpu_ticks = f[11].parse::<u64>()? + f[12].parse::<u64>()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count() as u64)
        .unwrap_or(0);
    Ok(ProcSnap {
        rss_kib: field("VmRSS:"),
        hwm_kib: field("VmHWM:"),
        threads: field("Threads:"),
        cpu_ticks,
        fds,
    })
}

/// CPU time of the whole machine so far (all cores, clock ticks): to tell how much of a
/// phase's CPU went to other processes (a build in another terminal skews every figure).
fn machine_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = stat.lines().next().unwrap_or_default();
    // cpu user nice system idle iowait irq softirq steal …: everything but idle and iowait.
    line.split_whitespace()
        .skip(1)
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum()
}

/// Cores' worth of CPU that processes other than the coordinator and this bench used
/// between two points.
fn others_cores(
    m0: u64,
    m1: u64,
    c: (ProcSnap, ProcSnap),
    me: (ProcSnap, ProcSnap),
    wall: f64,
) -> f64 {
    let ours =
        c.1.cpu_ticks.saturating_sub(c.0.cpu_ticks) + me.1.cpu_ticks.saturating_sub(me.0.cpu_ticks);
    m1.saturating_sub(m0).saturating_sub(ours) as f64 / clk_tck() / wall
}

fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

fn cpu_secs(a: ProcSnap, b: ProcSnap) -> f64 {
    b.cpu_ticks.saturating_sub(a.cpu_ticks) as f64 / clk_tck()
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Raises the open-file limit (children inherit it) as far as allowed, up to 65536.
fn raise_nofile() -> libc::rlim_t {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        let want = libc::rlimit {
            rlim_cur: 65536,
            rlim_max: r.rlim_max.max(65536),
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &want) != 0 {
            // Not allowed to raise the hard limit: take what it permits.
            let soft = libc::rlimit {
                rlim_cur: r.rlim_max,
                rlim_max: r.rlim_max,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &soft);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
    }
    r.rlim_cur
}

/// The coordinator child; killed on drop so a failing bench leaves nothing behind.
struct Coordinator {
    child: Child,
    pid: u32,
}

impl Coordinator {
    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        // SIGTERM first: the coordinator finishes in-flight writes and exits.
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid as i32, libc::SIGTERM) };
        for _ in 0..100 {
            if !self.alive() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
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

fn platter_bin() -> PathBuf {
    std::env::var_os("PLATTER_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_platter")))
}

fn certs(bin: &Path, args: &[&str], dir: &Path) -> anyhow::Result<()> {
    let out = Command::new(bin)
        .arg("certs")
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()?;
    if !out.status.success() {
        bail!(
            "platter certs {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Agent certificates for a00000 … on all cores.
fn issue_agents(ca: &Ca, n: usize) -> anyhow::Result<Vec<(String, String)>> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let validity = Validity::days(2);
    let chunks: Vec<anyhow::Result<Vec<(String, String)>>> = std::thread::scope(|s| {
        let per = n.div_ceil(threads).max(1);
        let handles: Vec<_> = (0..n)
            .step_by(per)
            .map(|start| {
                let end = (start + per).min(n);
                s.spawn(move || {
                    (start..end)
                        .map(|i| {
                            let c = pki::issue(ca, Role::Agent, &[host_name(i)], validity)?;
                            Ok((c.cert_pem, c.key_pem))
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all = Vec::with_capacity(n);
    for c in chunks {
        all.extend(c?);
    }
    Ok(all)
}

/// The port `platter serve --listen 127.0.0.1:0` announced in its log ("listening on
/// ADDRESS"), once it has (whole lines only: a line may be written in pieces).
fn announced_port(log: &Path) -> Option<u16> {
    let text = std::fs::read_to_string(log).ok()?;
    text.split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .find_map(|l| l.trim_end().strip_prefix("listening on ")?.parse().ok())
        .map(|addr: std::net::SocketAddr| addr.port())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let k = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[k]
}

fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Agents the coordinator reports as connected (`platter agents --output json`).
fn connected_per_coordinator(
    bin: &Path,
    url: &str,
    operator: &Path,
) -> anyhow::Result<(usize, usize, Duration)> {
    let t = Instant::now();
    let out = Command::new(bin)
        .args(["agents", "--output", "json"])
        .env("PLATTER_COORDINATOR", url)
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
    let nofile = raise_nofile();
    if nofile < n as libc::rlim_t + 256 {
        eprintln!("warning: RLIMIT_NOFILE is {nofile}: too few descriptors for {n} agents");
    }
    let bin = platter_bin();
    if !bin.exists() {
        bail!(
            "{} does not exist: build it with `cargo build --release --bin platter` or set PLATTER_BIN",
            bin.display()
        );
    }

    let mut tmp = None;
    let dir = match std::env::var_os("FLEET_DIR") {
        Some(d) => {
            let d = PathBuf::from(d);
            std::fs::create_dir_all(&d)?;
            d
        }
        None => {
            let t = tempfile::Builder::new().prefix("fleet-scale-").tempdir()?;
            let d = t.path().to_path_buf();
            tmp = Some(t);
            d
        }
    };
    let keep = std::env::var_os("FLEET_DIR").is_some() || std::env::var_os("FLEET_KEEP").is_some();
    let pki_dir = dir.join("pki");
    eprintln!(
        "fleet_scale: N={n} M={m}, {} cores, RLIMIT_NOFILE {nofile}, dir {}{}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        dir.display(),
        if keep { " (kept)" } else { "" }
    );

    // 1. PKI: CA, coordinator and operator through the CLI, agents through the library.
    if !pki_dir.join("ca/ca.pem").exists() {
        certs(&bin, &["init"], &pki_dir)?;
    }
    certs(
        &bin,
        &["issue", "coordinator", "localhost", "127.0.0.1"],
        &pki_dir,
    )?;
    certs(&bin, &["issue", "operator", "bench"], &pki_dir)?;
    let ca = Ca {
        cert_pem: std::fs::read_to_string(pki_dir.join("ca/ca.pem"))?,
        key_pem: std::fs::read_to_string(pki_dir.join("ca/ca-key.pem"))?,
    };
    let t = Instant::now();
    let agent_certs = issue_agents(&ca, n)?;
    let issue_time = t.elapsed();
    eprintln!(
        "issued {n} agent certificates in {:.2} s",
        issue_time.as_secs_f64()
    );

    // 2. The coordinator.
    let db = dir.join("db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let log = dir.join("coordinator.log");
    // PLATTER_BENCH_POSTGRES=postgres://…: the coordinator's store is a new schema there.
    let db: std::ffi::OsString = match std::env::var("PLATTER_BENCH_POSTGRES") {
        Ok(url) if !url.is_empty() => match platter::store::testing::fresh_postgres(&url) {
            platter::db::Location::Postgres(u) => u.into(),
            platter::db::Location::Sqlite(p) => p.into(),
        },
        _ => db.into(),
    };
    let child = Command::new(&bin)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .arg("--db")
        .arg(&db)
        .arg("--tls-dir")
        .arg(pki_dir.join("coordinator"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let pid = child.id();
    let mut coord = Coordinator { child, pid };
    let t = Instant::now();
    let port = loop {
        if let Some(port) = announced_port(&log) {
            break port;
        }
        if !coord.alive() || t.elapsed() > Duration::from_secs(10) {
            bail!("the coordinator did not start:\n{}", log_tail(&log, 20));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let url = format!("https://127.0.0.1:{port}");
    std::thread::sleep(Duration::from_millis(200));
    let s_start = snap(pid)?;
    eprintln!(
        "coordinator pid {pid} on {url}: RSS {:.1} MiB, {} threads",
        mib(s_start.rss_kib),
        s_start.threads
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let fleet = Arc::new(Fleet {
        epoch: Instant::now(),
        connected_at: (0..n).map(|_| AtomicU64::new(0)).collect(),
        plan_at: (0..n).map(|_| AtomicU64::new(0)).collect(),
        connected: AtomicUsize::new(0),
        failed: AtomicUsize::new(0),
        dropped: AtomicUsize::new(0),
        plans: AtomicUsize::new(0),
        unexpected_plans: AtomicUsize::new(0),
        heartbeats: AtomicU64::new(0),
        first_error: Mutex::new(None),
    });
    let stop = CancellationToken::new();
    let gate = Arc::new(Semaphore::new(concurrency));
    let ca_pem: Arc<str> = Arc::from(ca.cert_pem.as_str());
    let operator = pki_dir.join("operator-bench");

    // 3. Connect N agents, `concurrency` handshakes at a time.
    let perf = Perf::start(pid, "connect");
    let s_before_connect = snap(pid)?;
    let me_before_connect = snap(std::process::id())?;
    let m_before_connect = machine_ticks();
    let t_connect = Instant::now();
    let connect_start_ns = fleet.since_epoch();
    for (i, (cert_pem, key_pem)) in agent_certs.into_iter().enumerate() {
        let spec = AgentSpec {
            i,
            url: url.clone(),
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
        let c = fleet.connected.load(Ordering::Relaxed);
        let f = fleet.failed.load(Ordering::Relaxed);
        if c + f >= n {
            break;
        }
        if !coord.alive() {
            bail!(
                "the coordinator died while agents connected:\n{}",
                log_tail(&log, 20)
            );
        }
        if last_report.elapsed() > Duration::from_secs(5) {
            let s = snap(pid)?;
            eprintln!(
                "  {:5.1} s: {c} connected, {f} failed; coordinator RSS {:.0} MiB, {} threads",
                t_connect.elapsed().as_secs_f64(),
                mib(s.rss_kib),
                s.threads
            );
            last_report = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let connect_time = t_connect.elapsed();
    let s_connected = snap(pid)?;
    let me_connected = snap(std::process::id())?;
    let m_connected = machine_ticks();
    perf.stop();
    let connected = fleet.connected.load(Ordering::Relaxed);
    let failed = fleet.failed.load(Ordering::Relaxed);
    let mut connect_lat: Vec<f64> = fleet
        .connected_at
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .filter(|&t| t > 0)
        .map(|t| (t - connect_start_ns) as f64 / 1e9)
        .collect();
    connect_lat.sort_by(f64::total_cmp);
    eprintln!(
        "connected {connected} of {n} in {:.2} s ({failed} failed){}",
        connect_time.as_secs_f64(),
        fleet
            .first_error
            .lock()
            .unwrap()
            .as_ref()
            .map(|e| format!("; first error: {e}"))
            .unwrap_or_default()
    );

    // 4. Verify through the operator API, then an idle window: heartbeats only.
    let (seen_connected, seen_total, agents_call) =
        connected_per_coordinator(&bin, &url, &operator)?;
    eprintln!(
        "coordinator says {seen_connected} connected of {seen_total} known (`platter agents` took {:.2} s)",
        agents_call.as_secs_f64()
    );
    std::thread::sleep(Duration::from_secs(2));
    let perf = Perf::start(pid, "idle");
    let hb0 = fleet.heartbeats.load(Ordering::Relaxed);
    let s_idle0 = snap(pid)?;
    let me_idle0 = snap(std::process::id())?;
    let m_idle0 = machine_ticks();
    let t_idle = Instant::now();
    std::thread::sleep(Duration::from_secs(idle_secs));
    let s_idle1 = snap(pid)?;
    let me_idle1 = snap(std::process::id())?;
    let m_idle1 = machine_ticks();
    let idle_wall = t_idle.elapsed().as_secs_f64();
    let hb = fleet.heartbeats.load(Ordering::Relaxed) - hb0;
    perf.stop();
    let idle_cpu = cpu_secs(s_idle0, s_idle1);
    eprintln!(
        "idle {idle_wall:.0} s: {hb} heartbeats, coordinator CPU {:.2} s ({:.1}% of one core), RSS {:.1} MiB",
        idle_cpu,
        100.0 * idle_cpu / idle_wall,
        mib(s_idle1.rss_kib)
    );
    let dropped_before_submit = fleet.dropped.load(Ordering::Relaxed);

    // 5. Submit a campaign for the M agents labelled wave=one; wait for their plans.
    let campaign = dir.join("fleet.yaml");
    std::fs::write(
        &campaign,
        "name: fleet-scale\nhosts: { labels: { wave: one } }\nworkload: { command: { run: \"true\" } }\nrepeat: 1\n",
    )?;
    let perf = Perf::start(pid, "fanout");
    let s_fan0 = snap(pid)?;
    let me_fan0 = snap(std::process::id())?;
    let m_fan0 = machine_ticks();
    let submit_start_ns = fleet.since_epoch();
    let t_submit = Instant::now();
    let mut submit = Command::new(&bin)
        .arg("submit")
        .arg(&campaign)
        .env("PLATTER_COORDINATOR", &url)
        .env("PLATTER_TLS_DIR", &operator)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut submit_done: Option<(Duration, std::process::ExitStatus)> = None;
    let mut all_plans: Option<Duration> = None;
    let mut timed_out = false;
    while submit_done.is_none() || all_plans.is_none() {
        if submit_done.is_none() {
            if let Some(status) = submit.try_wait()? {
                submit_done = Some((t_submit.elapsed(), status));
                if !status.success() {
                    break;
                }
            }
        }
        if all_plans.is_none() && fleet.plans.load(Ordering::Relaxed) >= m {
            all_plans = Some(t_submit.elapsed());
        }
        if t_submit.elapsed() > PLAN_TIMEOUT {
            timed_out = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let s_fan1 = snap(pid)?;
    let me_fan1 = snap(std::process::id())?;
    let m_fan1 = machine_ticks();
    let fan_wall = t_submit.elapsed().as_secs_f64();
    perf.stop();
    let submit_out = submit.wait_with_output()?;
    let mut plan_lat: Vec<f64> = fleet
        .plan_at
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .filter(|&t| t > 0)
        .map(|t| t.saturating_sub(submit_start_ns) as f64 / 1e9)
        .collect();
    plan_lat.sort_by(f64::total_cmp);
    let plans = fleet.plans.load(Ordering::Relaxed);
    // A moment for stray plans to show up.
    std::thread::sleep(Duration::from_millis(500));
    let s_end = snap(pid)?;
    let (still_connected, _, _) = connected_per_coordinator(&bin, &url, &operator)?;
    let coordinator_ok = coord.alive();

    // 6. The table.
    let f = |x: f64| format!("{x:.3} s");
    let idle_pct = 100.0 * idle_cpu / idle_wall;
    let per_agent_kib =
        (s_connected.rss_kib as f64 - s_start.rss_kib as f64) / connected.max(1) as f64;
    let submit_secs = submit_done.map(|(d, _)| d.as_secs_f64());
    let fan_cpu = cpu_secs(s_fan0, s_fan1);
    println!();
    println!(
        "fleet_scale: N={n} M={m}, coordinator {} (pid {pid})",
        bin.display()
    );
    println!("| what | value |");
    println!("|---|---|");
    println!(
        "| agent certificates issued (library, {} threads) | {n} in {:.2} s |",
        std::thread::available_parallelism().map_or(2, |n| n.get()),
        issue_time.as_secs_f64()
    );
    println!("| agents connected (bench / coordinator says) | {connected} / {seen_connected} of {n} ({failed} failed) |");
    println!(
        "| connect time, all (p50 / p99 of each stream's open time) | {} ({} / {}), {concurrency} handshakes in flight |",
        f(connect_time.as_secs_f64()),
        f(percentile(&connect_lat, 0.5)),
        f(percentile(&connect_lat, 0.99))
    );
    println!(
        "| CPU while connecting: coordinator / this bench (the agents' side) | {:.2} s / {:.2} s |",
        cpu_secs(s_before_connect, s_connected),
        cpu_secs(me_before_connect, me_connected)
    );
    println!(
        "| coordinator RSS: started / all connected / after idle / after fan-out | {:.1} / {:.1} / {:.1} / {:.1} MiB |",
        mib(s_start.rss_kib),
        mib(s_connected.rss_kib),
        mib(s_idle1.rss_kib),
        mib(s_end.rss_kib)
    );
    println!("| coordinator RSS per connected agent | {per_agent_kib:.1} KiB |");
    println!(
        "| coordinator VmHWM (peak RSS) | {:.1} MiB |",
        mib(s_end.hwm_kib)
    );
    println!(
        "| coordinator threads / open fds (connected) | {} / {} |",
        s_connected.threads, s_connected.fds
    );
    println!(
        "| idle {idle_wall:.0} s: heartbeats sent / coordinator CPU | {hb} / {idle_cpu:.2} s = {idle_pct:.1}% of one core |"
    );
    println!(
        "| this bench's RSS / CPU in the idle window (N agents' side) | {:.0} MiB / {:.2} s |",
        mib(me_idle1.rss_kib),
        cpu_secs(me_idle0, me_idle1)
    );
    println!(
        "| `platter submit` returned (submit RPC incl. dispatch to all) | {} |",
        submit_secs.map_or("-".into(), f)
    );
    println!(
        "| plans received | {plans} of {m} ({} unexpected) |",
        fleet.unexpected_plans.load(Ordering::Relaxed)
    );
    println!(
        "| plan fan-out to M, from submit start: first / p50 / p90 / all | {} / {} / {} / {} |",
        f(percentile(&plan_lat, 0.0)),
        f(percentile(&plan_lat, 0.5)),
        f(percentile(&plan_lat, 0.9)),
        all_plans.map_or_else(|| "not all".into(), |d| f(d.as_secs_f64()))
    );
    println!("| coordinator CPU during fan-out | {fan_cpu:.2} s |");
    println!("| agents connected at the end (coordinator says) | {still_connected} |");
    println!(
        "| other processes' CPU on this machine: connect / idle / fan-out | {:.2} / {:.2} / {:.2} cores |",
        others_cores(m_before_connect, m_connected, (s_before_connect, s_connected), (me_before_connect, me_connected), connect_time.as_secs_f64()),
        others_cores(m_idle0, m_idle1, (s_idle0, s_idle1), (me_idle0, me_idle1), idle_wall),
        others_cores(m_fan0, m_fan1, (s_fan0, s_fan1), (me_fan0, me_fan1), fan_wall),
    );

    // What broke, if anything.
    let mut ok = true;
    let mut broke = |what: String| {
        println!("BROKE: {what}");
        ok = false;
    };
    if !coordinator_ok {
        broke(format!("the coordinator exited:\n{}", log_tail(&log, 20)));
    }
    if connected < n {
        broke(format!("{} agents could not connect", n - connected));
    }
    if seen_connected < connected {
        broke(format!(
            "the coordinator listed only {seen_connected} of {connected} connected agents"
        ));
    }
    let dropped = fleet.dropped.load(Ordering::Relaxed);
    if dropped > 0 {
        broke(format!(
            "{dropped} streams ended ({dropped_before_submit} before the submission)"
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
    if timed_out || plans < m.min(connected) {
        broke(format!(
            "only {plans} of {m} plans arrived within {} s",
            PLAN_TIMEOUT.as_secs()
        ));
    }
    if fleet.unexpected_plans.load(Ordering::Relaxed) > 0 {
        broke("plans went to agents the campaign did not select".into());
    }
    if let Some(e) = fleet.first_error.lock().unwrap().as_ref() {
        println!("first agent error: {e}");
    }

    stop.cancel();
    drop(coord);
    rt.shutdown_timeout(Duration::from_secs(5));
    if keep {
        if let Some(t) = tmp {
            let _ = t.keep();
        }
        eprintln!("kept {}", dir.display());
    }
    Ok(ok)
}
