//! `platter db`: the store's schema (`migrate`), and backups of an SQLite store (`backup`,
//! `restore`: `store::backup` does them; this says what it did, what a restore means for
//! the agents, and how PostgreSQL's own tools do the same). `restore` holds the store's
//! lock while it replaces the store; `backup` takes none.

use std::path::Path;

use anyhow::Context;

use super::lock;
use super::{DbCommand, EXIT_INVALID};
use crate::store::backup::{self, BackupError};
use crate::store::db::Location;

/// What a restore means for the agents: `platter db restore --help` ends with it, and a
/// restore prints it. `tests/backup.rs` holds the restored store to each point.
pub(super) const AFTER_RESTORE: &str = "\
What a restore means for the agents:
* The restored store holds what the original held when the backup was taken, nothing
  after. Records the agents sent later and the original acknowledged are gone once an
  agent's journal says they were acknowledged (it says so when the agent stops, and
  every 256 records while it runs; an agent killed sends the rest again, and those of
  plans the restored store knows are stored). At each agent's first hello the
  coordinator says how many are gone (WARN \"… acknowledged by another store …\"); the
  reports of their campaigns count those measurements as MISSING.
* Records not yet acknowledged are sent again: those of plans the restored store knows are
  stored; those of plans made after the backup are refused (kept in refused_records, in no
  report), and such a plan an agent still holds is cancelled.
* A plan that was running at the backup is sent to its host again: an agent still running
  it goes on; one that finished it says so, and the plan ends with the measurements the
  store lacks reported MISSING (its report exits 1). Submit the campaign again to measure
  them anew.
* The restored store has a new identity, so the campaigns submitted to it get ids the
  original never gave (the agents hold those it gave after the backup as finished).
* Schedules: a slot the original fired after the backup fires once more when a coordinator
  starts, as a missed slot does. Accounts and API tokens are as they were.";

pub(super) async fn db(command: DbCommand) -> anyhow::Result<i32> {
    match command {
        DbCommand::Migrate { db } => {
            let said = tokio::task::spawn_blocking(move || {
                if let Location::Sqlite(path) = &db {
                    // As `serve` does: the store's directory is made if missing.
                    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                        std::fs::create_dir_all(dir)
                            .with_context(|| format!("making {}", dir.display()))?;
                    }
                }
                crate::store::migrate(&db).with_context(|| format!("migrating the store {db}"))
            })
            .await??;
            println!("{said}");
            Ok(0)
        }
        DbCommand::Backup { file, db, force } => {
            let path = match db {
                Location::Sqlite(path) => path,
                Location::Postgres(_) => {
                    eprintln!("{}", postgres(&db, "backup"));
                    return Ok(EXIT_INVALID);
                }
            };
            let done = {
                let (path, file) = (path.clone(), file.clone());
                tokio::task::spawn_blocking(move || backup::backup(&path, &file, force)).await?
            };
            match done {
                Ok(b) => {
                    print!("{}", backed_up(&path, &file, &b));
                    Ok(0)
                }
                Err(e) => refused(e, &format!("backing up {}", path.display())),
            }
        }
        DbCommand::Restore { backup, db, force } => {
            let path = match db {
                Location::Sqlite(path) => path,
                Location::Postgres(_) => {
                    eprintln!("{}", postgres(&db, "restore"));
                    return Ok(EXIT_INVALID);
                }
            };
            let done = {
                let path = path.clone();
                tokio::task::spawn_blocking(move || restore(&backup, &path, force)).await?
            };
            match done {
                Ok(said) => {
                    println!("{said}\n\n{AFTER_RESTORE}");
                    Ok(0)
                }
                Err(e) => match e.downcast::<BackupError>() {
                    Ok(e) => refused(e, &format!("restoring {}", path.display())),
                    Err(e) => Err(e),
                },
            }
        }
    }
}

/// A refusal to replace what exists is said with exit status 2 (as `certs issue` does);
/// anything else fails the command with `doing` as its context.
fn refused(e: BackupError, doing: &str) -> anyhow::Result<i32> {
    if e.is_refusal() {
        eprintln!("error: {e}");
        return Ok(EXIT_INVALID);
    }
    Err(anyhow::Error::new(e).context(doing.to_string()))
}

