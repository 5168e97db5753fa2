//! Progress of a campaign, from the store (and the hub for who is connected).

use platter_proto::model::{CampaignId, HostName, Plan};

use crate::service::hub::Hub;
use crate::store::progress::CampaignProgress;
use crate::store::{CampaignState, Result, Store, StoreFault};

#[derive(Debug, Clone, PartialEq)]
pub struct HostProgress {
    pub host: HostName,
    /// Connected to this coordinator or, on a shared store, another one.
    pub connected: bool,
    /// The coordinator holding the host's stream, on a shared store ("" otherwise).
    pub coordinator: String,
    pub steps_total: u32,
    pub steps_done: u32,
    pub current_step: String,
    /// Time the ended steps took, for an ETA.
    pub elapsed_ms: u64,
    /// Why the host's agent refused its plan; empty if it did not.
    pub refused: String,
    /// Why the host's agent, connected here, holds its steps (its journal cannot be
    /// written); empty if it does not.
    pub journal_fault: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CampaignStatus {
    pub campaign_id: CampaignId,
    pub name: String,
    /// The series it is a run of (`series:`, else its name).
    pub series: String,
    pub state: CampaignState,
    pub cells_total: u32,
    pub cells_done: u32,
    pub steps_total: u32,
    pub steps_done: u32,
    pub steps_failed: u32,
    pub hosts: Vec<HostProgress>,
    pub created_unix_ms: i64,
    /// Why the store cannot commit, while it cannot: the campaign's records wait.
    pub store_fault: Option<StoreFault>,
}

impl CampaignStatus {
    pub fn ended(&self) -> bool {
        self.state != CampaignState::Running
    }

    /// Every campaign's progress, newest first (`platter status`, `platter campaigns`).
    pub fn load_all(store: &Store, hub: &Hub) -> Result<Vec<CampaignStatus>> {
        CampaignStatus::load_all_known(store, hub, &Known::default())
    }

    /// `load_all`, reading again only the campaigns whose store fingerprint changed since
    /// `known` last saw them (a coordinator's listings: the console's pages ask on every
    /// change of the fleet, and ended campaigns of 10,000 steps each do not change). Hosts'
    /// presence and the store's fault are always as they are now.
    pub fn load_all_known(store: &Store, hub: &Hub, known: &Known) -> Result<Vec<CampaignStatus>> {
        let ids = store.campaign_ids()?;
        let fleet = crate::service::presence::fleet_of(hub)?;
        let mut before = std::mem::take(&mut *known.0.lock().expect("known campaigns"));
        let mut now = std::collections::HashMap::with_capacity(ids.len());
        let mut all = Vec::with_capacity(ids.len());
        for id in ids {
            // The fingerprint first: a change after it makes the next listing read again.
            let print = store.campaign_fingerprint(&id)?;
            let mut status = match before.remove(&id) {
                Some((p, s)) if p == print => s,
                _ => CampaignStatus::load_in(store, hub, fleet.as_ref(), id.as_str())?,
            };
            status.present(store, hub, fleet.as_ref());
            now.insert(id, (print, status.clone()));
            all.push(status);
        }
        *known.0.lock().expect("known campaigns") = now;
        Ok(all)
    }

    /// The progress of the campaign `campaign` names (its id, or the latest of that name).
    pub fn load(store: &Store, hub: &Hub, campaign: &str) -> Result<CampaignStatus> {
        let fleet = crate::service::presence::fleet_of(hub)?;
        CampaignStatus::load_in(store, hub, fleet.as_ref(), campaign)
    }

