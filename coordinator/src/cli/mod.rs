//! The `platter` command line: one module per command or group of commands, each taking
//! its clap arguments (`args`) and returning the exit status. `run` below is the whole
//! dispatch.
//!
//! * `local`: `platter run` (a coordinator and an agent in this process, on loopback) and
//!   `platter serve`;
//! * `validate`: `platter validate`, and reading a campaign file for any command;
//! * `campaigns`: `submit`, `status`, `watch`, `cancel`;
//! * `fleet`: `agents`, `health`;
//! * `report`, `compare`, `history`: what was measured, from a store or a coordinator
//!   (`source` says which), written by `output`;
//! * `drives`: `drives`, `drive`, `qualification` (the drive ledger);
//! * `inventory`, `certs`, `schedules` (`schedule`, `trigger`), `users` (`users`,
//!   `tokens`), `db` (`migrate`, `backup`, `restore`); `lock` keeps one coordinator per
//!   SQLite store.
//!
//! Every `--format` and `--output` is a [`Format`], each command offering only the names
//! it can write; every listing's table is `report::table`.

mod args;
mod campaigns;
mod certs;
mod compare;
mod db;
mod drives;
mod flags;
mod fleet;
mod history;
mod inventory;
mod local;
mod lock;
mod output;
mod report;
mod schedules;
mod source;
mod users;
mod validate;

use crate::views::render_comparison;
pub use args::*;
use campaigns::submit_file;
use output::{emit, emit_with, rendered};
use source::{local_store, open_local};
use validate::{campaign_text, load_spec, print_invalid};

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

use crate::client::{self, call_error, ClientArgs};
use crate::planning::planner;
use crate::report::Format;
use crate::service::server::{Coordinator, ServeOptions};
use crate::spec;
use crate::store::accounts::AccountRole;

/// Exit status when a step failed (the report is still printed).
pub const EXIT_FAILED_STEPS: i32 = 1;

/// Exit status for invalid input (campaign file, flags).
pub const EXIT_INVALID: i32 = 2;
/// Exit status of `platter compare` when some cells could not be compared (no cell with
/// the same host and parameters in the other campaign, or no values of the metric) and
/// `--allow-unmatched` was not given; the comparison and the cells are still printed.
pub const EXIT_UNMATCHED: i32 = 3;
/// Exit status of `platter history --fail-on-regression` when the series' latest run has a
/// regression (the history is still printed).
pub const EXIT_REGRESSION: i32 = 4;

pub fn main() -> i32 {
    let cli = Cli::parse();
    // A command that only prints ends quietly when its stdout closes (`platter validate
    // FILE | head`), as `ls` does: the default SIGPIPE. Rust ignores SIGPIPE, and then
    // `println!` panics on EPIPE. Only commands that open no socket get it: a write to a
    // socket the peer reset raises SIGPIPE too, and killed `platter agents` silently
    // (no error, empty stderr) when a coordinator refused its plaintext (`tests/tls.rs`).
    // `run` treats a closed stdout in `emit`.
    let local_only = match &cli.command {
        Command::Validate(a) => a.client.coordinator.is_none(),
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
        Command::Run(_)
            | Command::Validate(_)
            | Command::Report(_)
            | Command::Inventory(_)
            | Command::Compare(_)
            | Command::History(_)
            | Command::Status(_)
            | Command::Watch(_)
            | Command::Agents(_)
            | Command::Cancel(_)
            | Command::Certs(_)
            | Command::Submit(_)
            | Command::Users(_)
            | Command::Flags(_)
            | Command::Flag(_)
            | Command::Alerts(_)
            | Command::Tokens(_)
            | Command::Schedule(_)
            | Command::Trigger(_)
            | Command::Drives(_)
            | Command::Drive(_)
            | Command::Qualification(_)
            | Command::Peers(_)
    );
    platter_agent::cli::init_tracing(if quiet { "warn" } else { "info" });
    // The commands that hold an agent keep its threads (under `run`, the coordinator's
    // too) off the workloads' CPUs before the runtime's threads start.
    let cpu = match &cli.command {
        Command::Run(a) => Some(a.cpu),
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
        Command::Run(a) => local::run_local(a).await,
        Command::Serve(a) => local::serve(a).await,
        Command::Validate(a) => validate::validate(a).await,
        Command::Submit(a) => campaigns::submit(a).await,
        Command::Status(a) => campaigns::status(a).await,
        Command::Watch(a) => campaigns::watch(a).await,
        Command::Cancel(a) => campaigns::cancel(a).await,
        Command::Agents(a) => fleet::agents(a).await,
        Command::Health(a) => fleet::health(a).await,
        Command::Report(a) => report::report(a).await,
        Command::Compare(a) => compare::compare(a).await,
        Command::History(a) => history::history(a).await,
        Command::Inventory(a) => inventory::inventory(a).await,
        Command::Drives(a) => drives::drives(a).await,
        Command::Drive(a) => drives::drive(a).await,
        Command::Qualification(a) => drives::qualification(a).await,
        Command::Peers(a) => drives::peers(a).await,
        Command::Schedule(c) => schedules::schedule(c).await,
        Command::Trigger(a) => schedules::trigger(a).await,
        Command::Certs(c) => certs::certs(c),
        Command::Db(c) => db::db(c).await,
        // Argon2 and the store block: off the runtime's workers.
        Command::Users(c) => tokio::task::spawn_blocking(move || users::users(c)).await?,
        Command::Flags(c) => flags::list(c).await,
        Command::Flag(c) => flags::set(c).await,
        Command::Alerts(c) => flags::alerts(c).await,
        Command::Tokens(c) => tokio::task::spawn_blocking(move || users::tokens(c)).await?,
        Command::Agent(args) => platter_agent::cli::run(args).await.map(|()| 0),
    }
}
