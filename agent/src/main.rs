//! `platter-agent`: runs on each test host; see `platter_agent::cli`.

use clap::Parser;

/// platter's agent: runs the plans a platter coordinator sends to this host.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    agent: platter_agent::cli::AgentArgs,
}

// One thread is plenty: the link is one task, and the executor has an OS thread of its own.
#[tokio::main(flavor = "current_thread")]
async fn main() {
    platter_agent::cli::init_tracing("info");
    let cli = Cli::parse();
    if let Err(e) = platter_agent::cli::run(cli.agent).await {
        eprintln!("platter-agent: {e:#}");
        std::process::exit(1);
    }
}
