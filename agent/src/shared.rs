//! State the executor (one OS thread) and the link (one async task) share: the outbox of
//! records not yet acked, the highest ack, cancels, and what is running now.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::model::{PlanId, Record};
use crate::process;

#[derive(Default)]
pub(crate) struct Shared {
    /// Journaled records not yet acked, in sequence order.
    outbox: Mutex<VecDeque<Record>>,
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
            outbox: Mutex::new(unacked.into_iter().collect()),
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

    pub(crate) fn push(&self, record: Record) {
        self.push_quietly(record);
        self.outbox_changed.notify_one();
    }

    /// `push` without waking the link: the record goes with the next one pushed (or the
    /// next heartbeat, or `send_now`). A step's end is pushed so, and the next step's
    /// start wakes the link: the coordinator stores both in one commit, and a measure
    /// step waits for one round trip of acks, not two.
    pub(crate) fn push_quietly(&self, record: Record) {
        self.next_seq.fetch_max(record.seq + 1, Ordering::SeqCst);
        self.outbox.lock().expect("outbox lock").push_back(record);
    }

    /// Wakes the link to send what was pushed quietly.
    pub(crate) fn send_now(&self) {
        self.outbox_changed.notify_one();
    }

    /// Records with a sequence number above `after`.
    pub(crate) fn unsent(&self, after: u64) -> Vec<Record> {
        let outbox = self.outbox.lock().expect("outbox lock");
        outbox.iter().filter(|r| r.seq > after).cloned().collect()
    }

    pub(crate) fn ack(&self, seq: u64) {
        let acked = self.acked.fetch_max(seq, Ordering::SeqCst).max(seq);
        let mut outbox = self.outbox.lock().expect("outbox lock");
        while outbox.front().is_some_and(|r| r.seq <= acked) {
            outbox.pop_front();
        }
        self.acked_cv.notify_all();
    }

    /// Waits until every record sent so far is acked, at most `timeout`; returns at once
    /// when no coordinator is connected. The executor calls it before a measurement so
    /// that neither the link nor the coordinator's store is busy while the clock runs.
    pub(crate) fn quiesce(&self, timeout: Duration) -> bool {
        if !self.connected.load(Ordering::SeqCst) {
            return false;
        }
        let outbox = self.outbox.lock().expect("outbox lock");
        let (outbox, result) = self
            .acked_cv
            .wait_timeout_while(outbox, timeout, |o| !o.is_empty())
            .expect("outbox lock");
        drop(outbox);
        !result.timed_out()
    }

    pub(crate) fn outbox_is_empty(&self) -> bool {
        self.outbox.lock().expect("outbox lock").is_empty()
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
    fn quiesce_waits_for_acks_only_while_connected() {
        let shared = Arc::new(Shared::new([], 0, 1));
        shared.push(record(1));
        // Nobody to ack: no waiting at all.
        assert!(!shared.quiesce(Duration::from_secs(5)));
        shared.connected.store(true, Ordering::SeqCst);
        let t = Instant::now();
        assert!(
            !shared.quiesce(Duration::from_millis(50)),
            "an un-acked record times out"
        );
        assert!(t.elapsed() >= Duration::from_millis(50));
        let acker = shared.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            acker.ack(1);
        });
        assert!(
            shared.quiesce(Duration::from_secs(5)),
            "the ack ends the wait"
        );
        h.join().unwrap();
        assert!(shared.unsent(0).is_empty());
    }
}
