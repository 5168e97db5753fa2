//! The executor driven as `lib::run` drives it: a journal in a temporary state directory,
//! plans through the channel, a `Shared` as the link sees it, `run` on a thread of its own.
//! The assertions are on what it journals and hands to the link (step events, attempts,
//! samples, the end of the plan), and on what its commands did.

use super::*;

use std::path::Path;
use std::sync::mpsc as std_mpsc;

use crate::model::Tool;
use crate::probes::inventory::Roots;

const HOST: &str = "test-host";
/// How long a test waits for the executor before it fails (each test takes well under 2 s).
const WAIT: Duration = Duration::from_secs(20);

// ---- the executor as the agent runs it ----

/// Skips the calling test: prints `SKIPPED <test>: <why>` past the test harness's capture
/// (so a passing run still shows what it left out) and returns false; with
/// `PLATTER_TEST_STRICT=1` (`testing::strict`) it fails the test instead.
pub(crate) fn skip(why: &str) -> bool {
    // libtest names each test's thread after the test.
    let current = std::thread::current();
    let test = current.name().unwrap_or("a test");
    if crate::testing::strict() {
        panic!("{test} {why}, and PLATTER_TEST_STRICT=1 forbids skipping it");
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
    false
}

/// Whether a test that mounts can run here; as not root it is skipped (`skip`).
pub(crate) fn root_or_skip(why: &str) -> bool {
    rustix::process::geteuid().is_root()
        || skip(&format!(
            "needs root ({why}); run the tests as root to include it"
        ))
}

/// Whether the agent finds `program` (from Debian's `package`), as it will for a plan; a
/// test that runs or names it is skipped without it (`skip`).
pub(crate) fn tool_or_skip(program: &str, package: &str) -> bool {
    crate::process::find_program(program.as_ref()).is_ok()
        || skip(&format!(
            "needs {program} (apt install {package}), which the agent cannot find"
        ))
}

/// A state directory, by its canonical path (mount points are compared with mountinfo's).
fn state_dir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().canonicalize().expect("canonical tempdir");
    (tmp, dir)
}

fn config(dir: &Path) -> ExecConfig {
    ExecConfig {
        host: HOST.into(),
        boot_id: "00000000-test-boot".into(),
        state_dir: dir.to_path_buf(),
        // No test plan has a reboot step; should one run, it fails instead of rebooting.
        reboot_command: "false".into(),
        reboot_timeout: Duration::from_secs(1),
        storage: Storage {
            mount_dir: dir.join("mnt"),
            state_dir: dir.to_path_buf(),
            allowed: Vec::new(),
            allow_purge: false,
            // No drives (provenance lists none), the real mounts (storage checks them).
            inventory_roots: Roots {
                sys: dir.join("no-sys"),
                dev: dir.join("no-dev"),
                mountinfo: "/proc/self/mountinfo".into(),
            },
        },
    }
}

/// Storage with nothing to make: its steps run (and are recorded) without root.
fn no_storage() -> StorageConfig {
    StorageConfig {
        device: None,
        fs: crate::model::Filesystem::None,
        mkfs_options: vec![],
        mount_options: String::new(),
        write_cache: crate::model::WriteCacheSetting::Keep,
        ramdisk_size: None,
        encryption: Encryption::None,
    }
}

/// A 1 MiB tmpfs RAM disk (needs root).
fn ramdisk() -> StorageConfig {
    StorageConfig {
        fs: crate::model::Filesystem::Tmpfs,
        ramdisk_size: Some(1 << 20),
        ..no_storage()
    }
}

fn cmd(script: &str) -> StepKind {
    StepKind::Command(script.into())
}

fn measure(script: &str) -> StepKind {
    StepKind::Measure(Workload::Command(script.into()))
}

/// Appends `$PLATTER_ATTEMPT` to `name` in the state directory: what ran, and as which attempt.
fn log_attempt(name: &str) -> String {
    format!("echo $PLATTER_ATTEMPT >> \"$PLATTER_STATE_DIR/{name}\"")
}

/// The lines of `name` in the state directory; none if no command wrote it.
fn lines(dir: &Path, name: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(name))
        .map(|s| s.lines().map(String::from).collect())
        .unwrap_or_default()
}

fn plan(id: &str, on_failure: OnFailure, steps: Vec<(&str, u32, StepKind)>) -> Plan {
    Plan {
        id: id.into(),
        campaign_id: "campaign".into(),
        campaign_name: "campaign".into(),
        host: HOST.into(),
        steps: steps
            .into_iter()
            .enumerate()
            .map(|(i, (cell, repetition, kind))| Step {
                index: i as u32,
                cell_id: cell.into(),
                repetition,
                warmup: false,
                kind,
            })
            .collect(),
        on_failure,
        run_as: Default::default(),
    }
}

struct Running {
    shared: Arc<Shared>,
    stop: CancellationToken,
    done: std_mpsc::Receiver<Result<(), JournalError>>,
}

/// Starts an agent's executor on the journal in `dir`, as `lib::run` does (the outbox holds
/// what the journal has not seen acked), and gives it `plans`. The plan channel is closed
/// behind them, so the executor returns once it holds no plan, as when the link stops.
fn start(dir: &Path, plans: &[Plan]) -> Running {
    start_with(config(dir), dir, plans)
}

/// `start` with an executor configured as `cfg`.
fn start_with(cfg: ExecConfig, dir: &Path, plans: &[Plan]) -> Running {
    let (journal, state) = Journal::open(dir).expect("open journal");
    let shared = Arc::new(Shared::new(
        state.unacked.iter().cloned(),
        state.acked,
        state.next_seq,
    ));
    let (tx, rx) = mpsc::unbounded_channel();
    for p in plans {
        tx.send(p.clone()).expect("plan channel");
    }
    drop(tx);
    let executor = Executor::new(cfg, journal, state, shared.clone(), rx);
    let stop = CancellationToken::new();
    let (done_tx, done) = std_mpsc::channel();
    let token = stop.clone();
    std::thread::spawn(move || {
        let _ = done_tx.send(executor.run(token));
    });
    Running { shared, stop, done }
}

