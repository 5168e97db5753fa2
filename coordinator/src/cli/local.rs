//! `platter run` (a coordinator and an agent in this process, on loopback) and `platter
//! serve`.

use super::*;

pub(super) async fn serve(a: ServeArgs) -> anyhow::Result<i32> {
    let ServeArgs {
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
        public_url,
        host_offline_alert_after,
    } = a;
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
        public_url: public_url.unwrap_or_default(),
        host_grace: host_offline_alert_after.into(),
        alerts: true,
    };
    serve_with(opts).await
}

async fn serve_with(mut opts: ServeOptions) -> anyhow::Result<i32> {
    if opts.tls.is_none() {
        tracing::warn!(
            "PLAINTEXT gRPC (--dangerously-insecure): anyone who can reach {} can submit campaigns and command every agent",
            opts.listen
        );
    }
    let shutdown = CancellationToken::new();
    // For scripts and tests: the address bound, the port too with `--listen HOST:0`, once
    // it serves or, if its store is not there yet, once it listens and waits for it.
    let (announce, listening) = tokio::sync::oneshot::channel();
    opts.announce = Some(announce);
    let http_scheme = if opts.tls.is_some() { "https" } else { "http" };
    tokio::spawn(async move {
        if let Ok(addr) = listening.await {
            eprintln!("listening on {addr}");
        }
    });
    let coordinator = tokio::select! {
        c = Coordinator::start(opts, shutdown.clone()) => c?,
        _ = wait_for_signal() => {
            tracing::info!("stopped while waiting for the store");
            shutdown.cancel();
            return Ok(0);
        }
    };
    if let Some(at) = coordinator.http {
        eprintln!("http on {http_scheme}://{at}");
    }
    wait_for_signal().await;
    tracing::info!("shutting down; finishing in-flight writes");
    coordinator.stop().await;
    Ok(0)
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

/// The agent of `platter run`: this host's, on the coordinator at `addr` in this process,
/// over plaintext loopback.
fn local_agent(addr: SocketAddr, host: &str, state_dir: &Path) -> platter_agent::AgentConfig {
    platter_agent::AgentConfig {
        coordinators: vec![format!("http://{addr}")],
        transport: Transport::Plaintext,
        labels: Vec::new(),
        host: host.to_string(),
        state_dir: state_dir.to_path_buf(),
        boot_id_file: platter_agent::DEFAULT_BOOT_ID_FILE.into(),
        reboot_command: String::new(),
        reboot_timeout: Duration::from_secs(600),
        allow_devices: Vec::new(),
        allow_purge: false,
        mount_dir: None,
        inventory_interval: platter_agent::DEFAULT_INVENTORY_INTERVAL,
    }
}

pub(super) async fn run_local(opts: RunArgs) -> anyhow::Result<i32> {
    let RunArgs {
        file,
        db,
        state_dir,
        format,
        output,
        junit,
        fresh,
        reboot_command,
        allow_devices,
        allow_purge,
        limits,
        set,
        cpu: _,
    } = opts;
    let limits = spec::Limits::from(limits);
    let file = file.as_path();
    let (db, state_dir, output) = (db.as_path(), state_dir.as_path(), output.as_deref());
    // Invalid input is reported before anything starts. The text read (with `--set`
    // applied) is the text submitted: what the store keeps is what this run checked.
    let text = match campaign_text(file, limits.max_file_bytes, &set) {
        Ok(t) => t,
        Err(code) => return Ok(code),
    };
    let campaign = match load_spec(file, &text, &limits) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    // Before the store is opened: a second run here must not touch what the first holds.
    let _locks = (
        lock::take(db, &format!("{} (the store)", db.display()))?,
        lock::take(
            state_dir,
            &format!("{} (the agent's state)", state_dir.display()),
        )?,
    );
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
        reboot_command,
        allow_devices,
        allow_purge,
        ..local_agent(coordinator.addr, &host, state_dir)
    };
    let agent_stop = shutdown.child_token();
    let mut agent = tokio::spawn(platter_agent::run(agent_cfg, agent_stop.clone()));
    // Set when the agent ended before the campaign did (then it is not awaited again):
    // the run ends at once with the agent's error instead of waiting on a host that will
    // never connect or never finish.
    let mut agent_ended = false;

    let result = async {
        let url = format!("http://{}", coordinator.addr);
        let mut client = client::connect(&url, &Transport::Plaintext).await?;
        // The watch rides out the store's bad moments (a full disk) as a fleet's does.
        let mut session = client::Session::new(
            vec![url.clone()],
            Transport::Plaintext,
            client::DEFAULT_RETRY_FOR,
        );
        // The plan needs this host's inventory, which arrives with the agent's hello.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let agents = client.list_agents(pb::ListAgentsRequest::default()).await?.into_inner().agents;
            if agents.iter().any(|a| a.host == host && a.connected) {
                break;
            }
            if std::time::Instant::now() > deadline {
                anyhow::bail!("the local agent did not connect within 20 s");
            }
            tokio::select! {
                ended = &mut agent => {
                    agent_ended = true;
                    return Err(agent_stopped(ended, state_dir));
                }
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        }
        let resp = match unfinished {
            Some(campaign_id) => pb::SubmitResponse {
                campaign_id: campaign_id.into_string(),
                resumed: true,
            },
            None => match submit_file(&mut client, file, text, &host, !fresh).await? {
                Ok(r) => r,
                Err(msg) => {
                    print_invalid(&msg);
                    return Ok(EXIT_INVALID);
                }
            },
        };
        eprintln!(
            "{} campaign {} ({}): {} cell(s) × {} on {host}",
            if resp.resumed { "resuming" } else { "running" },
            campaign.name,
            resp.campaign_id,
            campaign.cells.len(),
            campaign.repetitions_text()
        );
        tokio::select! {
            r = client::watch(&mut session, &resp.campaign_id) => { r?; }
            ended = &mut agent => {
                agent_ended = true;
                return Err(agent_stopped(ended, state_dir));
            }
            _ = tokio::signal::ctrl_c() => {
                eprintln!("interrupted: the campaign is kept in {}; run the same command again to resume", db.display());
                return Ok(130);
            }
        }
        let (text, failed) = rendered(&mut client, &resp.campaign_id, format).await?;
        emit(&text, output, format)?;
        if let Some(path) = &junit {
            let (xml, _) = rendered(&mut client, &resp.campaign_id, Format::Junit).await?;
            std::fs::write(path, xml).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(if failed > 0 { EXIT_FAILED_STEPS } else { 0 })
    }
    .await;

    agent_stop.cancel();
    if !agent_ended {
        match agent.await {
            Ok(Err(e)) => eprintln!("platter: agent: {e:#}"),
            Err(e) => eprintln!("platter: agent task: {e}"),
            Ok(Ok(())) => {}
        }
    }
    coordinator.stop().await;
    result
}

/// The error of a `platter run` whose agent ended before its campaign: the agent's own
/// error and, when it was its journal (a full or read-only state directory), what to do.
/// Nothing is lost: what was journaled stays in `state_dir`, the campaign in the store,
/// and the same command takes both up again.
fn agent_stopped(
    ended: Result<anyhow::Result<()>, tokio::task::JoinError>,
    state_dir: &Path,
) -> anyhow::Error {
    let e = match ended {
        Ok(Ok(())) => return anyhow::anyhow!("the local agent stopped"),
        Ok(Err(e)) => e,
        Err(e) => return anyhow::anyhow!("the local agent stopped: {e}"),
    };
    let dir = state_dir.display();
    let todo = match platter_agent::journal_fault(&e) {
        None => return anyhow::anyhow!("the local agent stopped: {}", error_chain(&e)),
        Some(platter_agent::JournalFault::Full) => format!("free space in {dir}"),
        Some(platter_agent::JournalFault::ReadOnly) => format!("make {dir} writable"),
        Some(platter_agent::JournalFault::Other) => format!("fix {dir}"),
    };
    anyhow::anyhow!(
        "the local agent stopped: {}; {todo} or give --state-dir elsewhere, then run again — nothing is lost",
        error_chain(&e)
    )
}
