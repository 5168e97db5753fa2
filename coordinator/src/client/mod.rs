//! The operator's side: one client configuration shared by every command that talks to a
//! coordinator, dialling it (and saying which side refused which certificate when a
//! connection closes), and in `listings` what `status`, `agents` and `watch` print.
//!
//! Settings come from flags, then environment variables (PLATTER_COORDINATOR,
//! PLATTER_TLS_DIR), then the client file (`--config`, PLATTER_CONFIG, or
//! `~/.config/platter/client.toml`):
//!
//! ```toml
//! coordinator = "https://coordinator.lab:7461"   # or several: ["https://a:7461", "https://b:7461"]
//! tls_dir = "/home/alice/.config/platter/operator-alice"
//! ```
//!
//! Several coordinators (on one PostgreSQL store) are tried in turn: a command moves to
//! the next when one is gone, and rides out a store that does not answer (`session`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use platter_proto::tls::{Refusal, TlsDir, Transport};
use platter_proto::v1::control_client::ControlClient;
use serde::Deserialize;
use tonic::transport::Channel;

/// How to reach the coordinator, shared by every operator command.
#[derive(Debug, Clone, clap::Args)]
pub struct ClientArgs {
    /// The coordinator, e.g. https://coordinator.lab:7461; several, comma-separated
    /// (coordinators sharing a PostgreSQL store), are tried in turn when one is gone
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
    /// How long `status`, `agents`, `history` and `watch` keep trying while no coordinator
    /// answers or its store does not (each failure said once on stderr; 0 fails at once;
    /// `watch` counts it from each failure). Other commands try each coordinator once
    #[arg(long, env = "PLATTER_RETRY_FOR", default_value = "2m", value_parser = humantime::parse_duration)]
    pub retry_for: Duration,
}

impl Default for ClientArgs {
    fn default() -> Self {
        ClientArgs {
            coordinator: None,
            tls_dir: None,
            dangerously_insecure: false,
            config: None,
            retry_for: DEFAULT_RETRY_FOR,
        }
    }
}

/// `--retry-for`'s default: longer than a coordinator's restart or a database's failover.
pub const DEFAULT_RETRY_FOR: Duration = Duration::from_secs(120);

