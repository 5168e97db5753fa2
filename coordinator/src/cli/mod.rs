//! The `platter` command line. Each subcommand reads as its pipeline: `run` is
//! load spec → start coordinator and agent → submit → watch → report.
//!
//! `args` holds the clap types; `local` runs a campaign on this machine (`platter run`)
//! and `platter serve`; `output` writes reports and comparisons; `inventory` is `platter
//! inventory`; `certs` is `platter certs`; `users` is `platter users` and `platter tokens`
//! (the console's accounts); `db` is `platter db` (migrate, backup, restore). This file
//! dispatches the commands and holds validate and submit.

mod args;
mod certs;
mod db;
mod drives;
mod inventory;
mod local;
mod lock;
mod output;
mod schedules;
mod users;

use crate::views::render_comparison;
pub use args::*;
use certs::certs;
use inventory::inventory;
use local::{run_local, serve};
use output::{emit, emit_with, report};
use schedules::{schedule, trigger};
use users::{tokens, users};

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use platter_proto::tls::{TlsDir, Transport};
use platter_proto::v1 as pb;
use platter_proto::v1::control_client::ControlClient;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

use crate::client::{self, call_error, ClientArgs, Output};
use crate::planning::planner;
use crate::report::Format;
use crate::service::server::{Coordinator, ServeOptions};
use crate::spec;
use crate::store::accounts::AccountRole;

/// Exit status when a step failed (the report is still printed).
pub const EXIT_FAILED_STEPS: i32 = 1;
/// `platter status CAMPAIGN` fails when a host refused the campaign's plan (nothing of it
/// ran there); the list of every campaign is only a listing.
fn status_exit(list: &[pb::CampaignStatus], one: bool) -> i32 {
    let refused = list
        .iter()
        .any(|c| c.hosts.iter().any(|h| !h.refused.is_empty()));
    if one && refused {
        EXIT_FAILED_STEPS
    } else {
        0
    }
}

/// Exit status for invalid input (campaign file, flags).
pub const EXIT_INVALID: i32 = 2;
/// Exit status of `platter compare` when some cells could not be compared (no cell with
/// the same host and parameters in the other campaign, or no values of the metric) and
/// `--allow-unmatched` was not given; the comparison and the cells are still printed.
pub const EXIT_UNMATCHED: i32 = 3;
/// Exit status of `platter history --fail-on-regression` when the series' latest run has a
/// regression (the history is still printed).
pub const EXIT_REGRESSION: i32 = 4;

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
            | Command::History { .. }
            | Command::Status { .. }
            | Command::Watch { .. }
            | Command::Agents { .. }
            | Command::Cancel { .. }
            | Command::Certs(_)
            | Command::Submit { .. }
            | Command::Users(_)
            | Command::Tokens(_)
            | Command::Schedule(_)
            | Command::Trigger { .. }
            | Command::Drives { .. }
            | Command::Drive { .. }
            | Command::Qualification { .. }
    );
    platter_agent::cli::init_tracing(if quiet { "warn" } else { "info" });
    // The commands that hold an agent keep its threads (under `run`, the coordinator's
    // too) off the workloads' CPUs before the runtime's threads start.
    let cpu = match &cli.command {
        Command::Run { run, .. } => Some(run.cpu),
        Command::Agent(args) => Some(args.cpu),
        _ => None,
    };
    if let Some(Err(e)) = cpu.map(|c| c.apply()) {
        eprintln!("platter: {}", error_chain(&e));
        return 1;
    }
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
            eprintln!("platter: {}", error_chain(&e));
            1
        }
    }
}

/// An error and its causes on one line, "what failed: why: why", leaving out a cause
/// whose words are already there (our errors name their cause in their own message,
/// and the cause is also their `source`).
pub fn error_chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let words = cause.to_string();
        if out.contains(&words) {
            continue;
        }
        if !out.is_empty() {
            out += ": ";
        }
        out += &words;
    }
    out
}

