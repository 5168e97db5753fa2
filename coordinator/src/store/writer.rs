//! The record writers: each takes the batches of its hosts, commits them in one
//! transaction (the PostgreSQL fast paths: COPY, arrays), then answers each; a record that
//! cannot be stored is refused alone, and a plan's end may queue the next round.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use platter_proto::model::{HostName, Record, RecordKind};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_postgres::types::{ToSql, Type};

use super::connect::Opener;
use super::db::{self, params, Conn};
use super::error::{now_ms, reason, retrying_collisions, sqlstate_class, Result, StoreError};
use super::health::Health;
use super::notify::{notify, Change, Instance};
use super::plans::queue_plan;

/// What a committed batch of records changed, so the caller can ack and reschedule.
#[derive(Debug, Default)]
pub struct BatchOutcome {
    /// Hosts with a plan that just ended: they may take their next plan.
    pub hosts_freed: Vec<HostName>,
    /// Records refused (stored in `refused_records`, not in results), by plan id.
    pub refused: std::collections::BTreeMap<String, u32>,
    /// Of those, the records refused because this store never made their plan (an agent's
    /// journal from an older or deleted store), by plan id.
    pub never_made: std::collections::BTreeMap<String, u32>,
    /// The refused records' sequence numbers and reasons, for the agent.
    pub refusals: Vec<(u64, String)>,
    /// Plans that ended or were refused: their campaigns may have ended
    /// (`finish_campaigns_if_ended`, once the transaction's records are in).
    pub(super) ended_plans: Vec<String>,
    /// Step rows and sample rows this batch inserted (a resent record inserts none), for
    /// `WriterStats` once its transaction commits.
    pub(super) steps_stored: u64,
    pub(super) samples_stored: u64,
    /// The batch was stored record by record: a record of it could not be stored.
    pub(super) one_by_one: bool,
    /// A hello's: records of the agent's that another store acknowledged and this one
    /// never stored.
    pub acked_elsewhere: Option<AckedElsewhere>,
}

/// Records of an agent's, `first..=last` by sequence number, that a store other than this
/// one acknowledged: the agent's hello says it has been acked up to `last`, while this
/// store heard of its records only up to `first - 1`. This store was restored from a
/// backup taken before them, or the agent was served by another store; the agent no longer
/// holds them, so they are lacking here for good. Told once: the store then counts them as
/// heard of (`agents.last_seq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckedElsewhere {
    pub first: u64,
    pub last: u64,
    /// Whether this store had heard of the agent before (else it is new here, and all it
    /// ever sent went to other stores).
    pub known_agent: bool,
}

pub(super) struct Batch {
    pub(super) host: HostName,
    /// The agent's row from its hello, stored before its records. Hellos go through the
    /// writer so that a fleet reconnecting at once (a coordinator restart) shares commits
    /// instead of paying one fsync per agent (BENCHMARKS.md, fleet scale).
    pub(super) hello: Option<AgentRow>,
    /// The agent's devices (JSON) when they changed while it was connected.
    pub(super) inventory: Option<String>,
    pub(super) records: Vec<Record>,
    pub(super) done: oneshot::Sender<Result<BatchOutcome>>,
}

pub(super) struct AgentRow {
    pub(super) boot_id: String,
    pub(super) version: String,
    /// JSON
    pub(super) devices: String,
    /// JSON
    pub(super) labels: String,
    /// The highest sequence number a coordinator acked to the agent (0: not said).
    pub(super) acked_seq: u64,
}

/// How many writers a PostgreSQL store has unless told (`platter serve --db-writers`).
/// One PostgreSQL backend stores a transaction on one core of the server; several, each
/// with hosts of their own, use several. (SQLite takes one writer at a time, so its store
/// has one.)
pub const DEFAULT_PG_WRITERS: usize = 4;

/// The writer that stores `host`'s batches, of `count`: the same for the life of the
/// process, so a host's batches are committed in the order they came.
#[doc(hidden)] // and for store_write's reference run
pub fn writer_of(host: &str, count: usize) -> usize {
    use std::hash::{Hash, Hasher};
    if count == 1 {
        return 0;
    }
    // FNV-1a would do as well; `DefaultHasher::new()` has fixed keys, so it is stable
    // within a process, which is all this needs.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    host.hash(&mut h);
    (h.finish() % count as u64) as usize
}

/// Upper bounds, in seconds, of the commit-latency buckets (`WriterStats`): from 1 ms (a
/// SQLite batch on a fast disk) to 10 s (a store that is about to be called hung); a
/// slower commit lands in the bucket past the last.
pub const COMMIT_BUCKETS: [f64; 13] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// What the writers stored since the store was opened in this process, counted as each
/// commit succeeds: relaxed atomics, a few per commit, so reading them (`/metrics`)
/// never waits on a writer nor a writer on a reader.
#[derive(Debug, Default)]
pub(super) struct WriterCounters {
    steps: AtomicU64,
    samples: AtomicU64,
    one_by_one: AtomicU64,
    commit_nanos: AtomicU64,
    /// Commits per latency bucket (`COMMIT_BUCKETS`, then one for slower ones): their
    /// sum is the number of commits, so a snapshot's count and buckets always agree.
    buckets: [AtomicU64; COMMIT_BUCKETS.len() + 1],
}

