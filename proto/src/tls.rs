//! Where a party's TLS material lives: one directory per identity, as `platter certs issue`
//! writes it — `ca.pem` (the fleet CA), `cert.pem` and `key.pem` (this party's own).

use std::path::{Path, PathBuf};

use anyhow::Context;
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsDir(pub PathBuf);

/// The PEM text of one identity directory.
pub struct TlsFiles {
    pub ca: String,
    pub cert: String,
    pub key: String,
}

impl TlsDir {
    pub fn ca(&self) -> PathBuf {
        self.0.join("ca.pem")
    }
    pub fn cert(&self) -> PathBuf {
        self.0.join("cert.pem")
    }
    pub fn key(&self) -> PathBuf {
        self.0.join("key.pem")
    }

    pub fn read(&self) -> anyhow::Result<TlsFiles> {
        let read = |p: &Path| {
            std::fs::read_to_string(p).with_context(|| {
                format!(
                    "reading {} (a TLS directory holds ca.pem, cert.pem and key.pem; \
                     `platter certs issue` writes one)",
                    p.display()
                )
            })
        };
        Ok(TlsFiles {
            ca: read(&self.ca())?,
            cert: read(&self.cert())?,
            key: read(&self.key())?,
        })
    }

    /// The client side of mutual TLS: trust only the fleet CA, present our certificate.
    /// A certificate outside its validity is still presented (the coordinator refuses it
    /// and logs why) but we say so here too, where the operator is looking.
    pub fn client_config(&self) -> anyhow::Result<ClientTlsConfig> {
        let f = self.read()?;
        if let Some(problem) = validity_problem(&f.cert) {
            tracing::warn!("{}: {problem}", self.cert().display());
        }
        Ok(ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(f.ca))
            .identity(Identity::from_pem(f.cert, f.key)))
    }

    /// `session_config` of this directory's files (an agent's, read once when it
    /// starts); a certificate outside its validity is said, as `client_config` says it.
    pub fn session_config(
        &self,
    ) -> anyhow::Result<std::sync::Arc<tokio_rustls::rustls::ClientConfig>> {
        let f = self.read()?;
        if let Some(problem) = validity_problem(&f.cert) {
            tracing::warn!("{}: {problem}", self.cert().display());
        }
        session_config(&f.ca, &f.cert, &f.key)
            .with_context(|| format!("the TLS files in {}", self.0.display()))
    }
}

/// How a client reaches the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// Mutual TLS with the identity in this directory.
    Tls(TlsDir),
    /// Plaintext: `--dangerously-insecure`, or the loopback link inside `platter run`.
    Plaintext,
}

impl Transport {
    /// An endpoint for `url` that speaks this transport; a scheme that does not fit
    /// (http:// with TLS, https:// without) is an error, not a silent downgrade.
    pub fn endpoint(&self, url: &str) -> anyhow::Result<tonic::transport::Endpoint> {
        let endpoint = tonic::transport::Endpoint::from_shared(url.to_string())
            .with_context(|| format!("bad coordinator address {url:?}"))?;
        match self {
            Transport::Tls(dir) => {
                if !url.starts_with("https://") {
                    anyhow::bail!(
                        "coordinator address {url} must start with https:// when using TLS \
                         (or pass --dangerously-insecure to speak plaintext)"
                    );
                }
                Ok(endpoint.tls_config(dir.client_config()?)?)
            }
            Transport::Plaintext => {
                if !url.starts_with("http://") {
                    anyhow::bail!(
                        "coordinator address {url} must start with http:// for plaintext \
                         (--dangerously-insecure); give --tls-dir to use TLS"
                    );
                }
                Ok(endpoint)
            }
        }
    }
}

/// What a coordinator answered to a plaintext HTTP/2 client, for telling someone who
/// dialled plaintext that it wants TLS: the symptoms otherwise are "h2 protocol error:
/// frame with invalid size" (the TLS alert read as a frame) or "connection closed".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaintextAnswer {
    /// A SETTINGS frame: it speaks plaintext HTTP/2 (gRPC).
    Http2,
    /// A TLS record, anything else, or a close without a word.
    NotHttp2,
}

