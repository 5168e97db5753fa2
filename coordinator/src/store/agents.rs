//! Agents: their hellos, device lists and records go to the writers (`to_writer`); their
//! labels and inventories are read for planning, their rows for `platter agents`.

use std::collections::HashMap;

use platter_proto::inventory::Device;
use platter_proto::model::{CampaignId, HostName, Record};
use tokio::sync::oneshot;

use super::error::{Result, StoreError};

use super::writer::{writer_of, AckedElsewhere, AgentRow, Batch, BatchOutcome};
use super::Store;

/// An agent as its last hello left it, with the campaign of the plan it holds (sent or
/// accepted), if any; its devices are read apart (`Store::devices_json`).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredAgent {
    pub host: HostName,
    pub boot_id: String,
    pub version: String,
    pub last_seen_unix_ms: i64,
    pub labels: HashMap<String, String>,
    pub current_campaign: Option<CampaignId>,
}

/// An agent's devices as the store keeps them (JSON), read only where they are needed:
/// `platter agents` lists 50 of a fleet of 100,000, and reading every agent's devices took
/// most of its time there (BENCHMARKS.md), and a console page most of its time after.
/// Shared, not copied: the coordinator keeps the drives it last read for when the store
/// does not answer.
#[derive(Debug, Clone, PartialEq)]
pub struct DevicesJson(std::sync::Arc<str>);

impl Default for DevicesJson {
    /// No devices.
    fn default() -> Self {
        DevicesJson("[]".into())
    }
}

impl DevicesJson {
    /// Whether the JSON writes `q` otherwise than as it is (`"`, `\\`, control characters).
    fn escapes(q: &str) -> bool {
        q.chars().any(|c| c == '"' || c == '\\' || c.is_control())
    }

    pub fn read(&self) -> Result<Vec<Device>> {
        Ok(serde_json::from_str(&self.0)?)
    }

    /// Whether a device's model contains `q`. The JSON is searched first: the column is
    /// written only by `serde_json`, which escapes nothing but `"`, `\` and control
    /// characters, so a `q` without those that is in a model is in the JSON as it is, and
    /// only an agent whose JSON holds it is decoded. False if the JSON cannot be decoded.
    pub fn any_model_contains(&self, q: &str) -> bool {
        if !Self::escapes(q) && !self.0.contains(q) {
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
        self.agent_hello(host, boot_id, version, devices, labels, 0)
            .await?;
        Ok(())
    }

    /// `agent_seen` for a hello that says how far the agent's records were acked
    /// (`acked_seq`): the records of those this store never heard of, if any (it was
    /// restored from a backup taken before them, or the agent was served by another
    /// store), said once.
    pub async fn agent_hello(
        &self,
        host: &HostName,
        boot_id: &str,
        version: &str,
        devices: &[Device],
        labels: &[(String, String)],
        acked_seq: u64,
    ) -> Result<Option<AckedElsewhere>> {
        let labels: serde_json::Map<String, serde_json::Value> = labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone().into()))
            .collect();
        let row = AgentRow {
            boot_id: boot_id.to_string(),
            version: version.to_string(),
            devices: serde_json::to_string(devices)?,
            labels: serde_json::to_string(&labels)?,
            acked_seq,
        };
        let outcome = self.to_writer(host, Some(row), None, Vec::new()).await?;
        Ok(outcome.acked_elsewhere)
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
                Ok((
                    r.get::<String>("host")?,
                    r.text("labels", |t| serde_json::from_str(t))??,
                ))
            })?;
            Ok(rows.into_iter().collect())
        })
    }

    /// Every agent's devices from its last hello.
    pub fn inventories(&self) -> Result<crate::planning::planner::Inventories> {
        self.read(|c| {
            let rows = c.query_map("SELECT host, devices FROM agents", (), |r| {
                Ok((
                    r.get::<String>("host")?,
                    r.text("devices", |t| serde_json::from_str(t))??,
                ))
            })?;
            Ok(rows.into_iter().collect())
        })
    }

    /// Every agent the store has heard from, by host, without its devices.
    pub fn agents(&self) -> Result<Vec<StoredAgent>> {
        self.read(|c| {
            // The campaign of the plan each host holds (its first queued, where several
            // are): one query for the fleet, not a subquery per agent.
            let held = c.query_map(
                "SELECT host, campaign_id FROM plans WHERE state IN ('sent', 'accepted')
                  ORDER BY host, queued_seq DESC",
                (),
                |r| {
                    Ok((
                        r.get::<HostName>("host")?,
                        r.get::<CampaignId>("campaign_id")?,
                    ))
                },
            )?;
            // Later rows of a host are earlier in the queue: the last one written stays.
            let mut holding: HashMap<HostName, CampaignId> = held.into_iter().collect();
            c.query_map(
                "SELECT host, boot_id, agent_version, last_seen_unix_ms, labels
                   FROM agents ORDER BY host",
                (),
                |r| {
                    let host = r.get::<HostName>("host")?;
                    let current_campaign = holding.remove(&host);
                    Ok(StoredAgent {
                        host,
                        boot_id: r.get("boot_id")?,
                        version: r.get("agent_version")?,
                        last_seen_unix_ms: r.get("last_seen_unix_ms")?,
                        labels: r.text("labels", |t| serde_json::from_str(t))??,
                        current_campaign,
                    })
                },
            )
        })
    }

    /// The devices' JSON of the agents `which` names: those listed, or those that may
    /// have a drive whose model contains a word.
    pub fn devices_json(&self, which: Devices<'_>) -> Result<DevicesByHost> {
        self.read(|c| {
            let mut out = DevicesByHost::default();
            let mut each = |r: &super::db::Row<'_>| {
                out.insert(
                    r.get::<HostName>("host")?,
                    DevicesJson(r.get::<String>("devices")?.into()),
                );
                Ok(())
            };
            let pg = c.is_postgres();
            match which {
                // One statement for them all, their names a JSON array.
                Devices::Of(hosts) => {
                    let names = serde_json::to_string(hosts)?;
                    let sql = if pg {
                        "SELECT host, devices FROM agents
                          WHERE host IN (SELECT json_array_elements_text(?1::text::json))"
                    } else {
                        "SELECT host, devices FROM agents WHERE host IN (SELECT value FROM json_each(?1))"
                    };
                    c.query_each(sql, [names], &mut each)?;
                }
                // The JSON holds an unescaped word as it is (`DevicesJson::any_model_contains`):
                // the store searches it, and sends only the agents' JSON that holds it.
                Devices::Containing(q) if !DevicesJson::escapes(q) => {
                    let sql = if pg {
                        "SELECT host, devices FROM agents WHERE strpos(devices, ?1) > 0"
                    } else {
                        "SELECT host, devices FROM agents WHERE instr(devices, ?1) > 0"
                    };
                    c.query_each(sql, [q], &mut each)?;
                }
                Devices::Containing(_) | Devices::All => {
                    c.query_each("SELECT host, devices FROM agents", (), &mut each)?;
                }
            }
            Ok(out)
        })
    }
}

