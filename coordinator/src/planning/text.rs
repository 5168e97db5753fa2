//! The text `platter validate` prints: cells, destructive actions, each host's plan.
//! The Control service's Plan call returns the same text for a campaign expanded
//! against the live fleet.

use crate::planning::planner::PlannedCampaign;
use crate::spec;

pub fn render(campaign: &spec::Campaign, planned: &PlannedCampaign) -> String {
    let mut out = String::new();
    let hosts: Vec<&str> = planned.plans.iter().map(|p| p.host.as_str()).collect();
    out.push_str(&format!(
        "campaign {}: valid\n  {} cell(s) × {} on {} host(s): {}\n  order {:?}, on_failure {:?}\n\ncells:\n",
        campaign.name,
        campaign.cells.len(),
        campaign.repetitions_text(),
        hosts.len(),
        hosts.join(", "),
        campaign.order,
        campaign.on_failure
    ));
    for (i, c) in campaign.cells.iter().enumerate() {
        let params: Vec<String> = c.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push_str(&format!(
            "  cell {i}: {}\n",
            if params.is_empty() {
                "(no parameters)".into()
            } else {
                params.join(" ")
            }
        ));
    }
    let mut destructive: Vec<String> = Vec::new();
    for plan in &planned.plans {
        for s in &plan.steps {
            use platter_proto::model::StepKind;
            let c = match &s.kind {
                StepKind::StorageSetup(c) => c,
                StepKind::Purge(p) => {
                    let pts = if p.method.is_pts_purge() {
                        ""
                    } else {
                        "; not a PTS purge"
                    };
                    destructive.push(format!(
                        "host {}: purge {} with {} (erases it; the agent must also be started with --allow-purge{pts})",
                        plan.host,
                        p.device,
                        p.method.name()
                    ));
                    continue;
                }
                StepKind::Precondition(p) => {
                    destructive.push(format!(
                        "host {}: write all of {} {}× in {} KiB blocks (precondition; erases it)",
                        plan.host,
                        p.device,
                        p.passes,
                        p.block_size >> 10
                    ));
                    continue;
                }
                _ => continue,
            };
            let Some(device) = &c.device else { continue };
            let mut actions = Vec::new();
            if c.write_cache != platter_proto::model::WriteCacheSetting::Keep {
                actions.push(format!(
                    "host {}: set the write cache of {device} {}",
                    plan.host, c.write_cache
                ));
            }
            if c.fs.is_mounted() {
                let opts = if c.mkfs_options.is_empty() {
                    String::new()
                } else {
                    format!(" {}", c.mkfs_options.join(" "))
                };
                actions.push(format!(
                    "host {}: mkfs.{}{opts} {device} (erases it)",
                    plan.host, c.fs
                ));
            } else {
                actions.push(format!(
                    "host {}: the workload writes to {device} directly",
                    plan.host
                ));
            }
            for a in actions {
                if !destructive.contains(&a) {
                    destructive.push(a);
                }
            }
        }
    }
    let mut users: Vec<String> = Vec::new();
    for plan in &planned.plans {
        for r in plan.run_as.values() {
            let home = if r.home.is_empty() {
                "its own HOME".to_string()
            } else {
                format!("HOME {}, made for it", r.home)
            };
            let line = format!("host {}: as user {} ({home})", plan.host, r.user);
            if !users.contains(&line) {
                users.push(line);
            }
        }
    }
    if !users.is_empty() {
        out.push_str(
            "\nthe workload's setup, clean and run run as (the agent must be root, the host have the user):\n",
        );
        for u in &users {
            out.push_str(&format!("  {u}\n"));
        }
    }
    if !destructive.is_empty() {
        out.push_str(
            "\ndestructive actions (each agent refuses them unless started with --allow-device):\n",
        );
        for a in &destructive {
            out.push_str(&format!("  {a}\n"));
        }
    }
    for plan in &planned.plans {
        out.push_str(&format!(
            "\nplan for host {} ({} steps{}):\n",
            plan.host,
            plan.steps.len(),
            later_rounds(campaign, planned, &plan.host)
        ));
        let cell_index = |id: &str| {
            planned
                .cells
                .iter()
                .find(|c| c.id == id)
                .map(|c| c.index)
                .unwrap_or(0)
        };
        for s in &plan.steps {
            let rep = if s.warmup {
                format!("warm {}", s.repetition)
            } else if s.repetition > 0 {
                format!("rep {}", s.repetition)
            } else {
                "once".into()
            };
            let user = match plan.run_as(s) {
                Some(r) => format!("  (as {})", r.user),
                None => String::new(),
            };
            out.push_str(&format!(
                "  {:>4}  cell {:<3} {:<7} {}{user}\n",
                s.index,
                cell_index(&s.cell_id),
                rep,
                s.kind
            ));
        }
    }
    out
}

/// With `prepare.steady_state`: the rounds after the first, up to `max_rounds`.
fn steady_rounds(
    s: &spec::SteadyState,
    planned: &PlannedCampaign,
    campaign: &spec::Campaign,
    host: &str,
) -> String {
    let cells: Vec<_> = planned
        .cells
        .iter()
        .filter(|c| c.host == host)
        .cloned()
        .collect();
    let all: Vec<usize> = (0..crate::planning::planner::drives(&cells).len()).collect();
    let round =
        crate::planning::planner::next_steady_round(campaign, &planned.id, host, &cells, &all, 2);
    let first = planned
        .plans
        .iter()
        .find(|p| p.host == host)
        .map_or(0, |p| p.steps.len() as u64);
    let later = (s.rule.max_rounds as u64).saturating_sub(1);
    format!(
        "; the first round: each drive's preparation, then every cell once. Then up to {later} more \
         round(s), each a plan of its own run before any other plan on the host, for each \
         drive whose {} is not yet steady over the last {} rounds: at most {} steps per \
         round, {} steps in all at worst",
        s.metric,
        s.rule.window,
        round.steps.len(),
        first + later * round.steps.len() as u64
    )
}

/// With adaptive repetition: what may follow the first plan, up to the worst case in which
/// no cell's interval ever gets narrow enough.
fn later_rounds(campaign: &spec::Campaign, planned: &PlannedCampaign, host: &str) -> String {
    if let Some(s) = campaign.steady_state() {
        return steady_rounds(s, planned, campaign, host);
    }
    let r = &campaign.repeat;
    if !r.is_adaptive() {
        return String::new();
    }
    let cells: Vec<_> = planned
        .cells
        .iter()
        .filter(|c| c.host == host)
        .cloned()
        .collect();
    let all: Vec<usize> = (0..cells.len()).collect();
    let round =
        crate::planning::planner::next_round(campaign, &planned.id, host, &cells, &all, r.min + 1);
    let later = u64::from(r.max - r.min);
    let anew = if campaign.cells.iter().any(|c| c.storage.is_some()) {
        ", which makes the storage anew"
    } else {
        ""
    };
    format!(
        "; the first round: repetitions 1–{} of every cell. Then up to {later} more round(s), \
         one repetition each of every cell whose interval is still wider than ±{}%, \
         each a plan of its own{anew}: at most {} steps per round, \
         {} steps in all at worst",
        r.min,
        r.until.as_ref().map_or(0.0, |u| u.ci_pct),
        round.steps.len(),
        planned
            .plans
            .iter()
            .find(|p| p.host == host)
            .map_or(0, |p| p.steps.len() as u64)
            + later * round.steps.len() as u64
    )
}
