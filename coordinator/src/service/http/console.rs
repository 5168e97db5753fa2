//! The console's pages: HTML rendered from askama templates (`coordinator/templates/console/`)
//! with the engine's escaping, readable with JavaScript off. Each page has a typed view;
//! where a page has an `/api/v1` twin, the twin serializes the same view. The only script
//! is `/assets/console.js` (the Content-Security-Policy allows no other), which reloads a
//! live page's `<main>` when the server says something changed.

use axum::extract::{Form, Path, Query, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Redirect, Response};
use pb::AgentState;
use platter_proto::v1 as pb;
use serde::Deserialize;
use tonic::Status;

use super::auth::{Access, CsrfForm};
use super::layout::url_part;
pub(super) use super::page::{
    as_object, failed, http_status, render_page, seen, Main, PageQuery, Pager, PAGE_ROWS,
};
use super::Ctx;
use crate::report::history::Flag;
use crate::service::rpc::control::Fleet;
use crate::store::accounts::AccountRole;
use crate::views::{campaign_eta, clock, hms, state_name, CampaignView, FaultView, HostView};

/// A live page (one whose `<main>` follows the fleet), by what its address asks.
#[derive(Debug)]
pub(super) enum Live {
    Overview,
    Hosts(HostFilter),
    Host(String),
    Campaigns(CampaignFilter),
    Campaign(String),
    Flags(super::flags::FlagsQuery),
    Flag(String),
}

impl Live {
    /// The live page at `address` (a path with its query, as a browser's `location`
    /// has it); `None` for any other.
    pub(super) fn at(address: &str) -> Option<Live> {
        let uri: axum::http::Uri = address.parse().ok()?;
        let segments = uri
            .path()
            .strip_prefix('/')?
            .split('/')
            .map(|s| {
                percent_encoding::percent_decode_str(s)
                    .decode_utf8()
                    .map(|s| s.into_owned())
            })
            .collect::<Result<Vec<String>, _>>()
            .ok()?;
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        Some(match segments[..] {
            [""] => Live::Overview,
            ["hosts"] => Live::Hosts(Query::try_from_uri(&uri).ok()?.0),
            ["hosts", name] => Live::Host(name.to_string()),
            ["campaigns"] => Live::Campaigns(Query::try_from_uri(&uri).ok()?.0),
            ["campaigns", id] => Live::Campaign(id.to_string()),
            ["flags"] => Live::Flags(Query::try_from_uri(&uri).ok()?.0),
            ["flags", id] => Live::Flag(id.to_string()),
            _ => return None,
        })
    }

    /// The page's `<main>` as `access` sees it.
    pub(super) async fn main(&self, ctx: &Ctx, access: &Access) -> Main {
        self.main_for(ctx, access.role, &access.csrf).await
    }

    /// The page's `<main>` as an account of `role` sees it, its forms carrying `csrf`.
    pub(super) async fn main_for(&self, ctx: &Ctx, role: AccountRole, csrf: &str) -> Main {
        match self {
            Live::Overview => overview_main(ctx).await,
            Live::Hosts(filter) => hosts_main(ctx, filter).await,
            Live::Host(name) => host_main(ctx, name).await,
            Live::Campaigns(filter) => campaigns_main(ctx, filter).await,
            Live::Campaign(id) => campaign_main(ctx, id, role, csrf).await,
            Live::Flags(query) => super::flags::list_main(ctx, query).await,
            Live::Flag(id) => super::flags::flag_main(ctx, id, role, csrf).await,
        }
    }
}

pub(super) async fn overview(State(ctx): State<Ctx>, access: Access) -> Response {
    Live::Overview.main(&ctx, &access).await.page(&access)
}

async fn overview_main(ctx: &Ctx) -> Main {
    let view = match OverviewView::load(ctx).await {
        Ok(v) => v,
        Err(s) => return Main::failed("Overview", &s),
    };
    Main::of("Overview", "Overview", &view)
}

/// The Overview and `/api/v1/overview`: one view, shown by
/// `templates/console/overview.html` and serialized as the API's JSON.
#[derive(serde::Serialize, askama::Template)]
#[template(path = "console/overview.html")]
pub(super) struct OverviewView {
    pub store_fault: Option<FaultView>,
    /// The open flags, first on the page; null while the store cannot be read.
    pub open_flags: Option<super::fleet::OpenFlags>,
    pub flagged: Vec<super::fleet::Flagged>,
    pub attention: Vec<super::fleet::Attention>,
    pub running: Vec<RunningView>,
    pub recent: Vec<RecentView>,
    pub hosts_total: usize,
    /// Agents by state, in the order the page counts them; an object in JSON.
    #[serde(rename = "hosts_by_state", serialize_with = "as_object")]
    pub hosts: Vec<(String, usize)>,
}

/// A running campaign with its ETA.
#[derive(serde::Serialize)]
pub(super) struct RunningView {
    #[serde(flatten)]
    pub campaign: CampaignView,
    pub eta_s: Option<u64>,
}

/// A campaign that ended, with its verdict (none where its report cannot be read now).
#[derive(serde::Serialize)]
pub(super) struct RecentView {
    #[serde(flatten)]
    pub campaign: CampaignView,
    pub verdict: Option<crate::views::Verdict>,
}

impl RunningView {
    /// Its ETA as `hms` says it; "?" when none can be told.
    fn eta(&self) -> String {
        self.eta_s
            .map(|s| hms(std::time::Duration::from_secs(s)))
            .unwrap_or_else(|| "?".into())
    }
}

