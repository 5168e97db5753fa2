//! Each drive's results, one row per run and metric (`drive_results`): what a model's peer
//! groups are read from (`report::peers`). Written from a done campaign's report, each
//! campaign once (`drive_results_indexed`, in the same transaction), so two coordinators
//! that index the same campaign at once write it once.

use platter_proto::inventory::Device;
use platter_proto::model::CampaignId;

use super::db::{params, Conn, Row};
use super::error::Result;
use super::Store;

/// One run of a drive, on one metric: a row of `drive_results`.
#[derive(Debug, Clone, PartialEq)]
pub struct DriveResult {
    pub campaign_id: CampaignId,
    pub host: String,
    /// `cells.n`
    pub cell: i64,
    pub drive_id: String,
    pub metric: String,
    pub model: String,
    pub firmware: String,
    /// Drivers from the disk up (`sd>ahci`).
    pub controller: String,
    pub series: String,
    /// The measure step as JSON, the device's name in it as `${device}`.
    pub workload: String,
    /// The cell's parameters but its device (`bs=4k rw=randwrite`).
    pub configuration: String,
    /// "" (no defined state asked), "steady", or "not steady".
    pub state: String,
    /// The metric the campaign's report judges by (`report: { metric }`, else wall).
    pub key_metric: bool,
    pub unit: String,
    /// The run's median of the metric, and how many values it is the median of.
    pub median: f64,
    pub n: i64,
    pub finished_unix_ms: i64,
}

const COLUMNS: &str =
    "campaign_id, host, cell, drive_id, metric, model, firmware, controller, series, workload,
     configuration, state, key_metric, unit, median, n, finished_unix_ms";

impl DriveResult {
    fn from_row(r: &Row<'_>) -> Result<DriveResult> {
        Ok(DriveResult {
            campaign_id: r.get("campaign_id")?,
            host: r.get("host")?,
            cell: r.get("cell")?,
            drive_id: r.get("drive_id")?,
            metric: r.get("metric")?,
            model: r.get("model")?,
            firmware: r.get("firmware")?,
            controller: r.get("controller")?,
            series: r.get("series")?,
            workload: r.get("workload")?,
            configuration: r.get("configuration")?,
            state: r.get("state")?,
            key_metric: r.get::<i64>("key_metric")? == 1,
            unit: r.get("unit")?,
            median: r.get("median")?,
            n: r.get("n")?,
            finished_unix_ms: r.get("finished_unix_ms")?,
        })
    }
}

/// A model's runs with their texts held once (`Store::peer_runs`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeerRuns {
    /// Every distinct text, by number.
    pub words: Vec<String>,
    pub runs: Vec<PeerRun>,
}

impl PeerRuns {
    pub fn word(&self, i: u32) -> &str {
        &self.words[i as usize]
    }
}

/// One run of a drive on one metric, its texts as numbers into `PeerRuns::words`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PeerRun {
    pub drive: u32,
    pub host: u32,
    pub firmware: u32,
    pub controller: u32,
    pub workload: u32,
    pub configuration: u32,
    pub state: u32,
    pub metric: u32,
    pub unit: u32,
    pub median: f64,
    pub finished_unix_ms: i64,
}

/// Which rows of a model a peer question reads.
#[derive(Debug, Clone, Default)]
pub struct PeerQuery<'q> {
    pub model: &'q str,
    /// One metric; every key metric when `None`.
    pub metric: Option<&'q str>,
    pub firmware: Option<&'q str>,
    pub series: Option<&'q str>,
}

impl Store {
    /// The done campaigns whose drive results are not written yet, oldest first.
    pub fn campaigns_to_index(&self) -> Result<Vec<CampaignId>> {
        self.read(|c| {
            c.query_map(
                "SELECT id FROM campaigns
                  WHERE state = 'done' AND id NOT IN (SELECT campaign_id FROM drive_results_indexed)
                  ORDER BY submitted_unix_ms, id",
                (),
                |r| r.get("id"),
            )
        })
    }

    /// Writes a done campaign's drive results and marks it indexed, in one transaction;
    /// a campaign already indexed (by another coordinator) is left as it is. Whether this
    /// call wrote them.
    pub fn put_drive_results(
        &self,
        campaign_id: &CampaignId,
        rows: &[DriveResult],
    ) -> Result<bool> {
        self.write(|c| {
            let tx = c.write_transaction()?;
            let marked = c.execute(
                "INSERT INTO drive_results_indexed (campaign_id, indexed_unix_ms) VALUES (?1, ?2)
                 ON CONFLICT (campaign_id) DO NOTHING",
                params![campaign_id, super::error::now_ms()],
            )?;
            if marked == 0 {
                return Ok(false);
            }
            insert(c, rows)?;
            tx.commit()?;
            Ok(true)
        })
    }

