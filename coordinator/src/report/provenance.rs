//! What a campaign ran on, from the snapshots its agents took (`probes::provenance`):
//! loaded with the report, rendered as "ran on" lines, searched for device facts by
//! pivots, and compared snapshot to snapshot so that a change in the middle of a run (a
//! kernel after a reboot, a drive's firmware or serial, a mount option) is flagged.

use std::collections::BTreeMap;

use crate::store::reports::{CampaignPlan, SnapshotRow};
use indexmap::IndexMap;
use platter_proto::model::StepKind;
use platter_proto::provenance::{DeviceFacts, HostFacts, Provenance};
use serde::Serialize;

use super::human;

/// One snapshot: which host, plan and step it describes, and what it found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snapshot {
    pub host: String,
    pub plan_id: String,
    pub step_index: u32,
    /// The storage configuration a `storage_setup` snapshot describes, as the plan says it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub storage_config: String,
    /// For a storage snapshot: the cells measured on that storage.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cells: Vec<platter_proto::model::CellId>,
    pub facts: Provenance,
}

/// The campaign's snapshots in the order each host took them, a storage snapshot with
/// the configuration and the cells its plan says it stood for.
pub fn snapshots(plans: &[CampaignPlan], rows: Vec<SnapshotRow>) -> Vec<Snapshot> {
    let mut out = Vec::new();
    for row in rows {
        let SnapshotRow {
            host,
            plan_id,
            step_index,
            facts,
        } = row;
        let (mut storage_config, mut cells) = (String::new(), Vec::new());
        let plan = plans.iter().find(|p| p.id == plan_id);
        if let Some(plan) = plan.filter(|_| facts.storage.is_some()).map(|p| &p.plan) {
            let rest = plan.steps.get(step_index as usize..).unwrap_or_default();
            if let Some(StepKind::StorageSetup(c)) = rest.first().map(|s| &s.kind) {
                storage_config = c.to_string();
            }
            // The storage stands until the next setup or teardown.
            for s in rest.iter().skip(1) {
                match &s.kind {
                    StepKind::StorageSetup(_) | StepKind::StorageTeardown(_) => break,
                    StepKind::Measure(_) if !cells.contains(&s.cell_id) => {
                        cells.push(s.cell_id.clone())
                    }
                    _ => {}
                }
            }
        }
        out.push(Snapshot {
            host: host.into_string(),
            plan_id: plan_id.into_string(),
            step_index,
            storage_config,
            cells,
            facts,
        });
    }
    out
}

/// What a cell was measured on, flat, for one CSV row: the kernel, the device under
/// test and the storage as mounted (the first snapshot of each that applies).
pub fn cell_columns(
    snapshots: &[Snapshot],
    host: &str,
    cell_id: &str,
    device: Option<&str>,
) -> [String; 7] {
    let h = snapshots
        .iter()
        .filter(|s| s.host == host)
        .find_map(|s| s.facts.host.as_ref());
    let d = device.and_then(|name| self::device(snapshots, host, name));
    let st = snapshots
        .iter()
        .filter(|s| s.host == host && s.cells.iter().any(|c| c == cell_id))
        .find_map(|s| s.facts.storage.as_ref());
    let field = |f: &str| d.and_then(|d| device_field(d, f)).unwrap_or_default();
    [
        h.map(|h| h.kernel_release.clone()).unwrap_or_default(),
        field("model"),
        field("serial"),
        field("firmware"),
        st.and_then(|s| s.mounts.first())
            .map(|m| format!("{} {} ({})", m.fs_type, m.source, m.options))
            .unwrap_or_default(),
        st.map(|s| s.mkfs_version.clone()).unwrap_or_default(),
        st.map(|s| s.write_cache.clone()).unwrap_or_default(),
    ]
}

/// Column names of [`cell_columns`].
pub const CELL_COLUMNS: [&str; 7] = [
    "kernel",
    "device_model",
    "device_serial",
    "device_firmware",
    "mounted",
    "mkfs",
    "write_cache_read_back",
];

