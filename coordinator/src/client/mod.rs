//! The operator's side: one client configuration shared by every command that talks to a
//! coordinator, and the listings (`status`, `agents`, `watch`) for people and scripts.
//!
//! Settings come from flags, then environment variables (PLATTER_COORDINATOR,
//! PLATTER_TLS_DIR), then the client file (`--config`, PLATTER_CONFIG, or
//! `~/.config/platter/client.toml`):
//!
//! ```toml
//! coordinator = "https://coordinator.lab:7461"
//! tls_dir = "/home/alice/.config/platter/operator-alice"
//! ```

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use platter_proto::tls::{Refusal, TlsDir, Transport};
use platter_proto::v1 as pb;
use platter_proto::v1::control_client::ControlClient;
use serde::Deserialize;
use tonic::transport::Channel;

/// How to reach the coordinator, shared by every operator command.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClientArgs {
    /// The coordinator, e.g. https://coordinator.lab:7461
    #[arg(long, env = "PLATTER_COORDINATOR")]
    pub coordinator: Option<String>,
    /// Mutual TLS: a directory with ca.pem, cert.pem and key.pem (an operator
    /// certificate from `platter certs issue operator NAME`)
    #[arg(long, env = "PLATTER_TLS_DIR")]
    pub tls_dir: Option<PathBuf>,
    /// Speak plaintext gRPC to a coordinator started with --dangerously-insecure
    #[arg(long)]
    pub dangerously_insecure: bool,
    /// Client file with `coordinator` and `tls_dir` [default: ~/.config/platter/client.toml]
    #[arg(long, env = "PLATTER_CONFIG")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientFile {
    coordinator: Option<String>,
    tls_dir: Option<PathBuf>,
    #[serde(default)]
    dangerously_insecure: bool,
}

fn default_config() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("platter/client.toml"))
}

impl ClientArgs {
    /// Whether a coordinator is named at all: by flag, environment or client file (an
    /// unreadable file names none here; `resolve` says what is wrong with it).
    pub fn names_a_coordinator(&self) -> bool {
        self.coordinator.is_some()
            || self
                .client_file()
                .is_ok_and(|(f, _)| f.coordinator.is_some())
    }

    /// The client file (`--config`, or the default one if it exists) and its path.
    fn client_file(&self) -> anyhow::Result<(ClientFile, Option<PathBuf>)> {
        Ok(match self.config.clone().or_else(default_config) {
            Some(p) if p.exists() || self.config.is_some() => {
                let text = std::fs::read_to_string(&p)
                    .with_context(|| format!("reading client file {}", p.display()))?;
                let mut f: ClientFile =
                    toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
                // A relative `tls_dir` in the file is relative to the file.
                if let (Some(dir), Some(base)) = (&f.tls_dir, p.parent()) {
                    f.tls_dir = Some(base.join(dir));
                }
                (f, Some(p))
            }
            _ => (ClientFile::default(), None),
        })
    }

    /// Flags and environment over the client file.
    pub fn resolve(&self) -> anyhow::Result<(String, Transport)> {
        let (file, file_path) = self.client_file()?;
        let Some(url) = self.coordinator.clone().or(file.coordinator) else {
            bail!(
                "which coordinator? pass --coordinator https://HOST:7461, set PLATTER_COORDINATOR, \
                 or put `coordinator = \"…\"` in {}",
                file_path.or_else(default_config).map(|p| p.display().to_string()).unwrap_or("a client file".into())
            );
        };
        match self.tls_dir.clone().or(file.tls_dir) {
            Some(dir) => Ok((url, Transport::Tls(TlsDir(dir)))),
            None if self.dangerously_insecure || file.dangerously_insecure => {
                Ok((url, Transport::Plaintext))
            }
            None => bail!(
                "no client certificate: pass --tls-dir DIR (from `platter certs issue operator NAME`), \
                 set PLATTER_TLS_DIR, or use --dangerously-insecure against a plaintext coordinator"
            ),
        }
    }

    pub async fn connect(&self) -> anyhow::Result<ControlClient<Channel>> {
        let (url, transport) = self.resolve()?;
        connect(&url, &transport).await
    }

    /// `connect`'s channel, for a service other than Control (health).
    pub async fn channel(&self) -> anyhow::Result<Channel> {
        let (url, transport) = self.resolve()?;
        channel(&url, &transport).await
    }
}

