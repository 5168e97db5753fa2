//! Queueing a plan (the rows a submission or the writer's next round inserts) and reading
//! plans back.
//!
//! A fleet-wide campaign gives most hosts the same steps: what differs from host to host is
//! the plan's id, its host and its cells' ids. The store keeps the rest once per campaign,
//! as a template (`plan_templates`, keyed by the hash of its text, the cells named by
//! their position), and each plan row names its template and lists its cells
//! (`plans.template`, `plans.cells`): a campaign for 100,000 identical hosts stores its
//! steps once, and a report over it parses them once. A plan stays one row per host, with
//! its own id and state, so dispatch and the journal stay exactly-once per host. Plans
//! stored whole before templates (`plans.body`, `template` NULL) are read as they are.

use std::collections::HashMap;

use platter_proto::model::{CampaignId, CellId, Plan, PlanId};
use sha2::{Digest, Sha256};

use super::db::{params, Conn, Row};
use super::error::{Result, StoreError};

/// The indexes of `plan`'s warm-up steps (stored with the plan, so the writer marks
/// their steps).
pub(super) fn warmup_steps(plan: &Plan) -> Vec<u32> {
    plan.steps
        .iter()
        .filter(|s| s.warmup)
        .map(|s| s.index)
        .collect()
}

/// A plan as the store keeps it: the template every identical host shares and this
/// plan's cells, in the order the template numbers them.
pub(super) struct Split {
    /// Hex SHA-256 of `template`.
    pub hash: String,
    /// JSON of the plan with an empty id and host and each cell id replaced by its
    /// position in `cells` ("0", "1", …).
    pub template: String,
    /// JSON list of the plan's cell ids.
    pub cells: String,
}

/// Splits `plan` into its template and its own cells (`join` puts them back).
pub(super) fn split(plan: &Plan) -> Result<Split> {
    let mut cells: Vec<&CellId> = Vec::new();
    let mut position: HashMap<&CellId, usize> = HashMap::new();
    for c in plan
        .steps
        .iter()
        .map(|s| &s.cell_id)
        .chain(plan.run_as.keys())
    {
        position.entry(c).or_insert_with(|| {
            cells.push(c);
            cells.len() - 1
        });
    }
    let slot = |c: &CellId| CellId::from(position[c].to_string());
    let mut steps = plan.steps.clone();
    for step in &mut steps {
        step.cell_id = slot(&step.cell_id);
    }
    let run_as = plan
        .run_as
        .iter()
        .map(|(c, r)| (slot(c), r.clone()))
        .collect();
    let template = Plan {
        id: PlanId::from(""),
        campaign_id: plan.campaign_id.clone(),
        campaign_name: plan.campaign_name.clone(),
        host: "".into(),
        steps,
        on_failure: plan.on_failure,
        run_as,
    };
    let template = serde_json::to_string(&template)?;
    Ok(Split {
        hash: hex::encode(Sha256::digest(template.as_bytes())),
        template,
        cells: serde_json::to_string(&cells)?,
    })
}

/// The plan `id` of `host` from its template and its cells (`split`'s inverse).
fn join(template: &Plan, id: &str, host: &str, cells: &[CellId]) -> Result<Plan> {
    let cell = |c: &CellId| -> Result<CellId> {
        c.as_str()
            .parse::<usize>()
            .ok()
            .and_then(|k| cells.get(k))
            .cloned()
            .ok_or_else(|| {
                StoreError::Decode(format!(
                    "plan {id}: its template names cell {c}, its row lists {} cell(s)",
                    cells.len()
                ))
            })
    };
    let mut plan = template.clone();
    plan.id = PlanId::from(id);
    plan.host = host.into();
    for step in &mut plan.steps {
        step.cell_id = cell(&step.cell_id)?;
    }
    plan.run_as = template
        .run_as
        .iter()
        .map(|(c, r)| Ok((cell(c)?, r.clone())))
        .collect::<Result<_>>()?;
    Ok(plan)
}

/// The columns `Plans::read` reads, from `PLAN_FROM`.
pub(super) const PLAN_COLUMNS: &str =
    "p.id, p.host, p.body, p.template, p.cells, t.body AS template_body";
/// Plans with their templates: `FROM {PLAN_FROM} WHERE …` (plans are `p`).
pub(super) const PLAN_FROM: &str = "plans p LEFT JOIN plan_templates t ON t.hash = p.template";

/// Reads plans from rows of `PLAN_COLUMNS`, each template parsed once.
#[derive(Default)]
pub(super) struct Plans {
    templates: HashMap<String, Plan>,
}

/// A plan's columns as read, not yet parsed (`Plans::assemble`): what a reader takes off
/// the connection to parse elsewhere, on another thread or later.
pub(super) struct PlanParts {
    id: String,
    host: String,
    /// The plan's text, when it was stored whole (no template).
    body: String,
    /// The template's hash, and the plan's cells as JSON.
    template: Option<(String, String)>,
    /// The template's text, for the first plan read that names it.
    template_body: Option<String>,
}

