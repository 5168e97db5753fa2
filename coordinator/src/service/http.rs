//! The coordinator's HTTP side (`platter serve --http ADDR`): `/healthz` (the process
//! serves), `/readyz` (the store answers and commits; 503 with the reason while it does
//! not, as the gRPC health service says NOT_SERVING) and `/metrics` in Prometheus' text
//! format, for load balancers, dashboards and alerts. The fleet console (issue 29) is to
//! be served here too.
//!
//! Plaintext HTTP: allowed on a loopback address, elsewhere only when the operator says
//! `--dangerously-insecure` (HTTPS with the coordinator's certificate comes with the
//! console). Metrics are read when scraped: the hub's agents at once, the store's counts
//! off the async workers; while the store cannot be read, the scrape still answers with
//! what needs no store, and `platter_store_read_ok` is 0.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::service::hub::Hub;
use crate::store::progress::StateCount;
use crate::store::Store;

/// Why `addr` may not carry plaintext HTTP, if it may not: only loopback unless the
/// operator accepted an insecure one.
pub fn refuse_plaintext(addr: SocketAddr, dangerously_insecure: bool) -> Option<String> {
    (!addr.ip().is_loopback() && !dangerously_insecure).then(|| {
        format!(
            "--http {addr}: plaintext HTTP is served only on a loopback address (127.0.0.1:PORT, \
             [::1]:PORT), since anyone who reaches it reads the fleet; HTTPS is not built yet: \
             use a loopback address behind a TLS proxy, or say --dangerously-insecure"
        )
    })
}

#[derive(Clone)]
struct Ctx {
    store: Store,
    hub: Arc<Hub>,
}

/// Serves `/healthz`, `/readyz` and `/metrics` on `listener` until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    store: Store,
    hub: Arc<Hub>,
    shutdown: CancellationToken,
) {
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(Ctx { store, hub });
    let r = axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await;
    if let Err(e) = r {
        tracing::error!(error = %e, "HTTP server failed");
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(ctx): State<Ctx>) -> (StatusCode, String) {
    match ctx.store.fault() {
        None => (StatusCode::OK, "ready\n".into()),
        Some(f) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: the store {}\n", f.words()),
        ),
    }
}

async fn metrics(State(ctx): State<Ctx>) -> Response {
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
