//! Domain types of plans and results, shared by agent and coordinator. They are what the
//! journal stores; `wire` converts them to and from the generated proto types.

use serde::{Deserialize, Serialize};

pub use crate::ids::{CampaignId, CellId, HostName, PlanId};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    #[default]
    Continue,
    Abort,
}

/// The ordered steps one agent runs for one campaign on its host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub id: PlanId,
    pub campaign_id: CampaignId,
    pub campaign_name: String,
    pub host: HostName,
    pub steps: Vec<Step>,
    pub on_failure: OnFailure,
    /// The user each cell's workload commands (setup, clean, run) run as, for cells whose
    /// `workload.command` names one; absent from plans without any (and from older ones).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub run_as: std::collections::BTreeMap<CellId, RunAs>,
}

/// Who a workload's commands run as (`workload.command.user` and `home`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunAs {
    /// A user of the host; the agent refuses a plan naming one it lacks.
    pub user: String,
    /// `HOME` for the user (the agent fills in `${mount}`), made and owned by the user on
    /// the storage under test before the user's first command after each storage setup.
    /// Empty: the user's home from the password database, as it is.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub home: String,
}

impl Plan {
    /// Who step `step` runs as: the cell's user for the workload's own commands (setup,
    /// clean, a command measure); `None` (the agent's user) for everything else.
    pub fn run_as(&self, step: &Step) -> Option<&RunAs> {
        match step.kind {
            StepKind::Setup(_) | StepKind::Clean(_) | StepKind::Measure(Workload::Command(_)) => {
                self.run_as.get(&step.cell_id)
            }
            _ => None,
        }
    }

    /// The storage in effect at step `index`: the last setup before it with no teardown since.
    pub fn storage_at(&self, index: u32) -> Option<StorageConfig> {
        self.steps[..=index as usize]
            .iter()
            .rev()
            .find_map(|s| match &s.kind {
                StepKind::StorageSetup(c) => Some(Some(c.clone())),
                StepKind::StorageTeardown(_) => Some(None),
                _ => None,
            })?
    }

    /// The preparation of the measure step at `index`: the steps the planner put right before
    /// it for its repetition (its `before_each` phases, and the storage and cell setup it adds
    /// after a reboot). A measure that runs again runs after all of them ran again; one whose
    /// preparation failed is not run. Empty for other steps.
    pub fn preparation(&self, index: u32) -> std::ops::Range<u32> {
        let measure = &self.steps[index as usize];
        if !matches!(measure.kind, StepKind::Measure(_)) {
            return index..index;
        }
        let mut first = index;
        while let Some(s) = first.checked_sub(1).map(|i| &self.steps[i as usize]) {
            // A cell's setup has repetition 0 but belongs to the visit it is planned in.
            let same_visit = s.cell_id == measure.cell_id
                && (s.repetition == measure.repetition || matches!(s.kind, StepKind::Setup(_)));
            if !same_visit || matches!(s.kind, StepKind::Measure(_) | StepKind::StorageTeardown(_))
            {
                break;
            }
            first -= 1;
        }
        // Making the visit's storage and the cell's first setup open a visit; they are not
        // this repetition's preparation (only after a reboot in it are they made again).
        while first < index
            && matches!(
                self.steps[first as usize].kind,
                StepKind::StorageSetup(_) | StepKind::Setup(_)
            )
        {
            first += 1;
        }
        first..index
    }
}

/// The start of a measure step's error when its preparation failed (reports look for it).
pub const NOT_MEASURED: &str = "not measured: its preparation failed";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub index: u32,
    pub cell_id: CellId,
    /// 1-based; 0 for once-per-cell steps. Warm-ups are numbered apart, 1-based too.
    pub repetition: u32,
    /// A warm-up repetition (`warmup:`): run and stored like the others, never counted
    /// in statistics, comparisons or verdicts. Absent in plans from before warm-ups.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warmup: bool,
    pub kind: StepKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    Setup(String),
    Clean(String),
    Sync,
    DropCaches,
    Fstrim(String),
    Reboot,
    Command(String),
    Measure(Workload),
    StorageSetup(StorageConfig),
    StorageTeardown(StorageConfig),
    /// `prepare.purge`: once per drive, before its first storage setup.
    Purge(Purge),
    /// `prepare.precondition`: once per drive, after its purge.
    Precondition(Precondition),
}

