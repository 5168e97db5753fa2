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

use crate::hub::Hub;
use crate::rpc::agent_link::AgentLinkService;
use crate::rpc::control::ControlService;
use crate::store::Store;
use crate::tls::{self, Auth};

pub struct Coordinator {
    pub addr: SocketAddr,
    pub store: Store,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

/// How a coordinator serves.
pub struct ServeOptions {
    pub db: crate::db::Location,
    pub listen: SocketAddr,
    /// Mutual TLS with the coordinator identity in this directory; plaintext when None.
    pub tls: Option<TlsDir>,
    /// An agent silent for this long is lost: its stream is closed and its plans wait.
    pub heartbeat_timeout: Duration,
    /// What a submitted campaign may ask for.
    pub limits: crate::spec::Limits,
    /// The name other coordinators on a shared store know this one by
    /// (`crate::presence`); None: HOSTNAME:PORT.
    pub name: Option<String>,
    /// PostgreSQL: how many connections store agents' records at once.
    pub db_writers: usize,
}

impl ServeOptions {
    /// Plaintext on `listen`: the loopback link inside `platter run`, and tests.
    pub fn plaintext(db: &Path, listen: SocketAddr) -> ServeOptions {
        ServeOptions {
            db: crate::db::Location::Sqlite(db.to_path_buf()),
            listen,
            tls: None,
            heartbeat_timeout: DEFAULT_HEARTBEAT_TIMEOUT,
            limits: crate::spec::Limits::default(),
            name: None,
            db_writers: crate::store::DEFAULT_PG_WRITERS,
        }
    }
}

/// Three missed heartbeats.
pub const DEFAULT_HEARTBEAT_TIMEOUT: Duration =
    Duration::from_secs(3 * platter_proto::protocol::HEARTBEAT_INTERVAL.as_secs());

/// Coordinators sharing a PostgreSQL store: plans queued or cancelled through another
/// coordinator (it says so with `NOTIFY`, `Store::listen`) may be for hosts connected
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

/// How often the health service looks at the store.
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
            _ = shutdown.cancelled() => {
                // Draining: a load balancer sends operators elsewhere from now on.
                health.set_service_status("", ServingStatus::NotServing).await;
                return;
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
    /// Opens the store and serves until `shutdown` is cancelled.
    pub async fn start(
        opts: ServeOptions,
        shutdown: CancellationToken,
    ) -> anyhow::Result<Coordinator> {
        let tls = opts.tls.as_ref().map(tls::server_config).transpose()?;
        let store = Store::open_with_writers(&opts.db, opts.db_writers)
            .with_context(|| format!("opening store {}", opts.db))?;
        let listener =
            listen(opts.listen).with_context(|| format!("listening on {}", opts.listen))?;
        let addr = listener.local_addr()?;
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
            tasks.spawn(crate::presence::publish(
                store.clone(),
                hub.clone(),
                name.clone(),
                shutdown.clone(),
            ));
        }
        let auth = if tls.is_some() {
            Auth::Tls
        } else {
            Auth::Plaintext
        };
        let agent_link = AgentLinkService {
            store: store.clone(),
            hub: hub.clone(),
            tasks: tasks.clone(),
            shutdown: shutdown.clone(),
            auth,
            heartbeat_timeout: opts.heartbeat_timeout,
        };
        let control = ControlService {
            store: store.clone(),
            hub,
            shutdown: shutdown.clone(),
            auth,
            limits: opts.limits,
        };
        // A submission carries the campaign file: room for the largest one allowed
        // (tonic's default is 4 MiB), and the file limit is what refuses a larger one.
        let max_request = usize::try_from(opts.limits.max_file_bytes)
            .unwrap_or(usize::MAX)
            .saturating_add(64 << 10)
            .max(4 << 20);
        let (health, health_service) = tonic_health::server::health_reporter();
        tasks.spawn(report_health(store.clone(), health, shutdown.clone()));
        let stop = shutdown.clone();
        tasks.spawn(async move {
            let router = tonic::transport::Server::builder()
                .add_service(health_service)
                .add_service(AgentLinkServer::new(agent_link))
                .add_service(ControlServer::new(control).max_decoding_message_size(max_request));
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
        });
        tracing::info!(%addr, db = %opts.db, tls = auth == Auth::Tls, name = name.as_deref().unwrap_or("-"), "coordinator listening");
        Ok(Coordinator {
            addr,
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
