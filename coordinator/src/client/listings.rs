//! What operator commands print of the fleet: `status`, `agents` (with its tools table)
//! and `watch`, as a table for people or JSON for scripts, each from the coordinator's
//! answer on the wire.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use platter_proto::v1 as pb;

use super::call_error;
use super::session::{passes, Session};
use crate::views::{campaign_json, eta, fault_line, hms, state_name};

use crate::report::{table, Format};

/// `platter status [CAMPAIGN]`.
pub fn render_status(campaigns: &[pb::CampaignStatus], one: bool, output: Format) -> String {
    if output == Format::Json {
        let v: Vec<_> = campaigns.iter().map(campaign_json).collect();
        let v = if one {
            v.into_iter().next().unwrap_or_default()
        } else {
            v.into()
        };
        return serde_json::to_string_pretty(&v).expect("json") + "\n";
    }
    if one {
        let Some(c) = campaigns.first() else {
            return String::new();
        };
        let mut out = c.store_fault.as_ref().map(fault_line).unwrap_or_default();
        out += &format!(
            "campaign {} ({}): {}, {}/{} cells, {}/{} steps, {} failed\n",
            c.campaign_id,
            c.name,
            state_name(c.state),
            c.cells_done,
            c.cells_total,
            c.steps_done,
            c.steps_total,
            c.steps_failed
        );
        out.push_str(&host_table(c));
        return out;
    }
    // Every campaign carries the store's fault: say it once.
    let fault = campaigns.iter().find_map(|c| c.store_fault.as_ref());
    let rows: Vec<Vec<String>> = campaigns
        .iter()
        .map(|c| {
            vec![
                c.campaign_id.clone(),
                c.name.clone(),
                state_name(c.state).into(),
                format!("{}/{}", c.cells_done, c.cells_total),
                format!("{}/{}", c.steps_done, c.steps_total),
                c.steps_failed.to_string(),
                hosts_cell(c),
            ]
        })
        .collect();
    fault.map(fault_line).unwrap_or_default()
        + &table(
            &[
                "campaign", "name", "state", "cells", "steps", "failed", "hosts",
            ],
            &rows,
        )
}

/// A campaign's hosts in the list of campaigns: all of them, or for a fleet-wide campaign
/// the first few and how many.
fn hosts_cell(c: &pb::CampaignStatus) -> String {
    const NAMED: usize = 3;
    let names = c.hosts.iter().take(NAMED).map(|h| h.host.as_str());
    let mut cell = names.collect::<Vec<_>>().join(",");
    if c.hosts.len() > NAMED + 2 {
        cell += &format!(",… ({} hosts)", grouped(c.hosts.len()));
    } else {
        for h in c.hosts.iter().skip(NAMED) {
            cell += ",";
            cell += &h.host;
        }
    }
    cell
}

/// `n` with its thousands grouped: 99,812.
fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// Hosts a campaign's status lists one by one; beyond, a fleet-wide campaign's status
/// counts its hosts and lists only those that need attention or run a step.
const HOSTS_LISTED: usize = 50;

/// Why `h` needs someone's attention, if it does: its plan refused, its journal in fault,
/// or its agent away with steps still to run.
fn attention(h: &pb::HostProgress) -> Option<&'static str> {
    if !h.refused.is_empty() {
        Some("refused the plan")
    } else if !h.journal_fault.is_empty() {
        Some("journal fault")
    } else if !h.connected && h.steps_done < h.steps_total {
        Some("not connected")
    } else {
        None
    }
}

fn done(h: &pb::HostProgress) -> bool {
    h.steps_done >= h.steps_total
}

fn running(h: &pb::HostProgress) -> bool {
    !done(h) && !h.current_step.is_empty()
}

