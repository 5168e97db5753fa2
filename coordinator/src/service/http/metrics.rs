//! `/metrics`: the coordinator's gauges and counters in Prometheus' text format
//! (OpenMetrics), read when scraped. The store's writer counts what it commits in atomics
//! of its own (`Store::writer_stats`); this module turns that snapshot into Prometheus
//! metrics, so the store knows nothing of Prometheus.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use super::Ctx;
use crate::service::hub::{Hub, Presence};
use crate::service::presence::{fleet_of, whereabouts};
use crate::store::progress::StateCount;
use crate::store::{Store, StoreError, WriterStats, COMMIT_BUCKETS};

/// What a scrape reads of the store (off the async workers).
struct Counts {
    plans: Vec<StateCount>,
    campaigns: Vec<StateCount>,
    /// Hosts holding a plan whose agent no coordinator has a stream of.
    offline_holding_plan: usize,
}

fn read_counts(store: &Store, hub: &Hub) -> Result<Counts, StoreError> {
    let holding = store.hosts_holding_plans()?;
    // The other coordinators' streams, when the store is shared: an agent connected to
    // one of them is not offline.
    let fleet = fleet_of(hub)?;
    let offline_holding_plan = holding
        .iter()
        .filter(|host| whereabouts(hub, fleet.as_ref(), host).presence != Presence::Connected)
        .count();
    Ok(Counts {
        plans: store.plan_counts()?,
        campaigns: store.campaign_counts()?,
        offline_holding_plan,
    })
}

pub(super) async fn metrics(State(ctx): State<Ctx>) -> Response {
    let (store, hub) = (ctx.store.clone(), ctx.hub.clone());
    let counts = tokio::task::spawn_blocking(move || read_counts(&store, &hub)).await;
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

/// The writer's commit latencies as a Prometheus histogram, from a snapshot of the
/// store's counters (`WriterStats`).
#[derive(Debug)]
struct CommitLatency(WriterStats);

impl EncodeMetric for CommitLatency {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        // prometheus-client takes each bucket's own count and writes them cumulative; an
        // upper bound of f64::MAX is its +Inf.
        let bounds = COMMIT_BUCKETS.iter().copied().chain([f64::MAX]);
        let buckets: Vec<(f64, u64)> = bounds.zip(self.0.commit_buckets.iter().copied()).collect();
        encoder.encode_histogram::<NoLabelSet>(
            self.0.commit_seconds_sum,
            self.0.commits,
            &buckets,
            None,
        )
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

fn gauge_of(v: usize) -> Gauge {
    let g = Gauge::default();
    g.set(i64::try_from(v).unwrap_or(i64::MAX));
    g
}

fn counter(v: u64) -> Counter {
    let c = Counter::default();
    c.inc_by(v);
    c
}

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

fn render(ctx: &Ctx, counts: Option<Counts>) -> Result<String, std::fmt::Error> {
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

    let clients = Gauge::<i64>::default();
    clients.set(
        ctx.console_clients
            .load(std::sync::atomic::Ordering::Relaxed) as i64,
    );
    registry.register(
        "console_clients",
        "Console pages open now on this coordinator (their live event streams)",
        clients,
    );

    let handshakes = Family::<Labels, Counter>::default();
    let h = &crate::service::tls::HANDSHAKES;
    for (kind, n) in [
        ("full", &h.full),
        ("resumed", &h.resumed),
        ("resumption_refused", &h.refused_resumptions),
    ] {
        handshakes
            .get_or_create(&vec![("kind".into(), kind.into())])
            .inc_by(n.load(std::sync::atomic::Ordering::Relaxed));
    }
    registry.register(
        "tls_handshakes",
        "TLS handshakes of agents and operators completed on the gRPC port since this process started: full (certificates verified), resumed (a session ticket any coordinator of this certificate opens), resumption_refused (the resumed certificate expired)",
        handshakes,
    );

    let written = ctx.store.writer_stats();
    registry.register(
        "steps_stored",
        "Step rows the store's writers committed since this process started",
        counter(written.steps_stored),
    );
    registry.register(
        "samples_stored",
        "Sample rows the store's writers committed since this process started",
        counter(written.samples_stored),
    );
    registry.register(
        "store_batches_one_by_one",
        "Agents' batches the store's writers stored record by record since this process started, because a record of them broke a constraint (each such record is refused, with its reason, in refused_records)",
        counter(written.batches_one_by_one),
    );
    registry.register(
        "store_commits",
        "Transactions the store's writers committed (agents' records, hellos, inventories) since this process started",
        counter(written.commits),
    );
    registry.register_with_unit(
        "store_commit",
        "How long the store's writers took to commit a transaction, from its start to its commit",
        Unit::Seconds,
        CommitLatency(written),
    );

    let fault = ctx.store.fault();
    let gauge = |v: bool| gauge_of(usize::from(v));
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
        "1 when this scrape could read the store's counts (plans, campaigns, hosts holding plans)",
        gauge(counts.is_some()),
    );
    if let Some(Counts {
        plans,
        campaigns,
        offline_holding_plan,
    }) = counts
    {
        registry.register(
            "hosts_offline_holding_plan",
            "Hosts holding a plan (sent or accepted) whose agent is connected to no coordinator",
            gauge_of(offline_holding_plan),
        );
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
