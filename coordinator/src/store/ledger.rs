//! The drive ledger's store side: each physical drive once (`drives`), every way it was seen
//! (`drive_sightings`), written by the record writers from the agents' inventories
//! (`sight`, in the transaction that stores the hello or the new device list), and read as
//! typed rows: the drives, one drive's sightings, and the provenance snapshots of the runs
//! that measured it (where a drive's health and its runs come from).

use platter_proto::inventory::{Device, WriteCache};
use platter_proto::model::{CampaignId, HostName, PlanId};
use platter_proto::provenance::Provenance;

use super::db::{params, Conn};
use super::error::Result;
use super::Store;

/// How a drive is told apart from every other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// By its world wide name.
    Wwn,
    /// By model and serial.
    Serial,
    /// It has no serial (a loop device, some virtual disks): tracked per host and name, so
    /// the "same" drive on another host is another record.
    Host,
}

impl Identity {
    pub fn as_str(self) -> &'static str {
        match self {
            Identity::Wwn => "wwn",
            Identity::Serial => "serial",
            Identity::Host => "host",
        }
    }

    fn from_str(s: &str) -> Identity {
        match s {
            "wwn" => Identity::Wwn,
            "serial" => Identity::Serial,
            _ => Identity::Host,
        }
    }
}

/// The ledger's key of `d` as `host` reports it, how it identifies the drive, and, for a
/// drive tracked per host, why: `naa.5000c500a1b2c3d4`, `MODEL/SERIAL`, or `HOST/NAME`.
///
/// A drive is keyed across hosts only by what tells it apart from every other drive: a WWN
/// that is not zeros, or a model with a serial that is not a placeholder, on a transport
/// that is not virtual. Everything else (a loop device, a virtio disk, a serial without a
/// model, `0123456789ABCDEF`) is tracked per host, and says so: virtual disks of one image
/// share serials, and some vendors ship placeholder ones, so taking them for one drive
/// would have it "move" between every host that sees one.
pub fn drive_key(host: &str, d: &Device) -> (String, Identity, String) {
    let per_host = |why: String| (format!("{host}/{}", d.name), Identity::Host, why);
    if d.serial.trim().is_empty() && d.wwn.trim().is_empty() {
        return per_host("no serial: tracked per host".into());
    }
    if let Some(why) = virtual_disk(d) {
        return per_host(why);
    }
    if usable_wwn(&d.wwn) {
        return (d.wwn.clone(), Identity::Wwn, String::new());
    }
    if d.serial.trim().is_empty() {
        return per_host("no serial, and a WWN of zeros: tracked per host".into());
    }
    if d.model.trim().is_empty() {
        return per_host(format!(
            "serial {:?} without a model: tracked per host",
            d.serial
        ));
    }
    if placeholder_serial(&d.serial) {
        return per_host(format!(
            "placeholder serial {:?}: tracked per host",
            d.serial
        ));
    }
    (
        format!("{}/{}", d.model, d.serial),
        Identity::Serial,
        String::new(),
    )
}

/// Why `d` is a virtual disk ("virtual disk (virtio): tracked per host"), from its transport
/// or a hypervisor's model name; `None` for a real one.
fn virtual_disk(d: &Device) -> Option<String> {
    use platter_proto::inventory::Transport;
    if matches!(d.transport, Transport::Virtio | Transport::Loop) {
        return Some(format!(
            "virtual disk ({}): tracked per host",
            d.transport.as_str()
        ));
    }
    // The names hypervisors give their emulated disks (QEMU, VirtualBox, VMware, Hyper-V,
    // Xen); their serials repeat across every VM made from one image.
    const HYPERVISOR_MODELS: [&str; 7] = [
        "QEMU HARDDISK",
        "QEMU DVD-ROM",
        "VBOX HARDDISK",
        "VMware Virtual",
        "Virtual disk",
        "Virtual Disk",
        "Xen Virtual",
    ];
    let model = d.model.trim();
    HYPERVISOR_MODELS
        .iter()
        .find(|m| model.starts_with(*m))
        .map(|m| format!("virtual disk ({m}): tracked per host"))
}

