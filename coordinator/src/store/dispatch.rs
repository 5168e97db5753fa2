//! Dispatch and cancel: which plan each host runs (at most one at a time, fleet-wide on a
//! shared store), marking plans sent, cancelling a campaign, and which plans are known,
//! waiting or cancelled.

use std::collections::HashSet;

use platter_proto::model::{CampaignId, HostName, Plan, PlanId};

use super::db::{self, Conn};
use super::error::{retrying_collisions, Result, StoreError};
use super::notify::Change;
use super::plans::{PlanParts, Plans, PLAN_COLUMNS, PLAN_FROM};
use super::Store;

/// What a host should run: the plan it has (sent or accepted), or its next queued one.
pub(super) enum Next {
    Active(Plan),
    Queued(PlanId, Plan),
}

impl Store {
    /// Of `plan_ids`, those this store never planned.
    pub fn unknown_plans(&self, plan_ids: &[PlanId]) -> Result<Vec<PlanId>> {
        self.read(|c| {
            let mut unknown = Vec::new();
            for id in plan_ids {
                if !c.exists("SELECT 1 FROM plans WHERE id = ?1", [id])? {
                    unknown.push(id.clone());
                }
            }
            Ok(unknown)
        })
    }

    /// The hosts that have plans queued, or sent and not yet accepted.
    pub fn hosts_with_waiting_plans(&self) -> Result<HashSet<HostName>> {
        self.read(|c| {
            let hosts = c.query_map(
                "SELECT DISTINCT host FROM plans WHERE state IN ('queued', 'sent')",
                (),
                |r| r.only(),
            )?;
            Ok(hosts.into_iter().collect())
        })
    }

    /// Of `plan_ids`, those cancelled.
    pub fn cancelled_plans(&self, plan_ids: &[PlanId]) -> Result<HashSet<PlanId>> {
        self.read(|c| {
            let mut out = HashSet::new();
            for id in plan_ids {
                if c.exists(
                    "SELECT 1 FROM plans WHERE id = ?1 AND state = 'cancelled'",
                    [id],
                )? {
                    out.insert(id.clone());
                }
            }
            Ok(out)
        })
    }

    /// The plan a host is running (sent or accepted), else the next queued one, marked sent.
    /// Returns the plan and whether it was newly dispatched.
    #[cfg(test)]
    pub fn plan_for_host(&self, host: &str) -> Result<Option<(Plan, bool)>> {
        let mut r = self.plans_for_hosts(&[HostName::from(host)])?;
        Ok(r.pop().map(|(_, plan, new)| (plan, new)))
    }

    /// Each host's plan: the one it is running (sent or accepted), else its next queued
    /// one, marked sent (then `true`: newly dispatched). Hosts with nothing to run are left
    /// out. One transaction for all: a fan-out to a thousand hosts is one commit, not a
    /// thousand (BENCHMARKS.md, fleet scale).
    pub fn plans_for_hosts(&self, hosts: &[HostName]) -> Result<Vec<(HostName, Plan, bool)>> {
        if hosts.is_empty() {
            return Ok(Vec::new());
        }
        let r = self.write(|c| {
            // Most dispatches change nothing (the host runs a plan already, or has none
            // queued): they are answered by reads and take no write lock.
            let read = c.read_transaction()?;
            if let Some(out) = Self::dispatch_pass(&read, hosts, false)? {
                return Ok(out);
            }
            drop(read);
            let tx = c.write_transaction()?;
            let out = Self::dispatch_pass(&tx, hosts, true)?.expect("a marking pass answers");
            tx.commit()?;
            Ok(out)
        })?;
        if r.iter().any(|(_, _, new)| *new) {
            self.bump();
        }
        Ok(r)
    }

