//! The fleet as the coordinator answers it on the wire, in the words and JSON shapes both
//! the CLI (`platter status`, `platter agents`) and the console (`/api/v1/…`) give: one
//! voice, wherever it is read.

use std::time::Duration;

use platter_proto::v1 as pb;

mod flags;
mod history;
mod ledger;
pub use flags::{flag_of, flag_to_pb, kind_of as flag_kind_of, kind_to_pb, state_of, state_to_pb};
pub use history::{history_of, history_to_pb};
pub use ledger::{ledger_of, ledger_request, ledger_to_pb, question_of};

pub fn state_name(s: i32) -> &'static str {
    match pb::CampaignState::try_from(s) {
        Ok(pb::CampaignState::Running) => "running",
        Ok(pb::CampaignState::Done) => "done",
        Ok(pb::CampaignState::Cancelled) => "cancelled",
        _ => "?",
    }
}

pub fn campaign_json(c: &pb::CampaignStatus) -> serde_json::Value {
    // Through `Value`, whose objects keep their keys sorted, as this JSON always had them.
    serde_json::to_value(CampaignView::of(c)).expect("a campaign serializes")
}

/// `done` of `total` in percent, rounded down; 100 when there is nothing to do.
pub fn percent_done(done: u32, total: u32) -> u64 {
    if total == 0 {
        100
    } else {
        u64::from(done) * 100 / u64::from(total)
    }
}

/// `done` of `total`, as the console's progress bars show it
/// (`templates/console/progress.html`).
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub done: u32,
    pub total: u32,
}

impl Progress {
    /// In percent, rounded down; 100 when there is nothing to do.
    pub fn percent(&self) -> u64 {
        percent_done(self.done, self.total)
    }
}

/// `s` with the control characters a page cannot show as U+FFFD, for a template to escape.
pub use crate::report::printable;

/// A state filter's choices, as `(value, words)`: any state, then each of `states`.
pub fn state_choices<const N: usize>(
    states: [&'static str; N],
) -> Vec<(&'static str, &'static str)> {
    std::iter::once(("", "any state"))
        .chain(states.map(|s| (s, s)))
        .collect()
}

/// A campaign as the console's rows show it and the JSON of `platter status --output json`
/// and `/api/v1/campaigns` carries it (`campaign_json`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct CampaignView {
    pub campaign_id: String,
    pub name: String,
    pub series: String,
    /// running, done or cancelled.
    pub state: &'static str,
    pub submitted_unix_ms: i64,
    pub cells_total: u32,
    pub cells_done: u32,
    pub steps_total: u32,
    pub steps_done: u32,
    pub steps_failed: u32,
    pub store_fault: Option<FaultView>,
    pub hosts: Vec<CampaignHostView>,
}

/// A campaign's progress on one host.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CampaignHostView {
    pub host: String,
    pub connected: bool,
    /// Where several coordinators share a store: the one holding it.
    pub coordinator: Option<String>,
    pub steps_total: u32,
    pub steps_done: u32,
    pub current_step: String,
    pub eta_s: Option<u64>,
    /// Why its agent refused the plan.
    pub refused: Option<String>,
    /// Why its agent holds its steps (its journal cannot be written); not in the JSON.
    #[serde(skip)]
    pub journal_fault: String,
}

impl CampaignHostView {
    pub fn steps(&self) -> Progress {
        Progress {
            done: self.steps_done,
            total: self.steps_total,
        }
    }

    /// Its ETA as `hms` says it, "?" when not known.
    pub fn eta_words(&self) -> String {
        self.eta_s
            .map(|s| hms(Duration::from_secs(s)))
            .unwrap_or_else(|| "?".into())
    }
}

impl CampaignView {
    pub fn of(c: &pb::CampaignStatus) -> CampaignView {
        CampaignView {
            campaign_id: c.campaign_id.clone(),
            name: c.name.clone(),
            series: c.series.clone(),
            state: state_name(c.state),
            submitted_unix_ms: c.created_unix_ms,
            cells_total: c.cells_total,
            cells_done: c.cells_done,
            steps_total: c.steps_total,
            steps_done: c.steps_done,
            steps_failed: c.steps_failed,
            store_fault: c.store_fault.as_ref().map(FaultView::from),
            hosts: c
                .hosts
                .iter()
                .map(|h| CampaignHostView {
                    host: h.host.clone(),
                    connected: h.connected,
                    coordinator: (!h.coordinator.is_empty()).then(|| h.coordinator.clone()),
                    steps_total: h.steps_total,
                    steps_done: h.steps_done,
                    current_step: h.current_step.clone(),
                    eta_s: eta(h).map(|d| d.as_secs()),
                    refused: (!h.refused.is_empty()).then(|| h.refused.clone()),
                    journal_fault: h.journal_fault.clone(),
                })
                .collect(),
        }
    }

    /// Its hosts' names, comma-separated.
    pub fn host_words(&self) -> String {
        let hosts: Vec<&str> = self.hosts.iter().map(|h| h.host.as_str()).collect();
        hosts.join(", ")
    }

    /// When it was submitted, as `clock` says it.
    pub fn submitted(&self) -> String {
        clock(self.submitted_unix_ms)
    }