async fn run(command: Command) -> anyhow::Result<i32> {
    match command {
        Command::Run { file, run } => run_local(&file, run).await,
        Command::Validate {
            file,
            local_host,
            client,
            limits,
            set,
        } => {
            let text = match campaign_text(&file, limits.max_file_size, &set) {
                Ok(t) => t,
                Err(code) => return Ok(code),
            };
            if client.coordinator.is_some() {
                validate_remote(&file, text, &client).await
            } else {
                validate(&file, &text, local_host, &limits.into())
            }
        }
        Command::Serve {
            listen,
            db,
            tls_dir,
            dangerously_insecure: _,
            http,
            heartbeat_timeout,
            name,
            db_writers,
            store_deadline,
            exit_without_store,
            limits,
        } => {
            // Held while the coordinator serves: a second one on this SQLite file is
            // refused at once, naming this one.
            let _lock = match &db {
                crate::store::db::Location::Sqlite(path) => lock::take_store(path)?,
                crate::store::db::Location::Postgres(_) => None,
            };
            let opts = ServeOptions {
                db,
                listen,
                tls: tls_dir.map(TlsDir),
                heartbeat_timeout: Duration::from_secs(heartbeat_timeout),
                limits: limits.into(),
                name,
                db_writers: usize::from(db_writers),
                store_deadline: Duration::from_secs(store_deadline),
                wait_for_store: !exit_without_store,
                announce: None,
                http,
                fire_schedules: true,
            };
            serve(opts).await
        }
        Command::Submit {
            file,
            client,
            watch,
            format,
            max_file_size,
            set,
        } => {
            // The file is judged here first: one too large is never sent.
            let yaml = match campaign_text(&file, max_file_size, &set) {
                Ok(t) => t,
                Err(code) => return Ok(code),
            };
            submit(&file, yaml, &client, watch, format).await
        }
        Command::Status {
            campaign,
            db,
            client,
            output,
        } => {
            if let Some(db) = local_store(db, &client)? {
                let store = open_local(&db)?;
                // No agent is connected to a store read from a file: hosts show as offline.
                let hub = crate::service::hub::Hub::new(store.clone());
                use crate::service::status::CampaignStatus;
                let list: Vec<pb::CampaignStatus> = match &campaign {
                    Some(c) => vec![CampaignStatus::load(&store, &hub, c)?],
                    None => CampaignStatus::load_all(&store, &hub)?,
                }
                .into_iter()
                .map(Into::into)
                .collect();
                print!(
                    "{}",
                    client::render_status(&list, campaign.is_some(), output)
                );
                return Ok(status_exit(&list, campaign.is_some()));
            }
            let mut session = client.session()?;
            let list = match &campaign {
                Some(id) => {
                    let request = pb::GetCampaignRequest {
                        campaign_id: id.clone(),
                    };
                    vec![session
                        .call("status", |mut c| {
                            let r = request.clone();
                            async move { c.get_campaign(r).await }
                        })
                        .await?
                        .map_err(|s| call_error("status", s))?
                        .into_inner()]
                }
                None => {
                    let r = session
                        .call("status", |mut c| async move {
                            c.list_campaigns(pb::ListCampaignsRequest {}).await
                        })
                        .await?
                        .map_err(|s| call_error("status", s))?
                        .into_inner();
                    // Each campaign carries the store's fault; with none known, say it here.
                    if let (true, Some(f), Output::Table) =
                        (r.campaigns.is_empty(), &r.store_fault, output)
                    {
                        print!("{}", client::fault_line(f));
                        println!("No campaign is known to this coordinator while its store cannot be read.");
                    }
                    r.campaigns
                }
            };
            print!(
                "{}",
                client::render_status(&list, campaign.is_some(), output)
            );
            Ok(status_exit(&list, campaign.is_some()))
        }
        Command::Watch { campaign, client } => {
            let last = client::watch(&mut client.session()?, &campaign).await?;
            Ok(if last.steps_failed > 0 {
                EXIT_FAILED_STEPS
            } else {
                0
            })
        }
        Command::Db(c) => db::db(c).await,
        Command::Health { client } => {
            use tonic_health::pb::health_check_response::ServingStatus;
            let url = client.resolve()?.0.remove(0);
            let mut health =
                tonic_health::pb::health_client::HealthClient::new(client.channel().await?);
            let status = health
                .check(tonic_health::pb::HealthCheckRequest {
                    service: String::new(),
                })
                .await
                .map_err(|s| crate::client::call_error("asking the coordinator's health", s))?
                .into_inner()
                .status();
            if status == ServingStatus::Serving {
                println!("{url}: serving");
                return Ok(0);
            }
            // Why, in the coordinator's words: its store's fault.
            let why = match client
                .connect()
                .await?
                .list_agents(pb::ListAgentsRequest {
                    limit: 1,
                    ..Default::default()
                })
                .await
            {
                Ok(r) => r
                    .into_inner()
                    .store_fault
                    .map(|f| format!(": its store {}", crate::store::StoreFault::from(f).words())),
                // The store cannot even be read: the coordinator's own words.
                Err(s) => Some(format!(": {}", s.message())),
            };
            println!("{url}: NOT serving{}", why.unwrap_or_default());
            Ok(1)
        }
        Command::Agents {
            state,
            matching,
            all,
            client,
            output,
        } => {
            let whole = all || output == Output::Json;
            let request = pb::ListAgentsRequest {
                state: state.unwrap_or_default().replace('-', " "),
                r#match: matching.unwrap_or_default(),
                limit: if whole {
                    0
                } else {
                    client::AGENTS_LISTED as u32
                },
            };
            let mut agents = client
                .session()?
                .call("agents", |mut c| {
                    let r = request.clone();
                    async move { c.list_agents(r).await }
                })
                .await?
                .map_err(|s| call_error("agents", s))?
                .into_inner();
            // An older coordinator sends every agent: selected here.
            client::select_here(&mut agents, &request);
            print!("{}", client::render_agents(&agents, output));
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
        Command::Certs(c) => certs(c),
        Command::Schedule(c) => schedule(c).await,
        Command::Trigger {
            name,
            labels,
            client,
            format,
        } => trigger(name, labels, client, format).await,
        Command::Drives {
            model,
            firmware,
            host,
            failed,
            ledger,
        } => {
            let filter = crate::report::ledger::Filter {
                model,
                firmware,
                host,
                failed,
            };
            drives::ledger(crate::report::ledger::Question::Drives(filter), ledger).await
        }
        Command::Drive { id, ledger } => {
            drives::ledger(crate::report::ledger::Question::Drive(id), ledger).await
        }
        Command::Qualification {
            model,
            firmware,
            ledger,
        } => {
            if model.trim().is_empty() {
                eprintln!("platter: give the drive model to qualify (`platter drives` lists them)");
                return Ok(EXIT_INVALID);
            }
            let q = crate::report::ledger::Question::Qualification { model, firmware };
            drives::ledger(q, ledger).await
        }
        // Argon2 and the store block: off the runtime's workers.
        Command::Users(c) => tokio::task::spawn_blocking(move || users(c)).await?,
        Command::Tokens(c) => tokio::task::spawn_blocking(move || tokens(c)).await?,
        Command::Report {
            campaign,
            db,
            client,
            format,
            output,
            junit,
            fail_on_regression,
            regression_metric,
        } => {
            let db = local_store(db, &client)?;
            let render = async |format: Format| -> anyhow::Result<(String, u32)> {
                Ok(match &db {
                    Some(db) => {
                        let store = open_local(db)?;
                        let r = crate::report::Report::load_for(&store, &campaign, format)?;
                        (format.exporter().render(&r), r.problems())
                    }
                    None => report(&mut client.connect().await?, &campaign, format).await?,
                })
            };
            let failed = match &db {
                // From the store: written as it is rendered, never held whole (a JSON
                // report of every sample can be larger than the report's data).
                Some(db) if format != Format::Table => {
                    let store = open_local(db)?;
                    let r = crate::report::Report::load_for(&store, &campaign, format)?;
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
            let regressed = fail_on_regression
                && since_last_run(db.as_deref(), &client, &campaign, &regression_metric).await?;
            Ok(if failed > 0 {
                EXIT_FAILED_STEPS
            } else if regressed {
                EXIT_REGRESSION
            } else {
                0
            })
        }
        Command::Inventory {
            client,
            format,
            health,
        } => {
            if health {
                return inventory::health(&format);
            }
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
            let compared = match local_store(db, &client)? {
                Some(db) => {
                    use crate::report::judge::{check_side_host, compare_sides, split_side};
                    let store = open_local(&db)?;
                    let ((a_ref, a_host), (b_ref, b_host)) = (split_side(&a), split_side(&b));
                    let (ra, rb) = (
                        crate::report::Report::load(&store, a_ref)?,
                        crate::report::Report::load(&store, b_ref)?,
                    );
                    check_side_host(&ra, a_host).map_err(anyhow::Error::msg)?;
                    check_side_host(&rb, b_host).map_err(anyhow::Error::msg)?;
                    compare_sides((&ra, a_host), (&rb, b_host), &metric)
                }
                None => {
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
                    crate::service::rpc::control::comparison_from_pb(resp, &a, &b, &metric)
                }
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
        Command::History {
            series,
            db,
            client,
            metric,
            host,
            cells,
            last,
            threshold,
            format,
            fail_on_regression,
        } => {
            if let Some(t) = threshold.filter(|t| !(t.is_finite() && *t >= 0.0)) {
                eprintln!("platter: --threshold must be a percentage ≥ 0, not {t}");
                return Ok(EXIT_INVALID);
            }
            // The store when given or here, else the coordinator.
            let mut h = match local_store(db, &client)? {
                Some(db) => {
                    let store = open_local(&db)?;
                    let h = crate::report::history::History::load(
                        &store,
                        &series,
                        &metric,
                        host.as_deref(),
                        threshold,
                        last,
                        None,
                    )?;
                    if h.runs.is_empty() && h.left_out.is_empty() {
                        bail!("no series {series:?} in {}: no campaign has it as its `series:` or name", db.display());
                    }
                    h
                }
                None => {
                    let req = pb::HistoryRequest {
                        series: series.clone(),
                        metric: metric.clone(),
                        host: host.clone().unwrap_or_default(),
                        last: last.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
                        threshold_pct: threshold,
                        until: String::new(),
                    };
                    let asked = client
                        .session()?
                        .call("reading the history", |mut c| {
                            let r = req.clone();
                            async move { c.history(r).await }
                        })
                        .await?;
                    match asked {
                        Ok(r) => serde_json::from_str(&r.into_inner().history_json)
                            .context("reading the coordinator's history")?,
                        Err(s) if s.code() == tonic::Code::NotFound => {
                            eprintln!("platter: {}", s.message());
                            return Ok(EXIT_INVALID);
                        }
                        Err(s) => return Err(call_error("reading the history", s)),
                    }
                }
            };
            if !cells.is_empty() {
                // Only the lines whose cell has every KEY=VALUE asked for.
                h.lines.retain(|l| {
                    let have: Vec<&str> = l.cell.split(' ').collect();
                    cells.iter().all(|c| have.contains(&c.as_str()))
                });
                if h.lines.is_empty() {
                    eprintln!(
                        "platter: no cell of series {series:?} has {}",
                        cells.join(" ")
                    );
                    return Ok(EXIT_INVALID);
                }
            }
            if fail_on_regression {
                if let (Some(newest), Some(judged)) = (h.left_out.last(), h.runs.last()) {
                    eprintln!(
                        "the series' newest run {} is {}; judged the latest that ended, {}",
                        newest.campaign_id, newest.why, judged.campaign_id
                    );
                }
            }
            match format.as_str() {
                "json" => println!("{}", serde_json::to_string_pretty(&h)?),
                "csv" => print!("{}", crate::views::history_csv(&h)),
                _ => print!("{}", crate::views::render_history(&h)),
            }
            let regressed = h.latest_flags().iter().any(|(_, p)| {
                p.since_previous
                    .as_ref()
                    .is_some_and(|s| s.flag == crate::report::history::Flag::Regression)
            });
            Ok(if fail_on_regression && regressed {
                EXIT_REGRESSION
            } else {
                0
            })
        }
        Command::Agent(args) => platter_agent::cli::run(args).await.map(|()| 0),
    }
}

/// The campaign file's text (read only if it is at most `max_bytes` long) with the
/// `--set`s applied: what is validated, submitted and stored. Err: the exit status, the
/// reason printed.
fn campaign_text(file: &Path, max_bytes: u64, set: &SetArgs) -> Result<String, i32> {
    let text = spec::read_file(file, max_bytes).map_err(|e| {
        eprintln!("{e}");
        EXIT_INVALID
    })?;
    spec::set::apply(&text, &set.sets).map_err(|e| {
        eprintln!("error: {e}");
        EXIT_INVALID
    })
}

/// Every mistake, each on its own `error:` line (at most `spec::MAX_SHOWN`).
fn load_spec(file: &Path, text: &str, limits: &spec::Limits) -> Result<spec::Campaign, i32> {
    spec::parse_with(&file.display().to_string(), text, limits).map_err(|e| {
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

fn validate(
    file: &Path,
    text: &str,
    local_host: Option<String>,
    limits: &spec::Limits,
) -> anyhow::Result<i32> {
    let campaign = match load_spec(file, text, limits) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let local = local_host.unwrap_or_else(platter_agent::cli::hostname);
    // Only this machine's devices are known without a coordinator.
    let mut inventories = planner::Inventories::new();
    if campaign.devices.is_some() {
        inventories.insert(local.clone(), platter_agent::scan_inventory()?);
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
  {} cell(s) × {}",
            campaign.name,
            campaign.cells.len(),
            campaign.repetitions_text()
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
    print!("{}", crate::planning::text::render(&campaign, &planned));
    Ok(0)
}

/// `platter validate --coordinator …`: the coordinator expands the campaign against its
/// agents (labels, inventories) and returns the plan text; nothing is stored.
async fn validate_remote(file: &Path, yaml: String, client: &ClientArgs) -> anyhow::Result<i32> {
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
    yaml: String,
    client: &ClientArgs,
    watch_it: bool,
    format: Format,
) -> anyhow::Result<i32> {
    let mut session = client.session()?;
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
    client::watch(&mut session, &resp.campaign_id).await?;
    let mut client = session.connect().await?;
    let (rendered, failed) = report(&mut client, &resp.campaign_id, format).await?;
    print!("{rendered}");
    Ok(if failed > 0 { EXIT_FAILED_STEPS } else { 0 })
}

/// The store `platter run` writes in the directory it runs in.
const LOCAL_STORE: &str = "platter-data/platter.db";

/// Where `report`, `compare` and `status` read: `--db` if given; else the coordinator, if
/// one is named (flag, environment or client file); else the store `platter run` left
/// here. `None` means the coordinator.
fn local_store(
    db: Option<std::path::PathBuf>,
    client: &client::ClientArgs,
) -> anyhow::Result<Option<std::path::PathBuf>> {
    if db.is_some() || client.names_a_coordinator() {
        return Ok(db);
    }
    let local = std::path::PathBuf::from(LOCAL_STORE);
    if local.exists() {
        return Ok(Some(local));
    }
    anyhow::bail!(
        "nothing to read: no {LOCAL_STORE} here (`platter run` writes it in the directory it \
         runs in) and no coordinator named; pass --db FILE, or --coordinator URL \
         (PLATTER_COORDINATOR, or `coordinator = \"…\"` in ~/.config/platter/client.toml)"
    )
}

/// `platter report RUN --fail-on-regression`: the run against the run before it in its
/// series on `metric`, said on stderr; whether it regressed. From the store when given,
/// else from the coordinator.
async fn since_last_run(
    db: Option<&std::path::Path>,
    client: &ClientArgs,
    campaign: &str,
    metric: &str,
) -> anyhow::Result<bool> {
    use crate::report::history::{Flag, History};
    let (h, id): (History, String) = match db {
        Some(db) => {
            let store = open_local(db)?;
            // Its id only: the report itself was read (and printed) already.
            let id = store
                .read(|c| crate::store::resolve_campaign(c, campaign))?
                .to_string();
            let h = History::load(&store, campaign, metric, None, None, Some(2), Some(&id))?;
            (h, id)
        }
        None => {
            let req = pb::HistoryRequest {
                series: campaign.into(),
                metric: metric.into(),
                last: Some(2),
                until: campaign.into(),
                ..Default::default()
            };
            let r = client
                .connect()
                .await?
                .history(req)
                .await
                .map_err(|s| call_error("reading the run's series", s))?
                .into_inner();
            let h = serde_json::from_str(&r.history_json)
                .context("reading the coordinator's history")?;
            (h, r.until_id)
        }
    };
    let Some(at) = h.runs.iter().position(|r| r.campaign_id == id) else {
        eprintln!(
            "since the run before: {} ({}) has not ended: not judged",
            h.series, id
        );
        return Ok(false);
    };
    if at == 0 {
        eprintln!(
            "since the run before: {} is the first run of {} that ended: nothing to judge against",
            id, h.series
        );
        return Ok(false);
    }
    let flags: Vec<(
        &crate::report::history::Line,
        &crate::report::history::Since,
    )> = h
        .lines
        .iter()
        .filter_map(|l| {
            let p = l.points.iter().find(|p| p.campaign_id == id)?;
            let s = p.since_previous.as_ref()?;
            (s.flag != Flag::None).then_some((l, s))
        })
        .collect();
    let before = &h.runs[at - 1].campaign_id;
    if flags.is_empty() {
        eprintln!("since the run before ({before}), on {metric}: nothing flagged");
    }
    for (l, s) in &flags {
        eprintln!(
            "since the run before, on {metric}: {} {} {}: {}",
            s.flag.word(),
            l.host,
            l.cell,
            s.summary()
        );
    }
    Ok(flags.iter().any(|(_, s)| s.flag == Flag::Regression))
}

/// A store a command opens to read it (status, reports, history): one record writer, since
/// no agent's records come through it (a PostgreSQL store's several would be connections
/// and threads for nothing). An SQLite file must exist: a mistyped path would otherwise
/// become a new, empty store, and the command would say only that nothing is in it.
fn open_local(db: &std::path::Path) -> anyhow::Result<crate::store::Store> {
    let location = crate::store::db::Location::from_arg(db);
    if let crate::store::db::Location::Sqlite(path) = &location {
        if !path.exists() {
            bail!(
                "no store at {}: `platter run` writes {LOCAL_STORE} in the directory it runs in, \
                 a coordinator the file it was given with --db",
                path.display()
            );
        }
    }
    Ok(crate::store::Store::open_with_writers(&location, 1)?)
}