    /// The runs of `q.model`'s drives as `report::peers` groups them: only what grouping
    /// and judging read, each repeated text held once (a fleet's 200,000 runs share a few
    /// dozen workloads, hosts and controllers; reading them as `DriveResult`s, a String
    /// each, took half again as long).
    pub fn peer_runs(&self, q: &PeerQuery<'_>) -> Result<PeerRuns> {
        self.read(|c| {
            let mut runs = PeerRuns::default();
            let mut words: std::collections::HashMap<Box<str>, u32> =
                std::collections::HashMap::new();
            let mut word = |s: &str, all: &mut Vec<String>| -> u32 {
                if let Some(&i) = words.get(s) {
                    return i;
                }
                let i = all.len() as u32;
                all.push(s.to_string());
                words.insert(s.into(), i);
                i
            };
            let all = &mut runs.words;
            runs.runs = c.query_map(
                "SELECT drive_id, host, firmware, controller, workload, configuration, state, metric,
                        unit, median, finished_unix_ms
                   FROM drive_results
                  WHERE model = ?1 AND (?2 = '' OR metric = ?2) AND (?2 <> '' OR key_metric = 1)
                    AND (?3 = '' OR firmware = ?3) AND (?4 = '' OR series = ?4)
                  ORDER BY drive_id, finished_unix_ms, campaign_id, host, cell",
                params![
                    q.model,
                    q.metric.unwrap_or(""),
                    q.firmware.unwrap_or(""),
                    q.series.unwrap_or("")
                ],
                |r| {
                    let mut w = |col: &str| r.text(col, |s| word(s, all));
                    Ok(PeerRun {
                        drive: w("drive_id")?,
                        host: w("host")?,
                        firmware: w("firmware")?,
                        controller: w("controller")?,
                        workload: w("workload")?,
                        configuration: w("configuration")?,
                        state: w("state")?,
                        metric: w("metric")?,
                        unit: w("unit")?,
                        median: r.get("median")?,
                        finished_unix_ms: r.get("finished_unix_ms")?,
                    })
                },
            )?;
            Ok(runs)
        })
    }

    /// The models and drives a campaign's results measured (`report::flags`: the drives
    /// whose standing among their peers its flags judge again).
    pub fn campaign_drives(&self, campaign_id: &str) -> Result<Vec<(String, String)>> {
        self.read(|c| {
            c.query_map(
                "SELECT DISTINCT model, drive_id FROM drive_results WHERE campaign_id = ?1
                  ORDER BY model, drive_id",
                params![campaign_id],
                |r| Ok((r.get("model")?, r.get("drive_id")?)),
            )
        })
    }

    /// One drive's runs, every metric.
    pub fn drive_results(&self, drive_id: &str) -> Result<Vec<DriveResult>> {
        self.read(|c| {
            c.query_map(
                &format!(
                    "SELECT {COLUMNS} FROM drive_results WHERE drive_id = ?1
                      ORDER BY finished_unix_ms, campaign_id, host, cell, metric"
                ),
                params![drive_id],
                DriveResult::from_row,
            )
        })
    }

    /// The ledger's id of `d` as `host` saw it: its key, or the record a drive of the same
    /// model and serial already has (as `ledger::sight` keeps one record per drive).
    pub fn ledger_id(&self, host: &str, d: &Device) -> Result<String> {
        self.read(|c| Ok(super::ledger::record_of(c, host, d)?.0))
    }
}

/// Inserts `rows` (a benchmark's fleet goes through here too).
pub(crate) fn insert(c: &Conn, rows: &[DriveResult]) -> Result<()> {
    let sql = format!(
        "INSERT INTO drive_results ({COLUMNS})
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)
         ON CONFLICT DO NOTHING"
    );
    for r in rows {
        c.execute(
            &sql,
            params![
                r.campaign_id,
                r.host,
                r.cell,
                r.drive_id,
                r.metric,
                r.model,
                r.firmware,
                r.controller,
                r.series,
                r.workload,
                r.configuration,
                r.state,
                r.key_metric,
                r.unit,
                r.median,
                r.n,
                r.finished_unix_ms
            ],
        )?;
    }
    Ok(())
}
