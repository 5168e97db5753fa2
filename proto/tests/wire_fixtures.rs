//! The wire contract, held by what earlier builds sent (COMPATIBILITY.md).
//!
//! `fixtures/wire/<contract>-<yyyy>-<mm>/NAME.bin` are messages as a build of that month
//! encoded them: the agent's stream (hello, heartbeat, inventory, each kind of record), the
//! coordinator's (plan, ack, cancel), and the Control service's requests and answers. Every
//! directory is read by every later build, which must
//!   (a) decode each message with today's generated types,
//!   (b) encode it again to the same bytes — prost drops a field it does not know, so a
//!       field renumbered (or removed without a `reserved` number) changes them, and one
//!       retyped fails to decode — and find no field it does not know when the message is
//!       read by today's descriptors (protox, from the .proto files);
//!   (c) accept it through the same conversions the receiver uses (`platter_proto::wire`,
//!       as the coordinator's `rpc` and the agent's `link` call them), with the key facts
//!       it was recorded with.
//!
//! `fixtures/fields.txt` lists every message, field (number and type), enum value and RPC
//! of the .proto files; a listed one may not disappear (unless its number is `reserved`),
//! be renumbered or retyped. New ones are recorded with `PLATTER_UPDATE_FIXTURES=1`.
//!
//! Fixtures are written only with `PLATTER_UPDATE_FIXTURES=1`, only into `CURRENT`, and
//! only where missing: an existing fixture is never rewritten (a changed fixture is a
//! broken contract). After an incompatible-looking but deliberate change, name a new
//! `CURRENT` directory and record it; the old directories stay and keep being read.

// Every message built here ends with `..Default::default()`, so a field added to the
// .proto files later does not stop this file from compiling (even where it lists every field).
#![allow(clippy::needless_update)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use platter_proto::inventory::{
    Device, Partition, ToolVersion, Transport, WriteCache, CACHE_SOURCE_QUEUE, CACHE_SOURCE_SCSI,
};
use platter_proto::model::{
    Encryption, Filesystem, FsyncParams, OnFailure, Plan, Record, RecordKind, RunAs, Sample, Step,
    StepEvent, StepKind, StepState, StorageConfig, SyncMode, Tool, Workload, WriteCacheSetting,
};
use platter_proto::provenance::{
    DeviceFacts, DriveHealth, HealthReading, HostFacts, MountFacts, Provenance, StorageFacts,
    AT_STORAGE_SETUP, TICK_ACCOUNTING,
};
use platter_proto::v1 as pb;
use prost::Message;
use protox::prost_reflect::{
    DescriptorPool, DynamicMessage, Kind, MessageDescriptor, ReflectMessage, Value,
};

/// The directory this build records its fixtures into: the contract's package and the
/// month. A later build that wants fixtures of its own (new fields worth holding) names a
/// new directory here; every directory is read regardless.
const CURRENT: &str = "v1-2026-12";

const UPDATE: &str = "PLATTER_UPDATE_FIXTURES";

fn updating() -> bool {
    std::env::var(UPDATE).is_ok_and(|v| v == "1")
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Today's .proto files, compiled as `build.rs` compiles them.
fn pool() -> DescriptorPool {
    protox::Compiler::new([env!("CARGO_MANIFEST_DIR")])
        .expect("the proto include directory")
        .include_imports(true)
        .open_files(["platter/v1/agent_link.proto", "platter/v1/control.proto"])
        .expect("the .proto files compile")
        .descriptor_pool()
}

/// Today's .proto files with `from` replaced by `to` in `file`: a later build's contract,
/// made here to show that the checks catch what they are for.
fn edited_pool(file: &'static str, from: &'static str, to: &'static str) -> DescriptorPool {
    struct Edited {
        file: &'static str,
        from: &'static str,
        to: &'static str,
    }
    impl protox::file::FileResolver for Edited {
        fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(name);
            let mut text =
                std::fs::read_to_string(path).map_err(|_| protox::Error::file_not_found(name))?;
            if name == self.file {
                assert!(text.contains(self.from), "{name} has no `{}`", self.from);
                text = text.replacen(self.from, self.to, 1);
            }
            protox::file::File::from_source(name, &text)
        }
    }
    protox::Compiler::with_file_resolver(Edited { file, from, to })
        .include_imports(true)
        .open_files(["platter/v1/agent_link.proto", "platter/v1/control.proto"])
        .expect("the edited .proto files compile")
        .descriptor_pool()
}

// ---------------------------------------------------------------------------------------
// The fixtures: what each file holds, how this build makes it, and what a receiver must
// find in it.

type Check = Box<dyn Fn(&[u8], &DescriptorPool) -> Result<(), String>>;

struct Fixture {
    /// The file's name without `.bin`.
    name: &'static str,
    make: Box<dyn Fn() -> Vec<u8>>,
    check: Check,
}

/// A fixture holding one `M` (the proto message `full_name`), made by `make` and accepted
/// by `accept` once it has decoded and re-encoded unchanged.
fn fixture<M: Message + Default + 'static>(
    name: &'static str,
    full_name: &'static str,
    make: fn() -> M,
    accept: fn(M) -> Result<(), String>,
) -> Fixture {
    Fixture {
        name,
        make: Box::new(move || make().encode_to_vec()),
        check: Box::new(move |bytes, pool| {
            let m: M = unchanged(bytes, full_name, pool)?;
            accept(m)
        }),
    }
}

/// (a) and (b): `bytes` decoded with today's generated `M`, encoded again to the same bytes,
/// and nothing in them that today's descriptors (of `pool`) do not name — except fields
/// retired properly, whose numbers are `reserved` now.
fn unchanged<M: Message + Default>(
    bytes: &[u8],
    full_name: &str,
    pool: &DescriptorPool,
) -> Result<M, String> {
    let m = M::decode(bytes)
        .map_err(|e| format!("does not decode as today's {full_name} (a field retyped?): {e}"))?;
    let desc = pool
        .get_message_by_name(full_name)
        .ok_or_else(|| format!("message {full_name} is gone from the .proto files"))?;
    let mut dynamic = DynamicMessage::decode(desc.clone(), bytes).map_err(|e| {
        format!("does not decode by today's descriptor of {full_name} (a field retyped?): {e}")
    })?;
    let mut unknown = Vec::new();
    take_unknown_fields(&mut dynamic, full_name, &mut unknown);
    if !unknown.is_empty() {
        return Err(format!(
            "holds fields today's {full_name} does not know (renumbered, or removed without \
             reserving the number): {}",
            unknown.join(", ")
        ));
    }
    let again = m.encode_to_vec();
    if again != bytes {
        // Other bytes are allowed only where nothing but the order of a map's entries differs
        // (prost keeps maps in a HashMap) or a retired field was dropped: read both by
        // descriptor, where maps compare as maps.
        let reread = DynamicMessage::decode(desc, &again[..]).map_err(|e| e.to_string())?;
        if reread != dynamic {
            return Err(format!(
                "encodes again to other bytes ({} → {}): today's {full_name} lost or changed \
                 part of it",
                bytes.len(),
                again.len()
            ));
        }
    }
    Ok(m)
}

/// Takes the fields the descriptor does not name out of `m` and the messages in it; those
/// whose numbers are not `reserved` are named in `out`, by path.
fn take_unknown_fields(m: &mut DynamicMessage, path: &str, out: &mut Vec<String>) {
    let desc = m.descriptor();
    let numbers: Vec<u32> = m.take_unknown_fields().map(|u| u.number()).collect();
    for n in numbers {
        if !desc.reserved_ranges().any(|r| r.contains(&n)) {
            out.push(format!("{path} field number {n}"));
        }
    }
    for (field, value) in m.fields_mut() {
        let path = format!("{path}.{}", field.name());
        let mut visit = |v: &mut Value| {
            if let Value::Message(inner) = v {
                take_unknown_fields(inner, &path, out);
            }
        };
        match value {
            Value::List(items) => items.iter_mut().for_each(&mut visit),
            Value::Map(entries) => entries.values_mut().for_each(&mut visit),
            v => visit(v),
        }
    }
}

fn want<T: PartialEq + std::fmt::Debug>(what: &str, got: T, expected: T) -> Result<(), String> {
    if got == expected {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, recorded {expected:?}"))
    }
}

