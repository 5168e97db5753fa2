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
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

mod metrics;

use crate::service::hub::Hub;
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
        .route("/metrics", get(metrics::metrics))
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