/// "hosts: 99,812 done, 150 running, 0 waiting, 38 need attention (30 not connected, 8
/// refused the plan)".
fn host_summary(c: &pb::CampaignStatus) -> String {
    let mut why: Vec<(&str, usize)> = Vec::new();
    let (mut done_n, mut running_n, mut waiting, mut attention_n) = (0, 0, 0, 0);
    for h in &c.hosts {
        match attention(h) {
            Some(w) => {
                attention_n += 1;
                match why.iter_mut().find(|(x, _)| *x == w) {
                    Some((_, n)) => *n += 1,
                    None => why.push((w, 1)),
                }
            }
            None if done(h) => done_n += 1,
            None if running(h) => running_n += 1,
            None => waiting += 1,
        }
    }
    let mut out = format!(
        "hosts: {} done, {} running, {} waiting, {} need attention",
        grouped(done_n),
        grouped(running_n),
        grouped(waiting),
        grouped(attention_n)
    );
    if !why.is_empty() {
        let parts: Vec<String> = why
            .iter()
            .map(|(w, n)| format!("{} {w}", grouped(*n)))
            .collect();
        out += &format!(" ({})", parts.join(", "));
    }
    out + "\n"
}

fn host_table(c: &pb::CampaignStatus) -> String {
    // A fleet-wide campaign: counted, then the hosts that need attention, then those
    // running a step, up to HOSTS_LISTED.
    let (mut out, listed): (String, Vec<&pb::HostProgress>) = if c.hosts.len() > HOSTS_LISTED {
        let first = c.hosts.iter().filter(|h| attention(h).is_some());
        let then = c
            .hosts
            .iter()
            .filter(|h| attention(h).is_none() && running(h));
        (
            host_summary(c),
            first.chain(then).take(HOSTS_LISTED).collect(),
        )
    } else {
        (String::new(), c.hosts.iter().collect())
    };
    let rows: Vec<Vec<String>> = listed
        .iter()
        .map(|h| {
            vec![
                h.host.clone(),
                match (h.connected, h.coordinator.as_str()) {
                    _ if !h.journal_fault.is_empty() => {
                        format!("JOURNAL FAULT: {}", h.journal_fault)
                    }
                    (true, "") => "connected".into(),
                    // Several coordinators share the store: which one holds it.
                    (true, by) => format!("connected to {by}"),
                    (false, _) => "not connected".into(),
                },
                format!("{}/{}", h.steps_done, h.steps_total),
                eta(h).map(hms).unwrap_or("?".into()),
                if !h.refused.is_empty() {
                    "refused the plan, nothing ran (below)".into()
                } else if h.current_step.is_empty() {
                    "-".into()
                } else {
                    h.current_step.clone()
                },
            ]
        })
        .collect();
    if !rows.is_empty() {
        out += &table(&["host", "link", "steps", "ETA", "current step"], &rows);
    }
    if listed.len() < c.hosts.len() {
        out += &format!(
            "… {} more host(s) not listed (done, waiting, or past the first {HOSTS_LISTED}); `--output json` lists every host\n",
            grouped(c.hosts.len() - listed.len())
        );
    }
    for h in listed.iter().filter(|h| !h.refused.is_empty()) {
        out += &format!(
            "host {} refused the plan, nothing ran: {}\n",
            h.host, h.refused
        );
    }
    out
}

/// Agents `platter agents` lists in its table unless told `--all`; past them it counts.
pub const AGENTS_LISTED: usize = HOSTS_LISTED;

/// "100,000 agents: 99,812 idle, 150 busy, 38 lost", or with a selection "2,000 of
/// 100,000 agents match: …".
fn agent_counts(response: &pb::ListAgentsResponse) -> String {
    let parts: Vec<String> = crate::views::AGENT_STATES
        .iter()
        .filter_map(|s| {
            let n = *response.counts.get(*s)?;
            (n > 0).then(|| format!("{} {s}", grouped(n as usize)))
        })
        .collect();
    let head = if response.matched == response.total {
        format!("{} agents", grouped(response.total as usize))
    } else {
        format!(
            "{} of {} agents match",
            grouped(response.matched as usize),
            grouped(response.total as usize)
        )
    };
    format!("{head}: {}\n", parts.join(", "))
}

