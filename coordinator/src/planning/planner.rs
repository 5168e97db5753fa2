//! Turns a validated campaign into cells and per-host plans. Pure: no I/O. Ids are
//! content hashes, so the same campaign always plans to the same ids.

use indexmap::IndexMap;
use platter_proto::inventory::Device;
use platter_proto::model::{
    CampaignId, CellId, HostName, OnFailure, Plan, Precondition, Purge, RunAs, Step, StepKind,
    StorageConfig, Tool, Workload as Measure,
};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

use crate::spec::{self, Campaign, Order, Phase, Workload};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlanError {
    #[error(
        "hosts: `local` only works with `platter run`; name the hosts this campaign should run on"
    )]
    LocalWithoutRun,
    #[error("{line}:{column}: devices: no device of host {host} matches {selector}{hint}")]
    NoDevice {
        host: String,
        selector: String,
        line: usize,
        column: usize,
        hint: String,
    },
    #[error("host {host} would get {steps} steps ({cells} cells on its devices); the limit is {max} steps per plan (--max-steps-per-plan): select fewer devices, repetitions or matrix values, or raise the limit")]
    TooLarge {
        host: String,
        cells: usize,
        steps: u64,
        max: u64,
    },
    #[error("the plans of this campaign's hosts would hold more than {max} steps together (already {steps} with the first {hosts} host(s), up to {host}); the limit is {max} steps per campaign (--max-total-steps; a coordinator's is set on `platter serve`): select fewer hosts, devices, repetitions or matrix values, or raise the limit")]
    TooManySteps {
        host: String,
        hosts: usize,
        steps: u64,
        max: u64,
    },
    #[error(
        "{line}:{column}: devices: host {host} has never connected, so its devices are unknown"
    )]
    NoInventory {
        host: String,
        line: usize,
        column: usize,
    },
}

/// Every host's devices, as their agents last reported them.
pub type Inventories = std::collections::HashMap<String, Vec<Device>>;

fn glob_match(pattern: &str, value: &str) -> bool {
    glob::Pattern::new(pattern)
        .map(|p| p.matches(value))
        .unwrap_or(false)
        || pattern == value
}

/// Whether `d` is selected by `sel`: every given field must match.
pub fn selects(sel: &spec::DeviceSelector, d: &Device) -> bool {
    let eq =
        |want: &Option<String>, have: &str| want.as_ref().is_none_or(|w| w.trim() == have.trim());
    sel.path.as_ref().is_none_or(|p| glob_match(p, &d.path))
        && sel
            .by_id
            .as_ref()
            .is_none_or(|p| d.by_id.iter().any(|id| glob_match(p, id)))
        && eq(&sel.model, &d.model)
        && eq(&sel.serial, &d.serial)
        && eq(&sel.transport, d.transport.as_str())
        && sel
            .controller
            .as_ref()
            .is_none_or(|c| d.controller.iter().any(|x| x == c))
}

