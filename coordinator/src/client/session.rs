//! An operator command's link to its coordinators: the one that answered last, the others
//! to turn to when it is gone, and how long to keep trying while none answers or a store
//! does not. It must not retry what the user has to fix (a refused certificate, an unknown
//! campaign, a bad argument): those come back at once.

use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant};

use platter_proto::tls::Transport;
use platter_proto::v1::control_client::ControlClient;
use tonic::transport::Channel;
use tonic::Code;

/// How long a command waits between tries when every coordinator failed.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// The coordinators named (`--coordinator A,B`, or a list in the client file), the one in
/// use, and the window in which failures that pass are ridden out.
pub struct Session {
    urls: Vec<String>,
    transport: Transport,
    /// The coordinator in use: `urls[at]`.
    at: usize,
    client: Option<ControlClient<Channel>>,
    retry_for: Duration,
    /// Since when calls have failed, and the last failure said of each coordinator (each
    /// said once, however many rounds the list goes).
    failing: Option<(Instant, HashMap<String, String>)>,
}

/// A failure that passes: the coordinator went away (or is restarting), a connection
/// broke, or its store does not answer (`UNAVAILABLE`, which the coordinator also says
/// while its store is frozen or gone and nothing it read before can stand in).
pub fn passes(s: &tonic::Status) -> bool {
    match s.code() {
        Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Aborted => true,
        // A connection that broke mid-call (h2 reset, a closed stream) comes as UNKNOWN
        // with the transport's error as its source, and no message of the coordinator's.
        Code::Unknown => std::error::Error::source(s).is_some(),
        _ => false,
    }
}

impl Session {
    pub fn new(urls: Vec<String>, transport: Transport, retry_for: Duration) -> Session {
        assert!(!urls.is_empty(), "resolve names at least one coordinator");
        Session {
            urls,
            transport,
            at: 0,
            client: None,
            retry_for,
            failing: None,
        }
    }

    /// The coordinator in use (or to be tried next).
    pub fn url(&self) -> &str {
        &self.urls[self.at]
    }

    /// A client of a coordinator that answers (as `call` finds one), for a call that is
    /// not retried.
    pub async fn connect(&mut self) -> anyhow::Result<ControlClient<Channel>> {
        self.call("connecting", |c| async move { Ok(c) })
            .await?
            .map_err(|s| super::call_error("connecting", s))
    }

    /// A client of the coordinator in use, dialled if needed.
    async fn client(&mut self) -> anyhow::Result<ControlClient<Channel>> {
        if let Some(c) = &self.client {
            return Ok(c.clone());
        }
        let c = super::connect(&self.urls[self.at], &self.transport).await?;
        self.client = Some(c.clone());
        Ok(c)
    }

    /// `f` on a coordinator, until it answers or fails for a reason that does not pass.
    /// A failure that passes moves to the next coordinator named (if any), says so once on
    /// stderr, and is tried again every `RETRY_PAUSE` until `retry_for` has gone by since
    /// the first failure; then the last failure is the answer. `Err` is a failure to
    /// connect that does not pass (a refused certificate, a coordinator that speaks
    /// plaintext), or the window gone by while none connected; `Ok(Err)` the coordinator's
    /// own refusal, for the caller to word.
    pub async fn call<T, F, Fut>(
        &mut self,
        what: &str,
        mut f: F,
    ) -> anyhow::Result<Result<T, tonic::Status>>
    where
        F: FnMut(ControlClient<Channel>) -> Fut,
        Fut: Future<Output = Result<T, tonic::Status>>,
    {
        loop {
            let why = match self.client().await {
                Ok(c) => match f(c).await {
                    Ok(v) => {
                        self.answered();
                        return Ok(Ok(v));
                    }
                    Err(s) if passes(&s) => {
                        if self.given_up() || self.refused(&s).await {
                            return Ok(Err(s));
                        }
                        super::call_error(what, s).to_string()
                    }
                    Err(s) => return Ok(Err(s)),
                },
                // A coordinator that refuses this client's certificate, or that speaks
                // plaintext to TLS, will not change its mind: the user must act.
                Err(e) if !connect_passes(&e) => return Err(e),
                Err(e) => {
                    if self.given_up() {
                        return Err(e);
                    }
                    format!("{e:#}")
                }
            };
            self.failed(why).await;
        }
    }