impl Plans {
    /// The plan in `r`'s columns `PLAN_COLUMNS`.
    pub fn read(&mut self, r: &Row<'_>) -> Result<Plan> {
        let mut parts = PlanParts::read(r)?;
        // The template's text is read off the row only while it is not parsed yet.
        let parsed = |hash: &str| self.templates.contains_key(hash);
        if parts.template().is_some_and(|hash| !parsed(hash)) {
            parts.template_body = r.get("template_body")?;
        }
        self.assemble(parts)
    }

    /// The plan `parts` hold, its template's text taken from `texts` (by hash) for the
    /// first plan that names it, which parses it.
    pub fn assemble_from(
        &mut self,
        parts: PlanParts,
        texts: &mut HashMap<String, String>,
    ) -> Result<Plan> {
        let text = parts.template().and_then(|h| texts.remove(h));
        self.assemble(parts.with_template_text(text))
    }

    /// The plan `parts` hold, its template parsed if this reader has not yet.
    pub fn assemble(&mut self, parts: PlanParts) -> Result<Plan> {
        let PlanParts {
            id,
            host,
            body,
            template,
            template_body,
        } = parts;
        let Some((hash, cells)) = template else {
            return Ok(serde_json::from_str(&body)?);
        };
        let cells: Vec<CellId> = serde_json::from_str(&cells)?;
        if !self.templates.contains_key(&hash) {
            let text = template_body.ok_or_else(|| {
                StoreError::Decode(format!("plan {id}: no template {hash} in the store"))
            })?;
            self.templates
                .insert(hash.clone(), serde_json::from_str(&text)?);
        }
        join(&self.templates[&hash], &id, &host, &cells)
    }
}

impl PlanParts {
    /// The columns of `r` that `PLAN_COLUMNS` names but the template's text, which is
    /// read once per template (`Plans::read`, `CampaignPlans`): `id`, `host`, `body`,
    /// `template`, `cells`.
    pub fn read(r: &Row<'_>) -> Result<PlanParts> {
        let id: String = r.get("id")?;
        let host: String = r.get("host")?;
        let Some(hash) = r.get::<Option<String>>("template")? else {
            return Ok(PlanParts {
                id,
                host,
                body: r.get("body")?,
                template: None,
                template_body: None,
            });
        };
        Ok(PlanParts {
            id,
            host,
            body: String::new(),
            template: Some((hash, r.get("cells")?)),
            template_body: None,
        })
    }

    /// The hash of the template the plan names, if it has one.
    pub fn template(&self) -> Option<&str> {
        self.template.as_ref().map(|(hash, _)| hash.as_str())
    }

    /// These parts with their template's text, read apart (`None` keeps what they have).
    pub fn with_template_text(mut self, text: Option<String>) -> PlanParts {
        if text.is_some() {
            self.template_body = text;
        }
        self
    }
}

/// A campaign's plans as read, not yet parsed (`parse`): the plan rows without their
/// templates' text, then each template's text once. (A campaign on 100,000 identical
/// hosts has one template; joined to every plan row, its text would come 100,000 times.)
pub struct CampaignPlans {
    /// Each plan's parts, and whether its agent refused it.
    plans: Vec<(bool, PlanParts)>,
    /// The text of each template the plans name, by hash.
    templates: HashMap<String, String>,
}

impl CampaignPlans {
    pub fn read(c: &Conn, campaign_id: &CampaignId) -> Result<CampaignPlans> {
        let plans = c.query_map(
            "SELECT p.state, p.id, p.host, p.body, p.template, p.cells FROM plans p WHERE p.campaign_id = ?1",
            [campaign_id],
            |r| Ok((r.text("state", |state| state == "refused")?, PlanParts::read(r)?)),
        )?;
        let templates = c
            .query_map(
                "SELECT t.hash, t.body FROM plan_templates t
                  WHERE t.hash IN (SELECT p.template FROM plans p WHERE p.campaign_id = ?1)",
                [campaign_id],
                |r| Ok((r.get::<String>("hash")?, r.get::<String>("body")?)),
            )?
            .into_iter()
            .collect();
        Ok(CampaignPlans { plans, templates })
    }

    /// The plans whose id `keep` keeps, as sent, each with whether its agent refused it;
    /// each template parsed once.
    pub fn parse(mut self, keep: impl Fn(&str) -> bool) -> Result<Vec<(bool, Plan)>> {
        let mut plans = Plans::default();
        self.plans
            .into_iter()
            .filter(|(_, parts)| keep(&parts.id))
            .map(|(refused, parts)| Ok((refused, plans.assemble_from(parts, &mut self.templates)?)))
            .collect()
    }
}

