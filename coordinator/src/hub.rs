//! Connected agents and the scheduler. An agent holds at most one plan at a time, so its
//! measurements never overlap; hosts run in parallel. The hub is the only place that
//! sends plans and cancels to agents. A dispatch that fails (the store is busy or failing)
//! is retried every `RETRY_INTERVAL` until it succeeds: a host is never left idle with
//! plans queued for it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use platter_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use crate::store::{Store, StoreError};

/// How often hosts whose dispatch failed are tried again.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(1);

pub type Outbound = mpsc::Sender<Result<pb::CoordinatorMessage, Status>>;

struct Conn {
    id: u64,
    tx: Outbound,
    /// Plans the agent holds (from its hello) or that were sent on this connection.
    held: Vec<String>,
    /// Why the agent holds its steps (its journal cannot be written), from its last
    /// heartbeat on this connection.
    journal_fault: Option<String>,
}

pub struct Hub {
    store: Store,
    conns: Mutex<HashMap<String, Conn>>,
    /// Hosts whose last stream ended by heartbeat timeout rather than by closing.
    lost: Mutex<HashSet<String>>,
    /// Hosts whose last dispatch failed; `retry_failed` tries them again.
    retry: Mutex<HashSet<String>>,
    /// Hosts whose outbound queue was last found full (for one log line per episode).
    full: Mutex<HashSet<String>>,
    /// The tools each agent last reported since this coordinator started (`platter
    /// agents`); kept in memory only: an agent reports them at every connection.
    tools: Mutex<HashMap<String, Vec<pb::ToolVersion>>>,
    /// Hosts whose link changed since the publisher on a shared store last took them (only
    /// while it runs: `publish_links`). Only the names: their presence is read when
    /// taken, so a reconnect's `connect` and the old stream's late `disconnect` cannot
    /// be published in the wrong order.
    link_changes: Mutex<HashSet<String>>,
    publishing: AtomicBool,
    /// Woken when a link changes (while publishing).
    pub(crate) links_changed: tokio::sync::Notify,
    /// This coordinator's name on a shared store (`publish_links`).
    name: std::sync::OnceLock<String>,
    next_id: AtomicU64,
}

