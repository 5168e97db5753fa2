//! What `platter status` reads of a campaign, as typed rows: its row, its cell count, and
//! per plan the steps that ended, failed, are running and the time they took. How that
//! adds up per host is `crate::service::status`'s.

use std::collections::{HashMap, HashSet};

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
    /// Its `series:`, else its name.
    pub series: String,
    pub state: CampaignState,
    /// The repetitions asked (`repeat`; its max when adaptive).
    pub repeat: u32,
    pub submitted_unix_ms: i64,
    pub file_name: String,
    pub yaml: String,
}

/// How many running plans a campaign's progress reads one by one; more are read with
/// the rest of the campaign's plans in one go.
pub(super) const READ_ONE_BY_ONE: usize = 32;

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

/// One step's records, summed up (`Store::campaign_progress`).
struct StepAttempts {
    plan_id: PlanId,
    index: u32,
    /// Its latest attempt, and the latest that ended, failed and started.
    latest: i64,
    ended: Option<i64>,
    failed: Option<i64>,
    started: Option<i64>,
    /// The record number of its latest start.
    start_n: Option<i64>,
    /// The time its ended attempts took.
    elapsed_ms: f64,
}

/// A plan's steps, counted (`Store::campaign_progress`).
#[derive(Default)]
struct Tally {
    done: u32,
    failed: u32,
    elapsed_ms: f64,
    /// The running step with the latest start: its index and record number.
    running: Option<(u32, i64)>,
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
        self.state_counts("SELECT state, COUNT(*) AS n FROM plans GROUP BY state ORDER BY state")
    }

    /// How many campaigns are in each state (running, done, cancelled).
    pub fn campaign_counts(&self) -> Result<Vec<StateCount>> {
        self.state_counts(
            "SELECT state, COUNT(*) AS n FROM campaigns GROUP BY state ORDER BY state",
        )
    }

    fn state_counts(&self, sql: &str) -> Result<Vec<StateCount>> {
        self.read(|c| {
            c.query_map(sql, (), |r| {
                Ok(StateCount {
                    state: r.get("state")?,
                    count: r.get("n")?,
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
                |r| r.only(),
            )
        })
    }

    /// The hosts holding a plan and each plan's campaign (`service::alerts`: a host offline
    /// while holding one is flagged).
    pub fn held_plans(&self) -> Result<Vec<(HostName, CampaignId)>> {
        self.read(|c| {
            c.query_map(
                "SELECT DISTINCT host, campaign_id FROM plans WHERE state IN ('sent', 'accepted')
                  ORDER BY host, campaign_id",
                (),
                |r| Ok((r.get("host")?, r.get("campaign_id")?)),
            )
        })
    }

    /// Every campaign's id, newest first.
    pub fn campaign_ids(&self) -> Result<Vec<CampaignId>> {
        self.read(|c| {
            c.query_map(
                "SELECT id FROM campaigns ORDER BY submitted_unix_ms DESC, id",
                (),
                |r| r.only(),
            )
        })
    }

    /// A fingerprint of all a campaign's progress is read from: its state, its cells, its
    /// plans' states, and how many step records its plans have (records are only ever
    /// added). While it is the same, so is the progress: a listing reads a campaign that
    /// did not change this cheaply (an index count) instead of again (each record checked
    /// against its later attempts).
    pub fn campaign_fingerprint(&self, campaign_id: &CampaignId) -> Result<u64> {
        use std::hash::{Hash, Hasher};
        self.read(|c| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            let state: Option<String> = c.query_opt("SELECT state FROM campaigns WHERE id = ?1", [campaign_id], |r| r.only())?;
            state.hash(&mut h);
            let cells: i64 = c.query_row("SELECT COUNT(*) FROM cells WHERE campaign_id = ?1", [campaign_id], |r| r.only())?;
            cells.hash(&mut h);
            let plans = c.query_map(
                "SELECT id, state, COALESCE(error, '') AS error FROM plans WHERE campaign_id = ?1 ORDER BY id",
                [campaign_id],
                |r| Ok((r.get::<String>("id")?, r.get::<String>("state")?, r.get::<String>("error")?)),
            )?;
            plans.hash(&mut h);
            let steps: i64 = c.query_row(
                "SELECT COUNT(*) FROM steps s JOIN plans p ON p.id = s.plan_id WHERE p.campaign_id = ?1",
                [campaign_id],
                |r| r.only(),
            )?;
            steps.hash(&mut h);
            Ok(h.finish())
        })
    }

    /// The progress of the campaign `campaign` names (its id, or the latest of that name).
    pub fn campaign_progress(&self, campaign: &str) -> Result<CampaignProgress> {
        self.read(|c| {
            let campaign_id = resolve_campaign(c, campaign)?;
            let campaign = c
                .query_opt("SELECT name, state, repeat, submitted_unix_ms, file_name, yaml, series FROM campaigns WHERE id = ?1", [&campaign_id], |r| {
                    Ok(CampaignRow {
                        id: campaign_id.clone(),
                        name: r.get("name")?,
                        state: CampaignState::from(r.get::<String>("state")?),
                        repeat: r.get("repeat")?,
                        submitted_unix_ms: r.get("submitted_unix_ms")?,
                        file_name: r.get("file_name")?,
                        yaml: r.get("yaml")?,
                        series: r.get("series")?,
                    })
                })?
                .ok_or_else(|| StoreError::NoCampaign(campaign_id.to_string()))?;
            let cells_total: u32 = c.query_row("SELECT COUNT(*) FROM cells WHERE campaign_id = ?1", [&campaign_id], |r| r.only())?;
            let plans = c.query_map(
                "SELECT id, host, steps_total, CASE WHEN state = 'refused' THEN COALESCE(error, '') END AS refused FROM plans WHERE campaign_id = ?1 ORDER BY host",
                [&campaign_id],
                |r| Ok((r.get::<PlanId>("id")?, r.get::<HostName>("host")?, r.get::<u32>("steps_total")?, r.get::<Option<String>>("refused")?)),
            )?;
            // One pass over the campaign's step records, grouped by step (a query per plan
            // cost 200 campaigns of 50 hosts 40,000 queries a listing, and checking each
            // record against later attempts cost a running campaign of 10,000 steps more
            // than the rest of a listing). Per step: its latest attempt, the latest that
            // ended, failed and started, the latest start's record number, and the time
            // its ended attempts took. A step that ran again (its measure was cut off, so
            // its preparation runs anew) has records per attempt: it counts once, as its
            // latest attempt says.
            //
            // A step that never started (skipped after an abort or a cancel) is stored
            // with start 0 and took no time. Both times are non-negative, so a difference
            // cannot overflow; each is in ms before the sum, and the sum is in floating
            // point (SUM of a few `finished - 0` overflowed i64 and failed every status).
            let steps = c.query_map(
                "SELECT s.plan_id, s.step_index,
                        MAX(s.attempt) AS latest,
                        MAX(CASE WHEN s.state != 'started' THEN s.attempt END) AS ended,
                        MAX(CASE WHEN s.state = 'failed' THEN s.attempt END) AS failed,
                        MAX(CASE WHEN s.state = 'started' THEN s.attempt END) AS started,
                        MAX(CASE WHEN s.state = 'started' THEN s.n END) AS start_n,
                        COALESCE(SUM(CASE WHEN s.state != 'started' AND s.started_unix_ns > 0 AND s.finished_unix_ns >= s.started_unix_ns
                                          THEN CAST((s.finished_unix_ns - s.started_unix_ns) / 1000000 AS REAL) END), 0) AS elapsed_ms
                   FROM steps s JOIN plans p ON p.id = s.plan_id
                  WHERE p.campaign_id = ?1
                  GROUP BY s.plan_id, s.step_index",
                [&campaign_id],
                |r| {
                    Ok(StepAttempts {
                        plan_id: r.get("plan_id")?,
                        index: r.get("step_index")?,
                        latest: r.get("latest")?,
                        ended: r.get("ended")?,
                        failed: r.get("failed")?,
                        started: r.get("started")?,
                        start_n: r.get("start_n")?,
                        elapsed_ms: r.get("elapsed_ms")?,
                    })
                },
            )?;
            let mut tallies: HashMap<PlanId, Tally> = HashMap::new();
            for st in steps {
                let t = tallies.entry(st.plan_id).or_default();
                t.elapsed_ms += st.elapsed_ms;
                if st.ended == Some(st.latest) {
                    t.done += 1;
                }
                if st.failed == Some(st.latest) {
                    t.failed += 1;
                }
                // Started in its latest attempt, which has not ended.
                if st.started == Some(st.latest) && st.ended != Some(st.latest) {
                    let n = st.start_n.unwrap_or(0);
                    if t.running.is_none_or(|(_, m)| n > m) {
                        t.running = Some((st.index, n));
                    }
                }
            }
            let mut progress = Vec::with_capacity(plans.len());
            // The plans that run a step now are read, to name it, each template parsed
            // once: a few one by one (one host of 100,000 running reads one plan row, not
            // 100,000), more in one read of the campaign's plans (a read per plan cost a
            // fleet-wide campaign, its hosts all running at once, a round trip per host).
            let running: HashSet<&PlanId> = tallies
                .iter()
                .filter(|(_, t)| t.running.is_some())
                .map(|(id, _)| id)
                .collect();
            let mut running_plans: HashMap<PlanId, Plan> = if running.len() <= READ_ONE_BY_ONE {
                let mut read = super::plans::Plans::default();
                running
                    .into_iter()
                    .map(|id| Ok((id.clone(), read.by_id(c, id)?)))
                    .collect::<Result<_>>()?
            } else {
                let running: HashSet<&str> = running.iter().map(|id| id.as_str()).collect();
                super::plans::CampaignPlans::read(c, &campaign_id)?
                    .parse(|id| running.contains(id))?
                    .into_iter()
                    .map(|(_, plan)| (plan.id.clone(), plan))
                    .collect()
            };
            for (plan_id, host, steps_total, refused) in plans {
                let t = tallies.remove(&plan_id).unwrap_or_default();
                let running = match t.running {
                    Some((index, _)) => {
                        let plan = running_plans.remove(&plan_id).ok_or(StoreError::NoRows)?;
                        Some(RunningStep { index, plan })
                    }
                    None => None,
                };
                progress.push(PlanProgress {
                    host,
                    steps_total,
                    steps_done: t.done,
                    steps_failed: t.failed,
                    running,
                    elapsed_ms: t.elapsed_ms as i64,
                    refused,
                });
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
                |r| r.only(),
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
