//! Conversions between domain types and the generated `platter.v1` types: the one place
//! where both meet. A message from the wire that lacks a required part is an error, not a
//! default.

use crate::v1 as pb;

use crate::model::{
    Encryption, Filesystem, FsyncParams, OnFailure, Plan, Precondition, Purge, PurgeMethod, Record,
    RecordKind, RunAs, Sample, Step, StepEvent, StepKind, StepState, StorageConfig, SyncMode, Tool,
    Workload, WriteCacheSetting,
};
use crate::provenance::Provenance;

#[derive(Debug, thiserror::Error)]
#[error("malformed {what}: {why}")]
pub struct WireError {
    what: &'static str,
    why: String,
}

fn malformed(what: &'static str, why: impl Into<String>) -> WireError {
    WireError {
        what,
        why: why.into(),
    }
}

/// How many bytes `plan` takes as a message on the wire (a plan must fit one).
pub fn plan_wire_len(plan: &Plan) -> usize {
    prost::Message::encoded_len(&pb::Plan::from(plan))
}

impl From<&Plan> for pb::Plan {
    fn from(p: &Plan) -> Self {
        pb::Plan {
            id: p.id.to_string(),
            campaign_id: p.campaign_id.to_string(),
            campaign_name: p.campaign_name.clone(),
            host: p.host.to_string(),
            steps: p.steps.iter().map(pb::Step::from).collect(),
            on_failure: match p.on_failure {
                OnFailure::Continue => pb::OnFailure::Continue,
                OnFailure::Abort => pb::OnFailure::Abort,
            } as i32,
            run_as: p
                .run_as
                .iter()
                .map(|(cell, r)| {
                    let run_as = pb::RunAs {
                        user: r.user.clone(),
                        home: r.home.clone(),
                    };
                    (cell.to_string(), run_as)
                })
                .collect(),
        }
    }
}

impl From<&Step> for pb::Step {
    fn from(s: &Step) -> Self {
        use pb::step::Kind;
        let shell = |script: &String| pb::Shell {
            script: script.clone(),
        };
        let kind = match &s.kind {
            StepKind::Setup(c) => Kind::Setup(shell(c)),
            StepKind::Clean(c) => Kind::Clean(shell(c)),
            StepKind::Sync => Kind::Sync(pb::Empty {}),
            StepKind::DropCaches => Kind::DropCaches(pb::Empty {}),
            StepKind::Fstrim(p) => Kind::Fstrim(pb::Fstrim { path: p.clone() }),
            StepKind::Reboot => Kind::Reboot(pb::Empty {}),
            StepKind::Command(c) => Kind::Command(shell(c)),
            StepKind::Measure(w) => Kind::Measure(pb::Workload::from(w)),
            StepKind::StorageSetup(c) => Kind::StorageSetup(pb::Storage::from(c)),
            StepKind::StorageTeardown(c) => Kind::StorageTeardown(pb::Storage::from(c)),
            StepKind::Purge(p) => Kind::Purge(pb::Purge {
                device: p.device.clone(),
                method: purge_method_to_wire(p.method) as i32,
            }),
            StepKind::Precondition(p) => Kind::Precondition(pb::Precondition {
                device: p.device.clone(),
                passes: p.passes,
                block_size: p.block_size,
            }),
        };
        pb::Step {
            index: s.index,
            cell_id: s.cell_id.to_string(),
            repetition: s.repetition,
            warmup: s.warmup,
            kind: Some(kind),
        }
    }
}

