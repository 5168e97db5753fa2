//! What an agent reports about its block devices (`inventory`): the types both sides
//! share. The agent's `probes::inventory::scan` fills them from sysfs, `/dev` and
//! mountinfo; the coordinator selects drives by them and stores them.

use serde::{Deserialize, Serialize};

/// How the disk reaches the host. Serialized as one lowercase word ("ata", "usb", …;
/// an unknown kind as the name it was found under, e.g. "mmc_block").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum Transport {
    Ata,
    Usb,
    Nvme,
    Scsi,
    Virtio,
    Loop,
    Other(String),
}

impl Transport {
    pub fn as_str(&self) -> &str {
        match self {
            Transport::Ata => "ata",
            Transport::Usb => "usb",
            Transport::Nvme => "nvme",
            Transport::Scsi => "scsi",
            Transport::Virtio => "virtio",
            Transport::Loop => "loop",
            Transport::Other(s) => s,
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<Transport> for String {
    fn from(t: Transport) -> String {
        t.as_str().to_string()
    }
}

impl From<String> for Transport {
    fn from(s: String) -> Transport {
        match s.as_str() {
            "ata" => Transport::Ata,
            "usb" => Transport::Usb,
            "nvme" => Transport::Nvme,
            "scsi" => Transport::Scsi,
            "virtio" => Transport::Virtio,
            "loop" => Transport::Loop,
            _ => Transport::Other(s),
        }
    }
}

/// The volatile write cache as far as we can tell; see `Device::write_cache_source`
/// for how far that is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteCache {
    WriteBack,
    WriteThrough,
    Unknown,
}

/// Where `write_cache` came from: the drive's own mode page (via the SCSI disk
/// driver) — the real setting.
pub const CACHE_SOURCE_SCSI: &str = "scsi_disk cache_type";
/// Where `write_cache` came from: the block queue flag — only what the kernel
/// believes (and can be overridden by writing to it), not the drive's setting.
pub const CACHE_SOURCE_QUEUE: &str = "kernel queue flag";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    /// Kernel name: "sda", "nvme0n1", "loop3", "vda".
    pub name: String,
    /// Device node under `Roots::dev`, e.g. "/dev/sda".
    pub path: String,
    /// "major:minor", the key of /proc/diskstats and of blkio throttle files.
    pub major_minor: String,
    /// Identity strings, trimmed; "" when the kernel does not say.
    pub vendor: String,
    pub model: String,
    pub serial: String,
    pub firmware: String,
    pub size_bytes: u64,
    pub rotational: bool,
    pub transport: Transport,
    /// Distinct driver names from the disk up to the nearest PCI device's driver,
    /// e.g. ["sd", "uas", "xhci_hcd"]; empty for loop devices.
    pub controller: Vec<String>,
    /// Nearest PCI ancestor, e.g. "0000:00:1f.2".
    pub pci_address: Option<String>,
    /// Names in `/dev/disk/by-id` / `by-path` that point at the whole disk.
    pub by_id: Vec<String>,
    pub by_path: Vec<String>,
    pub write_cache: WriteCache,
    /// [`CACHE_SOURCE_SCSI`], [`CACHE_SOURCE_QUEUE`] or "" when unknown.
    pub write_cache_source: String,
    pub partitions: Vec<Partition>,
    /// Mount points of the disk, its partitions and anything stacked on them.
    pub mounted: Vec<String>,
    /// Devices stacked on the disk or its partitions (dm-crypt, LVM, md), any depth.
    /// A non-empty list means "in use" even when nothing is mounted.
    pub holders: Vec<String>,
    /// "/" is on this disk, a partition of it, or something stacked on them.
    pub holds_root: bool,
    /// Loop devices only: the image file behind it.
    pub backing_file: Option<String>,
    /// World wide name as sysfs has it (`naa.5000c500a1b2c3d4`, `eui.…`), "" when the
    /// drive has none (or an older agent did not say): the drive ledger's key where present.
    #[serde(default)]
    pub wwn: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    pub name: String,
    pub major_minor: String,
    pub size_bytes: u64,
    /// Mount points of the partition and anything stacked on it.
    pub mounted: Vec<String>,
}

/// A program plans may run, as an agent found it: `platter agents` and `platter inventory`
/// list them, so a missing tool shows before a plan is refused for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolVersion {
    /// The name plans run it by: "fio", "mkfs.xfs", "gocryptfs".
    pub name: String,
    /// Where it was found in the agent's PATH; "" when it was not.
    pub path: String,
    /// The first line of its version output ("fio-3.33"), or why there is none.
    pub version: String,
}
