//! The agent's side of the AgentLink stream: dials out, says hello, sends every journaled
//! record not yet acked, forwards plans and cancels to the executor, and reconnects: to the
//! next coordinator it was given at once, with jittered exponential backoff once all of
//! them failed (`coordinators` says which addresses those are). It never touches the
//! journal.

mod coordinators;

use std::error::Error as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use platter_proto::v1 as pb;
use platter_proto::v1::agent_link_client::AgentLinkClient;
use rand::Rng;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::model::Plan;
use crate::shared::Shared;

pub(crate) use coordinators::Coordinators;
use coordinators::Target;

pub(crate) use platter_proto::protocol::{HEARTBEAT_INTERVAL, MAX_PLAN_BYTES};
/// How often an agent that cannot link because of a TLS/plaintext mismatch says so again.
const MISMATCH_LOG_INTERVAL: Duration = Duration::from_secs(300);
/// How long asking a coordinator whether it refuses this host's certificate may take
/// (after a link failed with only a closed connection).
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a stopping agent waits for the acks of what it sent.
pub(crate) const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How long a session must have lasted for its end to start a new round of coordinators
/// (the next one dialled at once) rather than count as one more try in the current round:
/// coordinators that accept the stream and close it again must not be dialled in a loop
/// without a pause.
const HELD: Duration = HEARTBEAT_INTERVAL;
/// How long a connection may be silent before the agent asks for a sign of life (an HTTP/2
/// PING), and how long it waits for the answer. A coordinator that is stopped, or whose host
/// vanished without closing the connection, is given up 10–15 s after the last frame it
/// sent (10.0–10.6 s in `tests/failover.rs`, which stops one just after a hello; hyper pings
/// `PING_INTERVAL` after the last frame read, and a frame read since the ping was scheduled
/// puts it off once more; 15 s is also how long a coordinator gives a silent agent by
/// default) and the next one is dialled. It was 10 s and 20 s before agents could fail
/// over: 20–40 s. Shorter would risk leaving a coordinator that is only busy (its async
/// workers answer pings; nothing there should block them for seconds).
const PING_INTERVAL: Duration = HEARTBEAT_INTERVAL;
const PING_TIMEOUT: Duration = HEARTBEAT_INTERVAL;

pub(crate) struct Link {
    /// Where the coordinators are; made once when the agent starts: the TLS files are read
    /// (and an expired certificate reported) then, never during a measurement.
    pub coordinators: Coordinators,
    pub host: String,
    pub boot_id: String,
    pub shared: Arc<Shared>,
    pub plans: mpsc::UnboundedSender<Plan>,
    pub transport: crate::tls::Transport,
    pub labels: Vec<(String, String)>,
    /// How often the devices are scanned again; only a change is sent.
    pub inventory_interval: Duration,
    /// The programs plans may run and their versions, as last probed (kept across
    /// connections: they are asked again only when a program's file changed).
    pub tools: std::sync::Mutex<ToolCache>,
    /// Records the coordinator refused, not yet all said in the log (`Refused`).
    pub refused: std::sync::Mutex<Refused>,
}

/// Records the coordinator refused, by reason. A store deleted under the agent refuses
/// every record of the old store's plans the journal still holds, one ack after another:
/// a line per record was 80 ERROR lines for one run of the quickstart. So the first of
/// each reason is said when it comes (unless a measurement runs: then at the next ack or
/// summary), the rest are counted and summed up when the connection ends or the agent
/// stops. Not sent again either way: the coordinator keeps them with the reason, and
/// stores a refused step end as that step failing.
#[derive(Default)]
pub(crate) struct Refused {
    by_reason: std::collections::BTreeMap<String, RefusedTally>,
}

#[derive(Default)]
struct RefusedTally {
    /// Refused since this reason was last said.
    unsaid: u64,
    /// Refused since the last summary.
    total: u64,
    /// The first and last seq of the unsaid ones.
    seqs: Option<(u64, u64)>,
    /// Whether a line said this reason since the last summary.
    said: bool,
}

