//! The coordinator's side of AgentLink: one task per connected agent stream, which stores
//! records through the store's writer and acks them only after their commit.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use platter_proto::inventory::{Device, ToolVersion};
use platter_proto::model::{HostName, PlanId, Record};
use platter_proto::v1 as pb;
use platter_proto::v1::agent_link_server::AgentLink;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::{Request, Response, Status, Streaming};

use crate::pki::Role;
use crate::service::hub::{Hub, Outbound};
use crate::service::tls::Auth;
use crate::store::Store;

/// Records taken off a stream before they are handed to the writer together.
const MAX_RECORDS_PER_BATCH: usize = 1024;

pub struct AgentLinkService {
    pub store: Store,
    pub hub: Arc<Hub>,
    pub tasks: TaskTracker,
    pub shutdown: CancellationToken,
    pub auth: Auth,
    /// A stream silent this long (no heartbeat, no record) is closed and its host is lost.
    pub heartbeat_timeout: Duration,
}

#[tonic::async_trait]
impl AgentLink for AgentLinkService {
    type OpenStream = Pin<Box<dyn Stream<Item = Result<pb::CoordinatorMessage, Status>> + Send>>;

    async fn open(
        &self,
        request: Request<Streaming<pb::AgentMessage>>,
    ) -> Result<Response<Self::OpenStream>, Status> {
        let peer = self.auth.require(&request, Role::Agent)?;
        let remote = request.remote_addr();
        let mut inbound = request.into_inner();
        let hello = match inbound.message().await? {
            Some(pb::AgentMessage {
                kind: Some(pb::agent_message::Kind::Hello(h)),
            }) => h,
            _ => {
                return Err(Status::invalid_argument(
                    "the first message on AgentLink.Open must be a Hello",
                ))
            }
        };
        if hello.host.is_empty() {
            return Err(Status::invalid_argument("hello without a host name"));
        }
        if let Some(peer) = &peer {
            if peer.name != hello.host {
                tracing::warn!(peer = ?remote, certificate = %peer.name, claimed = %hello.host, "refused: agent claims another host's name");
                return Err(Status::permission_denied(format!(
                    "this certificate belongs to agent {:?}; it cannot connect as {:?}",
                    peer.name, hello.host
                )));
            }
        }
        let host = HostName::from(hello.host.clone());
        let labels: Vec<(String, String)> = {
            let mut l: Vec<_> = hello.labels.clone().into_iter().collect();
            l.sort();
            l
        };
        let devices: Vec<Device> = hello.devices.iter().cloned().map(Device::from).collect();
        // "connected" is said once the hello is stored (below): a stream closed before,
        // for a store that does not answer, is logged with its reason instead.
        tracing::debug!(agent = %host, boot_id = %hello.boot_id, held = ?hello.held_plan_ids, "agent says hello");
        // Plans the agent holds that this store never made (it was replaced or lost while
        // the agent ran them) can store nothing here: the agent is told to cancel them,
        // so they neither hold the host nor run for nobody.
        // Plans cancelled while the agent was away (also through another coordinator
        // sharing the store) before it accepted them are no host's current plan any
        // more, so no dispatch would name them: the agent is told here.
        // Most hellos hold no plan: they cost no read (in a storm of 10,000 reconnects,
        // one read each took every connection the database had).
        let (unknown, cancelled) = if hello.held_plan_ids.is_empty() {
            Default::default()
        } else {
            let held: Vec<PlanId> = hello.held_plan_ids.iter().map(PlanId::from).collect();
            let store = self.store.clone();
            tokio::task::spawn_blocking(move || {
                let unknown = store.unknown_plans(&held)?;
                let cancelled = store.cancelled_plans(&held)?;
                Ok::<_, crate::store::StoreError>((unknown, cancelled))
            })
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(|e| closing(&host, Status::unavailable(e.to_string())))?
        };
        let held_at_hello = hello.held_plan_ids.len();
        let held: Vec<PlanId> = hello
            .held_plan_ids
            .into_iter()
            .map(PlanId::from)
            .filter(|id| !unknown.contains(id) && !cancelled.contains(id))
            .collect();
        let (tx, rx) = mpsc::channel(256);
        let mut cancelled: Vec<PlanId> = cancelled.into_iter().collect();
        cancelled.sort();
        for plan_id in &unknown {
            tracing::warn!(agent = %host, plan = %plan_id, "the agent holds a plan this store never made; cancelling it");
        }
        for plan_id in &cancelled {
            tracing::info!(agent = %host, plan = %plan_id, "the agent holds a plan cancelled while it was away; cancelling it");
        }
        for plan_id in unknown.into_iter().chain(cancelled) {
            let cancel = pb::CoordinatorMessage {
                kind: Some(pb::coordinator_message::Kind::Cancel(pb::Cancel {
                    plan_id: plan_id.into_string(),
                })),
            };
            // The channel is new and has room for far more than a hello's plans.
            let _ = tx.try_send(Box::new(Ok(cancel)));
        }
        let tools = hello.tools.iter().cloned().map(ToolVersion::from).collect();
        self.hub.set_tools(&host, tools);
        let conn = self.hub.connect(&host, tx.clone(), held);
        let (store, hub, shutdown) = (self.store.clone(), self.hub.clone(), self.shutdown.clone());
        let timeout = self.heartbeat_timeout;
        let seen = (hello.boot_id, hello.agent_version, hello.acked_seq);
        self.tasks.spawn(async move {
            let serving = async {
                // The hello is stored before anything the agent sends, waiting for the store
                // if it cannot commit; the agent counts as connected meanwhile, and `status`
                // and `agents` say why nothing moves.
                let elsewhere = until_stored(&tx, || {
                    store.agent_hello(&host, &seen.0, &seen.1, &devices, &labels, seen.2)
                })
                .await?;
                tracing::info!(agent = %host, boot_id = %seen.0, held = held_at_hello, "agent connected");
                if let Some(e) = elsewhere {
                    acked_elsewhere(&host, e);
                }
                hub.dispatch_soon(vec![host.clone()]);
                serve(&host, conn, &mut inbound, &tx, &store, &hub, timeout).await
            };
            let r = tokio::select! {
                r = serving => r,
                _ = shutdown.cancelled() => Ok(()),
            };
            let lost = match &r {
                Err(e) if e.code() == tonic::Code::DeadlineExceeded => {
                    tracing::warn!(agent = %host, "agent lost: {}; its plans wait until it is back", e.message());
                    true
                }
                Err(e) => {
                    tracing::info!(agent = %host, reason = %e.message(), code = ?e.code(), "the agent's stream was closed");
                    false
                }
                Ok(()) => {
                    tracing::info!(agent = %host, "the agent disconnected");
                    false
                }
            };
            hub.disconnect(&host, conn, lost);
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx).map(|m| *m))))
    }
}

