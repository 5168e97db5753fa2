//! Conversions between domain types and the generated `platter.v1` types: the one place
//! where both meet. A message from the wire that lacks a required part is an error, not a
//! default.

use platter_proto::v1 as pb;

use crate::model::{
    OnFailure, Plan, Record, RecordKind, Sample, Step, StepEvent, StepKind, StepState,
};

#[derive(Debug, thiserror::Error)]
#[error("malformed {what}: {why}")]
pub struct WireError {
    what: &'static str,
    why: String,
}

fn malformed(what: &'static str, why: impl Into<String>) -> WireError {
    WireError {
        what,
        why: why.into(),
    }
}

impl From<&Plan> for pb::Plan {
    fn from(p: &Plan) -> Self {
        pb::Plan {
            id: p.id.clone(),
            campaign_id: p.campaign_id.clone(),
            campaign_name: p.campaign_name.clone(),
            host: p.host.clone(),
            steps: p.steps.iter().map(pb::Step::from).collect(),
            on_failure: match p.on_failure {
                OnFailure::Continue => pb::OnFailure::Continue,
                OnFailure::Abort => pb::OnFailure::Abort,
            } as i32,
        }
    }
}

impl From<&Step> for pb::Step {
    fn from(s: &Step) -> Self {
        use pb::step::Kind;
        let shell = |script: &String| pb::Shell {
            script: script.clone(),
        };
        let kind = match &s.kind {
            StepKind::Setup(c) => Kind::Setup(shell(c)),
            StepKind::Clean(c) => Kind::Clean(shell(c)),
            StepKind::Sync => Kind::Sync(pb::Empty {}),
            StepKind::DropCaches => Kind::DropCaches(pb::Empty {}),
            StepKind::Fstrim(p) => Kind::Fstrim(pb::Fstrim { path: p.clone() }),
            StepKind::Reboot => Kind::Reboot(pb::Empty {}),
            StepKind::Command(c) => Kind::Command(shell(c)),
            StepKind::Measure(c) => Kind::Measure(shell(c)),
        };
        pb::Step {
            index: s.index,
            cell_id: s.cell_id.clone(),
            repetition: s.repetition,
            kind: Some(kind),
        }
    }
}

impl TryFrom<pb::Plan> for Plan {
    type Error = WireError;
    fn try_from(p: pb::Plan) -> Result<Self, WireError> {
        let on_failure = match pb::OnFailure::try_from(p.on_failure) {
            Ok(pb::OnFailure::Abort) => OnFailure::Abort,
            Ok(pb::OnFailure::Continue) => OnFailure::Continue,
            _ => return Err(malformed("plan", format!("on_failure {}", p.on_failure))),
        };
        let steps = p
            .steps
            .into_iter()
            .map(Step::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        for (i, s) in steps.iter().enumerate() {
            if s.index as usize != i {
                return Err(malformed("plan", format!("step {i} has index {}", s.index)));
            }
        }
        Ok(Plan {
            id: p.id,
            campaign_id: p.campaign_id,
            campaign_name: p.campaign_name,
            host: p.host,
            steps,
            on_failure,
        })
    }
}

impl TryFrom<pb::Step> for Step {
    type Error = WireError;
    fn try_from(s: pb::Step) -> Result<Self, WireError> {
        use pb::step::Kind;
        let kind = match s.kind.ok_or_else(|| malformed("step", "no kind"))? {
            Kind::Setup(c) => StepKind::Setup(c.script),
            Kind::Clean(c) => StepKind::Clean(c.script),
            Kind::Sync(_) => StepKind::Sync,
            Kind::DropCaches(_) => StepKind::DropCaches,
            Kind::Fstrim(f) => StepKind::Fstrim(f.path),
            Kind::Reboot(_) => StepKind::Reboot,
            Kind::Command(c) => StepKind::Command(c.script),
            Kind::Measure(c) => StepKind::Measure(c.script),
        };
        Ok(Step {
            index: s.index,
            cell_id: s.cell_id,
            repetition: s.repetition,
            kind,
        })
    }
}

impl From<&Record> for pb::Record {
    fn from(r: &Record) -> Self {
        use pb::record::Kind;
        let kind = match &r.kind {
            RecordKind::PlanAccepted { plan_id } => Kind::PlanAccepted(pb::PlanAccepted {
                plan_id: plan_id.clone(),
            }),
            RecordKind::PlanFinished { plan_id, cancelled } => {
                Kind::PlanFinished(pb::PlanFinished {
                    plan_id: plan_id.clone(),
                    cancelled: *cancelled,
                })
            }
            RecordKind::Step(e) => Kind::Step(pb::StepEvent {
                plan_id: e.plan_id.clone(),
                step_index: e.step_index,
                cell_id: e.cell_id.clone(),
                repetition: e.repetition,
                attempt: e.attempt,
                state: match e.state {
                    StepState::Started => pb::StepState::Started,
                    StepState::Succeeded => pb::StepState::Succeeded,
                    StepState::Failed => pb::StepState::Failed,
                    StepState::Skipped => pb::StepState::Skipped,
                } as i32,
                started_unix_ns: e.started_unix_ns,
                finished_unix_ns: e.finished_unix_ns,
                exit_status: e.exit_status,
                stderr_tail: e.stderr_tail.clone(),
                error: e.error.clone(),
                kind: e.kind.clone(),
                samples: e
                    .samples
                    .iter()
                    .map(|s| pb::Sample {
                        metric: s.metric.clone(),
                        value: s.value,
                        unit: s.unit.clone(),
                        histogram: s.histogram.clone(),
                    })
                    .collect(),
            }),
        };
        pb::Record {
            seq: r.seq,
            kind: Some(kind),
        }
    }
}

impl TryFrom<pb::Record> for Record {
    type Error = WireError;
    fn try_from(r: pb::Record) -> Result<Self, WireError> {
        use pb::record::Kind;
        let kind = match r.kind.ok_or_else(|| malformed("record", "no kind"))? {
            Kind::PlanAccepted(a) => RecordKind::PlanAccepted { plan_id: a.plan_id },
            Kind::PlanFinished(f) => RecordKind::PlanFinished {
                plan_id: f.plan_id,
                cancelled: f.cancelled,
            },
            Kind::Step(e) => {
                let state = match pb::StepState::try_from(e.state) {
                    Ok(pb::StepState::Started) => StepState::Started,
                    Ok(pb::StepState::Succeeded) => StepState::Succeeded,
                    Ok(pb::StepState::Failed) => StepState::Failed,
                    Ok(pb::StepState::Skipped) => StepState::Skipped,
                    _ => return Err(malformed("step event", format!("state {}", e.state))),
                };
                RecordKind::Step(StepEvent {
                    plan_id: e.plan_id,
                    kind: e.kind,
                    step_index: e.step_index,
                    cell_id: e.cell_id,
                    repetition: e.repetition,
                    attempt: e.attempt,
                    state,
                    started_unix_ns: e.started_unix_ns,
                    finished_unix_ns: e.finished_unix_ns,
                    exit_status: e.exit_status,
                    stderr_tail: e.stderr_tail,
                    error: e.error,
                    samples: e
                        .samples
                        .into_iter()
                        .map(|s| Sample {
                            metric: s.metric,
                            value: s.value,
                            unit: s.unit,
                            histogram: s.histogram,
                        })
                        .collect(),
                })
            }
        };
        if r.seq == 0 {
            return Err(malformed("record", "sequence number 0"));
        }
        Ok(Record { seq: r.seq, kind })
    }
}
