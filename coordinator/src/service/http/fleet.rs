//! What the console shows, gathered the way the CLI's commands get it: the Control
//! service's own answers, called inside this process, so a page, its JSON twin and
//! `platter status` / `platter agents` never disagree — including while the store does
//! not answer (the service then answers with what it last read, marked with the fault).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use platter_proto::v1 as pb;
use platter_proto::v1::control_server::Control;
use serde::Serialize;
use tonic::{Request, Status};

use super::Ctx;
use crate::service::rpc::control::{blocking, report_response, Fleet};
use crate::service::tls::InProcess;
use crate::store::reports::FailedStep;
use crate::views::{verdict_of, Verdict};
use indexmap::IndexMap;
use platter_proto::model::{CampaignId, HostName};

/// A request the Control service takes from the console: the console checked the
/// account's role; no certificate comes with it.
fn in_process<T>(message: T) -> Request<T> {
    let mut r = Request::new(message);
    r.extensions_mut().insert(InProcess);
    r
}

/// What ended campaigns' reports say, which does not change once ended: a report is read
/// once per campaign, not once per page view (nor once per page rendering at the same
/// moment).
#[derive(Default)]
pub(super) struct Verdicts(Mutex<HashMap<String, Arc<tokio::sync::OnceCell<Ended>>>>);

/// An ended campaign's report, as its page and the overview show it.
#[derive(Debug, Clone)]
pub(super) struct Ended {
    pub verdict: Verdict,
    /// None when the report found nothing to say.
    pub findings: Option<FindingsView>,
}

/// A report's findings as a campaign's page opens with them: what was found, ranked
/// (`report::notes::findings`, the lines every format opens with).
#[derive(Debug, Clone, Serialize)]
pub(super) struct FindingsView {
    /// The metric every finding is about.
    pub metric: String,
    pub lines: Vec<FindingView>,
}

/// One line of the findings and how it reads.
#[derive(Debug, Clone, Serialize)]
pub(super) struct FindingView {
    pub text: String,
    /// `difference`, `equal` (found equal), `failure` (the answer is not whole: a failed
    /// qualification, lost measurements) or `note`.
    pub kind: &'static str,
}

impl FindingsView {
    fn of(report: &crate::report::Report) -> Option<FindingsView> {
        use crate::report::notes::{findings, FindingLine};
        let lines: Vec<FindingView> = findings(report)
            .into_iter()
            .map(|l| FindingView {
                kind: match &l {
                    _ if l.is_failure() => "failure",
                    _ if l.is_equal() => "equal",
                    FindingLine::Difference(_) | FindingLine::MoreDifferences(_) => "difference",
                    _ => "note",
                },
                text: crate::report::printable(&l.to_string()),
            })
            .collect();
        (!lines.is_empty()).then(|| FindingsView {
            metric: report.findings.metric.clone(),
            lines,
        })
    }
}

/// Campaigns a host's page shows what it ran on for.
const HOST_RUNS: usize = 20;

/// A campaign a host ran, what it ran on (labelled facts) and which of them differ from
/// the campaign before it on that host.
#[derive(Debug, Clone, Serialize)]
pub(super) struct RanOn {
    pub campaign_id: String,
    pub name: String,
    pub submitted_unix_ms: i64,
    pub facts: IndexMap<String, String>,
    /// Facts that differ from the host's campaign before this one (added or gone too).
    pub changed: Vec<String>,
}

/// Runs a series' page follows, the latest that ended.
pub(super) const SERIES_RUNS: usize = 30;

/// Failed steps a campaign's page shows, the latest; the report has them all.
pub(super) const FAILURES_SHOWN: usize = 20;

/// The fleet's two big reads, each shared by the requests that wait for it.
#[derive(Default)]
pub(super) struct Reads {
    agents: Shared<Fleet>,
    campaigns: Shared<pb::ListCampaignsResponse>,
}

/// One read at a time, its answer shared with every request that arrived before the read
/// began: such a request gets what it would have read itself, no older. Open consoles all
/// ask again on the same change, so 200 of them cost two reads rather than 200 (with
/// 10,000 agents a read of them takes a fifth of a second of CPU, and the machine's cores
/// also carry the agents' streams).
pub(super) struct Shared<T> {
    /// Held while a read runs; waiting requests queue here.
    gate: tokio::sync::Mutex<()>,
    /// Reads begun so far.
    begun: AtomicU64,
    /// The last read to end: its number (in `begun`'s count) and its answer.
    last: Mutex<Option<(u64, Answer<T>)>>,
}

