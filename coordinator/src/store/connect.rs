//! Opening the store's connections: SQLite's (WAL, durable, migrated) and PostgreSQL's
//! (driven by the store's runtime), for the writers, the readers, the watch and the
//! listener.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;

use super::db::{self, Conn, Location};
use super::error::Result;
use super::migrations;

/// How long a write waits for the other connection's transaction to end.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) fn open_conn(path: &Path, busy_timeout: Duration) -> Result<Conn> {
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
    migrations::sqlite().to_latest(&mut conn)?;
    // Statements are prepared once per connection and kept (`prepare_cached`).
    conn.set_prepared_statement_cache_capacity(64);
    Ok(Conn::sqlite(conn))
}

/// A connection for reads only, to a database `open_conn` already made and migrated.
pub(super) fn open_reader(path: &Path) -> Result<Conn> {
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

/// Opens connections to the store's database.
#[derive(Clone)]
pub(super) struct Opener {
    pub(super) location: Location,
    pub(super) busy_timeout: Duration,
    /// PostgreSQL: how long a request waits for the server's answer.
    pub(super) deadline: Duration,
    pub(super) pg: Option<Arc<db::pg::PgRuntime>>,
}

/// The memory a PostgreSQL reader's sort or hash may take before it spills to disk.
const READ_WORK_MEM_MB: u32 = 32;

impl Opener {
    pub(super) fn handle(&self) -> &tokio::runtime::Handle {
        self.pg
            .as_ref()
            .expect("a PostgreSQL store has its runtime")
            .handle()
    }

    /// A connection that writes (and, for SQLite, migrates).
    pub(super) fn writer(&self) -> Result<Conn> {
        match &self.location {
            Location::Sqlite(path) => open_conn(path, self.busy_timeout),
            Location::Postgres(url) => {
                let c = db::pg::connect(url, self.handle(), self.deadline, None)?;
                Ok(Conn::postgres(c))
            }
        }
    }

    /// The watch's connection: asks nothing but whether the store can commit, and waits
    /// `deadline` (the watch's `PING_DEADLINE`) for each answer (for SQLite, for the write lock).
    pub(super) fn watcher(&self, deadline: Duration) -> Result<Conn> {
        match &self.location {
            Location::Sqlite(path) => {
                let conn = Connection::open(path)?;
                conn.busy_timeout(deadline)?;
                Ok(Conn::sqlite(conn))
            }
            Location::Postgres(url) => {
                let c = db::pg::connect(url, self.handle(), deadline, None)?;
                Ok(Conn::postgres(c))
            }
        }
    }

    pub(super) fn reader(&self) -> Result<Conn> {
        match &self.location {
            Location::Sqlite(path) => open_reader(path),
            Location::Postgres(_) => {
                let c = self.writer()?;
                // A report joins a campaign's steps with its samples by hashing the steps:
                // 14 MB for a million samples, which PostgreSQL's default 4 MB spilled to
                // disk in two batches (1.08 s of the server's, 0.72 s in memory). At most
                // MAX_READERS such hashes at once; a server set higher keeps its own.
                c.batch(&format!(
                    "SELECT set_config('work_mem', '{READ_WORK_MEM_MB}MB', false)
                      WHERE pg_size_bytes(current_setting('work_mem')) < {READ_WORK_MEM_MB} * 1024 * 1024"
                ))?;
                Ok(c)
            }
        }
    }

    /// PostgreSQL: a connection that listens for other coordinators' changes.
    pub(super) fn listener(
        &self,
        tx: std::sync::mpsc::Sender<String>,
        channel: &str,
    ) -> Result<Conn> {
        let Location::Postgres(url) = &self.location else {
            unreachable!("only PostgreSQL stores are shared");
        };
        let c = db::pg::connect(url, self.handle(), self.deadline, Some(tx))?;
        c.batch(&format!("LISTEN {channel}"))?;
        Ok(Conn::postgres(c))
    }
}