impl TryFrom<pb::Plan> for Plan {
    type Error = WireError;
    fn try_from(p: pb::Plan) -> Result<Self, WireError> {
        let on_failure = match pb::OnFailure::try_from(p.on_failure) {
            Ok(pb::OnFailure::Abort) => OnFailure::Abort,
            Ok(pb::OnFailure::Continue) => OnFailure::Continue,
            _ => return Err(malformed("plan", format!("on_failure {}", p.on_failure))),
        };
        let steps = p
            .steps
            .into_iter()
            .map(Step::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        for (i, s) in steps.iter().enumerate() {
            if s.index as usize != i {
                return Err(malformed("plan", format!("step {i} has index {}", s.index)));
            }
        }
        let mut run_as = std::collections::BTreeMap::new();
        for (cell, r) in p.run_as {
            if r.user.is_empty() {
                return Err(malformed(
                    "plan",
                    format!("cell {cell} runs as a user without a name"),
                ));
            }
            run_as.insert(
                cell.into(),
                RunAs {
                    user: r.user,
                    home: r.home,
                },
            );
        }
        Ok(Plan {
            id: p.id.into(),
            campaign_id: p.campaign_id.into(),
            campaign_name: p.campaign_name,
            host: p.host.into(),
            steps,
            on_failure,
            run_as,
        })
    }
}

impl TryFrom<pb::Step> for Step {
    type Error = WireError;
    fn try_from(s: pb::Step) -> Result<Self, WireError> {
        use pb::step::Kind;
        let kind = match s.kind.ok_or_else(|| malformed("step", "no kind"))? {
            Kind::Setup(c) => StepKind::Setup(c.script),
            Kind::Clean(c) => StepKind::Clean(c.script),
            Kind::Sync(_) => StepKind::Sync,
            Kind::DropCaches(_) => StepKind::DropCaches,
            Kind::Fstrim(f) => StepKind::Fstrim(f.path),
            Kind::Reboot(_) => StepKind::Reboot,
            Kind::Command(c) => StepKind::Command(c.script),
            Kind::Measure(w) => StepKind::Measure(Workload::try_from(w)?),
            Kind::StorageSetup(c) => StepKind::StorageSetup(StorageConfig::try_from(c)?),
            Kind::StorageTeardown(c) => StepKind::StorageTeardown(StorageConfig::try_from(c)?),
            Kind::Purge(p) => StepKind::Purge(Purge {
                method: purge_method_from_wire(p.method)?,
                device: p.device,
            }),
            Kind::Precondition(p) => {
                if p.passes == 0 || p.block_size == 0 || p.block_size % 512 != 0 {
                    return Err(malformed(
                        "precondition",
                        format!(
                            "{} passes of {}-byte writes (passes ≥ 1, block size a multiple of 512)",
                            p.passes, p.block_size
                        ),
                    ));
                }
                StepKind::Precondition(Precondition {
                    device: p.device,
                    passes: p.passes,
                    block_size: p.block_size,
                })
            }
        };
        Ok(Step {
            index: s.index,
            cell_id: s.cell_id.into(),
            repetition: s.repetition,
            warmup: s.warmup,
            kind,
        })
    }
}

impl From<&Workload> for pb::Workload {
    fn from(w: &Workload) -> Self {
        use pb::workload::Kind;
        let kind = match w {
            Workload::Command(s) => Kind::Command(pb::Shell { script: s.clone() }),
            Workload::Fsync(p) => Kind::Fsync(pb::FsyncWorkload {
                path: p.path.clone(),
                size: p.size,
                offset: p.offset,
                count: p.count,
                sync: p.sync.name().into(),
                direct: p.direct,
                prealloc: p.prealloc,
                advance: p.advance,
            }),
            Workload::Tool { tool, argv } => Kind::Tool(pb::ToolWorkload {
                tool: match tool {
                    Tool::Fio => pb::Tool::Fio,
                    Tool::Bonnie => pb::Tool::Bonnie,
                    Tool::Compilebench => pb::Tool::Compilebench,
                } as i32,
                argv: argv.clone(),
            }),
        };
        pb::Workload { kind: Some(kind) }
    }
}

impl TryFrom<pb::Workload> for Workload {
    type Error = WireError;
    fn try_from(w: pb::Workload) -> Result<Self, WireError> {
        use pb::workload::Kind;
        Ok(
            match w.kind.ok_or_else(|| malformed("workload", "no kind"))? {
                Kind::Command(s) => Workload::Command(s.script),
                Kind::Fsync(p) => Workload::Fsync(FsyncParams {
                    path: p.path,
                    size: p.size,
                    offset: p.offset,
                    count: p.count,
                    sync: SyncMode::from_name(&p.sync)
                        .ok_or_else(|| malformed("fsync workload", format!("sync {:?}", p.sync)))?,
                    direct: p.direct,
                    prealloc: p.prealloc,
                    advance: p.advance,
                }),
                Kind::Tool(t) => {
                    let tool = match pb::Tool::try_from(t.tool) {
                        Ok(pb::Tool::Fio) => Tool::Fio,
                        Ok(pb::Tool::Bonnie) => Tool::Bonnie,
                        Ok(pb::Tool::Compilebench) => Tool::Compilebench,
                        _ => return Err(malformed("workload", format!("tool {}", t.tool))),
                    };
                    if t.argv.is_empty() {
                        return Err(malformed("workload", "empty argv"));
                    }
                    Workload::Tool { tool, argv: t.argv }
                }
            },
        )
    }
}

impl From<&StorageConfig> for pb::Storage {
    fn from(c: &StorageConfig) -> Self {
        pb::Storage {
            device: c.device.clone().unwrap_or_default(),
            fs: c.fs.name().into(),
            mkfs_options: c.mkfs_options.clone(),
            mount_options: c.mount_options.clone(),
            write_cache: c.write_cache.name().into(),
            ramdisk_size: c.ramdisk_size.unwrap_or(0),
            encryption: c.encryption.name().into(),
        }
    }
}

impl TryFrom<pb::Storage> for StorageConfig {
    type Error = WireError;
    fn try_from(c: pb::Storage) -> Result<Self, WireError> {
        let bad = |field: &str, v: &str| malformed("storage", format!("{field} {v:?}"));
        Ok(StorageConfig {
            device: Some(c.device).filter(|d| !d.is_empty()),
            fs: Filesystem::from_name(&c.fs).ok_or_else(|| bad("fs", &c.fs))?,
            mkfs_options: c.mkfs_options,
            mount_options: c.mount_options,
            write_cache: WriteCacheSetting::from_name(&c.write_cache)
                .ok_or_else(|| bad("write_cache", &c.write_cache))?,
            ramdisk_size: Some(c.ramdisk_size).filter(|s| *s > 0),
            encryption: Encryption::from_name(&c.encryption)
                .ok_or_else(|| bad("encryption", &c.encryption))?,
        })
    }
}

impl From<&Record> for pb::Record {
    fn from(r: &Record) -> Self {
        use pb::record::Kind;
        let kind = match &r.kind {
            RecordKind::PlanAccepted { plan_id } => Kind::PlanAccepted(pb::PlanAccepted {
                plan_id: plan_id.to_string(),
            }),
            RecordKind::PlanFinished { plan_id, cancelled } => {
                Kind::PlanFinished(pb::PlanFinished {
                    plan_id: plan_id.to_string(),
                    cancelled: *cancelled,
                })
            }
            RecordKind::PlanRefused { plan_id, reason } => Kind::PlanRefused(pb::PlanRefused {
                plan_id: plan_id.to_string(),
                reason: reason.clone(),
            }),
            RecordKind::Provenance {
                plan_id,
                step_index,
                facts,
            } => Kind::Provenance(provenance_to_wire(plan_id, *step_index, facts)),
            RecordKind::Step(e) => Kind::Step(pb::StepEvent {
                plan_id: e.plan_id.to_string(),
                step_index: e.step_index,
                cell_id: e.cell_id.to_string(),
                repetition: e.repetition,
                attempt: e.attempt,
                state: match e.state {
                    StepState::Started => pb::StepState::Started,
                    StepState::Succeeded => pb::StepState::Succeeded,
                    StepState::Failed => pb::StepState::Failed,
                    StepState::Skipped => pb::StepState::Skipped,
                } as i32,
                started_unix_ns: e.started_unix_ns,
                finished_unix_ns: e.finished_unix_ns,
                exit_status: e.exit_status,
                stderr_tail: e.stderr_tail.clone(),
                error: e.error.clone(),
                kind: e.kind.clone(),
                step_kind: step_kind_to_wire(&e.kind) as i32,
                samples: e
                    .samples
                    .iter()
                    .map(|s| pb::Sample {
                        metric: s.metric.clone(),
                        value: s.value,
                        unit: s.unit.clone(),
                        histogram: s.histogram.clone(),
                        missing: s.missing.clone(),
                    })
                    .collect(),
            }),
        };
        pb::Record {
            seq: r.seq,
            kind: Some(kind),
        }
    }
}

const PURGE_METHODS: [(pb::PurgeMethod, PurgeMethod); 5] = [
    (pb::PurgeMethod::Discard, PurgeMethod::Discard),
    (pb::PurgeMethod::SecureErase, PurgeMethod::SecureErase),
    (pb::PurgeMethod::NvmeFormat, PurgeMethod::NvmeFormat),
    (pb::PurgeMethod::NvmeSanitize, PurgeMethod::NvmeSanitize),
    (pb::PurgeMethod::Sanitize, PurgeMethod::Sanitize),
];

fn purge_method_to_wire(m: PurgeMethod) -> pb::PurgeMethod {
    PURGE_METHODS
        .iter()
        .find(|(_, ours)| *ours == m)
        .map_or(pb::PurgeMethod::Unspecified, |(w, _)| *w)
}

/// A purge method this build does not know (a newer coordinator's) is refused: an agent
/// must never guess how to erase a drive.
fn purge_method_from_wire(m: i32) -> Result<PurgeMethod, WireError> {
    PURGE_METHODS
        .iter()
        .find(|(w, _)| *w as i32 == m)
        .map(|(_, ours)| *ours)
        .ok_or_else(|| malformed("purge", format!("unknown purge method {m}")))
}

/// The wire's step kinds with the names `StepKind::name` gives them (and a step event's
/// `kind` carried before `step_kind`).
const STEP_KINDS: [(pb::StepKind, &str); 12] = [
    (pb::StepKind::Setup, "setup"),
    (pb::StepKind::Clean, "clean"),
    (pb::StepKind::Sync, "sync"),
    (pb::StepKind::DropCaches, "drop_caches"),
    (pb::StepKind::Fstrim, "fstrim"),
    (pb::StepKind::Reboot, "reboot"),
    (pb::StepKind::Command, "command"),
    (pb::StepKind::Measure, "measure"),
    (pb::StepKind::StorageSetup, "storage_setup"),
    (pb::StepKind::StorageTeardown, "storage_teardown"),
    (pb::StepKind::Purge, "purge"),
    (pb::StepKind::Precondition, "precondition"),
];

/// The wire's kind of a step named `name`; UNSPECIFIED for a name it has none for.
fn step_kind_to_wire(name: &str) -> pb::StepKind {
    STEP_KINDS
        .iter()
        .find(|(_, n)| *n == name)
        .map_or(pb::StepKind::Unspecified, |(k, _)| *k)
}

/// The name of a wire step kind; "" for UNSPECIFIED.
fn step_kind_name(kind: pb::StepKind) -> &'static str {
    STEP_KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or("", |(_, n)| n)
}

