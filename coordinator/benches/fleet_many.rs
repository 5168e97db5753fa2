//! Every server of a fleet: N simulated TLS agents (default 100,000) over K coordinators
//! (default 8) on one PostgreSQL store. All connect; a campaign selecting all of them is
//! submitted through the first coordinator and every plan must arrive exactly once; then the
//! first coordinator is SIGKILLed and its agents must be connected to the others.
//!
//! Run: `PLATTER_BENCH_POSTGRES=postgres://… cargo bench -p platter --bench fleet_many -- [N] [K]`
//!
//! Why K coordinators and K agent processes: a process holds at most `RLIMIT_NOFILE`
//! descriptors (20,000 in the container this was written in, and its hard limit cannot be
//! raised there), so no coordinator may hold more than ~19,900 agents, even after taking a
//! dead one's share: K = 8 gives 12,500 each, 14,300 after a failover. Agent process k runs
//! agents k·N/K … (k+1)·N/K, given coordinator k first and the others after (each agent
//! moves on to the others from a place of its own, `platter_agent::Rotation::for_host`, as
//! `platter-agent` does); agents and coordinators share this machine's cores.
//!
//! Prints, per phase: the time, each coordinator's agents, RSS and KiB per agent, CPU; the
//! plans stored (rows, distinct templates); the failover's first / median / p90 / last
//! reconnect after the kill, where the agents went, and the CPU the other coordinators
//! spent per reconnect. `FLEET_RESUME=0` makes every reconnect a full TLS handshake (the
//! fake agents keep no session), for the side-by-side. Exits non-zero when something
//! broke (an agent could not connect, a plan went missing, astray or twice, an agent of
//! the killed coordinator did not reconnect), not when a target is missed.
//!
//! Environment: `PLATTER_BIN`, `FLEET_IDLE_SECS` (default 10), `FLEET_CONCURRENCY`
//! (handshakes in flight per agent process while connecting, default 200), `FLEET_RESUME`,
//! `FLEET_DIR`/`FLEET_KEEP`, `FLEET_KILL=0` (no failover), `FLEET_KEEPALIVE=0` (no HTTP/2
//! pings from the agents), `FLEET_HEARTBEAT_SECS` (the fake agents' heartbeat interval,
//! default platter-agent's 5 s; the coordinators get a `--heartbeat-timeout` of three
//! intervals). 100,000 agents on this 2-core machine need `FLEET_HEARTBEAT_SECS=60
//! FLEET_KEEPALIVE=0 FLEET_CONCURRENCY=50`: at platter-agent's pace their heartbeats and
//! pings alone are ~30,000 messages a second, more than 2 cores handle on both sides.
//! PostgreSQL needs `max_connections` of at least ~20 per coordinator (8 × 20 > the
//! default 100: `ALTER SYSTEM SET max_connections = 400` and a restart).

mod common;

use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use common::agents::{mono_ns, Fleet, C};
use common::children::AgentProcess;
use common::procs::{
    built_platter_bin, clk_tck, env_or, fleet_pki, mib, percentile, psql, raise_nofile, snap,
    Coordinator, WorkDir,
};

const NAMES: [&str; 16] = [
    "A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K", "L", "M", "N", "O", "P",
];
const CONNECT_TIMEOUT: Duration = Duration::from_secs(900);
const PLAN_TIMEOUT: Duration = Duration::from_secs(300);
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(300);

fn main() {
    common::children::main("fleet_many", run)
}

/// Each live coordinator's RSS (KiB) and CPU ticks now.
fn sample(coords: &[Coordinator], alive: &[bool]) -> Vec<Option<(u64, u64)>> {
    coords
        .iter()
        .zip(alive)
        .map(|(c, &a)| {
            a.then(|| snap(c.pid).ok())
                .flatten()
                .map(|s| (s.rss_kib, s.cpu_ticks))
        })
        .collect()
}

/// Agents per coordinator (index) now, from the agents' own reports.
fn agents_on(fleet: &Fleet, k: usize) -> Vec<usize> {
    let mut per = vec![0; k];
    for on in &fleet.on {
        let v = on.load(Ordering::Relaxed);
        if v > 0 && v <= k {
            per[v - 1] += 1;
        }
    }
    per
}

