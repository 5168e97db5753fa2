//! Flags raised and alerts sent, by every coordinator of `platter serve` (and `platter
//! run`): two loops.
//!
//! * `raise` — every `RAISE_TICK`, each done campaign's flags (`report::flags`), once per
//!   campaign across coordinators (`Store::raise_flags` marks it in the same transaction);
//!   the hosts offline past `host_grace` while holding a plan, fixed when they are back; and
//!   schedules' failed firings.
//! * `deliver` — every `DELIVER_TICK`, each rule with deliveries due and no live lease is
//!   claimed for `LEASE` and its events sent oldest first; each is marked delivered after
//!   its channel took it. A failure holds the rule's later events behind it (they go in
//!   order) and backs off, doubling from 1 s to 5 min. More than the rule's
//!   `digest_after` waiting go as one digest.

pub mod channels;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::service::hub::{Hub, Presence};
use crate::service::presence::{fleet_of, whereabouts};
use crate::store::alerts::Owed;
use crate::store::error::now_ms;
use crate::store::flags::{flag_id, Fixed, FlagKind, NewFlag, Severity};
use crate::store::{Store, StoreError};

pub const RAISE_TICK: Duration = Duration::from_secs(1);
pub const DELIVER_TICK: Duration = Duration::from_millis(200);
/// How long a coordinator holds a rule while it sends: a holder killed mid-way delays its
/// rule's events by at most this much, while the next holder waits the lease out.
pub const LEASE: Duration = Duration::from_secs(20);
/// At most this long sending one rule's events before giving its lease back (one send more
/// may start just before, and takes at most `channels::SEND_TIMEOUT`: within the lease).
const SEND_BUDGET: Duration = Duration::from_secs(10);
/// Retries double from 1 s up to this.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// Events read per rule and pass (a digest holds at most this many).
const BATCH: usize = 200;
/// A host offline while holding a plan is flagged after this by default (a reboot step
/// takes a host away for a while on purpose).
pub const DEFAULT_HOST_GRACE: Duration = Duration::from_secs(300);

/// What both loops need.
pub struct Alerts {
    pub store: Store,
    pub hub: Arc<Hub>,
    /// This coordinator's name: who holds a rule's lease, in the delivery log.
    pub coordinator: String,
    /// Put in front of every link (`serve --public-url`).
    pub public_url: String,
    pub host_grace: Duration,
}

