//! The coordinator's HTTP side (`platter serve --http ADDR`): the fleet console (pages
//! for people, readable with JavaScript off and live with it), its JSON twin under
//! `/api/v1/`, `/healthz` (the process serves), `/readyz` (the store answers and commits;
//! 503 with the reason while it does not, as the gRPC health service says NOT_SERVING) and
//! `/metrics` in Prometheus' text format, for load balancers, dashboards and alerts.
//!
//! The console asks who is signed in (`auth`): accounts with roles, sessions and API
//! tokens live in the store. Its data comes from the Control service, called in this
//! process (`fleet`), so it says what `platter status` and `platter agents` say. Every
//! response carries a Content-Security-Policy that allows only the console's own script
//! and style; nothing is loaded from elsewhere (`assets/` is inside the binary).
//!
//! With `--tls-dir`, HTTPS with the coordinator's certificate (cookies then `Secure`);
//! plaintext HTTP only where gRPC is plaintext too, which the operator asked for with
//! `--dangerously-insecure`. Metrics are read when scraped: the hub's agents at once, the
//! store's counts off the async workers; while the store cannot be read, the scrape still
//! answers with what needs no store, and `platter_store_read_ok` is 0.

use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

mod admin;
mod alerts;
mod api;
mod auth;
mod console;
mod flags;
mod fleet;
mod layout;
mod live;
mod metrics;
mod models;
mod page;

use crate::service::hub::Hub;
use crate::service::rpc::control::ControlService;
use crate::store::Store;

#[derive(Clone)]
struct Ctx {
    store: Store,
    hub: Arc<Hub>,
    control: Arc<ControlService>,
    /// Served over HTTPS: cookies are `Secure`.
    https: bool,
    failures: Arc<auth::Failures>,
    verdicts: Arc<fleet::Verdicts>,
    /// Each series' latest flags, by the run's campaign id.
    series_flags: Arc<fleet::SeriesFlags>,
    /// The fleet's agents and campaigns, each read once for the requests that wait for it.
    reads: Arc<fleet::Reads>,
    /// Live pages' `<main>` as last rendered, one rendering for every open page alike.
    renders: Arc<live::Renders>,
    /// Moves when a live page should look again (`live::pulse`).
    pulse: watch::Sender<u64>,
    /// Live pages open now (their event streams).
    console_clients: Arc<AtomicUsize>,
    /// Who this coordinator is and its public address: the admin's test messages are
    /// sent from here as its alerts are (`alerts`).
    alerts: Arc<crate::service::alerts::Alerts>,
    shutdown: CancellationToken,
}

/// The console's policy: its own script and style, nothing inline, nothing from elsewhere,
/// not framed.
const CONSOLE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The HTML report's policy: its inline style and SVG, and its one script by hash.
fn report_policy() -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let hash = sha2::Sha256::digest(crate::report::html::SORT_SCRIPT.as_bytes());
    format!(
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{}'; form-action 'none'; frame-ancestors 'self'; base-uri 'none'",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
}

/// Serves the console, its API, `/healthz`, `/readyz` and `/metrics` on `listener` until
/// `shutdown`: over HTTPS with `tls` (the coordinator's certificate), else plaintext.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    store: Store,
    hub: Arc<Hub>,
    control: Arc<ControlService>,
    alerts: Arc<crate::service::alerts::Alerts>,
    shutdown: CancellationToken,
) {
    let (pulse, _) = watch::channel(0u64);
    tokio::spawn(live::pulse(
        store.clone(),
        hub.clone(),
        pulse.clone(),
        shutdown.clone(),
    ));
    let ctx = Ctx {
        store,
        hub,
        control,
        https: tls.is_some(),
        failures: Default::default(),
        verdicts: Default::default(),
        series_flags: Default::default(),
        renders: Default::default(),
        reads: Default::default(),
        pulse,
        console_clients: Default::default(),
        alerts,
        shutdown: shutdown.clone(),
    };
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics::metrics))
        .route("/assets/console.css", get(css))
        .route("/assets/console.js", get(js))
        .route("/login", get(auth::login_form).post(auth::login))
        .route("/logout", post(auth::logout))
        .route("/", get(console::overview))
        .route("/hosts", get(console::hosts))
        .route("/hosts/{name}", get(console::host))
        .route("/campaigns", get(console::campaigns))
        .route("/campaigns/{id}", get(console::campaign))
        .route("/campaigns/{id}/cancel", post(console::cancel))
        .route("/campaigns/{id}/{file}", get(console::report))
        .route("/compare", get(console::compare))
        .route("/series/{name}", get(console::series))
        .route("/drives", get(console::drives))
        .route("/drives/{id}", get(console::drive))
        .route("/models/{model}", get(console::model))
        .route("/submit", get(console::submit_page).post(console::submit))
        .route("/flags", get(console::flags))
        .route("/flags/{id}", get(console::flag).post(flags::set_state))
        .route("/admin", get(admin::page))
        .route("/admin/accounts", post(admin::add_account))
        .route("/admin/accounts/{name}/role", post(admin::set_role))
        .route("/admin/accounts/{name}/password", post(admin::set_password))
        .route("/admin/accounts/{name}/remove", post(admin::remove_account))
        .route("/admin/tokens", post(admin::add_token))
        .route("/admin/tokens/{id}/revoke", post(admin::revoke_token))
        .route("/admin/alerts", get(alerts::page))
        .route("/admin/alerts/rules", post(alerts::add_rule))
        .route("/admin/alerts/rules/{name}/test", post(alerts::test_rule))
        .route(
            "/admin/alerts/rules/{name}/remove",
            post(alerts::remove_rule),
        )
        .route("/admin/alerts/silences", post(alerts::add_silence))
        .route(
            "/admin/alerts/silences/{name}/end",
            post(alerts::end_silence),
        )
        .route("/events", get(live::events))
        .route("/api/v1/openapi.json", get(api::openapi))
        .route("/api/v1/overview", get(api::overview))
        .route("/api/v1/hosts", get(api::hosts))
        .route("/api/v1/hosts/{name}", get(api::host))
        .route("/api/v1/campaigns", get(api::campaigns).post(api::submit))
        .route("/api/v1/campaigns/{id}", get(api::campaign))
        .route("/api/v1/campaigns/{id}/report", get(api::report))
        .route("/api/v1/campaigns/{id}/cancel", post(api::cancel))
        .route("/api/v1/compare", get(api::compare))
        .route("/api/v1/series/{name}", get(api::series))
        .route("/api/v1/drives", get(api::drives))
        .route("/api/v1/drives/{id}", get(api::drive))
        .route("/api/v1/models/{model}", get(api::model))
        .route("/api/v1/triggers/{name}", post(api::trigger))
        .route("/api/v1/flags", get(api::flags))
        .route(
            "/api/v1/flags/{id}",
            get(api::flag).post(api::set_flag_state),
        )
        .route("/api/v1/accounts", get(admin::accounts_json))
        .route(
            "/api/v1/tokens",
            get(admin::tokens_json).post(admin::add_token_json),
        )
        .route("/api/v1/tokens/{id}/revoke", post(admin::revoke_token_json))
        .layer(axum::middleware::map_response(secure_headers))
        .with_state(ctx);
    let app = app.into_make_service_with_connect_info::<ClientAddr>();
    let stop = shutdown.clone();
    let r = match tls {
        Some(cfg) => {
            let listener = TlsListener::new(listener, cfg, shutdown.clone());
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
        }
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
        }
    };
    if let Err(e) = r {
        tracing::error!(error = %e, "HTTP server failed");
    }
}

