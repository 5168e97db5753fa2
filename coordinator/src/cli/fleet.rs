//! The fleet as a coordinator sees it: `agents`, and `health` (whether it serves).

use super::*;

pub(super) async fn agents(a: AgentsArgs) -> anyhow::Result<i32> {
    let AgentsArgs {
        state,
        matching,
        all,
        client,
        output,
    } = a;
    let whole = all || output == Format::Json;
    let state = state.unwrap_or_default().replace('-', " ");
    let request = pb::ListAgentsRequest {
        state_filter: crate::views::state_of_word(&state) as i32,
        // The words too, for coordinators older than `state_filter`.
        state,
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

pub(super) async fn health(a: HealthArgs) -> anyhow::Result<i32> {
    use tonic_health::pb::health_check_response::ServingStatus;
    let client = a.client;
    let url = client.resolve()?.0.remove(0);
    let mut health = tonic_health::pb::health_client::HealthClient::new(client.channel().await?);
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