/// What a coordinator older than agent selection answered (every agent, no counts): the
/// selection, counts and limit `request` asked for, made here. A coordinator that selects
/// counts the store's agents in `total`, so it is never taken for an older one unless the
/// fleet is empty (and then there is nothing to select).
pub fn select_here(response: &mut pb::ListAgentsResponse, request: &pb::ListAgentsRequest) {
    if response.total > 0 || response.agents.is_empty() {
        return;
    }
    response.total = response.agents.len() as u64;
    let every = std::mem::take(&mut response.agents);
    response.agents = crate::views::select_agents(response, every.into_iter(), request);
}

/// `platter agents`: every agent in the answer, or, when the coordinator listed fewer
/// than matched (`limit`), their counts by state first and how many more there are.
pub fn render_agents(response: &pb::ListAgentsResponse, output: Format) -> String {
    let (agents, fault) = (&response.agents, response.store_fault.as_ref());
    let now = crate::store::now_ms();
    if output == Format::Json {
        let v: Vec<_> = agents
            .iter()
            .map(|a| crate::views::agent_json(a, fault))
            .collect();
        return serde_json::to_string_pretty(&v).expect("json") + "\n";
    }
    let cut = (response.matched as usize).saturating_sub(agents.len());
    let mut agents: Vec<&pb::AgentInfo> = agents.iter().collect();
    if cut == 0 {
        // All of them: by name, as ever (a limited answer puts attention first).
        agents.sort_by(|a, b| a.host.cmp(&b.host));
    }
    let rows: Vec<Vec<String>> = agents
        .iter()
        .map(|a| {
            let mut labels: Vec<String> =
                a.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            labels.sort();
            let drives: Vec<String> = a
                .devices
                .iter()
                .map(|d| {
                    format!(
                        "{} {}",
                        d.path,
                        crate::report::human(d.size_bytes as f64, "B").replace(' ', "")
                    )
                })
                .collect();
            let ago = Duration::from_millis((now - a.last_seen_unix_ms).max(0) as u64);
            vec![
                a.host.clone(),
                {
                    // Where several coordinators share a store: which one holds it.
                    let state = if a.coordinator.is_empty() {
                        a.state.clone()
                    } else {
                        format!("{} via {}", a.state, a.coordinator)
                    };
                    if a.connected && fault.is_some() {
                        format!("{state} (waiting for the store)")
                    } else {
                        state
                    }
                },
                if labels.is_empty() {
                    "-".into()
                } else {
                    labels.join(",")
                },
                if drives.is_empty() {
                    "-".into()
                } else {
                    drives.join(", ")
                },
                if a.connected {
                    "now".into()
                } else {
                    format!("{} ago", hms(ago))
                },
                if a.current_campaign.is_empty() {
                    "-".into()
                } else {
                    a.current_campaign.clone()
                },
            ]
        })
        .collect();
    let tools: Vec<(&str, &[pb::ToolVersion])> = agents
        .iter()
        .map(|a| (a.host.as_str(), a.tools.as_slice()))
        .collect();
    let mut out = fault.map(fault_line).unwrap_or_default();
    if cut > 0 {
        out += &agent_counts(response);
    }
    if !rows.is_empty() {
        out += &table(
            &["host", "state", "labels", "drives", "last seen", "campaign"],
            &rows,
        );
    } else if response.total > 0 {
        out += &format!(
            "none of the {} agents match\n",
            grouped(response.total as usize)
        );
    } else {
        out += "no agent has connected yet\n";
    }
    if cut > 0 {
        out += &format!(
            "… {} more agent(s) not listed (those needing attention come first); `--state` or `--match` narrow the list, `--all` lists every one, `--output json` too\n",
            grouped(cut)
        );
    }
    if cut > 0 && !response.tools.is_empty() {
        // Not the listed hosts' tools alone: every matching agent's, counted.
        let which = if response.matched < response.total {
            " that match"
        } else {
            ""
        };
        out += &format!(
            "\ntools of the {} agents{which} (as each reported them when it connected):\n",
            grouped(response.matched as usize)
        );
        out += &tool_counts_table(&response.tools);
    } else if tools.iter().any(|(_, t)| !t.is_empty()) {
        out += "\ntools (as each agent reported them when it connected):\n";
        out += &tool_table(&tools);
    }
    out
}

