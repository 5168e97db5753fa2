//! `platter users` and `platter tokens` as an operator runs them, on an SQLite store and,
//! when `PLATTER_TEST_POSTGRES` names a server, on PostgreSQL: what they print, their exit
//! statuses, and that the store then holds what they said (a password opens its account,
//! a printed secret is found by `Store::token`).

mod common;

use std::path::Path;

use assert_cmd::prelude::*;
use common::platter;
use platter::store::accounts::AccountRole;
use platter::store::db::Location;
use platter::store::Store;
use predicates::prelude::*;

/// A migrated SQLite store in `dir`, and a fresh PostgreSQL one when a server is named:
/// each as its `--db` argument.
fn stores(dir: &Path) -> Vec<String> {
    let sqlite = dir.join("platter.db");
    platter()
        .args(["db", "migrate", "--db"])
        .arg(&sqlite)
        .assert()
        .success();
    let mut out = vec![sqlite.display().to_string()];
    if let Some(server) = platter::store::testing::postgres_url() {
        match platter::store::testing::fresh_postgres(&server) {
            Location::Postgres(url) => out.push(url),
            Location::Sqlite(_) => unreachable!("a PostgreSQL server gives a PostgreSQL store"),
        }
    }
    out
}

/// `platter ARGS --db DB`, with no PLATTER_DB from the environment in the way.
fn on(db: &str, args: &[&str]) -> assert_cmd::Command {
    let mut cmd = platter();
    cmd.env_remove("PLATTER_DB").args(args).args(["--db", db]);
    assert_cmd::Command::from_std(cmd)
}

fn open(db: &str) -> Store {
    Store::open_with_writers(&db.parse().unwrap(), 1).unwrap()
}

#[test]
fn users_are_added_from_a_file_or_stdin_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("password");
    // A final line break, as an editor or `echo` leaves, is not part of the password.
    std::fs::write(&file, "correct horse battery\n").unwrap();
    for db in stores(dir.path()) {
        on(&db, &["users", "add", "alice", "--role", "admin"])
            .arg("--password-file")
            .arg(&file)
            .assert()
            .success()
            .stdout("")
            .stderr(predicate::str::contains("account alice (admin) added"));
        on(&db, &["users", "add", "bob@lab", "--role", "viewer"])
            .write_stdin("typed into a pipe\r\n")
            .assert()
            .success();

        let out = on(&db, &["users", "list", "--output", "json"])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let listed: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let listed: Vec<(&str, &str)> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (a["name"].as_str().unwrap(), a["role"].as_str().unwrap()))
            .collect();
        assert_eq!(listed, [("alice", "admin"), ("bob@lab", "viewer")]);
        on(&db, &["users", "list"]).assert().success().stdout(
            predicate::str::is_match(r"(?m)^NAME +ROLE +CREATED\nalice +admin +20\d\d-").unwrap(),
        );

        let store = open(&db);
        assert!(store
            .check_password("alice", "correct horse battery")
            .unwrap()
            .is_some());
        assert!(store
            .check_password("bob@lab", "typed into a pipe")
            .unwrap()
            .is_some());

        // A new password, then a new role, then gone.
        on(&db, &["users", "password", "bob@lab"])
            .write_stdin("another password entirely\n")
            .assert()
            .success();
        assert!(store
            .check_password("bob@lab", "typed into a pipe")
            .unwrap()
            .is_none());
        on(&db, &["users", "role", "bob@lab", "operator"])
            .assert()
            .success();
        assert_eq!(
            store.account("bob@lab").unwrap().unwrap().role,
            AccountRole::Operator
        );
        on(&db, &["users", "remove", "bob@lab"]).assert().success();
        assert_eq!(store.account("bob@lab").unwrap(), None);
    }
}

