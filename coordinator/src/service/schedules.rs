//! Schedules fired (issue 30): every coordinator of `platter serve` looks for due slots
//! every `TICK` and fires each through `Store::fire`, which makes a slot's firing exactly
//! once however many coordinators share the store. A slot found due long after it was
//! (every coordinator was down) is fired once, the slots missed meanwhile counted in its
//! note, not fired one by one. A trigger (`platter trigger NAME`, `POST
//! /api/v1/triggers/NAME`) fires its schedules at once, labelled with what the caller said.
//!
//! When slots fall: `every` from the schedule's anchor (when it was added or resumed), a
//! cron line in UTC through `croner` (five fields, the common dialect).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::planning::planner;
use crate::service::campaigns::{expand, Unplanned};
use crate::service::hub::Hub;
use crate::spec;
use crate::store::schedules::{Fired, Firing, FiringRow, Schedule, Timing};
use crate::store::{now_ms, Store, StoreError};

/// How often a coordinator looks for due slots: a firing is at most this late.
pub const TICK: Duration = Duration::from_millis(200);
/// The shortest `--every`.
pub const MIN_EVERY: Duration = Duration::from_secs(1);

/// Reads `--every`, `--cron` or `--on-trigger` (exactly one).
pub fn timing(
    every: Option<&str>,
    cron: Option<&str>,
    on_trigger: Option<&str>,
) -> Result<Timing, String> {
    match (every, cron, on_trigger) {
        (Some(every), None, None) => {
            let d = humantime::parse_duration(every.trim()).map_err(|e| {
                format!("--every {every:?}: {e} (write a duration such as `24h`, `90m` or `2s`)")
            })?;
            if d < MIN_EVERY {
                return Err(format!(
                    "--every {every:?}: at least {} s between firings",
                    MIN_EVERY.as_secs()
                ));
            }
            i64::try_from(d.as_millis())
                .map(Timing::Every)
                .map_err(|_| format!("--every {every:?}: too long"))
        }
        (None, Some(line), None) => {
            let line = line.trim();
            if line.split_whitespace().count() != 5 {
                return Err(format!(
                    "--cron {line:?}: five fields are expected (minute hour day-of-month month day-of-week, UTC), e.g. \"0 2 * * *\""
                ));
            }
            line.parse::<croner::Cron>()
                .map_err(|e| format!("--cron {line:?}: {e}"))?;
            Ok(Timing::Cron(line.to_string()))
        }
        (None, None, Some(name)) => {
            let name = name.trim();
            if !plain_name(name) {
                return Err(format!(
                    "--on-trigger {name:?}: a trigger's name is letters, digits, `.`, `_` and `-`"
                ));
            }
            Ok(Timing::Trigger(name.to_string()))
        }
        (None, None, None) => {
            Err("say when it fires: --every 24h, --cron \"0 2 * * *\" or --on-trigger NAME".into())
        }
        _ => Err("one of --every, --cron and --on-trigger, not several".into()),
    }
}

/// A schedule's, a trigger's or a label's name: letters, digits, `.`, `_` and `-`.
pub fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The first slot after `after_unix_ms` (strictly); `None` for a trigger's schedule.
pub fn next_slot(timing: &Timing, anchor_unix_ms: i64, after_unix_ms: i64) -> Option<i64> {
    match timing {
        Timing::Every(ms) => {
            let ms = (*ms).max(1);
            let k = (after_unix_ms - anchor_unix_ms).div_euclid(ms) + 1;
            Some(anchor_unix_ms + k * ms)
        }
        Timing::Cron(line) => {
            let cron: croner::Cron = line.parse().ok()?;
            let after = DateTime::<Utc>::from_timestamp_millis(after_unix_ms)?;
            cron.find_next_occurrence(&after, false)
                .ok()
                .map(|t| t.timestamp_millis())
        }
        Timing::Trigger(_) => None,
    }
}

/// How many slots fall after `due_unix_ms` up to `now_unix_ms` (those a late firing
/// catches up, not fired one by one); counted up to 10,000.
pub fn missed_slots(timing: &Timing, anchor_unix_ms: i64, due_unix_ms: i64, now: i64) -> u64 {
    match timing {
        Timing::Every(ms) => {
            u64::try_from((now - due_unix_ms).div_euclid((*ms).max(1))).unwrap_or(0)
        }
        Timing::Cron(_) => {
            let mut n = 0;
            let mut at = due_unix_ms;
            while let Some(next) = next_slot(timing, anchor_unix_ms, at) {
                if next > now || n >= 10_000 {
                    break;
                }
                n += 1;
                at = next;
            }
            n
        }
        Timing::Trigger(_) => 0,
    }
}

