//! Console scale (issue 29): is the fleet console quick and usable at fleet scale, and does
//! a room full of open consoles slow the fleet down?
//!
//! Run: `cargo bench -p platter --bench console_scale -- [--quick]`.
//!
//! 1. Pages. The release `platter serve --http` with mutual TLS, N fake agents connected
//!    (fleet_scale's: a TLS stream each, heartbeats every 5 s) and C campaigns in the store
//!    (each naming 50 of the hosts; all but the last 10 cancelled, so the overview lists 10
//!    running and reads verdicts of ended ones). Times the overview, the hosts pages (first,
//!    middle, filtered) and the campaigns page, HTML and JSON, each `REQUESTS` times one
//!    after the other from a client in this process on loopback (request written → last
//!    byte read, a new connection each), with the coordinator's CPU per request; checks a
//!    hosts page holds at most 100 rows and says how many matched.
//! 2. Live consoles. A plaintext `platter serve --http` with S real `platter agent`
//!    processes, each running `repeat` × `/bin/true`; runs in pairs, one without console
//!    clients (A) and one with K (B), the order alternating per pair. A client holds
//!    its page's stream (`/events?page=`, for `/`, `/hosts` or `/campaigns`, round robin)
//!    as console.js does, and reads each `main` event (the page's `<main>` anew). The step rate is the campaign's steps over the time
//!    from its submission to the API saying it is done (polled every 20 ms in both runs).
//!    An agent whose stream dropped logs a second `connected`: the bench counts them.
//!
//! Defaults (full / `--quick`): N 10,000 / 1,000, C 200 / 20, REQUESTS 20 / 5, S 100 / 10,
//! K 200 / 20, pairs 3 / 1, repeat 100 / 50 steps per host. Environment overrides:
//! `CONSOLE_AGENTS`, `CONSOLE_CAMPAIGNS`, `CONSOLE_REQUESTS`, `CONSOLE_STEP_AGENTS`,
//! `CONSOLE_CLIENTS`, `CONSOLE_PAIRS`, `CONSOLE_REPEAT`; `PLATTER_BIN` as fleet_scale's.
//! Exits non-zero when something broke (agents dropped, a page failed or was not paged),
//! not when a target is missed; the figures say that.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use common::agents::{agent, issue_agents, mono_ns, AgentSpec, Fleet, C};
use common::procs::{
    certs, clk_tck, env_or, machine_ticks, percentile, platter_bin, raise_nofile, snap,
    Coordinator, ProcSnap,
};
use platter::pki::Ca;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The issue's target for a page, server side.
const PAGE_TARGET: Duration = Duration::from_millis(200);
/// Hosts each seeded campaign names.
const HOSTS_PER_CAMPAIGN: usize = 50;
/// Seeded campaigns left running (the rest are cancelled).
const RUNNING: usize = 10;
/// The pause before each measured step run.
const SETTLE: Duration = Duration::from_secs(2);
/// How often the bench asks whether a step run's campaign is done.
const POLL: Duration = Duration::from_millis(20);

struct Settings {
    agents: usize,
    campaigns: usize,
    requests: usize,
    step_agents: usize,
    clients: usize,
    pairs: usize,
    repeat: usize,
}

fn main() {
    match run() {
        Ok(true) => std::process::exit(0),
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("console_scale: {e:#}");
            std::process::exit(2);
        }
    }
}

