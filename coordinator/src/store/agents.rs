//! Agents: their hellos, device lists and records go to the writers (`to_writer`); their
//! labels and inventories are read for planning, their rows for `platter agents`.

use std::collections::HashMap;

use platter_proto::inventory::Device;
use platter_proto::model::{CampaignId, HostName, Record};
use tokio::sync::oneshot;

use super::error::{Result, StoreError};

use super::writer::{writer_of, AgentRow, Batch, BatchOutcome};
use super::Store;

/// An agent as its last hello left it, with the campaign of the plan it holds (sent or
/// accepted), if any.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredAgent {
    pub host: HostName,
    pub boot_id: String,
    pub version: String,
    pub last_seen_unix_ms: i64,
    pub devices: DevicesJson,
    pub labels: HashMap<String, String>,
    pub current_campaign: Option<CampaignId>,
}

/// An agent's devices as the store keeps them (JSON), read only where they are needed:
/// `platter agents` lists 50 of a fleet of 100,000, and reading every agent's devices took
/// most of its time there (BENCHMARKS.md).
#[derive(Debug, Clone, PartialEq)]
pub struct DevicesJson(Box<str>);

impl Default for DevicesJson {
    /// No devices.
    fn default() -> Self {
        DevicesJson("[]".into())
    }
}

impl DevicesJson {
    pub fn read(&self) -> Result<Vec<Device>> {
        Ok(serde_json::from_str(&self.0)?)
    }

    /// Whether a device's model contains `q`. The JSON is searched first: the column is
    /// written only by `serde_json`, which escapes nothing but `"`, `\` and control
    /// characters, so a `q` without those that is in a model is in the JSON as it is, and
    /// only an agent whose JSON holds it is decoded. False if the JSON cannot be decoded.
    pub fn any_model_contains(&self, q: &str) -> bool {
        let escaped = q.chars().any(|c| c == '"' || c == '\\' || c.is_control());
        if !escaped && !self.0.contains(q) {
            return false;
        }
        self.read()
            .map(|d| d.iter().any(|d| d.model.contains(q)))
            .unwrap_or(false)
    }
}

impl Store {
    /// Stores records durably; resolves once they are committed.
    pub async fn write_records(
        &self,
        host: &HostName,
        records: Vec<Record>,
    ) -> Result<BatchOutcome> {
        self.to_writer(host, None, None, records).await
    }

    /// Hands one batch to the writer and waits for its commit.
    async fn to_writer(
        &self,
        host: &HostName,
        hello: Option<AgentRow>,
        inventory: Option<String>,
        records: Vec<Record>,
    ) -> Result<BatchOutcome> {
        let (done, rx) = oneshot::channel();
        let batch = Batch {
            host: host.clone(),
            hello,
            inventory,
            records,
            done,
        };
        self.writers[writer_of(host, self.writers.len())]
            .send(batch)
            .await
            .map_err(|_| StoreError::WriterGone)?;
        rx.await.map_err(|_| StoreError::WriterGone)?
    }