impl TryFrom<pb::Record> for Record {
    type Error = WireError;
    fn try_from(r: pb::Record) -> Result<Self, WireError> {
        use pb::record::Kind;
        let kind = match r.kind.ok_or_else(|| malformed("record", "no kind"))? {
            Kind::PlanAccepted(a) => RecordKind::PlanAccepted {
                plan_id: a.plan_id.into(),
            },
            Kind::PlanFinished(f) => RecordKind::PlanFinished {
                plan_id: f.plan_id.into(),
                cancelled: f.cancelled,
            },
            Kind::PlanRefused(r) => RecordKind::PlanRefused {
                plan_id: r.plan_id.into(),
                reason: r.reason,
            },
            Kind::Provenance(p) => provenance_from_wire(p)?,
            Kind::Step(e) => {
                let state = match pb::StepState::try_from(e.state) {
                    Ok(pb::StepState::Started) => StepState::Started,
                    Ok(pb::StepState::Succeeded) => StepState::Succeeded,
                    Ok(pb::StepState::Failed) => StepState::Failed,
                    Ok(pb::StepState::Skipped) => StepState::Skipped,
                    _ => return Err(malformed("step event", format!("state {}", e.state))),
                };
                let kind = match pb::StepKind::try_from(e.step_kind) {
                    Ok(pb::StepKind::Unspecified) => e.kind,
                    Ok(k) => step_kind_name(k).to_string(),
                    // A kind added after this build: its words still say it.
                    Err(_) if !e.kind.is_empty() => e.kind,
                    Err(_) => return Err(malformed("step event", format!("kind {}", e.step_kind))),
                };
                RecordKind::Step(StepEvent {
                    plan_id: e.plan_id.into(),
                    kind,
                    step_index: e.step_index,
                    cell_id: e.cell_id.into(),
                    repetition: e.repetition,
                    attempt: e.attempt,
                    state,
                    started_unix_ns: e.started_unix_ns,
                    finished_unix_ns: e.finished_unix_ns,
                    exit_status: e.exit_status,
                    stderr_tail: e.stderr_tail,
                    error: e.error,
                    samples: e
                        .samples
                        .into_iter()
                        .map(|s| Sample {
                            metric: s.metric,
                            value: s.value,
                            unit: s.unit,
                            histogram: s.histogram,
                            missing: s.missing,
                        })
                        .collect(),
                })
            }
        };
        if r.seq == 0 {
            return Err(malformed("record", "sequence number 0"));
        }
        Ok(Record { seq: r.seq, kind })
    }
}

