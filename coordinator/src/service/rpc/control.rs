//! The Control service: submit, follow, report, cancel.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use platter_proto::model::{CampaignId, HostName};
use platter_proto::v1 as pb;
use platter_proto::v1::control_server::Control;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::pki::Role;
use crate::planning::planner;
use crate::report::judge::{CampaignComparison, ComparisonRow, JudgedComparison, UnmatchedCell};
use crate::report::{Format, Report};
use crate::service::campaigns::{self, Unplanned};
use crate::service::hub::{Hub, Presence};
use crate::service::status::CampaignStatus;
use crate::service::task_stream::task_stream;
use crate::service::tls::Auth;
use crate::spec;
use crate::store::agents::{Devices, DevicesByHost, DevicesJson, StoredAgent};
use crate::store::{CampaignState, Store, StoreError, StoreFault};

/// Watchers get at most this many updates per second.
const WATCH_MIN_INTERVAL: Duration = Duration::from_millis(100);
/// While a watch waits its turn to load, how often at most it looks whether its campaign
/// ended (one row), after a change: a `platter run` ends within this of its last step.
const WATCH_END_CHECK: Duration = Duration::from_millis(10);
/// How soon a watch looks again after its status could not be read.
const WATCH_RETRY: Duration = Duration::from_millis(500);
/// A watch waits this many times as long as its last status took to load before it loads
/// the next: a status reads every step record of the campaign, so a long campaign's loads
/// take longer, and at a fixed pace they took a growing share of the machine the agent
/// measures on (a `platter run` of 4,000 steps spent 29% of its samples loading status;
/// each step cost more the longer the plan). Paced by cost, a watch takes at most a
/// twentieth of a core, whatever the campaign's length.
const WATCH_COST_FACTOR: u32 = 20;

pub struct ControlService {
    pub store: Store,
    pub hub: Arc<Hub>,
    pub shutdown: CancellationToken,
    pub auth: Auth,
    /// What a submitted campaign may ask for (`platter serve --max-…`).
    pub limits: spec::Limits,
    /// What this coordinator last read of campaigns and agents.
    pub last: Arc<LastRead>,
    /// Fires schedules: a trigger's, at once (`Trigger`).
    pub scheduler: Arc<crate::service::schedules::Scheduler>,
}

/// What this coordinator last read from its store for `status`, `watch` and `agents`:
/// while the store cannot be read (it does not answer), they answer with this, marked
/// with the store's fault and since when, rather than an error — and hosts' presence,
/// which is the coordinator's own, stays current.
#[derive(Default)]
pub struct LastRead {
    /// By campaign id and by the reference asked for (a name).
    campaigns: std::sync::Mutex<std::collections::HashMap<String, CampaignStatus>>,
    all: std::sync::Mutex<Option<Vec<CampaignStatus>>>,
    /// Campaigns as last listed, read again only once they changed.
    known: crate::service::status::Known,
    /// Shared, not copied: a fleet of 100,000 agents is 20 MB of rows.
    agents: std::sync::Mutex<Option<Arc<Vec<StoredAgent>>>>,
    /// The drives' JSON last read by name of each agent (those listed or shown).
    drives: std::sync::Mutex<DevicesByHost>,
}

impl LastRead {
    fn remember_drives(&self, read: &DevicesByHost) {
        let mut drives = self.drives.lock().expect("last-read lock");
        drives.extend(read.iter().map(|(h, d)| (h.clone(), d.clone())));
    }

    /// The drives last read of the agents `which` names (`Devices::Containing`: of every
    /// agent whose drives were read by name; the caller looks at their models).
    fn drives(&self, which: Devices<'_>) -> DevicesByHost {
        let drives = self.drives.lock().expect("last-read lock");
        match which {
            Devices::Of(hosts) => hosts
                .iter()
                .filter_map(|h| Some((h.clone(), drives.get(h)?.clone())))
                .collect(),
            Devices::Containing(_) | Devices::All => drives.clone(),
        }
    }

    fn campaign(&self, reference: &str, s: &CampaignStatus) {
        let mut known = self.campaigns.lock().expect("last-read lock");
        known.insert(reference.to_string(), s.clone());
        known.insert(s.campaign_id.to_string(), s.clone());
    }

    /// `reference`'s last status, marked with `fault`, its hosts' presence as it is now.
    fn campaign_now(
        &self,
        reference: &str,
        fault: StoreFault,
        hub: &Hub,
    ) -> Option<CampaignStatus> {
        let mut s = self
            .campaigns
            .lock()
            .expect("last-read lock")
            .get(reference)?
            .clone();
        marked(&mut s, fault, hub);
        Some(s)
    }
}

/// `s` as known while the store cannot be read: its fault, and its hosts' presence here
/// now (a host connected to another coordinator sharing the store is as last read).
fn marked(s: &mut CampaignStatus, fault: StoreFault, hub: &Hub) {
    s.store_fault = Some(fault);
    for h in &mut s.hosts {
        if hub.is_connected(&h.host) {
            h.connected = true;
            h.coordinator = hub.name().unwrap_or_default().to_string();
        } else if h.coordinator.is_empty() || Some(h.coordinator.as_str()) == hub.name() {
            h.connected = false;
        }
        h.journal_fault = hub.journal_fault(&h.host).unwrap_or_default();
    }
}

/// The store's fault when `e` says it cannot be read (rather than there being no such
/// campaign): the one the store keeps, or `e`'s own.
fn unreadable(store: &Store, e: &StoreError) -> Option<StoreFault> {
    crate::store::is_store_fault(e).then(|| {
        store.fault().unwrap_or_else(|| StoreFault {
            reason: crate::store::reason(e),
            since_unix_ms: crate::store::now_ms(),
            not_answering: matches!(e, StoreError::Timeout { .. } | StoreError::NotAnswering(_)),
        })
    })
}

/// How much of a rejected campaign's error list a status carries, percent-encoded: it
/// travels in an HTTP/2 header (grpc-message), and hyper's client refuses a header list
/// over 16 KiB; the rest is counted ("and 40 more mistakes").
const STATUS_MESSAGE_BYTES: usize = 12 << 10;