impl Running {
    /// Waits for `run` to return, and fails the test on a journal error or a hang.
    fn wait(self) -> Arc<Shared> {
        self.done
            .recv_timeout(WAIT)
            .expect("the executor did not return in time")
            .expect("the executor's journal failed");
        self.shared
    }
}

/// Polls `ready` (a record or a process to appear) until it holds, failing after `WAIT`.
fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Every entry of the journal in `dir`, in file order.
fn journal(dir: &Path) -> Vec<Entry> {
    let text = std::fs::read_to_string(dir.join("journal.jsonl")).expect("read journal");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("journal line {l}: {e}")))
        .collect()
}

fn records(dir: &Path) -> Vec<Record> {
    journal(dir)
        .into_iter()
        .filter_map(|e| match e {
            Entry::Record(r) => Some(r),
            _ => None,
        })
        .collect()
}

/// The step records of step `index`, in order.
fn events(records: &[Record], index: u32) -> Vec<&StepEvent> {
    records
        .iter()
        .filter_map(|r| match &r.kind {
            RecordKind::Step(e) if e.step_index == index => Some(e),
            _ => None,
        })
        .collect()
}

/// (state, attempt) of each record of step `index`.
fn states(records: &[Record], index: u32) -> Vec<(StepState, u32)> {
    events(records, index)
        .iter()
        .map(|e| (e.state, e.attempt))
        .collect()
}

/// The one end record of step `index`.
fn only_end(records: &[Record], index: u32) -> &StepEvent {
    let ends: Vec<_> = events(records, index)
        .into_iter()
        .filter(|e| e.state.is_end())
        .collect();
    assert_eq!(ends.len(), 1, "step {index} has one end: {ends:?}");
    ends[0]
}

/// The `cancelled` flag of every PlanFinished record.
fn finished(records: &[Record]) -> Vec<bool> {
    records
        .iter()
        .filter_map(|r| match &r.kind {
            RecordKind::PlanFinished { cancelled, .. } => Some(*cancelled),
            _ => None,
        })
        .collect()
}

/// The trigger of every Provenance record.
fn provenance_triggers(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match &r.kind {
            RecordKind::Provenance { facts, .. } => Some(facts.trigger.clone()),
            _ => None,
        })
        .collect()
}

/// Nothing was acked, so the link's outbox is every record the journal holds, in order and
/// numbered 1, 2, 3… (a record is journaled before the link gets it, and only once).
fn assert_outbox_is_the_journal(dir: &Path, shared: &Shared) -> Vec<Record> {
    let journaled = records(dir);
    assert_eq!(shared.unsent(0), journaled);
    let seqs: Vec<u64> = journaled.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=journaled.len() as u64).collect::<Vec<_>>());
    journaled
}

/// Writes the journal an agent leaves when it stops (crash, kill, power loss) after the
/// plan was accepted and `steps` were journaled: attempts count up per `Started`, an end
/// ends the latest attempt.
fn journal_before_a_crash(dir: &Path, plan: &Plan, steps: &[(u32, StepState)]) {
    let (mut j, mut s) = Journal::open(dir).expect("open journal");
    j.append(&mut s, Entry::Plan(plan.clone())).unwrap();
    let accepted = Record {
        seq: s.next_seq,
        kind: RecordKind::PlanAccepted {
            plan_id: plan.id.clone(),
        },
    };
    j.append(&mut s, Entry::Record(accepted)).unwrap();
    for &(index, state) in steps {
        let step = &plan.steps[index as usize];
        let started = s.held(&plan.id).unwrap().attempts.get(&index).copied();
        let attempt = started.unwrap_or(0) + u32::from(state == StepState::Started);
        let record = Record {
            seq: s.next_seq,
            kind: RecordKind::Step(StepEvent {
                plan_id: plan.id.clone(),
                kind: step.kind.name().into(),
                step_index: index,
                cell_id: step.cell_id.clone(),
                repetition: step.repetition,
                attempt,
                state,
                started_unix_ns: 1,
                finished_unix_ns: if state.is_end() { 2 } else { 0 },
                exit_status: 0,
                stderr_tail: String::new(),
                error: String::new(),
                samples: vec![],
            }),
        };
        j.append(&mut s, Entry::Record(record)).unwrap();
    }
}

/// Whether something is mounted at `path` now.
fn mounted(path: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    provenance::mount_at(&info, path).is_some()
}

/// Unmounts (lazily) what a failed test left mounted at its path.
struct UnmountOnDrop(PathBuf);

impl Drop for UnmountOnDrop {
    fn drop(&mut self) {
        if mounted(&self.0) {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&self.0)
                .status();
        }
    }
}

/// A loop device on a sparse image file: the tests' drive, never a real disk. Detached
/// on drop, whatever the test did.
pub(crate) struct LoopDevice {
    pub path: String,
    pub image: PathBuf,
}