impl Refused {
    fn add(&mut self, seq: u64, reason: &str) {
        let t = self.by_reason.entry(reason.to_string()).or_default();
        t.unsaid += 1;
        t.total += 1;
        t.seqs = Some(t.seqs.map_or((seq, seq), |(a, b)| (a.min(seq), b.max(seq))));
    }

    /// Says each reason not said since the last summary.
    fn say_new(&mut self) {
        for (reason, t) in &mut self.by_reason {
            if !t.said && t.unsaid > 0 {
                t.say(
                    reason,
                    "; more refused for this reason are counted and summed up when the link ends",
                );
                t.said = true;
            }
        }
    }

    /// Says what is left unsaid, and starts again.
    fn summary(&mut self) {
        for (reason, t) in &mut self.by_reason {
            if t.unsaid > 0 {
                let more = if t.said {
                    format!(" ({} in all on this link)", t.total)
                } else {
                    String::new()
                };
                t.say(reason, &more);
            }
        }
        self.by_reason.clear();
    }
}

impl RefusedTally {
    fn say(&mut self, reason: &str, more: &str) {
        let (first, last) = self.seqs.unwrap_or_default();
        let seqs = if first == last {
            format!("seq {first}")
        } else {
            format!("seq {first}–{last}")
        };
        tracing::warn!(
            records = self.unsaid,
            "the coordinator refused {} record(s) ({seqs}): {reason}{more}",
            self.unsaid
        );
        self.unsaid = 0;
        self.seqs = None;
    }
}