/// A shared read's answer.
type Answer<T> = Result<Arc<T>, Status>;

impl<T> Default for Shared<T> {
    fn default() -> Self {
        Shared {
            gate: tokio::sync::Mutex::new(()),
            begun: AtomicU64::new(0),
            last: Mutex::new(None),
        }
    }
}

impl<T> Shared<T> {
    /// The answer of a read that began after this call did: `read`'s own, or that of a
    /// read another request began meanwhile.
    async fn get<F>(&self, read: impl FnOnce() -> F) -> Answer<T>
    where
        F: Future<Output = Result<T, Status>>,
    {
        let arrived = self.begun.load(Ordering::SeqCst);
        let _turn = self.gate.lock().await;
        if let Some((n, answer)) = &*self.last.lock().expect("shared read") {
            // Read n began after `arrived` was taken, so after this request came.
            if *n > arrived {
                return answer.clone();
            }
        }
        let n = self.begun.fetch_add(1, Ordering::SeqCst) + 1;
        let answer = read().await.map(Arc::new);
        *self.last.lock().expect("shared read") = Some((n, answer.clone()));
        answer
    }
}

/// A flag of a series' latest run against the run before it (`platter history`).
#[derive(Debug, Clone, Serialize)]
pub(super) struct Flagged {
    pub series: String,
    pub campaign_id: String,
    pub host: String,
    pub cell: String,
    pub metric: String,
    pub flag: crate::report::history::Flag,
    /// "+10.4% since c-…; changed: kernel: 6.1.0 → 6.12.1".
    pub summary: String,
}

/// The flags of each series' latest run, by that run's campaign id: a run's flags do not
/// change once it ended, so its reports are read once (single-flight, as verdicts).
#[derive(Default)]
pub(super) struct SeriesFlags(Mutex<HashMap<String, Arc<tokio::sync::OnceCell<Vec<Flagged>>>>>);

/// The metric the overview's flags follow; a series' page follows any.
const FLAGGED_METRIC: &str = "wall";

/// Ended campaigns the overview lists under "recent results".
const RECENT: usize = 10;

/// Someone should look at this host (or, with `host` empty, this campaign).
#[derive(Debug, Clone, Serialize)]
pub(super) struct Attention {
    pub host: String,
    /// The campaign concerned, "" when none.
    pub campaign: String,
    pub reason: String,
}

/// The console's front page: what needs a person first, then what runs, then what ended.
pub(super) struct Overview {
    pub store_fault: Option<pb::StoreFault>,
    /// The latest flags of the series whose runs ended lately ("flagged results").
    pub flagged: Vec<Flagged>,
    pub attention: Vec<Attention>,
    pub running: Vec<pb::CampaignStatus>,
    pub recent: Vec<(pb::CampaignStatus, Option<Verdict>)>,
    /// Agents by state (`idle`, `busy`, `lost`, `offline`, `journal fault`).
    pub hosts: Vec<(String, usize)>,
    pub hosts_total: usize,
}

impl Ctx {
    /// The fleet as its pages select from it (one read for the requests that overlap it,
    /// `Shared`), each page's agents made whole only where shown.
    pub(super) async fn agents(&self) -> Result<Arc<Fleet>, Status> {
        self.reads.agents.get(|| self.control.fleet()).await
    }

    pub(super) async fn campaigns(&self) -> Result<Arc<pb::ListCampaignsResponse>, Status> {
        self.reads
            .campaigns
            .get(|| async {
                let r = self
                    .control
                    .list_campaigns(in_process(pb::ListCampaignsRequest {}))
                    .await?;
                Ok(r.into_inner())
            })
            .await
    }

    pub(super) async fn campaign(&self, id: &str) -> Result<pb::CampaignStatus, Status> {
        let r = self
            .control
            .get_campaign(in_process(pb::GetCampaignRequest {
                campaign_id: id.into(),
            }))
            .await?;
        Ok(r.into_inner())
    }

