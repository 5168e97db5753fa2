//! The step state machine: takes held plans from the journal and runs their steps one at a
//! time, journaling each step's start and end (fsync'd) before the link may send them.
//! It runs on its own OS thread so a blocking wait4 or fsync never stalls the link. It is
//! the only writer of the journal, and it writes nothing while a measure step runs.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::journal::{Entry, Journal, JournalError, State};
use crate::model::{
    Encryption, FsyncParams, OnFailure, Plan, Record, RecordKind, RunAs, Sample, Step, StepEvent,
    StepKind, StepState, StorageConfig, Workload, NOT_MEASURED,
};
use crate::preflight;
use crate::probes::provenance::{self, Provenance};
use crate::probes::{diskstats, inventory, tools};
use crate::process;
use crate::shared::Shared;
use crate::storage::{self, Storage};
use crate::workloads::{self, Ending};
use crate::{precondition, purge};

/// A step started this many times without ending (the agent crashed each time) fails.
pub(crate) const MAX_ATTEMPTS: u32 = 3;
/// How often a journal that could not be written (a full or read-only state directory)
/// is tried again while the executor holds its steps.
pub(crate) const JOURNAL_RETRY: Duration = Duration::from_secs(1);
/// How long a measure step waits for the coordinator to ack what was sent before it, so
/// that storing those records does not compete with the measurement.
pub(crate) const QUIESCE_TIMEOUT: Duration = Duration::from_secs(2);
/// The journal records the coordinator's acks once this many more records were acked
/// (and when the agent stops): a restart resends at most this many, which the store
/// takes once. Journaled at every step, the acks cost a plan of `/bin/true` steps a
/// write and an fdatasync per step.
pub(crate) const ACKS_PERSISTED_EVERY: u64 = 256;

#[derive(Debug, Clone)]
pub(crate) struct ExecConfig {
    pub host: String,
    pub boot_id: String,
    pub state_dir: PathBuf,
    pub reboot_command: String,
    /// How long a requested reboot may take before the step fails.
    pub reboot_timeout: Duration,
    pub storage: Storage,
}

pub(crate) struct Executor {
    cfg: ExecConfig,
    /// Plans whose provenance this process has sent (again after every start, so a
    /// reboot or restart in the middle of a plan is on record with its new boot).
    described: std::collections::HashSet<String>,
    /// The storage the current step runs on (derived from the plan, never stored).
    active_storage: Option<StorageConfig>,
    /// The current plan runs workloads as other users, who must reach its storage.
    shared_storage: bool,
    journal: Journal,
    state: State,
    shared: Arc<Shared>,
    plans: mpsc::UnboundedReceiver<Plan>,
    /// The agent's stop, given to `run`: it ends a wait for the journal.
    stop: CancellationToken,
}