/// A time as people read it in a label or a note: `2026-12-03T02:00:00Z`.
pub fn utc(unix_ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(unix_ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_else(|| unix_ms.to_string())
}

/// Fires schedules for one coordinator.
pub struct Scheduler {
    pub store: Store,
    pub hub: Arc<Hub>,
    pub limits: spec::Limits,
    /// Who fires: the coordinator's name, kept with each firing.
    pub coordinator: String,
}

/// What a trigger did, per schedule it names.
#[derive(Debug, Clone, PartialEq)]
pub enum Pulled {
    Fired(FiringRow),
    /// Nothing fired, and why (the schedule is paused).
    NotFired {
        schedule: String,
        why: String,
    },
}

impl Scheduler {
    /// Fires due slots every `TICK` until `shutdown`. A store that fails is said once per
    /// distinct reason, and tried again at the next tick.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut said = String::new();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let me = self.clone();
            let r = tokio::task::spawn_blocking(move || me.fire_due(now_ms())).await;
            match r {
                Ok(Ok(_)) => said.clear(),
                Ok(Err(e)) => {
                    let words = e.to_string();
                    if words != said {
                        tracing::warn!(error = %words, "schedules: cannot fire due slots; trying again every {} ms", TICK.as_millis());
                        said = words;
                    }
                }
                Err(e) => tracing::error!(error = %e, "schedules: the firing task failed"),
            }
        }
    }

    /// Fires every slot due at `now`: once each, the missed ones caught up by one firing.
    pub fn fire_due(&self, now: i64) -> Result<Vec<FiringRow>, StoreError> {
        let mut fired = Vec::new();
        for s in self.store.due_schedules(now)? {
            let Some(due) = s.next_due_unix_ms else {
                continue;
            };
            let next = next_slot(&s.timing, s.anchor_unix_ms, now);
            let missed = missed_slots(&s.timing, s.anchor_unix_ms, due, now);
            let note = match missed {
                0 => String::new(),
                n => format!(
                    "late by {:.1} s: fired once for this slot and the {n} after it that fell while no coordinator fired",
                    (now - due) as f64 / 1000.0
                ),
            };
            let labels = BTreeMap::from([
                ("fired_by".to_string(), "schedule".to_string()),
                ("slot".to_string(), utc(due)),
            ]);
            if let Fired::Stored(row) = self.fire(&s, due, next, labels, note)? {
                fired.push(row);
            }
        }
        Ok(fired)
    }

    /// Pulls trigger `name`: fires each schedule it names (those made `--on-trigger NAME`,
    /// else the schedule called NAME) now, with `labels`. `Ok(empty)` when it names none.
    pub fn trigger(
        &self,
        name: &str,
        mut labels: BTreeMap<String, String>,
    ) -> Result<Vec<Pulled>, StoreError> {
        labels
            .entry("fired_by".into())
            .or_insert_with(|| format!("trigger {name}"));
        let mut out = Vec::new();
        for s in self.store.triggered(name)? {
            if s.paused {
                out.push(Pulled::NotFired {
                    schedule: s.name.clone(),
                    why: format!("it is paused (`platter schedule resume {}`)", s.name),
                });
                continue;
            }
            // A slot is a millisecond: a trigger pulled twice within one tries the next.
            let slot = now_ms();
            let mut fired = None;
            for slot in slot..slot + 3 {
                if let Fired::Stored(row) =
                    self.fire(&s, slot, s.next_due_unix_ms, labels.clone(), String::new())?
                {
                    fired = Some(row);
                    break;
                }
            }
            out.push(match fired {
                Some(row) => Pulled::Fired(row),
                None => Pulled::NotFired {
                    schedule: s.name.clone(),
                    why: "it was paused or removed meanwhile".into(),
                },
            });
        }
        Ok(out)
    }

    /// Plans the schedule's campaign and fires one slot of it. A campaign that cannot be
    /// planned (no agent matches its labels now, the file no longer valid for this
    /// coordinator's limits) is a failed firing, kept with why; a store that fails stores
    /// nothing, and the slot stays due.
    fn fire(
        &self,
        s: &Schedule,
        slot: i64,
        next_due: Option<i64>,
        labels: BTreeMap<String, String>,
        note: String,
    ) -> Result<Fired, StoreError> {
        let planned = self.plan(s);
        let planned = match planned {
            Ok(p) => Ok(p),
            Err(Unplanned::Store(e)) => return Err(e),
            Err(Unplanned::Invalid(e)) => Err(e.render(spec::MAX_SHOWN, 4096)),
            Err(Unplanned::Refused(words)) => Err(words),
        };
        let fired = self.store.fire(&Firing {
            schedule: s,
            slot_unix_ms: slot,
            next_due_unix_ms: next_due,
            labels,
            note,
            planned: planned.as_ref().map_err(Clone::clone),
            coordinator: &self.coordinator,
        })?;
        if let Fired::Stored(row) = &fired {
            tracing::info!(
                schedule = %s.name,
                slot = %utc(slot),
                outcome = row.outcome.as_str(),
                campaign = row.campaign_id.as_ref().map(|c| c.as_str()).unwrap_or("-"),
                note = %row.note,
                "schedule fired"
            );
            if let (Some(_), Ok(p)) = (&row.campaign_id, &planned) {
                let hosts: Vec<_> = p.plans.iter().map(|p| p.host.clone()).collect();
                self.hub.dispatch_to(&hosts);
            }
        }
        Ok(fired)
    }

    fn plan(&self, s: &Schedule) -> Result<planner::PlannedCampaign, Unplanned> {
        let hash = crate::service::campaigns::stored_hash(
            &self.store,
            &self.limits,
            &s.file_name,
            &s.yaml,
            "",
        )?;
        let generation = self
            .store
            .next_generation(&hash)
            .map_err(Unplanned::Store)?;
        expand(
            &self.store,
            &self.limits,
            &s.file_name,
            &s.yaml,
            "",
            generation,
        )
        .map(|(_, planned)| planned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_falls_on_its_anchor_s_grid() {
        let t = Timing::Every(2_000);
        assert_eq!(next_slot(&t, 1_000, 1_000), Some(3_000));
        assert_eq!(next_slot(&t, 1_000, 2_999), Some(3_000));
        assert_eq!(next_slot(&t, 1_000, 3_000), Some(5_000));
        assert_eq!(next_slot(&t, 1_000, 500), Some(1_000));
        // Due at 3 000, found at 9 500: slots 5 000, 7 000 and 9 000 were missed.
        assert_eq!(missed_slots(&t, 1_000, 3_000, 9_500), 3);
        assert_eq!(missed_slots(&t, 1_000, 3_000, 3_100), 0);
    }

    #[test]
    fn cron_lines_are_read_in_utc() {
        let t = timing(None, Some("0 2 * * *"), None).unwrap();
        // 2023-11-14T22:13:20Z → 2023-11-15T02:00:00Z.
        assert_eq!(next_slot(&t, 0, 1_700_000_000_000), Some(1_700_013_600_000));
        // Three nights missed after the slot of the 15th, found on the 18th at noon.
        let due = 1_700_013_600_000;
        assert_eq!(
            missed_slots(&t, 0, due, due + 3 * 86_400_000 + 36_000_000),
            3
        );
    }

    #[test]
    fn timings_are_checked_with_what_to_write() {
        assert_eq!(
            timing(Some("24h"), None, None),
            Ok(Timing::Every(86_400_000))
        );
        assert_eq!(timing(Some("2s"), None, None), Ok(Timing::Every(2_000)));
        assert!(timing(Some("10ms"), None, None)
            .unwrap_err()
            .contains("at least 1 s"));
        assert!(timing(Some("daily"), None, None)
            .unwrap_err()
            .contains("`24h`"));
        assert!(timing(None, Some("0 25 * * *"), None)
            .unwrap_err()
            .contains("0 25 * * *"));
        assert!(timing(None, Some("* * * * * *"), None)
            .unwrap_err()
            .contains("five fields"));
        assert!(timing(None, None, Some("new kernel"))
            .unwrap_err()
            .contains("letters"));
        assert_eq!(
            timing(None, None, Some("kernel-update")),
            Ok(Timing::Trigger("kernel-update".into()))
        );
        assert!(timing(None, None, None)
            .unwrap_err()
            .contains("--every 24h"));
        assert!(timing(Some("1h"), Some("0 2 * * *"), None)
            .unwrap_err()
            .contains("not several"));
    }
}
