//! The presence tables of coordinators sharing a store (`coordinators`, `agent_links`):
//! publishing this coordinator's links and heartbeat, withdrawing, forgetting the gone,
//! and reading the others' as typed rows. What they mean (who holds an agent) is
//! `crate::service::presence`'s.

use std::time::Duration;

use platter_proto::inventory::ToolVersion;
use platter_proto::model::HostName;

use super::db::{params, Conn};
use super::error::{now_ms, Result};
use super::Store;

/// An agent's link as the coordinator holding it publishes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    Connected,
    /// Silent past that coordinator's heartbeat timeout.
    Lost,
}

impl Link {
    /// The word stored in `agent_links.link`.
    fn word(self) -> &'static str {
        match self {
            Link::Connected => "connected",
            Link::Lost => "lost",
        }
    }
}

/// One change of this coordinator's links: the agent's link and the tools it reported, or
/// `None` when the agent is offline here (its row goes).
#[derive(Debug, Clone, Copy)]
pub struct LinkRow<'a> {
    pub host: &'a HostName,
    pub link: Option<Link>,
    pub tools: &'a [ToolVersion],
}

/// An agent's link as another live coordinator (its name) holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteLinkRow {
    pub host: HostName,
    pub link: Link,
    pub coordinator: String,
    pub tools: Vec<ToolVersion>,
}

/// The live coordinators' names, and the links the others hold, oldest first.
#[derive(Debug, Clone, Default)]
pub struct FleetRows {
    pub coordinators: Vec<String>,
    pub links: Vec<RemoteLinkRow>,
}

/// A link's tools as stored (`agent_links.tools`, JSON); unreadable JSON as none.
fn tools_from_json(s: &str) -> Vec<ToolVersion> {
    serde_json::from_str(s).unwrap_or_default()
}

/// The database's clock, in ms since the epoch: coordinators on several machines judge
/// each other's heartbeats by one clock, not each by its own. (SQLite is one machine's.)
fn db_now_ms(c: &Conn) -> Result<i64> {
    match c.as_postgres() {
        Some(pg) => Ok(pg
            .query(
                "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
                &[],
            )?
            .first()
            .map(|r| super::db::Row::pg(r).only())
            .transpose()?
            .unwrap_or_else(now_ms)),
        None => Ok(now_ms()),
    }
}

impl Store {
    /// Says this coordinator (`name`) is alive and publishes its link changes, in one
    /// transaction. An agent now offline here loses its row.
    pub fn publish_links(&self, name: &str, changes: &[LinkRow<'_>]) -> Result<()> {
        let me = self.instance().to_string();
        self.write(|c| {
            let tx = c.write_transaction()?;
            let now = db_now_ms(&tx)?;
            tx.execute(
                "INSERT INTO coordinators (instance, name, started_unix_ms, seen_unix_ms) VALUES (?1, ?2, ?3, ?3)
                 ON CONFLICT (instance) DO UPDATE SET name = excluded.name, seen_unix_ms = excluded.seen_unix_ms",
                params![me, name, now],
            )?;
            for ch in changes {
                match ch.link {
                    None => {
                        tx.execute(
                            "DELETE FROM agent_links WHERE coordinator = ?1 AND host = ?2",
                            params![me, ch.host],
                        )?;
                    }
                    Some(link) => {
                        let link = link.word();
                        let tools = serde_json::to_string(ch.tools)?;
                        tx.execute(
                            "INSERT INTO agent_links (coordinator, host, link, tools, since_unix_ms) VALUES (?1, ?2, ?3, ?4, ?5)
                             ON CONFLICT (coordinator, host) DO UPDATE SET link = excluded.link, tools = excluded.tools,
                             since_unix_ms = excluded.since_unix_ms",
                            params![me, ch.host, link, tools, now],
                        )?;
                    }
                }
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// This coordinator leaves the store: its row and its links go (it is stopping; its
    /// agents reconnect elsewhere and are claimed there).
    pub fn withdraw(&self) -> Result<()> {
        let me = self.instance().to_string();
        self.write(|c| {
            let tx = c.write_transaction()?;
            tx.execute("DELETE FROM agent_links WHERE coordinator = ?1", [&me])?;
            tx.execute("DELETE FROM coordinators WHERE instance = ?1", [&me])?;
            tx.commit()?;
            Ok(())
        })
    }

    /// Deletes what coordinators gone for longer than `forget` (`presence::FORGET`) left
    /// behind, and at once what this coordinator's predecessors of the same `name` left (a
    /// restarted coordinator: its agents are reconnecting, not connected to it).
    pub fn forget_gone_coordinators(&self, name: &str, forget: Duration) -> Result<u64> {
        let me = self.instance().to_string();
        self.write(|c| {
            let tx = c.write_transaction()?;
            let before = db_now_ms(&tx)? - forget.as_millis() as i64;
            let gone = "SELECT instance FROM coordinators WHERE seen_unix_ms < ?1 OR (name = ?2 AND instance != ?3)";
            tx.execute(
                &format!("DELETE FROM agent_links WHERE coordinator IN ({gone})"),
                params![before, name, me],
            )?;
            let n = tx.execute(
                &format!("DELETE FROM coordinators WHERE instance IN ({gone})"),
                params![before, name, me],
            )?;
            tx.commit()?;
            Ok(n)
        })
    }

    /// The names of the coordinators heard from within `stale` (`presence::STALE`), and
    /// the links the live others hold, oldest first: not those of this coordinator
    /// (`name`) nor of a predecessor of the same name (`presence::fleet` merges them).
    pub fn fleet_rows(&self, name: &str, stale: Duration) -> Result<FleetRows> {
        let me = self.instance().to_string();
        self.read(|c| {
            let since = db_now_ms(c)? - stale.as_millis() as i64;
            let coordinators = c.query_map(
                "SELECT DISTINCT name FROM coordinators WHERE seen_unix_ms >= ?1 ORDER BY name",
                [since],
                |r| r.only(),
            )?;
            let links = c.query_map(
                "SELECT l.host, l.link, l.tools, c.name FROM agent_links l JOIN coordinators c ON c.instance = l.coordinator
                 WHERE c.seen_unix_ms >= ?1 AND c.instance != ?2 AND c.name != ?3 ORDER BY l.since_unix_ms",
                params![since, me, name],
                |r| {
                    Ok(RemoteLinkRow {
                        host: r.get("host")?,
                        link: r.text("link", |link| if link == "connected" { Link::Connected } else { Link::Lost })?,
                        coordinator: r.get("name")?,
                        tools: r.text("tools", tools_from_json)?,
                    })
                },
            )?;
            Ok(FleetRows { coordinators, links })
        })
    }
}

#[cfg(test)]
impl Store {
    /// Tests: sets this coordinator's last heartbeat to `at` (ms since the epoch), as if it
    /// fell silent then; the rows changed.
    pub(crate) fn set_seen(&self, at: i64) -> Result<u64> {
        let me = self.instance().to_string();
        self.write(|c| {
            c.execute(
                "UPDATE coordinators SET seen_unix_ms = ?1 WHERE instance = ?2",
                params![at, me],
            )
        })
    }

    /// Tests: how many agent links the store holds, of every coordinator.
    pub(crate) fn agent_links(&self) -> Result<i64> {
        self.read(|c| c.query_row("SELECT COUNT(*) FROM agent_links", (), |r| r.only()))
    }
}
