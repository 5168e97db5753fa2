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
//! A store may also hang rather than fail (PostgreSQL frozen, behind a dead switch, a lock
//! held too long): every PostgreSQL request waits at most the store's deadline, and a
//! watch thread commits an empty transaction every `WATCH_INTERVAL` (within
//! `PING_DEADLINE`), so a hang is a fault within seconds even while nothing else is asked.
//! While the store does not answer, calls fail at once (`StoreError::NotAnswering`) until
//! the watch is answered again.
//!
//! Two connections write: the writer's and the one behind `with`. Every write
//! transaction therefore begins IMMEDIATE (takes the write lock first, waiting up to the
//! busy timeout): a deferred one that read first and then wrote would fail at once with
//! "database is locked" whenever the other connection committed in between, since its
//! snapshot is then stale and waiting cannot help.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use platter_proto::inventory::Device;
use platter_proto::model::{Plan, Record, RecordKind};
use rusqlite::Connection;
use rusqlite_migration::{Migrations, M};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_postgres::types::{ToSql, Type};

use crate::db::{self, params, Conn, Location};
use crate::planner::PlannedCampaign;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Sql(#[from] rusqlite::Error),
    /// Not the error's `source`: its words are PostgreSQL's own, already in the message
    /// (tokio-postgres's would repeat them as "db error: FATAL: …").
    #[error("PostgreSQL: {}", pg_words(.0))]
    Pg(tokio_postgres::Error),
    #[error("stored data cannot be read: {0}")]
    Decode(String),
    #[error("the query returned no row")]
    NoRows,
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
    /// The database did not answer a request in time (frozen, unreachable, a lock held
    /// too long): the request was given up, and its connection with it.
    #[error("no answer within {} s ({what})", .after.as_secs_f64())]
    Timeout { what: &'static str, after: Duration },
    /// Not tried: the store is known not to answer (`Health`'s watch), so a call fails at
    /// once with that fault rather than wait out its deadline again.
    #[error("{}", not_answering_words(.0))]
    NotAnswering(StoreFault),
}

/// "the store is not answering since 10:42:07 UTC, 12 s ago: no answer within 3 s (…)".
fn not_answering_words(f: &StoreFault) -> String {
    format!(
        "the store is not answering since {}: {}",
        since_words(f.since_unix_ms),
        f.reason
    )
}

/// A moment in the past as a UTC clock time and how long ago it was: "10:42:07 UTC, 12 s ago".
pub fn since_words(unix_ms: i64) -> String {
    let ago = (now_ms() - unix_ms).max(0) as f64 / 1000.0;
    format!("{}, {ago:.0} s ago", since_clock(unix_ms))
}

/// A moment as the UTC clock time of its day: "10:42:07 UTC" (a fault is read while it
/// lasts, so the day goes without saying).
pub fn since_clock(unix_ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(unix_ms.div_euclid(1000))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!("{:02}:{:02}:{:02} UTC", t.hour(), t.minute(), t.second())
}

pub type Result<T> = std::result::Result<T, StoreError>;

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> StoreError {
        StoreError::Pg(e)
    }
}

/// PostgreSQL's own words for an error: its message (and detail) rather than tokio-postgres's
/// "db error".
pub(crate) fn pg_words(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => match d.detail() {
            Some(detail) => format!("{} ({detail})", d.message()),
            None => d.message().to_string(),
        },
        None => match std::error::Error::source(e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    }
}

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
        M::up(PRESENCE_SCHEMA),
    ])
}

/// Which coordinator holds which agent's stream, for coordinators sharing a store
/// (`crate::presence`); the same text on both engines.
pub(crate) const PRESENCE_SCHEMA: &str = r#"
-- Coordinators on this store, each process once (`instance` is its notification mark),
-- with the time of its last heartbeat: one silent for long is gone.
CREATE TABLE coordinators (
    instance TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    started_unix_ms BIGINT NOT NULL,
    seen_unix_ms BIGINT NOT NULL
);
-- The hosts with plans waiting to be sent, or sent but maybe not received (another
-- coordinator marked them sent on a stream that was already dead): what a coordinator
-- told of plans by another dispatches to, without a read per connected host.
CREATE INDEX plans_waiting ON plans (host) WHERE state IN ('queued', 'sent');
-- Each coordinator's own view of the agents it holds or lost: rows are written only by
-- their coordinator, so two never overwrite each other when an agent moves.
CREATE TABLE agent_links (
    coordinator TEXT NOT NULL,
    host TEXT NOT NULL,
    link TEXT NOT NULL,              -- connected | lost
    tools TEXT NOT NULL,             -- JSON: the tools the agent reported
    since_unix_ms BIGINT NOT NULL,
    PRIMARY KEY (coordinator, host)
);
"#;

/// How long a write waits for the other connection's transaction to end.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

fn open_conn(path: &Path, busy_timeout: Duration) -> Result<Conn> {
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
    // Statements are prepared once per connection and kept (`prepare_cached`).
    conn.set_prepared_statement_cache_capacity(64);
    Ok(Conn::sqlite(conn))
}

/// Brings the store at `location` to the latest schema; says what it did.
pub fn migrate(location: &Location) -> Result<String> {
    match location {
        Location::Sqlite(path) => {
            let c = open_conn(path, BUSY_TIMEOUT)?;
            let version: i64 = c.query_row("PRAGMA user_version", (), |r| r.get(0))?;
            Ok(format!("{location}: SQLite schema at version {version}"))
        }
        Location::Postgres(url) => {
            let rt = db::pg::PgRuntime::new()?;
            let c = db::pg::connect(url, rt.handle(), db::pg::DEFAULT_DEADLINE, None)?;
            let applied = db::pg::migrate(&c)?;
            let version = db::pg::MIGRATIONS.len();
            Ok(format!(
                "{location}: PostgreSQL schema at version {version} ({applied} migration(s) applied now)"
            ))
        }
    }
}

/// The id of the campaign `reference` names: its id, or else its name (the latest
/// campaign of that name), so `platter report quickstart` works as well as the id.
pub fn resolve_campaign(c: &Conn, reference: &str) -> Result<String> {
    c.query_opt(
        "SELECT id FROM campaigns WHERE id = ?1
         UNION ALL
         SELECT * FROM (SELECT id FROM campaigns WHERE name = ?1
                        ORDER BY submitted_unix_ms DESC, generation DESC LIMIT 1) AS latest
         LIMIT 1",
        [reference],
        |r| r.get(0),
    )?
    .ok_or_else(|| StoreError::NoCampaign(reference.to_string()))
}

/// A connection for reads only, to a database `open_conn` already made and migrated.
fn open_reader(path: &Path) -> Result<Conn> {
    use rusqlite::OpenFlags;
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.pragma_update(None, "cache_size", -65536)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(Conn::sqlite(conn))
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
    /// Of those, the records refused because this store never made their plan (an agent's
    /// journal from an older or deleted store), by plan id.
    pub never_made: std::collections::BTreeMap<String, u32>,
    /// The refused records' sequence numbers and reasons, for the agent.
    pub refusals: Vec<(u64, String)>,
    /// Plans that ended or were refused: their campaigns may have ended
    /// (`finish_campaigns_if_ended`, once the transaction's records are in).
    ended_plans: Vec<String>,
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
    /// The store does not answer at all (`Health::hung`), rather than refusing commits.
    pub not_answering: bool,
}

/// The store's current faults, by where they happened: a record writer (its index in
/// `Store::writers`) or `WRITES` (`Store::write`: submissions, dispatch and the rest).
/// With several writers, one that cannot commit (its connection, a lock) is a fault while
/// the others commit: each writer's fault ends with its own commit only (its agents'
/// batches are retried until then), so health does not flap between them. A fault of
/// `WRITES` ends with any commit, as nothing retries those writes by itself.
///
/// Apart from those, the store may not answer at all (`hung`): a request outlived its
/// deadline — PostgreSQL frozen, behind a dead switch, a lock held too long. Then every
/// call fails at once with that fault instead of waiting out its own deadline, and only
/// the store's watch (`watch_loop`), answered again, ends it.
#[derive(Default)]
struct Health {
    faults: Mutex<std::collections::HashMap<usize, StoreFault>>,
    hung: Mutex<Option<StoreFault>>,
}

/// `Health`'s key for the writes outside the record writers.
const WRITES: usize = usize::MAX;
/// `Health`'s key for the store's watch (`watch_loop`), which commits a transaction of its
/// own every second to see whether the store can.
const WATCH: usize = usize::MAX - 1;

impl Health {
    /// A write of `source` failed with `e`: starts an episode (logged once) or continues one.
    fn failed(&self, source: usize, e: &StoreError) {
        if matches!(e, StoreError::Timeout { .. }) {
            self.hung_on(e);
        }
        if matches!(e, StoreError::Timeout { .. } | StoreError::NotAnswering(_)) {
            // `hung` is the fault, and the watch ends it.
            return;
        }
        let mut faults = self.faults.lock().expect("health lock");
        if faults.is_empty() && self.hung().is_none() {
            tracing::error!(error = %e, "the store cannot commit; agents' records wait, unacked, and are retried every second");
        }
        faults.entry(source).or_insert_with(|| StoreFault {
            reason: reason(e),
            since_unix_ms: now_ms(),
            not_answering: false,
        });
    }

    /// A write of `source` committed: ends its fault (and that of `WRITES`), and the
    /// episode when no other is left.
    fn committed(&self, source: usize) {
        let mut faults = self.faults.lock().expect("health lock");
        if faults.is_empty() {
            return;
        }
        let ended = [faults.remove(&source), faults.remove(&WRITES)]
            .into_iter()
            .flatten()
            .min_by_key(|f| f.since_unix_ms);
        if let (Some(f), true) = (ended, faults.is_empty()) {
            let secs = (now_ms() - f.since_unix_ms) as f64 / 1000.0;
            tracing::info!(after_s = format!("{secs:.1}"), was = %f.reason, "the store commits again");
        }
    }

    /// Whether `source` has a fault not ended yet.
    fn has(&self, source: usize) -> bool {
        self.faults
            .lock()
            .expect("health lock")
            .contains_key(&source)
    }

    /// The oldest fault not ended yet.
    fn get(&self) -> Option<StoreFault> {
        let faults = self.faults.lock().expect("health lock");
        let hung = self.hung();
        faults
            .values()
            .chain(hung.as_ref())
            .min_by_key(|f| f.since_unix_ms)
            .cloned()
    }