    pub fn steps(&self) -> Progress {
        Progress {
            done: self.steps_done,
            total: self.steps_total,
        }
    }

    pub fn cells(&self) -> Progress {
        Progress {
            done: self.cells_done,
            total: self.cells_total,
        }
    }
}

pub fn fault_json(f: &pb::StoreFault) -> serde_json::Value {
    serde_json::to_value(FaultView::from(f)).expect("a fault serializes")
}

/// The store's fault, as pages show it and the API's JSON carries it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FaultView {
    pub reason: String,
    pub since_unix_ms: i64,
    pub not_answering: bool,
}

impl From<&pb::StoreFault> for FaultView {
    fn from(f: &pb::StoreFault) -> FaultView {
        FaultView {
            reason: f.reason.clone(),
            since_unix_ms: f.since_unix_ms,
            not_answering: f.not_answering,
        }
    }
}

impl FaultView {
    /// The operator's line (`fault_line`, without its newline).
    pub fn line(&self) -> String {
        let secs = ((crate::store::now_ms() - self.since_unix_ms).max(0) / 1000) as u64;
        format!(
            "STORE FAULT: the coordinator's store {} since {} (for {}): {}. Agents keep their records, unacked, and the coordinator retries every second; nothing is lost, the campaign goes on once the store can write again.",
            if self.not_answering {
                "is not answering"
            } else {
                "cannot commit"
            },
            crate::store::since_clock(self.since_unix_ms),
            hms(Duration::from_secs(secs)),
            self.reason
        )
    }
}

/// What an operator reads when the coordinator's store cannot commit: why, for how long,
/// and that nothing is lost meanwhile.
pub fn fault_line(f: &pb::StoreFault) -> String {
    FaultView::from(f).line() + "\n"
}

/// Time left for a host at the pace of its ended steps.
pub fn eta(h: &pb::HostProgress) -> Option<Duration> {
    if h.steps_done == 0 || h.steps_done >= h.steps_total {
        return (h.steps_done >= h.steps_total).then_some(Duration::ZERO);
    }
    let per = h.elapsed_ms as f64 / f64::from(h.steps_done);
    Some(Duration::from_millis(
        (per * f64::from(h.steps_total - h.steps_done)) as u64,
    ))
}

pub fn hms(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// The campaign states an operator filters by (`state_name`'s words).
pub const CAMPAIGN_STATES: [&str; 3] = ["running", "done", "cancelled"];

/// The agent states an operator filters by, in the order counts are told.
pub const AGENT_STATES: [&str; 5] = ["idle", "busy", "lost", "offline", "journal fault"];

/// An agent state's word, as `AGENT_STATES`, `--state` and the console say it ("" for
/// UNSPECIFIED).
pub fn state_word(state: pb::AgentState) -> &'static str {
    match state {
        pb::AgentState::Unspecified => "",
        pb::AgentState::Idle => "idle",
        pb::AgentState::Busy => "busy",
        pb::AgentState::Lost => "lost",
        pb::AgentState::Offline => "offline",
        pb::AgentState::JournalFault => "journal fault",
    }
}

/// The state `word` names: a word of `AGENT_STATES`, or a coordinator's older words for
/// an agent ("journal fault: WHY" is JOURNAL_FAULT); UNSPECIFIED for any other.
pub fn state_of_word(word: &str) -> pb::AgentState {
    use pb::AgentState::*;
    [Idle, Busy, Lost, Offline]
        .into_iter()
        .find(|s| state_word(*s) == word)
        .or_else(|| word.starts_with("journal fault").then_some(JournalFault))
        .unwrap_or(Unspecified)
}

/// An agent's state: `agent_state`, or, from a coordinator older than it, its words.
pub fn agent_state(a: &pb::AgentInfo) -> pb::AgentState {
    match pb::AgentState::try_from(a.agent_state) {
        Ok(pb::AgentState::Unspecified) | Err(_) => state_of_word(&a.state),
        Ok(s) => s,
    }
}

/// The word of the state `request` selects ("" every state): its `state_filter`, or, from
/// a client older than it, its words.
pub fn filter_word(request: &pb::ListAgentsRequest) -> &str {
    match pb::AgentState::try_from(request.state_filter) {
        Ok(pb::AgentState::Unspecified) | Err(_) => &request.state,
        Ok(s) => state_word(s),
    }
}

/// An agent's state for counting and filtering: journal faults as "journal fault".
fn state_kind(a: &pb::AgentInfo) -> &'static str {
    state_word(agent_state(a))
}

/// Whether the agent is in the state `state` ("" any) and `q` ("" any) is a part of its
/// name, one of its labels (`key=value`, or `key`), or a part of a drive's model: the
/// selection of `platter agents --state --match` and the console's host filter.
fn selects<A: Listed>(a: &A, state: &str, q: &str) -> bool {
    let info = a.info();
    let q = q.trim();
    in_state(info, state) && (q.is_empty() || named(info, q) || a.model_contains(q))
}

fn in_state(a: &pb::AgentInfo, state: &str) -> bool {
    state.is_empty() || state_kind(a) == state
}