/// Each version of each tool with how many hosts reported it and the first of them:
/// "fio  3.33  9,950  rc01, rc02, rc03, …".
fn tool_counts_table(counts: &[pb::ToolCount]) -> String {
    let rows: Vec<Vec<String>> = counts
        .iter()
        .map(|c| {
            let version = if c.version.is_empty() {
                "not found".to_string()
            } else {
                c.version.clone()
            };
            let mut hosts = c.examples.join(", ");
            if c.hosts as usize > c.examples.len() {
                hosts += ", …";
            }
            vec![c.name.clone(), version, grouped(c.hosts as usize), hosts]
        })
        .collect();
    table(&["tool", "version", "hosts", "e.g."], &rows)
}

/// Each host's tools: one row per program, its version and where it is, or "not found".
pub fn tool_table(hosts: &[(&str, &[pb::ToolVersion])]) -> String {
    let rows: Vec<Vec<String>> = hosts
        .iter()
        .flat_map(|(host, tools)| {
            tools.iter().map(move |t| {
                let (version, path) = if t.path.is_empty() {
                    ("not found".to_string(), "-".to_string())
                } else {
                    (t.version.clone(), t.path.clone())
                };
                vec![host.to_string(), t.name.clone(), version, path]
            })
        })
        .collect();
    table(&["host", "tool", "version", "path"], &rows)
}

/// Follows a campaign until it ends: on a terminal one live line per host (current step,
/// done/total, ETA); otherwise a plain line whenever a host makes progress, for logs.
///
/// It rides through what passes: a coordinator gone (the next one named is asked), a
/// broken connection, a store that does not answer (the coordinator says so with each
/// status: the STORE FAULT line, said when it starts and when it ends). Each failure is
/// said once, and the watch goes on where it was; only what the user must act on (an
/// unknown campaign, a refused certificate) or failures past `--retry-for` end it.
pub async fn watch(session: &mut Session, campaign: &str) -> anyhow::Result<pb::CampaignStatus> {
    let mut shown = Shown::new();
    loop {
        let request = pb::GetCampaignRequest {
            campaign_id: campaign.into(),
        };
        let mut stream = match session
            .call("watch", |mut c| {
                let r = request.clone();
                async move { c.watch(r).await }
            })
            .await?
        {
            Ok(s) => s.into_inner(),
            Err(s) => return Err(call_error("watch", s)),
        };
        loop {
            match stream.message().await {
                Ok(Some(s)) => {
                    session.answered();
                    shown.show(s);
                }
                Ok(None) => return shown.finish(),
                Err(s) if passes(&s) && !session.given_up() => {
                    session.failed(call_error("watch", s).to_string()).await;
                    break;
                }
                Err(s) => {
                    shown.clear();
                    return Err(call_error("watch", s));
                }
            }
        }
    }
}

/// What `watch` has shown: the bars (or the lines printed) and the last status.
struct Shown {
    live: bool,
    multi: MultiProgress,
    style: ProgressStyle,
    bars: HashMap<String, ProgressBar>,
    printed: HashMap<String, u32>,
    last: Option<pb::CampaignStatus>,
}

impl Shown {
    fn new() -> Shown {
        Shown {
            live: std::io::stderr().is_terminal(),
            multi: MultiProgress::new(),
            // `wide_msg`: the message takes the room the terminal has left and is cut to
            // it, so a long step never wraps (a wrapped line is drawn again on every tick,
            // one row lower).
            style: ProgressStyle::with_template(
                "{prefix:<12} [{bar:24}] {pos:>4}/{len:<4} {wide_msg}",
            )
            .expect("static template")
            .progress_chars("=> "),
            bars: HashMap::new(),
            printed: HashMap::new(),
            last: None,
        }
    }

    fn say(&self, line: &str) {
        if self.live {
            let _ = self.multi.println(line);
        } else {
            eprintln!("{line}");
        }
    }

    fn clear(&self) {
        for b in self.bars.values() {
            b.finish_and_clear();
        }
    }