    /// A request outlived its deadline (`e`): the store is not answering, from now until
    /// the watch is answered again. Logged once per episode.
    fn hung_on(&self, e: &StoreError) {
        let mut hung = self.hung.lock().expect("health lock");
        if hung.is_none() {
            tracing::error!(error = %e, "the store is not answering; calls fail at once until it answers again, agents' records wait unacked and are retried");
            *hung = Some(StoreFault {
                reason: reason(e),
                since_unix_ms: now_ms(),
                not_answering: true,
            });
        }
    }

    /// The watch was answered: the store answers again.
    fn answered(&self) {
        if let Some(f) = self.hung.lock().expect("health lock").take() {
            let secs = (now_ms() - f.since_unix_ms) as f64 / 1000.0;
            tracing::info!(after_s = format!("{secs:.1}"), was = %f.reason, "the store answers again");
        }
    }

    /// Since when and why the store is not answering, while it is not.
    fn hung(&self) -> Option<StoreFault> {
        self.hung.lock().expect("health lock").clone()
    }

    /// `Err(NotAnswering)` while the store is not answering: a call fails at once.
    fn answering(&self) -> Result<()> {
        match self.hung() {
            Some(f) => Err(StoreError::NotAnswering(f)),
            None => Ok(()),
        }
    }

    /// `r`, having noticed a request that outlived its deadline.
    fn noticed<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e @ StoreError::Timeout { .. }) = &r {
            self.hung_on(e);
        }
        r
    }
}

/// The database's own words for a failure ("database or disk is full"), without our
/// "database: " prefix.
pub fn reason(e: &StoreError) -> String {
    match e {
        StoreError::Sql(e) => e.to_string(),
        StoreError::Pg(e) => pg_words(e),
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
        // PostgreSQL: the connection is gone or failing, the server is short of
        // resources, shutting down, read-only or in recovery, or a transaction lost a
        // serialization race or a deadlock (trying again succeeds).
        StoreError::Pg(e) => match db::pg::sqlstate_class(e).as_deref() {
            None => true,
            Some(class) => {
                matches!(class, "08" | "53" | "57" | "58" | "40" | "XX")
                    || e.code() == Some(&tokio_postgres::error::SqlState::READ_ONLY_SQL_TRANSACTION)
            }
        },
        StoreError::Commit(_) | StoreError::Timeout { .. } | StoreError::NotAnswering(_) => true,
        _ => false,
    }
}

/// Read connections kept for reuse; more are opened when all are in use, up to
/// `MAX_READERS`.
const MAX_IDLE_READERS: usize = 4;
/// PostgreSQL read connections open at once, at most; a read waits for one beyond that.
/// Without a bound, a storm of hellos (10,000 agents failing over) opened a connection
/// per blocking thread, ran the server out of connections ("sorry, too many clients
/// already") and refused hundreds of hellos. Room for a few long reports (each holds one
/// for seconds) with status, hellos and dispatch going on beside them; two coordinators
/// with their writers and listeners stay well within PostgreSQL's default 100. SQLite's
/// readers are file handles: not bounded.
const MAX_READERS: usize = 24;

/// The read connections: idle ones, and how many are open (idle or in use).
#[derive(Default)]
struct Readers {
    idle: Vec<Conn>,
    open: usize,
}

/// Opens connections to the store's database.
#[derive(Clone)]
struct Opener {
    location: Location,
    busy_timeout: Duration,
    /// PostgreSQL: how long a request waits for the server's answer.
    deadline: Duration,
    pg: Option<Arc<db::pg::PgRuntime>>,
}

impl Opener {
    fn handle(&self) -> &tokio::runtime::Handle {
        self.pg
            .as_ref()
            .expect("a PostgreSQL store has its runtime")
            .handle()
    }

    /// A connection that writes (and, for SQLite, migrates).
    fn writer(&self) -> Result<Conn> {
        match &self.location {
            Location::Sqlite(path) => open_conn(path, self.busy_timeout),
            Location::Postgres(url) => {
                let c = db::pg::connect(url, self.handle(), self.deadline, None)?;
                Ok(Conn::postgres(c))
            }
        }
    }

    /// The watch's connection: asks nothing but whether the store can commit, and waits
    /// `PING_DEADLINE` for each answer (for SQLite, for the write lock).
    fn watcher(&self) -> Result<Conn> {
        match &self.location {
            Location::Sqlite(path) => {
                let conn = Connection::open(path)?;
                conn.busy_timeout(PING_DEADLINE)?;
                Ok(Conn::sqlite(conn))
            }
            Location::Postgres(url) => {
                let c = db::pg::connect(url, self.handle(), PING_DEADLINE, None)?;
                Ok(Conn::postgres(c))
            }
        }
    }

    fn reader(&self) -> Result<Conn> {
        match &self.location {
            Location::Sqlite(path) => open_reader(path),
            Location::Postgres(_) => self.writer(),
        }
    }

    /// PostgreSQL: a connection that listens for other coordinators' changes.
    fn listener(&self, tx: std::sync::mpsc::Sender<String>, channel: &str) -> Result<Conn> {
        let Location::Postgres(url) = &self.location else {
            unreachable!("only PostgreSQL stores are shared");
        };
        let c = db::pg::connect(url, self.handle(), self.deadline, Some(tx))?;
        c.batch(&format!("LISTEN {channel}"))?;
        Ok(Conn::postgres(c))
    }
}

/// What a coordinator tells the others sharing its PostgreSQL store (`NOTIFY`): `plans`
/// when plans were queued or cancelled (they may be for hosts connected elsewhere),
/// `records` when results were stored (a `watch` elsewhere shows them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Plans,
    Records,
}

/// Handle to the store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    /// The store's identity (`store_identity`), part of every campaign id it plans.
    id: Arc<str>,
    opener: Opener,
    conn: Arc<Mutex<Conn>>,
    /// Idle read connections (`read`).
    readers: Arc<(Mutex<Readers>, std::sync::Condvar)>,
    health: Arc<Health>,
    /// Transactions (the writers' commits, cancels) tried again after PostgreSQL failed
    /// them as a collision (`is_transient`): each cost a deadlock timeout. Tests read it.
    retried: Arc<std::sync::atomic::AtomicU64>,
    /// The writers' queues: one on SQLite, several on PostgreSQL; a host's batches
    /// always go to the same one (`writer_of`), so its records are stored in order.
    writers: Arc<[mpsc::Sender<Batch>]>,
    changed: watch::Sender<u64>,
    /// Bumped when another coordinator queued or cancelled plans (PostgreSQL only).
    remote_plans: watch::Sender<u64>,
    /// This process's mark on its notifications, so it ignores its own, and the channel
    /// they go on.
    instance: Arc<Instance>,
    /// Dropped with the last handle: the store's watch then ends.
    _watching: Arc<std::sync::mpsc::Sender<()>>,
}

