//! What a run ran on, as an agent reports it in `Provenance` records: the host, the
//! devices under test, the storage as mounted, the tools' versions. The agent's
//! `probes::provenance` takes the snapshots; the coordinator stores and reports them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::inventory::Device;

/// Why a snapshot was taken.
pub const AT_PLAN_START: &str = "plan_start";
/// The agent took up a plan it had begun before: after a reboot or a restart.
pub const AT_RESUME: &str = "resume";
pub const AT_STORAGE_SETUP: &str = "storage_setup";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostFacts {
    pub agent_version: String,
    /// `uname -r`
    pub kernel_release: String,
    /// `uname -v`
    pub kernel_version: String,
    pub boot_id: String,
    pub cpu_model: String,
    pub cpu_count: u32,
    pub memory_bytes: u64,
    /// The CPU the agent's own threads are kept to (`--agent-cpu`), "" when they are not
    /// kept apart from the workloads (or an older agent did not say).
    #[serde(default)]
    pub agent_cpus: String,
    /// The CPUs workloads may run on, as the kernel lists them (`0-3,6`); "" from an
    /// older agent.
    #[serde(default)]
    pub workload_cpus: String,
    /// The kernel's timer tick (CONFIG_HZ), 0 when unknown.
    #[serde(default)]
    pub tick_hz: u32,
    /// How the kernel splits a task's CPU time between user and system: [`TICK_ACCOUNTING`]
    /// (by timer-tick samples: coarse for a run of a few ticks), [`VIRTUAL_ACCOUNTING`]
    /// (measured at each switch), "" when unknown.
    #[serde(default)]
    pub cpu_accounting: String,
}

/// `HostFacts::cpu_accounting` of a kernel with CONFIG_TICK_CPU_ACCOUNTING.
pub const TICK_ACCOUNTING: &str = "tick";
/// `HostFacts::cpu_accounting` of a kernel with CONFIG_VIRT_CPU_ACCOUNTING_NATIVE.
pub const VIRTUAL_ACCOUNTING: &str = "virtual";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceFacts {
    pub device: Device,
    pub logical_block_size: u32,
    pub physical_block_size: u32,
    /// The I/O scheduler in effect (`queue/scheduler`'s bracketed entry), "" if none.
    pub scheduler: String,
}

/// One mount as `/proc/self/mountinfo` has it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MountFacts {
    pub mount_point: String,
    pub fs_type: String,
    pub source: String,
    /// Per-mount options (`rw,noatime`).
    pub options: String,
    /// Filesystem options (`rw,errors=remount-ro`).
    pub super_options: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StorageFacts {
    /// The mounts the workload's `${mount}` rests on, outermost (what it sees) first.
    pub mounts: Vec<MountFacts>,
    /// The mkfs program's own version line, "" when no filesystem was made.
    pub mkfs_version: String,
    /// The drive's write cache as read back after setup: "on", "off", or why unknown.
    pub write_cache: String,
}

/// A snapshot of what a plan runs on, taken at `trigger`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    pub trigger: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostFacts>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceFacts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageFacts>,
    /// Tool → its version line (`fio` → `fio-3.33`), or why it is unknown.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, String>,
}