impl WriterCounters {
    fn committed(&self, took: Duration, outcomes: &[BatchOutcome]) {
        let (steps, samples) = outcomes.iter().fold((0, 0), |(st, sa), o| {
            (st + o.steps_stored, sa + o.samples_stored)
        });
        self.steps.fetch_add(steps, Ordering::Relaxed);
        self.samples.fetch_add(samples, Ordering::Relaxed);
        let one_by_one = outcomes.iter().filter(|o| o.one_by_one).count() as u64;
        self.one_by_one.fetch_add(one_by_one, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.commit_nanos.fetch_add(nanos, Ordering::Relaxed);
        let secs = took.as_secs_f64();
        let bucket = COMMIT_BUCKETS
            .iter()
            .position(|&upper| secs <= upper)
            .unwrap_or(COMMIT_BUCKETS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> WriterStats {
        let buckets: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        WriterStats {
            steps_stored: self.steps.load(Ordering::Relaxed),
            samples_stored: self.samples.load(Ordering::Relaxed),
            batches_one_by_one: self.one_by_one.load(Ordering::Relaxed),
            commits: buckets.iter().sum(),
            commit_seconds_sum: self.commit_nanos.load(Ordering::Relaxed) as f64 / 1e9,
            commit_buckets: buckets,
        }
    }
}

/// What the record writers of this process stored since the store was opened
/// (`Store::writer_stats`): rows committed and how long their commits took.
#[derive(Debug, Clone, PartialEq)]
pub struct WriterStats {
    /// Step rows committed (a resent record, already stored, is not counted again).
    pub steps_stored: u64,
    /// Sample rows committed.
    pub samples_stored: u64,
    /// Agents' batches stored record by record because a record of them could not be
    /// stored (it breaks a constraint): each such record is refused with its reason.
    pub batches_one_by_one: u64,
    /// Transactions of agents' batches (records, hellos, inventories) committed; a failed
    /// one is not counted, nor the probe of a writer with a fault.
    pub commits: u64,
    /// Their commit latencies added up (from the transaction's start, a retry after a
    /// collision included, to its commit).
    pub commit_seconds_sum: f64,
    /// Commits per latency bucket: `COMMIT_BUCKETS[i]` bounds bucket `i` (not
    /// cumulative); the last counts those slower than every bound.
    pub commit_buckets: Vec<u64>,
}

/// What a writer shares with the store: its place among the writers (`Health`'s key) and
/// the store's own handles.
pub(super) struct Writer {
    pub(super) me: usize,
    pub(super) opener: Opener,
    pub(super) changed: watch::Sender<u64>,
    pub(super) health: Arc<Health>,
    pub(super) instance: Arc<Instance>,
    pub(super) retried: Arc<std::sync::atomic::AtomicU64>,
    pub(super) counters: Arc<WriterCounters>,
}

/// A writer of records (one per `writer_of` shard). Takes whatever batches of its hosts
/// are waiting, commits them in one transaction, then answers each.
pub(super) fn writer_loop(w: Writer, mut conn: Conn, mut rx: mpsc::Receiver<Batch>) {
    let Writer {
        me,
        opener,
        changed,
        health,
        instance,
        retried,
        counters,
    } = w;
    /// Upper bound on batches per transaction, to bound latency of the first ack.
    const MAX_BATCHES: usize = 256;
    let mut cells = CellKeys::default();
    let mut plans = KnownPlans::default();
    loop {
        // A writer whose last commit failed has its agents' batches resent every second;
        // if none come (its agents went to another coordinator, or away), nothing would
        // end its fault, and the coordinator would say NOT_SERVING for good. So it waits
        // only so long, then commits a write of its own to see.
        let first = if health.has(me) {
            match recv_within(&mut rx, PROBE_WHEN_IDLE) {
                Received::Batch(b) => b,
                Received::Closed => break,
                Received::Nothing => {
                    match probe(&opener, &mut conn) {
                        Ok(()) => {
                            health.committed(me);
                            changed.send_modify(|n| *n += 1);
                        }
                        Err(e) => {
                            tracing::debug!(error = %e, "the store's idle writer still cannot commit")
                        }
                    }
                    continue;
                }
            }
        } else {
            match rx.blocking_recv() {
                Some(b) => b,
                None => break,
            }
        };
        let mut batches = vec![first];
        while batches.len() < MAX_BATCHES {
            match rx.try_recv() {
                Ok(b) => batches.push(b),
                Err(_) => break,
            }
        }
        if let Err(e) = health.answering() {
            // Not tried: the agents resend, and the watch says when to try again.
            for b in batches {
                let _ = b.done.send(Err(StoreError::Commit(e.to_string())));
            }
            continue;
        }
        if conn.is_broken() {
            // PostgreSQL went away: a new connection, or the batch fails (and is resent).
            match opener.writer() {
                Ok(c) => conn = c,
                Err(e) => tracing::debug!(error = %e, "reconnecting the store's writer failed"),
            }
        }
        // Two writers (of this coordinator or another) that end plans of the same two
        // campaigns at once lock the campaigns' rows in opposite orders: PostgreSQL
        // breaks the deadlock by failing one, which is tried again shortly rather than
        // failing its agents' batches (and the store's health) for it.
        let started = Instant::now();
        let committed = retrying_collisions(
            || commit(&conn, &mut cells, &mut plans, &batches, &instance),
            |e| {
                retried.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::debug!(error = %e, "storing records collided with another writer; trying again");
            },
        );
        match committed {
            Ok(outcomes) => {
                counters.committed(started.elapsed(), &outcomes);
                health.committed(me);
                changed.send_modify(|n| *n += 1);
                for (b, o) in batches.into_iter().zip(outcomes) {
                    let _ = b.done.send(Ok(o));
                }
            }
            Err(e) => {
                // Logged once per episode by `health`; each attempt at debug level.
                tracing::debug!(error = %e, "storing records failed; they are retried");
                health.failed(me, &e);
                changed.send_modify(|n| *n += 1);
                let reason = reason(&e);
                for b in batches {
                    let _ = b.done.send(Err(StoreError::Commit(reason.clone())));
                }
            }
        }
    }
}

/// How long a writer with a fault waits for a batch before it commits a write of its own
/// to learn whether it can again (agents resend every second).
pub(super) const PROBE_WHEN_IDLE: Duration = Duration::from_secs(2);

pub(super) enum Received {
    Batch(Batch),
    Nothing,
    Closed,
}

/// The next batch if one comes within `wait`. Polled: the writer is a thread of its own
/// and a SQLite store has no runtime to time a wait with, and this runs only while the
/// writer has a fault.
pub(super) fn recv_within(rx: &mut mpsc::Receiver<Batch>, wait: Duration) -> Received {
    let until = Instant::now() + wait;
    loop {
        match rx.try_recv() {
            Ok(b) => return Received::Batch(b),
            Err(mpsc::error::TryRecvError::Disconnected) => return Received::Closed,
            Err(mpsc::error::TryRecvError::Empty) if Instant::now() >= until => {
                return Received::Nothing
            }
            Err(mpsc::error::TryRecvError::Empty) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Whether this connection can commit now: a transaction that changes no table but is
/// committed as a batch's would be. On PostgreSQL it takes a transaction id, so its
/// commit is written to the WAL and flushed (as `synchronous_commit` says) without a
/// row, a table privilege or a replica identity; SQLite sets the store's one identity row
/// to itself. It says the store commits again, not that the next batch will be stored:
/// that batch says so itself. A broken connection (PostgreSQL went away) is opened again
/// first.
pub(super) fn probe(opener: &Opener, conn: &mut Conn) -> Result<()> {
    if conn.is_broken() {
        *conn = opener.writer()?;
    }
    let tx = conn.write_transaction()?;
    if conn.is_postgres() {
        conn.query_row("SELECT txid_current()", (), |r| r.only::<i64>())?;
    } else {
        conn.execute("UPDATE store_identity SET id = id", ())?;
    }
    tx.commit()
}

/// What the writer needs of a plan: its host, and which of its steps are warm-ups.
pub(super) struct KnownPlan {
    host: String,
    warmup: std::collections::HashSet<u32>,
}

/// Plan id → what the writer needs of it, cached as first seen: plans never change.
#[derive(Default)]
pub(super) struct KnownPlans(std::collections::HashMap<String, KnownPlan>);

impl KnownPlans {
    fn get(&mut self, c: &Conn, id: &str) -> Result<Option<&KnownPlan>> {
        if !self.0.contains_key(id) {
            let row: Option<(String, String)> = c.query_opt(
                "SELECT host, warmup_steps FROM plans WHERE id = ?1",
                [id],
                |r| Ok((r.get("host")?, r.get("warmup_steps")?)),
            )?;
            let Some((host, warmup)) = row else {
                return Ok(None);
            };
            let warmup = serde_json::from_str(&warmup)?;
            self.0.insert(id.to_string(), KnownPlan { host, warmup });
        }
        Ok(self.0.get(id))
    }
}

pub(super) fn plan_of(kind: &RecordKind) -> (&str, &'static str) {
    match kind {
        RecordKind::PlanAccepted { plan_id } => (plan_id, "plan_accepted"),
        RecordKind::Step(e) => (&e.plan_id, "step"),
        RecordKind::PlanFinished { plan_id, .. } => (plan_id, "plan_finished"),
        RecordKind::PlanRefused { plan_id, .. } => (plan_id, "plan_refused"),
        RecordKind::Provenance { plan_id, .. } => (plan_id, "provenance"),
    }
}

/// Cell id → `cells.n`, cached: cells never change once stored.
#[derive(Default)]
pub(super) struct CellKeys(std::collections::HashMap<String, i64>);

impl CellKeys {
    fn get(&mut self, c: &Conn, id: &str) -> Result<Option<i64>> {
        if let Some(n) = self.0.get(id) {
            return Ok(Some(*n));
        }
        let n: Option<i64> =
            c.query_opt("SELECT n FROM cells WHERE id = ?1", [id], |r| r.only())?;
        if let Some(n) = n {
            self.0.insert(id.to_string(), n);
        }
        Ok(n)
    }
}

/// The campaigns of `plans` that have ended (none of their plans left to run) are marked
/// done. Called once per transaction, after its records: on PostgreSQL each campaign's row
/// is locked first, since coordinators (and a coordinator's writers) sharing the store may
/// end a campaign's last two plans at once and the later must see the other's end (READ
/// COMMITTED: its next statement reads what committed meanwhile); taking those locks in
/// the campaigns' order, once each, keeps two such transactions from deadlocking.
pub(super) fn finish_campaigns_if_ended(c: &Conn, plans: &[&str]) -> Result<()> {
    if plans.is_empty() {
        return Ok(());
    }
    let mut campaigns = std::collections::BTreeSet::new();
    for plan_id in plans {
        let campaign: Option<String> = c.query_opt(
            "SELECT campaign_id FROM plans WHERE id = ?1",
            [*plan_id],
            |r| r.only(),
        )?;
        campaigns.extend(campaign);
    }
    for id in &campaigns {
        if c.is_postgres() {
            // Not `FOR UPDATE`: that conflicts with the `FOR KEY SHARE` lock a new plan's
            // foreign key takes on its campaign, so two writers each queuing an adaptive
            // campaign's next round would deadlock here. `FOR NO KEY UPDATE` still
            // serializes the ends (it conflicts with itself and with `UPDATE`).
            c.execute(
                "SELECT 1 FROM campaigns WHERE id = ?1 FOR NO KEY UPDATE",
                [id],
            )?;
        }
        c.execute(
            "UPDATE campaigns SET state = 'done' WHERE state = 'running' AND id = ?1
               AND NOT EXISTS (SELECT 1 FROM plans p WHERE p.campaign_id = campaigns.id
                               AND p.state NOT IN ('done', 'cancelled', 'refused'))",
            [id],
        )?;
    }
    Ok(())
}

/// Keeps a record out of the results, with why, in `refused_records`.
pub(super) fn refuse(
    c: &Conn,
    host: &str,
    r: &Record,
    reason: &str,
    outcome: &mut BatchOutcome,
) -> Result<()> {
    let (plan_id, kind) = plan_of(&r.kind);
    c.execute(
        "INSERT OR IGNORE INTO refused_records (host, seq, plan_id, kind, reason, at_unix_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![host, r.seq as i64, plan_id, kind, reason, now_ms()],
    )?;
    *outcome.refused.entry(plan_id.to_string()).or_default() += 1;
    outcome.refusals.push((r.seq, reason.to_string()));
    Ok(())
}

/// The end of a step the store refused, as that step failing with the reason: without
/// it the step would have no end, and the report would only count a measurement missing
/// without saying why.
pub(super) fn failed_in_place_of(r: &Record, reason: &str) -> Option<Record> {
    let RecordKind::Step(e) = &r.kind else {
        return None;
    };
    if e.state == platter_proto::model::StepState::Started {
        return None;
    }
    let mut e = e.clone();
    e.state = platter_proto::model::StepState::Failed;
    e.samples.clear();
    e.error = format!("the coordinator's store refused this step's result: {reason}");
    Some(Record {
        seq: r.seq,
        kind: RecordKind::Step(e),
    })
}

/// Whether storing a record failed because of the record itself (it breaks a constraint,
/// or cannot be encoded), so that trying again can never succeed. A full disk, a lock or
/// an I/O error is not: those fail the commit, and the agents send again.
pub(super) fn is_the_records_fault(e: &StoreError) -> bool {
    match e {
        StoreError::Sql(rusqlite::Error::SqliteFailure(f, _)) => {
            f.code == rusqlite::ErrorCode::ConstraintViolation
        }
        // Integrity constraint violation, or data that does not fit (numeric out of
        // range, bad text encoding).
        StoreError::Pg(e) => matches!(sqlstate_class(e).as_deref(), Some("23" | "22")),
        StoreError::Json(_) | StoreError::Decode(_) => true,
        _ => false,
    }
}

/// Whether PostgreSQL refused a step's row for a unique key another row of `steps` has
/// (`COPY` of a step end stored before). Told by the table, not by the index: which of
/// its unique indexes PostgreSQL checks first is not set. A sample's key taken (two
/// samples of one metric in a record) is the record's fault, and no upsert mends it.
pub(super) fn is_a_step_stored_before(e: &StoreError) -> bool {
    let StoreError::Pg(e) = e else { return false };
    e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
        && e.as_db_error().and_then(|d| d.table()) == Some("steps")
}

/// Stores the agent's row (hello, inventory) and how far its records go; a hello that says
/// more of its records were acked than this store heard of is answered with those
/// (`AckedElsewhere`).
pub(super) fn store_agent(c: &Conn, b: &Batch) -> Result<Option<AckedElsewhere>> {
    let mut elsewhere = None;
    if let Some(a) = &b.hello {
        // `last_seq` is how far this store heard of the agent's records (stored, refused,
        // or told acked elsewhere). Read only when the hello says anything was acked: an
        // indexed read beside the row's write, in the same transaction.
        if a.acked_seq > 0 {
            let heard: Option<i64> = c.query_opt(
                "SELECT last_seq FROM agents WHERE host = ?1",
                params![b.host],
                |r| r.only(),
            )?;
            let upto = heard.map_or(0, |n| n.max(0) as u64);
            if a.acked_seq > upto {
                elsewhere = Some(AckedElsewhere {
                    first: upto + 1,
                    last: a.acked_seq,
                    known_agent: heard.is_some(),
                });
            }
        }
        c.execute(
            "INSERT INTO agents (host, boot_id, agent_version, last_seen_unix_ms, devices, labels) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (host) DO UPDATE SET boot_id = excluded.boot_id, agent_version = excluded.agent_version,
             last_seen_unix_ms = excluded.last_seen_unix_ms, devices = excluded.devices, labels = excluded.labels",
            params![b.host, a.boot_id, a.version, now_ms(), a.devices, a.labels],
        )?;
        if let Some(e) = &elsewhere {
            c.execute(
                "UPDATE agents SET last_seq = ?2 WHERE host = ?1",
                params![b.host, e.last as i64],
            )?;
        }
    }
    if let Some(devices) = &b.inventory {
        c.execute(
            "UPDATE agents SET devices = ?2 WHERE host = ?1",
            params![b.host, devices],
        )?;
    }
    // The drive ledger sees what the hello or the new inventory lists (the newer list when
    // a batch has both).
    if let Some(devices) = b
        .inventory
        .as_ref()
        .or(b.hello.as_ref().map(|a| &a.devices))
    {
        let devices: Vec<platter_proto::inventory::Device> = serde_json::from_str(devices)?;
        super::ledger::sight(c, &b.host, &devices, now_ms())?;
    }
    if b.records.is_empty() && b.hello.is_some() {
        // The hello set when it was seen; there is no record to count.
        return Ok(elsewhere);
    }
    let last_seq = b.records.iter().map(|r| r.seq).max().unwrap_or(0);
    c.execute(
        "UPDATE agents SET last_seq = CASE WHEN last_seq > ?2 THEN last_seq ELSE ?2 END, last_seen_unix_ms = ?3 WHERE host = ?1",
        params![b.host, last_seq as i64, now_ms()],
    )?;
    Ok(elsewhere)
}

/// Applies one record of `host`'s: a record of a plan this store never made, or of
/// another host's plan, is refused (an agent is confined to its own plans).
pub(super) fn store_record(
    c: &Conn,
    cells: &mut CellKeys,
    plans: &mut KnownPlans,
    host: &str,
    r: &Record,
    outcome: &mut BatchOutcome,
) -> Result<()> {
    let (plan_id, _) = plan_of(&r.kind);
    let (owner, warmup) = match plans.get(c, plan_id)? {
        Some(p) => (
            Some(p.host.clone()),
            matches!(&r.kind, RecordKind::Step(e) if p.warmup.contains(&e.step_index)),
        ),
        None => (None, false),
    };
    match owner {
        // Another store's plan (this one was replaced or lost under a running agent):
        // its results cannot belong to any campaign here.
        None => {
            *outcome.never_made.entry(plan_id.to_string()).or_default() += 1;
            return refuse(c, host, r, "this store never planned the plan", outcome);
        }
        Some(owner) if owner != host => {
            tracing::warn!(agent = %host, plan = %plan_id, %owner, "refused a record for another host's plan");
            return refuse(
                c,
                host,
                r,
                &format!("the plan is {owner}'s, not {host}'s"),
                outcome,
            );
        }
        Some(_) => {}
    }
    match &r.kind {
        RecordKind::PlanAccepted { plan_id } => {
            c.execute(
                "UPDATE plans SET state = 'accepted' WHERE id = ?1 AND state IN ('queued', 'sent')",
                [plan_id],
            )?;
        }
        RecordKind::Step(e) => {
            let Some(cell) = cells.get(c, &e.cell_id)? else {
                // The plan is ours, so its cells are: only a malformed record names
                // another. Kept out, and said.
                return refuse(
                    c,
                    host,
                    r,
                    &format!("the plan has no cell {}", e.cell_id),
                    outcome,
                );
            };
            let inserted: Option<i64> = c.insert_id(
                "INSERT OR IGNORE INTO steps (plan_id, step_index, attempt, state, kind, cell, repetition, host,
                 started_unix_ns, finished_unix_ns, exit_status, stderr_tail, error, warmup)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) ",
                "n",
                params![
                    e.plan_id,
                    e.step_index,
                    e.attempt,
                    e.state.as_str(),
                    e.kind,
                    cell,
                    e.repetition,
                    host,
                    e.started_unix_ns,
                    e.finished_unix_ns,
                    e.exit_status,
                    e.stderr_tail,
                    e.error,
                    warmup
                ],
            )?;
            let Some(step_row) = inserted else {
                return Ok(()); // already stored: a resend
            };
            c.execute_each(
                "INSERT INTO samples (step, metric, value, unit, histogram, missing) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                e.samples.iter().map(|s| {
                    let hist = (!s.histogram.is_empty()).then_some(s.histogram.as_slice());
                    let missing = (!s.missing.is_empty()).then_some(s.missing.as_str());
                    let value = missing.is_none().then_some(s.value);
                    SampleRow(step_row, &s.metric, value, &s.unit, hist, missing)
                }),
            )?;
            // Counted once its rows are in: a sample that breaks a key fails the record,
            // and its savepoint takes the step's row back out.
            outcome.steps_stored += 1;
            outcome.samples_stored += e.samples.len() as u64;
        }
        RecordKind::Provenance {
            plan_id,
            step_index,
            facts,
        } => {
            c.execute(
                "INSERT OR IGNORE INTO provenance (plan_id, seq, host, step_index, trigger, facts)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    plan_id,
                    r.seq as i64,
                    host,
                    step_index,
                    facts.trigger,
                    serde_json::to_string(facts)?
                ],
            )?;
        }
        RecordKind::PlanRefused { plan_id, reason } => {
            let n = c.execute(
                "UPDATE plans SET state = 'refused', error = ?2 WHERE id = ?1 AND state NOT IN ('done', 'cancelled', 'refused')",
                params![plan_id, reason],
            )?;
            if n > 0 {
                outcome.hosts_freed.push(HostName::from(host));
            }
            outcome.ended_plans.push(plan_id.to_string());
        }
        RecordKind::PlanFinished { plan_id, cancelled } => {
            let state = if *cancelled { "cancelled" } else { "done" };
            let n = c.execute(
                "UPDATE plans SET state = ?2 WHERE id = ?1 AND state NOT IN ('done', 'cancelled')",
                params![plan_id, state],
            )?;
            if n > 0 {
                // Adaptive repetition: the next round is decided here, in the transaction
                // that records this end, so it is decided exactly once (`rounds::next_round`).
                if !*cancelled {
                    if let Some(next) = super::rounds::next_round(c, plan_id)? {
                        queue_plan(c, &next.plan)?;
                        if next.ahead {
                            super::plans::put_ahead(c, &next.plan)?;
                        }
                    }
                }
                outcome.hosts_freed.push(HostName::from(host));
            }
            outcome.ended_plans.push(plan_id.to_string());
        }
    }
    Ok(())
}

/// A sample's row, as `execute_each` binds it.
pub(super) struct SampleRow<'a>(
    i64,
    &'a str,
    Option<f64>,
    &'a str,
    Option<&'a [u8]>,
    Option<&'a str>,
);