    /// Each host's plan: the one it runs (not new), else its next queued one, marked sent
    /// when `mark` (new). Without `mark`, None as soon as a host has a queued plan: the
    /// caller must mark it under the write lock.
    fn dispatch_pass(
        c: &Conn,
        hosts: &[HostName],
        mark: bool,
    ) -> Result<Option<Vec<(HostName, Plan, bool)>>> {
        if let Some(pg) = c.as_postgres() {
            return Self::dispatch_pass_pg(pg, hosts, mark);
        }
        let mut out = Vec::new();
        // One reader for the pass: each template parsed once, however many hosts share it.
        let mut plans = Plans::default();
        for host in hosts {
            match Self::next_plan(c, &mut plans, host)? {
                Some(Next::Active(plan)) => out.push((host.clone(), plan, false)),
                Some(Next::Queued(id, plan)) if mark => {
                    c.execute("UPDATE plans SET state = 'sent' WHERE id = ?1", [&id])?;
                    out.push((host.clone(), plan, true));
                }
                Some(Next::Queued(..)) => return Ok(None),
                None => {}
            }
        }
        Ok(Some(out))
    }

    /// PostgreSQL: `dispatch_pass` in a few statements for all hosts at once, not a few
    /// round trips per host (a fan-out to 1,000 hosts took 1.6 s that way; BENCHMARKS.md).
    fn dispatch_pass_pg(
        pg: &db::pg::PgConn,
        hosts: &[HostName],
        mark: bool,
    ) -> Result<Option<Vec<(HostName, Plan, bool)>>> {
        let names: Vec<&str> = hosts.iter().map(HostName::as_str).collect();
        if mark {
            // Coordinators sharing a PostgreSQL store take turns per host, so a host runs
            // one plan at a time fleet-wide: the read below sees the plans another
            // coordinator's committed pass marked sent. Every pass takes its locks in the
            // order of their keys, so two passes over some of the same hosts wait for each
            // other rather than deadlock.
            pg.query_typed(
                "SELECT pg_advisory_xact_lock(k)
                   FROM (SELECT DISTINCT hashtext(h) AS k FROM unnest($1::text[]) AS h ORDER BY k) AS keys",
                &[&names],
            )?;
        }
        // Per host, the plan it runs, else its next queued one (false sorts first); then
        // the text of each template they name, once (joined to each host's row, a
        // fan-out to 100,000 hosts would carry it 100,000 times). Each template parsed
        // once, however many hosts share it.
        let rows = pg.query_typed(
            "SELECT DISTINCT ON (p.host) p.state = 'queued' AS queued, p.id, p.host, p.body, p.template, p.cells
               FROM plans p
              WHERE p.host = ANY($1::text[]) AND p.state IN ('sent', 'accepted', 'queued')
              ORDER BY p.host, p.state = 'queued', p.queued_seq",
            &[&names],
        )?;
        let mut found = Vec::with_capacity(rows.len());
        for row in &rows {
            let r = db::Row::pg(row);
            let queued: bool = r.get("queued")?;
            if queued && !mark {
                return Ok(None);
            }
            found.push((PlanParts::read(&r)?, queued));
        }
        let hashes: Vec<&str> = found
            .iter()
            .filter_map(|(parts, _)| parts.template())
            .collect::<std::collections::HashSet<_>>()
            .into_iter()
            .collect();
        let mut texts: std::collections::HashMap<String, String> = if hashes.is_empty() {
            Default::default()
        } else {
            pg.query_typed(
                "SELECT hash, body FROM plan_templates WHERE hash = ANY($1::text[])",
                &[&hashes],
            )?
            .iter()
            .map(|r| Ok((r.try_get("hash")?, r.try_get("body")?)))
            .collect::<Result<_>>()?
        };
        let mut plans = Plans::default();
        let mut next = std::collections::HashMap::new();
        for (parts, queued) in found {
            let plan = plans.assemble_from(parts, &mut texts)?;
            next.insert(plan.host.clone(), (plan, queued));
        }
        let mut out = Vec::with_capacity(next.len());
        let mut sent = Vec::new();
        for host in hosts {
            // A host named twice is answered once.
            let Some((plan, queued)) = next.remove(host) else {
                continue;
            };
            if queued {
                sent.push(plan.id.to_string());
            }
            out.push((host.clone(), plan, queued));
        }
        if !sent.is_empty() {
            // Only plans still queued: a cancel through another coordinator (which takes
            // no host lock) may have committed since the read; such a plan stays
            // cancelled and is not sent.
            let marked: std::collections::HashSet<String> = pg
                .query_typed(
                    "UPDATE plans SET state = 'sent' WHERE id = ANY($1::text[]) AND state = 'queued' RETURNING id",
                    &[&sent],
                )?
                .iter()
                .map(|r| r.try_get("id"))
                .collect::<std::result::Result<_, _>>()?;
            out.retain(|(_, plan, new): &(HostName, Plan, bool)| {
                !*new || marked.contains(plan.id.as_str())
            });
        }
        Ok(Some(out))
    }