/// An invalid campaign as INVALID_ARGUMENT, every mistake that fits on its own line.
pub(super) fn invalid_campaign(e: &spec::SpecErrors) -> Status {
    Status::invalid_argument(e.render(spec::MAX_SHOWN, STATUS_MESSAGE_BYTES))
}

pub(super) fn store_status(e: StoreError) -> Status {
    match e {
        StoreError::NoCampaign(id) => Status::not_found(format!("no campaign {id}")),
        e @ (StoreError::Commit(_) | StoreError::NotAnswering(_)) => {
            Status::unavailable(e.to_string())
        }
        e if crate::store::is_store_fault(&e) => Status::unavailable(format!(
            "the coordinator's store failed: {}; nothing was changed, try again once it works",
            crate::store::reason(&e)
        )),
        e => Status::internal(e.to_string()),
    }
}

/// Runs store reads and writes, parsing and rendering off the async workers, which carry
/// every agent's stream and heartbeats: a long report or a store waiting on its busy
/// timeout must not starve them.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Status> + Send + 'static,
) -> Result<T, Status> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Status::internal(format!("a blocking task failed: {e}")))?
}

/// A report's answer: `rendered`, and the counts a client's exit status and the console's
/// verdict are made of.
pub(crate) fn report_response(report: &Report, rendered: String) -> pb::ReportResponse {
    pb::ReportResponse {
        rendered,
        steps_failed: report.steps_failed,
        plans_refused: report.refused.len() as u32,
        qualification_failed: report.qualification_failed(),
        measurements_missing: report.lost_measurements(),
        comparisons_not_made: report.uncompared(),
        drives_not_steady: report.not_steady(),
        qualification_checks: Some(report.verdicts.len() as u32),
    }
}

impl From<JudgedComparison> for pb::ComparisonRow {
    fn from(j: JudgedComparison) -> Self {
        let r = j.row;
        pb::ComparisonRow {
            host: r.host,
            context: r.context,
            key: r.key,
            baseline: r.baseline,
            candidate: r.candidate,
            metric: r.metric,
            ratio: r.ratio,
            penalty_pct: r.penalty_pct,
            ci_low_pct: r.ci_pct.map(|c| c.0),
            ci_high_pct: r.ci_pct.map(|c| c.1),
            significant: r.significant,
            text: r.text,
            ci_level: j.ci_level,
            p_value: j.p_value,
            holm_p: j.holm_p,
            family: j.family as u32,
            not_compared: !j.compared,
            too_few_runs: j.too_few_runs.map(|t| pb::TooFewRuns {
                baseline_runs: t.runs.0 as u32,
                candidate_runs: t.runs.1 as u32,
                family: t.family as u32,
                runs_needed: t.runs_needed as u32,
            }),
        }
    }
}

impl From<pb::ComparisonRow> for JudgedComparison {
    fn from(r: pb::ComparisonRow) -> Self {
        JudgedComparison {
            row: ComparisonRow {
                host: r.host,
                context: r.context,
                key: r.key,
                baseline: r.baseline,
                candidate: r.candidate,
                metric: r.metric,
                ratio: r.ratio,
                penalty_pct: r.penalty_pct,
                ci_pct: r.ci_low_pct.zip(r.ci_high_pct),
                significant: r.significant,
                text: r.text,
            },
            ci_level: r.ci_level,
            p_value: r.p_value,
            holm_p: r.holm_p,
            family: r.family as usize,
            // Unset by a coordinator older than the field, whose lines each carried
            // their own 95% interval and said so in their text.
            too_few_runs: r.too_few_runs.map(|t| crate::stats::TooFewRuns {
                runs: (t.baseline_runs as usize, t.candidate_runs as usize),
                family: t.family as usize,
                runs_needed: t.runs_needed as usize,
            }),
            compared: !r.not_compared,
            // The wire row names no cells: a campaign comparison's rows are read, not
            // looked up.
            cells: None,
        }
    }
}

impl From<UnmatchedCell> for pb::UnmatchedCell {
    fn from(c: UnmatchedCell) -> Self {
        pb::UnmatchedCell {
            host: c.host,
            params: c
                .params
                .into_iter()
                .map(|(name, value)| pb::CellParam { name, value })
                .collect(),
        }
    }
}

impl From<pb::UnmatchedCell> for UnmatchedCell {
    fn from(c: pb::UnmatchedCell) -> Self {
        UnmatchedCell {
            host: c.host,
            params: c.params.into_iter().map(|p| (p.name, p.value)).collect(),
        }
    }
}

impl From<CampaignComparison> for pb::CompareResponse {
    fn from(c: CampaignComparison) -> Self {
        pb::CompareResponse {
            rows: c.rows.into_iter().map(Into::into).collect(),
            only_in_a: c.only_in_a.into_iter().map(Into::into).collect(),
            only_in_b: c.only_in_b.into_iter().map(Into::into).collect(),
        }
    }
}

/// The wire's report formats, each with this build's `Format`.
const REPORT_FORMATS: [(pb::ReportFormat, Format); 7] = [
    (pb::ReportFormat::Table, Format::Table),
    (pb::ReportFormat::Markdown, Format::Markdown),
    (pb::ReportFormat::Json, Format::Json),
    (pb::ReportFormat::Csv, Format::Csv),
    (pb::ReportFormat::CsvSamples, Format::CsvSamples),
    (pb::ReportFormat::Junit, Format::Junit),
    (pb::ReportFormat::Html, Format::Html),
];

/// `format` as `ReportRequest.report_format` carries it.
pub fn report_format_to_wire(format: Format) -> pb::ReportFormat {
    REPORT_FORMATS
        .iter()
        .find(|(_, f)| *f == format)
        .map(|(w, _)| *w)
        .expect("every format has its wire format")
}

/// The format a (specified) wire format asks for.
fn report_format_from_wire(wire: pb::ReportFormat) -> Format {
    REPORT_FORMATS
        .iter()
        .find(|(w, _)| *w == wire)
        .map_or(Format::Table, |(_, f)| *f)
}

