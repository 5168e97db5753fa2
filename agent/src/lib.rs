//! platter's agent: owns one host. It receives plans from the coordinator, journals them,
//! runs their steps one at a time, survives crashes and reboots in the middle of a plan,
//! and streams results back exactly once. It decides how to run a step, never what to run.
//!
//! The public API is what the `platter` binary needs to embed an agent (`platter run`,
//! `platter agent`, `platter inventory`): [`run`] with an [`AgentConfig`] (and the defaults
//! `platter run` fills it with), [`journal_fault`] for what a stopped agent's state
//! directory needs, the command line in [`cli`], [`scan_inventory`] and [`scan_tools`].
//! The types it speaks are the contract's (`platter_proto`); everything else is the
//! crate's own. `fuzz`, `testing` and `Rotation` are hooks for this workspace's fuzz
//! targets, tests and benchmarks, not an API.

#![warn(unreachable_pub)]

mod affinity;
pub mod cli;
mod executor;
#[doc(hidden)]
pub mod fuzz;
mod journal;
mod link;
mod precondition;
mod preflight;
mod probes;
mod process;
mod purge;
mod shared;
mod storage;
mod workloads;

pub(crate) use platter_proto::{model, tls, wire};

pub use probes::inventory::InventoryError;

/// The agent's reconnect pacing over several coordinators, for the fleet benchmark's fake
/// agents (coordinator/benches/fleet_scale.rs) to move exactly as agents do.
#[doc(hidden)]
pub use link::Rotation;

/// The programs plans may run on this host, found in PATH, with their versions, as an
/// agent reports them.
pub fn scan_tools() -> Vec<platter_proto::inventory::ToolVersion> {
    probes::tools::probe()
}

/// The block devices of this host, as an agent reports them (sorted by name; what is not
/// a drive is left out, see `probes::inventory`).
pub fn scan_inventory() -> Result<Vec<platter_proto::inventory::Device>, InventoryError> {
    probes::inventory::scan(&probes::inventory::Roots::default())
}

/// The health of the drives at `paths` now, read as a plan reads its drives' before and
/// after (`smartctl --json -x`, or why it cannot be read): `platter inventory --health`.
pub fn read_health(paths: &[&str]) -> Vec<platter_proto::provenance::DriveHealth> {
    probes::provenance::health(&probes::inventory::Roots::default(), paths)
}

/// What the workspace's tests and benchmarks reach inside the agent for: the parsers and
/// measurements the coordinator's metric catalogue is pinned to, the journal's entry type,
/// the spawn path, the fsync loop and whether tests may skip. Not an API.
#[doc(hidden)]
pub mod testing {
    pub use crate::journal::Entry;
    pub use crate::probes::diskstats::DiskStats;
    pub use crate::probes::health::{HealthError, Identity, Reading};
    pub use crate::process::{run as run_process, Outcome};
    pub use crate::workloads::fsync::{deserialize_histogram, run as run_fsync};
    pub use crate::workloads::sample::Parsed;
    pub use crate::workloads::{measure, outcome_samples};

    /// Whether every test must run: `PLATTER_TEST_STRICT=1`, which `.ci/run` sets, says root,
    /// PostgreSQL (`PLATTER_TEST_POSTGRES`), Chromium and the workload tools are all here, so
    /// a test that would skip fails instead.
    pub fn strict() -> bool {
        let set = |name| std::env::var_os(name).is_some_and(|v| v == "1");
        // The variable's old name, which said only "root" though it always meant all of it.
        set("PLATTER_TEST_STRICT") || set("PLATTER_TEST_REQUIRE_ROOT")
    }

    /// Where the agent finds `program` (`process::search_path`), if it does: tests that need a
    /// tool look for it as the agent will.
    pub fn find_program(program: &str) -> Option<std::path::PathBuf> {
        crate::process::find_program(program.as_ref()).ok()
    }

    /// The tool output parsers.
    pub mod parse {
        pub use crate::probes::health::parse as smartctl;
        pub use crate::workloads::bonnie::parse_csv as bonnie_csv;
        pub use crate::workloads::compilebench::parse as compilebench;
        pub use crate::workloads::fio::parse as fio;
    }
}

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::executor::{ExecConfig, Executor};
use crate::journal::Journal;
use crate::link::Link;
use crate::shared::Shared;

/// Where Linux keeps the boot id, which tells a reboot from a restart of the agent.
pub const DEFAULT_BOOT_ID_FILE: &str = "/proc/sys/kernel/random/boot_id";

/// Everything an agent needs to run.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The coordinators' addresses, e.g. `https://coordinator.lab:7461`, in the order they
    /// are dialled: the first that answers, the next when its stream ends or it is silent
    /// (see `link`). A name is resolved again at each round, and each of its addresses is
    /// one coordinator.
    pub coordinators: Vec<String>,
    pub host: String,
    pub state_dir: PathBuf,
    pub boot_id_file: PathBuf,
    pub reboot_command: String,
    pub reboot_timeout: Duration,
    /// Devices storage steps may format (paths or globs); nothing else is ever touched.
    pub allow_devices: Vec<String>,
    /// Plans may purge drives (`--allow-purge`), those `allow_devices` allows; without it a
    /// plan with a purge step is refused.
    pub allow_purge: bool,
    /// Where storage is mounted; `{state_dir}/mnt` when None.
    pub mount_dir: Option<PathBuf>,
    /// Mutual TLS or plaintext.
    pub transport: tls::Transport,
    /// `key=value` labels the coordinator can select this host by.
    pub labels: Vec<(String, String)>,
    /// How often the devices are scanned again; a change is sent to the coordinator.
    pub inventory_interval: Duration,
}