/// An HTTP/2 client's first words: the preface and an empty SETTINGS frame.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";

/// Dials `url` (`http://HOST:PORT`), sends the HTTP/2 client preface and an empty
/// SETTINGS frame, and reads what comes back: an HTTP/2 server's first frame is its
/// SETTINGS, a TLS server sends an alert or closes. `None` when it cannot tell (the
/// address is wrong, nothing listens, no answer within `timeout`).
pub async fn plaintext_answer(url: &str, timeout: std::time::Duration) -> Option<PlaintextAnswer> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (host, port) = host_port(url, 80)?;
    let probe = async {
        let mut stream = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .ok()?;
        stream.write_all(PREFACE).await.ok()?;
        let mut head = [0u8; 9];
        let mut got = 0;
        while got < head.len() {
            match stream.read(&mut head[got..]).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        // A frame header: 3 bytes length, then the type; SETTINGS is 4.
        Some(if got >= 4 && head[3] == 4 {
            PlaintextAnswer::Http2
        } else {
            PlaintextAnswer::NotHttp2
        })
    };
    tokio::time::timeout(timeout, probe).await.ok().flatten()
}

/// The host (without an IPv6 address's brackets) and port of `url`.
fn host_port(url: &str, default_port: u16) -> Option<(String, u16)> {
    let uri: tonic::codegen::http::Uri = url.parse().ok()?;
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_string(), uri.port_u16().unwrap_or(default_port)))
}

/// What to tell a TLS client whose call failed with only a closed connection (a
/// `Refusal::LikelyByCoordinator`): the client's handshake is done before the coordinator
/// has judged its certificate, and a call's error keeps the words of the alert that came
/// after only sometimes. So the coordinator at `dialled` is asked again, with the identity
/// in `dir` and the server name of `given`, sending nothing before its answer is read: it
/// answers the HTTP/2 preface with its SETTINGS (it accepts this certificate: `None`,
/// the closed connection was something else) or with its alert (the refusal and why).
/// When that cannot be told within `timeout`: the likely cause.
pub async fn why_closed(
    dir: &TlsDir,
    given: &str,
    dialled: &str,
    timeout: std::time::Duration,
) -> Option<Refusal> {
    let asked = tokio::time::timeout(timeout, ask_again(dir, given, dialled)).await;
    match asked.ok().flatten() {
        Some(verdict) => verdict,
        None => Some(Refusal::LikelyByCoordinator),
    }
}

/// `why_closed`'s question: `Some(None)` when the coordinator accepts the certificate,
/// `Some(Some(refusal))` when it refuses it, `None` when that cannot be told.
async fn ask_again(dir: &TlsDir, given: &str, dialled: &str) -> Option<Option<Refusal>> {
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls::pki_types::ServerName;
    let f = dir.read().ok()?;
    let cfg = rustls_client(&f.ca, &f.cert, &f.key).ok()?;
    let name = ServerName::try_from(host_port(given, 443)?.0).ok()?;
    let (host, port) = host_port(dialled, 443)?;
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .ok()?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(cfg));
    let mut tls = match connector.connect(name, tcp).await {
        Ok(s) => s,
        Err(e) => return Refusal::of(&e).map(Some),
    };
    let sent = async {
        tls.write_all(PREFACE).await?;
        tls.flush().await
    };
    if let Err(e) = sent.await {
        return Refusal::of(&e).map(Some);
    }
    let mut head = [0u8; 9];
    match tls.read(&mut head).await {
        Ok(0) => Some(Some(Refusal::LikelyByCoordinator)),
        Ok(_) => Some(None),
        Err(e) => Refusal::of(&e).map(Some),
    }
}

/// The plain words for a plaintext client at a TLS coordinator.
pub fn requires_tls(url: &str) -> String {
    format!(
        "the coordinator at {url} did not answer plaintext HTTP/2; it probably requires TLS: \
         dial https:// and give --tls-dir DIR (an identity from `platter certs issue`)"
    )
}