fn all() -> Vec<Fixture> {
    use pb::agent_message::Kind as A;
    use pb::coordinator_message::Kind as C;
    vec![
        // The agent's stream.
        fixture(
            "agent_hello",
            "platter.v1.AgentMessage",
            make_hello,
            accept_hello,
        ),
        fixture(
            "agent_heartbeat",
            "platter.v1.AgentMessage",
            || agent_message(A::Heartbeat(heartbeat())),
            |m| match m.kind {
                Some(A::Heartbeat(h)) => {
                    want("plan", h.current_plan_id.as_str(), PLAN_ID)?;
                    want("step", h.current_step_index, 8)?;
                    want(
                        "journal fault",
                        h.journal_fault.contains("No space left on device"),
                        true,
                    )
                }
                other => Err(format!("not a heartbeat: {other:?}")),
            },
        ),
        fixture(
            "agent_inventory",
            "platter.v1.AgentMessage",
            || {
                agent_message(A::Inventory(pb::Inventory {
                    devices: devices().iter().map(pb::Device::from).collect(),
                    tools: tools().iter().map(pb::ToolVersion::from).collect(),
                    ..Default::default()
                }))
            },
            |m| match m.kind {
                Some(A::Inventory(inv)) => {
                    let devices: Vec<Device> = inv.devices.into_iter().map(Device::from).collect();
                    accept_devices(&devices)?;
                    let tools: Vec<ToolVersion> =
                        inv.tools.into_iter().map(ToolVersion::from).collect();
                    accept_tools(&tools)
                }
                other => Err(format!("not an inventory: {other:?}")),
            },
        ),
        record_fixture("agent_record_plan_accepted", plan_accepted, |r| {
            match r.kind {
                RecordKind::PlanAccepted { plan_id } => want("plan", plan_id.as_str(), PLAN_ID),
                other => Err(format!("not a plan accepted: {other:?}")),
            }
        }),
        record_fixture("agent_record_provenance", provenance, accept_provenance),
        record_fixture("agent_record_step_started", step_started, |r| {
            let e = step_event(r)?;
            want("state", e.state, StepState::Started)?;
            want("step", e.step_index, 8)?;
            want("kind", e.kind.as_str(), "measure")?;
            want("samples", e.samples.len(), 0)
        }),
        record_fixture("agent_record_step_fsync", step_fsync, accept_step_fsync),
        record_fixture("agent_record_step_command", step_command, |r| {
            let e = step_event(r)?;
            want("state", e.state, StepState::Succeeded)?;
            want("exit status", e.exit_status, 0)?;
            let metrics: Vec<&str> = e.samples.iter().map(|s| s.metric.as_str()).collect();
            want("metrics", metrics, vec!["wall", "user", "sys", "max_rss"])?;
            want("wall", e.samples[0].value, 41.873_905_112)?;
            want("max_rss unit", e.samples[3].unit.as_str(), "B")
        }),
        record_fixture("agent_record_step_tool", step_tool, |r| {
            let e = step_event(r)?;
            want("state", e.state, StepState::Succeeded)?;
            let missing: Vec<&str> = e
                .samples
                .iter()
                .filter(|s| !s.missing.is_empty())
                .map(|s| s.metric.as_str())
                .collect();
            want("missing", missing, vec!["seq_create.per_s"])?;
            want("write iops", e.samples[0].value, 18_234.5)
        }),
        record_fixture("agent_record_step_failed", step_failed, |r| {
            let e = step_event(r)?;
            want("state", e.state, StepState::Failed)?;
            want("exit status", e.exit_status, 2)?;
            want("attempt", e.attempt, 2)?;
            want(
                "stderr",
                e.stderr_tail.contains("No rule to make target"),
                true,
            )?;
            want("error", e.error.as_str(), "exit status 2")
        }),
        record_fixture("agent_record_step_skipped", step_skipped, |r| {
            let e = step_event(r)?;
            want("state", e.state, StepState::Skipped)?;
            want("error", e.error.as_str(), "the plan was cancelled")
        }),
        record_fixture("agent_record_plan_finished", plan_finished, |r| {
            match r.kind {
                RecordKind::PlanFinished { plan_id, cancelled } => {
                    want("plan", plan_id.as_str(), PLAN_ID)?;
                    want("cancelled", cancelled, false)
                }
                other => Err(format!("not a plan finished: {other:?}")),
            }
        }),
        record_fixture("agent_record_plan_refused", plan_refused, |r| {
            match r.kind {
                RecordKind::PlanRefused { plan_id, reason } => {
                    want("plan", plan_id.as_str(), OTHER_PLAN_ID)?;
                    want("reason", reason.contains("holds /"), true)
                }
                other => Err(format!("not a plan refused: {other:?}")),
            }
        }),
        // The coordinator's stream.
        fixture(
            "coordinator_plan",
            "platter.v1.CoordinatorMessage",
            || coordinator_message(C::Plan(pb::Plan::from(&plan()))),
            |m| match m.kind {
                Some(C::Plan(p)) => accept_plan(Plan::try_from(p).map_err(|e| e.to_string())?),
                other => Err(format!("not a plan: {other:?}")),
            },
        ),
        fixture(
            "coordinator_ack",
            "platter.v1.CoordinatorMessage",
            || {
                coordinator_message(C::Ack(pb::Ack {
                    seq: 50,
                    refused: vec![pb::RefusedRecord {
                        seq: 50,
                        reason: "plan 0c95a2e1d37f4b68 was never made by this store".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                }))
            },
            |m| match m.kind {
                Some(C::Ack(a)) => {
                    want("seq", a.seq, 50)?;
                    want("refused", a.refused.len(), 1)?;
                    want("refused seq", a.refused[0].seq, 50)
                }
                other => Err(format!("not an ack: {other:?}")),
            },
        ),
        fixture(
            "coordinator_cancel",
            "platter.v1.CoordinatorMessage",
            || {
                coordinator_message(C::Cancel(pb::Cancel {
                    plan_id: PLAN_ID.into(),
                    ..Default::default()
                }))
            },
            |m| match m.kind {
                Some(C::Cancel(c)) => want("plan", c.plan_id.as_str(), PLAN_ID),
                other => Err(format!("not a cancel: {other:?}")),
            },
        ),
        // The Control service: requests as operators' CLIs send them, answers as
        // coordinators give them.
        fixture(
            "submit_request",
            "platter.v1.SubmitRequest",
            submit_request,
            |r| {
                want("file", r.file_name.as_str(), "nightly-fsync.yaml")?;
                want("yaml", r.yaml.contains("fdatasync"), true)?;
                want("local host", r.local_host.as_str(), "rc66")?;
                want("resume", r.resume, true)
            },
        ),
        fixture(
            "submit_response",
            "platter.v1.SubmitResponse",
            || pb::SubmitResponse {
                campaign_id: CAMPAIGN_ID.into(),
                resumed: true,
                ..Default::default()
            },
            |r| {
                want("campaign", r.campaign_id.as_str(), CAMPAIGN_ID)?;
                want("resumed", r.resumed, true)
            },
        ),
        fixture(
            "get_campaign_request",
            "platter.v1.GetCampaignRequest",
            || pb::GetCampaignRequest {
                campaign_id: CAMPAIGN_ID.into(),
                ..Default::default()
            },
            |r| want("campaign", r.campaign_id.as_str(), CAMPAIGN_ID),
        ),
        fixture(
            "campaign_status",
            "platter.v1.CampaignStatus",
            campaign_status,
            accept_campaign_status,
        ),
        fixture(
            "list_campaigns_response",
            "platter.v1.ListCampaignsResponse",
            || pb::ListCampaignsResponse {
                campaigns: vec![campaign_status(), finished_campaign()],
                store_fault: Some(store_fault()),
                ..Default::default()
            },
            |r| {
                want("campaigns", r.campaigns.len(), 2)?;
                accept_campaign_status(r.campaigns[0].clone())?;
                want(
                    "second state",
                    r.campaigns[1].state(),
                    pb::CampaignState::Done,
                )?;
                want(
                    "store fault",
                    r.store_fault.map(|f| f.not_answering),
                    Some(false),
                )
            },
        ),
        fixture(
            "list_agents_request",
            "platter.v1.ListAgentsRequest",
            || pb::ListAgentsRequest {
                state: "busy".into(),
                r#match: "INTEL SSDSC2BW120A4".into(),
                limit: 50,
                ..Default::default()
            },
            |r| {
                want("state", r.state.as_str(), "busy")?;
                want("match", r.r#match.as_str(), "INTEL SSDSC2BW120A4")?;
                want("limit", r.limit, 50)
            },
        ),
        fixture(
            "list_agents_response",
            "platter.v1.ListAgentsResponse",
            list_agents_response,
            accept_list_agents,
        ),
        fixture(
            "report_request",
            "platter.v1.ReportRequest",
            || pb::ReportRequest {
                campaign_id: CAMPAIGN_ID.into(),
                format: "json".into(),
                ..Default::default()
            },
            |r| {
                want("campaign", r.campaign_id.as_str(), CAMPAIGN_ID)?;
                want("format", r.format.as_str(), "json")
            },
        ),
        fixture(
            "report_response",
            "platter.v1.ReportResponse",
            || pb::ReportResponse {
                rendered: REPORT_TABLE.into(),
                steps_failed: 1,
                plans_refused: 0,
                qualification_failed: true,
                measurements_missing: 2,
                comparisons_not_made: 1,
                ..Default::default()
            },
            |r| {
                want("rendered", r.rendered.contains("latency.p99"), true)?;
                want("steps failed", r.steps_failed, 1)?;
                want("qualification failed", r.qualification_failed, true)?;
                want("missing", r.measurements_missing, 2)?;
                want("not made", r.comparisons_not_made, 1)
            },
        ),
        fixture(
            "cancel_request",
            "platter.v1.CancelRequest",
            || pb::CancelRequest {
                campaign_id: CAMPAIGN_ID.into(),
                ..Default::default()
            },
            |r| want("campaign", r.campaign_id.as_str(), CAMPAIGN_ID),
        ),
        fixture(
            "plan_response",
            "platter.v1.PlanResponse",
            || pb::PlanResponse {
                rendered: PLAN_RENDERED.into(),
                ..Default::default()
            },
            |r| want("rendered", r.rendered.contains("plan for host rc66"), true),
        ),
        fixture(
            "compare_request",
            "platter.v1.CompareRequest",
            || pb::CompareRequest {
                a: "nightly-fsync@rc66".into(),
                b: "nightly-fsync@rcmonster".into(),
                metric: "latency.p99".into(),
                ..Default::default()
            },
            |r| {
                want("a", r.a.as_str(), "nightly-fsync@rc66")?;
                want("metric", r.metric.as_str(), "latency.p99")
            },
        ),
        fixture(
            "compare_response",
            "platter.v1.CompareResponse",
            compare_response,
            |r| {
                want("rows", r.rows.len(), 2)?;
                let row = &r.rows[0];
                want("ratio", row.ratio, 1.2125)?;
                want("ci low", row.ci_low_pct, Some(14.1))?;
                want("coverage", row.ci_level, Some(0.9375))?;
                want("significant", row.significant, true)?;
                want("family", row.family, 2)?;
                want("second not compared", r.rows[1].not_compared, true)?;
                want("only in a", r.only_in_a.len(), 1)?;
                want(
                    "unmatched param",
                    r.only_in_a[0].params[0].name.as_str(),
                    "size",
                )?;
                want("only in b", r.only_in_b.len(), 0)
            },
        ),
        fixture(
            "add_schedule_request",
            "platter.v1.AddScheduleRequest",
            || pb::AddScheduleRequest {
                name: "nightly-fsync".into(),
                file_name: "nightly-fsync.yaml".into(),
                yaml: NIGHTLY_YAML.into(),
                every: String::new(),
                cron: "0 2 * * *".into(),
                on_trigger: String::new(),
                policy: "queue".into(),
                ..Default::default()
            },
            |r| {
                want("name", r.name.as_str(), "nightly-fsync")?;
                want("cron", r.cron.as_str(), "0 2 * * *")?;
                want("every", r.every.as_str(), "")?;
                want("policy", r.policy.as_str(), "queue")
            },
        ),
        fixture(
            "schedule_info",
            "platter.v1.ScheduleInfo",
            schedule_info,
            accept_schedule_info,
        ),
        fixture(
            "list_schedules_response",
            "platter.v1.ListSchedulesResponse",
            || pb::ListSchedulesResponse {
                schedules: vec![schedule_info(), trigger_schedule()],
                ..Default::default()
            },
            |r| {
                want("schedules", r.schedules.len(), 2)?;
                accept_schedule_info(r.schedules[0].clone())?;
                want(
                    "second when",
                    r.schedules[1].when.as_str(),
                    "on trigger kernel-update",
                )
            },
        ),
        fixture(
            "get_schedule_request",
            "platter.v1.GetScheduleRequest",
            || pb::GetScheduleRequest {
                name: "nightly-fsync".into(),
                ..Default::default()
            },
            |r| want("name", r.name.as_str(), "nightly-fsync"),
        ),
        fixture(
            "set_schedule_paused_request",
            "platter.v1.SetSchedulePausedRequest",
            || pb::SetSchedulePausedRequest {
                name: "nightly-fsync".into(),
                paused: true,
                ..Default::default()
            },
            |r| {
                want("name", r.name.as_str(), "nightly-fsync")?;
                want("paused", r.paused, true)
            },
        ),
        fixture(
            "trigger_request",
            "platter.v1.TriggerRequest",
            || pb::TriggerRequest {
                name: "kernel-update".into(),
                labels: [("kernel".to_string(), "6.12.1".to_string())].into(),
                ..Default::default()
            },
            |r| {
                want("name", r.name.as_str(), "kernel-update")?;
                want(
                    "kernel",
                    r.labels.get("kernel").map(String::as_str),
                    Some("6.12.1"),
                )
            },
        ),
        fixture(
            "trigger_response",
            "platter.v1.TriggerResponse",
            || pb::TriggerResponse {
                fired: vec![trigger_firing()],
                not_fired: vec!["nightly-fsync: paused".into()],
                ..Default::default()
            },
            |r| {
                want("fired", r.fired.len(), 1)?;
                want("outcome", r.fired[0].outcome.as_str(), "submitted")?;
                want(
                    "label",
                    r.fired[0].labels.get("kernel").map(String::as_str),
                    Some("6.12.1"),
                )?;
                want(
                    "not fired",
                    r.not_fired,
                    vec!["nightly-fsync: paused".to_string()],
                )
            },
        ),
        fixture(
            "history_request",
            "platter.v1.HistoryRequest",
            || pb::HistoryRequest {
                series: "nightly-fsync".into(),
                metric: "latency.p99".into(),
                host: "rc66".into(),
                last: Some(10),
                threshold_pct: Some(3.0),
                until: CAMPAIGN_ID.into(),
                ..Default::default()
            },
            |r| {
                want("series", r.series.as_str(), "nightly-fsync")?;
                want("last", r.last, Some(10))?;
                want("threshold", r.threshold_pct, Some(3.0))?;
                want("until", r.until.as_str(), CAMPAIGN_ID)
            },
        ),
        fixture(
            "history_response",
            "platter.v1.HistoryResponse",
            || pb::HistoryResponse {
                history_json: HISTORY_JSON.into(),
                until_id: "d726e0df5f-2-e289ce4c".into(),
                ..Default::default()
            },
            |r| {
                // The document itself is the coordinator's (`report::history::History`); the
                // coordinator's tests/store_fixtures.rs reads it with today's type.
                let h: serde_json::Value =
                    serde_json::from_str(&r.history_json).map_err(|e| e.to_string())?;
                want("series", h["series"].as_str(), Some("build-like"))?;
                want("runs", h["runs"].as_array().map(Vec::len), Some(2))?;
                want("until", r.until_id.as_str(), "d726e0df5f-2-e289ce4c")
            },
        ),
        fixture(
            "ledger_request",
            "platter.v1.LedgerRequest",
            || pb::LedgerRequest {
                question: "drives".into(),
                id: String::new(),
                model: "SSDSC2BW".into(),
                firmware: Some("DC32".into()),
                host: "rc66".into(),
                failed: true,
                ..Default::default()
            },
            |r| {
                want("question", r.question.as_str(), "drives")?;
                want("firmware", r.firmware.as_deref(), Some("DC32"))?;
                want("failed", r.failed, true)
            },
        ),
        fixture(
            "ledger_response",
            "platter.v1.LedgerResponse",
            || pb::LedgerResponse {
                json: LEDGER_JSON.into(),
                ..Default::default()
            },
            |r| {
                // `report::ledger::DriveSummary` list; read with today's type by the
                // coordinator's tests/store_fixtures.rs.
                let drives: serde_json::Value =
                    serde_json::from_str(&r.json).map_err(|e| e.to_string())?;
                want("drives", drives.as_array().map(Vec::len), Some(2))?;
                want(
                    "first serial",
                    drives[0]["serial"].as_str(),
                    Some("CVDA4215003M1207GN"),
                )
            },
        ),
    ]
}

fn agent_message(kind: pb::agent_message::Kind) -> pb::AgentMessage {
    pb::AgentMessage {
        kind: Some(kind),
        ..Default::default()
    }
}

fn coordinator_message(kind: pb::coordinator_message::Kind) -> pb::CoordinatorMessage {
    pb::CoordinatorMessage {
        kind: Some(kind),
        ..Default::default()
    }
}

/// A record as the agent's link sends it: the domain record through `wire`.
fn record_fixture(
    name: &'static str,
    make: fn() -> Record,
    accept: fn(Record) -> Result<(), String>,
) -> Fixture {
    Fixture {
        name,
        make: Box::new(move || {
            agent_message(pb::agent_message::Kind::Record(pb::Record::from(&make())))
                .encode_to_vec()
        }),
        check: Box::new(move |bytes, pool| {
            let m: pb::AgentMessage = unchanged(bytes, "platter.v1.AgentMessage", pool)?;
            match m.kind {
                // As the coordinator's `rpc::agent_link` takes it.
                Some(pb::agent_message::Kind::Record(r)) => {
                    accept(Record::try_from(r).map_err(|e| format!("refused: {e}"))?)
                }
                other => Err(format!("not a record: {other:?}")),
            }
        }),
    }
}

fn step_event(r: Record) -> Result<StepEvent, String> {
    match r.kind {
        RecordKind::Step(e) => {
            want("plan", e.plan_id.as_str(), PLAN_ID)?;
            Ok(e)
        }
        other => Err(format!("not a step event: {other:?}")),
    }
}

// ---------------------------------------------------------------------------------------
// What this build sends: domain values as the agent and the coordinator make them, through
// the conversions they use. Realistic, from seed 001 (fsync latency on an Intel 530 behind
// AHCI) and seed 000 (a build). The checks above read these facts back; a later build that
// changes a maker must keep them (or its checks must tell the directories apart).

const PLAN_ID: &str = "ef4c117bdfae9bf0";
const OTHER_PLAN_ID: &str = "0c95a2e1d37f4b68";
const CAMPAIGN_ID: &str = "b14e1f8aef-1-e289ce4c";
const CELL_FSYNC: &str = "45e0b60a039fe94d";
const CELL_BUILD: &str = "7921e5901753fae3";
const CELL_FIO: &str = "a3c1f0d2e4b59687";
const BOOT_ID: &str = "3efc92d2-49bb-4ba1-909c-035197aeccf3";
const T0: i64 = 1_796_499_761_780_424_675;

fn intel_530() -> Device {
    Device {
        name: "sdb".into(),
        path: "/dev/sdb".into(),
        major_minor: "8:16".into(),
        vendor: "ATA".into(),
        model: "INTEL SSDSC2BW120A4".into(),
        serial: "CVDA4215003M1207GN".into(),
        firmware: "DC32".into(),
        size_bytes: 120_034_123_776,
        rotational: false,
        transport: Transport::Ata,
        controller: vec!["sd".into(), "ahci".into()],
        pci_address: Some("0000:00:1f.2".into()),
        by_id: vec![
            "ata-INTEL_SSDSC2BW120A4_CVDA4215003M1207GN".into(),
            "wwn-0x55cd2e404b6f84e5".into(),
        ],
        by_path: vec!["pci-0000:00:1f.2-ata-2".into()],
        write_cache: WriteCache::WriteBack,
        write_cache_source: CACHE_SOURCE_SCSI.into(),
        partitions: vec![],
        mounted: vec![],
        holders: vec![],
        holds_root: false,
        backing_file: None,
        wwn: "naa.55cd2e404b6f84e5".into(),
    }
}

fn devices() -> Vec<Device> {
    let system = Device {
        name: "nvme0n1".into(),
        path: "/dev/nvme0n1".into(),
        major_minor: "259:0".into(),
        vendor: String::new(),
        model: "Samsung SSD 970 EVO Plus 500GB".into(),
        serial: "S4EVNF0M712345A".into(),
        firmware: "2B2QEXM7".into(),
        size_bytes: 500_107_862_016,
        rotational: false,
        transport: Transport::Nvme,
        controller: vec!["nvme".into()],
        pci_address: Some("0000:01:00.0".into()),
        by_id: vec!["nvme-Samsung_SSD_970_EVO_Plus_500GB_S4EVNF0M712345A".into()],
        by_path: vec!["pci-0000:01:00.0-nvme-1".into()],
        write_cache: WriteCache::WriteBack,
        write_cache_source: CACHE_SOURCE_QUEUE.into(),
        partitions: vec![
            Partition {
                name: "nvme0n1p1".into(),
                major_minor: "259:1".into(),
                size_bytes: 536_870_912,
                mounted: vec!["/boot/efi".into()],
            },
            Partition {
                name: "nvme0n1p2".into(),
                major_minor: "259:2".into(),
                size_bytes: 499_569_991_680,
                mounted: vec!["/".into()],
            },
        ],
        mounted: vec!["/".into(), "/boot/efi".into()],
        holders: vec![],
        holds_root: true,
        backing_file: None,
        wwn: "eui.0025385791b0a1c2".into(),
    };
    let image = Device {
        name: "loop3".into(),
        path: "/dev/loop3".into(),
        major_minor: "7:3".into(),
        vendor: String::new(),
        model: String::new(),
        serial: String::new(),
        firmware: String::new(),
        size_bytes: 1 << 30,
        rotational: false,
        transport: Transport::Loop,
        controller: vec![],
        pci_address: None,
        by_id: vec![],
        by_path: vec![],
        write_cache: WriteCache::Unknown,
        write_cache_source: String::new(),
        partitions: vec![],
        mounted: vec![],
        holders: vec![],
        holds_root: false,
        backing_file: Some("/var/lib/platter-lab/drive3.img".into()),
        wwn: String::new(),
    };
    vec![system, intel_530(), image]
}

fn tools() -> Vec<ToolVersion> {
    let tool = |name: &str, path: &str, version: &str| ToolVersion {
        name: name.into(),
        path: path.into(),
        version: version.into(),
    };
    vec![
        tool("fio", "/usr/bin/fio", "fio-3.33"),
        tool(
            "mkfs.ext4",
            "/usr/sbin/mkfs.ext4",
            "mke2fs 1.47.0 (5-Feb-2023)",
        ),
        tool("gocryptfs", "", ""),
        tool(
            "smartctl",
            "/usr/sbin/smartctl",
            "smartctl 7.3 2022-02-28 r5338",
        ),
    ]
}

fn accept_devices(devices: &[Device]) -> Result<(), String> {
    want("devices", devices.len(), 3)?;
    let d = &devices[1];
    want("model", d.model.as_str(), "INTEL SSDSC2BW120A4")?;
    want("serial", d.serial.as_str(), "CVDA4215003M1207GN")?;
    want("transport", &d.transport, &Transport::Ata)?;
    want("write cache", d.write_cache, WriteCache::WriteBack)?;
    want("controller", d.controller.join(">"), "sd>ahci".into())?;
    want("pci", d.pci_address.as_deref(), Some("0000:00:1f.2"))?;
    want("wwn", d.wwn.as_str(), "naa.55cd2e404b6f84e5")?;
    let system = &devices[0];
    want("holds /", system.holds_root, true)?;
    want("partitions", system.partitions.len(), 2)?;
    want("backing file", devices[2].backing_file.is_some(), true)
}

fn accept_tools(tools: &[ToolVersion]) -> Result<(), String> {
    want("tools", tools.len(), 4)?;
    want("fio", tools[0].version.as_str(), "fio-3.33")?;
    want("missing tool", tools[2].path.as_str(), "")
}

fn make_hello() -> pb::AgentMessage {
    // As the agent's `link` says hello.
    agent_message(pb::agent_message::Kind::Hello(pb::Hello {
        host: "rc66".into(),
        boot_id: BOOT_ID.into(),
        agent_version: "0.1.0".into(),
        held_plan_ids: vec![PLAN_ID.into()],
        next_seq: 51,
        devices: devices().iter().map(pb::Device::from).collect(),
        labels: [
            ("rack".to_string(), "b12".to_string()),
            ("role".to_string(), "storage-lab".to_string()),
        ]
        .into(),
        tools: tools().iter().map(pb::ToolVersion::from).collect(),
        ..Default::default()
    }))
}

fn accept_hello(m: pb::AgentMessage) -> Result<(), String> {
    let Some(pb::agent_message::Kind::Hello(h)) = m.kind else {
        return Err(format!("not a hello: {m:?}"));
    };
    // As the coordinator's `rpc::agent_link` takes it.
    want("host", h.host.as_str(), "rc66")?;
    want("boot id", h.boot_id.as_str(), BOOT_ID)?;
    want("agent version", h.agent_version.as_str(), "0.1.0")?;
    want("held", h.held_plan_ids, vec![PLAN_ID.to_string()])?;
    want("next seq", h.next_seq, 51)?;
    let labels: BTreeMap<String, String> = h.labels.into_iter().collect();
    want("rack", labels.get("rack").map(String::as_str), Some("b12"))?;
    want("labels", labels.len(), 2)?;
    let devices: Vec<Device> = h.devices.into_iter().map(Device::from).collect();
    accept_devices(&devices)?;
    let tools: Vec<ToolVersion> = h.tools.into_iter().map(ToolVersion::from).collect();
    accept_tools(&tools)
}

fn heartbeat() -> pb::Heartbeat {
    pb::Heartbeat {
        current_plan_id: PLAN_ID.into(),
        current_step_index: 8,
        journal_fault: "journal /var/lib/platter-agent/journal.jsonl: No space left on device \
                        (os error 28)"
            .into(),
        ..Default::default()
    }
}

fn storage() -> StorageConfig {
    StorageConfig {
        device: Some("/dev/sdb".into()),
        fs: Filesystem::Ext4,
        mkfs_options: vec!["-E".into(), "nodiscard".into()],
        mount_options: "noatime".into(),
        write_cache: WriteCacheSetting::Off,
        ramdisk_size: None,
        encryption: Encryption::None,
    }
}

fn fsync_params() -> FsyncParams {
    FsyncParams {
        path: "${mount}/fsync-4096-512.dat".into(),
        size: 4096,
        offset: 512,
        count: 1000,
        sync: SyncMode::Fdatasync,
        direct: false,
        prealloc: true,
        advance: false,
    }
}

/// A plan as the coordinator's hub sends it: storage made, a build cell (setup, clean,
/// sync, fstrim, drop caches, the build measured as a user), an fsync cell (a free command,
/// a warm-up and a counted measure), a fio cell, a reboot, the storage undone.
fn plan() -> Plan {
    let step = |cell: &str, repetition: u32, kind: StepKind| (cell.to_string(), repetition, kind);
    let steps = vec![
        step(CELL_BUILD, 1, StepKind::StorageSetup(storage())),
        step(
            CELL_BUILD,
            0,
            StepKind::Setup("tar -C ${mount} -xf /srv/linux-6.1.tar".into()),
        ),
        step(
            CELL_BUILD,
            1,
            StepKind::Clean("make -C ${mount}/linux-6.1 clean".into()),
        ),
        step(CELL_BUILD, 1, StepKind::Sync),
        step(CELL_BUILD, 1, StepKind::Fstrim("${mount}".into())),
        step(CELL_BUILD, 1, StepKind::DropCaches),
        step(
            CELL_BUILD,
            1,
            StepKind::Measure(Workload::Command(
                "make -C ${mount}/linux-6.1 -j2 defconfig vmlinux".into(),
            )),
        ),
        step(CELL_FSYNC, 1, StepKind::Command("sleep 1".into())),
        step(
            CELL_FSYNC,
            1,
            StepKind::Measure(Workload::Fsync(fsync_params())),
        ),
        step(
            CELL_FSYNC,
            1,
            StepKind::Measure(Workload::Fsync(fsync_params())),
        ),
        step(
            CELL_FIO,
            1,
            StepKind::Measure(Workload::Tool {
                tool: Tool::Fio,
                argv: vec![
                    "fio".into(),
                    "--name=randwrite".into(),
                    "--filename=${mount}/fio.dat".into(),
                    "--rw=randwrite".into(),
                    "--bs=4k".into(),
                    "--size=256M".into(),
                    "--direct=1".into(),
                    "--output-format=json".into(),
                ],
            }),
        ),
        step(CELL_FIO, 2, StepKind::Reboot),
        step(CELL_FIO, 2, StepKind::StorageTeardown(storage())),
    ];
    Plan {
        id: PLAN_ID.into(),
        campaign_id: CAMPAIGN_ID.into(),
        campaign_name: "seed-001-and-000".into(),
        host: "rc66".into(),
        steps: steps
            .into_iter()
            .enumerate()
            .map(|(i, (cell, repetition, kind))| Step {
                index: i as u32,
                cell_id: cell.into(),
                repetition,
                // Step 8 is the fsync cell's warm-up.
                warmup: i == 8,
                kind,
            })
            .collect(),
        on_failure: OnFailure::Abort,
        run_as: [(
            CELL_BUILD.into(),
            RunAs {
                user: "builder".into(),
                home: "${mount}/home".into(),
            },
        )]
        .into(),
    }
}

fn accept_plan(p: Plan) -> Result<(), String> {
    // As the agent's `link` takes it (`Plan::try_from`), then reads it.
    want("id", p.id.as_str(), PLAN_ID)?;
    want("host", p.host.as_str(), "rc66")?;
    want("on failure", p.on_failure, OnFailure::Abort)?;
    let kinds: Vec<&str> = p.steps.iter().map(|s| s.kind.name()).collect();
    want(
        "step kinds",
        kinds,
        vec![
            "storage_setup",
            "setup",
            "clean",
            "sync",
            "fstrim",
            "drop_caches",
            "measure",
            "command",
            "measure",
            "measure",
            "measure",
            "reboot",
            "storage_teardown",
        ],
    )?;
    want("storage at the build", p.storage_at(6), Some(storage()))?;
    want("storage at the end", p.storage_at(12), None)?;
    want("warm-up", p.steps[8].warmup, true)?;
    want(
        "fsync",
        &p.steps[9].kind,
        &StepKind::Measure(Workload::Fsync(fsync_params())),
    )?;
    match &p.steps[10].kind {
        StepKind::Measure(Workload::Tool { tool, argv }) => {
            want("tool", *tool, Tool::Fio)?;
            want("argv", argv.len(), 8)?;
        }
        other => return Err(format!("step 10 is not fio: {other:?}")),
    }
    want(
        "runs as",
        p.run_as(&p.steps[6]).map(|r| r.user.as_str()),
        Some("builder"),
    )?;
    want("preparation", p.preparation(6), 2..6)
}

fn plan_accepted() -> Record {
    Record {
        seq: 41,
        kind: RecordKind::PlanAccepted {
            plan_id: PLAN_ID.into(),
        },
    }
}

fn provenance() -> Record {
    let mut intel = intel_530();
    intel.write_cache = WriteCache::WriteThrough;
    let facts = Provenance {
        trigger: AT_STORAGE_SETUP.into(),
        host: Some(HostFacts {
            agent_version: "0.1.0".into(),
            kernel_release: "6.1.0-28-amd64".into(),
            kernel_version: "#1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)".into(),
            boot_id: BOOT_ID.into(),
            cpu_model: "Intel(R) Core(TM) i5-4590 CPU @ 3.30GHz".into(),
            cpu_count: 4,
            memory_bytes: 16_719_892_480,
            agent_cpus: "3".into(),
            workload_cpus: "0-2".into(),
            tick_hz: 250,
            cpu_accounting: TICK_ACCOUNTING.into(),
        }),
        devices: vec![DeviceFacts {
            device: intel,
            logical_block_size: 512,
            physical_block_size: 4096,
            scheduler: "mq-deadline".into(),
        }],
        storage: Some(StorageFacts {
            mounts: vec![MountFacts {
                mount_point: "/var/lib/platter-agent/mnt/ef4c117bdfae9bf0".into(),
                fs_type: "ext4".into(),
                source: "/dev/sdb".into(),
                options: "rw,noatime".into(),
                super_options: "rw".into(),
            }],
            mkfs_version: "mke2fs 1.47.0 (5-Feb-2023)".into(),
            write_cache: "off".into(),
        }),
        tools: [
            ("fio".to_string(), "fio-3.33".to_string()),
            (
                "mkfs.ext4".to_string(),
                "mke2fs 1.47.0 (5-Feb-2023)".to_string(),
            ),
        ]
        .into(),
        health: vec![DriveHealth {
            path: "/dev/sdb".into(),
            model: "INTEL SSDSC2BW120A4".into(),
            serial: "CVDA4215003M1207GN".into(),
            firmware: "DC32".into(),
            wwn: "naa.55cd2e404b6f84e5".into(),
            unreadable: String::new(),
            reading: Some(HealthReading {
                tool: "smartctl 7.3".into(),
                protocol: "ATA".into(),
                passed: Some(true),
                temperature_c: Some(31),
                power_on_hours: Some(18_423),
                unsafe_shutdowns: Some(57),
                media_errors: Some(0),
                reallocated_sectors: Some(0),
                pending_sectors: None,
                uncorrectable_errors: Some(0),
                crc_errors: Some(2),
                critical_warning: None,
                percentage_used: None,
                available_spare: None,
                data_written_bytes: Some(28_110_692_827_136),
            }),
        }],
    };
    Record {
        seq: 42,
        kind: RecordKind::Provenance {
            plan_id: PLAN_ID.into(),
            step_index: 0,
            facts: Box::new(facts),
        },
    }
}

fn accept_provenance(r: Record) -> Result<(), String> {
    let RecordKind::Provenance {
        plan_id,
        step_index,
        facts,
    } = r.kind
    else {
        return Err(format!("not provenance: {r:?}"));
    };
    want("plan", plan_id.as_str(), PLAN_ID)?;
    want("step", step_index, 0)?;
    want("trigger", facts.trigger.as_str(), AT_STORAGE_SETUP)?;
    let host = facts.host.ok_or("no host facts")?;
    want("kernel", host.kernel_release.as_str(), "6.1.0-28-amd64")?;
    want("cpus", host.cpu_count, 4)?;
    want("tick", host.tick_hz, 250)?;
    want(
        "device",
        facts.devices[0].device.serial.as_str(),
        "CVDA4215003M1207GN",
    )?;
    want(
        "device cache",
        facts.devices[0].device.write_cache,
        WriteCache::WriteThrough,
    )?;
    want("physical block", facts.devices[0].physical_block_size, 4096)?;
    let storage = facts.storage.ok_or("no storage facts")?;
    want("mounted", storage.mounts[0].fs_type.as_str(), "ext4")?;
    want("write cache read back", storage.write_cache.as_str(), "off")?;
    want(
        "fio",
        facts.tools.get("fio").map(String::as_str),
        Some("fio-3.33"),
    )?;
    let reading = facts.health[0].reading.clone().ok_or("no health reading")?;
    want("passed", reading.passed, Some(true))?;
    want("power on", reading.power_on_hours, Some(18_423))?;
    want("pending (absent, not 0)", reading.pending_sectors, None)?;
    want("crc", reading.crc_errors, Some(2))
}

fn event(step_index: u32, cell: &str, kind: &str, state: StepState) -> StepEvent {
    StepEvent {
        plan_id: PLAN_ID.into(),
        kind: kind.into(),
        step_index,
        cell_id: cell.into(),
        repetition: 1,
        attempt: 1,
        state,
        started_unix_ns: T0,
        finished_unix_ns: if state == StepState::Started {
            0
        } else {
            T0 + 187_254_331
        },
        exit_status: 0,
        stderr_tail: String::new(),
        error: String::new(),
        samples: vec![],
    }
}

fn step_started() -> Record {
    Record {
        seq: 43,
        kind: RecordKind::Step(event(8, CELL_FSYNC, "measure", StepState::Started)),
    }
}

/// 1000 write+fdatasync latencies of a 4 KiB write on an Intel 530 with its write cache
/// off: mostly 150–250 µs, a tail to a few ms (deterministic, not random).
fn latencies_ns() -> Vec<u64> {
    (0..1000u64)
        .map(|i| {
            let jitter = (i * 7919) % 100_000;
            let tail = if i % 97 == 0 { 2_400_000 } else { 0 };
            150_000 + jitter + tail
        })
        .collect()
}

/// The fsync loop's histogram of `latencies_ns`, serialized as the agent serializes it
/// (hdrhistogram V2, nanoseconds, 3 significant figures).
fn latency_histogram() -> Vec<u8> {
    use hdrhistogram::serialization::{Serializer, V2Serializer};
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600 * 1_000_000_000, 3)
        .expect("histogram bounds");
    for ns in latencies_ns() {
        h.record(ns).expect("a latency within bounds");
    }
    let mut bytes = Vec::new();
    V2Serializer::new()
        .serialize(&h, &mut bytes)
        .expect("serializing into a Vec");
    bytes
}

fn sample(metric: &str, value: f64, unit: &str) -> Sample {
    Sample {
        metric: metric.into(),
        value,
        unit: unit.into(),
        histogram: vec![],
        missing: String::new(),
    }
}

fn step_fsync() -> Record {
    let mut e = event(9, CELL_FSYNC, "measure", StepState::Succeeded);
    e.samples = vec![
        sample("latency.mean", 0.000_223_742, "s"),
        sample("latency.p50", 0.000_199_935, "s"),
        sample("latency.p90", 0.000_240_127, "s"),
        sample("latency.p99", 0.002_550_591, "s"),
        sample("latency.p99.9", 0.002_648_063, "s"),
        sample("latency.max", 0.002_648_063, "s"),
        sample("latency.min", 0.000_150_015, "s"),
        sample("ops_per_s", 4_421.7, "op/s"),
        sample("total", 0.226_157_314, "s"),
        sample("ops", 1000.0, "1"),
        Sample {
            histogram: latency_histogram(),
            ..sample("latency", 0.000_223_742, "s")
        },
    ];
    Record {
        seq: 44,
        kind: RecordKind::Step(e),
    }
}

fn accept_step_fsync(r: Record) -> Result<(), String> {
    use hdrhistogram::serialization::Deserializer;
    let e = step_event(r)?;
    want("state", e.state, StepState::Succeeded)?;
    want("step", e.step_index, 9)?;
    want("samples", e.samples.len(), 11)?;
    want("p99", e.samples[3].value, 0.002_550_591)?;
    let latency = e
        .samples
        .iter()
        .find(|s| s.metric == "latency")
        .ok_or("no latency sample")?;
    // As the coordinator's reports merge repetitions' histograms.
    let h: hdrhistogram::Histogram<u64> = Deserializer::new()
        .deserialize(&mut &latency.histogram[..])
        .map_err(|e| format!("the histogram does not deserialize: {e:?}"))?;
    want("operations", h.len(), 1000)?;
    want("slowest above 2.4 ms", h.max() > 2_400_000, true)?;
    want(
        "fastest about 150 µs",
        (149_000..=151_000).contains(&h.min()),
        true,
    )
}

fn step_command() -> Record {
    let mut e = event(6, CELL_BUILD, "measure", StepState::Succeeded);
    e.samples = vec![
        sample("wall", 41.873_905_112, "s"),
        sample("user", 71.204_331, "s"),
        sample("sys", 9.880_127, "s"),
        sample("max_rss", 412_336_128.0, "B"),
    ];
    Record {
        seq: 45,
        kind: RecordKind::Step(e),
    }
}

fn step_tool() -> Record {
    let mut e = event(10, CELL_FIO, "measure", StepState::Succeeded);
    e.samples = vec![
        sample("write.iops", 18_234.5, "op/s"),
        sample("write.bw", 74_688_512.0, "B/s"),
        sample("write.lat.p99", 0.000_421_888, "s"),
        Sample {
            missing: "+++++: too fast to measure".into(),
            ..sample("seq_create.per_s", f64::NAN, "")
        },
    ];
    Record {
        seq: 46,
        kind: RecordKind::Step(e),
    }
}

fn step_failed() -> Record {
    let mut e = event(2, CELL_BUILD, "clean", StepState::Failed);
    e.attempt = 2;
    e.exit_status = 2;
    e.stderr_tail = "make: *** No rule to make target 'clean'.  Stop.\n".into();
    e.error = "exit status 2".into();
    Record {
        seq: 47,
        kind: RecordKind::Step(e),
    }
}

fn step_skipped() -> Record {
    let mut e = event(11, CELL_FIO, "reboot", StepState::Skipped);
    e.repetition = 2;
    e.started_unix_ns = 0;
    e.finished_unix_ns = 0;
    e.error = "the plan was cancelled".into();
    Record {
        seq: 48,
        kind: RecordKind::Step(e),
    }
}

fn plan_finished() -> Record {
    Record {
        seq: 49,
        kind: RecordKind::PlanFinished {
            plan_id: PLAN_ID.into(),
            cancelled: false,
        },
    }
}

fn plan_refused() -> Record {
    Record {
        seq: 50,
        kind: RecordKind::PlanRefused {
            plan_id: OTHER_PLAN_ID.into(),
            reason: "storage setup on /dev/nvme0n1: the device holds / (nothing was run)".into(),
        },
    }
}

const NIGHTLY_YAML: &str = "name: nightly-fsync
series: nightly-fsync
track: { threshold: 3% }
devices: { model: \"INTEL SSDSC2BW120A4\" }
matrix:
  size: [4096, 8192]
storage: { fs: ext4, mount_options: noatime }
workload:
  fsync: { path: \"${mount}/fsync-${size}.dat\", size: \"${size}\", count: 1000, sync: fdatasync, prealloc: true }
phases:
  before_each: [sync]
repeat: 8
";

fn submit_request() -> pb::SubmitRequest {
    pb::SubmitRequest {
        file_name: "nightly-fsync.yaml".into(),
        yaml: NIGHTLY_YAML.into(),
        local_host: "rc66".into(),
        resume: true,
        ..Default::default()
    }
}

fn store_fault() -> pb::StoreFault {
    pb::StoreFault {
        reason: "database or disk is full".into(),
        since_unix_ms: 1_796_499_700_000,
        not_answering: false,
        ..Default::default()
    }
}

fn campaign_status() -> pb::CampaignStatus {
    pb::CampaignStatus {
        campaign_id: CAMPAIGN_ID.into(),
        name: "nightly-fsync".into(),
        state: pb::CampaignState::Running as i32,
        cells_total: 4,
        cells_done: 1,
        steps_total: 72,
        steps_done: 25,
        steps_failed: 1,
        hosts: vec![
            pb::HostProgress {
                host: "rc66".into(),
                connected: true,
                steps_total: 36,
                steps_done: 19,
                current_step: "measure cell 2 rep 3: fsync 1000 × 4096 B at 0".into(),
                elapsed_ms: 48_211,
                refused: String::new(),
                coordinator: "coord-a.lab:7461".into(),
                journal_fault: String::new(),
                ..Default::default()
            },
            pb::HostProgress {
                host: "flygecko".into(),
                connected: false,
                steps_total: 36,
                steps_done: 6,
                current_step: String::new(),
                elapsed_ms: 15_002,
                refused: String::new(),
                coordinator: String::new(),
                journal_fault: "journal /var/lib/platter-agent/journal.jsonl: Read-only file \
                                system (os error 30)"
                    .into(),
                ..Default::default()
            },
        ],
        created_unix_ms: 1_796_499_760_625,
        store_fault: None,
        series: "nightly-fsync".into(),
        ..Default::default()
    }
}

fn accept_campaign_status(s: pb::CampaignStatus) -> Result<(), String> {
    want("campaign", s.campaign_id.as_str(), CAMPAIGN_ID)?;
    want("state", s.state(), pb::CampaignState::Running)?;
    want(
        "steps",
        (s.steps_done, s.steps_total, s.steps_failed),
        (25, 72, 1),
    )?;
    want("hosts", s.hosts.len(), 2)?;
    want(
        "coordinator",
        s.hosts[0].coordinator.as_str(),
        "coord-a.lab:7461",
    )?;
    want("elapsed", s.hosts[0].elapsed_ms, 48_211)?;
    want(
        "journal fault",
        s.hosts[1].journal_fault.contains("os error 30"),
        true,
    )?;
    want("series", s.series.as_str(), "nightly-fsync")
}

fn finished_campaign() -> pb::CampaignStatus {
    pb::CampaignStatus {
        campaign_id: "d726e0df5f-2-e289ce4c".into(),
        name: "build-like".into(),
        state: pb::CampaignState::Done as i32,
        cells_total: 2,
        cells_done: 2,
        steps_total: 20,
        steps_done: 20,
        steps_failed: 0,
        hosts: vec![],
        created_unix_ms: 1_796_499_877_636,
        store_fault: Some(store_fault()),
        series: "build-like".into(),
        ..Default::default()
    }
}

fn list_agents_response() -> pb::ListAgentsResponse {
    let busy = pb::AgentInfo {
        host: "rc66".into(),
        connected: true,
        boot_id: BOOT_ID.into(),
        agent_version: "0.1.0".into(),
        last_seen_unix_ms: 1_796_499_761_780,
        devices: devices().iter().map(pb::Device::from).collect(),
        labels: [("rack".to_string(), "b12".to_string())].into(),
        state: "busy".into(),
        current_campaign: CAMPAIGN_ID.into(),
        tools: tools().iter().map(pb::ToolVersion::from).collect(),
        coordinator: "coord-a.lab:7461".into(),
        ..Default::default()
    };
    let offline = pb::AgentInfo {
        host: "flygecko".into(),
        connected: false,
        boot_id: "9b0e56a4-13c7-4f0e-8d21-6f1b2a7c9e30".into(),
        agent_version: "0.1.0".into(),
        last_seen_unix_ms: 1_796_413_361_000,
        devices: vec![pb::Device::from(&intel_530())],
        labels: Default::default(),
        state: "offline".into(),
        current_campaign: String::new(),
        tools: vec![],
        coordinator: String::new(),
        ..Default::default()
    };
    pb::ListAgentsResponse {
        agents: vec![busy, offline],
        store_fault: None,
        total: 3,
        matched: 2,
        counts: [("busy".to_string(), 1u64), ("offline".to_string(), 1u64)].into(),
        tools: vec![
            pb::ToolCount {
                name: "fio".into(),
                version: "fio-3.33".into(),
                hosts: 1,
                examples: vec!["rc66".into()],
                ..Default::default()
            },
            pb::ToolCount {
                name: "fio".into(),
                version: String::new(),
                hosts: 1,
                examples: vec!["flygecko".into()],
                ..Default::default()
            },
        ],
        ..Default::default()
    }
}

fn accept_list_agents(r: pb::ListAgentsResponse) -> Result<(), String> {
    want("agents", r.agents.len(), 2)?;
    want("total", (r.total, r.matched), (3, 2))?;
    want("busy", r.counts.get("busy").copied(), Some(1))?;
    let a = &r.agents[0];
    want("state", a.state.as_str(), "busy")?;
    want("campaign", a.current_campaign.as_str(), CAMPAIGN_ID)?;
    // As `platter agents` reads the drives and tools.
    let devices: Vec<Device> = a.devices.iter().cloned().map(Device::from).collect();
    accept_devices(&devices)?;
    let tools: Vec<ToolVersion> = a.tools.iter().cloned().map(ToolVersion::from).collect();
    accept_tools(&tools)?;
    want("offline", r.agents[1].connected, false)?;
    want("tool counts", r.tools.len(), 2)?;
    want("lacking fio", r.tools[1].version.as_str(), "")
}

fn compare_response() -> pb::CompareResponse {
    let param = |name: &str, value: &str| pb::CellParam {
        name: name.into(),
        value: value.into(),
        ..Default::default()
    };
    pb::CompareResponse {
        rows: vec![
            pb::ComparisonRow {
                host: "rc66 vs rcmonster".into(),
                context: "size=4096".into(),
                key: "size=4096".into(),
                baseline: "nightly-fsync@rc66".into(),
                candidate: "nightly-fsync@rcmonster".into(),
                metric: "latency.p99".into(),
                ratio: 1.2125,
                penalty_pct: 21.25,
                ci_low_pct: Some(14.1),
                ci_high_pct: Some(29.8),
                significant: true,
                text: "rcmonster vs rc66 penalty 21.2% (93.75% CI 14.1% … 29.8%)".into(),
                ci_level: Some(0.9375),
                p_value: Some(0.0079),
                holm_p: Some(0.0159),
                family: 2,
                not_compared: false,
                ..Default::default()
            },
            pb::ComparisonRow {
                host: "rc66 vs rcmonster".into(),
                context: "size=8192".into(),
                key: "size=8192".into(),
                baseline: "nightly-fsync@rc66".into(),
                candidate: "nightly-fsync@rcmonster".into(),
                metric: "latency.p99".into(),
                ratio: f64::NAN,
                penalty_pct: f64::NAN,
                ci_low_pct: None,
                ci_high_pct: None,
                significant: false,
                text: "not compared: rcmonster has no usable values of latency.p99".into(),
                ci_level: None,
                p_value: None,
                holm_p: None,
                family: 2,
                not_compared: true,
                ..Default::default()
            },
        ],
        only_in_a: vec![pb::UnmatchedCell {
            host: "rc66".into(),
            params: vec![param("size", "1"), param("offset", "512")],
            ..Default::default()
        }],
        only_in_b: vec![],
        ..Default::default()
    }
}

fn firing(schedule: &str, outcome: &str) -> pb::ScheduleFiring {
    pb::ScheduleFiring {
        schedule: schedule.into(),
        slot_unix_ms: 1_796_436_000_000,
        fired_unix_ms: 1_796_436_000_412,
        coordinator: "coord-a.lab:7461".into(),
        outcome: outcome.into(),
        campaign_id: CAMPAIGN_ID.into(),
        labels: [
            ("fired_by".to_string(), format!("schedule {schedule}")),
            ("slot".to_string(), "2026-12-05T02:00:00Z".to_string()),
        ]
        .into(),
        note: String::new(),
        ..Default::default()
    }
}

fn trigger_firing() -> pb::ScheduleFiring {
    let mut f = firing("build-on-kernel", "submitted");
    f.labels.insert("kernel".into(), "6.12.1".into());
    f
}

fn schedule_info() -> pb::ScheduleInfo {
    let mut skipped = firing("nightly-fsync", "skipped");
    skipped.slot_unix_ms -= 86_400_000;
    skipped.fired_unix_ms -= 86_400_000;
    skipped.campaign_id = String::new();
    skipped.note = "the series' previous run still runs".into();
    pb::ScheduleInfo {
        name: "nightly-fsync".into(),
        series: "nightly-fsync".into(),
        file_name: "nightly-fsync.yaml".into(),
        when: "cron 0 2 * * * (UTC)".into(),
        policy: "skip".into(),
        paused: false,
        next_due_unix_ms: 1_796_522_400_000,
        created_unix_ms: 1_795_000_000_000,
        submitted: 16,
        skipped: 1,
        failed: 0,
        firings: vec![firing("nightly-fsync", "submitted"), skipped],
        yaml: NIGHTLY_YAML.into(),
        ..Default::default()
    }
}

fn accept_schedule_info(s: pb::ScheduleInfo) -> Result<(), String> {
    want("name", s.name.as_str(), "nightly-fsync")?;
    want("when", s.when.as_str(), "cron 0 2 * * * (UTC)")?;
    want("next due", s.next_due_unix_ms, 1_796_522_400_000)?;
    want("counts", (s.submitted, s.skipped, s.failed), (16, 1, 0))?;
    want("firings", s.firings.len(), 2)?;
    want("latest", s.firings[0].outcome.as_str(), "submitted")?;
    want("run", s.firings[0].campaign_id.as_str(), CAMPAIGN_ID)?;
    want(
        "fired by",
        s.firings[0].labels.get("fired_by").map(String::as_str),
        Some("schedule nightly-fsync"),
    )?;
    want("skipped note", s.firings[1].note.is_empty(), false)?;
    want("yaml", s.yaml.contains("series: nightly-fsync"), true)
}

fn trigger_schedule() -> pb::ScheduleInfo {
    pb::ScheduleInfo {
        name: "build-on-kernel".into(),
        series: "build-like".into(),
        file_name: "build-like.yaml".into(),
        when: "on trigger kernel-update".into(),
        policy: "queue".into(),
        paused: true,
        next_due_unix_ms: 0,
        created_unix_ms: 1_795_000_100_000,
        submitted: 3,
        skipped: 0,
        failed: 1,
        firings: vec![trigger_firing()],
        yaml: String::new(),
        ..Default::default()
    }
}

const REPORT_TABLE: &str = "campaign nightly-fsync (b14e1f8aef-1-e289ce4c): done, repeat 8

host rc66
  size metric       n median (CI)                                  mean ± stddev         min       max
  4096 latency.p99  8 2.55 ms (96.1% CI 2.41 ms … 2.71 ms)          2.57 ms ± 0.11 ms     2.40 ms   2.74 ms
  8192 latency.p99  8 2.93 ms (96.1% CI 2.80 ms … 3.12 ms)          2.95 ms ± 0.14 ms     2.77 ms   3.18 ms

qualify latency.p99 < 1ms: FAIL on rc66 INTEL SSDSC2BW120A4 CVDA4215003M1207GN
";

const PLAN_RENDERED: &str = "campaign nightly-fsync: valid
  2 cell(s) × 8 repetition(s) on 1 host(s): rc66
  order Interleaved, on_failure Continue

cells:
  cell 0: size=4096
  cell 1: size=8192

plan for host rc66 (35 steps):
     0  cell 0   rep 1   storage setup: ext4 on /dev/sdb, -o noatime
     1  cell 0   rep 1   sync
     2  cell 0   rep 1   measure: fsync 1000 × 4096 B at 0 (fdatasync, preallocated) on ${mount}/fsync-4096.dat
";

/// `platter history build-like --format json` of a store of this build (two runs, one of
/// its two lines), as the coordinator's History answers it.
const HISTORY_JSON: &str = r#"{"series":"build-like","metric":"wall","threshold_pct":3.0,"runs":[{"campaign_id":"d726e0df5f-1-e289ce4c","submitted_unix_ms":1796499760625,"labels":{}},{"campaign_id":"d726e0df5f-2-e289ce4c","submitted_unix_ms":1796499877636,"labels":{"fired_by":"schedule build-on-kernel","kernel":"6.12.1"}}],"left_out":[{"campaign_id":"d726e0df5f-3-e289ce4c","why":"cancelled"}],"lines":[{"host":"vm","cell":"bs=4k","unit":"s","points":[{"campaign_id":"d726e0df5f-1-e289ce4c","n":3,"median":0.002070203,"median_ci":[0.001815206,0.006356978],"median_ci_level":0.75,"since_previous":null},{"campaign_id":"d726e0df5f-2-e289ce4c","n":3,"median":0.003911641,"median_ci":[0.003746764,0.007416529],"median_ci_level":0.75,"since_previous":{"baseline":"d726e0df5f-1-e289ce4c","change_pct":88.94963440783347,"ci_pct":[-41.060610875167384,308.57781430867874],"ci_level":0.9,"holm_p":0.8,"significant":false,"flag":"none","changed":["kernel: 6.1.0-27-amd64 → 6.1.0-28-amd64"],"text":"d726e0df5f-2-e289ce4c vs d726e0df5f-1-e289ce4c penalty 88.9% (90% CI -41.1% … 308.6%): no significant difference","not_compared":null,"pooled":[]}}]}]}"#;

/// `platter drives --format json`: the ledger's `DriveSummary` list.
const LEDGER_JSON: &str = r#"[{"id":"naa.55cd2e404b6f84e5","identity":"wwn","model":"INTEL SSDSC2BW120A4","serial":"CVDA4215003M1207GN","wwn":"naa.55cd2e404b6f84e5","firmware":"DC32","hosts":["rc66","flygecko"],"controllers":["sd>ahci","sd>uas>xhci_hcd"],"first_seen":"2026-11-02 09:14 UTC","last_seen":"2026-12-05 19:44 UTC","runs":17,"passed":15,"failed":2,"health":{"campaign_id":"b14e1f8aef-1-e289ce4c","reading":{"tool":"smartctl 7.3","protocol":"ATA","passed":true,"temperature_c":31,"power_on_hours":18423,"unsafe_shutdowns":57,"media_errors":0,"reallocated_sectors":0,"uncorrectable_errors":0,"crc_errors":2,"data_written_bytes":28110692827136},"flagged":["crc_errors 0 → 2 (+2) FLAGGED"]}},{"id":"vm/loop3","identity":"host","model":"","serial":"","firmware":"","hosts":["vm"],"controllers":[""],"first_seen":"2026-12-05 19:42 UTC","last_seen":"2026-12-05 19:44 UTC","note":"no serial: tracked per host","runs":0,"passed":0,"failed":0}]"#;

// ---------------------------------------------------------------------------------------
// The tests.

#[test]
fn every_recorded_message_is_still_read_and_accepted() {
    let pool = pool();
    let table = all();
    let wire = fixtures_dir().join("wire");
    let current = wire.join(CURRENT);
    let mut written = Vec::new();
    if updating() {
        std::fs::create_dir_all(&current).unwrap();
        for f in &table {
            let path = current.join(format!("{}.bin", f.name));
            if !path.exists() {
                std::fs::write(&path, (f.make)()).unwrap();
                written.push(path);
            }
        }
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&wire)
        .unwrap_or_else(|e| panic!("{}: {e}", wire.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(
        dirs.contains(&current),
        "no fixtures of this build's contract ({}): record them with {UPDATE}=1 \
         cargo nextest run -p platter-proto --test wire_fixtures",
        current.display()
    );
    let mut failures = Vec::new();
    let mut read = 0;
    let known: BTreeSet<String> = table.iter().map(|f| format!("{}.bin", f.name)).collect();
    for dir in &dirs {
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if !known.contains(&name) {
                failures.push(format!(
                    "{}/{name}: no check knows this fixture (a fixture is never dropped: \
                     give it its entry in `all()` again)",
                    dir.display()
                ));
            }
        }
        for f in &table {
            let path = dir.join(format!("{}.bin", f.name));
            let Ok(bytes) = std::fs::read(&path) else {
                // Directories of earlier builds lack the fixtures added after them.
                if dir == &current {
                    failures.push(format!(
                        "{}: missing; record it with {UPDATE}=1 cargo nextest run -p \
                         platter-proto --test wire_fixtures",
                        path.display()
                    ));
                }
                continue;
            };
            read += 1;
            if let Err(why) = (f.check)(&bytes, &pool) {
                failures.push(format!("{}: {why}", path.display()));
            }
        }
    }
    for p in &written {
        eprintln!("recorded {}", p.display());
    }
    assert!(
        failures.is_empty(),
        "messages an earlier build sent are no longer read as they were — the wire contract \
         broke (COMPATIBILITY.md). Do not re-record these fixtures: a changed fixture is a \
         broken contract. Put the field back with its number and type (or, to retire it, keep \
         it `[deprecated = true]`, or delete it and `reserved` its number), and add a new \
         field for the new meaning.\n{}",
        failures.join("\n")
    );
    assert!(read >= table.len(), "read {read} fixtures");
}

/// One line per message, field, enum value and RPC of the .proto files: what
/// `fixtures/fields.txt` records.
fn contract_lines(pool: &DescriptorPool) -> Vec<String> {
    let mut lines = Vec::new();
    for m in pool.all_messages() {
        if m.is_map_entry() || !m.full_name().starts_with("platter.") {
            continue;
        }
        lines.push(format!("message {}", m.full_name()));
        for f in m.fields() {
            lines.push(format!(
                "{} = {} {}",
                f.full_name(),
                f.number(),
                field_type(&f)
            ));
        }
    }
    for e in pool.all_enums() {
        if !e.full_name().starts_with("platter.") {
            continue;
        }
        for v in e.values() {
            // A value's own full name is its package's (`platter.v1.ON_FAILURE_ABORT`).
            lines.push(format!(
                "{}.{} = {} enum value",
                e.full_name(),
                v.name(),
                v.number()
            ));
        }
    }
    for s in pool.services() {
        for m in s.methods() {
            let stream = |yes: bool| if yes { "stream " } else { "" };
            lines.push(format!(
                "rpc {} = {}{} -> {}{}",
                m.full_name(),
                stream(m.is_client_streaming()),
                m.input().full_name(),
                stream(m.is_server_streaming()),
                m.output().full_name()
            ));
        }
    }
    lines.sort();
    lines
}

fn kind_name(k: &Kind) -> String {
    match k {
        Kind::Double => "double".into(),
        Kind::Float => "float".into(),
        Kind::Int32 => "int32".into(),
        Kind::Int64 => "int64".into(),
        Kind::Uint32 => "uint32".into(),
        Kind::Uint64 => "uint64".into(),
        Kind::Sint32 => "sint32".into(),
        Kind::Sint64 => "sint64".into(),
        Kind::Fixed32 => "fixed32".into(),
        Kind::Fixed64 => "fixed64".into(),
        Kind::Sfixed32 => "sfixed32".into(),
        Kind::Sfixed64 => "sfixed64".into(),
        Kind::Bool => "bool".into(),
        Kind::String => "string".into(),
        Kind::Bytes => "bytes".into(),
        Kind::Message(m) => m.full_name().into(),
        Kind::Enum(e) => e.full_name().into(),
    }
}

/// `string`, `repeated platter.v1.Step`, `map<string, platter.v1.RunAs>`, `optional bool`,
/// `platter.v1.Shell oneof kind`.
fn field_type(f: &protox::prost_reflect::FieldDescriptor) -> String {
    if f.is_map() {
        let Kind::Message(entry) = f.kind() else {
            unreachable!("a map's entries are messages")
        };
        return format!(
            "map<{}, {}>",
            kind_name(&entry.map_entry_key_field().kind()),
            kind_name(&entry.map_entry_value_field().kind())
        );
    }
    let base = kind_name(&f.kind());
    if f.is_list() {
        return format!("repeated {base}");
    }
    match f.containing_oneof() {
        Some(o) if o.is_synthetic() => format!("optional {base}"),
        Some(o) => format!("{base} oneof {}", o.name()),
        None => base,
    }
}

/// Why `recorded` (a line of fields.txt) no longer holds for today's .proto files, if it
/// does not. `today` is today's lines by their name.
fn broken(
    recorded: &str,
    today: &BTreeMap<String, String>,
    pool: &DescriptorPool,
) -> Option<String> {
    let (name, _) = key(recorded);
    match today.get(&name) {
        Some(line) if line == recorded => None,
        Some(line) => Some(format!("changed: recorded `{recorded}`, today `{line}`")),
        None => {
            // Gone: allowed only for a field or enum value whose number is reserved.
            let (parent, number) = match recorded.split_once(" = ") {
                Some((full, rest)) if !recorded.starts_with("rpc ") => {
                    let parent = full.rsplit_once('.').map(|(p, _)| p).unwrap_or(full);
                    let number: i64 = rest.split(' ').next()?.parse().ok()?;
                    (parent.to_string(), number)
                }
                _ => return Some(format!("gone: `{recorded}`")),
            };
            let reserved = if recorded.ends_with(" enum value") {
                pool.get_enum_by_name(&parent)
                    .is_some_and(|e| e.reserved_ranges().any(|r| r.contains(&(number as i32))))
            } else {
                pool.get_message_by_name(&parent)
                    .is_some_and(|m: MessageDescriptor| {
                        m.reserved_ranges().any(|r| r.contains(&(number as u32)))
                    })
            };
            if reserved {
                return None;
            }
            let reused = today.values().find(|l| {
                l.starts_with(&format!("{parent}."))
                    && l.split(" = ").nth(1).and_then(|r| r.split(' ').next())
                        == Some(&number.to_string())
            });
            Some(match reused {
                Some(l) => format!("gone: `{recorded}`; its number is now `{l}`"),
                None => format!(
                    "gone without its number reserved: `{recorded}` (keep it, mark it \
                     `[deprecated = true]`, or `reserved {number};` in {parent})"
                ),
            })
        }
    }
}

/// A line's name (`platter.v1.Plan.id`, `message platter.v1.Plan`, `rpc platter.v1.…`).
fn key(line: &str) -> (String, &str) {
    match line.split_once(" = ") {
        Some((name, rest)) => (name.to_string(), rest),
        None => (line.to_string(), ""),
    }
}

#[test]
fn the_proto_files_keep_every_recorded_field_number_and_type() {
    let pool = pool();
    let lines = contract_lines(&pool);
    let today: BTreeMap<String, String> = lines.iter().map(|l| (key(l).0, l.clone())).collect();
    let path = fixtures_dir().join("fields.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let recorded: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect();
    let failures: Vec<String> = recorded
        .iter()
        .filter_map(|l| broken(l, &today, &pool))
        .collect();
    assert!(
        failures.is_empty(),
        "the .proto files broke the contract recorded in {} (COMPATIBILITY.md: add fields, \
         never renumber or retype one; a removed field keeps its number `reserved`). Do not \
         edit the recorded lines to match: restore the field and add a new one.\n{}",
        path.display(),
        failures.join("\n")
    );
    let names: BTreeSet<String> = recorded.iter().map(|l| key(l).0).collect();
    let new: Vec<&String> = lines
        .iter()
        .filter(|l| !names.contains(&key(l).0))
        .collect();
    if new.is_empty() {
        return;
    }
    if updating() {
        // Appended, never rewritten.
        let mut out = text.clone();
        if out.is_empty() {
            out.push_str(
                "# The contract of proto/platter/v1/*.proto: every message, field (number and \
                 type), enum value and RPC\n# ever recorded. tests/wire_fixtures.rs fails when \
                 one is gone (unless its number is reserved),\n# renumbered or retyped. New \
                 ones are appended by PLATTER_UPDATE_FIXTURES=1 cargo nextest run -p \
                 platter-proto --test wire_fixtures.\n# Never edit or delete a line.\n",
            );
        }
        for l in &new {
            out.push_str(l);
            out.push('\n');
        }
        std::fs::write(&path, out).unwrap();
        eprintln!("recorded {} new line(s) in {}", new.len(), path.display());
    } else {
        panic!(
            "{} new message(s), field(s), enum value(s) or RPC(s) are not in {} yet. New ones are \
             allowed: record them (lines are only appended) with\n  {UPDATE}=1 cargo nextest \
             run -p platter-proto --test wire_fixtures\nand commit the file with them.\n{}",
            new.len(),
            path.display(),
            new.iter()
                .map(|l| format!("  {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// The checks themselves catch what they are for: a message whose field a later build
/// renumbered, and one whose field it retyped, both made here by hand.
#[test]
fn a_renumbered_or_retyped_field_is_caught() {
    let pool = pool();
    let good = pb::SubmitResponse {
        campaign_id: CAMPAIGN_ID.into(),
        resumed: true,
        ..Default::default()
    }
    .encode_to_vec();
    assert!(unchanged::<pb::SubmitResponse>(&good, "platter.v1.SubmitResponse", &pool).is_ok());
    // `resumed` (field 2, varint) as if a build had moved it to number 3.
    let mut renumbered = good.clone();
    let at = renumbered.len() - 2;
    assert_eq!(renumbered[at], 2 << 3, "field 2, varint");
    renumbered[at] = 3 << 3;
    let why = unchanged::<pb::SubmitResponse>(&renumbered, "platter.v1.SubmitResponse", &pool)
        .unwrap_err();
    assert!(why.contains("field number 3"), "{why}");
    // `campaign_id` (field 1, a string) as if it had become a varint.
    let mut retyped = good;
    assert_eq!(retyped[0], (1 << 3) | 2, "field 1, length-delimited");
    retyped[0] = 1 << 3;
    let why =
        unchanged::<pb::SubmitResponse>(&retyped, "platter.v1.SubmitResponse", &pool).unwrap_err();
    assert!(why.contains("does not decode"), "{why}");

    // And a recorded line whose field was renumbered, retyped or removed.
    let today: BTreeMap<String, String> = contract_lines(&pool)
        .into_iter()
        .map(|l| (key(&l).0, l))
        .collect();
    assert_eq!(broken("platter.v1.Ack.seq = 1 uint64", &today, &pool), None);
    assert!(broken("platter.v1.Ack.seq = 3 uint64", &today, &pool).is_some());
    assert!(broken("platter.v1.Ack.seq = 1 string", &today, &pool).is_some());
    let gone = broken("platter.v1.Ack.gone = 7 string", &today, &pool).unwrap();
    assert!(gone.contains("reserved 7"), "{gone}");
    let reused = broken("platter.v1.Ack.old_seq = 1 uint64", &today, &pool).unwrap();
    assert!(reused.contains("platter.v1.Ack.seq"), "{reused}");
}

/// The same, for changes made to the .proto files themselves (in memory: a renumbered, a
/// retyped and a removed field, and one removed properly), against this build's recorded
/// lines and fixtures.
#[test]
fn a_later_proto_file_that_breaks_the_contract_is_caught() {
    let text = std::fs::read_to_string(fixtures_dir().join("fields.txt")).unwrap();
    let recorded: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect();
    let current = fixtures_dir().join("wire").join(CURRENT);
    let hello = std::fs::read(current.join("agent_hello.bin")).unwrap();
    let submitted = std::fs::read(current.join("submit_response.bin")).unwrap();
    let check = |pool: &DescriptorPool| -> (Vec<String>, bool, bool) {
        let today: BTreeMap<String, String> = contract_lines(pool)
            .into_iter()
            .map(|l| (key(&l).0, l))
            .collect();
        let broken: Vec<String> = recorded
            .iter()
            .filter_map(|l| broken(l, &today, pool))
            .collect();
        let hello_read = unchanged::<pb::AgentMessage>(&hello, "platter.v1.AgentMessage", pool);
        let submitted_read =
            unchanged::<pb::SubmitResponse>(&submitted, "platter.v1.SubmitResponse", pool);
        (broken, hello_read.is_ok(), submitted_read.is_ok())
    };
    assert_eq!(check(&pool()), (vec![], true, true), "today's files");

    let renumbered = edited_pool(
        "platter/v1/agent_link.proto",
        "uint64 next_seq = 5;",
        "uint64 next_seq = 905;",
    );
    let (broken, hello_read, _) = check(&renumbered);
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert!(
        broken[0].contains("platter.v1.Hello.next_seq = 905 uint64"),
        "{broken:?}"
    );
    assert!(
        !hello_read,
        "a hello with field 5 has a field the edited Hello does not know"
    );

    let retyped = edited_pool(
        "platter/v1/common.proto",
        "uint64 size_bytes = 8;",
        "string size_bytes = 8;",
    );
    let (broken, hello_read, _) = check(&retyped);
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert!(
        broken[0].contains("platter.v1.Device.size_bytes = 8 string"),
        "{broken:?}"
    );
    assert!(
        !hello_read,
        "a device's size as a string cannot be read from a varint"
    );

    let removed = edited_pool("platter/v1/control.proto", "  bool resumed = 2;\n", "");
    let (broken, _, submitted_read) = check(&removed);
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert!(broken[0].contains("reserved 2;"), "{broken:?}");
    assert!(
        !submitted_read,
        "field 2 of an earlier answer is not known any more"
    );

    let retired = edited_pool(
        "platter/v1/control.proto",
        "  bool resumed = 2;\n",
        "  reserved 2;\n",
    );
    assert_eq!(
        check(&retired),
        (vec![], true, true),
        "a field removed with its number reserved breaks nothing"
    );
}
