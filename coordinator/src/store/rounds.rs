//! Adaptive repetition in the store: what it reads, as typed rows (the plan that just
//! ended and its campaign, the host's cells, each cell's measured values), and applying
//! the rule (`crate::planning::rounds::judge`) to them — `next_round` in the writer's
//! transaction that records a plan's end, `verdicts` for the report. Reads on the
//! caller's connection, so the writer's round decision sees its own transaction. The
//! rule itself, and the planning of the next round's plan, are planning's: nothing here
//! imports the store's callers, and planning imports nothing of the store.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use platter_proto::model::{CampaignId, CellId, HostName, Plan, PlanId, StepKind, StepState};

use super::campaigns::CampaignState;
use super::db::{params, Conn};
use super::error::Result;
use crate::planning::planner::{self, PlannedCell};
use crate::planning::rounds::{judge, verdicts_of, CellMeasured, Verdict};
use crate::planning::steady::{self, Steady};
use crate::spec::{self, Repeat};

/// A plan's campaign as submitted: whether it still runs, and its text to parse again.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanCampaign {
    pub campaign_id: CampaignId,
    pub host: HostName,
    pub state: CampaignState,
    pub file_name: String,
    pub yaml: String,
}

/// A cell of a campaign as the planner made it, with its row number (`cells.n`).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredCell {
    pub n: i64,
    pub cell: PlannedCell,
}

impl AsRef<PlannedCell> for StoredCell {
    fn as_ref(&self) -> &PlannedCell {
        &self.cell
    }
}

/// One drive of a host, with its cells of a campaign in the matrix's order.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredDrive {
    pub host: HostName,
    pub cells: Vec<StoredCell>,
}

impl StoredDrive {
    /// The drive's cell of matrix point `point`.
    pub fn at(&self, point: usize) -> Option<&StoredCell> {
        self.cells.iter().find(|s| s.cell.point == point)
    }

    /// Its name (`loop3`), the cells' device parameter; "" without `devices:`.
    pub fn name(&self) -> &str {
        self.cells
            .first()
            .and_then(|s| s.cell.params.get(spec::DEVICE))
            .map_or("", String::as_str)
    }
}

/// Every drive of a campaign, host by host, each with its cells as the planner grouped
/// them (`planner::drives`).
pub fn campaign_drives(c: &Conn, campaign_id: &CampaignId) -> Result<Vec<StoredDrive>> {
    let mut out = Vec::new();
    for host in campaign_hosts(c, campaign_id)? {
        let stored = host_cells(c, campaign_id, &host)?;
        for (_, of_drive) in planner::drives(&stored) {
            out.push(StoredDrive {
                host: host.clone(),
                cells: of_drive.iter().map(|&k| stored[k].clone()).collect(),
            });
        }
    }
    Ok(out)
}

/// The campaign of plan `plan_id` and its host, if the plan exists.
pub fn plan_campaign(c: &Conn, plan_id: &PlanId) -> Result<Option<PlanCampaign>> {
    c.query_opt(
        "SELECT p.campaign_id, p.host, ca.state, ca.file_name, ca.yaml
           FROM plans p JOIN campaigns ca ON ca.id = p.campaign_id WHERE p.id = ?1",
        [plan_id],
        |r| {
            Ok(PlanCampaign {
                campaign_id: r.get("campaign_id")?,
                host: r.get("host")?,
                state: CampaignState::from(r.get::<String>("state")?),
                file_name: r.get("file_name")?,
                yaml: r.get("yaml")?,
            })
        },
    )
}

/// Whether a step of plan `plan_id` failed.
pub fn plan_failed(c: &Conn, plan_id: &PlanId) -> Result<bool> {
    c.query_row(
        "SELECT COUNT(*) > 0 FROM steps WHERE plan_id = ?1 AND state = 'failed'",
        [plan_id],
        |r| r.only(),
    )
}

/// Plan `plan_id` as it was sent.
pub fn plan_body(c: &Conn, plan_id: &PlanId) -> Result<Plan> {
    super::plans::plan_by_id(c, plan_id)
}

/// A purge or precondition step's end (`prepare:`), with its samples.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparationStep {
    /// `purge` or `precondition`.
    pub kind: String,
    /// `cells.n` of the drive's cell it ran on.
    pub cell: i64,
    pub succeeded: bool,
    pub error: String,
    pub finished_unix_ns: i64,
    pub samples: Vec<(String, f64)>,
}

