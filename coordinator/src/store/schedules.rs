//! Schedules (issue 30): a campaign fired as a new run of its series every so often, on a
//! cron line, or when a named trigger is pulled; and each firing, kept.
//!
//! A firing is exactly once however many coordinators share the store: `Store::fire`
//! inserts the firing's row (keyed by schedule and slot), moves the schedule's next slot
//! on (only from the slot it saw due) and stores the campaign it submits in one
//! transaction. A second coordinator that found the same slot due conflicts on the row
//! (PostgreSQL makes its insert wait for the first's commit, then do nothing) and stores
//! nothing.

use std::collections::BTreeMap;

use platter_proto::model::CampaignId;

use super::db::{params, Conn, Row};
use super::error::{now_ms, Result, StoreError};
use super::Store;
use crate::planning::planner::PlannedCampaign;

/// When a schedule fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Timing {
    /// Every so many milliseconds, from the schedule's anchor.
    Every(i64),
    /// A five-field cron line, read in UTC.
    Cron(String),
    /// Only when the trigger of this name is pulled.
    Trigger(String),
}

/// What a firing does while the series' previous run still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Fires nothing, and says so in the firing's note.
    Skip,
    /// Submits the run anyway: its plans wait behind the running run's on each host.
    Queue,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Skip => "skip",
            Policy::Queue => "queue",
        }
    }
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Policy, String> {
        match s {
            "skip" => Ok(Policy::Skip),
            "queue" => Ok(Policy::Queue),
            _ => Err(format!("`{s}` is not a policy: `skip` or `queue`")),
        }
    }
}

/// A schedule as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub name: String,
    pub series: String,
    pub file_name: String,
    pub yaml: String,
    pub timing: Timing,
    pub policy: Policy,
    pub paused: bool,
    pub anchor_unix_ms: i64,
    /// The next slot it fires for; `None` for a trigger's schedule.
    pub next_due_unix_ms: Option<i64>,
    pub created_unix_ms: i64,
}

/// What a firing did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Submitted,
    Skipped,
    Failed,
}

impl Outcome {
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Submitted => "submitted",
            Outcome::Skipped => "skipped",
            Outcome::Failed => "failed",
        }
    }
}

/// One firing of a schedule, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct FiringRow {
    pub schedule: String,
    pub slot_unix_ms: i64,
    pub fired_unix_ms: i64,
    pub coordinator: String,
    pub outcome: Outcome,
    pub campaign_id: Option<CampaignId>,
    pub labels: BTreeMap<String, String>,
    pub note: String,
}

/// A firing to make (`Store::fire`).
pub struct Firing<'a> {
    pub schedule: &'a Schedule,
    /// The slot it fires for: the due slot, or for a trigger the time it was pulled.
    pub slot_unix_ms: i64,
    /// The schedule's next slot after this firing (`None`: unchanged, a trigger).
    pub next_due_unix_ms: Option<i64>,
    pub labels: BTreeMap<String, String>,
    /// Said in the firing's note before anything it adds ("caught up 3 missed slots").
    pub note: String,
    /// The run to submit, or why it could not be planned.
    pub planned: std::result::Result<&'a PlannedCampaign, String>,
    /// Who fires it: the coordinator's name.
    pub coordinator: &'a str,
}

/// What `Store::fire` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Fired {
    /// Stored with this outcome (and run, when it submitted one).
    Stored(FiringRow),
    /// Another coordinator fired this slot, or the schedule was paused, removed or moved
    /// on meanwhile: nothing was stored.
    Not,
}

const COLUMNS: &str = "name, series, file_name, yaml, every_ms, cron, on_trigger, policy, paused, anchor_unix_ms, next_due_unix_ms, created_unix_ms";
const FIRING_COLUMNS: &str =
    "schedule, slot_unix_ms, fired_unix_ms, coordinator, outcome, campaign_id, labels, note";

fn schedule_row(r: &Row<'_>) -> Result<Schedule> {
    let every: Option<i64> = r.get("every_ms")?;
    let cron: Option<String> = r.get("cron")?;
    let trigger: Option<String> = r.get("on_trigger")?;
    let timing = match (every, cron, trigger) {
        (Some(ms), _, _) => Timing::Every(ms),
        (_, Some(c), _) => Timing::Cron(c),
        (_, _, Some(t)) => Timing::Trigger(t),
        _ => return Err(StoreError::Decode("a schedule with no timing".into())),
    };
    let policy: String = r.get("policy")?;
    Ok(Schedule {
        name: r.get("name")?,
        series: r.get("series")?,
        file_name: r.get("file_name")?,
        yaml: r.get("yaml")?,
        timing,
        policy: policy.parse().map_err(StoreError::Decode)?,
        paused: r.get::<i64>("paused")? != 0,
        anchor_unix_ms: r.get("anchor_unix_ms")?,
        next_due_unix_ms: r.get("next_due_unix_ms")?,
        created_unix_ms: r.get("created_unix_ms")?,
    })
}