impl LoopDevice {
    /// A loop device of `bytes` on an image in `dir`, or None when the test is skipped
    /// (not root, no losetup: `skip`).
    pub(crate) fn new(dir: &Path, bytes: u64) -> Option<LoopDevice> {
        if !root_or_skip("attaches a loop device") || !tool_or_skip("losetup", "mount") {
            return None;
        }
        let image = dir.join("drive.img");
        std::fs::File::create(&image)
            .and_then(|f| f.set_len(bytes))
            .expect("image file");
        let out = crate::process::command("losetup")
            .args(["--find", "--show"])
            .arg(&image)
            .output()
            .expect("losetup");
        assert!(
            out.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Some(LoopDevice { path, image })
    }

    /// Its name in /sys/block (`loop3`).
    pub(crate) fn name(&self) -> &str {
        self.path.trim_start_matches("/dev/")
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = crate::process::command("losetup")
            .args(["-d", &self.path])
            .status();
    }
}

/// The executor's configuration for a plan on the real drive `device`: the host's own
/// inventory, `device` allowed, and purges allowed when `allow_purge`.
fn config_for_drive(dir: &Path, device: &str, allow_purge: bool) -> ExecConfig {
    let mut cfg = config(dir);
    cfg.storage.allowed = vec![device.to_string()];
    cfg.storage.allow_purge = allow_purge;
    cfg.storage.inventory_roots = Roots::default();
    cfg
}

const ABORTED: &str = "skipped: an earlier step failed and on_failure is abort";
const CANCELLED: &str = "skipped: cancelled";
const SUCCEEDED_ONCE: [(StepState, u32); 2] = [(StepState::Started, 1), (StepState::Succeeded, 1)];

// ---- 1. attempts ----

/// A command that fails is recorded as failed, once, with its exit status and stderr: a
/// failure is not retried (only a cut-off step runs again). The plan goes on, ends, and a
/// finished plan sent again is answered as finished without running anything.
#[test]
fn a_failed_command_is_recorded_once_and_not_retried() {
    let (_tmp, dir) = state_dir();
    let p = plan(
        "p",
        OnFailure::Continue,
        vec![
            ("a", 1, cmd("true")),
            ("a", 1, cmd("echo boom >&2; exit 3")),
            ("a", 1, cmd(&log_attempt("after.log"))),
        ],
    );
    let shared = start(&dir, std::slice::from_ref(&p)).wait();
    let r = assert_outbox_is_the_journal(&dir, &shared);

    assert_eq!(
        r[0].kind,
        RecordKind::PlanAccepted {
            plan_id: "p".into()
        }
    );
    assert_eq!(provenance_triggers(&r), [provenance::AT_PLAN_START]);
    assert_eq!(states(&r, 0), SUCCEEDED_ONCE);
    assert_eq!(
        states(&r, 1),
        [(StepState::Started, 1), (StepState::Failed, 1)]
    );
    let failed = only_end(&r, 1);
    assert_eq!(failed.exit_status, 3);
    assert_eq!(failed.stderr_tail, "boom\n");
    assert_eq!(failed.error, "command failed: exit status 3");
    assert_eq!(states(&r, 2), SUCCEEDED_ONCE);
    assert_eq!(lines(&dir, "after.log"), ["1"]);
    assert_eq!(finished(&r), [false]);
    assert!(matches!(
        r.last().unwrap().kind,
        RecordKind::PlanFinished { .. }
    ));
    assert!(shared.held().is_empty(), "a finished plan is not held");

    // The coordinator did not hear the end and sends the plan again.
    let shared = start(&dir, &[p]).wait();
    let again = assert_outbox_is_the_journal(&dir, &shared);
    assert_eq!(again[..r.len()], r[..]);
    assert_eq!(
        again[r.len()..]
            .iter()
            .map(|r| r.kind.clone())
            .collect::<Vec<_>>(),
        [
            RecordKind::PlanAccepted {
                plan_id: "p".into()
            },
            RecordKind::PlanFinished {
                plan_id: "p".into(),
                cancelled: false
            }
        ]
    );
    assert_eq!(lines(&dir, "after.log"), ["1"], "nothing ran again");
}

/// After a crash, a step that ended is not run again; the step that was running runs again
/// from its start as the next attempt, and its command sees that attempt.
#[test]
fn a_step_cut_off_runs_again_as_the_next_attempt_and_an_ended_one_does_not() {
    let (_tmp, dir) = state_dir();
    let p = plan(
        "p",
        OnFailure::Continue,
        vec![
            ("a", 1, cmd(&log_attempt("s0.log"))),
            ("a", 1, cmd(&log_attempt("s1.log"))),
        ],
    );
    journal_before_a_crash(
        &dir,
        &p,
        &[
            (0, StepState::Started),
            (0, StepState::Succeeded),
            (1, StepState::Started),
        ],
    );
    let shared = start(&dir, &[]).wait();
    let r = assert_outbox_is_the_journal(&dir, &shared);
    assert_eq!(states(&r, 0), SUCCEEDED_ONCE, "step 0 is not run again");
    assert!(lines(&dir, "s0.log").is_empty());
    assert_eq!(
        states(&r, 1),
        [
            (StepState::Started, 1),
            (StepState::Started, 2),
            (StepState::Succeeded, 2)
        ]
    );
    assert_eq!(lines(&dir, "s1.log"), ["2"]);
    assert_eq!(provenance_triggers(&r), [provenance::AT_RESUME]);
    assert_eq!(finished(&r), [false]);
}

/// A step cut off MAX_ATTEMPTS − 1 times runs once more; one cut off MAX_ATTEMPTS times
/// fails (naming the cut-offs) without being started again, and the plan goes on.
#[test]
fn a_step_cut_off_max_attempts_times_fails_without_running_again() {
    for cut_offs in [MAX_ATTEMPTS - 1, MAX_ATTEMPTS] {
        let (_tmp, dir) = state_dir();
        let p = plan(
            "p",
            OnFailure::Continue,
            vec![
                ("a", 1, cmd(&log_attempt("s0.log"))),
                ("a", 1, cmd(&log_attempt("s1.log"))),
            ],
        );
        let crashes: Vec<_> = (0..cut_offs).map(|_| (0, StepState::Started)).collect();
        journal_before_a_crash(&dir, &p, &crashes);
        let shared = start(&dir, &[]).wait();
        let r = assert_outbox_is_the_journal(&dir, &shared);
        let mut expected: Vec<_> = (1..=cut_offs).map(|a| (StepState::Started, a)).collect();
        let end = only_end(&r, 0);
        if cut_offs < MAX_ATTEMPTS {
            expected.extend([
                (StepState::Started, cut_offs + 1),
                (StepState::Succeeded, cut_offs + 1),
            ]);
            assert_eq!(lines(&dir, "s0.log"), [(cut_offs + 1).to_string()]);
        } else {
            expected.push((StepState::Failed, cut_offs));
            assert!(lines(&dir, "s0.log").is_empty(), "not run a 4th time");
            assert!(
                end.error
                    .contains(&format!("stopped during this step {cut_offs} times")),
                "{}",
                end.error
            );
        }
        assert_eq!(states(&r, 0), expected, "after {cut_offs} cut-offs");
        assert_eq!(states(&r, 1), SUCCEEDED_ONCE, "after {cut_offs} cut-offs");
        assert_eq!(finished(&r), [false]);
    }
}

// ---- 2. on_failure ----

/// With `abort`, every step after a failure is skipped (never started, attempt 0) except
/// the storage teardown, which runs. With `continue` the plan goes on; only the measure
/// whose preparation failed is skipped, saying which step failed and why.
#[test]
fn abort_skips_the_rest_but_the_teardown_and_continue_goes_on() {
    for on_failure in [OnFailure::Abort, OnFailure::Continue] {
        let (_tmp, dir) = state_dir();
        let p = plan(
            "p",
            on_failure,
            vec![
                ("a", 1, StepKind::StorageSetup(no_storage())),
                ("a", 0, StepKind::Setup("true".into())),
                ("a", 1, cmd("echo boom >&2; exit 3")), // 2: fails
                ("a", 1, cmd(&log_attempt("after.log"))),
                ("a", 1, measure("true")), // 4: its preparation is 2..4
                ("b", 1, measure(&log_attempt("measured.log"))),
                ("b", 1, StepKind::StorageTeardown(no_storage())),
            ],
        );
        let shared = start(&dir, &[p]).wait();
        let r = assert_outbox_is_the_journal(&dir, &shared);
        let skipped = [(StepState::Skipped, 0)];
        let failed = [(StepState::Started, 1), (StepState::Failed, 1)];
        assert_eq!(states(&r, 0), SUCCEEDED_ONCE);
        assert_eq!(states(&r, 1), SUCCEEDED_ONCE);
        assert_eq!(states(&r, 2), failed);
        assert_eq!(
            states(&r, 6),
            SUCCEEDED_ONCE,
            "teardown runs ({on_failure:?})"
        );
        assert_eq!(finished(&r), [false]);
        match on_failure {
            OnFailure::Abort => {
                for i in 3..=5 {
                    assert_eq!(states(&r, i), skipped, "step {i}");
                    let e = only_end(&r, i);
                    assert_eq!(e.error, ABORTED, "step {i}");
                    assert!(e.samples.is_empty());
                }
                assert!(lines(&dir, "after.log").is_empty());
                assert!(lines(&dir, "measured.log").is_empty());
            }
            OnFailure::Continue => {
                assert_eq!(states(&r, 3), SUCCEEDED_ONCE);
                assert_eq!(lines(&dir, "after.log"), ["1"]);
                assert_eq!(states(&r, 4), skipped);
                let not_measured = only_end(&r, 4);
                assert_eq!(
                    not_measured.error,
                    format!("{NOT_MEASURED}: command (step 2): command failed: exit status 3")
                );
                assert!(not_measured.samples.is_empty());
                assert_eq!(states(&r, 5), SUCCEEDED_ONCE);
                assert_eq!(lines(&dir, "measured.log"), ["1"]);
                assert!(!only_end(&r, 5).samples.is_empty());
            }
        }
    }
}

// ---- 3. cancel ----

/// Cancels the plan (as the link does on the coordinator's Cancel) while its command step
/// runs on `storage`, and checks that the running command was killed, the rest skipped,
/// the teardown run and the plan ended as cancelled.
fn cancel_while_storage_is_held(storage: StorageConfig) {
    let (_tmp, dir) = state_dir();
    let mount_point = config(&dir).storage.mount_point(&storage);
    let _unmount = UnmountOnDrop(mount_point.clone());
    let tmpfs = storage.fs == crate::model::Filesystem::Tmpfs;
    let p = plan(
        "p",
        OnFailure::Continue,
        vec![
            ("a", 1, StepKind::StorageSetup(storage.clone())),
            (
                "a",
                1,
                cmd(&format!("{}; sleep 30", log_attempt("running.log"))),
            ),
            ("a", 1, measure(&log_attempt("measured.log"))),
            ("a", 1, StepKind::StorageTeardown(storage)),
            ("b", 1, cmd(&log_attempt("after.log"))),
        ],
    );
    let t = Instant::now();
    let running = start(&dir, &[p]);
    let shared = running.shared.clone();
    wait_until("step 1 to run", || {
        shared.current() == Some(("p".into(), 1))
            && shared.running_pgid.load(Ordering::SeqCst) > 0
            && !lines(&dir, "running.log").is_empty()
    });
    assert_eq!(mounted(&mount_point), tmpfs, "the storage is held");
    shared.cancel("p");
    let shared = running.wait();
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "the running command was killed, not waited for"
    );
    let r = assert_outbox_is_the_journal(&dir, &shared);