    /// `load`, with the other coordinators' agents (`Hub::fleet`) read once for many.
    fn load_in(
        store: &Store,
        hub: &Hub,
        fleet: Option<&crate::service::presence::Fleet>,
        campaign: &str,
    ) -> Result<CampaignStatus> {
        let CampaignProgress {
            campaign,
            cells_total,
            plans,
        } = store.campaign_progress(campaign)?;
        let cells_done = match in_rounds(&campaign.file_name, &campaign.yaml) {
            // A drive's rounds stop at steady state or `max_rounds` (`repeat` is the max):
            // its cells are done when the rule that plans the rounds says so, as the
            // report says.
            Some(Rounds::Steady(steady)) => {
                store.read(|c| crate::store::rounds::steady_cells_done(c, &campaign.id, &steady))?
            }
            // A cell stops between its `min` and `max` (`repeat` is the max): it is done
            // when the rule that plans the rounds says it stopped, as the report says.
            Some(Rounds::Adaptive(repeat)) => {
                let measured = match &repeat.until {
                    Some(until) => store.cells_measured(&campaign.id, &until.metric)?,
                    None => Vec::new(),
                };
                crate::planning::rounds::verdicts_of(&measured, &repeat)
                    .values()
                    .filter(|v| **v != crate::planning::rounds::Verdict::Continue)
                    .count() as u32
            }
            // A cell is done when every counted repetition's measure step has ended.
            None => store.cells_done(&campaign.id, campaign.repeat)?,
        };
        let mut hosts: Vec<HostProgress> = Vec::new();
        // Each host's place in `hosts`: a campaign on 100,000 hosts was a search of the list
        // per plan (quadratic: minutes), now a lookup.
        let mut at: std::collections::HashMap<HostName, usize> = Default::default();
        let (mut steps_total, mut steps_done, mut steps_failed) = (0, 0, 0);
        // Adaptive repetition gives a host a plan per round: the host is listed once,
        // with the steps of all its rounds.
        for p in plans {
            let current_step = match &p.running {
                Some(r) => r
                    .plan
                    .steps
                    .get(r.index as usize)
                    .map(|s| describe(&r.plan, s.index))
                    .unwrap_or_default(),
                None => String::new(),
            };
            steps_failed += p.steps_failed;
            steps_total += p.steps_total;
            steps_done += p.steps_done;
            let refused = p
                .refused
                .map(|r| {
                    if r.is_empty() {
                        "no reason given".into()
                    } else {
                        r
                    }
                })
                .unwrap_or_default();
            let k = *at.entry(p.host.clone()).or_insert(hosts.len());
            let h = match hosts.get_mut(k) {
                Some(h) => h,
                None => {
                    hosts.push(HostProgress {
                        host: p.host,
                        connected: false,
                        coordinator: String::new(),
                        steps_total: 0,
                        steps_done: 0,
                        current_step: String::new(),
                        elapsed_ms: 0,
                        refused: String::new(),
                        journal_fault: String::new(),
                    });
                    hosts.last_mut().expect("just pushed")
                }
            };
            h.steps_total += p.steps_total;
            h.steps_done += p.steps_done;
            h.elapsed_ms += p.elapsed_ms.max(0) as u64;
            if !current_step.is_empty() {
                h.current_step = current_step;
            }
            if !refused.is_empty() && !h.refused.contains(&refused) {
                if !h.refused.is_empty() {
                    h.refused.push_str("; ");
                }
                h.refused.push_str(&refused);
            }
        }
        let mut status = CampaignStatus {
            campaign_id: campaign.id,
            name: campaign.name,
            series: campaign.series,
            state: campaign.state,
            cells_total,
            cells_done,
            steps_total,
            steps_done,
            steps_failed,
            hosts,
            created_unix_ms: campaign.submitted_unix_ms,
            store_fault: None,
        };
        status.present(store, hub, fleet);
        Ok(status)
    }

