//! Campaigns: submitting one (its cells and plans, all or nothing), finding one to resume,
//! its generation and state.

use platter_proto::model::CampaignId;

use super::db::{self, params};
use super::error::{now_ms, Result, StoreError};
use super::notify::Change;
use super::plans::{queue_plan, split, warmup_steps};
use super::Store;
use crate::planning::planner::PlannedCampaign;

impl Store {
    /// An unfinished campaign with this content, if any.
    pub fn resumable(&self, content_hash: &str) -> Result<Option<CampaignId>> {
        self.read(|c| {
            c.query_opt(
                "SELECT id FROM campaigns WHERE content_hash = ?1 AND state = 'running' ORDER BY generation DESC LIMIT 1",
                [content_hash],
                |r| r.only(),
            )
        })
    }

    /// The generation a new campaign with this content gets (1 for the first).
    pub fn next_generation(&self, content_hash: &str) -> Result<u32> {
        self.with(|c| {
            let g: Option<u32> = c.query_row(
                "SELECT MAX(generation) FROM campaigns WHERE content_hash = ?1",
                [content_hash],
                |r| r.only(),
            )?;
            Ok(g.unwrap_or(0) + 1)
        })
    }

    /// Stores a planned campaign and queues its plans, all or nothing.
    pub fn insert_campaign(&self, p: &PlannedCampaign, file_name: &str, yaml: &str) -> Result<()> {
        self.write(|c| {
            let tx = c.write_transaction()?;
            self.insert_campaign_in(&tx, p, file_name, yaml)?;
            tx.commit()
        })?;
        self.bump();
        Ok(())
    }

    /// `insert_campaign` inside the caller's transaction `tx` (a schedule's firing stores
    /// its run with the firing); the caller bumps after commit.
    pub(super) fn insert_campaign_in(
        &self,
        tx: &db::Conn,
        p: &PlannedCampaign,
        file_name: &str,
        yaml: &str,
    ) -> Result<()> {
        tx.execute(
            "INSERT INTO campaigns (id, name, content_hash, generation, file_name, yaml, params, repeat, state, submitted_unix_ms, series)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'running', ?9, ?10)",
            params![
                p.id,
                p.name,
                p.content_hash,
                p.generation,
                file_name,
                yaml,
                serde_json::to_string(&p.params)?,
                p.repeat,
                now_ms(),
                p.series
            ],
        )?;
        match tx.as_postgres() {
            Some(pg) => insert_cells_and_plans_pg(pg, p)?,
            None => {
                for cell in &p.cells {
                    tx.execute(
                        "INSERT INTO cells (id, campaign_id, host, idx, params, point, device) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                        params![cell.id, p.id, cell.host, cell.index as i64, serde_json::to_string(&cell.params)?, cell.point as i64, cell.device],
                    )?;
                }
                for plan in &p.plans {
                    queue_plan(tx, plan)?;
                }
            }
        }
        self.notify(tx, Change::Plans)
    }

    /// Whether campaign `campaign_id` runs, ended or was cancelled.
    pub fn campaign_state(&self, campaign_id: &CampaignId) -> Result<CampaignState> {
        self.read(|c| {
            c.query_opt(
                "SELECT state FROM campaigns WHERE id = ?1",
                [campaign_id],
                |r| r.only::<String>(),
            )?
            .map(CampaignState::from)
            .ok_or_else(|| StoreError::NoCampaign(campaign_id.to_string()))
        })
    }
}