impl OverviewView {
    pub(super) async fn load(ctx: &Ctx) -> Result<OverviewView, Status> {
        let o = ctx.overview().await?;
        Ok(OverviewView {
            store_fault: o.store_fault.as_ref().map(FaultView::from),
            open_flags: ctx.open_flags().await,
            flagged: o.flagged,
            attention: o.attention,
            running: o
                .running
                .iter()
                .map(|c| RunningView {
                    campaign: CampaignView::of(c),
                    eta_s: campaign_eta(c).map(|d| d.as_secs()),
                })
                .collect(),
            recent: o
                .recent
                .into_iter()
                .map(|(c, verdict)| RecentView {
                    campaign: CampaignView::of(&c),
                    verdict,
                })
                .collect(),
            hosts_total: o.hosts_total,
            hosts: o.hosts,
        })
    }
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct HostFilter {
    /// A part of the host's name, a label (`rack=b12`), or a part of a drive's model.
    #[serde(default)]
    pub q: String,
    /// idle, busy, lost, offline or "journal fault".
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub page: usize,
}

impl HostFilter {
    /// How many agents of `fleet` it matches, and its page of them, whole (their drives
    /// read off the async workers).
    pub(super) async fn page_of(
        &self,
        fleet: &std::sync::Arc<Fleet>,
    ) -> Result<(usize, Vec<pb::AgentInfo>), Status> {
        let (fleet, state, q) = (fleet.clone(), self.state.clone(), self.q.clone());
        let skip = self.page * PAGE_ROWS;
        crate::service::rpc::control::blocking(move || fleet.page(&state, &q, skip, PAGE_ROWS))
            .await
    }
}

/// The name of the campaign busy host `a` runs, from `names` (by id); "?" when it is
/// not known.
fn campaign_name<'a>(
    names: &'a std::collections::HashMap<String, String>,
    a: &HostView,
) -> &'a str {
    names.get(&a.current_campaign).map_or("?", String::as_str)
}

/// The Hosts page and `/api/v1/hosts`: one view, shown by `templates/console/hosts.html`
/// and serialized as the API's JSON (the fields the filter and the names of busy hosts'
/// campaigns add are the page's only).
#[derive(serde::Serialize, askama::Template)]
#[template(path = "console/hosts.html")]
pub(super) struct HostsView {
    pub store_fault: Option<FaultView>,
    pub total: usize,
    pub matched: usize,
    pub page: usize,
    pub page_rows: usize,
    pub hosts: Vec<HostView>,
    /// The filter asked for: the form shows it, the pager keeps it.
    #[serde(skip)]
    pub q: String,
    #[serde(skip)]
    pub state: String,
    /// The names of the campaigns the busy hosts run (the page shows them).
    #[serde(skip)]
    pub campaign_names: std::collections::HashMap<String, String>,
}

impl HostsView {
    /// The page of hosts `filter` selects.
    pub(super) async fn load(ctx: &Ctx, filter: &HostFilter) -> Result<HostsView, Status> {
        let agents = ctx.agents().await?;
        let (matched, page) = filter.page_of(&agents).await?;
        let fault = agents.store_fault.as_ref();
        Ok(HostsView {
            store_fault: fault.map(FaultView::from),
            total: agents.infos().len(),
            matched,
            page: filter.page,
            page_rows: PAGE_ROWS,
            hosts: page.iter().map(|a| HostView::of(a, fault)).collect(),
            q: filter.q.clone(),
            state: filter.state.clone(),
            campaign_names: Default::default(),
        })
    }

    /// The name of the campaign busy host `a` runs; "?" when it is not known.
    fn campaign_name(&self, a: &HostView) -> &str {
        campaign_name(&self.campaign_names, a)
    }

    fn pager(&self) -> Option<Pager> {
        let base = format!(
            "/hosts?q={}&state={}&",
            url_part(&self.q),
            url_part(&self.state)
        );
        Pager::of(base, self.page, self.matched)
    }
}

