//! Agent processes: fake agents in a child process of the bench (one process may hold at
//! most `RLIMIT_NOFILE` connections, 20,000 where these benches were written), started
//! and read by the bench.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use platter::pki::Ca;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::agents::{agent, issue_agents, AgentSpec, Fleet};
use super::procs::{env_or, raise_nofile};

/// Set in an agent process: what it runs.
pub const CHILD_ENV: &str = "FLEET_AGENT_PROCESS";

/// A bench's `main`: the agent process when `CHILD_ENV` says this is one, else `run`;
/// exit 0 when all went well, 1 when something broke, 2 on an error (said with `name`).
pub fn main(name: &str, run: fn() -> anyhow::Result<bool>) -> ! {
    let r = if std::env::var_os(CHILD_ENV).is_some() {
        agent_process()
    } else {
        run()
    };
    match r {
        Ok(true) => std::process::exit(0),
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("{name}: {e:#}");
            std::process::exit(2);
        }
    }
}

/// An agent process (fleet_scale's second, `FLEET_COORDINATORS=2`; fleet_many's every
/// one): runs agents `FLEET_AGENT_PROCESS`
/// = "FIRST,END,PER,M" (agent i carries `wave=one` when i % PER < M) of the coordinators
/// in `FLEET_AGENT_TARGETS` ("INDEX=URL,INDEX=URL"), with the CA in `FLEET_AGENT_PKI`;
/// says `ready` on stdout once its certificates are issued, starts on a `go` line on stdin
/// and stops at its end (a `killed K` line: the bench killed coordinator K, whose streams'
/// ends are expected); meanwhile reports on stdout every 50 ms what changed (`a` lines:
/// an agent's times, `n`: the counters, `e`: the first error), times relative to
/// `FLEET_EPOCH_NS` (CLOCK_MONOTONIC).
pub fn agent_process() -> anyhow::Result<bool> {
    let spec = std::env::var(CHILD_ENV)?;
    let v: Vec<usize> = spec
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("{CHILD_ENV}={spec}"))?;
    let &[first, end, per, m] = v.as_slice() else {
        bail!("{CHILD_ENV}={spec}: want FIRST,END,PER,M");
    };
    let targets: Arc<[(usize, String)]> = std::env::var("FLEET_AGENT_TARGETS")?
        .split(',')
        .map(|t| {
            let (i, url) = t.split_once('=').context("FLEET_AGENT_TARGETS")?;
            Ok((i.parse()?, url.to_string()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?
        .into();
    let pki_dir = PathBuf::from(std::env::var("FLEET_AGENT_PKI")?);
    let epoch_ns: u64 = std::env::var("FLEET_EPOCH_NS")?.parse()?;
    let concurrency: usize = env_or("FLEET_CONCURRENCY", 200);
    let n_devices: usize = env_or("FLEET_DEVICES", 0);
    let keepalive = env_or("FLEET_KEEPALIVE", 1) != 0;
    raise_nofile();
    let ca = Ca {
        cert_pem: std::fs::read_to_string(pki_dir.join("ca/ca.pem"))?,
        key_pem: std::fs::read_to_string(pki_dir.join("ca/ca-key.pem"))?,
    };
    let certs = issue_agents(&ca, first..end)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    let stop = CancellationToken::new();
    let (go_tx, go_rx) = std::sync::mpsc::channel();
    let fleet = Arc::new(Fleet::new(epoch_ns, end, 0));
    {
        let stop = stop.clone();
        let fleet = fleet.clone();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                match line {
                    Ok(l) if l == "go" => {
                        let _ = go_tx.send(());
                    }
                    Ok(l) if l.starts_with("killed ") => {
                        if let Ok(k) = l["killed ".len()..].parse::<usize>() {
                            fleet.killed.store(k + 1, Ordering::Relaxed);
                        }
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            stop.cancel();
        });
    }
    if go_rx.recv().is_err() {
        return Ok(true);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let gate = Arc::new(Semaphore::new(concurrency));
    let ca_pem: Arc<str> = Arc::from(ca.cert_pem.as_str());
    for (i, (cert_pem, key_pem)) in (first..end).zip(certs) {
        let spec = AgentSpec {
            i,
            targets: targets.clone(),
            ca_pem: ca_pem.clone(),
            cert_pem,
            key_pem,
            wave: i % per < m,
            devices: n_devices,
            keepalive,
        };
        rt.spawn(agent(spec, fleet.clone(), gate.clone(), stop.clone()));
    }
    // What was last reported per agent: connected_at, plan_at, plan_count, moved_at, on.
    let mut sent = vec![[0u64; 5]; end - first];
    let mut error_sent = false;
    loop {
        let stopping = stop.is_cancelled();
        for (k, last) in sent.iter_mut().enumerate() {
            let i = first + k;
            let now = [
                fleet.connected_at[i].load(Ordering::Relaxed),
                fleet.plan_at[i].load(Ordering::Relaxed),
                u64::from(fleet.plan_count[i].load(Ordering::Relaxed)),
                fleet.moved_at[i].load(Ordering::Relaxed),
                fleet.on[i].load(Ordering::Relaxed) as u64,
            ];
            if now != *last {
                writeln!(
                    out,
                    "a {i} {} {} {} {} {}",
                    now[0], now[1], now[2], now[3], now[4]
                )?;
                *last = now;
            }
        }
        write!(out, "n")?;
        for c in &fleet.counters {
            write!(out, " {}", c.load(Ordering::Relaxed))?;
        }
        writeln!(out)?;
        if !error_sent {
            if let Some(e) = fleet.first_error.lock().unwrap().as_ref() {
                writeln!(out, "e {}", e.replace('\n', " "))?;
                error_sent = true;
            }
        }
        if out.flush().is_err() || stopping {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    rt.shutdown_timeout(Duration::from_secs(5));
    Ok(true)
}

/// The bench's side of an agent process: its reports go into the bench's `Fleet`, its
/// counters into `Fleet::remote[slot]`.
pub struct AgentProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    pub pid: u32,
}

impl AgentProcess {
    /// Starts it and waits until its certificates are issued.
    pub fn start(
        slot: usize,
        range: std::ops::Range<usize>,
        per: usize,
        m: usize,
        targets: &[(usize, String)],
        pki_dir: &Path,
        fleet: &Arc<Fleet>,
    ) -> anyhow::Result<AgentProcess> {
        let exe = std::env::current_exe()?;
        let targets: Vec<String> = targets.iter().map(|(i, u)| format!("{i}={u}")).collect();
        let mut child = Command::new(exe)
            .env(
                CHILD_ENV,
                format!("{},{},{per},{m}", range.start, range.end),
            )
            .env("FLEET_AGENT_TARGETS", targets.join(","))
            .env("FLEET_AGENT_PKI", pki_dir)
            .env("FLEET_EPOCH_NS", fleet.epoch_ns.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting an agent process")?;
        let pid = child.id();
        let stdin = child.stdin.take();
        let mut lines = std::io::BufReader::new(child.stdout.take().context("stdout")?).lines();
        match lines.next() {
            Some(Ok(l)) if l == "ready" => {}
            other => bail!("an agent process did not start: {other:?}"),
        }
        let fleet = fleet.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let mut w = line.split(' ');
                match w.next() {
                    Some("a") => {
                        let v: Vec<u64> = w.filter_map(|x| x.parse().ok()).collect();
                        if let &[i, connected, plan, count, moved, on] = v.as_slice() {
                            let i = i as usize;
                            fleet.connected_at[i].store(connected, Ordering::Relaxed);
                            fleet.plan_at[i].store(plan, Ordering::Relaxed);
                            fleet.plan_count[i].store(count as u32, Ordering::Relaxed);
                            fleet.moved_at[i].store(moved, Ordering::Relaxed);
                            fleet.on[i].store(on as usize, Ordering::Relaxed);
                        }
                    }
                    Some("n") => {
                        for (c, v) in fleet.remote[slot].iter().zip(w) {
                            c.store(v.parse().unwrap_or(0), Ordering::Relaxed);
                        }
                    }
                    Some("e") => {
                        let mut first = fleet.first_error.lock().unwrap();
                        if first.is_none() {
                            *first = Some(line[2..].to_string());
                        }
                    }
                    _ => {}
                }
            }
        });
        Ok(AgentProcess { child, stdin, pid })
    }

    pub fn go(&mut self) -> anyhow::Result<()> {
        self.say("go")
    }

    /// Tells it the bench killed coordinator `k`.
    pub fn killed(&mut self, k: usize) -> anyhow::Result<()> {
        self.say(&format!("killed {k}"))
    }

    fn say(&mut self, line: &str) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("stdin")?;
        writeln!(stdin, "{line}")?;
        stdin.flush()?;
        Ok(())
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        // The end of its stdin stops it.
        self.stdin.take();
        for _ in 0..200 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