/// Waits (polling every 20 ms) until `done`, or `timeout`; false on the timeout.
fn wait(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while !done() {
        if t.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

fn run() -> anyhow::Result<bool> {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let n: usize = args.next().map_or(Ok(100_000), |s| s.parse())?;
    let k: usize = args.next().map_or(Ok(8), |s| s.parse())?;
    if !(2..=NAMES.len()).contains(&k) || n < k {
        bail!("usage: fleet_many [N] [K: 2..=16 coordinators, N ≥ K]");
    }
    let url = std::env::var("PLATTER_BENCH_POSTGRES")
        .ok()
        .filter(|u| !u.is_empty())
        .context(
            "PLATTER_BENCH_POSTGRES=postgres://…: coordinators share a store only on PostgreSQL",
        )?;
    let idle_secs: u64 = env_or("FLEET_IDLE_SECS", 10);
    let kill = env_or("FLEET_KILL", 1) != 0;
    let resume = env_or("FLEET_RESUME", 1) != 0;
    let nofile = raise_nofile();
    let per = n.div_ceil(k);
    let after_failover = n.div_ceil(k - 1);
    if (after_failover as u64) + 128 > nofile as u64 {
        eprintln!(
            "warning: after a failover a coordinator holds {after_failover} agents, RLIMIT_NOFILE is {nofile}: give more coordinators"
        );
    }
    let bin = built_platter_bin()?;
    let work = WorkDir::new("fleet-many-")?;
    let dir = work.dir.clone();
    eprintln!(
        "fleet_many: N={n} over K={k} coordinators ({per} each, {after_failover} after a failover), PostgreSQL, \
         resumption {}, {} cores, RLIMIT_NOFILE {nofile}, max_connections {}, dir {}",
        if resume { "on" } else { "off (FLEET_RESUME=0)" },
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        psql(&url, "SHOW max_connections").unwrap_or_default(),
        dir.display()
    );

    // PKI: one coordinator certificate for all (so sessions resume on any of them).
    let pki_dir = dir.join("pki");
    fleet_pki(&bin, &pki_dir)?;
    let operator = pki_dir.join("operator-bench");

    // The coordinators, on a new schema.
    let store = match platter::store::testing::fresh_postgres(&url) {
        platter::store::db::Location::Postgres(u) => u,
        platter::store::db::Location::Sqlite(p) => bail!("not PostgreSQL: {}", p.display()),
    };
    // Fake agents that heartbeat less often than platter-agent (FLEET_HEARTBEAT_SECS) must
    // not be declared lost between two heartbeats.
    let timeout = (3 * common::agents::heartbeat_interval().as_secs())
        .max(15)
        .to_string();
    let mut coords = Vec::new();
    for (i, name) in NAMES.iter().take(k).enumerate() {
        let db = format!("{store}&application_name=fleet-{}", name.to_lowercase());
        coords.push(Coordinator::start(
            &bin,
            name,
            std::ffi::OsStr::new(&db),
            Some(&pki_dir.join("coordinator-localhost")),
            dir.join(format!("coordinator-{}.log", name.to_lowercase())),
            &["--heartbeat-timeout", &timeout],
        )?);
        if i == 0 {
            // The others start after the first has made the schema.
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    let mut alive = vec![true; k];
    let start = sample(&coords, &alive);

    // The agent processes, certificates issued in each.
    let fleet = Arc::new(Fleet::new(mono_ns(), n, k));
    let t = Instant::now();
    let mut procs = Vec::new();
    for p in 0..k {
        let range = p * per..((p + 1) * per).min(n);
        let targets: Vec<(usize, String)> = (0..k)
            .map(|j| (p + j) % k)
            .map(|c| (c, coords[c].url.clone()))
            .collect();
        procs.push(AgentProcess::start(
            p,
            range.clone(),
            range.len(),
            range.len(),
            &targets,
            &pki_dir,
            &fleet,
        )?);
    }
    eprintln!(
        "{k} agent processes ready ({n} agent certificates) in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    // 1. Connect all.
    let c0 = sample(&coords, &alive);
    let connect_start = fleet.since_epoch();
    let t = Instant::now();
    for p in &mut procs {
        p.go()?;
    }
    let mut said = Instant::now();
    let connected = wait(CONNECT_TIMEOUT, || {
        if said.elapsed() >= Duration::from_secs(10) {
            said = Instant::now();
            eprintln!(
                "  {:.0} s: {} connected, per coordinator {:?}",
                t.elapsed().as_secs_f64(),
                fleet.count(C::Connected),
                agents_on(&fleet, k)
            );
        }
        fleet.count(C::Connected) + fleet.count(C::Failed) >= n
    });
    let connect_time = t.elapsed();
    // The processes report every 50 ms.
    std::thread::sleep(Duration::from_millis(300));
    let c1 = sample(&coords, &alive);
    let lat = fleet.latencies(&fleet.connected_at, 0..n, connect_start);
    eprintln!(
        "connected {} of {n} in {:.1} s (p50 {:.1} s, p99 {:.1} s); failed {}",
        fleet.count(C::Connected),
        connect_time.as_secs_f64(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        fleet.count(C::Failed)
    );
    let report = |label: &str, a: &[Option<(u64, u64)>], b: &[Option<(u64, u64)>], secs: f64| {
        let on = agents_on(&fleet, k);
        for i in 0..k {
            let (Some(a), Some(b)) = (a[i], b[i]) else {
                continue;
            };
            let base = start[i].map_or(0, |s| s.0);
            let cpu = (b.1 - a.1) as f64 / clk_tck();
            eprintln!(
                "  {label}: coordinator {} agents {:>6}, RSS {:.0} MiB ({:.1} KiB per agent over its start), CPU {:.1} s ({:.0}% of a core)",
                NAMES[i],
                on[i],
                mib(b.0),
                if on[i] > 0 { (b.0.saturating_sub(base)) as f64 / on[i] as f64 } else { 0.0 },
                cpu,
                100.0 * cpu / secs.max(1e-9)
            );
        }
    };
    report("connected", &c0, &c1, connect_time.as_secs_f64());
    if !connected || fleet.count(C::Failed) > 0 {
        eprintln!(
            "FAILED: agents could not connect: {:?}",
            fleet.first_error.lock().unwrap()
        );
        return Ok(false);
    }

    // 2. Idle.
    let i0 = sample(&coords, &alive);
    std::thread::sleep(Duration::from_secs(idle_secs));
    let i1 = sample(&coords, &alive);
    report(&format!("idle {idle_secs} s"), &i0, &i1, idle_secs as f64);

    // 3. A campaign to every agent, through A.
    let campaign = dir.join("every-server.yaml");
    std::fs::write(
        &campaign,
        "name: every-server\nhosts: { labels: { wave: one } }\nworkload: { command: { run: \"true\" } }\nrepeat: 1\n",
    )?;
    let f0 = sample(&coords, &alive);
    let submit_start = fleet.since_epoch();
    let t = Instant::now();
    let out = Command::new(&bin)
        .arg("submit")
        .arg(&campaign)
        .env("PLATTER_COORDINATOR", &coords[0].url)
        .env("PLATTER_TLS_DIR", &operator)
        .output()?;
    let submitted = t.elapsed();
    if !out.status.success() {
        eprintln!(
            "FAILED: platter submit: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return Ok(false);
    }
    let all_plans = wait(PLAN_TIMEOUT, || fleet.count(C::Plans) >= n);
    let fanned = t.elapsed();
    std::thread::sleep(Duration::from_millis(300));
    let f1 = sample(&coords, &alive);
    let lat = fleet.latencies(&fleet.plan_at, 0..n, submit_start);
    let twice = fleet
        .plan_count
        .iter()
        .filter(|c| c.load(Ordering::Relaxed) > 1)
        .count();
    eprintln!(
        "campaign to all: `platter submit` returned in {:.2} s; plans received {} of {n}: first {:.2} s, p50 {:.2} s, p90 {:.2} s, all {:.2} s; \
         unexpected {}, received twice {twice}",
        submitted.as_secs_f64(),
        fleet.count(C::Plans),
        lat.first().copied().unwrap_or(f64::NAN),
        percentile(&lat, 0.5),
        percentile(&lat, 0.9),
        fanned.as_secs_f64(),
        fleet.count(C::Unexpected)
    );
    let count = |sql: &str| {
        let search = store.split("search_path%3D").nth(1).unwrap_or("public");
        // psql prints the SET's tag too: the answer is the last line.
        let out = psql(&url, &format!("SET search_path TO {search}; {sql}")).unwrap_or_default();
        out.lines().last().unwrap_or_default().to_string()
    };
    eprintln!(
        "  stored: {} plan rows, {} distinct template(s); plans table {} + templates {}",
        count("SELECT count(*) FROM plans"),
        count("SELECT count(*) FROM plan_templates"),
        count("SELECT pg_size_pretty(pg_total_relation_size('plans'))"),
        count("SELECT pg_size_pretty(pg_total_relation_size('plan_templates'))"),
    );
    report("fan-out", &f0, &f1, fanned.as_secs_f64());
    let mut ok = all_plans && twice == 0 && fleet.count(C::Unexpected) == 0;
    if !ok {
        eprintln!("FAILED: plans missing, astray or twice");
    }

    // 4. Failover: A is killed; its agents move to the others.
    if kill {
        let on_a: Vec<usize> = (0..n)
            .filter(|&i| fleet.on[i].load(Ordering::Relaxed) == 1)
            .collect();
        let k0 = sample(&coords, &alive);
        fleet.killed.store(1, Ordering::Relaxed);
        for p in &mut procs {
            p.killed(0)?;
        }
        let kill_ns = fleet.since_epoch();
        let t = Instant::now();
        coords[0].kill9();
        alive[0] = false;
        let moved = wait(FAILOVER_TIMEOUT, || {
            on_a.iter().all(|&i| {
                fleet.moved_at[i].load(Ordering::Relaxed) > kill_ns
                    && fleet.on[i].load(Ordering::Relaxed) > 1
            })
        });
        let took = t.elapsed();
        std::thread::sleep(Duration::from_millis(300));
        let k1 = sample(&coords, &alive);
        let mut lat: Vec<f64> = on_a
            .iter()
            .map(|&i| fleet.moved_at[i].load(Ordering::Relaxed))
            .filter(|&m| m > kill_ns)
            .map(|m| (m - kill_ns) as f64 / 1e9)
            .collect();
        lat.sort_by(f64::total_cmp);
        let mut went = vec![0usize; k];
        for &i in &on_a {
            let on = fleet.on[i].load(Ordering::Relaxed);
            if on > 0 {
                went[on - 1] += 1;
            }
        }
        let cpu: f64 = (1..k)
            .filter_map(|i| Some((k1[i]?.1 - k0[i]?.1) as f64 / clk_tck()))
            .sum();
        eprintln!(
            "failover of {} agents (A SIGKILLed): connected to another after first {:.2} s, p50 {:.2} s, p90 {:.2} s, last {:.2} s ({} of {}); \
             went to {:?}; the others' CPU {:.1} s = {:.0} µs per reconnect; redials failed {}, pauses {}",
            on_a.len(),
            lat.first().copied().unwrap_or(f64::NAN),
            percentile(&lat, 0.5),
            percentile(&lat, 0.9),
            lat.last().copied().unwrap_or(f64::NAN),
            lat.len(),
            on_a.len(),
            &went[1..],
            cpu,
            1e6 * cpu / lat.len().max(1) as f64,
            fleet.count(C::DialFailures),
            fleet.count(C::Pauses),
        );
        report("failover", &k0, &k1, took.as_secs_f64());
        if !moved {
            eprintln!("FAILED: not every agent of A reconnected within {FAILOVER_TIMEOUT:?}");
            ok = false;
        }
    }
    if fleet.count(C::Dropped) > 0 {
        eprintln!(
            "FAILED: {} streams dropped: {:?}",
            fleet.count(C::Dropped),
            fleet.first_error.lock().unwrap()
        );
        ok = false;
    }
    drop(procs);
    drop(coords);
    drop(work);
    Ok(ok)
}