/// Every ended purge and precondition step of a campaign, in the order they ended.
pub fn preparation_steps(c: &Conn, campaign_id: &CampaignId) -> Result<Vec<PreparationStep>> {
    let mut steps: Vec<(i64, PreparationStep)> = c.query_map(
        "SELECT st.n, st.kind, st.cell, st.state, st.error, st.finished_unix_ns
           FROM plans p JOIN steps st ON st.plan_id = p.id
          WHERE p.campaign_id = ?1 AND st.kind IN ('purge', 'precondition') AND st.state != ?2
          ORDER BY st.n",
        params![campaign_id, StepState::Started.as_str()],
        |r| {
            Ok((
                r.get("n")?,
                PreparationStep {
                    kind: r.get("kind")?,
                    cell: r.get("cell")?,
                    succeeded: r.get::<String>("state")? == StepState::Succeeded.as_str(),
                    error: r.get("error")?,
                    finished_unix_ns: r.get("finished_unix_ns")?,
                    samples: Vec::new(),
                },
            ))
        },
    )?;
    for (n, s) in &mut steps {
        s.samples = c.query_map(
            "SELECT metric, value FROM samples WHERE step = ?1 AND value IS NOT NULL",
            [*n],
            |r| Ok((r.get("metric")?, r.get("value")?)),
        )?;
    }
    Ok(steps.into_iter().map(|(_, s)| s).collect())
}

/// The bytes the campaign's measurements wrote to the drive of cells `cells` (`cells.n`),
/// as its counters saw them (`disk.write_bytes`).
pub fn bytes_written(c: &Conn, campaign_id: &CampaignId, cells: &[i64]) -> Result<f64> {
    let mut total = 0.0;
    for cell in cells {
        let sum: Option<f64> = c.query_row(
            "SELECT SUM(sa.value) AS written FROM plans p JOIN steps st ON st.plan_id = p.id JOIN samples sa ON sa.step = st.n
              WHERE p.campaign_id = ?1 AND st.cell = ?2 AND st.kind = 'measure' AND sa.metric = 'disk.write_bytes'",
            params![campaign_id, *cell],
            |r| r.only(),
        )?;
        total += sum.unwrap_or(0.0);
    }
    Ok(total)
}

/// The hosts of a campaign's cells, by name.
pub fn campaign_hosts(c: &Conn, campaign_id: &CampaignId) -> Result<Vec<HostName>> {
    c.query_map(
        "SELECT DISTINCT host FROM cells WHERE campaign_id = ?1 ORDER BY host",
        [campaign_id],
        |r| r.only(),
    )
}

/// The host's cells of a campaign as the planner made them, in their order.
pub fn host_cells(c: &Conn, campaign_id: &CampaignId, host: &HostName) -> Result<Vec<StoredCell>> {
    c.query_map(
        "SELECT n, id, idx, params, COALESCE(point, 0) AS point, device FROM cells
          WHERE campaign_id = ?1 AND host = ?2 ORDER BY idx",
        params![campaign_id, host],
        |r| {
            let params: IndexMap<String, String> =
                r.text("params", |t| serde_json::from_str(t))??;
            Ok(StoredCell {
                n: r.get("n")?,
                cell: PlannedCell {
                    id: r.get("id")?,
                    host: host.clone(),
                    index: r.get::<i64>("idx")? as usize,
                    params,
                    point: r.get::<i64>("point")? as usize,
                    device: r.get("device")?,
                },
            })
        },
    )
}