/// The plain words for a TLS client at a plaintext coordinator, if `error` is that.
pub fn speaks_plaintext(url: &str, error: &str) -> Option<String> {
    (error.contains("InvalidContentType") || error.contains("corrupt message")).then(|| {
        format!(
            "the coordinator at {url} did not answer TLS; it probably speaks plaintext \
             (started with --dangerously-insecure): dial http:// with --dangerously-insecure, \
             or give the coordinator --tls-dir"
        )
    })
}

/// An error and all its causes on one line: a TLS refusal is often three levels down
/// ("transport error: … received fatal alert: UnknownCA").
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

/// "expired on …" or "not valid before …" for a PEM certificate outside its validity now.
pub(crate) fn validity_problem(cert_pem: &str) -> Option<String> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).ok()?;
    let cert = pem.parse_x509().ok()?;
    let v = cert.validity();
    let now = x509_parser::time::ASN1Time::now();
    if now > v.not_after {
        Some(format!(
            "this certificate expired on {}; issue a new one with `platter certs issue`",
            v.not_after
        ))
    } else if now < v.not_before {
        Some(format!(
            "this certificate is not valid before {} (is this host's clock right?)",
            v.not_before
        ))
    } else {
        None
    }
}

/// Why a TLS client's connection to the coordinator failed, when certificates are the
/// likely cause. Operators and agents say the same words: both classify here.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// The coordinator refused this client's certificate and said why (its TLS alert).
    ByCoordinator(AlertDescription),
    /// The connection was closed (broken pipe, reset, end of stream) once the handshake
    /// was done. Under TLS 1.3 the client's handshake ends before the coordinator has
    /// judged the client's certificate, and its alert is often lost with the connection:
    /// this is how a refusal usually looks.
    LikelyByCoordinator,
    /// This client refused the coordinator's certificate.
    OfCoordinator(CertificateError),
}

pub use tokio_rustls::rustls::{AlertDescription, CertificateError};

impl Refusal {
    /// What `error` (a tonic transport error or `Status`, with its causes) says about
    /// certificates, if anything. Only for a client that dialled with TLS: over plaintext
    /// a closed connection means something else.
    pub fn of(error: &(dyn std::error::Error + 'static)) -> Option<Refusal> {
        use std::io::ErrorKind;
        use tokio_rustls::rustls::Error as TlsError;
        let mut closed = false;
        for e in causes(error) {
            if let Some(tls) = e.downcast_ref::<TlsError>() {
                match tls {
                    TlsError::AlertReceived(alert) => return Some(Refusal::ByCoordinator(*alert)),
                    TlsError::InvalidCertificate(why) => {
                        return Some(Refusal::OfCoordinator(why.clone()))
                    }
                    _ => {}
                }
            }
            if let Some(alert) = alert_in(&e.to_string()) {
                return Some(Refusal::ByCoordinator(alert));
            }
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                closed |= matches!(
                    io.kind(),
                    ErrorKind::BrokenPipe
                        | ErrorKind::ConnectionReset
                        | ErrorKind::ConnectionAborted
                        | ErrorKind::UnexpectedEof
                );
            }
            // hyper's own words for a connection that ended under a request, or before
            // the request could be sent on it ("operation was canceled: connection was
            // not ready", when the peer closes right after the handshake); neither is an
            // io::Error.
            let words = e.to_string();
            closed |=
                words.contains("connection closed") || words.contains("connection was not ready");
        }
        closed.then_some(Refusal::LikelyByCoordinator)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::ByCoordinator(alert) => match refused_because(*alert) {
                Some(why) => write!(
                    f,
                    "the coordinator refused this certificate: {why} (TLS alert {alert:?}; its log says more)"
                ),
                None => write!(
                    f,
                    "the coordinator ended the TLS handshake with alert {alert:?} (its log says why)"
                ),
            },
            Refusal::LikelyByCoordinator => f.write_str(
                "the coordinator closed the connection right after the TLS handshake: \
                 the coordinator may have refused this certificate: is it from this fleet's CA, \
                 and not expired? (the coordinator's log says why)",
            ),
            Refusal::OfCoordinator(why) => write!(
                f,
                "this client refused the coordinator's certificate: {}",
                coordinator_certificate_problem(why)
            ),
        }
    }
}

