//! Flags and alert rules in the console over HTTP, as a browser's forms and a script use
//! them: the flags list live ones first and filtered, a flag's page with its evidence, its
//! state changed by an operator (form with the CSRF token, or the API) and never by a
//! viewer, the overview's open flags; and the admin's alerts page — rules checked as
//! `platter alerts add` checks them, a test message sent to a receiver the test starts,
//! silences, the delivery log — and an alert the coordinator delivers linking to a flag's
//! page that exists.

mod common;

use std::path::Path;
use std::time::Duration;

use common::flagged::{raise, raise_in, Receiver};
use common::web::*;
use common::*;
use serde_json::Value;

fn get(http: &str, session: &Session, path: &str) -> Answer {
    call(http, "GET", path, &[("Cookie", &session.cookie)], "")
}

fn post(http: &str, session: &Session, path: &str, fields: &[(&str, &str)]) -> Answer {
    post_form(http, path, &session.cookie, fields)
}

fn api(http: &str, secret: &str, method: &str, path: &str, body: &str) -> (u16, Value) {
    let bearer = format!("Bearer {secret}");
    let a = call(
        http,
        method,
        path,
        &[
            ("Authorization", &bearer),
            ("Content-Type", "application/json"),
        ],
        body,
    );
    let v = serde_json::from_str(&a.body).unwrap_or_else(|e| panic!("{path}: {e}: {a:?}"));
    (a.status, v)
}

/// The ids of the rows of table `id` in `html`, in order (`<tr id="flag-…">`).
fn flag_rows(html: &str, table: &str) -> Vec<String> {
    let Some(from) = html.find(&format!("<table id=\"{table}\"")) else {
        return Vec::new();
    };
    let rest = &html[from..];
    let rest = &rest[..rest.find("</table>").unwrap()];
    rest.split("<tr id=\"flag-")
        .skip(1)
        .map(|r| r.split('"').next().unwrap().to_string())
        .collect()
}