/// Every counted value of `metric` measured for cell `cell` (`cells.n`) of `campaign_id`.
pub fn cell_values(
    c: &Conn,
    campaign_id: &CampaignId,
    cell: i64,
    metric: &str,
) -> Result<Vec<f64>> {
    let values = c.query_map("SELECT sa.value FROM plans p JOIN steps st ON st.plan_id = p.id JOIN samples sa ON sa.step = st.n
          WHERE p.campaign_id = ?1 AND st.cell = ?2 AND st.kind = 'measure' AND st.warmup = 0
            AND sa.metric = ?3 AND sa.value IS NOT NULL
          ORDER BY st.repetition, st.n", params![campaign_id, cell, metric], |r| r.only())?;
    Ok(values)
}

/// Per cell of `campaign_id` with a counted measure step that ended: how many
/// repetitions ended, and its values of `metric`.
pub fn cells_measured(
    c: &Conn,
    campaign_id: &CampaignId,
    metric: &str,
) -> Result<Vec<CellMeasured>> {
    let planned = c.query_map(
        "SELECT st.cell, MAX(st.repetition) AS repetitions FROM plans p JOIN steps st ON st.plan_id = p.id
          WHERE p.campaign_id = ?1 AND st.kind = 'measure' AND st.warmup = 0 AND st.state != ?2
          GROUP BY st.cell",
        params![campaign_id, StepState::Started.as_str()],
        |r| Ok((r.get::<i64>("cell")?, r.get::<u32>("repetitions")?)),
    )?;
    planned
        .into_iter()
        .map(|(cell, repetitions)| {
            Ok(CellMeasured {
                cell,
                repetitions,
                values: cell_values(c, campaign_id, cell, metric)?,
            })
        })
        .collect()
}

/// The next round's plan, and whether it must run before every other plan queued on its
/// host: a round towards steady state, since another campaign's plan on the drive between
/// two rounds would undo what the rounds built up.
pub struct NextRound {
    pub plan: Plan,
    pub ahead: bool,
}

/// Called by the store's writer when `plan_id` has just ended (not cancelled), in the
/// transaction that records it: the next round's plan for its host, if any cell of the
/// plan goes on.
pub fn next_round(c: &Conn, plan_id: &PlanId) -> Result<Option<NextRound>> {
    // Most campaigns repeat a fixed number of times: told by the YAML's text, before it is
    // parsed or the plan read (this runs in the store's writer at every plan's end).
    let Some(PlanCampaign {
        campaign_id,
        host,
        state,
        file_name: file,
        yaml,
    }) = plan_campaign(c, plan_id)?
    else {
        return Ok(None);
    };
    if state != CampaignState::Running || !(yaml.contains("until") || yaml.contains("steady_state"))
    {
        return Ok(None);
    }
    // Parsed as it was submitted; the limits were checked then (perhaps raised by flags).
    let campaign = match spec::parse_with(&file, &yaml, &spec::Limits::NONE) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(campaign = %campaign_id, error = %e, "cannot plan the next round: the stored campaign no longer parses; the campaign ends here");
            return Ok(None);
        }
    };
    if campaign.on_failure == spec::OnFailure::Abort {
        let failed = plan_failed(c, plan_id)?;
        if failed {
            return Ok(None);
        }
    }
    if let Some(steady) = campaign.steady_state() {
        let plan = next_steady_round(c, plan_id, &campaign, steady, &campaign_id, &host)?;
        return Ok(plan.map(|plan| NextRound { plan, ahead: true }));
    }
    let repeat = &campaign.repeat;
    let Some(until) = repeat.until.as_ref().filter(|_| repeat.is_adaptive()) else {
        return Ok(None);
    };
    let plan = plan_body(c, plan_id)?;
    // The cells this round ran and the repetition it brought them to.
    let mut ran: BTreeMap<CellId, u32> = BTreeMap::new();
    for s in &plan.steps {
        if !s.warmup && matches!(s.kind, StepKind::Measure(_)) {
            let r = ran.entry(s.cell_id.clone()).or_default();
            *r = (*r).max(s.repetition);
        }
    }
    let Some(&repetition) = ran.values().max() else {
        return Ok(None);
    };
    let cells = host_cells(c, &campaign_id, &host)?;
    let mut active = Vec::new();
    for (i, StoredCell { n, cell }) in cells.iter().enumerate() {
        if !ran.contains_key(&cell.id) {
            continue;
        }
        let values = cell_values(c, &campaign_id, *n, &until.metric)?;
        if judge(&values, repetition, repeat) == Verdict::Continue {
            active.push(i);
        }
    }
    if active.is_empty() {
        return Ok(None);
    }
    let cells: Vec<PlannedCell> = cells.into_iter().map(|s| s.cell).collect();
    let next = planner::next_round(
        &campaign,
        &campaign_id,
        &host,
        &cells,
        &active,
        repetition + 1,
    );
    tracing::info!(campaign = %campaign_id, %host, repetition = repetition + 1, cells = active.len(), "next round of adaptive repetition");
    Ok(Some(NextRound {
        plan: next,
        ahead: false,
    }))
}