    assert_eq!(states(&r, 0), SUCCEEDED_ONCE);
    // What the executor does today: the killed step is recorded as failed.
    assert_eq!(
        states(&r, 1),
        [(StepState::Started, 1), (StepState::Failed, 1)]
    );
    assert_eq!(
        only_end(&r, 1).error,
        format!("command failed: killed by signal {}", libc::SIGKILL)
    );
    for i in [2, 4] {
        assert_eq!(states(&r, i), [(StepState::Skipped, 0)], "step {i}");
        assert_eq!(only_end(&r, i).error, CANCELLED, "step {i}");
    }
    assert_eq!(states(&r, 3), SUCCEEDED_ONCE, "the teardown runs");
    assert_eq!(finished(&r), [true], "the plan ends as cancelled");
    assert!(lines(&dir, "measured.log").is_empty());
    assert!(lines(&dir, "after.log").is_empty());
    assert!(!mounted(&mount_point), "the teardown unmounted the storage");
    assert!(shared.held().is_empty());
}

#[test]
fn a_cancel_kills_the_running_step_skips_the_rest_and_still_tears_down() {
    cancel_while_storage_is_held(no_storage());
}

#[test]
fn a_cancel_while_a_ramdisk_is_mounted_still_unmounts_it() {
    if !root_or_skip("mounts a tmpfs RAM disk") {
        return;
    }
    cancel_while_storage_is_held(ramdisk());
}

// ---- 4. a measure cut off ----

