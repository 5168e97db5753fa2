//! Stores for tests of the store and what reads it, so each runs against both engines.

use super::*;

/// The PostgreSQL server tests use, when one is named: `PLATTER_TEST_POSTGRES` (a URL
/// of a database the user may create schemas in). CI sets it
/// (`PLATTER_TEST_STRICT=1`, `platter_agent::testing::strict`, makes its absence a failure); elsewhere the calling
/// test is skipped, saying so: `SKIPPED <test>: …`.
pub fn postgres_url() -> Option<String> {
    postgres_url_or_skip("")
}

/// `postgres_url`; `part` names what is skipped when the rest of the test runs.
fn postgres_url_or_skip(part: &str) -> Option<String> {
    match std::env::var("PLATTER_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            // libtest names each test's thread after the test.
            let current = std::thread::current();
            let test = current.name().unwrap_or("a test");
            assert!(
                !platter_agent::testing::strict(),
                "{test}: PLATTER_TEST_STRICT=1 but PLATTER_TEST_POSTGRES names no PostgreSQL server"
            );
            // Past the test harness's capture (`eprintln!` is captured), so that a
            // passing run still shows what it left out.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}{part}: needs PostgreSQL; set PLATTER_TEST_POSTGRES to a \
                 database URL (postgres://USER:PASSWORD@HOST/DB) to include it"
            );
            None
        }
    }
}

/// A new, empty PostgreSQL database for one test: a schema of its own on the test
/// server (`search_path` in the URL), so tests run side by side. Its name says when it
/// was made (`t_<unix seconds>_<random>`): schemas of tests that are over an hour old
/// are dropped here, so the test server does not fill up with them.
pub fn fresh_postgres(url: &str) -> Location {
    const KEPT_SECS: u64 = 3600;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let schema = format!("t_{now}_{:08x}", rand::random::<u32>());
    let rt = db::pg::PgRuntime::new().unwrap();
    let c = db::pg::connect(url, rt.handle(), db::pg::DEFAULT_DEADLINE, None)
        .expect("the test PostgreSQL server");
    c.batch(&format!("CREATE SCHEMA {schema}")).unwrap();
    let old = c
        .query(
            "SELECT nspname FROM pg_namespace WHERE nspname ~ '^t_[0-9]+_[0-9a-f]{8}$'",
            &[],
        )
        .unwrap_or_default();
    for row in old {
        let name: String = row.get("nspname");
        let made: u64 = name[2..name.len() - 9].parse().unwrap_or(u64::MAX);
        if made.saturating_add(KEPT_SECS) < now {
            // Another test may be dropping it too.
            let _ = c.batch(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"));
        }
    }
    drop(c);
    let sep = if url.contains('?') { '&' } else { '?' };
    Location::Postgres(format!("{url}{sep}options=-c%20search_path%3D{schema}"))
}

/// An SQLite store in `dir`, and a PostgreSQL one when a server is named.
pub fn stores(dir: &Path) -> Vec<Store> {
    let mut out = vec![Store::open(&dir.join("t.db")).unwrap()];
    if let Some(url) = postgres_url_or_skip(" on PostgreSQL (it ran on SQLite)") {
        out.push(Store::open_at(&fresh_postgres(&url)).unwrap());
    }
    out
}

/// A drive of model `model`, as the fleet bench's agents report one.
pub fn drive(model: &str) -> platter_proto::inventory::Device {
    let mut d: platter_proto::inventory::Device = serde_json::from_str(
        r#"{"name":"sdz","path":"/dev/sdz","major_minor":"8:0","vendor":"ATA","model":"",
            "serial":"S1","firmware":"F1","size_bytes":1000204886016,"rotational":false,
            "transport":"ata","controller":["sd","ahci"],"pci_address":"0000:00:17.0",
            "by_id":[],"by_path":[],"write_cache":"write_back","write_cache_source":"",
            "partitions":[],"mounted":[],"holders":[],"holds_root":false,
            "backing_file":null,"wwn":""}"#,
    )
    .unwrap();
    d.model = model.to_string();
    d
}