/// What `probes::tools` last found, and the files it found then.
#[derive(Default)]
pub(crate) struct ToolCache {
    fingerprint: Option<Vec<Option<(std::path::PathBuf, i64, u64)>>>,
    tools: Vec<pb::ToolVersion>,
}

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
enum LinkError {
    #[error("cannot reach coordinator: {}", crate::tls::chain(.0))]
    Connect(#[from] tonic::transport::Error),
    #[error("the stream to the coordinator failed: {}: {}{}", .0.code(), .0.message(), .0.source().map(|s| format!(" ({})", crate::tls::chain(s))).unwrap_or_default())]
    Status(#[from] tonic::Status),
    #[error("coordinator closed the stream")]
    Closed,
    #[error("cannot resolve the coordinator's name: {0}")]
    Resolve(String),
    #[error("malformed message from coordinator: {0}")]
    Wire(#[from] crate::wire::WireError),
}

impl LinkError {
    /// What a transport failure says about certificates; `None` for the coordinator's own
    /// answers (a status it sent has no transport error under it).
    fn refusal(&self) -> Option<crate::tls::Refusal> {
        match self {
            LinkError::Connect(e) => crate::tls::Refusal::of(e),
            LinkError::Status(s) => s.source().and_then(crate::tls::Refusal::of),
            _ => None,
        }
    }
}

impl Link {
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        let mut rotation = Rotation::for_host(&self.host);
        let mut targets = Vec::new();
        // The coordinator the log last said this agent is connected to.
        let mut announced: Option<String> = None;
        // When a TLS/plaintext mismatch was last explained in the log.
        let mut mismatch_logged: Option<Instant> = None;
        loop {
            if rotation.round_starts() {
                // Names are resolved again at every round: a coordinator may have moved.
                targets = tokio::select! {
                    t = self.coordinators.round() => t,
                    _ = shutdown.cancelled() => return,
                };
            }
            let target = rotation.pick(&targets);
            let result = {
                let session = self.session(target, &mut rotation, &mut announced);
                tokio::pin!(session);
                tokio::select! {
                    r = &mut session => r,
                    _ = shutdown.cancelled() => {
                        self.drain(session).await;
                        self.refused.lock().expect("refused records").summary();
                        return;
                    }
                }
            };
            // Stay silent during a measurement: the log lines can wait for the next one.
            let quiet = self.shared.measuring.load(Ordering::Relaxed);
            if !quiet {
                self.refused.lock().expect("refused records").summary();
            }
            if let Err(e) = result {
                let error = e.to_string();
                // A stream that opened proves both sides speak the same transport: no
                // probe (one of a coordinator that stopped answering would wait its 5 s
                // before the next coordinator is dialled), no hint about TLS. Nor for a
                // name that did not resolve: nothing was dialled.
                let opened = rotation.connected_at.is_some();
                let unresolved = matches!(e, LinkError::Resolve(_));
                // Nothing would be logged while measuring: no probe either.
                let mismatch = if quiet || opened || unresolved {
                    None
                } else {
                    self.mismatch(target, &error).await
                };
                let failures = rotation.failures;
                match mismatch {
                    // The same diagnosis at every retry would flood the log: once, then
                    // every MISMATCH_LOG_INTERVAL, while the agent keeps trying (the
                    // coordinator may be being reconfigured).
                    Some(why) => {
                        let due = mismatch_logged
                            .is_none_or(|at: Instant| at.elapsed() >= MISMATCH_LOG_INTERVAL);
                        if !quiet && due {
                            tracing::warn!(coordinator = %target, error = %e, "{why}; retrying");
                            mismatch_logged = Some(Instant::now());
                        }
                    }
                    None if !quiet && (failures < 3 || failures.is_multiple_of(20)) => {
                        let hint = if opened {
                            String::new()
                        } else {
                            self.hint(target, &e, &error).await
                        };
                        let next = if targets.len() > 1 {
                            "trying the next coordinator"
                        } else {
                            "reconnecting"
                        };
                        tracing::warn!(coordinator = %target, error = %e, "link down; {next}{hint}");
                    }
                    None => {}
                }
            }
            if let Some(pause) = rotation.ended(targets.len()) {
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = shutdown.cancelled() => return,
                }
            }
        }
    }

    /// On shutdown, keeps the stream a moment longer so that what was sent gets its ack:
    /// otherwise the last records (a plan's end) are resent on the next start, to a
    /// coordinator that may by then have another store.
    async fn drain(
        &self,
        session: std::pin::Pin<&mut impl std::future::Future<Output = Result<(), LinkError>>>,
    ) {
        if !self.shared.connected.load(Ordering::SeqCst) || self.shared.outbox_is_empty() {
            return;
        }
        let delivered = async {
            while !self.shared.outbox_is_empty() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::select! {
            _ = session => {}
            _ = delivered => {}
            _ = tokio::time::sleep(DRAIN_TIMEOUT) => {
                tracing::warn!(unacked = self.shared.unsent(0).len(), "stopping with records the coordinator has not acked; they are sent again on the next start");
            }
        }
    }

    /// One connection to `target`, from dial to its end.
    async fn session(
        &self,
        target: &Target,
        rotation: &mut Rotation,
        announced: &mut Option<String>,
    ) -> Result<(), LinkError> {
        if let Some(why) = &target.unresolved {
            return Err(LinkError::Resolve(why.clone()));
        }
        let endpoint = target
            .endpoint
            .clone()
            .http2_keep_alive_interval(PING_INTERVAL)
            .keep_alive_timeout(PING_TIMEOUT);
        // With TLS, the connector limits the TCP connection and the handshake apart
        // (`tls::TCP_CONNECT_TIMEOUT`).
        let channel = match &target.tls {
            Some(tls) => endpoint.connect_with_connector(tls.clone()).await?,
            None => {
                endpoint
                    .connect_timeout(crate::tls::TCP_CONNECT_TIMEOUT)
                    .connect()
                    .await?
            }
        };
        let mut client = AgentLinkClient::new(channel).max_decoding_message_size(MAX_PLAN_BYTES);
        let (tx, rx) = mpsc::channel::<pb::AgentMessage>(256);
        // What the coordinator knows of this host's devices, on this connection.
        let mut devices = self.devices();
        self.refresh_tools().await;
        let tools = self.tools();
        let hello = pb::Hello {
            host: self.host.clone(),
            boot_id: self.boot_id.clone(),
            agent_version: env!("CARGO_PKG_VERSION").to_string(),
            held_plan_ids: self.shared.held().into_iter().map(String::from).collect(),
            next_seq: self.shared.next_seq.load(Ordering::SeqCst),
            acked_seq: self.shared.acked(),
            devices: devices.clone(),
            labels: self.labels.iter().cloned().collect(),
            tools,
        };
        // The channel is empty and has room: this send cannot wait.
        let _ = tx.send(msg(pb::agent_message::Kind::Hello(hello))).await;
        let mut inbound = client.open(ReceiverStream::new(rx)).await?.into_inner();
        rotation.connected();
        // Said now, or at the first heartbeat after the measurement under way.
        let mut unannounced = true;
        if !self.shared.measuring.load(Ordering::Relaxed) {
            self.announce(target, announced);
            unannounced = false;
        }
        self.shared.connected.store(true, Ordering::SeqCst);
        let _connected = ConnectedGuard(&self.shared);

        let mut sent = self.shared.acked();
        let mut heartbeat = tokio::time::interval(HEARTBEAT_INTERVAL);
        heartbeat.tick().await;
        let mut rescan = tokio::time::interval(self.inventory_interval);
        rescan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        rescan.tick().await;
        loop {
            for r in self.shared.take_unsent(sent) {
                sent = r.seq;
                let m = msg(pb::agent_message::Kind::Record(pb::Record::from(&r)));
                tx.send(m).await.map_err(|_| LinkError::Closed)?;
            }
            tokio::select! {
                m = inbound.message() => {
                    let Some(m) = m? else { return Err(LinkError::Closed) };
                    self.handle(m)?;
                }
                _ = self.shared.outbox_changed.notified() => {}
                // The coordinator shows a journal fault (and its end) with the next
                // heartbeat: make that one now.
                _ = self.shared.journal_fault_changed.notified() => heartbeat.reset_immediately(),
                _ = heartbeat.tick() => {
                    if unannounced && !self.shared.measuring.load(Ordering::Relaxed) {
                        self.announce(target, announced);
                        unannounced = false;
                    }
                    let (plan, step) = self.shared.current().unwrap_or_default();
                    let hb = pb::Heartbeat {
                        current_plan_id: plan.to_string(),
                        current_step_index: step,
                        journal_fault: self.shared.journal_fault().unwrap_or_default(),
                    };
                    tx.send(msg(pb::agent_message::Kind::Heartbeat(hb))).await.map_err(|_| LinkError::Closed)?;
                }
                // Reading /sys is cheap but not free: never while a measurement runs.
                _ = rescan.tick(), if !self.shared.measuring.load(Ordering::Relaxed) => {
                    // The guard was read when this select began; a measurement may have
                    // started since (it is skipped then, and the next tick scans).
                    if self.shared.measuring.load(Ordering::SeqCst) {
                        continue;
                    }
                    // A scan that fails says nothing about the drives: what was sent stands.
                    let drives = Self::scan().ok().filter(|d| *d != devices);
                    let tools = self.refresh_tools().await;
                    if drives.is_some() || tools {
                        if let Some(now) = drives {
                            tracing::debug!(before = devices.len(), after = now.len(), "drives changed; telling the coordinator");
                            devices = now;
                        }
                        let inv = pb::Inventory { devices: devices.clone(), tools: self.tools() };
                        tx.send(msg(pb::agent_message::Kind::Inventory(inv))).await.map_err(|_| LinkError::Closed)?;
                    }
                }
            }
        }
    }

    /// Whether the link failed because one side speaks TLS and the other plaintext, in
    /// plain words. A plaintext link's failure has many faces (a protocol error, a broken
    /// pipe, a closed connection, whichever comes first), so the coordinator is asked for
    /// plaintext HTTP/2 once per failure; one that is down refuses at once.
    async fn mismatch(&self, target: &Target, error: &str) -> Option<String> {
        use crate::tls::{self, PlaintextAnswer, Transport};
        match self.transport {
            Transport::Tls(_) => tls::speaks_plaintext(&target.given, error),
            Transport::Plaintext => {
                let answer = tls::plaintext_answer(&target.url, Duration::from_secs(5)).await;
                (answer == Some(PlaintextAnswer::NotHttp2))
                    .then(|| tls::requires_tls(&target.given))
            }
        }
    }

    /// Says which coordinator this agent is connected to: one line per connection, which
    /// names the one before when the agent moved.
    fn announce(&self, target: &Target, announced: &mut Option<String>) {
        let now = target.to_string();
        match announced.replace(now.clone()) {
            Some(before) if before != now => {
                tracing::info!(coordinator = %now, from = %before, host = %self.host, "connected to another coordinator");
            }
            _ => tracing::info!(coordinator = %now, host = %self.host, "connected"),
        }
    }

    /// What an obscure transport error usually means, given how we dialled.
    async fn hint(&self, target: &Target, e: &LinkError, error: &str) -> String {
        use crate::tls::{self, Refusal, Transport};
        match &self.transport {
            Transport::Plaintext
                if error.contains("h2 protocol error") || error.contains("connection closed") =>
            {
                " (the coordinator may require TLS: use https:// and --tls-dir)".into()
            }
            // The same words as an operator's: a refusal of this host's certificate, or of
            // the coordinator's, and where only a closed connection arrives, the reason
            // asked for once more, or the likely cause.
            Transport::Tls(dir) => {
                let refusal = match e.refusal() {
                    Some(Refusal::LikelyByCoordinator) => {
                        tls::why_closed(dir, &target.given, &target.url, PROBE_TIMEOUT).await
                    }
                    r => r,
                };
                refusal.map(|r| format!(" ({r})")).unwrap_or_default()
            }
            Transport::Plaintext => String::new(),
        }
    }

    /// The host's devices now, for the wire.
    fn scan() -> Result<Vec<pb::Device>, crate::probes::inventory::InventoryError> {
        let devices = crate::probes::inventory::scan(&Default::default())?;
        Ok(devices.iter().map(pb::Device::from).collect())
    }

    /// Probes the tools again if a program's file changed (or they were never probed);
    /// never while a measurement runs. Whether they were probed.
    async fn refresh_tools(&self) -> bool {
        let fingerprint = crate::probes::tools::fingerprint();
        let cached = self.tools.lock().expect("tool cache").fingerprint.clone();
        if cached.as_ref() == Some(&fingerprint) || self.shared.measuring.load(Ordering::SeqCst) {
            return false;
        }
        let Ok(found) = tokio::task::spawn_blocking(crate::probes::tools::probe).await else {
            return false;
        };
        let mut cache = self.tools.lock().expect("tool cache");
        cache.fingerprint = Some(fingerprint);
        cache.tools = found.iter().map(pb::ToolVersion::from).collect();
        true
    }

    fn tools(&self) -> Vec<pb::ToolVersion> {
        self.tools.lock().expect("tool cache").tools.clone()
    }

    /// The inventory for the hello; a host whose devices cannot be read still connects
    /// (and reports none), with the reason in the log.
    fn devices(&self) -> Vec<pb::Device> {
        Self::scan().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read the device inventory");
            Vec::new()
        })
    }