    fn finish(self) -> anyhow::Result<pb::CampaignStatus> {
        self.clear();
        let last = self
            .last
            .ok_or_else(|| anyhow::anyhow!("the coordinator sent no status"))?;
        eprintln!(
            "campaign {}: {}, {}/{} steps, {} failed",
            last.campaign_id,
            state_name(last.state),
            last.steps_done,
            last.steps_total,
            last.steps_failed
        );
        Ok(last)
    }

    fn show(&mut self, s: pb::CampaignStatus) {
        // A store fault is said when it starts and when it ends, not on every update.
        let had = self.last.as_ref().and_then(|l| l.store_fault.as_ref());
        let said = match (had, &s.store_fault) {
            (None, Some(f)) => Some(fault_line(f)),
            (Some(_), None) => Some("the coordinator's store commits again.\n".to_string()),
            _ => None,
        };
        if let Some(line) = said {
            self.say(line.trim_end());
        }
        for h in &s.hosts {
            // An agent's journal fault, like the store's, is said when it starts and
            // when it ends; the host's line shows it meanwhile.
            let had = self
                .last
                .as_ref()
                .and_then(|l| l.hosts.iter().find(|o| o.host == h.host))
                .map_or("", |o| o.journal_fault.as_str());
            let said = match (had, h.journal_fault.as_str()) {
                ("", "") => None,
                ("", now) => Some(format!("{}: JOURNAL FAULT: the agent holds its steps: {now}; make room in or fix its state directory (--state-dir) and they go on, nothing lost", h.host)),
                (_, "") => Some(format!("{}: the agent's journal can be written again; its steps go on", h.host)),
                _ => None,
            };
            if let Some(line) = said {
                self.say(&line);
            }
            let eta = eta(h).map(hms).unwrap_or("?".into());
            let link = match (h.connected, h.journal_fault.is_empty()) {
                (_, false) => " (JOURNAL FAULT: holding)",
                (true, true) => "",
                (false, true) => " (not connected)",
            };
            let msg = format!("ETA {eta}{link}  {}", h.current_step);
            if self.live {
                let (multi, style) = (&self.multi, &self.style);
                let bar = self.bars.entry(h.host.clone()).or_insert_with(|| {
                    let b = multi.add(ProgressBar::new(h.steps_total.into()));
                    b.set_style(style.clone());
                    b.set_prefix(h.host.clone());
                    b.enable_steady_tick(Duration::from_millis(250));
                    b
                });
                bar.set_length(h.steps_total.into());
                bar.set_position(h.steps_done.into());
                bar.set_message(msg);
            } else if self.printed.get(&h.host) != Some(&h.steps_done) {
                self.printed.insert(h.host.clone(), h.steps_done);
                eprintln!(
                    "{:<12} {:>4}/{:<4} steps  {msg}",
                    h.host, h.steps_done, h.steps_total
                );
            }
        }
        self.last = Some(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eta_is_the_pace_of_ended_steps() {
        let h = pb::HostProgress {
            steps_total: 10,
            steps_done: 4,
            elapsed_ms: 8000,
            ..Default::default()
        };
        assert_eq!(eta(&h), Some(Duration::from_secs(12)));
        let fresh = pb::HostProgress {
            steps_total: 10,
            ..Default::default()
        };
        assert_eq!(eta(&fresh), None);
    }

    /// An older coordinator sends every agent and no counts: the selection is made here,
    /// and the table counts and cuts as with a coordinator that selects.
    #[test]
    fn an_older_coordinators_every_agent_is_selected_and_counted_here() {
        let agent = |i: usize, state: &str| pb::AgentInfo {
            host: format!("h{i:03}"),
            state: state.into(),
            labels: [(
                "rack".to_string(),
                if i < 60 { "a" } else { "b" }.to_string(),
            )]
            .into_iter()
            .collect(),
            ..Default::default()
        };
        let every = pb::ListAgentsResponse {
            agents: (0..80)
                .map(|i| agent(i, if i == 70 { "lost" } else { "idle" }))
                .collect(),
            ..Default::default()
        };
        let request = pb::ListAgentsRequest {
            limit: AGENTS_LISTED as u32,
            ..Default::default()
        };
        let mut all = every.clone();
        select_here(&mut all, &request);
        assert_eq!((all.total, all.matched, all.agents.len()), (80, 80, 50));
        assert_eq!(all.agents[0].host, "h070", "the lost one first");
        let table = render_agents(&all, Format::Table);
        assert!(table.starts_with("80 agents: 79 idle, 1 lost\n"), "{table}");
        assert!(table.contains("… 30 more agent(s) not listed"), "{table}");

        let mut rack_b = every.clone();
        select_here(
            &mut rack_b,
            &pb::ListAgentsRequest {
                r#match: "rack=b".into(),
                ..request.clone()
            },
        );
        assert_eq!(
            (rack_b.total, rack_b.matched, rack_b.agents.len()),
            (80, 20, 20)
        );
        let table = render_agents(&rack_b, Format::Table);
        assert!(!table.contains("more agent(s)"), "{table}");
        assert_eq!(
            table.lines().nth(1).unwrap().split_whitespace().next(),
            Some("h060"),
            "by name: {table}"
        );

        let mut none = every.clone();
        select_here(
            &mut none,
            &pb::ListAgentsRequest {
                state: "offline".into(),
                ..request.clone()
            },
        );
        assert_eq!(
            render_agents(&none, Format::Table),
            "none of the 80 agents match\n"
        );
        assert_eq!(
            render_agents(&Default::default(), Format::Table),
            "no agent has connected yet\n"
        );

        // A coordinator that selected is left alone.
        let mut selected = pb::ListAgentsResponse {
            total: 80,
            matched: 1,
            ..every.clone()
        };
        selected.agents.truncate(1);
        let before = selected.clone();
        select_here(&mut selected, &request);
        assert_eq!(selected, before);
    }

    /// A fleet-wide campaign's status counts its hosts and lists those that need
    /// attention first, then those running; a small one lists every host as before.
    #[test]
    fn a_fleet_wide_campaigns_status_counts_hosts_and_lists_those_that_need_attention() {
        let host =
            |i: usize, done: u32, step: &str, connected: bool, refused: &str| pb::HostProgress {
                host: format!("h{i:03}"),
                connected,
                steps_total: 4,
                steps_done: done,
                current_step: step.into(),
                refused: refused.into(),
                ..Default::default()
            };
        let mut hosts = Vec::new();
        for i in 0..1000 {
            hosts.push(match i {
                0..=969 => host(i, 4, "", true, ""),
                970..=989 => host(i, 2, "measure rep 2", true, ""),
                990..=994 => host(i, 0, "", true, ""),
                995..=997 => host(i, 1, "", false, ""),
                _ => host(i, 0, "", true, "no such user: bench"),
            });
        }
        let c = pb::CampaignStatus {
            campaign_id: "c1".into(),
            name: "every-server".into(),
            hosts,
            ..Default::default()
        };
        let text = host_table(&c);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "hosts: 970 done, 20 running, 5 waiting, 5 need attention (3 not connected, 2 refused the plan)"
        );
        // The header, the 5 that need attention, then the 20 running.
        assert!(lines[1].starts_with("host "), "{text}");
        assert!(
            lines[2].starts_with("h995") && lines[2].contains("not connected"),
            "{text}"
        );
        assert!(lines[5].starts_with("h998"), "{text}");
        assert!(
            lines[7].starts_with("h970") && lines[7].contains("measure rep 2"),
            "{text}"
        );
        assert_eq!(lines.len(), 1 + 1 + 25 + 1 + 2, "{text}");
        assert!(text.contains("… 975 more host(s) not listed"), "{text}");
        assert!(text.contains("host h999 refused the plan, nothing ran: no such user: bench"));
        assert_eq!(hosts_cell(&c), "h000,h001,h002,… (1,000 hosts)");
        assert_eq!(grouped(99_812), "99,812");
        assert_eq!(grouped(100), "100");

        let small = pb::CampaignStatus {
            hosts: c.hosts[..3].to_vec(),
            ..c.clone()
        };
        let text = host_table(&small);
        assert!(text.starts_with("host "), "{text}");
        assert_eq!(text.lines().count(), 4);
        assert_eq!(hosts_cell(&small), "h000,h001,h002");
    }
}