/// How a drive is purged (`prepare.purge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PurgeMethod {
    /// BLKDISCARD over the whole device: not a PTS purge, since the drive may keep
    /// blocks mapped.
    Discard,
    /// ATA SECURITY ERASE UNIT.
    SecureErase,
    /// NVMe Format NVM with user-data erase.
    NvmeFormat,
    /// NVMe Sanitize, block erase.
    NvmeSanitize,
    /// SCSI SANITIZE, block erase.
    Sanitize,
}

impl PurgeMethod {
    pub const ALL: [PurgeMethod; 5] = [
        PurgeMethod::Discard,
        PurgeMethod::SecureErase,
        PurgeMethod::NvmeFormat,
        PurgeMethod::NvmeSanitize,
        PurgeMethod::Sanitize,
    ];

    /// The name campaigns use (`purge: nvme-sanitize`).
    pub fn name(self) -> &'static str {
        match self {
            PurgeMethod::Discard => "discard",
            PurgeMethod::SecureErase => "secure-erase",
            PurgeMethod::NvmeFormat => "nvme-format",
            PurgeMethod::NvmeSanitize => "nvme-sanitize",
            PurgeMethod::Sanitize => "sanitize",
        }
    }

    pub fn from_name(name: &str) -> Option<PurgeMethod> {
        PurgeMethod::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Whether SNIA's PTS counts it as a purge (a discard does not).
    pub fn is_pts_purge(self) -> bool {
        self != PurgeMethod::Discard
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Purge {
    /// /dev/… of the whole drive.
    pub device: String,
    pub method: PurgeMethod,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Precondition {
    /// /dev/… of the whole drive.
    pub device: String,
    /// How many times the whole user capacity is written.
    pub passes: u32,
    /// Bytes per sequential write.
    pub block_size: u64,
}

/// The filesystem a storage configuration puts on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Filesystem {
    Ext2,
    Ext4,
    Xfs,
    Btrfs,
    /// A RAM disk: no device.
    Tmpfs,
    /// The raw device, no filesystem (`${device}` in the workload).
    None,
}

impl Filesystem {
    pub const ALL: [Filesystem; 6] = [
        Filesystem::Ext2,
        Filesystem::Ext4,
        Filesystem::Xfs,
        Filesystem::Btrfs,
        Filesystem::Tmpfs,
        Filesystem::None,
    ];

    /// The name campaigns, plans and `mount -t` use.
    pub fn name(self) -> &'static str {
        match self {
            Filesystem::Ext2 => "ext2",
            Filesystem::Ext4 => "ext4",
            Filesystem::Xfs => "xfs",
            Filesystem::Btrfs => "btrfs",
            Filesystem::Tmpfs => "tmpfs",
            Filesystem::None => "none",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Filesystem> {
        Filesystem::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Whether setting it up formats or writes a device.
    pub fn needs_device(self) -> bool {
        self != Filesystem::Tmpfs
    }

    /// Whether there is a filesystem to mount (not the raw device).
    pub fn is_mounted(self) -> bool {
        self != Filesystem::None
    }
}

/// What storage setup does with the drive's volatile write cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteCacheSetting {
    On,
    Off,
    /// Leave it as it is.
    #[default]
    Keep,
}

impl WriteCacheSetting {
    pub fn name(self) -> &'static str {
        match self {
            WriteCacheSetting::On => "on",
            WriteCacheSetting::Off => "off",
            WriteCacheSetting::Keep => "keep",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<WriteCacheSetting> {
        [
            WriteCacheSetting::On,
            WriteCacheSetting::Off,
            WriteCacheSetting::Keep,
        ]
        .into_iter()
        .find(|w| w.name() == name)
    }
}

/// How the workload's view of the filesystem is encrypted. Serialized as "" (none) or
/// the program's name, as plans and journals have always carried it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Encryption {
    #[default]
    #[serde(rename = "")]
    None,
    /// A gocryptfs (FUSE) view of the filesystem, like seed 000's ecryptfs home directory.
    Gocryptfs,
}

impl Encryption {
    /// "" for none.
    pub fn name(self) -> &'static str {
        match self {
            Encryption::None => "",
            Encryption::Gocryptfs => "gocryptfs",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Encryption> {
        [Encryption::None, Encryption::Gocryptfs]
            .into_iter()
            .find(|e| e.name() == name)
    }

    pub fn is_none(self) -> bool {
        self == Encryption::None
    }
}

/// Each setting prints as the word campaigns and plans use for it.
macro_rules! display_by_name {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    )*};
}

display_by_name!(Filesystem, WriteCacheSetting, Encryption, SyncMode);

/// A storage configuration as a plan carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageConfig {
    /// /dev/… ; None for a RAM disk.
    pub device: Option<String>,
    pub fs: Filesystem,
    pub mkfs_options: Vec<String>,
    pub mount_options: String,
    pub write_cache: WriteCacheSetting,
    pub ramdisk_size: Option<u64>,
    #[serde(default)]
    pub encryption: Encryption,
}

impl std::fmt::Display for StorageConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.device, self.ramdisk_size) {
            (Some(d), _) => write!(f, "{} on {d}", self.fs.name())?,
            (None, Some(size)) => write!(f, "ramdisk of {size} bytes")?,
            (None, None) => write!(f, "{}", self.fs.name())?,
        }
        if !self.mkfs_options.is_empty() {
            write!(f, ", mkfs {}", self.mkfs_options.join(" "))?;
        }
        if !self.mount_options.is_empty() {
            write!(f, ", -o {}", self.mount_options)?;
        }
        if self.write_cache != WriteCacheSetting::Keep {
            write!(f, ", write cache {}", self.write_cache.name())?;
        }
        if !self.encryption.is_none() {
            write!(f, ", encrypted with {}", self.encryption.name())?;
        }
        Ok(())
    }
}

