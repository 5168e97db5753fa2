//! The agent's journal: an append-only file of JSON lines, each fsync'd before the caller
//! acts on it. It owns crash and reboot recovery: replaying it tells which plans are held,
//! which steps ended, how often each step was started, what is not yet acked, and whether
//! a reboot was requested. It is written only between steps, never during a measurement.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::model::{
    Plan, PlanId, Record, RecordKind, StepEvent, StepKind, StepState, StorageConfig,
};

const FILE: &str = "journal.jsonl";
/// Compact when the file is larger than this and a plan has just finished.
const COMPACT_BYTES: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub(crate) enum JournalError {
    /// The I/O error is part of the message, not a `source`: the agent's error chain
    /// (`{:#}`) said it twice.
    #[error("journal {path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("journal {path} line {line} is corrupt: {why}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        why: String,
    },
}

impl JournalError {
    /// The I/O error's kind, when the journal could not be read or written.
    pub(crate) fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            JournalError::Io { error, .. } => Some(error.kind()),
            JournalError::Corrupt { .. } => None,
        }
    }

    /// A full (or over quota) or read-only filesystem: what an operator fixes while the
    /// agent waits (space freed, a remount), unlike a corrupt journal.
    pub(crate) fn is_full_or_read_only(&self) -> bool {
        use std::io::ErrorKind::{QuotaExceeded, ReadOnlyFilesystem, StorageFull};
        matches!(
            self.io_kind(),
            Some(StorageFull | QuotaExceeded | ReadOnlyFilesystem)
        )
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Entry {
    /// A plan was received; journaled before it is acknowledged.
    Plan(Plan),
    /// A record; journaled before it is sent.
    Record(Record),
    /// The coordinator acknowledged every record up to this sequence number.
    Acked(u64),
    /// A reboot step asked for a reboot while the host had this boot id.
    RebootRequested {
        plan_id: PlanId,
        step_index: u32,
        boot_id: String,
        requested_unix_ns: i64,
    },
    /// Written at compaction: sequence numbers continue from here.
    NextSeq(u64),
    /// Written at compaction: plans that have finished (so a resent one is recognised).
    Finished(Vec<PlanId>),
    /// The measure step `measure` was cut off after it had been started `started` times:
    /// its repetition's preparation `steps` run again (as new attempts) before it does.
    Rerun {
        plan_id: PlanId,
        measure: u32,
        started: u32,
        steps: Vec<u32>,
    },
}

/// Progress of one held plan, rebuilt from the journal.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PlanProgress {
    pub plan: Plan,
    /// Steps whose latest attempt has an end record (succeeded, failed or skipped).
    pub ended: BTreeSet<u32>,
    /// Every step before this one is in `ended` and this one is not (or it is the plan's
    /// length): the next step, kept as records apply so finding it does not walk the plan
    /// (a walk per step made a plan of 8,000 steps cost twice as much per step as one of
    /// 1,000).
    next: u32,
    /// The plan's storage setup (`true`) and teardown (`false`) steps by index: the
    /// storage in effect at a step is the last of them before it (`storage_at`), found
    /// without walking back through every step of a plan that has none.
    storage_steps: BTreeMap<u32, bool>,
    /// How many times each step was started.
    pub attempts: HashMap<u32, u32>,
    /// How many end records each step has (one per attempt that ended).
    ends: HashMap<u32, u32>,
    /// Steps whose latest attempt failed.
    pub failed: BTreeSet<u32>,
    pub reboot: Option<RebootRequest>,
    /// Measure step → how many times it had been started when its preparation was
    /// opened again (`Entry::Rerun`).
    pub reruns: HashMap<u32, u32>,
    /// Records and reruns of this plan in journal order (kept through compaction while
    /// the plan is unfinished).
    log: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RebootRequest {
    pub step_index: u32,
    pub boot_id: String,
    pub requested_unix_ns: i64,
}

impl PlanProgress {
    /// The first step without an end record.
    pub(crate) fn next_step(&self) -> Option<u32> {
        Some(self.next).filter(|&n| (n as usize) < self.plan.steps.len())
    }

    /// The storage in effect at step `index` (`Plan::storage_at`, by the index of storage
    /// steps).
    pub(crate) fn storage_at(&self, index: u32) -> Option<StorageConfig> {
        let (&at, &setup) = self.storage_steps.range(..=index).next_back()?;
        match (&self.plan.steps[at as usize].kind, setup) {
            (StepKind::StorageSetup(c), true) => Some(c.clone()),
            _ => None,
        }
    }

    fn new(plan: Plan) -> PlanProgress {
        let storage_steps = plan
            .steps
            .iter()
            .filter_map(|s| match s.kind {
                StepKind::StorageSetup(_) => Some((s.index, true)),
                StepKind::StorageTeardown(_) => Some((s.index, false)),
                _ => None,
            })
            .collect();
        PlanProgress {
            plan,
            ended: BTreeSet::new(),
            next: 0,
            storage_steps,
            attempts: HashMap::new(),
            ends: HashMap::new(),
            failed: BTreeSet::new(),
            reboot: None,
            reruns: HashMap::new(),
            log: Vec::new(),
        }
    }

    fn end(&mut self, index: u32) {
        self.ended.insert(index);
        while self.ended.contains(&self.next) {
            self.next += 1;
        }
    }

    /// How many times the step was started and did not end: the agent stopped during it.
    pub(crate) fn cut_offs(&self, index: u32) -> u32 {
        let started = self.attempts.get(&index).copied().unwrap_or(0);
        started.saturating_sub(self.ends.get(&index).copied().unwrap_or(0))
    }

    /// The attempt a step's skip record names: the attempt that was cut off, or a new one
    /// for a step that ended before and was opened again (a store keeps one end per
    /// attempt), or 0 for a step never started.
    pub(crate) fn skip_attempt(&self, index: u32) -> u32 {
        let started = self.attempts.get(&index).copied().unwrap_or(0);
        let ended_before = self.ends.get(&index).copied().unwrap_or(0) > 0;
        if ended_before && self.cut_offs(index) == 0 {
            started + 1
        } else {
            started
        }
    }

    /// The latest end record of the step.
    pub(crate) fn last_end(&self, index: u32) -> Option<&StepEvent> {
        self.log.iter().rev().find_map(|e| match e {
            Entry::Record(Record {
                kind: RecordKind::Step(s),
                ..
            }) if s.step_index == index && s.state.is_end() => Some(s),
            _ => None,
        })
    }
}

/// Everything the journal says, in memory.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct State {
    /// Held (unfinished) plans in the order received.
    pub plans: BTreeMap<u64, PlanProgress>,
    order: u64,
    pub finished: BTreeSet<PlanId>,
    pub next_seq: u64,
    pub acked: u64,
    /// Records not yet acked, in sequence order.
    pub unacked: VecDeque<Record>,
}

