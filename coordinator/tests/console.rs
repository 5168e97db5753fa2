//! The fleet console over HTTP, as a browser and a script would use it: signing in and
//! out, what each role may do, CSRF tokens, rate-limited sign-in, API tokens, and every
//! string from a host shown as text. (`console_browser.rs` drives a real browser.)

mod common;

use std::time::Duration;

use common::web::*;
use common::*;

const XSS_HOST: &str = "<img src=x onerror=alert(1)>";

#[test]
fn roles_sessions_and_tokens_guard_the_console() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (mut coordinator, port) = serve_with(dir, &["--http", "127.0.0.1:0"]);
    let http = http_addr(dir);

    // Nobody signed in: pages send the browser to sign in, the API answers 401, and the
    // sign-in page tells a newcomer how to make the first account.
    let a = call(&http, "GET", "/campaigns?state=running", &[], "");
    assert_eq!(a.status, 303);
    assert_eq!(
        a.header("location"),
        Some("/login?next=%2Fcampaigns%3Fstate%3Drunning")
    );
    assert_eq!(call(&http, "GET", "/api/v1/overview", &[], "").status, 401);
    let login = call(&http, "GET", "/login", &[], "");
    assert!(login.body.contains("platter users add"), "{}", login.body);

    add_user(dir, "alice", "operator", "correct horse battery");
    add_user(dir, "bob", "viewer", "bob's long password");
    assert!(!call(&http, "GET", "/login", &[], "")
        .body
        .contains("no accounts yet"));

    let _h1 = agent(dir, port, "h1", &[]);
    let _h2 = agent(dir, port, "h2", &[]);
    let _xss = agent(dir, port, XSS_HOST, &[]);
    wait_agents(dir, 3);
    let campaign = write(
        dir,
        "long.yaml",
        "name: long\nhosts: { names: [h1] }\nworkload: { command: { run: \"sleep 60\" } }\nrepeat: 1\n",
    );
    let id = submit(dir, port, &campaign);

    let alice = sign_in(&http, "alice", "correct horse battery");
    let bob = sign_in(&http, "bob", "bob's long password");

    // The overview and the hosts page list the three hosts; the hostile name is text.
    let overview = call(&http, "GET", "/", &[("Cookie", &alice.cookie)], "");
    assert!(overview.body.contains("3 host(s)"), "{}", overview.body);
    let csp = overview.header("content-security-policy").unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    let hosts = call(&http, "GET", "/hosts", &[("Cookie", &bob.cookie)], "");
    assert!(hosts.body.contains("3 of 3 host(s)"), "{}", hosts.body);
    // Escaped by the template engine (askama writes `<` as `&#60;`).
    assert!(
        hosts.body.contains("&#60;img src=x onerror=alert(1)&#62;"),
        "{}",
        hosts.body
    );
    assert!(!hosts.body.contains(XSS_HOST), "{}", hosts.body);
    // A malformed query string is refused on a console page, saying what was wrong, as
    // the API refuses it in its JSON; a signed-out browser is still sent to sign in.
    for path in ["/hosts?page=x", "/campaigns?page=-1"] {
        let bad = call(&http, "GET", path, &[("Cookie", &bob.cookie)], "");
        assert_eq!(bad.status, 400, "{path}: {bad:?}");
        assert!(
            bad.body.contains("Bad request: ") && bad.body.contains("page: invalid digit"),
            "{path}: {}",
            bad.body
        );
        assert!(
            bad.body.contains("<nav"),
            "in the console's layout: {}",
            bad.body
        );
        assert_eq!(call(&http, "GET", path, &[], "").status, 303, "{path}");
    }

    // A viewer sees no cancel button, and a cancel forged with the viewer's own valid
    // session and CSRF token is refused: the role decides.
    let page = call(
        &http,
        "GET",
        &format!("/campaigns/{id}"),
        &[("Cookie", &bob.cookie)],
        "",
    );
    assert_eq!(page.status, 200);
    assert!(!page.body.contains("id=\"cancel\""), "{}", page.body);
    assert!(!page.body.contains("href=\"/submit\""));
    let forged = post_form(
        &http,
        &format!("/campaigns/{id}/cancel"),
        &bob.cookie,
        &[("csrf", &bob.csrf)],
    );
    assert_eq!(forged.status, 403, "{forged:?}");
    // An operator's change without the session's CSRF token is refused too.
    for csrf in ["", "0123456789abcdef"] {
        let no_token = post_form(
            &http,
            &format!("/campaigns/{id}/cancel"),
            &alice.cookie,
            &[("csrf", csrf)],
        );
        assert_eq!(no_token.status, 403, "{no_token:?}");
    }
    assert_eq!(
        query_i64(
            dir,
            "SELECT COUNT(*) FROM campaigns WHERE state = 'running'"
        ),
        1
    );

    // API tokens: a viewer's reads, an operator's cancels; no CSRF token needed.
    let viewer_token = token(dir, "bob", "viewer");
    let bearer = format!("Bearer {viewer_token}");
    let hosts = call(
        &http,
        "GET",
        "/api/v1/hosts",
        &[("Authorization", &bearer)],
        "",
    );
    assert_eq!(hosts.status, 200, "{hosts:?}");
    let v: serde_json::Value = serde_json::from_str(&hosts.body).unwrap();
    assert_eq!(v["total"], 3, "{v}");
    let names: Vec<&str> = v["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["host"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&XSS_HOST) && names.contains(&"h1"),
        "{names:?}"
    );
    let cancel = format!("/api/v1/campaigns/{id}/cancel");
    assert_eq!(
        call(&http, "POST", &cancel, &[("Authorization", &bearer)], "").status,
        403
    );
    let wrong = call(
        &http,
        "GET",
        "/api/v1/hosts",
        &[("Authorization", "Bearer plt_nope")],
        "",
    );
    assert_eq!(wrong.status, 401);

    // The operator cancels from the page, with the token.
    let done = post_form(
        &http,
        &format!("/campaigns/{id}/cancel"),
        &alice.cookie,
        &[("csrf", &alice.csrf)],
    );
    assert_eq!(done.status, 303, "{done:?}");
    assert_eq!(
        query_i64(
            dir,
            "SELECT COUNT(*) FROM campaigns WHERE state = 'cancelled'"
        ),
        1
    );
    // A campaign's JSON twin.
    let campaign_json = |id: &str| -> serde_json::Value {
        let json = call(
            &http,
            "GET",
            &format!("/api/v1/campaigns/{id}"),
            &[("Authorization", &bearer)],
            "",
        );
        serde_json::from_str(&json.body).unwrap()
    };
    let v = campaign_json(&id);
    assert_eq!(v["state"], "cancelled", "{v}");

    // A failing step's stderr is shown on its campaign's page, as text.
    let failing = write(
        dir,
        "failing.yaml",
        "name: failing\nhosts: { names: [h2] }\nworkload: { command: { run: \"echo '<script>alert(1)</script>' >&2; exit 3\" } }\nrepeat: 1\n",
    );
    let failing = submit(dir, port, &failing);
    wait_in(
        dir,
        "the failing campaign to end",
        Duration::from_secs(60),
        || {
            (query_i64(
                dir,
                "SELECT COUNT(*) FROM campaigns WHERE name = 'failing' AND state = 'done'",
            ) == 1)
                .then_some(())
        },
    );
    let page = call(
        &http,
        "GET",
        &format!("/campaigns/{failing}"),
        &[("Cookie", &bob.cookie)],
        "",
    );
    assert!(page.body.contains("id=\"failures\""), "{}", page.body);
    assert!(
        page.body
            .contains("&#60;script&#62;alert(1)&#60;/script&#62;")
            && !page.body.contains("<script>alert"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("<script>alert"), "{}", page.body);
    let v = campaign_json(&failing);
    assert_eq!(v["failures_total"], 1, "{v}");
    assert_eq!(v["failures"][0]["host"], "h2", "{v}");
    assert!(
        v["failures"][0]["stderr_tail"]
            .as_str()
            .unwrap()
            .contains("<script>alert(1)</script>"),
        "{v}"
    );
    assert_eq!(v["verdict"]["pass"], false, "{v}");
    assert_eq!(v["verdict"]["state"], "fail", "{v}");

    // A campaign that set no limits was judged against nothing: "no limits", not a green
    // pass, on its page, on the overview and in its JSON twin; one whose limits held passes.
    let plain = write(
        dir,
        "plain.yaml",
        "name: plain\nhosts: { names: [h1] }\nworkload: { command: { run: \"true\" } }\nrepeat: 1\n",
    );
    let limited = write(
        dir,
        "limited.yaml",
        "name: limited\nhosts: { names: [h1] }\nworkload: { command: { run: \"true\" } }\nrepeat: 1\n\
         report: { qualify: [\"wall.median < 60s\"] }\n",
    );
    let (plain, limited) = (submit(dir, port, &plain), submit(dir, port, &limited));
    wait_in(dir, "both to end", Duration::from_secs(60), || {
        (query_i64(
            dir,
            "SELECT COUNT(*) FROM campaigns WHERE name IN ('plain', 'limited') AND state = 'done'",
        ) == 2)
            .then_some(())
    });
    let verdict_of = |id: &str| campaign_json(id)["verdict"].clone();
    let v = verdict_of(&plain);
    assert_eq!(
        (&v["state"], &v["pass"], &v["qualification_checks"]),
        (&"no_limits".into(), &true.into(), &0.into()),
        "{v}"
    );
    let v = verdict_of(&limited);
    assert_eq!(
        (&v["state"], &v["qualification_checks"]),
        (&"pass".into(), &1.into()),
        "{v}"
    );
    let page = |path: &str| call(&http, "GET", path, &[("Cookie", &bob.cookie)], "").body;
    let body = page(&format!("/campaigns/{plain}"));
    let cell = &body[body.find("<td id=\"verdict\">").expect("a verdict cell")..];
    let cell = &cell[..cell.find("</td>").unwrap()];
    assert!(
        cell.contains(">no limits</span>") && !cell.contains("class=\"pass\""),
        "{cell}"
    );
    let body = page(&format!("/campaigns/{limited}"));
    assert!(body.contains("<span class=\"pass\">pass</span>"), "{body}");
    let overview = page("/");
    let row = |id: &str| {
        let at = overview
            .find(&format!("/campaigns/{id}\""))
            .expect("listed");
        overview[at..at + overview[at..].find("</tr>").unwrap()].to_string()
    };
    assert!(row(&plain).contains(">no limits</span>"), "{}", row(&plain));
    assert!(
        row(&limited).contains("<span class=\"pass\">pass</span>"),
        "{}",
        row(&limited)
    );

    // A host's JSON twin says what it ran each campaign on.
    let h2 = call(
        &http,
        "GET",
        "/api/v1/hosts/h2",
        &[("Authorization", &bearer)],
        "",
    );
    let v: serde_json::Value = serde_json::from_str(&h2.body).unwrap();
    let ran = v["ran_on"].as_array().expect("ran_on");
    assert_eq!(ran[0]["name"], "failing", "{v}");
    assert!(
        ran[0]["facts"]["kernel"]
            .as_str()
            .is_some_and(|k| !k.is_empty()),
        "{v}"
    );

    // Signing out ends the session: the cookie opens nothing any more.
    let out = post_form(&http, "/logout", &alice.cookie, &[("csrf", &alice.csrf)]);
    assert_eq!(out.status, 303);
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
    let after = call(&http, "GET", "/", &[("Cookie", &alice.cookie)], "");
    assert_eq!(after.status, 303, "{after:?}");
    // bob's session is his own and goes on.
    assert_eq!(
        call(&http, "GET", "/", &[("Cookie", &bob.cookie)], "").status,
        200
    );
    coordinator.kill9();
}