/// The alert in rustls' words for one received ("received fatal alert: UnknownCA"). A
/// call's error has only the words: HTTP/2 keeps an I/O error's text, not the error.
fn alert_in(text: &str) -> Option<AlertDescription> {
    let (_, rest) = text.split_once("received fatal alert: ")?;
    let name: String = rest
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    (0..=u8::MAX)
        .map(AlertDescription::from)
        .find(|a| format!("{a:?}") == name)
}

/// The alerts a server sends about a client's certificate, in words.
fn refused_because(alert: AlertDescription) -> Option<&'static str> {
    Some(match alert {
        AlertDescription::UnknownCA => "it is not from this fleet's CA",
        AlertDescription::CertificateExpired => {
            "it has expired or is not valid yet (is this host's clock right?)"
        }
        AlertDescription::CertificateRevoked => "it was revoked",
        AlertDescription::DecryptError => "its signature does not verify against this fleet's CA",
        AlertDescription::BadCertificate
        | AlertDescription::UnsupportedCertificate
        | AlertDescription::CertificateUnknown => "it is not acceptable",
        AlertDescription::CertificateRequired => {
            "none was presented (give --tls-dir an identity from `platter certs issue`)"
        }
        AlertDescription::AccessDenied => "access denied",
        _ => return None,
    })
}

/// What is wrong with the coordinator's certificate, as this client found it.
fn coordinator_certificate_problem(why: &CertificateError) -> &'static str {
    match why {
        CertificateError::UnknownIssuer | CertificateError::BadSignature => {
            "it is not from the CA in this client's ca.pem (another fleet's coordinator, or another fleet's ca.pem)"
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            "it does not name the host of the address dialled (dial a name the coordinator's \
             certificate holds, or issue it one with that name)"
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => "it has expired",
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "it is not valid yet (is this host's clock right?)"
        }
        CertificateError::Revoked => "it was revoked",
        _ => "it is not acceptable",
    }
}

