//! Connected agents and the scheduler. An agent holds at most one plan at a time, so its
//! measurements never overlap; hosts run in parallel. The hub is the only place that
//! sends plans and cancels to agents.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use platter_proto::v1 as pb;
use tokio::sync::mpsc;
use tonic::Status;

use crate::store::{Store, StoreError};

pub type Outbound = mpsc::Sender<Result<pb::CoordinatorMessage, Status>>;

struct Conn {
    id: u64,
    tx: Outbound,
    /// Plans the agent holds (from its hello) or that were sent on this connection.
    held: Vec<String>,
}

pub struct Hub {
    store: Store,
    conns: Mutex<HashMap<String, Conn>>,
    /// Hosts whose last stream ended by heartbeat timeout rather than by closing.
    lost: Mutex<HashSet<String>>,
    next_id: AtomicU64,
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
            next_id: AtomicU64::new(1),
        }
    }

    /// Registers a connection, replacing an older one of the same host (whose stream ends).
    pub fn connect(&self, host: &str, tx: Outbound, held: Vec<String>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let old = self
            .conns
            .lock()
            .expect("hub lock")
            .insert(host.to_string(), Conn { id, tx, held });
        self.lost.lock().expect("hub lock").remove(host);
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
        }
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

    pub fn is_connected(&self, host: &str) -> bool {
        self.conns.lock().expect("hub lock").contains_key(host)
    }

    /// Gives `host` its current plan if it does not hold it, or its next queued one.
    pub async fn dispatch(&self, host: &str) -> Result<(), StoreError> {
        let Some((plan, _new)) = self.store.plan_for_host(host)? else {
            return Ok(());
        };
        self.send_plan(host, plan).await
    }

    /// Sends `plan` unless the host's connection already holds it.
    async fn send_plan(
        &self,
        host: &str,
        plan: platter_agent::model::Plan,
    ) -> Result<(), StoreError> {
        let tx = {
            let mut conns = self.conns.lock().expect("hub lock");
            let Some(conn) = conns.get_mut(host) else {
                return Ok(());
            };
            if conn.held.contains(&plan.id) {
                return Ok(());
            }
            conn.held.push(plan.id.clone());
            conn.tx.clone()
        };
        tracing::info!(agent = %host, plan = %plan.id, campaign = %plan.campaign_id, "sending plan");
        let cancelled = self.store.campaign_state(&plan.campaign_id)? == "cancelled";
        let plan_id = plan.id.clone();
        let msg = pb::CoordinatorMessage {
            kind: Some(pb::coordinator_message::Kind::Plan(pb::Plan::from(&plan))),
        };
        // A send fails only when the stream just ended; the plan is sent again on reconnect.
        let _ = tx.send(Ok(msg)).await;
        if cancelled {
            self.cancel(host, &plan_id).await;
        }
        Ok(())
    }

    pub async fn cancel(&self, host: &str, plan_id: &str) {
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
            let _ = tx.send(Ok(msg)).await;
        }
    }

    /// Dispatches to every connected host (after a campaign resumes).
    pub async fn dispatch_all(&self) {
        let hosts: Vec<String> = self
            .conns
            .lock()
            .expect("hub lock")
            .keys()
            .cloned()
            .collect();
        self.dispatch_to(&hosts).await;
    }

    /// Dispatches to these hosts, those of them that are connected; the store marks all
    /// their plans sent in one transaction.
    pub async fn dispatch_to(&self, hosts: &[String]) {
        let connected: Vec<String> = hosts
            .iter()
            .filter(|h| self.is_connected(h))
            .cloned()
            .collect();
        let plans = match self.store.plans_for_hosts(&connected) {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(error = %e, "dispatch failed");
                return;
            }
        };
        for (host, plan, _new) in plans {
            if let Err(e) = self.send_plan(&host, plan).await {
                tracing::error!(agent = %host, error = %e, "dispatch failed");
            }
        }
    }
}