/// Agents' devices' JSON by name (foldhash: a listing of 100,000 agents looks each up).
pub type DevicesByHost = HashMap<HostName, DevicesJson, foldhash::fast::RandomState>;

/// Whose devices `Store::devices_json` reads.
#[derive(Debug, Clone, Copy)]
pub enum Devices<'a> {
    /// These agents'.
    Of(&'a [HostName]),
    /// At least those of every agent with a drive whose model contains this word.
    Containing(&'a str),
    /// Every agent's.
    All,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::drive;

    /// The agents' rows come without their drives; the drives' JSON of the agents named,
    /// of those whose JSON holds a word (the store searches it; a word the JSON escapes
    /// gets every agent's, to be decoded and looked at), or of all: on both engines.
    #[tokio::test]
    async fn drives_are_read_for_the_agents_named_or_holding_a_word() {
        let dir = tempfile::tempdir().unwrap();
        for store in crate::store::testing::stores(dir.path()) {
            let fleet = [
                ("h1", vec![drive("Samsung SSD 860 EVO"), drive("WDC WD10")]),
                ("h2", vec![drive("Quote \"Pro\" Ünï")]),
                ("h3", vec![]),
                ("q\"\\é", vec![drive("Odd")]),
            ];
            for (host, devices) in &fleet {
                let labels = [("rack".to_string(), "a".to_string())];
                store
                    .agent_seen(&(*host).into(), "b", "v", devices, &labels)
                    .await
                    .unwrap();
            }
            let rows = store.agents().unwrap();
            let hosts: Vec<&str> = rows.iter().map(|r| r.host.as_str()).collect();
            assert_eq!(hosts, ["h1", "h2", "h3", "q\"\\é"]);
            assert_eq!(rows[0].labels.get("rack").map(String::as_str), Some("a"));
            let read = |which| {
                let mut got: Vec<(String, Vec<String>)> = store
                    .devices_json(which)
                    .unwrap()
                    .into_iter()
                    .map(|(h, j)| {
                        (
                            h.to_string(),
                            j.read().unwrap().into_iter().map(|d| d.model).collect(),
                        )
                    })
                    .collect();
                got.sort();
                got
            };
            let h1 = (
                "h1".to_string(),
                vec!["Samsung SSD 860 EVO".to_string(), "WDC WD10".to_string()],
            );
            let h2 = ("h2".to_string(), vec!["Quote \"Pro\" Ünï".to_string()]);
            let h3 = ("h3".to_string(), vec![]);
            let odd = ("q\"\\é".to_string(), vec!["Odd".to_string()]);
            assert_eq!(read(Devices::Containing("EVO")), std::slice::from_ref(&h1));
            assert_eq!(read(Devices::Containing("Ünï")), std::slice::from_ref(&h2));
            assert_eq!(read(Devices::Containing("Intel")), []);
            // `"` is written `\"` in the JSON: every agent's, the caller decodes them.
            let every = [h1.clone(), h2.clone(), h3.clone(), odd.clone()];
            assert_eq!(read(Devices::Containing("\"Pro\"")), every);
            assert_eq!(read(Devices::All), every);
            // Names as odd as JSON gets, in one statement.
            let named: Vec<HostName> = ["h3", "q\"\\é", "h1", "gone"].map(HostName::from).to_vec();
            assert_eq!(read(Devices::Of(&named)), [h1, h3, odd]);
        }
    }

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
        let devices: Vec<Device> = models.iter().map(|m| drive(m)).collect();
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