#[test]
fn sign_in_is_rate_limited() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (mut coordinator, _port) = serve_with(dir, &["--http", "127.0.0.1:0"]);
    let http = http_addr(dir);
    add_user(dir, "carol", "viewer", "carol's right password");
    let attempt = |password: &str| {
        call(
            &http,
            "POST",
            "/login",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            &form(&[("name", "carol"), ("password", password)]),
        )
    };
    for _ in 0..5 {
        let a = attempt("wrong guess");
        assert_eq!(a.status, 401, "{a:?}");
        assert!(a.body.contains("Wrong name or password"));
    }
    // Now even the right password waits, and the answer says how long.
    let held = attempt("carol's right password");
    assert_eq!(held.status, 429, "{held:?}");
    let wait: u64 = held.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    assert!(held.body.contains("Too many failed sign-ins"));
    coordinator.kill9();
}

/// A live page's event stream says `change` when the fleet changes (an agent connects, a
/// campaign's steps end), it is counted as a console client while open, and only a
/// signed-in browser gets one.
#[test]
fn live_pages_hear_of_change_and_are_counted() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (mut coordinator, port) = serve_with(dir, &["--http", "127.0.0.1:0"]);
    let http = http_addr(dir);
    assert_eq!(call(&http, "GET", "/events", &[], "").status, 303);
    add_user(dir, "erin", "viewer", "erin's long password");
    let erin = sign_in(&http, "erin", "erin's long password");
    let clients = || {
        let m = call(&http, "GET", "/metrics", &[], "").body;
        sample(&m, "platter_console_clients")
    };
    assert_eq!(clients(), Some(0.0));

    let (mut stream, addr) = connect(&http);
    write!(
        stream,
        "GET /events HTTP/1.1\r\nHost: {addr}\r\nCookie: {}\r\nAccept: text/event-stream\r\n\r\n",
        erin.cookie
    )
    .unwrap();
    stream.flush().unwrap();
    let mut events = BufReader::new(stream);
    let mut status = String::new();
    events.read_line(&mut status).unwrap();
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    wait_for(
        "the open stream to be counted",
        Duration::from_secs(10),
        || (clients() == Some(1.0)).then_some(()),
    );

    // An agent connects: the page hears of it.
    let _agent = agent(dir, port, "h1", &[]);
    let heard = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut line = String::new();
        while events.read_line(&mut line).is_ok_and(|n| n > 0) {
            if line.trim() == "event: change" {
                let _ = heard.0.send(());
                return events;
            }
            line.clear();
        }
        panic!("the event stream ended without a change");
    });
    heard
        .1
        .recv_timeout(Duration::from_secs(15))
        .expect("a change event once the agent connected");
    drop(reader.join().unwrap());
    wait_for(
        "the closed stream to be counted out",
        Duration::from_secs(10),
        || (clients() == Some(0.0)).then_some(()),
    );
    coordinator.kill9();
}