impl State {
    /// The state of an empty journal: sequence numbers start at 1.
    fn new() -> State {
        State {
            next_seq: 1,
            ..State::default()
        }
    }

    fn apply(&mut self, entry: Entry) {
        match entry {
            Entry::Plan(plan) => {
                if !self.finished.contains(&plan.id) && self.held(&plan.id).is_none() {
                    self.order += 1;
                    self.plans.insert(self.order, PlanProgress::new(plan));
                }
            }
            Entry::Record(r) => {
                self.next_seq = self.next_seq.max(r.seq + 1);
                if r.seq > self.acked {
                    self.unacked.push_back(r.clone());
                }
                let plan_id = match &r.kind {
                    RecordKind::PlanAccepted { plan_id } => plan_id.clone(),
                    RecordKind::PlanFinished { plan_id, .. } => plan_id.clone(),
                    RecordKind::Step(e) => e.plan_id.clone(),
                    RecordKind::Provenance { plan_id, .. } => plan_id.clone(),
                    // A refused plan was never held; if it comes again it is judged again.
                    RecordKind::PlanRefused { .. } => return,
                };
                if let RecordKind::PlanFinished { plan_id, .. } = &r.kind {
                    self.plans.retain(|_, p| &p.plan.id != plan_id);
                    self.finished.insert(plan_id.to_string().into());
                    return;
                }
                let Some(p) = self.plans.values_mut().find(|p| p.plan.id == plan_id) else {
                    return;
                };
                if let RecordKind::Step(e) = &r.kind {
                    if e.state == StepState::Started {
                        *p.attempts.entry(e.step_index).or_default() += 1;
                    } else {
                        p.end(e.step_index);
                        *p.ends.entry(e.step_index).or_default() += 1;
                        if e.state == StepState::Failed {
                            p.failed.insert(e.step_index);
                        }
                    }
                }
                p.log.push(Entry::Record(r));
            }
            Entry::Acked(seq) => {
                self.acked = self.acked.max(seq);
                while self.unacked.front().is_some_and(|r| r.seq <= self.acked) {
                    self.unacked.pop_front();
                }
            }
            Entry::RebootRequested {
                plan_id,
                step_index,
                boot_id,
                requested_unix_ns,
            } => {
                if let Some(p) = self.plans.values_mut().find(|p| p.plan.id == plan_id) {
                    p.reboot = Some(RebootRequest {
                        step_index,
                        boot_id,
                        requested_unix_ns,
                    });
                }
            }
            Entry::NextSeq(n) => self.next_seq = self.next_seq.max(n),
            Entry::Finished(ids) => self.finished.extend(ids),
            Entry::Rerun {
                plan_id,
                measure,
                started,
                steps,
            } => {
                let Some(p) = self.plans.values_mut().find(|p| p.plan.id == plan_id) else {
                    return;
                };
                for &i in &steps {
                    p.ended.remove(&i);
                    p.failed.remove(&i);
                    p.next = p.next.min(i);
                }
                // A reboot of the preparation is asked for again, in this boot.
                if p.reboot
                    .as_ref()
                    .is_some_and(|r| steps.contains(&r.step_index))
                {
                    p.reboot = None;
                }
                p.reruns.insert(measure, started);
                p.log.push(Entry::Rerun {
                    plan_id,
                    measure,
                    started,
                    steps,
                });
            }
        }
    }