fn run() -> anyhow::Result<bool> {
    let quick = std::env::args().any(|a| a == "--quick");
    let pick = |full: usize, quick_value: usize| if quick { quick_value } else { full };
    let s = Settings {
        agents: env_or("CONSOLE_AGENTS", pick(10_000, 1_000)),
        campaigns: env_or("CONSOLE_CAMPAIGNS", pick(200, 20)),
        requests: env_or("CONSOLE_REQUESTS", pick(20, 5)),
        step_agents: env_or("CONSOLE_STEP_AGENTS", pick(100, 10)),
        clients: env_or("CONSOLE_CLIENTS", pick(200, 20)),
        pairs: env_or("CONSOLE_PAIRS", pick(3, 1)),
        repeat: env_or("CONSOLE_REPEAT", pick(100, 50)),
    };
    let bin = platter_bin();
    if !bin.exists() {
        bail!(
            "{} does not exist: build it with `cargo build --release --bin platter` or set PLATTER_BIN",
            bin.display()
        );
    }
    let nofile = raise_nofile();
    eprintln!(
        "console_scale{}: {} agents, {} campaigns, {} requests a page; {} stepping agents, {} clients, {} pairs, repeat {}; {} cores, RLIMIT_NOFILE {nofile}",
        if quick { " --quick" } else { "" },
        s.agents,
        s.campaigns,
        s.requests,
        s.step_agents,
        s.clients,
        s.pairs,
        s.repeat,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let pages_ok = pages(&rt, &bin, &s)?;
    let live_ok = live(&rt, &bin, &s)?;
    Ok(pages_ok && live_ok)
}

/// An account with an API token on the store at `db` (made before the coordinator starts).
fn account(bin: &Path, dir: &Path, db: &Path) -> anyhow::Result<String> {
    let password = dir.join("bench.password");
    std::fs::write(&password, "a bench's long password")?;
    let db = db.to_str().context("the store's path is not UTF-8")?;
    let pw = password
        .to_str()
        .context("the password's path is not UTF-8")?;
    output(bin, &["db", "migrate", "--db", db])?;
    output(
        bin,
        &[
            "users",
            "add",
            "bench",
            "--role",
            "operator",
            "--password-file",
            pw,
            "--db",
            db,
        ],
    )?;
    let token = output(
        bin,
        &[
            "tokens", "add", "--user", "bench", "--label", "bench", "--db", db,
        ],
    )?;
    Ok(token.trim().to_string())
}

fn output(bin: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(bin).args(args).output()?;
    if !out.status.success() {
        bail!(
            "platter {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// Part 1: the pages with N agents connected and C campaigns in the store.
fn pages(rt: &tokio::runtime::Runtime, bin: &Path, s: &Settings) -> anyhow::Result<bool> {
    let tmp = tempfile::Builder::new()
        .prefix("console-scale-")
        .tempdir()?;
    let dir = tmp.path();
    let pki_dir = dir.join("pki");
    certs(bin, &["init"], &pki_dir)?;
    certs(
        bin,
        &["issue", "coordinator", "localhost", "127.0.0.1"],
        &pki_dir,
    )?;
    let ca = Ca {
        cert_pem: std::fs::read_to_string(pki_dir.join("ca/ca.pem"))?,
        key_pem: std::fs::read_to_string(pki_dir.join("ca/ca-key.pem"))?,
    };
    let agent_certs = issue_agents(&ca, 0..s.agents)?;
    let db = dir.join("db");
    let token = account(bin, dir, &db)?;
    let mut coordinator = Coordinator::start(
        bin,
        "A",
        db.as_os_str(),
        Some(&pki_dir.join("coordinator-localhost")),
        dir.join("coordinator.log"),
        &["--http", "127.0.0.1:0"],
    )?;
    let http = coordinator.http_addr()?;
    let web = Web::new(&http, token, Some(&ca.cert_pem))?;

    // The fleet: N fake agents, 200 handshakes at a time.
    let fleet = Arc::new(Fleet::new(mono_ns(), s.agents, 0));
    let stop = CancellationToken::new();
    let gate = Arc::new(Semaphore::new(200));
    let ca_pem: Arc<str> = Arc::from(ca.cert_pem.as_str());
    let targets: Arc<[(usize, String)]> = vec![(0, coordinator.url.clone())].into();
    let t = Instant::now();
    for (i, (cert_pem, key_pem)) in agent_certs.into_iter().enumerate() {
        let spec = AgentSpec {
            i,
            targets: targets.clone(),
            ca_pem: ca_pem.clone(),
            cert_pem,
            key_pem,
            wave: true,
            devices: 2,
            keepalive: true,
        };
        rt.spawn(agent(spec, fleet.clone(), gate.clone(), stop.clone()));
    }
    // Connected, and every hello stored: the API lists them all as idle.
    loop {
        if fleet.count(C::Failed) > 0 {
            bail!(
                "agents could not connect: {:?}",
                fleet.first_error.lock().unwrap()
            );
        }
        if fleet.count(C::Connected) == s.agents {
            let v = rt.block_on(web.json("/api/v1/overview"))?;
            if v["hosts_by_state"]["idle"].as_u64() == Some(s.agents as u64) {
                break;
            }
        }
        if !coordinator.alive() || t.elapsed() > Duration::from_secs(300) {
            bail!(
                "{} of {} agents connected after {:.0} s",
                fleet.count(C::Connected),
                s.agents,
                t.elapsed().as_secs_f64()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "{} agents connected and listed in {:.1} s",
        s.agents,
        t.elapsed().as_secs_f64()
    );

    // The campaigns: each names 50 hosts; all but the last RUNNING cancelled.
    let t = Instant::now();
    let mut ids = Vec::new();
    for k in 0..s.campaigns {
        let hosts: Vec<String> = (0..HOSTS_PER_CAMPAIGN)
            .map(|j| common::agents::host_name((k * HOSTS_PER_CAMPAIGN + j) % s.agents))
            .collect();
        let yaml = format!(
            "name: seed-{k:03}\nhosts: {{ names: [{}] }}\nworkload: {{ command: {{ run: /bin/true }} }}\nrepeat: 3\n",
            hosts.join(", ")
        );
        let v = rt.block_on(web.post("/api/v1/campaigns", &yaml))?;
        let id = v["campaign_id"]
            .as_str()
            .with_context(|| format!("submitting seed-{k:03}: {v}"))?
            .to_string();
        ids.push(id);
    }
    for id in ids.iter().take(s.campaigns.saturating_sub(RUNNING)) {
        rt.block_on(web.post(&format!("/api/v1/campaigns/{id}/cancel"), ""))?;
    }
    eprintln!(
        "{} campaigns submitted, {} of them cancelled, in {:.1} s",
        s.campaigns,
        s.campaigns.saturating_sub(RUNNING),
        t.elapsed().as_secs_f64()
    );

    let middle = s.agents / 100 / 2;
    let last = common::agents::host_name(s.agents - 1);
    let paths = [
        "/".to_string(),
        "/api/v1/overview".into(),
        "/hosts".into(),
        format!("/hosts?page={middle}"),
        "/hosts?state=busy".into(),
        format!("/hosts?q={last}"),
        "/api/v1/hosts".into(),
        format!("/api/v1/hosts?page={middle}"),
        "/campaigns".into(),
        "/api/v1/campaigns".into(),
    ];
    println!(
        "\nPages with {} agents connected and {} campaigns ({RUNNING} running); {} requests each, one at a time, timed by a client on loopback:\n",
        s.agents, s.campaigns, s.requests
    );
    println!("| page | p50 | p90 | max | coordinator CPU per request | bytes | ≤ 200 ms |");
    println!("|---|---|---|---|---|---|---|");
    let mut ok = true;
    for path in &paths {
        // A first request outside the figures: verdicts of ended campaigns are read once.
        let first = rt.block_on(web.get(path))?;
        if first.status != 200 {
            eprintln!("{path}: status {}", first.status);
            ok = false;
            continue;
        }
        ok &= paged(path, &first.body, s.agents);
        let before = snap(coordinator.pid)?;
        let mut times = Vec::new();
        let mut bytes = 0;
        for _ in 0..s.requests {
            let t = Instant::now();
            let a = rt.block_on(web.get(path))?;
            times.push(t.elapsed().as_secs_f64());
            bytes = a.body.len();
        }
        let after = snap(coordinator.pid)?;
        times.sort_by(f64::total_cmp);
        let cpu_ms = cpu_ticks_ms(before, after) / s.requests as f64;
        let p90 = percentile(&times, 0.9);
        println!(
            "| `{path}` | {:.1} ms | {:.1} ms | {:.1} ms | {cpu_ms:.1} ms | {bytes} | {} |",
            percentile(&times, 0.5) * 1e3,
            p90 * 1e3,
            times.last().copied().unwrap_or(f64::NAN) * 1e3,
            if p90 <= PAGE_TARGET.as_secs_f64() {
                "✔"
            } else {
                "✘"
            }
        );
    }
    let dropped = fleet.count(C::Dropped);
    println!(
        "\nagents connected {} of {}, streams dropped {dropped}",
        fleet.count(C::Connected),
        s.agents
    );
    stop.cancel();
    Ok(ok && dropped == 0 && coordinator.alive())
}

/// Whether a hosts page is paged: the first page's 100 rows of what matched (fewer when
/// fewer matched), and it says of how many hosts. Other pages pass.
fn paged(path: &str, body: &str, agents: usize) -> bool {
    let (rows, total, matched) = if path.starts_with("/api/v1/hosts") {
        let v: Value = serde_json::from_str(body).unwrap_or_default();
        let n = |k: &str| v[k].as_u64().map_or(usize::MAX, |n| n as usize);
        let rows = v["hosts"].as_array().map_or(usize::MAX, Vec::len);
        (rows, n("total"), n("matched"))
    } else if path.starts_with("/hosts") {
        // "<p id="count">MATCHED of TOTAL host(s)</p>"
        let count = body
            .split("<p id=\"count\">")
            .nth(1)
            .and_then(|r| r.split(" host(s)").next())
            .unwrap_or_default();
        let mut n = count.split(" of ").map(|n| n.parse().unwrap_or(usize::MAX));
        let (matched, total) = (n.next().unwrap_or(0), n.next().unwrap_or(0));
        // Every row but the header's.
        (
            body.matches("<tr>").count().saturating_sub(1),
            total,
            matched,
        )
    } else {
        return true;
    };
    let page: usize = path
        .split("page=")
        .nth(1)
        .and_then(|p| p.split('&').next()?.parse().ok())
        .unwrap_or(0);
    let want = matched.saturating_sub(page * 100).min(100);
    if total != agents || rows != want || (path.contains("q=") && matched != 1) {
        eprintln!("{path}: {rows} rows of {matched} matched of {total} hosts; want {want} rows of {agents} hosts");
        return false;
    }
    true
}

fn cpu_ticks_ms(a: ProcSnap, b: ProcSnap) -> f64 {
    b.cpu_ticks.saturating_sub(a.cpu_ticks) as f64 / clk_tck() * 1e3
}

/// Part 2: step runs with and without K live consoles.
fn live(rt: &tokio::runtime::Runtime, bin: &Path, s: &Settings) -> anyhow::Result<bool> {
    // Journals and the store on tmpfs where there is one: fsync then costs nothing, and
    // the step rate is the CPU's.
    let shm = Path::new("/dev/shm");
    let mut builder = tempfile::Builder::new();
    builder.prefix("console-live-");
    let tmp = if shm.is_dir() {
        builder.tempdir_in(shm)?
    } else {
        builder.tempdir()?
    };
    let dir = tmp.path();
    let db = dir.join("db");
    let token = account(bin, dir, &db)?;
    let mut coordinator = Coordinator::start(
        bin,
        "live",
        db.as_os_str(),
        None,
        dir.join("coordinator.log"),
        &["--http", "127.0.0.1:0"],
    )?;
    let web = Web::new(&coordinator.http_addr()?, token, None)?;
    let mut agents = Agents(Vec::new());
    let names: Vec<String> = (1..=s.step_agents).map(|i| format!("h{i:03}")).collect();
    for name in &names {
        let log = dir.join(format!("{name}.log"));
        let child = Command::new(bin)
            .args(["agent", "--coordinator", &coordinator.url, "--name", name])
            .arg("--state-dir")
            .arg(dir.join(name))
            .arg("--dangerously-insecure")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()?;
        agents.0.push((child, log));
    }
    let t = Instant::now();
    loop {
        let v = rt.block_on(web.json("/api/v1/overview"))?;
        if v["hosts_by_state"]["idle"].as_u64() == Some(s.step_agents as u64) {
            break;
        }
        if t.elapsed() > Duration::from_secs(60) {
            bail!(
                "the stepping agents did not all connect: {}",
                v["hosts_by_state"]
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let yaml = format!(
        "name: steps\nhosts: {{ names: [{}] }}\nworkload: {{ command: {{ run: /bin/true }} }}\nrepeat: {}\n",
        names.join(", "),
        s.repeat
    );
    // A first run outside the figures: the agents' spawners and caches warm up.
    step_run(rt, &web, &yaml)?;
    println!(
        "\nStep runs: {} agents × {} × /bin/true; A without console clients, B with {} (each holding its page's /events stream, as console.js does):\n",
        s.step_agents, s.repeat, s.clients
    );
    println!("| pair | order | A steps/s | B steps/s | B / A | B: pages sent (`main` events), kB | coordinator CPU A / B | bench (clients) CPU A / B | the rest (agents, steps, other load) A / B |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut ratios = Vec::new();
    let pages = ["/", "/hosts", "/campaigns"];
    for pair in 0..s.pairs {
        let b_first = pair % 2 == 1;
        let mut a = None;
        let mut b = None;
        for with_clients in [b_first, !b_first] {
            if with_clients {
                let stop = CancellationToken::new();
                let stats = Arc::new(ClientStats::default());
                let opened = Arc::new(AtomicUsize::new(0));
                for k in 0..s.clients {
                    let web = web.clone();
                    let page = pages[k % pages.len()];
                    rt.spawn(client(
                        web,
                        page,
                        stats.clone(),
                        opened.clone(),
                        stop.clone(),
                    ));
                }
                let t = Instant::now();
                while opened.load(Ordering::Relaxed) < s.clients {
                    if t.elapsed() > Duration::from_secs(30) {
                        bail!(
                            "{} of {} console clients have /events open",
                            opened.load(Ordering::Relaxed),
                            s.clients
                        );
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let run = measured(rt, &web, &yaml, coordinator.pid)?;
                stop.cancel();
                b = Some((run, stats));
            } else {
                a = Some(measured(rt, &web, &yaml, coordinator.pid)?);
            }
        }
        let (a, (b, stats)) = (a.expect("run A"), b.expect("run B"));
        let ratio = b.rate / a.rate;
        ratios.push(ratio);
        println!(
            "| {} | {} | {:.0} | {:.0} | {ratio:.3} | {}, {:.0} | {:.2} / {:.2} cores | {:.2} / {:.2} cores | {:.2} / {:.2} cores |",
            pair + 1,
            if b_first { "B, A" } else { "A, B" },
            a.rate,
            b.rate,
            stats.mains.load(Ordering::Relaxed),
            stats.bytes.load(Ordering::Relaxed) as f64 / 1e3,
            a.coordinator_cores,
            b.coordinator_cores,
            a.bench_cores,
            b.bench_cores,
            a.other_cores,
            b.other_cores,
        );
        let failed = stats.failed.load(Ordering::Relaxed);
        if failed > 0 {
            eprintln!("{failed} console streams ended early");
        }
    }
    ratios.sort_by(f64::total_cmp);
    let reconnects = agents.reconnects()?;
    println!(
        "\nB / A: median {:.3}, range {:.3} … {:.3} (target ≥ 0.95); agent streams dropped (a second `connected` in an agent's log): {reconnects}",
        percentile(&ratios, 0.5),
        ratios.first().copied().unwrap_or(f64::NAN),
        ratios.last().copied().unwrap_or(f64::NAN),
    );
    Ok(reconnects == 0 && coordinator.alive())
}

/// `platter agent` children, stopped on drop; with their logs.
struct Agents(Vec<(Child, PathBuf)>);

impl Agents {
    /// Connections beyond each agent's first.
    fn reconnects(&self) -> anyhow::Result<usize> {
        let mut extra = 0;
        for (_, log) in &self.0 {
            let text = std::fs::read_to_string(log)?;
            let connects = text
                .lines()
                .filter(|l| l.contains(" connected ") || l.ends_with(" connected"))
                .count();
            if connects == 0 {
                bail!("{} says nowhere that it connected", log.display());
            }
            extra += connects - 1;
        }
        Ok(extra)
    }
}

impl Drop for Agents {
    fn drop(&mut self) {
        for (child, _) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

struct Run {
    rate: f64,
    coordinator_cores: f64,
    /// This bench's (the console clients', in a run with them).
    bench_cores: f64,
    /// Cores' worth of CPU used by everything but the coordinator and this bench.
    other_cores: f64,
}

/// One step run with the coordinator's and the machine's CPU around it.
fn measured(rt: &tokio::runtime::Runtime, web: &Web, yaml: &str, pid: u32) -> anyhow::Result<Run> {
    // What the run before left (the coordinator answering the last page fetches) settles.
    std::thread::sleep(SETTLE);
    let (c0, me0, m0) = (snap(pid)?, snap(std::process::id())?, machine_ticks());
    let t = Instant::now();
    let rate = step_run(rt, web, yaml)?;
    let wall = t.elapsed().as_secs_f64();
    let (c1, me1, m1) = (snap(pid)?, snap(std::process::id())?, machine_ticks());
    let ticks = |a: ProcSnap, b: ProcSnap| b.cpu_ticks.saturating_sub(a.cpu_ticks);
    let coordinator = ticks(c0, c1);
    let others = (m1 - m0)
        .saturating_sub(coordinator)
        .saturating_sub(ticks(me0, me1));
    Ok(Run {
        rate,
        coordinator_cores: coordinator as f64 / clk_tck() / wall,
        bench_cores: ticks(me0, me1) as f64 / clk_tck() / wall,
        // The agents and their /bin/true are "other" too: the figure says what the
        // machine gave to the fleet besides the coordinator.
        other_cores: others as f64 / clk_tck() / wall,
    })
}

/// Submits the step campaign and waits until it is done: its steps per second.
fn step_run(rt: &tokio::runtime::Runtime, web: &Web, yaml: &str) -> anyhow::Result<f64> {
    rt.block_on(async {
        let t = Instant::now();
        let v = web.post("/api/v1/campaigns", yaml).await?;
        let id = v["campaign_id"]
            .as_str()
            .with_context(|| format!("submitting the step campaign: {v}"))?
            .to_string();
        loop {
            let c = web.json(&format!("/api/v1/campaigns/{id}")).await?;
            match c["state"].as_str() {
                Some("running") => {}
                Some("done") => {
                    let steps = c["steps_done"].as_u64().context("steps_done")?;
                    return Ok(steps as f64 / t.elapsed().as_secs_f64());
                }
                _ => bail!("the step campaign ended as {c}"),
            }
            if t.elapsed() > Duration::from_secs(600) {
                bail!("the step campaign ran over 10 minutes");
            }
            tokio::time::sleep(POLL).await;
        }
    })
}

#[derive(Default)]
struct ClientStats {
    /// `main` events read, and their bytes.
    mains: AtomicU64,
    bytes: AtomicU64,
    /// Streams that ended or failed before the run did.
    failed: AtomicU64,
}

/// One open console: its page's `/events` stream held, each `main` read, as console.js
/// does (the browser's putting it in place costs the coordinator nothing).
async fn client(
    web: Web,
    page: &'static str,
    stats: Arc<ClientStats>,
    opened: Arc<AtomicUsize>,
    stop: CancellationToken,
) {
    // What console.js's `encodeURIComponent` makes of the page's path.
    let address = format!(
        "/events?page={}",
        percent_encoding::utf8_percent_encode(page, percent_encoding::NON_ALPHANUMERIC)
    );
    tokio::select! {
        r = web.events(&address, &opened, |bytes| {
            stats.mains.fetch_add(1, Ordering::Relaxed);
            stats.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        }) => {
            stats.failed.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = r { eprintln!("a console's /events ended: {e:#}") }
        }
        _ = stop.cancelled() => {}
    }
}

/// The console at `addr`, asked with an API token; over HTTPS when the coordinator has a
/// certificate (`tls`, trusting the bench's CA).
#[derive(Clone)]
struct Web {
    addr: String,
    token: String,
    tls: Option<tokio_rustls::TlsConnector>,
}

/// A plaintext or TLS connection.
trait Conn: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Conn for T {}

struct Answer {
    status: u16,
    body: String,
}

impl Web {
    /// The console at `url` (`http on URL` in the coordinator's log); an `https://` one is
    /// checked against `ca_pem`.
    fn new(url: &str, token: String, ca_pem: Option<&str>) -> anyhow::Result<Web> {
        use tokio_rustls::rustls;
        let (https, addr) = match url.split_once("://") {
            Some((scheme, addr)) => (scheme == "https", addr),
            None => (false, url),
        };
        let tls = if https {
            use rustls::pki_types::pem::PemObject;
            let ca = ca_pem.context("an https:// console needs the fleet's CA")?;
            let mut roots = rustls::RootCertStore::empty();
            for c in rustls::pki_types::CertificateDer::pem_slice_iter(ca.as_bytes()) {
                roots.add(c?)?;
            }
            let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
            Some(tokio_rustls::TlsConnector::from(Arc::new(cfg)))
        } else {
            None
        };
        Ok(Web {
            addr: addr.to_string(),
            token,
            tls,
        })
    }

    /// Writes one HTTP/1.1 request on a new connection; the connection, answer unread.
    async fn send(
        &self,
        method: &str,
        path: &str,
        body: &str,
    ) -> anyhow::Result<BufReader<Box<dyn Conn>>> {
        let tcp = TcpStream::connect(&self.addr).await?;
        let mut tcp: Box<dyn Conn> = match &self.tls {
            Some(tls) => {
                let host = self.addr.rsplit_once(':').map_or(&*self.addr, |(h, _)| h);
                let name = tokio_rustls::rustls::pki_types::ServerName::try_from(host.to_string())?;
                Box::new(tls.connect(name, tcp).await?)
            }
            None => Box::new(tcp),
        };
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAuthorization: Bearer {}\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            self.token,
            body.len()
        );
        tcp.write_all(head.as_bytes()).await?;
        tcp.write_all(body.as_bytes()).await?;
        Ok(BufReader::new(tcp))
    }

    async fn call(&self, method: &str, path: &str, body: &str) -> anyhow::Result<Answer> {
        let mut r = self.send(method, path, body).await?;
        let mut raw = Vec::new();
        r.read_to_end(&mut raw).await?;
        let raw = String::from_utf8(raw)?;
        let (head, body) = raw
            .split_once("\r\n\r\n")
            .with_context(|| format!("{method} {path}: not an HTTP answer"))?;
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("{method} {path}: no status"))?;
        Ok(Answer {
            status,
            body: body.to_string(),
        })
    }

    async fn get(&self, path: &str) -> anyhow::Result<Answer> {
        self.call("GET", path, "").await
    }

    async fn json(&self, path: &str) -> anyhow::Result<Value> {
        let a = self.get(path).await?;
        if a.status != 200 {
            bail!("GET {path}: {} {}", a.status, a.body);
        }
        Ok(serde_json::from_str(&a.body)?)
    }

    async fn post(&self, path: &str, body: &str) -> anyhow::Result<Value> {
        let a = self.call("POST", path, body).await?;
        if !(200..300).contains(&a.status) {
            bail!("POST {path}: {} {}", a.status, a.body);
        }
        Ok(serde_json::from_str(&a.body).unwrap_or(Value::Null))
    }

    /// Holds the event stream at `address`: counts itself in `opened` once the answer's
    /// head is read, then calls `main` with the size of each `main` event's data until the
    /// stream ends.
    async fn events(
        &self,
        address: &str,
        opened: &AtomicUsize,
        mut main: impl FnMut(usize),
    ) -> anyhow::Result<()> {
        let mut r = self.send("GET", address, "").await?;
        let mut line = String::new();
        // The head, to its empty line.
        loop {
            line.clear();
            if r.read_line(&mut line).await? == 0 {
                bail!("{address}: the answer ended in its head");
            }
            if line.starts_with("HTTP/") && !line.contains(" 200 ") {
                bail!("{address}: {}", line.trim());
            }
            if line == "\r\n" {
                break;
            }
        }
        opened.fetch_add(1, Ordering::Relaxed);
        // The body is chunked; an event's lines are whole within a chunk, so reading lines
        // and skipping the chunk sizes between them is enough here.
        let (mut event, mut bytes) = (false, 0);
        loop {
            line.clear();
            if r.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            let l = line.trim_end();
            if l == "event: main" {
                event = true;
            } else if let Some(data) = l.strip_prefix("data:").filter(|_| event) {
                bytes += data.len() + 1;
            } else if l.is_empty() && event {
                main(bytes);
                (event, bytes) = (false, 0);
            }
        }
    }
}
