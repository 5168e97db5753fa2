//! What `platter status` reads of a campaign, as typed rows: its row, its cell count, and
//! per plan the steps that ended, failed, are running and the time they took. How that
//! adds up per host is `crate::service::status`'s.

use platter_proto::model::{CampaignId, HostName, Plan, PlanId};

use super::db::params;
use super::error::{Result, StoreError};
use super::rounds::cells_measured;
use super::{resolve_campaign, CampaignState, Store};
use crate::planning::rounds::CellMeasured;

/// SQL condition on a `steps s` row: no later attempt of the same step exists (the
/// latest attempt of a step is what counts).
pub const LATEST: &str = "NOT EXISTS (SELECT 1 FROM steps l WHERE l.plan_id = s.plan_id \
     AND l.step_index = s.step_index AND l.attempt > s.attempt)";

/// A campaign as submitted.
#[derive(Debug, Clone, PartialEq)]
pub struct CampaignRow {
    pub id: CampaignId,
    pub name: String,
    pub state: CampaignState,
    /// The repetitions asked (`repeat`; its max when adaptive).
    pub repeat: u32,
    pub submitted_unix_ms: i64,
    pub file_name: String,
    pub yaml: String,
}

/// The step a plan runs now, with the plan (read only then).
#[derive(Debug, Clone, PartialEq)]
pub struct RunningStep {
    pub index: u32,
    pub plan: Plan,
}

/// One plan's progress, as its latest attempts say.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanProgress {
    pub host: HostName,
    pub steps_total: u32,
    pub steps_done: u32,
    pub steps_failed: u32,
    pub running: Option<RunningStep>,
    /// Time the ended steps took.
    pub elapsed_ms: i64,
    /// Why the agent refused the plan ("" when it gave no reason); `None` if it did not.
    pub refused: Option<String>,
}

/// A campaign's progress: its row, its cell count, and its plans by host.
#[derive(Debug, Clone, PartialEq)]
pub struct CampaignProgress {
    pub campaign: CampaignRow,
    pub cells_total: u32,
    pub plans: Vec<PlanProgress>,
}

/// How many rows of a table are in one state (`Store::plan_counts`, `campaign_counts`).
#[derive(Debug, Clone, PartialEq)]
pub struct StateCount {
    pub state: String,
    pub count: u64,
}

impl Store {
    /// How many plans are in each state (queued, sent, accepted, done, refused, cancelled).
    pub fn plan_counts(&self) -> Result<Vec<StateCount>> {
        self.state_counts("SELECT state, COUNT(*) FROM plans GROUP BY state ORDER BY state")
    }

    /// How many campaigns are in each state (running, done, cancelled).
    pub fn campaign_counts(&self) -> Result<Vec<StateCount>> {
        self.state_counts("SELECT state, COUNT(*) FROM campaigns GROUP BY state ORDER BY state")
    }

    fn state_counts(&self, sql: &str) -> Result<Vec<StateCount>> {
        self.read(|c| {
            c.query_map(sql, (), |r| {
                Ok(StateCount {
                    state: r.get(0)?,
                    count: r.get(1)?,
                })
            })
        })
    }

    /// The hosts holding a plan now: sent to their agent or accepted by it, not ended.
    pub fn hosts_holding_plans(&self) -> Result<Vec<HostName>> {
        self.read(|c| {
            c.query_map(
                "SELECT DISTINCT host FROM plans WHERE state IN ('sent', 'accepted') ORDER BY host",
                (),
                |r| r.get(0),
            )
        })
    }

    /// Every campaign's id, newest first.
    pub fn campaign_ids(&self) -> Result<Vec<CampaignId>> {
        self.read(|c| {
            c.query_map(
                "SELECT id FROM campaigns ORDER BY submitted_unix_ms DESC, id",
                (),
                |r| r.get(0),
            )
        })
    }

