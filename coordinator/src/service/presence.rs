//! Who is connected where, fleet-wide. Coordinators sharing a PostgreSQL store each hold
//! some of the agents' streams; each publishes which (table `agent_links`, its own rows
//! only) and a heartbeat (table `coordinators`), so that `platter agents` and `platter
//! status` give the same answer from any coordinator: an agent connected to another
//! coordinator is connected, and says to which, rather than "offline".
//!
//! A coordinator's own hub stays the authority for the agents it holds; the store is read
//! for the others. Rows of a coordinator whose heartbeat is older than `STALE` are
//! ignored (it was killed, or it lost the database), and removed after `FORGET`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use platter_proto::inventory::ToolVersion;
use platter_proto::model::HostName;
use tokio_util::sync::CancellationToken;

pub use crate::service::hub::LinkChange;
use crate::service::hub::{Hub, Presence};
use crate::store::presence::{Link, LinkRow};
use crate::store::{Result, Store};

/// How long a coordinator gathers link changes before it publishes them (one transaction
/// for the many agents of a reconnection storm).
pub const GATHER: Duration = Duration::from_millis(100);
/// How often a coordinator says it is alive, links changed or not.
pub const HEARTBEAT: Duration = Duration::from_secs(3);
/// A coordinator silent this long is gone: its links are not believed.
pub const STALE: Duration = Duration::from_secs(10);
/// Links of a coordinator gone this long are deleted.
pub const FORGET: Duration = Duration::from_secs(3600);

/// An agent's stream as another, live, coordinator holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteLink {
    /// Connected, or lost (silent past that coordinator's heartbeat timeout).
    pub presence: Presence,
    /// The coordinator's name (`platter serve --name`).
    pub coordinator: String,
    pub tools: Vec<ToolVersion>,
}

/// The fleet as the store has it: the links other live coordinators hold, and the names
/// of the live coordinators (this one included).
#[derive(Debug, Clone, Default)]
pub struct Fleet {
    pub links: HashMap<HostName, RemoteLink>,
    pub coordinators: Vec<String>,
}

/// Publishes this coordinator's (`name`) link changes, and that it is alive, in one
/// transaction (`Store::publish_links`). An agent now offline here loses its row.
pub fn publish_links(store: &Store, name: &str, changes: &[LinkChange]) -> Result<()> {
    let rows: Vec<LinkRow<'_>> = changes
        .iter()
        .map(|ch| LinkRow {
            host: &ch.host,
            link: match ch.presence {
                Presence::Connected => Some(Link::Connected),
                Presence::Lost => Some(Link::Lost),
                Presence::Offline => None,
            },
            tools: &ch.tools,
        })
        .collect();
    store.publish_links(name, &rows)
}

/// Deletes what coordinators gone for longer than `FORGET` left behind, and at once what
/// this coordinator's predecessors of the same `name` left.
pub fn forget_gone_coordinators(store: &Store, name: &str) -> Result<u64> {
    store.forget_gone_coordinators(name, FORGET)
}

/// The links other live coordinators hold, and the live coordinators' names, as
/// coordinator `name` (this one) sees them: its own rows, and those of a predecessor
/// of the same name, do not count (its hub knows its agents). When two claim an agent
/// (it is moving), the later claim wins.
pub fn fleet(store: &Store, name: &str) -> Result<Fleet> {
    let rows = store.fleet_rows(name, STALE)?;
    let mut fleet = Fleet {
        coordinators: rows.coordinators,
        ..Fleet::default()
    };
    for row in rows.links {
        let presence = match row.link {
            Link::Connected => Presence::Connected,
            Link::Lost => Presence::Lost,
        };
        let new = RemoteLink {
            presence,
            coordinator: row.coordinator,
            tools: row.tools,
        };
        // A connected claim beats a lost one; of two alike, the later (rows come
        // oldest first).
        match fleet.links.get(&row.host) {
            Some(old) if old.presence == Presence::Connected && presence == Presence::Lost => {}
            _ => {
                fleet.links.insert(row.host, new);
            }
        }
    }
    Ok(fleet)
}