fn provenance_to_wire(plan_id: &str, step_index: u32, f: &Provenance) -> pb::Provenance {
    pb::Provenance {
        plan_id: plan_id.to_string(),
        step_index,
        trigger: f.trigger.clone(),
        host: f.host.as_ref().map(|h| pb::HostFacts {
            agent_version: h.agent_version.clone(),
            kernel_release: h.kernel_release.clone(),
            kernel_version: h.kernel_version.clone(),
            boot_id: h.boot_id.clone(),
            cpu_model: h.cpu_model.clone(),
            cpu_count: h.cpu_count,
            memory_bytes: h.memory_bytes,
            agent_cpus: h.agent_cpus.clone(),
            workload_cpus: h.workload_cpus.clone(),
            tick_hz: h.tick_hz,
            cpu_accounting: h.cpu_accounting.clone(),
        }),
        devices: f
            .devices
            .iter()
            .map(|d| pb::DeviceFacts {
                device: Some(pb::Device::from(&d.device)),
                logical_block_size: d.logical_block_size,
                physical_block_size: d.physical_block_size,
                scheduler: d.scheduler.clone(),
            })
            .collect(),
        storage: f.storage.as_ref().map(|s| pb::StorageFacts {
            mounts: s
                .mounts
                .iter()
                .map(|m| pb::MountFacts {
                    mount_point: m.mount_point.clone(),
                    fs_type: m.fs_type.clone(),
                    source: m.source.clone(),
                    options: m.options.clone(),
                    super_options: m.super_options.clone(),
                })
                .collect(),
            mkfs_version: s.mkfs_version.clone(),
            write_cache: s.write_cache.clone(),
        }),
        tools: f.tools.clone().into_iter().collect(),
        health: f.health.iter().map(health_to_wire).collect(),
    }
}