fn state_of(dir: &Path, id: &str) -> (String, String, String) {
    db(dir)
        .query_row(
            "SELECT state, note, state_by FROM flags WHERE flag_id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
}

#[test]
fn flags_are_listed_live_first_and_changed_by_operators_only() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let f = raise(&dir.join("coordinator.db"));
    let (mut coordinator, _port) = serve_with(dir, &["--http", "127.0.0.1:0"]);
    let http = http_addr(dir);
    add_user(dir, "vic", "viewer", "vic's long password");
    add_user(dir, "otto", "operator", "otto's long password");
    let vic = sign_in(&http, "vic", "vic's long password");
    let otto = sign_in(&http, "otto", "otto's long password");

    // The list: open (critical, then warning), acknowledged, fixed; each row linking to its
    // page, the state with who and why.
    let page = get(&http, &vic, "/flags");
    assert_eq!(page.status, 200, "{page:?}");
    assert_eq!(
        flag_rows(&page.body, "flags"),
        [&f.fail, &f.regression, &f.health, &f.drift].map(String::as_str)
    );
    for part in [
        "2 open, 1 acknowledged, 0 false positive, 1 fixed",
        &format!("<a href=\"/flags/{}\">", f.regression),
        "acknowledged by ana: replacing it",
        "fixed by platter: run c-3 is back within 3%",
        "<td class=\"fail\">critical</td>",
        "<a href=\"/flags\">Flags</a>",
    ] {
        assert!(page.body.contains(part), "{part}\n{}", page.body);
    }
    // Filters, as `platter flags` has them; a word that is no state is refused.
    for (query, want) in [
        ("?state=open", vec![&f.fail, &f.regression]),
        ("?state=live", vec![&f.fail, &f.regression, &f.health]),
        ("?state=fixed", vec![&f.drift]),
        ("?kind=health", vec![&f.health]),
        ("?host=h2", vec![&f.regression]),
        (
            "?series=nightly&state=open&kind=qualification",
            vec![&f.fail],
        ),
        ("?series=weekly", vec![]),
    ] {
        let page = get(&http, &vic, &format!("/flags{query}"));
        assert_eq!(page.status, 200, "{query}: {page:?}");
        let want: Vec<&str> = want.into_iter().map(String::as_str).collect();
        assert_eq!(flag_rows(&page.body, "flags"), want, "{query}");
    }
    let bad = get(&http, &vic, "/flags?state=closed");
    assert_eq!(bad.status, 400, "{bad:?}");
    assert!(bad.body.contains("a state is open"), "{}", bad.body);

    // A flag's page: its evidence laid out, its campaign linked; a viewer gets no forms,
    // and a viewer's POST is refused and changes nothing.
    let page = get(&http, &vic, &format!("/flags/{}", f.regression));
    assert_eq!(page.status, 200, "{page:?}");
    for part in [
        "20.00 ms → 23.10 ms (+15.5%)",
        "<a href=\"/campaigns/c-1\">c-1</a> → <a href=\"/campaigns/c-2\">c-2</a>",
        "[+12.0%, +19.2%]",
        "kernel: 6.1.0 → 6.12.1",
        "<a href=\"/series/nightly\">nightly</a>",
        "id=\"link\">/campaigns/c-2</a>",
    ] {
        assert!(page.body.contains(part), "{part}\n{}", page.body);
    }
    assert!(!page.body.contains("id=\"ack\""), "{}", page.body);
    let refused = post(
        &http,
        &vic,
        &format!("/flags/{}", f.regression),
        &[("csrf", &vic.csrf), ("state", "acknowledged")],
    );
    assert_eq!(refused.status, 403, "{refused:?}");
    assert_eq!(state_of(dir, &f.regression).0, "open");

    // An operator sees the forms; a form without the CSRF token is refused, a false
    // positive without a note is refused with why, an acknowledgement is made in the
    // operator's name.
    let page = get(&http, &otto, &format!("/flags/{}", f.regression));
    for form in ["id=\"ack\"", "id=\"false-positive\"", "id=\"fixed\""] {
        assert!(page.body.contains(form), "{form}\n{}", page.body);
    }
    assert!(!page.body.contains("id=\"reopen\""), "{}", page.body);
    let path = format!("/flags/{}", f.regression);
    let a = post(&http, &otto, &path, &[("state", "acknowledged")]);
    assert_eq!(a.status, 403, "{a:?}");
    let a = post(
        &http,
        &otto,
        &path,
        &[
            ("csrf", &otto.csrf),
            ("state", "false-positive"),
            ("note", " "),
        ],
    );
    assert_eq!(a.status, 400, "{a:?}");
    assert!(a.body.contains("needs a note"), "{}", a.body);
    assert_eq!(state_of(dir, &f.regression).0, "open");
    let a = post(
        &http,
        &otto,
        &path,
        &[
            ("csrf", &otto.csrf),
            ("state", "acknowledged"),
            ("note", "bisecting"),
        ],
    );
    assert_eq!(a.status, 303, "{a:?}");
    assert_eq!(a.header("location"), Some(path.as_str()));
    assert_eq!(
        state_of(dir, &f.regression),
        ("acknowledged".into(), "bisecting".into(), "otto".into())
    );
    let page = get(&http, &vic, &path);
    assert!(
        page.body
            .contains("<td id=\"state\">acknowledged by otto: bisecting</td>"),
        "{}",
        page.body
    );

    // The overview lists the open flags first: one left, the critical one.
    let overview = get(&http, &vic, "/");
    let body = &overview.body;
    assert!(body.contains("<h2>Open flags</h2>"), "{body}");
    assert!(
        body.find("Open flags").unwrap() < body.find("Needing attention").unwrap(),
        "{body}"
    );
    assert!(
        body.contains(
            "1 open flag(s)</a>, <a href=\"/flags?state=acknowledged\">2 acknowledged</a>"
        ),
        "{body}"
    );
    assert_eq!(flag_rows(body, "open-flags"), [f.fail.as_str()]);

    // The API: the same list and flag, changed by an operator's token, not a viewer's.
    let viewer = token(dir, "vic", "viewer");
    let operator = token(dir, "otto", "operator");
    let (status, list) = api(&http, &viewer, "GET", "/api/v1/flags?state=live", "");
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["counts"]["open"], 1, "{list}");
    assert_eq!(list["matched"], 3, "{list}");
    assert_eq!(list["flags"][0]["id"], f.fail.as_str(), "{list}");
    assert_eq!(list["flags"][0]["state"], "open", "{list}");
    let (status, one) = api(
        &http,
        &viewer,
        "GET",
        &format!("/api/v1/flags/{}", f.fail),
        "",
    );
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["kind"], "qualification", "{one}");
    assert_eq!(one["severity"], "critical", "{one}");
    let change = format!("/api/v1/flags/{}", f.fail);
    let (status, e) = api(&http, &viewer, "POST", &change, r#"{"state": "fixed"}"#);
    assert_eq!(status, 403, "{e}");
    let (status, e) = api(&http, &operator, "POST", &change, r#"{"state": "closed"}"#);
    assert_eq!(status, 400, "{e}");
    let (status, e) = api(
        &http,
        &operator,
        "POST",
        "/api/v1/flags/ffffffffffff",
        r#"{"state": "fixed"}"#,
    );
    assert_eq!(status, 404, "{e}");
    let (status, e) = api(&http, &viewer, "GET", "/api/v1/flags?kind=bogus", "");
    assert_eq!(status, 400, "{e}");
    let (status, fixed) = api(
        &http,
        &operator,
        "POST",
        &change,
        r#"{"state": "fixed", "note": "new firmware"}"#,
    );
    assert_eq!(status, 200, "{fixed}");
    assert_eq!(
        (&fixed["state"], &fixed["state_by"], &fixed["note"]),
        (&"fixed".into(), &"otto".into(), &"new firmware".into())
    );

    // No open flag: the overview has no section for them; its twin says none.
    let overview = get(&http, &vic, "/");
    assert!(!overview.body.contains("Open flags"), "{}", overview.body);
    let (status, o) = api(&http, &viewer, "GET", "/api/v1/overview", "");
    assert_eq!(status, 200, "{o}");
    assert_eq!(o["open_flags"]["count"], 0, "{o}");
    assert_eq!(o["open_flags"]["acknowledged"], 2, "{o}");

    // Reopened from its page: open again, a `reopened` event recorded.
    let a = post(
        &http,
        &otto,
        &format!("/flags/{}", f.fail),
        &[
            ("csrf", &otto.csrf),
            ("state", "open"),
            ("note", "it came back"),
        ],
    );
    assert_eq!(a.status, 303, "{a:?}");
    assert_eq!(state_of(dir, &f.fail).0, "open");
    assert_eq!(
        query_i64(
            dir,
            &format!(
                "SELECT COUNT(*) FROM alert_events WHERE flag_id = '{}' AND what = 'reopened'",
                f.fail
            )
        ),
        1
    );
    coordinator.kill9();
}

#[test]
fn an_admin_keeps_alert_rules_tests_them_and_alerts_link_to_a_flags_page() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let receiver = Receiver::start();
    let public = "https://platter.lab.example:9461";
    let (mut coordinator, _port) =
        serve_with(dir, &["--http", "127.0.0.1:0", "--public-url", public]);
    let http = http_addr(dir);
    add_user(dir, "ada", "admin", "ada's long password");
    add_user(dir, "otto", "operator", "otto's long password");
    let ada = sign_in(&http, "ada", "ada's long password");
    let otto = sign_in(&http, "otto", "otto's long password");

    // Admins only, as the other /admin pages; linked from the admin pages' own navigation.
    assert_eq!(get(&http, &otto, "/admin/alerts").status, 403);
    let page = get(&http, &ada, "/admin");
    assert!(
        page.body.contains("<a href=\"/admin/alerts\">Alerts</a>"),
        "{}",
        page.body
    );
    let page = get(&http, &ada, "/admin/alerts");
    assert_eq!(page.status, 200, "{page:?}");
    assert!(page.body.contains("No alert rules"), "{}", page.body);
    let add = |fields: &[(&str, &str)]| {
        let mut all = vec![("csrf", ada.csrf.as_str())];
        all.extend_from_slice(fields);
        post(&http, &ada, "/admin/alerts/rules", &all)
    };
    assert_eq!(
        post(
            &http,
            &otto,
            "/admin/alerts/rules",
            &[
                ("csrf", &otto.csrf),
                ("name", "x"),
                ("channel", "webhook"),
                ("target", &receiver.url)
            ]
        )
        .status,
        403
    );

    // The checks of `platter alerts add`, each refused with why and nothing kept.
    for (fields, why) in [
        (
            vec![
                ("name", "leak"),
                ("channel", "webhook"),
                ("target", receiver.url.as_str()),
                ("secret", "hunter2"),
            ],
            "env:NAME or file:PATH",
        ),
        (
            vec![
                ("name", "mail"),
                ("channel", "email"),
                ("target", "smtp://mail.example:587"),
            ],
            "needs a recipient",
        ),
        (
            vec![
                ("name", "mail"),
                ("channel", "email"),
                ("target", "https://mail.example/"),
                ("to", "ops@example.com"),
            ],
            "smtp://HOST:PORT",
        ),
        (
            vec![
                ("name", "odd"),
                ("channel", "webhook"),
                ("target", "ftp://x/"),
            ],
            "http(s)://",
        ),
        (
            vec![
                ("name", "odd"),
                ("channel", "webhook"),
                ("target", receiver.url.as_str()),
                ("kinds", "regression, bogus"),
            ],
            "is not a kind of flag",
        ),
    ] {
        let a = add(&fields);
        assert_eq!(a.status, 400, "{fields:?}: {a:?}");
        assert!(a.body.contains(why), "{why}\n{}", a.body);
    }
    assert_eq!(query_i64(dir, "SELECT COUNT(*) FROM alert_rules"), 0);

    // A webhook to the receiver, a Slack rule whose URL's path (its token) is never shown.
    let a = add(&[
        ("name", "ops"),
        ("channel", "webhook"),
        ("target", &receiver.url),
        ("min_severity", "info"),
    ]);
    assert_eq!(a.status, 303, "{a:?}");
    let a = add(&[
        ("name", "chat"),
        ("channel", "slack"),
        (
            "target",
            "https://127.0.0.1:9/services/T000/B000/SECRETTOKEN",
        ),
        ("kinds", "qualification health"),
        ("min_severity", "critical"),
    ]);
    assert_eq!(a.status, 303, "{a:?}");
    let page = get(&http, &ada, "/admin/alerts");
    assert!(!page.body.contains("SECRETTOKEN"), "{}", page.body);
    for part in [
        "https://127.0.0.1:9/…",
        "qualification, health; critical or worse",
        "every kind; info or worse",
    ] {
        assert!(page.body.contains(part), "{part}\n{}", page.body);
    }

    // Its test button: the receiver gets the message now, the page says so, the log has it.
    let a = post(
        &http,
        &ada,
        "/admin/alerts/rules/ops/test",
        &[("csrf", &ada.csrf)],
    );
    assert_eq!(a.status, 200, "{a:?}");
    assert!(
        a.body
            .contains("test message sent through ops: the channel took it"),
        "{}",
        a.body
    );
    let got = receiver.wait_for("a test message of alert rule ops", Duration::from_secs(5));
    assert!(got.header("idempotency-key").is_some(), "{got:?}");
    assert!(
        got.body.contains(&format!("{public}/flags")),
        "{}",
        got.body
    );
    let page = get(&http, &ada, "/admin/alerts");
    for part in [
        "a test message of alert rule ops: it reaches you",
        "<td class=\"pass\">delivered ",
    ] {
        assert!(page.body.contains(part), "{part}\n{}", page.body);
    }
    // A test that fails says why, and is logged as failed.
    let a = post(
        &http,
        &ada,
        "/admin/alerts/rules/chat/test",
        &[("csrf", &ada.csrf)],
    );
    assert_eq!(a.status, 200, "{a:?}");
    assert!(
        a.body
            .contains("test message through chat failed: https://127.0.0.1:9"),
        "{}",
        a.body
    );
    assert!(!a.body.contains("SECRETTOKEN"), "{}", a.body);

    // A flag raised while the rule stands is delivered with a link to its page, which
    // exists.
    let f = common::flagged::raise(&dir.join("coordinator.db"));
    let got = receiver.wait_for(&f.fail, Duration::from_secs(10));
    let sent: Value = serde_json::from_str(&got.body).unwrap();
    let url = sent["events"][0]["url"].as_str().unwrap().to_string();
    let path = url.strip_prefix(public).unwrap_or_else(|| panic!("{url}"));
    let page = get(&http, &ada, path);
    assert_eq!(page.status, 200, "{path}: {page:?}");
    assert!(page.body.contains("FAIL nightly"), "{}", page.body);

    // Silences: added for a while, refused without what they silence, ended.
    let a = post(
        &http,
        &ada,
        "/admin/alerts/silences",
        &[("csrf", &ada.csrf), ("name", "all"), ("for", "2h")],
    );
    assert_eq!(a.status, 400, "{a:?}");
    assert!(a.body.contains("names what it silences"), "{}", a.body);
    let a = post(
        &http,
        &ada,
        "/admin/alerts/silences",
        &[
            ("csrf", &ada.csrf),
            ("name", "upgrade"),
            ("host", "h1"),
            ("kind", "health"),
            ("for", "2h"),
            ("note", "firmware"),
        ],
    );
    assert_eq!(a.status, 303, "{a:?}");
    let page = get(&http, &ada, "/admin/alerts");
    assert!(page.body.contains("kind health, host h1"), "{}", page.body);
    let a = post(
        &http,
        &ada,
        "/admin/alerts/silences/upgrade/end",
        &[("csrf", &ada.csrf)],
    );
    assert_eq!(a.status, 303, "{a:?}");
    assert_eq!(query_i64(dir, "SELECT COUNT(*) FROM alert_silences"), 0);

    // Removed: gone from the page, its log kept.
    let a = post(
        &http,
        &ada,
        "/admin/alerts/rules/chat/remove",
        &[("csrf", &ada.csrf)],
    );
    assert_eq!(a.status, 303, "{a:?}");
    assert_eq!(query_i64(dir, "SELECT COUNT(*) FROM alert_rules"), 1);
    let a = post(
        &http,
        &ada,
        "/admin/alerts/rules/chat/test",
        &[("csrf", &ada.csrf)],
    );
    assert_eq!(a.status, 404, "{a:?}");
    coordinator.kill9();
}