/// `error` and its causes, including the error an `io::Error` wraps (which its `source()`
/// skips: rustls' errors reach us wrapped so).
pub fn causes<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    let mut next = Some(error);
    let mut wrapped: Option<&'a (dyn std::error::Error + 'static)> = None;
    std::iter::from_fn(move || {
        if let Some(w) = wrapped.take() {
            // The wrapped error's own causes are the io::Error's source: go on from there.
            return Some(w);
        }
        let e = next?;
        next = e.source();
        wrapped = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|w| w as &(dyn std::error::Error + 'static));
        Some(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error, ErrorKind};
    use tokio_rustls::rustls;

    #[test]
    fn refusals_are_found_however_deep_they_are() {
        // As an HTTP/2 call's error carries it: only the words of rustls' error.
        let alert = Error::new(ErrorKind::InvalidData, "received fatal alert: UnknownCA");
        let refusal = Refusal::of(&alert).unwrap();
        assert_eq!(refusal, Refusal::ByCoordinator(AlertDescription::UnknownCA));
        assert!(refusal.to_string().starts_with(
            "the coordinator refused this certificate: it is not from this fleet's CA"
        ));
        // As a connect error carries it: rustls' error inside an io::Error.
        let theirs = Error::new(
            ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        assert_eq!(
            Refusal::of(&theirs),
            Some(Refusal::OfCoordinator(CertificateError::UnknownIssuer))
        );
        let pipe = Error::from(ErrorKind::BrokenPipe);
        let likely = Refusal::of(&pipe).unwrap();
        assert_eq!(likely, Refusal::LikelyByCoordinator);
        assert!(likely
            .to_string()
            .contains("the coordinator may have refused this certificate: is it from this fleet's CA, and not expired?"));
        // hyper's cancel of a request whose connection closed before it was sent: the
        // same likely refusal, not a bare "operation was canceled".
        let canceled = Error::other("operation was canceled: connection was not ready");
        assert_eq!(Refusal::of(&canceled), Some(Refusal::LikelyByCoordinator));
        // A coordinator that is not there refused nothing.
        assert_eq!(
            Refusal::of(&Error::from(ErrorKind::ConnectionRefused)),
            None
        );
    }

    #[test]
    fn every_alert_name_reads_back() {
        for a in [
            AlertDescription::BadCertificate,
            AlertDescription::CertificateExpired,
            AlertDescription::CertificateRequired,
            AlertDescription::DecryptError,
        ] {
            assert_eq!(
                alert_in(&format!("x: received fatal alert: {a:?}: y")),
                Some(a)
            );
        }
        assert_eq!(alert_in("received fatal alert: Nonsense"), None);
    }
}

/// The rustls client side of one process that dials coordinators again and again (an
/// agent): one configuration, so that its session cache outlives each connection, and
/// one cache for all coordinators, so that a ticket one coordinator gave is offered to the
/// next. Coordinators serving one certificate open each other's tickets
/// (the coordinator's `service::tickets`): an agent that fails over resumes its session
/// (no certificates sent or verified, one key exchange) instead of a full handshake; any
/// other coordinator cannot open the ticket and the handshake is simply full.
pub fn session_config(
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
) -> anyhow::Result<std::sync::Arc<tokio_rustls::rustls::ClientConfig>> {
    use std::sync::Arc;
    use tokio_rustls::rustls::client::{ClientSessionMemoryCache, Resumption};
    let mut cfg = rustls_client(ca_pem, cert_pem, key_pem)?;
    cfg.resumption = Resumption::store(Arc::new(OneFleet(ClientSessionMemoryCache::new(8))));
    Ok(Arc::new(cfg))
}

/// A rustls client configuration that trusts only the fleet CA, presents this party's
/// certificate and speaks HTTP/2.
fn rustls_client(
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
) -> anyhow::Result<tokio_rustls::rustls::ClientConfig> {
    use std::sync::Arc;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(c.context("reading the CA certificate")?)
            .context("not a usable CA certificate")?;
    }
    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .context("reading the certificate")?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).context("reading the key")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .context("the certificate does not match its key")?;
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok(cfg)
}

/// A client session cache with one slot for every coordinator: whatever name was
/// dialled, the tickets are those of "the fleet's coordinators".
#[derive(Debug)]
struct OneFleet(tokio_rustls::rustls::client::ClientSessionMemoryCache);

/// The one name `OneFleet` files every session under.
fn fleet_name() -> tokio_rustls::rustls::pki_types::ServerName<'static> {
    tokio_rustls::rustls::pki_types::ServerName::try_from("coordinators.platter.invalid")
        .expect("a valid DNS name")
}

impl tokio_rustls::rustls::client::ClientSessionStore for OneFleet {
    fn set_kx_hint(
        &self,
        _: tokio_rustls::rustls::pki_types::ServerName<'static>,
        group: tokio_rustls::rustls::NamedGroup,
    ) {
        self.0.set_kx_hint(fleet_name(), group)
    }
    fn kx_hint(
        &self,
        _: &tokio_rustls::rustls::pki_types::ServerName<'_>,
    ) -> Option<tokio_rustls::rustls::NamedGroup> {
        self.0.kx_hint(&fleet_name())
    }
    fn set_tls12_session(
        &self,
        _: tokio_rustls::rustls::pki_types::ServerName<'static>,
        value: tokio_rustls::rustls::client::Tls12ClientSessionValue,
    ) {
        self.0.set_tls12_session(fleet_name(), value)
    }
    fn tls12_session(
        &self,
        _: &tokio_rustls::rustls::pki_types::ServerName<'_>,
    ) -> Option<tokio_rustls::rustls::client::Tls12ClientSessionValue> {
        self.0.tls12_session(&fleet_name())
    }
    fn remove_tls12_session(&self, _: &tokio_rustls::rustls::pki_types::ServerName<'static>) {
        self.0.remove_tls12_session(&fleet_name())
    }
    fn insert_tls13_ticket(
        &self,
        _: tokio_rustls::rustls::pki_types::ServerName<'static>,
        value: tokio_rustls::rustls::client::Tls13ClientSessionValue,
    ) {
        self.0.insert_tls13_ticket(fleet_name(), value)
    }
    fn take_tls13_ticket(
        &self,
        _: &tokio_rustls::rustls::pki_types::ServerName<'static>,
    ) -> Option<tokio_rustls::rustls::client::Tls13ClientSessionValue> {
        self.0.take_tls13_ticket(&fleet_name())
    }
}

