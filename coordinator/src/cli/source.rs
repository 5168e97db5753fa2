//! Where the reading commands (`status`, `report`, `compare`, `history`) read: a store
//! given or left here by `platter run`, else a coordinator.

use super::*;

/// The store `platter run` writes in the directory it runs in.
pub(super) const LOCAL_STORE: &str = "platter-data/platter.db";

/// Where `report`, `compare` and `status` read: `--db` if given; else the coordinator, if
/// one is named (flag, environment or client file); else the store `platter run` left
/// here. `None` means the coordinator.
pub(super) fn local_store(
    db: Option<std::path::PathBuf>,
    client: &client::ClientArgs,
) -> anyhow::Result<Option<std::path::PathBuf>> {
    if db.is_some() || client.names_a_coordinator() {
        return Ok(db);
    }
    let here = std::path::PathBuf::from(LOCAL_STORE);
    if here.exists() {
        return Ok(Some(here));
    }
    anyhow::bail!(
        "nothing to read: no {LOCAL_STORE} here (`platter run` writes it in the directory it \
         runs in) and no coordinator named; pass --db FILE, or --coordinator URL \
         (PLATTER_COORDINATOR, or `coordinator = \"…\"` in ~/.config/platter/client.toml)"
    )
}

/// A store a command opens to read it (status, reports, history): one record writer, since
/// no agent's records come through it (a PostgreSQL store's several would be connections
/// and threads for nothing). An SQLite file must exist: a mistyped path would otherwise
/// become a new, empty store, and the command would say only that nothing is in it.
pub(super) fn open_local(db: &std::path::Path) -> anyhow::Result<crate::store::Store> {
    let location = crate::store::db::Location::from_arg(db);
    if let crate::store::db::Location::Sqlite(path) = &location {
        if !path.exists() {
            bail!(
                "no store at {}: `platter run` writes {LOCAL_STORE} in the directory it runs in, \
                 a coordinator the file it was given with --db",
                path.display()
            );
        }
    }
    Ok(crate::store::Store::open_with_writers(&location, 1)?)
}
