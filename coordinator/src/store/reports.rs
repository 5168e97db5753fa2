//! What a report (`crate::report`) reads, as typed rows: the campaign, its cells and
//! plans, the counted samples (streamed, one row at a time), the warm-ups, the steps that
//! failed or were skipped, and the agents' provenance snapshots. Every function reads on
//! the caller's connection: `Report::load` asks them all in one read transaction, so a
//! report is one snapshot of the store even while an agent's records are committed
//! (its samples, counts and failures agree). What the rows mean (statistics, notes,
//! advice) is the report's; nothing here decides.

use std::collections::HashMap;

use indexmap::IndexMap;
use platter_proto::model::{CampaignId, CellId, HostName, Plan, PlanId, NOT_MEASURED};
use platter_proto::provenance::Provenance;

use super::db::{params, At, Conn, Row};
use super::error::Result;
use super::plans::CampaignPlans;
use super::progress::LATEST;

/// A campaign as submitted, as its report heads it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportCampaign {
    pub name: String,
    /// running | done | cancelled
    pub state: String,
    /// The matrix's parameter names, in the campaign's order.
    pub params: Vec<String>,
    /// The repetitions asked (`repeat`; its max when adaptive).
    pub repeat: u32,
    pub file_name: String,
    /// The campaign file's text, for the settings the report reads again.
    pub yaml: String,
}

/// One counted sample with its measure step, as the statement holds it: the metric and
/// unit are lent, not copied (a report reads a million of them).
#[derive(Debug, PartialEq)]
pub struct Sample<'r> {
    /// `cells.n`
    pub cell: i64,
    pub metric: &'r str,
    pub unit: &'r str,
    /// `None` when the tool could not measure it (`missing` says why).
    pub value: Option<f64>,
    /// "" when measured.
    pub missing: String,
    pub repetition: u32,
    pub attempt: u32,
    /// When the measure step started (CLOCK_REALTIME, ns since the epoch).
    pub started_unix_ns: i64,
    /// The run's per-operation latencies (a serialized HDR histogram), if it kept them.
    pub histogram: Option<Vec<u8>>,
}

/// A cell's counted repetitions without samples: the measure step failed, or was not
/// run because its preparation failed.
#[derive(Debug, Clone, PartialEq)]
pub struct CellFailed {
    /// `cells.n`
    pub cell: i64,
    pub repetitions: u32,
}

/// A cell of the campaign, as the planner made it.
#[derive(Debug, Clone, PartialEq)]
pub struct CampaignCell {
    /// `cells.n`: how samples and steps name the cell.
    pub n: i64,
    pub id: CellId,
    pub host: HostName,
    pub params: IndexMap<String, String>,
}

/// A failed step, as its latest attempt says.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedStep {
    pub host: HostName,
    /// The step's kind (`measure`, `storage_setup`, …).
    pub kind: String,
    pub repetition: u32,
    pub attempt: u32,
    pub error: String,
    pub stderr_tail: String,
    /// Its cell's parameters; empty when they do not parse (the failure is listed all
    /// the same).
    pub params: IndexMap<String, String>,
}

/// A plan of the campaign as it was sent, and whether its agent refused it.
#[derive(Debug, Clone, PartialEq)]
pub struct CampaignPlan {
    pub id: PlanId,
    pub refused: bool,
    pub plan: Plan,
}

/// A plan an agent refused to run, and why ("" when it gave no reason).
#[derive(Debug, Clone, PartialEq)]
pub struct RefusedPlan {
    pub host: HostName,
    pub reason: String,
}

/// One measured value of a warm-up run.
#[derive(Debug, Clone, PartialEq)]
pub struct WarmupSample {
    /// `cells.n`
    pub cell: i64,
    pub metric: String,
    pub unit: String,
    pub value: f64,
}

/// A counted measure step whose samples did not come the plain way: measured on a later
/// attempt (the agent stopped during an earlier one), or not measured because its
/// preparation failed.
#[derive(Debug, Clone, PartialEq)]
pub struct UnusualMeasure {
    /// `cells.n`
    pub cell: i64,
    pub plan_id: PlanId,
    pub step_index: u32,
    pub repetition: u32,
    pub attempt: u32,
    /// Not measured (`error` says why); otherwise measured on attempt `attempt`.
    pub skipped: bool,
    pub error: String,
}

/// Steps other than measures that a cell's plan skipped for one reason (a preparation
/// the platform does not support), counted.
#[derive(Debug, Clone, PartialEq)]
pub struct SkippedSteps {
    /// `cells.n`
    pub cell: i64,
    pub kind: String,
    pub error: String,
    pub count: u32,
}