/// What a measure step runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    Command(String),
    Fsync(FsyncParams),
    Tool { tool: Tool, argv: Vec<String> },
}

/// How the fsync workload makes each write durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncMode {
    /// `fdatasync(2)` after each write (the seed's choice).
    Fdatasync,
    /// `fsync(2)` after each write.
    Fsync,
    /// The file is opened with `O_DSYNC`, so `pwrite` itself waits; no explicit call.
    Dsync,
    /// No sync at all: measures the page cache, a baseline for the others.
    None,
}

impl SyncMode {
    pub const ALL: [SyncMode; 4] = [
        SyncMode::Fdatasync,
        SyncMode::Fsync,
        SyncMode::Dsync,
        SyncMode::None,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SyncMode::Fdatasync => "fdatasync",
            SyncMode::Fsync => "fsync",
            SyncMode::Dsync => "dsync",
            SyncMode::None => "none",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<SyncMode> {
        SyncMode::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// write()+sync of `size` bytes at `offset`, `count` times (seed 001's microbenchmark):
/// one type from the campaign file to the loop that runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsyncParams {
    /// The file to write. It is created if missing and truncated if it exists: the workload owns
    /// the file, and a leftover larger file would hide the allocation cost `prealloc` controls.
    pub path: String,
    /// Bytes per write, >= 1.
    pub size: u64,
    /// Byte offset of the first write.
    pub offset: u64,
    /// Number of write+sync operations, >= 1.
    pub count: u64,
    pub sync: SyncMode,
    /// Open with `O_DIRECT`. Then `size` and `offset` must be multiples of the device's
    /// alignment.
    pub direct: bool,
    /// `posix_fallocate(fd, offset, size * count)` before the loop. This covers the whole range
    /// an advancing run writes; the seed's modified version allocated only part of it. With
    /// `advance: false` it allocates more than is written, as the seed did.
    pub prealloc: bool,
    /// false: every write goes to `offset` (the seed's behaviour: rewrite the same bytes);
    /// true: write `i` goes to `offset + i * size`, like an append-only log.
    #[serde(default)]
    pub advance: bool,
}

impl FsyncParams {
    /// The seed's benchmark: 1000 one-byte writes at offset 0, each followed by `fdatasync`,
    /// in a preallocated file.
    pub fn new(path: impl Into<String>) -> Self {
        FsyncParams {
            path: path.into(),
            size: 1,
            offset: 0,
            count: 1000,
            sync: SyncMode::Fdatasync,
            direct: false,
            prealloc: true,
            advance: false,
        }
    }

    /// First byte past the last byte the run can touch (writes and preallocation alike).
    pub fn end(&self) -> Option<u64> {
        self.size
            .checked_mul(self.count)
            .and_then(|len| len.checked_add(self.offset))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tool {
    Fio,
    Bonnie,
    Compilebench,
}

impl std::fmt::Display for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Workload::Command(s) => f.write_str(s),
            Workload::Fsync(p) => write!(
                f,
                "fsync {} × {} B at {} ({}{}{}) on {}",
                p.count,
                p.size,
                p.offset,
                p.sync.name(),
                if p.direct { ", O_DIRECT" } else { "" },
                if p.prealloc { ", preallocated" } else { "" },
                p.path
            ),
            Workload::Tool { argv, .. } => f.write_str(&argv.join(" ")),
        }
    }
}

impl StepKind {
    /// The step's name as used in YAML phases and progress lines.
    pub fn name(&self) -> &'static str {
        match self {
            StepKind::Setup(_) => "setup",
            StepKind::Clean(_) => "clean",
            StepKind::Sync => "sync",
            StepKind::DropCaches => "drop_caches",
            StepKind::Fstrim(_) => "fstrim",
            StepKind::Reboot => "reboot",
            StepKind::Command(_) => "command",
            StepKind::Measure(_) => "measure",
            StepKind::StorageSetup(_) => "storage_setup",
            StepKind::StorageTeardown(_) => "storage_teardown",
            StepKind::Purge(_) => "purge",
            StepKind::Precondition(_) => "precondition",
        }
    }
}