    /// Stores an agent's hello (boot id, version, inventory, labels); resolves once committed.
    pub async fn agent_seen(
        &self,
        host: &HostName,
        boot_id: &str,
        version: &str,
        devices: &[Device],
        labels: &[(String, String)],
    ) -> Result<()> {
        let labels: serde_json::Map<String, serde_json::Value> = labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone().into()))
            .collect();
        let row = AgentRow {
            boot_id: boot_id.to_string(),
            version: version.to_string(),
            devices: serde_json::to_string(devices)?,
            labels: serde_json::to_string(&labels)?,
        };
        self.to_writer(host, Some(row), None, Vec::new()).await?;
        Ok(())
    }

    /// Stores a connected agent's new device list; resolves once committed.
    pub async fn agent_devices(&self, host: &HostName, devices: &[Device]) -> Result<()> {
        let devices = serde_json::to_string(devices)?;
        self.to_writer(host, None, Some(devices), Vec::new())
            .await?;
        Ok(())
    }

    /// Every agent's labels from its last hello.
    pub fn labels(&self) -> Result<crate::spec::AgentLabels> {
        self.read(|c| {
            let rows = c.query_map("SELECT host, labels FROM agents ORDER BY host", (), |r| {
                Ok((r.get::<String>(0)?, r.get::<String>(1)?))
            })?;
            rows.into_iter()
                .map(|(h, l)| Ok((h, serde_json::from_str(&l)?)))
                .collect()
        })
    }

    /// Every agent's devices from its last hello.
    pub fn inventories(&self) -> Result<crate::planning::planner::Inventories> {
        self.read(|c| {
            let rows = c.query_map("SELECT host, devices FROM agents", (), |r| {
                Ok((r.get::<String>(0)?, r.get::<String>(1)?))
            })?;
            rows.into_iter()
                .map(|(h, d)| Ok((h, serde_json::from_str(&d)?)))
                .collect()
        })
    }

    /// Every agent the store has heard from, by host.
    pub fn agents(&self) -> Result<Vec<StoredAgent>> {
        self.read(|c| {
            // The campaign of the plan each host holds (its first queued, where several
            // are): one query for the fleet, not a subquery per agent.
            let held = c.query_map(
                "SELECT host, campaign_id FROM plans WHERE state IN ('sent', 'accepted')
                  ORDER BY host, queued_seq DESC",
                (),
                |r| Ok((r.get::<HostName>(0)?, r.get::<CampaignId>(1)?)),
            )?;
            // Later rows of a host are earlier in the queue: the last one written stays.
            let mut holding: HashMap<HostName, CampaignId> = held.into_iter().collect();
            let rows = c.query_map(
                "SELECT host, boot_id, agent_version, last_seen_unix_ms, devices, labels
                   FROM agents ORDER BY host",
                (),
                |r| {
                    Ok((
                        r.get::<HostName>(0)?,
                        r.get::<String>(1)?,
                        r.get::<String>(2)?,
                        r.get::<i64>(3)?,
                        r.get::<String>(4)?,
                        r.get::<String>(5)?,
                    ))
                },
            )?;
            rows.into_iter()
                .map(
                    |(host, boot_id, version, last_seen_unix_ms, devices, labels)| {
                        let devices = DevicesJson(devices.into());
                        let current_campaign = holding.remove(&host);
                        Ok(StoredAgent {
                            host,
                            boot_id,
                            version,
                            last_seen_unix_ms,
                            devices,
                            labels: serde_json::from_str(&labels)?,
                            current_campaign,
                        })
                    },
                )
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Models with what JSON escapes and what it does not: each found by a part of it,
    /// and nothing found that is only in the JSON's keys or other fields.
    #[test]
    fn a_part_of_a_model_is_found_however_the_json_writes_it() {
        let models = [
            "Quote \"Pro\" 1TB",
            "Back\\slash",
            "Tab\there",
            "NVMe/PCIe 4.0",
            "Ünïcode SSD",
            "del\u{7f}te",
        ];
        let devices: Vec<Device> = models
            .iter()
            .map(|m| {
                // An inventory's device as the fleet bench's agents report one.
                let mut d: Device = serde_json::from_str(
                    r#"{"name":"sdz","path":"/dev/sdz","major_minor":"8:0","vendor":"ATA","model":"",
                        "serial":"S1","firmware":"F1","size_bytes":1000204886016,"rotational":false,
                        "transport":"ata","controller":["sd","ahci"],"pci_address":"0000:00:17.0",
                        "by_id":[],"by_path":[],"write_cache":"write_back","write_cache_source":"",
                        "partitions":[],"mounted":[],"holders":[],"holds_root":false,
                        "backing_file":null,"wwn":""}"#,
                )
                .unwrap();
                d.model = m.to_string();
                d
            })
            .collect();
        let json = DevicesJson(serde_json::to_string(&devices).unwrap().into());
        for q in [
            "\"Pro\"",
            "k\\s",
            "\th",
            "NVMe/PCIe",
            "Ünï",
            "l\u{7f}t",
            "1TB",
        ] {
            assert!(json.any_model_contains(q), "{q:?} in {json:?}");
        }
        for q in ["model", "/dev/sdz", "\"path\"", "Pro\\", "Tab\\t"] {
            assert!(!json.any_model_contains(q), "{q:?} in {json:?}");
        }
        assert!(!DevicesJson("not json".into()).any_model_contains("json"));
        assert!(DevicesJson::default().read().unwrap().is_empty());
    }
}