/// A provenance snapshot an agent took during plan `plan_id`, at step `step_index`.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotRow {
    pub host: HostName,
    pub plan_id: PlanId,
    pub step_index: u32,
    pub facts: Provenance,
}

/// Campaign `campaign_id`'s row, if it exists.
pub fn campaign(c: &Conn, campaign_id: &CampaignId) -> Result<Option<ReportCampaign>> {
    c.query_opt(
        "SELECT name, state, params, repeat, file_name, yaml FROM campaigns WHERE id = ?1",
        [campaign_id],
        ReportCampaign::from_row,
    )
}

impl ReportCampaign {
    fn from_row(r: &Row<'_>) -> Result<ReportCampaign> {
        Ok(ReportCampaign {
            name: r.get("name")?,
            state: r.get("state")?,
            params: r.text("params", |t| serde_json::from_str(t))??,
            repeat: r.get("repeat")?,
            file_name: r.get("file_name")?,
            yaml: r.get("yaml")?,
        })
    }
}

/// Each counted sample of the campaign to `f` as it is read, none kept, in no set order:
/// the reader puts each cell's in the order its repetitions started. (Sorting a million
/// samples in SQL was a fifth of a report's time on SQLite; sorting them by metric too
/// cost 20–30% of the query.)
///
/// The campaign's ended steps are read first (a sample belongs to a step's end), then
/// the samples under them: when the campaign's step rows lie mostly together, as when it
/// ran alone, by one range of the samples' key, each row looked up among the steps here
/// and the few of other campaigns skipped; else joined to the campaign's steps in SQL.
/// The range spares the server a join and three columns a row: on PostgreSQL the
/// samples of a 1M-sample campaign took 509 + 170 ms of its time that way against
/// 1,084 ms joined (`COPY … TO STDOUT` of each, best of six), and a store of many
/// campaigns is not read whole for one of them.
pub fn each_sample(
    c: &Conn,
    campaign_id: &CampaignId,
    f: impl FnMut(Sample<'_>) -> Result<()>,
) -> Result<()> {
    let steps = CountedSteps::read(c, campaign_id)?;
    let way = steps.way(c)?;
    steps.each_sample(c, campaign_id, way, f)
}

/// How the samples of a campaign's steps are read (`each_sample`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SamplesBy {
    /// One range of `samples.step`, from the campaign's first step row to its last.
    Range { first: i64, last: i64 },
    /// Joined to the campaign's steps in SQL.
    Join,
}

/// A counted (not warm-up) step's end, as its samples need it.
struct StepFacts {
    cell: i64,
    repetition: u32,
    attempt: u32,
    started_unix_ns: i64,
}

/// The campaign's counted steps' ends, by step row (`steps.n`), looked up once per sample
/// (foldhash: SipHash was 2% of a 1M-sample report's CPU).
pub(crate) struct CountedSteps(HashMap<i64, StepFacts, foldhash::fast::RandomState>);

impl CountedSteps {
    pub(crate) fn read(c: &Conn, campaign_id: &CampaignId) -> Result<CountedSteps> {
        let mut steps = HashMap::default();
        c.query_each_at(
            "SELECT st.n, st.cell, st.repetition, st.attempt, st.started_unix_ns
               FROM plans p JOIN steps st ON st.plan_id = p.id
              WHERE p.campaign_id = ?1 AND st.warmup = 0 AND st.state != 'started'",
            [campaign_id],
            ["n", "cell", "repetition", "attempt", "started_unix_ns"],
            |r, [n, cell, repetition, attempt, started_unix_ns]| {
                let facts = StepFacts {
                    cell: r.get(cell)?,
                    repetition: r.get(repetition)?,
                    attempt: r.get(attempt)?,
                    started_unix_ns: r.get(started_unix_ns)?,
                };
                steps.insert(r.get(n)?, facts);
                Ok(())
            },
        )?;
        Ok(CountedSteps(steps))
    }

    /// Its first and last step rows (the one range that holds all its own), if it has any.
    pub(crate) fn span(&self) -> Option<(i64, i64)> {
        self.0.keys().fold(None, |span, &n| match span {
            None => Some((n, n)),
            Some((first, last)) => Some((first.min(n), last.max(n))),
        })
    }

