//! Mutual TLS refusals, each against a real coordinator process on 127.0.0.1: plaintext to a
//! TLS coordinator, a certificate from another CA, an agent claiming another host's name,
//! an agent certificate on the Control service, an expired certificate. A good agent and a
//! good operator on the same coordinator show the refusals are not the whole link failing.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use platter::pki::{self, Role, Validity};

fn log(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default()
}

/// Waits until `name`'s log contains `text`.
fn log_says(dir: &Path, name: &str, text: &str) {
    wait_in(
        dir,
        &format!("{name}.log to say {text:?}"),
        Duration::from_secs(20),
        || log(dir, name).contains(text).then_some(()),
    );
}

/// Hosts the coordinator has stored a hello of (none while its database is being made).
fn agents_known(dir: &Path) -> Vec<String> {
    let Some(c) = try_db(dir) else {
        return Vec::new();
    };
    let Ok(mut stmt) = c.prepare("SELECT host FROM agents ORDER BY host") else {
        return Vec::new();
    };
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The control: a good agent, rc66, connects, and a good operator sees it idle.
fn good_agent_seen(dir: &Path, port: u16) -> Proc {
    let good = agent(dir, port, "rc66", &[]);
    wait_for("rc66 to connect", Duration::from_secs(20), || {
        agents_known(dir)
            .contains(&"rc66".to_string())
            .then_some(())
    });
    let v = agents_json(dir, port);
    assert_eq!(v[0]["host"], "rc66");
    assert_eq!(v[0]["state"], "idle");
    good
}

/// An identity directory written with the library, for what the CLI will not make.
fn write_identity(out: &Path, ca: &pki::Ca, role: Role, name: &str, validity: Validity) {
    let c = pki::issue(ca, role, &[name.to_string()], validity).unwrap();
    std::fs::create_dir_all(out).unwrap();
    std::fs::write(out.join("cert.pem"), c.cert_pem).unwrap();
    std::fs::write(out.join("key.pem"), c.key_pem).unwrap();
    std::fs::write(out.join("ca.pem"), &ca.cert_pem).unwrap();
}

/// `platter COMMAND` with the identity in `tls_dir`, which must fail as a connection
/// does (exit 1); its stderr.
fn failing(command: &str, port: u16, tls_dir: &Path) -> String {
    let out = platter()
        .args([command, "--coordinator", &url(port), "--tls-dir"])
        .arg(tls_dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{command}: {err}");
    err
}

/// What a client whose certificate is from another CA is told: the coordinator's alert
/// reaches it, on the failed call or on the connection it makes to ask why.
const REFUSED_FOREIGN: &str =
    "the coordinator refused this certificate: it is not from this fleet's CA";

/// An identity of `role` `name` signed by a CA of its own (not the fleet's), trusting the
/// fleet's CA (which is public): the coordinator is the one to refuse it.
fn foreign_identity(dir: &Path, role: Role, name: &str) -> std::path::PathBuf {
    let out = dir.join(format!("foreign-{}-{name}", role.as_str()));
    let other = pki::new_ca(Validity::days(1)).unwrap();
    write_identity(&out, &other, role, name, Validity::days(1));
    std::fs::write(out.join("ca.pem"), fleet_ca(dir).cert_pem).unwrap();
    out
}

/// The test's fleet CA: the one place these tests know where `platter certs` keeps it.
fn fleet_ca(dir: &Path) -> pki::Ca {
    identity(dir, "coordinator", "localhost");
    pki::Ca {
        cert_pem: std::fs::read_to_string(dir.join("pki/ca/ca.pem")).unwrap(),
        key_pem: std::fs::read_to_string(dir.join("pki/ca/ca-key.pem")).unwrap(),
    }
}

#[test]
fn every_wrong_certificate_is_refused_with_a_reason_on_both_sides() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve(dir);

    // The control: a good agent connects and a good operator sees it.
    let _good = good_agent_seen(dir, port);

    // 1. Plaintext to a TLS coordinator: an agent and an operator.
    let http = format!("http://127.0.0.1:{port}");
    let _plain = spawn_agent(
        dir,
        "plain",
        &[
            "--dangerously-insecure",
            "--coordinator",
            &http,
            "--name",
            "plain",
        ],
    );
    log_says(dir, "coordinator", "the client speaks plaintext");
    let requires_tls = format!(
        "the coordinator at {http} did not answer plaintext HTTP/2; it probably requires TLS: \
         dial https:// and give --tls-dir DIR"
    );
    log_says(dir, "plain", &requires_tls);
    for command in ["agents", "status"] {
        let out = platter()
            .args([command, "--dangerously-insecure", "--coordinator", &http])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with(&format!("platter: {requires_tls}")),
            "{command}: {err}"
        );
    }

    // 2. An agent with a certificate from another CA (same name as a real host).
    let rogue = foreign_identity(dir, Role::Agent, "rcmonster");
    let rogue = rogue.display().to_string();
    let _rogue = spawn_agent(
        dir,
        "rogue",
        &[
            "--coordinator",
            &url(port),
            "--name",
            "rcmonster",
            "--tls-dir",
            &rogue,
        ],
    );
    log_says(dir, "coordinator", "not from this fleet's CA");
    // The same words an operator gets (the alert, when it arrives, or the likely cause).
    wait_in(
        dir,
        "the rogue agent to say its certificate was refused",
        Duration::from_secs(20),
        || log(dir, "rogue").contains(REFUSED_FOREIGN).then_some(()),
    );

    // 3. An agent claiming another host's name with its own (valid) certificate.
    identity(dir, "agent", "flygecko");
    let flygecko = dir.join("pki/agent-flygecko").display().to_string();
    let _liar = spawn_agent(
        dir,
        "liar",
        &[
            "--coordinator",
            &url(port),
            "--name",
            "impostor",
            "--tls-dir",
            &flygecko,
        ],
    );
    log_says(
        dir,
        "coordinator",
        "refused: agent claims another host's name",
    );
    log_says(
        dir,
        "liar",
        "this certificate belongs to agent \"flygecko\"",
    );

    // 4. An agent certificate on the Control service.
    let out = platter()
        .args(["submit", "--coordinator", &url(port), "--tls-dir"])
        .arg(dir.join("pki/agent-rc66"))
        .arg(write(
            dir,
            "c.yaml",
            "name: x\nhosts: { names: [rc66] }\nworkload: { command: { run: \"true\" } }\n",
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("certificate \"rc66\" is an agent certificate; this service needs an operator certificate"),
        "{err}"
    );
    log_says(dir, "coordinator", "refused: wrong certificate role");

    // 5. An expired certificate, signed by the right CA.
    let ca = fleet_ca(dir);
    let day = time::Duration::days(1);
    let past = Validity {
        not_before: time::OffsetDateTime::now_utc() - day * 30,
        not_after: time::OffsetDateTime::now_utc() - day,
    };
    write_identity(&dir.join("expired-op"), &ca, Role::Operator, "old", past);
    let err = failing("agents", port, &dir.join("expired-op"));
    assert!(err.to_lowercase().contains("expired"), "{err}");
    log_says(dir, "coordinator", "certificate expired");

    // The plaintext agent keeps retrying (two refused handshakes a try: the link and
    // the check for plaintext HTTP/2), and said what is wrong once, not at every retry.
    wait_for(
        "the plaintext agent to retry",
        Duration::from_secs(30),
        || {
            (log(dir, "coordinator")
                .matches("the client speaks plaintext")
                .count()
                >= 16)
                .then_some(())
        },
    );
    let plain = log(dir, "plain");
    assert_eq!(
        plain.matches("did not answer plaintext HTTP/2").count(),
        1,
        "{plain}"
    );
    assert!(!plain.contains("link down"), "{plain}");

    // None of the refused agents got in; the good one is still there.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(agents_known(dir), ["rc66"], "{}", logs(dir));
}

/// The reverse of a plaintext client at a TLS coordinator: TLS clients (an operator, an
/// agent) at a plaintext coordinator are told it speaks plaintext.
#[test]
fn a_tls_client_at_a_plaintext_coordinator_is_told_so() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = spawn_listening(
        platter()
            .args(["serve", "--dangerously-insecure", "--listen", "127.0.0.1:0"])
            .arg("--db")
            .arg(dir.join("coordinator.db")),
        dir,
        "coordinator",
    );
    let says = format!(
        "the coordinator at {} did not answer TLS; it probably speaks plaintext \
         (started with --dangerously-insecure)",
        url(port)
    );
    let out = platter()
        .args(["status", "--coordinator", &url(port), "--tls-dir"])
        .arg(identity(dir, "operator", "tester"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with(&format!("platter: {says}")), "{err}");
    let _agent = agent(dir, port, "rc66", &[]);
    log_says(dir, "rc66", &says);
}

/// An operator whose certificate is from another CA is told, by every command, that the
/// coordinator refused it and why, and exits 1 as for any failure to reach the
/// coordinator. The reverse, an operator or an agent that does not trust the
/// coordinator's CA, is told that it refused the coordinator's certificate.
#[test]
fn a_client_is_told_which_side_refused_which_certificate() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve(dir);
    let foreign = foreign_identity(dir, Role::Operator, "stranger");
    for command in ["status", "agents", "health"] {
        // The alert on the call, or a closed connection and the alert when asked again:
        // a few tries each, all explained.
        for _ in 0..3 {
            let err = failing(command, port, &foreign);
            assert!(err.contains(REFUSED_FOREIGN), "{command}: {err}");
        }
    }
    log_says(dir, "coordinator", "not from this fleet's CA");

    // Our own certificates, but another fleet's CA in ca.pem.
    let refused = "this client refused the coordinator's certificate: it is not from the CA in this client's ca.pem";
    let err = failing(
        "agents",
        port,
        &distrustful_identity(dir, Role::Operator, "doubter"),
    );
    assert!(err.contains(refused), "{err}");
    assert!(!err.contains("the coordinator refused"), "{err}");
    let doubter = distrustful_identity(dir, Role::Agent, "doubter");
    let doubter = doubter.display().to_string();
    let args = [
        "--coordinator",
        &url(port),
        "--name",
        "doubter",
        "--tls-dir",
        &doubter,
    ];
    let _agent = spawn_agent(dir, "doubter", &args);
    log_says(dir, "doubter", refused);
}

