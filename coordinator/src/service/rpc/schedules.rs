//! The Control service's schedule calls (`platter schedule …`, `platter trigger`): their
//! requests read into `store::schedules` and `service::schedules`, their answers as
//! `ScheduleInfo` and `ScheduleFiring`.

use std::collections::BTreeMap;

use platter_proto::v1 as pb;
use tonic::Status;

use super::control::{blocking, invalid_campaign, store_status, ControlService};
use crate::service::schedules::{next_slot, plain_name, timing, Pulled};
use crate::spec;
use crate::store::schedules::{FiringRow, Policy, Schedule, Timing};
use crate::store::{now_ms, Store};

/// How many firings `GetSchedule` carries.
const SHOWN_FIRINGS: u32 = 20;

/// "every 24h", "cron 0 2 * * * (UTC)", "on trigger kernel-update".
pub fn when(t: &Timing) -> String {
    match t {
        Timing::Every(ms) => format!(
            "every {}",
            humantime::format_duration(std::time::Duration::from_millis(
                u64::try_from(*ms).unwrap_or(0)
            ))
        ),
        Timing::Cron(line) => format!("cron {line} (UTC)"),
        Timing::Trigger(name) => format!("on trigger {name}"),
    }
}

impl From<FiringRow> for pb::ScheduleFiring {
    fn from(f: FiringRow) -> Self {
        pb::ScheduleFiring {
            schedule: f.schedule,
            slot_unix_ms: f.slot_unix_ms,
            fired_unix_ms: f.fired_unix_ms,
            coordinator: f.coordinator,
            outcome: f.outcome.as_str().into(),
            campaign_id: f.campaign_id.map(|c| c.into_string()).unwrap_or_default(),
            labels: f.labels.into_iter().collect(),
            note: f.note,
        }
    }
}

fn info(
    s: Schedule,
    counts: &[(String, String, i64)],
    firings: Vec<FiringRow>,
) -> pb::ScheduleInfo {
    let count = |outcome: &str| {
        counts
            .iter()
            .filter(|(name, o, _)| *name == s.name && o == outcome)
            .map(|(_, _, n)| u64::try_from(*n).unwrap_or(0))
            .sum()
    };
    pb::ScheduleInfo {
        submitted: count("submitted"),
        skipped: count("skipped"),
        failed: count("failed"),
        when: when(&s.timing),
        policy: s.policy.as_str().into(),
        paused: s.paused,
        next_due_unix_ms: if s.paused {
            0
        } else {
            s.next_due_unix_ms.unwrap_or(0)
        },
        created_unix_ms: s.created_unix_ms,
        firings: firings.into_iter().map(Into::into).collect(),
        yaml: s.yaml,
        name: s.name,
        series: s.series,
        file_name: s.file_name,
    }
}

fn load(store: &Store, name: &str, shown: u32) -> Result<pb::ScheduleInfo, Status> {
    let s = store
        .schedule(name)
        .map_err(store_status)?
        .ok_or_else(|| no_schedule(name))?;
    let counts = store.firing_counts().map_err(store_status)?;
    let firings = store.firings(name, shown).map_err(store_status)?;
    Ok(info(s, &counts, firings))
}

fn no_schedule(name: &str) -> Status {
    Status::not_found(format!(
        "no schedule named \"{name}\" (`platter schedule list` shows them)"
    ))
}

fn valid_name(name: &str) -> Result<(), Status> {
    if name.len() <= 64 && plain_name(name) {
        Ok(())
    } else {
        Err(Status::invalid_argument(format!(
            "{name:?} is not a schedule name: up to 64 letters, digits, `.`, `_` and `-`"
        )))
    }
}