/// Says that `host`'s records `e.first..=e.last` were acked by another store and are not
/// in this one: expected once per agent after this store was restored from a backup (the
/// original acked what the agents sent after the backup was taken), and then their
/// measurements are missing from the reports of their campaigns; else the agent was served
/// by another store. The store counts them as heard of: said once.
fn acked_elsewhere(host: &str, e: crate::store::AckedElsewhere) {
    let seqs = if e.first == e.last {
        format!("seq {}", e.first)
    } else {
        format!("seq {}–{}", e.first, e.last)
    };
    let records = e.last - e.first + 1;
    if e.known_agent {
        tracing::warn!(agent = %host, records, "{records} record(s) of this agent ({seqs}) were acknowledged by another store and are not in this one: it was restored from a backup taken before them, or the agent was served by another store. The agent no longer holds them, so they are lacking here for good: the campaigns here they belong to report those measurements as missing (campaigns planned after the backup are not here at all)");
    } else {
        // A store new to the agent (a new store, or one restored from a backup taken
        // before the agent's first hello): nothing of it was ever here.
        tracing::info!(agent = %host, records, "the agent is new to this store: its records up to seq {} went to another store", e.last);
    }
}

/// `status`, logged as the reason this coordinator closes `host`'s stream (the agent's log
/// says it too, but the operator reads the coordinator's).
fn closing(host: &str, status: Status) -> Status {
    tracing::warn!(agent = %host, code = ?status.code(), reason = %status.message(), "closing the agent's stream");
    status
}

/// How often a write the store could not commit is tried again.
const STORE_RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// Runs `write` until the store commits it, trying again every `STORE_RETRY_INTERVAL`
/// while the store cannot commit (disk full, read-only): the agent keeps its stream and
/// its unacked records, and is answered within a second of the store's recovery instead
/// of after a reconnect. Gives up when the agent went away (it resends on reconnect) or
/// the write failed for another reason.
async fn until_stored<T, F, Fut>(tx: &Outbound, mut write: F) -> Result<T, Status>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = crate::store::Result<T>>,
{
    loop {
        // The write and the wait are boxed: each lives only while it is waited for, and
        // held inline they made each agent's task as large as the largest of them for as
        // long as the agent stayed connected (1 KiB more of every connected agent's memory).
        match Box::pin(write()).await {
            Ok(t) => return Ok(t),
            Err(e) if crate::store::is_store_fault(&e) && !tx.is_closed() => {
                Box::pin(tokio::time::sleep(STORE_RETRY_INTERVAL)).await;
            }
            Err(e) => return Err(Status::unavailable(e.to_string())),
        }
    }
}

