//! The coordinator's durable state in SQLite (WAL): campaigns, cells, plans, step events,
//! samples, agents. Records from agents go through one writer task that commits them in
//! batches, never a transaction per sample; a record is acked only after its commit.
//! Everything else (submissions, plan dispatch, reads) uses short transactions of its own.
//!
//! Reads (`read`: reports, status, agent lists) take a connection of their own from a small
//! pool, so a long report never holds up a dispatch or another read (WAL readers see a
//! snapshot and do not block writers). A commit that fails for a reason of the store's
//! (disk full, read-only, I/O) is kept as the store's `fault` until one succeeds again:
//! `status`, `watch` and `agents` show it.
//!
//! Two connections write: the writer's and the one behind `with`. Every write
//! transaction therefore begins IMMEDIATE (takes the write lock first, waiting up to the
//! busy timeout): a deferred one that read first and then wrote would fail at once with
//! "database is locked" whenever the other connection committed in between, since its
//! snapshot is then stale and waiting cannot help.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use platter_proto::inventory::Device;
use platter_proto::model::{Plan, Record, RecordKind};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use rusqlite_migration::{Migrations, M};
use tokio::sync::{mpsc, oneshot, watch};

use crate::planner::PlannedCampaign;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("database migration: {0}")]
    Migration(#[from] rusqlite_migration::Error),
    #[error("stored data is malformed: {0}")]
    Json(#[from] serde_json::Error),
    #[error("the store's writer has stopped")]
    WriterGone,
    /// The batch's transaction failed as a whole (the reason is the store's, not the
    /// records'): nothing of it was stored, and its senders retry.
    #[error("the store cannot commit: {0}")]
    Commit(String),
    #[error("no campaign {0}")]
    NoCampaign(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

fn migrations() -> Migrations<'static> {
    Migrations::new(vec![
        M::up(
            r#"
        CREATE TABLE campaigns (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            generation INTEGER NOT NULL,
            file_name TEXT NOT NULL,
            yaml TEXT NOT NULL,
            params TEXT NOT NULL,          -- JSON list of parameter names, matrix order
            repeat INTEGER NOT NULL,
            state TEXT NOT NULL,           -- running | done | cancelled
            submitted_unix_ms INTEGER NOT NULL,
            UNIQUE (content_hash, generation)
        );
        -- `n` is the compact key steps and samples refer to: integers in submission order
        -- keep their indexes append-mostly, which doubles the writer's throughput over
        -- the random 16-hex-digit cell ids.
        CREATE TABLE cells (
            n INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            campaign_id TEXT NOT NULL REFERENCES campaigns(id),
            host TEXT NOT NULL,
            idx INTEGER NOT NULL,
            params TEXT NOT NULL           -- JSON object, parameter -> value
        );
        CREATE INDEX cells_campaign ON cells (campaign_id);
        CREATE TABLE plans (
            id TEXT PRIMARY KEY,
            campaign_id TEXT NOT NULL REFERENCES campaigns(id),
            host TEXT NOT NULL,
            body TEXT NOT NULL,            -- JSON of the plan
            steps_total INTEGER NOT NULL,
            state TEXT NOT NULL,           -- queued | sent | accepted | done | cancelled | refused
            queued_seq INTEGER NOT NULL,
            error TEXT                     -- why the agent refused it
        );
        CREATE INDEX plans_host_state ON plans (host, state, queued_seq);
        CREATE INDEX plans_campaign ON plans (campaign_id);
        -- Rows are appended in arrival order; every index below grows at a handful of
        -- points (one per running plan), which keeps the writer fast.
        CREATE TABLE steps (
            n INTEGER PRIMARY KEY,
            plan_id TEXT NOT NULL,
            step_index INTEGER NOT NULL,
            attempt INTEGER NOT NULL,
            state TEXT NOT NULL,           -- started | succeeded | failed | skipped
            kind TEXT NOT NULL,
            cell INTEGER NOT NULL,         -- cells.n
            repetition INTEGER NOT NULL,
            host TEXT NOT NULL,
            started_unix_ns INTEGER NOT NULL,
            finished_unix_ns INTEGER NOT NULL,
            exit_status INTEGER NOT NULL,
            stderr_tail TEXT NOT NULL,
            error TEXT NOT NULL,
            UNIQUE (plan_id, step_index, attempt, state)
        );
        -- A step ends once: a second end record (a resend) is ignored, and so are its
        -- samples. Samples are therefore unique per (cell, repetition, metric).
        CREATE UNIQUE INDEX steps_one_end ON steps (plan_id, step_index) WHERE state != 'started';
        CREATE TABLE samples (
            step INTEGER NOT NULL REFERENCES steps(n),   -- the measure step's end record
            metric TEXT NOT NULL,
            value REAL,                    -- NULL when missing
            unit TEXT NOT NULL,
            histogram BLOB,
            missing TEXT,                  -- why the tool could not measure it (bonnie++ `+++++`)
            PRIMARY KEY (step, metric)
        ) WITHOUT ROWID;
        -- Samples with the step they came from, for reports and ad-hoc queries.
        CREATE VIEW sample_rows AS
            SELECT st.cell AS cell, st.repetition AS repetition, st.attempt AS attempt, st.plan_id AS plan_id,
                   st.host AS host, sa.metric AS metric, sa.value AS value, sa.unit AS unit, sa.histogram AS histogram,
                   sa.missing AS missing
            FROM samples sa JOIN steps st ON st.n = sa.step;
        CREATE TABLE agents (
            host TEXT PRIMARY KEY,
            boot_id TEXT NOT NULL,
            agent_version TEXT NOT NULL,
            last_seen_unix_ms INTEGER NOT NULL,
            last_seq INTEGER NOT NULL DEFAULT 0,
            devices TEXT NOT NULL DEFAULT '[]'   -- JSON: the inventory of the last hello
        );
        "#,
        ),
        M::up(
            r#"
        -- Operator-given labels of the last hello, JSON object (`--label rack=b12`).
        ALTER TABLE agents ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';
        "#,
        ),
        M::up(
            r#"
        -- A measure cut off by a stop of the agent runs again after its repetition's
        -- preparation ran again: those steps end once per attempt. A resend of an end is
        -- still ignored, and a measure step still ends once, so samples stay unique per
        -- (cell, repetition, metric).
        DROP INDEX steps_one_end;
        CREATE UNIQUE INDEX steps_one_end ON steps (plan_id, step_index, attempt) WHERE state != 'started';
        CREATE UNIQUE INDEX steps_one_measure ON steps (plan_id, step_index) WHERE state != 'started' AND kind = 'measure';
        "#,
        ),
        M::up(
            r#"
        -- The store's identity, random, made with the database. Campaign ids (and so plan
        -- and cell ids) include it: a new store never plans an id an agent already holds.
        CREATE TABLE store_identity (id TEXT NOT NULL);
        INSERT INTO store_identity (id) VALUES (lower(hex(randomblob(4))));
        -- Records this store refused (they belong to a plan it never made: another or a
        -- lost store's). Acked so the agent stops resending them, but never silently.
        CREATE TABLE refused_records (
            host TEXT NOT NULL,
            seq INTEGER NOT NULL,
            plan_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            reason TEXT NOT NULL,
            at_unix_ms INTEGER NOT NULL,
            PRIMARY KEY (host, seq, plan_id)
        ) WITHOUT ROWID;
        -- What a plan ran on (the agent's provenance snapshots), JSON facts per snapshot.
        -- Keyed by the record's sequence number, so a resend is stored once.
        CREATE TABLE provenance (
            plan_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            host TEXT NOT NULL,
            step_index INTEGER NOT NULL,
            trigger TEXT NOT NULL,
            facts TEXT NOT NULL,
            PRIMARY KEY (plan_id, seq)
        ) WITHOUT ROWID;
        "#,
        ),
        M::up(
            r#"
        -- Warm-up runs (`warmup:`) are stored like the others and kept out of every
        -- statistic: `sample_rows` leaves them out, `warmup_rows` has only them.
        ALTER TABLE steps ADD COLUMN warmup INTEGER NOT NULL DEFAULT 0;
        -- The plan's warm-up step indexes (JSON list), so the writer marks their steps.
        ALTER TABLE plans ADD COLUMN warmup_steps TEXT NOT NULL DEFAULT '[]';
        -- What planning a later round of adaptive repetition needs: the matrix point and
        -- the target device's path of each cell.
        ALTER TABLE cells ADD COLUMN point INTEGER;
        ALTER TABLE cells ADD COLUMN device TEXT;
        DROP VIEW sample_rows;
        CREATE VIEW sample_rows AS
            SELECT st.cell AS cell, st.repetition AS repetition, st.attempt AS attempt, st.plan_id AS plan_id,
                   st.host AS host, sa.metric AS metric, sa.value AS value, sa.unit AS unit, sa.histogram AS histogram,
                   sa.missing AS missing
            FROM samples sa JOIN steps st ON st.n = sa.step WHERE st.warmup = 0;
        CREATE VIEW warmup_rows AS
            SELECT st.cell AS cell, st.repetition AS repetition, st.attempt AS attempt, st.plan_id AS plan_id,
                   st.host AS host, sa.metric AS metric, sa.value AS value, sa.unit AS unit, sa.histogram AS histogram,
                   sa.missing AS missing
            FROM samples sa JOIN steps st ON st.n = sa.step WHERE st.warmup = 1;
        "#,
        ),
    ])
}

/// How long a write waits for the other connection's transaction to end.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

fn open_conn(path: &Path, busy_timeout: Duration) -> Result<Connection> {
    let mut conn = Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // WAL + synchronous=NORMAL is durable against process crashes; FULL also against power
    // loss, which is what an exactly-once promise to agents needs.
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // A 64 MiB page cache (negative = KiB): with the default 2 MiB the writer re-reads
    // index pages from the OS on every batch and stores half as many samples per second.
    conn.pragma_update(None, "cache_size", -65536)?;
    conn.busy_timeout(busy_timeout)?;
    migrations().to_latest(&mut conn)?;
    Ok(conn)
}

/// The id of the campaign `reference` names: its id, or else its name (the latest
/// campaign of that name), so `platter report quickstart` works as well as the id.
pub fn resolve_campaign(c: &Connection, reference: &str) -> Result<String> {
    c.prepare_cached(
        "SELECT id FROM campaigns WHERE id = ?1
         UNION ALL
         SELECT * FROM (SELECT id FROM campaigns WHERE name = ?1
                        ORDER BY submitted_unix_ms DESC, generation DESC LIMIT 1)
         LIMIT 1",
    )?
    .query_row([reference], |r| r.get(0))
    .optional()?
    .ok_or_else(|| StoreError::NoCampaign(reference.to_string()))
}

/// A connection for reads only, to a database `open_conn` already made and migrated.
fn open_reader(path: &Path) -> Result<Connection> {
    use rusqlite::OpenFlags;
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.pragma_update(None, "cache_size", -65536)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(conn)
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// What a committed batch of records changed, so the caller can ack and reschedule.
#[derive(Debug, Default)]
pub struct BatchOutcome {
    /// Hosts with a plan that just ended: they may take their next plan.
    pub hosts_freed: Vec<String>,
    /// Records refused (stored in `refused_records`, not in results), by plan id.
    pub refused: std::collections::BTreeMap<String, u32>,
    /// The refused records' sequence numbers and reasons, for the agent.
    pub refusals: Vec<(u64, String)>,
}

struct Batch {
    host: String,
    /// The agent's row from its hello, stored before its records. Hellos go through the
    /// writer so that a fleet reconnecting at once (a coordinator restart) shares commits
    /// instead of paying one fsync per agent (BENCHMARKS.md, fleet scale).
    hello: Option<AgentRow>,
    /// The agent's devices (JSON) when they changed while it was connected.
    inventory: Option<String>,
    records: Vec<Record>,
    done: oneshot::Sender<Result<BatchOutcome>>,
}

struct AgentRow {
    boot_id: String,
    version: String,
    /// JSON
    devices: String,
    /// JSON
    labels: String,
}

/// What a host should run: the plan it has (sent or accepted), or its next queued one.
enum Next {
    Active(Plan),
    Queued(String, Plan),
}

/// Why the store cannot commit, since when (the first failure of the episode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreFault {
    pub reason: String,
    pub since_unix_ms: i64,
}

/// The store's current fault, shared by the writer thread and the other writes.
#[derive(Default)]
struct Health(Mutex<Option<StoreFault>>);

impl Health {
    /// A write failed with `e`: starts an episode (logged once) or continues one.
    fn failed(&self, e: &StoreError) {
        let mut fault = self.0.lock().expect("health lock");
        if fault.is_none() {
            tracing::error!(error = %e, "the store cannot commit; agents' records wait, unacked, and are retried every second");
            *fault = Some(StoreFault {
                reason: reason(e),
                since_unix_ms: now_ms(),
            });
        }
    }

    /// A write committed: ends an episode.
    fn committed(&self) {
        let ended = self.0.lock().expect("health lock").take();
        if let Some(f) = ended {
            let secs = (now_ms() - f.since_unix_ms) as f64 / 1000.0;
            tracing::info!(after_s = format!("{secs:.1}"), was = %f.reason, "the store commits again");
        }
    }

    fn get(&self) -> Option<StoreFault> {
        self.0.lock().expect("health lock").clone()
    }
}

/// The database's own words for a failure ("database or disk is full"), without our
/// "database: " prefix.
pub fn reason(e: &StoreError) -> String {
    match e {
        StoreError::Sql(e) => e.to_string(),
        StoreError::Commit(r) => r.clone(),
        e => e.to_string(),
    }
}

/// Whether `e` is the store's own trouble (space, permissions, I/O, a lock held too long)
/// rather than a question it cannot answer (no such campaign) or bad data.
pub fn is_store_fault(e: &StoreError) -> bool {
    use rusqlite::ErrorCode::*;
    match e {
        StoreError::Sql(rusqlite::Error::SqliteFailure(f, _)) => matches!(
            f.code,
            DiskFull
                | ReadOnly
                | SystemIoFailure
                | CannotOpen
                | DatabaseBusy
                | DatabaseLocked
                | DatabaseCorrupt
                | NotADatabase
                | FileLockingProtocolFailed
                | OutOfMemory
        ),
        StoreError::Commit(_) => true,
        _ => false,
    }
}

/// Read connections kept for reuse; more are opened when all are in use.
const MAX_IDLE_READERS: usize = 4;

/// Handle to the store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    /// The store's identity (`store_identity`), part of every campaign id it plans.
    id: Arc<str>,
    path: Arc<Path>,
    conn: Arc<Mutex<Connection>>,
    /// Idle read connections (`read`).
    readers: Arc<Mutex<Vec<Connection>>>,
    health: Arc<Health>,
    writer: mpsc::Sender<Batch>,
    changed: watch::Sender<u64>,
}

impl Store {
    /// Opens (creating and migrating) the database and starts its writer on a thread of
    /// its own; the writer ends when the last `Store` handle is dropped.
    pub fn open(path: &Path) -> Result<Store> {
        Store::open_with(path, BUSY_TIMEOUT)
    }

    /// `open` with another busy timeout (tests that hold the lock use a short one).
    pub fn open_with(path: &Path, busy_timeout: Duration) -> Result<Store> {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let conn = open_conn(path, busy_timeout)?;
        let id: String = conn.query_row("SELECT id FROM store_identity", [], |r| r.get(0))?;
        let writer_conn = open_conn(path, busy_timeout)?;
        let (tx, rx) = mpsc::channel(1024);
        let (changed, _) = watch::channel(0u64);
        let health = Arc::new(Health::default());
        let store = Store {
            id: id.into(),
            path: path.into(),
            conn: Arc::new(Mutex::new(conn)),
            readers: Arc::new(Mutex::new(Vec::new())),
            health: health.clone(),
            writer: tx,
            changed: changed.clone(),
        };
        std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer_loop(writer_conn, rx, changed, &health))
            .map_err(|e| StoreError::Sql(rusqlite::Error::ToSqlConversionFailure(Box::new(e))))?;
        Ok(store)
    }

    /// The store's identity: random, made with the database.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Of `plan_ids`, those this store never planned.
    pub fn unknown_plans(&self, plan_ids: &[String]) -> Result<Vec<String>> {
        self.read(|c| {
            let mut known = c.prepare_cached("SELECT 1 FROM plans WHERE id = ?1")?;
            let mut unknown = Vec::new();
            for id in plan_ids {
                if !known.exists([id])? {
                    unknown.push(id.clone());
                }
            }
            Ok(unknown)
        })
    }

    /// Why the store cannot commit right now, if it cannot.
    pub fn fault(&self) -> Option<StoreFault> {
        self.health.get()
    }

    /// Subscribes to "something changed" notifications (a counter).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        let mut conn = self.conn.lock().expect("store lock");
        f(&mut conn)
    }

    /// `with` for a write transaction: its failure for the store's own reasons is the
    /// store's fault until a write commits again.
    fn write<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        let r = self.with(f);
        match &r {
            Ok(_) => self.health.committed(),
            Err(e) if is_store_fault(e) => self.health.failed(e),
            Err(_) => {}
        }
        r
    }

    /// Stores records durably; resolves once they are committed.
    pub async fn write_records(&self, host: &str, records: Vec<Record>) -> Result<BatchOutcome> {
        self.to_writer(host, None, None, records).await
    }

    /// Hands one batch to the writer and waits for its commit.
    async fn to_writer(
        &self,
        host: &str,
        hello: Option<AgentRow>,
        inventory: Option<String>,
        records: Vec<Record>,
    ) -> Result<BatchOutcome> {
        let (done, rx) = oneshot::channel();
        let batch = Batch {
            host: host.to_string(),
            hello,
            inventory,
            records,
            done,
        };
        self.writer
            .send(batch)
            .await
            .map_err(|_| StoreError::WriterGone)?;
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    /// An unfinished campaign with this content, if any.
    pub fn resumable(&self, content_hash: &str) -> Result<Option<String>> {
        self.read(|c| {
            Ok(c.query_row(
                "SELECT id FROM campaigns WHERE content_hash = ?1 AND state = 'running' ORDER BY generation DESC LIMIT 1",
                [content_hash],
                |r| r.get(0),
            )
            .optional()?)
        })
    }

    /// The generation a new campaign with this content gets (1 for the first).
    pub fn next_generation(&self, content_hash: &str) -> Result<u32> {
        self.with(|c| {
            let g: Option<u32> = c.query_row(
                "SELECT MAX(generation) FROM campaigns WHERE content_hash = ?1",
                [content_hash],
                |r| r.get(0),
            )?;
            Ok(g.unwrap_or(0) + 1)
        })
    }

    /// Stores a planned campaign and queues its plans, all or nothing.
    pub fn insert_campaign(&self, p: &PlannedCampaign, file_name: &str, yaml: &str) -> Result<()> {
        self.write(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            tx.execute(
                "INSERT INTO campaigns (id, name, content_hash, generation, file_name, yaml, params, repeat, state, submitted_unix_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'running', ?9)",
                params![
                    p.id,
                    p.name,
                    p.content_hash,
                    p.generation,
                    file_name,
                    yaml,
                    serde_json::to_string(&p.params)?,
                    p.repeat,
                    now_ms()
                ],
            )?;
            for cell in &p.cells {
                tx.execute(
                    "INSERT INTO cells (id, campaign_id, host, idx, params, point, device) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![cell.id, p.id, cell.host, cell.index as i64, serde_json::to_string(&cell.params)?, cell.point as i64, cell.device],
                )?;
            }
            for plan in &p.plans {
                queue_plan(&tx, plan)?;
            }
            tx.commit()?;
            Ok(())
        })?;
        self.bump();
        Ok(())
    }

    /// The plan a host is running (sent or accepted), else the next queued one, marked sent.
    /// Returns the plan and whether it was newly dispatched.
    #[cfg(test)]
    pub fn plan_for_host(&self, host: &str) -> Result<Option<(Plan, bool)>> {
        let mut r = self.plans_for_hosts(&[host.to_string()])?;
        Ok(r.pop().map(|(_, plan, new)| (plan, new)))
    }

    /// Each host's plan: the one it is running (sent or accepted), else its next queued
    /// one, marked sent (then `true`: newly dispatched). Hosts with nothing to run are left
    /// out. One transaction for all: a fan-out to a thousand hosts is one commit, not a
    /// thousand (BENCHMARKS.md, fleet scale).
    pub fn plans_for_hosts(&self, hosts: &[String]) -> Result<Vec<(String, Plan, bool)>> {
        if hosts.is_empty() {
            return Ok(Vec::new());
        }
        let r = self.write(|c| {
            // Most dispatches change nothing (the host runs a plan already, or has none
            // queued): they are answered by reads and take no write lock.
            let read = c.transaction()?;
            if let Some(out) = Self::dispatch_pass(&read, hosts, false)? {
                return Ok(out);
            }
            drop(read);
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let out = Self::dispatch_pass(&tx, hosts, true)?.expect("a marking pass answers");
            tx.commit()?;
            Ok(out)
        })?;
        if r.iter().any(|(_, _, new)| *new) {
            self.bump();
        }
        Ok(r)
    }

    /// Each host's plan: the one it runs (not new), else its next queued one, marked sent
    /// when `mark` (new). Without `mark`, None as soon as a host has a queued plan: the
    /// caller must mark it under the write lock.
    fn dispatch_pass(
        c: &Connection,
        hosts: &[String],
        mark: bool,
    ) -> Result<Option<Vec<(String, Plan, bool)>>> {
        let mut out = Vec::new();
        for host in hosts {
            match Self::next_plan(c, host)? {
                Some(Next::Active(plan)) => out.push((host.clone(), plan, false)),
                Some(Next::Queued(id, plan)) if mark => {
                    c.prepare_cached("UPDATE plans SET state = 'sent' WHERE id = ?1")?
                        .execute([&id])?;
                    out.push((host.clone(), plan, true));
                }
                Some(Next::Queued(..)) => return Ok(None),
                None => {}
            }
        }
        Ok(Some(out))
    }

    /// The plan `host` runs, else its next queued one; reads only.
    fn next_plan(c: &Connection, host: &str) -> Result<Option<Next>> {
        // Cached statements: a fan-out asks this once per host, and preparing them
        // anew was a third of its CPU (BENCHMARKS.md, fleet scale).
        let active: Option<String> = c
                .prepare_cached(
                    "SELECT body FROM plans WHERE host = ?1 AND state IN ('sent', 'accepted') ORDER BY queued_seq LIMIT 1",
                )?
                .query_row([host], |r| r.get(0))
                .optional()?;
        if let Some(body) = active {
            return Ok(Some(Next::Active(serde_json::from_str(&body)?)));
        }
        let next: Option<(String, String)> = c
                .prepare_cached(
                    "SELECT id, body FROM plans WHERE host = ?1 AND state = 'queued' ORDER BY queued_seq LIMIT 1",
                )?
                .query_row([host], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
        match next {
            Some((id, body)) => Ok(Some(Next::Queued(id, serde_json::from_str(&body)?))),
            None => Ok(None),
        }
    }

    /// Stores an agent's hello (boot id, version, inventory, labels); resolves once committed.
    pub async fn agent_seen(
        &self,
        host: &str,
        boot_id: &str,
        version: &str,
        devices: &[Device],
        labels: &[(String, String)],
    ) -> Result<()> {
        let labels: serde_json::Map<String, serde_json::Value> = labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone().into()))
            .collect();
        let row = AgentRow {
            boot_id: boot_id.to_string(),
            version: version.to_string(),
            devices: serde_json::to_string(devices)?,
            labels: serde_json::to_string(&labels)?,
        };
        self.to_writer(host, Some(row), None, Vec::new()).await?;
        Ok(())
    }

    /// Stores a connected agent's new device list; resolves once committed.
    pub async fn agent_devices(&self, host: &str, devices: &[Device]) -> Result<()> {
        let devices = serde_json::to_string(devices)?;
        self.to_writer(host, None, Some(devices), Vec::new())
            .await?;
        Ok(())
    }

    /// Every agent's labels from its last hello.
    pub fn labels(&self) -> Result<crate::spec::AgentLabels> {
        self.read(|c| {
            let mut stmt = c.prepare("SELECT host, labels FROM agents ORDER BY host")?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            rows.into_iter()
                .map(|(h, l)| Ok((h, serde_json::from_str(&l)?)))
                .collect()
        })
    }

    /// Every agent's devices from its last hello.
    pub fn inventories(&self) -> Result<crate::planner::Inventories> {
        self.read(|c| {
            let mut stmt = c.prepare("SELECT host, devices FROM agents")?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            rows.into_iter()
                .map(|(h, d)| Ok((h, serde_json::from_str(&d)?)))
                .collect()
        })
    }

    /// Marks a campaign cancelled; queued plans will not be sent. Returns the plans that
    /// agents hold now (they must be told to stop).
    pub fn cancel_campaign(&self, campaign_id: &str) -> Result<Vec<(String, String)>> {
        let r = self.write(|c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let n = tx.execute("UPDATE campaigns SET state = 'cancelled' WHERE id = ?1 AND state = 'running'", [campaign_id])?;
            if n == 0 {
                let exists: bool = tx.query_row("SELECT COUNT(*) > 0 FROM campaigns WHERE id = ?1", [campaign_id], |r| r.get(0))?;
                if !exists {
                    return Err(StoreError::NoCampaign(campaign_id.to_string()));
                }
            }
            let mut stmt = tx.prepare("SELECT id, host FROM plans WHERE campaign_id = ?1 AND state IN ('sent', 'accepted')")?;
            let held = stmt.query_map([campaign_id], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<Vec<_>>>()?;
            drop(stmt);
            // A plan sent but never accepted (it may never have arrived) no longer holds
            // its host: the agent is still told to cancel it, in case it holds it.
            tx.execute("UPDATE plans SET state = 'cancelled' WHERE campaign_id = ?1 AND state IN ('queued', 'sent')", [campaign_id])?;
            tx.commit()?;
            Ok(held)
        })?;
        self.bump();
        Ok(r)
    }

    pub fn campaign_state(&self, campaign_id: &str) -> Result<String> {
        self.read(|c| {
            c.prepare_cached("SELECT state FROM campaigns WHERE id = ?1")?
                .query_row([campaign_id], |r| r.get(0))
                .optional()?
                .ok_or_else(|| StoreError::NoCampaign(campaign_id.to_string()))
        })
    }

    /// Runs a read-only query on a read connection of its own (from a pool), so that a
    /// long read — a report over a million samples — holds up no other read or write.
    /// Blocking: from async code, call it inside `spawn_blocking`.
    pub fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let idle = self.readers.lock().expect("readers lock").pop();
        let conn = match idle {
            Some(c) => c,
            None => open_reader(&self.path)?,
        };
        let r = f(&conn);
        let mut readers = self.readers.lock().expect("readers lock");
        if readers.len() < MAX_IDLE_READERS {
            readers.push(conn);
        }
        r
    }
}

