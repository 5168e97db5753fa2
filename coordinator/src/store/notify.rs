//! PostgreSQL's LISTEN/NOTIFY between coordinators sharing a store: what a coordinator
//! tells the others (`Change`), and the thread that hears theirs.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;

use super::connect::Opener;
use super::db::{params, Conn};
use super::error::Result;
use super::health::Health;

/// What a coordinator tells the others sharing its PostgreSQL store (`NOTIFY`): `plans`
/// when plans were queued or cancelled (they may be for hosts connected elsewhere),
/// `records` when results were stored (a `watch` elsewhere shows them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Plans,
    Records,
}

/// Who notifies, on which channel: `platter_<store id>`, since channels are
/// database-wide and two stores may share a database in schemas of their own.
pub(super) struct Instance {
    pub(super) mark: String,
    pub(super) channel: String,
}

/// `Store::notify` for the writer.
pub(super) fn notify(c: &Conn, instance: &Instance, what: Change) -> Result<()> {
    if c.is_postgres() {
        let what = match what {
            Change::Plans => "plans",
            Change::Records => "records",
        };
        c.execute(
            "SELECT pg_notify(?1, ?2)",
            params![instance.channel, format!("{} {what}", instance.mark)],
        )?;
    }
    Ok(())
}

/// PostgreSQL: follows the other coordinators' notifications on a thread of its own,
/// reconnecting after a loss (and then treating everything as changed, since what was
/// said meanwhile is lost). Ends with the last handle of the store.
/// `alive` is the store's health, gone with its last handle; `changed` and `remote` are
/// `Store::changed` and `Store::remote_plans`.
pub(super) fn listen(
    opener: Opener,
    alive: Weak<Health>,
    changed: watch::Sender<u64>,
    remote: watch::Sender<u64>,
    me: Arc<Instance>,
) {
    let _ = std::thread::Builder::new()
        .name("store-listen".into())
        .spawn(move || {
            let mut first = true;
            loop {
                let (tx, rx) = std::sync::mpsc::channel();
                let conn = match opener.listener(tx, &me.channel) {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::debug!(error = %e, "listening for other coordinators failed; again in 1 s");
                        std::thread::sleep(Duration::from_secs(1));
                        if alive.strong_count() == 0 {
                            return;
                        }
                        continue;
                    }
                };
                if !first {
                    tracing::info!("listening for other coordinators again");
                }
                if !first {
                    changed.send_modify(|n| *n += 1);
                    remote.send_modify(|n| *n += 1);
                }
                first = false;
                loop {
                    use std::sync::mpsc::RecvTimeoutError;
                    let payload = match rx.recv_timeout(Duration::from_millis(500)) {
                        Ok(p) => p,
                        Err(RecvTimeoutError::Timeout) => {
                            if conn.is_broken() {
                                break;
                            }
                            if alive.strong_count() == 0 {
                                return;
                            }
                            continue;
                        }
                        // The connection's task ended: it is gone.
                        Err(RecvTimeoutError::Disconnected) => break,
                    };
                    let (from, what) = payload.split_once(' ').unwrap_or(("", &payload));
                    if from == me.mark {
                        continue;
                    }
                    changed.send_modify(|n| *n += 1);
                    if what == "plans" {
                        remote.send_modify(|n| *n += 1);
                    }
                }
            }
        });
}
