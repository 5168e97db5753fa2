//! Backups taken while a store is written, the refusals of `backup`, `inspect` and
//! `restore`, and what a restore leaves where.

use std::path::{Path, PathBuf};

use platter_proto::model::{Record, RecordKind, StepKind};
use rusqlite::Connection;

use super::*;
use crate::store::{test_campaign, AckedElsewhere, Store};

/// A store at `dir/NAME` holding campaign `t` (generation 1) with one measurement stored.
async fn store_with_a_sample(dir: &Path, name: &str) -> (Store, PathBuf) {
    let path = dir.join(name);
    let store = Store::open(&path).unwrap();
    let planned = test_campaign("h", 1);
    store.insert_campaign(&planned, "t.yaml", "").unwrap();
    let plan = &planned.plans[0];
    let index = plan
        .steps
        .iter()
        .position(|s| matches!(s.kind, StepKind::Measure(_)))
        .unwrap();
    let end = crate::store::tests::end(1, plan, index as u32, 1, 1.5);
    store.write_records(&"h".into(), vec![end]).await.unwrap();
    (store, path)
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn count(path: &Path, sql: &str) -> i64 {
    Connection::open(path)
        .unwrap()
        .query_row(sql, (), |r| r.get(0))
        .unwrap()
}

/// A backup of a store that is open (WAL, its lock held as a coordinator holds it) and
/// written all the while is a whole platter store each time: it passes the integrity check,
/// holds a campaign count between those before and after it, and leaves no temporary file.
#[tokio::test(flavor = "multi_thread")]
async fn a_backup_taken_while_the_store_is_written_is_whole_and_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let (store, db) = store_with_a_sample(dir.path(), "platter.db").await;
    // The serving coordinator's lock: a backup does not need it.
    let _held = platter_proto::lock::take(&db, "the store", "wait")
        .unwrap()
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writing = {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut generation = 2;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                store
                    .insert_campaign(&test_campaign("h", generation), "t.yaml", "")
                    .unwrap();
                generation += 1;
            }
            generation - 1
        })
    };
    let backups = dir.path().join("backups");
    std::fs::create_dir(&backups).unwrap();
    let mut seen = Vec::new();
    for i in 0..5 {
        let file = backups.join(format!("b{i}.db"));
        let b = backup(&db, &file, false).unwrap();
        let c = inspect(&file).unwrap();
        assert_eq!(b.contents, c);
        assert_eq!(c.samples, 1);
        assert_eq!(c.store_id, store.id());
        assert_eq!(c.schema_version, latest_schema_version().unwrap());
        assert_eq!(c.bytes, std::fs::metadata(&file).unwrap().len());
        // A self-contained file: no journal mode that needs files beside it.
        let mode: String = Connection::open(&file)
            .unwrap()
            .query_row("PRAGMA journal_mode", (), |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "delete");
        seen.push(c.campaigns);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let last = writing.join().unwrap();
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert!(
        seen[0] >= 1 && seen[4] <= i64::from(last),
        "{seen:?} of {last}"
    );
    assert!(
        seen[4] > 1,
        "the store was written during the backups: {seen:?}"
    );
    assert_eq!(
        names(&backups),
        ["b0.db", "b1.db", "b2.db", "b3.db", "b4.db"]
    );
    // Nothing of the store changed, and it goes on.
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM campaigns"),
        i64::from(last)
    );
}