impl db::Params for SampleRow<'_> {
    fn values(&self) -> Vec<db::Value<'_>> {
        use db::ToValue;
        vec![
            self.0.to_value(),
            self.1.to_value(),
            self.2.to_value(),
            self.3.to_value(),
            self.4.to_value(),
            self.5.to_value(),
        ]
    }
}

/// How a run of step ends goes into `steps` on PostgreSQL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StepsBy {
    /// Keys drawn from the table's sequence, the rows copied in (`COPY`): the cheapest for
    /// the server (an `INSERT … ON CONFLICT` is a speculative insertion per row: 1.3× the
    /// server's time for the steps, BENCHMARKS.md), but a step end stored before (a record
    /// sent again after a reconnect) fails the whole `COPY`.
    Copy,
    /// `INSERT … ON CONFLICT DO NOTHING`: step ends stored before are skipped. For a batch
    /// whose `COPY` failed on a key already taken.
    Upsert,
}

/// PostgreSQL: a batch's records as `store_record` stores them, but each run of step
/// ends goes in as two statements (its steps, then their samples), not one round trip per
/// row: PostgreSQL is across a socket, and per-row statements stored some 7,000 samples/s
/// (BENCHMARKS.md). Records that are not step ends, and step ends that are refused, go
/// through `store_record` in their order.
#[allow(clippy::too_many_arguments)] // the writer's state, then the batch and how
pub(super) fn store_records_pg(
    c: &Conn,
    pg: &db::pg::PgConn,
    cells: &mut CellKeys,
    plans: &mut KnownPlans,
    host: &str,
    records: &[Record],
    how: StepsBy,
    outcome: &mut BatchOutcome,
) -> Result<()> {
    let mut run: Vec<(&platter_proto::model::StepEvent, i64, bool)> = Vec::new();
    for r in records {
        if let RecordKind::Step(e) = &r.kind {
            let known = plans
                .get(c, &e.plan_id)?
                .filter(|p| p.host == host)
                .map(|p| p.warmup.contains(&e.step_index));
            if let Some(warmup) = known {
                if let Some(cell) = cells.get(c, &e.cell_id)? {
                    run.push((e, cell, warmup));
                    continue;
                }
            }
        }
        insert_steps_pg(pg, host, &mut run, how, outcome)?;
        store_record(c, cells, plans, host, r, outcome)?;
    }
    insert_steps_pg(pg, host, &mut run, how, outcome)
}

