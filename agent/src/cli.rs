//! Command-line options of the agent, shared by `platter-agent` and `platter agent`.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::AgentConfig;

#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// Coordinator address, e.g. http://coordinator.lab:7461
    #[arg(long, env = "PLATTER_COORDINATOR")]
    pub coordinator: String,
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
    /// Where storage configurations are mounted [default: STATE_DIR/mnt]
    #[arg(long)]
    pub mount_dir: Option<PathBuf>,
    /// Talk plaintext gRPC. Mutual TLS is not implemented yet, so this is required; use it
    /// only on a network you trust.
    #[arg(long, alias = "dangerously-insecure")]
    pub insecure: bool,
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

impl AgentArgs {
    pub fn config(&self) -> anyhow::Result<AgentConfig> {
        if !self.insecure {
            anyhow::bail!(
                "this build of platter-agent speaks plaintext gRPC only; pass --insecure to accept that \
                 (every plan the coordinator sends runs as this user)"
            );
        }
        Ok(AgentConfig {
            coordinator: self.coordinator.clone(),
            host: self.name.clone().unwrap_or_else(hostname),
            state_dir: self.state_dir.clone(),
            boot_id_file: self.boot_id_file.clone(),
            reboot_command: self.reboot_command.clone(),
            reboot_timeout: Duration::from_secs(self.reboot_timeout),
            allow_devices: self.allow_devices.clone(),
            mount_dir: self.mount_dir.clone(),
        })
    }
}

/// Runs the agent until SIGINT or SIGTERM.
pub async fn run(args: AgentArgs) -> anyhow::Result<()> {
    let cfg = args.config()?;
    tracing::warn!("plaintext gRPC (--insecure): anyone who can reach the coordinator address can command this host");
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
    // Logs are for operators and go to stderr; stdout is for reports.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