    /// Its range when at most as many ended steps of other campaigns (or warm-ups) lie
    /// within it as its own, so that at most half the rows read are skipped; else a join.
    pub(crate) fn way(&self, c: &Conn) -> Result<SamplesBy> {
        let Some((first, last)) = self.span() else {
            return Ok(SamplesBy::Join);
        };
        let within: i64 = c.query_row(
            "SELECT COUNT(*) FROM steps WHERE n BETWEEN ?1 AND ?2 AND state != 'started'",
            params![first, last],
            |r| r.only(),
        )?;
        Ok(if within <= 2 * self.0.len() as i64 {
            SamplesBy::Range { first, last }
        } else {
            SamplesBy::Join
        })
    }

    pub(crate) fn each_sample(
        &self,
        c: &Conn,
        campaign_id: &CampaignId,
        way: SamplesBy,
        mut f: impl FnMut(Sample<'_>) -> Result<()>,
    ) -> Result<()> {
        if self.0.is_empty() {
            return Ok(());
        }
        let mut each =
            |r: &Row<'_>, [step, metric, unit, value, missing, histogram]: [At; 6]| -> Result<()> {
                let Some(step) = self.0.get(&r.get::<i64>(step)?) else {
                    return Ok(()); // another campaign's, or a warm-up's
                };
                let value = r.get(value)?;
                let missing = r.get(missing)?;
                let histogram = r.get(histogram)?;
                r.text(metric, |metric| {
                    r.text(unit, |unit| {
                        f(Sample {
                            cell: step.cell,
                            metric,
                            unit,
                            value,
                            missing,
                            repetition: step.repetition,
                            attempt: step.attempt,
                            started_unix_ns: step.started_unix_ns,
                            histogram,
                        })
                    })?
                })?
            };
        match way {
            SamplesBy::Range { first, last } => c.query_each_at(
                "SELECT step, metric, unit, value, COALESCE(missing, '') AS missing, histogram
                   FROM samples WHERE step BETWEEN ?1 AND ?2",
                params![first, last],
                SAMPLE_COLUMNS,
                &mut each,
            ),
            SamplesBy::Join => c.query_each_at(
                "SELECT sa.step, sa.metric, sa.unit, sa.value, COALESCE(sa.missing, '') AS missing, sa.histogram
                   FROM plans p JOIN steps st ON st.plan_id = p.id JOIN samples sa ON sa.step = st.n
                  WHERE p.campaign_id = ?1 AND st.warmup = 0 AND st.state != 'started'",
                [campaign_id],
                SAMPLE_COLUMNS,
                &mut each,
            ),
        }
    }
}

/// The columns `CountedSteps::each_sample` reads of each sample row, either way.
const SAMPLE_COLUMNS: [&str; 6] = ["step", "metric", "unit", "value", "missing", "histogram"];

/// Per cell with any, its counted repetitions without samples.
pub fn failed_repetitions(c: &Conn, campaign_id: &CampaignId) -> Result<Vec<CellFailed>> {
    c.query_map(
        "SELECT st.cell, COUNT(DISTINCT st.repetition) AS repetitions FROM plans p JOIN steps st ON st.plan_id = p.id
          WHERE p.campaign_id = ?1 AND st.kind = 'measure' AND st.warmup = 0
            AND (st.state = 'failed' OR (st.state = 'skipped' AND substr(st.error, 1, ?3) = ?2))
          GROUP BY st.cell",
        params![campaign_id, NOT_MEASURED, NOT_MEASURED.chars().count()],
        |r| {
            Ok(CellFailed {
                cell: r.get("cell")?,
                repetitions: r.get("repetitions")?,
            })
        },
    )
}

/// The campaign's cells by host, each host's in the planner's order.
pub fn cells(c: &Conn, campaign_id: &CampaignId) -> Result<Vec<CampaignCell>> {
    c.query_map(
        "SELECT n, id, host, params FROM cells WHERE campaign_id = ?1 ORDER BY host, idx",
        [campaign_id],
        |r| {
            Ok(CampaignCell {
                n: r.get("n")?,
                id: r.get("id")?,
                host: r.get("host")?,
                params: r.text("params", |t| serde_json::from_str(t))??,
            })
        },
    )
}

/// How many steps of the campaign failed; a step that ran again counts once, as its
/// latest attempt says.
pub fn steps_failed(c: &Conn, campaign_id: &CampaignId) -> Result<u32> {
    c.query_row(
        &format!(
            "SELECT COUNT(*) FROM (SELECT DISTINCT s.plan_id, s.step_index FROM steps s JOIN plans p ON p.id = s.plan_id
              WHERE p.campaign_id = ?1 AND s.state = 'failed' AND {LATEST}) AS failed"
        ),
        [campaign_id],
        |r| r.only(),
    )
}