fn describe_selector(sel: &spec::DeviceSelector) -> String {
    let fields = [
        ("path", &sel.path),
        ("by_id", &sel.by_id),
        ("model", &sel.model),
        ("serial", &sel.serial),
        ("transport", &sel.transport),
        ("controller", &sel.controller),
    ];
    let parts: Vec<String> = fields
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}: {v}")))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// The devices of `host` a campaign runs on: `[None]` without `devices:`.
fn targets(
    campaign: &Campaign,
    host: &str,
    inventories: &Inventories,
) -> Result<Vec<Option<Device>>, PlanError> {
    let Some(sel) = &campaign.devices else {
        return Ok(vec![None]);
    };
    let Some(devices) = inventories.get(host) else {
        return Err(PlanError::NoInventory {
            host: host.into(),
            line: sel.line,
            column: sel.column,
        });
    };
    let found: Vec<Option<Device>> = devices
        .iter()
        .filter(|d| selects(sel, d))
        .cloned()
        .map(Some)
        .collect();
    if found.is_empty() {
        let known: Vec<&str> = devices.iter().map(|d| d.path.as_str()).collect();
        return Err(PlanError::NoDevice {
            host: host.into(),
            selector: describe_selector(sel),
            line: sel.line,
            column: sel.column,
            hint: if known.is_empty() {
                String::new()
            } else {
                format!(" (it has {})", known.join(", "))
            },
        });
    }
    Ok(found)
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedCell {
    pub id: CellId,
    pub host: HostName,
    /// Position among the host's cells.
    pub index: usize,
    /// With `devices:`, the first parameter is [`spec::DEVICE`] (its name, e.g. `loop3`):
    /// the store's `cells.params` and the reports read it there.
    pub params: IndexMap<String, String>,
    /// The matrix point (index into `Campaign::cells`).
    #[serde(skip)]
    pub point: usize,
    /// The target device's path.
    #[serde(skip)]
    pub device: Option<String>,
}

impl AsRef<PlannedCell> for PlannedCell {
    fn as_ref(&self) -> &PlannedCell {
        self
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCampaign {
    pub id: CampaignId,
    pub name: String,
    /// The series it is a run of (`Campaign::series`).
    pub series: String,
    pub content_hash: String,
    pub generation: u32,
    pub params: Vec<String>,
    pub repeat: u32,
    pub cells: Vec<PlannedCell>,
    pub plans: Vec<Plan>,
}

fn short_hash(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    hex::encode(&h.finalize()[..8])
}

/// Resolves `local` to the host `platter run` runs on.
pub fn hosts(campaign: &Campaign, local_host: &str) -> Result<Vec<String>, PlanError> {
    let mut out: Vec<String> = Vec::new();
    // A campaign for every server names 100,000 hosts: a search of `out` for each was
    // quadratic (tens of seconds of a submit), a set is not.
    let mut seen: std::collections::HashSet<String> = Default::default();
    for h in &campaign.hosts {
        let h = if h == "local" {
            if local_host.is_empty() {
                return Err(PlanError::LocalWithoutRun);
            }
            local_host.to_string()
        } else {
            h.clone()
        };
        if seen.insert(h.clone()) {
            out.push(h);
        }
    }
    Ok(out)
}

/// A hash of everything that determines what runs (not of the YAML's formatting).
pub fn content_hash(campaign: &Campaign, local_host: &str) -> Result<String, PlanError> {
    let hosts = hosts(campaign, local_host)?;
    let canonical = format!("{:?}|{:?}", hosts, campaign);
    Ok(short_hash(&[canonical.as_bytes()]))
}

/// A campaign's id: what it runs, which run of that it is, and the store that planned it.
/// Plan and cell ids hash the campaign id, so a new store (whose generations start at 1
/// again) never plans an id that an agent's journal already holds as finished.
pub fn campaign_id(content_hash: &str, generation: u32, store_id: &str) -> String {
    format!("{}-{}-{store_id}", &content_hash[..10], generation)
}

/// Plans `campaign` as its `generation`-th run in the store `store_id`.
pub fn plan(
    campaign: &Campaign,
    local_host: &str,
    store_id: &str,
    generation: u32,
    inventories: &Inventories,
) -> Result<PlannedCampaign, PlanError> {
    let hosts = hosts(campaign, local_host)?;
    let content_hash = content_hash(campaign, local_host)?;
    let id = campaign_id(&content_hash, generation, store_id);
    let mut cells = Vec::new();
    let mut plans = Vec::new();
    let mut total_steps = 0u64;
    for host in &hosts {
        let mut host_cells: Vec<PlannedCell> = Vec::new();
        for device in targets(campaign, host, inventories)? {
            for (point, c) in campaign.cells.iter().enumerate() {
                let mut params = IndexMap::new();
                if let Some(d) = &device {
                    params.insert(spec::DEVICE.to_string(), d.name.clone());
                }
                params.extend(c.params.iter().map(|(k, v)| (k.clone(), v.clone())));
                let path = device.as_ref().map(|d| d.path.clone());
                host_cells.push(PlannedCell {
                    id: short_hash(&[
                        id.as_bytes(),
                        host.as_bytes(),
                        path.as_deref().unwrap_or("").as_bytes(),
                        &point.to_le_bytes(),
                        format!("{:?}", c.params).as_bytes(),
                    ])
                    .into(),
                    host: host.as_str().into(),
                    index: host_cells.len(),
                    params,
                    point,
                    device: path,
                });
            }
        }
        // Adaptive repetition is held to its worst case: every cell runs `max` times.
        let runs = u64::from(campaign.repeat.max) + u64::from(campaign.warmup);
        let estimate: u64 = host_cells
            .iter()
            .map(|c| {
                let phases = campaign.cells[c.point].before_each.len() as u64;
                runs.saturating_mul(1 + phases)
            })
            .sum();
        if estimate > campaign.max_steps_per_plan {
            return Err(PlanError::TooLarge {
                host: host.clone(),
                cells: host_cells.len(),
                steps: estimate,
                max: campaign.max_steps_per_plan,
            });
        }
        // Checked before this host's steps are made: memory stays within the limit.
        total_steps = total_steps.saturating_add(estimate);
        if total_steps > campaign.max_total_steps {
            return Err(PlanError::TooManySteps {
                host: host.clone(),
                hosts: plans.len() + 1,
                steps: total_steps,
                max: campaign.max_total_steps,
            });
        }
        let visits = match campaign.steady_state() {
            Some(_) => {
                let all: Vec<usize> = (0..drives(&host_cells).len()).collect();
                steady_round(campaign, &host_cells, &all, 1)
            }
            None => first_round(campaign, host_cells.len()),
        };
        let steps = with_prologue(
            campaign,
            &host_cells,
            steps(campaign, &host_cells, &visits, true),
        );
        plans.push(make_plan(campaign, &id, host, &host_cells, steps));
        cells.extend(host_cells);
    }
    let mut params = campaign.params.clone();
    if campaign.devices.is_some() {
        params.insert(0, spec::DEVICE.into());
    }
    Ok(PlannedCampaign {
        id: id.into(),
        name: campaign.name.clone(),
        series: campaign.series.clone(),
        content_hash,
        generation,
        params,
        repeat: campaign.repeat.max,
        cells,
        plans,
    })
}

fn make_plan(
    campaign: &Campaign,
    campaign_id: &str,
    host: &str,
    cells: &[PlannedCell],
    steps: Vec<Step>,
) -> Plan {
    let body = serde_json::to_vec(&steps).expect("steps serialize");
    Plan {
        id: (short_hash(&[campaign_id.as_bytes(), host.as_bytes(), &body])).into(),
        campaign_id: campaign_id.into(),
        campaign_name: campaign.name.clone(),
        host: host.into(),
        steps,
        on_failure: match campaign.on_failure {
            spec::OnFailure::Continue => OnFailure::Continue,
            spec::OnFailure::Abort => OnFailure::Abort,
        },
        run_as: run_as(campaign, cells),
    }
}

/// One visit of a cell: its index among the host's cells, the repetition, and whether
/// it is a warm-up (numbered apart from the counted repetitions).
type Visit = (usize, u32, bool);

/// The first plan's visits: the warm-ups, then `repeat.min` counted repetitions (all of
/// them when the repetition is not adaptive). Sequential order runs a cell's warm-ups
/// right before its counted repetitions; the others run warm-up rounds across all cells
/// first, so every cell's counted runs start from the same state of the machine.
fn first_round(campaign: &Campaign, n: usize) -> Vec<Visit> {
    let (warmup, counted) = (campaign.warmup, campaign.repeat.min);
    match campaign.order {
        Order::Sequential => (0..n)
            .flat_map(|c| {
                (1..=warmup)
                    .map(move |r| (c, r, true))
                    .chain((1..=counted).map(move |r| (c, r, false)))
            })
            .collect(),
        order => {
            let rounds = |count: u32, warm: bool| {
                (1..=count).flat_map(move |r| {
                    round_order(order, n, r - 1)
                        .into_iter()
                        .map(move |c| (c, r, warm))
                })
            };
            rounds(warmup, true).chain(rounds(counted, false)).collect()
        }
    }
}

/// The plan of a later round of adaptive repetition on `host`: one more repetition,
/// `repetition`, of each cell still running (`active`, indexes into `cells`, the host's
/// cells in planning order). The plan makes the storage anew, like every plan; setup
/// runs again only where storage was made anew.
pub fn next_round(
    campaign: &Campaign,
    campaign_id: &str,
    host: &str,
    cells: &[PlannedCell],
    active: &[usize],
    repetition: u32,
) -> Plan {
    let visits: Vec<Visit> = round_order(campaign.order, active.len(), repetition - 1)
        .into_iter()
        .map(|i| (active[i], repetition, false))
        .collect();
    make_plan(
        campaign,
        campaign_id,
        host,
        cells,
        steps(campaign, cells, &visits, false),
    )
}

/// A host's drives, each with its cells (indexes into `cells`) in planning order (the
/// matrix's): one entry with no device when the campaign names no drives. `cells` are the
/// planner's, or the store's rows of them.
pub fn drives<C: AsRef<PlannedCell>>(cells: &[C]) -> Vec<(Option<&str>, Vec<usize>)> {
    let mut out: Vec<(Option<&str>, Vec<usize>)> = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        let d = c.as_ref().device.as_deref();
        match out.iter_mut().find(|(x, _)| *x == d) {
            Some((_, v)) => v.push(i),
            None => out.push((d, vec![i])),
        }
    }
    out
}

/// One round towards steady state (`prepare.steady_state`): every cell of each drive in
/// `active` (indexes into [`drives`]) once, a drive's cells in the matrix's order (PTS
/// runs a round's stimuli in a fixed order), the drives in the campaign's order.
fn steady_round(
    campaign: &Campaign,
    cells: &[PlannedCell],
    active: &[usize],
    round: u32,
) -> Vec<Visit> {
    let drives = drives(cells);
    round_order(campaign.order, active.len(), round - 1)
        .into_iter()
        .flat_map(|i| drives[active[i]].1.iter().map(move |&c| (c, round, false)))
        .collect()
}

/// The plan of round `round` towards steady state on `host`, for the drives still short
/// of it (`active`, indexes into [`drives`] of the host's `cells`).
pub fn next_steady_round(
    campaign: &Campaign,
    campaign_id: &str,
    host: &str,
    cells: &[PlannedCell],
    active: &[usize],
    round: u32,
) -> Plan {
    let visits = steady_round(campaign, cells, active, round);
    make_plan(
        campaign,
        campaign_id,
        host,
        cells,
        steps(campaign, cells, &visits, false),
    )
}

/// The first plan's steps with each drive's preparation before them: its purge, then its
/// fill (`prepare:`), once per drive, on the drive's first cell, before any storage is
/// made on it.
fn with_prologue(campaign: &Campaign, cells: &[PlannedCell], steps: Vec<Step>) -> Vec<Step> {
    let Some(prepare) = &campaign.prepare else {
        return steps;
    };
    let mut out = Vec::with_capacity(steps.len() + 2 * cells.len());
    for (device, of_drive) in drives(cells) {
        let (Some(device), Some(&first)) = (device, of_drive.first()) else {
            continue;
        };
        let mut push = |kind| {
            out.push(Step {
                index: 0,
                cell_id: cells[first].id.clone(),
                repetition: 0,
                warmup: false,
                kind,
            })
        };
        if let Some(method) = prepare.purge {
            push(StepKind::Purge(Purge {
                device: device.to_string(),
                method,
            }));
        }
        if let Some(p) = prepare.precondition {
            push(StepKind::Precondition(Precondition {
                device: device.to_string(),
                passes: p.passes,
                block_size: p.block_size,
            }));
        }
    }
    out.extend(steps);
    for (i, s) in out.iter_mut().enumerate() {
        s.index = i as u32;
    }
    out
}

/// The storage a cell's measurements run on, as the agent takes it.
fn storage_of(cell: &PlannedCell, storage: Option<&spec::Storage>) -> Option<StorageConfig> {
    let s = storage?;
    Some(StorageConfig {
        device: if s.fs.needs_device() {
            cell.device.clone()
        } else {
            None
        },
        fs: s.fs,
        mkfs_options: s.mkfs_options.clone(),
        mount_options: s.mount_options.clone(),
        write_cache: s.write_cache,
        ramdisk_size: s.ramdisk_size,
        encryption: s.encryption,
    })
}

/// The order in which cells are visited in each repetition round. Interleaved rotates by
/// one per round (ABC, BCA, CAB) so slow drift of the machine spreads over all cells.
pub fn round_order(order: Order, n: usize, round: u32) -> Vec<usize> {
    match order {
        Order::Interleaved => (0..n).map(|k| (k + round as usize) % n.max(1)).collect(),
        Order::Sequential => (0..n).collect(),
        Order::Shuffled { seed } => {
            // A fixed, documented generator (splitmix64 + Fisher–Yates) rather than `rand`'s
            // StdRng, whose algorithm may change between versions: a seed must give the
            // same order forever.
            let mut state = seed ^ (u64::from(round).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut next = || {
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^ (z >> 31)
            };
            let mut v: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                let j = (next() % (i as u64 + 1)) as usize;
                v.swap(i, j);
            }
            v
        }
    }
}

/// The steps of `visits`. `first`: the campaign's first plan on the host; a later
/// round's skips the setup of cells whose storage is not made anew (it ran before).
fn steps(campaign: &Campaign, cells: &[PlannedCell], visits: &[Visit], first: bool) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut push = |cell: &PlannedCell, repetition: u32, warmup: bool, kind: StepKind| {
        steps.push(Step {
            index: steps.len() as u32,
            cell_id: cell.id.clone(),
            repetition,
            warmup,
            kind,
        });
    };
    // A cell's setup runs before its first visit, and again after its storage was made
    // anew (mkfs or a fresh RAM disk wipes what setup prepared).
    let mut prepared: std::collections::HashSet<&str> = std::collections::HashSet::new();
    if !first {
        prepared.extend(
            cells
                .iter()
                .filter(|c| campaign.cells[c.point].storage.is_none())
                .map(|c| c.id.as_str()),
        );
    }
    // Storage is set up when a visit needs another configuration than the one in place,
    // and torn down before the next one and at the end.
    let mut current: Option<StorageConfig> = None;
    for &(c, repetition, warmup) in visits {
        let cell = &cells[c];
        let spec_cell = &campaign.cells[cell.point];
        let wanted = storage_of(cell, spec_cell.storage.as_ref());
        if wanted != current {
            if let Some(old) = current.take() {
                push(cell, repetition, warmup, StepKind::StorageTeardown(old));
            }
            if let Some(new) = &wanted {
                push(
                    cell,
                    repetition,
                    warmup,
                    StepKind::StorageSetup(new.clone()),
                );
                prepared.clear();
            }
            current = wanted;
        }
        if let Workload::Command(spec::CommandWorkload {
            setup: Some(setup), ..
        }) = &spec_cell.workload
        {
            if prepared.insert(cell.id.as_str()) {
                push(cell, 0, false, StepKind::Setup(setup.clone()));
            }
        }
        for phase in &spec_cell.before_each {
            let kind = match phase {
                Phase::Sync => StepKind::Sync,
                Phase::DropCaches => StepKind::DropCaches,
                Phase::Fstrim(p) => StepKind::Fstrim(p.clone()),
                Phase::Reboot => StepKind::Reboot,
                Phase::Command(s) => StepKind::Command(s.clone()),
                // The spec allows the phase only with a command workload that has `clean`.
                Phase::Clean => match &spec_cell.workload {
                    Workload::Command(w) => StepKind::Clean(w.clean.clone().unwrap_or_default()),
                    _ => continue,
                },
            };
            let rebooted = kind == StepKind::Reboot;
            push(cell, repetition, warmup, kind);
            // A reboot unmounts everything (and empties a RAM disk): make the storage
            // again, and the cell's setup with it, so the measurement never runs on
            // whatever filesystem happens to be under the mount point.
            if let (true, Some(storage)) = (rebooted, &current) {
                push(
                    cell,
                    repetition,
                    warmup,
                    StepKind::StorageSetup(storage.clone()),
                );
                prepared.clear();
                if let Workload::Command(spec::CommandWorkload {
                    setup: Some(setup), ..
                }) = &spec_cell.workload
                {
                    prepared.insert(cell.id.as_str());
                    push(cell, 0, false, StepKind::Setup(setup.clone()));
                }
            }
        }
        push(
            cell,
            repetition,
            warmup,
            StepKind::Measure(measure(&spec_cell.workload)),
        );
    }
    if let (Some(old), Some(last)) = (current, cells.last()) {
        push(last, 0, false, StepKind::StorageTeardown(old));
    }
    steps
}

/// The user each cell's workload commands run as, for cells whose command names one.
fn run_as(campaign: &Campaign, cells: &[PlannedCell]) -> BTreeMap<CellId, RunAs> {
    cells
        .iter()
        .filter_map(|cell| match &campaign.cells[cell.point].workload {
            Workload::Command(spec::CommandWorkload {
                user: Some(user),
                home,
                ..
            }) => Some((
                cell.id.clone(),
                RunAs {
                    user: user.clone(),
                    home: home.clone().unwrap_or_default(),
                },
            )),
            _ => None,
        })
        .collect()
}

/// What the agent runs for a workload; tools get their full command line here.
fn measure(w: &Workload) -> Measure {
    let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match w {
        Workload::Command(c) => Measure::Command(c.run.clone()),
        Workload::Fsync(f) => Measure::Fsync(f.clone()),
        Workload::Fio(f) => {
            let mut argv = owned(&["fio", "--output-format=json+"]);
            if let Some(dir) = &f.directory {
                argv.push(format!("--directory={dir}"));
            }
            match &f.job_file {
                Some(job) => argv.push(job.clone()),
                None => {
                    argv.push("--name=platter".into());
                    argv.extend(f.options.iter().map(|(k, v)| format!("--{k}={v}")));
                }
            }
            Measure::Tool {
                tool: Tool::Fio,
                argv,
            }
        }
        Workload::Bonnie(b) => {
            let mut argv = owned(&["bonnie++", "-q", "-d"]);
            argv.push(b.directory.clone());
            if let Some(bytes) = b.memory {
                // The agent holds bonnie++ to the memory `-r` gives (memlimit.rs).
                let mib = bytes >> 20;
                argv.extend([
                    "-r".into(),
                    mib.to_string(),
                    "-s".into(),
                    (2 * mib).to_string(),
                ]);
            }
            argv.extend(b.args.iter().cloned());
            Measure::Tool {
                tool: Tool::Bonnie,
                argv,
            }
        }
        Workload::Compilebench(c) => {
            let mut argv = vec![c.command.clone(), "-D".into(), c.directory.clone()];
            argv.extend(c.args.iter().cloned());
            Measure::Tool {
                tool: Tool::Compilebench,
                argv,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_rotates_sequential_does_not() {
        assert_eq!(round_order(Order::Interleaved, 3, 0), vec![0, 1, 2]);
        assert_eq!(round_order(Order::Interleaved, 3, 1), vec![1, 2, 0]);
        assert_eq!(round_order(Order::Interleaved, 3, 2), vec![2, 0, 1]);
        assert_eq!(round_order(Order::Sequential, 3, 2), vec![0, 1, 2]);
    }

    #[test]
    fn shuffled_is_a_permutation_and_depends_only_on_seed_and_round() {
        let a = round_order(Order::Shuffled { seed: 7 }, 10, 3);
        assert_eq!(a, round_order(Order::Shuffled { seed: 7 }, 10, 3));
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
        assert_ne!(a, round_order(Order::Shuffled { seed: 8 }, 10, 3));
        assert_ne!(a, round_order(Order::Shuffled { seed: 7 }, 10, 4));
    }

    const YAML: &str = "
name: t
hosts: { names: [local, b] }
matrix: { x: [1, 2] }
workload: { command: { setup: 'mk ${x}', clean: 'rm ${x}', run: 'go ${x}' } }
phases: { before_each: [clean, sync] }
repeat: 2
";

    #[test]
    fn plan_layout_ids_and_local() {
        let c = spec::parse("t.yaml", YAML).unwrap();
        assert_eq!(
            plan(&c, "", "s1", 1, &Inventories::new()),
            Err(PlanError::LocalWithoutRun)
        );
        let p = plan(&c, "here", "s1", 1, &Inventories::new()).unwrap();
        assert_eq!(p.plans.len(), 2);
        assert_eq!(p.plans[0].host, "here");
        assert_eq!(p.cells.len(), 4);
        let kinds: Vec<String> = p.plans[0]
            .steps
            .iter()
            .map(|s| format!("{}@{}", s.kind, s.repetition))
            .collect();
        assert_eq!(
            kinds,
            [
                "setup: mk 1@0",
                "clean: rm 1@1",
                "sync@1",
                "measure: go 1@1",
                "setup: mk 2@0",
                "clean: rm 2@1",
                "sync@1",
                "measure: go 2@1",
                "clean: rm 2@2",
                "sync@2",
                "measure: go 2@2",
                "clean: rm 1@2",
                "sync@2",
                "measure: go 1@2",
            ]
        );
        assert!(p.plans[0]
            .steps
            .iter()
            .enumerate()
            .all(|(i, s)| s.index as usize == i));
        // Stable ids: same content, same ids; another generation, other ids.
        assert_eq!(p, plan(&c, "here", "s1", 1, &Inventories::new()).unwrap());
        let p2 = plan(&c, "here", "s1", 2, &Inventories::new()).unwrap();
        assert_eq!(p.content_hash, p2.content_hash);
        assert_ne!(p.id, p2.id);
        assert_ne!(p.plans[0].id, p2.plans[0].id);
        // Another store: the same content and generation, yet no id in common, so an
        // agent's journal of the old store's plans never answers for the new store's.
        let other = plan(&c, "here", "s2", 1, &Inventories::new()).unwrap();
        assert_eq!(p.content_hash, other.content_hash);
        assert_ne!(p.id, other.id);
        for (a, b) in p.plans.iter().zip(&other.plans) {
            assert_ne!(a.id, b.id);
        }
        for (a, b) in p.cells.iter().zip(&other.cells) {
            assert_ne!(a.id, b.id);
        }
        let ids: std::collections::HashSet<_> = p.cells.iter().map(|c| &c.id).collect();
        assert_eq!(ids.len(), 4);
    }

    /// Two drives, a fill and rounds: the first plan purges and fills each drive, then
    /// runs every cell of each once; a drive's cells keep the matrix's order in every
    /// round, and the drives take turns going first (interleaved); a later round holds
    /// only the drives still short of steady state, and no preparation.
    #[test]
    fn steady_rounds_keep_a_drive_s_order_and_interleave_the_drives() {
        let disk = |name: &str| {
            let mut d = crate::store::testing::drive("m");
            d.name = name.into();
            d.path = format!("/dev/{name}");
            d
        };
        let inventories: Inventories = [("h".to_string(), vec![disk("sdb"), disk("sdc")])].into();
        let c = spec::parse(
            "t.yaml",
            "name: t\nhosts: { names: [h] }\ndevices: { path: '/dev/sd[bc]' }\nstorage: { fs: none }\n\
             matrix: { bs: [4k, 1m] }\nworkload: { command: { run: 'go ${bs} ${device}' } }\n\
             prepare: { purge: discard, precondition: { fill: 2x }, steady_state: { metric: wall } }\n",
        )
        .unwrap();
        let p = plan(&c, "", "s1", 1, &inventories).unwrap();
        let kinds = |steps: &[Step]| -> Vec<String> {
            steps
                .iter()
                .filter(|s| s.kind.name() != "storage_setup" && s.kind.name() != "storage_teardown")
                .map(|s| match &s.kind {
                    StepKind::Measure(w) => format!("{w}@{}", s.repetition),
                    k => k.to_string(),
                })
                .collect()
        };
        assert_eq!(
            kinds(&p.plans[0].steps),
            [
                "purge /dev/sdb (discard)",
                "precondition /dev/sdb: write it 2× in 128 KiB blocks",
                "purge /dev/sdc (discard)",
                "precondition /dev/sdc: write it 2× in 128 KiB blocks",
                "go 4k ${device}@1",
                "go 1m ${device}@1",
                "go 4k ${device}@1",
                "go 1m ${device}@1",
            ]
        );
        let drive_of = |plan: &Plan| -> Vec<String> {
            plan.steps
                .iter()
                .filter(|s| s.kind.name() == "measure")
                .map(|s| {
                    let cell = p.cells.iter().find(|c| c.id == s.cell_id).unwrap();
                    format!("{} {}", cell.params["device"], cell.params["bs"])
                })
                .collect()
        };
        assert_eq!(
            drive_of(&p.plans[0]),
            ["sdb 4k", "sdb 1m", "sdc 4k", "sdc 1m"]
        );
        let round2 = next_steady_round(&c, &p.id, "h", &p.cells, &[0, 1], 2);
        assert_eq!(drive_of(&round2), ["sdc 4k", "sdc 1m", "sdb 4k", "sdb 1m"]);
        let only_sdb = next_steady_round(&c, &p.id, "h", &p.cells, &[0], 3);
        assert_eq!(drive_of(&only_sdb), ["sdb 4k", "sdb 1m"]);
        assert!(only_sdb
            .steps
            .iter()
            .all(|s| !matches!(s.kind, StepKind::Purge(_) | StepKind::Precondition(_))));
    }

    fn layout(steps: &[Step]) -> Vec<String> {
        steps
            .iter()
            .map(|s| {
                let w = if s.warmup { "w" } else { "" };
                format!("{}@{w}{}", s.kind, s.repetition)
            })
            .collect()
    }

    #[test]
    fn warmups_run_first_marked_and_numbered_apart() {
        let c = spec::parse(
            "t.yaml",
            "name: t\nhosts: { names: [h] }\nmatrix: { x: [1, 2] }\n\
             workload: { command: { setup: mk, run: 'go ${x}' } }\nwarmup: 1\nrepeat: 2\n",
        )
        .unwrap();
        let p = plan(&c, "", "s1", 1, &Inventories::new()).unwrap();
        assert_eq!(
            layout(&p.plans[0].steps),
            [
                "setup: mk@0",
                "measure: go 1@w1",
                "setup: mk@0",
                "measure: go 2@w1",
                "measure: go 1@1",
                "measure: go 2@1",
                "measure: go 2@2",
                "measure: go 1@2",
            ]
        );
        // Sequential: each cell's warm-up right before its counted runs.
        let c = spec::parse(
            "t.yaml",
            "name: t\nhosts: { names: [h] }\nmatrix: { x: [1, 2] }\n\
             workload: { command: { run: 'go ${x}' } }\nwarmup: 1\nrepeat: 1\norder: sequential\n",
        )
        .unwrap();
        let p = plan(&c, "", "s1", 1, &Inventories::new()).unwrap();
        assert_eq!(
            layout(&p.plans[0].steps),
            [
                "measure: go 1@w1",
                "measure: go 1@1",
                "measure: go 2@w1",
                "measure: go 2@1"
            ]
        );
    }

    #[test]
    fn adaptive_rounds_plan_min_first_then_one_repetition_of_the_cells_still_running() {
        let yaml = |storage: &str| {
            format!(
                "name: t\nhosts: {{ names: [h] }}\nmatrix: {{ x: [1, 2, 3] }}\n{storage}\
                 workload: {{ command: {{ setup: mk, run: 'go ${{x}}' }} }}\n\
                 repeat: {{ min: 2, max: 9, until: {{ metric: wall, ci: 5% }} }}\n"
            )
        };
        let c = spec::parse("t.yaml", &yaml("")).unwrap();
        let p = plan(&c, "", "s1", 1, &Inventories::new()).unwrap();
        assert_eq!(p.repeat, 9);
        let measures = |steps: &[Step]| steps.iter().filter(|s| s.kind.name() == "measure").count();
        assert_eq!(measures(&p.plans[0].steps), 6, "min × cells");
        // Cells 0 and 2 go on to repetition 3; setup ran in the first round already.
        let next = next_round(&c, &p.id, "h", &p.cells, &[0, 2], 3);
        assert_eq!(layout(&next.steps), ["measure: go 1@3", "measure: go 3@3"]);
        assert_eq!(next.campaign_id, p.plans[0].campaign_id);
        assert_ne!(next.id, p.plans[0].id);
        assert_eq!(
            next,
            next_round(&c, &p.id, "h", &p.cells, &[0, 2], 3),
            "same content, same id"
        );
        assert_ne!(next.id, next_round(&c, &p.id, "h", &p.cells, &[0, 2], 4).id);
        // With storage, every round makes it anew, and the setup with it.
        let c = spec::parse("t.yaml", &yaml("storage: { ramdisk: { size: 1M } }\n")).unwrap();
        let p = plan(&c, "", "s1", 1, &Inventories::new()).unwrap();
        let next = next_round(&c, &p.id, "h", &p.cells, &[1], 3);
        let kinds: Vec<&str> = next.steps.iter().map(|s| s.kind.name()).collect();
        assert_eq!(
            kinds,
            ["storage_setup", "setup", "measure", "storage_teardown"]
        );
    }

    #[test]
    fn storage_is_made_again_after_a_reboot() {
        let c = spec::parse(
            "t.yaml",
            "name: t\nhosts: { names: [h] }\nstorage: { ramdisk: { size: 1M } }\n\
             workload: { command: { setup: prep, run: go } }\nphases: { before_each: [sync, reboot] }\nrepeat: 2\n",
        )
        .unwrap();
        let p = plan(&c, "", "s1", 1, &Inventories::new()).unwrap();
        let kinds: Vec<&str> = p.plans[0].steps.iter().map(|s| s.kind.name()).collect();
        assert_eq!(
            kinds,
            [
                "storage_setup",
                "setup",
                "sync",
                "reboot",
                "storage_setup",
                "setup",
                "measure",
                "sync",
                "reboot",
                "storage_setup",
                "setup",
                "measure",
                "storage_teardown",
            ]
        );
    }
}
