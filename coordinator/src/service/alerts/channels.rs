//! Sending one message to a rule's channel: a signed JSON webhook, a Slack-compatible
//! incoming webhook, or mail over SMTP with STARTTLS (lettre). A message carries one event,
//! or a digest of several, each with its idempotency key; links put the coordinator's public
//! address (`serve --public-url`) in front of the console's path.

use std::time::Duration;

use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use ring::hmac;
use serde_json::json;

use crate::store::alerts::{Channel, Event, Rule};

/// How long one send may take before it counts as failed.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// The headers a webhook receiver verifies: the Unix time the message was signed at, and
/// `v1=HEX(HMAC-SHA256(key, TIMESTAMP + "." + BODY))` over the exact body bytes.
pub const TIMESTAMP_HEADER: &str = "X-Platter-Timestamp";
pub const SIGNATURE_HEADER: &str = "X-Platter-Signature";
pub const KEY_HEADER: &str = "Idempotency-Key";

/// One message: an event with its key, or a digest of several.
#[derive(Debug, Clone)]
pub struct Message1<'a> {
    pub events: &'a [(Event, String)],
    /// The digest's own key (its events' keys, hashed); the event's key for one event.
    pub key: String,
}

/// Reads a secret (or a URL that is one) where its reference says: `env:NAME`,
/// `file:PATH` (trimmed), or the text itself when it is neither.
pub fn resolve(reference: &str) -> Result<String, String> {
    if let Some(name) = reference.strip_prefix("env:") {
        return std::env::var(name).map_err(|_| format!("environment variable {name} is not set"));
    }
    if let Some(path) = reference.strip_prefix("file:") {
        return std::fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .map_err(|e| format!("cannot read {path}: {e}"));
    }
    Ok(reference.to_string())
}

/// The signature a receiver checks (`SIGNATURE_HEADER`).
pub fn signature(key: &[u8], timestamp: i64, body: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    let mut ctx = hmac::Context::with_key(&key);
    ctx.update(timestamp.to_string().as_bytes());
    ctx.update(b".");
    ctx.update(body);
    format!("v1={}", hex::encode(ctx.sign().as_ref()))
}

fn link(public_url: &str, path: &str) -> String {
    format!("{}{path}", public_url.trim_end_matches('/'))
}

/// "[CRITICAL] qualification: FAIL nightly: …" — an event on one line.
pub fn line(e: &Event) -> String {
    let what = match e.what.as_str() {
        "raised" => String::new(),
        w => format!(" {w}"),
    };
    format!(
        "[{}] {}{what}: {}",
        e.severity.to_uppercase(),
        e.kind,
        e.summary
    )
}

/// The JSON body of a webhook message.
pub fn webhook_body(m: &Message1<'_>, public_url: &str) -> serde_json::Value {
    let events: Vec<serde_json::Value> = m
        .events
        .iter()
        .map(|(e, key)| {
            json!({
                "idempotency_key": key,
                "event_id": e.event_id,
                "flag_id": e.flag_id,
                "what": e.what,
                "kind": e.kind,
                "severity": e.severity,
                "series": e.series,
                "host": e.host,
                "model": e.model,
                "summary": e.summary,
                "url": link(public_url, &e.link),
                "created_unix_ms": e.created_unix_ms,
            })
        })
        .collect();
    json!({
        "idempotency_key": m.key,
        "digest": m.events.len() > 1,
        "events": events,
    })
}

/// The text of a Slack message or a mail: one line per event with its link, a digest
/// saying how many.
pub fn text(m: &Message1<'_>, public_url: &str) -> String {
    let mut out = String::new();
    if m.events.len() > 1 {
        out.push_str(&format!(
            "{} platter alerts held while the channel was down, oldest first:\n",
            m.events.len()
        ));
    }
    for (e, _) in m.events {
        out.push_str(&format!("{}\n{}\n", line(e), link(public_url, &e.link)));
    }
    out
}