async fn serve(
    host: &HostName,
    conn: u64,
    inbound: &mut Streaming<pb::AgentMessage>,
    tx: &Outbound,
    store: &Store,
    hub: &Arc<Hub>,
    timeout: Duration,
) -> Result<(), Status> {
    use pb::agent_message::Kind;
    let mut never_made_log = NeverMade::new(host);
    loop {
        let Ok(first) = tokio::time::timeout(timeout, inbound.message()).await else {
            return Err(Status::deadline_exceeded(format!(
                "nothing heard for {} s (heartbeats come every {} s)",
                timeout.as_secs(),
                platter_proto::protocol::HEARTBEAT_INTERVAL.as_secs()
            )));
        };
        let Some(first) = first? else { break };
        let mut batch: Vec<Record> = Vec::new();
        let mut next = Some(first);
        // Take what has already arrived, without waiting, so one commit covers it all.
        while let Some(m) = next.take() {
            match m.kind {
                Some(Kind::Record(r)) => batch.push(
                    Record::try_from(r).map_err(|e| Status::invalid_argument(e.to_string()))?,
                ),
                // A heartbeat proves the agent alive (the read timeout above) and says
                // whether it holds its steps for its journal; progress comes from the
                // stored step records.
                Some(Kind::Heartbeat(hb)) => hub.set_journal_fault(host, conn, hb.journal_fault),
                // An older stream's late inventory must not overwrite a newer hello's.
                Some(Kind::Inventory(inv)) if hub.is_current(host, conn) => {
                    hub.set_tools(host, inv.tools.into_iter().map(ToolVersion::from).collect());
                    let devices: Vec<Device> = inv.devices.into_iter().map(Device::from).collect();
                    // Also mounts and write-cache changes of plans' own storage steps: debug.
                    tracing::debug!(agent = %host, drives = devices.len(), "agent's drives changed");
                    until_stored(tx, || store.agent_devices(host, &devices)).await?;
                }
                Some(Kind::Inventory(_)) => {}
                Some(Kind::Hello(_)) => {
                    return Err(Status::invalid_argument("a second Hello on one stream"))
                }
                None => {}
            }
            if batch.len() < MAX_RECORDS_PER_BATCH {
                next = inbound.message().now_or_never().transpose()?.flatten();
            }
        }
        if batch.is_empty() {
            continue;
        }
        let seq = batch.iter().map(|r| r.seq).max().unwrap_or(0);
        let outcome = until_stored(tx, || store.write_records(host, batch.clone())).await?;
        let refused = outcome
            .refusals
            .iter()
            .map(|(seq, reason)| pb::RefusedRecord {
                seq: *seq,
                reason: reason.clone(),
            })
            .collect();
        let ack = pb::CoordinatorMessage {
            kind: Some(pb::coordinator_message::Kind::Ack(pb::Ack { seq, refused })),
        };
        // An agent that stops reading its stream is as good as silent.
        match tokio::time::timeout(timeout, tx.send(Box::new(Ok(ack)))).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(Status::cancelled("agent went away")),
            Err(_) => {
                return Err(Status::deadline_exceeded(format!(
                    "it has not read its stream for {} s",
                    timeout.as_secs()
                )))
            }
        }
        for (plan, n) in &outcome.refused {
            let never_made = outcome.never_made.get(plan).copied().unwrap_or(0);
            never_made_log.refused(plan, never_made);
            if *n > never_made {
                tracing::error!(agent = %host, %plan, records = n - never_made, "refused records that cannot be stored (the reasons are logged above); they are kept in refused_records, not in any report");
            }
        }
        if !outcome.hosts_freed.is_empty() {
            hub.dispatch_soon(outcome.hosts_freed);
        }
    }
    Ok(())
}

/// The records one agent's stream sent of plans this store never made, by plan: expected
/// once after a store is deleted or replaced under an agent, whose journal still holds the
/// old store's unacked records and sends them all. Logged once per plan when the first are
/// refused, and summed up in one line when the stream ends (dropped, also when the
/// coordinator stops): one line per batch was 65 ERROR lines for one run of the quickstart
/// after its store was deleted.
struct NeverMade<'a> {
    host: &'a str,
    /// Plan → (records, batches).
    plans: std::collections::BTreeMap<String, (u64, u64)>,
}

impl<'a> NeverMade<'a> {
    fn new(host: &'a str) -> NeverMade<'a> {
        NeverMade {
            host,
            plans: Default::default(),
        }
    }

    /// `records` of `plan` were refused in one batch (none: nothing to say).
    fn refused(&mut self, plan: &str, records: u32) {
        if records == 0 {
            return;
        }
        let (total, batches) = self.plans.entry(plan.to_string()).or_default();
        if *batches == 0 {
            tracing::warn!(agent = %self.host, %plan, records, "refusing records of a plan this store never made (an agent's journal from an older or deleted store); they are kept in refused_records, not in any report; more of them on this stream are counted and summed up when it ends");
        }
        *total += u64::from(records);
        *batches += 1;
    }
}

impl Drop for NeverMade<'_> {
    fn drop(&mut self) {
        for (plan, (records, batches)) in &self.plans {
            // One batch was all there was: its line said it.
            if *batches > 1 {
                tracing::warn!(agent = %self.host, %plan, "refused {records} records of plan {plan} this store never made (an agent's journal from an older or deleted store)");
            }
        }
    }
}