    /// The progress of the campaign `campaign` names (its id, or the latest of that name).
    pub fn campaign_progress(&self, campaign: &str) -> Result<CampaignProgress> {
        self.read(|c| {
            let campaign_id = resolve_campaign(c, campaign)?;
            let campaign = c
                .query_opt("SELECT name, state, repeat, submitted_unix_ms, file_name, yaml FROM campaigns WHERE id = ?1", [&campaign_id], |r| {
                    Ok(CampaignRow {
                        id: campaign_id.clone(),
                        name: r.get(0)?,
                        state: CampaignState::from(r.get::<String>(1)?),
                        repeat: r.get(2)?,
                        submitted_unix_ms: r.get(3)?,
                        file_name: r.get(4)?,
                        yaml: r.get(5)?,
                    })
                })?
                .ok_or_else(|| StoreError::NoCampaign(campaign_id.to_string()))?;
            let cells_total: u32 = c.query_row("SELECT COUNT(*) FROM cells WHERE campaign_id = ?1", [&campaign_id], |r| r.get(0))?;
            let plans = c.query_map(
                "SELECT id, host, steps_total, body, CASE WHEN state = 'refused' THEN COALESCE(error, '') END FROM plans WHERE campaign_id = ?1 ORDER BY host",
                [&campaign_id],
                |r| Ok((r.get::<PlanId>(0)?, r.get::<HostName>(1)?, r.get::<u32>(2)?, r.get::<String>(3)?, r.get::<Option<String>>(4)?)),
            )?;
            // A step that ran again (its measure was cut off, so its preparation runs anew)
            // has a row per attempt: each step counts once, as its latest attempt says.
            let ended = format!(
                "SELECT COUNT(DISTINCT step_index) FROM steps s WHERE plan_id = ?1 AND state != 'started' AND {LATEST}"
            );
            // A step that never started (skipped after an abort or a cancel) is stored
            // with start 0 and took no time. Both times are non-negative, so a difference
            // cannot overflow; each is in ms before the sum, and the sum is in floating
            // point (SUM of a few `finished - 0` overflowed i64 and failed every status).
            let elapsed = "SELECT CAST(COALESCE(SUM(CAST((finished_unix_ns - started_unix_ns) / 1000000 AS REAL)), 0) AS BIGINT) FROM steps
                   WHERE plan_id = ?1 AND state != 'started' AND started_unix_ns > 0
                     AND finished_unix_ns >= started_unix_ns";
            let failed = format!(
                "SELECT COUNT(DISTINCT step_index) FROM steps s WHERE plan_id = ?1 AND state = 'failed' AND {LATEST}"
            );
            // The running step: the latest start with no end record of its attempt.
            let running = format!(
                "SELECT s.step_index FROM steps s WHERE s.plan_id = ?1 AND s.state = 'started' AND {LATEST}
                   AND NOT EXISTS (SELECT 1 FROM steps e WHERE e.plan_id = s.plan_id AND e.step_index = s.step_index
                                   AND e.attempt = s.attempt AND e.state != 'started')
                 ORDER BY s.n DESC LIMIT 1"
            );
            let mut progress = Vec::with_capacity(plans.len());
            for (plan_id, host, steps_total, body, refused) in plans {
                let steps_done: u32 = c.query_row(&ended, [&plan_id], |r| r.get(0))?;
                let steps_failed: u32 = c.query_row(&failed, [&plan_id], |r| r.get(0))?;
                let current: Option<u32> = c.query_opt(&running, [&plan_id], |r| r.get(0))?;
                let running = match current {
                    Some(index) => Some(RunningStep { index, plan: serde_json::from_str(&body)? }),
                    None => None,
                };
                let elapsed_ms: i64 = c.query_row(elapsed, [&plan_id], |r| r.get(0))?;
                progress.push(PlanProgress { host, steps_total, steps_done, steps_failed, running, elapsed_ms, refused });
            }
            Ok(CampaignProgress { campaign, cells_total, plans: progress })
        })
    }

    /// How many cells of `campaign_id` ran `repeat` counted repetitions to their end (warm-ups
    /// are numbered 1… too, and do not count for them).
    pub fn cells_done(&self, campaign_id: &CampaignId, repeat: u32) -> Result<u32> {
        self.read(|c| {
            c.query_row(
                "SELECT COUNT(*) FROM (SELECT s.cell FROM plans p JOIN steps s ON s.plan_id = p.id
                   WHERE p.campaign_id = ?1 AND s.kind = 'measure' AND s.warmup = 0 AND s.state != 'started'
                   GROUP BY s.cell HAVING COUNT(DISTINCT s.repetition) >= ?2) AS done",
                params![campaign_id, repeat],
                |r| r.get(0),
            )
        })
    }

    /// Per cell of `campaign_id` with a counted measure step that ended: how many
    /// repetitions ended, and its values of `metric` (what an adaptive campaign's rule judges).
    pub fn cells_measured(
        &self,
        campaign_id: &CampaignId,
        metric: &str,
    ) -> Result<Vec<CellMeasured>> {
        self.read(|c| cells_measured(c, campaign_id, metric))
    }
}