fn health_to_wire(h: &crate::provenance::DriveHealth) -> pb::DriveHealth {
    pb::DriveHealth {
        path: h.path.clone(),
        model: h.model.clone(),
        serial: h.serial.clone(),
        firmware: h.firmware.clone(),
        wwn: h.wwn.clone(),
        unreadable: h.unreadable.clone(),
        reading: h.reading.as_ref().map(reading_to_wire),
    }
}

fn health_from_wire(h: pb::DriveHealth) -> crate::provenance::DriveHealth {
    crate::provenance::DriveHealth {
        path: h.path,
        model: h.model,
        serial: h.serial,
        firmware: h.firmware,
        wwn: h.wwn,
        unreadable: h.unreadable,
        reading: h.reading.map(reading_from_wire),
    }
}

/// A health reading on the wire (the agent's provenance, the drive ledger's answers).
pub fn reading_to_wire(r: &crate::provenance::HealthReading) -> pb::HealthReading {
    pb::HealthReading {
        tool: r.tool.clone(),
        protocol: r.protocol.clone(),
        passed: r.passed,
        temperature_c: r.temperature_c,
        power_on_hours: r.power_on_hours,
        unsafe_shutdowns: r.unsafe_shutdowns,
        media_errors: r.media_errors,
        reallocated_sectors: r.reallocated_sectors,
        pending_sectors: r.pending_sectors,
        uncorrectable_errors: r.uncorrectable_errors,
        crc_errors: r.crc_errors,
        critical_warning: r.critical_warning,
        percentage_used: r.percentage_used,
        available_spare: r.available_spare,
        data_written_bytes: r.data_written_bytes,
    }
}