impl ControlService {
    pub(super) async fn add_schedule(
        &self,
        req: pb::AddScheduleRequest,
    ) -> Result<pb::ScheduleInfo, Status> {
        let (store, limits) = (self.store.clone(), self.limits);
        blocking(move || {
            let optional = |s: &str| (!s.trim().is_empty()).then(|| s.to_string());
            let timing = timing(
                optional(&req.every).as_deref(),
                optional(&req.cron).as_deref(),
                optional(&req.on_trigger).as_deref(),
            )
            .map_err(Status::invalid_argument)?;
            let policy: Policy = match req.policy.trim() {
                "" => Policy::Skip,
                p => p.parse().map_err(Status::invalid_argument)?,
            };
            let campaign = spec::parse_with(&req.file_name, &req.yaml, &limits)
                .map_err(|e| invalid_campaign(&e))?;
            let name = if req.name.is_empty() {
                campaign.series.clone()
            } else {
                req.name.clone()
            };
            valid_name(&name)?;
            let now = now_ms();
            let schedule = Schedule {
                name: name.clone(),
                series: campaign.series.clone(),
                file_name: req.file_name.clone(),
                yaml: req.yaml.clone(),
                next_due_unix_ms: next_slot(&timing, now, now),
                timing,
                policy,
                paused: false,
                anchor_unix_ms: now,
                created_unix_ms: now,
            };
            store.add_schedule(&schedule).map_err(|e| match e {
                crate::store::StoreError::Schedule(words) => Status::already_exists(words),
                e => store_status(e),
            })?;
            tracing::info!(schedule = %name, series = %schedule.series, when = %when(&schedule.timing), "schedule added");
            load(&store, &name, 1)
        })
        .await
    }

    pub(super) async fn list_schedules(&self) -> Result<pb::ListSchedulesResponse, Status> {
        let store = self.store.clone();
        blocking(move || {
            let all = store.schedules().map_err(store_status)?;
            let counts = store.firing_counts().map_err(store_status)?;
            let mut schedules = Vec::with_capacity(all.len());
            for s in all {
                let last = store.firings(&s.name, 1).map_err(store_status)?;
                schedules.push(info(s, &counts, last));
            }
            Ok(pb::ListSchedulesResponse { schedules })
        })
        .await
    }

    pub(super) async fn get_schedule(&self, name: String) -> Result<pb::ScheduleInfo, Status> {
        let store = self.store.clone();
        blocking(move || load(&store, &name, SHOWN_FIRINGS)).await
    }

    pub(super) async fn set_schedule_paused(
        &self,
        req: pb::SetSchedulePausedRequest,
    ) -> Result<pb::ScheduleInfo, Status> {
        let store = self.store.clone();
        blocking(move || {
            let s = store
                .schedule(&req.name)
                .map_err(store_status)?
                .ok_or_else(|| no_schedule(&req.name))?;
            let now = now_ms();
            let next = next_slot(&s.timing, s.anchor_unix_ms, now);
            if !store
                .set_paused(&req.name, req.paused, next)
                .map_err(store_status)?
            {
                return Err(no_schedule(&req.name));
            }
            tracing::info!(schedule = %req.name, paused = req.paused, "schedule paused or resumed");
            load(&store, &req.name, 1)
        })
        .await
    }

    pub(super) async fn remove_schedule(&self, name: String) -> Result<(), Status> {
        let store = self.store.clone();
        blocking(move || {
            if !store.remove_schedule(&name).map_err(store_status)? {
                return Err(no_schedule(&name));
            }
            tracing::info!(schedule = %name, "schedule removed");
            Ok(())
        })
        .await
    }

    pub(super) async fn trigger(
        &self,
        req: pb::TriggerRequest,
    ) -> Result<pb::TriggerResponse, Status> {
        let scheduler = self.scheduler.clone();
        blocking(move || {
            let labels: BTreeMap<String, String> = req.labels.into_iter().collect();
            for key in labels.keys() {
                valid_name(key).map_err(|_| {
                    Status::invalid_argument(format!(
                        "label {key:?}: a label's key is letters, digits, `.`, `_` and `-`"
                    ))
                })?;
            }
            let pulled = scheduler.trigger(&req.name, labels).map_err(store_status)?;
            if pulled.is_empty() {
                return Err(Status::not_found(format!(
                    "trigger \"{}\" fires no schedule: none was added with --on-trigger {} and none is named so (`platter schedule list`)",
                    req.name, req.name
                )));
            }
            let mut response = pb::TriggerResponse::default();
            for p in pulled {
                match p {
                    Pulled::Fired(row) => response.fired.push(row.into()),
                    Pulled::NotFired { schedule, why } => {
                        response.not_fired.push(format!("{schedule}: {why}"))
                    }
                }
            }
            Ok(response)
        })
        .await
    }
}