/// The comparison a coordinator answered for `a`, `b` and `metric`.
pub fn comparison_from_pb(
    r: pb::CompareResponse,
    a: &str,
    b: &str,
    metric: &str,
) -> CampaignComparison {
    CampaignComparison {
        baseline: a.to_string(),
        candidate: b.to_string(),
        metric: metric.to_string(),
        rows: r.rows.into_iter().map(Into::into).collect(),
        only_in_a: r.only_in_a.into_iter().map(Into::into).collect(),
        only_in_b: r.only_in_b.into_iter().map(Into::into).collect(),
        together: None,
        undecided: None,
    }
    .with_summary()
}

impl From<StoreFault> for pb::StoreFault {
    fn from(f: StoreFault) -> Self {
        pb::StoreFault {
            reason: f.reason,
            since_unix_ms: f.since_unix_ms,
            not_answering: f.not_answering,
        }
    }
}

/// A fault as a coordinator reported it (`platter health` words it as `/readyz` does).
impl From<pb::StoreFault> for StoreFault {
    fn from(f: pb::StoreFault) -> Self {
        StoreFault {
            reason: f.reason,
            since_unix_ms: f.since_unix_ms,
            not_answering: f.not_answering,
        }
    }
}

impl From<CampaignStatus> for pb::CampaignStatus {
    fn from(s: CampaignStatus) -> Self {
        let state = match s.state {
            CampaignState::Running => pb::CampaignState::Running,
            CampaignState::Done => pb::CampaignState::Done,
            CampaignState::Cancelled => pb::CampaignState::Cancelled,
            CampaignState::Other(_) => pb::CampaignState::Unspecified,
        };
        pb::CampaignStatus {
            campaign_id: s.campaign_id.into_string(),
            name: s.name,
            series: s.series,
            state: state as i32,
            cells_total: s.cells_total,
            cells_done: s.cells_done,
            steps_total: s.steps_total,
            steps_done: s.steps_done,
            steps_failed: s.steps_failed,
            hosts: s
                .hosts
                .into_iter()
                .map(|h| pb::HostProgress {
                    host: h.host.into_string(),
                    connected: h.connected,
                    steps_total: h.steps_total,
                    steps_done: h.steps_done,
                    current_step: h.current_step,
                    elapsed_ms: h.elapsed_ms,
                    refused: h.refused,
                    coordinator: h.coordinator,
                    journal_fault: h.journal_fault,
                })
                .collect(),
            created_unix_ms: s.created_unix_ms,
            store_fault: s.store_fault.map(Into::into),
        }
    }
}

/// Parses a submitted campaign, resolves its label selectors against the known agents
/// and plans it against their inventories (`service::campaigns::expand`).
fn expand(
    store: &Store,
    limits: &spec::Limits,
    req: &pb::SubmitRequest,
    generation: u32,
) -> Result<(spec::Campaign, planner::PlannedCampaign), Status> {
    campaigns::expand(
        store,
        limits,
        &req.file_name,
        &req.yaml,
        &req.local_host,
        generation,
    )
    .map_err(unplanned_status)
}

fn unplanned_status(e: Unplanned) -> Status {
    match e {
        Unplanned::Invalid(e) => invalid_campaign(&e),
        Unplanned::Refused(words) => Status::invalid_argument(words),
        Unplanned::Store(e) => store_status(e),
    }
}

impl ControlService {
    /// Every agent the store knows (or, while it cannot be read, those last read and
    /// connected since), each in its state, its drives not read yet: what `list_agents`
    /// selects from, and what the console's pages share a read of and page through (at
    /// 100,000 agents, reading every agent's drives for a page of 50 was most of a page's
    /// time).
    pub(crate) async fn fleet(&self) -> Result<Fleet, Status> {
        let store = self.store.clone();
        let hub = self.hub.clone();
        let last = self.last.clone();
        let (rows, fleet, last_read) = blocking(move || {
            let read = || {
                let fleet = crate::service::presence::fleet_of(&hub)?;
                Ok((Arc::new(store.agents()?), fleet))
            };
            match read() {
                Ok((rows, fleet)) => {
                    *last.agents.lock().expect("last-read lock") = Some(rows.clone());
                    Ok((rows, fleet, false))
                }
                // The store cannot be read: the agents last read, and those connected
                // here since (their presence is this coordinator's own).
                Err(e) => {
                    unreadable(&store, &e).ok_or_else(|| store_status(e))?;
                    let last = last.agents.lock().expect("last-read lock").clone();
                    let mut rows = last.map(|r| r.to_vec()).unwrap_or_default();
                    let listed: std::collections::HashSet<HostName> =
                        rows.iter().map(|r| r.host.clone()).collect();
                    for host in hub.connected_hosts() {
                        if !listed.contains(&host) {
                            rows.push(StoredAgent {
                                host,
                                boot_id: String::new(),
                                version: String::new(),
                                last_seen_unix_ms: 0,
                                labels: Default::default(),
                                current_campaign: None,
                            });
                        }
                    }
                    rows.sort_by(|a, b| a.host.cmp(&b.host));
                    Ok((Arc::new(rows), None, true))
                }
            }
        })
        .await?;
        let infos = rows
            .iter()
            .map(|stored| {
                let mut a = pb::AgentInfo {
                    host: stored.host.to_string(),
                    connected: false,
                    boot_id: stored.boot_id.clone(),
                    agent_version: stored.version.clone(),
                    last_seen_unix_ms: stored.last_seen_unix_ms,
                    // Read for the agents listed (`Fleet::whole`).
                    devices: Vec::new(),
                    labels: stored.labels.clone(),
                    state: String::new(),
                    current_campaign: stored
                        .current_campaign
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default(),
                    tools: Vec::new(),
                    coordinator: String::new(),
                    agent_state: 0,
                    journal_fault: String::new(),
                };
                let w = crate::service::presence::whereabouts(&self.hub, fleet.as_ref(), &a.host);
                a.tools = w.tools.iter().map(pb::ToolVersion::from).collect();
                a.coordinator = w.coordinator;
                let presence = w.presence;
                a.connected = presence == Presence::Connected;
                let fault = a
                    .connected
                    .then(|| self.hub.journal_fault(&a.host))
                    .flatten();
                let state = match (presence, &fault) {
                    // Connected, and holding its steps: the one state that needs a person.
                    (Presence::Connected, Some(_)) => pb::AgentState::JournalFault,
                    (Presence::Connected, None) if a.current_campaign.is_empty() => {
                        pb::AgentState::Idle
                    }
                    (Presence::Connected, None) => pb::AgentState::Busy,
                    (Presence::Lost, _) => pb::AgentState::Lost,
                    (Presence::Offline, _) => pb::AgentState::Offline,
                };
                a.agent_state = state as i32;
                a.journal_fault = fault.unwrap_or_default();
                // The words, for clients older than `agent_state`.
                a.state = match state {
                    pb::AgentState::JournalFault => format!("journal fault: {}", a.journal_fault),
                    s => crate::views::state_word(s).to_string(),
                };
                a
            })
            .collect();
        Ok(Fleet {
            store: self.store.clone(),
            infos,
            last_read,
            last: self.last.clone(),
            by_name: DRIVES_BY_NAME,
            store_fault: self.store.fault().map(Into::into),
        })
    }
}