#[test]
fn bad_input_is_refused_with_status_2_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for db in stores(dir.path()) {
        on(&db, &["users", "add", "alice", "--role", "operator"])
            .write_stdin("correct horse battery\n")
            .assert()
            .success();
        let refused = |args: &[&str], stdin: &str, says: &str| {
            on(&db, args)
                .write_stdin(stdin)
                .assert()
                .code(2)
                .stdout("")
                .stderr(predicate::str::contains(says));
        };
        refused(
            &["users", "add", "alice", "--role", "viewer"],
            "a different password\n",
            "error: an account named \"alice\" exists",
        );
        refused(
            &["users", "add", "bob", "--role", "viewer"],
            "too short\n",
            "error: a password needs at least 12 characters",
        );
        refused(
            &["users", "add", "bob smith", "--role", "viewer"],
            "correct horse battery\n",
            "cannot name an account",
        );
        refused(
            &["users", "add", "bob", "--role", "root"],
            "correct horse battery\n",
            "a role is viewer, operator or admin",
        );
        refused(
            &["users", "remove", "bob"],
            "",
            "error: no account named \"bob\"",
        );
        refused(
            &["users", "password", "bob"],
            "correct horse battery\n",
            "error: no account named \"bob\"",
        );
        refused(
            &[
                "tokens", "add", "--user", "alice", "--role", "admin", "--label", "ci",
            ],
            "",
            "error: a token's role cannot exceed its account's (alice is an operator)",
        );
        refused(
            &["tokens", "add", "--user", "bob", "--label", "ci"],
            "",
            "error: no account named \"bob\"",
        );
        refused(
            &["tokens", "revoke", "0123"],
            "",
            "error: no API token with id \"0123\"",
        );

        let store = open(&db);
        let names: Vec<_> = store
            .accounts()
            .unwrap()
            .into_iter()
            .map(|a| a.name)
            .collect();
        assert_eq!(names, ["alice"]);
        assert_eq!(
            store.account("alice").unwrap().unwrap().role,
            AccountRole::Operator
        );
        assert!(store.tokens().unwrap().is_empty());
    }
    // A mistyped SQLite path is not made into a new, empty store.
    let missing = dir.path().join("typo.db");
    on(missing.to_str().unwrap(), &["users", "list"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no store at"));
    assert!(!missing.exists());
}

#[test]
fn a_token_secret_is_printed_once_and_opens_the_store() {
    let dir = tempfile::tempdir().unwrap();
    for db in stores(dir.path()) {
        on(&db, &["users", "add", "alice", "--role", "operator"])
            .write_stdin("correct horse battery\n")
            .assert()
            .success();
        let out = on(
            &db,
            &["tokens", "add", "--user", "alice", "--label", "nightly CI"],
        )
        .assert()
        .success()
        .stderr(predicate::str::contains("shown only now"))
        .get_output()
        .clone();
        let secret = String::from_utf8(out.stdout).unwrap();
        let secret = secret.strip_suffix('\n').unwrap();
        assert!(
            secret.starts_with("plt_") && !secret.contains('\n'),
            "{secret}"
        );
        // The secret is on stdout only: stderr names the token by its id.
        assert!(!String::from_utf8_lossy(&out.stderr).contains(secret));

        let store = open(&db);
        let token = store
            .token(secret)
            .unwrap()
            .expect("the printed secret opens the store");
        assert_eq!(
            (token.account.as_str(), token.role, token.label.as_str()),
            ("alice", AccountRole::Operator, "nightly CI")
        );

        // A narrower role on request; listings never show a secret.
        on(
            &db,
            &[
                "tokens",
                "add",
                "--user",
                "alice",
                "--role",
                "viewer",
                "--label",
                "dashboard",
            ],
        )
        .assert()
        .success();
        let listed = on(&db, &["tokens", "list", "--output", "json"])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        assert!(!String::from_utf8_lossy(&listed).contains(secret));
        let listed: serde_json::Value = serde_json::from_slice(&listed).unwrap();
        let roles: Vec<(&str, &str)> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["label"].as_str().unwrap(), t["role"].as_str().unwrap()))
            .collect();
        assert_eq!(roles, [("nightly CI", "operator"), ("dashboard", "viewer")]);
        on(&db, &["tokens", "list"])
            .assert()
            .success()
            .stdout(predicate::str::contains(&token.id))
            .stdout(predicate::str::contains("nightly CI"));

        on(&db, &["tokens", "revoke", &token.id])
            .assert()
            .success()
            .stderr(predicate::str::contains(format!(
                "API token {} revoked",
                token.id
            )));
        assert_eq!(store.token(secret).unwrap(), None);
    }
}
