//! A coordinator renders a report that takes seconds while 100 agents heartbeat and
//! operators ask for status: no agent is declared lost, and status and acks answer at
//! once. Before, a report held the store's only connection for its whole length, and
//! status, dispatch and hellos waited for it on the async workers that also carry every
//! agent's stream.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pb::control_client::ControlClient;
use platter::service::server::{Coordinator, ServeOptions};
use platter::store::Store;
use platter_proto::model::{Sample, StepKind};
use platter_proto::v1 as pb;
use tokio_util::sync::CancellationToken;

const AGENTS: usize = 100;
const HEARTBEAT: Duration = Duration::from_millis(250);
/// Four missed heartbeats: a worker stalled by the report for longer loses agents.
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(1);

/// A campaign of 200 cells × 600 repetitions with five metrics each, stored as if measured:
/// 600,000 samples, whose report takes seconds (300,000 took 1.4 s on a quiet machine,
/// too close to the timeout this test must outlast).
async fn fill(store: &Store) -> String {
    let yaml = "name: big\nhosts: { names: [h] }\nmatrix: { x: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] , y: [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s, t] }\nworkload: { command: { run: \"x ${x} ${y}\" } }\nrepeat: 600\n";
    let campaign = platter::spec::parse("big.yaml", yaml).unwrap();
    let planned =
        platter::planning::planner::plan(&campaign, "", store.id(), 1, &Default::default())
            .unwrap();
    store.insert_campaign(&planned, "big.yaml", yaml).unwrap();
    let plan = &planned.plans[0];
    let mut records = Vec::new();
    let measures = plan
        .steps
        .iter()
        .filter(|s| matches!(s.kind, StepKind::Measure(_)));
    for (i, step) in measures.enumerate() {
        let samples = ["wall", "user", "sys", "max_rss", "block_write"]
            .iter()
            .enumerate()
            .map(|(m, metric)| Sample {
                metric: metric.to_string(),
                value: 1.0 + ((i * 7919 + m * 104729) % 1000) as f64 / 1000.0,
                unit: "s".into(),
                histogram: Vec::new(),
                missing: String::new(),
            })
            .collect();
        records.push(common::measured(
            i as u64 + 1,
            &plan.id,
            step,
            1_000 + i as i64,
            samples,
        ));
    }
    store.write_records(&"h".into(), records).await.unwrap();
    planned.id.into_string()
}

/// A fake agent: says hello, then heartbeats until `stop`; counts a stream the
/// coordinator ended as dropped.
async fn agent(url: String, i: usize, stop: CancellationToken, dropped: Arc<AtomicUsize>) {
    let hello = common::fake_hello(&format!("f{i:03}"), &format!("boot-{i}"), Vec::new());
    let (mut inbound, tx) = common::fake_link(&url, hello).await;
    let mut tick = tokio::time::interval(HEARTBEAT);
    loop {
        tokio::select! {
            m = inbound.message() => {
                if !matches!(m, Ok(Some(_))) {
                    if !stop.is_cancelled() {
                        dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    return;
                }
            }
            _ = tick.tick() => {
                let hb = pb::Heartbeat { current_plan_id: String::new(), current_step_index: 0, journal_fault: String::new() };
                let m = pb::AgentMessage { kind: Some(pb::agent_message::Kind::Heartbeat(hb)) };
                if tx.send(m).await.is_err() {
                    dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
            _ = stop.cancelled() => return,
        }
    }
}

#[test]
fn a_long_report_stalls_no_heartbeat_status_or_hello() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    // The coordinator on a runtime of its own with two workers, as on a 2-core host.
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let shutdown = CancellationToken::new();
    let (coordinator, campaign) = server_rt.block_on(async {
        let campaign = fill(&Store::open(&db).unwrap()).await;
        let mut opts = ServeOptions::plaintext(&db, "127.0.0.1:0".parse().unwrap());
        opts.heartbeat_timeout = HEARTBEAT_TIMEOUT;
        let c = Coordinator::start(opts, shutdown.clone()).await.unwrap();
        (c, campaign)
    });
    let url = format!("http://{}", coordinator.addr);

    // The fleet and the operators on another runtime.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let stop = CancellationToken::new();
        let dropped = Arc::new(AtomicUsize::new(0));
        let agents: Vec<_> = (0..AGENTS)
            .map(|i| tokio::spawn(agent(url.clone(), i, stop.clone(), dropped.clone())))
            .collect();
        let mut control = ControlClient::connect(url.clone()).await.unwrap();
        let connected =
            |c: &pb::ListAgentsResponse| c.agents.iter().filter(|a| a.state == "idle").count();
        let t0 = Instant::now();
        loop {
            let list = control
                .list_agents(pb::ListAgentsRequest::default())
                .await
                .unwrap()
                .into_inner();
            if connected(&list) == AGENTS {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "agents did not connect"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        // The report, in HTML (every chart), while status is asked for every 100 ms.
        let report = {
            let mut c = control.clone();
            let campaign = campaign.clone();
            tokio::spawn(async move {
                let t = Instant::now();
                let r = c
                    .report(pb::ReportRequest {
                        campaign_id: campaign,
                        // As a client older than `report_format` asks.
                        format: "html".into(),
                        ..Default::default()
                    })
                    .await
                    .unwrap()
                    .into_inner();
                (t.elapsed(), r.rendered.len())
            })
        };
        let mut slowest = Duration::ZERO;
        let mut asked = 0;
        while !report.is_finished() {
            let t = Instant::now();
            let s = control
                .get_campaign(pb::GetCampaignRequest {
                    campaign_id: campaign.clone(),
                })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(s.steps_done, s.steps_total);
            slowest = slowest.max(t.elapsed());
            asked += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (took, bytes) = report.await.unwrap();
        eprintln!(
            "report: {took:?}, {bytes} bytes; {asked} status calls meanwhile, slowest {slowest:?}"
        );
        // Otherwise this proves nothing: the report must outlast the heartbeat timeout.
        assert!(
            took > HEARTBEAT_TIMEOUT * 3 / 2,
            "the report took only {took:?}; make it bigger"
        );
        // Before, the first status call waited for the whole report (one call, as slow as
        // the report); how fast a call is on a loaded 2-core machine is not the point.
        assert!(
            asked >= 3 && slowest < took / 2,
            "status waited {slowest:?} for the report ({asked} calls in {took:?})"
        );

        let list = control
            .list_agents(pb::ListAgentsRequest::default())
            .await
            .unwrap()
            .into_inner();
        let not_idle: Vec<_> = list
            .agents
            .iter()
            .filter(|a| a.state != "idle")
            .map(|a| format!("{} {}", a.host, a.state))
            .collect();
        assert!(not_idle.is_empty(), "agents declared lost: {not_idle:?}");
        assert_eq!(dropped.load(Ordering::Relaxed), 0, "streams ended");
        stop.cancel();
        for a in agents {
            a.await.unwrap();
        }
    });

    // Every sample, as JSON through the coordinator: ~100 MB, far past gRPC's default
    // 4 MiB message limit that made such reports fail.
    let out = common::run_ok(
        common::platter()
            .args([
                "report",
                &campaign,
                "--format",
                "json",
                "--dangerously-insecure",
            ])
            .args(["--coordinator", &url]),
    );
    eprintln!(
        "json report through the coordinator: {} bytes",
        out.stdout.len()
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let samples: usize = json["cells"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["metrics"].as_array().unwrap())
        .map(|m| m["samples"].as_array().unwrap().len())
        .sum();
    assert_eq!(samples, 600_000);
    shutdown.cancel();
    drop(coordinator);
}