/// Whether `wwn` names one drive: present, and not zeros once its scheme ("naa.", "eui.",
/// "0x") is taken off.
fn usable_wwn(wwn: &str) -> bool {
    let w = wwn.trim();
    let digits = w
        .strip_prefix("naa.")
        .or_else(|| w.strip_prefix("eui."))
        .or_else(|| w.strip_prefix("0x"))
        .unwrap_or(w);
    !digits.is_empty()
        && digits
            .chars()
            .any(|c| c.is_ascii_alphanumeric() && c != '0')
}

/// Whether `serial` is one many drives share: a known placeholder, one repeated character,
/// or a run of counting digits.
pub fn placeholder_serial(serial: &str) -> bool {
    let s = serial.trim();
    let lower = s.to_ascii_lowercase();
    // Seen in the wild on OEM boards, USB bridges and cheap drives.
    const PLACEHOLDERS: [&str; 10] = [
        "to be filled by o.e.m.",
        "default string",
        "none",
        "n/a",
        "not specified",
        "unknown",
        "serial",
        "0123456789abcdef",
        "123456789",
        "1234567890",
    ];
    let mut chars = s.chars();
    let first = chars.next();
    PLACEHOLDERS.contains(&lower.as_str())
        || s.len() < 4
        || first.is_some_and(|f| chars.all(|c| c == f))
}
/// One drive of the ledger with every sighting, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerDrive {
    pub id: String,
    pub identity: Identity,
    pub model: String,
    pub serial: String,
    pub wwn: String,
    /// Why a drive is tracked per host ("virtual disk (virtio): tracked per host"); "" for
    /// one keyed by WWN or model and serial.
    pub note: String,
    pub first_seen_unix_ms: i64,
    pub last_seen_unix_ms: i64,
    pub sightings: Vec<Sighting>,
}

/// One distinct way a drive was seen, and when.
#[derive(Debug, Clone, PartialEq)]
pub struct Sighting {
    pub host: HostName,
    pub path: String,
    /// Drivers from the disk up, `>`-joined ("sd>ahci"); "" for a loop device.
    pub controller: String,
    pub pci_address: String,
    pub firmware: String,
    pub size_bytes: u64,
    pub transport: String,
    pub write_cache: String,
    pub first_seen_unix_ms: i64,
    pub last_seen_unix_ms: i64,
    /// When its host first listed its drives without it since (0: it still lists it).
    pub gone_unix_ms: i64,
}

impl Sighting {
    /// Whether the drive was still listed here when `other` first saw it: both at once.
    fn live_at(&self, when: i64) -> bool {
        self.first_seen_unix_ms <= when && (self.gone_unix_ms == 0 || self.gone_unix_ms > when)
    }
}

/// One identity seen live on two hosts at once: a dual-ported or multipath drive, or an
/// identity that is not unique (cloned serials). Never a move.
#[derive(Debug, Clone, PartialEq)]
pub struct Shared {
    pub hosts: Vec<HostName>,
    /// When the second host first saw it while the first still did.
    pub since_unix_ms: i64,
}

impl LedgerDrive {
    /// Whether its identity was seen on two hosts at once, and where.
    pub fn shared(&self) -> Option<Shared> {
        let mut hosts: Vec<HostName> = Vec::new();
        let mut since = i64::MAX;
        for b in &self.sightings {
            for a in self.sightings.iter().filter(|a| a.host != b.host) {
                if a.live_at(b.first_seen_unix_ms) {
                    since = since.min(b.first_seen_unix_ms);
                    for h in [&a.host, &b.host] {
                        if !hosts.contains(h) {
                            hosts.push(h.clone());
                        }
                    }
                }
            }
        }
        hosts.sort();
        (!hosts.is_empty()).then_some(Shared {
            hosts,
            since_unix_ms: since,
        })
    }
}

/// A provenance snapshot of a run that saw the drive.
#[derive(Debug, Clone)]
pub struct DriveSnapshot {
    pub campaign_id: CampaignId,
    pub campaign: String,
    pub state: String,
    pub created_unix_ms: i64,
    pub host: HostName,
    pub plan_id: PlanId,
    pub facts: Provenance,
}