/// An open event stream as a page's script reads it: each event's name and its data
/// (its `data:` lines joined), in order, from a reader thread.
struct Stream {
    events: std::sync::mpsc::Receiver<(String, String)>,
}

impl Stream {
    /// Opens `/events?QUERY` with `cookie`, as console.js does for its page.
    fn open(http: &str, query: &str, cookie: &str) -> Stream {
        use std::io::{BufRead, BufReader, Write};
        let (mut stream, addr) = connect(http);
        write!(
            stream,
            "GET /events?{query} HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\nAccept: text/event-stream\r\n\r\n"
        )
        .unwrap();
        stream.flush().unwrap();
        let mut reader = BufReader::new(stream);
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        let (tx, events) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (mut name, mut data): (Option<String>, Vec<String>) = (None, Vec::new());
            let mut line = String::new();
            // Each event is one chunk of the chunked body: its size line and the line
            // ending it are neither `event:` nor `data:` and are passed over.
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                let l = line.trim_end_matches(['\r', '\n']);
                if let Some(n) = l.strip_prefix("event: ") {
                    name = Some(n.to_string());
                } else if let Some(d) = l.strip_prefix("data:") {
                    data.push(d.strip_prefix(' ').unwrap_or(d).to_string());
                } else if l.is_empty() {
                    if let Some(n) = name.take() {
                        if tx.send((n, data.join("\n"))).is_err() {
                            return;
                        }
                    }
                    data.clear();
                }
                line.clear();
            }
        });
        Stream { events }
    }

    /// The next event named `name` whose data satisfies `wanted`, within 15 s.
    fn until(&self, name: &str, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match self.events.recv_timeout(left) {
                Ok((n, data)) if n == name && wanted(&data) => return data,
                Ok((n, data)) => seen.push(format!("{n}: {}", &data[..data.len().min(200)])),
                Err(_) => break,
            }
        }
        panic!("no `{name}` event as wanted within 15 s; heard {seen:#?}");
    }
}

