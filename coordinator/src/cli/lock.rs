//! `platter run`'s and `platter serve`'s locks on their store and agent state directory,
//! and `platter db restore`'s on the store it replaces: `platter_proto::lock` (shared with
//! the agent, which takes the same `agent.lock`), with what the user refused by a lock can
//! do instead.

use std::path::Path;

pub(super) use platter_proto::lock::Held;

/// A second `platter run` in the same place.
pub(super) fn take(what: &Path, described: &str) -> anyhow::Result<Option<Held>> {
    platter_proto::lock::take(
        what,
        described,
        "wait for it to end, or give this run a --db and --state-dir of its own",
    )
}

/// A second `platter serve` on the SQLite store `db`. Coordinators share a store only
/// through PostgreSQL, which takes no lock.
pub(super) fn take_store(db: &Path) -> anyhow::Result<Option<Held>> {
    platter_proto::lock::take(
        db,
        &format!("{} (the store)", db.display()),
        "wait for it to end, or give this coordinator a --db of its own (coordinators share \
         a store through PostgreSQL: --db postgres://…)",
    )
}

/// `platter db restore` on the SQLite store `db`: refused while a coordinator or a
/// `platter run` has it (they hold this lock for as long as they run).
pub(super) fn take_store_to_restore(db: &Path) -> anyhow::Result<Option<Held>> {
    platter_proto::lock::take(
        db,
        &format!("{} (the store)", db.display()),
        "stop it, then restore (a backup needs no stop: `platter db backup` copies a store \
         while it is served)",
    )
}
