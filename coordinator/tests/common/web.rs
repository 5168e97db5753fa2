//! Talking HTTP/1.1 to `platter serve --http` as a scraper, a script or a browser's form
//! would: one request per connection, the answer read to its end.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use super::{platter, run_ok, wait_for, write};

/// The address `platter serve` said it serves HTTP on (`http on ADDRESS` in its log).
pub fn http_addr(dir: &Path) -> String {
    wait_for(
        "the coordinator to say where it serves HTTP",
        Duration::from_secs(20),
        || {
            let text = std::fs::read_to_string(dir.join("coordinator.log")).ok()?;
            text.lines()
                .find_map(|l| l.strip_prefix("http on ").map(str::to_string))
        },
    )
}

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

/// One HTTP/1.1 request, the answer read to its end.
pub fn call(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    head += &format!("Content-Length: {}\r\n\r\n", body.len());
    tcp.write_all(head.as_bytes()).unwrap();
    tcp.write_all(body.as_bytes()).unwrap();
    let mut raw = String::new();
    tcp.read_to_string(&mut raw).unwrap();
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
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("the page carries a CSRF token")
        .to_string();
    Session { cookie, csrf }
}