/// PostgreSQL: a submitted campaign's cells and plans as two statements (arrays
/// `unnest`ed), not two or three round trips per plan: a campaign for 1,000 hosts is
/// stored before its fan-out starts. Plans are queued after every plan queued so far, in
/// their order, as `queue_plan` queues them one by one.
pub(super) fn insert_cells_and_plans_pg(pg: &db::pg::PgConn, p: &PlannedCampaign) -> Result<()> {
    let mut params = Vec::with_capacity(p.cells.len());
    for cell in &p.cells {
        params.push(serde_json::to_string(&cell.params)?);
    }
    let ids: Vec<&str> = p.cells.iter().map(|c| c.id.as_str()).collect();
    let hosts: Vec<&str> = p.cells.iter().map(|c| c.host.as_str()).collect();
    let idx: Vec<i64> = p.cells.iter().map(|c| c.index as i64).collect();
    let points: Vec<i64> = p.cells.iter().map(|c| c.point as i64).collect();
    let devices: Vec<Option<&str>> = p.cells.iter().map(|c| c.device.as_deref()).collect();
    pg.query_typed(
        "INSERT INTO cells (id, campaign_id, host, idx, params, point, device)
         SELECT c.id, $2, c.host, c.idx, c.params, c.point, c.device
           FROM unnest($1::text[], $3::text[], $4::int8[], $5::text[], $6::int8[], $7::text[])
                AS c (id, host, idx, params, point, device)",
        &[
            &ids,
            &p.id.as_str(),
            &hosts,
            &idx,
            &params,
            &points,
            &devices,
        ],
    )?;
    // Each distinct template once (most hosts of a fleet-wide campaign share one).
    let (mut hashes, mut cells, mut warmups) = (Vec::new(), Vec::new(), Vec::new());
    let mut templates: std::collections::BTreeMap<String, String> = Default::default();
    for plan in &p.plans {
        let s = split(plan)?;
        hashes.push(s.hash.clone());
        cells.push(s.cells);
        templates.entry(s.hash).or_insert(s.template);
        warmups.push(serde_json::to_string(&warmup_steps(plan))?);
    }
    let (t_hashes, t_bodies): (Vec<&str>, Vec<&str>) = templates
        .iter()
        .map(|(h, b)| (h.as_str(), b.as_str()))
        .unzip();
    pg.query_typed(
        "INSERT INTO plan_templates (hash, body)
         SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT DO NOTHING",
        &[&t_hashes, &t_bodies],
    )?;
    let ids: Vec<&str> = p.plans.iter().map(|pl| pl.id.as_str()).collect();
    let campaigns: Vec<&str> = p.plans.iter().map(|pl| pl.campaign_id.as_str()).collect();
    let hosts: Vec<&str> = p.plans.iter().map(|pl| pl.host.as_str()).collect();
    let steps: Vec<i64> = p.plans.iter().map(|pl| pl.steps.len() as i64).collect();
    pg.query_typed(
        "INSERT INTO plans (id, campaign_id, host, body, template, cells, steps_total, state, queued_seq, warmup_steps)
         SELECT q.id, q.campaign_id, q.host, '', q.template, q.cells, q.steps_total, 'queued',
                (SELECT COALESCE(MAX(queued_seq), 0) FROM plans) + q.k, q.warmup
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int8[], $7::text[])
                WITH ORDINALITY AS q (id, campaign_id, host, template, cells, steps_total, warmup, k)
         ON CONFLICT DO NOTHING",
        &[&ids, &campaigns, &hosts, &hashes, &cells, &steps, &warmups],
    )?;
    Ok(())
}

/// A run of a series (`Store::series_runs`).
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesRun {
    pub campaign_id: CampaignId,
    pub state: CampaignState,
    pub submitted_unix_ms: i64,
    /// The campaign as submitted (with `--set`s applied), and its content hash.
    pub yaml: String,
    pub content_hash: String,
}

impl Store {
    /// The series campaign `campaign_id` is a run of, if there is such a campaign.
    pub fn series_of(&self, campaign_id: &str) -> Result<Option<String>> {
        self.read(|c| {
            c.query_opt(
                "SELECT series FROM campaigns WHERE id = ?1",
                [campaign_id],
                |r| r.only(),
            )
        })
    }

    /// The campaigns of series `name` (their `series:` key, else their name), oldest
    /// first: the runs of that series.
    pub fn series_runs(&self, name: &str) -> Result<Vec<SeriesRun>> {
        self.read(|c| {
            c.query_map(
                "SELECT id, state, submitted_unix_ms, yaml, content_hash FROM campaigns WHERE series = ?1
                  ORDER BY submitted_unix_ms, generation, id",
                [name],
                |r| {
                    Ok(SeriesRun {
                        campaign_id: r.get("id")?,
                        state: CampaignState::from(r.get::<String>("state")?),
                        submitted_unix_ms: r.get("submitted_unix_ms")?,
                        yaml: r.get("yaml")?,
                        content_hash: r.get("content_hash")?,
                    })
                },
            )
        })
    }
}

/// A campaign's state as the store names it: running until its last plan ends, then done,
/// or cancelled. Written (title, JSON) as the store's word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CampaignState {
    Running,
    Done,
    Cancelled,
    /// A state this version does not know, kept as written.
    Other(String),
}

impl CampaignState {
    pub fn as_str(&self) -> &str {
        match self {
            CampaignState::Running => "running",
            CampaignState::Done => "done",
            CampaignState::Cancelled => "cancelled",
            CampaignState::Other(s) => s,
        }
    }
}

impl From<String> for CampaignState {
    fn from(s: String) -> CampaignState {
        match s.as_str() {
            "running" => CampaignState::Running,
            "done" => CampaignState::Done,
            "cancelled" => CampaignState::Cancelled,
            _ => CampaignState::Other(s),
        }
    }
}

impl From<&str> for CampaignState {
    fn from(s: &str) -> CampaignState {
        CampaignState::from(s.to_string())
    }
}

/// An empty state, as a report built in memory has.
impl Default for CampaignState {
    fn default() -> CampaignState {
        CampaignState::Other(String::new())
    }
}

impl PartialEq<&str> for CampaignState {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for CampaignState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for CampaignState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}
