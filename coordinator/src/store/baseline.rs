//! A drive's baseline health: the first reading of it that any run took, whichever campaign,
//! found in the provenance snapshots (as `Store::drive_snapshots` finds a drive's runs: by its
//! serial in the snapshot's text, else by its path on its host) and read as a typed row. It
//! only reads. A drive's health history is the provenance of the runs that read it, and the
//! store keeps it for the drive's whole life: no statement deletes or rewrites a provenance
//! row, a plan or a campaign, and nothing prunes them by age (only accounts, sessions, API
//! tokens, schedules and presence rows are ever deleted).

use platter_proto::model::{CampaignId, HostName, PlanId};
use platter_proto::provenance::{HealthReading, Provenance};

use super::db::{params, Conn};
use super::error::Result;
use super::Store;

/// The drive whose baseline is asked: by serial (and model, when both sides know one), or,
/// for a drive without a serial, by its path on its host.
#[derive(Debug, Clone, Copy)]
pub struct WhichDrive<'a> {
    pub serial: &'a str,
    pub model: &'a str,
    pub host: &'a str,
    pub path: &'a str,
}

impl WhichDrive<'_> {
    /// Whether the reading `h`, in a snapshot of `host`, is this drive's. Two models may
    /// share a serial; smartctl may know a model the kernel does not.
    fn is(&self, host: &str, h: &platter_proto::provenance::DriveHealth) -> bool {
        if self.serial.is_empty() {
            host == self.host && h.path == self.path
        } else {
            h.serial == self.serial
                && (h.model == self.model || h.model.is_empty() || self.model.is_empty())
        }
    }
}

/// The first health reading of a drive, and the run that took it.
#[derive(Debug, Clone, PartialEq)]
pub struct BaselineReading {
    pub campaign_id: CampaignId,
    pub campaign: String,
    pub submitted_unix_ms: i64,
    pub host: HostName,
    pub plan_id: PlanId,
    pub reading: HealthReading,
}

/// `drive`'s first health reading: of the runs whose snapshots name it, the earliest
/// campaign's first plan (in the order they were queued), its first snapshot with a reading
/// of the drive. `None` when no run read it.
pub fn drive_baseline(c: &Conn, drive: WhichDrive<'_>) -> Result<Option<BaselineReading>> {
    let (pattern, host) = if drive.serial.is_empty() {
        if drive.path.is_empty() {
            return Ok(None);
        }
        (like_json("path", drive.path)?, drive.host)
    } else {
        (like_json("serial", drive.serial)?, "")
    };
    let mut first = None;
    // Rows after the first reading are passed over unparsed.
    c.query_each(
        "SELECT p.campaign_id, ca.name, ca.submitted_unix_ms, pr.host, pr.plan_id, pr.facts
           FROM provenance pr JOIN plans p ON p.id = pr.plan_id
           JOIN campaigns ca ON ca.id = p.campaign_id
          WHERE pr.facts LIKE ?1 ESCAPE '\\' AND (?2 = '' OR pr.host = ?2)
          ORDER BY ca.submitted_unix_ms, p.campaign_id, p.queued_seq, pr.seq",
        params![pattern, host],
        |r| {
            if first.is_some() {
                return Ok(());
            }
            let snapshot_host: String = r.get("host")?;
            let facts: Provenance = r.text("facts", |t| serde_json::from_str(t))??;
            let reading = facts
                .health
                .into_iter()
                .find(|h| h.reading.is_some() && drive.is(&snapshot_host, h))
                .and_then(|h| h.reading);
            if let Some(reading) = reading {
                first = Some(BaselineReading {
                    campaign_id: r.get("campaign_id")?,
                    campaign: r.get("name")?,
                    submitted_unix_ms: r.get("submitted_unix_ms")?,
                    host: snapshot_host.into(),
                    plan_id: r.get("plan_id")?,
                    reading,
                });
            }
            Ok(())
        },
    )?;
    Ok(first)
}

/// A LIKE pattern for `"key":"value"` in a JSON text, its wildcards and escape character
/// escaped (`ESCAPE '\'`, which both engines read alike).
fn like_json(key: &str, value: &str) -> Result<String> {
    let json = serde_json::to_string(value)?
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    Ok(format!("%\"{key}\":{json}%"))
}

impl Store {
    /// `drive_baseline` in a read of its own (the ledger's drive page).
    pub fn drive_baseline(&self, drive: WhichDrive<'_>) -> Result<Option<BaselineReading>> {
        self.read(|c| drive_baseline(c, drive))
    }
}