    /// Whether a call that failed with a broken connection was this client's certificate
    /// refused (or the coordinator's, by this client): under TLS 1.3 the handshake ends
    /// before the coordinator judges the client's certificate, so a refusal looks like a
    /// connection closed on the first call, as a coordinator killed under it does. The
    /// coordinator is asked again (`tls::why_closed`); one that takes a connection but
    /// closes it again without a word refuses too, while one gone takes none.
    async fn refused(&self, s: &tonic::Status) -> bool {
        use platter_proto::tls::{self, Refusal};
        let Transport::Tls(dir) = &self.transport else {
            return false;
        };
        if std::error::Error::source(s).and_then(Refusal::of).is_none() {
            return false;
        }
        let url = self.url();
        match tls::why_closed(dir, url, url, Duration::from_secs(5)).await {
            Some(Refusal::LikelyByCoordinator) => {
                let Some(addr) = host_port(url) else {
                    return true;
                };
                tokio::net::TcpStream::connect(addr).await.is_ok()
            }
            Some(_) => true,
            None => false,
        }
    }

    /// A call failed for a reason that passes: the next coordinator, said once, and a
    /// pause when every coordinator named has been tried.
    pub async fn failed(&mut self, why: String) {
        self.client = None;
        let from = self.url().to_string();
        self.at = (self.at + 1) % self.urls.len();
        let (since, mut said) = self
            .failing
            .take()
            .unwrap_or_else(|| (Instant::now(), HashMap::new()));
        if said.get(&from) != Some(&why) {
            let next = if self.urls.len() > 1 {
                format!("trying {}", self.url())
            } else {
                "trying again".to_string()
            };
            eprintln!(
                "platter: {from}: {why}; {next} (for up to {} more)",
                humantime::format_duration(Duration::from_secs(
                    self.retry_for.saturating_sub(since.elapsed()).as_secs()
                ))
            );
            said.insert(from, why);
        }
        self.failing = Some((since, said));
        // A pause once around the list: another coordinator is tried at once.
        if self.at == 0 || self.urls.len() == 1 {
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// A call came through: if calls had failed, say that it goes on.
    pub fn answered(&mut self) {
        if let Some((since, _)) = self.failing.take() {
            eprintln!(
                "platter: {} answers again, after {}",
                self.url(),
                humantime::format_duration(Duration::from_secs(since.elapsed().as_secs()))
            );
        }
    }

    /// Whether failures have gone on for `retry_for`.
    pub fn given_up(&self) -> bool {
        self.failing
            .as_ref()
            .is_some_and(|(since, _)| since.elapsed() >= self.retry_for)
            || self.retry_for.is_zero()
    }
}

/// `host:port` of a coordinator's URL (443 by default, as for https).
fn host_port(url: &str) -> Option<String> {
    let uri: http::Uri = url.parse().ok()?;
    let port = uri.port_u16().unwrap_or(443);
    let host = uri.host()?;
    Some(format!("{host}:{port}"))
}

/// Whether a failure to connect passes (`ConnectFailed::passes`).
fn connect_passes(e: &anyhow::Error) -> bool {
    e.downcast_ref::<super::ConnectFailed>()
        .is_some_and(|f| f.passes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_that_pass_are_those_of_a_coordinator_or_store_away() {
        assert!(passes(&tonic::Status::unavailable(
            "the store is not answering"
        )));
        assert!(passes(&tonic::Status::deadline_exceeded("slow")));
        assert!(!passes(&tonic::Status::not_found("no campaign x")));
        assert!(!passes(&tonic::Status::permission_denied("viewer")));
        assert!(!passes(&tonic::Status::invalid_argument("bad")));
        assert!(
            !passes(&tonic::Status::unknown("a coordinator's own message")),
            "UNKNOWN without a transport error under it is the coordinator's answer"
        );
    }
}
