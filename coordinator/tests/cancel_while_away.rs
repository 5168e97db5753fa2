//! A plan cancelled while its agent was away — sent to it but not yet accepted — is no
//! host's current plan any more, so no dispatch names it again: the agent that comes back
//! holding it is told to cancel it in answer to its hello. (Before, it heard nothing and
//! ran the plan of a cancelled campaign.)

mod common;

use std::time::Duration;

use platter::service::server::{Coordinator, ServeOptions};
use platter_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Opens an AgentLink stream as host `h` holding `held`; returns the stream and the
/// sender that keeps it open.
async fn connect(
    url: &str,
    held: Vec<String>,
) -> (
    tonic::Streaming<pb::CoordinatorMessage>,
    mpsc::Sender<pb::AgentMessage>,
) {
    common::fake_link(url, common::fake_hello("h", "boot", held)).await
}

async fn next(
    inbound: &mut tonic::Streaming<pb::CoordinatorMessage>,
) -> pb::coordinator_message::Kind {
    tokio::time::timeout(Duration::from_secs(10), inbound.message())
        .await
        .expect("a message within 10 s")
        .unwrap()
        .expect("the stream is open")
        .kind
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_back_with_a_plan_cancelled_while_it_was_away_is_told_to_cancel_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let shutdown = CancellationToken::new();
    let coordinator = Coordinator::start(
        ServeOptions::plaintext(&db, "127.0.0.1:0".parse().unwrap()),
        shutdown.clone(),
    )
    .await
    .unwrap();
    let store = coordinator.store.clone();
    let yaml = "name: away\nhosts: { names: [h] }\nworkload: { command: { run: x } }\n";
    let campaign = platter::spec::parse("away.yaml", yaml).unwrap();
    let planned =
        platter::planning::planner::plan(&campaign, "", store.id(), 1, &Default::default())
            .unwrap();
    store.insert_campaign(&planned, "away.yaml", yaml).unwrap();
    let url = format!("http://{}", coordinator.addr);

    // The plan reaches the agent, which goes away before it accepts it.
    let (mut inbound, tx) = connect(&url, Vec::new()).await;
    let plan_id = match next(&mut inbound).await {
        pb::coordinator_message::Kind::Plan(p) => p.id,
        other => panic!("expected the plan, got {other:?}"),
    };
    drop((inbound, tx));
    // Cancelled meanwhile (through this coordinator or another one on the store: nobody
    // could tell the agent).
    store.cancel_campaign(&planned.id).unwrap();
    assert_eq!(
        store
            .cancelled_plans(&[plan_id.as_str().into()])
            .unwrap()
            .len(),
        1
    );

    // Back, holding it: the first thing it hears is the cancel, and no plan follows.
    let (mut inbound, _tx) = connect(&url, vec![plan_id.clone()]).await;
    match next(&mut inbound).await {
        pb::coordinator_message::Kind::Cancel(c) => assert_eq!(c.plan_id, plan_id),
        other => panic!("expected a cancel of {plan_id}, got {other:?}"),
    }
    let more = tokio::time::timeout(Duration::from_millis(500), inbound.message()).await;
    assert!(more.is_err(), "nothing else is sent: {more:?}");
    coordinator.stop().await;
}