async fn campaign_names(ctx: &Ctx) -> std::collections::HashMap<String, String> {
    ctx.campaigns()
        .await
        .map(|r| {
            r.campaigns
                .iter()
                .map(|c| (c.campaign_id.clone(), c.name.clone()))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) async fn hosts(
    State(ctx): State<Ctx>,
    access: Access,
    PageQuery(filter): PageQuery<HostFilter>,
) -> Response {
    Live::Hosts(filter).main(&ctx, &access).await.page(&access)
}

async fn hosts_main(ctx: &Ctx, filter: &HostFilter) -> Main {
    let mut view = match HostsView::load(ctx, filter).await {
        Ok(v) => v,
        Err(s) => return Main::failed("Hosts", &s),
    };
    // Campaign names are shown for busy hosts only; reading every campaign's progress for
    // them costs as much as reading the fleet (200 campaigns of 50 hosts: 0.13 s).
    if view.hosts.iter().any(|a| a.kind == AgentState::Busy) {
        view.campaign_names = campaign_names(ctx).await;
    }
    Main::of("Hosts", "Hosts", &view)
}

pub(super) async fn host(
    State(ctx): State<Ctx>,
    access: Access,
    Path(name): Path<String>,
) -> Response {
    Live::Host(name).main(&ctx, &access).await.page(&access)
}

async fn host_main(ctx: &Ctx, name: &str) -> Main {
    let view = match HostPageView::load(ctx, name).await {
        Ok(v) => v,
        Err(s) => return Main::failed("Host", &s),
    };
    Main::of("Host", &format!("Host {}", view.host.host), &view)
}

/// A host's page and `/api/v1/hosts/NAME`: one view, shown by
/// `templates/console/host.html` and serialized as the API's JSON (the host's fields,
/// its campaigns' ids, what it ran on).
#[derive(serde::Serialize, askama::Template)]
#[template(path = "console/host.html")]
pub(super) struct HostPageView {
    #[serde(flatten)]
    pub host: HostView,
    /// The campaigns with a plan here; in JSON, their ids.
    #[serde(serialize_with = "campaign_ids")]
    pub campaigns: Vec<HostCampaign>,
    pub ran_on: Vec<super::fleet::RanOn>,
    #[serde(skip)]
    pub store_fault: Option<FaultView>,
    /// The names of the campaigns, for a busy host's.
    #[serde(skip)]
    pub campaign_names: std::collections::HashMap<String, String>,
}

/// A campaign as a host's page lists it: its progress on that host.
pub(super) struct HostCampaign {
    pub campaign_id: String,
    pub name: String,
    pub state: &'static str,
    pub steps_done: u32,
    pub steps_total: u32,
    pub submitted_unix_ms: i64,
}

impl HostCampaign {
    /// When the campaign was submitted, as `clock` says it.
    fn submitted(&self) -> String {
        clock(self.submitted_unix_ms)
    }

    fn steps(&self) -> crate::views::Progress {
        crate::views::Progress {
            done: self.steps_done,
            total: self.steps_total,
        }
    }
}

fn campaign_ids<S: serde::Serializer>(list: &[HostCampaign], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|c| &c.campaign_id))
}

impl HostPageView {
    /// The host called `name`; NOT_FOUND when no agent of that name has connected.
    pub(super) async fn load(ctx: &Ctx, name: &str) -> Result<HostPageView, Status> {
        let agents = ctx.agents().await?;
        let Some(a) = super::fleet::agent_of(&agents, name).await? else {
            return Err(Status::not_found(format!(
                "no agent named {name:?} has connected"
            )));
        };
        let all = ctx.campaigns().await.ok();
        let all = all.as_ref().map_or(&[][..], |r| &r.campaigns[..]);
        let campaigns = all
            .iter()
            .filter_map(|c| {
                let h = c.hosts.iter().find(|h| h.host == a.host)?;
                Some(HostCampaign {
                    campaign_id: c.campaign_id.clone(),
                    name: c.name.clone(),
                    state: state_name(c.state),
                    steps_done: h.steps_done,
                    steps_total: h.steps_total,
                    submitted_unix_ms: c.created_unix_ms,
                })
            })
            .collect();
        Ok(HostPageView {
            host: HostView::of(&a, agents.store_fault.as_ref()),
            campaigns,
            ran_on: ctx.ran_on(&a.host).await,
            store_fault: agents.store_fault.as_ref().map(FaultView::from),
            campaign_names: all
                .iter()
                .map(|c| (c.campaign_id.clone(), c.name.clone()))
                .collect(),
        })
    }

    /// The name of the campaign busy host `a` runs; "?" when it is not known.
    fn campaign_name(&self, a: &HostView) -> &str {
        campaign_name(&self.campaign_names, a)
    }
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct CampaignFilter {
    #[serde(default)]
    pub name: String,
    /// running, done or cancelled.
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub page: usize,
}

impl CampaignFilter {
    pub(super) fn matches(&self, c: &pb::CampaignStatus) -> bool {
        (self.name.is_empty() || c.name.contains(self.name.trim()))
            && (self.state.is_empty() || state_name(c.state) == self.state)
            && (self.host.is_empty() || c.hosts.iter().any(|h| h.host == self.host.trim()))
    }
}

pub(super) async fn campaigns(
    State(ctx): State<Ctx>,
    access: Access,
    PageQuery(filter): PageQuery<CampaignFilter>,
) -> Response {
    Live::Campaigns(filter)
        .main(&ctx, &access)
        .await
        .page(&access)
}

async fn campaigns_main(ctx: &Ctx, filter: &CampaignFilter) -> Main {
    let view = match CampaignsView::load(ctx, filter, true).await {
        Ok(v) => v,
        Err(s) => return Main::failed("Campaigns", &s),
    };
    Main::of("Campaigns", "Campaigns", &view)
}

/// The Campaigns page and `/api/v1/campaigns`: one view, shown by
/// `templates/console/campaigns.html` and serialized as the API's JSON (the filter and
/// the verdicts are the page's only).
#[derive(serde::Serialize, askama::Template)]
#[template(path = "console/campaigns.html")]
pub(super) struct CampaignsView {
    pub store_fault: Option<FaultView>,
    pub total: usize,
    pub matched: usize,
    pub page: usize,
    pub page_rows: usize,
    pub campaigns: Vec<CampaignView>,
    #[serde(skip)]
    pub name: String,
    #[serde(skip)]
    pub state: String,
    #[serde(skip)]
    pub host: String,
    /// Each listed campaign's verdict, in order; none where its report cannot be read.
    #[serde(skip)]
    pub verdicts: Vec<Option<crate::views::Verdict>>,
}

impl CampaignsView {
    /// The page of campaigns `filter` selects, with their verdicts when `verdicts` (the
    /// page shows them; each reads a report the first time).
    pub(super) async fn load(
        ctx: &Ctx,
        filter: &CampaignFilter,
        verdicts: bool,
    ) -> Result<CampaignsView, Status> {
        let all = ctx.campaigns().await?;
        let matched: Vec<&pb::CampaignStatus> =
            all.campaigns.iter().filter(|c| filter.matches(c)).collect();
        let listed = || matched.iter().skip(filter.page * PAGE_ROWS).take(PAGE_ROWS);
        let mut found = Vec::new();
        if verdicts {
            for c in listed() {
                found.push(ctx.verdict(c).await);
            }
        }
        Ok(CampaignsView {
            store_fault: all.store_fault.as_ref().map(FaultView::from),
            total: all.campaigns.len(),
            matched: matched.len(),
            page: filter.page,
            page_rows: PAGE_ROWS,
            campaigns: listed().map(|c| CampaignView::of(c)).collect(),
            name: filter.name.clone(),
            state: filter.state.clone(),
            host: filter.host.clone(),
            verdicts: found,
        })
    }