/// A health reading as the wire carried it.
pub fn reading_from_wire(r: pb::HealthReading) -> crate::provenance::HealthReading {
    crate::provenance::HealthReading {
        tool: r.tool,
        protocol: r.protocol,
        passed: r.passed,
        temperature_c: r.temperature_c,
        power_on_hours: r.power_on_hours,
        unsafe_shutdowns: r.unsafe_shutdowns,
        media_errors: r.media_errors,
        reallocated_sectors: r.reallocated_sectors,
        pending_sectors: r.pending_sectors,
        uncorrectable_errors: r.uncorrectable_errors,
        crc_errors: r.crc_errors,
        critical_warning: r.critical_warning,
        percentage_used: r.percentage_used,
        available_spare: r.available_spare,
        data_written_bytes: r.data_written_bytes,
    }
}

fn provenance_from_wire(p: pb::Provenance) -> Result<RecordKind, WireError> {
    use crate::provenance::{DeviceFacts, HostFacts, MountFacts, StorageFacts};
    if p.plan_id.is_empty() {
        return Err(malformed("provenance", "no plan id"));
    }
    let devices = p
        .devices
        .into_iter()
        .map(|d| {
            Ok(DeviceFacts {
                device: d
                    .device
                    .ok_or_else(|| malformed("provenance", "device facts without a device"))?
                    .into(),
                logical_block_size: d.logical_block_size,
                physical_block_size: d.physical_block_size,
                scheduler: d.scheduler,
            })
        })
        .collect::<Result<Vec<_>, WireError>>()?;
    Ok(RecordKind::Provenance {
        plan_id: p.plan_id.into(),
        step_index: p.step_index,
        facts: Box::new(Provenance {
            trigger: p.trigger,
            host: p.host.map(|h| HostFacts {
                agent_version: h.agent_version,
                kernel_release: h.kernel_release,
                kernel_version: h.kernel_version,
                boot_id: h.boot_id,
                cpu_model: h.cpu_model,
                cpu_count: h.cpu_count,
                memory_bytes: h.memory_bytes,
                agent_cpus: h.agent_cpus,
                workload_cpus: h.workload_cpus,
                tick_hz: h.tick_hz,
                cpu_accounting: h.cpu_accounting,
            }),
            devices,
            storage: p.storage.map(|s| StorageFacts {
                mounts: s
                    .mounts
                    .into_iter()
                    .map(|m| MountFacts {
                        mount_point: m.mount_point,
                        fs_type: m.fs_type,
                        source: m.source,
                        options: m.options,
                        super_options: m.super_options,
                    })
                    .collect(),
                mkfs_version: s.mkfs_version,
                write_cache: s.write_cache,
            }),
            tools: p.tools.into_iter().collect(),
            health: p.health.into_iter().map(health_from_wire).collect(),
        }),
    })
}

