//! `platter run`'s and `platter serve`'s locks on their store and agent state directory:
//! `platter_proto::lock` (shared with the agent, which takes the same `agent.lock`), with
//! what the user refused by a lock can do instead.

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