    /// The store's fault and the hosts' presence as they are now.
    fn present(
        &mut self,
        store: &Store,
        hub: &Hub,
        fleet: Option<&crate::service::presence::Fleet>,
    ) {
        self.store_fault = store.fault();
        for h in &mut self.hosts {
            let w = crate::service::presence::whereabouts(hub, fleet, &h.host);
            h.connected = w.presence == crate::service::hub::Presence::Connected;
            h.coordinator = w.coordinator;
            h.journal_fault = hub.journal_fault(&h.host).unwrap_or_default();
        }
    }
}

/// Campaigns' progress as last listed, each with its store fingerprint
/// (`Store::campaign_fingerprint`).
#[derive(Default)]
pub struct Known(std::sync::Mutex<std::collections::HashMap<CampaignId, (u64, CampaignStatus)>>);

/// How a campaign that runs in rounds decides when a cell is done.
enum Rounds {
    /// `repeat: { min, max, until }`.
    Adaptive(crate::spec::Repeat),
    /// `prepare.steady_state`.
    Steady(crate::spec::SteadyState),
}

/// The campaign's rounds, if it runs in them (its stored text is parsed only if it may).
fn in_rounds(file: &str, yaml: &str) -> Option<Rounds> {
    if !(yaml.contains("until") || yaml.contains("steady_state")) {
        return None;
    }
    let c = crate::spec::parse_with(file, yaml, &crate::spec::Limits::NONE).ok()?;
    if let Some(s) = c.steady_state() {
        return Some(Rounds::Steady(s.clone()));
    }
    c.repeat.is_adaptive().then_some(Rounds::Adaptive(c.repeat))
}

/// "measure (rep 2/3): dd if=/dev/zero …" for progress lines, with what the agent fills in
/// as it would (`${host}`, `${cell}`, `${repetition}`, and `${device}` once a storage setup
/// chose one). `${mount}` stays: where the agent mounts is the agent's own setting.
pub fn describe(plan: &Plan, index: u32) -> String {
    let Some(step) = plan.steps.get(index as usize) else {
        return String::new();
    };
    let mut s = step
        .kind
        .to_string()
        .replace("${host}", &plan.host)
        .replace("${cell}", &step.cell_id)
        .replace("${repetition}", &step.repetition.to_string());
    // The device of the storage in effect, as the agent substitutes it.
    let storage = plan.storage_at(index);
    if let Some(d) = storage.and_then(|c| c.device) {
        s = s.replace("${device}", &d);
    }
    if s.len() > 60 {
        s.truncate(s.char_indices().nth(57).map(|(i, _)| i).unwrap_or(s.len()));
        s.push('…');
    }
    if step.repetition > 0 {
        format!("rep {}: {s}", step.repetition)
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use platter_proto::model::{
        OnFailure, Record, RecordKind, Step, StepEvent, StepKind, StepState, StorageConfig,
        Workload,
    };

    /// Steps skipped after an abort or a cancel are stored with start time 0: seven of
    /// them summed `finished - 0` (about 1.8e18 ns each) past i64 and every status of
    /// every campaign failed with "integer overflow". They took no time.
    #[tokio::test]
    async fn skipped_steps_take_no_time_and_many_of_them_overflow_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let c = crate::spec::parse(
            "t.yaml",
            "name: t\nhosts: { names: [h] }\nworkload: { command: { run: 'false' } }\nrepeat: 12\non_failure: abort\n",
        )
        .unwrap();
        let planned =
            crate::planning::planner::plan(&c, "", "test", 1, &Default::default()).unwrap();
        store.insert_campaign(&planned, "t.yaml", "").unwrap();
        let plan = &planned.plans[0];
        let now_ns = 1_760_000_000_000_000_000_i64;
        let records = plan
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                // The first step failed after 2 s; every later one was skipped.
                let (state, started) = if i == 0 {
                    (StepState::Failed, now_ns - 2_000_000_000)
                } else {
                    (StepState::Skipped, 0)
                };
                Record {
                    seq: i as u64 + 1,
                    kind: RecordKind::Step(StepEvent {
                        plan_id: plan.id.clone(),
                        kind: "measure".into(),
                        step_index: s.index,
                        cell_id: s.cell_id.clone(),
                        repetition: s.repetition,
                        attempt: 1,
                        state,
                        started_unix_ns: started,
                        finished_unix_ns: now_ns,
                        exit_status: 1,
                        stderr_tail: String::new(),
                        error: String::new(),
                        samples: Vec::new(),
                    }),
                }
            })
            .collect();
        store.write_records(&"h".into(), records).await.unwrap();
        let hub = Hub::new(store.clone());
        let status = CampaignStatus::load(&store, &hub, &planned.id).unwrap();
        assert_eq!(status.steps_done, plan.steps.len() as u32);
        assert_eq!(status.hosts[0].elapsed_ms, 2000);
    }

    /// A listing that knows the campaigns reads again those that changed, and only
    /// those: a step ending, a cancel; what it lists is what a fresh listing says.
    #[tokio::test]
    async fn a_known_listing_follows_every_change_and_only_changes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let yaml =
            "name: t\nhosts: { names: [h] }\nworkload: { command: { run: 'true' } }\nrepeat: 3\n";
        let c = crate::spec::parse("t.yaml", yaml).unwrap();
        let a = crate::planning::planner::plan(&c, "", "test", 1, &Default::default()).unwrap();
        store.insert_campaign(&a, "t.yaml", yaml).unwrap();
        let b = crate::planning::planner::plan(&c, "", "test", 2, &Default::default()).unwrap();
        store.insert_campaign(&b, "t.yaml", yaml).unwrap();
        let hub = Hub::new(store.clone());
        let known = Known::default();
        let listed = |known: &Known| {
            let mut l = CampaignStatus::load_all_known(&store, &hub, known).unwrap();
            l.sort_by(|x, y| x.campaign_id.cmp(&y.campaign_id));
            l
        };
        let fresh = || {
            let mut l = CampaignStatus::load_all(&store, &hub).unwrap();
            l.sort_by(|x, y| x.campaign_id.cmp(&y.campaign_id));
            l
        };
        assert_eq!(listed(&known), fresh());
        let print_b = store.campaign_fingerprint(&b.id).unwrap();

        // A step of campaign a ends: a's listing says so; b's fingerprint is unchanged.
        let plan = &a.plans[0];
        let s = &plan.steps[0];
        let record = Record {
            seq: 1,
            kind: RecordKind::Step(StepEvent {
                plan_id: plan.id.clone(),
                kind: "measure".into(),
                step_index: s.index,
                cell_id: s.cell_id.clone(),
                repetition: s.repetition,
                attempt: 1,
                state: StepState::Succeeded,
                started_unix_ns: 1_000_000_000,
                finished_unix_ns: 3_000_000_000,
                exit_status: 0,
                stderr_tail: String::new(),
                error: String::new(),
                samples: Vec::new(),
            }),
        };
        store
            .write_records(&"h".into(), vec![record])
            .await
            .unwrap();
        let after = listed(&known);
        assert_eq!(after, fresh());
        let a_now = after.iter().find(|s| s.campaign_id == a.id).unwrap();
        assert_eq!((a_now.steps_done, a_now.hosts[0].elapsed_ms), (1, 2000));
        assert_eq!(store.campaign_fingerprint(&b.id).unwrap(), print_b);

        // b is cancelled: its listing says so.
        store.cancel_campaign(&b.id).unwrap();
        let after = listed(&known);
        assert_eq!(after, fresh());
        let b_now = after.iter().find(|s| s.campaign_id == b.id).unwrap();
        assert_eq!(b_now.state, crate::store::CampaignState::Cancelled);
        assert_ne!(store.campaign_fingerprint(&b.id).unwrap(), print_b);
    }

    #[test]
    fn progress_lines_fill_in_the_host_cell_repetition_and_the_device_the_storage_setup_chose() {
        let storage = StorageConfig {
            device: Some("/dev/loop2".into()),
            fs: platter_proto::model::Filesystem::None,
            mkfs_options: vec![],
            mount_options: String::new(),
            write_cache: platter_proto::model::WriteCacheSetting::Keep,
            ramdisk_size: None,
            encryption: platter_proto::model::Encryption::None,
        };
        let step = |index, repetition, kind| Step {
            index,
            cell_id: "c".into(),
            repetition,
            warmup: false,
            kind,
        };
        let plan = Plan {
            id: "p".into(),
            campaign_id: "x".into(),
            campaign_name: "x".into(),
            host: "h".into(),
            steps: vec![
                step(
                    0,
                    0,
                    StepKind::Measure(Workload::Command("dd of=${device}".into())),
                ),
                step(1, 0, StepKind::StorageSetup(storage)),
                step(
                    2,
                    1,
                    StepKind::Measure(Workload::Command("dd of=${device}".into())),
                ),
                step(
                    3,
                    2,
                    StepKind::Command("echo ${host} ${cell} ${repetition} ${mount}".into()),
                ),
            ],
            on_failure: OnFailure::Continue,
            run_as: Default::default(),
        };
        assert_eq!(describe(&plan, 2), "rep 1: measure: dd of=/dev/loop2");
        // Before any storage setup there is no device to name.
        assert_eq!(describe(&plan, 0), "measure: dd of=${device}");
        // What the agent fills in from the plan, filled in as it would; the mount point is
        // the agent's own setting.
        assert_eq!(describe(&plan, 3), "rep 2: command: echo h c 2 ${mount}");
    }
}