/// The single writer of records. Takes whatever batches are waiting, commits them in one
/// transaction, then answers each.
fn writer_loop(
    mut conn: Connection,
    mut rx: mpsc::Receiver<Batch>,
    changed: watch::Sender<u64>,
    health: &Health,
) {
    /// Upper bound on batches per transaction, to bound latency of the first ack.
    const MAX_BATCHES: usize = 256;
    let mut cells = CellKeys::default();
    let mut plans = KnownPlans::default();
    while let Some(first) = rx.blocking_recv() {
        let mut batches = vec![first];
        while batches.len() < MAX_BATCHES {
            match rx.try_recv() {
                Ok(b) => batches.push(b),
                Err(_) => break,
            }
        }
        match commit(&mut conn, &mut cells, &mut plans, &batches) {
            Ok(outcomes) => {
                health.committed();
                changed.send_modify(|n| *n += 1);
                for (b, o) in batches.into_iter().zip(outcomes) {
                    let _ = b.done.send(Ok(o));
                }
            }
            Err(e) => {
                // Logged once per episode by `health`; each attempt at debug level.
                tracing::debug!(error = %e, "storing records failed; they are retried");
                health.failed(&e);
                changed.send_modify(|n| *n += 1);
                let reason = reason(&e);
                for b in batches {
                    let _ = b.done.send(Err(StoreError::Commit(reason.clone())));
                }
            }
        }
    }
}

