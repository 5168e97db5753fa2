//! The `platter` command line. Each subcommand reads as its pipeline: `run` is
//! load spec → start coordinator and agent → submit → watch → report.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use platter_agent::tls::{TlsDir, Transport};
use platter_proto::v1 as pb;
use platter_proto::v1::control_client::ControlClient;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

use crate::operator::{self, call_error, ClientArgs, Output};
use crate::report::Format;
use crate::server::{Coordinator, ServeOptions};
use crate::{planner, spec};

/// Exit status when a step failed (the report is still printed).
pub const EXIT_FAILED_STEPS: i32 = 1;
/// Exit status for invalid input (campaign file, flags).
pub const EXIT_INVALID: i32 = 2;
/// Exit status of `platter compare` when some cells could not be compared (no cell with
/// the same host and parameters in the other campaign, or no values of the metric) and
/// `--allow-unmatched` was not given; the comparison and the cells are still printed.
pub const EXIT_UNMATCHED: i32 = 3;

/// platter runs storage experiments (YAML campaigns) on one machine or a fleet of test
/// hosts and reports how hosts, drives and configurations compare.
#[derive(Parser)]
#[command(version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run a campaign on this machine: an embedded coordinator and agent over loopback,
    /// progress on stderr, the report on stdout. Run it again after an interruption or
    /// a reboot to resume.
    Run {
        /// The campaign YAML file
        file: PathBuf,
        /// SQLite database for campaigns and samples
        #[arg(long, default_value = "platter-data/platter.db")]
        db: PathBuf,
        /// The local agent's journal directory
        #[arg(long, default_value = "platter-data/agent")]
        state_dir: PathBuf,
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Write the report to this file instead of stdout
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Also write the qualification verdicts (`report: { qualify }`) as JUnit XML
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// Start a new campaign even if an unfinished one with the same content exists
        #[arg(long)]
        fresh: bool,
        /// Command a `reboot` phase runs
        #[arg(long, default_value = "systemctl reboot")]
        reboot_command: String,
        /// A device `storage:` may format (mkfs, write cache), as a path or glob; repeat
        /// for more. Devices not named here are refused before anything runs.
        #[arg(long = "allow-device", value_name = "PATH|GLOB")]
        allow_devices: Vec<String>,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Check a campaign file and print its cells and each host's plan; runs nothing.
    /// With a coordinator (--coordinator or PLATTER_COORDINATOR), expand it against the
    /// live fleet: which hosts (names and labels) and drives it would touch, within the
    /// coordinator's limits.
    Validate {
        file: PathBuf,
        /// The host `local` stands for [default: this machine's hostname]
        #[arg(long)]
        local_host: Option<String>,
        #[command(flatten)]
        client: ClientArgs,
        /// Limits when checking here; with a coordinator, its own (`platter serve`) apply
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Run a coordinator for a fleet of agents: campaigns from many operators at once,
    /// one plan at a time per host, hosts in parallel.
    Serve {
        #[arg(long, default_value = "0.0.0.0:7461")]
        listen: SocketAddr,
        #[arg(long, default_value = "/var/lib/platter/platter.db")]
        db: PathBuf,
        /// Mutual TLS: a directory with ca.pem, cert.pem and key.pem (from `platter certs
        /// issue coordinator DNS-NAME…`). Agents and operators must present certificates
        /// from the same CA.
        #[arg(
            long,
            env = "PLATTER_TLS_DIR",
            required_unless_present = "dangerously_insecure"
        )]
        tls_dir: Option<PathBuf>,
        /// Serve plaintext gRPC: anyone who can reach the address can submit campaigns
        /// and wipe every allowed drive of every agent.
        #[arg(long, conflicts_with = "tls_dir")]
        dangerously_insecure: bool,
        /// Seconds without a heartbeat after which an agent is lost (its plans wait)
        #[arg(
            long,
            default_value_t = crate::server::DEFAULT_HEARTBEAT_TIMEOUT.as_secs(),
            value_parser = heartbeat_timeout
        )]
        heartbeat_timeout: u64,
        /// What submitted campaigns may ask for
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Submit a campaign to a coordinator and print its id.
    Submit {
        file: PathBuf,
        #[command(flatten)]
        client: ClientArgs,
        /// Follow progress until the campaign ends, then print the report
        #[arg(long)]
        watch: bool,
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// The largest campaign file sent, in bytes or with K, M or G (the coordinator's
        /// own limit, `platter serve --max-file-size`, applies too)
        #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = file_size)]
        max_file_size: u64,
    },
    /// Campaigns and their progress: every campaign, or one with its hosts.
    Status {
        campaign: Option<String>,
        #[command(flatten)]
        client: ClientArgs,
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Follow a campaign live: one line per host with its step, done/total and ETA.
    Watch {
        campaign: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// The fleet: hosts with labels, drives, state (idle, busy, lost, offline), last seen
    /// and current campaign.
    Agents {
        #[command(flatten)]
        client: ClientArgs,
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Cancel a campaign: queued plans are dropped, running steps are killed, storage is
    /// torn down.
    Cancel {
        campaign: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// The fleet's certificates: a CA, then one certificate per coordinator, agent and
    /// operator, each in its own directory for --tls-dir.
    #[command(subcommand)]
    Certs(Certs),
    /// Print the report of a campaign.
    Report {
        campaign: String,
        /// Read from this database file instead of asking a coordinator
        #[arg(long)]
        db: Option<PathBuf>,
        #[command(flatten)]
        client: ClientArgs,
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Also write the qualification verdicts (`report: { qualify }`) as JUnit XML
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
    },
    /// Compare two campaigns run from the same matrix (another day, another fleet): each
    /// cell of B against the same host and parameters in A — the Hodges–Lehmann ratio of
    /// B to A with an interval of its real coverage, Holm-corrected — and the cells of
    /// either without a counterpart. Exits 3 when some cells could not be compared.
    Compare {
        /// The baseline campaign
        a: String,
        /// The campaign compared with it
        b: String,
        /// Read both from this database file [default: platter-data/platter.db, unless a
        /// coordinator is given]
        #[arg(long)]
        db: Option<PathBuf>,
        /// Ask a coordinator (--coordinator or PLATTER_COORDINATOR) instead
        #[command(flatten)]
        client: ClientArgs,
        /// The metric to compare
        #[arg(long, default_value = "wall")]
        metric: String,
        /// table for people, json for scripts
        #[arg(long, default_value = "table", value_parser = ["table", "json"])]
        format: String,
        /// Exit 0 even when some cells could not be compared (they are still listed)
        #[arg(long)]
        allow_unmatched: bool,
    },
    /// List the block devices of this machine, or of every agent a coordinator knows:
    /// model, serial, transport, controller chain, write cache, and what is in use.
    Inventory {
        /// Ask the coordinator (--coordinator or PLATTER_COORDINATOR) for its agents'
        /// inventories instead of scanning here
        #[command(flatten)]
        client: ClientArgs,
        /// table for people, json for scripts
        #[arg(long, alias = "output", default_value = "table", value_parser = ["table", "json"])]
        format: String,
    },
    /// Run an agent (the same as the `platter-agent` binary).
    Agent(platter_agent::cli::AgentArgs),
}

#[derive(Subcommand)]
pub enum Certs {
    /// Create the fleet CA in DIR/ca (ca.pem, and ca-key.pem readable only by you). Keep
    /// ca-key.pem offline; it signs every identity in the fleet.
    Init {
        /// The PKI directory; the CA goes to DIR/ca
        #[arg(long, default_value = "platter-pki")]
        dir: PathBuf,
        /// How long the CA is valid
        #[arg(long, default_value_t = 3650)]
        days: u32,
    },
    /// Issue a certificate: `coordinator DNS-NAME|IP…` (the names agents dial),
    /// `agent HOST` (the host it may act as), `operator NAME`. Writes
    /// DIR/coordinator, DIR/agent-HOST or DIR/operator-NAME with ca.pem, cert.pem, key.pem.
    Issue {
        #[arg(value_enum)]
        role: crate::pki::Role,
        /// The host or operator name; for a coordinator every DNS name and IP address
        /// agents and operators dial
        #[arg(required = true)]
        names: Vec<String>,
        /// The PKI directory made by `platter certs init`
        #[arg(long, default_value = "platter-pki")]
        dir: PathBuf,
        /// How long the certificate is valid
        #[arg(long, default_value_t = 825)]
        days: u32,
    },
}

/// Limits on a campaign, for the rare campaign that legitimately needs more.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct LimitArgs {
    /// The largest campaign file accepted, in bytes or with K, M or G (powers of 1024);
    /// the size is checked before the file is read
    #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = file_size)]
    pub max_file_size: u64,
    /// The most steps (measurements and their preparation) one host's plan may hold
    #[arg(long, value_name = "N", default_value_t = spec::MAX_STEPS_PER_PLAN)]
    pub max_steps_per_plan: u64,
}

impl From<LimitArgs> for spec::Limits {
    fn from(a: LimitArgs) -> spec::Limits {
        spec::Limits {
            max_file_bytes: a.max_file_size,
            max_steps_per_plan: a.max_steps_per_plan,
        }
    }
}

/// `--max-file-size`: `1M`, `20MiB`, `65536`.
fn file_size(s: &str) -> Result<u64, String> {
    spec::parse_bytes(s).filter(|n| *n > 0).ok_or_else(|| {
        format!("`{s}` is not a size: write bytes, or a number with K, M or G (e.g. 20M)")
    })
}

/// `--heartbeat-timeout` in seconds, at least two heartbeat intervals.
fn heartbeat_timeout(s: &str) -> Result<u64, String> {
    let secs: u64 = s.parse().map_err(|e| format!("{e}"))?;
    let min = crate::server::MIN_HEARTBEAT_TIMEOUT.as_secs();
    if secs < min {
        return Err(format!(
            "the minimum is {min} s (two of the agents' {} s heartbeat intervals); \
             a shorter timeout declares idle agents lost between heartbeats",
            platter_agent::link::HEARTBEAT_INTERVAL.as_secs()
        ));
    }
    Ok(secs)
}

/// Parses arguments, runs, and returns the process exit status.
pub fn main() -> i32 {
    let cli = Cli::parse();
    // A command that only prints ends quietly when its stdout closes (`platter validate
    // FILE | head`), as `ls` does: the default SIGPIPE. Rust ignores SIGPIPE, and then
    // `println!` panics on EPIPE. Only commands that open no socket get it: a write to a
    // socket the peer reset raises SIGPIPE too, and killed `platter agents` silently
    // (no error, empty stderr) when a coordinator refused its plaintext (`tests/tls.rs`).
    // `run` treats a closed stdout in `emit`.
    let local_only = match &cli.command {
        Command::Validate { client, .. } => client.coordinator.is_none(),
        Command::Certs(_) => true,
        _ => false,
    };
    // The others print with `println!` too: a closed stdout ends them quietly, with the
    // status a SIGPIPE would give, instead of a panic and a backtrace.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default_hook(info);
    }));
    if local_only {
        // SAFETY: no other thread exists yet (the runtime starts below), and SIG_DFL is
        // a valid disposition for SIGPIPE.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    // The single-machine commands talk to a person: only warnings; services log more.
    let quiet = matches!(
        cli.command,
        Command::Run { .. }
            | Command::Validate { .. }
            | Command::Report { .. }
            | Command::Inventory { .. }
            | Command::Compare { .. }
            | Command::Status { .. }
            | Command::Watch { .. }
            | Command::Agents { .. }
            | Command::Cancel { .. }
            | Command::Certs(_)
            | Command::Submit { .. }
    );
    platter_agent::cli::init_tracing(if quiet { "warn" } else { "info" });
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("platter: cannot start the runtime: {e}");
            return 1;
        }
    };
    match rt.block_on(run(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("platter: {e:#}");
            1
        }
    }
}