/// Inserts a run of step ends (`StepsBy::Upsert`: a resent one is skipped, as `INSERT OR
/// IGNORE` does; `StepsBy::Copy`: a resent one fails the statement), then the samples of
/// those inserted, counting both in `outcome`; empties `run`.
pub(super) fn insert_steps_pg(
    pg: &db::pg::PgConn,
    host: &str,
    run: &mut Vec<(&platter_proto::model::StepEvent, i64, bool)>,
    how: StepsBy,
    outcome: &mut BatchOutcome,
) -> Result<()> {
    if run.is_empty() {
        return Ok(());
    }
    // A record twice in one run is stored once: the first is kept.
    let mut place: std::collections::HashMap<(&str, i64, i64, &str), usize> =
        std::collections::HashMap::with_capacity(run.len());
    for (i, (e, _, _)) in run.iter().enumerate() {
        let key = (
            e.plan_id.as_str(),
            i64::from(e.step_index),
            i64::from(e.attempt),
            e.state.as_str(),
        );
        place.entry(key).or_insert(i);
    }
    let mut firsts: Vec<usize> = place.values().copied().collect();
    firsts.sort_unstable();
    let columns = StepColumns::of(run, &firsts);
    let mut step_of: Vec<Option<i64>> = vec![None; run.len()];
    let inserted = match how {
        StepsBy::Copy => {
            let keys = copy_steps(pg, host, &columns)?;
            for (&i, &key) in firsts.iter().zip(&keys) {
                step_of[i] = Some(key);
            }
            keys.len()
        }
        StepsBy::Upsert => {
            let inserted = upsert_steps(pg, host, &columns)?;
            for row in &inserted {
                let key = (
                    row.try_get::<_, &str>("plan_id")?,
                    row.try_get::<_, i64>("step_index")?,
                    row.try_get::<_, i64>("attempt")?,
                    row.try_get::<_, &str>("state")?,
                );
                if let Some(&i) = place.get(&key) {
                    step_of[i] = Some(row.try_get("n")?);
                }
            }
            inserted.len()
        }
    };
    outcome.samples_stored += copy_samples(pg, run, &step_of)?;
    outcome.steps_stored += inserted as u64;
    run.clear();
    Ok(())
}

