//! `platter certs` through the real binary: one directory per coordinator name, no identity
//! or CA replaced without `--force`, no certificate shorter than a day unless asked for with
//! `--hours`, and `certs list` with roles, names, expiry and warnings.

mod common;

use std::path::Path;
use std::process::Output;

use common::*;

const EXIT_INVALID: i32 = 2;

fn certs(pki: &Path, args: &[&str]) -> Output {
    platter()
        .arg("certs")
        .args(args)
        .arg("--dir")
        .arg(pki)
        .output()
        .unwrap()
}

fn ok(pki: &Path, args: &[&str]) -> String {
    let out = certs(pki, args);
    assert!(
        out.status.success(),
        "platter certs {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The bytes of an identity's (or the CA's) files, to show they were not touched.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect();
    v.sort();
    v
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn each_coordinator_gets_its_own_identity_and_none_is_replaced_without_force() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = tmp.path().join("pki");
    ok(&pki, &["init"]);
    let a = ok(
        &pki,
        &["issue", "coordinator", "coord-a", "localhost", "127.0.0.1"],
    );
    assert_eq!(
        a.trim(),
        pki.join("coordinator-coord-a").display().to_string()
    );
    let first = files(&pki.join("coordinator-coord-a"));
    assert_eq!(
        first.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(),
        ["ca.pem", "cert.pem", "key.pem"]
    );
    let b = ok(&pki, &["issue", "coordinator", "coord-b", "localhost"]);
    assert_eq!(
        b.trim(),
        pki.join("coordinator-coord-b").display().to_string()
    );
    assert_eq!(files(&pki.join("coordinator-coord-a")), first);

    // Again without --force: refused as a usage error, naming the directory and the way
    // out, and nothing written.
    for (role, name, dir) in [
        ("coordinator", "coord-a", "coordinator-coord-a"),
        ("agent", "rc66", "agent-rc66"),
        ("operator", "alice", "operator-alice"),
    ] {
        if role != "coordinator" {
            ok(&pki, &["issue", role, name]);
        }
        let before = files(&pki.join(dir));
        let out = certs(&pki, &["issue", role, name]);
        assert_eq!(out.status.code(), Some(EXIT_INVALID), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&pki.join(dir).display().to_string()) && err.contains("--force"),
            "{err}"
        );
        assert!(out.stdout.is_empty());
        assert_eq!(files(&pki.join(dir)), before);
    }

    // With --force: a new key and certificate, the CA's copy unchanged.
    ok(&pki, &["issue", "coordinator", "coord-a", "--force"]);
    let replaced = files(&pki.join("coordinator-coord-a"));
    assert_eq!(replaced[0], first[0], "ca.pem");
    assert_ne!(replaced[1], first[1], "cert.pem");
    assert_ne!(replaced[2], first[2], "key.pem");

    // The CA is never replaced.
    let ca = files(&pki.join("ca"));
    let out = certs(&pki, &["init"]);
    assert_eq!(out.status.code(), Some(EXIT_INVALID), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("already holds a CA"),
        "{}",
        stderr(&out)
    );
    assert_eq!(files(&pki.join("ca")), ca);
}