/// Whether `q` is a part of the agent's name or one of its labels.
fn named(a: &pb::AgentInfo, q: &str) -> bool {
    a.host.contains(q)
        || a.labels.iter().any(|(k, v)| {
            k == q || q.strip_prefix(k.as_str()).and_then(|r| r.strip_prefix('=')) == Some(v)
        })
}

/// Whether only a drive's model could put the agent among those `state` and `q` select:
/// it is in the state, and `q` is neither empty nor a part of its name or labels.
pub fn only_a_drive_may_select(a: &pb::AgentInfo, state: &str, q: &str) -> bool {
    let q = q.trim();
    in_state(a, state) && !q.is_empty() && !named(a, q)
}

/// An agent to select, whose drives may not have been read yet: the coordinator reads
/// them only for the agents it lists and, for a `--match` that no name or label met, for
/// those agents (by name where they are few, else only those whose drives' JSON holds
/// the words).
pub trait Listed {
    /// The agent, its drives aside.
    fn info(&self) -> &pb::AgentInfo;
    /// Whether a drive's model contains `q`.
    fn model_contains(&self, q: &str) -> bool;
}

impl Listed for pb::AgentInfo {
    fn info(&self) -> &pb::AgentInfo {
        self
    }
    fn model_contains(&self, q: &str) -> bool {
        self.devices.iter().any(|d| d.model.contains(q))
    }
}

/// Whether the agent needs a person: its journal in fault, or lost, or offline.
pub fn agent_needs_attention(a: &pb::AgentInfo) -> bool {
    matches!(state_kind(a), "journal fault" | "lost" | "offline")
}

/// The agents `request` selects (`state`, `match`), counted by state, at most `limit` of
/// them listed, those needing attention first: what the Control service answers, and what
/// `platter agents` makes of an older coordinator's every agent. Sets `matched`, `counts`
/// and `tools` of `response` and returns the agents to list, whose drives the caller
/// reads.
pub fn select_agents<A: Listed>(
    response: &mut pb::ListAgentsResponse,
    agents: impl Iterator<Item = A>,
    request: &pb::ListAgentsRequest,
) -> Vec<A> {
    let mut selected: Vec<A> = agents
        .filter(|a| selects(a, filter_word(request), &request.r#match))
        .collect();
    response.counts = state_counts(selected.iter().map(Listed::info));
    response.matched = selected.len() as u64;
    response.tools = tool_counts(selected.iter().map(Listed::info));
    if request.limit > 0 {
        // The sort is stable: each part stays in the order it came (by name).
        selected.sort_by_key(|a| !agent_needs_attention(a.info()));
        selected.truncate(request.limit as usize);
    }
    selected
}

/// `agents` counted by state (journal faults as "journal fault").
pub fn state_counts<'a>(
    agents: impl IntoIterator<Item = &'a pb::AgentInfo>,
) -> std::collections::HashMap<String, u64> {
    let mut counts = std::collections::HashMap::new();
    for a in agents {
        *counts.entry(state_kind(a).to_string()).or_insert(0) += 1;
    }
    counts
}

/// The agents in the state `state` and matching `q` (as `select_agents` selects), in the order
/// given: how many, and the `take` of them after the first `skip` — a page of the
/// console's hosts, whose drives the caller reads.
pub fn page_of_agents<A: Listed>(
    agents: impl Iterator<Item = A>,
    state: &str,
    q: &str,
    skip: usize,
    take: usize,
) -> (usize, Vec<A>) {
    let mut matched = 0;
    let mut page = Vec::new();
    for a in agents.filter(|a| selects(a, state, q)) {
        if matched >= skip && page.len() < take {
            page.push(a);
        }
        matched += 1;
    }
    (matched, page)
}

/// How many hosts a `ToolCount` names, of those that have that version.
pub const TOOL_EXAMPLES: usize = 3;

/// Each version of each tool among `agents` (in the order given, by name), with how many
/// reported it and the first few of them; by tool, then the most common version first.
/// What `platter agents` shows of a fleet too large to list host by host: "fio 3.33 on
/// 9,950 hosts, not found on 50".
pub fn tool_counts<'a>(agents: impl IntoIterator<Item = &'a pb::AgentInfo>) -> Vec<pb::ToolCount> {
    let mut counts: indexmap::IndexMap<(&str, &str), pb::ToolCount> = indexmap::IndexMap::new();
    for a in agents {
        for t in &a.tools {
            // A tool the agent lacks has no path; its version says nothing then.
            let version = if t.path.is_empty() { "" } else { &t.version };
            let c = counts
                .entry((&t.name, version))
                .or_insert_with(|| pb::ToolCount {
                    name: t.name.clone(),
                    version: version.to_string(),
                    ..Default::default()
                });
            c.hosts += 1;
            if c.examples.len() < TOOL_EXAMPLES {
                c.examples.push(a.host.clone());
            }
        }
    }
    let mut counts: Vec<pb::ToolCount> = counts.into_values().collect();
    counts.sort_by(|a, b| {
        (&a.name, std::cmp::Reverse(a.hosts), &a.version).cmp(&(
            &b.name,
            std::cmp::Reverse(b.hosts),
            &b.version,
        ))
    });
    counts
}