/// The device `name` on `host` as the run first saw it, for pivots by device field.
pub fn device<'a>(snapshots: &'a [Snapshot], host: &str, name: &str) -> Option<&'a DeviceFacts> {
    snapshots
        .iter()
        .filter(|s| s.host == host)
        .flat_map(|s| &s.facts.devices)
        .find(|d| d.device.name == name)
}

/// A device field by the name pivots use (`device.model` → "model").
pub fn device_field(d: &DeviceFacts, field: &str) -> Option<String> {
    let d = &d.device;
    Some(match field {
        "model" => d.model.clone(),
        "serial" => d.serial.clone(),
        "vendor" => d.vendor.clone(),
        "firmware" => d.firmware.clone(),
        "transport" => d.transport.as_str().to_string(),
        "controller" => d.controller.join(">"),
        _ => return None,
    })
}

/// Where the workloads and the agent's own threads ran (`--agent-cpu`); `None` from an
/// agent too old to say.
fn placement(h: &HostFacts) -> Option<String> {
    let cpus = |list: &str| {
        if list.contains([',', '-']) {
            format!("CPUs {list}")
        } else {
            format!("CPU {list}")
        }
    };
    match (h.workload_cpus.as_str(), h.agent_cpus.as_str()) {
        ("", _) => None,
        (w, "") => Some(format!("workloads and the agent on {}", cpus(w))),
        (w, a) => Some(format!(
            "workloads on {}, the agent's threads on CPU {a}",
            cpus(w)
        )),
    }
}

fn device_line(d: &DeviceFacts) -> String {
    let x = &d.device;
    let quoted = |label: &str, v: &str| {
        if v.is_empty() {
            format!("{label} unknown")
        } else {
            format!("{label} {v}")
        }
    };
    let mut parts = vec![
        quoted("model", &x.model),
        quoted("serial", &x.serial),
        quoted("firmware", &x.firmware),
        x.transport.as_str().to_string(),
    ];
    if !x.controller.is_empty() {
        parts.push(format!("via {}", x.controller.join(">")));
    }
    parts.push(human(x.size_bytes as f64, "B"));
    parts.push(format!(
        "{}/{} B blocks",
        d.logical_block_size, d.physical_block_size
    ));
    if x.rotational {
        parts.push("rotational".into());
    }
    if !d.scheduler.is_empty() {
        parts.push(format!("scheduler {}", d.scheduler));
    }
    if let Some(f) = &x.backing_file {
        parts.push(format!("image {f}"));
    }
    format!("{} ({}): {}", x.name, x.path, parts.join(", "))
}

/// (host, device name) of the devices the cells were measured on: the drives a report
/// speaks of, out of every drive the snapshots list.
pub type UsedDevices = std::collections::BTreeSet<(String, String)>;

fn is_used(used: &UsedDevices, s: &Snapshot, d: &DeviceFacts) -> bool {
    s.facts.storage.is_some() || used.contains(&(s.host.clone(), d.device.name.clone()))
}

/// A line of "ran on": a host's system, or one of its details (a drive, the storage, the
/// tools) indented under it; written "rc66: Linux …", "rc66:   storage …".
#[derive(Debug, Clone, PartialEq)]
pub struct RanOn {
    pub host: String,
    /// Under the host's system line.
    pub detail: bool,
    pub text: String,
}

impl RanOn {
    fn host(s: &Snapshot, text: String) -> RanOn {
        RanOn {
            host: s.host.clone(),
            detail: false,
            text,
        }
    }

    fn detail(s: &Snapshot, text: String) -> RanOn {
        RanOn {
            host: s.host.clone(),
            detail: true,
            text,
        }
    }
}

impl std::fmt::Display for RanOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let indent = if self.detail { "  " } else { "" };
        write!(f, "{}: {indent}{}", self.host, self.text)
    }
}