#[test]
fn a_lifetime_under_a_day_needs_hours_and_the_listing_warns_before_expiry() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = tmp.path().join("pki");
    ok(&pki, &["init"]);
    for args in [
        &["issue", "agent", "rc66", "--days", "0"][..],
        &["issue", "agent", "rc66", "--hours", "0"][..],
        &["issue", "agent", "rc66", "--days", "1", "--hours", "2"][..],
    ] {
        let out = certs(&pki, args);
        assert_eq!(out.status.code(), Some(EXIT_INVALID), "{args:?}");
        assert!(!pki.join("agent-rc66").exists(), "{args:?}");
    }
    let err = stderr(&certs(&pki, &["issue", "agent", "rc66", "--days", "0"]));
    assert!(
        err.contains("expires at once") && err.contains("--hours"),
        "{err}"
    );
    ok(&pki, &["issue", "agent", "rc66", "--hours", "2"]);
    ok(&pki, &["issue", "operator", "alice", "--days", "10"]);
    ok(
        &pki,
        &["issue", "coordinator", "coord-a", "localhost", "127.0.0.1"],
    );

    let out = certs(&pki, &["list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8(out.stdout.clone()).unwrap();
    let line = |dir: &str| -> Vec<String> {
        let l = (table.lines())
            .find(|l| l.split_whitespace().nth(1) == Some(dir))
            .unwrap_or_else(|| panic!("no {dir} in\n{table}"));
        l.split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect()
    };
    let today = time::OffsetDateTime::now_utc().date();
    let in_days = |d: i64| (today + time::Duration::days(d)).to_string();
    let coord = line("coordinator-coord-a");
    assert_eq!(
        coord[..3],
        [
            "coordinator",
            "coordinator-coord-a",
            "coord-a, localhost, 127.0.0.1"
        ]
    );
    assert!(coord[3].starts_with(&in_days(825)), "{coord:?}");
    assert_eq!(coord[4], "824");
    assert_eq!(coord.len(), 5, "no warning: {coord:?}");
    let alice = line("operator-alice");
    assert_eq!(alice[..3], ["operator", "operator-alice", "alice"]);
    assert!(alice[3].starts_with(&in_days(10)), "{alice:?}");
    assert_eq!(alice[4..], ["9", "expires within 30 days"]);
    let rc66 = line("agent-rc66");
    assert_eq!(rc66[..3], ["agent", "agent-rc66", "rc66"]);
    assert_eq!(rc66[4..], ["0", "expires within 30 days"]);
    let ca = line("ca");
    assert_eq!(ca[0], "ca");
    assert!(ca[2].starts_with("platter fleet CA "), "{ca:?}");
    let err = stderr(&out);
    assert!(
        err.contains("warning: operator alice (operator-alice) expires in 9 days")
            && err.contains("warning: agent rc66 (agent-rc66) expires in less than a day"),
        "{err}"
    );
    assert!(!err.contains("coord-a"), "{err}");

    let json: serde_json::Value =
        serde_json::from_str(&ok(&pki, &["list", "--format", "json"])).unwrap();
    let by_dir = |dir: &str| {
        (json.as_array().unwrap().iter())
            .find(|c| c["dir"] == dir)
            .unwrap_or_else(|| panic!("no {dir} in {json}"))
            .clone()
    };
    let alice = by_dir("operator-alice");
    assert_eq!(alice["role"], "operator");
    assert_eq!(alice["names"], serde_json::json!(["alice"]));
    assert_eq!(alice["days_left"], 9);
    assert_eq!(alice["expiring_soon"], true);
    assert_eq!(alice["expired"], false);
    assert_eq!(by_dir("coordinator-coord-a")["expiring_soon"], false);
    assert_eq!(by_dir("ca")["role"], "ca");
}

/// An expired identity (made with the library: the command line issues none) is listed
/// as EXPIRED.
#[test]
fn the_listing_says_expired() {
    use platter::pki::{self, Role, Validity};
    let tmp = tempfile::tempdir().unwrap();
    let pki_dir = tmp.path().join("pki");
    ok(&pki_dir, &["init"]);
    let ca = pki::Ca {
        cert_pem: std::fs::read_to_string(pki_dir.join("ca/ca.pem")).unwrap(),
        key_pem: std::fs::read_to_string(pki_dir.join("ca/ca-key.pem")).unwrap(),
    };
    let day = time::Duration::days(1);
    let now = time::OffsetDateTime::now_utc();
    let past = Validity {
        not_before: now - day * 30,
        not_after: now - day,
    };
    let old = pki::issue(&ca, Role::Operator, &["old".into()], past).unwrap();
    std::fs::create_dir(pki_dir.join("operator-old")).unwrap();
    std::fs::write(pki_dir.join("operator-old/cert.pem"), old.cert_pem).unwrap();
    let out = certs(&pki_dir, &["list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8(out.stdout.clone()).unwrap();
    let line = (table.lines())
        .find(|l| l.contains("operator-old"))
        .unwrap_or_else(|| panic!("{table}"));
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cells[cells.len() - 2..], ["-", "EXPIRED"], "{line}");
    assert!(
        stderr(&out).contains("warning: operator old (operator-old) EXPIRED on"),
        "{}",
        stderr(&out)
    );
}