impl From<&crate::inventory::ToolVersion> for pb::ToolVersion {
    fn from(t: &crate::inventory::ToolVersion) -> Self {
        pb::ToolVersion {
            name: t.name.clone(),
            path: t.path.clone(),
            version: t.version.clone(),
        }
    }
}

impl From<pb::ToolVersion> for crate::inventory::ToolVersion {
    fn from(t: pb::ToolVersion) -> Self {
        crate::inventory::ToolVersion {
            name: t.name,
            path: t.path,
            version: t.version,
        }
    }
}

impl From<&crate::inventory::Device> for pb::Device {
    fn from(d: &crate::inventory::Device) -> Self {
        use crate::inventory::WriteCache;
        pb::Device {
            name: d.name.clone(),
            path: d.path.clone(),
            major_minor: d.major_minor.clone(),
            vendor: d.vendor.clone(),
            model: d.model.clone(),
            serial: d.serial.clone(),
            firmware: d.firmware.clone(),
            size_bytes: d.size_bytes,
            rotational: d.rotational,
            transport: d.transport.as_str().to_string(),
            controller: d.controller.clone(),
            pci_address: d.pci_address.clone().unwrap_or_default(),
            by_id: d.by_id.clone(),
            by_path: d.by_path.clone(),
            write_cache: match d.write_cache {
                WriteCache::WriteBack => "write_back",
                WriteCache::WriteThrough => "write_through",
                WriteCache::Unknown => "unknown",
            }
            .into(),
            write_cache_source: d.write_cache_source.clone(),
            partitions: d
                .partitions
                .iter()
                .map(|p| pb::Partition {
                    name: p.name.clone(),
                    major_minor: p.major_minor.clone(),
                    size_bytes: p.size_bytes,
                    mounted: p.mounted.clone(),
                })
                .collect(),
            mounted: d.mounted.clone(),
            holders: d.holders.clone(),
            holds_root: d.holds_root,
            backing_file: d.backing_file.clone().unwrap_or_default(),
            wwn: d.wwn.clone(),
        }
    }
}