impl Alerts {
    /// Raises flags every `RAISE_TICK` until `shutdown`; a failure is said once per reason.
    pub async fn raise(self: Arc<Self>, shutdown: CancellationToken) {
        let mut offline_since: HashMap<String, i64> = HashMap::new();
        let mut said = String::new();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(RAISE_TICK) => {}
            }
            let me = self.clone();
            let mut since = std::mem::take(&mut offline_since);
            let r = tokio::task::spawn_blocking(move || {
                let r = me.raise_pass(&mut since);
                (r, since)
            })
            .await;
            let outcome = match r {
                Ok((r, since)) => {
                    offline_since = since;
                    r
                }
                Err(e) => Err(StoreError::Refused(format!(
                    "the flagging task failed: {e}"
                ))),
            };
            said_once(&mut said, outcome.err(), "flags: cannot raise flags");
        }
    }

    /// Looks at the store's health every `DELIVER_TICK` (in memory: the store's watch
    /// keeps it) and flags each fault once it is over, while it lasts nothing is stored.
    /// Apart from `raise`, whose passes may take long, so a short fault is not missed.
    pub async fn store_faults(self: Arc<Self>, shutdown: CancellationToken) {
        let mut fault: Option<crate::store::StoreFault> = None;
        let mut over: Vec<crate::store::StoreFault> = Vec::new();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(DELIVER_TICK) => {}
            }
            match self.store.fault() {
                Some(now) => {
                    if fault
                        .as_ref()
                        .is_some_and(|f| f.since_unix_ms != now.since_unix_ms)
                    {
                        over.extend(fault.take());
                    }
                    fault = Some(now);
                    continue;
                }
                None => over.extend(fault.take()),
            }
            while let Some(was) = over.first().cloned() {
                let me = self.clone();
                match tokio::task::spawn_blocking(move || me.store_fault_over(&was)).await {
                    Ok(Ok(())) => {
                        over.remove(0);
                    }
                    r => {
                        tracing::warn!(result = ?r.map(|_| ()), "flags: cannot flag the store fault that ended yet");
                        break;
                    }
                }
            }
        }
    }

    /// One pass: the done campaigns not flagged yet, then the hosts.
    pub fn raise_pass(&self, offline_since: &mut HashMap<String, i64>) -> Result<(), StoreError> {
        for campaign in self.store.campaigns_to_flag()? {
            let (flags, fixed) = crate::report::flags::of_campaign(&self.store, &campaign)?;
            if let Some(r) = self.store.raise_flags(Some(&campaign), &flags, &fixed)? {
                if !r.raised.is_empty() || !r.fixed.is_empty() {
                    tracing::info!(
                        campaign = %campaign,
                        raised = r.raised.len(),
                        fixed = r.fixed.len(),
                        suppressed = r.suppressed.len(),
                        "flags"
                    );
                }
            }
        }
        self.hosts(offline_since, now_ms())?;
        self.firings()
    }

    /// Flags a store fault this coordinator saw, now that the store commits again: when it
    /// began, how long it lasted and why.
    fn store_fault_over(&self, f: &crate::store::StoreFault) -> Result<(), StoreError> {
        let now = now_ms();
        let what = if f.not_answering {
            "did not answer"
        } else {
            "could not commit"
        };
        let flag = NewFlag {
            summary: format!(
                "the store {what} from {} to {} ({:.0} s, seen by {}): {}; it commits again",
                crate::views::clock(f.since_unix_ms),
                crate::views::clock(now),
                (now - f.since_unix_ms) as f64 / 1000.0,
                self.coordinator,
                f.reason
            ),
            evidence: json!({
                "coordinator": self.coordinator,
                "since_unix_ms": f.since_unix_ms,
                "until_unix_ms": now,
                "reason": f.reason,
                "not_answering": f.not_answering,
            }),
            link: "/".into(),
            ..NewFlag::of(
                FlagKind::Store,
                Severity::Critical,
                format!("store|{}|{}", self.coordinator, f.since_unix_ms),
            )
        };
        self.store.raise_flags(None, &[flag], &[])?;
        Ok(())
    }

    /// Flags each schedule's latest firing that failed to submit its run, and fixes the
    /// flag once a later firing submitted one.
    fn firings(&self) -> Result<(), StoreError> {
        use crate::store::schedules::Outcome;
        let mut raised = Vec::new();
        let mut fixed = Vec::new();
        for s in self.store.schedules()? {
            let recent = self.store.firings(&s.name, 20)?;
            let Some(latest) = recent.first() else {
                continue;
            };
            match latest.outcome {
                Outcome::Failed => raised.push(NewFlag {
                    series: s.series.clone(),
                    summary: format!(
                        "schedule {} could not submit its run at {}: {}",
                        s.name,
                        crate::views::clock(latest.fired_unix_ms),
                        latest.note
                    ),
                    evidence: json!({
                        "schedule": s.name,
                        "slot_unix_ms": latest.slot_unix_ms,
                        "coordinator": latest.coordinator,
                        "note": latest.note,
                    }),
                    link: format!("/series/{}", s.series),
                    ..NewFlag::of(
                        FlagKind::Firing,
                        Severity::Warning,
                        format!("firing|{}|{}", s.name, latest.slot_unix_ms),
                    )
                }),
                Outcome::Submitted => {
                    for f in recent.iter().filter(|f| f.outcome == Outcome::Failed) {
                        fixed.push(Fixed {
                            flag_id: flag_id(&format!("firing|{}|{}", s.name, f.slot_unix_ms)),
                            note: format!(
                                "a later firing submitted its run at {}",
                                crate::views::clock(latest.fired_unix_ms)
                            ),
                        });
                    }
                }
                Outcome::Skipped => {}
            }
        }
        self.changes(FlagKind::Firing, raised, fixed)
    }

    /// Flags each host offline past the grace while holding a plan, and fixes the flags
    /// of hosts back.
    fn hosts(&self, offline_since: &mut HashMap<String, i64>, now: i64) -> Result<(), StoreError> {
        let held = self.store.held_plans()?;
        let fleet = fleet_of(&self.hub)?;
        let mut raised = Vec::new();
        let mut fixed = Vec::new();
        let mut seen = HashSet::new();
        for (host, campaign) in &held {
            let key = offline_key(host, campaign);
            let w = whereabouts(&self.hub, fleet.as_ref(), host.as_str());
            if w.presence == Presence::Connected {
                offline_since.remove(&key);
                fixed.push(Fixed {
                    flag_id: flag_id(&key),
                    note: format!("{host} is back, at {}", crate::views::clock(now)),
                });
                // Connected here and holding its steps: its journal cannot be written.
                let journal = journal_key(host, campaign);
                match self.hub.journal_fault(host.as_str()) {
                    Some(fault) => raised.push(NewFlag {
                        host: host.to_string(),
                        campaign_id: campaign.to_string(),
                        summary: format!(
                            "{host} holds the steps of campaign {campaign}: its journal cannot \
                             be written ({fault})"
                        ),
                        evidence: json!({ "campaign": campaign, "journal_fault": fault }),
                        link: format!("/hosts/{host}"),
                        ..NewFlag::of(FlagKind::Host, Severity::Critical, journal)
                    }),
                    None => fixed.push(Fixed {
                        flag_id: flag_id(&journal),
                        note: format!(
                            "{host}'s journal can be written again, at {}",
                            crate::views::clock(now)
                        ),
                    }),
                }
                continue;
            }
            seen.insert(key.clone());
            let since = *offline_since.entry(key.clone()).or_insert(now);
            if now - since < self.host_grace.as_millis() as i64 {
                continue;
            }
            raised.push(NewFlag {
                host: host.to_string(),
                campaign_id: campaign.to_string(),
                summary: format!(
                    "{host} is offline while holding a plan of campaign {campaign} (not seen \
                     by this coordinator since {})",
                    crate::views::clock(since)
                ),
                evidence: json!({ "campaign": campaign, "offline_since_unix_ms": since }),
                link: format!("/hosts/{host}"),
                ..NewFlag::of(FlagKind::Host, Severity::Critical, key)
            });
        }
        offline_since.retain(|k, _| seen.contains(k));
        // A host whose plan ended (or was cancelled) while it was away holds nothing now.
        let holding: HashSet<String> = held
            .iter()
            .flat_map(|(h, c)| [flag_id(&offline_key(h, c)), flag_id(&journal_key(h, c))])
            .collect();
        let live = self.store.flags(&crate::store::flags::FlagFilter {
            kind: Some(FlagKind::Host),
            ..Default::default()
        })?;
        for f in live
            .iter()
            .filter(|f| f.state.is_live() && !holding.contains(&f.id))
        {
            fixed.push(Fixed {
                flag_id: f.id.clone(),
                note: format!(
                    "{} no longer holds a plan of campaign {}",
                    f.host, f.campaign_id
                ),
            });
        }
        self.changes(FlagKind::Host, raised, fixed)
    }

    /// Stores what a pass over hosts or firings found that the store does not know yet:
    /// flags not raised before, fixes of live ones. A pass runs every second and mostly
    /// finds what it found the second before, which is then not written again.
    fn changes(
        &self,
        kind: FlagKind,
        mut raised: Vec<NewFlag>,
        mut fixed: Vec<Fixed>,
    ) -> Result<(), StoreError> {
        if raised.is_empty() && fixed.is_empty() {
            return Ok(());
        }
        let known: HashMap<String, bool> = self
            .store
            .flags(&crate::store::flags::FlagFilter {
                kind: Some(kind),
                ..Default::default()
            })?
            .into_iter()
            .map(|f| (f.id, f.state.is_live()))
            .collect();
        raised.retain(|f| !known.contains_key(&flag_id(&f.evidence_key)));
        fixed.retain(|f| known.get(&f.flag_id) == Some(&true));
        if raised.is_empty() && fixed.is_empty() {
            return Ok(());
        }
        self.store.raise_flags(None, &raised, &fixed)?;
        Ok(())
    }

    /// Delivers every `DELIVER_TICK` until `shutdown`.
    pub async fn deliver(self: Arc<Self>, shutdown: CancellationToken) {
        let http = reqwest::Client::builder()
            .timeout(channels::SEND_TIMEOUT)
            .build()
            .expect("an HTTP client with the system's roots");
        let mut said = String::new();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(DELIVER_TICK) => {}
            }
            let r = self.deliver_pass(&http).await;
            said_once(&mut said, r.err(), "alerts: cannot deliver");
        }
    }

    /// One pass over the rules due.
    pub async fn deliver_pass(&self, http: &reqwest::Client) -> Result<(), StoreError> {
        let store = self.store.clone();
        let due = blocking(move || store.rules_due(now_ms())).await?;
        for rule in due {
            let now = now_ms();
            let (store, name, me) = (self.store.clone(), rule.clone(), self.coordinator.clone());
            let claimed =
                blocking(move || store.claim_rule(&name, &me, now, now + LEASE.as_millis() as i64))
                    .await?;
            if !claimed {
                continue;
            }
            let r = self.deliver_rule(http, &rule).await;
            let (store, name, me) = (self.store.clone(), rule.clone(), self.coordinator.clone());
            blocking(move || store.release_rule(&name, &me)).await?;
            r?;
        }
        Ok(())
    }

    /// Sends what `rule` owes, oldest first, while this coordinator holds its lease.
    async fn deliver_rule(&self, http: &reqwest::Client, rule: &str) -> Result<(), StoreError> {
        let started = std::time::Instant::now();
        let (store, name) = (self.store.clone(), rule.to_string());
        let Some(r) = blocking(move || store.alert_rule(&name)).await? else {
            return Ok(());
        };
        let (store, name) = (self.store.clone(), rule.to_string());
        let (owed, all) = blocking(move || store.owed(&name, now_ms(), BATCH)).await?;
        if owed.is_empty() {
            return Ok(());
        }
        // Past the rule's count, everything waiting goes as one digest.
        let groups: Vec<&[Owed]> = if all > r.digest_after as usize && r.digest_after > 0 {
            vec![&owed[..]]
        } else {
            owed.chunks(1).collect()
        };
        for (i, group) in groups.iter().enumerate() {
            if started.elapsed() > SEND_BUDGET {
                break;
            }
            let events: Vec<_> = group
                .iter()
                .map(|o| (o.event.clone(), o.idempotency_key.clone()))
                .collect();
            let key = match group {
                [one] => one.idempotency_key.clone(),
                many => digest_key(many),
            };
            let message = channels::Message1 {
                events: &events,
                key,
            };
            let sent = channels::send(http, &r, &message, &self.public_url).await;
            let ids: Vec<String> = group.iter().map(|o| o.event.event_id.clone()).collect();
            let (store, name, me) = (
                self.store.clone(),
                rule.to_string(),
                self.coordinator.clone(),
            );
            match sent {
                Ok(()) => {
                    let how = if group.len() > 1 {
                        "digest"
                    } else {
                        "delivered"
                    };
                    blocking(move || {
                        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
                        store.delivered(&name, &ids, &me, how)
                    })
                    .await?;
                }
                Err(error) => {
                    // This one and every later one wait, in order.
                    let attempts = group.iter().map(|o| o.attempts).max().unwrap_or(0);
                    let next = now_ms() + backoff(attempts).as_millis() as i64;
                    tracing::warn!(rule = %rule, error = %error, retry_in_ms = next - now_ms(), "alert not delivered");
                    let rest: Vec<String> = groups[i..]
                        .iter()
                        .flat_map(|g| g.iter().map(|o| o.event.event_id.clone()))
                        .collect();
                    blocking(move || {
                        let ids: Vec<&str> = rest.iter().map(String::as_str).collect();
                        store.delivery_failed(&name, &ids, &me, &error, next)
                    })
                    .await?;
                    break;
                }
            }
        }
        Ok(())
    }
}