/// One agent of `platter agents --output json` and `/api/v1/hosts`; `fault` is the store's.
pub fn agent_json(a: &pb::AgentInfo, fault: Option<&pb::StoreFault>) -> serde_json::Value {
    // Through `Value`, whose objects keep their keys sorted, as this JSON always had them.
    serde_json::to_value(HostView::of(a, fault)).expect("a host serializes")
}

/// An agent as the console's host rows show it and the API's JSON carries it
/// (`agent_json`, `platter agents --output json`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct HostView {
    pub host: String,
    /// The state's words as `AgentInfo.state` says them ("journal fault: WHY").
    pub state: String,
    /// Where several coordinators share a store: the one holding it.
    pub coordinator: Option<String>,
    pub labels: std::collections::BTreeMap<String, String>,
    pub last_seen_unix_ms: i64,
    pub current_campaign: String,
    /// Connected, but what it sends waits for the store.
    pub waiting_for_store: Option<String>,
    pub agent_version: String,
    pub boot_id: String,
    pub drives: Vec<DriveView>,
    /// `path` "" for a tool the host lacks.
    pub tools: Vec<ToolView>,
    /// The state, typed (the words are `state`'s).
    #[serde(skip)]
    pub kind: pb::AgentState,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct DriveView {
    pub path: String,
    pub model: String,
    pub serial: String,
    pub firmware: String,
    pub size_bytes: u64,
    pub transport: String,
    pub controller: Vec<String>,
    pub write_cache: String,
}

