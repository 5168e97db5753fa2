//! `/metrics`: the coordinator's gauges and counters in Prometheus' text format
//! (OpenMetrics), read when scraped.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Ctx;
use crate::store::progress::StateCount;

pub(super) async fn metrics(State(ctx): State<Ctx>) -> Response {
    let store = ctx.store.clone();
    let counts = tokio::task::spawn_blocking(move || {
        Ok::<_, crate::store::StoreError>((store.plan_counts()?, store.campaign_counts()?))
    })
    .await;
    let counts = match counts {
        Ok(Ok(c)) => Some(c),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "metrics: the store's counts could not be read");
            None
        }
        Err(_) => None,
    };
    match render(&ctx, counts) {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
}

type Labels = Vec<(String, String)>;

/// A gauge family of `state` counts, every known state present (0 when none).
fn by_state(known: &[&str], counts: &[StateCount]) -> Family<Labels, Gauge> {
    let family = Family::<Labels, Gauge>::default();
    for state in known {
        let _ = family.get_or_create(&vec![("state".into(), (*state).into())]);
    }
    for c in counts {
        family
            .get_or_create(&vec![("state".into(), c.state.clone())])
            .set(c.count as i64);
    }
    family
}

fn render(
    ctx: &Ctx,
    counts: Option<(Vec<StateCount>, Vec<StateCount>)>,
) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::with_prefix("platter");

    let agents = Family::<Labels, Gauge>::default();
    let (connected, lost) = ctx.hub.presence_counts();
    for (presence, n) in [("connected", connected), ("lost", lost)] {
        agents
            .get_or_create(&vec![("presence".into(), presence.into())])
            .set(n as i64);
    }
    registry.register(
        "agents",
        "Agents whose stream this coordinator holds (connected) or lost past the heartbeat timeout",
        agents,
    );

    let fault = ctx.store.fault();
    let gauge = |v: bool| {
        let g = Gauge::<i64>::default();
        g.set(v as i64);
        g
    };
    registry.register(
        "store_fault",
        "1 while the store cannot commit or does not answer",
        gauge(fault.is_some()),
    );
    registry.register(
        "store_not_answering",
        "1 while the store does not answer at all",
        gauge(fault.as_ref().is_some_and(|f| f.not_answering)),
    );
    registry.register(
        "store_read_ok",
        "1 when this scrape could read the store's counts (plans, campaigns)",
        gauge(counts.is_some()),
    );
    if let Some((plans, campaigns)) = counts {
        registry.register(
            "plans",
            "Plans in the store by state",
            by_state(
                &["queued", "sent", "accepted", "done", "refused", "cancelled"],
                &plans,
            ),
        );
        registry.register(
            "campaigns",
            "Campaigns in the store by state",
            by_state(&["running", "done", "cancelled"], &campaigns),
        );
    }
    let mut text = String::new();
    encode(&mut text, &registry)?;
    Ok(text)
}