/// A client of the coordinator at `url`. A plaintext client first checks that the
/// coordinator answers plaintext HTTP/2 (one extra connection): at a TLS coordinator
/// every call would otherwise fail with "h2 protocol error: frame with invalid size" or
/// "connection closed", which says nothing of TLS.
pub async fn connect(url: &str, transport: &Transport) -> anyhow::Result<ControlClient<Channel>> {
    // A report of a million samples is a few hundred MB of JSON; tonic's default
    // 4 MiB limit made any report past ~25,000 samples fail through a coordinator.
    Ok(ControlClient::new(channel(url, transport).await?)
        .max_decoding_message_size(MAX_RESPONSE_BYTES))
}

/// A channel to the coordinator at `url`, checked as `connect` says.
pub async fn channel(url: &str, transport: &Transport) -> anyhow::Result<Channel> {
    use platter_proto::tls::{self, PlaintextAnswer};
    let endpoint = transport.endpoint(url)?;
    if let (Transport::Tls(dir), Ok(mut dialled)) = (transport, DIALLED.lock()) {
        *dialled = Some((url.to_string(), dir.clone()));
    }
    if *transport == Transport::Plaintext {
        let answer = tls::plaintext_answer(url, Duration::from_secs(10)).await;
        if answer == Some(PlaintextAnswer::NotHttp2) {
            bail!("{}", tls::requires_tls(url));
        }
    }
    let channel = endpoint
        .connect_timeout(Duration::from_secs(10))
        .connect()
        .await
        .map_err(|e| {
            let why = tls::chain(&e);
            match tls::speaks_plaintext(url, &why) {
                Some(plain) => anyhow::anyhow!("{plain} ({why})"),
                None => match Refusal::of(&e).filter(|_| *transport != Transport::Plaintext) {
                    Some(refusal) => {
                        anyhow::anyhow!("connecting to coordinator {url}: {refusal} — {why}")
                    }
                    None => anyhow::anyhow!("connecting to coordinator {url}: {why}"),
                },
            }
        })?;
    Ok(channel)
}

/// The largest answer an operator command accepts from the coordinator (a report).
pub const MAX_RESPONSE_BYTES: usize = 2 << 30;

/// A failed call as one line: the status message and, for transport failures, why; a
/// failure that looks like a refused certificate (or a refused coordinator's) says so
/// first, in the words agents use.
pub fn call_error(what: &str, s: tonic::Status) -> anyhow::Error {
    use std::error::Error;
    let cause = s
        .source()
        .map(|c| format!(" ({})", platter_proto::tls::chain(c)))
        .unwrap_or_default();
    let refusal = match s.source().and_then(Refusal::of) {
        // Over plaintext, a closed connection says nothing about certificates.
        Some(Refusal::LikelyByCoordinator) => {
            dialled().and_then(|(url, dir)| why_closed(&url, &dir))
        }
        r => r,
    };
    match refusal {
        Some(refusal) => anyhow::anyhow!("{what}: {refusal} — {}{cause}", s.message()),
        None => anyhow::anyhow!("{what}: {}{cause}", s.message()),
    }
}

/// The coordinator this process last dialled with TLS, and the identity it presented: a
/// call that failed with only a closed connection asks it once more why (`call_error`).
static DIALLED: std::sync::Mutex<Option<(String, TlsDir)>> = std::sync::Mutex::new(None);

fn dialled() -> Option<(String, TlsDir)> {
    DIALLED.lock().ok()?.clone()
}

/// What to tell of a call to the coordinator at `url`, with the identity in `dir`, that
/// ended with a closed connection (`tls::why_closed`). `call_error` is not async: this
/// waits in a multi-threaded runtime, and says the likely cause without one.
fn why_closed(url: &str, dir: &TlsDir) -> Option<Refusal> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let runtime = Handle::try_current()
        .ok()
        .filter(|r| r.runtime_flavor() == RuntimeFlavor::MultiThread);
    let Some(runtime) = runtime else {
        return Some(Refusal::LikelyByCoordinator);
    };
    let asked = platter_proto::tls::why_closed(dir, url, url, Duration::from_secs(5));
    tokio::task::block_in_place(|| runtime.block_on(asked))
}

/// `table` for people, `json` for scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
}

fn state_name(s: i32) -> &'static str {
    match pb::CampaignState::try_from(s) {
        Ok(pb::CampaignState::Running) => "running",
        Ok(pb::CampaignState::Done) => "done",
        Ok(pb::CampaignState::Cancelled) => "cancelled",
        _ => "?",
    }
}