impl From<pb::Device> for crate::inventory::Device {
    fn from(d: pb::Device) -> Self {
        use crate::inventory::{Partition, WriteCache};
        crate::inventory::Device {
            name: d.name,
            path: d.path,
            major_minor: d.major_minor,
            vendor: d.vendor,
            model: d.model,
            serial: d.serial,
            firmware: d.firmware,
            size_bytes: d.size_bytes,
            rotational: d.rotational,
            transport: d.transport.into(),
            controller: d.controller,
            pci_address: Some(d.pci_address).filter(|s| !s.is_empty()),
            by_id: d.by_id,
            by_path: d.by_path,
            write_cache: match d.write_cache.as_str() {
                "write_back" => WriteCache::WriteBack,
                "write_through" => WriteCache::WriteThrough,
                _ => WriteCache::Unknown,
            },
            write_cache_source: d.write_cache_source,
            partitions: d
                .partitions
                .into_iter()
                .map(|p| Partition {
                    name: p.name,
                    major_minor: p.major_minor,
                    size_bytes: p.size_bytes,
                    mounted: p.mounted,
                })
                .collect(),
            mounted: d.mounted,
            holders: d.holders,
            holds_root: d.holds_root,
            backing_file: Some(d.backing_file).filter(|s| !s.is_empty()),
            wwn: d.wwn,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{StepKind, Workload};

    /// A step event on the wire with the kind said one way or both.
    fn step_record(kind: &str, step_kind: i32) -> pb::Record {
        pb::Record {
            seq: 1,
            kind: Some(pb::record::Kind::Step(pb::StepEvent {
                plan_id: "p".into(),
                cell_id: "c".into(),
                state: pb::StepState::Succeeded as i32,
                kind: kind.into(),
                step_kind,
                ..Default::default()
            })),
        }
    }

    fn kind_read(r: pb::Record) -> Result<String, WireError> {
        match Record::try_from(r)?.kind {
            RecordKind::Step(e) => Ok(e.kind),
            other => panic!("not a step: {other:?}"),
        }
    }

    #[test]
    fn purge_and_precondition_cross_the_wire_and_an_unknown_purge_method_is_refused() {
        for method in PurgeMethod::ALL {
            let step = Step {
                index: 0,
                cell_id: "c".into(),
                repetition: 0,
                warmup: false,
                kind: StepKind::Purge(Purge {
                    device: "/dev/nvme1n1".into(),
                    method,
                }),
            };
            assert_eq!(Step::try_from(pb::Step::from(&step)).unwrap(), step);
            assert_eq!(PurgeMethod::from_name(method.name()), Some(method));
        }
        let pre = Step {
            index: 0,
            cell_id: "c".into(),
            repetition: 0,
            warmup: false,
            kind: StepKind::Precondition(Precondition {
                device: "/dev/sdb".into(),
                passes: 2,
                block_size: 128 << 10,
            }),
        };
        assert_eq!(Step::try_from(pb::Step::from(&pre)).unwrap(), pre);
        let mut wire = pb::Step::from(&pre);
        wire.kind = Some(pb::step::Kind::Purge(pb::Purge {
            device: "/dev/sdb".into(),
            method: 99,
        }));
        let e = Step::try_from(wire).unwrap_err().to_string();
        assert!(e.contains("unknown purge method 99"), "{e}");
        let mut wire = pb::Step::from(&pre);
        wire.kind = Some(pb::step::Kind::Precondition(pb::Precondition {
            device: "/dev/sdb".into(),
            passes: 2,
            block_size: 1000,
        }));
        assert!(Step::try_from(wire).is_err());
    }

    #[test]
    fn every_step_kind_has_its_wire_kind_under_its_own_name() {
        let kinds = [
            StepKind::Setup("s".into()),
            StepKind::Clean("c".into()),
            StepKind::Sync,
            StepKind::DropCaches,
            StepKind::Fstrim("/mnt".into()),
            StepKind::Reboot,
            StepKind::Command("true".into()),
            StepKind::Measure(Workload::Command("true".into())),
            StepKind::Purge(Purge {
                device: "/dev/sdb".into(),
                method: PurgeMethod::Discard,
            }),
            StepKind::Precondition(Precondition {
                device: "/dev/sdb".into(),
                passes: 2,
                block_size: 128 << 10,
            }),
        ];
        for k in &kinds {
            let wire = step_kind_to_wire(k.name());
            assert_ne!(wire, pb::StepKind::Unspecified, "{}", k.name());
            assert_eq!(step_kind_name(wire), k.name());
        }
        // Every wire kind once, each name once.
        let names: std::collections::BTreeSet<_> = STEP_KINDS.iter().map(|(_, n)| n).collect();
        assert_eq!(names.len(), STEP_KINDS.len());
        assert_eq!(step_kind_to_wire("no such step"), pb::StepKind::Unspecified);
    }

    #[test]
    fn a_step_events_kind_is_read_from_the_enum_else_from_the_old_words() {
        // This build's agents send both.
        let sent = pb::Record::from(&Record::try_from(step_record("fstrim", 0)).unwrap());
        let pb::record::Kind::Step(e) = sent.kind.as_ref().unwrap() else {
            unreachable!()
        };
        assert_eq!(e.kind, "fstrim");
        assert_eq!(e.step_kind, pb::StepKind::Fstrim as i32);
        // An agent older than `step_kind` sends the words only.
        assert_eq!(kind_read(step_record("measure", 0)).unwrap(), "measure");
        // The enum wins where both are there.
        let both = step_record("sync", pb::StepKind::Reboot as i32);
        assert_eq!(kind_read(both).unwrap(), "reboot");
        // A newer agent's kind this build does not know: its words; without them, refused.
        assert_eq!(kind_read(step_record("trim_all", 99)).unwrap(), "trim_all");
        assert!(kind_read(step_record("", 99)).is_err());
    }
}