/// Steady state (`prepare.steady_state`): after round N of a host, each of its drives that
/// ran it is judged by its tracked cell's values, round by round; the drives still short
/// of steady state, and under `max_rounds`, get round N + 1, a plan of its own.
fn next_steady_round(
    c: &Conn,
    plan_id: &PlanId,
    campaign: &spec::Campaign,
    steady: &spec::SteadyState,
    campaign_id: &CampaignId,
    host: &HostName,
) -> Result<Option<Plan>> {
    let plan = plan_body(c, plan_id)?;
    let Some(round) = plan
        .steps
        .iter()
        .filter(|s| matches!(s.kind, StepKind::Measure(_)))
        .map(|s| s.repetition)
        .max()
    else {
        return Ok(None);
    };
    let ran: std::collections::HashSet<&CellId> = plan.steps.iter().map(|s| &s.cell_id).collect();
    let stored = host_cells(c, campaign_id, host)?;
    let mut active = Vec::new();
    for (i, (_, of_drive)) in planner::drives(&stored).iter().enumerate() {
        let tracked = of_drive
            .iter()
            .map(|&k| &stored[k])
            .find(|s| s.cell.point == steady.tracked);
        let Some(tracked) = tracked.filter(|s| ran.contains(&s.cell.id)) else {
            continue;
        };
        let values = round_values(c, campaign_id, tracked.n, &steady.metric)?;
        if let Steady::Continue { .. } = steady::judge(&values, &steady.rule) {
            active.push(i);
        }
    }
    if active.is_empty() {
        return Ok(None);
    }
    let cells: Vec<PlannedCell> = stored.into_iter().map(|s| s.cell).collect();
    tracing::info!(campaign = %campaign_id, %host, round = round + 1, drives = active.len(), "next round towards steady state");
    Ok(Some(planner::next_steady_round(
        campaign,
        campaign_id,
        host,
        &cells,
        &active,
        round + 1,
    )))
}

/// How many cells of a campaign with `prepare.steady_state` are done: those of drives
/// whose rounds ended (steady, or `max_rounds` ran), once each of the drive's cells has
/// run as many rounds as its tracked cell.
pub fn steady_cells_done(
    c: &Conn,
    campaign_id: &CampaignId,
    steady: &spec::SteadyState,
) -> Result<u32> {
    let ended: std::collections::HashMap<i64, u32> =
        cells_measured(c, campaign_id, &steady.metric)?
            .into_iter()
            .map(|m| (m.cell, m.repetitions))
            .collect();
    let mut done = 0;
    for drive in campaign_drives(c, campaign_id)? {
        let Some(tracked) = drive.at(steady.tracked) else {
            continue;
        };
        let values = round_values(c, campaign_id, tracked.n, &steady.metric)?;
        if let Steady::Continue { .. } = steady::judge(&values, &steady.rule) {
            continue;
        }
        let rounds = values.len() as u32;
        done += drive
            .cells
            .iter()
            .filter(|s| ended.get(&s.n).is_some_and(|r| *r >= rounds))
            .count() as u32;
    }
    Ok(done)
}

/// The tracked value of cell `cell` (`cells.n`) per round, from round 1 to the last whose
/// measure step ended: NaN for a round that measured nothing (a failed run), which no
/// window around it can call steady.
pub fn round_values(
    c: &Conn,
    campaign_id: &CampaignId,
    cell: i64,
    metric: &str,
) -> Result<Vec<f64>> {
    let ended: Option<i64> = c.query_row(
        "SELECT MAX(st.repetition) AS rounds FROM plans p JOIN steps st ON st.plan_id = p.id
          WHERE p.campaign_id = ?1 AND st.cell = ?2 AND st.kind = 'measure' AND st.warmup = 0 AND st.state != ?3",
        params![campaign_id, cell, StepState::Started.as_str()],
        |r| r.only(),
    )?;
    let mut values = vec![f64::NAN; ended.unwrap_or(0).max(0) as usize];
    c.query_each(
        "SELECT st.repetition, sa.value FROM plans p JOIN steps st ON st.plan_id = p.id JOIN samples sa ON sa.step = st.n
          WHERE p.campaign_id = ?1 AND st.cell = ?2 AND st.kind = 'measure' AND st.warmup = 0
            AND sa.metric = ?3 AND sa.value IS NOT NULL",
        params![campaign_id, cell, metric],
        |r| {
            let round: i64 = r.get("repetition")?;
            let value: f64 = r.get("value")?;
            if let Some(v) = usize::try_from(round - 1).ok().and_then(|i| values.get_mut(i)) {
                *v = value;
            }
            Ok(())
        },
    )?;
    Ok(values)
}

/// Per cell id of an adaptive campaign: why it stopped (or that it still runs).
pub fn verdicts(
    c: &Conn,
    campaign_id: &CampaignId,
    repeat: &Repeat,
) -> Result<std::collections::HashMap<i64, Verdict>> {
    let Some(until) = repeat.until.as_ref().filter(|_| repeat.is_adaptive()) else {
        return Ok(Default::default());
    };
    let measured = cells_measured(c, campaign_id, &until.metric)?;
    Ok(verdicts_of(&measured, repeat))
}
