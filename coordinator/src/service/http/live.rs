//! Live pages: one task per coordinator watches for change — the store's (this
//! coordinator's commits, and on PostgreSQL the others' notifications) and the hub's
//! (agents connecting, lost or holding their steps here), and on a shared store the
//! fleet's links every few seconds — and every open page's event stream (`/events`,
//! server-sent events) sends its page its `<main>` anew when that changed.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::convert::Infallible;
use std::hash::{Hash, Hasher};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use tokio::sync::{watch, OnceCell};
use tokio_util::sync::CancellationToken;

use super::auth::Access;
use super::console::Live;
use super::Ctx;
use crate::service::hub::Hub;
use crate::service::task_stream::task_stream;
use crate::store::accounts::AccountRole;
use crate::store::Store;

/// At most this often does a page hear of change: a busy fleet changes many times a
/// second, and a page needs to look again only once (what changed is on it within about
/// this, as the console promises: "within a second or two"). Each move costs a reading of
/// the fleet and of the campaigns: at 500 ms, 200 open consoles cost a fleet stepping as
/// fast as this machine can ~6% of its step rate; at 1 s about half that.
const PULSE_MIN_INTERVAL: Duration = Duration::from_secs(1);
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
    let mut seen = (hub.generation(), 0u64, flags_seen(&store).await);
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
                // Flags are raised and triaged by any coordinator and by `platter flag`,
                // none of which the store notifies: looked at every time.
                let now = (hub.generation(), remote, flags_seen(&store).await);
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

/// How many flags the store has and when the last of them changed; `None` while it cannot
/// be read.
async fn flags_seen(store: &Store) -> Option<(i64, i64)> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || store.flags_changed())
        .await
        .ok()?
        .ok()
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

/// What an event stream is for: `page`, the address of the page that opened it (a path
/// with its query, as `location` has it).
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct Watching {
    #[serde(default)]
    page: String,
    /// The hash of the `<main>` the page shows (`data-seen`), not sent again.
    #[serde(default)]
    seen: String,
}

/// How often, at most, an open page's stream asks the store whether its session or token
/// still holds (a signed-out session's pages stop within this).
const ASK_AGAIN_EVERY: Duration = Duration::from_secs(1);

/// `/events`: for a live page (`?page=/hosts?state=busy`), its `<main>` as a `main`
/// event whenever it changed — at once, then on every move of the pulse — rendered once
/// for every open page of that address and role; `gone` once the session ended. For
/// anything else, a `change` event on every move.
pub(super) async fn events(
    State(ctx): State<Ctx>,
    access: Access,
    Query(watching): Query<Watching>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let mut rx = ctx.pulse.subscribe();
    let clients = ctx.console_clients.clone();
    let shutdown = ctx.shutdown.clone();
    let watching_seen: Option<u64> = watching.seen.parse().ok();
    let page = Live::at(&watching.page).map(|live| (watching.page, live));
    let stream = task_stream(move |tx| async move {
        clients.fetch_add(1, Ordering::Relaxed);
        let _gone = Decrement(clients);
        let mut access = access;
        let mut asked = Instant::now();
        let mut sent: Option<u64> = watching_seen;
        let mut first = page.is_some();
        loop {
            if !first {
                tokio::select! {
                    r = rx.changed() => if r.is_err() { return },
                    _ = shutdown.cancelled() => return,
                }
            }
            first = false;
            let seq = *rx.borrow_and_update();
            let Some((address, live)) = &page else {
                let event = Event::default().event("change").data(seq.to_string());
                if tx.send(Ok(event)).await.is_err() {
                    return;
                }
                continue;
            };
            if asked.elapsed() >= ASK_AGAIN_EVERY {
                asked = Instant::now();
                match access.again(&ctx).await {
                    Ok(Some(now)) => access = now,
                    Ok(None) => {
                        let _ = tx.send(Ok(Event::default().event("gone").data(""))).await;
                        return;
                    }
                    // The store cannot say now: the page follows the fleet as it was
                    // allowed to, and shows the store's fault as every page does.
                    Err(_) => {}
                }
            }
            let main = ctx
                .renders
                .get(address, access.role, seq, || async {
                    // Rendered without the session's CSRF token (it is one for every
                    // page alike); console.js puts the page's own into its forms.
                    live.main_for(&ctx, access.role, "").await.inner_html()
                })
                .await;
            if sent == Some(main.hash) {
                continue;
            }
            sent = Some(main.hash);
            let event = Event::default().event("main").data(&main.html);
            if tx.send(Ok(event)).await.is_err() {
                return;
            }
        }
    });
    // A comment every few seconds, so a stream whose page is gone is noticed and ended
    // even while its page does not change.
    Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
}