/// A measure cut off by a crash (its start journaled, no end): at the next start its
/// preparation runs again first (the journal says so with a Rerun entry), then the measure
/// runs again as attempt 2; its samples are journaled once, in its one end record.
#[test]
fn a_measure_cut_off_runs_again_after_its_preparation_and_its_samples_are_stored_once() {
    let (_tmp, dir) = state_dir();
    let p = plan(
        "p",
        OnFailure::Continue,
        vec![
            ("a", 1, cmd(&log_attempt("prep.log"))),
            ("a", 1, measure(&log_attempt("measure.log"))),
            ("a", 2, measure(&log_attempt("next.log"))),
        ],
    );
    journal_before_a_crash(
        &dir,
        &p,
        &[
            (0, StepState::Started),
            (0, StepState::Succeeded),
            (1, StepState::Started),
        ],
    );
    let shared = start(&dir, &[]).wait();
    let r = assert_outbox_is_the_journal(&dir, &shared);

    let reruns: Vec<_> = journal(&dir)
        .into_iter()
        .filter(|e| matches!(e, Entry::Rerun { .. }))
        .collect();
    assert_eq!(
        reruns,
        [Entry::Rerun {
            plan_id: "p".into(),
            measure: 1,
            started: 1,
            steps: vec![0],
        }]
    );
    assert_eq!(
        states(&r, 0),
        [
            (StepState::Started, 1),
            (StepState::Succeeded, 1),
            (StepState::Started, 2),
            (StepState::Succeeded, 2)
        ],
        "the preparation runs again as attempt 2"
    );
    assert_eq!(lines(&dir, "prep.log"), ["2"]);
    assert_eq!(
        states(&r, 1),
        [
            (StepState::Started, 1),
            (StepState::Started, 2),
            (StepState::Succeeded, 2)
        ]
    );
    assert_eq!(
        lines(&dir, "measure.log"),
        ["2"],
        "measured once, as attempt 2"
    );
    assert_metrics_once(&r, 1);
    assert_eq!(
        states(&r, 2),
        SUCCEEDED_ONCE,
        "the next measure is attempt 1"
    );
    assert_eq!(provenance_triggers(&r), [provenance::AT_RESUME]);
    assert_eq!(finished(&r), [false]);

    // Another start finds the plan finished: nothing is run or recorded again.
    let shared = start(&dir, &[]).wait();
    assert_eq!(assert_outbox_is_the_journal(&dir, &shared), r);
    assert_eq!(lines(&dir, "measure.log"), ["2"]);
}

/// Every sample of step `index` is in its one end record, each metric once.
fn assert_metrics_once(r: &[Record], index: u32) {
    let end = only_end(r, index);
    assert_eq!(end.state, StepState::Succeeded);
    let mut metrics: Vec<&str> = end.samples.iter().map(|s| s.metric.as_str()).collect();
    metrics.sort();
    assert_eq!(metrics, ["max_rss", "sys", "user", "wall"]);
    let with_samples = events(r, index)
        .iter()
        .filter(|e| !e.samples.is_empty())
        .count();
    assert_eq!(with_samples, 1, "samples are in one record of step {index}");
}

/// The same through the agent's own stop (`lib::run`: stop the executor, kill the running
/// group) in the middle of the measurement: the measure is left started, without an end,
/// and the next executor on that journal runs preparation and measure again as attempt 2.
#[test]
fn a_measure_cut_off_by_the_agent_stopping_runs_again_as_attempt_2() {
    let (_tmp, dir) = state_dir();
    let p = plan(
        "p",
        OnFailure::Continue,
        vec![
            ("a", 1, cmd(&log_attempt("prep.log"))),
            (
                "a",
                1,
                measure(&format!(
                    "{}; if [ $PLATTER_ATTEMPT = 1 ]; then sleep 30; fi",
                    log_attempt("measure.log")
                )),
            ),
        ],
    );
    let t = Instant::now();
    let running = start(&dir, &[p]);
    let shared = running.shared.clone();
    wait_until("the measurement to run", || {
        shared.measuring.load(Ordering::SeqCst)
            && shared.running_pgid.load(Ordering::SeqCst) > 0
            && !lines(&dir, "measure.log").is_empty()
    });
    running.stop.cancel();
    process::kill_group(&shared.running_pgid);
    running.wait();
    let r = records(&dir);
    assert_eq!(states(&r, 1), [(StepState::Started, 1)], "left started");
    assert!(finished(&r).is_empty());

    let shared = start(&dir, &[]).wait();
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "the sleep was killed"
    );
    let r = assert_outbox_is_the_journal(&dir, &shared);
    assert_eq!(
        states(&r, 0),
        [
            (StepState::Started, 1),
            (StepState::Succeeded, 1),
            (StepState::Started, 2),
            (StepState::Succeeded, 2)
        ]
    );
    assert_eq!(
        states(&r, 1),
        [
            (StepState::Started, 1),
            (StepState::Started, 2),
            (StepState::Succeeded, 2)
        ]
    );
    assert_eq!(lines(&dir, "prep.log"), ["1", "2"]);
    assert_eq!(lines(&dir, "measure.log"), ["1", "2"]);
    assert_metrics_once(&r, 1);
    assert_eq!(
        provenance_triggers(&r),
        [provenance::AT_PLAN_START, provenance::AT_RESUME]
    );
    assert_eq!(finished(&r), [false]);
}

