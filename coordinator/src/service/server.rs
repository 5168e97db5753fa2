//! Starts a coordinator: the store, the hub, and both gRPC services on one listener.
//! Used by `platter serve` and, on loopback, by `platter run`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use platter_proto::tls::TlsDir;
use platter_proto::v1::agent_link_server::AgentLinkServer;
use platter_proto::v1::control_server::ControlServer;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::service::hub::Hub;
use crate::service::rpc::agent_link::AgentLinkService;
use crate::service::rpc::control::ControlService;
use crate::service::tls::{self, Auth};
use crate::store::Store;

pub struct Coordinator {
    pub addr: SocketAddr,
    /// Where `/healthz`, `/readyz` and `/metrics` are served (`ServeOptions::http`).
    pub http: Option<SocketAddr>,
    pub store: Store,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

/// How a coordinator serves.
pub struct ServeOptions {
    pub db: crate::store::db::Location,
    pub listen: SocketAddr,
    /// Mutual TLS with the coordinator identity in this directory; plaintext when None.
    pub tls: Option<TlsDir>,
    /// An agent silent for this long is lost: its stream is closed and its plans wait.
    pub heartbeat_timeout: Duration,
    /// What a submitted campaign may ask for.
    pub limits: crate::spec::Limits,
    /// The name other coordinators on a shared store know this one by
    /// (`crate::service::presence`); None: HOSTNAME:PORT.
    pub name: Option<String>,
    /// PostgreSQL: how many connections store agents' records at once.
    pub db_writers: usize,
    /// How long each request to the store waits for its answer (`store::StoreError::Timeout`).
    pub store_deadline: Duration,
    /// A store that is down or does not answer at start: wait for it, listening and
    /// NOT_SERVING with the reason (`true`), or fail at once (supervisors that restart).
    pub wait_for_store: bool,
    /// Told the address bound once the coordinator serves, or earlier, as soon as it
    /// waits for its store (`platter serve` prints it: scripts wait for that line).
    pub announce: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
    /// Health, readiness and Prometheus metrics over HTTP on this address
    /// (`crate::service::http`), once the store is open.
    pub http: Option<SocketAddr>,
    /// Fire the store's schedules when due (`platter serve`; not `platter run`, which
    /// runs its one campaign). Triggers fire whatever this says.
    pub fire_schedules: bool,
    /// Put in front of the console's paths in alert messages (`--public-url`); "" leaves
    /// the paths bare.
    pub public_url: String,
    /// A host offline this long while holding a plan is flagged.
    pub host_grace: Duration,
    /// Raise flags and deliver alerts (`platter serve`; not `platter run`, whose one
    /// campaign's flags the next `platter serve` on its store raises).
    pub alerts: bool,
}

impl ServeOptions {
    /// Plaintext on `listen`: the loopback link inside `platter run`, and tests.
    pub fn plaintext(db: &Path, listen: SocketAddr) -> ServeOptions {
        ServeOptions {
            db: crate::store::db::Location::Sqlite(db.to_path_buf()),
            listen,
            tls: None,
            heartbeat_timeout: DEFAULT_HEARTBEAT_TIMEOUT,
            limits: crate::spec::Limits::default(),
            name: None,
            db_writers: crate::store::DEFAULT_PG_WRITERS,
            store_deadline: crate::store::db::pg::DEFAULT_DEADLINE,
            wait_for_store: false,
            announce: None,
            http: None,
            fire_schedules: false,
            public_url: String::new(),
            host_grace: crate::service::alerts::DEFAULT_HOST_GRACE,
            alerts: false,
        }
    }
}

/// Three missed heartbeats.
pub const DEFAULT_HEARTBEAT_TIMEOUT: Duration =
    Duration::from_secs(3 * platter_proto::protocol::HEARTBEAT_INTERVAL.as_secs());

/// Coordinators sharing a PostgreSQL store: plans queued or cancelled through another
/// coordinator (it says so with `NOTIFY`, `store::notify::listen`) may be for hosts connected
/// here, so every host connected here is dispatched to again, and told to stop plans it
/// was sent that were cancelled meanwhile. Notifications that arrive
/// while a dispatch runs are taken together by the next one.
async fn follow_other_coordinators(store: Store, hub: Arc<Hub>, shutdown: CancellationToken) {
    let mut remote = store.subscribe_remote_plans();
    tracing::info!(store = %store.location(), "following other coordinators' plans on this store (LISTEN/NOTIFY)");
    loop {
        tokio::select! {
            r = remote.changed() => if r.is_err() { return },
            _ = shutdown.cancelled() => return,
        }
        remote.borrow_and_update();
        let hub = hub.clone();
        let _ = tokio::task::spawn_blocking(move || {
            hub.dispatch_waiting();
            hub.cancel_cancelled();
        })
        .await;
    }
}

/// Connections waiting to be accepted, at most (the kernel caps it at
/// net.core.somaxconn). tokio's `bind` asks for 1,024: when a coordinator died and its
/// 10,000 agents dialled this one at once, the connections past that were dropped and
/// their SYNs resent after 1, 3 and 7 s.
const LISTEN_BACKLOG: u32 = 8192;

/// A listener on `addr` with `LISTEN_BACKLOG` (and SO_REUSEADDR, as `bind` sets it).
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// How often the health service looks at the store (and at once when its health changes).
const HEALTH_INTERVAL: Duration = Duration::from_secs(1);

/// The standard gRPC health service (grpc.health.v1, service ""): SERVING while the store
/// commits, NOT_SERVING while it cannot (a full disk, PostgreSQL unreachable), so a load
/// balancer in front of several coordinators sends operators elsewhere meanwhile.
async fn report_health(
    store: Store,
    health: tonic_health::server::HealthReporter,
    shutdown: CancellationToken,
) {
    use tonic_health::ServingStatus;
    let mut last = None;
    let mut changed = store.subscribe();
    loop {
        let status = match store.fault() {
            None => ServingStatus::Serving,
            Some(_) => ServingStatus::NotServing,
        };
        if last != Some(status) {
            health.set_service_status("", status).await;
            last = Some(status);
        }
        tokio::select! {
            _ = tokio::time::sleep(HEALTH_INTERVAL) => {}
            _ = changed.changed() => {}
            _ = shutdown.cancelled() => {
                // Draining: a load balancer sends operators elsewhere from now on.
                health.set_service_status("", ServingStatus::NotServing).await;
                return;
            }
        }
    }
}

/// Serves gRPC on `listener` (TLS-wrapped when `tls`) until `stop`.
async fn serve_grpc(
    listener: TcpListener,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    stop: CancellationToken,
    router: tonic::transport::server::Router,
) {
    let r = match tls {
        Some(cfg) => {
            let incoming = tls::incoming(listener, cfg, stop.clone());
            router
                .serve_with_incoming_shutdown(incoming, stop.cancelled())
                .await
        }
        None => {
            // As the TLS accept loop does: without it, Nagle's algorithm holds a
            // step's end record back until the delayed ACK of its start (~40 ms),
            // on a third of short steps.
            let incoming = TcpListenerStream::new(listener).map(|tcp| {
                if let Ok(tcp) = &tcp {
                    let _ = tcp.set_nodelay(true);
                }
                tcp
            });
            router
                .serve_with_incoming_shutdown(incoming, stop.cancelled())
                .await
        }
    };
    if let Err(e) = r {
        tracing::error!(error = %e, "gRPC server failed");
    }
}

/// How often a coordinator waiting for its store tries it again: the store's return is
/// noticed within this (or at once, when it returns during a try).
const STORE_TRY_INTERVAL: Duration = Duration::from_secs(1);
/// The longest interval between two "waiting for the store" lines (they start a second
/// apart and double).
const STORE_WAIT_LOG_MAX: Duration = Duration::from_secs(60);

/// Opens the store; while it is down or does not answer (a store fault), tries again every
/// `STORE_TRY_INTERVAL`, saying so in the log at growing intervals and in `waiting` (what
/// the services answer meanwhile) — unless `opts.wait_for_store` is off: then its error.
async fn open_store(
    opts: &ServeOptions,
    waiting: &std::sync::Mutex<String>,
    announce: &mut Option<(tokio::sync::oneshot::Sender<SocketAddr>, SocketAddr)>,
    shutdown: &CancellationToken,
) -> anyhow::Result<Store> {
    let started = std::time::Instant::now();
    let (mut said, mut say_every) = (None::<std::time::Instant>, STORE_TRY_INTERVAL);
    loop {
        let (db, writers, deadline) = (opts.db.clone(), opts.db_writers, opts.store_deadline);
        let opened =
            tokio::task::spawn_blocking(move || Store::open_serving(&db, writers, deadline))
                .await?;
        let e = match opened {
            Ok(store) => {
                if said.is_some() {
                    tracing::info!(store = %opts.db, waited_s = started.elapsed().as_secs(), "the store answers; serving");
                }
                return Ok(store);
            }
            Err(e) if opts.wait_for_store && crate::store::is_store_fault(&e) => e,
            Err(e) => return Err(e).with_context(|| format!("opening store {}", opts.db)),
        };
        let reason = crate::store::reason(&e);
        if let Some((tx, addr)) = announce.take() {
            let _ = tx.send(addr);
        }
        *waiting.lock().expect("waiting lock") = format!(
            "{reason} (waiting since {})",
            crate::store::since_clock(
                crate::store::now_ms() - started.elapsed().as_millis() as i64
            )
        );
        if said.is_none_or(|t| t.elapsed() >= say_every) {
            tracing::warn!(store = %opts.db, error = %reason, waited_s = started.elapsed().as_secs(), "waiting for the store; health says NOT_SERVING, trying again every second");
            if said.is_some() {
                say_every = (say_every * 2).min(STORE_WAIT_LOG_MAX);
            }
            said = Some(std::time::Instant::now());
        }
        tokio::select! {
            _ = tokio::time::sleep(STORE_TRY_INTERVAL) => {}
            _ = shutdown.cancelled() => anyhow::bail!("stopped while waiting for the store {}: {reason}", opts.db),
        }
    }
}

/// A gRPC service that exists before what it serves can: until `ready`, every call is
/// answered UNAVAILABLE with why the coordinator is not serving yet (its store). A
/// wrapper of our own: tonic builds its router once, before the store is open, and has
/// no service that is swapped in later.
struct Later<S> {
    inner: Arc<std::sync::OnceLock<S>>,
    waiting: Arc<std::sync::Mutex<String>>,
}

impl<S> Clone for Later<S> {
    fn clone(&self) -> Self {
        Later {
            inner: self.inner.clone(),
            waiting: self.waiting.clone(),
        }
    }
}

impl<S> Later<S> {
    fn new(waiting: Arc<std::sync::Mutex<String>>) -> Later<S> {
        Later {
            inner: Arc::default(),
            waiting,
        }
    }