/// The client's address, over plaintext or HTTPS (for limiting failed sign-ins).
#[derive(Debug, Clone, Copy)]
pub(super) struct ClientAddr(pub SocketAddr);

// One impl per listener: axum's own blanket impl for `L::Addr` rules out a generic one.
impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, TcpListener>>
    for ClientAddr
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, TcpListener>) -> ClientAddr {
        ClientAddr(*stream.remote_addr())
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, TlsListener>>
    for ClientAddr
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, TlsListener>) -> ClientAddr {
        ClientAddr(*stream.remote_addr())
    }
}

/// HTTPS connections for axum: handshakes run on their own tasks
/// (`service::tls::incoming`, which logs refusals), so a slow client holds up nobody.
struct TlsListener {
    incoming: tokio_stream::wrappers::ReceiverStream<
        std::io::Result<tokio_rustls::server::TlsStream<tokio::net::TcpStream>>,
    >,
    local: std::io::Result<SocketAddr>,
}

impl TlsListener {
    fn new(
        listener: TcpListener,
        cfg: Arc<tokio_rustls::rustls::ServerConfig>,
        shutdown: CancellationToken,
    ) -> TlsListener {
        let local = listener.local_addr();
        TlsListener {
            incoming: crate::service::tls::incoming(listener, cfg, shutdown),
            local,
        }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, SocketAddr) {
        use futures::StreamExt as _;
        loop {
            match self.incoming.next().await {
                Some(Ok(stream)) => {
                    let Ok(peer) = stream.get_ref().0.peer_addr() else {
                        continue;
                    };
                    return (stream, peer);
                }
                Some(Err(_)) => continue,
                // The acceptor stopped (shutdown): nothing more will come.
                None => std::future::pending().await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        match &self.local {
            Ok(a) => Ok(*a),
            Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
        }
    }
}

/// Headers every answer carries: the console's policy unless the answer set its own (the
/// HTML report), no sniffing, no referrer to elsewhere, no framing by other sites.
async fn secure_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONSOLE_POLICY),
        );
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    r
}

async fn css() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("assets/console.css"),
    )
        .into_response()
}

async fn js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("assets/console.js"),
    )
        .into_response()
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

#[cfg(test)]
mod tests {
    /// A path with its parameters' names left out: `/hosts/{name}` and `/hosts/{host}`
    /// are one route.
    fn shape(path: &str) -> String {
        path.split('/')
            .map(|part| if part.starts_with('{') { "{}" } else { part })
            .collect::<Vec<_>>()
            .join("/")
    }

    #[test]
    fn the_openapi_document_describes_every_api_route_and_no_other() {
        let source = include_str!("mod.rs");
        // The router, not this test.
        let router = source.split("#[cfg(test)]").next().unwrap();
        let mut routed: Vec<String> = router
            .split("\"/api/v1/")
            .skip(1)
            .filter_map(|rest| rest.split_once('"').map(|(p, _)| format!("/api/v1/{p}")))
            .filter(|p| p != "/api/v1/openapi.json" && !p.contains(' '))
            .map(|p| shape(&p))
            .collect();
        routed.sort();
        routed.dedup();
        let doc: serde_json::Value = serde_json::from_str(include_str!("assets/openapi.json"))
            .expect("openapi.json is JSON");
        let mut documented: Vec<String> = doc["paths"]
            .as_object()
            .expect("paths")
            .keys()
            .map(|p| shape(p))
            .collect();
        documented.sort();
        assert!(routed.len() >= 10, "{routed:?}");
        assert_eq!(routed, documented);
        assert_eq!(doc["openapi"], "3.0.3");
    }
}