async fn run(command: Command) -> anyhow::Result<i32> {
    match command {
        Command::Run {
            file,
            db,
            state_dir,
            format,
            output,
            junit,
            fresh,
            reboot_command,
            allow_devices,
            limits,
        } => {
            let opts = LocalRun {
                db,
                state_dir,
                format,
                output,
                junit,
                fresh,
                reboot_command,
                allow_devices,
                limits: limits.into(),
            };
            run_local(&file, opts).await
        }
        Command::Validate {
            file,
            local_host,
            client,
            limits,
        } => {
            if client.coordinator.is_some() {
                validate_remote(&file, &client, limits.max_file_size).await
            } else {
                validate(&file, local_host, &limits.into())
            }
        }
        Command::Serve {
            listen,
            db,
            tls_dir,
            dangerously_insecure: _,
            heartbeat_timeout,
            limits,
        } => {
            let opts = ServeOptions {
                db,
                listen,
                tls: tls_dir.map(TlsDir),
                heartbeat_timeout: Duration::from_secs(heartbeat_timeout),
                limits: limits.into(),
            };
            serve(opts).await
        }
        Command::Submit {
            file,
            client,
            watch,
            format,
            max_file_size,
        } => submit(&file, &client, watch, format, max_file_size).await,
        Command::Status {
            campaign,
            client,
            output,
        } => {
            let mut c = client.connect().await?;
            let list = match &campaign {
                Some(id) => vec![c
                    .get_campaign(pb::GetCampaignRequest {
                        campaign_id: id.clone(),
                    })
                    .await
                    .map_err(|s| call_error("status", s))?
                    .into_inner()],
                None => {
                    c.list_campaigns(pb::ListCampaignsRequest {})
                        .await
                        .map_err(|s| call_error("status", s))?
                        .into_inner()
                        .campaigns
                }
            };
            print!(
                "{}",
                operator::render_status(&list, campaign.is_some(), output)
            );
            Ok(0)
        }
        Command::Watch { campaign, client } => {
            let last = operator::watch(&mut client.connect().await?, &campaign).await?;
            Ok(if last.steps_failed > 0 {
                EXIT_FAILED_STEPS
            } else {
                0
            })
        }
        Command::Agents { client, output } => {
            let agents = client
                .connect()
                .await?
                .list_agents(pb::ListAgentsRequest {})
                .await
                .map_err(|s| call_error("agents", s))?
                .into_inner();
            print!("{}", operator::render_agents(&agents, output));
            Ok(0)
        }
        Command::Cancel { campaign, client } => {
            client
                .connect()
                .await?
                .cancel(pb::CancelRequest {
                    campaign_id: campaign.clone(),
                })
                .await
                .map_err(|s| call_error("cancel", s))?;
            eprintln!("campaign {campaign} cancelled");
            Ok(0)
        }
        Command::Certs(Certs::Init { dir, days }) => {
            let ca = crate::pki::init(&dir, days)?;
            println!("{}", ca.display());
            eprintln!(
                "fleet CA written to {}; keep ca-key.pem private (it signs every identity)",
                ca.display()
            );
            Ok(0)
        }
        Command::Certs(Certs::Issue {
            role,
            names,
            dir,
            days,
        }) => {
            let out = crate::pki::issue_to_dir(&dir, role, &names, days)?;
            println!("{}", out.display());
            eprintln!(
                "{} certificate for {} written to {} (use it as --tls-dir)",
                role.as_str(),
                names.join(", "),
                out.display()
            );
            Ok(0)
        }
        Command::Report {
            campaign,
            db,
            client,
            format,
            output,
            junit,
        } => {
            let render = async |format: Format| -> anyhow::Result<(String, u32)> {
                Ok(match &db {
                    Some(db) => {
                        let store = crate::store::Store::open(db)?;
                        let r = crate::report::Report::load(&store, &campaign)?;
                        (format.exporter().render(&r), r.problems())
                    }
                    None => report(&mut client.connect().await?, &campaign, format).await?,
                })
            };
            let failed = match &db {
                // From the store: written as it is rendered, never held whole (a JSON
                // report of every sample can be larger than the report's data).
                Some(db) if format != Format::Table => {
                    let store = crate::store::Store::open(db)?;
                    let r = crate::report::Report::load(&store, &campaign)?;
                    emit_with(output.as_deref(), |out| format.exporter().write(&r, out))?;
                    r.problems()
                }
                _ => {
                    let (rendered, failed) = render(format).await?;
                    emit(&rendered, output.as_deref(), format)?;
                    failed
                }
            };
            if let Some(path) = junit {
                let (xml, _) = render(Format::Junit).await?;
                std::fs::write(&path, xml)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            Ok(if failed > 0 { EXIT_FAILED_STEPS } else { 0 })
        }
        Command::Inventory { client, format } => {
            let client = client.coordinator.is_some().then_some(client);
            inventory(client.as_ref(), &format).await
        }
        Command::Compare {
            a,
            b,
            db,
            client,
            metric,
            format,
            allow_unmatched,
        } => {
            let compared = if db.is_none() && client.coordinator.is_some() {
                let resp = client
                    .connect()
                    .await?
                    .compare(pb::CompareRequest {
                        a: a.clone(),
                        b: b.clone(),
                        metric: metric.clone(),
                    })
                    .await
                    .map_err(|s| call_error("compare", s))?
                    .into_inner();
                crate::rpc::control::comparison_from_pb(resp, &a, &b, &metric)
            } else {
                let db = db.unwrap_or_else(|| "platter-data/platter.db".into());
                let store = crate::store::Store::open(&db)?;
                let (ra, rb) = (
                    crate::report::Report::load(&store, &a)?,
                    crate::report::Report::load(&store, &b)?,
                );
                crate::report::judge::compare_campaigns(&ra, &rb, &metric)
            };
            if format == "json" {
                println!("{}", serde_json::to_string_pretty(&compared)?);
            } else {
                print!("{}", render_comparison(&compared));
            }
            if !compared.rows.iter().any(|r| r.compared) {
                bail!("no cell of {b} has a counterpart with the same host and parameters in {a} that measured {metric}");
            }
            let incomplete = compared.incomplete();
            if incomplete > 0 && !allow_unmatched {
                eprintln!(
                    "platter: {incomplete} cell(s) could not be compared (listed above); \
                     --allow-unmatched exits 0 anyway"
                );
                return Ok(EXIT_UNMATCHED);
            }
            Ok(0)
        }
        Command::Agent(args) => platter_agent::cli::run(args).await.map(|()| 0),
    }
}

/// `platter compare` for people: what the number is, one line per cell, then the cells
/// of either campaign that have no counterpart in the other.
fn render_comparison(c: &crate::report::judge::CampaignComparison) -> String {
    let (a, b, metric) = (&c.baseline, &c.candidate, &c.metric);
    let family = c.rows.iter().map(|r| r.family).max().unwrap_or(0);
    let mut out = format!(
        "B = {b} against A = {a}, {metric}\n\
         penalty: the Hodges–Lehmann ratio of B to A (the median of every ratio of a \
         repetition of B to one of A) − 1, with a distribution-free interval labelled with \
         its real coverage; significant only after Holm's correction over {family} \
         comparison(s)\n"
    );
    for r in &c.rows {
        let test = match (r.p_value, r.holm_p) {
            (Some(p), Some(h)) => format!(" [p = {p:.3}, Holm-adjusted p = {h:.3}]"),
            _ => String::new(),
        };
        out.push_str(&format!("  {}: {}{test}\n", r.row.context, r.row.text));
    }
    for (side, cells) in [("A", &c.only_in_a), ("B", &c.only_in_b)] {
        for cell in cells {
            out.push_str(&format!("only in {side}: {}\n", cell.describe()));
        }
    }
    out
}

async fn inventory(coordinator: Option<&ClientArgs>, format: &str) -> anyhow::Result<i32> {
    use platter_agent::probes::inventory::{self, Device};
    let hosts: Vec<(String, Vec<Device>)> = match coordinator {
        None => vec![(
            platter_agent::cli::hostname(),
            inventory::scan(&inventory::Roots::default())?,
        )],
        Some(client) => client
            .connect()
            .await?
            .list_agents(pb::ListAgentsRequest {})
            .await
            .map_err(|s| call_error("list agents", s))?
            .into_inner()
            .agents
            .into_iter()
            .map(|a| (a.host, a.devices.into_iter().map(Device::from).collect()))
            .collect(),
    };
    if format == "json" {
        let map: serde_json::Map<String, serde_json::Value> = hosts
            .into_iter()
            .map(|(h, d)| Ok((h, serde_json::to_value(d)?)))
            .collect::<Result<_, serde_json::Error>>()?;
        println!("{}", serde_json::to_string_pretty(&map)?);
        return Ok(0);
    }
    let header = [
        "host",
        "device",
        "size",
        "model",
        "serial",
        "transport",
        "controller",
        "write cache",
        "in use",
    ];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (host, devices) in &hosts {
        for d in devices {
            let in_use = if d.holds_root {
                "holds /".to_string()
            } else if !d.mounted.is_empty() {
                format!("mounted {}", d.mounted.join(" "))
            } else if !d.holders.is_empty() {
                format!("under {}", d.holders.join(" "))
            } else {
                "-".into()
            };
            let cache = match d.write_cache {
                inventory::WriteCache::WriteBack => "write back",
                inventory::WriteCache::WriteThrough => "write through",
                inventory::WriteCache::Unknown => "?",
            };
            rows.push(vec![
                host.clone(),
                d.path.clone(),
                crate::report::human(d.size_bytes as f64, "B"),
                [d.vendor.as_str(), d.model.as_str()]
                    .join(" ")
                    .trim()
                    .to_string(),
                d.serial.clone(),
                d.transport.as_str().to_string(),
                d.controller.join(" > "),
                cache.to_string(),
                in_use,
            ]);
        }
    }
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    let widths = crate::report::widths(&header, &rows);
    println!("{}", crate::report::aligned(&header, &widths, "", "  "));
    for r in &rows {
        println!("{}", crate::report::aligned(r, &widths, "", "  "));
    }
    Ok(0)
}

/// Every mistake, each on its own `error:` line (at most `spec::MAX_SHOWN`).
fn load_spec(file: &Path, limits: &spec::Limits) -> Result<spec::Campaign, i32> {
    spec::load_with(file, limits).map_err(|e| {
        eprintln!("{e}");
        EXIT_INVALID
    })
}

/// A campaign the coordinator refused as invalid: its message already has one `error:`
/// line per mistake; anything else (a planning error) gets the prefix here.
fn print_invalid(message: &str) {
    if message.starts_with("error: ") {
        eprintln!("{message}");
    } else {
        eprintln!("error: {message}");
    }
}

fn validate(file: &Path, local_host: Option<String>, limits: &spec::Limits) -> anyhow::Result<i32> {
    let campaign = match load_spec(file, limits) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let local = local_host.unwrap_or_else(platter_agent::cli::hostname);
    // Only this machine's devices are known without a coordinator.
    let mut inventories = planner::Inventories::new();
    if campaign.devices.is_some() {
        use platter_agent::probes::inventory;
        inventories.insert(
            local.clone(),
            inventory::scan(&inventory::Roots::default())?,
        );
    }
    // Other hosts' drives (and label selections) are known only to the coordinator: the
    // file is valid as far as it can be checked here, and says how to check the rest.
    let remote: Vec<&str> = campaign
        .hosts
        .iter()
        .map(String::as_str)
        .filter(|h| *h != "local" && *h != local)
        .collect();
    if (campaign.devices.is_some() && !remote.is_empty()) || campaign.host_labels.is_some() {
        println!(
            "campaign {}: valid as far as this machine can tell
  {} cell(s) × {} repetition(s)",
            campaign.name,
            campaign.cells.len(),
            campaign.repeat
        );
        let what = match (campaign.host_labels.is_some(), remote.is_empty()) {
            (true, true) => "which hosts have the labels".to_string(),
            (true, false) => format!(
                "which hosts have the labels and the drives of {}",
                remote.join(", ")
            ),
            (false, _) => format!("the drives of {}", remote.join(", ")),
        };
        println!("  {what}: only the coordinator knows;");
        println!(
            "  `platter validate {} --coordinator URL` shows which hosts and drives it touches",
            file.display()
        );
        return Ok(0);
    }
    // No store plans here: the ids are never shown, and nothing runs.
    let planned = match planner::plan(&campaign, &local, "validate", 1, &inventories) {
        Ok(p) => p,
        Err(planner::PlanError::LocalWithoutRun) => {
            eprintln!(
                "error: {}: {}",
                file.display(),
                planner::PlanError::LocalWithoutRun
            );
            return Ok(EXIT_INVALID);
        }
        Err(e) => {
            eprintln!("error: {}:{e}", file.display());
            return Ok(EXIT_INVALID);
        }
    };
    print!("{}", crate::plan_text::render(&campaign, &planned));
    Ok(0)
}

async fn serve(opts: ServeOptions) -> anyhow::Result<i32> {
    if opts.tls.is_none() {
        tracing::warn!(
            "PLAINTEXT gRPC (--dangerously-insecure): anyone who can reach {} can submit campaigns and command every agent",
            opts.listen
        );
    }
    let shutdown = CancellationToken::new();
    let coordinator = Coordinator::start(opts, shutdown.clone()).await?;
    wait_for_signal().await;
    tracing::info!("shutting down; finishing in-flight writes");
    coordinator.stop().await;
    Ok(0)
}

/// `platter validate --coordinator …`: the coordinator expands the campaign against its
/// agents (labels, inventories) and returns the plan text; nothing is stored.
async fn validate_remote(
    file: &Path,
    client: &ClientArgs,
    max_file_size: u64,
) -> anyhow::Result<i32> {
    let yaml = match spec::read_file(file, max_file_size) {
        Ok(y) => y,
        Err(e) => {
            eprintln!("{e}");
            return Ok(EXIT_INVALID);
        }
    };
    let req = pb::SubmitRequest {
        file_name: file.display().to_string(),
        yaml,
        local_host: String::new(),
        resume: false,
    };
    match client.connect().await?.plan(req).await {
        Ok(r) => {
            print!("{}", r.into_inner().rendered);
            Ok(0)
        }
        Err(s) if s.code() == tonic::Code::InvalidArgument => {
            print_invalid(s.message());
            Ok(EXIT_INVALID)
        }
        Err(s) => Err(call_error("validate", s)),
    }
}

async fn wait_for_signal() {
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    match term {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Submits `yaml`, read from `file`; a campaign the coordinator refuses as invalid
/// (INVALID_ARGUMENT, with its mistakes) is the message to show.
async fn submit_file(
    client: &mut ControlClient<Channel>,
    file: &Path,
    yaml: String,
    local_host: &str,
    resume: bool,
) -> anyhow::Result<Result<pb::SubmitResponse, String>> {
    let req = pb::SubmitRequest {
        file_name: file.display().to_string(),
        yaml,
        local_host: local_host.into(),
        resume,
    };
    match client.submit(req).await {
        Ok(r) => Ok(Ok(r.into_inner())),
        Err(s) if s.code() == tonic::Code::InvalidArgument => Ok(Err(s.message().to_string())),
        Err(s) => Err(call_error("coordinator refused the campaign", s)),
    }
}

async fn submit(
    file: &Path,
    client: &ClientArgs,
    watch_it: bool,
    format: Format,
    max_file_size: u64,
) -> anyhow::Result<i32> {
    // The file is judged here first: one too large is never sent.
    let yaml = match spec::read_file(file, max_file_size) {
        Ok(y) => y,
        Err(e) => {
            eprintln!("{e}");
            return Ok(EXIT_INVALID);
        }
    };
    let mut client = client.connect().await?;
    let resp = match submit_file(&mut client, file, yaml, "", false).await? {
        Ok(r) => r,
        Err(msg) => {
            print_invalid(&msg);
            return Ok(EXIT_INVALID);
        }
    };
    println!("{}", resp.campaign_id);
    if !watch_it {
        return Ok(0);
    }
    operator::watch(&mut client, &resp.campaign_id).await?;
    let (rendered, failed) = report(&mut client, &resp.campaign_id, format).await?;
    print!("{rendered}");
    Ok(if failed > 0 { EXIT_FAILED_STEPS } else { 0 })
}

async fn report(
    client: &mut ControlClient<Channel>,
    campaign: &str,
    format: Format,
) -> anyhow::Result<(String, u32)> {
    let name = clap::ValueEnum::to_possible_value(&format)
        .expect("every format has a name")
        .get_name()
        .to_string();
    let r = client
        .report(pb::ReportRequest {
            campaign_id: campaign.into(),
            format: name,
        })
        .await
        .map_err(|s| call_error("report", s))?
        .into_inner();
    Ok((
        r.rendered,
        r.steps_failed
            + r.plans_refused
            + u32::from(r.qualification_failed)
            + r.measurements_missing
            + r.comparisons_not_made,
    ))
}

fn emit(rendered: &str, output: Option<&Path>, format: Format) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    match output {
        Some(p) => {
            std::fs::write(p, rendered).with_context(|| format!("writing {}", p.display()))?;
            eprintln!("report written to {}", p.display());
        }
        None => {
            let mut out = std::io::stdout().lock();
            let colour = format == Format::Table
                && out.is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
            let text = if colour {
                std::borrow::Cow::Owned(crate::report::table::colorize(rendered))
            } else {
                std::borrow::Cow::Borrowed(rendered)
            };
            match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                // Whoever read the report stopped (`platter run FILE | head`): nothing
                // is left to say, and `run` still stops its agent and coordinator.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                r => r?,
            }
        }
    }
    Ok(())
}

/// `emit` for an exporter that writes as it renders.
fn emit_with(
    output: Option<&Path>,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    match output {
        Some(p) => {
            let f = std::fs::File::create(p).with_context(|| format!("writing {}", p.display()))?;
            let mut out = std::io::BufWriter::new(f);
            write(&mut out)
                .and_then(|()| out.flush())
                .with_context(|| format!("writing {}", p.display()))?;
            eprintln!("report written to {}", p.display());
        }
        None => {
            let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            match write(&mut out).and_then(|()| out.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                r => r?,
            }
        }
    }
    Ok(())
}

/// Options of `platter run`.
struct LocalRun {
    db: PathBuf,
    state_dir: PathBuf,
    format: Format,
    output: Option<PathBuf>,
    junit: Option<PathBuf>,
    fresh: bool,
    reboot_command: String,
    allow_devices: Vec<String>,
    limits: spec::Limits,
}

async fn run_local(file: &Path, opts: LocalRun) -> anyhow::Result<i32> {
    let LocalRun {
        db,
        state_dir,
        format,
        output,
        junit,
        fresh,
        reboot_command,
        allow_devices,
        limits,
    } = opts;
    let (db, state_dir, output) = (db.as_path(), state_dir.as_path(), output.as_deref());
    // Invalid input is reported before anything starts.
    let campaign = match load_spec(file, &limits) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let host = platter_agent::cli::hostname();
    // An unfinished run of this campaign is looked up before the agent starts: the agent
    // takes up the plan it holds at once, and may end it (a plan whose storage is gone
    // fails fast) before a submission could ask, which would start the campaign anew.
    let unfinished = match (fresh, planner::content_hash(&campaign, &host)) {
        (false, Ok(hash)) => crate::store::Store::open(db)
            .with_context(|| format!("opening store {}", db.display()))?
            .resumable(&hash)?,
        _ => None,
    };
    let shutdown = CancellationToken::new();
    // Plaintext on loopback: the agent is this process.
    let serve = ServeOptions {
        limits,
        ..ServeOptions::plaintext(db, "127.0.0.1:0".parse()?)
    };
    let coordinator = Coordinator::start(serve, shutdown.clone()).await?;
    let agent_cfg = platter_agent::AgentConfig {
        coordinator: format!("http://{}", coordinator.addr),
        transport: Transport::Plaintext,
        labels: Vec::new(),
        host: host.clone(),
        state_dir: state_dir.to_path_buf(),
        boot_id_file: platter_agent::DEFAULT_BOOT_ID_FILE.into(),
        reboot_command,
        reboot_timeout: Duration::from_secs(600),
        allow_devices,
        mount_dir: None,
        inventory_interval: platter_agent::DEFAULT_INVENTORY_INTERVAL,
    };
    let agent_stop = shutdown.child_token();
    let agent = tokio::spawn(platter_agent::run(agent_cfg, agent_stop.clone()));

    let result = async {
        let url = format!("http://{}", coordinator.addr);
        let mut client = operator::connect(&url, &Transport::Plaintext).await?;
        // The plan needs this host's inventory, which arrives with the agent's hello.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let agents = client.list_agents(pb::ListAgentsRequest {}).await?.into_inner().agents;
            if agents.iter().any(|a| a.host == host && a.connected) {
                break;
            }
            if std::time::Instant::now() > deadline {
                anyhow::bail!("the local agent did not connect within 20 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let resp = match unfinished {
            Some(campaign_id) => pb::SubmitResponse {
                campaign_id,
                resumed: true,
            },
            None => match submit_file(&mut client, file, spec::read_file(file, limits.max_file_bytes)?, &host, !fresh).await? {
                Ok(r) => r,
                Err(msg) => {
                    print_invalid(&msg);
                    return Ok(EXIT_INVALID);
                }
            },
        };
        eprintln!(
            "{} campaign {} ({}): {} cell(s) × {} repetition(s) on {host}",
            if resp.resumed { "resuming" } else { "running" },
            campaign.name,
            resp.campaign_id,
            campaign.cells.len(),
            campaign.repeat
        );
        tokio::select! {
            r = operator::watch(&mut client, &resp.campaign_id) => { r?; }
            _ = tokio::signal::ctrl_c() => {
                eprintln!("interrupted: the campaign is kept in {}; run the same command again to resume", db.display());
                return Ok(130);
            }
        }
        let (rendered, failed) = report(&mut client, &resp.campaign_id, format).await?;
        emit(&rendered, output, format)?;
        if let Some(path) = &junit {
            let (xml, _) = report(&mut client, &resp.campaign_id, Format::Junit).await?;
            std::fs::write(path, xml).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(if failed > 0 { EXIT_FAILED_STEPS } else { 0 })
    }
    .await;

    agent_stop.cancel();
    match agent.await {
        Ok(Err(e)) => eprintln!("platter: agent: {e:#}"),
        Err(e) => eprintln!("platter: agent task: {e}"),
        Ok(Ok(())) => {}
    }
    coordinator.stop().await;
    result
}