impl DriveView {
    /// Its capacity, as `human` says bytes.
    pub fn size(&self) -> String {
        crate::report::human(self.size_bytes as f64, "B")
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ToolView {
    pub name: String,
    pub path: String,
    pub version: String,
}

impl HostView {
    /// Agent `a` as the coordinator answered, its store's fault `fault`.
    pub fn of(a: &pb::AgentInfo, fault: Option<&pb::StoreFault>) -> HostView {
        HostView {
            host: a.host.clone(),
            state: a.state.clone(),
            coordinator: (!a.coordinator.is_empty()).then(|| a.coordinator.clone()),
            labels: a
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            last_seen_unix_ms: a.last_seen_unix_ms,
            current_campaign: a.current_campaign.clone(),
            waiting_for_store: fault.filter(|_| a.connected).map(|f| f.reason.clone()),
            agent_version: a.agent_version.clone(),
            boot_id: a.boot_id.clone(),
            drives: a
                .devices
                .iter()
                .map(|d| DriveView {
                    path: d.path.clone(),
                    model: d.model.clone(),
                    serial: d.serial.clone(),
                    firmware: d.firmware.clone(),
                    size_bytes: d.size_bytes,
                    transport: d.transport.clone(),
                    controller: d.controller.clone(),
                    write_cache: d.write_cache.clone(),
                })
                .collect(),
            tools: a
                .tools
                .iter()
                .map(|t| ToolView {
                    name: t.name.clone(),
                    path: t.path.clone(),
                    version: t.version.clone(),
                })
                .collect(),
            kind: agent_state(a),
        }
    }

    /// Its labels as `key=value` words, sorted.
    pub fn label_words(&self) -> String {
        let mut words: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        words.sort();
        words.join(" ")
    }

    /// Its drives as `path model`, comma-separated.
    pub fn drive_words(&self) -> String {
        let drives: Vec<String> = self
            .drives
            .iter()
            .map(|d| format!("{} {}", d.path, d.model).trim().to_string())
            .collect();
        drives.join(", ")
    }

    /// The tools it has (those it lacks left out), comma-separated.
    pub fn tool_words(&self) -> String {
        let tools: Vec<&str> = self
            .tools
            .iter()
            .filter(|t| !t.path.is_empty())
            .map(|t| t.name.as_str())
            .collect();
        tools.join(", ")
    }

    /// When it was last seen, as `clock` says it.
    pub fn last_seen(&self) -> String {
        clock(self.last_seen_unix_ms)
    }
}

/// A moment as a UTC date and time: "2026-12-02 16:40:01 UTC".
pub fn clock(unix_ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(unix_ms.div_euclid(1000))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// Time left for a campaign: its slowest host's (`eta`); `None` until each host has a pace.
pub fn campaign_eta(c: &pb::CampaignStatus) -> Option<Duration> {
    c.hosts
        .iter()
        .map(eta)
        .try_fold(Duration::ZERO, |m, e| Some(m.max(e?)))
}

/// What a campaign's report found wrong: the problems `platter report` exits non-zero
/// for, in words.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Verdict {
    /// Nothing is wrong: every step ran, every plan was accepted, nothing is missing,
    /// every comparison was made and no qualification failed.
    pub pass: bool,
    pub qualification_failed: bool,
    pub problems: Vec<String>,
    /// What the verdict says in a word: `pass` only when limits were judged and held.
    pub state: VerdictState,
    /// How many qualification checks the report judged; None from a coordinator older
    /// than the count.
    pub qualification_checks: Option<u32>,
}

/// A verdict in a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictState {
    /// Nothing is wrong, and the campaign's limits were judged and held (or a coordinator
    /// older than the count did not say whether it had any).
    Pass,
    /// Nothing is wrong, but the campaign set no qualification limits: judged against
    /// nothing, so not a pass.
    NoLimits,
    /// Something is wrong: `problems` says what.
    Fail,
}

impl Verdict {
    /// "pass", "no limits", or the problems.
    pub fn words(&self) -> String {
        match self.state {
            VerdictState::Pass => "pass".into(),
            VerdictState::NoLimits => "no limits".into(),
            VerdictState::Fail => self.problems.join(", "),
        }
    }
}

/// The verdict of a report's answer.
pub fn verdict_of(r: &pb::ReportResponse) -> Verdict {
    let mut problems = Vec::new();
    if r.qualification_failed {
        problems.push("qualification FAIL".to_string());
    }
    for (n, what) in [
        (r.steps_failed, "step(s) failed"),
        (r.plans_refused, "plan(s) refused"),
        (r.measurements_missing, "measurement(s) missing"),
        (r.comparisons_not_made, "comparison(s) not made"),
        (r.drives_not_steady, "drive(s) without steady state"),
    ] {
        if n > 0 {
            problems.push(format!("{n} {what}"));
        }
    }
    let state = match r.qualification_checks {
        _ if !problems.is_empty() => VerdictState::Fail,
        Some(0) => VerdictState::NoLimits,
        _ => VerdictState::Pass,
    };
    Verdict {
        pass: problems.is_empty(),
        qualification_failed: r.qualification_failed,
        problems,
        state,
        qualification_checks: r.qualification_checks,
    }
}

/// `platter compare` for people: what the number is, one line per cell, then the cells
/// of either campaign that have no counterpart in the other.
pub fn render_comparison(c: &crate::report::judge::CampaignComparison) -> String {
    let (a, b, metric) = (&c.baseline, &c.candidate, &c.metric);
    let family = c.rows.iter().map(|r| r.family).max().unwrap_or(0);
    let mut out = format!(
        "B = {b} against A = {a}, {metric}\n\
         penalty: the Hodges–Lehmann ratio of B to A (the median of every ratio of a \
         repetition of B to one of A) − 1, with a distribution-free interval at the level \
         of its step of Holm's correction over {family} comparison(s), labelled with its \
         real coverage: a line is significant exactly when its interval excludes 0; a line \
         whose runs are too few for its step is an estimate, neither\n"
    );
    for r in &c.rows {
        let test = match (r.p_value, r.holm_p) {
            (Some(p), Some(h)) => format!(" [p = {p:.3}, Holm-adjusted p = {h:.3}]"),
            _ => String::new(),
        };
        out.push_str(&format!("  {}: {}{test}\n", r.row.context, r.row.text));
    }
    if let Some(t) = &c.together {
        out.push_str(&format!("{}\n", together_text(t)));
    }
    if let Some(u) = &c.undecided {
        out.push_str(&format!("{}\n", crate::report::notes::undecided_text(u)));
    }
    for (side, cells) in [("A", &c.only_in_a), ("B", &c.only_in_b)] {
        for cell in cells {
            out.push_str(&format!("only in {side}: {}\n", cell.describe()));
        }
    }
    out
}

/// A delivery's state in words, the same in `platter alerts log` and on `/admin/alerts`:
/// "delivered 2026-12-06 14:02:07 UTC", "retrying at … after 3 tries: why", "silenced: why".
pub fn delivery_state(d: &crate::store::alerts::Delivery) -> String {
    match d.state.as_str() {
        "delivered" => format!("delivered {}", clock(d.delivered_unix_ms)),
        "pending" if d.attempts > 0 => format!(
            "retrying at {} after {} tries: {}",
            clock(d.next_unix_ms),
            d.attempts,
            d.last_error
        ),
        "silenced" | "failed" => format!("{}: {}", d.state, d.last_error),
        s => s.to_string(),
    }
}

/// "over all 24 cells together: B is ×0.21 of A (geometric mean), significant (Stouffer p
/// 3e-9)".
fn together_text(t: &crate::report::judge::Together) -> String {
    let p = if t.p_value >= 0.001 {
        format!("{:.3}", t.p_value)
    } else {
        format!("{:.0e}", t.p_value)
    };
    let verdict = if t.significant {
        "significant"
    } else {
        "no significant difference"
    };
    format!(
        "over all {} cells together: B is ×{} of A (geometric mean), {verdict} (Stouffer p {p})",
        t.cells,
        crate::report::side::ratio_digits(t.ratio)
    )
}

/// `platter history` for people: per host and cell, each run's median with its interval
/// and its shift from the run before, flags with what changed; the latest run's flags last.
pub fn render_history(h: &crate::report::history::History) -> String {
    use crate::report::history::{Drift, Flag, Line};
    use std::fmt::Write as _;
    let mut out = format!(
        "series {}: {} run(s) that ended; metric {}\n\
         each run against the one before on the same host and parameters: the Hodges–Lehmann shift \
         [interval at its Holm step across the run's cells, its coverage; an estimate when the runs are too few for that step]; \
         and against the recent runs' level and spread [95% prediction interval: significant when it excludes 0], [99%]; \
         flagged when significant with the interval against the run before and the 99% one wholly beyond ±{}%\n\
         each line as a whole: steps (E-Divisive, t-test) and ramps (Mann–Kendall, Theil–Sen) of its medians, flagged when their whole change passes ±{}%\n",
        h.series,
        h.runs.len(),
        h.metric,
        h.threshold_pct,
        h.threshold_pct
    );
    for l in &h.left_out {
        let _ = writeln!(out, "left out: {} ({})", l.campaign_id, l.why);
    }
    // What a trigger said of its runs (a timer's slot is the run's time: not repeated).
    for r in &h.runs {
        let said: Vec<String> = r
            .labels
            .iter()
            .filter(|(k, v)| *k != "slot" && !(*k == "fired_by" && *v == "schedule"))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if !said.is_empty() {
            let _ = writeln!(out, "run {}: {}", r.campaign_id, said.join(", "));
        }
    }
    let submitted = |id: &str| {
        h.runs
            .iter()
            .find(|r| r.campaign_id == id)
            .map(|r| clock(r.submitted_unix_ms))
            .unwrap_or_default()
    };
    for line in &h.lines {
        let _ = writeln!(
            out,
            "\n{}{}{}",
            line.host,
            if line.cell.is_empty() { "" } else { " · " },
            line.cell
        );
        for p in &line.points {
            let value = p.median_text(&line.unit);
            let since = match &p.since_previous {
                None => String::new(),
                Some(s) => {
                    let shift = s.judged_text();
                    let flag = match s.flag {
                        Flag::None if s.significant => "  significant, under the threshold",
                        Flag::None => "",
                        Flag::Regression => "  REGRESSION",
                        Flag::Improvement => "  improvement",
                        Flag::Changed => "  CHANGED",
                    };
                    format!("  {shift}{flag}")
                }
            };
            let _ = writeln!(
                out,
                "  {}  {}  n={:<3} {value}{since}",
                p.campaign_id,
                submitted(&p.campaign_id),
                p.n
            );
            if let Some(s) = p.since_previous.as_ref().filter(|s| s.flag != Flag::None) {
                if s.changed.is_empty() {
                    out.push_str(
                        "      nothing recorded changed on this host between the two runs\n",
                    );
                } else {
                    let _ = writeln!(out, "      changed: {}", s.changed.join("; "));
                }
            }
        }
        for d in &line.drift {
            let _ = writeln!(out, "  drift: {}", d.summary());
        }
    }
    // A step or ramp with its line, where it starts.
    let drift_lines = |out: &mut String, drift: Vec<(&Line, &Drift)>| {
        for (l, d) in drift {
            let _ = writeln!(
                out,
                "  {:?} {} {} {}: {}, since {}",
                d.flag,
                l.host,
                l.cell,
                h.metric,
                d.summary(),
                d.first_campaign
            );
        }
    };
    let drift = h.drift_flags();
    if !drift.is_empty() {
        let _ = writeln!(
            out,
            "\nthe series as a whole: {} drift flag(s)",
            drift.len()
        );
        drift_lines(&mut out, drift);
    }
    let flags = h.latest_flags();
    match h.runs.last() {
        None => out.push_str("\nno run of this series has ended yet\n"),
        Some(latest) if flags.is_empty() => {
            let _ = writeln!(out, "\nlatest run {}: nothing flagged", latest.campaign_id);
        }
        Some(latest) => {
            let _ = writeln!(
                out,
                "\nlatest run {}: {} flag(s)",
                latest.campaign_id,
                flags.len()
            );
            for (l, p) in flags {
                let s = p.since_previous.as_ref().expect("flagged");
                let _ = writeln!(
                    out,
                    "  {:?} {} {} {}: {}",
                    s.flag,
                    l.host,
                    l.cell,
                    h.metric,
                    s.summary()
                );
            }
        }
    }
    // The steps and ramps that reach the latest run: what `--fail-on-regression` fails on
    // beside its own flags.
    let reach = h.latest_drift_flags();
    if let (Some(latest), false) = (h.runs.last(), reach.is_empty()) {
        let _ = writeln!(
            out,
            "latest run {}: {} step(s) it brought or ramp(s) still climbing",
            latest.campaign_id,
            reach.len()
        );
        drift_lines(&mut out, reach);
    }
    out
}

/// `platter history --format csv`: a row per line and run, raw SI values.
pub fn history_csv(h: &crate::report::history::History) -> String {
    let field = crate::report::csv_field;
    let num = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    let mut out = String::from("series,metric,host,cell,unit,campaign_id,submitted_unix_ms,n,median,median_lo,median_hi,change_pct,change_lo,change_hi,holm_p,flag,changed,recent_change_pct,recent_lo,recent_hi,recent_p,drift,change_level,estimate,significant,recent_flag_lo,recent_flag_hi\n");
    for l in &h.lines {
        for p in &l.points {
            let submitted = h
                .runs
                .iter()
                .find(|r| r.campaign_id == p.campaign_id)
                .map(|r| r.submitted_unix_ms.to_string())
                .unwrap_or_default();
            let s = p.since_previous.as_ref();
            let row = [
                field(&h.series),
                field(&h.metric),
                field(&l.host),
                field(&l.cell),
                field(&l.unit),
                field(&p.campaign_id),
                submitted,
                p.n.to_string(),
                p.median.to_string(),
                num(p.median_ci.map(|c| c.0)),
                num(p.median_ci.map(|c| c.1)),
                num(s.map(|s| s.change_pct)),
                num(s.and_then(|s| s.ci_pct).map(|c| c.0)),
                num(s.and_then(|s| s.ci_pct).map(|c| c.1)),
                num(s.and_then(|s| s.holm_p)),
                s.map(|s| format!("{:?}", s.flag).to_lowercase())
                    .unwrap_or_default(),
                field(&s.map(|s| s.changed.join("; ")).unwrap_or_default()),
                num(s.and_then(|s| s.spread.as_ref()).map(|r| r.change_pct)),
                num(s.and_then(|s| s.spread.as_ref()).map(|r| r.ci_pct.0)),
                num(s.and_then(|s| s.spread.as_ref()).map(|r| r.ci_pct.1)),
                num(s.and_then(|s| s.spread.as_ref()).map(|r| r.p)),
                // The steps and ramps that start at this run.
                field(
                    &l.drift
                        .iter()
                        .filter(|d| d.first_campaign == p.campaign_id)
                        .map(|d| d.summary())
                        .collect::<Vec<_>>()
                        .join("; "),
                ),
                // Added later, so the columns before keep their places.
                num(s.and_then(|s| s.ci_level)),
                s.map(|s| s.estimate.to_string()).unwrap_or_default(),
                s.map(|s| s.significant.to_string()).unwrap_or_default(),
                num(s.and_then(|s| s.spread.as_ref()).map(|r| r.flag_ci_pct.0)),
                num(s.and_then(|s| s.spread.as_ref()).map(|r| r.flag_ci_pct.1)),
            ];
            out.push_str(&row.join(","));
            out.push('\n');
        }
    }
    out
}

/// A schedule as JSON (`platter schedule list/show --format json`, the console's API).
pub fn schedule_json(s: &pb::ScheduleInfo) -> serde_json::Value {
    serde_json::json!({
        "name": s.name,
        "series": s.series,
        "file_name": s.file_name,
        "when": s.when,
        "policy": s.policy,
        "paused": s.paused,
        "next_due_unix_ms": (s.next_due_unix_ms != 0).then_some(s.next_due_unix_ms),
        "created_unix_ms": s.created_unix_ms,
        "firings": { "submitted": s.submitted, "skipped": s.skipped, "failed": s.failed },
        "latest": s.firings.iter().map(firing_json).collect::<Vec<_>>(),
    })
}

/// One firing as JSON.
pub fn firing_json(f: &pb::ScheduleFiring) -> serde_json::Value {
    serde_json::json!({
        "schedule": f.schedule,
        "slot_unix_ms": f.slot_unix_ms,
        "fired_unix_ms": f.fired_unix_ms,
        "coordinator": f.coordinator,
        "outcome": f.outcome,
        "campaign_id": (!f.campaign_id.is_empty()).then_some(&f.campaign_id),
        "labels": f.labels.iter().collect::<std::collections::BTreeMap<_, _>>(),
        "note": (!f.note.is_empty()).then_some(&f.note),
    })
}

fn next_words(s: &pb::ScheduleInfo) -> String {
    match (s.paused, s.next_due_unix_ms) {
        (true, _) => "paused".into(),
        (false, 0) => "on trigger".into(),
        (false, at) => clock(at),
    }
}

/// `platter schedule list`: one line per schedule.
pub fn render_schedules(all: &[pb::ScheduleInfo]) -> String {
    use std::fmt::Write as _;
    if all.is_empty() {
        return "no schedules (`platter schedule add FILE --every 24h` adds one)\n".into();
    }
    let mut rows = vec![[
        "SCHEDULE".to_string(),
        "SERIES".into(),
        "WHEN".into(),
        "POLICY".into(),
        "NEXT".into(),
        "RUNS".into(),
        "SKIPPED".into(),
        "FAILED".into(),
        "LAST".into(),
    ]];
    for s in all {
        let last = s
            .firings
            .first()
            .map(|f| format!("{} {}", clock(f.fired_unix_ms), f.outcome))
            .unwrap_or_else(|| "-".into());
        rows.push([
            s.name.clone(),
            s.series.clone(),
            s.when.clone(),
            s.policy.clone(),
            next_words(s),
            s.submitted.to_string(),
            s.skipped.to_string(),
            s.failed.to_string(),
            last,
        ]);
    }
    let widths: Vec<usize> = (0..9)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    out
}

/// `platter schedule show NAME`: the schedule, then its latest firings, newest first.
pub fn render_schedule(s: &pb::ScheduleInfo) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "schedule {} — series {} ({})",
        s.name, s.series, s.file_name
    );
    let _ = writeln!(
        out,
        "  fires {}, policy {}; next: {}",
        s.when,
        s.policy,
        next_words(s)
    );
    let _ = writeln!(
        out,
        "  firings: {} submitted, {} skipped, {} failed (since {})",
        s.submitted,
        s.skipped,
        s.failed,
        clock(s.created_unix_ms)
    );
    if s.firings.is_empty() {
        let _ = writeln!(out, "  not fired yet");
        return out;
    }
    let _ = writeln!(out, "\nlatest firings, newest first:");
    for f in &s.firings {
        let run = if f.campaign_id.is_empty() {
            "-".to_string()
        } else {
            f.campaign_id.clone()
        };
        let _ = writeln!(
            out,
            "  {}  {:<9}  {}  by {}",
            clock(f.fired_unix_ms),
            f.outcome,
            run,
            f.coordinator
        );
        let labels: Vec<String> = f
            .labels
            .iter()
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if !labels.is_empty() {
            let _ = writeln!(out, "      labels: {}", labels.join(", "));
        }
        if !f.note.is_empty() {
            let _ = writeln!(out, "      {}", f.note);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A campaign judged against nothing is not a pass; one whose limits held is; an
    /// older coordinator that does not count its checks reads as before; a problem fails.
    #[test]
    fn a_verdict_passes_only_what_was_judged() {
        let answer = |checks: Option<u32>, steps_failed: u32| pb::ReportResponse {
            qualification_checks: checks,
            steps_failed,
            ..Default::default()
        };
        let state = |r: &pb::ReportResponse| {
            let v = verdict_of(r);
            (v.state, v.pass, v.words())
        };
        assert_eq!(
            state(&answer(Some(0), 0)),
            (VerdictState::NoLimits, true, "no limits".to_string())
        );
        assert_eq!(
            state(&answer(Some(3), 0)),
            (VerdictState::Pass, true, "pass".to_string())
        );
        assert_eq!(
            state(&answer(None, 0)),
            (VerdictState::Pass, true, "pass".to_string())
        );
        assert_eq!(
            state(&answer(Some(0), 2)),
            (VerdictState::Fail, false, "2 step(s) failed".to_string())
        );
        let json = serde_json::to_value(verdict_of(&answer(Some(0), 0))).unwrap();
        assert_eq!(json["state"], "no_limits");
        assert_eq!(json["qualification_checks"], 0);
    }

    fn agent(host: &str, tools: &[(&str, &str, &str)]) -> pb::AgentInfo {
        pb::AgentInfo {
            host: host.into(),
            tools: tools
                .iter()
                .map(|(name, path, version)| pb::ToolVersion {
                    name: name.to_string(),
                    path: path.to_string(),
                    version: version.to_string(),
                })
                .collect(),
            ..Default::default()
        }
    }

    /// Versions counted per tool, the most common first; a tool without a path is "not
    /// found" whatever version came with it; the first hosts of each are named, no more.
    #[test]
    fn tools_are_counted_by_version_across_agents() {
        let fio = |v: &'static str| ("fio", "/usr/bin/fio", v);
        let agents = [
            agent("h1", &[fio("3.33"), ("bonnie++", "", "")]),
            agent(
                "h2",
                &[fio("3.28"), ("bonnie++", "/usr/sbin/bonnie++", "2.00a")],
            ),
            agent("h3", &[fio("3.33"), ("bonnie++", "", "2.00a")]),
            agent("h4", &[fio("3.33")]),
            agent("h5", &[fio("3.33")]),
            agent("h6", &[]),
        ];
        let counts: Vec<(String, String, u64, Vec<String>)> = tool_counts(&agents)
            .into_iter()
            .map(|c| (c.name, c.version, c.hosts, c.examples))
            .collect();
        let row = |n: &str, v: &str, k: u64, hosts: &[&str]| {
            let hosts = hosts.iter().map(|h| h.to_string()).collect();
            (n.to_string(), v.to_string(), k, hosts)
        };
        assert_eq!(
            counts,
            [
                row("bonnie++", "", 2, &["h1", "h3"]),
                row("bonnie++", "2.00a", 1, &["h2"]),
                row("fio", "3.33", 4, &["h1", "h3", "h4"]),
                row("fio", "3.28", 1, &["h2"]),
            ]
        );
    }
}

#[cfg(test)]
mod agent_state_tests {
    use super::*;

    #[test]
    fn an_agents_state_is_its_enum_else_an_older_coordinators_words() {
        let with = |agent_state: pb::AgentState, state: &str| pb::AgentInfo {
            agent_state: agent_state as i32,
            state: state.into(),
            ..Default::default()
        };
        assert_eq!(
            agent_state(&with(pb::AgentState::Busy, "busy")),
            pb::AgentState::Busy
        );
        // An older coordinator: the words only, a journal fault with its why.
        let old = with(pb::AgentState::Unspecified, "journal fault: /var full");
        assert_eq!(agent_state(&old), pb::AgentState::JournalFault);
        assert_eq!(state_kind(&old), "journal fault");
        assert_eq!(
            agent_state(&with(pb::AgentState::Unspecified, "lost")),
            pb::AgentState::Lost
        );
        assert_eq!(state_of_word("sleeping"), pb::AgentState::Unspecified);
        for word in AGENT_STATES {
            assert_eq!(state_word(state_of_word(word)), word);
        }
    }

    #[test]
    fn a_requests_filter_is_its_enum_else_an_older_clients_words() {
        let old = pb::ListAgentsRequest {
            state: "lost".into(),
            ..Default::default()
        };
        assert_eq!(filter_word(&old), "lost");
        let new = pb::ListAgentsRequest {
            state: "lost".into(),
            state_filter: pb::AgentState::JournalFault as i32,
            ..Default::default()
        };
        assert_eq!(filter_word(&new), "journal fault");
        assert_eq!(filter_word(&pb::ListAgentsRequest::default()), "");
    }
}