/// A cancel that arrives while a measure step waits for the coordinator's acks (before its
/// workload starts) leaves nothing measured: the step ends skipped, the workload never ran.
#[test]
fn a_cancel_while_a_measure_waits_for_its_acks_measures_nothing() {
    let (_tmp, dir) = state_dir();
    let p = plan(
        "p",
        OnFailure::Continue,
        vec![("a", 1, measure(&log_attempt("measured.log")))],
    );
    let (journal, state) = Journal::open(&dir).expect("open journal");
    let shared = Arc::new(Shared::new([], state.acked, state.next_seq));
    // A coordinator is connected but acks nothing: the measure waits (QUIESCE_TIMEOUT).
    shared.connected.store(true, Ordering::SeqCst);
    let (tx, rx) = mpsc::unbounded_channel();
    tx.send(p).expect("plan channel");
    drop(tx);
    let executor = Executor::new(config(&dir), journal, state, shared.clone(), rx);
    let (done_tx, done) = std_mpsc::channel();
    std::thread::spawn(move || {
        let _ = done_tx.send(executor.run(CancellationToken::new()));
    });
    wait_until("the measure to start", || {
        shared.current() == Some(("p".into(), 0))
    });
    shared.cancel("p");
    done.recv_timeout(WAIT)
        .expect("the executor did not return in time")
        .expect("the executor's journal failed");
    let r = records(&dir);
    assert_eq!(
        states(&r, 0),
        [(StepState::Started, 1), (StepState::Skipped, 1)]
    );
    let end = only_end(&r, 0);
    assert_eq!(end.error, "skipped: cancelled before the measurement began");
    assert!(end.samples.is_empty(), "{:?}", end.samples);
    assert!(lines(&dir, "measured.log").is_empty(), "the workload ran");
    assert_eq!(finished(&r), [true]);
}