/// Queues `plan` after every plan queued so far.
fn queue_plan(c: &Connection, plan: &Plan) -> Result<()> {
    let seq: i64 = c
        .prepare_cached("SELECT COALESCE(MAX(queued_seq), 0) FROM plans")?
        .query_row([], |r| r.get(0))?;
    let warmup: Vec<u32> = plan
        .steps
        .iter()
        .filter(|s| s.warmup)
        .map(|s| s.index)
        .collect();
    c.prepare_cached(
        "INSERT OR IGNORE INTO plans (id, campaign_id, host, body, steps_total, state, queued_seq, warmup_steps)
         VALUES (?1, ?2, ?3, ?4, ?5, 'queued', ?6, ?7)",
    )?
    .execute(params![
        plan.id,
        plan.campaign_id,
        plan.host,
        serde_json::to_string(plan)?,
        plan.steps.len() as i64,
        seq + 1,
        serde_json::to_string(&warmup)?
    ])?;
    Ok(())
}

/// What the writer needs of a plan: its host, and which of its steps are warm-ups.
struct KnownPlan {
    host: String,
    warmup: std::collections::HashSet<u32>,
}

/// Plan id → what the writer needs of it, cached as first seen: plans never change.
#[derive(Default)]
struct KnownPlans(std::collections::HashMap<String, KnownPlan>);