    pub(crate) fn held(&self, plan_id: &str) -> Option<&PlanProgress> {
        self.plans.values().find(|p| p.plan.id == plan_id)
    }

    /// The oldest unfinished plan.
    pub(crate) fn current(&self) -> Option<&PlanProgress> {
        self.plans.values().next()
    }

    /// Entries that reproduce this state, for compaction.
    fn snapshot(&self) -> Vec<Entry> {
        let mut out = vec![Entry::NextSeq(self.next_seq), Entry::Acked(self.acked)];
        if !self.finished.is_empty() {
            out.push(Entry::Finished(self.finished.iter().cloned().collect()));
        }
        let mut written = BTreeSet::new();
        for p in self.plans.values() {
            out.push(Entry::Plan(p.plan.clone()));
            for e in &p.log {
                if let Entry::Record(r) = e {
                    written.insert(r.seq);
                }
                out.push(e.clone());
            }
            if let Some(rb) = &p.reboot {
                out.push(Entry::RebootRequested {
                    plan_id: p.plan.id.to_string().into(),
                    step_index: rb.step_index,
                    boot_id: rb.boot_id.clone(),
                    requested_unix_ns: rb.requested_unix_ns,
                });
            }
        }
        // Unacked records of finished plans must survive too (they are still to be sent).
        let mut rest: Vec<Entry> = self
            .unacked
            .iter()
            .filter(|r| !written.contains(&r.seq))
            .map(|r| Entry::Record(r.clone()))
            .collect();
        out.append(&mut rest);
        out
    }
}

/// Applies the journal's entries to `state` and returns the length of its valid part: up
/// to the end of the last complete, valid, newline-terminated line. Lines are bytes, not
/// text: an append cut inside a multi-byte character is a torn tail like any other.
fn replay(path: &Path, input: impl Read, state: &mut State) -> Result<u64, JournalError> {
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    let (mut offset, mut valid_len) = (0u64, 0u64);
    // The first line that did not parse: torn if no valid entry follows it.
    let mut bad: Option<(usize, String)> = None;
    for number in 1.. {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|source| JournalError::Io {
                path: path.to_path_buf(),
                error: source,
            })?;
        if read == 0 {
            break;
        }
        offset += read as u64;
        match serde_json::from_slice::<Entry>(&line) {
            Ok(entry) => {
                if let Some((line, why)) = bad {
                    return Err(JournalError::Corrupt {
                        path: path.to_path_buf(),
                        line,
                        why,
                    });
                }
                // Only the last line can lack its newline: an append cut off just before
                // it, so before its fsync returned and anyone acted on it.
                if line.ends_with(b"\n") {
                    state.apply(entry);
                    valid_len = offset;
                }
            }
            Err(e) => {
                bad.get_or_insert((number, e.to_string()));
            }
        }
    }
    Ok(valid_len)
}

/// Replays a journal held in memory exactly as [`Journal::open`] replays the file: the
/// state, and the length of the valid part (what `open` cuts a torn tail back to). For the
/// fuzz targets (`platter_agent::fuzz`), which must not touch the disk; the agent itself
/// always goes through `open`.
#[doc(hidden)]
pub(crate) fn replay_bytes(bytes: &[u8]) -> Result<(State, u64), JournalError> {
    let mut state = State::new();
    let valid_len = replay(Path::new(FILE), bytes, &mut state)?;
    Ok((state, valid_len))
}