/// The step ends of a run to insert, column by column (PostgreSQL's arrays and `COPY`
/// rows are made from them), the first of each key only.
struct StepColumns<'a> {
    plan_id: Vec<&'a str>,
    index: Vec<i64>,
    attempt: Vec<i64>,
    state: Vec<&'a str>,
    kind: Vec<&'a str>,
    cell: Vec<i64>,
    repetition: Vec<i64>,
    started: Vec<i64>,
    finished: Vec<i64>,
    exit: Vec<i64>,
    stderr: Vec<&'a str>,
    error: Vec<&'a str>,
    warmup: Vec<i64>,
}

impl<'a> StepColumns<'a> {
    /// The columns of `run`'s rows at `firsts`, in that order.
    fn of(
        run: &[(&'a platter_proto::model::StepEvent, i64, bool)],
        firsts: &[usize],
    ) -> StepColumns<'a> {
        let n = firsts.len();
        let mut c = StepColumns {
            plan_id: Vec::with_capacity(n),
            index: Vec::with_capacity(n),
            attempt: Vec::with_capacity(n),
            state: Vec::with_capacity(n),
            kind: Vec::with_capacity(n),
            cell: Vec::with_capacity(n),
            repetition: Vec::with_capacity(n),
            started: Vec::with_capacity(n),
            finished: Vec::with_capacity(n),
            exit: Vec::with_capacity(n),
            stderr: Vec::with_capacity(n),
            error: Vec::with_capacity(n),
            warmup: Vec::with_capacity(n),
        };
        for &i in firsts {
            let (e, cell, warmup) = &run[i];
            c.plan_id.push(e.plan_id.as_str());
            c.index.push(i64::from(e.step_index));
            c.attempt.push(i64::from(e.attempt));
            c.state.push(e.state.as_str());
            c.kind.push(e.kind.as_str());
            c.cell.push(*cell);
            c.repetition.push(i64::from(e.repetition));
            c.started.push(e.started_unix_ns);
            c.finished.push(e.finished_unix_ns);
            c.exit.push(i64::from(e.exit_status));
            c.stderr.push(e.stderr_tail.as_str());
            c.error.push(e.error.as_str());
            c.warmup.push(i64::from(*warmup));
        }
        c
    }

    fn len(&self) -> usize {
        self.plan_id.len()
    }
}

/// `StepsBy::Copy`: every row copied in under a key drawn for it; the keys, in the rows'
/// order.
fn copy_steps(pg: &db::pg::PgConn, host: &str, c: &StepColumns<'_>) -> Result<Vec<i64>> {
    let n = c.len();
    // `nextval` per row: the keys are this writer's alone whatever other writers
    // and coordinators draw meanwhile. (The sequence of the identity column `n`,
    // named by PostgreSQL when the first migration made `steps`; the store's role
    // owns it, as it owns the tables.)
    let keys = pg.query_typed(
        "SELECT nextval('steps_n_seq') AS n FROM generate_series(1, $1::int8)",
        &[&(n as i64)],
    )?;
    let keys = keys
        .iter()
        .map(|row| row.try_get::<_, i64>("n"))
        .collect::<std::result::Result<Vec<i64>, _>>()?;
    debug_assert_eq!(keys.len(), n, "a key for every step end");
    let rows = (0..n).map(|j| -> [&(dyn ToSql + Sync); 15] {
        [
            &keys[j],
            &c.plan_id[j],
            &c.index[j],
            &c.attempt[j],
            &c.state[j],
            &c.kind[j],
            &c.cell[j],
            &c.repetition[j],
            &host,
            &c.started[j],
            &c.finished[j],
            &c.exit[j],
            &c.stderr[j],
            &c.error[j],
            &c.warmup[j],
        ]
    });
    pg.copy_in(
        "COPY steps (n, plan_id, step_index, attempt, state, kind, cell, repetition, host,
                     started_unix_ns, finished_unix_ns, exit_status, stderr_tail, error, warmup)
         FROM STDIN (FORMAT binary)",
        &[
            Type::INT8,
            Type::TEXT,
            Type::INT8,
            Type::INT8,
            Type::TEXT,
            Type::TEXT,
            Type::INT8,
            Type::INT8,
            Type::TEXT,
            Type::INT8,
            Type::INT8,
            Type::INT8,
            Type::TEXT,
            Type::TEXT,
            Type::INT8,
        ],
        rows,
    )?;
    Ok(keys)
}