/// A test message to `rule`, sent now from this process (its environment and files hold
/// the secrets named), its link under `public_url`: `platter alerts test` and the console's
/// test button.
pub async fn send_test(rule: &Rule, public_url: &str) -> Result<(), String> {
    let event = crate::store::alerts::test_event(&rule.name, 0, crate::store::error::now_ms());
    let key = crate::store::alerts::idempotency_key(&event.event_id, &rule.name);
    let events = [(event, key.clone())];
    let http = reqwest::Client::builder()
        .timeout(SEND_TIMEOUT)
        .build()
        .map_err(|e| format!("an HTTP client: {e}"))?;
    send(
        &http,
        rule,
        &Message1 {
            events: &events,
            key,
        },
        public_url,
    )
    .await
}

/// Sends `m` to `rule`'s channel.
pub async fn send(
    http: &reqwest::Client,
    rule: &Rule,
    m: &Message1<'_>,
    public_url: &str,
) -> Result<(), String> {
    match rule.channel {
        Channel::Webhook => {
            let url = resolve(&rule.target)?;
            let body =
                serde_json::to_vec(&webhook_body(m, public_url)).map_err(|e| e.to_string())?;
            let timestamp = crate::store::error::now_ms() / 1000;
            let mut req = http
                .post(&url)
                .header("Content-Type", "application/json")
                .header(KEY_HEADER, &m.key)
                .header(TIMESTAMP_HEADER, timestamp.to_string());
            if !rule.secret.is_empty() {
                let key = resolve(&rule.secret)?;
                req = req.header(
                    SIGNATURE_HEADER,
                    signature(key.as_bytes(), timestamp, &body),
                );
            }
            answered(req.body(body).timeout(SEND_TIMEOUT).send().await, &url)
        }
        Channel::Slack => {
            let url = resolve(&rule.target)?;
            let req = http
                .post(&url)
                .header(KEY_HEADER, &m.key)
                .json(&json!({ "text": text(m, public_url) }))
                .timeout(SEND_TIMEOUT);
            answered(req.send().await, &url)
        }
        Channel::Email => mail(rule, m, public_url).await,
    }
}

/// A webhook's answer: any 2xx is taken.
fn answered(r: reqwest::Result<reqwest::Response>, url: &str) -> Result<(), String> {
    let url = redact(url);
    match r {
        Ok(resp) if resp.status().is_success() => Ok(()),
        Ok(resp) => Err(format!("{url} answered {}", resp.status())),
        // Without the URL: its path may be a token.
        Err(e) => Err(format!(
            "{url}: {}",
            platter_proto::tls::chain(&e.without_url())
        )),
    }
}

/// A URL without its path and query, which may hold a token (Slack's do).
fn redact(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => format!(
            "{}://{}{}",
            u.scheme(),
            u.host_str().unwrap_or(""),
            u.port().map(|p| format!(":{p}")).unwrap_or_default()
        ),
        Err(_) => "the webhook".into(),
    }
}