    /// The plan `host` runs, else its next queued one; reads only.
    fn next_plan(c: &Conn, plans: &mut Plans, host: &str) -> Result<Option<Next>> {
        // Statements are cached per connection: a fan-out asks this once per host, and
        // preparing them anew was a third of its CPU (BENCHMARKS.md, fleet scale).
        let active = c.query_opt(
            &format!(
                "SELECT {PLAN_COLUMNS} FROM {PLAN_FROM}
                  WHERE p.host = ?1 AND p.state IN ('sent', 'accepted') ORDER BY p.queued_seq LIMIT 1"
            ),
            [host],
            |r| plans.read(r),
        )?;
        if let Some(plan) = active {
            return Ok(Some(Next::Active(plan)));
        }
        let next = c.query_opt(
            &format!(
                "SELECT {PLAN_COLUMNS} FROM {PLAN_FROM}
                  WHERE p.host = ?1 AND p.state = 'queued' ORDER BY p.queued_seq LIMIT 1"
            ),
            [host],
            |r| plans.read(r),
        )?;
        Ok(next.map(|plan| Next::Queued(plan.id.clone(), plan)))
    }

    /// Marks a campaign cancelled; queued plans will not be sent. Returns the plans that
    /// agents hold now (they must be told to stop).
    pub fn cancel_campaign(&self, campaign_id: &CampaignId) -> Result<Vec<(PlanId, HostName)>> {
        // The campaign's row, then its plans'; a record writer ending one of its plans
        // locks them the other way round: PostgreSQL fails one of the two, and if it is
        // this one, it is tried again rather than failing the operator's cancel.
        let r = self.write(|c| {
            retrying_collisions(
                || self.cancel_once(c, campaign_id),
                |e| {
                    self.retried
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::debug!(error = %e, "cancelling collided with a writer; trying again");
                },
            )
        })?;
        self.bump();
        Ok(r)
    }

    /// One try of `cancel_campaign`, a transaction of its own.
    fn cancel_once(&self, c: &Conn, campaign_id: &CampaignId) -> Result<Vec<(PlanId, HostName)>> {
        let tx = c.write_transaction()?;
        let n = tx.execute(
            "UPDATE campaigns SET state = 'cancelled' WHERE id = ?1 AND state = 'running'",
            [campaign_id],
        )?;
        if n == 0 {
            let exists: bool = tx.query_row(
                "SELECT COUNT(*) > 0 FROM campaigns WHERE id = ?1",
                [campaign_id],
                |r| r.only(),
            )?;
            if !exists {
                return Err(StoreError::NoCampaign(campaign_id.to_string()));
            }
        }
        let held = tx.query_map(
            "SELECT id, host FROM plans WHERE campaign_id = ?1 AND state IN ('sent', 'accepted')",
            [campaign_id],
            |r| Ok((r.get("id")?, r.get("host")?)),
        )?;
        // A plan sent but never accepted (it may never have arrived) no longer holds
        // its host: the agent is still told to cancel it, in case it holds it.
        tx.execute("UPDATE plans SET state = 'cancelled' WHERE campaign_id = ?1 AND state IN ('queued', 'sent')", [campaign_id])?;
        self.notify(&tx, Change::Plans)?;
        tx.commit()?;
        Ok(held)
    }
}