/// An existing file is not replaced unless asked (and then it is whole); a store that is
/// not there is not made.
#[tokio::test(flavor = "multi_thread")]
async fn a_backup_replaces_a_file_only_when_forced_and_makes_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let (_store, db) = store_with_a_sample(dir.path(), "platter.db").await;
    let file = dir.path().join("backup.db");
    std::fs::write(&file, "keep me").unwrap();
    let e = backup(&db, &file, false).unwrap_err();
    assert!(e.is_refusal(), "{e}");
    assert!(
        e.to_string()
            .ends_with("exists: give another file, or --force to replace it"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    backup(&db, &file, true).unwrap();
    assert_eq!(inspect(&file).unwrap().samples, 1);
    let e = backup(&db, &db, true).unwrap_err();
    assert!(matches!(e, BackupError::TheStore(_)), "{e}");

    let missing = dir.path().join("nowhere/platter.db");
    let e = backup(&missing, &dir.path().join("b2.db"), false).unwrap_err();
    assert!(matches!(e, BackupError::NoStore(_)), "{e}");
    assert!(
        e.to_string()
            .contains("give --db the SQLite file of the store"),
        "{e}"
    );
    assert!(!missing.exists() && !dir.path().join("b2.db").exists());
    let leftovers: Vec<String> = names(dir.path())
        .into_iter()
        .filter(|n| n.contains(".partial-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// What is not a good backup of a platter store is refused, each with what to do.
#[tokio::test(flavor = "multi_thread")]
async fn inspect_refuses_what_is_not_a_good_platter_backup() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_store, db) = store_with_a_sample(d, "platter.db").await;
    let good = d.join("good.db");
    backup(&db, &good, false).unwrap();

    let text = d.join("notes.txt");
    std::fs::write(
        &text,
        "not a database, but long enough to be read as one ".repeat(100),
    )
    .unwrap();
    let e = inspect(&text).unwrap_err();
    assert!(matches!(e, BackupError::NotSqlite { .. }), "{e}");

    let other = d.join("other.db");
    Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE things (x); INSERT INTO things VALUES (1);")
        .unwrap();
    let e = inspect(&other).unwrap_err();
    assert!(matches!(e, BackupError::NotPlatter { .. }), "{e}");
    assert!(e.to_string().contains("not a platter store"), "{e}");

    let latest = latest_schema_version().unwrap();
    let newer = d.join("newer.db");
    std::fs::copy(&good, &newer).unwrap();
    Connection::open(&newer)
        .unwrap()
        .pragma_update(None, "user_version", latest + 1)
        .unwrap();
    let e = inspect(&newer).unwrap_err();
    assert!(
        matches!(e, BackupError::Newer { version, latest: l, .. } if version == latest + 1 && l == latest),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("restore it with the platter that wrote it"),
        "{e}"
    );

    // Every page after the first two (the schema's) overwritten: SQLite reads garbage.
    let damaged = d.join("damaged.db");
    let mut bytes = std::fs::read(&good).unwrap();
    let page = 4096;
    assert!(bytes.len() > 3 * page, "{}", bytes.len());
    for b in &mut bytes[2 * page..] {
        *b = 0x5a;
    }
    std::fs::write(&damaged, bytes).unwrap();
    let e = inspect(&damaged).unwrap_err();
    assert!(matches!(e, BackupError::Damaged { .. }), "{e}");
    assert!(
        e.to_string().contains("fails SQLite's integrity check"),
        "{e}"
    );

    // A file with a log of its own beside it: its last writes may be there.
    let live = d.join("live.db");
    std::fs::copy(&good, &live).unwrap();
    std::fs::write(d.join("live.db-wal"), "frames").unwrap();
    let e = inspect(&live).unwrap_err();
    assert!(matches!(e, BackupError::InUse(_)), "{e}");

    let e = inspect(&d.join("absent.db")).unwrap_err();
    assert!(matches!(e, BackupError::NoBackup(_)), "{e}");
    inspect(&good).unwrap();
}

/// A restore to a new place makes a store with the backup's contents, this platter's
/// schema and a new identity. A store that is there is replaced only when forced, and is
/// then kept beside with its write-ahead log (its last commits still in it), while no
/// -wal or -shm of it is left beside the restored store.
#[tokio::test(flavor = "multi_thread")]
async fn a_restore_makes_a_new_identity_and_keeps_the_store_it_replaces() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (store, db) = store_with_a_sample(d, "platter.db").await;
    let file = d.join("backup.db");
    backup(&db, &file, false).unwrap();
    store
        .insert_campaign(&test_campaign("h", 2), "t.yaml", "")
        .unwrap();
    let original = store.id().to_string();
    drop(store);

    // Somewhere new: no --force needed.
    let elsewhere = d.join("elsewhere/platter.db");
    let contents = inspect(&file).unwrap();
    let r = restore(&file, &contents, &elsewhere, false).unwrap();
    assert_eq!(r.replaced, None);
    assert_eq!(r.contents.store_id, original);
    assert_ne!(r.store_id, original);
    assert_eq!(r.schema_version, latest_schema_version().unwrap());
    let restored = Store::open(&elsewhere).unwrap();
    assert_eq!(restored.id(), r.store_id);
    drop(restored);
    assert_eq!(count(&elsewhere, "SELECT COUNT(*) FROM campaigns"), 1);
    assert_eq!(count(&elsewhere, "SELECT COUNT(*) FROM samples"), 1);

    // In the place of a store whose last commit is only in its log, as a crash leaves it.
    let crashed = d.join("crashed.db");
    {
        let c = Connection::open(&db).unwrap();
        c.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        c.execute("UPDATE campaigns SET name = 'in the log'", ())
            .unwrap();
        std::fs::copy(&db, &crashed).unwrap();
        std::fs::copy(d.join("platter.db-wal"), d.join("crashed.db-wal")).unwrap();
        std::fs::write(d.join("crashed.db-shm"), "").unwrap();
    }
    let e = restore(&file, &contents, &crashed, false).unwrap_err();
    assert!(e.is_refusal(), "{e}");
    assert!(
        e.to_string()
            .contains("holds a store already: give --force"),
        "{e}"
    );
    let r = restore(&file, &contents, &crashed, true).unwrap();
    let kept = r.replaced.unwrap();
    let kept_name = kept.file_name().unwrap().to_string_lossy().into_owned();
    assert!(kept_name.starts_with("crashed.db.replaced-"), "{kept_name}");
    let here: Vec<String> = names(d)
        .into_iter()
        .filter(|n| n.starts_with("crashed.db"))
        .collect();
    assert_eq!(
        here,
        [
            "crashed.db".to_string(),
            kept_name.clone(),
            format!("{kept_name}-wal")
        ]
    );
    assert_eq!(
        count(
            &kept,
            "SELECT COUNT(*) FROM campaigns WHERE name = 'in the log'"
        ),
        2,
        "the replaced store keeps its last commits"
    );
    assert_eq!(count(&crashed, "SELECT COUNT(*) FROM campaigns"), 1);
    assert_eq!(
        count(
            &crashed,
            "SELECT COUNT(*) FROM campaigns WHERE name = 'in the log'"
        ),
        0
    );
    // A backup newer than this platter is refused before anything is touched.
    let newer = d.join("newer.db");
    std::fs::copy(&file, &newer).unwrap();
    Connection::open(&newer)
        .unwrap()
        .pragma_update(None, "user_version", 1000)
        .unwrap();
    assert!(matches!(
        inspect(&newer).unwrap_err(),
        BackupError::Newer { .. }
    ));
    assert!(
        !names(d).iter().any(|n| n.contains(".restoring-")),
        "{:?}",
        names(d)
    );
}

/// A restored store lacks what the original acknowledged after the backup: the first hello
/// of each agent says how far it was acked, and the store answers with the records it never
/// heard of, once (a store new to the agent says so too, as new).
#[tokio::test(flavor = "multi_thread")]
async fn a_restored_store_tells_once_what_the_original_acked_after_the_backup() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let db = d.join("platter.db");
    let store = Store::open(&db).unwrap();
    let planned = test_campaign("h", 1);
    store.insert_campaign(&planned, "t.yaml", "").unwrap();
    let accepted = |seq| Record {
        seq,
        kind: RecordKind::PlanAccepted {
            plan_id: planned.plans[0].id.clone(),
        },
    };
    let hello = |store: &Store, host: &str, acked: u64| {
        let (store, host) = (store.clone(), host.to_string());
        async move {
            store
                .agent_hello(&host.into(), "boot", "v", &[], &[], acked)
                .await
                .unwrap()
        }
    };
    assert_eq!(hello(&store, "h", 0).await, None);
    store
        .write_records(&"h".into(), vec![accepted(1), accepted(2)])
        .await
        .unwrap();
    let file = d.join("backup.db");
    backup(&db, &file, false).unwrap();
    // After the backup the original stores and acks seq 3–5 (a resend of one is harmless).
    store
        .write_records(&"h".into(), vec![accepted(3), accepted(4), accepted(5)])
        .await
        .unwrap();
    assert_eq!(
        hello(&store, "h", 5).await,
        None,
        "the original has them all"
    );
    drop(store);

    let restored_at = d.join("restored.db");
    restore(&file, &inspect(&file).unwrap(), &restored_at, false).unwrap();
    let restored = Store::open(&restored_at).unwrap();
    assert_eq!(
        hello(&restored, "h", 5).await,
        Some(AckedElsewhere {
            first: 3,
            last: 5,
            known_agent: true
        })
    );
    assert_eq!(hello(&restored, "h", 5).await, None, "said once");
    // An agent the store never saw (its first hello came after the backup).
    assert_eq!(
        hello(&restored, "g", 7).await,
        Some(AckedElsewhere {
            first: 1,
            last: 7,
            known_agent: false
        })
    );
    assert_eq!(hello(&restored, "g", 7).await, None);
    // Records the agent makes from now on are counted as before.
    restored
        .write_records(&"h".into(), vec![accepted(6)])
        .await
        .unwrap();
    assert_eq!(hello(&restored, "h", 6).await, None);
}