/// "ran on" lines: each host's first snapshot in full, then only what later ones add.
pub fn lines(snapshots: &[Snapshot], used: &UsedDevices) -> Vec<RanOn> {
    let mut out: Vec<RanOn> = Vec::new();
    // A line already said for this host (an identical later snapshot) is not repeated.
    let push = |line: RanOn, out: &mut Vec<RanOn>| {
        if !out.contains(&line) {
            out.push(line);
        }
    };
    for s in snapshots {
        if let Some(h) = &s.facts.host {
            push(
                RanOn::host(
                    s,
                    format!(
                        "Linux {} ({}), {} × {}, {} memory, platter-agent {}{}",
                        h.kernel_release,
                        h.kernel_version,
                        if h.cpu_model.is_empty() {
                            "CPU unknown"
                        } else {
                            &h.cpu_model
                        },
                        h.cpu_count,
                        human(h.memory_bytes as f64, "B"),
                        h.agent_version,
                        placement(h).map(|p| format!("; {p}")).unwrap_or_default()
                    ),
                ),
                &mut out,
            );
        }
        for d in s.facts.devices.iter().filter(|d| is_used(used, s, d)) {
            push(RanOn::detail(s, device_line(d)), &mut out);
        }
        if let Some(st) = &s.facts.storage {
            let mounts: Vec<String> = st
                .mounts
                .iter()
                .map(|m| {
                    format!(
                        "{} {} on {} ({}; {})",
                        m.fs_type, m.source, m.mount_point, m.options, m.super_options
                    )
                })
                .collect();
            let mut line = format!(
                "storage {}: {}",
                s.storage_config,
                if mounts.is_empty() {
                    "no mount found".to_string()
                } else {
                    mounts.join(" over ")
                }
            );
            if !st.mkfs_version.is_empty() {
                line.push_str(&format!("; made by {}", st.mkfs_version));
            }
            line.push_str(&format!("; write cache {}", st.write_cache));
            push(RanOn::detail(s, line), &mut out);
        }
        if !s.facts.tools.is_empty() {
            let tools: Vec<String> = s.facts.tools.values().cloned().collect();
            push(
                RanOn::detail(s, format!("tools: {}", tools.join("; "))),
                &mut out,
            );
        }
    }
    out
}

