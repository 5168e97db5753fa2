//! Starts a coordinator: the store, the hub, and both gRPC services on one listener.
//! Used by `platter serve` and, on loopback, by `platter run`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use platter_proto::v1::agent_link_server::AgentLinkServer;
use platter_proto::v1::control_server::ControlServer;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::hub::Hub;
use crate::rpc::agent_link::AgentLinkService;
use crate::rpc::control::ControlService;
use crate::store::Store;

pub struct Coordinator {
    pub addr: SocketAddr,
    pub store: Store,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

impl Coordinator {
    /// Opens the store at `db` and serves on `listen` until `shutdown` is cancelled.
    pub async fn start(
        db: &Path,
        listen: SocketAddr,
        shutdown: CancellationToken,
    ) -> anyhow::Result<Coordinator> {
        let store = Store::open(db).with_context(|| format!("opening store {}", db.display()))?;
        let listener = TcpListener::bind(listen)
            .await
            .with_context(|| format!("listening on {listen}"))?;
        let addr = listener.local_addr()?;
        let hub = Arc::new(Hub::new(store.clone()));
        let tasks = TaskTracker::new();
        let agent_link = AgentLinkService {
            store: store.clone(),
            hub: hub.clone(),
            tasks: tasks.clone(),
            shutdown: shutdown.clone(),
        };
        let control = ControlService {
            store: store.clone(),
            hub,
            shutdown: shutdown.clone(),
        };
        let stop = shutdown.clone();
        tasks.spawn(async move {
            let r = tonic::transport::Server::builder()
                .add_service(AgentLinkServer::new(agent_link))
                .add_service(ControlServer::new(control))
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), stop.cancelled())
                .await;
            if let Err(e) = r {
                tracing::error!(error = %e, "gRPC server failed");
            }
        });
        tracing::info!(%addr, db = %db.display(), "coordinator listening");
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