fn firing_row(r: &Row<'_>) -> Result<FiringRow> {
    let outcome = match r.get::<String>("outcome")?.as_str() {
        "submitted" => Outcome::Submitted,
        "skipped" => Outcome::Skipped,
        "failed" => Outcome::Failed,
        other => return Err(StoreError::Decode(format!("firing outcome `{other}`"))),
    };
    Ok(FiringRow {
        schedule: r.get("schedule")?,
        slot_unix_ms: r.get("slot_unix_ms")?,
        fired_unix_ms: r.get("fired_unix_ms")?,
        coordinator: r.get("coordinator")?,
        outcome,
        campaign_id: r.get("campaign_id")?,
        labels: r.text("labels", |t| serde_json::from_str(t))??,
        note: r.get("note")?,
    })
}

impl Store {
    /// Stores a new schedule; a name already taken is an error that says so.
    pub fn add_schedule(&self, s: &Schedule) -> Result<()> {
        let (every, cron, trigger) = match &s.timing {
            Timing::Every(ms) => (Some(*ms), None, None),
            Timing::Cron(c) => (None, Some(c.as_str()), None),
            Timing::Trigger(t) => (None, None, Some(t.as_str())),
        };
        self.write(|c| {
            let tx = c.write_transaction()?;
            let n = tx.execute(
                &format!(
                    "INSERT INTO schedules ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
                     ON CONFLICT (name) DO NOTHING"
                ),
                params![
                    s.name,
                    s.series,
                    s.file_name,
                    s.yaml,
                    every,
                    cron,
                    trigger,
                    s.policy.as_str(),
                    i64::from(s.paused),
                    s.anchor_unix_ms,
                    s.next_due_unix_ms,
                    s.created_unix_ms
                ],
            )?;
            if n == 0 {
                return Err(StoreError::Schedule(format!(
                    "a schedule named \"{}\" exists (`platter schedule remove {}` first, or choose another --name)",
                    s.name, s.name
                )));
            }
            tx.commit()
        })
    }

    /// Every schedule, by name.
    pub fn schedules(&self) -> Result<Vec<Schedule>> {
        self.read(|c| {
            c.query_map(
                &format!("SELECT {COLUMNS} FROM schedules ORDER BY name"),
                (),
                schedule_row,
            )
        })
    }

    /// The schedule named `name`, if there is one.
    pub fn schedule(&self, name: &str) -> Result<Option<Schedule>> {
        self.read(|c| {
            c.query_opt(
                &format!("SELECT {COLUMNS} FROM schedules WHERE name = ?1"),
                [name],
                schedule_row,
            )
        })
    }

    /// Unpaused schedules with a slot due at `now_unix_ms`, the longest due first.
    pub fn due_schedules(&self, now_unix_ms: i64) -> Result<Vec<Schedule>> {
        self.read(|c| {
            c.query_map(
                &format!(
                    "SELECT {COLUMNS} FROM schedules WHERE paused = 0 AND next_due_unix_ms <= ?1
                      ORDER BY next_due_unix_ms, name"
                ),
                [now_unix_ms],
                schedule_row,
            )
        })
    }

    /// The schedules a trigger named `trigger` fires: those made `--on-trigger`
    /// it, else the schedule of that name (a firing by hand).
    pub fn triggered(&self, trigger: &str) -> Result<Vec<Schedule>> {
        self.read(|c| {
            let on = c.query_map(
                &format!("SELECT {COLUMNS} FROM schedules WHERE on_trigger = ?1 ORDER BY name"),
                [trigger],
                schedule_row,
            )?;
            if !on.is_empty() {
                return Ok(on);
            }
            c.query_map(
                &format!("SELECT {COLUMNS} FROM schedules WHERE name = ?1"),
                [trigger],
                schedule_row,
            )
        })
    }

    /// Pauses or resumes a schedule; resuming sets its next slot to `next_due_unix_ms`
    /// (the slots it was paused over are not fired). Whether it exists.
    pub fn set_paused(
        &self,
        name: &str,
        paused: bool,
        next_due_unix_ms: Option<i64>,
    ) -> Result<bool> {
        self.write(|c| {
            let n = if paused {
                c.execute(
                    "UPDATE schedules SET paused = 1 WHERE name = ?1",
                    params![name],
                )?
            } else {
                c.execute(
                    "UPDATE schedules SET paused = 0, next_due_unix_ms = ?2 WHERE name = ?1",
                    params![name, next_due_unix_ms],
                )?
            };
            Ok(n > 0)
        })
    }

    /// Removes a schedule (its firings and runs stay: they are the series' history).
    /// Whether it existed.
    pub fn remove_schedule(&self, name: &str) -> Result<bool> {
        self.write(|c| Ok(c.execute("DELETE FROM schedules WHERE name = ?1", [name])? > 0))
    }

    /// A schedule's firings, newest first, at most `limit`.
    pub fn firings(&self, schedule: &str, limit: u32) -> Result<Vec<FiringRow>> {
        self.read(|c| {
            c.query_map(
                &format!(
                    "SELECT {FIRING_COLUMNS} FROM schedule_firings WHERE schedule = ?1
                      ORDER BY slot_unix_ms DESC LIMIT ?2"
                ),
                params![schedule, i64::from(limit)],
                firing_row,
            )
        })
    }

