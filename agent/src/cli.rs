//! Command-line options of the agent, shared by `platter-agent` and `platter agent`.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::AgentConfig;

#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// Coordinator address, e.g. https://coordinator.lab:7461. Repeat it, or give a
    /// comma-separated list, for coordinators sharing one store to fail over to: the agent
    /// connects to the first that answers and, when that one is gone (its stream ended, or
    /// it was silent for 10–15 s), to the next at once, resending what was not acked; it
    /// pauses (up to 5 s) only after every one failed. A name with several addresses counts
    /// as several coordinators; with TLS each must have a certificate for the name
    #[arg(
        long = "coordinator",
        env = "PLATTER_COORDINATOR",
        value_name = "URL",
        value_delimiter = ',',
        required = true
    )]
    pub coordinators: Vec<String>,
    /// This host's name, its identity towards the coordinator [default: the hostname]
    #[arg(long, env = "PLATTER_HOST")]
    pub name: Option<String>,
    /// Where the journal lives; must survive reboots
    #[arg(
        long,
        default_value = "/var/lib/platter-agent",
        env = "PLATTER_STATE_DIR"
    )]
    pub state_dir: PathBuf,
    /// File holding the boot id, which tells a reboot from a restart (containers, tests)
    #[arg(long, default_value = crate::DEFAULT_BOOT_ID_FILE)]
    pub boot_id_file: PathBuf,
    /// Command run by a `reboot` phase
    #[arg(long, default_value = "systemctl reboot")]
    pub reboot_command: String,
    /// Seconds a requested reboot may take before the step fails
    #[arg(long, default_value_t = 600)]
    pub reboot_timeout: u64,
    /// A device storage steps may format (mkfs, write cache), as a path or glob; repeat
    /// for more. Without it the agent refuses every plan that formats a device.
    #[arg(long = "allow-device", value_name = "PATH|GLOB")]
    pub allow_devices: Vec<String>,
    /// Let plans purge drives (`prepare.purge`: discard, ATA secure erase, NVMe format or
    /// sanitize, SCSI sanitize), each of which must also be allowed by --allow-device.
    /// Without it a plan with a purge is refused whole: a campaign file alone never erases
    /// a drive
    #[arg(long)]
    pub allow_purge: bool,
    /// Where storage configurations are mounted [default: STATE_DIR/mnt]
    #[arg(long)]
    pub mount_dir: Option<PathBuf>,
    /// Mutual TLS: a directory with ca.pem, cert.pem (this host's agent certificate, whose
    /// name is its identity) and key.pem, as `platter certs issue agent NAME` writes it
    #[arg(
        long,
        env = "PLATTER_TLS_DIR",
        required_unless_present = "dangerously_insecure"
    )]
    pub tls_dir: Option<PathBuf>,
    /// Speak plaintext gRPC: anyone who can reach the coordinator address, or stand in for
    /// it, can run commands on this host as this user. Only on a network you trust.
    #[arg(long, conflicts_with = "tls_dir")]
    pub dangerously_insecure: bool,
    /// A label the coordinator can select this host by (`hosts: { labels: … }`), as
    /// KEY=VALUE; repeat for more, e.g. --label rack=b12 --label role=storage-lab
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// Seconds between scans of the host's drives; a drive added, removed or replaced is
    /// reported to the coordinator (`platter agents`) after at most this long
    #[arg(long, default_value_t = crate::DEFAULT_INVENTORY_INTERVAL.as_secs(), value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub inventory_interval: u64,
    #[command(flatten)]
    pub cpu: CpuArgs,
}

/// Where the agent's own threads run; see `affinity`.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct CpuArgs {
    /// The CPU the agent's own threads (under `platter run`, the coordinator's too) are
    /// kept to, so that workloads start on other CPUs, whose caches hold no agent work:
    /// `auto` (the last CPU this process may use, when it may use two or more), `off` (no
    /// placement), or a CPU number. Workloads, and the commands run for them (storage
    /// setup, mkfs, gocryptfs), get every CPU the agent was started with; each plan's
    /// provenance says which
    #[arg(
        long = "agent-cpu",
        env = "PLATTER_AGENT_CPU",
        value_name = "auto|off|CPU",
        default_value = "auto"
    )]
    pub(crate) agent_cpu: crate::affinity::Placement,
}