/// One coordinator, or several to try in turn.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Coordinators {
    One(String),
    Several(Vec<String>),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientFile {
    coordinator: Option<Coordinators>,
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

    /// Flags and environment over the client file: the coordinators to try, in order (at
    /// least one), and how to speak to them.
    pub fn resolve(&self) -> anyhow::Result<(Vec<String>, Transport)> {
        let (file, file_path) = self.client_file()?;
        let urls: Vec<String> = match (&self.coordinator, file.coordinator) {
            (Some(flag), _) => flag.split(',').map(str::to_string).collect(),
            (None, Some(Coordinators::One(url))) => vec![url],
            (None, Some(Coordinators::Several(urls))) => urls,
            (None, None) => Vec::new(),
        };
        let urls: Vec<String> = urls
            .into_iter()
            .map(|u| u.trim().to_string())
            .filter(|u| !u.is_empty())
            .collect();
        if urls.is_empty() {
            bail!(
                "which coordinator? pass --coordinator https://HOST:7461 (several: A,B), set PLATTER_COORDINATOR, \
                 or put `coordinator = \"…\"` in {}",
                file_path.or_else(default_config).map(|p| p.display().to_string()).unwrap_or("a client file".into())
            );
        }
        match self.tls_dir.clone().or(file.tls_dir) {
            Some(dir) => Ok((urls, Transport::Tls(TlsDir(dir)))),
            None if self.dangerously_insecure || file.dangerously_insecure => {
                Ok((urls, Transport::Plaintext))
            }
            None => bail!(
                "no client certificate: pass --tls-dir DIR (from `platter certs issue operator NAME`), \
                 set PLATTER_TLS_DIR, or use --dangerously-insecure against a plaintext coordinator"
            ),
        }
    }

    /// The coordinators named, to call through (`Session::call`): the first that answers,
    /// the next when it is gone.
    pub fn session(&self) -> anyhow::Result<Session> {
        let (urls, transport) = self.resolve()?;
        Ok(Session::new(urls, transport, self.retry_for))
    }

    /// A client of the first coordinator that answers, each named tried once.
    pub async fn connect(&self) -> anyhow::Result<ControlClient<Channel>> {
        let (urls, transport) = self.resolve()?;
        let mut last = None;
        for url in &urls {
            match connect(url, &transport).await {
                Ok(c) => return Ok(c),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("resolve names at least one coordinator"))
    }

    /// `connect`'s channel, for a service other than Control (health): the first
    /// coordinator named.
    pub async fn channel(&self) -> anyhow::Result<Channel> {
        let (urls, transport) = self.resolve()?;
        channel(&urls[0], &transport).await
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

/// A failure to reach a coordinator, and whether it passes (nothing answered, or the
/// connection broke: `Session` tries again) or the user must act (a bad URL, a refused
/// certificate, a coordinator that speaks another transport).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ConnectFailed {
    message: String,
    pub passes: bool,
}

fn connect_failed(message: String, passes: bool) -> anyhow::Error {
    ConnectFailed { message, passes }.into()
}

/// A channel to the coordinator at `url`, checked as `connect` says.
pub async fn channel(url: &str, transport: &Transport) -> anyhow::Result<Channel> {
    use platter_proto::tls::{self, PlaintextAnswer};
    let endpoint = transport
        .endpoint(url)
        .map_err(|e| connect_failed(format!("{e:#}"), false))?;
    if let (Transport::Tls(dir), Ok(mut dialled)) = (transport, DIALLED.lock()) {
        *dialled = Some((url.to_string(), dir.clone()));
    }
    if *transport == Transport::Plaintext {
        let answer = tls::plaintext_answer(url, Duration::from_secs(10)).await;
        if answer == Some(PlaintextAnswer::NotHttp2) {
            return Err(connect_failed(tls::requires_tls(url), false));
        }
    }
    let channel = endpoint
        .connect_timeout(Duration::from_secs(10))
        .connect()
        .await
        .map_err(|e| {
            let why = tls::chain(&e);
            match tls::speaks_plaintext(url, &why) {
                Some(plain) => connect_failed(format!("{plain} ({why})"), false),
                None => match Refusal::of(&e).filter(|_| *transport != Transport::Plaintext) {
                    Some(refusal) => connect_failed(
                        format!("connecting to coordinator {url}: {refusal} — {why}"),
                        false,
                    ),
                    None => connect_failed(format!("connecting to coordinator {url}: {why}"), true),
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

pub mod listings;
pub mod session;

pub use session::Session;

pub use crate::views::{eta, fault_line};
pub use listings::{render_agents, render_status, select_here, tool_table, watch, AGENTS_LISTED};

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
        let (urls, t) = args.resolve().unwrap();
        assert_eq!(urls, ["https://c.lab:7461"]);
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
                vec!["https://other:1".to_string()],
                Transport::Tls(TlsDir("/x".into()))
            )
        );
        // Several, by flag (commas) or in the file (a list), tried in that order.
        let args = ClientArgs {
            config: Some(f.clone()),
            coordinator: Some("https://a:1, https://b:1,".into()),
            ..Default::default()
        };
        assert_eq!(args.resolve().unwrap().0, ["https://a:1", "https://b:1"]);
        std::fs::write(
            &f,
            "coordinator = [\"https://a:7461\", \"https://b:7461\"]\ntls_dir = \"x\"\n",
        )
        .unwrap();
        let args = ClientArgs {
            config: Some(f.clone()),
            ..Default::default()
        };
        assert_eq!(
            args.resolve().unwrap().0,
            ["https://a:7461", "https://b:7461"]
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
}
