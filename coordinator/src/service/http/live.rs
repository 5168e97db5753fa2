//! Live pages: one task per coordinator watches for change — the store's (this
//! coordinator's commits, and on PostgreSQL the others' notifications) and the hub's
//! (agents connecting, lost or holding their steps here), and on a shared store the
//! fleet's links every few seconds — and every open page's event stream (`/events`,
//! server-sent events) tells its page to look again. Pages then reload their `<main>`.

use std::collections::hash_map::DefaultHasher;
use std::convert::Infallible;
use std::hash::{Hash, Hasher};
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::auth::Access;
use super::Ctx;
use crate::service::hub::Hub;
use crate::service::task_stream::task_stream;
use crate::store::Store;

/// At most this often does a page hear of change: a busy fleet changes many times a
/// second, and a page needs to look again only once.
const PULSE_MIN_INTERVAL: Duration = Duration::from_millis(500);
/// How often a change of who is connected here, or elsewhere on a shared store, is looked for.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Counts changes worth a page's second look, until `shutdown`.
pub(super) async fn pulse(
    store: Store,
    hub: std::sync::Arc<Hub>,
    tx: watch::Sender<u64>,
    shutdown: CancellationToken,
) {
    let mut changed = store.subscribe();
    let mut seen = (hub.generation(), 0u64);
    let mut ticks = 0u64;
    // An interval, not a sleep per pass: a store that changes more often than LOOK_EVERY
    // must not keep the hub and the other coordinators' links from being looked at.
    let mut look = tokio::time::interval(LOOK_EVERY);
    look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let moved = tokio::select! {
            r = changed.changed() => r.is_ok(),
            _ = look.tick() => {
                ticks += 1;
                // Other coordinators' links are in the store, not notified: read every third look.
                let remote = if ticks.is_multiple_of(3) { remote_links(&hub).await } else { seen.1 };
                let now = (hub.generation(), remote);
                let moved = now != seen;
                seen = now;
                moved
            }
            _ = shutdown.cancelled() => return,
        };
        if moved {
            tx.send_modify(|n| *n += 1);
            tokio::time::sleep(PULSE_MIN_INTERVAL).await;
        }
    }
}

/// A fingerprint of the links other coordinators on a shared store hold (0 with none).
async fn remote_links(hub: &std::sync::Arc<Hub>) -> u64 {
    let hub = hub.clone();
    let fleet = tokio::task::spawn_blocking(move || crate::service::presence::fleet_of(&hub)).await;
    let Ok(Ok(Some(fleet))) = fleet else {
        return 0;
    };
    let mut links: Vec<String> = fleet
        .links
        .iter()
        .map(|(host, link)| format!("{host} {link:?}"))
        .collect();
    links.sort();
    let mut h = DefaultHasher::new();
    links.hash(&mut h);
    h.finish()
}

/// `/events`: a `change` event whenever the pulse moves, for as long as the page is open.
pub(super) async fn events(
    State(ctx): State<Ctx>,
    _access: Access,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let mut rx = ctx.pulse.subscribe();
    let clients = ctx.console_clients.clone();
    let shutdown = ctx.shutdown.clone();
    let stream = task_stream(move |tx| async move {
        clients.fetch_add(1, Ordering::Relaxed);
        let _gone = Decrement(clients);
        loop {
            tokio::select! {
                r = rx.changed() => if r.is_err() { return },
                _ = shutdown.cancelled() => return,
            }
            let seq = *rx.borrow_and_update();
            let event = Event::default().event("change").data(seq.to_string());
            if tx.send(Ok(event)).await.is_err() {
                return;
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// Counts a console client out when its stream ends.
struct Decrement(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Decrement {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