impl CpuArgs {
    /// Keeps this thread, and every thread started after, to the CPU chosen. Call it
    /// before the runtime starts. `auto` that cannot be had is a warning; a CPU given by
    /// number that cannot be had is an error.
    pub fn apply(&self) -> anyhow::Result<()> {
        use crate::affinity::{keep_agent, Placement};
        match (keep_agent(self.agent_cpu), self.agent_cpu) {
            (Ok(_), _) => Ok(()),
            (Err(e), Placement::Cpu(c)) => Err(anyhow::anyhow!(
                "cannot keep the agent to CPU {c} (--agent-cpu): {e}"
            )),
            (Err(e), _) => {
                tracing::warn!(
                    "the agent's threads share the workloads' CPUs: setting their affinity failed: {e}"
                );
                Ok(())
            }
        }
    }
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not KEY=VALUE"))?;
    let ok = |x: &str| {
        !x.is_empty()
            && x.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    if !ok(k) || !ok(v) {
        return Err(format!(
            "{s:?}: keys and values are letters, digits, `-`, `_` and `.`"
        ));
    }
    Ok((k.to_string(), v.to_string()))
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

impl AgentArgs {
    pub(crate) fn config(&self) -> anyhow::Result<AgentConfig> {
        let transport = match &self.tls_dir {
            Some(dir) => crate::tls::Transport::Tls(crate::tls::TlsDir(dir.clone())),
            None => crate::tls::Transport::Plaintext,
        };
        Ok(AgentConfig {
            coordinators: self.coordinators.clone(),
            transport,
            labels: self.labels.clone(),
            host: self.name.clone().unwrap_or_else(hostname),
            state_dir: self.state_dir.clone(),
            boot_id_file: self.boot_id_file.clone(),
            reboot_command: self.reboot_command.clone(),
            reboot_timeout: Duration::from_secs(self.reboot_timeout),
            allow_devices: self.allow_devices.clone(),
            allow_purge: self.allow_purge,
            mount_dir: self.mount_dir.clone(),
            inventory_interval: Duration::from_secs(self.inventory_interval),
        })
    }
}

/// Runs the agent until SIGINT or SIGTERM.
pub async fn run(args: AgentArgs) -> anyhow::Result<()> {
    let cfg = args.config()?;
    // One agent per state directory (two would append to one journal and run one plan
    // twice), held until this returns; `platter run` takes the same lock for the agent it
    // embeds, before it calls `crate::run`.
    let _lock = platter_proto::lock::take(
        &cfg.state_dir,
        &format!("{} (the agent's state)", cfg.state_dir.display()),
        "wait for it to end, or give this agent a --state-dir of its own",
    )?;
    if cfg.transport == crate::tls::Transport::Plaintext {
        tracing::warn!(
            "PLAINTEXT gRPC (--dangerously-insecure): anyone who can reach {} or pose as it can run commands on this host",
            cfg.coordinators.join(" or ")
        );
    }
    let shutdown = CancellationToken::new();
    let signal = shutdown.clone();
    tokio::spawn(async move {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(t) => t,
                Err(_) => return,
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        signal.cancel();
    });
    crate::run(cfg, shutdown).await
}

/// Logs go to stderr at `default` level unless `PLATTER_LOG` says otherwise
/// (e.g. `PLATTER_LOG=debug`, `PLATTER_LOG=platter_agent=trace`).
pub fn init_tracing(default: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("PLATTER_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    // Logs are for operators and go to stderr; stdout is for reports. Colours only on a
    // terminal: a log file or journald gets plain text, not escape sequences.
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        agent: AgentArgs,
    }

    fn coordinators(args: &[&str]) -> Vec<String> {
        let argv = ["platter-agent", "--dangerously-insecure"]
            .iter()
            .chain(args);
        Cli::try_parse_from(argv).unwrap().agent.coordinators
    }

    #[test]
    fn coordinators_are_repeated_or_listed_in_one_value_in_order() {
        let a = "http://a.lab:7461";
        assert_eq!(coordinators(&["--coordinator", a]), [a]);
        assert_eq!(
            coordinators(&["--coordinator", a, "--coordinator", "http://b.lab:7461"]),
            [a, "http://b.lab:7461"]
        );
        assert_eq!(
            coordinators(&[
                "--coordinator=http://a.lab:7461,http://10.0.0.2:7461",
                "--coordinator",
                "http://[fd00::3]:7461"
            ]),
            [a, "http://10.0.0.2:7461", "http://[fd00::3]:7461"]
        );
        // Unless PLATTER_COORDINATOR is set (then it is the list), one is needed.
        if std::env::var_os("PLATTER_COORDINATOR").is_none() {
            let argv = ["platter-agent", "--dangerously-insecure"];
            assert!(Cli::try_parse_from(argv).is_err());
        }
    }
}