/// How often an agent scans its drives again unless told otherwise.
pub const DEFAULT_INVENTORY_INTERVAL: Duration = Duration::from_secs(30);

/// Runs an agent until `shutdown` is cancelled. An error means the agent cannot go on
/// (its journal cannot be opened, is corrupt, or failed to write with an error other than
/// a full or read-only filesystem, which the executor waits out holding its steps).
pub async fn run(cfg: AgentConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    let boot_id = std::fs::read_to_string(&cfg.boot_id_file)
        .with_context(|| format!("reading boot id from {}", cfg.boot_id_file.display()))?
        .trim()
        .to_string();
    // Bad TLS files or addresses stop the agent here, before anything runs.
    let coordinators = link::Coordinators::new(&cfg.coordinators, &cfg.transport)?;
    // Said at ERROR as well as returned: `platter run` shows its agent's log at once, while
    // its coordinator only sees the agent gone.
    let (journal, state) = Journal::open(&cfg.state_dir).inspect_err(|e| {
        tracing::error!(error = %e, "the agent cannot start: every plan and record goes through its journal; make room in or fix its state directory (--state-dir)");
    })?;
    let shared = Arc::new(Shared::new(
        state.unacked.iter().cloned(),
        state.acked,
        state.next_seq,
    ));
    let (plan_tx, plan_rx) = mpsc::unbounded_channel();
    let exec_cfg = ExecConfig {
        host: cfg.host.clone(),
        boot_id: boot_id.clone(),
        state_dir: cfg.state_dir.clone(),
        reboot_command: cfg.reboot_command.clone(),
        reboot_timeout: cfg.reboot_timeout,
        storage: storage::Storage {
            // Absolute: mount points are compared with mountinfo, which has absolute paths.
            mount_dir: std::path::absolute(
                cfg.mount_dir
                    .clone()
                    .unwrap_or_else(|| cfg.state_dir.join("mnt")),
            )?,
            state_dir: cfg.state_dir.clone(),
            allowed: cfg.allow_devices.clone(),
            allow_purge: cfg.allow_purge,
            inventory_roots: probes::inventory::Roots::default(),
        },
    };
    let executor = Executor::new(exec_cfg, journal, state, shared.clone(), plan_rx);
    let stop = shutdown.child_token();
    let exec_stop = stop.clone();
    let exec_thread = std::thread::Builder::new()
        .name("executor".into())
        .spawn(move || {
            let r = executor.run(exec_stop.clone());
            if let Err(e) = &r {
                // At once and at ERROR (the link takes a moment to stop): with a full or
                // read-only state directory the agent otherwise just disappeared, and
                // `platter run` waited for it without a word.
                tracing::error!(error = %e, "the agent stops: its journal cannot be written, and nothing runs without it; make room in or fix its state directory (--state-dir), then start it again");
            }
            // Whatever ended the executor ends the agent.
            exec_stop.cancel();
            r
        })?;
    let link = Link {
        coordinators,
        host: cfg.host.clone(),
        transport: cfg.transport.clone(),
        labels: cfg.labels.clone(),
        inventory_interval: cfg.inventory_interval,
        tools: Default::default(),
        refused: Default::default(),
        boot_id,
        shared: shared.clone(),
        plans: plan_tx,
    };
    link.run(stop.clone()).await;
    process::kill_group(&shared.running_pgid);
    // The link returned because of `stop`; the running step (if any) was just killed and
    // is left unfinished in the journal, so it runs again from its start next time.
    let result = tokio::task::spawn_blocking(move || exec_thread.join()).await?;
    match result {
        // The journal's error names the journal itself ("journal PATH: why").
        Ok(r) => Ok(r?),
        Err(_) => anyhow::bail!("executor thread panicked"),
    }
}

/// What the state directory needs, when an agent stopped (`run`'s error) because its
/// journal could not be opened or written: `Some(Full)` for a full filesystem (or quota),
/// `Some(ReadOnly)` for a read-only one, `Some(Other)` for another I/O error of the
/// journal; `None` when it stopped for something else. For `platter run` to say what to do.
pub fn journal_fault(e: &anyhow::Error) -> Option<JournalFault> {
    e.chain()
        .find_map(|c| c.downcast_ref::<journal::JournalError>())
        .and_then(journal::JournalError::io_kind)
        .map(|kind| match kind {
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
                JournalFault::Full
            }
            std::io::ErrorKind::ReadOnlyFilesystem => JournalFault::ReadOnly,
            _ => JournalFault::Other,
        })
}

/// See [`journal_fault`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalFault {
    Full,
    ReadOnly,
    Other,
}