/// Differences between a host's snapshots that should not happen within a run: another
/// kernel, CPU, memory size or agent version; a device with another model, serial,
/// firmware or size; the same storage configuration mounted differently, made by another
/// mkfs, or with another write cache. A new boot id alone is expected (a reboot phase).
pub fn changes(snapshots: &[Snapshot], used: &UsedDevices) -> Vec<String> {
    let mut out = Vec::new();
    let mut hosts: BTreeMap<&str, Vec<&Snapshot>> = BTreeMap::new();
    for s in snapshots {
        hosts.entry(&s.host).or_default().push(s);
    }
    for (host, snaps) in hosts {
        let mut first_host = None;
        let mut devices: BTreeMap<&str, &DeviceFacts> = BTreeMap::new();
        let mut storage: BTreeMap<&str, &Snapshot> = BTreeMap::new();
        for s in snaps {
            if let Some(h) = &s.facts.host {
                let base = *first_host.get_or_insert(h);
                for (what, a, b) in [
                    ("kernel", &base.kernel_release, &h.kernel_release),
                    ("kernel build", &base.kernel_version, &h.kernel_version),
                    ("CPU", &base.cpu_model, &h.cpu_model),
                    ("platter-agent", &base.agent_version, &h.agent_version),
                ] {
                    if a != b {
                        out.push(format!(
                            "CHANGED during the run on {host}: {what} {a} → {b} (from step {})",
                            s.step_index
                        ));
                    }
                }
                // Not against an agent too old to say (an upgrade within the run).
                if let (Some(a), Some(b)) = (placement(base), placement(h)) {
                    if a != b {
                        out.push(format!(
                            "CHANGED during the run on {host}: {a} → {b} (from step {})",
                            s.step_index
                        ));
                    }
                }
                if base.memory_bytes != h.memory_bytes || base.cpu_count != h.cpu_count {
                    out.push(format!(
                        "CHANGED during the run on {host}: {} CPUs, {} → {} CPUs, {} (from step {})",
                        base.cpu_count,
                        human(base.memory_bytes as f64, "B"),
                        h.cpu_count,
                        human(h.memory_bytes as f64, "B"),
                        s.step_index
                    ));
                }
            }
            for d in s.facts.devices.iter().filter(|d| is_used(used, s, d)) {
                let base = *devices.entry(&d.device.path).or_insert(d);
                for field in ["model", "serial", "firmware"] {
                    let (a, b) = (
                        device_field(base, field).unwrap_or_default(),
                        device_field(d, field).unwrap_or_default(),
                    );
                    if a != b {
                        out.push(format!(
                            "CHANGED during the run on {host}: {} {field} {a} → {b} (from step {})",
                            d.device.path, s.step_index
                        ));
                    }
                }
                if base.device.size_bytes != d.device.size_bytes {
                    out.push(format!(
                        "CHANGED during the run on {host}: {} size {} → {} (from step {})",
                        d.device.path,
                        human(base.device.size_bytes as f64, "B"),
                        human(d.device.size_bytes as f64, "B"),
                        s.step_index
                    ));
                }
            }
            if let Some(st) = &s.facts.storage {
                let base = *storage.entry(&s.storage_config).or_insert(s);
                let was = base.facts.storage.as_ref().expect("storage snapshots only");
                let shape = |x: &platter_proto::provenance::StorageFacts| {
                    x.mounts
                        .iter()
                        .map(|m| {
                            format!(
                                "{} {} ({}; {})",
                                m.fs_type, m.source, m.options, m.super_options
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(" over ")
                };
                for (what, a, b) in [
                    ("mounted as", shape(was), shape(st)),
                    ("made by", was.mkfs_version.clone(), st.mkfs_version.clone()),
                    (
                        "write cache",
                        was.write_cache.clone(),
                        st.write_cache.clone(),
                    ),
                ] {
                    if a != b {
                        out.push(format!(
                            "CHANGED during the run on {host}: storage {} {what} {a} → {b} (from step {})",
                            s.storage_config, s.step_index
                        ));
                    }
                }
            }
        }
    }
    out
}

/// What changed mid-run in campaign `id` so far (`changes`), read from its snapshots and
/// cells alone, without its samples: the console asks it of every running campaign.
pub fn changes_so_far(
    store: &crate::store::Store,
    id: &platter_proto::model::CampaignId,
) -> crate::store::Result<Vec<String>> {
    use crate::store::reports;
    store.read(|c| {
        let plans = reports::plans(c, id)?;
        let taken = snapshots(&plans, reports::snapshots(c, id)?);
        let used: UsedDevices = reports::cells(c, id)?
            .into_iter()
            .filter_map(|cell| {
                let device = cell.params.get(crate::spec::DEVICE)?.clone();
                Some((cell.host.into_string(), device))
            })
            .collect();
        Ok(changes(&taken, &used))
    })
}

/// The facts that differ between `now` and `before`, including those only one has.
pub fn changed(now: &IndexMap<String, String>, before: &IndexMap<String, String>) -> Vec<String> {
    let mut keys: Vec<String> = now
        .keys()
        .chain(before.keys().filter(|k| !now.contains_key(*k)))
        .filter(|k| now.get(*k) != before.get(*k))
        .cloned()
        .collect();
    keys.dedup();
    keys
}

/// A snapshot's facts as labelled values: the host, each drive, each tool.
pub fn facts(p: &Provenance) -> IndexMap<String, String> {
    let mut out = IndexMap::new();
    if let Some(h) = &p.host {
        out.insert("kernel".into(), h.kernel_release.clone());
        out.insert("agent".into(), h.agent_version.clone());
        out.insert("cpu".into(), format!("{} × {}", h.cpu_model, h.cpu_count));
        out.insert(
            "memory".into(),
            crate::report::human(h.memory_bytes as f64, "B"),
        );
        if !h.workload_cpus.is_empty() {
            out.insert("workload cpus".into(), h.workload_cpus.clone());
        }
    }
    for d in &p.devices {
        let dev = &d.device;
        out.insert(
            format!("drive {}", dev.path),
            format!(
                "{} serial {} firmware {}",
                dev.model, dev.serial, dev.firmware
            )
            .trim()
            .to_string(),
        );
        if !d.scheduler.is_empty() {
            out.insert(format!("scheduler {}", dev.path), d.scheduler.clone());
        }
    }
    if let Some(st) = &p.storage {
        for m in &st.mounts {
            let options = match m.super_options.as_str() {
                "" => m.options.clone(),
                s => format!("{} ({s})", m.options),
            };
            out.insert(
                format!("mount {}", m.mount_point),
                format!("{} {options}", m.fs_type).trim().to_string(),
            );
        }
        if !st.mkfs_version.is_empty() {
            out.insert("mkfs".into(), st.mkfs_version.clone());
        }
        if !st.write_cache.is_empty() {
            out.insert("write cache".into(), st.write_cache.clone());
        }
    }
    for (tool, version) in &p.tools {
        out.insert(format!("tool {tool}"), version.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_run_marks_what_changed_since_the_one_before() {
        let map = |kv: &[(&str, &str)]| -> IndexMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let before = map(&[
            ("kernel", "6.1.0"),
            ("drive /dev/sda", "X fw 1"),
            ("tool fio", "3.33"),
        ]);
        let now = map(&[
            ("kernel", "6.12.1"),
            ("drive /dev/sda", "X fw 1"),
            ("tool bonnie++", "2.00a"),
        ]);
        assert_eq!(
            changed(&now, &before),
            ["kernel", "tool bonnie++", "tool fio"]
        );
        assert!(changed(&now, &now).is_empty());
    }

    /// A drive flashed between two runs (the ledger's firmware event) is what the tracker
    /// says changed on that host: the drive's line, firmware before and after.
    #[test]
    fn a_firmware_change_is_what_changed() {
        let snapshot = |firmware: &str| {
            let device: platter_proto::inventory::Device =
                serde_json::from_value(serde_json::json!({
                    "name": "sdb", "path": "/dev/sdb", "major_minor": "8:16", "vendor": "ATA",
                    "model": "INTEL SSDSC2BW120A4", "serial": "CVWL4211", "firmware": firmware,
                    "size_bytes": 120_034_123_776u64, "rotational": false, "transport": "ata",
                    "controller": ["sd", "ahci"], "pci_address": null, "by_id": [], "by_path": [],
                    "write_cache": "write_back", "write_cache_source": "", "partitions": [],
                    "mounted": [], "holders": [], "holds_root": false, "backing_file": null,
                }))
                .unwrap();
            Provenance {
                devices: vec![DeviceFacts {
                    device,
                    logical_block_size: 512,
                    physical_block_size: 4096,
                    scheduler: String::new(),
                }],
                ..Provenance::default()
            }
        };
        let (before, now) = (facts(&snapshot("DL2B")), facts(&snapshot("DL2C")));
        assert_eq!(changed(&now, &before), ["drive /dev/sdb"]);
        assert_eq!(
            (&before["drive /dev/sdb"], &now["drive /dev/sdb"]),
            (
                &"INTEL SSDSC2BW120A4 serial CVWL4211 firmware DL2B".to_string(),
                &"INTEL SSDSC2BW120A4 serial CVWL4211 firmware DL2C".to_string()
            )
        );
    }
}
