//! The coordinators an agent may dial: the addresses it was given, each name resolved again
//! at every round (a name with several addresses is several coordinators), and one endpoint
//! per address whose TLS checks the name that was given, not the address dialled. It dials
//! nothing itself: `link` does, in turn.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::Context;
use std::sync::Arc;
use tonic::codegen::http::Uri;

use tokio_rustls::rustls::ClientConfig;
use tonic::transport::Endpoint;

use crate::tls::{TlsConnect, Transport};

/// How long a name may take to resolve: a resolver that does not answer must not hold up
/// the other coordinators.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The addresses an agent was given, checked once when it starts.
pub(crate) struct Coordinators {
    given: Vec<Given>,
    /// The client side of mutual TLS, read once from the identity directory, one for
    /// every coordinator and connection (its session cache resumes a session with the
    /// next coordinator: `tls::session_config`); None for plaintext.
    tls: Option<Arc<ClientConfig>>,
}

struct Given {
    /// As the operator wrote it, e.g. `https://coordinator.lab:7461`.
    url: String,
    uri: Uri,
    /// The endpoint of `url` as given (with TLS, its http:// form for `TlsConnect`,
    /// which checks the name in `url`).
    endpoint: Endpoint,
    /// The host name to resolve and for TLS to check; None for an IP address.
    name: Option<String>,
    port: u16,
}

/// One address to dial.
#[derive(Clone)]
pub(crate) struct Target {
    /// The address as given, for logs and diagnoses.
    pub given: String,
    /// What is dialled: `given`, or `given` with one of its name's addresses in place of
    /// the name.
    pub url: String,
    pub endpoint: Endpoint,
    /// With TLS: what dials `endpoint` (TCP, then TLS checking the given name).
    pub tls: Option<TlsConnect>,
    /// Why its name did not resolve in this round: then it is not dialled, the try fails
    /// at once with this reason.
    pub unresolved: Option<String>,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.url == self.given {
            f.write_str(&self.given)
        } else {
            write!(f, "{} ({})", self.given, self.url)
        }
    }
}

impl Coordinators {
    /// Checks every address (a URL whose scheme fits the transport: https:// with TLS,
    /// http:// without) and reads the TLS files, so a mistake stops the agent before
    /// anything runs. Names are not resolved here: a name that does not resolve yet is a
    /// coordinator that does not answer yet.
    pub(crate) fn new(urls: &[String], transport: &Transport) -> anyhow::Result<Self> {
        anyhow::ensure!(!urls.is_empty(), "no coordinator address was given");
        let mut given = urls
            .iter()
            .map(|url| Given::parse(url, transport))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let tls = match transport {
            Transport::Tls(dir) => Some(dir.session_config()?),
            Transport::Plaintext => None,
        };
        if tls.is_some() {
            for g in &mut given {
                g.endpoint = crate::tls::tls_endpoint(&g.url)?;
            }
        }
        Ok(Coordinators { given, tls })
    }

    /// Everything to dial in this round, in the order given; a name's addresses in the order
    /// the resolver gives them (which prefers the ones likely to work). A name that does
    /// not resolve now is one target that fails with the reason, logged and retried like a
    /// coordinator that does not answer.
    pub(crate) async fn round(&self) -> Vec<Target> {
        self.round_with(|name, port| async move {
            let found =
                tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((name, port)));
            match found.await {
                Ok(Ok(addrs)) => Ok(addrs.collect()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer within {RESOLVE_TIMEOUT:?}")),
            }
        })
        .await
    }

    async fn round_with<F, Fut>(&self, resolve: F) -> Vec<Target>
    where
        F: Fn(String, u16) -> Fut,
        Fut: Future<Output = Result<Vec<SocketAddr>, String>>,
    {
        let mut targets = Vec::new();
        for g in &self.given {
            let Some(name) = &g.name else {
                targets.push(g.as_given(&self.tls));
                continue;
            };
            match resolve(name.clone(), g.port).await {
                Ok(addrs) if !addrs.is_empty() => {
                    targets.extend(addrs.into_iter().map(|addr| self.target(g, addr)));
                }
                Ok(_) => targets.push(g.unresolved("it has no address".into())),
                Err(why) => targets.push(g.unresolved(why)),
            }
        }
        targets
    }

    /// The endpoint for `g` that dials `addr`. With TLS, the name checked in the
    /// coordinator's certificate is the given one, whatever address it resolved to.
    fn target(&self, g: &Given, addr: SocketAddr) -> Target {
        let url = g.with_address(addr);
        let endpoint = match &self.tls {
            Some(_) => crate::tls::tls_endpoint(&url).ok(),
            None => Endpoint::from_shared(url.clone()).ok(),
        };
        // Requests name the coordinator as they would have without the resolution.
        match endpoint.map(|e| e.origin(g.uri.clone())) {
            Some(endpoint) => Target {
                given: g.url.clone(),
                url,
                endpoint,
                tls: g.connector(&self.tls),
                unresolved: None,
            },
            // Not expected (an address in a URL that parsed, a name that was a URL's
            // host); should it happen, the name is resolved when dialled instead.
            None => g.as_given(&self.tls),
        }
    }
}