/// `StepsBy::Upsert`: the rows not stored yet inserted; the inserted rows' `n, plan_id,
/// step_index, attempt, state`.
fn upsert_steps(
    pg: &db::pg::PgConn,
    host: &str,
    c: &StepColumns<'_>,
) -> Result<Vec<tokio_postgres::Row>> {
    let hosts = vec![host; c.len()];
    // Resent records (already stored, or being stored by another coordinator at
    // this moment: the `INSERT` waits for it) are skipped on the one key that says
    // so, not on every unique index of `steps` (`ON CONFLICT DO NOTHING` without a
    // target probes each of them once more per row: 1.3× the time). Any other
    // conflict (an end the step has already under another state) fails the agent's
    // savepoint, and its batch is stored record by record with `INSERT OR IGNORE`
    // (`commit`), as on SQLite.
    pg.query_typed(
        "INSERT INTO steps (plan_id, step_index, attempt, state, kind, cell, repetition, host,
                            started_unix_ns, finished_unix_ns, exit_status, stderr_tail, error, warmup)
         SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[], $4::text[], $5::text[], $6::int8[],
                              $7::int8[], $8::text[], $9::int8[], $10::int8[], $11::int8[], $12::text[],
                              $13::text[], $14::int8[])
         ON CONFLICT (plan_id, step_index, attempt, state) DO NOTHING
         RETURNING n, plan_id, step_index, attempt, state",
        &[
            &c.plan_id, &c.index, &c.attempt, &c.state, &c.kind, &c.cell, &c.repetition, &hosts,
            &c.started, &c.finished, &c.exit, &c.stderr, &c.error, &c.warmup,
        ],
    )
}