/// A change of one agent's link to this coordinator, for the other coordinators on a
/// shared store to learn (`take_link_changes`, published by `crate::presence::publish`).
#[derive(Debug, Clone, PartialEq)]
pub struct LinkChange {
    pub host: String,
    pub presence: Presence,
    pub tools: Vec<pb::ToolVersion>,
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
            conns: Mutex::new(HashMap::new()),
            lost: Mutex::new(HashSet::new()),
            retry: Mutex::new(HashSet::new()),
            full: Mutex::new(HashSet::new()),
            tools: Mutex::new(HashMap::new()),
            link_changes: Mutex::new(HashSet::new()),
            publishing: AtomicBool::new(false),
            name: std::sync::OnceLock::new(),
            links_changed: tokio::sync::Notify::new(),
            next_id: AtomicU64::new(1),
        }
    }

    /// From now on, keeps the links' changes for `take_link_changes`: coordinators that
    /// share a store publish them, this one as `name`.
    pub fn publish_links(&self, name: String) {
        let _ = self.name.set(name);
        self.publishing.store(true, Ordering::Relaxed);
    }

    /// This coordinator's name when it shares its store with others.
    /// The store this hub dispatches from.
    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn name(&self) -> Option<&str> {
        self.name.get().map(String::as_str)
    }

    fn link_changed(&self, host: &str) {
        if self.publishing.load(Ordering::Relaxed) {
            self.link_changes
                .lock()
                .expect("hub links")
                .insert(host.to_string());
            self.links_changed.notify_one();
        }
    }

    /// The links that changed since the last call, as they are now, with each connected
    /// agent's tools.
    pub fn take_link_changes(&self) -> Vec<LinkChange> {
        let hosts = std::mem::take(&mut *self.link_changes.lock().expect("hub links"));
        hosts
            .into_iter()
            .map(|host| {
                let presence = self.presence(&host);
                LinkChange {
                    tools: if presence == Presence::Offline {
                        Vec::new()
                    } else {
                        self.tools(&host)
                    },
                    host,
                    presence,
                }
            })
            .collect()
    }

    /// Puts back changes a publish could not store (the next take reads them afresh).
    pub fn requeue_link_changes(&self, changes: Vec<LinkChange>) {
        let mut pending = self.link_changes.lock().expect("hub links");
        pending.extend(changes.into_iter().map(|c| c.host));
    }

    /// Keeps what `host`'s agent reported of its tools (none from an older agent).
    pub fn set_tools(&self, host: &str, tools: Vec<pb::ToolVersion>) {
        let changed = self
            .tools
            .lock()
            .expect("hub tools")
            .insert(host.to_string(), tools.clone())
            .is_none_or(|old| old != tools);
        if changed && self.is_connected(host) {
            self.link_changed(host);
        }
    }

    /// What `host`'s agent last reported of its tools since this coordinator started.
    pub fn tools(&self, host: &str) -> Vec<pb::ToolVersion> {
        let tools = self.tools.lock().expect("hub tools");
        tools.get(host).cloned().unwrap_or_default()
    }

    /// Registers a connection, replacing an older one of the same host (whose stream ends).
    pub fn connect(&self, host: &str, tx: Outbound, held: Vec<String>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let old = self.conns.lock().expect("hub lock").insert(
            host.to_string(),
            Conn {
                id,
                tx,
                held,
                journal_fault: None,
            },
        );
        self.lost.lock().expect("hub lock").remove(host);
        self.link_changed(host);
        if old.is_some() {
            tracing::info!(agent = %host, "agent reconnected; dropping its older stream");
        }
        id
    }

    /// Forgets a connection that ended; `lost` when it ended by heartbeat timeout.
    pub fn disconnect(&self, host: &str, id: u64, lost: bool) {
        let mut conns = self.conns.lock().expect("hub lock");
        if conns.get(host).is_some_and(|c| c.id == id) {
            conns.remove(host);
            if lost {
                self.lost.lock().expect("hub lock").insert(host.to_string());
            }
            drop(conns);
            self.link_changed(host);
        }
    }

    /// The hosts whose agents are connected to this coordinator now.
    pub fn connected_hosts(&self) -> Vec<String> {
        self.conns
            .lock()
            .expect("hub lock")
            .keys()
            .cloned()
            .collect()
    }

    pub fn presence(&self, host: &str) -> Presence {
        if self.is_connected(host) {
            Presence::Connected
        } else if self.lost.lock().expect("hub lock").contains(host) {
            Presence::Lost
        } else {
            Presence::Offline
        }
    }

    /// Whether connection `id` is still `host`'s current one.
    pub fn is_current(&self, host: &str, id: u64) -> bool {
        self.conns
            .lock()
            .expect("hub lock")
            .get(host)
            .is_some_and(|c| c.id == id)
    }

    /// What connection `id` of `host` said in its last heartbeat of its journal ("" when
    /// it can be written); a replaced connection's word is ignored.
    pub fn set_journal_fault(&self, host: &str, id: u64, fault: String) {
        let mut conns = self.conns.lock().expect("hub lock");
        if let Some(c) = conns.get_mut(host).filter(|c| c.id == id) {
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
            c.journal_fault = (!fault.is_empty()).then_some(fault);
        }
    }

    /// Why `host`'s agent, connected here, holds its steps, if it does.
    pub fn journal_fault(&self, host: &str) -> Option<String> {
        let conns = self.conns.lock().expect("hub lock");
        conns.get(host).and_then(|c| c.journal_fault.clone())
    }

    pub fn is_connected(&self, host: &str) -> bool {
        self.conns.lock().expect("hub lock").contains_key(host)
    }

    /// Gives `host` its current plan if it does not hold it, or its next queued one.
    pub fn dispatch(&self, host: &str) {
        self.dispatch_to(&[host.to_string()])
    }

    /// Sends `plan` unless the host's connection already holds it, then a cancel if its
    /// campaign was cancelled: also when the agent came back holding the plan, since a
    /// cancel sent while it was away reached nobody.
    fn send_plan(&self, host: &str, plan: platter_proto::model::Plan) -> Result<(), StoreError> {
        // Read before `held` changes: if the read fails, the retry finds the plan unsent.
        let cancelled = self.store.campaign_state(&plan.campaign_id)? == "cancelled";
        let (tx, conn_id, held) = {
            let mut conns = self.conns.lock().expect("hub lock");
            let Some(conn) = conns.get_mut(host) else {
                return Ok(());
            };
            let held = conn.held.iter().any(|h| *h == plan.id);
            if !held {
                conn.held.push(plan.id.to_string());
            }
            (conn.tx.clone(), conn.id, held)
        };
        if !held {
            tracing::info!(agent = %host, plan = %plan.id, campaign = %plan.campaign_id, "sending plan");
            let msg = pb::CoordinatorMessage {
                kind: Some(pb::coordinator_message::Kind::Plan(pb::Plan::from(&plan))),
            };
            if !self.offer(host, &tx, msg) {
                let mut conns = self.conns.lock().expect("hub lock");
                // Only the connection the plan was offered to (the agent may have
                // reconnected meanwhile and been sent the plan anew).
                if let Some(conn) = conns.get_mut(host).filter(|c| c.id == conn_id) {
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
    fn offer(&self, host: &str, tx: &Outbound, msg: pb::CoordinatorMessage) -> bool {
        match tx.try_send(Ok(msg)) {
            Ok(()) => {
                if self.full.lock().expect("hub lock").remove(host) {
                    tracing::info!(agent = %host, "the agent's queue has room again");
                }
                true
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                // Once per episode, not once per retry.
                if self.full.lock().expect("hub lock").insert(host.to_string()) {
                    tracing::warn!(agent = %host, "the agent's queue is full (it does not read its stream); retrying every second");
                }
                self.retry
                    .lock()
                    .expect("hub lock")
                    .insert(host.to_string());
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => true,
        }
    }

    /// Tells `host` to stop `plan_id`. An agent away now hears it when it reconnects
    /// (`send_plan`); a full queue is retried the same way.
    pub fn cancel(&self, host: &str, plan_id: &str) {
        let tx = self
            .conns
            .lock()
            .expect("hub lock")
            .get(host)
            .map(|c| c.tx.clone());
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
        let held: Vec<(String, String)> = {
            let conns = self.conns.lock().expect("hub lock");
            conns
                .iter()
                .flat_map(|(h, c)| c.held.iter().map(move |p| (h.clone(), p.clone())))
                .collect()
        };
        if held.is_empty() {
            return;
        }
        let ids: Vec<String> = held.iter().map(|(_, p)| p.clone()).collect();
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
            if let Some(c) = self.conns.lock().expect("hub lock").get_mut(&host) {
                c.held.retain(|p| *p != plan);
            }
        }
    }

    /// `dispatch_to` from async code: the store work runs off the async workers (it may
    /// wait on the store's busy timeout), and the caller does not wait for it.
    pub fn dispatch_soon(self: &Arc<Self>, hosts: Vec<String>) {
        let hub = self.clone();
        tokio::task::spawn_blocking(move || hub.dispatch_to(&hosts));
    }

    /// Dispatches to every connected host (after a campaign resumes).
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
        let hosts: Vec<String> = self
            .conns
            .lock()
            .expect("hub lock")
            .keys()
            .filter(|h| queued.contains(*h))
            .cloned()
            .collect();
        self.dispatch_to(&hosts);
    }

    pub fn dispatch_all(&self) {
        let hosts: Vec<String> = self
            .conns
            .lock()
            .expect("hub lock")
            .keys()
            .cloned()
            .collect();
        self.dispatch_to(&hosts);
    }

    /// Dispatches to these hosts, those of them that are connected; the store marks all
    /// their plans sent in one transaction.
    pub fn dispatch_to(&self, hosts: &[String]) {
        let connected: Vec<String> = hosts
            .iter()
            .filter(|h| self.is_connected(h))
            .cloned()
            .collect();
        let plans = match self.store.plans_for_hosts(&connected) {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(hosts = connected.len(), error = %e, "dispatch failed; retrying");
                self.retry.lock().expect("hub lock").extend(connected);
                return;
            }
        };
        for (host, plan, _new) in plans {
            if let Err(e) = self.send_plan(&host, plan) {
                tracing::error!(agent = %host, error = %e, "dispatch failed; retrying");
                self.retry.lock().expect("hub lock").insert(host);
            }
        }
    }

    /// Hosts waiting for a dispatch to be retried.
    #[cfg(test)]
    pub fn retry_pending(&self) -> usize {
        self.retry.lock().expect("hub lock").len()
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
            let hosts: Vec<String> = self.retry.lock().expect("hub lock").drain().collect();
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
        hub.connect("h", tx, Vec::new());

        // Another process holds the write lock: the dispatch fails and is remembered.
        let locker = rusqlite::Connection::open(&path).unwrap();
        locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
        hub.dispatch("h");
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
        hub.connect("h", tx, Vec::new());
        hub.dispatch("h");
        assert!(matches!(
            rx.try_recv().unwrap().unwrap().kind,
            Some(pb::coordinator_message::Kind::Plan(_))
        ));
        // What another coordinator's cancel does to the shared store.
        store.cancel_campaign(&planned.id).unwrap();
        hub.dispatch_all();
        assert!(rx.try_recv().is_err(), "dispatching alone says nothing");
        hub.cancel_cancelled();
        match rx.try_recv().unwrap().unwrap().kind {
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
        hub_a.connect("h", dead_tx, Vec::new());
        let (tx, mut rx) = mpsc::channel(8);
        hub_b.connect("h", tx, Vec::new());
        let planned = crate::store::test_campaign("h", 1);
        a.insert_campaign(&planned, "t.yaml", "").unwrap();
        hub_a.dispatch("h");
        assert!(rx.try_recv().is_err(), "not yet");
        hub_b.dispatch_waiting();
        match rx.try_recv().expect("b sends the plan").unwrap().kind {
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
            .try_send(Err(Status::unavailable("filler")))
            .unwrap();
        let (fast_tx, mut fast_rx) = mpsc::channel(8);
        hub.connect("slow", slow_tx, Vec::new());
        hub.connect("fast", fast_tx, Vec::new());

        let hosts = ["slow".to_string(), "fast".to_string()];
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
}