#[tonic::async_trait]
impl Control for ControlService {
    async fn submit(
        &self,
        request: Request<pb::SubmitRequest>,
    ) -> Result<Response<pb::SubmitResponse>, Status> {
        self.auth.require(&request, Role::Operator)?;
        let req = request.into_inner();
        let (store, hub, limits) = (self.store.clone(), self.hub.clone(), self.limits);
        let response = blocking(move || {
            let hash = campaigns::stored_hash(
                &store,
                &limits,
                &req.file_name,
                &req.yaml,
                &req.local_host,
            )
            .map_err(unplanned_status)?;
            if req.resume {
                if let Some(id) = store.resumable(&hash).map_err(store_status)? {
                    tracing::info!(campaign = %id, "resuming unfinished campaign");
                    hub.dispatch_all();
                    return Ok(pb::SubmitResponse {
                        campaign_id: id.into_string(),
                        resumed: true,
                    });
                }
            }
            let generation = store.next_generation(&hash).map_err(store_status)?;
            let (_, planned) = expand(&store, &limits, &req, generation)?;
            store
                .insert_campaign(&planned, &req.file_name, &req.yaml)
                .map_err(store_status)?;
            tracing::info!(campaign = %planned.id, name = %planned.name, plans = planned.plans.len(), "campaign submitted");
            // Only the campaign's hosts can have a new plan: with thousands of agents
            // connected, asking the store about every one of them would cost a
            // transaction each.
            let hosts: Vec<HostName> = planned.plans.iter().map(|p| p.host.clone()).collect();
            hub.dispatch_to(&hosts);
            Ok(pb::SubmitResponse {
                campaign_id: planned.id.into_string(),
                resumed: false,
            })
        })
        .await?;
        Ok(Response::new(response))
    }

    async fn plan(
        &self,
        request: Request<pb::SubmitRequest>,
    ) -> Result<Response<pb::PlanResponse>, Status> {
        self.auth.require(&request, Role::Operator)?;
        let (store, limits, req) = (self.store.clone(), self.limits, request.into_inner());
        let rendered = blocking(move || {
            let (campaign, planned) = expand(&store, &limits, &req, 1)?;
            Ok(crate::planning::text::render(&campaign, &planned))
        })
        .await?;
        Ok(Response::new(pb::PlanResponse { rendered }))
    }

    async fn compare(
        &self,
        request: Request<pb::CompareRequest>,
    ) -> Result<Response<pb::CompareResponse>, Status> {
        self.auth.require(&request, Role::Operator)?;
        let req = request.into_inner();
        let metric = if req.metric.is_empty() {
            "wall".to_string()
        } else {
            req.metric
        };
        let (store, ids) = (self.store.clone(), (req.a.clone(), req.b.clone()));
        let compared = blocking(move || {
            use crate::report::judge::{check_side_host, compare_sides, split_side};
            let ((a_ref, a_host), (b_ref, b_host)) = (split_side(&ids.0), split_side(&ids.1));
            let a = Report::load(&store, a_ref).map_err(store_status)?;
            let b = Report::load(&store, b_ref).map_err(store_status)?;
            check_side_host(&a, a_host).map_err(Status::not_found)?;
            check_side_host(&b, b_host).map_err(Status::not_found)?;
            Ok(compare_sides((&a, a_host), (&b, b_host), &metric))
        })
        .await?;
        Ok(Response::new(compared.into()))
    }

    async fn add_schedule(
        &self,
        request: Request<pb::AddScheduleRequest>,
    ) -> Result<Response<pb::ScheduleInfo>, Status> {
        self.auth.require(&request, Role::Operator)?;
        Ok(Response::new(
            self.add_schedule(request.into_inner()).await?,
        ))
    }

    async fn list_schedules(
        &self,
        request: Request<pb::ListSchedulesRequest>,
    ) -> Result<Response<pb::ListSchedulesResponse>, Status> {
        self.auth.require(&request, Role::Operator)?;
        Ok(Response::new(self.list_schedules().await?))
    }

    async fn get_schedule(
        &self,
        request: Request<pb::GetScheduleRequest>,
    ) -> Result<Response<pb::ScheduleInfo>, Status> {
        self.auth.require(&request, Role::Operator)?;
        Ok(Response::new(
            self.get_schedule(request.into_inner().name).await?,
        ))
    }

    async fn set_schedule_paused(
        &self,
        request: Request<pb::SetSchedulePausedRequest>,
    ) -> Result<Response<pb::ScheduleInfo>, Status> {
        self.auth.require(&request, Role::Operator)?;
        Ok(Response::new(
            self.set_schedule_paused(request.into_inner()).await?,
        ))
    }

    async fn remove_schedule(
        &self,
        request: Request<pb::GetScheduleRequest>,
    ) -> Result<Response<pb::RemoveScheduleResponse>, Status> {
        self.auth.require(&request, Role::Operator)?;
        self.remove_schedule(request.into_inner().name).await?;
        Ok(Response::new(pb::RemoveScheduleResponse {}))
    }

    async fn trigger(
        &self,
        request: Request<pb::TriggerRequest>,
    ) -> Result<Response<pb::TriggerResponse>, Status> {
        self.auth.require(&request, Role::Operator)?;
        Ok(Response::new(self.trigger(request.into_inner()).await?))
    }

