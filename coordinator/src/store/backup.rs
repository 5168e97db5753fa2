//! Backups of an SQLite store and their restoring: `backup` takes a consistent copy of a
//! store while a coordinator serves it, `inspect` judges a copy, `restore` puts one in the
//! place of a store under a new identity. It takes no lock: `platter db restore` holds the
//! store's lock around `restore`, and a backup needs none (it only reads). A file it makes
//! appears whole or not at all: written under a temporary name beside its place, fsync'd,
//! then renamed, its directory fsync'd; a failure leaves nothing half-written.
//!
//! The copy is SQLite's `VACUUM INTO`: one read transaction, so one snapshot, however the
//! coordinator writes meanwhile (under WAL a reader never blocks the writer). The online
//! backup API copies page by page across several steps and starts over whenever another
//! connection writes, which a serving coordinator does every few milliseconds.
//!
//! A restored store gets a new identity (`store_identity`): campaigns it plans from then on
//! get ids the original store never gave. Without it, a campaign submitted again after the
//! restore would get the id (and plan ids) of the one the original ran after the backup,
//! which the agents have journaled as finished: they would answer "finished" without
//! running a step, and records of it still in a journal would be taken for the new run's.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rusqlite::{Connection, OpenFlags};

use super::connect::{open_conn, BUSY_TIMEOUT};
use super::error::StoreError;
use super::migrations;

/// Why a backup or a restore did not happen, in words that say what to do.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{} exists: give another file, or --force to replace it", .0.display())]
    Exists(PathBuf),
    #[error(
        "{} holds a store already: give --force to replace it (it is kept beside, as {}.replaced-TIME), or restore to another --db",
        .0.display(), .0.display()
    )]
    StoreExists(PathBuf),
    #[error(
        "no store at {}: give --db the SQLite file of the store (`platter run` writes platter-data/platter.db; a coordinator, the file of its --db)",
        .0.display()
    )]
    NoStore(PathBuf),
    #[error("{} is the store itself: give the backup a file of its own", .0.display())]
    TheStore(PathBuf),
    #[error("no backup at {}", .0.display())]
    NoBackup(PathBuf),
    #[error("{} is not an SQLite database ({why}): give a file `platter db backup` wrote", .path.display())]
    NotSqlite { path: PathBuf, why: String },
    #[error(
        "{} is an SQLite database but not a platter store (it has no {missing} table): give a file `platter db backup` wrote",
        .path.display()
    )]
    NotPlatter {
        path: PathBuf,
        missing: &'static str,
    },
    #[error("{} fails SQLite's integrity check ({problems}): it cannot be restored; restore an older backup", .path.display())]
    Damaged { path: PathBuf, problems: String },
    #[error(
        "{} has schema version {version}, newer than this platter's ({latest}): restore it with the platter that wrote it, or a newer one",
        .path.display()
    )]
    Newer {
        path: PathBuf,
        version: i64,
        latest: i64,
    },
    #[error(
        "{} has a write-ahead log beside it ({}-wal) that may hold its last writes: it is a store in use, or a copy of one; back that store up with `platter db backup` and restore what it writes",
        .0.display(), .0.display()
    )]
    InUse(PathBuf),
    #[error("{what}: {error}")]
    Io { what: String, error: std::io::Error },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl BackupError {
    /// A refusal to replace what exists (the caller may give --force): exit status 2, as
    /// for other refusals of what the user asked.
    pub fn is_refusal(&self) -> bool {
        matches!(self, BackupError::Exists(_) | BackupError::StoreExists(_))
    }
}

impl From<rusqlite::Error> for BackupError {
    fn from(e: rusqlite::Error) -> BackupError {
        BackupError::Store(e.into())
    }
}

type Result<T> = std::result::Result<T, BackupError>;

/// `what` failed with `error`.
fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BackupError {
    let what = what.into();
    move |error| BackupError::Io { what, error }
}

/// What a store file holds, as a backup's summary says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contents {
    /// The store's identity (`store_identity`).
    pub store_id: String,
    /// SQLite's `user_version`: the migrations applied.
    pub schema_version: i64,
    pub campaigns: i64,
    /// Of those, still running when the copy was taken.
    pub running: i64,
    pub samples: i64,
    /// The file's size.
    pub bytes: u64,
}

/// What `backup` did.
#[derive(Debug, Clone)]
pub struct Backup {
    pub contents: Contents,
    pub took: std::time::Duration,
}

/// What `restore` did.
#[derive(Debug, Clone)]
pub struct Restored {
    /// The backup's, as `inspect` read it.
    pub contents: Contents,
    /// This platter's schema version, which the restored store now has.
    pub schema_version: i64,
    /// The restored store's new identity (the backup's is `contents.store_id`).
    pub store_id: String,
    /// Where the store that was replaced is kept, if there was one.
    pub replaced: Option<PathBuf>,
}

/// This platter's SQLite schema version: the number of its migrations.
pub fn latest_schema_version() -> Result<i64> {
    let c = Connection::open_in_memory()?;
    let pending = migrations::sqlite()
        .pending_migrations(&c)
        .map_err(StoreError::from)?;
    Ok(i64::from(pending))
}