/// Who notifies, on which channel: `platter_<store id>`, since channels are
/// database-wide and two stores may share a database in schemas of their own.
struct Instance {
    mark: String,
    channel: String,
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
        Store::open_engine(
            Location::Sqlite(path.to_path_buf()),
            busy_timeout,
            1,
            db::pg::DEFAULT_DEADLINE,
        )
    }

    /// Opens the store at `location`: an SQLite file, or a PostgreSQL database (migrated
    /// to the latest schema first, which several coordinators starting at once do in turn).
    pub fn open_at(location: &Location) -> Result<Store> {
        Store::open_with_writers(location, DEFAULT_PG_WRITERS)
    }

    /// `open_at` with `writers` writers on PostgreSQL (at least one; SQLite has one).
    pub fn open_with_writers(location: &Location, writers: usize) -> Result<Store> {
        Store::open_serving(location, writers, db::pg::DEFAULT_DEADLINE)
    }

    /// `open_with_writers`, each request to PostgreSQL waiting `deadline` for its answer.
    /// The first connection gives up sooner (`PING_DEADLINE`): a coordinator waiting for
    /// its store tries again every second (`server::open_store`).
    pub fn open_serving(location: &Location, writers: usize, deadline: Duration) -> Result<Store> {
        if let Location::Sqlite(path) = location {
            return Store::open(path);
        }
        Store::open_engine(location.clone(), BUSY_TIMEOUT, writers.max(1), deadline)
    }

    /// `writers`: 1 for SQLite (`open_with`), as many as asked for PostgreSQL.
    fn open_engine(
        location: Location,
        busy_timeout: Duration,
        writers: usize,
        deadline: Duration,
    ) -> Result<Store> {
        let pg = match location {
            Location::Postgres(_) => Some(Arc::new(db::pg::PgRuntime::new()?)),
            Location::Sqlite(_) => None,
        };
        let opener = Opener {
            location,
            busy_timeout,
            deadline,
            pg,
        };
        let conn = match &opener.location {
            Location::Postgres(_) => Opener {
                deadline: PING_DEADLINE.min(deadline),
                ..opener.clone()
            }
            .writer()?,
            Location::Sqlite(_) => opener.writer()?,
        };
        conn.set_deadline(deadline);
        if let Some(pg) = conn.as_postgres() {
            let applied = db::pg::migrate(pg)?;
            if applied > 0 {
                tracing::info!(migrations = applied, store = %opener.location, "migrated the PostgreSQL store");
            }
        }
        let id: String = conn.query_row("SELECT id FROM store_identity", (), |r| r.get(0))?;
        let (changed, _) = watch::channel(0u64);
        let (remote_plans, _) = watch::channel(0u64);
        let health = Arc::new(Health::default());
        let instance = Arc::new(Instance {
            mark: format!("{:016x}", rand::random::<u64>()),
            channel: format!("{}_{id}", db::pg::CHANNEL),
        });
        let retried = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let count = writers;
        let mut writers = Vec::with_capacity(count);
        for n in 0..count {
            let writer_conn = opener.writer()?;
            let (tx, rx) = mpsc::channel(1024);
            writers.push(tx);
            let w = Writer {
                me: n,
                opener: opener.clone(),
                changed: changed.clone(),
                health: health.clone(),
                instance: instance.clone(),
                retried: retried.clone(),
            };
            std::thread::Builder::new()
                .name(format!("store-writer-{n}"))
                .spawn(move || writer_loop(w, writer_conn, rx))
                .map_err(|e| StoreError::Commit(format!("starting the store's writer: {e}")))?;
        }
        let (watching, stop) = std::sync::mpsc::channel();
        {
            let (opener, health, changed) = (opener.clone(), health.clone(), changed.clone());
            std::thread::Builder::new()
                .name("store-watch".into())
                .spawn(move || watch_loop(opener, health, changed, stop))
                .map_err(|e| StoreError::Commit(format!("starting the store's watch: {e}")))?;
        }
        let store = Store {
            id: id.into(),
            _watching: Arc::new(watching),
            opener,
            conn: Arc::new(Mutex::new(conn)),
            readers: Arc::default(),
            health,
            retried,
            writers: writers.into(),
            changed,
            remote_plans,
            instance,
        };
        if store.opener.location.is_postgres() {
            store.listen();
        }
        Ok(store)
    }

    /// Where the store is.
    pub fn location(&self) -> &Location {
        &self.opener.location
    }

    /// PostgreSQL: follows the other coordinators' notifications on a thread of its own,
    /// reconnecting after a loss (and then treating everything as changed, since what was
    /// said meanwhile is lost). Ends with the last handle of the store.
    fn listen(&self) {
        let opener = self.opener.clone();
        let alive = Arc::downgrade(&self.health);
        let (changed, remote) = (self.changed.clone(), self.remote_plans.clone());
        let me = self.instance.clone();
        let _ = std::thread::Builder::new()
            .name("store-listen".into())
            .spawn(move || {
                let mut first = true;
                loop {
                    let (tx, rx) = std::sync::mpsc::channel();
                    let conn = match opener.listener(tx, &me.channel) {
                        Ok(c) => c,
                        Err(e) => {
                            tracing::debug!(error = %e, "listening for other coordinators failed; again in 1 s");
                            std::thread::sleep(Duration::from_secs(1));
                            if alive.strong_count() == 0 {
                                return;
                            }
                            continue;
                        }
                    };
                    if !first {
                        tracing::info!("listening for other coordinators again");
                    }
                    if !first {
                        changed.send_modify(|n| *n += 1);
                        remote.send_modify(|n| *n += 1);
                    }
                    first = false;
                    loop {
                        use std::sync::mpsc::RecvTimeoutError;
                        let payload = match rx.recv_timeout(Duration::from_millis(500)) {
                            Ok(p) => p,
                            Err(RecvTimeoutError::Timeout) => {
                                if conn.is_broken() {
                                    break;
                                }
                                if alive.strong_count() == 0 {
                                    return;
                                }
                                continue;
                            }
                            // The connection's task ended: it is gone.
                            Err(RecvTimeoutError::Disconnected) => break,
                        };
                        let (from, what) = payload.split_once(' ').unwrap_or(("", &payload));
                        if from == me.mark {
                            continue;
                        }
                        changed.send_modify(|n| *n += 1);
                        if what == "plans" {
                            remote.send_modify(|n| *n += 1);
                        }
                    }
                }
            });
    }

    /// This process's mark on the store (random per process): its notifications and its
    /// rows in `coordinators` and `agent_links`.
    pub fn instance(&self) -> &str {
        &self.instance.mark
    }

    /// The store's identity: random, made with the database.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Of `plan_ids`, those this store never planned.
    pub fn unknown_plans(&self, plan_ids: &[String]) -> Result<Vec<String>> {
        self.read(|c| {
            let mut unknown = Vec::new();
            for id in plan_ids {
                if !c.exists("SELECT 1 FROM plans WHERE id = ?1", [id])? {
                    unknown.push(id.clone());
                }
            }
            Ok(unknown)
        })
    }

    /// The hosts that have plans queued, or sent and not yet accepted.
    pub fn hosts_with_waiting_plans(&self) -> Result<std::collections::HashSet<String>> {
        self.read(|c| {
            let hosts = c.query_map(
                "SELECT DISTINCT host FROM plans WHERE state IN ('queued', 'sent')",
                (),
                |r| r.get(0),
            )?;
            Ok(hosts.into_iter().collect())
        })
    }

    /// Of `plan_ids`, those cancelled.
    pub fn cancelled_plans(
        &self,
        plan_ids: &[String],
    ) -> Result<std::collections::HashSet<String>> {
        self.read(|c| {
            let mut out = std::collections::HashSet::new();
            for id in plan_ids {
                if c.exists(
                    "SELECT 1 FROM plans WHERE id = ?1 AND state = 'cancelled'",
                    [id],
                )? {
                    out.insert(id.clone());
                }
            }
            Ok(out)
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

    /// Subscribes to "another coordinator queued or cancelled plans" (PostgreSQL only;
    /// never changes for SQLite).
    pub fn subscribe_remote_plans(&self) -> watch::Receiver<u64> {
        self.remote_plans.subscribe()
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// `f` on the store's connection for writes outside the record writers; at once
    /// `NotAnswering` while the store is not answering (also after waiting for the
    /// connection, which a call that found the store hung may have held until its
    /// deadline).
    fn with<T>(&self, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
        self.health.answering()?;
        let mut conn = self.conn.lock().expect("store lock");
        self.health.answering()?;
        if conn.is_broken() {
            *conn = self.health.noticed(self.opener.writer())?;
        }
        self.health.noticed(f(&conn))
    }

    /// `with` for a write transaction: its failure for the store's own reasons is the
    /// store's fault until a write commits again.
    pub(crate) fn write<T>(&self, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
        let r = self.with(f);
        match &r {
            Ok(_) => self.health.committed(WRITES),
            Err(e) if is_store_fault(e) => self.health.failed(WRITES, e),
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
        self.writers[writer_of(host, self.writers.len())]
            .send(batch)
            .await
            .map_err(|_| StoreError::WriterGone)?;
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    /// An unfinished campaign with this content, if any.
    pub fn resumable(&self, content_hash: &str) -> Result<Option<String>> {
        self.read(|c| {
            c.query_opt(
                "SELECT id FROM campaigns WHERE content_hash = ?1 AND state = 'running' ORDER BY generation DESC LIMIT 1",
                [content_hash],
                |r| r.get(0),
            )
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
            let tx = c.write_transaction()?;
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
            match tx.as_postgres() {
                Some(pg) => insert_cells_and_plans_pg(pg, p)?,
                None => {
                    for cell in &p.cells {
                        tx.execute(
                            "INSERT INTO cells (id, campaign_id, host, idx, params, point, device) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                            params![cell.id, p.id, cell.host, cell.index as i64, serde_json::to_string(&cell.params)?, cell.point as i64, cell.device],
                        )?;
                    }
                    for plan in &p.plans {
                        queue_plan(&tx, plan)?;
                    }
                }
            }
            self.notify(&tx, Change::Plans)?;
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
            let read = c.read_transaction()?;
            if let Some(out) = Self::dispatch_pass(&read, hosts, false)? {
                return Ok(out);
            }
            drop(read);
            let tx = c.write_transaction()?;
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
        c: &Conn,
        hosts: &[String],
        mark: bool,
    ) -> Result<Option<Vec<(String, Plan, bool)>>> {
        if let Some(pg) = c.as_postgres() {
            return Self::dispatch_pass_pg(pg, hosts, mark);
        }
        let mut out = Vec::new();
        for host in hosts {
            match Self::next_plan(c, host)? {
                Some(Next::Active(plan)) => out.push((host.clone(), plan, false)),
                Some(Next::Queued(id, plan)) if mark => {
                    c.execute("UPDATE plans SET state = 'sent' WHERE id = ?1", [&id])?;
                    out.push((host.clone(), plan, true));
                }
                Some(Next::Queued(..)) => return Ok(None),
                None => {}
            }
        }
        Ok(Some(out))
    }

    /// PostgreSQL: `dispatch_pass` in a few statements for all hosts at once, not a few
    /// round trips per host (a fan-out to 1,000 hosts took 1.6 s that way; BENCHMARKS.md).
    fn dispatch_pass_pg(
        pg: &db::pg::PgConn,
        hosts: &[String],
        mark: bool,
    ) -> Result<Option<Vec<(String, Plan, bool)>>> {
        let names: Vec<&str> = hosts.iter().map(String::as_str).collect();
        if mark {
            // Coordinators sharing a PostgreSQL store take turns per host, so a host runs
            // one plan at a time fleet-wide: the read below sees the plans another
            // coordinator's committed pass marked sent. Every pass takes its locks in the
            // order of their keys, so two passes over some of the same hosts wait for each
            // other rather than deadlock.
            pg.query_typed(
                "SELECT pg_advisory_xact_lock(k)
                   FROM (SELECT DISTINCT hashtext(h) AS k FROM unnest($1::text[]) AS h ORDER BY k) AS keys",
                &[&names],
            )?;
        }
        // Per host, the plan it runs, else its next queued one (false sorts first).
        let rows = pg.query_typed(
            "SELECT DISTINCT ON (host) host, id, state = 'queued', body FROM plans
              WHERE host = ANY($1::text[]) AND state IN ('sent', 'accepted', 'queued')
              ORDER BY host, state = 'queued', queued_seq",
            &[&names],
        )?;
        let mut next = std::collections::HashMap::with_capacity(rows.len());
        for row in &rows {
            let host: &str = row.try_get(0)?;
            let queued: bool = row.try_get(2)?;
            if queued && !mark {
                return Ok(None);
            }
            next.insert(
                host,
                (
                    row.try_get::<_, &str>(1)?,
                    queued,
                    row.try_get::<_, &str>(3)?,
                ),
            );
        }
        let mut out = Vec::with_capacity(next.len());
        let mut sent = Vec::new();
        for host in hosts {
            // A host named twice is answered once.
            let Some((id, queued, body)) = next.remove(host.as_str()) else {
                continue;
            };
            if queued {
                sent.push(id);
            }
            out.push((host.clone(), serde_json::from_str(body)?, queued));
        }
        if !sent.is_empty() {
            // Only plans still queued: a cancel through another coordinator (which takes
            // no host lock) may have committed since the read; such a plan stays
            // cancelled and is not sent.
            let marked: std::collections::HashSet<String> = pg
                .query_typed(
                    "UPDATE plans SET state = 'sent' WHERE id = ANY($1::text[]) AND state = 'queued' RETURNING id",
                    &[&sent],
                )?
                .iter()
                .map(|r| r.try_get(0))
                .collect::<std::result::Result<_, _>>()?;
            out.retain(|(_, plan, new): &(String, Plan, bool)| {
                !*new || marked.contains(plan.id.as_str())
            });
        }
        Ok(Some(out))
    }

    /// The plan `host` runs, else its next queued one; reads only.
    fn next_plan(c: &Conn, host: &str) -> Result<Option<Next>> {
        // Statements are cached per connection: a fan-out asks this once per host, and
        // preparing them anew was a third of its CPU (BENCHMARKS.md, fleet scale).
        let active: Option<String> = c.query_opt(
            "SELECT body FROM plans WHERE host = ?1 AND state IN ('sent', 'accepted') ORDER BY queued_seq LIMIT 1",
            [host],
            |r| r.get(0),
        )?;
        if let Some(body) = active {
            return Ok(Some(Next::Active(serde_json::from_str(&body)?)));
        }
        let next: Option<(String, String)> = c.query_opt(
            "SELECT id, body FROM plans WHERE host = ?1 AND state = 'queued' ORDER BY queued_seq LIMIT 1",
            [host],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
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
            let rows = c.query_map("SELECT host, labels FROM agents ORDER BY host", (), |r| {
                Ok((r.get::<String>(0)?, r.get::<String>(1)?))
            })?;
            rows.into_iter()
                .map(|(h, l)| Ok((h, serde_json::from_str(&l)?)))
                .collect()
        })
    }

    /// Every agent's devices from its last hello.
    pub fn inventories(&self) -> Result<crate::planner::Inventories> {
        self.read(|c| {
            let rows = c.query_map("SELECT host, devices FROM agents", (), |r| {
                Ok((r.get::<String>(0)?, r.get::<String>(1)?))
            })?;
            rows.into_iter()
                .map(|(h, d)| Ok((h, serde_json::from_str(&d)?)))
                .collect()
        })
    }

    /// Marks a campaign cancelled; queued plans will not be sent. Returns the plans that
    /// agents hold now (they must be told to stop).
    pub fn cancel_campaign(&self, campaign_id: &str) -> Result<Vec<(String, String)>> {
        // The campaign's row, then its plans'; a record writer ending one of its plans
        // locks them the other way round: PostgreSQL fails one of the two, and if it is
        // this one, it is tried again rather than failing the operator's cancel.
        let r = self.write(|c| {
            retrying_collisions(
                || self.cancel_once(c, campaign_id),
                |e| {
                    self.retried
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::debug!(error = %e, "cancelling collided with a writer; trying again");
                },
            )
        })?;
        self.bump();
        Ok(r)
    }

    /// One try of `cancel_campaign`, a transaction of its own.
    fn cancel_once(&self, c: &Conn, campaign_id: &str) -> Result<Vec<(String, String)>> {
        let tx = c.write_transaction()?;
        let n = tx.execute(
            "UPDATE campaigns SET state = 'cancelled' WHERE id = ?1 AND state = 'running'",
            [campaign_id],
        )?;
        if n == 0 {
            let exists: bool = tx.query_row(
                "SELECT COUNT(*) > 0 FROM campaigns WHERE id = ?1",
                [campaign_id],
                |r| r.get(0),
            )?;
            if !exists {
                return Err(StoreError::NoCampaign(campaign_id.to_string()));
            }
        }
        let held = tx.query_map(
            "SELECT id, host FROM plans WHERE campaign_id = ?1 AND state IN ('sent', 'accepted')",
            [campaign_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        // A plan sent but never accepted (it may never have arrived) no longer holds
        // its host: the agent is still told to cancel it, in case it holds it.
        tx.execute("UPDATE plans SET state = 'cancelled' WHERE campaign_id = ?1 AND state IN ('queued', 'sent')", [campaign_id])?;
        self.notify(&tx, Change::Plans)?;
        tx.commit()?;
        Ok(held)
    }

    pub fn campaign_state(&self, campaign_id: &str) -> Result<String> {
        self.read(|c| {
            c.query_opt(
                "SELECT state FROM campaigns WHERE id = ?1",
                [campaign_id],
                |r| r.get(0),
            )?
            .ok_or_else(|| StoreError::NoCampaign(campaign_id.to_string()))
        })
    }

    /// Runs a read-only query on a read connection of its own (from a pool), so that a
    /// long read — a report over a million samples — holds up no other read or write.
    /// Blocking: from async code, call it inside `spawn_blocking`.
    pub fn read<T>(&self, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
        self.health.answering()?;
        let (lock, freed) = &*self.readers;
        let mut readers = lock.lock().expect("readers lock");
        let idle = loop {
            match readers.idle.pop() {
                Some(c) if c.is_broken() => readers.open -= 1,
                Some(c) => break Some(c),
                None if readers.open < MAX_READERS || !self.location().is_postgres() => {
                    readers.open += 1;
                    break None;
                }
                None => readers = freed.wait(readers).expect("readers lock"),
            }
        };
        drop(readers);
        // Handed back (or its place given up) however `f` ends, a panic included.
        struct Lease<'a> {
            readers: &'a (Mutex<Readers>, std::sync::Condvar),
            conn: Option<Conn>,
        }
        impl Drop for Lease<'_> {
            fn drop(&mut self) {
                let (lock, freed) = self.readers;
                let mut readers = lock.lock().unwrap_or_else(|p| p.into_inner());
                match self.conn.take() {
                    Some(c) if !c.is_broken() && readers.idle.len() < MAX_IDLE_READERS => {
                        readers.idle.push(c)
                    }
                    _ => readers.open -= 1,
                }
                freed.notify_one();
            }
        }
        let mut lease = Lease {
            readers: &self.readers,
            conn: idle,
        };
        self.health.answering()?;
        if lease.conn.is_none() {
            lease.conn = Some(self.health.noticed(self.opener.reader())?);
        }
        self.health.noticed(f(lease.conn.as_ref().expect("leased")))
    }

    /// PostgreSQL: tells the other coordinators, when `tx` commits, what changed.
    fn notify(&self, tx: &Conn, what: Change) -> Result<()> {
        notify(tx, &self.instance, what)
    }
}

/// `Store::notify` for the writer.
fn notify(c: &Conn, instance: &Instance, what: Change) -> Result<()> {
    if c.is_postgres() {
        let what = match what {
            Change::Plans => "plans",
            Change::Records => "records",
        };
        c.execute(
            "SELECT pg_notify(?1, ?2)",
            params![instance.channel, format!("{} {what}", instance.mark)],
        )?;
    }
    Ok(())
}

/// Whether `e` is PostgreSQL undoing a transaction that collided with another (a deadlock
/// or a serialization failure, SQLSTATE class 40): the same transaction tried again can
/// commit.
pub(crate) fn is_transient(e: &StoreError) -> bool {
    matches!(e, StoreError::Pg(e) if db::pg::sqlstate_class(e).as_deref() == Some("40"))
}

/// Runs the transaction `f`, and again, up to 3 times in all, while it fails as a
/// deadlock's victim or a serialization failure (`is_transient`: PostgreSQL undid it whole,
/// so it can be tried again as it was); `again` hears of each such failure first.
pub(crate) fn retrying_collisions<T>(
    mut f: impl FnMut() -> Result<T>,
    mut again: impl FnMut(&StoreError),
) -> Result<T> {
    let mut tries = 0;
    loop {
        tries += 1;
        match f() {
            Err(e) if tries < 3 && is_transient(&e) => again(&e),
            r => return r,
        }
    }
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

/// What a writer shares with the store: its place among the writers (`Health`'s key) and
/// the store's own handles.
struct Writer {
    me: usize,
    opener: Opener,
    changed: watch::Sender<u64>,
    health: Arc<Health>,
    instance: Arc<Instance>,
    retried: Arc<std::sync::atomic::AtomicU64>,
}

/// A writer of records (one per `writer_of` shard). Takes whatever batches of its hosts
/// are waiting, commits them in one transaction, then answers each.
fn writer_loop(w: Writer, mut conn: Conn, mut rx: mpsc::Receiver<Batch>) {
    let Writer {
        me,
        opener,
        changed,
        health,
        instance,
        retried,
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
        // breaks the deadlock by failing one, which is tried again at once rather than
        // failing its agents' batches (and the store's health) for it.
        let committed = retrying_collisions(
            || commit(&conn, &mut cells, &mut plans, &batches, &instance),
            |e| {
                retried.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::debug!(error = %e, "storing records collided with another writer; trying again");
            },
        );
        match committed {
            Ok(outcomes) => {
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
const PROBE_WHEN_IDLE: Duration = Duration::from_secs(2);

enum Received {
    Batch(Batch),
    Nothing,
    Closed,
}

/// The next batch if one comes within `wait`. Polled: the writer is a thread of its own
/// and a SQLite store has no runtime to time a wait with, and this runs only while the
/// writer has a fault.
fn recv_within(rx: &mut mpsc::Receiver<Batch>, wait: Duration) -> Received {
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
fn probe(opener: &Opener, conn: &mut Conn) -> Result<()> {
    if conn.is_broken() {
        *conn = opener.writer()?;
    }
    let tx = conn.write_transaction()?;
    if conn.is_postgres() {
        conn.query_row("SELECT txid_current()", (), |r| r.get::<i64>(0))?;
    } else {
        conn.execute("UPDATE store_identity SET id = id", ())?;
    }
    tx.commit()
}

/// How often the store's watch asks whether the store can commit (a transaction id on
/// PostgreSQL, the write lock on SQLite: next to nothing).
const WATCH_INTERVAL: Duration = Duration::from_millis(500);

/// How long the watch waits for the answer before the store counts as not answering: a
/// hang shows in health within `WATCH_INTERVAL + PING_DEADLINE` (3 s; health is told at
/// once). Long enough that a loaded but working server is not taken for a hung one; a
/// coordinator's first connection waits as long (`Store::open_serving`).
pub const PING_DEADLINE: Duration = Duration::from_millis(2500);

/// The store's watch, on a thread of its own: every `WATCH_INTERVAL`, a transaction that
/// commits nothing (`ping`) on a connection of its own. Without it a store that hangs
/// while nothing is asked of it — PostgreSQL frozen between two batches — would look
/// healthy until the next call waited out its deadline; and it is what ends a `hung`
/// episode, so that calls, failing at once meanwhile, are tried again. Ends with the last
/// handle of the store (`stop` disconnected).
fn watch_loop(
    opener: Opener,
    health: Arc<Health>,
    changed: watch::Sender<u64>,
    stop: std::sync::mpsc::Receiver<()>,
) {
    let mut conn = None;
    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(WATCH_INTERVAL) {
        let before = health.get();
        match ping(&opener, &mut conn) {
            Ok(()) => {
                health.answered();
                health.committed(WATCH);
            }
            Err(e) if is_store_fault(&e) => health.failed(WATCH, &e),
            Err(e) => tracing::debug!(error = %e, "the store's watch failed"),
        }
        if health.get() != before {
            changed.send_modify(|n| *n += 1);
        }
    }
}

/// Whether the store can commit now, waiting `PING_DEADLINE` at most: PostgreSQL commits
/// a transaction that only takes a transaction id (`probe`'s), SQLite takes the write lock
/// and lets it go (`BEGIN IMMEDIATE`, which waits for another process holding it, and
/// writes nothing).
fn ping(opener: &Opener, conn: &mut Option<Conn>) -> Result<()> {
    if conn.as_ref().is_none_or(Conn::is_broken) {
        *conn = None;
        // A connection slow to open (a loaded server forks a backend for it) is a fault,
        // but not a store that does not answer: only a request on an open connection that
        // outlives its deadline makes calls fail at once (`Health::hung_on`).
        let opened = opener.watcher().map_err(|e| match e {
            StoreError::Timeout { .. } => StoreError::Commit(e.to_string()),
            e => e,
        });
        *conn = Some(opened?);
    }
    let c = conn.as_ref().expect("just opened");
    if c.is_postgres() {
        let tx = c.write_transaction()?;
        c.query_row("SELECT txid_current()", (), |r| r.get::<i64>(0))?;
        tx.commit()
    } else {
        c.batch("BEGIN IMMEDIATE; ROLLBACK")
    }
}

/// The indexes of `plan`'s warm-up steps (stored with the plan, so the writer marks
/// their steps).
fn warmup_steps(plan: &Plan) -> Vec<u32> {
    plan.steps
        .iter()
        .filter(|s| s.warmup)
        .map(|s| s.index)
        .collect()
}

/// Queues `plan` after every plan queued so far.
pub(crate) fn queue_plan(c: &Conn, plan: &Plan) -> Result<()> {
    let seq: i64 = c.query_row("SELECT COALESCE(MAX(queued_seq), 0) FROM plans", (), |r| {
        r.get(0)
    })?;
    let warmup = warmup_steps(plan);
    c.execute(
        "INSERT OR IGNORE INTO plans (id, campaign_id, host, body, steps_total, state, queued_seq, warmup_steps)
         VALUES (?1, ?2, ?3, ?4, ?5, 'queued', ?6, ?7)",
        params![
        plan.id,
        plan.campaign_id,
        plan.host,
        serde_json::to_string(plan)?,
        plan.steps.len() as i64,
        seq + 1,
        serde_json::to_string(&warmup)?
        ],
    )?;
    Ok(())
}

/// PostgreSQL: a submitted campaign's cells and plans as two statements (arrays
/// `unnest`ed), not two or three round trips per plan: a campaign for 1,000 hosts is
/// stored before its fan-out starts. Plans are queued after every plan queued so far, in
/// their order, as `queue_plan` queues them one by one.
fn insert_cells_and_plans_pg(pg: &db::pg::PgConn, p: &PlannedCampaign) -> Result<()> {
    let mut params = Vec::with_capacity(p.cells.len());
    for cell in &p.cells {
        params.push(serde_json::to_string(&cell.params)?);
    }
    let ids: Vec<&str> = p.cells.iter().map(|c| c.id.as_str()).collect();
    let hosts: Vec<&str> = p.cells.iter().map(|c| c.host.as_str()).collect();
    let idx: Vec<i64> = p.cells.iter().map(|c| c.index as i64).collect();
    let points: Vec<i64> = p.cells.iter().map(|c| c.point as i64).collect();
    let devices: Vec<Option<&str>> = p.cells.iter().map(|c| c.device.as_deref()).collect();
    pg.query_typed(
        "INSERT INTO cells (id, campaign_id, host, idx, params, point, device)
         SELECT c.id, $2, c.host, c.idx, c.params, c.point, c.device
           FROM unnest($1::text[], $3::text[], $4::int8[], $5::text[], $6::int8[], $7::text[])
                AS c (id, host, idx, params, point, device)",
        &[
            &ids,
            &p.id.as_str(),
            &hosts,
            &idx,
            &params,
            &points,
            &devices,
        ],
    )?;
    let (mut bodies, mut warmups) = (Vec::new(), Vec::new());
    for plan in &p.plans {
        bodies.push(serde_json::to_string(plan)?);
        warmups.push(serde_json::to_string(&warmup_steps(plan))?);
    }
    let ids: Vec<&str> = p.plans.iter().map(|pl| pl.id.as_str()).collect();
    let campaigns: Vec<&str> = p.plans.iter().map(|pl| pl.campaign_id.as_str()).collect();
    let hosts: Vec<&str> = p.plans.iter().map(|pl| pl.host.as_str()).collect();
    let steps: Vec<i64> = p.plans.iter().map(|pl| pl.steps.len() as i64).collect();
    pg.query_typed(
        "INSERT INTO plans (id, campaign_id, host, body, steps_total, state, queued_seq, warmup_steps)
         SELECT q.id, q.campaign_id, q.host, q.body, q.steps_total, 'queued',
                (SELECT COALESCE(MAX(queued_seq), 0) FROM plans) + q.k, q.warmup
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[], $6::text[])
                WITH ORDINALITY AS q (id, campaign_id, host, body, steps_total, warmup, k)
         ON CONFLICT DO NOTHING",
        &[&ids, &campaigns, &hosts, &bodies, &steps, &warmups],
    )?;
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
    fn get(&mut self, c: &Conn, id: &str) -> Result<Option<&KnownPlan>> {
        if !self.0.contains_key(id) {
            let row: Option<(String, String)> = c.query_opt(
                "SELECT host, warmup_steps FROM plans WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
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
    fn get(&mut self, c: &Conn, id: &str) -> Result<Option<i64>> {
        if let Some(n) = self.0.get(id) {
            return Ok(Some(*n));
        }
        let n: Option<i64> =
            c.query_opt("SELECT n FROM cells WHERE id = ?1", [id], |r| r.get(0))?;
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
fn finish_campaigns_if_ended(c: &Conn, plans: &[&str]) -> Result<()> {
    if plans.is_empty() {
        return Ok(());
    }
    let mut campaigns = std::collections::BTreeSet::new();
    for plan_id in plans {
        let campaign: Option<String> = c.query_opt(
            "SELECT campaign_id FROM plans WHERE id = ?1",
            [*plan_id],
            |r| r.get(0),
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
fn refuse(
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
        // Integrity constraint violation, or data that does not fit (numeric out of
        // range, bad text encoding).
        StoreError::Pg(e) => matches!(db::pg::sqlstate_class(e).as_deref(), Some("23" | "22")),
        StoreError::Json(_) | StoreError::Decode(_) => true,
        _ => false,
    }
}

/// Stores the agent's row (hello, inventory) and how far its records go.
fn store_agent(c: &Conn, b: &Batch) -> Result<()> {
    if let Some(a) = &b.hello {
        c.execute(
            "INSERT INTO agents (host, boot_id, agent_version, last_seen_unix_ms, devices, labels) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (host) DO UPDATE SET boot_id = excluded.boot_id, agent_version = excluded.agent_version,
             last_seen_unix_ms = excluded.last_seen_unix_ms, devices = excluded.devices, labels = excluded.labels",
            params![b.host, a.boot_id, a.version, now_ms(), a.devices, a.labels],
        )?;
    }
    if let Some(devices) = &b.inventory {
        c.execute(
            "UPDATE agents SET devices = ?2 WHERE host = ?1",
            params![b.host, devices],
        )?;
    }
    if b.records.is_empty() && b.hello.is_some() {
        // The hello set when it was seen; there is no record to count.
        return Ok(());
    }
    let last_seq = b.records.iter().map(|r| r.seq).max().unwrap_or(0);
    c.execute(
        "UPDATE agents SET last_seq = CASE WHEN last_seq > ?2 THEN last_seq ELSE ?2 END, last_seen_unix_ms = ?3 WHERE host = ?1",
        params![b.host, last_seq as i64, now_ms()],
    )?;
    Ok(())
}

/// Applies one record of `host`'s: a record of a plan this store never made, or of
/// another host's plan, is refused (an agent is confined to its own plans).
fn store_record(
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
                outcome.hosts_freed.push(host.to_string());
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
                // that records this end, so it is decided exactly once (rounds.rs).
                if !*cancelled {
                    if let Some(next) = crate::rounds::next_round(c, plan_id)? {
                        queue_plan(c, &next)?;
                    }
                }
                outcome.hosts_freed.push(host.to_string());
            }
            outcome.ended_plans.push(plan_id.to_string());
        }
    }
    Ok(())
}

/// A sample's row, as `execute_each` binds it.
struct SampleRow<'a>(
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

/// PostgreSQL: a batch's records as `store_record` stores them, but each run of step
/// ends goes in as two statements (its steps, then their samples, as arrays `unnest`ed),
/// not one round trip per row: PostgreSQL is across a socket, and per-row statements
/// stored some 7,000 samples/s (BENCHMARKS.md). Records that are not step ends, and step
/// ends that are refused, go through `store_record` in their order.
fn store_records_pg(
    c: &Conn,
    pg: &db::pg::PgConn,
    cells: &mut CellKeys,
    plans: &mut KnownPlans,
    host: &str,
    records: &[Record],
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
        insert_steps_pg(pg, host, &mut run)?;
        store_record(c, cells, plans, host, r, outcome)?;
    }
    insert_steps_pg(pg, host, &mut run)
}

/// Inserts a run of step ends (a resent one is skipped, as `INSERT OR IGNORE` does), then
/// the samples of those inserted; empties `run`.
fn insert_steps_pg(
    pg: &db::pg::PgConn,
    host: &str,
    run: &mut Vec<(&platter_proto::model::StepEvent, i64, bool)>,
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
    let n = firsts.len();
    let (mut plan_id, mut index, mut attempt, mut state, mut kind) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut cell, mut repetition, mut started, mut finished, mut exit) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut stderr, mut error, mut warmup) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for &i in &firsts {
        let (e, c, w) = &run[i];
        plan_id.push(e.plan_id.as_str());
        index.push(i64::from(e.step_index));
        attempt.push(i64::from(e.attempt));
        state.push(e.state.as_str());
        kind.push(e.kind.as_str());
        cell.push(*c);
        repetition.push(i64::from(e.repetition));
        started.push(e.started_unix_ns);
        finished.push(e.finished_unix_ns);
        exit.push(i64::from(e.exit_status));
        stderr.push(e.stderr_tail.as_str());
        error.push(e.error.as_str());
        warmup.push(i64::from(*w));
    }
    let hosts = vec![host; n];
    // Resent records (already stored) are skipped on the one key that says so, not on
    // every unique index of `steps` (`ON CONFLICT DO NOTHING` without a target probes each
    // of them once more per row: 1.3× the time). Any other conflict (an end the step has
    // already under another state; another coordinator storing the same record at this
    // moment) fails the agent's savepoint, and its batch is stored record by record with
    // `INSERT OR IGNORE` (`commit`), as on SQLite.
    let inserted = pg.query_typed(
        "INSERT INTO steps (plan_id, step_index, attempt, state, kind, cell, repetition, host,
                            started_unix_ns, finished_unix_ns, exit_status, stderr_tail, error, warmup)
         SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[], $4::text[], $5::text[], $6::int8[],
                              $7::int8[], $8::text[], $9::int8[], $10::int8[], $11::int8[], $12::text[],
                              $13::text[], $14::int8[])
         ON CONFLICT (plan_id, step_index, attempt, state) DO NOTHING
         RETURNING n, plan_id, step_index, attempt, state",
        &[
            &plan_id, &index, &attempt, &state, &kind, &cell, &repetition, &hosts, &started,
            &finished, &exit, &stderr, &error, &warmup,
        ],
    )?;
    let mut step_of: Vec<Option<i64>> = vec![None; run.len()];
    for row in &inserted {
        let key = (
            row.try_get::<_, &str>(1)?,
            row.try_get::<_, i64>(2)?,
            row.try_get::<_, i64>(3)?,
            row.try_get::<_, &str>(4)?,
        );
        if let Some(&i) = place.get(&key) {
            step_of[i] = Some(row.try_get(0)?);
        }
    }
    // The samples of steps this statement inserted cannot be stored yet (their step's row
    // is new), so they are copied in without a conflict check: `COPY` took half the time
    // of the same rows through a staging table and `INSERT … ON CONFLICT DO NOTHING`
    // (BENCHMARKS.md). A record with two samples of one metric breaks the key and fails its
    // agent's savepoint, as it would fail an INSERT.
    let samples = run
        .iter()
        .zip(&step_of)
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
    if rows.peek().is_some() {
        pg.copy_in(
            "COPY samples (step, metric, value, unit, histogram, missing) FROM STDIN (FORMAT binary)",
            &[Type::INT8, Type::TEXT, Type::FLOAT8, Type::TEXT, Type::BYTEA, Type::TEXT],
            rows,
        )?;
    }
    run.clear();
    Ok(())
}

/// NULLs of the sample columns' types, for `COPY`.
const NULL_F64: Option<f64> = None;
const NULL_BYTES: Option<&[u8]> = None;
const NULL_TEXT: Option<&str> = None;

/// Commits `batches` in one transaction. Each agent's batch is applied in a savepoint of
/// its own: a record that can never be stored (it breaks a constraint) does not fail the
/// other agents' batches. Such a batch is then stored record by record, and the records
/// at fault are refused with the reason (`refused_records`, and the report counts their
/// measurements as missing) instead of being resent forever.
fn commit(
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
            store_agent(&tx, b)?;
            outcomes.push(BatchOutcome::default());
            continue;
        }
        let mut outcome = BatchOutcome::default();
        let whole = {
            let sp = tx.savepoint()?;
            let applied = store_agent(&sp, b).and_then(|()| match sp.as_postgres() {
                Some(pg) => {
                    store_records_pg(&sp, pg, cells, plans, &b.host, &b.records, &mut outcome)
                }
                None => b
                    .records
                    .iter()
                    .try_for_each(|r| store_record(&sp, cells, plans, &b.host, r, &mut outcome)),
            });
            match applied {
                Ok(()) => sp.commit(),
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

/// A one-cell campaign on `hosts` (comma-separated), for tests of the store and the hub.
#[cfg(test)]
pub(crate) fn test_campaign(hosts: &str, generation: u32) -> PlannedCampaign {
    let yaml =
        format!("name: t\nhosts: {{ names: [{hosts}] }}\nworkload: {{ command: {{ run: x }} }}\n");
    let c = crate::spec::parse("t.yaml", &yaml).unwrap();
    crate::planner::plan(&c, "", "test", generation, &Default::default()).unwrap()
}

/// Stores for tests of the store and what reads it, so each runs against both engines.
#[doc(hidden)]
pub mod testing {
    use super::*;

    /// The PostgreSQL server tests use, when one is named: `PLATTER_TEST_POSTGRES` (a URL
    /// of a database the user may create schemas in). CI sets it
    /// (`PLATTER_TEST_REQUIRE_ROOT=1` makes its absence a failure); elsewhere the calling
    /// test is skipped, saying so: `SKIPPED <test>: …`.
    pub fn postgres_url() -> Option<String> {
        postgres_url_or_skip("")
    }

    /// `postgres_url`; `part` names what is skipped when the rest of the test runs.
    fn postgres_url_or_skip(part: &str) -> Option<String> {
        match std::env::var("PLATTER_TEST_POSTGRES") {
            Ok(url) if !url.is_empty() => Some(url),
            _ => {
                // libtest names each test's thread after the test.
                let current = std::thread::current();
                let test = current.name().unwrap_or("a test");
                assert!(
                    std::env::var("PLATTER_TEST_REQUIRE_ROOT").as_deref() != Ok("1"),
                    "{test}: PLATTER_TEST_REQUIRE_ROOT=1 but PLATTER_TEST_POSTGRES names no PostgreSQL server"
                );
                // Past the test harness's capture (`eprintln!` is captured), so that a
                // passing run still shows what it left out.
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED {test}{part}: needs PostgreSQL; set PLATTER_TEST_POSTGRES to a \
                     database URL (postgres://USER:PASSWORD@HOST/DB) to include it"
                );
                None
            }
        }
    }

    /// A new, empty PostgreSQL database for one test: a schema of its own on the test
    /// server (`search_path` in the URL), so tests run side by side. Its name says when it
    /// was made (`t_<unix seconds>_<random>`): schemas of tests that are over an hour old
    /// are dropped here, so the test server does not fill up with them.
    pub fn fresh_postgres(url: &str) -> Location {
        const KEPT_SECS: u64 = 3600;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let schema = format!("t_{now}_{:08x}", rand::random::<u32>());
        let rt = db::pg::PgRuntime::new().unwrap();
        let c = db::pg::connect(url, rt.handle(), db::pg::DEFAULT_DEADLINE, None)
            .expect("the test PostgreSQL server");
        c.batch(&format!("CREATE SCHEMA {schema}")).unwrap();
        let old = c
            .query(
                "SELECT nspname FROM pg_namespace WHERE nspname ~ '^t_[0-9]+_[0-9a-f]{8}$'",
                &[],
            )
            .unwrap_or_default();
        for row in old {
            let name: String = row.get(0);
            let made: u64 = name[2..name.len() - 9].parse().unwrap_or(u64::MAX);
            if made.saturating_add(KEPT_SECS) < now {
                // Another test may be dropping it too.
                let _ = c.batch(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"));
            }
        }
        drop(c);
        let sep = if url.contains('?') { '&' } else { '?' };
        Location::Postgres(format!("{url}{sep}options=-c%20search_path%3D{schema}"))
    }

    /// An SQLite store in `dir`, and a PostgreSQL one when a server is named.
    pub fn stores(dir: &Path) -> Vec<Store> {
        let mut out = vec![Store::open(&dir.join("t.db")).unwrap()];
        if let Some(url) = postgres_url_or_skip(" on PostgreSQL (it ran on SQLite)") {
            out.push(Store::open_at(&fresh_postgres(&url)).unwrap());
        }
        out
    }
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
        for store in testing::stores(dir.path()) {
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
            let conn = store.opener.writer().unwrap();
            let outcomes = commit(
                &conn,
                &mut CellKeys::default(),
                &mut KnownPlans::default(),
                &batches,
                &Instance {
                    mark: "test".into(),
                    channel: "platter_test".into(),
                },
            )
            .expect("one agent's bad records do not fail the commit");
            assert_eq!(outcomes[0].refused.values().sum::<u32>(), 3);
            assert!(outcomes[1].refused.is_empty());
            let rows =
                |sql: &str| -> Vec<String> { conn.query_map(sql, (), |r| r.get(0)).unwrap() };
            let stored = conn
                .query_map("SELECT host, value FROM sample_rows", (), |r| {
                    Ok((r.get::<String>(0)?, r.get::<f64>(1)?))
                })
                .unwrap();
            assert_eq!(stored, [("rcmonster".to_string(), 7.0)]);
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
    }

    /// Two stores on one new PostgreSQL database, as two coordinators sharing it have;
    /// None without a test server.
    fn two_on_postgres() -> Option<(Store, Store)> {
        let location = testing::fresh_postgres(&testing::postgres_url()?);
        Some((
            Store::open_at(&location).unwrap(),
            Store::open_at(&location).unwrap(),
        ))
    }

    /// Two coordinators on one PostgreSQL store dispatch to the same host at once, again
    /// and again: the host never holds two plans, and every plan is sent exactly once.
    #[test]
    fn coordinators_sharing_postgres_never_give_a_host_two_plans() {
        let Some((a, b)) = two_on_postgres() else {
            return;
        };
        const PLANS: u32 = 30;
        for generation in 1..=PLANS {
            a.insert_campaign(&test_campaign("h", generation), "t.yaml", "")
                .unwrap();
        }
        let rt = tokio::runtime::Runtime::new().unwrap();
        let mut sent = Vec::new();
        for seq in 1..=u64::from(PLANS) {
            // Both ask at once; whatever each gets must be the same one plan.
            let (ra, rb) = std::thread::scope(|s| {
                let ta = s.spawn(|| a.plan_for_host("h").unwrap());
                let tb = s.spawn(|| b.plan_for_host("h").unwrap());
                (ta.join().unwrap(), tb.join().unwrap())
            });
            let (pa, na) = ra.expect("a plan for h");
            let (pb, nb) = rb.expect("a plan for h");
            assert_eq!(pa.id, pb.id, "the host got two plans at once");
            assert!(na ^ nb, "sent exactly once: {na} {nb}");
            let active: i64 = a
                .read(|c| {
                    c.query_row(
                        "SELECT COUNT(*) FROM plans WHERE host = 'h' AND state IN ('sent', 'accepted')",
                        (),
                        |r| r.get(0),
                    )
                })
                .unwrap();
            assert_eq!(active, 1);
            sent.push(pa.id.clone());
            // The plan ends through the other coordinator every other time.
            let ending = if seq % 2 == 0 { &a } else { &b };
            let finished = Record {
                seq,
                kind: RecordKind::PlanFinished {
                    plan_id: pa.id,
                    cancelled: false,
                },
            };
            rt.block_on(ending.write_records("h", vec![finished]))
                .unwrap();
        }
        sent.sort();
        sent.dedup();
        assert_eq!(sent.len(), PLANS as usize, "every plan was sent once");
        assert!(a.plan_for_host("h").unwrap().is_none());
        let done: i64 = b
            .read(|c| {
                c.query_row(
                    "SELECT COUNT(*) FROM campaigns WHERE state = 'done'",
                    (),
                    |r| r.get(0),
                )
            })
            .unwrap();
        assert_eq!(
            done,
            i64::from(PLANS),
            "each campaign ended once its plan did"
        );
    }

    /// Text sorts by its bytes on both engines (SQLite's only order; PostgreSQL's columns
    /// are `COLLATE "C"` whatever the database's locale), so lists come out the same.
    #[test]
    fn text_sorts_by_its_bytes_on_both_engines() {
        let dir = tempfile::tempdir().unwrap();
        for store in testing::stores(dir.path()) {
            store
                .insert_campaign(&test_campaign("ab, a9z, a-c, a1", 1), "t.yaml", "")
                .unwrap();
            let hosts: Vec<String> = store
                .read(|c| {
                    c.query_map("SELECT DISTINCT host FROM plans ORDER BY host", (), |r| {
                        r.get(0)
                    })
                })
                .unwrap();
            assert_eq!(hosts, ["a-c", "a1", "a9z", "ab"], "{}", store.location());
            if let Some(pg) = store.conn.lock().unwrap().as_postgres() {
                let other = pg
                    .query(
                        "SELECT table_name || '.' || column_name FROM information_schema.columns
                          WHERE table_schema = current_schema() AND data_type = 'text'
                            AND collation_name IS DISTINCT FROM 'C'",
                        &[],
                    )
                    .unwrap();
                let other: Vec<String> = other.iter().map(|r| r.get(0)).collect();
                assert!(
                    other.is_empty(),
                    "text columns not in byte order: {other:?}"
                );
            }
        }
    }

    /// A report lists a cell's metrics in one order whichever engine its store is (by
    /// name after the command's own): SQLite returns a step's samples by name, PostgreSQL
    /// in the order they were stored, which is the order the tool printed them.
    #[tokio::test]
    async fn a_reports_metrics_come_in_the_same_order_from_both_engines() {
        let dir = tempfile::tempdir().unwrap();
        let mut orders = Vec::new();
        for store in testing::stores(dir.path()) {
            let planned = test_campaign("h", 1);
            store.insert_campaign(&planned, "t.yaml", "").unwrap();
            let plan = &planned.plans[0];
            let mut record = end(1, plan, 0, 1, 1.0);
            if let RecordKind::Step(e) = &mut record.kind {
                let sample = e.samples[0].clone();
                e.samples = ["zeta", "alpha", "mid"]
                    .into_iter()
                    .map(|m| Sample {
                        metric: m.into(),
                        ..sample.clone()
                    })
                    .collect();
            }
            store.write_records("h", vec![record]).await.unwrap();
            let report = crate::report::Report::load(&store, &planned.id).unwrap();
            let metrics: Vec<String> = report.cells[0]
                .metrics
                .iter()
                .filter(|m| ["zeta", "alpha", "mid"].contains(&m.metric.as_str()))
                .map(|m| m.metric.clone())
                .collect();
            assert_eq!(metrics, ["alpha", "mid", "zeta"], "{}", store.location());
            orders.push(metrics);
        }
        orders.dedup();
        assert_eq!(orders.len(), 1);
    }

    /// With several writers, one that cannot commit stays the store's fault while the
    /// others commit (health does not flap); a failure of the other writes ends with any
    /// commit.
    #[test]
    fn a_writers_fault_ends_with_its_own_commit() {
        let health = Health::default();
        let full = StoreError::Commit("database or disk is full".into());
        health.failed(0, &full);
        let since = health.get().expect("a fault").since_unix_ms;
        health.committed(1);
        assert_eq!(
            health.get().map(|f| f.since_unix_ms),
            Some(since),
            "writer 0 still fails"
        );
        health.failed(WRITES, &StoreError::Commit("later".into()));
        health.committed(0);
        assert_eq!(
            health.get(),
            None,
            "writer 0 commits again, and so does the rest"
        );
        health.failed(WRITES, &full);
        health.committed(3);
        assert_eq!(health.get(), None);
    }

    /// `n` host names (`h0`, `h1`, …) whose batches go to writer `w` of `writers`.
    fn hosts_of_writer(w: usize, writers: usize, n: usize) -> Vec<String> {
        (0..)
            .map(|i| format!("h{i}"))
            .filter(|h| writer_of(h, writers) == w)
            .take(n)
            .collect()
    }

    /// Hosts of one adaptive campaign on two writers end their rounds at once: each writer's
    /// transaction queues the host's next round (its plan's foreign key locks the campaign's
    /// row `FOR KEY SHARE`), then checks whether the campaign ended. That check's lock must
    /// not conflict with the other's key share (`FOR UPDATE` did: a deadlock each round).
    #[tokio::test]
    async fn writers_queuing_next_rounds_of_one_campaign_do_not_deadlock() {
        let Some(url) = testing::postgres_url() else {
            return;
        };
        let store = Store::open_at(&testing::fresh_postgres(&url)).unwrap();
        let writers = store.writers.len();
        let pick = |w| hosts_of_writer(w, writers, 3);
        let hosts = [pick(0), pick(1)].concat();
        let yaml = format!(
            "name: t\nhosts: {{ names: [{}] }}\nworkload: {{ command: {{ run: x }} }}\n\
             repeat: {{ min: 2, max: 6, until: {{ metric: wall, ci: 1% }} }}\n",
            hosts.join(", ")
        );
        let c = crate::spec::parse("t.yaml", &yaml).unwrap();
        let planned = planner::plan(&c, &yaml, "test", 1, &Default::default()).unwrap();
        store.insert_campaign(&planned, "t.yaml", &yaml).unwrap();
        let mut seq = 0;
        for round in 0..3 {
            let mut tasks = Vec::new();
            for host in &hosts {
                let (plan, _) = store.plan_for_host(host).unwrap().expect("a plan");
                let mut batch = Vec::new();
                for (i, s) in plan.steps.iter().enumerate() {
                    if matches!(s.kind, platter_proto::model::StepKind::Measure(_)) {
                        seq += 1;
                        // Far apart, so no cell's interval is ever narrow enough to stop.
                        batch.push(end(seq, &plan, i as u32, 1, 1.0 + 4.0 * (seq % 2) as f64));
                    }
                }
                seq += 1;
                batch.push(Record {
                    seq,
                    kind: RecordKind::PlanFinished {
                        plan_id: plan.id.clone(),
                        cancelled: false,
                    },
                });
                let (store, host) = (store.clone(), host.clone());
                tasks.push(tokio::spawn(async move {
                    store.write_records(&host, batch).await
                }));
            }
            for t in tasks {
                t.await.unwrap().expect("every batch is stored");
            }
            for host in &hosts {
                let queued: i64 = store
                    .read(|c| {
                        c.query_row(
                            "SELECT COUNT(*) FROM plans WHERE host = ?1 AND state = 'queued'",
                            [host],
                            |r| r.get(0),
                        )
                    })
                    .unwrap();
                assert_eq!(queued, 1, "round {round}: {host}'s next round is queued");
            }
        }
        assert_eq!(
            store.retried.load(std::sync::atomic::Ordering::Relaxed),
            0,
            "no transaction deadlocked"
        );
        assert!(store.fault().is_none());
    }

    /// A host's batches always go to the same writer (so they are stored in the order they
    /// came), and a fleet's hosts are spread over all of them.
    #[test]
    fn hosts_are_spread_over_the_writers_each_always_to_the_same() {
        let hosts: Vec<String> = (0..1000).map(|i| format!("host-{i}")).collect();
        let mut per_writer = [0usize; 4];
        for h in &hosts {
            let w = writer_of(h, 4);
            assert_eq!(writer_of(h, 4), w);
            per_writer[w] += 1;
        }
        assert!(per_writer.iter().all(|&n| n > 150), "{per_writer:?}");
        assert!(hosts.iter().all(|h| writer_of(h, 1) == 0));
    }

    /// A PostgreSQL store's writers each store the batches of hosts of their own. Two of
    /// them ending plans of the same two campaigns at once, in opposite orders, must not
    /// deadlock (each locks the campaigns' rows once, in the campaigns' order, after its
    /// records; and a transaction PostgreSQL fails as a deadlock is tried again): every
    /// batch is stored, every campaign ends, and none of it reaches the agents as a
    /// failure. (Before either, 20 rounds failed in their first.)
    #[test]
    fn writers_ending_plans_of_two_campaigns_in_opposite_orders_all_commit() {
        let Some(url) = testing::postgres_url() else {
            return;
        };
        let store = Store::open_at(&testing::fresh_postgres(&url)).unwrap();
        let writers = store.writers.len();
        assert!(writers >= 2, "a PostgreSQL store has several writers");
        // Three hosts of writer 0 and three of writer 1.
        let pick = |w| hosts_of_writer(w, writers, 3);
        let (zero, one) = (pick(0), pick(1));
        let hosts = [zero.clone(), one.clone()].concat().join(", ");
        let rt = tokio::runtime::Runtime::new().unwrap();
        const ROUNDS: u32 = 20;
        for round in 0..ROUNDS {
            let (c1, c2) = (
                test_campaign(&hosts, 2 * round + 1),
                test_campaign(&hosts, 2 * round + 2),
            );
            store.insert_campaign(&c1, "t.yaml", "").unwrap();
            store.insert_campaign(&c2, "t.yaml", "").unwrap();
            let plan_of = |c: &PlannedCampaign, host: &str| {
                c.plans.iter().find(|p| p.host == host).unwrap().id.clone()
            };
            let finished = |seq: u64, plan_id: platter_proto::model::PlanId| Record {
                seq,
                kind: RecordKind::PlanFinished {
                    plan_id,
                    cancelled: false,
                },
            };
            let seq = u64::from(round) * 2;
            let results = rt.block_on(async {
                let mut tasks = Vec::new();
                for host in zero.iter().chain(&one) {
                    // Writer 0's hosts end c1's plan first, writer 1's c2's.
                    let (first, second) = if zero.contains(host) {
                        (&c1, &c2)
                    } else {
                        (&c2, &c1)
                    };
                    let batch = vec![
                        finished(seq + 1, plan_of(first, host)),
                        finished(seq + 2, plan_of(second, host)),
                    ];
                    let (store, host) = (store.clone(), host.clone());
                    tasks.push(tokio::spawn(async move {
                        store.write_records(&host, batch).await
                    }));
                }
                let mut out = Vec::new();
                for t in tasks {
                    out.push(t.await.unwrap());
                }
                out
            });
            for r in results {
                r.expect("every batch is stored");
            }
            for c in [&c1, &c2] {
                assert_eq!(
                    store.campaign_state(&c.id).unwrap(),
                    "done",
                    "round {round}"
                );
            }
        }
        assert!(store.fault().is_none(), "the store never reported a fault");
        assert_eq!(
            store.retried.load(std::sync::atomic::Ordering::Relaxed),
            0,
            "no transaction deadlocked"
        );
    }

    /// A campaign submitted through one coordinator is heard of by another sharing its
    /// PostgreSQL store (NOTIFY), which then dispatches it to the hosts connected to it.
    #[test]
    fn another_coordinator_hears_of_new_plans() {
        let Some((a, b)) = two_on_postgres() else {
            return;
        };
        let mut heard = b.subscribe_remote_plans();
        let mut own = a.subscribe_remote_plans();
        // The listeners connect on threads of their own: give them a moment.
        std::thread::sleep(Duration::from_millis(500));
        a.insert_campaign(&test_campaign("h", 1), "t.yaml", "")
            .unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), heard.changed())
                .await
                .expect("b hears of a's plans within 5 s")
                .unwrap();
            assert!(
                tokio::time::timeout(Duration::from_millis(500), own.changed())
                    .await
                    .is_err(),
                "a does not act on its own notification"
            );
        });
        assert!(b.plan_for_host("h").unwrap().unwrap().1);
    }

    /// A campaign is found by id, or by name as the latest of that name.
    #[test]
    fn a_campaign_is_found_by_id_or_by_its_latest_name() {
        let dir = tempfile::tempdir().unwrap();
        for store in testing::stores(dir.path()) {
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
    }

    /// A plan sent but never accepted (too large to arrive, or the agent went away) must
    /// not hold its host after a cancel.
    #[test]
    fn cancelling_a_plan_that_was_only_sent_frees_its_host() {
        let dir = tempfile::tempdir().unwrap();
        for store in testing::stores(dir.path()) {
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
    }

    #[tokio::test]
    async fn resent_and_repeated_records_are_stored_once() {
        let dir = tempfile::tempdir().unwrap();
        for store in testing::stores(dir.path()) {
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
                    c.query_map(
                        "SELECT value FROM sample_rows ORDER BY repetition",
                        (),
                        |r| r.get(0),
                    )
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
    }

    /// A preparation step that ran again (its measure was cut off) ends once per attempt;
    /// a resend of either end is still stored once.
    #[tokio::test]
    async fn a_step_run_again_ends_once_per_attempt() {
        let dir = tempfile::tempdir().unwrap();
        for store in testing::stores(dir.path()) {
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
                    c.query_map(
                        "SELECT attempt FROM steps WHERE step_index = 0 ORDER BY n",
                        (),
                        |r| r.get(0),
                    )
                })
                .unwrap();
            assert_eq!(attempts, [1, 2]);
        }
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
            .with(|c| c.execute("UPDATE plans SET state = 'done' WHERE id = ?1", [&plan.id]))
            .unwrap();
        locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
        assert!(store.plan_for_host("h").is_err(), "busy");
        locker.execute_batch("COMMIT").unwrap();
        assert!(
            store.plan_for_host("h").unwrap().unwrap().1,
            "sent once free"
        );
    }

    /// An operator's cancel and a record writer lock a campaign's row and its plans' in
    /// opposite orders. When PostgreSQL breaks that deadlock by failing the cancel, the
    /// cancel is tried again instead of failing. (Another connection here takes the
    /// writer's part: a plan's row, then the campaign's; the cancel waits first, so its
    /// deadlock check, `deadlock_timeout` after it began to wait, runs first and it is the
    /// one failed.)
    #[test]
    fn a_cancel_failed_as_a_deadlocks_victim_is_tried_again() {
        let Some(url) = testing::postgres_url() else {
            return;
        };
        let store = Store::open_at(&testing::fresh_postgres(&url)).unwrap();
        let planned = test_campaign("h", 1);
        store.insert_campaign(&planned, "t.yaml", "").unwrap();
        let campaign = planned.id.clone();
        let writer = store.opener.writer().unwrap();
        let writer = writer.as_postgres().unwrap();
        writer
            .batch(&format!(
                "BEGIN; UPDATE plans SET queued_seq = queued_seq WHERE campaign_id = '{campaign}'"
            ))
            .unwrap();
        let cancel = {
            let (store, campaign) = (store.clone(), campaign.clone());
            std::thread::spawn(move || store.cancel_campaign(&campaign))
        };
        // Until the cancel holds the campaign's row and waits for the plan's (asked on a
        // connection outside the transaction, whose view of the activity would not change).
        let watcher = store.opener.writer().unwrap();
        let watcher = watcher.as_postgres().unwrap();
        let t0 = std::time::Instant::now();
        loop {
            let waiting = watcher
                .query(
                    "SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
                        AND wait_event_type = 'Lock' AND query LIKE 'UPDATE plans SET state = ''cancelled''%'",
                    &[],
                )
                .unwrap();
            if !waiting.is_empty() {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "the cancel never waited"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        writer
            .batch(&format!(
                "SELECT 1 FROM campaigns WHERE id = '{campaign}' FOR NO KEY UPDATE; COMMIT"
            ))
            .unwrap();
        let held = cancel.join().unwrap().expect("the cancel, tried again");
        assert!(held.is_empty(), "no plan was sent: {held:?}");
        assert_eq!(store.campaign_state(&campaign).unwrap(), "cancelled");
        // At least once: a retry that takes the campaign's row before the transaction above
        // does (it has yet to commit) can be the victim of the same deadlock again, which
        // a loaded machine showed (2 retries).
        let retried = store.retried.load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            retried >= 1,
            "failed as the deadlock's victim: {retried} retries"
        );
    }

    /// A writer whose commit failed and to which no batch comes again (its agents went
    /// elsewhere) ends its fault by committing a write of its own once the store can
    /// commit, not never; while it cannot, the fault stays.
    #[tokio::test]
    async fn an_idle_writers_fault_ends_when_the_store_can_commit_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let store = Store::open_with(&path, Duration::from_millis(50)).unwrap();
        let locker = Connection::open(&path).unwrap();
        locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
        assert!(store.write_records("h", Vec::new()).await.is_err());
        let fault = store.fault().expect("the writer cannot commit");
        // Past the writer's wait for a batch: its own write fails too.
        tokio::time::sleep(PROBE_WHEN_IDLE + Duration::from_secs(1)).await;
        assert_eq!(store.fault(), Some(fault), "still locked: still a fault");
        locker.execute_batch("COMMIT").unwrap();
        let t0 = Instant::now();
        while store.fault().is_some() {
            assert!(
                t0.elapsed() < PROBE_WHEN_IDLE * 3,
                "the fault outlived the lock by {:?}",
                t0.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // And the writer still takes batches.
        store.write_records("h", Vec::new()).await.unwrap();
    }

    /// Dispatching (read the queue, then mark a plan sent) while the writer commits other
    /// agents' records: with deferred transactions the dispatch failed now and then with
    /// "database is locked" (its snapshot went stale) and the host sat idle for good.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dispatch_never_fails_while_the_writer_commits() {
        let dir = tempfile::tempdir().unwrap();
        for store in testing::stores(dir.path()) {
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

    /// Two coordinators dispatch to the same 20 hosts at once, one naming them in the
    /// other's reverse order: their passes take the hosts' locks in key order, so they
    /// wait for each other rather than deadlock, and every host gets one plan, sent once.
    #[test]
    fn overlapping_dispatch_passes_do_not_deadlock() {
        let Some((a, b)) = two_on_postgres() else {
            return;
        };
        let hosts: Vec<String> = (1..=20).map(|i| format!("h{i:02}")).collect();
        let reversed: Vec<String> = hosts.iter().rev().cloned().collect();
        for round in 1..=5 {
            a.insert_campaign(&test_campaign(&hosts.join(", "), round), "t.yaml", "")
                .unwrap();
            let (ra, rb) = std::thread::scope(|s| {
                let ta = s.spawn(|| a.plans_for_hosts(&hosts).unwrap());
                let tb = s.spawn(|| b.plans_for_hosts(&reversed).unwrap());
                (ta.join().unwrap(), tb.join().unwrap())
            });
            assert_eq!((ra.len(), rb.len()), (20, 20), "round {round}");
            let new = ra.iter().chain(&rb).filter(|(_, _, new)| *new).count();
            assert_eq!(new, 20, "each host's plan sent once, round {round}");
            // End them, so the next round's plans are next.
            a.write(|c| c.execute("UPDATE plans SET state = 'done' WHERE state = 'sent'", ()))
                .unwrap();
        }
    }

    /// Reads from many threads at once share at most `MAX_READERS` PostgreSQL
    /// connections: the others wait for one, and every read is answered.
    #[test]
    fn reads_at_once_use_a_bounded_number_of_connections() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let dir = tempfile::tempdir().unwrap();
        for store in testing::stores(dir.path()) {
            let (now, most, done) = (
                AtomicUsize::new(0),
                AtomicUsize::new(0),
                AtomicUsize::new(0),
            );
            std::thread::scope(|s| {
                for _ in 0..MAX_READERS * 3 {
                    s.spawn(|| {
                        store
                            .read(|c| {
                                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                                most.fetch_max(n, Ordering::SeqCst);
                                std::thread::sleep(Duration::from_millis(30));
                                let one: i64 = c.query_row("SELECT 1", (), |r| r.get(0))?;
                                now.fetch_sub(1, Ordering::SeqCst);
                                done.fetch_add(one as usize, Ordering::SeqCst);
                                Ok(())
                            })
                            .unwrap()
                    });
                }
            });
            assert_eq!(done.load(Ordering::SeqCst), MAX_READERS * 3);
            let most = most.load(Ordering::SeqCst);
            if store.location().is_postgres() {
                assert!(most <= MAX_READERS, "{most} reads at once");
            }
            assert!(most > 1, "reads run side by side: {most}");
            let (lock, _) = &*store.readers;
            let readers = lock.lock().unwrap();
            assert!(readers.open <= MAX_IDLE_READERS && readers.idle.len() == readers.open);
        }
    }
}