    async fn history(
        &self,
        request: Request<pb::HistoryRequest>,
    ) -> Result<Response<pb::HistoryResponse>, Status> {
        self.auth.require(&request, Role::Operator)?;
        let (store, req) = (self.store.clone(), request.into_inner());
        let response = blocking(move || {
            let metric = if req.metric.is_empty() {
                "wall"
            } else {
                &req.metric
            };
            let until = match req.until.as_str() {
                "" => None,
                run => Some(
                    store
                        .read(|c| crate::store::resolve_campaign(c, run))
                        .map_err(store_status)?
                        .into_string(),
                ),
            };
            let h = crate::report::history::History::load(
                &store,
                &req.series,
                metric,
                (!req.host.is_empty()).then_some(req.host.as_str()),
                req.threshold_pct,
                req.last.map(|n| n as usize),
                until.as_deref(),
            )
            .map_err(store_status)?;
            if h.runs.is_empty() && h.left_out.is_empty() {
                return Err(Status::not_found(format!(
                    "no series {:?}: no campaign has it as its `series:` or name",
                    req.series
                )));
            }
            Ok(pb::HistoryResponse {
                // For clients older than `history` (COMPATIBILITY.md).
                history_json: serde_json::to_string(&h)
                    .map_err(|e| Status::internal(e.to_string()))?,
                until_id: until.unwrap_or_default(),
                history: Some(crate::views::history_to_pb(&h)),
            })
        })
        .await?;
        Ok(Response::new(response))
    }

    async fn ledger(
        &self,
        request: Request<pb::LedgerRequest>,
    ) -> Result<Response<pb::LedgerResponse>, Status> {
        self.auth.require(&request, Role::Operator)?;
        let (store, req) = (self.store.clone(), request.into_inner());
        use crate::report::ledger::{answer, LedgerError};
        let question = crate::views::question_of(req).map_err(Status::invalid_argument)?;
        let answer = blocking(move || {
            answer(&store, &question).map_err(|e| match e {
                LedgerError::Store(e) => store_status(e),
                LedgerError::NotFound(why) => Status::not_found(why),
            })
        })
        .await?;
        Ok(Response::new(crate::views::ledger_to_pb(&answer)))
    }

    async fn list_flags(
        &self,
        request: Request<pb::ListFlagsRequest>,
    ) -> Result<Response<pb::ListFlagsResponse>, Status> {
        self.auth.require(&request, Role::Operator)?;
        let (store, req) = (self.store.clone(), request.into_inner());
        use crate::store::flags::{FlagFilter, FlagState};
        let states = req
            .states
            .iter()
            .map(|s| {
                crate::views::state_of(*s)
                    .ok_or_else(|| Status::invalid_argument(format!("no flag state {s}")))
            })
            .collect::<Result<Vec<FlagState>, Status>>()?;
        let kind = match req.kind {
            0 => None,
            k => Some(
                crate::views::flag_kind_of(k)
                    .ok_or_else(|| Status::invalid_argument(format!("no flag kind {k}")))?,
            ),
        };
        let flags = blocking(move || {
            let mut flags = store
                .flags(&FlagFilter {
                    state: match states.as_slice() {
                        [one] => Some(*one),
                        _ => None,
                    },
                    kind,
                    series: Some(req.series).filter(|s| !s.is_empty()),
                    host: Some(req.host).filter(|h| !h.is_empty()),
                    model: None,
                    limit: None,
                })
                .map_err(store_status)?;
            // None asked: the live ones.
            flags.retain(|f| {
                if states.is_empty() {
                    f.state.is_live()
                } else {
                    states.contains(&f.state)
                }
            });
            if req.limit > 0 {
                flags.truncate(req.limit as usize);
            }
            Ok(flags)
        })
        .await?;
        Ok(Response::new(pb::ListFlagsResponse {
            flags: flags.iter().map(crate::views::flag_to_pb).collect(),
        }))
    }

    async fn set_flag_state(
        &self,
        request: Request<pb::SetFlagStateRequest>,
    ) -> Result<Response<pb::Flag>, Status> {
        let peer = self.auth.require(&request, Role::Operator)?;
        let (store, req) = (self.store.clone(), request.into_inner());
        let state = crate::views::state_of(req.state)
            .ok_or_else(|| Status::invalid_argument("a flag's state is needed"))?;
        // Who: the certificate's name, with the name the person gave beside it when it
        // differs (an operator certificate may be a team's).
        let by = match (peer.map(|p| p.name), req.by.trim()) {
            (Some(cert), "") => cert,
            (Some(cert), said) if said == cert => cert,
            (Some(cert), said) => format!("{said} (certificate {cert})"),
            (None, "") => "operator".to_string(),
            (None, said) => said.to_string(),
        };
        let flag = blocking(move || {
            store
                .set_flag_state(&req.id, state, &req.note, &by)
                .map_err(|e| match e {
                    e @ StoreError::NoFlag(_) => Status::not_found(e.to_string()),
                    StoreError::Refused(why) => Status::invalid_argument(why),
                    e => store_status(e),
                })
        })
        .await?;
        tracing::info!(flag = %flag.id, state = flag.state.as_str(), by = %flag.state_by, "flag state set");
        Ok(Response::new(crate::views::flag_to_pb(&flag)))
    }

    async fn list_campaigns(
        &self,
        request: Request<pb::ListCampaignsRequest>,
    ) -> Result<Response<pb::ListCampaignsResponse>, Status> {
        self.auth.require(&request, Role::Operator)?;
        let (store, hub, last) = (self.store.clone(), self.hub.clone(), self.last.clone());
        let (all, store_fault) =
            blocking(
                move || match CampaignStatus::load_all_known(&store, &hub, &last.known) {
                    Ok(all) => {
                        *last.all.lock().expect("last-read lock") = Some(all.clone());
                        Ok((all, store.fault()))
                    }
                    Err(e) => {
                        let fault = unreadable(&store, &e).ok_or_else(|| store_status(e))?;
                        let mut all = last
                            .all
                            .lock()
                            .expect("last-read lock")
                            .clone()
                            .unwrap_or_default();
                        for s in &mut all {
                            marked(s, fault.clone(), &hub);
                        }
                        Ok((all, Some(fault)))
                    }
                },
            )
            .await?;
        Ok(Response::new(pb::ListCampaignsResponse {
            campaigns: all.into_iter().map(Into::into).collect(),
            store_fault: store_fault.map(Into::into),
        }))
    }