/// Every failed step of the campaign (its latest attempt), in the order they failed.
pub fn failed_steps(c: &Conn, campaign_id: &CampaignId) -> Result<Vec<FailedStep>> {
    c.query_map(
        &format!(
            "SELECT s.host, s.kind, s.repetition, s.attempt, s.error, s.stderr_tail, ce.params
               FROM steps s JOIN plans p ON p.id = s.plan_id JOIN cells ce ON ce.n = s.cell
              WHERE p.campaign_id = ?1 AND s.state = 'failed' AND {LATEST} ORDER BY s.finished_unix_ns"
        ),
        [campaign_id],
        |r| {
            Ok(FailedStep {
                host: r.get("host")?,
                kind: r.get("kind")?,
                repetition: r.get("repetition")?,
                attempt: r.get("attempt")?,
                error: r.get("error")?,
                stderr_tail: r.get("stderr_tail")?,
                params: r
                    .text("params", |t| serde_json::from_str(t))?
                    .unwrap_or_default(),
            })
        },
    )
}

/// What a host ran a campaign on: its plan's first provenance snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct HostRun {
    pub campaign_id: CampaignId,
    pub name: String,
    pub submitted_unix_ms: i64,
    pub facts: Provenance,
}

impl super::Store {
    /// What `host` ran its last `last` campaigns on, newest first: its plans' first
    /// provenance snapshots (a plan without one is left out).
    pub fn host_runs(&self, host: &HostName, last: usize) -> Result<Vec<HostRun>> {
        self.read(|c| {
            c.query_map(
                "SELECT ca.id, ca.name, ca.submitted_unix_ms, pr.facts
                   FROM provenance pr JOIN plans p ON p.id = pr.plan_id
                   JOIN campaigns ca ON ca.id = p.campaign_id
                  WHERE pr.host = ?1
                    AND pr.seq = (SELECT MIN(f.seq) FROM provenance f WHERE f.plan_id = pr.plan_id)
                  ORDER BY ca.submitted_unix_ms DESC, ca.id DESC LIMIT ?2",
                params![host, last as i64],
                |r| {
                    Ok(HostRun {
                        campaign_id: r.get("id")?,
                        name: r.get("name")?,
                        submitted_unix_ms: r.get("submitted_unix_ms")?,
                        facts: r.text("facts", |t| serde_json::from_str(t))??,
                    })
                },
            )
        })
    }

    /// The campaign's failed steps (their latest attempts) as they fail: the last `last`
    /// of them, and how many there are in all.
    pub fn recent_failures(
        &self,
        campaign: &CampaignId,
        last: usize,
    ) -> Result<(Vec<FailedStep>, usize)> {
        let mut all = self.read(|c| failed_steps(c, campaign))?;
        let n = all.len();
        all.drain(..n.saturating_sub(last));
        Ok((all, n))
    }
}

/// Every plan of the campaign, as sent.
pub fn plans(c: &Conn, campaign_id: &CampaignId) -> Result<Vec<CampaignPlan>> {
    plan_rows(c, campaign_id)?.parse()
}

/// The campaign's plans as read, not yet parsed (`PlanRows::parse`): a report reads them
/// before its samples and parses them on another thread meanwhile (a million-sample
/// campaign's template is 14 MB of JSON, a tenth of its report's time).
pub struct PlanRows(CampaignPlans);

/// The rows `PlanRows::parse` makes the campaign's plans of.
pub fn plan_rows(c: &Conn, campaign_id: &CampaignId) -> Result<PlanRows> {
    Ok(PlanRows(CampaignPlans::read(c, campaign_id)?))
}

impl PlanRows {
    /// Every plan, as sent; each template parsed once.
    pub fn parse(self) -> Result<Vec<CampaignPlan>> {
        Ok(self
            .0
            .parse(|_| true)?
            .into_iter()
            .map(|(refused, plan)| CampaignPlan {
                id: plan.id.clone(),
                refused,
                plan,
            })
            .collect())
    }
}

/// How many measure steps of plans not refused ended (measured, failed or skipped),
/// each counted once however often it ran: a measure step ends once (the unique index
/// `steps_one_measure` on both engines), so its ends are counted as rows, read off that
/// index (a `DISTINCT` over them hashed every end again: 111 of a 1M-sample report's
/// 1,290 ms on PostgreSQL).
pub fn measurements_ended(c: &Conn, campaign_id: &CampaignId) -> Result<u32> {
    c.query_row(
        "SELECT COUNT(*) FROM steps s JOIN plans p ON p.id = s.plan_id
          WHERE p.campaign_id = ?1 AND p.state != 'refused' AND s.kind = 'measure' AND s.state != 'started'",
        [campaign_id],
        |r| r.only(),
    )
}