    fn handle(&self, m: pb::CoordinatorMessage) -> Result<(), LinkError> {
        use pb::coordinator_message::Kind;
        match m.kind {
            Some(Kind::Plan(p)) => {
                let plan = Plan::try_from(p)?;
                // The executor lives as long as the agent; if it is gone we are stopping.
                let _ = self.plans.send(plan);
            }
            Some(Kind::Ack(a)) => {
                if !a.refused.is_empty() {
                    let mut refused = self.refused.lock().expect("refused records");
                    for r in &a.refused {
                        refused.add(r.seq, &r.reason);
                    }
                    if !self.shared.measuring.load(Ordering::Relaxed) {
                        refused.say_new();
                    }
                }
                self.shared.ack(a.seq)
            }
            Some(Kind::Cancel(c)) => self.shared.cancel(&c.plan_id),
            None => {}
        }
        Ok(())
    }
}

/// Clears `Shared::connected` when a session ends, however it ends.
struct ConnectedGuard<'a>(&'a Shared);

impl Drop for ConnectedGuard<'_> {
    fn drop(&mut self) {
        self.0.connected.store(false, Ordering::SeqCst);
    }
}

fn msg(kind: pb::agent_message::Kind) -> pb::AgentMessage {
    pb::AgentMessage { kind: Some(kind) }
}