    async fn get_campaign(
        &self,
        request: Request<pb::GetCampaignRequest>,
    ) -> Result<Response<pb::CampaignStatus>, Status> {
        self.auth.require(&request, Role::Operator)?;
        let id = request.into_inner().campaign_id;
        let s = load_status(&self.store, &self.hub, &self.last, id).await?;
        Ok(Response::new(s.into()))
    }

    type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::CampaignStatus, Status>> + Send>>;

    async fn watch(
        &self,
        request: Request<pb::GetCampaignRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        self.auth.require(&request, Role::Operator)?;
        let id = request.into_inner().campaign_id;
        // Fail fast on an unknown campaign, and follow the one a name stands for now
        // (not a newer one of the same name submitted meanwhile).
        let id = load_status(&self.store, &self.hub, &self.last, id)
            .await?
            .campaign_id;
        let (store, hub, shutdown) = (self.store.clone(), self.hub.clone(), self.shutdown.clone());
        let known = self.last.clone();
        let mut changed = store.subscribe();
        let stream = task_stream(move |tx| async move {
            let mut last = None;
            loop {
                let loading = std::time::Instant::now();
                let s = match load_status(&store, &hub, &known, id.to_string()).await {
                    Ok(s) => s,
                    // The store does not answer and nothing read before stands in (this
                    // coordinator never read the campaign, or it came back from a fault
                    // and the store failed again): the watch waits it out, the last
                    // status it sent marked with the fault, rather than ending it — the
                    // campaign goes on meanwhile.
                    Err(e) if e.code() == tonic::Code::Unavailable => {
                        if let (Some(l), Some(fault)) = (&last, store.fault()) {
                            let mut marked_now: CampaignStatus = Clone::clone(l);
                            marked(&mut marked_now, fault, &hub);
                            if last.as_ref() != Some(&marked_now) {
                                last = Some(marked_now.clone());
                                if tx.send(Ok(marked_now.into())).await.is_err() {
                                    return;
                                }
                            }
                        }
                        tokio::select! {
                            _ = tokio::time::sleep(WATCH_RETRY) => continue,
                            _ = shutdown.cancelled() => return,
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                };
                let took = loading.elapsed();
                tracing::debug!(campaign = %id, took_ms = took.as_millis() as u64, "watch: status loaded");
                let ended = s.ended();
                if last.as_ref() != Some(&s) {
                    last = Some(s.clone());
                    if tx.send(Ok(s.into())).await.is_err() {
                        return;
                    }
                }
                if ended {
                    return;
                }
                tokio::select! {
                    r = changed.changed() => if r.is_err() { return },
                    // Connection changes do not touch the store: look again now and then.
                    _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                    _ = shutdown.cancelled() => return,
                }
                // The campaign's end is not waited for: its state is one row, looked at
                // at once and then while the next load waits its turn (waiting out the
                // interval first cost every `platter run` ~0.1 s at its end).
                let until =
                    tokio::time::Instant::now() + WATCH_MIN_INTERVAL.max(took * WATCH_COST_FACTOR);
                let ended = || {
                    let (store, id) = (store.clone(), id.clone());
                    async move {
                        let state = blocking(move || Ok(store.campaign_state(&id).ok())).await;
                        matches!(state, Ok(Some(s)) if s != CampaignState::Running)
                    }
                };
                // Looked at again after each change, at most every `WATCH_END_CHECK`.
                while !ended().await {
                    tokio::select! {
                        r = changed.changed() => if r.is_err() { return },
                        _ = tokio::time::sleep_until(until) => break,
                        _ = shutdown.cancelled() => return,
                    }
                    tokio::time::sleep(WATCH_END_CHECK).await;
                }
            }
        });
        Ok(Response::new(stream))
    }

    async fn list_agents(
        &self,
        request: Request<pb::ListAgentsRequest>,
    ) -> Result<Response<pb::ListAgentsResponse>, Status> {
        self.auth.require(&request, Role::Operator)?;
        let want = request.into_inner();
        let state = crate::views::filter_word(&want);
        if !state.is_empty() && !crate::views::AGENT_STATES.contains(&state) {
            return Err(Status::invalid_argument(format!(
                "no agent state {state:?}: one of {}",
                crate::views::AGENT_STATES.join(", ")
            )));
        }
        let fleet = self.fleet().await?;
        // Reading the listed agents' drives blocks.
        let response = blocking(move || fleet.select(&want)).await?;
        Ok(Response::new(response))
    }

    async fn report(
        &self,
        request: Request<pb::ReportRequest>,
    ) -> Result<Response<pb::ReportResponse>, Status> {
        self.auth.require(&request, Role::Operator)?;
        let req = request.into_inner();
        let format = match pb::ReportFormat::try_from(req.report_format) {
            // A client older than `report_format`: its words.
            Ok(pb::ReportFormat::Unspecified) if req.format.is_empty() => Some(Format::Table),
            Ok(pb::ReportFormat::Unspecified) => Format::parse(&req.format),
            Ok(f) => Some(report_format_from_wire(f)),
            Err(_) => None,
        };
        let format = format.ok_or_else(|| {
            Status::invalid_argument(format!(
                "unknown report format {:?} ({}): use table, markdown, json, csv, csv-samples, junit or html",
                req.format, req.report_format
            ))
        })?;
        // Reading the store and rendering block: off the async workers, which carry every
        // agent's stream and heartbeats.
        let store = self.store.clone();
        let response = blocking(move || {
            let report =
                Report::load_for(&store, &req.campaign_id, format).map_err(store_status)?;
            Ok(report_response(&report, format.exporter().render(&report)))
        })
        .await?;
        Ok(Response::new(response))
    }

    async fn cancel(
        &self,
        request: Request<pb::CancelRequest>,
    ) -> Result<Response<pb::CancelResponse>, Status> {
        self.auth.require(&request, Role::Operator)?;
        let id = CampaignId::from(request.into_inner().campaign_id);
        let (store, hub) = (self.store.clone(), self.hub.clone());
        blocking(move || {
            let held = store.cancel_campaign(&id).map_err(store_status)?;
            for (plan, host) in held {
                hub.cancel(&host, &plan);
                // Its next plan, if the cancelled one was only sent.
                hub.dispatch(&host);
            }
            Ok(())
        })
        .await?;
        Ok(Response::new(pb::CancelResponse {}))
    }
}

/// A campaign's status, read off the async workers.
/// A campaign's status, from the store or, while the store cannot be read, as this
/// coordinator last read it (`LastRead`).
async fn load_status(
    store: &Store,
    hub: &Arc<Hub>,
    last: &Arc<LastRead>,
    id: String,
) -> Result<CampaignStatus, Status> {
    let (store, hub, last) = (store.clone(), hub.clone(), last.clone());
    blocking(move || match CampaignStatus::load(&store, &hub, &id) {
        Ok(s) => {
            last.campaign(&id, &s);
            Ok(s)
        }
        Err(e) => unreadable(&store, &e)
            .and_then(|fault| last.campaign_now(&id, fault, &hub))
            .ok_or_else(|| store_status(e)),
    })
    .await
}

/// The fleet as the store has it (`ControlService::fleet`): each agent in its state, in
/// the order of their names, its drives read from the store only for the agents listed
/// (or, for a match, those no name or label of theirs selects). Its reads block.
pub(crate) struct Fleet {
    store: Store,
    /// Every agent, without its drives.
    infos: Vec<pb::AgentInfo>,
    /// The agents were what this coordinator last read: the store does not answer, and
    /// their drives are those last read too, where they were read by name
    /// (`LastRead::drives`).
    last_read: bool,
    last: Arc<LastRead>,
    /// Agents at most whose drives are read by name (`DRIVES_BY_NAME`).
    by_name: usize,
    /// Set while the store cannot commit.
    pub store_fault: Option<pb::StoreFault>,
}

/// Agents at most whose drives are read by name; more, and every agent's are read
/// (`platter agents --all`), or, for a match, those whose drives' JSON holds the words.
const DRIVES_BY_NAME: usize = 1_000;

impl Fleet {
    /// Every agent, its drives aside, by name.
    pub(crate) fn infos(&self) -> &[pb::AgentInfo] {
        &self.infos
    }

    /// The agents' drives' JSON `which` names, from the store, or as last read while it
    /// does not answer.
    fn devices(&self, which: Devices<'_>) -> Result<DevicesByHost, StoreError> {
        if self.last_read {
            return Ok(self.last.drives(which));
        }
        let read = self.store.devices_json(which)?;
        // Those read by name (listed, shown): copying a read of every agent's for the
        // store's silence took a tenth of `platter agents --all` at 100,000 agents.
        if let Devices::Of(_) = which {
            self.last.remember_drives(&read);
        }
        Ok(read)
    }

    /// `listed`, each with its drives (those in `known` as they are there, the others
    /// read). An agent whose drives cannot be read is listed without them rather than
    /// not at all, and the coordinator's log says why.
    fn whole<'a>(
        &self,
        listed: impl Iterator<Item = &'a pb::AgentInfo>,
        mut known: DevicesByHost,
    ) -> Vec<pb::AgentInfo> {
        let listed: Vec<&pb::AgentInfo> = listed.collect();
        let unknown: Vec<HostName> = listed
            .iter()
            .filter(|a| !known.contains_key(a.host.as_str()))
            .map(|a| HostName::from(a.host.clone()))
            .collect();
        let which = match unknown.len() {
            0 => None,
            n if n <= self.by_name => Some(Devices::Of(&unknown)),
            _ => Some(Devices::All),
        };
        if let Some(which) = which {
            match self.devices(which) {
                Ok(read) => known.extend(read),
                Err(e) => {
                    tracing::warn!(error = %e, "the agents' devices cannot be read; listed without them")
                }
            }
        }
        listed
            .into_iter()
            .map(|a| {
                let mut a = a.clone();
                match known.get(a.host.as_str()).map(DevicesJson::read) {
                    Some(Ok(devices)) => a.devices = devices.iter().map(pb::Device::from).collect(),
                    Some(Err(e)) => {
                        tracing::warn!(agent = %a.host, error = %e, "this agent's stored devices cannot be read")
                    }
                    None => {}
                }
                a
            })
            .collect()
    }

    /// Every agent to select from, `models` the drives' JSON of those a match on a model
    /// may select (the others have no drive whose model holds the words).
    fn candidates<'s, 'm>(
        &'s self,
        models: &'m DevicesByHost,
    ) -> impl Iterator<Item = Unread<'s, 'm>> + use<'s, 'm> {
        self.infos.iter().map(move |info| Unread {
            info,
            devices: models.get(info.host.as_str()),
        })
    }

    /// The drives' JSON a selection by `state` and `q` needs: of the agents in that state
    /// that no name or label of theirs selects — by name where they are few, else of
    /// those whose JSON holds `q`. A selection cannot be made without them: an error.
    fn models(&self, state: &str, q: &str) -> Result<DevicesByHost, Status> {
        let q = q.trim();
        let unmet = || {
            let infos = self.infos.iter();
            infos.filter(|a| crate::views::only_a_drive_may_select(a, state, q))
        };
        let read = match unmet().count() {
            0 => return Ok(DevicesByHost::default()),
            n if n <= self.by_name => {
                let names: Vec<HostName> = unmet().map(|a| a.host.clone().into()).collect();
                self.devices(Devices::Of(&names))
            }
            _ => self.devices(Devices::Containing(q)),
        };
        read.map_err(store_status)
    }

    /// The agent named `host`, whole.
    pub(crate) fn agent(&self, host: &str) -> Option<pb::AgentInfo> {
        // Found by a look at each: PostgreSQL orders names by its collation, not by bytes.
        let a = self.infos.iter().find(|a| a.host == host)?;
        self.whole(std::iter::once(a), DevicesByHost::default())
            .pop()
    }

    /// How many agents in the state `state` match `q` (as `views::select_agents` selects), and
    /// the `take` of them after the first `skip`, whole, by name.
    pub(crate) fn page(
        &self,
        state: &str,
        q: &str,
        skip: usize,
        take: usize,
    ) -> Result<(usize, Vec<pb::AgentInfo>), Status> {
        let models = self.models(state, q)?;
        let (matched, page) =
            crate::views::page_of_agents(self.candidates(&models), state, q, skip, take);
        let shown: Vec<&pb::AgentInfo> = page.into_iter().map(|u| u.info).collect();
        Ok((matched, self.whole(shown.into_iter(), models)))
    }

    /// What `list_agents` answers to `want`.
    pub(crate) fn select(
        &self,
        want: &pb::ListAgentsRequest,
    ) -> Result<pb::ListAgentsResponse, Status> {
        let mut response = pb::ListAgentsResponse {
            store_fault: self.store_fault.clone(),
            total: self.infos.len() as u64,
            ..Default::default()
        };
        let models = self.models(&want.state, &want.r#match)?;
        let listed = crate::views::select_agents(&mut response, self.candidates(&models), want);
        let listed: Vec<&pb::AgentInfo> = listed.into_iter().map(|u| u.info).collect();
        response.agents = self.whole(listed.into_iter(), models);
        Ok(response)
    }
}

/// An agent of the fleet to select, with its drives' JSON if a match may need them.
struct Unread<'s, 'm> {
    info: &'s pb::AgentInfo,
    devices: Option<&'m DevicesJson>,
}

impl crate::views::Listed for Unread<'_, '_> {
    fn info(&self) -> &pb::AgentInfo {
        self.info
    }

    fn model_contains(&self, q: &str) -> bool {
        self.devices.is_some_and(|d| d.any_model_contains(q))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_report_format_goes_on_the_wire_and_back() {
        use clap::ValueEnum;
        let mut seen = std::collections::BTreeSet::new();
        for f in Format::value_variants() {
            let wire = report_format_to_wire(*f);
            assert_ne!(wire, pb::ReportFormat::Unspecified, "{f:?}");
            assert_eq!(report_format_from_wire(wire), *f);
            assert!(seen.insert(wire as i32), "{f:?} shares its wire format");
        }
    }
    use crate::store::testing::{drive, stores};

    /// A fleet of `store`'s agents, every other one idle, reading drives by name for at
    /// most `by_name` agents.
    fn fleet_of(store: &Store, by_name: usize, last: &Arc<LastRead>, last_read: bool) -> Fleet {
        let infos = store
            .agents()
            .unwrap()
            .into_iter()
            .enumerate()
            .map(|(i, a)| pb::AgentInfo {
                host: a.host.to_string(),
                labels: a.labels,
                state: if i % 2 == 0 { "idle" } else { "offline" }.into(),
                ..Default::default()
            })
            .collect();
        Fleet {
            store: store.clone(),
            infos,
            last_read,
            last: last.clone(),
            by_name,
            store_fault: None,
        }
    }

    /// Whether drives are read by name, by the words in the store, or all of them, and
    /// whether from the store or as last read, an agent is selected and listed with its
    /// drives alike: on both engines.
    #[tokio::test]
    async fn agents_are_selected_alike_however_their_drives_are_read() {
        let dir = tempfile::tempdir().unwrap();
        for store in stores(dir.path()) {
            let agents = [
                ("n1", "a", vec![drive("Samsung SSD 860 EVO"), drive("WDC")]),
                ("n2", "b", vec![drive("Quote \"Pro\" Ünï")]),
                ("q\"\\é", "a", vec![drive("Odd EVO")]),
                ("n4", "b", vec![]),
            ];
            for (host, rack, drives) in &agents {
                let labels = [("rack".to_string(), rack.to_string())];
                store
                    .agent_seen(&(*host).into(), "b", "v", drives, &labels)
                    .await
                    .unwrap();
            }
            let last = Arc::new(LastRead::default());
            let by_name = fleet_of(&store, DRIVES_BY_NAME, &last, false);
            let by_words = fleet_of(&store, 0, &last, false);
            let as_last_read = fleet_of(&store, DRIVES_BY_NAME, &last, true);
            let models = |r: &pb::ListAgentsResponse| -> Vec<(String, Vec<String>)> {
                let agents = r.agents.iter();
                agents
                    .map(|a| {
                        (
                            a.host.clone(),
                            a.devices.iter().map(|d| d.model.clone()).collect(),
                        )
                    })
                    .collect()
            };
            for q in [
                "", "EVO", "n", "rack=a", "\"Pro\"", "Ünï", "q\"", "WDC", "Intel", "/dev/sdz",
            ] {
                for state in ["", "idle"] {
                    for limit in [0, 1] {
                        let want = pb::ListAgentsRequest {
                            state: state.into(),
                            r#match: q.into(),
                            limit,
                            ..Default::default()
                        };
                        let a = by_name.select(&want).unwrap();
                        let b = by_words.select(&want).unwrap();
                        let c = as_last_read.select(&want).unwrap();
                        let what = format!("{q:?} {state:?} {limit}");
                        assert_eq!(
                            (models(&a), a.matched, &a.counts),
                            (models(&b), b.matched, &b.counts),
                            "{what}"
                        );
                        assert_eq!((models(&a), a.matched), (models(&c), c.matched), "{what}");
                        let page = by_words.page(state, q, 0, 50).unwrap();
                        assert_eq!(page.0 as u64, a.matched, "{what}");
                    }
                }
            }
            let evo = by_words.select(&pb::ListAgentsRequest {
                r#match: "EVO".into(),
                ..Default::default()
            });
            let evo = models(&evo.unwrap());
            let n1 = (
                "n1".to_string(),
                vec!["Samsung SSD 860 EVO".to_string(), "WDC".to_string()],
            );
            let odd = ("q\"\\é".to_string(), vec!["Odd EVO".to_string()]);
            assert_eq!(evo, [n1, odd.clone()]);
            let pro = by_name.page("", "\"Pro\"", 0, 50).unwrap();
            assert_eq!(pro.1[0].devices[0].model, "Quote \"Pro\" Ünï");
            assert_eq!(pro.0, 1);
            let one = as_last_read.agent("q\"\\é").unwrap();
            assert_eq!(
                models(&pb::ListAgentsResponse {
                    agents: vec![one],
                    ..Default::default()
                }),
                [odd]
            );
        }
    }
}
