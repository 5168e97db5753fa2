//! `platter serve --http`: health, readiness and Prometheus metrics over HTTP, as a load
//! balancer and a Prometheus server would ask for them (plain HTTP/1.1 on loopback).

mod common;

use std::time::Duration;

use common::web::*;
use common::*;

/// GET `path`: the status code and the body.
fn get(addr: &str, path: &str) -> (u16, String) {
    let a = call(addr, "GET", path, &[], "");
    (a.status, a.body)
}

#[test]
fn health_readiness_and_metrics_follow_the_fleet() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (mut coordinator, port) = serve_with(dir, &["--http", "127.0.0.1:0"]);
    let http = http_addr(dir);

    assert_eq!(get(&http, "/healthz"), (200, "ok\n".into()));
    assert_eq!(get(&http, "/readyz"), (200, "ready\n".into()));
    let (status, m) = get(&http, "/metrics");
    assert_eq!(status, 200);
    assert_eq!(
        sample(&m, "platter_agents{presence=\"connected\"}"),
        Some(0.0),
        "{m}"
    );
    assert_eq!(sample(&m, "platter_store_fault"), Some(0.0), "{m}");
    assert_eq!(sample(&m, "platter_store_read_ok"), Some(1.0), "{m}");
    assert_eq!(
        sample(&m, "platter_plans{state=\"queued\"}"),
        Some(0.0),
        "{m}"
    );
    assert!(
        m.trim_end().ends_with("# EOF"),
        "OpenMetrics ends with # EOF: {m}"
    );

    // An agent connects and a campaign runs to its end: the counts follow.
    let _agent = agent(dir, port, "h1", &[]);
    wait_agents(dir, 1);
    let campaign = write(
        dir,
        "c.yaml",
        "name: c\nhosts: { names: [h1] }\nworkload: { command: { run: \"true\" } }\nrepeat: 2\n",
    );
    submit(dir, port, &campaign);
    wait_in(dir, "the campaign to end", Duration::from_secs(60), || {
        (query_i64(dir, "SELECT COUNT(*) FROM campaigns WHERE state = 'done'") == 1).then_some(())
    });
    let (_, m) = get(&http, "/metrics");
    assert_eq!(
        sample(&m, "platter_agents{presence=\"connected\"}"),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        sample(&m, "platter_plans{state=\"done\"}"),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        sample(&m, "platter_campaigns{state=\"done\"}"),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        sample(&m, "platter_campaigns{state=\"running\"}"),
        Some(0.0),
        "{m}"
    );

    // The writer's counters say what it committed: the rows the store holds (this store
    // is this process's alone), in commits it timed.
    let steps = query_i64(dir, "SELECT COUNT(*) FROM steps");
    let samples = query_i64(dir, "SELECT COUNT(*) FROM samples");
    assert!(steps > 0 && samples > 0, "steps {steps}, samples {samples}");
    // Counted just after each commit: a scrape may come between the two.
    let m = wait_for(
        "the counters to reach the stored rows",
        Duration::from_secs(5),
        || {
            let (_, m) = get(&http, "/metrics");
            (sample(&m, "platter_steps_stored_total") == Some(steps as f64)).then_some(m)
        },
    );
    assert_eq!(
        sample(&m, "platter_samples_stored_total"),
        Some(samples as f64),
        "{m}"
    );
    let commits = sample(&m, "platter_store_commits_total").unwrap_or(0.0);
    assert!(commits > 0.0, "{m}");
    // Every batch stored whole.
    assert_eq!(
        sample(&m, "platter_store_batches_one_by_one_total"),
        Some(0.0),
        "{m}"
    );
    assert_eq!(
        sample(&m, "platter_store_commit_seconds_count"),
        Some(commits),
        "{m}"
    );
    assert_eq!(
        sample(&m, "platter_store_commit_seconds_bucket{le=\"+Inf\"}"),
        Some(commits),
        "{m}"
    );
    assert!(
        sample(&m, "platter_store_commit_seconds_sum").is_some_and(|s| s > 0.0),
        "{m}"
    );
    assert_eq!(
        sample(&m, "platter_hosts_offline_holding_plan"),
        Some(0.0),
        "{m}"
    );
    coordinator.kill9();
}