/// The campaign's plans an agent refused, by host.
pub fn refused_plans(c: &Conn, campaign_id: &CampaignId) -> Result<Vec<RefusedPlan>> {
    c.query_map(
        "SELECT host, COALESCE(error, '') AS reason FROM plans WHERE campaign_id = ?1 AND state = 'refused' ORDER BY host",
        [campaign_id],
        |r| {
            Ok(RefusedPlan {
                host: r.get("host")?,
                reason: r.get("reason")?,
            })
        },
    )
}

/// The measured values of the campaign's warm-up runs, by cell and repetition.
pub fn warmup_samples(c: &Conn, campaign_id: &CampaignId) -> Result<Vec<WarmupSample>> {
    c.query_map(
        "SELECT st.cell, sa.metric, sa.unit, sa.value FROM plans p JOIN steps st ON st.plan_id = p.id
           JOIN samples sa ON sa.step = st.n
          WHERE p.campaign_id = ?1 AND st.warmup = 1 AND sa.value IS NOT NULL
          ORDER BY st.cell, st.repetition",
        [campaign_id],
        |r| {
            Ok(WarmupSample {
                cell: r.get("cell")?,
                metric: r.get("metric")?,
                unit: r.get("unit")?,
                value: r.get("value")?,
            })
        },
    )
}

/// The campaign's counted measure steps measured on a later attempt or not measured, by
/// cell and repetition.
pub fn unusual_measures(c: &Conn, campaign_id: &CampaignId) -> Result<Vec<UnusualMeasure>> {
    c.query_map(
        "SELECT st.cell, st.plan_id, st.step_index, st.repetition, st.attempt, st.state, st.error
           FROM plans p JOIN steps st ON st.plan_id = p.id
          WHERE p.campaign_id = ?1 AND st.kind = 'measure' AND st.warmup = 0
            AND ((st.state = 'succeeded' AND st.attempt > 1)
                 OR (st.state = 'skipped' AND substr(st.error, 1, ?3) = ?2))
          ORDER BY st.cell, st.repetition",
        params![campaign_id, NOT_MEASURED, NOT_MEASURED.chars().count()],
        |r| {
            Ok(UnusualMeasure {
                cell: r.get("cell")?,
                plan_id: r.get("plan_id")?,
                step_index: r.get("step_index")?,
                repetition: r.get("repetition")?,
                attempt: r.get("attempt")?,
                skipped: r.text("state", |state| state == "skipped")?,
                error: r.get("error")?,
            })
        },
    )
}

/// Steps other than measures the campaign's plans skipped for a reason of their own
/// (their latest attempts), counted per cell, kind and reason, in the order they were
/// first skipped. Cancelled and aborted plans skip steps too ("skipped: …"); those are
/// left out.
pub fn skipped_steps(c: &Conn, campaign_id: &CampaignId) -> Result<Vec<SkippedSteps>> {
    c.query_map(
        &format!(
            "SELECT s.cell, s.kind, s.error, COUNT(*) AS n FROM plans p JOIN steps s ON s.plan_id = p.id
              WHERE p.campaign_id = ?1 AND s.state = 'skipped' AND s.kind != 'measure'
                AND substr(s.error, 1, 8) != 'skipped:' AND {LATEST}
              GROUP BY s.cell, s.kind, s.error ORDER BY s.cell, MIN(s.n)"
        ),
        [campaign_id],
        |r| {
            Ok(SkippedSteps {
                cell: r.get("cell")?,
                kind: r.get("kind")?,
                error: r.get("error")?,
                count: r.get("n")?,
            })
        },
    )
}

/// The campaign's provenance snapshots in the order each host took them (its plans in the
/// order they were queued: a later round's after an earlier one's).
pub fn snapshots(c: &Conn, campaign_id: &CampaignId) -> Result<Vec<SnapshotRow>> {
    c.query_map(
        "SELECT pr.host, pr.plan_id, pr.step_index, pr.facts FROM provenance pr JOIN plans p ON p.id = pr.plan_id
          WHERE p.campaign_id = ?1 ORDER BY pr.host, p.queued_seq, pr.plan_id, pr.seq",
        [campaign_id],
        |r| {
            Ok(SnapshotRow {
                host: r.get("host")?,
                plan_id: r.get("plan_id")?,
                step_index: r.get("step_index")?,
                facts: r.text("facts", |t| serde_json::from_str(t))??,
            })
        },
    )
}
