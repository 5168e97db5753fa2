//! State the executor (one OS thread) and the link (one async task) share: the outbox of
//! records not yet acked, the highest ack, cancels, and what is running now.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::model::{PlanId, Record};
use crate::process;

/// A measurement flushes what was pushed quietly when the last flush is this old, or when
/// this many records wait: short steps go to the coordinator in batches (one round trip
/// and one store commit for many steps), and what `platter watch` shows lags by at most
/// about this long.
const BATCH_WINDOW: Duration = Duration::from_millis(100);
const BATCH_RECORDS: usize = 512;

#[derive(Default)]
struct Outbox {
    /// Journaled records not yet acked, in sequence order.
    records: VecDeque<Record>,
    /// True from a measurement's quiesce to its end: the link hands nothing to its
    /// stream, so that neither the link nor the coordinator's store works while the
    /// clock runs.
    held: bool,
    /// The highest sequence number the link has handed to its stream.
    sent: u64,
    /// When a measurement last flushed the outbox; none yet: the first one flushes.
    flushed: Option<Instant>,
}

impl Outbox {
    fn flush_due(&self) -> bool {
        self.records.len() >= BATCH_RECORDS
            || self.flushed.is_none_or(|t| t.elapsed() >= BATCH_WINDOW)
    }
}

/// The hold a quiesce puts on the link: released (the link may send again) when dropped.
pub(crate) struct Quiet<'a> {
    shared: &'a Shared,
    /// Whether what was sent was acked before the measurement (false: no coordinator
    /// connected, or the acks did not come in time). The executor measures either way.
    pub acked: bool,
}

impl Drop for Quiet<'_> {
    fn drop(&mut self) {
        self.shared.outbox().held = false;
    }
}

#[derive(Default)]
pub(crate) struct Shared {
    outbox: Mutex<Outbox>,
    /// Woken when the outbox gains a record.
    pub outbox_changed: Notify,
    acked: AtomicU64,
    /// True while a measure step runs: the link then stays silent (no logs).
    pub measuring: AtomicBool,
    /// Process group of the running command, 0 when none.
    pub running_pgid: AtomicI32,
    cancelled: Mutex<HashSet<PlanId>>,
    /// Unfinished plans the agent holds, for the hello.
    held: Mutex<Vec<PlanId>>,
    /// (plan id, step index) of the running step.
    current: Mutex<Option<(PlanId, u32)>>,
    /// The sequence number the next new record gets, for the hello.
    pub next_seq: AtomicU64,
    /// Notified (with `outbox`) when an ack empties part of the outbox.
    acked_cv: Condvar,
    /// True while a stream to the coordinator is open.
    pub connected: AtomicBool,
    /// Why the executor holds its steps (its journal cannot be written), for heartbeats.
    journal_fault: Mutex<Option<String>>,
    /// Woken when `journal_fault` changes: the link sends a heartbeat at once, so that
    /// the coordinator shows the fault (and its end) without waiting for the next one.
    pub journal_fault_changed: Notify,
}

impl Shared {
    pub(crate) fn new(
        unacked: impl IntoIterator<Item = Record>,
        acked: u64,
        next_seq: u64,
    ) -> Shared {
        Shared {
            outbox: Mutex::new(Outbox {
                records: unacked.into_iter().collect(),
                ..Outbox::default()
            }),
            acked: AtomicU64::new(acked),
            next_seq: AtomicU64::new(next_seq),
            ..Shared::default()
        }
    }

    pub(crate) fn set_journal_fault(&self, fault: Option<String>) {
        *self.journal_fault.lock().expect("journal fault lock") = fault;
        self.journal_fault_changed.notify_one();
    }

    pub(crate) fn journal_fault(&self) -> Option<String> {
        self.journal_fault
            .lock()
            .expect("journal fault lock")
            .clone()
    }