/// Where an agent is, as this coordinator answers `platter agents` and `platter status`.
#[derive(Debug, Clone, PartialEq)]
pub struct Whereabouts {
    pub presence: Presence,
    /// The coordinator holding its stream (or that lost it), when the store is shared;
    /// "" otherwise.
    pub coordinator: String,
    pub tools: Vec<ToolVersion>,
}

/// `host` as seen from this coordinator (its hub) and, when the store is shared, the
/// others (`fleet`): its stream here first, then another coordinator's, then lost here,
/// else offline.
/// The other coordinators' agents, from the store, when it is shared (`hub` has a name on
/// it); None otherwise (this coordinator holds every agent there is).
pub fn fleet_of(hub: &Hub) -> Result<Option<Fleet>> {
    match hub.name() {
        Some(name) => fleet(hub.store(), name).map(Some),
        None => Ok(None),
    }
}

pub fn whereabouts(hub: &Hub, fleet: Option<&Fleet>, host: &str) -> Whereabouts {
    let here = hub.presence(host);
    let me = hub.name().unwrap_or_default().to_string();
    let remote = fleet.and_then(|f| f.links.get(host));
    match (here, remote) {
        (Presence::Connected, _) => Whereabouts {
            presence: here,
            coordinator: me,
            tools: hub.tools(host),
        },
        (_, Some(r)) if r.presence == Presence::Connected || here != Presence::Lost => {
            Whereabouts {
                presence: r.presence,
                coordinator: r.coordinator.clone(),
                tools: r.tools.clone(),
            }
        }
        (Presence::Lost, _) => Whereabouts {
            presence: here,
            coordinator: me,
            tools: hub.tools(host),
        },
        _ => Whereabouts {
            presence: Presence::Offline,
            coordinator: String::new(),
            tools: hub.tools(host),
        },
    }
}