/// Mail over SMTP: `smtp://[USER@]HOST[:PORT][?ca=PATH]`, STARTTLS required (the CA file
/// for a server whose certificate the system does not trust), the password from the
/// rule's secret. The idempotency key is the mail's Message-ID.
async fn mail(rule: &Rule, m: &Message1<'_>, public_url: &str) -> Result<(), String> {
    let target = resolve(&rule.target)?;
    let url = reqwest::Url::parse(&target).map_err(|e| format!("{target}: {e}"))?;
    if url.scheme() != "smtp" {
        return Err(format!("{target}: an e-mail target is smtp://HOST:PORT"));
    }
    let host = url
        .host_str()
        .ok_or("the smtp:// target names no host")?
        .to_string();
    let mut tls = TlsParameters::builder(host.clone());
    if let Some((_, ca)) = url.query_pairs().find(|(k, _)| k == "ca") {
        let pem = std::fs::read(ca.as_ref()).map_err(|e| format!("cannot read {ca}: {e}"))?;
        let cert = Certificate::from_pem(&pem).map_err(|e| format!("{ca}: {e}"))?;
        tls = tls.add_root_certificate(cert);
    }
    let tls = tls.build_rustls().map_err(|e| e.to_string())?;
    let mut transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&host)
        .port(url.port().unwrap_or(587))
        .tls(Tls::Required(tls))
        .timeout(Some(SEND_TIMEOUT));
    if !url.username().is_empty() {
        let password = resolve(&rule.secret)?;
        transport = transport.credentials(Credentials::new(url.username().to_string(), password));
    }
    let first = &m.events[0].0;
    let subject = if m.events.len() > 1 {
        format!("[platter] {} alerts", m.events.len())
    } else {
        format!("[platter] {}", line(first))
    };
    let mut builder = Message::builder()
        .from(
            rule.sender
                .parse()
                .map_err(|e| format!("sender {:?}: {e}", rule.sender))?,
        )
        .subject(subject)
        .message_id(Some(format!("<{}@platter>", m.key)))
        .header(ContentType::TEXT_PLAIN);
    for to in &rule.recipients {
        builder = builder.to(to.parse().map_err(|e| format!("recipient {to:?}: {e}"))?);
    }
    let mail = builder
        .body(text(m, public_url))
        .map_err(|e| e.to_string())?;
    transport
        .build()
        .send(mail)
        .await
        .map(|_| ())
        .map_err(|e| format!("smtp://{host}: {}", platter_proto::tls::chain(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_hmac_sha256_over_timestamp_dot_body() {
        // RFC 4231's test case 2 key and a body, computed independently with
        // `printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac Jefe`.
        let s = signature(b"Jefe", 1_700_000_000, br#"{"a":1}"#);
        assert_eq!(
            s,
            "v1=fa5f6481efc59da48b19c9dc10196c9953e5651f8304b3a318b6b87d70272e0a"
        );
        assert_eq!(s, signature(b"Jefe", 1_700_000_000, br#"{"a":1}"#));
        assert_ne!(s, signature(b"Jefe", 1_700_000_001, br#"{"a":1}"#));
        assert_ne!(s, signature(b"jefe", 1_700_000_000, br#"{"a":1}"#));
    }

    #[test]
    fn secrets_are_read_where_their_reference_says() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("key");
        std::fs::write(&f, "s3cret\n").unwrap();
        assert_eq!(resolve(&format!("file:{}", f.display())).unwrap(), "s3cret");
        assert!(resolve("file:/nonexistent/key")
            .unwrap_err()
            .contains("cannot read"));
        assert!(resolve("env:PLATTER_TEST_UNSET_VARIABLE")
            .unwrap_err()
            .contains("not set"));
        assert_eq!(resolve("http://x/").unwrap(), "http://x/");
    }

    #[test]
    fn a_chat_message_says_each_event_on_a_line_with_its_link_and_a_digest_how_many() {
        let e = |id: &str, what: &str, summary: &str| {
            let mut e = crate::store::alerts::test_event("r", 1, 0);
            e.event_id = id.into();
            e.what = what.into();
            e.kind = "regression".into();
            e.severity = "warning".into();
            e.summary = summary.into();
            e.link = format!("/flags/{id}");
            (e, format!("key-{id}"))
        };
        let one = [e("a1", "raised", "REGRESSION nightly on rc66: wall +12%")];
        let m = Message1 {
            events: &one,
            key: "key-a1".into(),
        };
        assert_eq!(
            text(&m, "https://platter.lab.example/"),
            "[WARNING] regression: REGRESSION nightly on rc66: wall +12%\n\
             https://platter.lab.example/flags/a1\n"
        );
        let body = webhook_body(&m, "");
        assert_eq!(body["digest"], false);
        assert_eq!(body["events"][0]["url"], "/flags/a1");
        let two = [
            one[0].clone(),
            e("b2", "fixed", "fixed: REGRESSION … (back)"),
        ];
        let m = Message1 {
            events: &two,
            key: "digest-x".into(),
        };
        let t = text(&m, "https://p");
        assert!(t.starts_with("2 platter alerts held while the channel was down, oldest first:\n[WARNING] regression: REGRESSION"), "{t}");
        assert!(
            t.contains(
                "[WARNING] regression fixed: fixed: REGRESSION … (back)\nhttps://p/flags/b2\n"
            ),
            "{t}"
        );
        let body = webhook_body(&m, "https://p");
        assert_eq!(body["digest"], true);
        assert_eq!(body["events"][1]["idempotency_key"], "key-b2");
    }

    #[test]
    fn a_failed_webhook_does_not_print_its_token() {
        assert_eq!(
            redact("https://hooks.slack.com/services/T000/B000/XXXX"),
            "https://hooks.slack.com"
        );
        assert_eq!(
            redact("http://127.0.0.1:8080/hook?k=1"),
            "http://127.0.0.1:8080"
        );
    }
}