/// What the console asks of the store beyond `platter flags` answers alike on SQLite and
/// PostgreSQL: flags counted by state, and how many there are with their last change,
/// which moves when a flag's state is set.
#[test]
fn flags_are_counted_and_their_last_change_seen_on_both_engines() {
    use platter::store::flags::FlagState;
    let dir = tempfile::tempdir().unwrap();
    for store in platter::store::testing::stores(dir.path()) {
        assert_eq!(store.flags_changed().unwrap(), (0, 0));
        assert!(store.flag_counts().unwrap().iter().all(|(_, n)| *n == 0));
        let f = raise_in(&store);
        let counts: Vec<(&str, usize)> = store
            .flag_counts()
            .unwrap()
            .into_iter()
            .map(|(s, n)| (s.as_str(), n))
            .collect();
        assert_eq!(
            counts,
            [
                ("open", 2),
                ("acknowledged", 1),
                ("false-positive", 0),
                ("fixed", 1)
            ]
        );
        let (n, at) = store.flags_changed().unwrap();
        assert_eq!(n, 4);
        std::thread::sleep(Duration::from_millis(5));
        store
            .set_flag_state(&f.fail, FlagState::FalsePositive, "a lab host", "otto")
            .unwrap();
        let (again, later) = store.flags_changed().unwrap();
        assert_eq!(again, 4);
        assert!(later > at, "{later} after {at}");
    }
}