/// `name` with `suffix` appended, beside it: `a/platter.db` → `a/platter.db.partial-12`.
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// The directory `path` is in ("." for a bare name).
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// fsync of `path`'s contents.
fn sync_file(path: &Path) -> Result<()> {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(io(format!("syncing {}", path.display())))
}

/// fsync of the directory `path` is in: a rename or a new name in it survives a crash.
fn sync_dir(path: &Path) -> Result<()> {
    let dir = parent(path);
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(io(format!("syncing the directory {}", dir.display())))
}

/// A file under a temporary name, with SQLite's companions (-wal, -shm, -journal): removed
/// when dropped unless `keep` was called (a failure leaves nothing behind).
struct Temporary {
    path: PathBuf,
    kept: bool,
}

impl Temporary {
    fn new(path: PathBuf) -> Temporary {
        let t = Temporary { path, kept: false };
        // A leftover of an earlier attempt by a process of the same id.
        t.remove();
        t
    }

    fn remove(&self) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let _ = std::fs::remove_file(beside(&self.path, suffix));
        }
    }

    fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        if !self.kept {
            self.remove();
        }
    }
}

/// A consistent copy of the SQLite store `db` in `file` (refused if `file` exists, unless
/// `force`), taken while a coordinator may serve it; takes no lock and writes nothing to
/// the store.
pub fn backup(db: &Path, file: &Path, force: bool) -> Result<Backup> {
    let started = Instant::now();
    if !db.is_file() {
        return Err(BackupError::NoStore(db.to_path_buf()));
    }
    if file.exists() {
        let same = |p: &Path| std::fs::canonicalize(p).ok();
        if same(file) == same(db) {
            return Err(BackupError::TheStore(file.to_path_buf()));
        }
        if !force {
            return Err(BackupError::Exists(file.to_path_buf()));
        }
    }
    // Opened without SQLITE_OPEN_CREATE (a wrong path must not make an empty store) and
    // without migrating: the copy is of the store as it is.
    let source = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    source.busy_timeout(BUSY_TIMEOUT)?;
    platter_tables(&source, db)?;
    let temp = Temporary::new(beside(file, &format!(".partial-{}", std::process::id())));
    let target = temp.path.to_str().ok_or_else(|| BackupError::Io {
        what: format!("backing up to {}", file.display()),
        error: std::io::Error::other("the file's name is not UTF-8; give another"),
    })?;
    source.execute("VACUUM INTO ?1", [target])?;
    drop(source);
    // One self-contained file, whatever the store's journal mode: a copy in WAL mode that
    // is opened read-only needs its -shm beside it.
    let contents = {
        let copy = Connection::open_with_flags(&temp.path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
        let _: String = copy.query_row("PRAGMA journal_mode = DELETE", (), |r| r.get(0))?;
        contents_of(&copy, &temp.path)?
    };
    sync_file(&temp.path)?;
    if force {
        std::fs::rename(&temp.path, file)
            .map_err(io(format!("renaming the copy to {}", file.display())))?;
    } else {
        // A new name that fails if `file` appeared meanwhile: never replaced unasked.
        match std::fs::hard_link(&temp.path, file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(BackupError::Exists(file.to_path_buf()))
            }
            Err(e) => return Err(io(format!("naming the copy {}", file.display()))(e)),
        }
        let _ = std::fs::remove_file(&temp.path);
    }
    temp.keep();
    sync_dir(file)?;
    Ok(Backup {
        contents,
        took: started.elapsed(),
    })
}

/// The tables that make an SQLite database a platter store, or which one it lacks.
fn platter_tables(c: &Connection, path: &Path) -> Result<()> {
    for table in ["store_identity", "campaigns", "samples"] {
        let found: bool = c.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
            [table],
            |r| r.get(0),
        )?;
        if !found {
            return Err(BackupError::NotPlatter {
                path: path.to_path_buf(),
                missing: table,
            });
        }
    }
    Ok(())
}

/// What the store file open in `c` holds.
fn contents_of(c: &Connection, path: &Path) -> Result<Contents> {
    let n = |sql: &str| -> rusqlite::Result<i64> { c.query_row(sql, (), |r| r.get(0)) };
    Ok(Contents {
        store_id: c.query_row("SELECT id FROM store_identity", (), |r| r.get(0))?,
        schema_version: n("PRAGMA user_version")?,
        campaigns: n("SELECT COUNT(*) FROM campaigns")?,
        running: n("SELECT COUNT(*) FROM campaigns WHERE state = 'running'")?,
        samples: n("SELECT COUNT(*) FROM samples")?,
        bytes: std::fs::metadata(path)
            .map_err(io(format!("reading {}", path.display())))?
            .len(),
    })
}

