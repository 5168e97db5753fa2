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
pub fn validity_problem(cert_pem: &str) -> Option<String> {
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