/// 1 s after the first failure, doubling, at most `MAX_BACKOFF`.
pub fn backoff(attempts: i64) -> Duration {
    let secs = 1u64 << attempts.clamp(0, 16);
    Duration::from_secs(secs).min(MAX_BACKOFF)
}

/// A digest's key: its events' keys in order, hashed — the same digest sent again has the
/// same key, and each event inside keeps its own.
fn digest_key(owed: &[Owed]) -> String {
    let mut h = Sha256::new();
    for o in owed {
        h.update(o.idempotency_key.as_bytes());
        h.update(b"\n");
    }
    format!("digest-{}", hex::encode(&h.finalize()[..16]))
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::Refused(format!("a store task failed: {e}")))?
}

fn said_once(said: &mut String, error: Option<StoreError>, what: &str) {
    match error {
        None => said.clear(),
        Some(e) => {
            let words = e.to_string();
            if words != *said {
                tracing::warn!(error = %words, "{what}; trying again");
                *said = words;
            }
        }
    }
}

/// The evidence key of a host offline while holding a plan of `campaign`.
fn offline_key(host: &str, campaign: &str) -> String {
    format!("host|{host}|{campaign}")
}

/// The evidence key of a connected host holding `campaign`'s steps because its journal
/// cannot be written.
fn journal_key(host: &str, campaign: &str) -> String {
    format!("host|{host}|journal|{campaign}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_a_second_to_five_minutes() {
        assert_eq!(backoff(0), Duration::from_secs(1));
        assert_eq!(backoff(1), Duration::from_secs(2));
        assert_eq!(backoff(5), Duration::from_secs(32));
        assert_eq!(backoff(9), MAX_BACKOFF);
        assert_eq!(backoff(1_000), MAX_BACKOFF);
    }
}