/// An identity of `role` `name` from the fleet's CA that trusts another CA instead.
fn distrustful_identity(dir: &Path, role: Role, name: &str) -> std::path::PathBuf {
    let out = dir.join(format!("distrustful-{}-{name}", role.as_str()));
    write_identity(&out, &fleet_ca(dir), role, name, Validity::days(1));
    let other = pki::new_ca(Validity::days(1)).unwrap();
    std::fs::write(out.join("ca.pem"), &other.cert_pem).unwrap();
    out
}

/// A peer that hangs up mid-handshake (an agent killed, a port scan) was refused nothing:
/// the coordinator says it closed, at info level, and names no refusal.
#[test]
fn a_handshake_cut_off_by_the_peer_is_not_a_refusal() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve(dir);
    // Nothing at all, then the first bytes of a ClientHello (a handshake record header
    // announcing more than follows), then a reset (SO_LINGER 0) after the same.
    drop(std::net::TcpStream::connect(("127.0.0.1", port)).unwrap());
    let partial: &[u8] = &[
        0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
    ];
    let mut half = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    half.write_all(partial).unwrap();
    drop(half);
    let mut reset = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    reset.write_all(partial).unwrap();
    abort_on_close(&reset);
    drop(reset);
    wait_in(
        dir,
        "three closed handshakes in the log",
        Duration::from_secs(20),
        || {
            (log(dir, "coordinator")
                .matches("closed by the peer during the handshake")
                .count()
                >= 3)
                .then_some(())
        },
    );
    let text = log(dir, "coordinator");
    assert!(!text.contains("refused"), "{text}");
    assert!(!text.contains("WARN"), "{text}");
}

/// Handshakes take turns (a few at once, so a reconnect storm is served in order), and a
/// client that connects and says nothing takes no turn: a hundred of them held open do
/// not keep an operator out. Were they holding the turns, the operator's handshake would
/// wait for their 10 s timeouts, which would be in the log by the time it got in.
#[test]
fn clients_that_connect_and_say_nothing_hold_up_nobody() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve(dir);
    let silent: Vec<std::net::TcpStream> = (0..100)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let _good = good_agent_seen(dir, port);
    let text = log(dir, "coordinator");
    assert!(!text.contains("timed out"), "{text}");
    drop(silent);
}

/// SO_LINGER 0: closing `stream` sends a reset instead of a FIN, as a killed peer's
/// kernel may.
fn abort_on_close(stream: &std::net::TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the fd is open for the call (`stream` is borrowed), and the option's value
    // is a live `linger` of the size given.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
}