/// Which of a round's targets to dial next, and when to pause: round robin, the next
/// target at once after a dial failed or a session ended, the backoff only after every
/// target of the round was tried without a session that held for `HELD` (a session that
/// held is the first try of a new round). With one target, every try is a round: a
/// session's end or a failed dial is followed by the backoff, as it was before there could
/// be several.
#[derive(Debug, Default)]
pub struct Rotation {
    /// Tries since the agent started; the next target is `at` modulo the round's length.
    at: usize,
    /// Tries in this round.
    tried: usize,
    /// Rounds in a row without a connection; the backoff grows with it.
    failures: u32,
    /// When the session under way connected.
    connected_at: Option<Instant>,
    /// Where this host starts among the targets after the first: agents of a coordinator
    /// that died spread over the others rather than all moving to the one given next
    /// (`for_host`).
    spread: usize,
}

impl Rotation {
    /// `host`'s rotation: the first target first, as given; after it, the others from a
    /// place that depends on the host's name, so the agents of one coordinator that dies
    /// are spread evenly over the rest (a fleet of 10,000 given A, B, C moved all at once
    /// to B before).
    pub fn for_host(host: &str) -> Rotation {
        // FNV-1a: stable across runs and versions, unlike the std hasher's seed.
        let hash = host.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        Rotation {
            spread: hash as usize,
            ..Rotation::default()
        }
    }

