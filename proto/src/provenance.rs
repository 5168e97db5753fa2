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
/// After a plan's last step: the health of its drives once the measurements are done.
pub const AT_PLAN_END: &str = "plan_end";

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
    /// The health of the drives under test (the devices the plan's storage is made on), read
    /// at the plan's start (before its first measurement), when it is taken up again, and
    /// at its end (after its last).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health: Vec<DriveHealth>,
}

/// One drive's health at a snapshot: what `smartctl --json` read, or why nothing was read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DriveHealth {
    /// The device node read (`/dev/sda`), as the plan names it resolved.
    pub path: String,
    /// The drive's identity as the inventory has it (smartctl's where the inventory's is
    /// empty): a report and the ledger match readings to drives by these.
    pub model: String,
    pub serial: String,
    pub firmware: String,
    /// World wide name (`naa.5000c500a1b2c3d4`, `eui.…`), "" when the drive has none.
    #[serde(default)]
    pub wwn: String,
    /// Why there is no reading ("a loop device has no drive health", "smartctl not found on
    /// the agent's PATH", smartctl's own message); "" when `reading` is there.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub unreadable: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reading: Option<HealthReading>,
}

/// The health attributes platter compares before and after a run, each `None` where the
/// drive (or its protocol) does not report it: never a zero for "unknown".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HealthReading {
    /// The tool that read it, with its version: "smartctl 7.3".
    pub tool: String,
    /// smartctl's device protocol: "ATA", "NVMe", "SCSI".
    pub protocol: String,
    /// The drive's own overall verdict (SMART overall-health self-assessment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed: Option<bool>,
    /// Current temperature, °C.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_on_hours: Option<u64>,
    /// NVMe unsafe shutdowns; ATA power-off retract count (192) where the drive has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsafe_shutdowns: Option<u64>,
    /// NVMe media and data integrity errors; ATA reported uncorrectable errors (187).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_errors: Option<u64>,
    /// ATA reallocated sectors (5); SCSI grown defect list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reallocated_sectors: Option<u64>,
    /// ATA current pending sectors (197).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_sectors: Option<u64>,
    /// ATA offline uncorrectable (198); SCSI total uncorrected read, write and verify errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncorrectable_errors: Option<u64>,
    /// ATA UDMA CRC errors (199); SAS invalid dwords and running disparity errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crc_errors: Option<u64>,
    /// NVMe critical warning bits (0 is none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critical_warning: Option<u64>,
    /// NVMe percentage used; SCSI percentage used endurance indicator; ATA where a
    /// wear attribute says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage_used: Option<u64>,
    /// NVMe available spare, %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_spare: Option<u64>,
    /// Bytes the host wrote to the drive over its life (NVMe data units written × 512,000;
    /// ATA total LBAs written × the logical block size; SCSI gigabytes processed on write).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_written_bytes: Option<u64>,
}
