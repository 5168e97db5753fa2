//! Queueing a plan: the row a submission or the writer's next round inserts.

use platter_proto::model::Plan;

use super::db::{params, Conn};
use super::error::Result;

/// The indexes of `plan`'s warm-up steps (stored with the plan, so the writer marks
/// their steps).
pub(super) fn warmup_steps(plan: &Plan) -> Vec<u32> {
    plan.steps
        .iter()
        .filter(|s| s.warmup)
        .map(|s| s.index)
        .collect()
}

/// Queues `plan` after every plan queued so far.
pub(crate) fn queue_plan(c: &Conn, plan: &Plan) -> Result<()> {
    let seq: i64 = c.query_row("SELECT COALESCE(MAX(queued_seq), 0) FROM plans", (), |r| {
        r.get(0)
    })?;
    let warmup = warmup_steps(plan);
    c.execute(
        "INSERT OR IGNORE INTO plans (id, campaign_id, host, body, steps_total, state, queued_seq, warmup_steps)
         VALUES (?1, ?2, ?3, ?4, ?5, 'queued', ?6, ?7)",
        params![
        plan.id,
        plan.campaign_id,
        plan.host,
        serde_json::to_string(plan)?,
        plan.steps.len() as i64,
        seq + 1,
        serde_json::to_string(&warmup)?
        ],
    )?;
    Ok(())
}
