//! The store's health: its faults (why commits fail, since when), whether it answers at
//! all, and the watch thread that asks every `WATCH_INTERVAL`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::connect::Opener;
use super::db::Conn;
use super::error::{is_store_fault, now_ms, reason, Result, StoreError, StoreFault};

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
pub(super) struct Health {
    pub(super) faults: Mutex<std::collections::HashMap<usize, StoreFault>>,
    pub(super) hung: Mutex<Option<StoreFault>>,
}

/// `Health`'s key for the writes outside the record writers.
pub(super) const WRITES: usize = usize::MAX;
/// `Health`'s key for the store's watch (`watch_loop`), which commits a transaction of its
/// own every second to see whether the store can.
pub(super) const WATCH: usize = usize::MAX - 1;

impl Health {
    /// A write of `source` failed with `e`: starts an episode (logged once) or continues one.
    pub(super) fn failed(&self, source: usize, e: &StoreError) {
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
    pub(super) fn committed(&self, source: usize) {
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
    pub(super) fn has(&self, source: usize) -> bool {
        self.faults
            .lock()
            .expect("health lock")
            .contains_key(&source)
    }

    /// The oldest fault not ended yet.
    pub(super) fn get(&self) -> Option<StoreFault> {
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
    pub(super) fn hung_on(&self, e: &StoreError) {
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
    pub(super) fn answered(&self) {
        if let Some(f) = self.hung.lock().expect("health lock").take() {
            let secs = (now_ms() - f.since_unix_ms) as f64 / 1000.0;
            tracing::info!(after_s = format!("{secs:.1}"), was = %f.reason, "the store answers again");
        }
    }

    /// Since when and why the store is not answering, while it is not.
    pub(super) fn hung(&self) -> Option<StoreFault> {
        self.hung.lock().expect("health lock").clone()
    }

    /// `Err(NotAnswering)` while the store is not answering: a call fails at once.
    pub(super) fn answering(&self) -> Result<()> {
        match self.hung() {
            Some(f) => Err(StoreError::NotAnswering(f)),
            None => Ok(()),
        }
    }

    /// `r`, having noticed a request that outlived its deadline.
    pub(super) fn noticed<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e @ StoreError::Timeout { .. }) = &r {
            self.hung_on(e);
        }
        r
    }
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
pub(super) fn watch_loop(
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
pub(super) fn ping(opener: &Opener, conn: &mut Option<Conn>) -> Result<()> {
    if conn.as_ref().is_none_or(Conn::is_broken) {
        *conn = None;
        // A connection slow to open (a loaded server forks a backend for it) is a fault,
        // but not a store that does not answer: only a request on an open connection that
        // outlives its deadline makes calls fail at once (`Health::hung_on`).
        let opened = opener.watcher(PING_DEADLINE).map_err(|e| match e {
            StoreError::Timeout { .. } => StoreError::Commit(e.to_string()),
            e => e,
        });
        *conn = Some(opened?);
    }
    let c = conn.as_ref().expect("just opened");
    if c.is_postgres() {
        let tx = c.write_transaction()?;
        c.query_row("SELECT txid_current()", (), |r| r.only::<i64>())?;
        tx.commit()
    } else {
        c.batch("BEGIN IMMEDIATE; ROLLBACK")
    }
}
