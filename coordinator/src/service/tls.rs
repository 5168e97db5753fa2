//! The coordinator's side of mutual TLS: a rustls server that trusts only the fleet CA
//! and requires a client certificate, and the role checks the services apply to it.
//!
//! The TLS accept loop is ours rather than tonic's `ServerTlsConfig` so that a refused
//! handshake (unknown CA, expired, plaintext) becomes a log line naming the peer and the
//! reason; tonic drops those errors silently. A peer that hangs up mid-handshake was not
//! refused, and its log line says so.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use platter_proto::tls::TlsDir;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Status};

use super::tickets::FleetTickets;
use crate::pki::{self, Peer, Role};

/// A handshake that takes longer than this is dropped (a slow or idle client must not hold
/// a task forever).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshaken connections waiting for tonic to take them.
const ACCEPTED_BACKLOG: usize = 1024;
/// Handshakes in progress at once; the others wait their turn, first come first served,
/// their `HANDSHAKE_TIMEOUT` not yet running. In a reconnect storm (a failover of 10,000
/// agents) every handshake in flight at once made all of them progress together and
/// finish late (BENCHMARKS.md: a median of 8 s for a 10 s storm), and took the CPU from
/// the connected agents' streams; in turns, the first agents are connected at once and
/// the rest in order. Each handshake is mostly CPU (a few RTTs of waiting), so a few per
/// core keep the cores busy.
const HANDSHAKES_AT_ONCE: usize = 64;

/// Builds the rustls server configuration from a `--tls-dir` (ca.pem, cert.pem, key.pem).
pub fn server_config(dir: &TlsDir) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let files = dir.read()?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(files.ca.as_bytes()) {
        roots
            .add(c.with_context(|| format!("reading {}", dir.ca().display()))?)
            .with_context(|| format!("{} is not a usable CA certificate", dir.ca().display()))?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .context("building the client certificate verifier")?;
    let (chain, key) = own_identity(dir, &files)?;
    // Sessions resume on any coordinator serving this certificate under this CA
    // (`service::tickets`); `resumed_refusal` checks what resumption skips.
    let tickets = FleetTickets::new(&[key.secret_der(), files.ca.as_bytes()]);
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .context("the coordinator certificate does not match its key")?;
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    cfg.ticketer = Arc::new(tickets);
    Ok(Arc::new(cfg))
}

/// The console's HTTPS configuration (`--http` with `--tls-dir`): the coordinator's own
/// certificate, and no client certificate asked for — people sign in with accounts.
pub fn console_config(dir: &TlsDir) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let files = dir.read()?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (chain, key) = own_identity(dir, &files)?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the coordinator certificate does not match its key")?;
    // HTTP/2 first: a browser keeps every open page's event stream on one connection
    // (over HTTP/1.1 it opens at most six to a site, and six open console tabs would
    // leave the seventh waiting).
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// The coordinator's certificate chain and key from `dir`, refused when the certificate
/// is not a coordinator's.
fn own_identity(
    dir: &TlsDir,
    files: &platter_proto::tls::TlsFiles,
) -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let chain = CertificateDer::pem_slice_iter(files.cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("reading {}", dir.cert().display()))?;
    let key = PrivateKeyDer::from_pem_slice(files.key.as_bytes())
        .with_context(|| format!("reading {}", dir.key().display()))?;
    if let Some(c) = chain.first() {
        let me = pki::peer(c)?;
        if me.role != Role::Coordinator {
            anyhow::bail!(
                "{} is {} certificate; the coordinator needs one from `platter certs issue coordinator …`",
                dir.cert().display(),
                me.role.with_article()
            );
        }
    }
    Ok((chain, key))
}