impl KnownPlans {
    fn get(&mut self, c: &Connection, id: &str) -> Result<Option<&KnownPlan>> {
        if !self.0.contains_key(id) {
            let row: Option<(String, String)> = c
                .prepare_cached("SELECT host, warmup_steps FROM plans WHERE id = ?1")?
                .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let Some((host, warmup)) = row else {
                return Ok(None);
            };
            let warmup = serde_json::from_str(&warmup)?;
            self.0.insert(id.to_string(), KnownPlan { host, warmup });
        }
        Ok(self.0.get(id))
    }
}

fn plan_of(kind: &RecordKind) -> (&str, &'static str) {
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
struct CellKeys(std::collections::HashMap<String, i64>);

impl CellKeys {
    fn get(&mut self, c: &Connection, id: &str) -> Result<Option<i64>> {
        if let Some(n) = self.0.get(id) {
            return Ok(Some(*n));
        }
        let n: Option<i64> = c
            .query_row("SELECT n FROM cells WHERE id = ?1", [id], |r| r.get(0))
            .optional()?;
        if let Some(n) = n {
            self.0.insert(id.to_string(), n);
        }
        Ok(n)
    }
}

/// The campaign of `plan_id` has ended when none of its plans is left to run.
fn finish_campaign_if_ended(c: &Connection, plan_id: &str) -> Result<()> {
    c.execute(
        "UPDATE campaigns SET state = 'done' WHERE state = 'running'
           AND id = (SELECT campaign_id FROM plans WHERE id = ?1)
           AND NOT EXISTS (SELECT 1 FROM plans p WHERE p.campaign_id = campaigns.id
                           AND p.state NOT IN ('done', 'cancelled', 'refused'))",
        [plan_id],
    )?;
    Ok(())
}

/// Keeps a record out of the results, with why, in `refused_records`.
fn refuse(
    c: &Connection,
    host: &str,
    r: &Record,
    reason: &str,
    outcome: &mut BatchOutcome,
) -> Result<()> {
    let (plan_id, kind) = plan_of(&r.kind);
    c.prepare_cached(
        "INSERT OR IGNORE INTO refused_records (host, seq, plan_id, kind, reason, at_unix_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![host, r.seq as i64, plan_id, kind, reason, now_ms()])?;
    *outcome.refused.entry(plan_id.to_string()).or_default() += 1;
    outcome.refusals.push((r.seq, reason.to_string()));
    Ok(())
}

/// The end of a step the store refused, as that step failing with the reason: without
/// it the step would have no end, and the report would only count a measurement missing
/// without saying why.
fn failed_in_place_of(r: &Record, reason: &str) -> Option<Record> {
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
fn is_the_records_fault(e: &StoreError) -> bool {
    match e {
        StoreError::Sql(rusqlite::Error::SqliteFailure(f, _)) => {
            f.code == rusqlite::ErrorCode::ConstraintViolation
        }
        StoreError::Json(_) => true,
        _ => false,
    }
}

/// Stores the agent's row (hello, inventory) and how far its records go.
fn store_agent(c: &Connection, b: &Batch) -> Result<()> {
    if let Some(a) = &b.hello {
        c.prepare_cached(
            "INSERT INTO agents (host, boot_id, agent_version, last_seen_unix_ms, devices, labels) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (host) DO UPDATE SET boot_id = excluded.boot_id, agent_version = excluded.agent_version,
             last_seen_unix_ms = excluded.last_seen_unix_ms, devices = excluded.devices, labels = excluded.labels",
        )?
        .execute(params![b.host, a.boot_id, a.version, now_ms(), a.devices, a.labels])?;
    }
    if let Some(devices) = &b.inventory {
        c.prepare_cached("UPDATE agents SET devices = ?2 WHERE host = ?1")?
            .execute(params![b.host, devices])?;
    }
    let last_seq = b.records.iter().map(|r| r.seq).max().unwrap_or(0);
    c.prepare_cached(
        "UPDATE agents SET last_seq = MAX(last_seq, ?2), last_seen_unix_ms = ?3 WHERE host = ?1",
    )?
    .execute(params![b.host, last_seq as i64, now_ms()])?;
    Ok(())
}

/// Applies one record of `host`'s: a record of a plan this store never made, or of
/// another host's plan, is refused (an agent is confined to its own plans).
fn store_record(
    c: &Connection,
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
        None => return refuse(c, host, r, "this store never planned the plan", outcome),
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
            let inserted = c
                .prepare_cached(
                    "INSERT OR IGNORE INTO steps (plan_id, step_index, attempt, state, kind, cell, repetition, host,
                     started_unix_ns, finished_unix_ns, exit_status, stderr_tail, error, warmup)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
                )?
                .execute(params![
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
                ])?;
            if inserted == 0 {
                return Ok(()); // already stored: a resend
            }
            let step_row = c.last_insert_rowid();
            let mut sample = c.prepare_cached(
                "INSERT INTO samples (step, metric, value, unit, histogram, missing) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            for s in &e.samples {
                let hist = (!s.histogram.is_empty()).then_some(&s.histogram);
                let missing = (!s.missing.is_empty()).then_some(&s.missing);
                let value = missing.is_none().then_some(s.value);
                sample.execute(params![step_row, s.metric, value, s.unit, hist, missing])?;
            }
        }
        RecordKind::Provenance {
            plan_id,
            step_index,
            facts,
        } => {
            c.prepare_cached(
                "INSERT OR IGNORE INTO provenance (plan_id, seq, host, step_index, trigger, facts)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                plan_id,
                r.seq as i64,
                host,
                step_index,
                facts.trigger,
                serde_json::to_string(facts)?
            ])?;
        }
        RecordKind::PlanRefused { plan_id, reason } => {
            let n = c.execute(
                "UPDATE plans SET state = 'refused', error = ?2 WHERE id = ?1 AND state NOT IN ('done', 'cancelled', 'refused')",
                params![plan_id, reason],
            )?;
            if n > 0 {
                outcome.hosts_freed.push(host.to_string());
            }
            finish_campaign_if_ended(c, plan_id)?;
        }
        RecordKind::PlanFinished { plan_id, cancelled } => {
            let state = if *cancelled { "cancelled" } else { "done" };
            let n = c.execute(
                "UPDATE plans SET state = ?2 WHERE id = ?1 AND state NOT IN ('done', 'cancelled')",
                params![plan_id, state],
            )?;
            if n > 0 {
                // Adaptive repetition: the next round is decided here, in the transaction
                // that records this end, so it is decided exactly once (rounds.rs).
                if !*cancelled {
                    if let Some(next) = crate::rounds::next_round(c, plan_id)? {
                        queue_plan(c, &next)?;
                    }
                }
                outcome.hosts_freed.push(host.to_string());
            }
            finish_campaign_if_ended(c, plan_id)?;
        }
    }
    Ok(())
}

