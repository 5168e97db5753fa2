//! `platter-agent`: runs on each test host; see `platter_agent::cli`.

use clap::Parser;

/// platter's agent: runs the plans a platter coordinator sends to this host.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    agent: platter_agent::cli::AgentArgs,
}

fn main() {
    platter_agent::cli::init_tracing("info");
    let cli = Cli::parse();
    // Before the runtime: its threads, the executor's and the blocking pool's inherit it.
    let started = cli.agent.cpu.apply().and_then(|()| {
        // One thread is plenty: the link is one task, and the executor has an OS thread of
        // its own.
        Ok(tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?)
    });
    let result = started.and_then(|rt| rt.block_on(platter_agent::cli::run(cli.agent)));
    if let Err(e) = result {
        eprintln!("platter-agent: {e:#}");
        std::process::exit(1);
    }
}
