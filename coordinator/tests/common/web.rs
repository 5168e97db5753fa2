//! Talking HTTP/1.1 to `platter serve --http` as a scraper, a script or a browser's form
//! would: one request per connection, the answer read to its end.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_rustls::rustls;

use super::{platter, run_ok, wait_for, write};

/// The fleet CA each HTTPS site is checked against, by its URL (`http_addr` learns it).
static CAS: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);

/// The URL `platter serve` said it serves HTTP on (`http on URL` in its log):
/// `https://…` with the test's coordinator identity (whose CA `call` then trusts),
/// `http://…` without.
pub fn http_addr(dir: &Path) -> String {
    let url = wait_for(
        "the coordinator to say where it serves HTTP",
        Duration::from_secs(20),
        || {
            let text = std::fs::read_to_string(dir.join("coordinator.log")).ok()?;
            // Whole lines only: a line may be written in pieces ("http on https://127.0.0.1:4"
            // read before its port's last digits was an invalid address).
            text.split_inclusive('\n')
                .filter(|l| l.ends_with('\n'))
                .find_map(|l| l.trim_end().strip_prefix("http on ").map(str::to_string))
        },
    );
    if url.starts_with("https://") {
        remember_ca(&url, &dir.join("pki/ca/ca.pem"));
    }
    url
}

/// `call` checks `site`'s certificate against the CA in `ca`.
pub fn remember_ca(site: &str, ca: &Path) {
    CAS.lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .insert(site.trim_end_matches('/').to_string(), ca.to_path_buf());
}

/// A client's TLS configuration that trusts only the CA in `ca`.
pub fn trusting(ca: &Path) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// `url`'s scheme is HTTPS; its host and port.
fn split(url: &str) -> (bool, &str) {
    match url.split_once("://") {
        Some((scheme, rest)) => (scheme == "https", rest.trim_end_matches('/')),
        None => (false, url),
    }
}

/// A plaintext or TLS connection.
pub trait ReadWrite: Read + Write + Send {}
impl<T: Read + Write + Send> ReadWrite for T {}

#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A connection to `site` (plaintext, or TLS checked against its CA), and its HOST:PORT.
pub fn connect(site: &str) -> (Box<dyn ReadWrite>, String) {
    let (https, addr) = split(site);
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let stream: Box<dyn ReadWrite> = if https {
        let ca = CAS
            .lock()
            .unwrap()
            .as_ref()
            .and_then(|m| m.get(site.trim_end_matches('/')).cloned())
            .unwrap_or_else(|| panic!("no CA known for {site}: get it from http_addr"));
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h).to_string();
        let name = rustls::pki_types::ServerName::try_from(host).unwrap();
        let conn = rustls::ClientConnection::new(trusting(&ca), name).unwrap();
        Box::new(rustls::StreamOwned::new(conn, tcp))
    } else {
        Box::new(tcp)
    };
    (stream, addr.to_string())
}

/// One HTTP/1.1 request to `site` (a URL from `http_addr`, or HOST:PORT for plaintext),
/// the answer read to its end.
pub fn call(site: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let (mut stream, addr) = connect(site);
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    head += &format!("Content-Length: {}\r\n\r\n", body.len());
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    stream.flush().unwrap();
    let mut bytes = Vec::new();
    if let Err(e) = stream.read_to_end(&mut bytes) {
        // A TLS peer that closed without close_notify, after its whole answer.
        assert!(
            e.kind() == std::io::ErrorKind::UnexpectedEof && !bytes.is_empty(),
            "reading the answer from {site}: {e}"
        );
    }
    let raw = String::from_utf8_lossy(&bytes).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {raw:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_string(),
    }
}

/// A form posted as a browser does: with the session's `cookie`, `fields` form-encoded.
pub fn post_form(site: &str, path: &str, cookie: &str, fields: &[(&str, &str)]) -> Answer {
    call(
        site,
        "POST",
        path,
        &[
            ("Cookie", cookie),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        &form(fields),
    )
}

/// The value of the first `name="…"` attribute in `html`.
pub fn attribute(html: &str, name: &str) -> Option<String> {
    html.split(&format!("{name}=\""))
        .nth(1)
        .and_then(|r| r.split('"').next())
        .map(str::to_string)
}

/// `application/x-www-form-urlencoded` of `fields`.
pub fn form(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(k, v)| format!("{k}={}", urlencode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A console account made with `platter users add` on the store `db`, its password from
/// a file in `dir`.
pub fn add_user_to(dir: &Path, db: &str, name: &str, role: &str, password: &str) {
    let file = write(dir, &format!("{name}.password"), password);
    run_ok(platter().args([
        "users",
        "add",
        name,
        "--role",
        role,
        "--password-file",
        file.to_str().unwrap(),
        "--db",
        db,
    ]));
}

/// `add_user_to` on the test's own store, `dir/coordinator.db`.
pub fn add_user(dir: &Path, name: &str, role: &str, password: &str) {
    let db = dir.join("coordinator.db");
    add_user_to(dir, db.to_str().unwrap(), name, role, password);
}

/// A signed-in browser: its cookie and the CSRF token its pages carry.
pub struct Session {
    pub cookie: String,
    pub csrf: String,
    /// The `Set-Cookie` header as the sign-in answered it.
    pub set_cookie: String,
}

/// Signs in as a browser's form does; panics unless it worked.
pub fn sign_in(addr: &str, name: &str, password: &str) -> Session {
    let a = call(
        addr,
        "POST",
        "/login",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &form(&[("name", name), ("password", password), ("next", "/")]),
    );
    assert_eq!(a.status, 303, "{a:?}");
    let set = a.header("set-cookie").expect("a session cookie");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attribute), "{set}");
    }
    let cookie = set.split(';').next().unwrap().to_string();
    let page = call(addr, "GET", "/", &[("Cookie", &cookie)], "");
    assert_eq!(page.status, 200, "{page:?}");
    let csrf = page
        .body
        .split("name=\"csrf\"")
        .nth(1)
        .and_then(|r| attribute(r, "value"))
        .expect("the page carries a CSRF token");
    Session {
        cookie,
        csrf,
        set_cookie: set.to_string(),
    }
}

/// The value of the sample line `name` (with its labels, as written) in a `/metrics` answer.
pub fn sample(metrics: &str, name: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// An API token's secret for `user` with `role`, made with `platter tokens add` on the
/// test's store, `dir/coordinator.db`.
pub fn token(dir: &Path, user: &str, role: &str) -> String {
    let out = run_ok(platter().args([
        "tokens",
        "add",
        "--user",
        user,
        "--role",
        role,
        "--label",
        "test",
        "--db",
        dir.join("coordinator.db").to_str().unwrap(),
    ]));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}