impl std::fmt::Display for StepKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepKind::Setup(s) | StepKind::Clean(s) | StepKind::Command(s) => {
                write!(f, "{}: {}", self.name(), s)
            }
            StepKind::Measure(w) => write!(f, "measure: {w}"),
            StepKind::StorageSetup(c) => write!(f, "storage setup: {c}"),
            StepKind::StorageTeardown(c) => write!(f, "storage teardown: {c}"),
            StepKind::Fstrim(p) => write!(f, "fstrim {p}"),
            StepKind::Purge(p) => write!(f, "purge {} ({})", p.device, p.method.name()),
            StepKind::Precondition(p) => write!(
                f,
                "precondition {}: write it {}× in {} KiB blocks",
                p.device,
                p.passes,
                p.block_size / 1024
            ),
            StepKind::Sync | StepKind::DropCaches | StepKind::Reboot => f.write_str(self.name()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepState {
    Started,
    Succeeded,
    Failed,
    Skipped,
}

impl StepState {
    pub fn as_str(self) -> &'static str {
        match self {
            StepState::Started => "started",
            StepState::Succeeded => "succeeded",
            StepState::Failed => "failed",
            StepState::Skipped => "skipped",
        }
    }

    pub fn is_end(self) -> bool {
        self != StepState::Started
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    pub metric: String,
    /// NaN when the value is `missing`. JSON has no NaN: serde_json writes it as `null`,
    /// which reads back as NaN, so a journaled missing sample (bonnie++'s `+++++`) does
    /// not make the journal unreadable.
    #[serde(deserialize_with = "f64_or_nan")]
    pub value: f64,
    pub unit: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub histogram: Vec<u8>,
    /// Why the value could not be measured (then `value` is NaN); empty normally.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub missing: String,
}

/// Field by field, a NaN value (a missing one) equal to a NaN: a record is equal to
/// itself, and to what a journal replay gives back.
impl PartialEq for Sample {
    fn eq(&self, other: &Sample) -> bool {
        self.metric == other.metric
            && (self.value == other.value || (self.value.is_nan() && other.value.is_nan()))
            && self.unit == other.unit
            && self.histogram == other.histogram
            && self.missing == other.missing
    }
}

fn f64_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepEvent {
    pub plan_id: PlanId,
    /// `StepKind::name` of the step.
    pub kind: String,
    pub step_index: u32,
    pub cell_id: CellId,
    pub repetition: u32,
    pub attempt: u32,
    pub state: StepState,
    pub started_unix_ns: i64,
    pub finished_unix_ns: i64,
    pub exit_status: i32,
    pub stderr_tail: String,
    pub error: String,
    pub samples: Vec<Sample>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    PlanAccepted {
        plan_id: PlanId,
    },
    Step(StepEvent),
    PlanFinished {
        plan_id: PlanId,
        cancelled: bool,
    },
    /// The agent will not run the plan; nothing of it ran.
    PlanRefused {
        plan_id: PlanId,
        reason: String,
    },
    /// What the plan runs on, from step `step_index` on.
    Provenance {
        plan_id: PlanId,
        step_index: u32,
        // Boxed: the largest kind by far, rare (a few per plan), and every record is this big.
        facts: Box<crate::provenance::Provenance>,
    },
}

/// Something that happened on the agent; journaled before it is sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub seq: u64,
    pub kind: RecordKind,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Steps shaped as the planner makes them: a visit opens with storage and the cell's
    /// setup; a reboot among the phases is followed by storage and setup made again.
    #[test]
    fn the_preparation_is_the_repetitions_phases_with_what_a_reboot_makes_again() {
        let storage = StorageConfig {
            device: None,
            fs: Filesystem::Tmpfs,
            mkfs_options: vec![],
            mount_options: String::new(),
            write_cache: WriteCacheSetting::Keep,
            ramdisk_size: Some(1 << 20),
            encryption: Encryption::None,
        };
        let measure = || StepKind::Measure(Workload::Command("true".into()));
        let kinds = [
            ("a", 1, StepKind::StorageSetup(storage.clone())),
            ("a", 0, StepKind::Setup("make".into())),
            ("a", 1, StepKind::Sync),
            ("a", 1, StepKind::Reboot),
            ("a", 1, StepKind::StorageSetup(storage.clone())),
            ("a", 0, StepKind::Setup("make".into())),
            ("a", 1, StepKind::Command("echo".into())),
            ("a", 1, measure()), // 7
            ("b", 1, StepKind::Sync),
            ("b", 1, measure()), // 9
            ("b", 2, measure()), // 10: no phases
            ("b", 2, StepKind::StorageTeardown(storage.clone())),
            ("c", 1, StepKind::StorageSetup(storage)),
            ("c", 0, StepKind::Setup("make".into())),
            ("c", 1, measure()), // 14: only what opens the visit
        ];
        let plan = Plan {
            id: "p".into(),
            campaign_id: "x".into(),
            campaign_name: "x".into(),
            host: "h".into(),
            steps: kinds
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
            on_failure: OnFailure::Continue,
            run_as: Default::default(),
        };
        assert_eq!(plan.preparation(7), 2..7);
        assert_eq!(plan.preparation(9), 8..9);
        assert!(plan.preparation(10).is_empty());
        assert!(plan.preparation(14).is_empty());
        assert!(plan.preparation(6).is_empty(), "only a measure has one");
        assert_eq!(plan.storage_at(7).map(|s| s.fs), Some(Filesystem::Tmpfs));
        assert_eq!(plan.storage_at(11), None, "at the teardown");
    }

    /// Journals and stores hold plans as JSON: the typed fields read and write the words
    /// plans carried when they were strings.
    #[test]
    fn typed_settings_serialize_as_the_words_they_replaced() {
        let c = StorageConfig {
            device: Some("/dev/loop0".into()),
            fs: Filesystem::Ext4,
            mkfs_options: vec![],
            mount_options: String::new(),
            write_cache: WriteCacheSetting::Off,
            ramdisk_size: None,
            encryption: Encryption::None,
        };
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["fs"], "ext4");
        assert_eq!(json["write_cache"], "off");
        assert_eq!(json["encryption"], "");
        let mut old = json.clone();
        old.as_object_mut().unwrap().remove("encryption");
        old["encryption"] = "gocryptfs".into();
        let back: StorageConfig = serde_json::from_value(old).unwrap();
        assert_eq!(back.encryption, Encryption::Gocryptfs);
        let p = FsyncParams::new("/x");
        assert_eq!(serde_json::to_value(&p).unwrap()["sync"], "fdatasync");
        for s in SyncMode::ALL {
            assert_eq!(SyncMode::from_name(s.name()), Some(s));
        }
        for f in Filesystem::ALL {
            assert_eq!(Filesystem::from_name(f.name()), Some(f));
            assert_eq!(serde_json::to_value(f).unwrap(), f.name());
        }
        assert!(serde_json::from_str::<Filesystem>("\"zfs\"").is_err());
    }

    /// A plan without users writes no `run_as` (its JSON, and so its journal entry and
    /// stored body, is what it was before users existed) and an older plan reads back with
    /// none; a home left empty is not written either.
    #[test]
    fn run_as_is_absent_from_plans_without_users_and_old_plans_read() {
        let mut plan = Plan {
            id: "p".into(),
            campaign_id: "c".into(),
            campaign_name: "n".into(),
            host: "h".into(),
            steps: vec![Step {
                index: 0,
                cell_id: "a".into(),
                repetition: 1,
                warmup: false,
                kind: StepKind::Measure(Workload::Command("make".into())),
            }],
            on_failure: OnFailure::Continue,
            run_as: Default::default(),
        };
        let json = serde_json::to_value(&plan).unwrap();
        assert!(json.get("run_as").is_none(), "{json}");
        let back: Plan = serde_json::from_value(json).unwrap();
        assert_eq!(back, plan);
        plan.run_as.insert(
            "a".into(),
            RunAs {
                user: "builder".into(),
                home: String::new(),
            },
        );
        let json = serde_json::to_value(&plan).unwrap();
        assert_eq!(json["run_as"]["a"], serde_json::json!({"user": "builder"}));
        assert_eq!(serde_json::from_value::<Plan>(json).unwrap(), plan);
        assert_eq!(plan.run_as(&plan.steps[0]).unwrap().user, "builder");
        let sync = Step {
            kind: StepKind::Sync,
            ..plan.steps[0].clone()
        };
        assert_eq!(plan.run_as(&sync), None, "phases run as the agent");
    }
}