/// Queues `plan` after every plan queued so far.
pub(crate) fn queue_plan(c: &Conn, plan: &Plan) -> Result<()> {
    let seq: i64 = c.query_row("SELECT COALESCE(MAX(queued_seq), 0) FROM plans", (), |r| {
        r.only()
    })?;
    let warmup = warmup_steps(plan);
    let s = split(plan)?;
    c.execute(
        "INSERT INTO plan_templates (hash, body) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
        params![s.hash, s.template],
    )?;
    c.execute(
        "INSERT OR IGNORE INTO plans (id, campaign_id, host, body, template, cells, steps_total, state, queued_seq, warmup_steps)
         VALUES (?1, ?2, ?3, '', ?4, ?5, ?6, 'queued', ?7, ?8)",
        params![
        plan.id,
        plan.campaign_id,
        plan.host,
        s.hash,
        s.cells,
        plan.steps.len() as i64,
        seq + 1,
        serde_json::to_string(&warmup)?
        ],
    )?;
    Ok(())
}

/// Moves every other plan queued on `plan`'s host after it (keeping their order), so the
/// host runs it next. Queue numbers order plans per host only, so moving those of one host
/// changes no other host's order.
pub(crate) fn put_ahead(c: &Conn, plan: &Plan) -> Result<()> {
    let seq: i64 = c.query_row(
        "SELECT queued_seq FROM plans WHERE id = ?1",
        [&plan.id],
        |r| r.only(),
    )?;
    let first: Option<i64> = c.query_row(
        "SELECT MIN(queued_seq) AS first FROM plans WHERE host = ?1 AND state = 'queued' AND id != ?2",
        params![plan.host, plan.id],
        |r| r.only(),
    )?;
    if let Some(first) = first.filter(|f| *f <= seq) {
        c.execute(
            "UPDATE plans SET queued_seq = queued_seq + ?3 WHERE host = ?1 AND state = 'queued' AND id != ?2",
            params![plan.host, plan.id, seq + 1 - first],
        )?;
    }
    Ok(())
}

/// Plan `plan_id` as it was sent.
pub(super) fn plan_by_id(c: &Conn, plan_id: &PlanId) -> Result<Plan> {
    Plans::default().by_id(c, plan_id)
}

impl Plans {
    /// Plan `plan_id` as it was sent, its template parsed only if this reader has not yet.
    pub fn by_id(&mut self, c: &Conn, plan_id: &PlanId) -> Result<Plan> {
        c.query_opt(
            &format!("SELECT {PLAN_COLUMNS} FROM {PLAN_FROM} WHERE p.id = ?1"),
            [plan_id],
            |r| self.read(r),
        )?
        .ok_or(StoreError::NoRows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use platter_proto::model::{OnFailure, RunAs, Step, StepKind};

    fn plan(id: &str, host: &str, cells: &[&str]) -> Plan {
        let steps = cells
            .iter()
            .chain(cells.iter())
            .enumerate()
            .map(|(i, c)| Step {
                index: i as u32,
                cell_id: CellId::from(*c),
                repetition: 1,
                warmup: false,
                kind: StepKind::Sync,
            })
            .collect();
        Plan {
            id: PlanId::from(id),
            campaign_id: "c-1-s".into(),
            campaign_name: "fleet".into(),
            host: host.into(),
            steps,
            on_failure: OnFailure::Continue,
            run_as: [(
                CellId::from(cells[1]),
                RunAs {
                    user: "bench".into(),
                    home: String::new(),
                },
            )]
            .into(),
        }
    }

    #[test]
    fn hosts_with_the_same_steps_share_one_template_and_get_their_own_plan_back() {
        let a = plan("pa", "rc66", &["c1", "c2"]);
        let b = plan("pb", "flygecko", &["d1", "d2"]);
        let (sa, sb) = (split(&a).unwrap(), split(&b).unwrap());
        assert_eq!(sa.hash, sb.hash);
        assert_eq!(sa.template, sb.template);
        assert!(!sa.template.contains("rc66") && !sa.template.contains("c1"));
        assert_eq!(sa.cells, r#"["c1","c2"]"#);
        let t: Plan = serde_json::from_str(&sa.template).unwrap();
        let cells: Vec<CellId> = serde_json::from_str(&sb.cells).unwrap();
        assert_eq!(join(&t, "pb", "flygecko", &cells).unwrap(), b);
        // Different steps, different template.
        let c = plan("pc", "rc66", &["c1", "c2", "c3"]);
        assert_ne!(split(&c).unwrap().hash, sa.hash);
    }

    #[test]
    fn a_row_listing_too_few_cells_is_refused_not_guessed() {
        let a = plan("pa", "rc66", &["c1", "c2"]);
        let t: Plan = serde_json::from_str(&split(&a).unwrap().template).unwrap();
        let e = join(&t, "pa", "rc66", &[CellId::from("c1")]).unwrap_err();
        assert!(e.to_string().contains("names cell 1"), "{e}");
    }
}
