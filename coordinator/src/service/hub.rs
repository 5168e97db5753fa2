//! Connected agents and the scheduler. An agent holds at most one plan at a time, so its
//! measurements never overlap; hosts run in parallel. The hub is the only place that
//! sends plans and cancels to agents. A dispatch that fails (the store is busy or failing)
//! is retried every `RETRY_INTERVAL` until it succeeds: a host is never left idle with
//! plans queued for it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use platter_proto::inventory::ToolVersion;
use platter_proto::model::{HostName, Plan, PlanId};
use platter_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use crate::store::{CampaignState, Store, StoreError};

/// How often hosts whose dispatch failed are tried again.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// A message for an agent, boxed: an agent's queue allocates its slots 32 at a time
/// when it is made, and a slot holding the message unboxed took 176 bytes, 32 of them
/// 5.5 KiB of every connected agent's memory (8 bytes each boxed; the few messages an
/// agent gets are one allocation more each).
pub type Outgoing = Box<Result<pb::CoordinatorMessage, Status>>;

/// An agent's queue of messages, read by its stream (`AgentLink.Open`).
pub type Outbound = mpsc::Sender<Outgoing>;

/// An agent's stream to this coordinator.
struct Conn {
    id: u64,
    tx: Outbound,
    /// Plans the agent holds (from its hello) or that were sent on this connection.
    held: Vec<PlanId>,
    /// Why the agent holds its steps (its journal cannot be written), from its last
    /// heartbeat on this connection.
    journal_fault: Option<String>,
}

/// What this coordinator knows of one host, connected or not: kept from its first
/// connection on (in memory only; the store holds what must outlive the process).
#[derive(Default)]
struct HostState {
    /// Its stream while its agent is connected here.
    conn: Option<Conn>,
    /// Its last stream ended by heartbeat timeout rather than by closing.
    lost: bool,
    /// Its last dispatch failed: `retry_failed` tries it again.
    retry: bool,
    /// Its outbound queue was last found full (one log line per episode).
    full: bool,
    /// Its link changed since the publisher on a shared store last took the changes (only
    /// while it runs: `publish_links`). Only a mark: its presence is read when taken, so
    /// a reconnect's `connect` and the old stream's late `disconnect` cannot be published
    /// in the wrong order.
    link_changed: bool,
    /// The tools its agent last reported since this coordinator started (`platter
    /// agents`): an agent reports them at every connection.
    tools: Option<Vec<ToolVersion>>,
}

impl HostState {
    fn presence(&self) -> Presence {
        match (&self.conn, self.lost) {
            (Some(_), _) => Presence::Connected,
            (None, true) => Presence::Lost,
            (None, false) => Presence::Offline,
        }
    }
}

pub struct Hub {
    store: Store,
    /// Every host this coordinator has heard of, by name: one lock for all of it, held
    /// only for map operations (never across a store call or an await).
    hosts: Mutex<HashMap<HostName, HostState>>,
    publishing: AtomicBool,
    /// Woken when a link changes (while publishing).
    pub(crate) links_changed: tokio::sync::Notify,
    /// This coordinator's name on a shared store (`publish_links`).
    name: std::sync::OnceLock<String>,
    next_id: AtomicU64,
    /// Counts changes of who is connected, lost or holding its steps here: the console's
    /// live pages look again when it moves (`generation`).
    generation: AtomicU64,
    /// What `dispatch_soon` was asked for and has yet to do.
    soon: Mutex<Soon>,
}

/// Hosts `dispatch_soon` was asked for and not yet dispatched to (each once, however often
/// asked), and whether a task dispatching them runs.
#[derive(Default)]
struct Soon {
    hosts: indexmap::IndexSet<HostName>,
    running: bool,
}

/// A change of one agent's link to this coordinator, for the other coordinators on a
/// shared store to learn (`take_link_changes`, published by `crate::service::presence::publish`).
#[derive(Debug, Clone, PartialEq)]
pub struct LinkChange {
    pub host: HostName,
    pub presence: Presence,
    pub tools: Vec<ToolVersion>,
}