/// The samples of the run's steps this batch inserted (`step_of`, by the run's rows),
/// copied in; how many.
fn copy_samples(
    pg: &db::pg::PgConn,
    run: &[(&platter_proto::model::StepEvent, i64, bool)],
    step_of: &[Option<i64>],
) -> Result<u64> {
    // The samples of steps this statement inserted cannot be stored yet (their step's row
    // is new), so they are copied in without a conflict check: `COPY` took half the time
    // of the same rows through a staging table and `INSERT … ON CONFLICT DO NOTHING`
    // (BENCHMARKS.md). A record with two samples of one metric breaks the key and fails its
    // agent's savepoint, as it would fail an INSERT.
    let samples = run
        .iter()
        .zip(step_of)
        .filter_map(|((e, _, _), n)| Some((e, n.as_ref()?)))
        .flat_map(|(e, n)| e.samples.iter().map(move |s| (n, s)));
    let mut rows = samples
        .map(|(n, s)| -> [&(dyn ToSql + Sync); 6] {
            let gone = !s.missing.is_empty();
            [
                n,
                &s.metric,
                if gone { &NULL_F64 } else { &s.value },
                &s.unit,
                if s.histogram.is_empty() {
                    &NULL_BYTES
                } else {
                    &s.histogram
                },
                if gone { &s.missing } else { &NULL_TEXT },
            ]
        })
        .peekable();
    if rows.peek().is_none() {
        return Ok(0);
    }
    pg.copy_in(
        "COPY samples (step, metric, value, unit, histogram, missing) FROM STDIN (FORMAT binary)",
        &[
            Type::INT8,
            Type::TEXT,
            Type::FLOAT8,
            Type::TEXT,
            Type::BYTEA,
            Type::TEXT,
        ],
        rows,
    )
}