/// Accepts TCP connections and hands the ones that complete a mutual-TLS handshake to
/// tonic. Each handshake runs on its own short-lived task.
pub fn incoming(
    listener: TcpListener,
    cfg: Arc<rustls::ServerConfig>,
    shutdown: CancellationToken,
) -> ReceiverStream<std::io::Result<TlsStream<TcpStream>>> {
    let (tx, rx) = tokio::sync::mpsc::channel(ACCEPTED_BACKLOG);
    let acceptor = TlsAcceptor::from(cfg);
    let turns = Arc::new(tokio::sync::Semaphore::new(HANDSHAKES_AT_ONCE));
    tokio::spawn(async move {
        loop {
            let (tcp, peer) = tokio::select! {
                r = listener.accept() => match r {
                    Ok(c) => c,
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = shutdown.cancelled() => return,
            };
            let _ = tcp.set_nodelay(true);
            let (acceptor, tx, turns) = (acceptor.clone(), tx.clone(), turns.clone());
            tokio::spawn(async move {
                // A client that connects and says nothing takes no turn.
                // (`peek` waits for a byte or the end; `readable` may answer at once.)
                let mut first = [0u8; 1];
                if tokio::time::timeout(HANDSHAKE_TIMEOUT, tcp.peek(&mut first))
                    .await
                    .is_err()
                {
                    tracing::warn!(%peer, "TLS handshake timed out (the client sent nothing)");
                    return;
                }
                let Ok(turn) = turns.acquire().await else {
                    return;
                };
                let accept = acceptor.accept(tcp).into_fallible();
                let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, accept).await;
                // The turn ends with the handshake: handing the stream over or lingering
                // for a refused client's alert takes none.
                drop(turn);
                match handshake {
                    Ok(Ok(stream)) => {
                        let conn = stream.get_ref().1;
                        if let Some(why) = resumed_refusal(conn) {
                            HANDSHAKES
                                .refused_resumptions
                                .fetch_add(1, Ordering::Relaxed);
                            tracing::warn!(%peer, "resumed TLS session refused: {why}");
                            return;
                        }
                        if conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                            HANDSHAKES.resumed.fetch_add(1, Ordering::Relaxed);
                            tracing::debug!(%peer, "TLS session resumed");
                        } else {
                            HANDSHAKES.full.fetch_add(1, Ordering::Relaxed);
                        }
                        let _ = tx.send(Ok(stream)).await;
                    }
                    Ok(Err((e, tcp))) => match HandshakeEnd::of(&e) {
                        HandshakeEnd::Refused => {
                            tracing::warn!(%peer, "TLS handshake refused: {}", explain(&e));
                            linger(tcp).await;
                        }
                        // An agent killed or a client interrupted mid-handshake, a port
                        // scan: nobody was refused, and nobody is told anything.
                        HandshakeEnd::ClosedByPeer => tracing::info!(
                            %peer,
                            "TLS connection closed by the peer during the handshake ({})",
                            platter_proto::tls::chain(&e)
                        ),
                        HandshakeEnd::Failed => tracing::warn!(
                            %peer,
                            "TLS handshake failed: {}",
                            platter_proto::tls::chain(&e)
                        ),
                    },
                    Err(_) => tracing::warn!(%peer, "TLS handshake timed out"),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

/// The handshakes this process's agent port completed, by kind (`/metrics`:
/// `platter_tls_handshakes_total`).
pub static HANDSHAKES: Handshakes = Handshakes {
    full: AtomicU64::new(0),
    resumed: AtomicU64::new(0),
    refused_resumptions: AtomicU64::new(0),
};

pub struct Handshakes {
    /// Certificates sent and verified.
    pub full: AtomicU64,
    /// A session resumed from a ticket (`service::tickets`).
    pub resumed: AtomicU64,
    /// Resumed, then refused by `resumed_refusal`.
    pub refused_resumptions: AtomicU64,
}

/// Why a resumed session may not go on, if it may not: resumption skips the client's
/// certificate (rustls restores the chain verified when the session began, from the
/// ticket), so what may have changed since is checked here: the certificate is within
/// its validity period now and names a platter role. A full handshake checks both in the
/// verifier and `pki::peer`. The refused client dials again; its next handshake is full
/// and says why in its own words.
pub(crate) fn resumed_refusal(conn: &rustls::ServerConnection) -> Option<String> {
    if conn.handshake_kind() != Some(rustls::HandshakeKind::Resumed) {
        return None;
    }
    let Some(leaf) = conn.peer_certificates().and_then(|c| c.first()) else {
        return Some("the session carries no client certificate".into());
    };
    let cert = match x509_parser::parse_x509_certificate(leaf) {
        Ok((_, cert)) => cert,
        Err(e) => return Some(format!("unreadable client certificate: {e}")),
    };
    let v = cert.validity();
    let now = x509_parser::time::ASN1Time::now();
    if now > v.not_after || now < v.not_before {
        return Some(format!(
            "the client certificate is valid {} to {}, not now",
            v.not_before, v.not_after
        ));
    }
    pki::peer(leaf).err().map(|e| e.to_string())
}

/// How a handshake that did not complete ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HandshakeEnd {
    /// rustls found something wrong (a certificate, plaintext, a protocol error) and
    /// sent the client an alert saying so.
    Refused,
    /// The peer closed or reset the connection before the handshake was done; rustls had
    /// nothing to object to.
    ClosedByPeer,
    /// Anything else (a local I/O error).
    Failed,
}

impl HandshakeEnd {
    fn of(e: &std::io::Error) -> HandshakeEnd {
        use std::io::ErrorKind;
        let rustls = platter_proto::tls::causes(e).any(|c| c.is::<rustls::Error>());
        if rustls {
            HandshakeEnd::Refused
        } else if matches!(
            e.kind(),
            ErrorKind::UnexpectedEof
                | ErrorKind::ConnectionReset
                | ErrorKind::ConnectionAborted
                | ErrorKind::BrokenPipe
        ) {
            HandshakeEnd::ClosedByPeer
        } else {
            HandshakeEnd::Failed
        }
    }
}

/// At most this long, a refused client's connection is kept open for its alert to arrive.
const LINGER: Duration = Duration::from_secs(2);

/// Closes a refused connection so that the alert rustls wrote reaches the client. Under
/// TLS 1.3 the client sends its first request right after its certificate, without
/// waiting: closing a socket with that request unread makes the kernel send a reset, the
/// client's next write fails with "broken pipe" and the alert (the reason) is never read.
/// So: end our side, and read what the client sends until it closes, for a moment at most.
async fn linger(mut tcp: TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = tcp.shutdown().await;
    let mut sink = [0u8; 4096];
    let drain = async { while let Ok(1..) = tcp.read(&mut sink).await {} };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// The rustls reason, with a hint for the usual mistakes.
fn explain(e: &std::io::Error) -> String {
    let s = platter_proto::tls::chain(e);
    if s.contains("InvalidContentType") || s.contains("corrupt message") {
        format!("{s} (the client speaks plaintext: give it https:// and --tls-dir)")
    } else if s.contains("UnknownIssuer") || s.contains("BadSignature") {
        format!("{s} (its certificate is not from this fleet's CA)")
    } else if s.contains("received fatal alert") {
        format!("{s} (the client rejected this coordinator's certificate: it trusts another CA, or expects another name)")
    } else if s.contains("peer sent no certificates") || s.contains("NoCertificatesPresented") {
        format!("{s} (the client presented no certificate: give it --tls-dir)")
    } else {
        s
    }
}

/// Marks a call the console (`service::http`) makes inside this process, on behalf of an
/// account whose role it has checked: no certificate comes with it, and none is asked
/// for. A remote caller cannot set it: request extensions are this process's own values,
/// never read off the wire.
#[derive(Debug, Clone, Copy)]
pub struct InProcess;

/// Who may call what. With TLS, the TLS layer has verified the chain; this checks the role
/// and returns the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    Tls,
    /// `--dangerously-insecure`, or the loopback link inside `platter run`.
    Plaintext,
}

impl Auth {
    /// The caller, if it holds a certificate of `role`; `None` in plaintext mode.
    pub fn require<T>(&self, req: &Request<T>, role: Role) -> Result<Option<Peer>, Status> {
        if *self == Auth::Plaintext || req.extensions().get::<InProcess>().is_some() {
            return Ok(None);
        }
        let certs = req.peer_certs().ok_or_else(|| {
            Status::unauthenticated("no client certificate (mutual TLS is required)")
        })?;
        let leaf = certs
            .first()
            .ok_or_else(|| Status::unauthenticated("no client certificate"))?;
        let peer = pki::peer(leaf).map_err(|e| Status::permission_denied(e.to_string()))?;
        if peer.role != role {
            let addr = req.remote_addr().map(|a| a.to_string()).unwrap_or_default();
            tracing::warn!(peer = %addr, name = %peer.name, role = peer.role.as_str(), needed = role.as_str(), "refused: wrong certificate role");
            return Err(Status::permission_denied(format!(
                "certificate {:?} is {} certificate; this service needs {} certificate",
                peer.name,
                peer.role.with_article(),
                role.with_article()
            )));
        }
        Ok(Some(peer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls::pki_types::ServerName;
    use tokio_rustls::TlsConnector;

    /// A coordinator identity directory of `ca` for `localhost`.
    fn coordinator_dir(ca: &pki::Ca, at: &std::path::Path) -> TlsDir {
        let c = pki::issue(
            ca,
            Role::Coordinator,
            &["localhost".into()],
            pki::Validity::days(1),
        )
        .unwrap();
        std::fs::create_dir_all(at).unwrap();
        std::fs::write(at.join("ca.pem"), &ca.cert_pem).unwrap();
        std::fs::write(at.join("cert.pem"), &c.cert_pem).unwrap();
        std::fs::write(at.join("key.pem"), &c.key_pem).unwrap();
        TlsDir(at.to_path_buf())
    }

    /// One connection over an in-memory pipe: the handshake, a byte each way (the client
    /// reads the server's, and with it the session tickets that follow the handshake).
    /// The server's judgement: how it ended and `resumed_refusal`'s word.
    async fn connect(
        server: &Arc<rustls::ServerConfig>,
        client: &Arc<rustls::ClientConfig>,
    ) -> (Option<rustls::HandshakeKind>, Option<String>) {
        let (a, b) = tokio::io::duplex(64 << 10);
        let acceptor = TlsAcceptor::from(server.clone());
        let connector = TlsConnector::from(client.clone());
        let server_side = async move {
            let mut s = acceptor.accept(a).await.unwrap();
            let verdict = (
                s.get_ref().1.handshake_kind(),
                resumed_refusal(s.get_ref().1),
            );
            s.write_all(b"s").await.unwrap();
            s.flush().await.unwrap();
            let mut one = [0u8; 1];
            s.read_exact(&mut one).await.unwrap();
            verdict
        };
        let client_side = async move {
            let name = ServerName::try_from("localhost").unwrap();
            let mut c = connector.connect(name, b).await.unwrap();
            let mut one = [0u8; 1];
            c.read_exact(&mut one).await.unwrap();
            c.write_all(b"c").await.unwrap();
            c.flush().await.unwrap();
            // Whatever else the server sent (the tickets) is read before the end.
            let _ = tokio::time::timeout(Duration::from_millis(50), c.read(&mut one)).await;
        };
        let (verdict, ()) = tokio::join!(server_side, client_side);
        verdict
    }

    #[tokio::test]
    async fn an_agent_resumes_on_any_coordinator_of_its_certificate_until_its_own_expires() {
        use rustls::HandshakeKind::{Full, Resumed};
        let tmp = tempfile::tempdir().unwrap();
        let ca = pki::new_ca(pki::Validity::days(1)).unwrap();
        let one = coordinator_dir(&ca, &tmp.path().join("a"));
        let (a, b) = (server_config(&one).unwrap(), server_config(&one).unwrap());
        let other = server_config(&coordinator_dir(&ca, &tmp.path().join("c"))).unwrap();
        // An agent whose certificate lasts a few seconds more.
        let agent = pki::issue(
            &ca,
            Role::Agent,
            &["mover".into()],
            pki::Validity::lasting(time::Duration::seconds(3)),
        )
        .unwrap();
        let client =
            platter_proto::tls::session_config(&ca.cert_pem, &agent.cert_pem, &agent.key_pem)
                .unwrap();

        assert_eq!(connect(&a, &client).await, (Some(Full), None));
        // The next coordinator (same certificate, another process's config) opens A's ticket.
        assert_eq!(connect(&b, &client).await, (Some(Resumed), None));
        // One with a key of its own cannot: a full handshake, nothing lost. Its tickets
        // are now the agent's newest (tried first), so the next visit to A is full once,
        // and resumes again after.
        assert_eq!(connect(&other, &client).await, (Some(Full), None));
        assert_eq!(connect(&a, &client).await, (Some(Full), None));
        assert_eq!(connect(&a, &client).await, (Some(Resumed), None));
        // Once the agent's certificate has expired, a ticket still resumes the session in
        // rustls, and the coordinator refuses it.
        tokio::time::sleep(Duration::from_millis(3200)).await;
        let (kind, refusal) = connect(&b, &client).await;
        assert_eq!(kind, Some(Resumed));
        let refusal = refusal.expect("an expired certificate is refused on resumption");
        assert!(refusal.contains("not now"), "{refusal}");
    }
}