    pub(super) async fn report(
        &self,
        id: &str,
        format: &str,
    ) -> Result<pb::ReportResponse, Status> {
        let r = self
            .control
            .report(in_process(pb::ReportRequest {
                campaign_id: id.into(),
                // A word of the page's query that names no format goes as words, and
                // the service says what it is not.
                report_format: crate::report::Format::parse(format).map_or(0, |f| {
                    crate::service::rpc::control::report_format_to_wire(f) as i32
                }),
                format: format.into(),
            }))
            .await?;
        Ok(r.into_inner())
    }

    pub(super) async fn cancel(&self, id: &str) -> Result<(), Status> {
        self.control
            .cancel(in_process(pb::CancelRequest {
                campaign_id: id.into(),
            }))
            .await?;
        Ok(())
    }

    pub(super) async fn compare(
        &self,
        a: &str,
        b: &str,
        metric: &str,
    ) -> Result<pb::CompareResponse, Status> {
        let r = self
            .control
            .compare(in_process(pb::CompareRequest {
                a: a.into(),
                b: b.into(),
                metric: metric.into(),
            }))
            .await?;
        Ok(r.into_inner())
    }

    /// What submitting `yaml` would plan (`platter plan`), or why it cannot be.
    pub(super) async fn plan(&self, file_name: &str, yaml: &str) -> Result<String, Status> {
        let r = self
            .control
            .plan(in_process(submit_request(file_name, yaml)))
            .await?;
        Ok(r.into_inner().rendered)
    }

    /// Pulls trigger `name` with `labels` (`platter trigger`).
    pub(super) async fn trigger(
        &self,
        name: &str,
        labels: std::collections::BTreeMap<String, String>,
    ) -> Result<pb::TriggerResponse, Status> {
        let r = self
            .control
            .trigger(in_process(pb::TriggerRequest {
                name: name.into(),
                labels: labels.into_iter().collect(),
            }))
            .await?;
        Ok(r.into_inner())
    }

    /// Submits `yaml`; the new campaign's id.
    pub(super) async fn submit(&self, file_name: &str, yaml: &str) -> Result<String, Status> {
        let r = self
            .control
            .submit(in_process(submit_request(file_name, yaml)))
            .await?;
        Ok(r.into_inner().campaign_id)
    }

    /// The flags of run `campaign_id`, the latest of series `name`, against the run
    /// before it; none when its reports cannot be read now (asked again next time).
    async fn series_flags(&self, name: &str, campaign_id: &str) -> Vec<Flagged> {
        use crate::report::history::History;
        let cell = self
            .series_flags
            .0
            .lock()
            .expect("series flags")
            .entry(campaign_id.to_string())
            .or_default()
            .clone();
        let (store, series, run) = (
            self.store.clone(),
            name.to_string(),
            campaign_id.to_string(),
        );
        let read = cell
            .get_or_try_init(|| async move {
                tokio::task::spawn_blocking(move || {
                    let h = History::load(
                        &store,
                        &series,
                        FLAGGED_METRIC,
                        None,
                        None,
                        Some(2),
                        Some(&run),
                    )
                    .map_err(|e| e.to_string())?;
                    Ok::<_, String>(
                        h.latest_flags()
                            .into_iter()
                            .filter_map(|(l, p)| {
                                let s = p.since_previous.as_ref()?;
                                Some(Flagged {
                                    series: h.series.clone(),
                                    campaign_id: p.campaign_id.clone(),
                                    host: l.host.clone(),
                                    cell: l.cell.clone(),
                                    metric: h.metric.clone(),
                                    flag: s.flag,
                                    summary: s.summary(),
                                })
                            })
                            .collect(),
                    )
                })
                .await
                .map_err(|e| e.to_string())?
            })
            .await;
        read.cloned().unwrap_or_default()
    }