    /// How many firings each schedule has, by outcome: (schedule, outcome, count).
    pub fn firing_counts(&self) -> Result<Vec<(String, String, i64)>> {
        self.read(|c| {
            c.query_map(
                "SELECT schedule, outcome, COUNT(*) AS n FROM schedule_firings GROUP BY schedule, outcome ORDER BY schedule, outcome",
                (),
                |r| Ok((r.get("schedule")?, r.get("outcome")?, r.get("n")?)),
            )
        })
    }

    /// The firing that submitted each of these runs, by run: its labels for `history`.
    pub fn firings_of(&self, campaigns: &[CampaignId]) -> Result<BTreeMap<CampaignId, FiringRow>> {
        let mut out = BTreeMap::new();
        self.read(|c| {
            for id in campaigns {
                if let Some(f) = c.query_opt(
                    &format!(
                        "SELECT {FIRING_COLUMNS} FROM schedule_firings WHERE campaign_id = ?1"
                    ),
                    [id],
                    firing_row,
                )? {
                    out.insert(id.clone(), f);
                }
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// Fires one slot of a schedule, exactly once across coordinators: the firing's row,
    /// the schedule's next slot and the run it submits commit together or not at all.
    /// `Fired::Not` when this slot was fired already (by another coordinator) or the
    /// schedule changed meanwhile (paused, removed, moved on).
    pub fn fire(&self, f: &Firing<'_>) -> Result<Fired> {
        let s = f.schedule;
        let fired = self.write(|c| {
            let tx = c.write_transaction()?;
            let inserted = tx.execute(
                &format!(
                    "INSERT INTO schedule_firings ({FIRING_COLUMNS}) VALUES (?1, ?2, ?3, ?4, 'failed', NULL, ?5, '')
                     ON CONFLICT (schedule, slot_unix_ms) DO NOTHING"
                ),
                params![
                    s.name,
                    f.slot_unix_ms,
                    now_ms(),
                    f.coordinator,
                    serde_json::to_string(&f.labels)?
                ],
            )?;
            if inserted == 0 {
                return Ok(None);
            }
            let current = match (s.next_due_unix_ms, f.next_due_unix_ms) {
                // Only from the slot this coordinator saw due, and only while unpaused.
                (Some(due), Some(next)) => {
                    tx.execute(
                        "UPDATE schedules SET next_due_unix_ms = ?2 WHERE name = ?1 AND next_due_unix_ms = ?3 AND paused = 0",
                        params![s.name, next, due],
                    )? > 0
                }
                // A trigger: the schedule is still there and unpaused.
                _ => tx.exists(
                    "SELECT 1 FROM schedules WHERE name = ?1 AND paused = 0",
                    [&s.name],
                )?,
            };
            if !current {
                return Ok(None);
            }
            let mut note = f.note.clone();
            let mut add = |words: String| {
                if !note.is_empty() {
                    note.push_str("; ");
                }
                note.push_str(&words);
            };
            let (outcome, campaign) = match &f.planned {
                Err(why) => {
                    add(why.clone());
                    (Outcome::Failed, None)
                }
                Ok(planned) => match (running_run(&tx, &s.series)?, s.policy) {
                    (Some(running), Policy::Skip) => {
                        add(format!(
                            "skipped: the series' run {running} was still running (policy skip)"
                        ));
                        (Outcome::Skipped, None)
                    }
                    (running, _) => {
                        if let Some(running) = running {
                            add(format!(
                                "queued behind the series' run {running} (policy queue)"
                            ));
                        }
                        self.insert_campaign_in(&tx, planned, &s.file_name, &s.yaml)?;
                        (Outcome::Submitted, Some(planned.id.clone()))
                    }
                },
            };
            tx.execute(
                "UPDATE schedule_firings SET outcome = ?3, campaign_id = ?4, note = ?5
                  WHERE schedule = ?1 AND slot_unix_ms = ?2",
                params![s.name, f.slot_unix_ms, outcome.as_str(), campaign, note],
            )?;
            tx.commit()?;
            let row = FiringRow {
                schedule: s.name.clone(),
                slot_unix_ms: f.slot_unix_ms,
                fired_unix_ms: now_ms(),
                coordinator: f.coordinator.to_string(),
                outcome,
                campaign_id: campaign,
                labels: f.labels.clone(),
                note,
            };
            Ok(Some(row))
        })?;
        if fired.as_ref().is_some_and(|r| r.campaign_id.is_some()) {
            self.bump();
        }
        Ok(fired.map_or(Fired::Not, Fired::Stored))
    }
}

/// The series' run still running, if any (the newest).
fn running_run(c: &Conn, series: &str) -> Result<Option<CampaignId>> {
    c.query_opt(
        "SELECT id FROM campaigns WHERE series = ?1 AND state = 'running' ORDER BY submitted_unix_ms DESC LIMIT 1",
        [series],
        |r| r.only(),
    )
}