/// Commits `batches` in one transaction. Each agent's batch is applied in a savepoint of
/// its own: a record that can never be stored (it breaks a constraint) does not fail the
/// other agents' batches. Such a batch is then stored record by record, and the records
/// at fault are refused with the reason (`refused_records`, and the report counts their
/// measurements as missing) instead of being resent forever.
fn commit(
    conn: &mut Connection,
    cells: &mut CellKeys,
    plans: &mut KnownPlans,
    batches: &[Batch],
) -> Result<Vec<BatchOutcome>> {
    let mut tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut outcomes = Vec::with_capacity(batches.len());
    for b in batches {
        let mut outcome = BatchOutcome::default();
        let whole = {
            let sp = tx.savepoint()?;
            let applied = store_agent(&sp, b).and_then(|()| {
                b.records
                    .iter()
                    .try_for_each(|r| store_record(&sp, cells, plans, &b.host, r, &mut outcome))
            });
            match applied {
                Ok(()) => sp.commit().map_err(StoreError::from),
                Err(e) => Err(e), // dropping `sp` rolls it back
            }
        };
        match whole {
            Ok(()) => {}
            Err(e) if is_the_records_fault(&e) => {
                tracing::warn!(agent = %b.host, error = %e, "a record of this batch cannot be stored; storing the others one by one");
                outcome = BatchOutcome::default();
                store_agent(&tx, b)?;
                for r in &b.records {
                    let mut sp = tx.savepoint()?;
                    match store_record(&sp, cells, plans, &b.host, r, &mut outcome) {
                        Ok(()) => sp.commit()?,
                        Err(e) if is_the_records_fault(&e) => {
                            sp.rollback()?;
                            drop(sp);
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
    tx.commit()?;
    Ok(outcomes)
}

/// A one-cell campaign on `hosts` (comma-separated), for tests of the store and the hub.
#[cfg(test)]
pub(crate) fn test_campaign(hosts: &str, generation: u32) -> PlannedCampaign {
    let yaml =
        format!("name: t\nhosts: {{ names: [{hosts}] }}\nworkload: {{ command: {{ run: x }} }}\n");
    let c = crate::spec::parse("t.yaml", &yaml).unwrap();
    crate::planner::plan(&c, "", "test", generation, &Default::default()).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner;
    use platter_proto::model::{Sample, StepEvent, StepState};
    use tokio_util::sync::CancellationToken;

    fn end(seq: u64, plan: &Plan, step: u32, attempt: u32, value: f64) -> Record {
        let s = &plan.steps[step as usize];
        Record {
            seq,
            kind: RecordKind::Step(StepEvent {
                plan_id: plan.id.clone(),
                kind: "measure".into(),
                step_index: step,
                cell_id: s.cell_id.clone(),
                repetition: s.repetition,
                attempt,
                state: StepState::Succeeded,
                started_unix_ns: 0,
                finished_unix_ns: 0,
                exit_status: 0,
                stderr_tail: String::new(),
                error: String::new(),
                samples: vec![Sample {
                    metric: "wall".into(),
                    value,
                    unit: "s".into(),
                    histogram: Vec::new(),
                    missing: String::new(),
                }],
            }),
        }
    }

    /// Two agents' batches in one writer transaction: rc66 sends a record that breaks a
    /// constraint (two samples of one metric) and records for rcmonster's plan. Only
    /// those are refused; rc66's other records and rcmonster's own batch are stored.
    #[test]
    fn an_agent_is_confined_to_its_plans_and_a_bad_record_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let planned = test_campaign("rc66, rcmonster", 1);
        store.insert_campaign(&planned, "t.yaml", "").unwrap();
        let plan = |h: &str| planned.plans.iter().find(|p| p.host == h).unwrap();
        let measure = |p: &Plan| {
            p.steps
                .iter()
                .position(|s| matches!(s.kind, platter_proto::model::StepKind::Measure(_)))
                .unwrap() as u32
        };
        let (rc66, rcmonster) = (plan("rc66"), plan("rcmonster"));
        let mut doubled = end(2, rc66, measure(rc66), 1, 1.0);
        if let RecordKind::Step(e) = &mut doubled.kind {
            let again = e.samples[0].clone();
            e.samples.push(again);
        }
        let accepted = |seq, p: &Plan| Record {
            seq,
            kind: RecordKind::PlanAccepted {
                plan_id: p.id.clone(),
            },
        };
        let batch = |host: &str, records: Vec<Record>| Batch {
            host: host.into(),
            hello: None,
            inventory: None,
            records,
            done: oneshot::channel().0,
        };
        let batches = [
            batch(
                "rc66",
                vec![
                    accepted(1, rc66),
                    doubled,
                    // rc66's certificate, rcmonster's plan: its measurement and its end.
                    end(3, rcmonster, measure(rcmonster), 1, 66.0),
                    Record {
                        seq: 4,
                        kind: RecordKind::PlanFinished {
                            plan_id: rcmonster.id.clone(),
                            cancelled: false,
                        },
                    },
                ],
            ),
            batch(
                "rcmonster",
                vec![
                    accepted(1, rcmonster),
                    end(2, rcmonster, measure(rcmonster), 1, 7.0),
                ],
            ),
        ];
        let mut conn = open_conn(&dir.path().join("t.db"), BUSY_TIMEOUT).unwrap();
        let outcomes = commit(
            &mut conn,
            &mut CellKeys::default(),
            &mut KnownPlans::default(),
            &batches,
        )
        .expect("one agent's bad records do not fail the commit");
        assert_eq!(outcomes[0].refused.values().sum::<u32>(), 3);
        assert!(outcomes[1].refused.is_empty());
        let rows = |sql: &str| -> Vec<String> {
            let mut st = conn.prepare(sql).unwrap();
            st.query_map([], |r| r.get::<_, String>(0))
                .unwrap()
                .map(|r| r.unwrap())
                .collect()
        };
        assert_eq!(
            rows("SELECT host || ' ' || CAST(value AS TEXT) FROM sample_rows"),
            ["rcmonster 7.0"]
        );
        assert_eq!(
            rows("SELECT host || ' ' || state FROM plans ORDER BY host"),
            ["rc66 accepted", "rcmonster accepted"],
            "rc66 could not finish rcmonster's plan"
        );
        let reasons = rows("SELECT reason FROM refused_records ORDER BY seq");
        assert!(reasons[0].starts_with("cannot be stored: "), "{reasons:?}");
        assert_eq!(reasons[1..], ["the plan is rcmonster's, not rc66's"; 2]);
        // The agent is told which records and why (in its ack)…
        let told: Vec<u64> = outcomes[0].refusals.iter().map(|r| r.0).collect();
        assert_eq!(told, [2, 3, 4]);
        assert_eq!(outcomes[0].refusals[0].1, reasons[0]);
        // …and the step whose end could not be stored failed with that reason, so the
        // report says why its measurement is missing.
        assert_eq!(
            rows("SELECT host || ' ' || state || ' ' || error FROM steps WHERE state != 'started' ORDER BY host"),
            [
                format!(
                    "rc66 failed the coordinator's store refused this step's result: {}",
                    reasons[0]
                ),
                "rcmonster succeeded ".to_string()
            ]
        );
    }

    /// A campaign is found by id, or by name as the latest of that name.
    #[test]
    fn a_campaign_is_found_by_id_or_by_its_latest_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let (first, second) = (test_campaign("h", 1), test_campaign("h", 2));
        store.insert_campaign(&first, "t.yaml", "").unwrap();
        std::thread::sleep(Duration::from_millis(5));
        store.insert_campaign(&second, "t.yaml", "").unwrap();
        store
            .read(|c| {
                assert_eq!(resolve_campaign(c, &first.id)?, first.id);
                assert_eq!(resolve_campaign(c, "t")?, second.id);
                assert!(matches!(
                    resolve_campaign(c, "u"),
                    Err(StoreError::NoCampaign(n)) if n == "u"
                ));
                Ok(())
            })
            .unwrap();
    }

    /// A plan sent but never accepted (too large to arrive, or the agent went away) must
    /// not hold its host after a cancel.
    #[test]
    fn cancelling_a_plan_that_was_only_sent_frees_its_host() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let (first, second) = (test_campaign("h", 1), test_campaign("h", 2));
        store.insert_campaign(&first, "t.yaml", "").unwrap();
        store.insert_campaign(&second, "t.yaml", "").unwrap();
        let (sent, _) = store.plan_for_host("h").unwrap().unwrap();
        assert_eq!(sent.campaign_id, first.id);
        let held = store.cancel_campaign(&first.id).unwrap();
        assert_eq!(
            held,
            [(sent.id.to_string(), "h".to_string())],
            "the agent is still told"
        );
        let (next, new) = store.plan_for_host("h").unwrap().unwrap();
        assert_eq!((next.campaign_id.as_str(), new), (second.id.as_str(), true));
    }

    #[tokio::test]
    async fn resent_and_repeated_records_are_stored_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let c = crate::spec::parse(
            "t.yaml",
            "name: t\nhosts: { names: [h] }\nworkload: { command: { run: x } }\nrepeat: 2\n",
        )
        .unwrap();
        let planned = planner::plan(&c, "", "test", 1, &Default::default()).unwrap();
        store.insert_campaign(&planned, "t.yaml", "").unwrap();
        let plan = &planned.plans[0];
        let (dispatched, new) = store.plan_for_host("h").unwrap().unwrap();
        assert!(new);
        assert_eq!(&dispatched, plan);

        store
            .write_records("h", vec![end(1, plan, 0, 1, 1.0)])
            .await
            .unwrap();
        // The same record again (a resend after a lost ack), and another end of the same
        // measure step (which a correct agent never sends): neither adds a sample.
        store
            .write_records("h", vec![end(1, plan, 0, 1, 1.0), end(2, plan, 0, 2, 9.0)])
            .await
            .unwrap();
        store
            .write_records("h", vec![end(3, plan, 1, 1, 2.0)])
            .await
            .unwrap();
        let values: Vec<f64> = store
            .read(|c| {
                let mut s = c.prepare("SELECT value FROM sample_rows ORDER BY repetition")?;
                let v = s
                    .query_map([], |r| r.get(0))?
                    .collect::<rusqlite::Result<Vec<f64>>>()?;
                Ok(v)
            })
            .unwrap();
        assert_eq!(values, [1.0, 2.0]);

        let finished = Record {
            seq: 4,
            kind: RecordKind::PlanFinished {
                plan_id: plan.id.clone(),
                cancelled: false,
            },
        };
        let outcome = store
            .write_records("h", vec![finished.clone()])
            .await
            .unwrap();
        assert_eq!(outcome.hosts_freed, ["h"]);
        assert_eq!(store.campaign_state(&planned.id).unwrap(), "done");
        // A resent PlanFinished frees nothing twice.
        assert!(store
            .write_records("h", vec![finished])
            .await
            .unwrap()
            .hosts_freed
            .is_empty());
        assert!(store.plan_for_host("h").unwrap().is_none());
    }

    /// A preparation step that ran again (its measure was cut off) ends once per attempt;
    /// a resend of either end is still stored once.
    #[tokio::test]
    async fn a_step_run_again_ends_once_per_attempt() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let planned = test_campaign("h", 1);
        store.insert_campaign(&planned, "t.yaml", "").unwrap();
        let plan = &planned.plans[0];
        let prep = |seq, attempt| {
            let mut r = end(seq, plan, 0, attempt, 0.0);
            if let RecordKind::Step(e) = &mut r.kind {
                e.kind = "sync".into();
                e.samples.clear();
            }
            r
        };
        store
            .write_records("h", vec![prep(1, 1), prep(2, 2)])
            .await
            .unwrap();
        store
            .write_records("h", vec![prep(1, 1), prep(2, 2)])
            .await
            .unwrap();
        let attempts: Vec<u32> = store
            .read(|c| {
                let mut s =
                    c.prepare("SELECT attempt FROM steps WHERE step_index = 0 ORDER BY n")?;
                let v = s
                    .query_map([], |r| r.get(0))?
                    .collect::<rusqlite::Result<Vec<u32>>>()?;
                Ok(v)
            })
            .unwrap();
        assert_eq!(attempts, [1, 2]);
    }

    /// A dispatch that changes nothing (the host runs a plan already, or has none queued)
    /// is answered while another connection holds the write lock.
    #[test]
    fn a_dispatch_that_changes_nothing_takes_no_write_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let store = Store::open_with(&path, Duration::from_millis(50)).unwrap();
        store
            .insert_campaign(&test_campaign("h", 1), "t.yaml", "")
            .unwrap();
        let (plan, new) = store.plan_for_host("h").unwrap().unwrap();
        assert!(new);

        let locker = Connection::open(&path).unwrap();
        locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
        let (again, new) = store.plan_for_host("h").unwrap().unwrap();
        assert_eq!(
            (again, new),
            (plan.clone(), false),
            "the plan it runs, under the lock"
        );
        assert!(store.plan_for_host("idle").unwrap().is_none());
        // Marking a queued plan sent does need the lock: it waits, then gives up.
        locker.execute_batch("COMMIT").unwrap();
        store
            .insert_campaign(&test_campaign("h", 2), "t.yaml", "")
            .unwrap();
        store
            .with(|c| Ok(c.execute("UPDATE plans SET state = 'done' WHERE id = ?1", [&plan.id])?))
            .unwrap();
        locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
        assert!(store.plan_for_host("h").is_err(), "busy");
        locker.execute_batch("COMMIT").unwrap();
        assert!(
            store.plan_for_host("h").unwrap().unwrap().1,
            "sent once free"
        );
    }

    /// Dispatching (read the queue, then mark a plan sent) while the writer commits other
    /// agents' records: with deferred transactions the dispatch failed now and then with
    /// "database is locked" (its snapshot went stale) and the host sat idle for good.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dispatch_never_fails_while_the_writer_commits() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        const PLANS: u32 = 200;
        for generation in 1..=PLANS {
            store
                .insert_campaign(&test_campaign("h", generation), "t.yaml", "")
                .unwrap();
        }
        let stop = CancellationToken::new();
        let hammer = {
            let (store, stop) = (store.clone(), stop.clone());
            tokio::spawn(async move {
                let mut hellos = 0u64;
                while !stop.is_cancelled() {
                    store
                        .agent_seen("other", &format!("b{hellos}"), "v", &[], &[])
                        .await
                        .unwrap();
                    hellos += 1;
                }
                hellos
            })
        };
        for seq in 1..=u64::from(PLANS) {
            let (plan, new) = store
                .plan_for_host("h")
                .expect("dispatch while the writer commits")
                .expect("a queued plan");
            assert!(new);
            let finished = Record {
                seq,
                kind: RecordKind::PlanFinished {
                    plan_id: plan.id,
                    cancelled: false,
                },
            };
            store.write_records("h", vec![finished]).await.unwrap();
        }
        stop.cancel();
        assert!(hammer.await.unwrap() > 0, "the writer was busy meanwhile");
        assert!(store.plan_for_host("h").unwrap().is_none());
    }
}