/// Publishes this coordinator's link changes as they come (gathered for `GATHER`) and a
/// heartbeat every `HEARTBEAT`, until `shutdown`; on the way out it says its agents are gone (they
/// reconnect elsewhere and are claimed there). Changes a failed publish could not store
/// are kept for the next.
pub async fn publish(store: Store, hub: Arc<Hub>, name: String, shutdown: CancellationToken) {
    tracing::info!(coordinator = %name, "publishing which agents this coordinator holds, for the others on the store");
    let mut beat = tokio::time::interval(HEARTBEAT);
    let mut forgot = false;
    loop {
        let stopping = tokio::select! {
            _ = beat.tick() => false,
            _ = hub.links_changed.notified() => {
                tokio::time::sleep(GATHER).await;
                false
            }
            _ = shutdown.cancelled() => true,
        };
        if stopping {
            // Everything held here is about to be dropped: this coordinator and its
            // links leave the store at once, rather than being believed for `STALE`.
            let store = store.clone();
            if let Ok(Err(e)) = tokio::task::spawn_blocking(move || store.withdraw()).await {
                tracing::debug!(error = %e, "could not withdraw this coordinator's links; others ignore them within {STALE:?}");
            }
            return;
        }
        let changes = hub.take_link_changes();
        let (store2, name2) = (store.clone(), name.clone());
        let sent = changes.clone();
        let r = tokio::task::spawn_blocking(move || publish_links(&store2, &name2, &sent)).await;
        match r {
            Ok(Ok(())) => {
                if !forgot {
                    let store = store.clone();
                    let name = name.clone();
                    let _ = tokio::task::spawn_blocking(move || {
                        forget_gone_coordinators(&store, &name)
                    })
                    .await;
                    forgot = true;
                }
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "could not publish agent links; trying again");
                hub.requeue_link_changes(changes);
                // Not at once: the store is failing.
                tokio::select! {
                    _ = tokio::time::sleep(HEARTBEAT) => {}
                    _ = shutdown.cancelled() => {}
                }
            }
            Err(_) => hub.requeue_link_changes(changes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::now_ms;
    use crate::store::testing::stores;

    fn tool(name: &str) -> ToolVersion {
        ToolVersion {
            name: name.into(),
            path: format!("/usr/bin/{name}"),
            version: "1.0".into(),
        }
    }

    fn change(host: &str, presence: Presence, tools: &[&str]) -> LinkChange {
        LinkChange {
            host: host.into(),
            presence,
            tools: tools.iter().map(|t| tool(t)).collect(),
        }
    }

    /// Two coordinators on one store (two `Store`s, two instances): each sees the
    /// other's agents, never its own through the store.
    #[test]
    fn a_coordinator_sees_the_agents_another_holds() {
        let dir = tempfile::tempdir().unwrap();
        for a in stores(dir.path()) {
            let b = Store::open_at(a.location()).unwrap();
            publish_links(
                &a,
                "coord-a",
                &[
                    change("h1", Presence::Connected, &["fio"]),
                    change("h2", Presence::Lost, &[]),
                ],
            )
            .unwrap();
            publish_links(&b, "coord-b", &[change("h3", Presence::Connected, &[])]).unwrap();

            let seen_by_b = super::fleet(&b, "coord-b").unwrap();
            assert_eq!(seen_by_b.coordinators, vec!["coord-a", "coord-b"]);
            assert_eq!(seen_by_b.links.len(), 2, "{:?}", seen_by_b.links);
            let h1 = &seen_by_b.links["h1"];
            assert_eq!(
                (h1.presence, h1.coordinator.as_str()),
                (Presence::Connected, "coord-a")
            );
            assert_eq!(h1.tools, vec![tool("fio")]);
            assert_eq!(seen_by_b.links["h2"].presence, Presence::Lost);
            let seen_by_a = super::fleet(&a, "coord-a").unwrap();
            assert_eq!(seen_by_a.links.keys().collect::<Vec<_>>(), vec!["h3"]);

            // h1 leaves a and connects to b: a's row goes, b's comes; either order.
            publish_links(
                &b,
                "coord-b",
                &[change("h1", Presence::Connected, &["fio", "dd"])],
            )
            .unwrap();
            publish_links(&a, "coord-a", &[change("h1", Presence::Offline, &[])]).unwrap();
            let h1 = &super::fleet(&a, "coord-a").unwrap().links["h1"];
            assert_eq!(
                (h1.presence, h1.coordinator.as_str()),
                (Presence::Connected, "coord-b")
            );
            assert_eq!(h1.tools.len(), 2);
            assert!(!super::fleet(&b, "coord-b")
                .unwrap()
                .links
                .contains_key("h1"));
            // b stops: it and its links leave the store at once.
            b.withdraw().unwrap();
            let fleet = super::fleet(&a, "coord-a").unwrap();
            assert!(fleet.links.is_empty(), "{:?}", fleet.links);
            assert_eq!(fleet.coordinators, vec!["coord-a"]);
        }
    }

    /// While an agent moves, two coordinators claim it: a connected claim beats a lost
    /// one, and of two connected claims the later wins.
    #[test]
    fn the_later_connected_claim_wins() {
        let dir = tempfile::tempdir().unwrap();
        for a in stores(dir.path()) {
            let b = Store::open_at(a.location()).unwrap();
            let c = Store::open_at(a.location()).unwrap();
            publish_links(&a, "coord-a", &[change("h1", Presence::Connected, &[])]).unwrap();
            publish_links(&b, "coord-b", &[change("h1", Presence::Lost, &[])]).unwrap();
            assert_eq!(
                super::fleet(&c, "coord-c").unwrap().links["h1"].coordinator,
                "coord-a"
            );
            std::thread::sleep(Duration::from_millis(5));
            publish_links(&b, "coord-b", &[change("h1", Presence::Connected, &[])]).unwrap();
            assert_eq!(
                super::fleet(&c, "coord-c").unwrap().links["h1"].coordinator,
                "coord-b"
            );
        }
    }

    /// A coordinator that stopped saying it is alive (killed, or cut off from the
    /// database) is not believed: its agents are not connected anywhere, as far as the
    /// store knows; after `FORGET` its rows are deleted.
    #[test]
    fn a_silent_coordinators_agents_are_not_believed() {
        let dir = tempfile::tempdir().unwrap();
        for a in stores(dir.path()) {
            let b = Store::open_at(a.location()).unwrap();
            publish_links(&a, "coord-a", &[change("h1", Presence::Connected, &[])]).unwrap();
            assert!(super::fleet(&b, "coord-b")
                .unwrap()
                .links
                .contains_key("h1"));
            let silent_since = now_ms() - STALE.as_millis() as i64 - 1000;
            let set_seen = |at: i64| a.set_seen(at).unwrap();
            assert_eq!(set_seen(silent_since), 1);
            let fleet = super::fleet(&b, "coord-b").unwrap();
            assert!(fleet.links.is_empty(), "{:?}", fleet.links);
            assert!(fleet.coordinators.is_empty());
            // Not yet forgotten; then past FORGET, forgotten.
            assert_eq!(forget_gone_coordinators(&b, "coord-b").unwrap(), 0);
            set_seen(now_ms() - FORGET.as_millis() as i64 - 1000);
            assert_eq!(forget_gone_coordinators(&b, "coord-b").unwrap(), 1);
            assert_eq!(b.agent_links().unwrap(), 0);
            // Publishing again brings it back.
            publish_links(&a, "coord-a", &[change("h1", Presence::Connected, &[])]).unwrap();
            assert!(super::fleet(&b, "coord-b")
                .unwrap()
                .links
                .contains_key("h1"));
        }
    }

    /// A coordinator restarted under the same name: its predecessor's agents are not its
    /// own (they are reconnecting), and once it has published, nobody believes them.
    #[test]
    fn a_restarted_coordinator_disowns_its_predecessors_agents() {
        let dir = tempfile::tempdir().unwrap();
        for a in stores(dir.path()) {
            let b = Store::open_at(a.location()).unwrap();
            publish_links(&a, "coord-a", &[change("h1", Presence::Connected, &[])]).unwrap();
            let again = Store::open_at(a.location()).unwrap();
            assert!(super::fleet(&again, "coord-a").unwrap().links.is_empty());
            assert!(super::fleet(&b, "coord-b")
                .unwrap()
                .links
                .contains_key("h1"));
            publish_links(&again, "coord-a", &[]).unwrap();
            assert_eq!(forget_gone_coordinators(&again, "coord-a").unwrap(), 1);
            let fleet = super::fleet(&b, "coord-b").unwrap();
            assert!(fleet.links.is_empty(), "{:?}", fleet.links);
            assert_eq!(fleet.coordinators, vec!["coord-a"]);
        }
    }

    /// The hub's changes: each host as it is when taken, connected ones with their
    /// tools; a failed publish's hosts come back.
    #[test]
    fn the_hub_keeps_the_latest_change_of_each_link() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("p.db")).unwrap();
        let hub = Hub::new(store);
        let (tx, _rx) = tokio::sync::mpsc::channel(1);
        // Not publishing: nothing is kept.
        hub.connect(&"h0".into(), tx.clone(), Vec::new());
        assert!(hub.take_link_changes().is_empty());
        hub.publish_links("me".into());
        hub.set_tools(&"h1".into(), vec![tool("fio")]);
        let c1 = hub.connect(&"h1".into(), tx.clone(), Vec::new());
        let c2 = hub.connect(&"h2".into(), tx.clone(), Vec::new());
        hub.disconnect("h2", c2, true);
        let mut changes = hub.take_link_changes();
        changes.sort_by(|a, b| a.host.cmp(&b.host));
        assert_eq!(
            changes,
            vec![
                change("h1", Presence::Connected, &["fio"]),
                change("h2", Presence::Lost, &[])
            ]
        );
        assert!(hub.take_link_changes().is_empty());
        // A failed publish of h1's link comes back, as h1 is when taken again: gone
        // offline since.
        hub.disconnect("h1", c1, false);
        hub.requeue_link_changes(vec![change("h1", Presence::Connected, &["fio"])]);
        assert_eq!(
            hub.take_link_changes(),
            vec![change("h1", Presence::Offline, &[])]
        );
        // A quick reconnect whose old stream ends after the new one began: connected,
        // whatever order the two were noted in.
        let old = hub.connect(&"h3".into(), tx.clone(), Vec::new());
        hub.take_link_changes();
        let _new = hub.connect(&"h3".into(), tx.clone(), Vec::new());
        hub.disconnect("h3", old, false);
        assert_eq!(
            hub.take_link_changes(),
            vec![change("h3", Presence::Connected, &[])]
        );
        let held: Vec<&str> = ["h0", "h1", "h2", "h3"]
            .into_iter()
            .filter(|h| hub.is_connected(h))
            .collect();
        assert_eq!(held, vec!["h0", "h3"]);
    }
}