/// The ledger's record of `d` as `host` reports it: its key (`drive_key`), or the record a
/// drive of the same model and serial already has. A drive keeps that record when its WWN
/// shows (a newer agent, another controller that passes it), and the other way round: one
/// physical drive is one record. Both the writer (`sight`) and the drive results
/// (`Store::ledger_id`) name a drive by it.
pub(super) fn record_of(c: &Conn, host: &str, d: &Device) -> Result<(String, Identity, String)> {
    let (id, identity, note) = drive_key(host, d);
    if identity == Identity::Host || d.serial.is_empty() {
        return Ok((id, identity, note));
    }
    let known = c.query_opt(
        "SELECT drive_id, identity FROM drives WHERE model = ?1 AND serial = ?2 AND drive_id <> ?3
            AND identity <> 'host'
          ORDER BY first_seen_unix_ms LIMIT 1",
        params![d.model, d.serial, id],
        |r| Ok((r.get::<String>("drive_id")?, r.get::<String>("identity")?)),
    )?;
    Ok(match known {
        Some((known, how)) => (known, Identity::from_str(&how), note),
        None => (id, identity, note),
    })
}

/// Records that `host` sees `devices` now (writer side: the transaction of the hello or the
/// inventory). Each drive is inserted once, its last sighting moved on; a sighting that
/// differs in anything (another host, controller, firmware, …) is a row of its own.
///
/// A sighting of `host` that this list no longer has is marked gone now: that is what tells
/// a drive that moved (gone from one host, then seen on another) from one identity live on
/// two hosts at once.
pub(super) fn sight(c: &Conn, host: &str, devices: &[Device], now: i64) -> Result<()> {
    for d in devices {
        let (id, identity, note) = record_of(c, host, d)?;
        c.execute(
            "INSERT INTO drives (drive_id, identity, model, serial, wwn, note, first_seen_unix_ms, last_seen_unix_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?7, ?6, ?6)
             ON CONFLICT (drive_id) DO UPDATE SET last_seen_unix_ms =
               CASE WHEN drives.last_seen_unix_ms > excluded.last_seen_unix_ms
                    THEN drives.last_seen_unix_ms ELSE excluded.last_seen_unix_ms END",
            params![id, identity.as_str(), d.model, d.serial, d.wwn, now, note],
        )?;
        let write_cache = match d.write_cache {
            WriteCache::WriteBack => "write back",
            WriteCache::WriteThrough => "write through",
            WriteCache::Unknown => "unknown",
        };
        c.execute(
            "INSERT INTO drive_sightings (drive_id, host, path, controller, pci_address, firmware,
                size_bytes, transport, write_cache, first_seen_unix_ms, last_seen_unix_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)
             ON CONFLICT (drive_id, host, path, controller, pci_address, firmware, size_bytes, transport, write_cache)
             DO UPDATE SET gone_unix_ms = 0, last_seen_unix_ms =
               CASE WHEN drive_sightings.last_seen_unix_ms > excluded.last_seen_unix_ms
                    THEN drive_sightings.last_seen_unix_ms ELSE excluded.last_seen_unix_ms END",
            params![
                id,
                host,
                d.path,
                d.controller.join(">"),
                d.pci_address.clone().unwrap_or_default(),
                d.firmware,
                d.size_bytes as i64,
                d.transport.as_str(),
                write_cache,
                now
            ],
        )?;
    }
    c.execute(
        "UPDATE drive_sightings SET gone_unix_ms = ?2
          WHERE host = ?1 AND gone_unix_ms = 0 AND last_seen_unix_ms < ?2",
        params![host, now],
    )?;
    Ok(())
}

