//! The store's errors: what went wrong (`StoreError`), in the database's own words
//! (`reason`, `pg_words`), whether it is the store's own trouble (`is_store_fault`) or a
//! collision worth trying again (`is_transient`), and the words a fault is told in.
//! Depends on nothing else of the store.

use std::time::Duration;

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
    /// A row was read by a name its statement does not give a column (a mistake in the
    /// store's own SQL, never in the stored data).
    #[error("the statement has no column named {name:?} (it has {has})")]
    NoColumn { name: String, has: String },
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
    /// No flag has this id, nor is it a prefix (4 or more hex digits) of exactly one.
    #[error("no flag {0}")]
    NoFlag(String),
    /// A console account, session or API token asked for what cannot be: a name that
    /// exists or does not, a password too short, a token above its account's role. The
    /// words are the whole message ("no account named \"bob\"").
    #[error("{0}")]
    Account(String),
    /// A schedule asked for what cannot be (a name taken); the words are the whole message.
    #[error("{0}")]
    Schedule(String),
    /// A flag or an alert rule asked for what cannot be (an unknown id, a secret written
    /// out rather than named); the words are the whole message.
    #[error("{0}")]
    Refused(String),
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

/// Why the store cannot commit, since when (the first failure of the episode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreFault {
    pub reason: String,
    pub since_unix_ms: i64,
    /// The store does not answer at all (`Health::hung`), rather than refusing commits.
    pub not_answering: bool,
}

impl StoreFault {
    /// What the store does, since when and why, after "the store" / "its store": "is not
    /// answering since 10:42:07 UTC: …" or "cannot commit since 10:42:07 UTC: …"
    /// (`platter health`, `/readyz`).
    pub fn words(&self) -> String {
        let since = since_clock(self.since_unix_ms);
        match self.not_answering {
            true => format!("is not answering since {since}: {}", self.reason),
            false => format!("cannot commit since {since}: {}", self.reason),
        }
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
        StoreError::Pg(e) => match sqlstate_class(e).as_deref() {
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

/// Whether `e` is PostgreSQL undoing a transaction that collided with another (a deadlock
/// or a serialization failure, SQLSTATE class 40): the same transaction tried again can
/// commit.
pub(crate) fn is_transient(e: &StoreError) -> bool {
    matches!(e, StoreError::Pg(e) if sqlstate_class(e).as_deref() == Some("40"))
}

/// Runs the transaction `f`, and again, up to 5 times in all, while it fails as a
/// deadlock's victim or a serialization failure (`is_transient`: PostgreSQL undid it whole,
/// so it can be tried again as it was); `again` hears of each such failure first.
///
/// Each try waits longer before it begins (10, 20, 40, 80 ms): the transaction it collided
/// with was waiting for a lock this one held, and a try begun at once can take that lock
/// again before the other wakes up to take it, and collide again — a loaded machine
/// showed a cancel undone three times in a row that way.
pub(crate) fn retrying_collisions<T>(
    mut f: impl FnMut() -> Result<T>,
    mut again: impl FnMut(&StoreError),
) -> Result<T> {
    const TRIES: u32 = 5;
    let mut tries = 0;
    loop {
        tries += 1;
        match f() {
            Err(e) if tries < TRIES && is_transient(&e) => {
                again(&e);
                std::thread::sleep(std::time::Duration::from_millis(10 << (tries - 1)));
            }
            r => return r,
        }
    }
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Whether `e` is PostgreSQL's, and its SQLSTATE class (two characters), if it has one.
pub fn sqlstate_class(e: &tokio_postgres::Error) -> Option<String> {
    e.code().map(|c| c.code()[..2].to_string())
}
