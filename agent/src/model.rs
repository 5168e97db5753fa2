//! Domain types of plans and results, shared by agent and coordinator. They are what the
//! journal stores; `wire` converts them to and from the generated proto types.

use serde::{Deserialize, Serialize};

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
    pub id: String,
    pub campaign_id: String,
    pub campaign_name: String,
    pub host: String,
    pub steps: Vec<Step>,
    pub on_failure: OnFailure,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub index: u32,
    pub cell_id: String,
    /// 1-based; 0 for once-per-cell steps.
    pub repetition: u32,
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
}

/// A storage configuration as a plan carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageConfig {
    /// /dev/… ; None for a RAM disk.
    pub device: Option<String>,
    /// ext2 | ext4 | xfs | btrfs | tmpfs | none
    pub fs: String,
    pub mkfs_options: Vec<String>,
    pub mount_options: String,
    /// on | off | keep
    pub write_cache: String,
    pub ramdisk_size: Option<u64>,
    /// "" or "gocryptfs".
    #[serde(default)]
    pub encryption: String,
}

impl std::fmt::Display for StorageConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.device, self.ramdisk_size) {
            (Some(d), _) => write!(f, "{} on {d}", self.fs)?,
            (None, Some(size)) => write!(f, "ramdisk of {size} bytes")?,
            (None, None) => write!(f, "{}", self.fs)?,
        }
        if !self.mkfs_options.is_empty() {
            write!(f, ", mkfs {}", self.mkfs_options.join(" "))?;
        }
        if !self.mount_options.is_empty() {
            write!(f, ", -o {}", self.mount_options)?;
        }
        if self.write_cache != "keep" {
            write!(f, ", write cache {}", self.write_cache)?;
        }
        if !self.encryption.is_empty() {
            write!(f, ", encrypted with {}", self.encryption)?;
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsyncParams {
    pub path: String,
    pub size: u64,
    pub offset: u64,
    pub count: u64,
    /// fdatasync | fsync | dsync | none
    pub sync: String,
    pub direct: bool,
    pub prealloc: bool,
    /// Write i at offset + i·size instead of always at offset.
    #[serde(default)]
    pub advance: bool,
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
                p.sync,
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
    pub plan_id: String,
    /// `StepKind::name` of the step.
    pub kind: String,
    pub step_index: u32,
    pub cell_id: String,
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
        plan_id: String,
    },
    Step(StepEvent),
    PlanFinished {
        plan_id: String,
        cancelled: bool,
    },
    /// The agent will not run the plan; nothing of it ran.
    PlanRefused {
        plan_id: String,
        reason: String,
    },
    /// What the plan runs on, from step `step_index` on.
    Provenance {
        plan_id: String,
        step_index: u32,
        facts: crate::probes::provenance::Provenance,
    },
}

/// Something that happened on the agent; journaled before it is sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub seq: u64,
    pub kind: RecordKind,
}