/// A host whose agent goes away while it holds a plan counts in
/// `platter_hosts_offline_holding_plan` (what the deploy example's alert fires on); while
/// its agent is connected it does not.
#[test]
fn a_host_offline_with_its_plan_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (mut coordinator, port) = serve_with(dir, &["--http", "127.0.0.1:0"]);
    let http = http_addr(dir);
    let mut agent = agent(dir, port, "h1", &[]);
    wait_agents(dir, 1);
    let campaign = write(
        dir,
        "c.yaml",
        "name: c\nhosts: { names: [h1] }\nworkload: { command: { run: \"sleep 30\" } }\n",
    );
    submit(dir, port, &campaign);
    wait_in(
        dir,
        "h1 to accept its plan",
        Duration::from_secs(30),
        || {
            (query_i64(dir, "SELECT COUNT(*) FROM plans WHERE state = 'accepted'") == 1)
                .then_some(())
        },
    );
    let (_, m) = get(&http, "/metrics");
    assert_eq!(
        sample(&m, "platter_hosts_offline_holding_plan"),
        Some(0.0),
        "{m}"
    );
    agent.kill9();
    wait_for(
        "the offline host holding its plan to be counted",
        Duration::from_secs(20),
        || {
            let (_, m) = get(&http, "/metrics");
            (sample(&m, "platter_hosts_offline_holding_plan") == Some(1.0)).then_some(())
        },
    );
    coordinator.kill9();
}

/// With the coordinator's certificate, `--http` serves HTTPS on any address: a client
/// trusting the fleet's CA reads it, a plaintext request gets no HTTP answer, and the
/// session cookie is `Secure`.
#[test]
fn with_a_certificate_the_console_speaks_https_only() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (mut coordinator, _port) = serve_with(dir, &["--http", "0.0.0.0:0"]);
    let url = http_addr(dir);
    let port = url.rsplit(':').next().unwrap().to_string();
    assert!(url.starts_with("https://0.0.0.0:"), "{url}");
    let site = format!("https://127.0.0.1:{port}");
    remember_ca(&site, &dir.join("pki/ca/ca.pem"));
    assert_eq!(get(&site, "/healthz"), (200, "ok\n".into()));
    add_user(dir, "dora", "viewer", "dora's long password");
    let browser = sign_in(&site, "dora", "dora's long password");
    assert!(
        browser.set_cookie.contains("; Secure"),
        "{}",
        browser.set_cookie
    );
    // A browser is offered HTTP/2 (its pages' event streams then share one connection);
    // a client that knows only HTTP/1.1 gets that.
    for (offered, agreed) in [
        (vec![b"h2".to_vec(), b"http/1.1".to_vec()], b"h2".as_slice()),
        (vec![b"http/1.1".to_vec()], b"http/1.1".as_slice()),
    ] {
        let mut cfg = (*trusting(&dir.join("pki/ca/ca.pem"))).clone();
        cfg.alpn_protocols = offered;
        use tokio_rustls::rustls;
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let mut tls = rustls::ClientConnection::new(std::sync::Arc::new(cfg), name).unwrap();
        let mut tcp = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
        while tls.is_handshaking() {
            tls.complete_io(&mut tcp).unwrap();
        }
        assert_eq!(tls.alpn_protocol(), Some(agreed));
    }
    // Plaintext to the HTTPS port: no HTTP answer (a TLS alert, or a close).
    let mut tcp = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    use std::io::{Read, Write};
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    let _ = tcp.read_to_end(&mut answer);
    assert!(
        !answer.starts_with(b"HTTP/"),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    coordinator.kill9();
}

/// A store that cannot commit (another process holds SQLite's write lock) makes the
/// coordinator not ready, with the reason, while `/healthz` still answers; ready again
/// once the lock is let go.
#[test]
fn readiness_follows_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (mut coordinator, _port) = serve_with(dir, &["--http", "127.0.0.1:0"]);
    let http = http_addr(dir);
    assert_eq!(get(&http, "/readyz").0, 200);
    let other = rusqlite::Connection::open(dir.join("coordinator.db")).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let said = wait_for("/readyz to say 503", Duration::from_secs(15), || {
        let (status, body) = get(&http, "/readyz");
        (status == 503).then_some(body)
    });
    assert!(
        said.starts_with("not ready: the store") && said.contains("locked"),
        "{said}"
    );
    assert_eq!(get(&http, "/healthz").0, 200);
    let (_, m) = get(&http, "/metrics");
    assert_eq!(sample(&m, "platter_store_fault"), Some(1.0), "{m}");
    other.execute_batch("ROLLBACK").unwrap();
    wait_for("/readyz to say 200 again", Duration::from_secs(15), || {
        (get(&http, "/readyz").0 == 200).then_some(())
    });
    coordinator.kill9();
}