    fn outbox(&self) -> MutexGuard<'_, Outbox> {
        self.outbox.lock().expect("outbox lock")
    }

    pub(crate) fn push(&self, record: Record) {
        self.push_quietly(record);
        self.outbox_changed.notify_one();
    }

    /// `push` without waking the link: the record goes with the next one pushed (or the
    /// next heartbeat, or `send_now`, or a measurement's flush). A step's end is pushed
    /// so, and so is a measure step's start while a batch is open (`measure_goes_quietly`).
    pub(crate) fn push_quietly(&self, record: Record) {
        self.next_seq.fetch_max(record.seq + 1, Ordering::SeqCst);
        self.outbox().records.push_back(record);
    }

    /// Whether a measure step's start may wait in the outbox: the next measurement need
    /// not flush (the batch is young and small).
    pub(crate) fn measure_goes_quietly(&self) -> bool {
        !self.outbox().flush_due()
    }

    /// Wakes the link to send what was pushed quietly.
    pub(crate) fn send_now(&self) {
        self.outbox_changed.notify_one();
    }

    /// Records with a sequence number above `after`.
    pub(crate) fn unsent(&self, after: u64) -> Vec<Record> {
        let outbox = self.outbox();
        outbox
            .records
            .iter()
            .filter(|r| r.seq > after)
            .cloned()
            .collect()
    }

    /// What the link sends now: the records above `after`, or nothing while a
    /// measurement holds the link.
    pub(crate) fn take_unsent(&self, after: u64) -> Vec<Record> {
        let mut outbox = self.outbox();
        if outbox.held {
            return Vec::new();
        }
        let records: Vec<Record> = outbox
            .records
            .iter()
            .filter(|r| r.seq > after)
            .cloned()
            .collect();
        if let Some(last) = records.last() {
            outbox.sent = outbox.sent.max(last.seq);
        }
        records
    }

    pub(crate) fn ack(&self, seq: u64) {
        let acked = self.acked.fetch_max(seq, Ordering::SeqCst).max(seq);
        let mut outbox = self.outbox();
        while outbox.records.front().is_some_and(|r| r.seq <= acked) {
            outbox.records.pop_front();
        }
        self.acked_cv.notify_all();
    }

    /// Readies the link for a measurement, at most `timeout`: flushes the outbox (wakes
    /// the link and waits until every record is acked) when a batch is due or the link has
    /// records in flight, then holds the link. Until the returned hold is dropped, the
    /// link sends no record: neither the link nor the coordinator's store is busy while
    /// the clock runs. Does not wait when no coordinator is connected.
    pub(crate) fn quiesce(&self, timeout: Duration) -> Quiet<'_> {
        let mut outbox = self.outbox();
        let mut acked = self.connected.load(Ordering::SeqCst);
        // Under the outbox's lock the link hands nothing over: what it sent is `sent`.
        let in_flight = self.acked.load(Ordering::SeqCst) < outbox.sent;
        if acked && !outbox.records.is_empty() && (outbox.flush_due() || in_flight) {
            self.outbox_changed.notify_one();
            let (o, result) = self
                .acked_cv
                .wait_timeout_while(outbox, timeout, |o| !o.records.is_empty())
                .expect("outbox lock");
            outbox = o;
            acked = !result.timed_out();
        }
        // Everything acked: a batch begins (one that timed out is flushed again next time).
        if acked && outbox.records.is_empty() {
            outbox.flushed = Some(Instant::now());
        }
        outbox.held = true;
        drop(outbox);
        Quiet {
            shared: self,
            acked,
        }
    }

    pub(crate) fn outbox_is_empty(&self) -> bool {
        self.outbox().records.is_empty()
    }

    pub(crate) fn acked(&self) -> u64 {
        self.acked.load(Ordering::SeqCst)
    }

    pub(crate) fn cancel(&self, plan_id: &str) {
        self.cancelled
            .lock()
            .expect("cancel lock")
            .insert(plan_id.to_string().into());
        let running = self
            .current
            .lock()
            .expect("current lock")
            .as_ref()
            .is_some_and(|(p, _)| p == plan_id);
        if running {
            process::kill_group(&self.running_pgid);
        }
    }

    pub(crate) fn is_cancelled(&self, plan_id: &str) -> bool {
        self.cancelled
            .lock()
            .expect("cancel lock")
            .contains(plan_id)
    }

    pub(crate) fn set_held(&self, ids: Vec<PlanId>) {
        *self.held.lock().expect("held lock") = ids;
    }

    pub(crate) fn held(&self) -> Vec<PlanId> {
        self.held.lock().expect("held lock").clone()
    }

    pub(crate) fn set_current(&self, current: Option<(PlanId, u32)>) {
        *self.current.lock().expect("current lock") = current;
    }

    pub(crate) fn current(&self) -> Option<(PlanId, u32)> {
        self.current.lock().expect("current lock").clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RecordKind;
    use std::sync::Arc;
    use std::time::Instant;

    fn record(seq: u64) -> Record {
        Record {
            seq,
            kind: RecordKind::PlanAccepted {
                plan_id: "p".into(),
            },
        }
    }

    #[test]
    fn without_a_coordinator_quiesce_holds_the_link_but_does_not_wait() {
        let shared = Shared::new([], 0, 1);
        shared.push(record(1));
        let t = Instant::now();
        let quiet = shared.quiesce(Duration::from_secs(5));
        assert!(!quiet.acked);
        assert!(t.elapsed() < Duration::from_secs(1));
        assert!(shared.take_unsent(0).is_empty(), "held while measuring");
        drop(quiet);
        assert_eq!(shared.take_unsent(0).len(), 1, "released after");
    }

    #[test]
    fn the_first_measurement_flushes_and_waits_for_the_acks() {
        let shared = Arc::new(Shared::new([], 0, 1));
        shared.connected.store(true, Ordering::SeqCst);
        shared.push(record(1));
        let t = Instant::now();
        let quiet = shared.quiesce(Duration::from_millis(50));
        assert!(!quiet.acked, "an un-acked record times out");
        assert!(t.elapsed() >= Duration::from_millis(50));
        drop(quiet);

        // A record the link has sent is waited for, batch or not.
        shared.push(record(2));
        assert_eq!(shared.take_unsent(0).len(), 2);
        let acker = shared.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            acker.ack(2);
        });
        let t = Instant::now();
        assert!(
            shared.quiesce(Duration::from_secs(5)).acked,
            "the ack ends the wait"
        );
        assert!(t.elapsed() >= Duration::from_millis(20));
        h.join().unwrap();
        assert!(shared.unsent(0).is_empty());
    }

    #[test]
    fn short_steps_go_in_batches() {
        let shared = Shared::new([], 0, 1);
        shared.connected.store(true, Ordering::SeqCst);
        assert!(!shared.measure_goes_quietly(), "the first one flushes");
        // Everything acked: a batch begins.
        shared.push(record(1));
        shared.ack(1);
        drop(shared.quiesce(Duration::from_secs(5)));
        assert!(shared.measure_goes_quietly());

        // Pushed quietly within the window: the measurement neither waits nor lets the
        // link send them while it runs.
        shared.push_quietly(record(2));
        shared.push_quietly(record(3));
        let t = Instant::now();
        let quiet = shared.quiesce(Duration::from_secs(5));
        assert!(quiet.acked);
        assert!(t.elapsed() < Duration::from_secs(1));
        assert!(shared.take_unsent(1).is_empty());
        drop(quiet);
        assert_eq!(shared.take_unsent(1).len(), 2);

        // A full batch is due at once, and so is an old one.
        for seq in 4..4 + BATCH_RECORDS as u64 {
            shared.push_quietly(record(seq));
        }
        assert!(!shared.measure_goes_quietly());
        shared.ack(3 + BATCH_RECORDS as u64);
        assert!(shared.measure_goes_quietly());
        shared.outbox().flushed = Some(Instant::now() - BATCH_WINDOW);
        assert!(!shared.measure_goes_quietly());
    }
}