    /// Each listed campaign with its verdict.
    fn rows(&self) -> impl Iterator<Item = (&CampaignView, Option<&crate::views::Verdict>)> {
        self.campaigns
            .iter()
            .enumerate()
            .map(|(i, c)| (c, self.verdicts.get(i).and_then(Option::as_ref)))
    }

    fn pager(&self) -> Option<Pager> {
        let base = format!(
            "/campaigns?name={}&state={}&host={}&",
            url_part(&self.name),
            url_part(&self.state),
            url_part(&self.host)
        );
        Pager::of(base, self.page, self.matched)
    }
}

/// `GET /flags` (`flags::FlagsView`).
pub(super) async fn flags(
    State(ctx): State<Ctx>,
    access: Access,
    PageQuery(query): PageQuery<super::flags::FlagsQuery>,
) -> Response {
    Live::Flags(query).main(&ctx, &access).await.page(&access)
}

/// `GET /flags/{id}` (`flags::FlagPageView`).
pub(super) async fn flag(
    State(ctx): State<Ctx>,
    access: Access,
    Path(id): Path<String>,
) -> Response {
    Live::Flag(id).main(&ctx, &access).await.page(&access)
}

/// Report formats offered for download, with their file extension and media type.
pub(super) const DOWNLOADS: [(&str, &str, &str); 7] = [
    ("table", "txt", "text/plain; charset=utf-8"),
    ("markdown", "md", "text/markdown; charset=utf-8"),
    ("json", "json", "application/json"),
    ("csv", "csv", "text/csv; charset=utf-8"),
    ("csv-samples", "samples.csv", "text/csv; charset=utf-8"),
    ("junit", "junit.xml", "application/xml"),
    ("html", "html", "text/html; charset=utf-8"),
];

pub(super) async fn campaign(
    State(ctx): State<Ctx>,
    access: Access,
    Path(id): Path<String>,
) -> Response {
    Live::Campaign(id).main(&ctx, &access).await.page(&access)
}

/// A campaign's page; its cancel form carries `csrf` ("" where console.js fills it in).
async fn campaign_main(ctx: &Ctx, id: &str, role: AccountRole, csrf: &str) -> Main {
    let view = match CampaignPageView::load(ctx, id).await {
        Ok(v) => v,
        Err(s) => return Main::failed("Campaign", &s),
    };
    let view = CampaignPageView {
        cancel_csrf: (view.campaign.state == "running" && role.allows(AccountRole::Operator))
            .then(|| csrf.to_string()),
        ..view
    };
    Main::of(
        "Campaign",
        &format!("Campaign {}", view.campaign.name),
        &view,
    )
}

/// A campaign's page and `/api/v1/campaigns/ID`: one view, shown by
/// `templates/console/campaign.html` and serialized as the API's JSON (the campaign as
/// `/api/v1/campaigns` lists it, its ETA, verdict and latest failures).
#[derive(serde::Serialize, askama::Template)]
#[template(path = "console/campaign.html")]
pub(super) struct CampaignPageView {
    #[serde(flatten)]
    pub campaign: CampaignView,
    /// Until every step ends, at the pace so far; null when not known.
    pub eta_s: Option<u64>,
    /// None while it runs.
    pub verdict: Option<crate::views::Verdict>,
    /// What its report found, ranked, the page's first lines once it ended; none while it
    /// runs or when the report has nothing to say.
    pub findings: Option<super::fleet::FindingsView>,
    pub failures_total: usize,
    /// The latest failed steps, newest first.
    pub failures: Vec<FailureView>,
    #[serde(skip)]
    pub store_fault: Option<FaultView>,
    /// The cancel form's CSRF token, where the form is shown (a running campaign, an
    /// account that may cancel it).
    #[serde(skip)]
    pub cancel_csrf: Option<String>,
}

/// A failed step as a campaign's page lists it.
#[derive(serde::Serialize)]
pub(super) struct FailureView {
    pub host: String,
    pub kind: String,
    pub repetition: u32,
    pub attempt: u32,
    pub params: indexmap::IndexMap<String, String>,
    pub error: String,
    pub stderr_tail: String,
}

impl FailureView {
    /// Its cell's parameters, `k=v` each.
    fn cell(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        params.join(" ")
    }
}

impl CampaignPageView {
    pub(super) async fn load(ctx: &Ctx, id: &str) -> Result<CampaignPageView, Status> {
        let c = ctx.campaign(id).await?;
        let (failures, failures_total) = ctx.failures(&c).await;
        let ended = ctx.ended(&c).await;
        Ok(CampaignPageView {
            campaign: CampaignView::of(&c),
            eta_s: campaign_eta(&c).map(|d| d.as_secs()),
            verdict: ended.as_ref().map(|e| e.verdict.clone()),
            findings: ended.and_then(|e| e.findings),
            failures_total,
            failures: failures
                .into_iter()
                .rev()
                .map(|f| FailureView {
                    host: f.host.to_string(),
                    kind: f.kind,
                    repetition: f.repetition,
                    attempt: f.attempt,
                    params: f.params,
                    error: f.error,
                    stderr_tail: f.stderr_tail,
                })
                .collect(),
            store_fault: c.store_fault.as_ref().map(FaultView::from),
            cancel_csrf: None,
        })
    }