pub(crate) struct Journal {
    dir: PathBuf,
    file: File,
    /// The length of the complete, fsync'd entries: what a failed append cuts back to.
    len: u64,
    /// A failed append may have left part of its line past `len` (the truncation right
    /// after it failed too): the next append cuts it off first.
    torn: bool,
}

impl Journal {
    /// Opens (or creates) the journal in `dir` and replays it. A torn tail — whatever
    /// follows the last complete, valid, newline-terminated entry, when no valid entry
    /// comes after it — is cut off the file (and the cut fsync'd) before anything is
    /// appended; a bad line with a valid entry after it is corruption, an error.
    pub(crate) fn open(dir: &Path) -> Result<(Journal, State), JournalError> {
        let path = dir.join(FILE);
        let io = |source| JournalError::Io {
            path: path.clone(),
            error: source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        // The file's name is as durable as its entries (a new journal's, too).
        File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
        let mut state = State::new();
        let valid_len = replay(&path, &file, &mut state)?;
        let len = file.metadata().map_err(io)?.len();
        if len > valid_len {
            tracing::warn!(
                journal = %path.display(),
                bytes = len - valid_len,
                "dropping the journal's torn tail (an append cut off before its fsync returned)"
            );
            file.set_len(valid_len).map_err(io)?;
            file.sync_all().map_err(io)?;
        }
        Ok((
            Journal {
                dir: dir.to_path_buf(),
                file,
                len: valid_len,
                torn: false,
            },
            state,
        ))
    }

    /// Appends `entry` durably, then applies it to `state`.
    pub(crate) fn append(&mut self, state: &mut State, entry: Entry) -> Result<(), JournalError> {
        let mut line = serde_json::to_vec(&entry).expect("journal entries always serialize");
        line.push(b'\n');
        let io = |source| JournalError::Io {
            path: self.dir.join(FILE),
            error: source,
        };
        if self.torn {
            self.file.set_len(self.len).map_err(io)?;
            self.torn = false;
        }
        if let Err(error) = self
            .file
            .write_all(&line)
            .and_then(|()| self.file.sync_data())
        {
            // A full filesystem cuts a line short; the caller may append it again once
            // there is room, and a piece of a line followed by a whole one is corruption
            // to replay. Nothing acted on the piece: cut it off.
            self.torn = self.file.set_len(self.len).is_err();
            return Err(io(error));
        }
        self.len += line.len() as u64;
        state.apply(entry);
        Ok(())
    }

    /// Rewrites the journal to just what `state` needs, if it has grown large. Atomic:
    /// a crash leaves either the old or the new file.
    pub(crate) fn maybe_compact(&mut self, state: &State) -> Result<(), JournalError> {
        if self.len < COMPACT_BYTES {
            return Ok(());
        }
        self.compact(state)
    }

    pub(crate) fn compact(&mut self, state: &State) -> Result<(), JournalError> {
        let path = self.dir.join(FILE);
        let tmp = self.dir.join(format!("{FILE}.tmp"));
        let io = |source| JournalError::Io {
            path: tmp.clone(),
            error: source,
        };
        let mut buf = Vec::new();
        for e in state.snapshot() {
            serde_json::to_writer(&mut buf, &e).expect("journal entries always serialize");
            buf.push(b'\n');
        }
        let copied = File::create(&tmp)
            .and_then(|mut f| f.write_all(&buf).and_then(|()| f.sync_all()))
            .and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(error) = copied {
            // Before the rename the journal is whole and still the one appended to: a
            // compaction that finds no room (the copy needs as much space as what it
            // keeps) is left for the next plan's end, not an error.
            let _ = std::fs::remove_file(&tmp);
            tracing::warn!(journal = %path.display(), %error, "the journal could not be compacted; it is kept as it is");
            return Ok(());
        }
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io)?;
        self.file = OpenOptions::new().append(true).open(&path).map_err(io)?;
        self.len = buf.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{OnFailure, Step, StepEvent, StepKind};

    fn plan(id: &str, steps: usize) -> Plan {
        Plan {
            id: id.into(),
            campaign_id: "c".into(),
            campaign_name: "c".into(),
            host: "h".into(),
            steps: (0..steps as u32)
                .map(|i| Step {
                    index: i,
                    cell_id: "x".into(),
                    repetition: 1,
                    warmup: false,
                    kind: StepKind::Sync,
                })
                .collect(),
            on_failure: OnFailure::Continue,
            run_as: Default::default(),
        }
    }

    fn step(seq: u64, plan: &str, idx: u32, state: StepState) -> Entry {
        Entry::Record(Record {
            seq,
            kind: RecordKind::Step(StepEvent {
                plan_id: plan.into(),
                kind: "sync".into(),
                step_index: idx,
                cell_id: "x".into(),
                repetition: 1,
                attempt: 1,
                state,
                started_unix_ns: 0,
                finished_unix_ns: 0,
                exit_status: 0,
                stderr_tail: String::new(),
                error: String::new(),
                samples: vec![],
            }),
        })
    }

    #[test]
    fn replay_restores_progress_attempts_and_unacked() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut j, mut s) = Journal::open(dir.path()).unwrap();
            j.append(&mut s, Entry::Plan(plan("p", 3))).unwrap();
            j.append(&mut s, step(1, "p", 0, StepState::Started))
                .unwrap();
            j.append(&mut s, step(2, "p", 0, StepState::Succeeded))
                .unwrap();
            j.append(&mut s, step(3, "p", 1, StepState::Started))
                .unwrap();
            j.append(&mut s, Entry::Acked(2)).unwrap();
            // crash here: step 1 started, never ended
        }
        let (_, s) = Journal::open(dir.path()).unwrap();
        let p = s.current().unwrap();
        assert_eq!(p.next_step(), Some(1));
        assert_eq!(p.attempts.get(&1), Some(&1));
        assert_eq!(s.next_seq, 4);
        assert_eq!(s.unacked.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![3]);
    }

    /// The next step and the storage in effect are kept as records apply (not walked for):
    /// they agree with the plan's own definitions at every point of a plan that ends
    /// steps out of order, fails one, and has a measurement's preparation opened again.
    #[test]
    fn the_next_step_and_the_storage_in_effect_agree_with_the_plans_definitions() {
        use crate::model::{Encryption, Filesystem, WriteCacheSetting};
        let storage = StorageConfig {
            device: None,
            fs: Filesystem::Tmpfs,
            mkfs_options: vec![],
            mount_options: String::new(),
            write_cache: WriteCacheSetting::Keep,
            ramdisk_size: Some(1 << 20),
            encryption: Encryption::None,
        };
        let mut p = plan("p", 12);
        p.steps[2].kind = StepKind::StorageSetup(storage.clone());
        p.steps[6].kind = StepKind::StorageTeardown(storage.clone());
        p.steps[9].kind = StepKind::StorageSetup(storage);
        let mut s = State::new();
        s.apply(Entry::Plan(p.clone()));
        let naive = |s: &State| {
            let q = s.current().unwrap();
            (0..12u32).find(|i| !q.ended.contains(i))
        };
        for i in 0..12 {
            assert_eq!(
                s.current().unwrap().storage_at(i),
                p.storage_at(i),
                "step {i}"
            );
        }
        let mut seq = 0;
        let mut end = |s: &mut State, idx: u32, state: StepState| {
            seq += 1;
            s.apply(step(seq, "p", idx, StepState::Started));
            seq += 1;
            s.apply(step(seq, "p", idx, state));
        };
        assert_eq!(s.current().unwrap().next_step(), Some(0));
        end(&mut s, 1, StepState::Succeeded);
        assert_eq!(s.current().unwrap().next_step(), naive(&s));
        assert_eq!(naive(&s), Some(0));
        end(&mut s, 0, StepState::Succeeded);
        assert_eq!(s.current().unwrap().next_step(), Some(2), "past both");
        for i in 2..8 {
            end(&mut s, i, StepState::Succeeded);
        }
        end(&mut s, 8, StepState::Failed);
        assert_eq!(s.current().unwrap().next_step(), Some(9));
        s.apply(Entry::Rerun {
            plan_id: "p".into(),
            measure: 8,
            started: 1,
            steps: vec![5, 7],
        });
        assert_eq!(s.current().unwrap().next_step(), Some(5), "opened again");
        assert_eq!(s.current().unwrap().next_step(), naive(&s));
        end(&mut s, 5, StepState::Succeeded);
        assert_eq!(s.current().unwrap().next_step(), Some(7));
        end(&mut s, 7, StepState::Succeeded);
        for i in 9..12 {
            assert_eq!(s.current().unwrap().next_step(), Some(i));
            end(&mut s, i, StepState::Succeeded);
        }
        assert_eq!(s.current().unwrap().next_step(), None);
        assert_eq!(naive(&s), None);
    }

    #[test]
    fn torn_last_line_is_dropped_but_corruption_inside_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut j, mut s) = Journal::open(dir.path()).unwrap();
            j.append(&mut s, Entry::Plan(plan("p", 1))).unwrap();
        }
        let path = dir.path().join(FILE);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"record\":{\"seq\":1,").unwrap();
        drop(f);
        let (mut j, mut s) = Journal::open(dir.path()).unwrap();
        assert_eq!(s.plans.len(), 1);
        j.append(&mut s, Entry::Acked(0)).unwrap();
        drop(j);
        let (_, s) = Journal::open(dir.path()).unwrap();
        assert_eq!(
            s.plans.len(),
            1,
            "the torn line was cut before the next append"
        );

        std::fs::write(&path, "garbage\n{\"acked\":1}\n").unwrap();
        assert!(matches!(
            Journal::open(dir.path()),
            Err(JournalError::Corrupt { line: 1, .. })
        ));
    }

    /// A missing sample's NaN value is written as JSON `null`; found by the fuzz targets
    /// (issue 10): it used to make the line unreadable, so the journal was corrupt as soon
    /// as anything was appended after a bonnie++ run with a `+++++` field.
    #[test]
    fn a_missing_sample_survives_replay() {
        let dir = tempfile::tempdir().unwrap();
        let Entry::Record(mut missing) = step(1, "p", 0, StepState::Succeeded) else {
            unreachable!()
        };
        if let RecordKind::Step(e) = &mut missing.kind {
            e.samples.push(crate::model::Sample {
                metric: "getc".into(),
                value: f64::NAN,
                unit: String::new(),
                histogram: vec![],
                missing: "too fast to measure".into(),
            });
        }
        {
            let (mut j, mut s) = Journal::open(dir.path()).unwrap();
            j.append(&mut s, Entry::Record(missing.clone())).unwrap();
            j.append(&mut s, Entry::Acked(0)).unwrap();
        }
        let (_, s) = Journal::open(dir.path()).unwrap();
        assert_eq!(s.unacked, [missing]);
    }

    /// A measure cut off, its preparation opened again: replay and compaction both give
    /// back the reopened steps, the attempts so far and which rerun was done.
    #[test]
    fn a_rerun_reopens_the_preparation_through_replay_and_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, mut s) = Journal::open(dir.path()).unwrap();
        j.append(&mut s, Entry::Plan(plan("p", 4))).unwrap();
        j.append(&mut s, step(1, "p", 0, StepState::Started))
            .unwrap();
        j.append(&mut s, step(2, "p", 0, StepState::Succeeded))
            .unwrap();
        j.append(&mut s, step(3, "p", 1, StepState::Started))
            .unwrap();
        j.append(&mut s, step(4, "p", 1, StepState::Succeeded))
            .unwrap();
        j.append(
            &mut s,
            Entry::RebootRequested {
                plan_id: "p".into(),
                step_index: 1,
                boot_id: "b1".into(),
                requested_unix_ns: 0,
            },
        )
        .unwrap();
        j.append(&mut s, step(5, "p", 2, StepState::Started))
            .unwrap();
        // crash: step 2 (the measure) cut off; the agent opens its preparation again
        j.append(
            &mut s,
            Entry::Rerun {
                plan_id: "p".into(),
                measure: 2,
                started: 1,
                steps: vec![0, 1],
            },
        )
        .unwrap();
        let check = |s: &State| {
            let p = s.current().unwrap();
            assert_eq!(p.next_step(), Some(0));
            assert_eq!(
                p.attempts.get(&0),
                Some(&1),
                "step 0 runs again as attempt 2"
            );
            assert_eq!(p.cut_offs(0), 0, "step 0 was never cut off");
            assert_eq!(p.cut_offs(2), 1);
            assert_eq!(p.reruns.get(&2), Some(&1));
            assert_eq!(p.reboot, None, "the reopened reboot is asked for again");
            assert_eq!(p.skip_attempt(0), 2, "attempt 1 of step 0 has its end");
            assert_eq!(p.skip_attempt(2), 1, "attempt 1 of the measure was cut off");
            assert_eq!(p.skip_attempt(3), 0, "never started");
            assert_eq!(
                p.last_end(1).map(|e| e.state),
                Some(StepState::Succeeded),
                "the earlier attempt's end is still known"
            );
        };
        check(&s);
        j.compact(&s).unwrap();
        drop(j);
        let (mut j, mut s) = Journal::open(dir.path()).unwrap();
        check(&s);
        j.append(&mut s, step(6, "p", 0, StepState::Started))
            .unwrap();
        drop(j);
        let (_, s) = Journal::open(dir.path()).unwrap();
        let p = s.current().unwrap();
        assert_eq!(p.attempts.get(&0), Some(&2));
        assert_eq!(p.cut_offs(0), 1, "attempt 2 of step 0 was cut off");
    }

    #[test]
    fn compaction_keeps_what_matters() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, mut s) = Journal::open(dir.path()).unwrap();
        j.append(&mut s, Entry::Plan(plan("done", 1))).unwrap();
        j.append(&mut s, step(1, "done", 0, StepState::Succeeded))
            .unwrap();
        j.append(
            &mut s,
            Entry::Record(Record {
                seq: 2,
                kind: RecordKind::PlanFinished {
                    plan_id: "done".into(),
                    cancelled: false,
                },
            }),
        )
        .unwrap();
        j.append(&mut s, Entry::Acked(1)).unwrap();
        j.append(&mut s, Entry::Plan(plan("open", 2))).unwrap();
        j.append(&mut s, step(3, "open", 0, StepState::Succeeded))
            .unwrap();
        j.append(&mut s, Entry::Acked(3)).unwrap();
        j.compact(&s).unwrap();
        drop(j);
        let (_, r) = Journal::open(dir.path()).unwrap();
        assert_eq!(r.next_seq, 4);
        assert!(r.finished.contains("done"));
        assert!(r.unacked.is_empty(), "record 2 was acked by Acked(3)");
        assert_eq!(r.current().unwrap().plan.id, "open");
        assert_eq!(r.current().unwrap().next_step(), Some(1));
    }

    /// A journal whose last records carry multi-byte characters ("µs", "é", "…"), and the
    /// entries it was written from.
    fn multibyte_journal(dir: &Path) -> Vec<Entry> {
        let sample = |metric: &str, value: f64| crate::model::Sample {
            metric: metric.into(),
            value,
            unit: "µs".into(),
            histogram: vec![],
            missing: String::new(),
        };
        let ended = |seq, idx, state, error: &str, stderr: &str, samples| {
            let Entry::Record(mut r) = step(seq, "p", idx, state) else {
                unreachable!()
            };
            let RecordKind::Step(e) = &mut r.kind else {
                unreachable!()
            };
            e.error = error.into();
            e.stderr_tail = stderr.into();
            e.samples = samples;
            Entry::Record(r)
        };
        let entries = vec![
            Entry::Plan(plan("p", 4)),
            Entry::Record(Record {
                seq: 1,
                kind: RecordKind::PlanAccepted {
                    plan_id: "p".into(),
                },
            }),
            step(2, "p", 0, StepState::Started),
            ended(
                3,
                0,
                StepState::Succeeded,
                "",
                "",
                vec![sample("latency.p50", 12.5)],
            ),
            Entry::Acked(2),
            step(4, "p", 1, StepState::Started),
            ended(
                5,
                1,
                StepState::Failed,
                "fio: café — 0.5 µs over the limit",
                "ünïcödé…",
                vec![sample("latency.p99", 80.25)],
            ),
            step(6, "p", 2, StepState::Started),
            ended(
                7,
                2,
                StepState::Succeeded,
                "",
                "é",
                vec![sample("latency.p50", 9.0), sample("latency.p99", 41.5)],
            ),
        ];
        let (mut j, mut s) = Journal::open(dir).unwrap();
        for e in &entries {
            j.append(&mut s, e.clone()).unwrap();
        }
        entries
    }

    /// The state replaying these entries gives.
    fn replayed(entries: &[Entry]) -> State {
        let mut s = State {
            next_seq: 1,
            ..State::default()
        };
        for e in entries {
            s.apply(e.clone());
        }
        s
    }

    /// Every line of the journal in `dir` is newline-terminated and parses; no NUL byte.
    fn assert_clean(dir: &Path) -> Vec<Entry> {
        let bytes = std::fs::read(dir.join(FILE)).unwrap();
        assert!(!bytes.contains(&0), "no padding: {bytes:?}");
        assert!(bytes.is_empty() || bytes.ends_with(b"\n"));
        bytes
            .split_inclusive(|&b| b == b'\n')
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect()
    }

    /// Opens the journal, appends records, reopens — twice, as an agent started,
    /// stopped and started again — then checks each state against a replay of `entries`
    /// plus what was appended, and that the file is clean.
    fn open_append_reopen(dir: &Path, mut entries: Vec<Entry>) {
        let mut opened = Vec::new();
        for round in 0..3 {
            let (mut j, mut s) =
                Journal::open(dir).unwrap_or_else(|e| panic!("open {round} after the cut: {e}"));
            opened.push((s.clone(), entries.len()));
            // More than one append, as a running agent makes.
            for next in [
                step(s.next_seq, "p", 3, StepState::Started),
                Entry::Acked(s.next_seq),
            ] {
                j.append(&mut s, next.clone()).unwrap();
                entries.push(next);
            }
        }
        for (round, (s, n)) in opened.iter().enumerate() {
            assert_eq!(s, &replayed(&entries[..*n]), "open {round} after the cut");
        }
        assert_eq!(assert_clean(dir), entries);
    }

    /// A crash can cut the last append anywhere, even inside a character: for every cut
    /// inside the last three records, the journal opens to the state of the complete
    /// records before the cut, and appends after it read back.
    #[test]
    fn a_cut_anywhere_in_the_last_records_opens_to_the_complete_records_before_it() {
        let src = tempfile::tempdir().unwrap();
        let entries = multibyte_journal(src.path());
        let bytes = std::fs::read(src.path().join(FILE)).unwrap();
        let ends: Vec<usize> = bytes
            .iter()
            .enumerate()
            .filter(|(_, &b)| b == b'\n')
            .map(|(i, _)| i + 1)
            .collect();
        assert_eq!(ends.len(), entries.len());
        let from = ends[ends.len() - 4];
        assert!(
            bytes[from..].iter().any(|b| !b.is_ascii()),
            "the last records hold multi-byte characters"
        );
        let dir = tempfile::tempdir().unwrap();
        for cut in from..=bytes.len() {
            let complete = ends.iter().filter(|&&e| e <= cut).count();
            std::fs::write(dir.path().join(FILE), &bytes[..cut]).unwrap();
            let (j, s) = Journal::open(dir.path())
                .unwrap_or_else(|e| panic!("cut at byte {cut} of {}: {e}", bytes.len()));
            assert_eq!(s, replayed(&entries[..complete]), "cut at byte {cut}");
            assert_eq!(j.len, ends[complete - 1] as u64, "cut at byte {cut}");
            drop(j);
            assert_eq!(
                std::fs::metadata(dir.path().join(FILE)).unwrap().len(),
                ends[complete - 1] as u64,
                "the torn tail is cut off the file at byte {cut}"
            );
            open_append_reopen(dir.path(), entries[..complete].to_vec());
        }
    }

    /// Issue 10 (a): `truncate -s -1 journal.jsonl`, start, stop, start again.
    #[test]
    fn a_last_record_without_its_newline_is_dropped_and_appends_after_it_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let entries = multibyte_journal(dir.path());
        let path = dir.path().join(FILE);
        let len = std::fs::metadata(&path).unwrap().len();
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 1)
            .unwrap();
        open_append_reopen(dir.path(), entries[..entries.len() - 1].to_vec());
    }

    /// Issue 10 (b): the last record cut between the two bytes of an "é".
    #[test]
    fn a_last_record_cut_inside_a_character_is_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let entries = multibyte_journal(dir.path());
        let path = dir.path().join(FILE);
        let bytes = std::fs::read(&path).unwrap();
        let last = bytes[..bytes.len() - 1]
            .iter()
            .rposition(|&b| b == b'\n')
            .unwrap()
            + 1;
        let e_acute = "é".as_bytes();
        let at = last
            + bytes[last..]
                .windows(2)
                .position(|w| w == e_acute)
                .expect("the last record holds an é");
        std::fs::write(&path, &bytes[..at + 1]).unwrap();
        open_append_reopen(dir.path(), entries[..entries.len() - 1].to_vec());
    }

    /// Only a tail with no valid record after it is torn: a bad line before a valid
    /// record (newline-terminated or not) is corruption, and the file is left as it was.
    #[test]
    fn a_bad_line_before_a_valid_record_is_corruption_not_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        for (text, line) in [
            ("{\"acked\":1}\ngarbage\n{\"acked\":2}\n", 2),
            ("{\"acked\":1}\ngarbage\n{\"acked\":2}", 2),
            ("{\"acked\":1}\n\u{0}\u{0}\n{\"acked\":2}\n{\"ack", 2),
        ] {
            std::fs::write(&path, text).unwrap();
            match Journal::open(dir.path()) {
                Err(JournalError::Corrupt { line: l, .. }) => assert_eq!(l, line, "{text:?}"),
                other => panic!("{text:?}: {:?}", other.map(|(_, s)| s)),
            }
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        }
        // Bad lines with nothing valid after them are all torn tail.
        std::fs::write(&path, "{\"acked\":1}\n{\"ack\n\u{0}\u{0}\n{\"acked\":2").unwrap();
        let (_, s) = Journal::open(dir.path()).unwrap();
        assert_eq!(s.acked, 1);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"acked\":1}\n");
    }
}