    /// Whether the next try begins a round (the targets are resolved again then).
    fn round_starts(&self) -> bool {
        self.tried == 0
    }

    fn pick<'t>(&self, targets: &'t [Target]) -> &'t Target {
        &targets[self.next(targets.len())]
    }

    /// A session began (the coordinator answered the hello).
    pub fn connected(&mut self) {
        self.failures = 0;
        self.connected_at = Some(Instant::now());
    }

    /// Which of `targets` targets to dial next: the first, then the others from this
    /// host's place among them, each once per round.
    pub fn next(&self, targets: usize) -> usize {
        match self.at % targets {
            0 => 0,
            k => 1 + (k - 1 + self.spread) % (targets - 1),
        }
    }

    /// A try ended; the pause before the next one if that ended a round.
    pub fn ended(&mut self, targets: usize) -> Option<Duration> {
        if self
            .connected_at
            .take()
            .is_some_and(|at| at.elapsed() >= HELD)
        {
            self.tried = 0;
        }
        self.tried += 1;
        self.at = self.at.wrapping_add(1);
        if self.tried < targets {
            return None;
        }
        self.tried = 0;
        self.failures = self.failures.saturating_add(1);
        Some(backoff(self.failures))
    }
}

/// Exponential backoff with "equal jitter": half the delay fixed, half random, so a fleet
/// that lost its coordinator does not reconnect in lockstep.
fn backoff(failures: u32) -> Duration {
    let exp = BACKOFF_FIRST
        .saturating_mul(1u32 << failures.min(16))
        .min(BACKOFF_MAX);
    let half = exp / 2;
    half + half.mul_f64(rand::rng().random::<f64>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_jittered_and_capped() {
        for f in 0..40 {
            let d = backoff(f);
            let exp = BACKOFF_FIRST
                .saturating_mul(1u32 << f.min(16))
                .min(BACKOFF_MAX);
            assert!(d >= exp / 2 && d <= exp, "{f}: {d:?}");
        }
        let samples: std::collections::HashSet<_> = (0..20).map(|_| backoff(10)).collect();
        assert!(samples.len() > 1, "jitter");
    }

    /// The pause after a try, as a bound: None for "dial the next at once".
    fn pause(r: &mut Rotation, targets: usize) -> Option<Duration> {
        r.ended(targets).map(|d| {
            let exp = BACKOFF_FIRST
                .saturating_mul(1u32 << r.failures.min(16))
                .min(BACKOFF_MAX);
            assert!(d <= exp);
            exp
        })
    }

    fn held(r: &mut Rotation) {
        r.connected();
        r.connected_at = Instant::now().checked_sub(HELD);
    }

    #[test]
    fn one_coordinator_backs_off_after_every_try_as_before() {
        let mut r = Rotation::default();
        assert!(r.round_starts());
        let mut pauses = vec![];
        for _ in 0..3 {
            pauses.push(pause(&mut r, 1));
            assert!(r.round_starts());
        }
        // A session that held ends; the backoff starts small again.
        held(&mut r);
        pauses.push(pause(&mut r, 1));
        let ms = |ms| Some(Duration::from_millis(ms));
        assert_eq!(pauses, [ms(200), ms(400), ms(800), ms(200)]);
    }

    #[test]
    fn several_coordinators_are_tried_in_turn_and_backed_off_only_after_a_round() {
        let targets = 3;
        let mut r = Rotation::default();
        let mut dialled = vec![];
        let mut pauses = vec![];
        let mut try_once = |r: &mut Rotation, connect: fn(&mut Rotation)| {
            dialled.push(r.at % targets);
            connect(r);
            pauses.push(pause(r, targets).is_some());
        };
        // Nothing answers: a pause after each whole round only.
        for _ in 0..6 {
            try_once(&mut r, |_| {});
        }
        // The first answers and holds; when its session ends, the next at once, then the
        // one after; a whole round (from the one that held) without a session: a pause.
        try_once(&mut r, held);
        try_once(&mut r, |_| {});
        try_once(&mut r, |_| {});
        // A session that ends at once is a try like a failed dial: coordinators that
        // accept and close are not dialled in a loop without a pause.
        try_once(&mut r, |r| r.connected());
        try_once(&mut r, |r| r.connected());
        try_once(&mut r, |r| r.connected());
        assert_eq!(dialled, [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2]);
        assert_eq!(
            pauses,
            [false, false, true, false, false, true, false, false, true, false, false, true]
        );
    }

    /// Hosts all start with the first coordinator; when it dies, they spread evenly over
    /// the others; each host still dials every coordinator once per round.
    #[test]
    fn the_agents_of_a_coordinator_that_died_spread_over_the_others() {
        let targets = 4;
        let mut next_after_first = [0usize; 4];
        for i in 0..3000 {
            let mut r = Rotation::for_host(&format!("host{i:05}"));
            assert_eq!(r.next(targets), 0);
            held(&mut r);
            assert_eq!(pause(&mut r, targets), None);
            next_after_first[r.next(targets)] += 1;
            let mut round: Vec<usize> = (0..targets)
                .map(|_| {
                    let t = r.next(targets);
                    let _ = pause(&mut r, targets);
                    t
                })
                .collect();
            round.sort();
            assert_eq!(round, [0, 1, 2, 3], "host{i:05}");
        }
        assert_eq!(next_after_first[0], 0);
        for k in 1..4 {
            assert!(
                (800..1200).contains(&next_after_first[k]),
                "{next_after_first:?}"
            );
        }
        // One coordinator, or two: as before.
        let mut r = Rotation::for_host("rc66");
        assert_eq!((r.next(1), r.next(2)), (0, 0));
        held(&mut r);
        let _ = pause(&mut r, 2);
        assert_eq!(r.next(2), 1);
    }
}