impl Store {
    /// Every drive of the ledger with its sightings, by model then id.
    pub fn ledger(&self) -> Result<Vec<LedgerDrive>> {
        self.read(|c| {
            let drives = c.query_map(
                "SELECT drive_id, identity, model, serial, wwn, note, first_seen_unix_ms, last_seen_unix_ms
                   FROM drives ORDER BY model, drive_id",
                (),
                |r| {
                    Ok(LedgerDrive {
                        id: r.get("drive_id")?,
                        identity: r.text("identity", Identity::from_str)?,
                        model: r.get("model")?,
                        serial: r.get("serial")?,
                        wwn: r.get("wwn")?,
                        note: r.get("note")?,
                        first_seen_unix_ms: r.get("first_seen_unix_ms")?,
                        last_seen_unix_ms: r.get("last_seen_unix_ms")?,
                        sightings: Vec::new(),
                    })
                },
            )?;
            let sightings = c.query_map(
                "SELECT drive_id, host, path, controller, pci_address, firmware, size_bytes, transport,
                        write_cache, first_seen_unix_ms, last_seen_unix_ms, gone_unix_ms
                   FROM drive_sightings ORDER BY drive_id, first_seen_unix_ms, host, path",
                (),
                |r| {
                    Ok((
                        r.get::<String>("drive_id")?,
                        Sighting {
                            host: r.get("host")?,
                            path: r.get("path")?,
                            controller: r.get("controller")?,
                            pci_address: r.get("pci_address")?,
                            firmware: r.get("firmware")?,
                            size_bytes: r.get::<i64>("size_bytes")? as u64,
                            transport: r.get("transport")?,
                            write_cache: r.get("write_cache")?,
                            first_seen_unix_ms: r.get("first_seen_unix_ms")?,
                            last_seen_unix_ms: r.get("last_seen_unix_ms")?,
                            gone_unix_ms: r.get("gone_unix_ms")?,
                        },
                    ))
                },
            )?;
            let mut drives = drives;
            let index: std::collections::HashMap<String, usize> = drives
                .iter()
                .enumerate()
                .map(|(i, d)| (d.id.clone(), i))
                .collect();
            for (id, s) in sightings {
                if let Some(&i) = index.get(&id) {
                    drives[i].sightings.push(s);
                }
            }
            Ok(drives)
        })
    }

    /// The provenance snapshots, oldest run first, that name the drive: by its serial, else
    /// (a drive without one) by its path on `host`. The caller keeps the ones that are it.
    pub fn drive_snapshots(
        &self,
        serial: &str,
        host_and_path: Option<(&str, &str)>,
    ) -> Result<Vec<DriveSnapshot>> {
        self.read(|c| {
            // The JSON text of the value, its LIKE wildcards and escape character escaped
            // (`ESCAPE '\'` below, which both engines read alike).
            let like = |key: &str, value: &str| -> Result<String> {
                let json = serde_json::to_string(value)?
                    .replace('\\', "\\\\")
                    .replace('%', "\\%")
                    .replace('_', "\\_");
                Ok(format!("%\"{key}\":{json}%"))
            };
            let (pattern, host) = match host_and_path {
                _ if !serial.is_empty() => (like("serial", serial)?, String::new()),
                Some((host, path)) => (like("path", path)?, host.to_string()),
                None => return Ok(Vec::new()),
            };
            c.query_map(
                "SELECT p.campaign_id, ca.name, ca.state, ca.submitted_unix_ms, pr.host, pr.plan_id, pr.facts
                   FROM provenance pr JOIN plans p ON p.id = pr.plan_id
                   JOIN campaigns ca ON ca.id = p.campaign_id
                  WHERE pr.facts LIKE ?1 ESCAPE '\\' AND (?2 = '' OR pr.host = ?2)
                  ORDER BY ca.submitted_unix_ms, p.campaign_id, pr.host, pr.plan_id, pr.seq",
                params![pattern, host],
                |r| {
                    Ok(DriveSnapshot {
                        campaign_id: r.get("campaign_id")?,
                        campaign: r.get("name")?,
                        state: r.get("state")?,
                        created_unix_ms: r.get("submitted_unix_ms")?,
                        host: r.get("host")?,
                        plan_id: r.get("plan_id")?,
                        facts: r.text("facts", |t| serde_json::from_str(t))??,
                    })
                },
            )
        })
    }
}