/// A connector for `Endpoint::connect_with_connector` (the endpoint's URL is the
/// coordinator's address as http://, its origin the https:// one): TCP to the URL's host
/// and port, then TLS with `cfg` checking the coordinator's certificate for `server_name`.
/// tonic's own TLS makes a new rustls configuration for every endpoint, so its sessions
/// never resume on another endpoint.
///
/// Each part has its own time limit (give the endpoint none): a coordinator that does not
/// accept the TCP connection within `TCP_CONNECT_TIMEOUT` is down or unreachable, but one
/// that did is alive and may make a client wait its turn for the handshake in a reconnect
/// storm (the coordinator's `service::tls` takes them a few at a time); a client that
/// gave up after 5 s there (as it did with one limit for both) dialled again and again,
/// each time at the back of the queue, and the handshakes made for clients already gone
/// were wasted.
pub const TCP_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// See `TCP_CONNECT_TIMEOUT`. Not much longer: a coordinator that is frozen (stopped, or
/// hung) still accepts TCP connections in the kernel and never answers the handshake, and
/// an agent dialling it waits this long before the next.
pub const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);
#[derive(Clone)]
pub struct TlsConnect {
    pub cfg: std::sync::Arc<tokio_rustls::rustls::ClientConfig>,
    pub server_name: String,
}

impl tower_service::Service<tonic::codegen::http::Uri> for TlsConnect {
    type Response = hyper_util::rt::TokioIo<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;
    type Error = std::io::Error;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: tonic::codegen::http::Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            use std::io::{Error, ErrorKind};
            let host = uri
                .host()
                .ok_or_else(|| Error::new(ErrorKind::InvalidInput, format!("no host in {uri}")))?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let port = uri.port_u16().unwrap_or(443);
            let name = tokio_rustls::rustls::pki_types::ServerName::try_from(this.server_name)
                .map_err(|e| Error::new(ErrorKind::InvalidInput, e))?;
            let late = |what: &str, after: std::time::Duration| {
                Error::new(
                    ErrorKind::TimedOut,
                    format!("{what} took over {} s", after.as_secs()),
                )
            };
            let tcp = tokio::time::timeout(
                TCP_CONNECT_TIMEOUT,
                tokio::net::TcpStream::connect((host.as_str(), port)),
            )
            .await
            .map_err(|_| late("the TCP connection", TCP_CONNECT_TIMEOUT))??;
            tcp.set_nodelay(true)?;
            let handshake = tokio_rustls::TlsConnector::from(this.cfg).connect(name, tcp);
            let tls = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, handshake)
                .await
                .map_err(|_| late("the TLS handshake", TLS_HANDSHAKE_TIMEOUT))??;
            Ok(hyper_util::rt::TokioIo::new(tls))
        })
    }
}

/// An endpoint for `TlsConnect`: `url` (https://…) as http://, requests naming `url`.
pub fn tls_endpoint(url: &str) -> anyhow::Result<tonic::transport::Endpoint> {
    let origin: tonic::codegen::http::Uri = url
        .parse()
        .with_context(|| format!("bad coordinator address {url:?}"))?;
    let plain = match url.strip_prefix("https://") {
        Some(rest) => format!("http://{rest}"),
        None => anyhow::bail!("coordinator address {url} must start with https:// when using TLS"),
    };
    Ok(tonic::transport::Endpoint::from_shared(plain)
        .with_context(|| format!("bad coordinator address {url:?}"))?
        .origin(origin))
}
