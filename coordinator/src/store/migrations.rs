//! The store's schema, as migrations: one SQL file each, per engine, in
//! `store/migrations/sqlite/` and `store/migrations/postgres/`, included in the binary.
//!
//! A store records how many it has applied (SQLite in `PRAGMA user_version`, through
//! rusqlite_migration; PostgreSQL in `platter_schema`, `db::pg::migrate`), so a file's
//! number is its place in that count and never changes: a new migration is a new file with
//! the next number, listed below, and an applied one is never edited in what it does
//! (COMPATIBILITY.md). The two engines count separately; each engine's folder, read in
//! order, is its whole schema, views included (defined once each, in their latest form by
//! the last file that makes them). No migration runs Rust code: each is SQL alone. The test
//! below holds the lists to the folders, so a file that is not listed, or a name out of
//! the `NNN_name.sql` form, fails; one that must run code needs a form of its own, added on
//! purpose with what runs it.
//!
//! `tests/schema.rs` opens both engines and fails on any table, column, index or view that
//! differs between them.

use rusqlite_migration::{Migrations, M};

/// One migration: its file's name (without `.sql`) and its text.
#[derive(Debug)]
pub struct Migration {
    pub name: &'static str,
    pub sql: &'static str,
}

/// The list of an engine's migrations, each read from `migrations/ENGINE/NAME.sql`.
macro_rules! migrations {
    ($engine:literal: $($name:literal),+ $(,)?) => {
        &[$(Migration {
            name: $name,
            sql: include_str!(concat!("migrations/", $engine, "/", $name, ".sql")),
        }),+]
    };
}

/// SQLite's migrations, in order.
pub const SQLITE: &[Migration] = migrations!("sqlite":
    "001_initial",
    "002_agent_labels",
    "003_steps_end_once_per_attempt",
    "004_identity_refusals_provenance",
    "005_warmup",
    "006_presence",
    "007_accounts",
    "008_schedules",
    "009_drive_ledger",
    "010_plan_templates",
    "011_unusual_steps",
    "012_drive_identity",
    "013_flags_alerts",
);

/// PostgreSQL's migrations, in order: the same tables in PostgreSQL's types (all integers
/// BIGINT, so one parameter type fits every column, and text that compares bytes), except
/// `samples.step`'s foreign key (003 says why).
pub const POSTGRES: &[Migration] = migrations!("postgres":
    "001_initial",
    "002_presence",
    "003_samples_without_step_key",
    "004_text_compares_bytes",
    "005_accounts",
    "006_schedules",
    "007_drive_ledger",
    "008_plan_templates",
    "009_unusual_steps",
    "010_drive_identity",
    "011_flags_alerts",
);

/// SQLite's migrations as rusqlite_migration applies them.
pub(super) fn sqlite() -> Migrations<'static> {
    Migrations::new(SQLITE.iter().map(|m| M::up(m.sql)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `.sql` files in `migrations/ENGINE`, by name without the extension, sorted.
    fn files(engine: &str) -> Vec<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/store/migrations")
            .join(engine);
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    fn check(engine: &str, listed: &[Migration]) {
        let on_disk = files(engine);
        for (i, file) in on_disk.iter().enumerate() {
            let stem = file
                .strip_suffix(".sql")
                .unwrap_or_else(|| panic!("{engine}/{file}: not a .sql file"));
            let (number, name) = stem
                .split_once('_')
                .unwrap_or_else(|| panic!("{engine}/{file}: not NNN_name.sql"));
            assert!(
                number.len() == 3 && number.bytes().all(|b| b.is_ascii_digit()),
                "{engine}/{file}: the number is not three digits"
            );
            assert_eq!(
                number.parse::<usize>().unwrap(),
                i + 1,
                "{engine}/{file}: numbers must run 001, 002, … with none missing"
            );
            assert!(
                !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{engine}/{file}: a name is lower-case words joined by _"
            );
        }
        let listed: Vec<String> = listed.iter().map(|m| format!("{}.sql", m.name)).collect();
        assert_eq!(
            listed,
            on_disk,
            "migrations::{} must list every file in migrations/{engine}, in order",
            engine.to_uppercase()
        );
    }

    #[test]
    fn every_file_is_listed_in_order_and_numbered_without_gaps() {
        check("sqlite", SQLITE);
        check("postgres", POSTGRES);
    }

    #[test]
    fn every_migration_has_sql() {
        for m in SQLITE.iter().chain(POSTGRES) {
            let statements = m
                .sql
                .lines()
                .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("--"))
                .count();
            assert!(statements > 0, "{}: only comments", m.name);
        }
    }
}