/// The backup judged, the store's lock taken (refused while a coordinator or `platter run`
/// has it, naming it), then the store replaced: what was done, in words.
fn restore(from: &Path, db: &Path, force: bool) -> anyhow::Result<String> {
    let contents = backup::inspect(from)?;
    let _lock = lock::take_store_to_restore(db)?;
    let r = backup::restore(from, &contents, db, force)?;
    let c = &r.contents;
    let mut said = format!(
        "restored {} to {}: {} campaign(s) ({} running at the backup), {} sample(s); schema \
         version {} → {}; the store's new identity is {} (the backup's: {})",
        from.display(),
        db.display(),
        c.campaigns,
        c.running,
        c.samples,
        c.schema_version,
        r.schema_version,
        r.store_id,
        c.store_id,
    );
    if let Some(kept) = &r.replaced {
        said.push_str(&format!(
            "\nthe store it replaced is kept as {} (remove it once it is not needed)",
            kept.display()
        ));
    }
    Ok(said)
}

/// What `platter db backup` prints: where, what and how long.
fn backed_up(db: &Path, file: &Path, b: &backup::Backup) -> String {
    let c = &b.contents;
    format!(
        "{file}: a consistent copy of {db}, taken in {took:.2} s\n\
         \x20 store      {id}, schema version {version}\n\
         \x20 campaigns  {campaigns} ({running} running)\n\
         \x20 samples    {samples}\n\
         \x20 size       {size}\n",
        file = file.display(),
        db = db.display(),
        took = b.took.as_secs_f64(),
        id = c.store_id,
        version = c.schema_version,
        campaigns = c.campaigns,
        running = c.running,
        samples = c.samples,
        size = crate::report::human(c.bytes as f64, "B"),
    )
}

/// Why `platter db backup`/`restore` do not take a PostgreSQL store, and PostgreSQL's own
/// commands for it (docs/operations.md, "Backups").
fn postgres(db: &Location, asked: &str) -> String {
    let url = db.to_string();
    format!(
        "platter db {asked} copies SQLite stores; a PostgreSQL store is backed up and restored \
         with PostgreSQL's own tools (put the password where *** is, or in PGPASSWORD).\n\
         A backup, consistent while coordinators serve the store:\n\
         \x20 pg_dump --format=custom --file=platter.dump '{url}'\n\
         A restore, with every coordinator of the store stopped, then a new identity for the \
         restored store (as `platter db restore` gives one: campaigns submitted to it then get \
         ids the original never gave) and its schema brought to this platter's:\n\
         \x20 pg_restore --clean --if-exists --no-owner --dbname='{url}' platter.dump\n\
         \x20 psql '{url}' -c \"UPDATE store_identity SET id = substr(md5(random()::text), 1, 8)\"\n\
         \x20 platter db migrate --db '{url}'\n\
         What a restore means for the agents is the same as for SQLite: \
         `platter db restore --help`."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store held by a coordinator or `platter run` (their lock, `platter.db.lock`) is
    /// not replaced: the restore is refused naming the holder, and the store is untouched.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_restore_is_refused_while_the_store_is_held() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("platter.db");
        let file = dir.path().join("backup.db");
        drop(crate::store::Store::open(&db).unwrap());
        backup::backup(&db, &file, false).unwrap();
        let before = std::fs::read(&db).unwrap();
        // As `platter serve` holds it. A second open in this process is refused as
        // another process's would be (flock belongs to an open file description).
        let held = platter_proto::lock::take(&db, "the store", "wait").unwrap();
        let e = restore(&file, &db, true).unwrap_err().to_string();
        assert!(e.contains("(the store) is in use by `"), "{e}");
        assert!(e.contains("stop it, then restore"), "{e}");
        assert_eq!(std::fs::read(&db).unwrap(), before);
        drop(held);
        let said = restore(&file, &db, true).unwrap();
        assert!(said.contains("the store it replaced is kept as "), "{said}");
    }

    #[test]
    fn a_postgres_store_is_told_the_commands_that_back_it_up() {
        let db: Location = "postgres://platter:secret@db.lab:5432/platter"
            .parse()
            .unwrap();
        let said = postgres(&db, "backup");
        assert!(!said.contains("secret"), "{said}");
        assert!(said.contains(
            "pg_dump --format=custom --file=platter.dump 'postgres://platter:***@db.lab:5432/platter'"
        ));
        assert!(said.contains("pg_restore --clean --if-exists --no-owner"));
        assert!(said.contains("UPDATE store_identity SET id ="));
    }
}