    /// The ETA cell: while it runs, its ETA ("?" when not known); after, "-".
    fn eta_words(&self) -> String {
        match self.eta_s {
            _ if self.campaign.state != "running" => "-".into(),
            Some(s) => hms(std::time::Duration::from_secs(s)),
            None => "?".into(),
        }
    }
}

/// A report in one format, as a download (or, for HTML, a page of its own whose policy
/// allows the report's inline style and its one script, by hash, and nothing else).
pub(super) async fn report(
    State(ctx): State<Ctx>,
    access: Access,
    Path((id, file)): Path<(String, String)>,
) -> Response {
    let Some((format, ext, media)) = DOWNLOADS
        .iter()
        .find(|(_, ext, _)| file == format!("report.{ext}"))
    else {
        let s = Status::not_found(format!("no report file {file:?}: report.html, report.json, report.csv, report.md, report.txt, report.samples.csv or report.junit.xml"));
        return failed(&access, "Report", &s);
    };
    let r = match ctx.report(&id, format).await {
        Ok(r) => r,
        Err(s) => return failed(&access, "Report", &s),
    };
    let mut response = (
        [(header::CONTENT_TYPE, HeaderValue::from_static(media))],
        r.rendered,
    )
        .into_response();
    let headers = response.headers_mut();
    if *format == "html" {
        if let Ok(v) = HeaderValue::from_str(&super::report_policy()) {
            headers.insert(header::CONTENT_SECURITY_POLICY, v);
        }
    } else if let Ok(v) =
        HeaderValue::from_str(&format!("attachment; filename=\"{}.{ext}\"", url_part(&id)))
    {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    response
}

pub(super) async fn cancel(
    State(ctx): State<Ctx>,
    access: Access,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Err(refused) = access.change(AccountRole::Operator, Some(&form.csrf)) {
        return *refused;
    }
    match ctx.cancel(&id).await {
        Ok(()) => {
            tracing::info!(campaign = %id, account = %access.account, "campaign cancelled from the console");
            Redirect::to(&format!("/campaigns/{}", url_part(&id))).into_response()
        }
        Err(s) => failed(&access, "Cancel", &s),
    }
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct CompareQuery {
    #[serde(default)]
    pub a: String,
    #[serde(default)]
    pub b: String,
    #[serde(default)]
    pub metric: String,
}

pub(super) async fn compare(
    State(ctx): State<Ctx>,
    access: Access,
    PageQuery(q): PageQuery<CompareQuery>,
) -> Response {
    let outcome = if q.a.is_empty() || q.b.is_empty() {
        None
    } else {
        Some(match ctx.compare(&q.a, &q.b, &q.metric).await {
            Ok(r) => {
                let metric = if q.metric.is_empty() {
                    "wall"
                } else {
                    &q.metric
                };
                let c = crate::service::rpc::control::comparison_from_pb(r, &q.a, &q.b, metric);
                Ok(crate::views::render_comparison(&c))
            }
            Err(s) => Err(s.message().to_string()),
        })
    };
    render_page(&access, "Compare", &CompareView { q, outcome })
}

/// The Compare page (`templates/console/compare.html`): the two sides asked for, and
/// `platter compare`'s answer or why there is none.
#[derive(askama::Template)]
#[template(path = "console/compare.html")]
struct CompareView {
    q: CompareQuery,
    outcome: Option<Result<String, String>>,
}

/// `/drives?model=&firmware=&host=&failed=true`: `platter drives`' filters.
#[derive(Debug, Default, Deserialize)]
pub(super) struct DrivesQuery {
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub firmware: String,
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub failed: String,
}

impl DrivesQuery {
    pub(super) fn question(&self) -> crate::report::ledger::Question {
        let some = |s: &str| Some(s.trim().to_string()).filter(|s| !s.is_empty());
        crate::report::ledger::Question::Drives(crate::report::ledger::Filter {
            model: some(&self.model),
            firmware: some(&self.firmware),
            host: some(&self.host),
            failed: self.failed_only(),
        })
    }

    fn failed_only(&self) -> bool {
        matches!(self.failed.as_str(), "true" | "on" | "1")
    }
}

/// The drive ledger (`platter drives`): every drive the agents reported, its hosts, runs,
/// verdicts and latest health, each linked to its page.
pub(super) async fn drives(
    State(ctx): State<Ctx>,
    access: Access,
    PageQuery(query): PageQuery<DrivesQuery>,
) -> Response {
    let title = "Drives";
    let drives = match ctx.ledger(query.question()).await {
        Ok(crate::report::ledger::Answer::Drives(d)) => d,
        Ok(_) => return failed(&access, title, &super::fleet::other_answer()),
        Err(s) => return failed(&access, title, &s),
    };
    render_page(&access, title, &DrivesView { drives, query })
}

/// The Drives page: the ledger's drives as `/api/v1/drives` answers them, and the filter
/// asked for (`templates/console/drives.html`).
#[derive(askama::Template)]
#[template(path = "console/drives.html")]
struct DrivesView {
    drives: Vec<crate::report::ledger::DriveSummary>,
    query: DrivesQuery,
}

/// The class a drive's latest health is shown in: muted when it could not be read, fail
/// when an attribute is flagged, none otherwise.
pub(super) fn health_class(h: Option<&crate::report::ledger::LatestHealth>) -> &'static str {
    match h {
        Some(h) if h.reading.is_none() => "muted",
        Some(h) if !h.flagged.is_empty() => "fail",
        _ => "",
    }
}

/// One drive (`platter drive ID`): where it was seen, its moves and firmware changes, the
/// runs that measured it with their results, verdicts and health.
pub(super) async fn drive(
    State(ctx): State<Ctx>,
    access: Access,
    Path(id): Path<String>,
) -> Response {
    use crate::report::ledger::{Answer, Question};
    let title = format!("Drive {id}");
    let d = match ctx.ledger(Question::Drive(id.clone())).await {
        Ok(Answer::Drive(d)) => *d,
        Ok(_) => return failed(&access, &title, &super::fleet::other_answer()),
        Err(s) => return failed(&access, &title, &s),
    };
    let peers = if d.drive.model.is_empty() {
        Ok(Vec::new())
    } else {
        super::models::standings(&ctx, &d.drive.model, &d.drive.id).await
    };
    render_page(&access, &title, &DrivePageView { d, peers })
}

/// A drive's page (`templates/console/drive.html`): the ledger's answer, as
/// `/api/v1/drives/ID` gives it.
#[derive(askama::Template)]
#[template(path = "console/drive.html")]
struct DrivePageView {
    d: crate::report::ledger::DriveDetail,
    /// Where it stands in each peer group it is in, or why that could not be read.
    peers: Result<Vec<super::models::Standing>, String>,
}

/// A drive model's page (`platter peers MODEL`): each peer group's strip plot and table
/// (`models::ModelView`).
pub(super) async fn model(
    State(ctx): State<Ctx>,
    access: Access,
    Path(model): Path<String>,
    PageQuery(q): PageQuery<super::models::ModelQuery>,
) -> Response {
    let title = format!("Model {model}");
    match super::models::peers(&ctx, &model, &q).await {
        Ok(p) => render_page(&access, &title, &super::models::ModelView::of(&p, q)),
        Err(s) => failed(&access, &title, &s),
    }
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct SeriesQuery {
    #[serde(default)]
    pub metric: String,
}

/// A series over time (`platter history`): per host and cell a chart (each run's median
/// with its interval, flagged runs ringed) and the table of runs with what changed.
pub(super) async fn series(
    State(ctx): State<Ctx>,
    access: Access,
    Path(name): Path<String>,
    PageQuery(q): PageQuery<SeriesQuery>,
) -> Response {
    let metric = if q.metric.is_empty() {
        "wall"
    } else {
        q.metric.as_str()
    };
    let title = format!("Series {name}");
    let h = match ctx.history(&name, metric).await {
        Ok(h) => h,
        Err(s) => return failed(&access, &title, &s),
    };
    match SeriesView::of(&name, metric, h) {
        Ok(view) => render_page(&access, &title, &view),
        Err(e) => failed(&access, &title, &Status::internal(e.to_string())),
    }
}

/// A series' page (`templates/console/series.html`): per host and cell, the runs as a
/// chart (the report's dot plot) and a table.
#[derive(askama::Template)]
#[template(path = "console/series.html")]
struct SeriesView<'a> {
    name: &'a str,
    metric: &'a str,
    runs: usize,
    threshold_pct: f64,
    left_out: Vec<crate::report::history::LeftOut>,
    lines: Vec<SeriesLine>,
}

/// One host and cell of a series.
struct SeriesLine {
    host: String,
    cell: String,
    /// The chart's SVG panels.
    charts: Vec<String>,
    rows: Vec<SeriesRow>,
}

/// A run on a series' line, in words.
struct SeriesRow {
    campaign_id: String,
    n: usize,
    /// Its median with its interval.
    median: String,
    /// The shift since the run before; none for the first.
    shift: Option<String>,
    flag: Flag,
    /// What changed on the host since the run before, for a flagged run.
    changed: String,
}

impl<'a> SeriesView<'a> {
    fn of(
        name: &'a str,
        metric: &'a str,
        h: crate::report::history::History,
    ) -> Result<SeriesView<'a>, Box<dyn std::error::Error>> {
        let lines = h
            .lines
            .iter()
            .map(|line| {
                let rows = line
                    .points
                    .iter()
                    .map(|p| {
                        let flag = p.since_previous.as_ref().map_or(Flag::None, |s| s.flag);
                        SeriesRow {
                            campaign_id: p.campaign_id.clone(),
                            n: p.n,
                            median: p.median_text(&line.unit),
                            shift: p.since_previous.as_ref().map(|s| s.judged_text()),
                            flag,
                            changed: match &p.since_previous {
                                Some(s) if flag != Flag::None => s.changed_text(),
                                _ => String::new(),
                            },
                        }
                    })
                    .collect();
                Ok(SeriesLine {
                    host: line.host.clone(),
                    cell: line.cell.clone(),
                    charts: crate::report::html::trend_svgs(line, metric)?,
                    rows,
                })
            })
            .collect::<Result<_, Box<dyn std::error::Error>>>()?;
        Ok(SeriesView {
            name,
            metric,
            runs: h.runs.len(),
            threshold_pct: h.threshold_pct,
            left_out: h.left_out,
            lines,
        })
    }
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct SubmitForm {
    #[serde(default)]
    pub csrf: String,
    #[serde(default)]
    pub yaml: String,
    /// "check" (the default) or "submit".
    #[serde(default)]
    pub action: String,
}

/// The Submit page (`templates/console/submit.html`): the campaign pasted, and what
/// checking or submitting it said.
#[derive(askama::Template)]
#[template(path = "console/submit.html")]
struct SubmitView<'a> {
    csrf: &'a str,
    yaml: &'a str,
    outcome: Option<SubmitOutcome>,
}

enum SubmitOutcome {
    /// What the checked campaign would plan.
    Plan(String),
    /// Why it cannot be planned.
    Mistakes(String),
    /// Why it was not submitted.
    NotSubmitted(String),
}

pub(super) async fn submit_page(access: Access) -> Response {
    if let Err(refused) = access.require(AccountRole::Operator) {
        return *refused;
    }
    let view = SubmitView {
        csrf: &access.csrf,
        yaml: "",
        outcome: None,
    };
    render_page(&access, "Submit a campaign", &view)
}

pub(super) async fn submit(
    State(ctx): State<Ctx>,
    access: Access,
    Form(form): Form<SubmitForm>,
) -> Response {
    if let Err(refused) = access.change(AccountRole::Operator, Some(&form.csrf)) {
        return *refused;
    }
    const FILE: &str = "campaign.yaml";
    let outcome = if form.action == "submit" {
        match ctx.submit(FILE, &form.yaml).await {
            Ok(id) => {
                tracing::info!(campaign = %id, account = %access.account, "campaign submitted from the console");
                return Redirect::to(&format!("/campaigns/{}", url_part(&id))).into_response();
            }
            Err(s) => SubmitOutcome::NotSubmitted(s.message().to_string()),
        }
    } else {
        match ctx.plan(FILE, &form.yaml).await {
            Ok(plan) => SubmitOutcome::Plan(plan),
            Err(s) => SubmitOutcome::Mistakes(s.message().to_string()),
        }
    };
    let view = SubmitView {
        csrf: &access.csrf,
        yaml: &form.yaml,
        outcome: Some(outcome),
    };
    render_page(&access, "Submit a campaign", &view)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_page_shows_the_fault_the_filter_and_each_hosts_state() {
        let agent = |host: &str, state: AgentState, words: &str| pb::AgentInfo {
            host: host.into(),
            agent_state: state as i32,
            state: words.into(),
            current_campaign: if state == AgentState::Busy {
                "c-1".into()
            } else {
                String::new()
            },
            ..Default::default()
        };
        let fault = pb::StoreFault {
            reason: "disk full".into(),
            since_unix_ms: 0,
            not_answering: false,
        };
        let view = HostsView {
            store_fault: Some(FaultView::from(&fault)),
            total: 3,
            matched: 3,
            page: 0,
            page_rows: PAGE_ROWS,
            hosts: vec![
                HostView::of(&agent("<b>", AgentState::Idle, "idle"), None),
                HostView::of(&agent("h2", AgentState::Busy, "busy"), None),
                HostView::of(
                    &agent("h3", AgentState::JournalFault, "journal fault: full"),
                    None,
                ),
            ],
            q: "a b".into(),
            state: "lost".into(),
            campaign_names: [("c-1".to_string(), "nightly".to_string())].into(),
        };
        let html = askama::Template::render(&view).unwrap();
        assert!(
            html.contains(
                "id=\"store-fault\">STORE FAULT: the coordinator&#39;s store cannot commit"
            ),
            "{html}"
        );
        assert!(
            html.contains("<option value=\"lost\" selected>lost</option>"),
            "{html}"
        );
        assert!(
            html.contains("<option value=\"\">any state</option>"),
            "{html}"
        );
        assert!(html.contains("value=\"a b\""), "{html}");
        assert!(
            html.contains("&#60;b&#62;") && !html.contains("<b>"),
            "{html}"
        );
        assert!(
            html.contains(
                "busy: <a href=\"/campaigns/c-1\">nightly</a> <span class=\"muted\">c-1</span>"
            ),
            "{html}"
        );
        assert!(
            html.contains("<span class=\"fail\">journal fault: full</span>"),
            "{html}"
        );
        assert!(html.contains("3 of 3 host(s)"), "{html}");
    }

    #[test]
    fn a_running_campaigns_page_shows_its_hosts_failures_and_cancel_form() {
        let host = |name: &str| pb::HostProgress {
            host: name.into(),
            steps_total: 4,
            steps_done: 2,
            elapsed_ms: 2_000,
            ..Default::default()
        };
        let c = pb::CampaignStatus {
            campaign_id: "c/1".into(),
            name: "nightly".into(),
            series: "nightly".into(),
            state: pb::CampaignState::Running as i32,
            cells_total: 2,
            cells_done: 1,
            steps_total: 8,
            steps_done: 4,
            steps_failed: 1,
            hosts: vec![
                pb::HostProgress {
                    connected: true,
                    coordinator: "b".into(),
                    current_step: "measure rep 2".into(),
                    ..host("rc66")
                },
                pb::HostProgress {
                    journal_fault: "disk full".into(),
                    ..host("rcmonster")
                },
                pb::HostProgress {
                    refused: "no such drive".into(),
                    ..host("flygecko")
                },
            ],
            ..Default::default()
        };
        let view = CampaignPageView {
            campaign: CampaignView::of(&c),
            eta_s: Some(65),
            verdict: None,
            findings: None,
            failures_total: 3,
            failures: vec![FailureView {
                host: "rc66".into(),
                kind: "measure".into(),
                repetition: 1,
                attempt: 2,
                params: [("bs".to_string(), "4k".to_string())].into_iter().collect(),
                error: "exit status 3".into(),
                stderr_tail: "\u{1b}[31moops<".into(),
            }],
            store_fault: None,
            cancel_csrf: Some("tok".into()),
        };
        let html = askama::Template::render(&view).unwrap();
        for part in [
            "<tr><th>cells</th><td><progress max=\"2\" value=\"1\"></progress> 1/2 (50%)</td></tr>",
            "<tr><th>ETA</th><td>1:05</td></tr>",
            "<td id=\"verdict\">-</td>",
            "action=\"/campaigns/c%2F1/cancel\" id=\"cancel\"><input type=\"hidden\" name=\"csrf\" value=\"tok\">",
            "<td>connected to b</td>",
            "<td>measure rep 2</td>",
            "<span class=\"fail\">journal fault: disk full</span>",
            "<span class=\"warn\">not connected</span>",
            "<span class=\"fail\">refused the plan, nothing ran: no such drive</span>",
            "3 step(s) failed; the latest 1 below, every one in the report.",
            "<td>measure rep 1 attempt 2</td><td>bs=4k</td><td class=\"fail\">exit status 3</td><td><pre>\u{FFFD}[31moops&#60;</pre></td>",
            "<a href=\"/series/nightly\" id=\"series\">Every run of nightly</a>",
            " <a href=\"/campaigns/c%2F1/report.junit.xml\" download>junit</a>",
        ] {
            assert!(html.contains(part), "{part}\n{html}");
        }
        // Ended: no ETA, no cancel form.
        let done = CampaignPageView {
            campaign: CampaignView {
                state: "done",
                ..view.campaign.clone()
            },
            cancel_csrf: None,
            ..view
        };
        let html = askama::Template::render(&done).unwrap();
        assert!(html.contains("<tr><th>ETA</th><td>-</td></tr>"), "{html}");
        assert!(!html.contains("id=\"cancel\""), "{html}");
        assert!(!html.contains("id=\"findings\""), "none found: {html}");
        // With findings: they open the page, above its state, as text.
        use super::super::fleet::{FindingView, FindingsView};
        let found = CampaignPageView {
            findings: Some(FindingsView {
                metric: "wall".into(),
                lines: vec![
                    FindingView {
                        text: "host=b<i> vs a: ×2.00 (1.90–2.10) at bs=4k".into(),
                        kind: "difference",
                    },
                    FindingView {
                        text: "no significant difference: bs=1M vs 4k: ×1.00 (0.98–1.02) ~".into(),
                        kind: "equal",
                    },
                    FindingView {
                        text: "qualification: FAIL (1 of 2 checks; below)".into(),
                        kind: "failure",
                    },
                ],
            }),
            ..done
        };
        let html = askama::Template::render(&found).unwrap();
        let findings = html.find("<section id=\"findings\"><h2>Findings (wall)</h2>");
        let state = html.find("<td id=\"state\">");
        assert!(findings.is_some() && findings < state, "{html}");
        for part in [
            "<li>host=b&#60;i&#62; vs a: ×2.00 (1.90–2.10) at bs=4k</li>",
            "<li class=\"muted\">no significant difference: bs=1M vs 4k",
            "<li class=\"fail\">qualification: FAIL (1 of 2 checks; below)</li>",
        ] {
            assert!(html.contains(part), "{part}\n{html}");
        }
    }

    #[test]
    fn live_pages_are_known_by_their_address() {
        assert!(matches!(Live::at("/"), Some(Live::Overview)));
        match Live::at("/hosts?q=rack%3Db12&state=busy&page=2") {
            Some(Live::Hosts(f)) => {
                assert_eq!(
                    (f.q.as_str(), f.state.as_str(), f.page),
                    ("rack=b12", "busy", 2)
                );
            }
            other => panic!("{other:?}"),
        }
        match Live::at("/hosts/%3Cimg%20src%3Dx%3E") {
            Some(Live::Host(name)) => assert_eq!(name, "<img src=x>"),
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(Live::at("/campaigns?state=done"), Some(Live::Campaigns(f)) if f.state == "done")
        );
        assert!(matches!(Live::at("/campaigns/c-1"), Some(Live::Campaign(id)) if id == "c-1"));
        assert!(
            matches!(Live::at("/flags?state=open&kind=drift"), Some(Live::Flags(q)) if q.state == "open" && q.kind == "drift")
        );
        assert!(matches!(Live::at("/flags/a855de63"), Some(Live::Flag(id)) if id == "a855de63"));
        // Pages that do not follow the fleet, and addresses that are not pages.
        for other in [
            "/admin",
            "/campaigns/c-1/report.html",
            "/compare",
            "hosts",
            "",
            "/hosts?page=x",
            "/flags?page=x",
            "/hosts/%FF",
        ] {
            assert!(Live::at(other).is_none(), "{other}");
        }
    }
}
