//! The coordinator's durable state in SQLite (WAL) or PostgreSQL: campaigns, cells, plans,
//! step events, samples, agents. Records from agents go through the record writers (one on
//! SQLite, `--db-writers` on PostgreSQL) that commit them in batches, never a transaction
//! per sample; a record is acked only after its commit. Everything else (submissions,
//! plan dispatch, reads) uses short transactions of its own.
//!
//! This module is the `Store` handle (open, the read pool, `with`/`write`); its wing holds
//! the rest: `error` (what fails and in whose words), `migrations` (both engines'
//! schemas, as SQL files), `db` (the SQL interface), `connect`, `health` (faults and the
//! watch), `notify` (LISTEN/NOTIFY), `writer` (record batches), `plans`, `rounds` (adaptive
//! repetition's reads on the caller's connection, and its rule applied: the next round in
//! the writer's transaction, the verdicts for a report), `reports` (every read a report
//! makes, on its one read connection), and the `impl Store` blocks by aggregate:
//! `campaigns`, `dispatch` (with cancel), `agents`, `presence`, `progress` (what `status`
//! reads of a campaign), `accounts` (the console's accounts, sessions and API tokens), `schedules` (schedules
//! and their firings, each exactly once across coordinators); `backup` copies an SQLite
//! store while it is served and restores a copy under a new identity. No
//! SQL is written outside this wing.
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
use std::time::Duration;

use platter_proto::model::CampaignId;
use tokio::sync::{mpsc, watch};

pub mod accounts;
pub mod agents;
pub mod alerts;
pub mod backup;
pub mod baseline;
mod campaigns;
mod connect;
pub mod db;
mod dispatch;
pub mod error;
pub mod flags;
/// The console's questions of flags and alert rules.
mod flags_console;
mod health;
pub mod ledger;
pub mod migrations;
mod notify;
pub mod peers;
mod plans;
pub mod presence;
pub mod progress;
pub mod reports;
pub mod rounds;
pub mod schedules;
/// Stores for tests of the store and what reads it, so each runs against both engines.
#[doc(hidden)]
pub mod testing;
#[cfg(test)]
mod tests;
mod writer;

use connect::{open_conn, Opener};
use db::{Conn, Location};
use health::{watch_loop, Health, WRITES};
use notify::Instance;
use writer::{writer_loop, Batch, Writer, WriterCounters};

pub use campaigns::CampaignState;
pub use connect::BUSY_TIMEOUT;
pub use error::{
    is_store_fault, now_ms, reason, since_clock, since_words, Result, StoreError, StoreFault,
};
pub use health::PING_DEADLINE;
pub use notify::Change;
pub use writer::{
    writer_of, AckedElsewhere, BatchOutcome, WriterStats, COMMIT_BUCKETS, DEFAULT_PG_WRITERS,
};

/// Brings the store at `location` to the latest schema; says what it did.
pub fn migrate(location: &Location) -> Result<String> {
    match location {
        Location::Sqlite(path) => {
            let c = open_conn(path, BUSY_TIMEOUT)?;
            let version: i64 = c.query_row("PRAGMA user_version", (), |r| r.only())?;
            Ok(format!("{location}: SQLite schema at version {version}"))
        }
        Location::Postgres(url) => {
            let rt = db::pg::PgRuntime::new()?;
            let c = db::pg::connect(url, rt.handle(), db::pg::DEFAULT_DEADLINE, None)?;
            let applied = db::pg::migrate(&c)?;
            let version = migrations::POSTGRES.len();
            Ok(format!(
                "{location}: PostgreSQL schema at version {version} ({applied} migration(s) applied now)"
            ))
        }
    }
}

/// The id of the campaign `reference` names: its id, or else its name (the latest
/// campaign of that name), so `platter report quickstart` works as well as the id.
pub fn resolve_campaign(c: &Conn, reference: &str) -> Result<CampaignId> {
    c.query_opt(
        "SELECT id FROM campaigns WHERE id = ?1
         UNION ALL
         SELECT * FROM (SELECT id FROM campaigns WHERE name = ?1
                        ORDER BY submitted_unix_ms DESC, generation DESC LIMIT 1) AS latest
         LIMIT 1",
        [reference],
        |r| r.only(),
    )?
    .ok_or_else(|| StoreError::NoCampaign(reference.to_string()))
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
    /// What the writers committed since the store was opened (`writer_stats`).
    written: Arc<WriterCounters>,
    changed: watch::Sender<u64>,
    /// Bumped when another coordinator queued or cancelled plans (PostgreSQL only).
    remote_plans: watch::Sender<u64>,
    /// This process's mark on its notifications, so it ignores its own, and the channel
    /// they go on.
    instance: Arc<Instance>,
    /// Dropped with the last handle: the store's watch then ends.
    _watching: Arc<std::sync::mpsc::Sender<()>>,
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
        let id: String = conn.query_row("SELECT id FROM store_identity", (), |r| r.only())?;
        let (changed, _) = watch::channel(0u64);
        let (remote_plans, _) = watch::channel(0u64);
        let health = Arc::new(Health::default());
        let instance = Arc::new(Instance {
            mark: format!("{:016x}", rand::random::<u64>()),
            channel: format!("{}_{id}", db::pg::CHANNEL),
        });
        let retried = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let written = Arc::new(WriterCounters::default());
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
                counters: written.clone(),
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
            written,
            changed,
            remote_plans,
            instance,
        };
        if store.opener.location.is_postgres() {
            notify::listen(
                store.opener.clone(),
                Arc::downgrade(&store.health),
                store.changed.clone(),
                store.remote_plans.clone(),
                store.instance.clone(),
            );
        }
        Ok(store)
    }

    /// Where the store is.
    pub fn location(&self) -> &Location {
        &self.opener.location
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

    /// Why the store cannot commit right now, if it cannot.
    pub fn fault(&self) -> Option<StoreFault> {
        self.health.get()
    }

    /// What the record writers committed since this process opened the store, and how
    /// long their commits took (`/metrics`): read from atomics, never waiting on a writer.
    pub fn writer_stats(&self) -> WriterStats {
        self.written.snapshot()
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
        notify::notify(tx, &self.instance, what)
    }
}

/// A one-cell campaign on `hosts` (comma-separated), for tests of the store and the hub.
#[cfg(test)]
pub(crate) fn test_campaign(
    hosts: &str,
    generation: u32,
) -> crate::planning::planner::PlannedCampaign {
    let yaml =
        format!("name: t\nhosts: {{ names: [{hosts}] }}\nworkload: {{ command: {{ run: x }} }}\n");
    let c = crate::spec::parse("t.yaml", &yaml).unwrap();
    crate::planning::planner::plan(&c, "", "test", generation, &Default::default()).unwrap()
}
