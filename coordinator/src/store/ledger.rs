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

/// The ledger's key of `d` as `host` reports it: `naa.5000c500a1b2c3d4`, `MODEL/SERIAL` (the
/// serial alone without a model), or `HOST/NAME` for a drive without a serial.
pub fn drive_key(host: &str, d: &Device) -> (String, Identity) {
    if !d.wwn.is_empty() {
        (d.wwn.clone(), Identity::Wwn)
    } else if !d.serial.is_empty() && !d.model.is_empty() {
        (format!("{}/{}", d.model, d.serial), Identity::Serial)
    } else if !d.serial.is_empty() {
        (d.serial.clone(), Identity::Serial)
    } else {
        (format!("{host}/{}", d.name), Identity::Host)
    }
}

/// One drive of the ledger with every sighting, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerDrive {
    pub id: String,
    pub identity: Identity,
    pub model: String,
    pub serial: String,
    pub wwn: String,
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

/// Records that `host` sees `devices` now (writer side: the transaction of the hello or the
/// inventory). Each drive is inserted once, its last sighting moved on; a sighting that
/// differs in anything (another host, controller, firmware, …) is a row of its own.
pub(super) fn sight(c: &Conn, host: &str, devices: &[Device], now: i64) -> Result<()> {
    for d in devices {
        let (mut id, mut identity) = drive_key(host, d);
        // A drive the ledger has by model and serial keeps that record when its WWN shows
        // (a newer agent, another controller that passes it), and the other way round: one
        // physical drive is one record.
        if !d.serial.is_empty() {
            let known = c.query_opt(
                "SELECT drive_id, identity FROM drives WHERE model = ?1 AND serial = ?2 AND drive_id <> ?3
                  ORDER BY first_seen_unix_ms LIMIT 1",
                params![d.model, d.serial, id],
                |r| Ok((r.get::<String>("drive_id")?, r.get::<String>("identity")?)),
            )?;
            if let Some((known, how)) = known {
                id = known;
                identity = Identity::from_str(&how);
            }
        }
        c.execute(
            "INSERT INTO drives (drive_id, identity, model, serial, wwn, first_seen_unix_ms, last_seen_unix_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
             ON CONFLICT (drive_id) DO UPDATE SET last_seen_unix_ms =
               CASE WHEN drives.last_seen_unix_ms > excluded.last_seen_unix_ms
                    THEN drives.last_seen_unix_ms ELSE excluded.last_seen_unix_ms END",
            params![id, identity.as_str(), d.model, d.serial, d.wwn, now],
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
             DO UPDATE SET last_seen_unix_ms =
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
    Ok(())
}

impl Store {
    /// Every drive of the ledger with its sightings, by model then id.
    pub fn ledger(&self) -> Result<Vec<LedgerDrive>> {
        self.read(|c| {
            let drives = c.query_map(
                "SELECT drive_id, identity, model, serial, wwn, first_seen_unix_ms, last_seen_unix_ms
                   FROM drives ORDER BY model, drive_id",
                (),
                |r| {
                    Ok(LedgerDrive {
                        id: r.get("drive_id")?,
                        identity: r.text("identity", Identity::from_str)?,
                        model: r.get("model")?,
                        serial: r.get("serial")?,
                        wwn: r.get("wwn")?,
                        first_seen_unix_ms: r.get("first_seen_unix_ms")?,
                        last_seen_unix_ms: r.get("last_seen_unix_ms")?,
                        sightings: Vec::new(),
                    })
                },
            )?;
            let sightings = c.query_map(
                "SELECT drive_id, host, path, controller, pci_address, firmware, size_bytes, transport,
                        write_cache, first_seen_unix_ms, last_seen_unix_ms
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
                        },
                    ))
                },
            )?;
            let mut drives = drives;
            for (id, s) in sightings {
                if let Some(d) = drives.iter_mut().find(|d| d.id == id) {
                    d.sightings.push(s);
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