/// What `platter agents` shows for a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    Connected,
    /// Silent past the heartbeat timeout; its plans wait for it.
    Lost,
    Offline,
}

impl Hub {
    pub fn new(store: Store) -> Hub {
        Hub {
            store,
            hosts: Mutex::new(HashMap::new()),
            publishing: AtomicBool::new(false),
            name: std::sync::OnceLock::new(),
            links_changed: tokio::sync::Notify::new(),
            next_id: AtomicU64::new(1),
            generation: AtomicU64::new(0),
            soon: Mutex::new(Soon::default()),
        }
    }

    fn hosts(&self) -> MutexGuard<'_, HashMap<HostName, HostState>> {
        self.hosts.lock().expect("hub hosts")
    }

    /// From now on, keeps the links' changes for `take_link_changes`: coordinators that
    /// share a store publish them, this one as `name`.
    pub fn publish_links(&self, name: String) {
        let _ = self.name.set(name);
        self.publishing.store(true, Ordering::Relaxed);
    }

    /// The store this hub dispatches from.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// This coordinator's name when it shares its store with others.
    pub fn name(&self) -> Option<&str> {
        self.name.get().map(String::as_str)
    }

    /// Marks `state`'s link changed, for the publisher (which is woken) to take.
    fn link_changed(&self, state: &mut HostState) {
        self.generation.fetch_add(1, Ordering::Relaxed);
        if self.publishing.load(Ordering::Relaxed) {
            state.link_changed = true;
            self.links_changed.notify_one();
        }
    }

    /// The links that changed since the last call, as they are now, with each connected
    /// agent's tools.
    pub fn take_link_changes(&self) -> Vec<LinkChange> {
        let mut hosts = self.hosts();
        hosts
            .iter_mut()
            .filter(|(_, s)| s.link_changed)
            .map(|(host, s)| {
                s.link_changed = false;
                let presence = s.presence();
                LinkChange {
                    tools: match presence {
                        Presence::Offline => Vec::new(),
                        _ => s.tools.clone().unwrap_or_default(),
                    },
                    host: host.clone(),
                    presence,
                }
            })
            .collect()
    }

    /// Puts back changes a publish could not store (the next take reads them afresh).
    pub fn requeue_link_changes(&self, changes: Vec<LinkChange>) {
        let mut hosts = self.hosts();
        for c in changes {
            hosts.entry(c.host).or_default().link_changed = true;
        }
    }

    /// Keeps what `host`'s agent reported of its tools (none from an older agent).
    pub fn set_tools(&self, host: &HostName, tools: Vec<ToolVersion>) {
        let mut hosts = self.hosts();
        let state = hosts.entry(host.clone()).or_default();
        let changed = state.tools.as_ref() != Some(&tools);
        state.tools = Some(tools);
        if changed && state.conn.is_some() {
            self.link_changed(state);
        }
    }

    /// What `host`'s agent last reported of its tools since this coordinator started.
    pub fn tools(&self, host: &str) -> Vec<ToolVersion> {
        let hosts = self.hosts();
        hosts
            .get(host)
            .and_then(|s| s.tools.clone())
            .unwrap_or_default()
    }

    /// Registers a connection, replacing an older one of the same host (whose stream ends).
    pub fn connect(&self, host: &HostName, tx: Outbound, held: Vec<PlanId>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut hosts = self.hosts();
        let state = hosts.entry(host.clone()).or_default();
        let old = state.conn.replace(Conn {
            id,
            tx,
            held,
            journal_fault: None,
        });
        state.lost = false;
        self.link_changed(state);
        drop(hosts);
        if old.is_some() {
            tracing::info!(agent = %host, "agent reconnected; dropping its older stream");
        }
        id
    }

    /// Forgets a connection that ended; `lost` when it ended by heartbeat timeout.
    pub fn disconnect(&self, host: &str, id: u64, lost: bool) {
        let mut hosts = self.hosts();
        if let Some(state) = hosts.get_mut(host) {
            if state.conn.as_ref().is_some_and(|c| c.id == id) {
                state.conn = None;
                state.lost |= lost;
                self.link_changed(state);
            }
        }
    }

    /// The hosts whose agents are connected to this coordinator now.
    pub fn connected_hosts(&self) -> Vec<HostName> {
        let hosts = self.hosts();
        hosts
            .iter()
            .filter(|(_, s)| s.conn.is_some())
            .map(|(h, _)| h.clone())
            .collect()
    }

    /// How many hosts are connected here, and how many were lost (silent past the
    /// heartbeat timeout) and not back.
    pub fn presence_counts(&self) -> (usize, usize) {
        let hosts = self.hosts();
        hosts.values().fold((0, 0), |(c, l), s| match s.presence() {
            Presence::Connected => (c + 1, l),
            Presence::Lost => (c, l + 1),
            Presence::Offline => (c, l),
        })
    }

    pub fn presence(&self, host: &str) -> Presence {
        let hosts = self.hosts();
        hosts
            .get(host)
            .map_or(Presence::Offline, HostState::presence)
    }

    /// Whether connection `id` is still `host`'s current one.
    pub fn is_current(&self, host: &str, id: u64) -> bool {
        let hosts = self.hosts();
        hosts
            .get(host)
            .and_then(|s| s.conn.as_ref())
            .is_some_and(|c| c.id == id)
    }

    /// What connection `id` of `host` said in its last heartbeat of its journal ("" when
    /// it can be written); a replaced connection's word is ignored.
    pub fn set_journal_fault(&self, host: &str, id: u64, fault: String) {
        let mut hosts = self.hosts();
        let conn = hosts.get_mut(host).and_then(|s| s.conn.as_mut());
        if let Some(c) = conn.filter(|c| c.id == id) {
            if c.journal_fault.as_deref().unwrap_or_default() != fault {
                match fault.as_str() {
                    "" => tracing::info!(agent = %host, "the agent's journal can be written again"),
                    // Info: the agent says it at ERROR in its own log, and `agents`,
                    // `status` and `watch` show it; `platter run` need not say it thrice.
                    f => {
                        tracing::info!(agent = %host, fault = %f, "the agent holds its steps: its journal cannot be written")
                    }
                }
            }
            if c.journal_fault.as_deref().unwrap_or_default() != fault {
                self.generation.fetch_add(1, Ordering::Relaxed);
            }
            c.journal_fault = (!fault.is_empty()).then_some(fault);
        }
    }

    /// A number that changes whenever an agent connects, goes, is lost or starts or stops
    /// holding its steps here.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// Why `host`'s agent, connected here, holds its steps, if it does.
    pub fn journal_fault(&self, host: &str) -> Option<String> {
        let hosts = self.hosts();
        hosts
            .get(host)
            .and_then(|s| s.conn.as_ref())
            .and_then(|c| c.journal_fault.clone())
    }

    pub fn is_connected(&self, host: &str) -> bool {
        let hosts = self.hosts();
        hosts.get(host).is_some_and(|s| s.conn.is_some())
    }

    /// Gives `host` its current plan if it does not hold it, or its next queued one.
    pub fn dispatch(&self, host: &HostName) {
        self.dispatch_to(std::slice::from_ref(host))
    }

    /// Sends `plan` unless the host's connection already holds it, then a cancel if its
    /// campaign was cancelled: also when the agent came back holding the plan, since a
    /// cancel sent while it was away reached nobody.
    fn send_plan(&self, host: &HostName, plan: Plan) -> Result<(), StoreError> {
        // Read before `held` changes: if the read fails, the retry finds the plan unsent.
        let cancelled = self.store.campaign_state(&plan.campaign_id)? == CampaignState::Cancelled;
        let (tx, conn_id, held) = {
            let mut hosts = self.hosts();
            let Some(conn) = hosts.get_mut(host).and_then(|s| s.conn.as_mut()) else {
                return Ok(());
            };
            let held = conn.held.contains(&plan.id);
            if !held {
                conn.held.push(plan.id.clone());
            }
            (conn.tx.clone(), conn.id, held)
        };
        if !held {
            tracing::info!(agent = %host, plan = %plan.id, campaign = %plan.campaign_id, "sending plan");
            let msg = pb::CoordinatorMessage {
                kind: Some(pb::coordinator_message::Kind::Plan(pb::Plan::from(&plan))),
            };
            if !self.offer(host, &tx, msg) {
                let mut hosts = self.hosts();
                // Only the connection the plan was offered to (the agent may have
                // reconnected meanwhile and been sent the plan anew).
                let conn = hosts.get_mut(host).and_then(|s| s.conn.as_mut());
                if let Some(conn) = conn.filter(|c| c.id == conn_id) {
                    conn.held.retain(|p| *p != plan.id);
                }
                return Ok(());
            }
        }
        if cancelled {
            self.cancel(host, &plan.id);
        }
        Ok(())
    }

    /// Queues `msg` for the agent without waiting: one agent that does not read its
    /// stream must not stall a fan-out. On a full queue the host is retried later (and
    /// false returned); on a closed one the agent gets everything again when it is back.
    fn offer(&self, host: &HostName, tx: &Outbound, msg: pb::CoordinatorMessage) -> bool {
        let sent = tx.try_send(Box::new(Ok(msg)));
        let mut hosts = self.hosts();
        let state = hosts.entry(host.clone()).or_default();
        match sent {
            Ok(()) => {
                if std::mem::take(&mut state.full) {
                    tracing::info!(agent = %host, "the agent's queue has room again");
                }
                true
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                // Once per episode, not once per retry.
                if !std::mem::replace(&mut state.full, true) {
                    tracing::warn!(agent = %host, "the agent's queue is full (it does not read its stream); retrying every second");
                }
                state.retry = true;
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => true,
        }
    }

    /// Tells `host` to stop `plan_id`. An agent away now hears it when it reconnects
    /// (`send_plan`); a full queue is retried the same way.
    pub fn cancel(&self, host: &HostName, plan_id: &PlanId) {
        let tx = {
            let hosts = self.hosts();
            hosts
                .get(host)
                .and_then(|s| s.conn.as_ref())
                .map(|c| c.tx.clone())
        };
        if let Some(tx) = tx {
            let msg = pb::CoordinatorMessage {
                kind: Some(pb::coordinator_message::Kind::Cancel(pb::Cancel {
                    plan_id: plan_id.to_string(),
                })),
            };
            self.offer(host, &tx, msg);
        }
    }

    /// Tells connected agents to stop the plans they were sent whose campaign was
    /// cancelled elsewhere: through another coordinator sharing the store, which could
    /// not reach them (this one heard of it by `NOTIFY`). A plan cancelled before its agent
    /// accepted it is no longer any host's active plan, so dispatching again would not
    /// say it; this does. Each such plan is told once.
    pub fn cancel_cancelled(&self) {
        let held: Vec<(HostName, PlanId)> = {
            let hosts = self.hosts();
            hosts
                .iter()
                .filter_map(|(h, s)| Some((h, s.conn.as_ref()?)))
                .flat_map(|(h, c)| c.held.iter().map(move |p| (h.clone(), p.clone())))
                .collect()
        };
        if held.is_empty() {
            return;
        }
        let ids: Vec<PlanId> = held.iter().map(|(_, p)| p.clone()).collect();
        let cancelled = match self.store.cancelled_plans(&ids) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "reading which plans were cancelled failed; next notification tries again");
                return;
            }
        };
        for (host, plan) in held.into_iter().filter(|(_, p)| cancelled.contains(p)) {
            tracing::info!(agent = %host, %plan, "cancelled through another coordinator; telling the agent");
            self.cancel(&host, &plan);
            let mut hosts = self.hosts();
            if let Some(c) = hosts.get_mut(&host).and_then(|s| s.conn.as_mut()) {
                c.held.retain(|p| *p != plan);
            }
        }
    }

    /// `dispatch_to` from async code: the store work runs off the async workers (it may
    /// wait on the store's busy timeout), and the caller does not wait for it. Hosts asked
    /// for while a dispatch runs are dispatched together by one task, one pass for all of
    /// them: every hello asks for its host, and in a reconnect storm a task and a store
    /// read each made 10,000 reads and grew the blocking pool to its 512 threads.
    pub fn dispatch_soon(self: &Arc<Self>, hosts: Vec<HostName>) {
        {
            let mut soon = self.soon.lock().expect("dispatch_soon");
            soon.hosts.extend(hosts);
            if soon.running {
                return;
            }
            soon.running = true;
        }
        // Should a dispatch panic, the next `dispatch_soon` starts a task again.
        struct Running(Arc<Hub>);
        impl Drop for Running {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    if let Ok(mut soon) = self.0.soon.lock() {
                        soon.running = false;
                    }
                }
            }
        }
        let running = Running(self.clone());
        tokio::task::spawn_blocking(move || loop {
            let hub = &running.0;
            let batch: Vec<HostName> = {
                let mut soon = hub.soon.lock().expect("dispatch_soon");
                if soon.hosts.is_empty() {
                    soon.running = false;
                    return;
                }
                std::mem::take(&mut soon.hosts).into_iter().collect()
            };
            hub.dispatch_to(&batch);
        });
    }

    /// Dispatches to the connected hosts that have plans queued, or sent but perhaps not
    /// received (another coordinator marked a plan sent on a stream of the agent's that was
    /// already dead, the agent being here): after another coordinator sharing the store
    /// queued plans or freed a host, one read finds them (visiting every connected host
    /// was a read each: 10,000 for one campaign).
    pub fn dispatch_waiting(&self) {
        let queued = match self.store.hosts_with_waiting_plans() {
            Ok(q) => q,
            Err(e) => {
                tracing::warn!(error = %e, "reading which hosts have plans queued failed; dispatching to every connected host");
                return self.dispatch_all();
            }
        };
        let mut hosts = self.connected_hosts();
        hosts.retain(|h| queued.contains(h));
        self.dispatch_to(&hosts);
    }

    /// Dispatches to every connected host (after a campaign resumes).
    pub fn dispatch_all(&self) {
        self.dispatch_to(&self.connected_hosts());
    }

    /// Dispatches to these hosts, those of them that are connected; the store marks all
    /// their plans sent in one transaction.
    pub fn dispatch_to(&self, hosts: &[HostName]) {
        let connected: Vec<HostName> = hosts
            .iter()
            .filter(|h| self.is_connected(h))
            .cloned()
            .collect();
        let plans = match self.store.plans_for_hosts(&connected) {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(hosts = connected.len(), error = %e, "dispatch failed; retrying");
                self.retry_later(&connected);
                return;
            }
        };
        for (host, plan, _new) in plans {
            if let Err(e) = self.send_plan(&host, plan) {
                tracing::error!(agent = %host, error = %e, "dispatch failed; retrying");
                self.retry_later(std::slice::from_ref(&host));
            }
        }
    }

    /// Marks `hosts` for `retry_failed`.
    fn retry_later(&self, hosts: &[HostName]) {
        let mut all = self.hosts();
        for h in hosts {
            all.entry(h.clone()).or_default().retry = true;
        }
    }

    /// Hosts waiting for a dispatch to be retried.
    #[cfg(test)]
    pub fn retry_pending(&self) -> usize {
        self.hosts().values().filter(|s| s.retry).count()
    }

    /// Retries failed dispatches every `RETRY_INTERVAL` until `shutdown`.
    pub async fn retry_failed(self: Arc<Self>, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(RETRY_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.cancelled() => return,
            }
            let hosts: Vec<HostName> = self
                .hosts()
                .iter_mut()
                .filter_map(|(h, s)| std::mem::take(&mut s.retry).then(|| h.clone()))
                .collect();
            if !hosts.is_empty() {
                self.dispatch_soon(hosts);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dispatch that fails because the store is locked is retried until the plan goes out.
    #[tokio::test]
    async fn a_failed_dispatch_is_retried_until_the_plan_is_sent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let store = Store::open_with(&path, Duration::from_millis(50)).unwrap();
        let planned = crate::store::test_campaign("h", 1);
        store.insert_campaign(&planned, "t.yaml", "").unwrap();
        let hub = Arc::new(Hub::new(store));
        let (tx, mut rx) = mpsc::channel(8);
        hub.connect(&"h".into(), tx, Vec::new());

        // Another process holds the write lock: the dispatch fails and is remembered.
        let locker = rusqlite::Connection::open(&path).unwrap();
        locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
        hub.dispatch(&"h".into());
        assert_eq!(hub.retry_pending(), 1);
        assert!(rx.try_recv().is_err(), "nothing was sent");

        let shutdown = CancellationToken::new();
        let retry = tokio::spawn(hub.clone().retry_failed(shutdown.clone()));
        locker.execute_batch("COMMIT").unwrap();
        let msg = tokio::time::timeout(RETRY_INTERVAL * 5, rx.recv())
            .await
            .expect("the retry sends the plan")
            .unwrap()
            .unwrap();
        match msg.kind {
            Some(pb::coordinator_message::Kind::Plan(p)) => assert_eq!(p.id, planned.plans[0].id),
            other => panic!("expected the plan, got {other:?}"),
        }
        assert_eq!(hub.retry_pending(), 0);
        shutdown.cancel();
        retry.await.unwrap();
    }

    /// A campaign cancelled through another coordinator (the store changed, this hub was
    /// not called) while its plan was sent but not yet accepted: the agent is told, once.
    #[tokio::test]
    async fn a_plan_cancelled_elsewhere_is_cancelled_on_its_agent() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let planned = crate::store::test_campaign("h", 1);
        store.insert_campaign(&planned, "t.yaml", "").unwrap();
        let hub = Arc::new(Hub::new(store.clone()));
        let (tx, mut rx) = mpsc::channel(8);
        hub.connect(&"h".into(), tx, Vec::new());
        hub.dispatch(&"h".into());
        assert!(matches!(
            (*rx.try_recv().unwrap()).unwrap().kind,
            Some(pb::coordinator_message::Kind::Plan(_))
        ));
        // What another coordinator's cancel does to the shared store.
        store.cancel_campaign(&planned.id).unwrap();
        hub.dispatch_all();
        assert!(rx.try_recv().is_err(), "dispatching alone says nothing");
        hub.cancel_cancelled();
        match (*rx.try_recv().unwrap()).unwrap().kind {
            Some(pb::coordinator_message::Kind::Cancel(c)) => {
                assert_eq!(c.plan_id, planned.plans[0].id.as_str())
            }
            other => panic!("expected a cancel, got {other:?}"),
        }
        hub.cancel_cancelled();
        assert!(rx.try_recv().is_err(), "told once");
    }

    /// Coordinators sharing a store: the agent moved to b while a still had its old,
    /// dead stream; a marks the agent's new plan sent on that stream. Told by
    /// notification, b sends it: a plan sent but not accepted is dispatched again
    /// (dispatching only to hosts with queued plans left the host idle for good).
    #[tokio::test]
    async fn a_plan_sent_on_anothers_dead_stream_reaches_the_agent() {
        let Some(url) = crate::store::testing::postgres_url() else {
            return;
        };
        let location = crate::store::testing::fresh_postgres(&url);
        let a = Store::open_at(&location).unwrap();
        let b = Store::open_at(&location).unwrap();
        let (hub_a, hub_b) = (Hub::new(a.clone()), Hub::new(b.clone()));
        let (dead_tx, dead_rx) = mpsc::channel(8);
        drop(dead_rx);
        hub_a.connect(&"h".into(), dead_tx, Vec::new());
        let (tx, mut rx) = mpsc::channel(8);
        hub_b.connect(&"h".into(), tx, Vec::new());
        let planned = crate::store::test_campaign("h", 1);
        a.insert_campaign(&planned, "t.yaml", "").unwrap();
        hub_a.dispatch(&"h".into());
        assert!(rx.try_recv().is_err(), "not yet");
        hub_b.dispatch_waiting();
        match (*rx.try_recv().expect("b sends the plan")).unwrap().kind {
            Some(pb::coordinator_message::Kind::Plan(p)) => {
                assert_eq!(p.id, planned.plans[0].id.as_str())
            }
            other => panic!("expected the plan, got {other:?}"),
        }
    }

    /// One agent that does not read its stream does not hold up the others' plans.
    #[tokio::test]
    async fn a_full_agent_queue_does_not_stall_the_fan_out() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let planned = crate::store::test_campaign("slow, fast", 1);
        store.insert_campaign(&planned, "t.yaml", "").unwrap();
        let hub = Arc::new(Hub::new(store));
        let (slow_tx, mut slow_rx) = mpsc::channel(1);
        slow_tx
            .try_send(Box::new(Err(Status::unavailable("filler"))))
            .unwrap();
        let (fast_tx, mut fast_rx) = mpsc::channel(8);
        hub.connect(&"slow".into(), slow_tx, Vec::new());
        hub.connect(&"fast".into(), fast_tx, Vec::new());

        let hosts = [HostName::from("slow"), HostName::from("fast")];
        // Dispatch cannot wait (it is not async): it returns with slow's plan not sent.
        hub.dispatch_to(&hosts);
        assert!(fast_rx.try_recv().is_ok(), "fast got its plan");
        assert_eq!(hub.retry_pending(), 1, "slow is retried");

        // Once the slow agent reads its stream, the retry delivers its plan.
        assert!(slow_rx.recv().await.unwrap().is_err(), "the filler");
        let shutdown = CancellationToken::new();
        let retry = tokio::spawn(hub.clone().retry_failed(shutdown.clone()));
        let msg = tokio::time::timeout(RETRY_INTERVAL * 5, slow_rx.recv())
            .await
            .expect("the retry sends the plan")
            .unwrap()
            .unwrap();
        assert!(matches!(
            msg.kind,
            Some(pb::coordinator_message::Kind::Plan(_))
        ));
        shutdown.cancel();
        retry.await.unwrap();
    }

    /// Hellos ask for a dispatch each; asked for at once, they are dispatched in passes
    /// of many hosts by one task, and every host gets its plan exactly once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dispatches_asked_for_at_once_are_made_together_and_reach_every_host_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let names: Vec<String> = (0..200).map(|i| format!("h{i:03}")).collect();
        let planned = crate::store::test_campaign(&names.join(", "), 1);
        store.insert_campaign(&planned, "t.yaml", "").unwrap();
        let hub = Arc::new(Hub::new(store));
        let mut inboxes = Vec::new();
        for n in &names {
            let (tx, rx) = mpsc::channel(8);
            hub.connect(&n.as_str().into(), tx, Vec::new());
            inboxes.push(rx);
        }
        // Each twice, as a hello and a freed host might.
        for n in names.iter().chain(&names) {
            hub.dispatch_soon(vec![n.as_str().into()]);
        }
        for (n, rx) in names.iter().zip(&mut inboxes) {
            let msg = tokio::time::timeout(Duration::from_secs(20), rx.recv())
                .await
                .expect("the plan arrives")
                .unwrap()
                .unwrap();
            match msg.kind {
                Some(pb::coordinator_message::Kind::Plan(p)) => assert_eq!(&p.host, n),
                other => panic!("expected the plan, got {other:?}"),
            }
        }
        // Once the last pass is done, nobody got a second message and no task runs.
        let idle = async {
            while hub.soon.lock().unwrap().running {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(20), idle)
            .await
            .unwrap();
        for rx in &mut inboxes {
            // A plan sent and not yet accepted is sent again on a later pass for the same
            // host (the agent may not have it): those are the same plan, never another.
            while let Some(Ok(m)) = rx.try_recv().ok().map(|m| *m) {
                match m.kind {
                    Some(pb::coordinator_message::Kind::Plan(p)) => {
                        assert!(planned.plans.iter().any(|q| q.id.as_str() == p.id))
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
        }
        assert_eq!(
            hub.store
                .read(
                    |c| c.query_row("SELECT COUNT(*) FROM plans WHERE state = 'sent'", (), |r| r
                        .only::<i64>())
                )
                .unwrap(),
            200
        );
    }
}