/// Judges the file `backup` before anything is restored from it: an SQLite database that
/// passes `PRAGMA integrity_check`, a platter store, of a schema version this platter
/// knows (the same or older), with no write-ahead log of its own beside it. Only reads it.
pub fn inspect(backup: &Path) -> Result<Contents> {
    if !backup.is_file() {
        return Err(BackupError::NoBackup(backup.to_path_buf()));
    }
    if std::fs::metadata(beside(backup, "-wal")).is_ok_and(|m| m.len() > 0) {
        return Err(BackupError::InUse(backup.to_path_buf()));
    }
    let not_sqlite = |e: rusqlite::Error| match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase) => BackupError::NotSqlite {
            path: backup.to_path_buf(),
            why: e.to_string(),
        },
        Some(rusqlite::ErrorCode::DatabaseCorrupt) => BackupError::Damaged {
            path: backup.to_path_buf(),
            problems: e.to_string(),
        },
        _ => e.into(),
    };
    let c = Connection::open_with_flags(
        backup,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(not_sqlite)?;
    let problems: Vec<String> = {
        let mut stmt = c.prepare("PRAGMA integrity_check").map_err(not_sqlite)?;
        let rows = stmt
            .query_map((), |r| r.get::<_, String>(0))
            .map_err(not_sqlite)?;
        rows.collect::<rusqlite::Result<_>>().map_err(not_sqlite)?
    };
    if problems != ["ok"] {
        let mut said: Vec<String> = problems.iter().take(3).cloned().collect();
        if problems.len() > 3 {
            said.push(format!("and {} more", problems.len() - 3));
        }
        return Err(BackupError::Damaged {
            path: backup.to_path_buf(),
            problems: said.join("; "),
        });
    }
    platter_tables(&c, backup)?;
    let contents = contents_of(&c, backup)?;
    let latest = latest_schema_version()?;
    if contents.schema_version > latest {
        return Err(BackupError::Newer {
            path: backup.to_path_buf(),
            version: contents.schema_version,
            latest,
        });
    }
    Ok(contents)
}

/// Puts the backup `backup`, which `inspect` judged (`contents`, what it said), in the place
/// of the SQLite store `db` (refused if a store is there, unless `force`: it is then kept
/// beside as `DB.replaced-TIME`, with its write-ahead log), migrated to this platter's
/// schema and under a new identity. The caller holds the store's lock: no coordinator or
/// `platter run` may have the store open meanwhile.
pub fn restore(backup: &Path, contents: &Contents, db: &Path, force: bool) -> Result<Restored> {
    let (wal, shm, journal) = (
        beside(db, "-wal"),
        beside(db, "-shm"),
        beside(db, "-journal"),
    );
    let existing = db.exists() || wal.exists() || journal.exists();
    if existing && !force {
        return Err(BackupError::StoreExists(db.to_path_buf()));
    }
    if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io(format!("making {}", dir.display())))?;
    }
    let temp = Temporary::new(beside(db, &format!(".restoring-{}", std::process::id())));
    std::fs::copy(backup, &temp.path).map_err(io(format!(
        "copying {} to {}",
        backup.display(),
        temp.path.display()
    )))?;
    // Migrated and given its identity under the temporary name, so that `db` is never a
    // store half-way there; closing the connection checkpoints its log into the file.
    let store_id = {
        let conn = open_conn(&temp.path, BUSY_TIMEOUT)?;
        let c = conn.as_sqlite().expect("an SQLite connection");
        let mut id: String;
        loop {
            id = c.query_row(
                "UPDATE store_identity SET id = lower(hex(randomblob(4))) RETURNING id",
                (),
                |r| r.get(0),
            )?;
            if id != contents.store_id {
                break;
            }
        }
        id
    };
    sync_file(&temp.path)?;
    let replaced = if existing {
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
        let mut kept = beside(db, &format!(".replaced-{stamp}"));
        let mut n = 1;
        while kept.exists() {
            n += 1;
            kept = beside(db, &format!(".replaced-{stamp}-{n}"));
        }
        // The store's file with its log (and a rollback journal, were there one): SQLite
        // finds them by name, so they stay a store together; left beside the restored
        // file, they would be applied to it.
        for (from, to) in [
            (db.to_path_buf(), kept.clone()),
            (wal.clone(), beside(&kept, "-wal")),
            (journal.clone(), beside(&kept, "-journal")),
        ] {
            if from.exists() {
                std::fs::rename(&from, &to).map_err(io(format!(
                    "moving {} aside to {}",
                    from.display(),
                    to.display()
                )))?;
            }
        }
        Some(kept)
    } else {
        None
    };
    // The shared-memory index of the old log, if any: SQLite makes it anew.
    if shm.exists() {
        std::fs::remove_file(&shm).map_err(io(format!("removing {}", shm.display())))?;
    }
    std::fs::rename(&temp.path, db).map_err(io(format!(
        "renaming {} to {}",
        temp.path.display(),
        db.display()
    )))?;
    temp.keep();
    sync_dir(db)?;
    Ok(Restored {
        contents: contents.clone(),
        schema_version: latest_schema_version()?,
        store_id,
        replaced,
    })
}

#[cfg(test)]
mod tests;