/// A live page's stream sends the page's `<main>` (as its own GET renders it, for its
/// account's role, without the session's CSRF token, which console.js fills in) when the
/// fleet changes it, and says `gone` once the session was signed out.
#[test]
fn a_live_page_is_sent_its_main_when_it_changes_until_signed_out() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (mut coordinator, port) = serve_with(dir, &["--http", "127.0.0.1:0"]);
    let http = http_addr(dir);
    add_user(dir, "alice", "operator", "correct horse battery");
    add_user(dir, "bob", "viewer", "bob's long password");
    let alice = sign_in(&http, "alice", "correct horse battery");
    let bob = sign_in(&http, "bob", "bob's long password");
    let _h1 = agent(dir, port, "h1", &[]);
    wait_agents(dir, 1);

    // The hosts page as bob loaded it, and its stream, told which <main> the page shows.
    let page = call(&http, "GET", "/hosts", &[("Cookie", &bob.cookie)], "");
    assert!(page.body.contains("1 of 1 host(s)"), "{}", page.body);
    let seen = attribute(&page.body, "data-seen").expect("a live page names the <main> it shows");
    let hosts = Stream::open(&http, &format!("page=%2Fhosts&seen={seen}"), &bob.cookie);
    // A stream for a page that is not live hears of change only.
    let admin = Stream::open(&http, "page=%2Fadmin", &bob.cookie);

    // Another agent connects: the page gets its new <main>, the frame's heading first.
    let _h2 = agent(dir, port, "h2", &[]);
    let main = hosts.until("main", |d| d.contains("2 of 2 host(s)"));
    assert!(main.trim_start().starts_with("<h1>Hosts</h1>"), "{main}");
    assert!(main.contains("href=\"/hosts/h2\""), "{main}");
    admin.until("change", |_| true);

    // A running campaign's page: an operator's carries the cancel form with an empty
    // CSRF token (the page's script puts the session's in); a viewer's has none.
    let campaign = write(
        dir,
        "long.yaml",
        "name: long\nhosts: { names: [h1] }\nworkload: { command: { run: \"sleep 60\" } }\nrepeat: 1\n",
    );
    let id = submit(dir, port, &campaign);
    let query = format!("page={}", urlencode(&format!("/campaigns/{id}")));
    let as_alice = Stream::open(&http, &query, &alice.cookie);
    let as_bob = Stream::open(&http, &query, &bob.cookie);
    let theirs = as_alice.until("main", |d| d.contains("id=\"cancel\""));
    assert!(
        theirs.contains("name=\"csrf\" value=\"\"") && !theirs.contains(&alice.csrf),
        "{theirs}"
    );
    let his = as_bob.until("main", |d| d.contains("<h1>Campaign long</h1>"));
    assert!(!his.contains("id=\"cancel\""), "{his}");

    // bob signs out: his open page's stream says `gone` at the next change.
    let out = post_form(&http, "/logout", &bob.cookie, &[("csrf", &bob.csrf)]);
    assert_eq!(out.status, 303);
    std::thread::sleep(Duration::from_millis(1100));
    let _h3 = agent(dir, port, "h3", &[]);
    hosts.until("gone", |_| true);
    // alice's goes on: she cancels, and her page shows it.
    let cancel = post_form(
        &http,
        &format!("/campaigns/{id}/cancel"),
        &alice.cookie,
        &[("csrf", &alice.csrf)],
    );
    assert_eq!(cancel.status, 303, "{cancel:?}");
    as_alice.until("main", |d| d.contains("<td id=\"state\">cancelled</td>"));
    coordinator.kill9();
}