fn campaign_json(c: &pb::CampaignStatus) -> serde_json::Value {
    serde_json::json!({
        "campaign_id": c.campaign_id,
        "name": c.name,
        "state": state_name(c.state),
        "submitted_unix_ms": c.created_unix_ms,
        "cells_total": c.cells_total,
        "cells_done": c.cells_done,
        "steps_total": c.steps_total,
        "steps_done": c.steps_done,
        "steps_failed": c.steps_failed,
        "store_fault": c.store_fault.as_ref().map(fault_json),
        "hosts": c.hosts.iter().map(|h| serde_json::json!({
            "host": h.host,
            "connected": h.connected,
            "coordinator": (!h.coordinator.is_empty()).then_some(&h.coordinator),
            "steps_total": h.steps_total,
            "steps_done": h.steps_done,
            "current_step": h.current_step,
            "eta_s": eta(h).map(|d| d.as_secs()),
            "refused": (!h.refused.is_empty()).then_some(&h.refused),
        })).collect::<Vec<_>>(),
    })
}

fn fault_json(f: &pb::StoreFault) -> serde_json::Value {
    serde_json::json!({ "reason": f.reason, "since_unix_ms": f.since_unix_ms, "not_answering": f.not_answering })
}

/// What an operator reads when the coordinator's store cannot commit: why, for how long,
/// and that nothing is lost meanwhile.
pub fn fault_line(f: &pb::StoreFault) -> String {
    let secs = ((crate::store::now_ms() - f.since_unix_ms).max(0) / 1000) as u64;
    format!(
        "STORE FAULT: the coordinator's store {} since {} (for {}): {}. Agents keep their records, unacked, and the coordinator retries every second; nothing is lost, the campaign goes on once the store can write again.\n",
        if f.not_answering {
            "is not answering"
        } else {
            "cannot commit"
        },
        crate::store::since_clock(f.since_unix_ms),
        hms(Duration::from_secs(secs)),
        f.reason
    )
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

fn hms(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    let widths = crate::report::widths(&header, rows);
    let mut out = crate::report::aligned(&header, &widths, "", "  ");
    out.push('\n');
    for r in rows {
        out.push_str(&crate::report::aligned(r, &widths, "", "  "));
        out.push('\n');
    }
    out
}

/// `platter status [CAMPAIGN]`.
pub fn render_status(campaigns: &[pb::CampaignStatus], one: bool, output: Output) -> String {
    if output == Output::Json {
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
                c.hosts
                    .iter()
                    .map(|h| h.host.as_str())
                    .collect::<Vec<_>>()
                    .join(","),
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

fn host_table(c: &pb::CampaignStatus) -> String {
    let rows: Vec<Vec<String>> = c
        .hosts
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
    let mut out = table(&["host", "link", "steps", "ETA", "current step"], &rows);
    for h in c.hosts.iter().filter(|h| !h.refused.is_empty()) {
        out += &format!(
            "host {} refused the plan, nothing ran: {}\n",
            h.host, h.refused
        );
    }
    out
}

/// `platter agents`.
pub fn render_agents(response: &pb::ListAgentsResponse, output: Output) -> String {
    let (agents, fault) = (&response.agents, response.store_fault.as_ref());
    let now = crate::store::now_ms();
    if output == Output::Json {
        let v: Vec<_> = agents
            .iter()
            .map(|a| {
                let labels: std::collections::BTreeMap<_, _> = a.labels.iter().collect();
                serde_json::json!({
                    "host": a.host,
                    "state": a.state,
                    // Where several coordinators share a store: the one holding it.
                    "coordinator": (!a.coordinator.is_empty()).then_some(&a.coordinator),
                    "labels": labels,
                    "last_seen_unix_ms": a.last_seen_unix_ms,
                    "current_campaign": a.current_campaign,
                    // Connected, but what it sends waits for the store.
                    "waiting_for_store": fault.filter(|_| a.connected).map(|f| &f.reason),
                    "agent_version": a.agent_version,
                    "boot_id": a.boot_id,
                    "drives": a.devices.iter().map(|d| serde_json::json!({
                        "path": d.path, "model": d.model, "serial": d.serial,
                        "size_bytes": d.size_bytes, "transport": d.transport,
                    })).collect::<Vec<_>>(),
                    // `path` "" for a tool the host lacks.
                    "tools": a.tools.iter().map(|t| serde_json::json!({
                        "name": t.name, "path": t.path, "version": t.version,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        return serde_json::to_string_pretty(&v).expect("json") + "\n";
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
    let mut out = fault.map(fault_line).unwrap_or_default()
        + &table(
            &["host", "state", "labels", "drives", "last seen", "campaign"],
            &rows,
        );
    if tools.iter().any(|(_, t)| !t.is_empty()) {
        out += "\ntools (as each agent reported them when it connected):\n";
        out += &tool_table(&tools);
    }
    out
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
pub async fn watch(
    client: &mut ControlClient<Channel>,
    campaign: &str,
) -> anyhow::Result<pb::CampaignStatus> {
    let mut stream = client
        .watch(pb::GetCampaignRequest {
            campaign_id: campaign.into(),
        })
        .await
        .map_err(|s| call_error("watch", s))?
        .into_inner();
    let live = std::io::stderr().is_terminal();
    let multi = MultiProgress::new();
    // `wide_msg`: the message takes the room the terminal has left and is cut to it, so a
    // long step never wraps (a wrapped line is drawn again on every tick, one row lower).
    let style =
        ProgressStyle::with_template("{prefix:<12} [{bar:24}] {pos:>4}/{len:<4} {wide_msg}")
            .expect("static template")
            .progress_chars("=> ");
    let mut bars: HashMap<String, ProgressBar> = HashMap::new();
    let mut printed: HashMap<String, u32> = HashMap::new();
    let mut last: Option<pb::CampaignStatus> = None;
    while let Some(s) = stream.message().await.map_err(|s| call_error("watch", s))? {
        // A store fault is said when it starts and when it ends, not on every update.
        let had = last.as_ref().and_then(|l| l.store_fault.as_ref());
        let said = match (had, &s.store_fault) {
            (None, Some(f)) => Some(fault_line(f)),
            (Some(_), None) => Some("the coordinator's store commits again.\n".to_string()),
            _ => None,
        };
        if let Some(line) = said {
            let line = line.trim_end();
            if live {
                let _ = multi.println(line);
            } else {
                eprintln!("{line}");
            }
        }
        for h in &s.hosts {
            // An agent's journal fault, like the store's, is said when it starts and
            // when it ends; the host's line shows it meanwhile.
            let had = last
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
                if live {
                    let _ = multi.println(&line);
                } else {
                    eprintln!("{line}");
                }
            }
            let eta = eta(h).map(hms).unwrap_or("?".into());
            let link = match (h.connected, h.journal_fault.is_empty()) {
                (_, false) => " (JOURNAL FAULT: holding)",
                (true, true) => "",
                (false, true) => " (not connected)",
            };
            let msg = format!("ETA {eta}{link}  {}", h.current_step);
            if live {
                let bar = bars.entry(h.host.clone()).or_insert_with(|| {
                    let b = multi.add(ProgressBar::new(h.steps_total.into()));
                    b.set_style(style.clone());
                    b.set_prefix(h.host.clone());
                    b.enable_steady_tick(Duration::from_millis(250));
                    b
                });
                bar.set_length(h.steps_total.into());
                bar.set_position(h.steps_done.into());
                bar.set_message(msg);
            } else if printed.get(&h.host) != Some(&h.steps_done) {
                printed.insert(h.host.clone(), h.steps_done);
                eprintln!(
                    "{:<12} {:>4}/{:<4} steps  {msg}",
                    h.host, h.steps_done, h.steps_total
                );
            }
        }
        last = Some(s);
    }
    for b in bars.values() {
        b.finish_and_clear();
    }
    let last = last.ok_or_else(|| anyhow::anyhow!("the coordinator sent no status"))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_file_fills_what_flags_and_environment_leave_out() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("client.toml");
        std::fs::write(
            &f,
            "coordinator = \"https://c.lab:7461\"\ntls_dir = \"operator-alice\"\n",
        )
        .unwrap();
        let args = ClientArgs {
            config: Some(f.clone()),
            ..Default::default()
        };
        let (url, t) = args.resolve().unwrap();
        assert_eq!(url, "https://c.lab:7461");
        assert_eq!(t, Transport::Tls(TlsDir(d.path().join("operator-alice"))));
        let args = ClientArgs {
            config: Some(f.clone()),
            coordinator: Some("https://other:1".into()),
            tls_dir: Some("/x".into()),
            ..Default::default()
        };
        assert_eq!(
            args.resolve().unwrap(),
            (
                "https://other:1".into(),
                Transport::Tls(TlsDir("/x".into()))
            )
        );
        std::fs::write(&f, "coordinater = \"x\"\n").unwrap();
        let err = ClientArgs {
            config: Some(f),
            ..Default::default()
        }
        .resolve()
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("unknown field") && err.contains("coordinater"),
            "{err}"
        );
    }

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
}
