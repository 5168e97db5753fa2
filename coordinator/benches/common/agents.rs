//! The fleet of fake agents the scale benches connect: each an AgentLink stream on its own
//! TCP+TLS connection with its own certificate, dialled, heartbeating and moving between
//! coordinators like `platter-agent` (agent/src/link.rs). They note the plans they are sent
//! and do not run them.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use platter::pki::{self, Ca, Role, Validity};
use platter_proto::v1 as pb;
use platter_proto::v1::agent_link_client::AgentLinkClient;
use tokio::sync::{mpsc, Semaphore};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

pub const HEARTBEAT: Duration = platter_proto::protocol::HEARTBEAT_INTERVAL;

/// How often the fake agents heartbeat: `HEARTBEAT`, as `platter-agent` does, unless
/// `FLEET_HEARTBEAT_SECS` says otherwise (fleet_many's 100,000 agents on 2 shared cores
/// cannot all heartbeat every 5 s: 20,000 messages a second, each handled on both sides
/// of the same machine; give the coordinators a `--heartbeat-timeout` to match).
pub fn heartbeat_interval() -> Duration {
    std::env::var("FLEET_HEARTBEAT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(HEARTBEAT, Duration::from_secs)
}
pub const CONNECT_ATTEMPTS: u32 = 3;

/// CLOCK_MONOTONIC in nanoseconds: one clock for this process and the agent process.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the local struct; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The fleet's counters (an agent process reports its own; the bench adds them up).
#[derive(Clone, Copy)]
pub enum C {
    /// First connections made.
    Connected,
    /// Agents that could not make their first connection.
    Failed,
    /// Streams that ended, other than by the bench's kill.
    Dropped,
    /// Streams that ended because the bench killed their coordinator.
    Cut,
    /// Agents connected again after their stream ended.
    Moved,
    /// Redials that failed.
    DialFailures,
    /// Backoff pauses taken (a whole round of coordinators failed).
    Pauses,
    /// Agents that received a plan.
    Plans,
    /// Plans that went to an agent the campaign did not select, or a second time to one.
    Unexpected,
    Heartbeats,
}
pub const COUNTERS: usize = 10;

/// What the fake agents share with the bench's main thread. Indexed by agent number
/// across all agent processes.
pub struct Fleet {
    pub epoch_ns: u64,
    /// Nanoseconds since `epoch_ns` + 1 when agent i's first stream was open; 0 = not (yet).
    pub connected_at: Vec<AtomicU64>,
    /// Nanoseconds since `epoch_ns` + 1 when agent i received its (first) plan; 0 = none.
    pub plan_at: Vec<AtomicU64>,
    pub plan_count: Vec<AtomicU32>,
    /// Nanoseconds since `epoch_ns` + 1 when agent i had a stream open again after its
    /// first one ended; 0 = not (yet).
    pub moved_at: Vec<AtomicU64>,
    /// The coordinator (index + 1) agent i has a stream open to; 0 = none.
    pub on: Vec<AtomicUsize>,
    pub counters: [AtomicU64; COUNTERS],
    /// Each agent process's counters, as it last reported them.
    pub remote: Vec<[AtomicU64; COUNTERS]>,
    /// The coordinator (index + 1) the bench killed: its streams' ends are expected.
    pub killed: AtomicUsize,
    pub first_error: Mutex<Option<String>>,
    /// Why redials failed, and how often (this process's agents).
    pub redial_errors: Mutex<std::collections::HashMap<String, usize>>,
}

impl Fleet {
    /// For `agents` agents, `processes` of them agent processes besides this one.
    pub fn new(epoch_ns: u64, agents: usize, processes: usize) -> Fleet {
        let zeros = |_| AtomicU64::new(0);
        Fleet {
            epoch_ns,
            connected_at: (0..agents).map(zeros).collect(),
            plan_at: (0..agents).map(zeros).collect(),
            plan_count: (0..agents).map(|_| AtomicU32::new(0)).collect(),
            moved_at: (0..agents).map(zeros).collect(),
            on: (0..agents).map(|_| AtomicUsize::new(0)).collect(),
            counters: std::array::from_fn(|_| AtomicU64::new(0)),
            remote: (0..processes)
                .map(|_| std::array::from_fn(|_| AtomicU64::new(0)))
                .collect(),
            killed: AtomicUsize::new(0),
            first_error: Mutex::new(None),
            redial_errors: Mutex::new(std::collections::HashMap::new()),
        }
    }

    pub fn since_epoch(&self) -> u64 {
        mono_ns().saturating_sub(self.epoch_ns) + 1
    }

    pub fn add(&self, c: C) {
        self.counters[c as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// This process's count and the agent processes'.
    pub fn count(&self, c: C) -> usize {
        let remote: u64 = self
            .remote
            .iter()
            .map(|r| r[c as usize].load(Ordering::Relaxed))
            .sum();
        (self.counters[c as usize].load(Ordering::Relaxed) + remote) as usize
    }

    pub fn error(&self, i: usize, e: String) {
        let mut first = self.first_error.lock().unwrap();
        if first.is_none() {
            *first = Some(format!("agent {}: {e}", host_name(i)));
        }
    }

    /// Seconds from `from_ns` (since the epoch) to each nonzero time in `times`, sorted.
    pub fn latencies(
        &self,
        times: &[AtomicU64],
        range: std::ops::Range<usize>,
        from_ns: u64,
    ) -> Vec<f64> {
        let mut v: Vec<f64> = times[range]
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .filter(|&t| t > 0)
            .map(|t| t.saturating_sub(from_ns) as f64 / 1e9)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    }
}

pub fn host_name(i: usize) -> String {
    format!("a{i:05}")
}

pub struct AgentSpec {
    pub i: usize,
    /// The coordinators to dial, in order (index, URL); the first connection is to the
    /// first.
    pub targets: Arc<[(usize, String)]>,
    pub ca_pem: Arc<str>,
    pub cert_pem: String,
    pub key_pem: String,
    pub wave: bool,
    pub devices: usize,
    pub keepalive: bool,
}

/// One fake agent: connect to its first coordinator (a few attempts: that is setup), keep
/// the stream, heartbeat, note plans; when the stream ends and it was given more than one
/// coordinator, dial the others as `platter-agent` does.
pub async fn agent(
    spec: AgentSpec,
    fleet: Arc<Fleet>,
    gate: Arc<Semaphore>,
    stop: CancellationToken,
) {
    let i = spec.i;
    let permit = tokio::select! {
        p = gate.acquire() => p.expect("gate"),
        _ = stop.cancelled() => return,
    };
    // As platter-agent: one TLS configuration for all its connections, so that a session
    // resumes on the next coordinator (`FLEET_RESUME=0`: a new one per connection, as
    // before resumption, and every reconnect handshakes in full).
    let tls = match platter_proto::tls::session_config(&spec.ca_pem, &spec.cert_pem, &spec.key_pem)
    {
        Ok(c) => c,
        Err(e) => {
            fleet.error(i, format!("{e:#}"));
            fleet.add(C::Failed);
            return;
        }
    };
    // `FLEET_RESUME=0`: no session kept (see above).
    let resume = super::procs::env_or("FLEET_RESUME", 1) != 0;
    let tls_config = || {
        if resume {
            Ok(tls.clone())
        } else {
            platter_proto::tls::session_config(&spec.ca_pem, &spec.cert_pem, &spec.key_pem)
                .map_err(|e| format!("{e:#}"))
        }
    };
    let mut attempt = 0;
    let mut opened = loop {
        attempt += 1;
        let r = tokio::time::timeout(
            Duration::from_secs(60),
            open(&spec, tls_config(), &spec.targets[0].1, &[]),
        )
        .await;
        match r {
            Ok(Ok(s)) => break s,
            Ok(Err(e)) if attempt >= CONNECT_ATTEMPTS => {
                fleet.error(i, e);
                fleet.add(C::Failed);
                return;
            }
            Err(_) if attempt >= CONNECT_ATTEMPTS => {
                fleet.error(i, "connect + hello took over 60 s".into());
                fleet.add(C::Failed);
                return;
            }
            _ => tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await,
        }
    };
    drop(permit);
    fleet.connected_at[i].store(fleet.since_epoch(), Ordering::Relaxed);
    fleet.add(C::Connected);
    // Which coordinator next, and when to pause: platter-agent's own pacing.
    let mut rotation = platter_agent::Rotation::for_host(&host_name(i));
    rotation.connected();
    let mut at = 0;
    let mut held: Vec<String> = Vec::new();
    loop {
        let coordinator = spec.targets[at].0;
        fleet.on[i].store(coordinator + 1, Ordering::Relaxed);
        let ended = session(&spec, &fleet, opened, &mut held, &stop).await;
        fleet.on[i].store(0, Ordering::Relaxed);
        let Some(why) = ended else { return };
        if fleet.killed.load(Ordering::Relaxed) == coordinator + 1 {
            fleet.add(C::Cut);
        } else {
            fleet.error(i, why);
            fleet.add(C::Dropped);
        }
        if spec.targets.len() < 2 {
            return;
        }
        // As agent/src/link.rs: the next coordinator at once; a pause only after a whole
        // round failed.
        opened = loop {
            if let Some(pause) = rotation.ended(spec.targets.len()) {
                fleet.add(C::Pauses);
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = stop.cancelled() => return,
                }
            }
            at = rotation.next(spec.targets.len());
            let r = tokio::select! {
                r = open(&spec, tls_config(), &spec.targets[at].1, &held) => r,
                _ = stop.cancelled() => return,
            };
            match r {
                Ok(o) => break o,
                Err(e) => {
                    fleet.add(C::DialFailures);
                    let e: String = e.chars().take(160).collect();
                    *fleet.redial_errors.lock().unwrap().entry(e).or_default() += 1;
                }
            }
        };
        rotation.connected();
        let now = fleet.since_epoch();
        if fleet.moved_at[i]
            .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            fleet.add(C::Moved);
        }
    }
}

/// Serves one open stream until it ends: heartbeats out, plans noted (and held, as a real
/// agent journals them). None when the bench stopped it, otherwise why it ended.
pub async fn session(
    spec: &AgentSpec,
    fleet: &Fleet,
    (tx, mut inbound): Opened,
    held: &mut Vec<String>,
    stop: &CancellationToken,
) -> Option<String> {
    let i = spec.i;
    let every = heartbeat_interval();
    let mut heartbeat = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    use pb::coordinator_message::Kind;
    loop {
        tokio::select! {
            m = inbound.message() => match m {
                Ok(Some(pb::CoordinatorMessage { kind: Some(Kind::Plan(p)) })) => {
                    let n = fleet.plan_count[i].fetch_add(1, Ordering::Relaxed) + 1;
                    if n == 1 {
                        fleet.plan_at[i].store(fleet.since_epoch(), Ordering::Relaxed);
                        fleet.add(C::Plans);
                    } else {
                        fleet.add(C::Unexpected);
                        fleet.error(i, format!("a plan again ({n} received; this one {})", p.id));
                    }
                    if !spec.wave || p.host != host_name(i) {
                        fleet.add(C::Unexpected);
                        fleet.error(i, format!("unexpected plan {} for {}", p.id, p.host));
                    }
                    if !held.contains(&p.id) {
                        held.push(p.id);
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => return Some("the coordinator closed the stream".into()),
                Err(s) => {
                    if stop.is_cancelled() {
                        return None;
                    }
                    return Some(format!("stream ended: {}: {}", s.code(), s.message()));
                }
            },
            _ = heartbeat.tick() => {
                let hb = pb::Heartbeat { current_plan_id: String::new(), current_step_index: 0, journal_fault: String::new() };
                let m = pb::AgentMessage { kind: Some(pb::agent_message::Kind::Heartbeat(hb)) };
                if tx.send(m).await.is_err() {
                    return Some("outbound stream closed".into());
                }
                fleet.add(C::Heartbeats);
            }
            _ = stop.cancelled() => return None,
        }
    }
}

pub type Opened = (
    mpsc::Sender<pb::AgentMessage>,
    tonic::Streaming<pb::CoordinatorMessage>,
);

/// Dials `url` like `platter-agent` does (agent/src/link.rs: TLS through
/// `platter_proto::tls::TlsConnect` with the agent's one configuration) and says hello.
pub async fn open(
    spec: &AgentSpec,
    session: Result<std::sync::Arc<tokio_rustls::rustls::ClientConfig>, String>,
    url: &str,
    held: &[String],
) -> Result<Opened, String> {
    let cfg = session?;
    let uri: tonic::codegen::http::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let tls = platter_proto::tls::TlsConnect {
        cfg,
        server_name: uri.host().unwrap_or_default().to_string(),
    };
    let mut endpoint = platter_proto::tls::tls_endpoint(url).map_err(|e| format!("{e:#}"))?;
    if spec.keepalive {
        endpoint = endpoint
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(20));
    }
    let channel = endpoint
        .connect_with_connector(tls)
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
        held_plan_ids: held.to_vec(),
        next_seq: 1,
        acked_seq: 0,
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
pub fn devices(host: &str, n: usize) -> Vec<pb::Device> {
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

/// Agent certificates for the agents in `range` (a00000 …) on all cores.
pub fn issue_agents(
    ca: &Ca,
    range: std::ops::Range<usize>,
) -> anyhow::Result<Vec<(String, String)>> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let validity = Validity::days(2);
    let chunks: Vec<anyhow::Result<Vec<(String, String)>>> = std::thread::scope(|s| {
        let per = range.len().div_ceil(threads).max(1);
        let handles: Vec<_> = range
            .clone()
            .step_by(per)
            .map(|start| {
                let end = (start + per).min(range.end);
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
    let mut all = Vec::with_capacity(range.len());
    for c in chunks {
        all.extend(c?);
    }
    Ok(all)
}