    /// The series `name` over its last `SERIES_RUNS` runs that ended, on `metric`
    /// (`platter history`'s answer, read from the store).
    pub(super) async fn history(
        &self,
        name: &str,
        metric: &str,
    ) -> Result<crate::report::history::History, Status> {
        use crate::report::history::History;
        let (store, name, metric) = (self.store.clone(), name.to_string(), metric.to_string());
        let read = tokio::task::spawn_blocking(move || {
            History::load(&store, &name, &metric, None, None, Some(SERIES_RUNS), None)
                .map(|h| (h, name))
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?;
        match read {
            Ok((h, name)) if h.runs.is_empty() && h.left_out.is_empty() => {
                Err(Status::not_found(format!("no campaign named {name:?}")))
            }
            Ok((h, _)) => Ok(h),
            Err(e) => Err(Status::unavailable(e.to_string())),
        }
    }

    /// The drive ledger's answer to `q`, as `platter drives`/`drive`/`qualification` get it:
    /// a drive not found is NOT_FOUND, a store that cannot answer UNAVAILABLE.
    pub(super) async fn ledger(
        &self,
        q: crate::report::ledger::Question,
    ) -> Result<crate::report::ledger::Answer, Status> {
        use crate::report::ledger::{answer, LedgerError};
        let store = self.store.clone();
        let read = tokio::task::spawn_blocking(move || answer(&store, &q))
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        read.map_err(|e| match e {
            LedgerError::NotFound(why) => Status::not_found(why),
            LedgerError::Store(e) => Status::unavailable(e.to_string()),
        })
    }

    /// An ended campaign's verdict (its report's problems); `None` while it runs or when
    /// its report cannot be read now.
    pub(super) async fn verdict(&self, c: &pb::CampaignStatus) -> Option<Verdict> {
        self.ended(c).await.map(|e| e.verdict)
    }

    /// An ended campaign's verdict and findings, its report read once; `None` while it
    /// runs or when its report cannot be read now.
    pub(super) async fn ended(&self, c: &pb::CampaignStatus) -> Option<Ended> {
        if c.state == pb::CampaignState::Running as i32 {
            return None;
        }
        let cell = self
            .verdicts
            .0
            .lock()
            .expect("verdicts")
            .entry(c.campaign_id.clone())
            .or_default()
            .clone();
        // The first to ask reads the report, the others wait for it; a report that cannot
        // be read now is asked again next time.
        cell.get_or_try_init(|| async {
            // Its counts and findings are all that is shown: nothing is rendered.
            let (store, id) = (self.store.clone(), c.campaign_id.clone());
            blocking(move || {
                let report = crate::report::Report::load(&store, &id)
                    .map_err(|e| Status::unavailable(e.to_string()))?;
                Ok(Ended {
                    verdict: verdict_of(&report_response(&report, String::new())),
                    findings: FindingsView::of(&report),
                })
            })
            .await
        })
        .await
        .ok()
        .cloned()
    }

    /// The campaign's latest failed steps (at most `FAILURES_SHOWN`) and how many failed
    /// in all; none read when none failed, or while the store cannot be read (the page
    /// says the store's fault).
    pub(super) async fn failures(&self, c: &pb::CampaignStatus) -> (Vec<FailedStep>, usize) {
        if c.steps_failed == 0 {
            return (Vec::new(), 0);
        }
        let (store, id) = (self.store.clone(), CampaignId::from(c.campaign_id.clone()));
        let read =
            tokio::task::spawn_blocking(move || store.recent_failures(&id, FAILURES_SHOWN)).await;
        match read {
            Ok(Ok(f)) => f,
            _ => (Vec::new(), c.steps_failed as usize),
        }
    }

    /// What `host` ran its latest campaigns on, newest first, each with what changed
    /// since the one before it.
    pub(super) async fn ran_on(&self, host: &str) -> Vec<RanOn> {
        let (store, host) = (self.store.clone(), HostName::from(host.to_string()));
        let runs = tokio::task::spawn_blocking(move || store.host_runs(&host, HOST_RUNS)).await;
        let Ok(Ok(runs)) = runs else {
            return Vec::new();
        };
        let facts: Vec<IndexMap<String, String>> = runs
            .iter()
            .map(|r| crate::report::provenance::facts(&r.facts))
            .collect();
        runs.into_iter()
            .enumerate()
            .map(|(i, r)| {
                let changed = facts
                    .get(i + 1)
                    .map(|before| crate::report::provenance::changed(&facts[i], before))
                    .unwrap_or_default();
                RanOn {
                    campaign_id: r.campaign_id.into_string(),
                    name: r.name,
                    submitted_unix_ms: r.submitted_unix_ms,
                    facts: facts[i].clone(),
                    changed,
                }
            })
            .collect()
    }

    pub(super) async fn overview(&self) -> Result<Overview, Status> {
        let agents = self.agents().await?;
        let campaigns = self.campaigns().await?;
        let store_fault = campaigns
            .store_fault
            .clone()
            .or_else(|| agents.store_fault.clone());
        let names: HashMap<&str, &str> = campaigns
            .campaigns
            .iter()
            .map(|c| (c.campaign_id.as_str(), c.name.as_str()))
            .collect();
        let mut attention = Vec::new();
        // Counted by the Control service, as `platter agents` shows them.
        let mut counts: Vec<(String, usize)> = crate::views::state_counts(agents.infos())
            .into_iter()
            .map(|(s, n)| (s, n as usize))
            .collect();
        for a in agents.infos() {
            let campaign = || {
                let name = names.get(a.current_campaign.as_str()).unwrap_or(&"?");
                format!("{name} ({})", a.current_campaign)
            };
            let reason = match a.state.as_str() {
                "offline" if !a.current_campaign.is_empty() => Some(format!(
                    "offline since {} while holding a plan of campaign {}",
                    crate::views::clock(a.last_seen_unix_ms),
                    campaign()
                )),
                "lost" if !a.current_campaign.is_empty() => Some(format!(
                    "silent past the heartbeat timeout (last seen {}) while holding a plan of \
                     campaign {}: down, or a reboot that did not come back",
                    crate::views::clock(a.last_seen_unix_ms),
                    campaign()
                )),
                s if s.starts_with("journal fault") => Some(format!(
                    "its journal cannot be written, so it holds its steps: {}",
                    s.trim_start_matches("journal fault: ")
                )),
                _ => None,
            };
            if let Some(reason) = reason {
                attention.push(Attention {
                    host: a.host.clone(),
                    campaign: a.current_campaign.clone(),
                    reason,
                });
            }
        }
        counts.sort();
        let running: Vec<pb::CampaignStatus> = campaigns
            .campaigns
            .iter()
            .filter(|c| c.state == pb::CampaignState::Running as i32)
            .cloned()
            .collect();
        let ended = campaigns
            .campaigns
            .iter()
            .filter(|c| c.state != pb::CampaignState::Running as i32);
        for c in &running {
            for h in c.hosts.iter().filter(|h| !h.refused.is_empty()) {
                attention.push(Attention {
                    host: h.host.clone(),
                    campaign: c.campaign_id.clone(),
                    reason: format!(
                        "refused the plan of campaign {} ({}), nothing of it ran: {}",
                        c.name, c.campaign_id, h.refused
                    ),
                });
            }
            let (store, id) = (self.store.clone(), CampaignId::from(c.campaign_id.clone()));
            let changed = tokio::task::spawn_blocking(move || {
                crate::report::provenance::changes_so_far(&store, &id)
            })
            .await;
            for change in changed.ok().and_then(Result::ok).unwrap_or_default() {
                attention.push(Attention {
                    host: String::new(),
                    campaign: c.campaign_id.clone(),
                    reason: format!(
                        "campaign {} ({}): what it runs on changed mid-run: {change}",
                        c.name, c.campaign_id
                    ),
                });
            }
            if c.steps_failed > 0 {
                attention.push(Attention {
                    host: String::new(),
                    campaign: c.campaign_id.clone(),
                    reason: format!(
                        "campaign {} ({}): {} step(s) failed so far",
                        c.name, c.campaign_id, c.steps_failed
                    ),
                });
            }
        }
        let mut recent = Vec::new();
        let ended: Vec<&pb::CampaignStatus> = ended.collect();
        // Series with an earlier run that ended too; each lately ended run's flags.
        let mut flagged = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        for c in ended.iter().take(RECENT) {
            let earlier = ended
                .iter()
                .filter(|e| e.series == c.series && e.state == pb::CampaignState::Done as i32)
                .count()
                >= 2;
            if c.state != pb::CampaignState::Done as i32
                || !earlier
                || seen.contains(&c.series.as_str())
            {
                continue;
            }
            seen.push(&c.series);
            flagged.extend(self.series_flags(&c.series, &c.campaign_id).await);
        }
        for c in ended.iter().take(RECENT) {
            let v = self.verdict(c).await;
            if v.as_ref().is_some_and(|v| v.qualification_failed) {
                attention.push(Attention {
                    host: String::new(),
                    campaign: c.campaign_id.clone(),
                    reason: format!(
                        "campaign {} ({}): qualification FAIL",
                        c.name, c.campaign_id
                    ),
                });
            }
            recent.push(((*c).clone(), v));
        }
        Ok(Overview {
            store_fault,
            flagged,
            attention,
            running,
            recent,
            hosts_total: agents.infos().len(),
            hosts: counts,
        })
    }
}

/// Open flags the overview shows, the most severe first.
const OVERVIEW_FLAGS: usize = 5;

/// The overview's open flags: how many, and the most severe few.
#[derive(Debug, Serialize)]
pub(super) struct OpenFlags {
    pub count: usize,
    pub acknowledged: usize,
    /// At most `OVERVIEW_FLAGS`, the most severe first, then the newest.
    pub most_severe: Vec<crate::store::flags::Flag>,
}

impl Ctx {
    /// The store's open flags; `None` when it cannot be read now (the overview shows the
    /// store's fault).
    pub(super) async fn open_flags(&self) -> Option<OpenFlags> {
        use crate::store::flags::{FlagFilter, FlagState};
        let store = self.store.clone();
        let read = tokio::task::spawn_blocking(move || {
            let counts = store.flag_counts()?;
            let most_severe = store.flags(&FlagFilter {
                state: Some(FlagState::Open),
                limit: Some(OVERVIEW_FLAGS),
                ..FlagFilter::default()
            })?;
            let n = |state| counts.iter().find(|(s, _)| *s == state).map_or(0, |c| c.1);
            Ok::<_, crate::store::StoreError>(OpenFlags {
                count: n(FlagState::Open),
                acknowledged: n(FlagState::Acknowledged),
                most_severe,
            })
        })
        .await;
        read.ok()?.ok()
    }
}

/// The agent named `name` of `fleet`, whole (its drives read off the async workers).
pub(super) async fn agent_of(
    fleet: &Arc<Fleet>,
    name: &str,
) -> Result<Option<pb::AgentInfo>, Status> {
    let (fleet, name) = (fleet.clone(), name.to_string());
    blocking(move || Ok(fleet.agent(&name))).await
}

fn submit_request(file_name: &str, yaml: &str) -> pb::SubmitRequest {
    pb::SubmitRequest {
        file_name: file_name.into(),
        yaml: yaml.into(),
        ..Default::default()
    }
}

/// The ledger answered another question than it was asked (it never does).
pub(super) fn other_answer() -> Status {
    Status::internal("the drive ledger answered another question")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    /// Requests that came while a read ran share the next read, never the one that began
    /// before them; a request after all reads ended reads again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_shared_read_began_after_the_request() {
        let shared = Arc::new(Shared::<u32>::default());
        let reads = Arc::new(AtomicU32::new(0));
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let read = |shared: Arc<Shared<u32>>, reads: Arc<AtomicU32>, wait: Option<_>| async move {
            shared
                .get(|| async move {
                    let n = reads.fetch_add(1, Ordering::SeqCst) + 1;
                    if let Some(w) = wait {
                        let _: Result<(), _> = w.await;
                    }
                    Ok(n)
                })
                .await
        };
        let first = tokio::spawn(read(shared.clone(), reads.clone(), Some(released)));
        while reads.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        let later: Vec<_> = (0..5)
            .map(|_| tokio::spawn(read(shared.clone(), reads.clone(), None)))
            .collect();
        // The five are queued behind the first read before it ends.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        release.send(()).unwrap();
        assert_eq!(*first.await.unwrap().unwrap(), 1);
        for r in later {
            assert_eq!(*r.await.unwrap().unwrap(), 2);
        }
        assert_eq!(reads.load(Ordering::SeqCst), 2);
        let after = read(shared.clone(), reads.clone(), None).await.unwrap();
        assert_eq!(*after, 3);
    }
}
