//! One process at a time per SQLite store and per agent state directory. Two runs in one
//! directory would share one campaign with two agents acting as one host: each takes
//! steps of the other's plan, and the campaign ends "done, 75/76 steps" with a step stuck;
//! two agents on one state directory append to one journal, and two coordinators on one
//! SQLite file each believe they alone schedule its plans. So `platter run`, `platter serve`
//! on a SQLite store, and the agent (`platter-agent`, `platter agent`) take an exclusive
//! `flock` on a file next to what they own (`platter.db.lock`, `agent.lock`) and hold it
//! until they exit; the kernel drops it however the process ends, `kill -9` included, so a
//! lock is never left behind. The file says who holds it (pid, command, start), for the
//! message the next one prints. It must not be used for anything but refusing a second
//! process. Here, in the crate both sides share, because the agent may not depend on the
//! coordinator (a PostgreSQL store is shared on purpose and takes no lock).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;

/// A lock held: released when dropped (and by the kernel, whatever ends the process).
pub struct Held {
    file: File,
}

impl Drop for Held {
    fn drop(&mut self) {
        // Emptied while still locked, so no later reader takes this holder's words for a
        // live one's; the close below releases the lock.
        let _ = self.file.set_len(0);
    }
}

/// The lock file of `path` (a store file or a directory): `PATH.lock` beside it.
pub(crate) fn lock_path(path: &Path) -> PathBuf {
    match path.file_name() {
        Some(name) => {
            let mut name = name.to_os_string();
            name.push(".lock");
            path.with_file_name(name)
        }
        // `.` or `/`: nothing to sit beside, so inside.
        None => path.join(".platter-run.lock"),
    }
}

/// Takes the lock of `what` (shown as `described`, e.g. "platter-data/platter.db (the
/// store)") for this process, or fails at once naming the process that holds it, then
/// `instead` (what the user can do: "wait for it to end, or give this run …"). `None`
/// where the filesystem has no locks: said at WARN, and the process goes on unguarded.
pub fn take(what: &Path, described: &str, instead: &str) -> anyhow::Result<Option<Held>> {
    let path = lock_path(what);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("making {}", dir.display()))?;
    }
    let writable = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path);
    let mut file = match writable {
        Ok(f) => f,
        // A read-only filesystem still locks a file opened for reading (flock needs no
        // write access): what needs to write there says so itself, with its own path.
        Err(e) if e.kind() == std::io::ErrorKind::ReadOnlyFilesystem => File::open(&path)
            .with_context(|| format!("opening the lock file {}", path.display()))?,
        Err(e) => {
            return Err(e).with_context(|| format!("opening the lock file {}", path.display()))
        }
    };
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut said = String::new();
            let _ = file.read_to_string(&mut said);
            anyhow::bail!("{described} is in use by {}; {instead}", holder(&said));
        }
        // A filesystem without locks (some network ones): run unguarded, but say so.
        Err(TryLockError::Error(e)) => {
            tracing::warn!(
                "cannot lock {} ({e}): nothing stops another process from using {described} at the same time",
                path.display()
            );
            return Ok(None);
        }
    }
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let command = std::env::args()
        .enumerate()
        .map(|(i, a)| match i {
            // The program as people type it, not its full path.
            0 => Path::new(&a)
                .file_name()
                .map_or(a.clone(), |n| n.to_string_lossy().into_owned()),
            _ => a,
        })
        .collect::<Vec<_>>()
        .join(" ");
    let record = format!("{}\n{started}\n{command}\n", std::process::id());
    // Who holds it is for the message of a second taker; the lock is the flock. On a full
    // or read-only filesystem the process goes on, holding the lock unnamed, so that what
    // needs the space (the agent's journal) says so itself, with its own path.
    if let Err(e) = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(record.as_bytes()))
    {
        tracing::warn!(
            "cannot write who holds {} ({e}); held all the same",
            path.display()
        );
    }
    Ok(Some(Held { file }))
}

/// "`platter run c.yaml` (pid 1234, started 12:01:02 UTC, 5 s ago)" from a lock file's
/// text, or "another process" when it names none that is alive (it was just taken and not
/// yet written, or a holder killed with -9 left it and the new one has not written yet).
fn holder(said: &str) -> String {
    let mut lines = said.lines();
    let (Some(pid), Some(started), Some(command)) = (
        lines.next().and_then(|p| p.parse::<u32>().ok()),
        lines.next().and_then(|s| s.parse::<u64>().ok()),
        lines.next(),
    ) else {
        return "another process".to_string();
    };
    if !Path::new(&format!("/proc/{pid}")).exists() {
        return "another process".to_string();
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(started, |d| d.as_secs());
    let day = started % 86_400;
    format!(
        "`{command}` (pid {pid}, started {:02}:{:02}:{:02} UTC, {} ago)",
        day / 3600,
        day / 60 % 60,
        day % 60,
        ago(now.saturating_sub(started))
    )
}

/// "5 s", "12 min", "3 h".
fn ago(secs: u64) -> String {
    match secs {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s => format!("{} h", s / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_taker_is_refused_with_the_holder_and_the_lock_goes_with_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("data/platter.db");
        const INSTEAD: &str = "wait for it to end";
        let held = take(&store, "the store", INSTEAD).unwrap().unwrap();
        assert_eq!(lock_path(&store), dir.path().join("data/platter.db.lock"));
        // flock locks belong to an open file description: a second open in this process
        // is refused as another process's would be.
        let e = take(&store, "the store", INSTEAD)
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("the store is in use by `"), "{e}");
        assert!(
            e.contains(&format!("(pid {}, started ", std::process::id())),
            "{e}"
        );
        assert!(e.ends_with("); wait for it to end"), "{e}");
        drop(held);
        assert_eq!(std::fs::read_to_string(lock_path(&store)).unwrap(), "");
        let again = take(&store, "the store", INSTEAD).unwrap();
        assert!(again.is_some());
    }

    #[test]
    fn a_holder_that_is_gone_is_not_named() {
        assert_eq!(holder(""), "another process");
        assert_eq!(holder("4194304999\n0\nplatter run x\n"), "another process");
        let me = std::process::id();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let said = holder(&format!("{me}\n{}\nplatter run c.yaml\n", now - 65));
        assert!(
            said.starts_with(&format!("`platter run c.yaml` (pid {me}, started ")),
            "{said}"
        );
        assert!(said.ends_with(" UTC, 65 s ago)"), "{said}");
        assert_eq!(
            (ago(119), ago(120), ago(7300)),
            ("119 s".into(), "2 min".into(), "2 h".into())
        );
    }
}