/// A plan's provenance names its tools' versions as the inventory has them: bonnie++,
/// which has no version flag, by the version its usage text gives (it said "version not
/// reported by the tool" while `platter inventory` showed 2.00a). The workload is given an
/// option bonnie++ refuses, so it prints its usage and the step fails at once.
#[test]
fn a_bonnie_plan_says_which_bonnie_it_ran() {
    if !tool_or_skip("bonnie++", "bonnie++") {
        return;
    }
    let (_tmp, dir) = state_dir();
    let bonnie = Workload::Tool {
        tool: Tool::Bonnie,
        argv: vec!["bonnie++".into(), "--platter-no-such-option".into()],
    };
    let p = plan(
        "p",
        OnFailure::Continue,
        vec![("a", 1, StepKind::Measure(bonnie))],
    );
    let shared = start(&dir, &[p]).wait();
    let r = assert_outbox_is_the_journal(&dir, &shared);
    let tools: Vec<_> = r
        .iter()
        .filter_map(|r| match &r.kind {
            RecordKind::Provenance { facts, .. } => Some(facts.tools.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(tools.len(), 1, "{tools:?}");
    // This machine's bonnie++ (Debian 12's 2.00a-2), as `platter inventory` shows it.
    assert_eq!(
        tools[0].get("bonnie++").map(String::as_str),
        Some("bonnie++ 2.00a"),
        "{tools:?}"
    );
    assert_eq!(
        tools[0]["bonnie++"],
        crate::probes::tools::version("bonnie++")
    );
    assert_eq!(only_end(&r, 0).state, StepState::Failed);
}

// ---- what a plan needs of the host ----

/// The plan's refusal, checking that it is the only record: nothing of the plan ran or
/// was journaled as held.
fn refusal(dir: &Path, shared: &Shared) -> String {
    let r = assert_outbox_is_the_journal(dir, shared);
    assert!(
        !journal(dir).iter().any(|e| matches!(e, Entry::Plan(_))),
        "a refused plan is not held"
    );
    match &r[..] {
        [Record {
            kind: RecordKind::PlanRefused { reason, .. },
            ..
        }] => reason.clone(),
        other => panic!("expected only a refusal, got {other:?}"),
    }
}

/// Every program the plan would exec that this host lacks is named, with the host and what
/// needs it, in one refusal before anything runs: a command's own program (exec'd directly),
/// a tool, fstrim's. Programs that are there, or run by a shell, are not named.
#[test]
fn a_plan_needing_programs_the_host_lacks_is_refused_naming_each_and_nothing_runs() {
    let (_tmp, dir) = state_dir();
    let tool = Workload::Tool {
        tool: Tool::Fio,
        argv: vec!["platter-no-such-fio".into(), "--name=x".into()],
    };
    // At the path the campaign gives (compilebench is not packaged).
    let compilebench = Workload::Tool {
        tool: Tool::Compilebench,
        argv: vec!["/opt/platter-none/compilebench".into(), "-D".into()],
    };
    let p = plan(
        "p",
        OnFailure::Continue,
        vec![
            ("a", 1, cmd(&log_attempt("ran.log"))),
            ("a", 1, measure("platter-no-such-tool --flag")),
            ("b", 1, measure("platter-no-such-tool --other")),
            ("b", 1, StepKind::Measure(tool)),
            ("b", 1, StepKind::Measure(compilebench)),
            ("b", 1, cmd("platter-no-such-tool; true")),
            ("b", 1, measure("true")),
        ],
    );
    let shared = start(&dir, &[p]).wait();
    let reason = refusal(&dir, &shared);
    assert_eq!(
        reason,
        format!(
            "host {HOST} lacks: platter-no-such-tool (for the measure of cell a, the measure of cell b), \
             platter-no-such-fio (for the measure of cell b), \
             /opt/platter-none/compilebench (for the measure of cell b)"
        )
    );
    assert!(lines(&dir, "ran.log").is_empty(), "a step ran");
}

/// A user the host lacks refuses the plan like a missing program, named in the same list
/// (as root; an agent that is not root refuses any user, saying so).
#[test]
fn a_plan_running_as_a_user_the_host_lacks_is_refused_and_nothing_runs() {
    let (_tmp, dir) = state_dir();
    let mut p = plan(
        "p",
        OnFailure::Continue,
        vec![
            ("a", 1, cmd(&log_attempt("ran.log"))),
            ("a", 1, measure("platter-no-such-tool")),
        ],
    );
    p.run_as.insert(
        "a".into(),
        RunAs {
            user: "platter-no-such-user".into(),
            home: String::new(),
        },
    );
    let shared = start(&dir, &[p]).wait();
    let reason = refusal(&dir, &shared);
    if rustix::process::geteuid().is_root() {
        assert_eq!(
            reason,
            format!(
                "host {HOST} lacks: platter-no-such-tool (for the measure of cell a), \
                 user platter-no-such-user (for the workload of cell a)"
            )
        );
    } else {
        assert!(reason.contains("not root"), "{reason}");
        assert!(reason.contains("platter-no-such-user"), "{reason}");
    }
    assert!(lines(&dir, "ran.log").is_empty(), "a step ran");
}

/// A user of this host made for a test (`useradd`), removed at the end.
struct TestUser(String);

impl TestUser {
    fn new(tag: &str) -> TestUser {
        let name = format!("plt{tag}{}", std::process::id() % 100_000);
        let ok = std::process::Command::new("useradd")
            .args(["--no-create-home", "--shell", "/bin/sh", &name])
            .status()
            .expect("useradd")
            .success();
        assert!(ok, "useradd {name}");
        TestUser(name)
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let _ = std::process::Command::new("userdel").arg(&self.0).status();
    }
}

/// The workload's setup and measure run as its user, with `HOME` the home made for it on
/// the storage under test (owned by it, made again after the storage was made again);
/// phases run as the agent.
#[test]
fn a_workload_runs_as_its_user_with_its_home_on_the_storage_under_test() {
    if !root_or_skip("it adds a user and mounts a RAM disk") {
        return;
    }
    runs_as_its_user_on(ramdisk(), "x");
}

/// The same on an encrypted view (gocryptfs, FUSE: opened to the user, who would be shut
/// out of a FUSE mount by default).
#[test]
fn a_workload_runs_as_its_user_on_encrypted_storage() {
    if !root_or_skip("it adds a user and mounts a RAM disk") {
        return;
    }
    if crate::process::find_program("gocryptfs".as_ref()).is_err() {
        skip("needs gocryptfs (apt install gocryptfs), which the agent cannot find");
        return;
    }
    let encrypted = StorageConfig {
        encryption: Encryption::Gocryptfs,
        ..ramdisk()
    };
    runs_as_its_user_on(encrypted, "e");
}

fn runs_as_its_user_on(storage: StorageConfig, tag: &str) {
    let (_tmp, dir) = state_dir();
    // The user must reach the mount point under the state directory.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let user = TestUser::new(tag);
    let report = |name: &str| {
        format!(
            "cp ${{mount}}/home/u/who \"$PLATTER_STATE_DIR/{name}\"; \
             stat -c %U ${{mount}}/home/u >> \"$PLATTER_STATE_DIR/{name}\"; \
             id -un >> \"$PLATTER_STATE_DIR/{name}\""
        )
    };
    let mut p = plan(
        "p",
        OnFailure::Continue,
        vec![
            ("a", 1, StepKind::StorageSetup(storage.clone())),
            (
                "a",
                0,
                StepKind::Setup("id -un > $HOME/who; echo $HOME >> $HOME/who".into()),
            ),
            ("a", 1, cmd(&report("after-setup"))),
            (
                "a",
                1,
                measure("id -un > $HOME/who; echo $HOME >> $HOME/who"),
            ),
            ("a", 1, cmd(&report("after-measure"))),
            // Made anew (as after a reboot): the home is made again for the next command.
            ("a", 2, StepKind::StorageSetup(storage.clone())),
            (
                "a",
                2,
                measure("id -un > $HOME/who; echo $USER >> $HOME/who"),
            ),
            ("a", 2, cmd(&report("after-remake"))),
            ("a", 2, StepKind::StorageTeardown(storage.clone())),
        ],
    );
    p.run_as.insert(
        "a".into(),
        RunAs {
            user: user.0.clone(),
            home: "${mount}/home/u".into(),
        },
    );
    let mount = config(&dir).storage.mount_point(&storage);
    let home = mount.join("home/u").display().to_string();
    let shared = start(&dir, &[p]).wait();
    let r = assert_outbox_is_the_journal(&dir, &shared);
    for i in 0..9 {
        assert_eq!(
            states(&r, i),
            SUCCEEDED_ONCE,
            "step {i}: {:?}",
            events(&r, i)
        );
    }
    let u = user.0.as_str();
    assert_eq!(lines(&dir, "after-setup"), [u, &home, u, "root"]);
    assert_eq!(lines(&dir, "after-measure"), [u, &home, u, "root"]);
    assert_eq!(lines(&dir, "after-remake"), [u, u, u, "root"]);
    assert!(!mounted(&mount), "torn down");
}

// ---- purge and precondition (prepare:) ----

const MIB: u64 = 1 << 20;

fn purge_step(device: &str, method: crate::model::PurgeMethod) -> StepKind {
    StepKind::Purge(crate::model::Purge {
        device: device.into(),
        method,
    })
}

fn precondition_step(device: &str, passes: u32, block_size: u64) -> StepKind {
    StepKind::Precondition(crate::model::Precondition {
        device: device.into(),
        passes,
        block_size,
    })
}

/// Writes `byte` over the whole of `device`, through to its backing file.
fn fill_with(device: &str, byte: u8, bytes: u64) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(device)
        .expect("open the loop device");
    let chunk = vec![byte; MIB as usize];
    for _ in 0..bytes / MIB {
        f.write_all(&chunk).expect("write the loop device");
    }
    f.sync_all().expect("fsync the loop device");
}

/// `len` bytes of `device` at `offset`, read around the page cache.
fn read_at(device: &str, offset: u64, len: usize) -> Vec<u8> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(device)
        .expect("open the loop device");
    // O_DIRECT wants an aligned buffer: a longer Vec, used from its first aligned byte.
    let mut raw = vec![0u8; len + 4096];
    let start = raw.as_ptr().align_offset(4096);
    let buf = &mut raw[start..start + len];
    f.read_exact_at(buf, offset).expect("read the loop device");
    buf.to_vec()
}

/// The 512-byte blocks the file at `path` has allocated.
fn allocated_blocks(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).expect("stat").blocks()
}