    fn ready(&self, service: S) {
        let _ = self.inner.set(service);
    }
}

impl<S: tonic::server::NamedService> tonic::server::NamedService for Later<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> tower_service::Service<http::Request<tonic::body::Body>> for Later<S>
where
    S: tower_service::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        match self.inner.get() {
            Some(service) => {
                let mut service = service.clone();
                Box::pin(async move {
                    std::future::poll_fn(|cx| service.poll_ready(cx)).await?;
                    service.call(request).await
                })
            }
            None => {
                let why = self.waiting.lock().expect("waiting lock").clone();
                let status = tonic::Status::unavailable(format!(
                    "the coordinator is waiting for its store: {why}"
                ));
                Box::pin(async move { Ok(status.into_http()) })
            }
        }
    }
}

/// This machine's name, as the kernel has it.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "coordinator".into())
}

/// Two missed heartbeats: a timeout shorter than that declares an idle agent lost
/// between two heartbeats of a healthy link, and it flaps lost/online.
pub const MIN_HEARTBEAT_TIMEOUT: Duration =
    Duration::from_secs(2 * platter_proto::protocol::HEARTBEAT_INTERVAL.as_secs());

impl Coordinator {
    /// Listens, opens the store (waiting for it, NOT_SERVING meanwhile, if
    /// `opts.wait_for_store`) and serves until `shutdown` is cancelled.
    pub async fn start(
        mut opts: ServeOptions,
        shutdown: CancellationToken,
    ) -> anyhow::Result<Coordinator> {
        let tls = opts.tls.as_ref().map(tls::server_config).transpose()?;
        let listener =
            listen(opts.listen).with_context(|| format!("listening on {}", opts.listen))?;
        let addr = listener.local_addr()?;
        let auth = if tls.is_some() {
            Auth::Tls
        } else {
            Auth::Plaintext
        };
        // Serving from the start, the store or not: health answers NOT_SERVING and the
        // other services UNAVAILABLE with the reason until the store is open.
        let waiting = Arc::new(std::sync::Mutex::new(format!("opening {}", opts.db)));
        let agent_link = Later::new(waiting.clone());
        let control = Later::new(waiting.clone());
        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_service_status("", tonic_health::ServingStatus::NotServing)
            .await;
        // A submission carries the campaign file: room for the largest one allowed
        // (tonic's default is 4 MiB), and the file limit is what refuses a larger one.
        let max_request = usize::try_from(opts.limits.max_file_bytes)
            .unwrap_or(usize::MAX)
            .saturating_add(64 << 10)
            .max(4 << 20);
        let tasks = TaskTracker::new();
        tasks.spawn(serve_grpc(
            listener,
            tls,
            shutdown.clone(),
            tonic::transport::Server::builder()
                .add_service(health_service)
                .add_service(agent_link.clone())
                .add_service(control.clone()),
        ));
        let mut announce = opts.announce.take().map(|tx| (tx, addr));
        let store = match open_store(&opts, &waiting, &mut announce, &shutdown).await {
            Ok(store) => store,
            Err(e) => {
                shutdown.cancel();
                tasks.close();
                tasks.wait().await;
                return Err(e);
            }
        };
        let hub = Arc::new(Hub::new(store.clone()));
        let tasks = TaskTracker::new();
        tasks.spawn(hub.clone().retry_failed(shutdown.clone()));
        // Only coordinators sharing a store need to know the others' agents.
        let name = opts.db.is_postgres().then(|| {
            opts.name
                .clone()
                .unwrap_or_else(|| format!("{}:{}", hostname(), addr.port()))
        });
        if let Some(name) = &name {
            tasks.spawn(follow_other_coordinators(
                store.clone(),
                hub.clone(),
                shutdown.clone(),
            ));
            hub.publish_links(name.clone());
            tasks.spawn(crate::service::presence::publish(
                store.clone(),
                hub.clone(),
                name.clone(),
                shutdown.clone(),
            ));
        }
        agent_link.ready(AgentLinkServer::new(AgentLinkService {
            store: store.clone(),
            hub: hub.clone(),
            tasks: tasks.clone(),
            shutdown: shutdown.clone(),
            auth,
            heartbeat_timeout: opts.heartbeat_timeout,
        }));
        let scheduler = Arc::new(crate::service::schedules::Scheduler {
            store: store.clone(),
            hub: hub.clone(),
            limits: opts.limits,
            coordinator: name
                .clone()
                .unwrap_or_else(|| format!("{}:{}", hostname(), addr.port())),
        });
        if opts.fire_schedules {
            tasks.spawn(scheduler.clone().run(shutdown.clone()));
        }
        // Flags and alerts: every coordinator raises and delivers; the store keeps each
        // once (`service::alerts`).
        let alerts = Arc::new(crate::service::alerts::Alerts {
            store: store.clone(),
            hub: hub.clone(),
            coordinator: scheduler.coordinator.clone(),
            public_url: opts.public_url.clone(),
            host_grace: opts.host_grace,
        });
        if opts.alerts {
            tasks.spawn(alerts.clone().raise(shutdown.clone()));
            tasks.spawn(alerts.clone().store_faults(shutdown.clone()));
            tasks.spawn(alerts.clone().deliver(shutdown.clone()));
        }
        // One service for gRPC callers and the console's pages, which call it in process.
        let control_service = Arc::new(ControlService {
            scheduler,
            store: store.clone(),
            hub: hub.clone(),
            shutdown: shutdown.clone(),
            auth,
            limits: opts.limits,
            last: Default::default(),
        });
        control.ready(
            ControlServer::from_arc(control_service.clone()).max_decoding_message_size(max_request),
        );
        tasks.spawn(report_health(store.clone(), health, shutdown.clone()));
        let http = match opts.http {
            Some(at) => {
                let listener = tokio::net::TcpListener::bind(at)
                    .await
                    .with_context(|| format!("listening for HTTP on {at}"))?;
                let bound = listener.local_addr()?;
                let console_tls = opts.tls.as_ref().map(tls::console_config).transpose()?;
                let scheme = if console_tls.is_some() {
                    "HTTPS"
                } else {
                    "HTTP"
                };
                tasks.spawn(crate::service::http::serve(
                    listener,
                    console_tls,
                    store.clone(),
                    hub.clone(),
                    control_service,
                    alerts,
                    shutdown.clone(),
                ));
                tracing::info!(addr = %bound, "serving the console, /api/v1, /healthz, /readyz and /metrics over {scheme}");
                Some(bound)
            }
            None => None,
        };
        tracing::info!(%addr, db = %opts.db, tls = auth == Auth::Tls, name = name.as_deref().unwrap_or("-"), "coordinator serving");
        if let Some((tx, addr)) = announce {
            let _ = tx.send(addr);
        }
        Ok(Coordinator {
            addr,
            http,
            store,
            shutdown,
            tasks,
        })
    }

    /// Stops serving and waits until in-flight writes have been answered.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }
}