impl Given {
    /// `url` checked: an endpoint tonic takes, a host, a scheme that fits the transport.
    fn parse(url: &str, transport: &Transport) -> anyhow::Result<Given> {
        let bad = || format!("bad coordinator address {url:?}");
        let endpoint = Endpoint::from_shared(url.to_string()).with_context(bad)?;
        let uri: Uri = url.parse().with_context(bad)?;
        match transport {
            Transport::Tls(_) if uri.scheme_str() != Some("https") => anyhow::bail!(
                "coordinator address {url} must start with https:// when using TLS \
                 (or pass --dangerously-insecure to speak plaintext)"
            ),
            Transport::Plaintext if uri.scheme_str() != Some("http") => anyhow::bail!(
                "coordinator address {url} must start with http:// for plaintext \
                 (--dangerously-insecure); give --tls-dir to use TLS"
            ),
            _ => {}
        }
        let host = uri
            .host()
            .with_context(|| format!("coordinator address {url:?} names no host"))?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let name = bare.parse::<IpAddr>().is_err().then(|| bare.to_string());
        let port = uri
            .port_u16()
            .unwrap_or(if uri.scheme_str() == Some("https") {
                443
            } else {
                80
            });
        Ok(Given {
            url: url.to_string(),
            uri,
            endpoint,
            name,
            port,
        })
    }

    fn as_given(&self, tls: &Option<Arc<ClientConfig>>) -> Target {
        Target {
            given: self.url.clone(),
            url: self.url.clone(),
            endpoint: self.endpoint.clone(),
            tls: self.connector(tls),
            unresolved: None,
        }
    }

    fn unresolved(&self, why: String) -> Target {
        Target {
            unresolved: Some(why),
            ..self.as_given(&None)
        }
    }

    /// With TLS, the connector that checks this address's name (or IP address) in the
    /// coordinator's certificate.
    fn connector(&self, tls: &Option<Arc<ClientConfig>>) -> Option<TlsConnect> {
        let host = self
            .uri
            .host()?
            .trim_start_matches('[')
            .trim_end_matches(']');
        tls.as_ref().map(|cfg| TlsConnect {
            cfg: cfg.clone(),
            server_name: self.name.clone().unwrap_or_else(|| host.to_string()),
        })
    }

    /// This address with `addr` in place of its host and port.
    fn with_address(&self, addr: SocketAddr) -> String {
        let scheme = self.uri.scheme_str().unwrap_or("http");
        let path = self
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .filter(|p| *p != "/")
            .unwrap_or("");
        format!("{scheme}://{addr}{path}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(targets: &[Target]) -> Vec<String> {
        targets.iter().map(|t| t.url.clone()).collect()
    }

    fn given(urls: &[&str]) -> Vec<String> {
        urls.iter().map(|u| u.to_string()).collect()
    }

    #[tokio::test]
    async fn a_name_with_several_addresses_is_several_coordinators_in_the_order_given() {
        let c = Coordinators::new(
            &given(&[
                "http://coordinator.lab:7461",
                "http://10.0.0.9:7461",
                "http://[fd00::9]:7461",
                "http://backup.lab",
            ]),
            &Transport::Plaintext,
        )
        .unwrap();
        let targets = c
            .round_with(|name, port| async move {
                match name.as_str() {
                    "coordinator.lab" => Ok(vec![
                        SocketAddr::from(([10, 0, 0, 1], port)),
                        SocketAddr::new("fd00::1".parse().unwrap(), port),
                    ]),
                    _ => Err("no such name".to_string()),
                }
            })
            .await;
        assert_eq!(
            urls(&targets),
            [
                "http://10.0.0.1:7461",
                "http://[fd00::1]:7461",
                // Addresses are not resolved.
                "http://10.0.0.9:7461",
                "http://[fd00::9]:7461",
                // A name that does not resolve is a try that fails with the reason.
                "http://backup.lab",
            ]
        );
        let unresolved: Vec<_> = targets.iter().map(|t| t.unresolved.as_deref()).collect();
        assert_eq!(unresolved, [None, None, None, None, Some("no such name")]);
        assert_eq!(
            targets[1].to_string(),
            "http://coordinator.lab:7461 (http://[fd00::1]:7461)"
        );
        assert_eq!(targets[2].to_string(), "http://10.0.0.9:7461");
    }

    #[tokio::test]
    async fn localhost_resolves_to_loopback_addresses() {
        let c =
            Coordinators::new(&given(&["http://localhost:7461"]), &Transport::Plaintext).unwrap();
        let targets = c.round().await;
        assert!(!targets.is_empty());
        for t in &targets {
            let uri: Uri = t.url.parse().unwrap();
            let ip: IpAddr = uri
                .host()
                .unwrap()
                .trim_matches(|c| c == '[' || c == ']')
                .parse()
                .unwrap_or_else(|e| panic!("{}: {e}", t.url));
            assert!(ip.is_loopback(), "{t}");
            assert_eq!(uri.port_u16(), Some(7461));
            assert_eq!(t.given, "http://localhost:7461");
        }
    }

    #[test]
    fn a_scheme_that_does_not_fit_the_transport_or_a_bad_address_stops_the_agent() {
        let err = |urls: &[&str], t: &Transport| {
            format!("{:#}", Coordinators::new(&given(urls), t).err().unwrap())
        };
        let tls = Transport::Tls(crate::tls::TlsDir("/nonexistent".into()));
        assert!(err(&["http://a:1", "https://b:1"], &Transport::Plaintext)
            .contains("https://b:1 must start with http://"));
        assert!(err(&["http://a:1"], &tls).contains("must start with https://"));
        assert!(err(&["http://a b:1"], &Transport::Plaintext).contains("bad coordinator address"));
        assert!(err(&[], &Transport::Plaintext).contains("no coordinator address"));
    }
}