/// A campaign file alone must never erase a drive: with the device allowed
/// (`--allow-device`) but without `--allow-purge`, a plan with a purge is refused whole,
/// saying what to do, and its drive keeps its data; a precondition needs no
/// `--allow-purge`, but the device rails: a device not allowed is refused.
#[test]
fn a_purge_without_allow_purge_refuses_the_plan_and_the_drive_keeps_its_data() {
    let (_tmp, dir) = state_dir();
    let Some(drive) = LoopDevice::new(&dir, 64 * MIB) else {
        return;
    };
    fill_with(&drive.path, 0xab, 64 * MIB);
    let p = plan(
        "p",
        OnFailure::Continue,
        vec![
            (
                "a",
                0,
                purge_step(&drive.path, crate::model::PurgeMethod::Discard),
            ),
            ("a", 0, precondition_step(&drive.path, 1, 128 << 10)),
            ("a", 1, cmd(&log_attempt("ran.log"))),
        ],
    );
    let shared = start_with(config_for_drive(&dir, &drive.path, false), &dir, &[p]).wait();
    let reason = refusal(&dir, &shared);
    assert_eq!(
        reason,
        format!(
            "purge of {} (discard) is not allowed: start platter-agent with --allow-purge to let \
             plans purge drives it may format",
            drive.path
        )
    );
    assert!(lines(&dir, "ran.log").is_empty(), "a step ran");
    assert!(read_at(&drive.path, 0, 4096).iter().all(|b| *b == 0xab));

    let (_tmp2, dir2) = state_dir();
    let p = plan(
        "q",
        OnFailure::Continue,
        vec![("a", 0, precondition_step(&drive.path, 1, 128 << 10))],
    );
    let mut cfg = config_for_drive(&dir2, &drive.path, true);
    cfg.storage.allowed = vec!["/dev/sdq".into()];
    let shared = start_with(cfg, &dir2, &[p]).wait();
    let reason = refusal(&dir2, &shared);
    assert!(
        reason.starts_with(&format!(
            "precondition of {0}: {0} is not allowed: the agent formats only devices its operator \
             named with --allow-device",
            drive.path
        )),
        "{reason}"
    );
}

/// The SNIA PTS preparation on a loop device: a discard purge (its data reads back as zeros,
/// and the loop device punched the image file's blocks out), then a precondition of 2
/// passes in 128 KiB writes: every byte written twice, counted exactly, with data that
/// neither repeats nor compresses.
#[test]
fn a_discard_purge_then_a_precondition_on_a_loop_device() {
    let (_tmp, dir) = state_dir();
    let Some(drive) = LoopDevice::new(&dir, 64 * MIB) else {
        return;
    };
    if !tool_or_skip("blkdiscard", "util-linux") {
        return;
    }
    fill_with(&drive.path, 0xab, 64 * MIB);
    let before = allocated_blocks(&drive.image);
    assert!(
        before >= 64 * MIB / 512,
        "the image holds the pattern: {before} blocks"
    );

    let purge = plan(
        "purge",
        OnFailure::Continue,
        vec![(
            "a",
            0,
            purge_step(&drive.path, crate::model::PurgeMethod::Discard),
        )],
    );
    let cfg = config_for_drive(&dir, &drive.path, true);
    start_with(cfg.clone(), &dir, &[purge]).wait();
    let r = records(&dir);
    let end = only_end(&r, 0);
    assert_eq!(end.state, StepState::Succeeded, "{end:?}");
    assert_eq!(end.kind, "purge");
    let metrics: Vec<&str> = end.samples.iter().map(|s| s.metric.as_str()).collect();
    assert_eq!(metrics, ["purge.seconds"]);
    for offset in [0, 32 * MIB, 64 * MIB - 4096] {
        assert!(
            read_at(&drive.path, offset, 4096).iter().all(|b| *b == 0),
            "data left at byte {offset} after the discard"
        );
    }
    let after = allocated_blocks(&drive.image);
    assert!(
        after < before / 16,
        "the discard punched the image's blocks out: {before} → {after} blocks"
    );

    let (_tmp2, dir2) = state_dir();
    let fill = plan(
        "fill",
        OnFailure::Continue,
        vec![("a", 0, precondition_step(&drive.path, 2, 128 << 10))],
    );
    start_with(config_for_drive(&dir2, &drive.path, false), &dir2, &[fill]).wait();
    let r = records(&dir2);
    let end = only_end(&r, 0);
    assert_eq!(end.state, StepState::Succeeded, "{end:?}");
    let value = |metric: &str| {
        let s = end
            .samples
            .iter()
            .find(|s| s.metric == metric)
            .unwrap_or_else(|| panic!("no {metric} in {:?}", end.samples));
        (s.value, s.unit.clone())
    };
    assert_eq!(
        value("precondition.bytes"),
        ((2 * 64 * MIB) as f64, "B".into())
    );
    let (seconds, unit) = value("precondition.seconds");
    assert!(seconds > 0.0 && unit == "s");
    let (bandwidth, unit) = value("precondition.bandwidth");
    assert_eq!(unit, "B/s");
    assert!(
        (bandwidth - (2 * 64 * MIB) as f64 / seconds).abs() < 1.0,
        "bandwidth {bandwidth} B/s is bytes over seconds"
    );
    assert!(value("precondition.pass1.seconds").0 > 0.0);
    assert!(value("precondition.pass2.seconds").0 > 0.0);
    eprintln!(
        "precondition of a 64 MiB loop device, 2 passes of 128 KiB writes: {:.1} MiB/s",
        bandwidth / MIB as f64
    );

    // What the drive holds: not zeros, no block like another, nothing to compress.
    let head = read_at(&drive.path, 0, 4 * MIB as usize);
    assert!(head.iter().any(|b| *b != 0));
    let block = 128 << 10;
    assert_ne!(
        head[..block],
        head[block..2 * block],
        "a block is like its neighbour"
    );
    let last = read_at(&drive.path, 64 * MIB - block as u64, block);
    assert_ne!(head[..block], last[..], "the last block is like the first");
    let sectors: std::collections::HashSet<&[u8]> = head.chunks(4096).collect();
    assert_eq!(sectors.len(), head.len() / 4096, "two 4 KiB sectors alike");
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut z, &head).unwrap();
    let compressed = z.finish().unwrap().len();
    assert!(
        compressed as f64 > 0.99 * head.len() as f64,
        "deflate made {} bytes of {}",
        compressed,
        head.len()
    );
}
