//! Two coordinators on one PostgreSQL store, in a real browser: a page on coordinator B
//! follows what happens through coordinator A without a reload — an agent connecting to
//! A appears on B's hosts page (via A), and a campaign submitted to A advances to done on
//! B's campaign page. Needs `PLATTER_TEST_POSTGRES`, chromedriver and Chromium; skips
//! saying so otherwise.

mod common;

use std::path::Path;
use std::time::Duration;

use common::browser::Browser;
use common::web::{add_user_to, http_addr, remember_ca};
use common::*;

/// `platter serve --name NAME --http 127.0.0.1:0` on the store `db`, with mutual TLS, its
/// log in `dir/NAME/coordinator.log`; the gRPC port and the HTTP address.
fn coordinator(dir: &Path, db: &str, name: &str) -> (Proc, u16, String) {
    let own = dir.join(name);
    std::fs::create_dir_all(&own).unwrap();
    let tls = identity(dir, "coordinator", "localhost");
    let mut c = platter();
    c.args(["serve", "--listen", "127.0.0.1:0", "--db", db])
        .args(["--name", name, "--http", "127.0.0.1:0"])
        .arg("--tls-dir")
        .arg(tls)
        .env("PLATTER_LOG", "info");
    let (proc, port) = spawn_listening(&mut c, &own, "coordinator");
    let site = http_addr(&own);
    // The fleet's CA is the test's, beside every coordinator's own directory.
    remember_ca(&site, &dir.join("pki/ca/ca.pem"));
    (proc, port, site)
}

/// "3/8 (37%)" as (3, 8).
fn done_of(steps: &str) -> Option<(u32, u32)> {
    let (done, rest) = steps.trim().split_once('/')?;
    let total = rest.split_whitespace().next()?;
    Some((done.trim().parse().ok()?, total.parse().ok()?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_on_one_coordinator_follows_what_another_does() {
    let Some(server) = postgres_or_skip() else {
        return;
    };
    let Some(b) = Browser::start().await else {
        return;
    };
    let db = match platter::store::testing::fresh_postgres(&server) {
        platter::store::db::Location::Postgres(url) => url,
        other => unreachable!("{other:?}"),
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_a, port_a, _site_a) = coordinator(dir, &db, "coordinator-a");
    let (_b, _port_b, site_b) = coordinator(dir, &db, "coordinator-b");
    add_user_to(dir, &db, "alice", "operator", "correct horse battery");

    // Signed in on B, its hosts page open: no host yet.
    b.goto(&format!("{site_b}/hosts")).await;
    b.fill("input[name=name]", "alice").await;
    b.fill("input[name=password]", "correct horse battery")
        .await;
    b.submit("#login").await;
    b.wait_for_text("#count", "0 of 0 host(s)").await;
    b.mark().await;

    // An agent connects to A: B's page shows it, held by A, without a reload (B reads
    // the others' links every 3 s; A publishes its own within 100 ms).
    let _h1 = agent(dir, port_a, "h1", &[]);
    let row = b
        .wait_for_text_within("#hosts", "h1", Duration::from_secs(10))
        .await;
    let row = b
        .wait_for_text_within("#hosts", "idle via coordinator-a", Duration::from_secs(10))
        .await
        .max(row);
    assert!(
        b.still_marked().await,
        "the hosts page reloaded itself: {row}"
    );

    // A campaign submitted to A: its page on B advances to done without a reload.
    let steady = write(
        dir,
        "steady.yaml",
        "name: steady\nhosts: { names: [h1] }\nworkload: { command: { run: \"sleep 0.5\" } }\nrepeat: 8\n",
    );
    let id = submit(dir, port_a, &steady);
    b.goto(&format!("{site_b}/campaigns/{id}")).await;
    b.wait_for_text("#state", "running").await;
    b.mark().await;
    // What the steps say, read as the page changes, until the campaign is done: the page
    // moves while the campaign runs (some steps done, not all), then ends at all.
    let mut seen: Vec<String> = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        // One script reads both: the page may swap its <main> between two WebDriver calls.
        let now = b
            .script(
                "const t = id => (document.getElementById(id) || {}).innerText || ''; \
                 return [t('state'), t('steps')];",
                vec![],
            )
            .await;
        let (state, steps) = (now[0].as_str().unwrap_or(""), now[1].as_str().unwrap_or(""));
        if seen.last().map(String::as_str) != Some(steps) {
            seen.push(steps.to_string());
        }
        if state.contains("done") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not done within 60 s: {seen:?}\n{}",
            logs(&dir.join("coordinator-b"))
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let last = b.text("#steps").await;
    assert!(last.contains("(100%)"), "{last}");
    assert!(
        seen.iter()
            .any(|s| done_of(s).is_some_and(|(d, t)| 0 < d && d < t)),
        "no step count between none and all: {seen:?}"
    );
    assert!(
        b.text("#progress")
            .await
            .contains("connected to coordinator-a"),
        "{}",
        b.text("#progress").await
    );
    assert!(b.still_marked().await, "the campaign page reloaded itself");
}