/// NULLs of the sample columns' types, for `COPY`.
pub(super) const NULL_F64: Option<f64> = None;
pub(super) const NULL_BYTES: Option<&[u8]> = None;
pub(super) const NULL_TEXT: Option<&str> = None;

/// Commits `batches` in one transaction. Each agent's batch is applied in a savepoint of
/// its own: a record that can never be stored (it breaks a constraint) does not fail the
/// other agents' batches. On PostgreSQL its step ends are copied in (`StepsBy::Copy`);
/// where one was stored before, the batch goes in again by `StepsBy::Upsert`. A batch
/// that still fails is then stored record by record, and the records at fault are refused
/// with the reason (`refused_records`, and the report counts their measurements as
/// missing) instead of being resent forever.
pub(super) fn commit(
    conn: &Conn,
    cells: &mut CellKeys,
    plans: &mut KnownPlans,
    batches: &[Batch],
    instance: &Instance,
) -> Result<Vec<BatchOutcome>> {
    let tx = conn.write_transaction()?;
    let mut outcomes = Vec::with_capacity(batches.len());
    for b in batches {
        if b.records.is_empty() {
            // A hello or an inventory: no record to fail alone, so no savepoint (two round
            // trips per agent on PostgreSQL when a fleet connects at once). Its failure
            // fails the commit, as it would after the savepoint.
            outcomes.push(BatchOutcome {
                acked_elsewhere: store_agent(&tx, b)?,
                ..BatchOutcome::default()
            });
            continue;
        }
        let mut outcome = BatchOutcome::default();
        let mut apply = |how: StepsBy, outcome: &mut BatchOutcome| {
            let sp = tx.savepoint()?;
            let applied = store_agent(&sp, b).and_then(|elsewhere| {
                outcome.acked_elsewhere = elsewhere;
                match sp.as_postgres() {
                    Some(pg) => {
                        store_records_pg(&sp, pg, cells, plans, &b.host, &b.records, how, outcome)
                    }
                    None => b
                        .records
                        .iter()
                        .try_for_each(|r| store_record(&sp, cells, plans, &b.host, r, outcome)),
                }
            });
            match applied {
                Ok(()) => sp.commit(),
                Err(e) => Err(e), // dropping `sp` rolls it back
            }
        };
        let whole = match apply(StepsBy::Copy, &mut outcome) {
            // A step's key taken: most likely a record sent again after a reconnect, which
            // the `INSERT` skips (a record at fault fails that too, and goes on below).
            Err(e) if is_a_step_stored_before(&e) => {
                outcome = BatchOutcome::default();
                apply(StepsBy::Upsert, &mut outcome)
            }
            other => other,
        };
        match whole {
            Ok(()) => {}
            Err(e) if is_the_records_fault(&e) => {
                tracing::warn!(agent = %b.host, error = %e, "a record of this batch cannot be stored; storing the others one by one");
                outcome = BatchOutcome {
                    one_by_one: true,
                    ..Default::default()
                };
                outcome.acked_elsewhere = store_agent(&tx, b)?;
                for r in &b.records {
                    let sp = tx.savepoint()?;
                    match store_record(&sp, cells, plans, &b.host, r, &mut outcome) {
                        Ok(()) => sp.commit()?,
                        Err(e) if is_the_records_fault(&e) => {
                            sp.rollback()?;
                            tracing::error!(agent = %b.host, seq = r.seq, error = %e, "record refused: it cannot be stored");
                            let reason = format!("cannot be stored: {e}");
                            refuse(&tx, &b.host, r, &reason, &mut outcome)?;
                            if let Some(failed) = failed_in_place_of(r, &reason) {
                                let sp = tx.savepoint()?;
                                // Best effort: the refusal itself is already kept.
                                let mut ignored = BatchOutcome::default();
                                match store_record(
                                    &sp,
                                    cells,
                                    plans,
                                    &b.host,
                                    &failed,
                                    &mut ignored,
                                ) {
                                    Ok(()) => {
                                        sp.commit()?;
                                        outcome.hosts_freed.extend(ignored.hosts_freed);
                                        outcome.ended_plans.extend(ignored.ended_plans);
                                        outcome.steps_stored += ignored.steps_stored;
                                    }
                                    Err(e) if is_the_records_fault(&e) => {}
                                    Err(e) => return Err(e),
                                }
                            }
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
            Err(e) => return Err(e),
        }
        outcomes.push(outcome);
    }
    let ended: Vec<&str> = outcomes
        .iter()
        .flat_map(|o| o.ended_plans.iter().map(String::as_str))
        .collect();
    finish_campaigns_if_ended(&tx, &ended)?;
    if outcomes.iter().any(|o| !o.hosts_freed.is_empty()) {
        notify(&tx, instance, Change::Plans)?;
    } else if batches.iter().any(|b| !b.records.is_empty()) {
        notify(&tx, instance, Change::Records)?;
    }
    tx.commit()?;
    Ok(outcomes)
}