/// How often an idle event stream sends a comment.
const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// A live page's `<main>` as rendered, with a hash to tell whether it changed.
pub(super) struct Rendered {
    html: String,
    hash: u64,
}

/// The latest rendering of each live page by address and role: the first open page to
/// hear of a change renders it, the others of that address and role take the same
/// (200 consoles on the overview cost one rendering per change, not 200). A rendering
/// for change `seq` begins after `seq` was heard, so none is older than the change.
#[derive(Default)]
pub(super) struct Renders(Mutex<HashMap<(String, AccountRole), Rendering>>);

/// The change a rendering is for, and the rendering (begun by the first to ask).
type Rendering = (u64, Arc<OnceCell<Arc<Rendered>>>);

impl Renders {
    async fn get<F>(
        &self,
        address: &str,
        role: AccountRole,
        seq: u64,
        render: impl FnOnce() -> F,
    ) -> Arc<Rendered>
    where
        F: std::future::Future<Output = String>,
    {
        let cell = {
            let mut all = self.0.lock().expect("renders");
            let key = (address.to_string(), role);
            match all.get(&key) {
                Some((s, cell)) if *s >= seq => cell.clone(),
                _ => {
                    // Renderings of earlier changes are of no more use to anyone.
                    all.retain(|_, (s, _)| *s >= seq);
                    let cell = Arc::new(OnceCell::new());
                    all.insert(key, (seq, cell.clone()));
                    cell
                }
            }
        };
        cell.get_or_init(|| async {
            let html = render().await;
            Arc::new(Rendered {
                hash: super::console::seen(&html),
                // An event's data cannot carry a carriage return (a step's stderr may);
                // the HTML parser reads one as a line feed anyway.
                html: html.replace("\r\n", "\n").replace('\r', "\n"),
            })
        })
        .await
        .clone()
    }
}

/// Counts a console client out when its stream ends.
struct Decrement(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Decrement {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_page_is_rendered_once_per_change_for_every_role_alike() {
        let renders = Renders::default();
        let count = std::sync::atomic::AtomicUsize::new(0);
        let render = |text: &'static str| {
            let count = &count;
            move || async move {
                count.fetch_add(1, Ordering::SeqCst);
                text.to_string()
            }
        };
        let viewer = AccountRole::Viewer;
        let a = renders.get("/", viewer, 1, render("one")).await;
        let b = renders.get("/", viewer, 1, render("other")).await;
        assert_eq!((a.html.as_str(), b.html.as_str()), ("one", "one"));
        assert_eq!(
            count.load(Ordering::SeqCst),
            1,
            "one rendering for change 1"
        );
        // Another role, another page, a later change: each its own rendering.
        let op = renders
            .get("/", AccountRole::Operator, 1, render("op"))
            .await;
        assert_eq!(op.html, "op");
        let hosts = renders.get("/hosts", viewer, 1, render("hosts")).await;
        assert_eq!(hosts.html, "hosts");
        let later = renders.get("/", viewer, 2, render("two")).await;
        assert_eq!(later.html, "two");
        assert_ne!(later.hash, a.hash);
        assert_eq!(count.load(Ordering::SeqCst), 4);
        // A stream that heard only of change 1 takes what was rendered after it.
        let late = renders.get("/", viewer, 1, render("stale")).await;
        assert_eq!(late.html, "two");
        // An event cannot carry a carriage return: it becomes a line feed, as the HTML
        // parser would read it; the hash is that of the page's own <main>.
        let cr = renders.get("/cr", viewer, 3, render("a\r\nb\rc")).await;
        assert_eq!(cr.html, "a\nb\nc");
        assert_eq!(cr.hash, super::super::console::seen("a\r\nb\rc"));
    }
}