/// The filesystem type mounted at (or above) `path`, from /proc/self/mountinfo
/// (`tmpfs`, `fuse.gocryptfs`, …).
fn fs_type(path: &std::path::Path) -> Option<String> {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    crate::probes::mountinfo::read("/proc/self/mountinfo".as_ref())
        .ok()?
        .into_iter()
        .filter(|m| m.complete && path.starts_with(&m.mount_point))
        .map(|m| (m.mount_point.len(), m.fs_type))
        // The last of the longest: a later mount on the same point hides the earlier one.
        .max_by_key(|(len, _)| *len)
        .map(|(_, fs)| fs)
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

impl Executor {
    pub(crate) fn new(
        cfg: ExecConfig,
        journal: Journal,
        state: State,
        shared: Arc<Shared>,
        plans: mpsc::UnboundedReceiver<Plan>,
    ) -> Executor {
        shared.set_held(state.plans.values().map(|p| p.plan.id.clone()).collect());
        Executor {
            cfg,
            described: Default::default(),
            active_storage: None,
            shared_storage: false,
            journal,
            state,
            shared,
            plans,
            stop: CancellationToken::new(),
        }
    }

    /// Runs until `shutdown` is cancelled or the plan channel closes. Blocking: call it on
    /// a thread of its own.
    pub(crate) fn run(mut self, shutdown: CancellationToken) -> Result<(), JournalError> {
        self.stop = shutdown.clone();
        loop {
            while let Ok(plan) = self.plans.try_recv() {
                self.accept(plan)?;
            }
            if shutdown.is_cancelled() {
                self.shared.send_now();
                return self.persist_acks();
            }
            if let Some(plan_id) = self.state.current().map(|p| p.plan.id.clone()) {
                self.advance(&plan_id, &shutdown)?;
                continue;
            }
            // Nothing to run: what was pushed quietly goes now.
            self.shared.send_now();
            match self.plans.blocking_recv() {
                Some(plan) => self.accept(plan)?,
                // The link has stopped, after waiting for the last acks: journal them, so
                // the next start does not send those records again.
                None => return self.persist_acks(),
            }
        }
    }

    fn accept(&mut self, plan: Plan) -> Result<(), JournalError> {
        if plan.host != self.cfg.host {
            tracing::warn!(plan = %plan.id, host = %plan.host, "refusing a plan addressed to another host");
            return Ok(());
        }
        if self.state.finished.contains(&plan.id) {
            // The coordinator did not hear that this plan ended (its store lost the record
            // or it never arrived): say so again.
            let plan_id = plan.id.clone();
            self.emit(RecordKind::PlanAccepted {
                plan_id: plan_id.clone(),
            })?;
            return self.emit(RecordKind::PlanFinished {
                plan_id,
                cancelled: false,
            });
        }
        if self.state.held(&plan.id).is_none() {
            // Destructive steps, and what the plan needs of the host (programs, users),
            // are judged before anything of the plan runs.
            let storage = plan.steps.iter().find_map(|s| {
                self.cfg
                    .storage
                    .step_refusal(&s.kind, storage::Judged::OnArrival)
            });
            let check = preflight::Check {
                host: &self.cfg.host,
                storage: &self.cfg.storage,
                substitute: &|script, step, storage| self.substitute_on(script, step, storage),
                agent_uid: rustix::process::geteuid().as_raw(),
            };
            let needs = check.refusal(&plan);
            let refusal = match (storage, needs) {
                (Some(a), Some(b)) => Some(format!("{a}; {b}")),
                (a, b) => a.or(b),
            };
            if let Some(reason) = refusal {
                tracing::warn!(plan = %plan.id, %reason, "plan refused");
                return self.emit(RecordKind::PlanRefused {
                    plan_id: plan.id,
                    reason,
                });
            }
            tracing::info!(plan = %plan.id, campaign = %plan.campaign_name, steps = plan.steps.len(), "plan received");
            let plan_id = plan.id.clone();
            self.append(Entry::Plan(plan))?;
            self.publish_held();
            self.emit(RecordKind::PlanAccepted { plan_id })?;
        }
        Ok(())
    }

    fn persist_acks(&mut self) -> Result<(), JournalError> {
        let acked = self.shared.acked();
        if acked > self.state.acked {
            self.append(Entry::Acked(acked))?;
        }
        Ok(())
    }

    /// `persist_acks` once `ACKS_PERSISTED_EVERY` records were acked since the journal
    /// last said: between steps, so that a restart resends at most that many (the store
    /// takes a record it has once), without a journal write and fdatasync for every step.
    fn persist_some_acks(&mut self) -> Result<(), JournalError> {
        if self.shared.acked() >= self.state.acked + ACKS_PERSISTED_EVERY {
            self.persist_acks()?;
        }
        Ok(())
    }

    /// Appends `entry` to the journal. While the journal's filesystem is full or read-only
    /// this holds the executor — no step starts or ends unjournaled, so nothing runs —
    /// and tries again every `JOURNAL_RETRY` until a write succeeds or the agent stops.
    /// Said once at ERROR when the hold begins and once when it ends (at WARN, so that
    /// `platter run`, which shows warnings, says the fault is over). What was journaled
    /// before stays, and the link goes on sending it.
    fn append(&mut self, entry: Entry) -> Result<(), JournalError> {
        let mut held: Option<Instant> = None;
        loop {
            match self.journal.append(&mut self.state, entry.clone()) {
                Ok(()) => {
                    if let Some(since) = held {
                        self.shared.set_journal_fault(None);
                        tracing::warn!(
                            held_s = since.elapsed().as_secs(),
                            "the journal can be written again: the agent's steps go on"
                        );
                    }
                    return Ok(());
                }
                Err(e) if e.is_full_or_read_only() && !self.stop.is_cancelled() => {
                    if held.is_none() {
                        tracing::error!(error = %e, "the agent holds its steps: nothing runs that its journal cannot record; make room in or fix its state directory (--state-dir) and they go on, nothing lost");
                        held = Some(Instant::now());
                        // What was journaled before goes on to the coordinator meanwhile.
                        self.shared.send_now();
                        // For the coordinator (`platter agents`), with the next heartbeat.
                        self.shared.set_journal_fault(Some(e.to_string()));
                    }
                    let until = Instant::now() + JOURNAL_RETRY;
                    while Instant::now() < until {
                        if self.stop.is_cancelled() {
                            return Err(e);
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn publish_held(&self) {
        self.shared.set_held(
            self.state
                .plans
                .values()
                .map(|p| p.plan.id.clone())
                .collect(),
        );
    }

    /// Journals a record, then hands it to the link.
    fn emit(&mut self, kind: RecordKind) -> Result<(), JournalError> {
        let record = self.journaled(kind)?;
        self.shared.push(record);
        Ok(())
    }

    /// `emit` without waking the link (a step's end, a measure step's start within a
    /// batch): the link sends it with the next record emitted, a measurement's flush
    /// (`Shared::quiesce`), a heartbeat, or when the executor waits for plans.
    fn emit_quietly(&mut self, kind: RecordKind) -> Result<(), JournalError> {
        let record = self.journaled(kind)?;
        self.shared.push_quietly(record);
        Ok(())
    }

    /// The next record, journaled.
    fn journaled(&mut self, kind: RecordKind) -> Result<Record, JournalError> {
        let record = Record {
            seq: self.state.next_seq,
            kind,
        };
        self.append(Entry::Record(record.clone()))?;
        Ok(record)
    }

    fn event(
        &self,
        plan_id: &str,
        step: &Step,
        attempt: u32,
        state: StepState,
        started: i64,
    ) -> StepEvent {
        StepEvent {
            plan_id: plan_id.to_string().into(),
            kind: step.kind.name().to_string(),
            step_index: step.index,
            cell_id: step.cell_id.clone(),
            repetition: step.repetition,
            attempt,
            state,
            started_unix_ns: started,
            finished_unix_ns: if state == StepState::Started {
                0
            } else {
                now_ns()
            },
            exit_status: 0,
            stderr_tail: String::new(),
            error: String::new(),
            samples: Vec::new(),
        }
    }

    fn end(
        &mut self,
        plan_id: &str,
        step: &Step,
        attempt: u32,
        started: i64,
        ending: Ending,
    ) -> Result<(), JournalError> {
        let state = if ending.failed {
            StepState::Failed
        } else {
            StepState::Succeeded
        };
        self.end_as(plan_id, step, attempt, started, state, ending)
    }

    fn end_as(
        &mut self,
        plan_id: &str,
        step: &Step,
        attempt: u32,
        started: i64,
        state: StepState,
        ending: Ending,
    ) -> Result<(), JournalError> {
        let mut e = self.event(plan_id, step, attempt, state, started);
        e.exit_status = ending.exit_status;
        e.stderr_tail = ending.stderr_tail;
        e.error = ending.error;
        e.samples = ending.samples;
        if ending.failed {
            tracing::warn!(plan = %plan_id, step = step.index, error = %e.error, "step failed");
        }
        self.emit_quietly(RecordKind::Step(e))
    }

    /// Runs the next step of `plan_id`, or ends the plan when no step is left.
    fn advance(&mut self, plan_id: &str, shutdown: &CancellationToken) -> Result<(), JournalError> {
        // Persist acks at step boundaries only, so a restart does not resend everything.
        self.persist_some_acks()?;
        let progress = self
            .state
            .held(plan_id)
            .expect("advance is called for held plans");
        let Some(index) = progress.next_step() else {
            return self.finish_plan(plan_id);
        };
        let step = progress.plan.steps[index as usize].clone();
        let run_as = progress.plan.run_as(&step).cloned();
        let attempt = progress.attempts.get(&index).copied().unwrap_or(0) + 1;
        let aborted = progress.plan.on_failure == OnFailure::Abort && !progress.failed.is_empty();
        let reboot = progress.reboot.clone().filter(|r| r.step_index == index);

        // Teardown undoes setup whatever happened: it runs even in a cancelled or
        // aborted plan.
        let teardown = matches!(step.kind, StepKind::StorageTeardown(_));
        self.active_storage = progress.storage_at(index);
        self.shared_storage = !progress.plan.run_as.is_empty();
        if (self.shared.is_cancelled(plan_id) || aborted) && !teardown {
            let why = if aborted {
                "skipped: an earlier step failed and on_failure is abort"
            } else {
                "skipped: cancelled"
            };
            return self.skip(plan_id, &step, progress.skip_attempt(index), why.into());
        }
        if let Some(r) = reboot {
            if r.boot_id != self.cfg.boot_id {
                tracing::info!(plan = %plan_id, step = index, from = %r.boot_id, to = %self.cfg.boot_id, "reboot completed");
                let ending = Ending::default();
                return self.end(
                    plan_id,
                    &step,
                    attempt.saturating_sub(1).max(1),
                    r.requested_unix_ns,
                    ending,
                );
            }
        }
        let prep = progress.plan.preparation(index);
        // A measurement of a state other than the one the campaign asked for is not a
        // sample: if the preparation failed, the measure step is skipped, saying why.
        if let Some(failed) = prep.clone().find(|i| progress.failed.contains(i)) {
            let why = progress
                .last_end(failed)
                .map(|e| e.error.clone())
                .unwrap_or_default();
            let failed_step = &progress.plan.steps[failed as usize];
            let error = format!(
                "{NOT_MEASURED}: {} (step {failed}): {why}",
                failed_step.kind.name()
            );
            tracing::warn!(plan = %plan_id, step = index, error = %error, "measurement skipped");
            return self.skip(plan_id, &step, progress.skip_attempt(index), error);
        }
        let cut_offs = progress.cut_offs(index);
        if cut_offs >= MAX_ATTEMPTS {
            let ending = Ending::error(format!(
                "the agent stopped during this step {cut_offs} times (crash, kill or power loss); not trying again",
            ));
            return self.end(plan_id, &step, attempt - 1, now_ns(), ending);
        }
        // A measurement cut off runs again on the state its repetition's preparation
        // makes, not on whatever the interrupted run left: open the preparation again
        // (once per cut-off attempt), then come back to the measure.
        let started_before = attempt - 1;
        if cut_offs > 0 && !prep.is_empty() && progress.reruns.get(&index) != Some(&started_before)
        {
            tracing::info!(plan = %plan_id, step = index, attempt, preparation = ?prep, "the measurement was cut off: its preparation runs again");
            return self.append(Entry::Rerun {
                plan_id: plan_id.to_string().into(),
                measure: index,
                started: started_before,
                steps: prep.collect(),
            });
        }

        if !self.described.contains(plan_id) {
            self.describe(plan_id, index)?;
        }
        // The storage the step runs on must still be there (a power loss unmounts it).
        let uses_storage = !matches!(
            step.kind,
            StepKind::StorageSetup(_)
                | StepKind::StorageTeardown(_)
                | StepKind::Reboot
                | StepKind::Purge(_)
                | StepKind::Precondition(_)
        );
        if let Some(c) = self.active_storage.as_ref().filter(|_| uses_storage) {
            if let Err(e) = self.cfg.storage.check_in_place(c) {
                tracing::warn!(plan = %plan_id, step = index, error = %e, "storage missing");
                return self.end(plan_id, &step, attempt, now_ns(), Ending::error(e));
            }
        }
        let started = now_ns();
        let event =
            RecordKind::Step(self.event(plan_id, &step, attempt, StepState::Started, started));
        // A measure step's start goes with the batch its measurement flushes, or the next.
        if matches!(step.kind, StepKind::Measure(_)) && self.shared.measure_goes_quietly() {
            self.emit_quietly(event)?;
        } else {
            self.emit(event)?;
        }
        self.shared
            .set_current(Some((plan_id.to_string().into(), index)));
        let (state, ending) = match &step.kind {
            StepKind::Reboot => match self.reboot(plan_id, index, attempt, started, shutdown)? {
                Some(ending) => (StepState::Failed, ending),
                // Shutting down for the reboot: the step ends when the agent starts again.
                None => return Ok(()),
            },
            StepKind::Fstrim(path) => self.fstrim(plan_id, &step, attempt, path),
            _ => {
                let ending = self.execute(plan_id, &step, attempt, run_as.as_ref());
                let state = if ending.skipped {
                    StepState::Skipped
                } else if ending.failed {
                    StepState::Failed
                } else {
                    StepState::Succeeded
                };
                (state, ending)
            }
        };
        self.shared.set_current(None);
        if shutdown.is_cancelled() {
            // The step was cut off by the agent stopping (its process group was killed):
            // leave it started, so it runs again from its start when the agent comes back.
            return Ok(());
        }
        let made = match &step.kind {
            StepKind::StorageSetup(c) if state == StepState::Succeeded => Some(c.clone()),
            _ => None,
        };
        self.end_as(plan_id, &step, attempt, started, state, ending)?;
        match made {
            Some(c) => self.storage_made(plan_id, index, &c),
            None => Ok(()),
        }
    }

    /// Ends a plan with no step left: the drives' health after its last measurement, then
    /// `PlanFinished`.
    fn finish_plan(&mut self, plan_id: &str) -> Result<(), JournalError> {
        let progress = self
            .state
            .held(plan_id)
            .expect("finish_plan is called for held plans");
        let under_test = drives_under_test(&progress.plan);
        if !under_test.is_empty() {
            let paths: Vec<&str> = under_test.iter().map(String::as_str).collect();
            let last = progress.plan.steps.len().saturating_sub(1) as u32;
            let health = provenance::health(&self.cfg.storage.inventory_roots, &paths);
            self.emit(RecordKind::Provenance {
                plan_id: plan_id.to_string().into(),
                step_index: last,
                facts: Box::new(Provenance {
                    trigger: provenance::AT_PLAN_END.into(),
                    health,
                    ..Provenance::default()
                }),
            })?;
        }
        let cancelled = self.shared.is_cancelled(plan_id);
        self.emit(RecordKind::PlanFinished {
            plan_id: plan_id.to_string().into(),
            cancelled,
        })?;
        tracing::info!(plan = %plan_id, cancelled, "plan finished");
        self.publish_held();
        self.journal.maybe_compact(&self.state)
    }

    /// Records `step` as skipped (not run) at `attempt`, saying why.
    fn skip(
        &mut self,
        plan_id: &str,
        step: &Step,
        attempt: u32,
        why: String,
    ) -> Result<(), JournalError> {
        let mut e = self.event(plan_id, step, attempt, StepState::Skipped, 0);
        e.error = why;
        self.emit(RecordKind::Step(e))
    }

    /// What a storage setup made, as the system has it now: mounts, mkfs version, write
    /// cache.
    fn storage_made(
        &mut self,
        plan_id: &str,
        index: u32,
        c: &StorageConfig,
    ) -> Result<(), JournalError> {
        self.emit(RecordKind::Provenance {
            plan_id: plan_id.to_string().into(),
            step_index: index,
            facts: Box::new(Provenance {
                trigger: provenance::AT_STORAGE_SETUP.into(),
                devices: provenance::devices(
                    &self.cfg.storage.inventory_roots,
                    Some(c.device.as_deref().as_slice()),
                ),
                storage: Some(self.cfg.storage.facts(c)),
                ..Provenance::default()
            }),
        })
    }

    /// Sends what the plan runs on before its first step in this process: the host, its
    /// drives (a cell names its device; which of them that is, the coordinator knows) and
    /// the versions of the plan's tools.
    fn describe(&mut self, plan_id: &str, index: u32) -> Result<(), JournalError> {
        let progress = self.state.held(plan_id).expect("held");
        let plan = &progress.plan;
        let mut versions = std::collections::BTreeMap::new();
        for s in &plan.steps {
            match &s.kind {
                StepKind::StorageSetup(c) if c.encryption == Encryption::Gocryptfs => {
                    versions
                        .entry("gocryptfs".into())
                        .or_insert_with(|| tools::version("gocryptfs"));
                }
                // Asked as the inventory asks (bonnie++ from its usage text), once per program.
                StepKind::Measure(Workload::Tool { argv, .. }) => {
                    let program = argv.first().map(String::as_str).unwrap_or_default();
                    versions
                        .entry(program.to_string())
                        .or_insert_with(|| tools::version(program));
                }
                _ => {}
            }
        }
        let trigger = if progress.ended.is_empty() && progress.attempts.is_empty() {
            provenance::AT_PLAN_START
        } else {
            provenance::AT_RESUME
        };
        // The drives' health before the first measurement (or where the plan is taken up).
        let under_test = drives_under_test(plan);
        let paths: Vec<&str> = under_test.iter().map(String::as_str).collect();
        if !paths.is_empty() {
            versions
                .entry("smartctl".into())
                .or_insert_with(|| tools::version("smartctl"));
        }
        let facts = Provenance {
            trigger: trigger.into(),
            host: Some(provenance::host(&self.cfg.boot_id)),
            devices: provenance::devices(&self.cfg.storage.inventory_roots, None),
            storage: None,
            tools: versions,
            health: provenance::health(&self.cfg.storage.inventory_roots, &paths),
        };
        self.described.insert(plan_id.to_string());
        self.emit(RecordKind::Provenance {
            plan_id: plan_id.to_string().into(),
            step_index: index,
            facts: Box::new(facts),
        })
    }

    fn env(&self, plan_id: &str, step: &Step, attempt: u32) -> Vec<(String, OsString)> {
        vec![
            ("PLATTER_HOST".into(), self.cfg.host.clone().into()),
            ("PLATTER_PLAN".into(), plan_id.into()),
            ("PLATTER_CELL".into(), step.cell_id.as_str().into()),
            (
                "PLATTER_REPETITION".into(),
                step.repetition.to_string().into(),
            ),
            ("PLATTER_ATTEMPT".into(), attempt.to_string().into()),
            (
                "PLATTER_AGENT_PID".into(),
                std::process::id().to_string().into(),
            ),
            (
                "PLATTER_STATE_DIR".into(),
                self.cfg.state_dir.clone().into_os_string(),
            ),
        ]
    }

    /// Fills in what only the agent knows.
    fn substitute(&self, script: &str, step: &Step) -> String {
        self.substitute_on(script, step, self.active_storage.as_ref())
    }

    /// `substitute` for a step that runs on `storage`.
    fn substitute_on(&self, script: &str, step: &Step, storage: Option<&StorageConfig>) -> String {
        let (mount, device) = match storage {
            Some(c) => (
                self.cfg.storage.mount_point(c).display().to_string(),
                c.device.clone().unwrap_or_default(),
            ),
            None => (String::new(), String::new()),
        };
        script
            .replace("${host}", &self.cfg.host)
            .replace("${cell}", &step.cell_id)
            .replace("${repetition}", &step.repetition.to_string())
            .replace("${mount}", &mount)
            .replace("${device}", &device)
    }

    fn substitute_workload(&self, w: &Workload, step: &Step) -> Workload {
        match w {
            Workload::Command(s) => Workload::Command(self.substitute(s, step)),
            Workload::Fsync(p) => Workload::Fsync(FsyncParams {
                path: self.substitute(&p.path, step),
                ..p.clone()
            }),
            Workload::Tool { tool, argv } => Workload::Tool {
                tool: *tool,
                argv: argv.iter().map(|a| self.substitute(a, step)).collect(),
            },
        }
    }

    fn shell(
        &self,
        plan_id: &str,
        step: &Step,
        attempt: u32,
        script: &str,
    ) -> Result<process::Outcome, Ending> {
        self.shell_as(plan_id, step, attempt, script, None)
    }

    /// `shell` as `user` (with its environment: `HOME`, `USER`, `LOGNAME`).
    fn shell_as(
        &self,
        plan_id: &str,
        step: &Step,
        attempt: u32,
        script: &str,
        user: Option<&(process::Credentials, Vec<(String, OsString)>)>,
    ) -> Result<process::Outcome, Ending> {
        let script = self.substitute(script, step);
        let mut env = self.env(plan_id, step, attempt);
        env.extend(user.iter().flat_map(|(_, vars)| vars.iter().cloned()));
        process::run_as(
            &script,
            &env,
            user.map(|(c, _)| c),
            &self.shared.running_pgid,
        )
        .map_err(|e| Ending::error(format!("could not start `{script}`: {e}")))
    }

    /// The user a workload's command runs as: its credentials and environment, its home
    /// made (on the storage under test, after any storage setup) and given to it.
    fn as_user(
        &self,
        step: &Step,
        run_as: &RunAs,
    ) -> Result<(process::Credentials, Vec<(String, OsString)>), Ending> {
        let account = match preflight::account(&run_as.user) {
            Ok(Some(a)) => a,
            Ok(None) => {
                return Err(Ending::error(format!(
                    "no user {} on this host",
                    run_as.user
                )))
            }
            Err(e) => {
                return Err(Ending::error(format!(
                    "looking up user {}: {e}",
                    run_as.user
                )))
            }
        };
        let home = if run_as.home.is_empty() {
            account.home.clone()
        } else {
            let home = PathBuf::from(self.substitute(&run_as.home, step));
            preflight::make_home(&home, &account).map_err(|e| {
                Ending::error(format!(
                    "making {} the home of user {}: {e}",
                    home.display(),
                    run_as.user
                ))
            })?;
            home
        };
        let vars = vec![
            ("HOME".to_string(), home.into_os_string()),
            ("USER".to_string(), run_as.user.clone().into()),
            ("LOGNAME".to_string(), run_as.user.clone().into()),
        ];
        let credentials = process::Credentials {
            uid: account.uid,
            gid: account.gid,
            groups: account.groups,
        };
        Ok((credentials, vars))
    }

    fn execute(
        &mut self,
        plan_id: &str,
        step: &Step,
        attempt: u32,
        run_as: Option<&RunAs>,
    ) -> Ending {
        let user = match run_as.map(|r| self.as_user(step, r)).transpose() {
            Ok(user) => user,
            Err(ending) => return ending,
        };
        match &step.kind {
            StepKind::Setup(s) | StepKind::Clean(s) | StepKind::Command(s) => {
                match self.shell_as(plan_id, step, attempt, s, user.as_ref()) {
                    Ok(o) => Ending::from_outcome(&o, step.kind.name()),
                    Err(e) => e,
                }
            }
            StepKind::Measure(w) => {
                let workload = self.substitute_workload(w, step);
                let mut env = self.env(plan_id, step, attempt);
                env.extend(user.iter().flat_map(|(_, vars)| vars.iter().cloned()));
                // The device under test's counters around the workload prove what reached
                // the device (e.g. one flush per fdatasync). Reading /proc writes nothing.
                let disk = self
                    .active_storage
                    .as_ref()
                    .and_then(|c| c.device.as_deref())
                    .map(inventory::disk_name);
                let quiet = self.shared.quiesce(QUIESCE_TIMEOUT);
                if !quiet.acked {
                    tracing::debug!(plan = %plan_id, step = step.index, "measuring with records the coordinator has not acked (not connected, or slower than the quiesce's timeout)");
                }
                // A cancel that came while the step waited for its acks: nothing is
                // measured (a measurement of a cancelled plan would be stored as a sample).
                if self.shared.is_cancelled(plan_id) {
                    return Ending {
                        skipped: true,
                        error: "skipped: cancelled before the measurement began".into(),
                        ..Ending::default()
                    };
                }
                self.shared.measuring.store(true, Ordering::SeqCst);
                let before = disk.as_deref().map(diskstats::read);
                let credentials = user.as_ref().map(|(c, _)| c);
                let mut m =
                    workloads::measure_as(&workload, &env, credentials, &self.shared.running_pgid);
                let after = disk.as_deref().map(diskstats::read);
                self.shared.measuring.store(false, Ordering::SeqCst);
                if let (Some(Ok(before)), Some(Ok(after)), false) = (before, after, m.failed) {
                    m.samples
                        .extend(after.delta(&before).samples().into_iter().map(
                            |(metric, value, unit)| Sample {
                                metric,
                                value,
                                unit,
                                histogram: Vec::new(),
                                missing: String::new(),
                            },
                        ));
                }
                m
            }
            StepKind::Sync => {
                rustix::fs::sync();
                Ending::default()
            }
            StepKind::DropCaches => {
                // Dirty pages must be written before they can be dropped.
                rustix::fs::sync();
                match std::fs::write("/proc/sys/vm/drop_caches", "3\n") {
                    Ok(()) => Ending::default(),
                    Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                        Ending::error("drop_caches needs root: run platter-agent (or platter run) as root, or remove drop_caches from phases")
                    }
                    Err(e) => Ending::error(format!("writing /proc/sys/vm/drop_caches: {e}")),
                }
            }
            StepKind::StorageSetup(c) => match self.cfg.storage.setup(c, self.shared_storage) {
                Ok(()) => Ending::default(),
                Err(e) => Ending::error(format!("storage setup ({c}): {e}")),
            },
            StepKind::StorageTeardown(c) => match self.cfg.storage.teardown(c) {
                Ok(()) => Ending::default(),
                Err(e) => Ending::error(format!("storage teardown ({c}): {e}")),
            },
            StepKind::Purge(p) => self.on_drive(step, || {
                purge::run(p, &self.stop, purge::Pacing::default())
                    .map_err(|e| format!("purge of {} ({}): {e}", p.device, p.method.name()))
            }),
            StepKind::Precondition(p) => self.on_drive(step, || {
                let stop = || self.stop.is_cancelled() || self.shared.is_cancelled(plan_id);
                precondition::run(p, &stop)
                    .map_err(|e| format!("precondition of {}: {e}", p.device))
            }),
            StepKind::Reboot | StepKind::Fstrim(_) => {
                unreachable!("reboot and fstrim steps are handled by advance")
            }
        }
    }

    /// Runs a step that writes a whole drive (a purge, a fill) once the rails allow it now,
    /// right before it runs (the plan was judged when it arrived; a mount since refuses).
    fn on_drive(&self, step: &Step, run: impl FnOnce() -> Result<Vec<Sample>, String>) -> Ending {
        if let Some(why) = self
            .cfg
            .storage
            .step_refusal(&step.kind, storage::Judged::AtRun)
        {
            return Ending::error(format!("refused: {why}"));
        }
        match run() {
            Ok(samples) => Ending {
                samples,
                ..Ending::default()
            },
            Err(e) => Ending::error(e),
        }
    }

    /// Trims `path`. A filesystem that cannot discard (a RAM disk, gocryptfs) has nothing to
    /// trim: the step is skipped with the reason, which is not a failure and leaves the
    /// measurement after it valid.
    fn fstrim(&self, plan_id: &str, step: &Step, attempt: u32, path: &str) -> (StepState, Ending) {
        let path = self.substitute(path, step);
        let script = format!("fstrim -- '{}'", path.replace('\'', "'\\''"));
        match self.shell(plan_id, step, attempt, &script) {
            Ok(o) if !o.success() && o.stderr_tail.contains("not supported") => {
                let line = o
                    .stderr_tail
                    .lines()
                    .rev()
                    .find(|l| l.contains("not supported"))
                    .unwrap_or_default()
                    .trim();
                let fs = fs_type(std::path::Path::new(&path)).unwrap_or_else(|| "?".into());
                let ending = Ending {
                    failed: false,
                    exit_status: o.exit_code.unwrap_or(-1),
                    stderr_tail: o.stderr_tail.clone(),
                    error: format!("fstrim not supported on {path} ({fs}): {line}"),
                    samples: Vec::new(),
                    skipped: true,
                };
                (StepState::Skipped, ending)
            }
            Ok(o) => {
                let ending = Ending::from_outcome(&o, "fstrim");
                let state = if ending.failed {
                    StepState::Failed
                } else {
                    StepState::Succeeded
                };
                (state, ending)
            }
            Err(e) => (StepState::Failed, e),
        }
    }

    /// Journals the request, runs the reboot command and waits to be stopped. Returns the
    /// ending if the reboot could not happen, `None` when the agent is stopping for it.
    fn reboot(
        &mut self,
        plan_id: &str,
        index: u32,
        attempt: u32,
        started: i64,
        shutdown: &CancellationToken,
    ) -> Result<Option<Ending>, JournalError> {
        let boot_id = self.cfg.boot_id.clone();
        self.append(Entry::RebootRequested {
            plan_id: plan_id.to_string().into(),
            step_index: index,
            boot_id: boot_id.clone(),
            requested_unix_ns: started,
        })?;
        tracing::info!(plan = %plan_id, step = index, boot_id = %boot_id, command = %self.cfg.reboot_command, "reboot requested");
        let step = self.state.held(plan_id).expect("held").plan.steps[index as usize].clone();
        let command = self.cfg.reboot_command.clone();
        match self.shell(plan_id, &step, attempt, &command) {
            Ok(o) if o.success() => {}
            Ok(o) => return Ok(Some(Ending::from_outcome(&o, "reboot command"))),
            Err(e) => return Ok(Some(e)),
        }
        let deadline = Instant::now() + self.cfg.reboot_timeout;
        while Instant::now() < deadline {
            if shutdown.is_cancelled() {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(Some(Ending::error(format!(
            "asked for a reboot with `{command}` but the host was still up {}s later (boot id {boot_id} unchanged)",
            self.cfg.reboot_timeout.as_secs()
        ))))
    }
}

/// The devices the plan's storage is made on, each once, in the plan's order: the drives
/// whose health is read before and after.
fn drives_under_test(plan: &platter_proto::model::Plan) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in &plan.steps {
        if let StepKind::StorageSetup(c) = &s.kind {
            if let Some(d) = c.device.as_ref().filter(|d| !out.contains(d)) {
                out.push(d.clone());
            }
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests;
