//! The console's admin pages and their JSON twins over HTTP, as a browser's forms and a
//! script use them: an admin adds, changes and removes accounts and makes and revokes API
//! tokens; nobody else may, nor may a form without the session's CSRF token; the last
//! admin stays; every string shown is text.

mod common;

use std::path::Path;

use common::web::*;
use common::*;

const ROOT_PASSWORD: &str = "root's long password";
const XSS_LABEL: &str = "<script>alert(1)</script>";

/// A form POST in `session`'s name; `csrf` is sent as given ("" for none).
fn post(http: &str, session: &Session, path: &str, fields: &[(&str, &str)]) -> Answer {
    call(
        http,
        "POST",
        path,
        &[
            ("Cookie", &session.cookie),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        &form(fields),
    )
}

fn get(http: &str, session: &Session, path: &str) -> Answer {
    call(http, "GET", path, &[("Cookie", &session.cookie)], "")
}

fn bearer_get(http: &str, secret: &str, path: &str) -> Answer {
    let bearer = format!("Bearer {secret}");
    call(http, "GET", path, &[("Authorization", &bearer)], "")
}

/// The markup of the element with id `id` in `html`, up to the first closing tag: the
/// text of a message.
fn by_id<'a>(html: &'a str, id: &str) -> &'a str {
    let from = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in {html}"));
    let rest = &html[from..];
    &rest[..rest.find("</").unwrap_or(rest.len())]
}

fn role_of(dir: &Path, name: &str) -> String {
    db(dir)
        .query_row("SELECT role FROM accounts WHERE name = ?1", [name], |r| {
            r.get(0)
        })
        .unwrap_or_default()
}

/// Every change's route, with fields that would make it work for an admin.
fn changes(csrf: &str) -> Vec<(&'static str, Vec<(&'static str, String)>)> {
    let c = || ("csrf", csrf.to_string());
    let pw = |k| (k, "another long password".to_string());
    vec![
        (
            "/admin/accounts",
            vec![
                c(),
                ("name", "mallory".into()),
                ("role", "admin".into()),
                pw("password"),
                pw("again"),
            ],
        ),
        (
            "/admin/accounts/root/role",
            vec![c(), ("role", "viewer".into())],
        ),
        (
            "/admin/accounts/root/password",
            vec![c(), pw("password"), pw("again")],
        ),
        ("/admin/accounts/vic/remove", vec![c()]),
        (
            "/admin/tokens",
            vec![
                c(),
                ("account", "root".into()),
                ("role", "admin".into()),
                ("label", "stolen".into()),
            ],
        ),
        ("/admin/tokens/0123/revoke", vec![c()]),
    ]
}

fn send(http: &str, session: &Session, path: &str, fields: &[(&'static str, String)]) -> Answer {
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    post(http, session, path, &fields)
}

#[test]
fn admins_manage_accounts_and_tokens_and_nobody_else_does() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (mut coordinator, _port) = serve_with(dir, &["--http", "127.0.0.1:0"]);
    let http = http_addr(dir);
    add_user(dir, "root", "admin", ROOT_PASSWORD);
    add_user(dir, "vic", "viewer", "vic's long password");
    add_user(dir, "olga", "operator", "olga's long password");
    let root = sign_in(&http, "root", ROOT_PASSWORD);
    let vic = sign_in(&http, "vic", "vic's long password");
    let olga = sign_in(&http, "olga", "olga's long password");

    // Only an admin's pages link to /admin, and only an admin gets it.
    let page = get(&http, &root, "/admin");
    assert_eq!(page.status, 200, "{page:?}");
    assert!(page.body.contains("<a href=\"/admin\">Admin</a>"));
    assert!(page.body.contains("<table id=\"accounts\">"));
    assert!(page.body.contains("<td>vic</td><td>viewer</td>"));
    for other in [&vic, &olga] {
        assert!(!get(&http, other, "/").body.contains("href=\"/admin\""));
        let refused = get(&http, other, "/admin");
        assert_eq!(refused.status, 403, "{refused:?}");
        assert!(
            by_id(&refused.body, "refused").contains("this needs admin account"),
            "{}",
            refused.body
        );
    }

    // Neither a viewer nor an operator may change anything, even with their own valid
    // session and CSRF token; nor may an admin's form without the session's CSRF token.
    for who in [&vic, &olga] {
        for (path, fields) in changes(&who.csrf) {
            let a = send(&http, who, path, &fields);
            assert_eq!(a.status, 403, "{path} {fields:?}: {a:?}");
        }
    }
    for csrf in ["", "forged-csrf-token"] {
        for (path, fields) in changes(csrf) {
            let a = send(&http, &root, path, &fields);
            assert_eq!(a.status, 403, "{path} {fields:?}: {a:?}");
            assert!(by_id(&a.body, "refused").contains("CSRF token"), "{a:?}");
        }
    }
    for token_path in ["/api/v1/accounts", "/api/v1/tokens"] {
        assert_eq!(get(&http, &olga, token_path).status, 403);
    }
    // Nothing changed: the same three accounts, root still an admin, no token.
    assert_eq!(query_i64(dir, "SELECT COUNT(*) FROM accounts"), 3);
    assert_eq!(role_of(dir, "root"), "admin");
    assert_eq!(query_i64(dir, "SELECT COUNT(*) FROM api_tokens"), 0);
    assert_eq!(get(&http, &vic, "/").status, 200, "vic's session goes on");

    // The admin adds an operator, who can then sign in; mistakes are refused in words.
    let add = |name: &str, password: &str, again: &str| {
        post(
            &http,
            &root,
            "/admin/accounts",
            &[
                ("csrf", &root.csrf),
                ("name", name),
                ("role", "operator"),
                ("password", password),
                ("again", again),
            ],
        )
    };
    let differ = add("carol", "carol's long password", "carol's other password");
    assert_eq!(differ.status, 400);
    assert!(by_id(&differ.body, "message").contains("the two passwords differ"));
    let short = add("carol", "short", "short");
    assert_eq!(short.status, 400);
    assert!(by_id(&short.body, "message").contains("at least 12 characters"));
    // The store's words quote the name; on the page they are text.
    let hostile = add("<b>x</b>", "carol's long password", "carol's long password");
    assert_eq!(hostile.status, 400);
    assert!(
        hostile
            .body
            .contains("&#34;&#60;b&#62;x&#60;/b&#62;&#34; cannot name an account"),
        "{}",
        hostile.body
    );
    assert!(!hostile.body.contains("<b>x</b>"));
    let added = add("carol", "carol's long password", "carol's long password");
    assert_eq!(added.status, 303, "{added:?}");
    assert_eq!(added.header("location"), Some("/admin"));
    assert_eq!(role_of(dir, "carol"), "operator");
    let carol = sign_in(&http, "carol", "carol's long password");
    assert!(get(&http, &carol, "/").body.contains("carol (operator)"));
    assert!(get(&http, &root, "/admin")
        .body
        .contains("<td>carol</td><td>operator</td>"));

    // A role change reaches carol's session at once.
    let a = post(
        &http,
        &root,
        "/admin/accounts/carol/role",
        &[("csrf", &root.csrf), ("role", "viewer")],
    );
    assert_eq!(a.status, 303, "{a:?}");
    assert!(get(&http, &carol, "/").body.contains("carol (viewer)"));
    let bad = post(
        &http,
        &root,
        "/admin/accounts/carol/role",
        &[("csrf", &root.csrf), ("role", "root")],
    );
    assert_eq!(bad.status, 400);
    assert_eq!(role_of(dir, "carol"), "viewer");

    // A reset password signs carol out; the new one signs her in, the old one no more.
    let a = post(
        &http,
        &root,
        "/admin/accounts/carol/password",
        &[
            ("csrf", &root.csrf),
            ("password", "carol's new password"),
            ("again", "carol's new password"),
        ],
    );
    assert_eq!(a.status, 303, "{a:?}");
    assert_eq!(get(&http, &carol, "/").status, 303, "signed out");
    let old = call(
        &http,
        "POST",
        "/login",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &form(&[("name", "carol"), ("password", "carol's long password")]),
    );
    assert_eq!(old.status, 401);
    sign_in(&http, "carol", "carol's new password");

    // A token made on the page: its secret shown once, its hostile label as text; it
    // works as a Bearer token until it is revoked.
    let made = post(
        &http,
        &root,
        "/admin/tokens",
        &[
            ("csrf", &root.csrf),
            ("account", "olga"),
            ("role", "operator"),
            ("label", XSS_LABEL),
        ],
    );
    assert_eq!(made.status, 200, "{made:?}");
    assert!(by_id(&made.body, "once").contains("will not be shown again"));
    let secret = by_id(&made.body, "secret")
        .split('>')
        .nth(1)
        .unwrap()
        .to_string();
    assert!(secret.starts_with("plt_") && secret.len() == 47, "{secret}");
    for body in [&made.body, &get(&http, &root, "/admin").body] {
        assert!(
            body.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
            "{body}"
        );
        assert!(!body.contains(XSS_LABEL), "{body}");
    }
    let admin = get(&http, &root, "/admin").body;
    assert!(!admin.contains(&secret), "the secret is not shown again");
    let id: String = db(dir)
        .query_row("SELECT id FROM api_tokens", [], |r| r.get(0))
        .unwrap();
    assert!(admin.contains(&format!("<td>{id}</td><td>olga</td><td>operator</td>")));
    assert_eq!(bearer_get(&http, &secret, "/api/v1/hosts").status, 200);
    // An operator's token is no admin's.
    assert_eq!(bearer_get(&http, &secret, "/api/v1/tokens").status, 403);
    // Above its account's role: refused.
    let above = post(
        &http,
        &root,
        "/admin/tokens",
        &[
            ("csrf", &root.csrf),
            ("account", "vic"),
            ("role", "operator"),
            ("label", "ci"),
        ],
    );
    assert_eq!(above.status, 400);
    assert!(by_id(&above.body, "message").contains("cannot exceed its account"));
    let revoked = post(
        &http,
        &root,
        &format!("/admin/tokens/{id}/revoke"),
        &[("csrf", &root.csrf)],
    );
    assert_eq!(revoked.status, 303, "{revoked:?}");
    assert_eq!(bearer_get(&http, &secret, "/api/v1/hosts").status, 401);
    assert_eq!(query_i64(dir, "SELECT COUNT(*) FROM api_tokens"), 0);

    // The last admin is neither removed nor demoted, from the page or the CLI, and the
    // page says why.
    for (path, fields) in [
        (
            "/admin/accounts/root/remove",
            vec![("csrf", root.csrf.as_str())],
        ),
        (
            "/admin/accounts/root/role",
            vec![("csrf", root.csrf.as_str()), ("role", "operator")],
        ),
    ] {
        let a = post(&http, &root, path, &fields);
        assert_eq!(a.status, 400, "{a:?}");
        let why = by_id(&a.body, "message");
        assert!(
            why.contains("root is the last admin") && why.contains("nobody to manage accounts"),
            "{why}"
        );
    }
    let db_path = dir.join("coordinator.db");
    for args in [
        vec!["users", "remove", "root"],
        vec!["users", "role", "root", "viewer"],
    ] {
        let out = platter()
            .args(&args)
            .arg("--db")
            .arg(&db_path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("root is the last admin"));
    }
    assert_eq!(role_of(dir, "root"), "admin");
    // With a second admin, the first may go.
    let a = post(
        &http,
        &root,
        "/admin/accounts/olga/role",
        &[("csrf", &root.csrf), ("role", "admin")],
    );
    assert_eq!(a.status, 303, "{a:?}");
    let a = post(
        &http,
        &root,
        "/admin/accounts/carol/remove",
        &[("csrf", &root.csrf)],
    );
    assert_eq!(a.status, 303, "{a:?}");
    assert_eq!(role_of(dir, "carol"), "");
    let a = post(
        &http,
        &root,
        "/admin/accounts/root/remove",
        &[("csrf", &root.csrf)],
    );
    assert_eq!(a.status, 303, "{a:?}");
    assert_eq!(get(&http, &root, "/admin").status, 303, "root is gone");

    // Every change is in the log with the account that made it.
    let log = std::fs::read_to_string(dir.join("coordinator.log")).unwrap();
    for said in [
        "account added from the console",
        "account's role changed from the console",
        "account's password reset from the console",
        "API token made from the console",
        "API token revoked from the console",
        "account removed from the console",
    ] {
        let line = log
            .lines()
            .find(|l| l.contains(said))
            .unwrap_or_else(|| panic!("no {said:?} in\n{log}"));
        assert!(line.contains("by=root"), "{line}");
    }
    assert!(!log.contains("carol's new password") && !log.contains(&secret));
    coordinator.kill9();
}

#[test]
fn the_json_twins_list_make_and_revoke_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (mut coordinator, _port) = serve_with(dir, &["--http", "127.0.0.1:0"]);
    let http = http_addr(dir);
    add_user(dir, "root", "admin", ROOT_PASSWORD);
    add_user(dir, "vic", "viewer", "vic's long password");
    let out = run_ok(platter().args([
        "tokens",
        "add",
        "--user",
        "root",
        "--label",
        "admin script",
        "--db",
        dir.join("coordinator.db").to_str().unwrap(),
    ]));
    let admin = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let bearer = format!("Bearer {admin}");
    let json = |a: &Answer| -> serde_json::Value {
        serde_json::from_str(&a.body).unwrap_or_else(|e| panic!("{e}: {a:?}"))
    };

    let accounts = bearer_get(&http, &admin, "/api/v1/accounts");
    assert_eq!(accounts.status, 200, "{accounts:?}");
    let names: Vec<(String, String)> = json(&accounts)["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            assert!(a["created_unix_ms"].as_i64().unwrap() > 0, "{a}");
            assert!(a.get("password_hash").is_none(), "{a}");
            (
                a["name"].as_str().unwrap().into(),
                a["role"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("root".to_string(), "admin".to_string()),
            ("vic".into(), "viewer".into())
        ]
    );

    let make = |body: &str, auth: &str| {
        call(
            &http,
            "POST",
            "/api/v1/tokens",
            &[
                ("Authorization", auth),
                ("Content-Type", "application/json"),
            ],
            body,
        )
    };
    let made = make(
        &serde_json::json!({ "account": "vic", "role": "viewer", "label": XSS_LABEL }).to_string(),
        &bearer,
    );
    assert_eq!(made.status, 201, "{made:?}");
    let made = json(&made);
    let (id, secret) = (
        made["id"].as_str().unwrap().to_string(),
        made["secret"].as_str().unwrap().to_string(),
    );
    assert_eq!(bearer_get(&http, &secret, "/api/v1/overview").status, 200);
    // A viewer's token may not make tokens, nor list them.
    let vics = format!("Bearer {secret}");
    let body = r#"{"account": "vic", "role": "viewer", "label": "more"}"#;
    assert_eq!(make(body, &vics).status, 403);
    assert_eq!(bearer_get(&http, &secret, "/api/v1/accounts").status, 403);
    // Mistakes are 400 with the reason; nothing is made.
    for (body, says) in [
        (
            r#"{"account": "vic", "role": "admin", "label": "x"}"#,
            "cannot exceed",
        ),
        (
            r#"{"account": "nobody", "role": "viewer", "label": "x"}"#,
            "no account named",
        ),
        (
            r#"{"account": "vic", "role": "root", "label": "x"}"#,
            "not a role",
        ),
        (
            r#"{"account": "vic", "label": "x"}"#,
            "missing field `role`",
        ),
        ("not json", "as JSON"),
    ] {
        let a = make(body, &bearer);
        assert_eq!(a.status, 400, "{body}: {a:?}");
        assert!(json(&a)["error"].as_str().unwrap().contains(says), "{a:?}");
    }

    // Listed without their secrets; the label as it was given (JSON is not HTML).
    let tokens = bearer_get(&http, &admin, "/api/v1/tokens");
    assert_eq!(tokens.status, 200);
    assert!(!tokens.body.contains(&secret) && !tokens.body.contains(&admin));
    let listed = json(&tokens)["tokens"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 2, "{listed:?}");
    let vic_token = listed.iter().find(|t| t["id"] == id.as_str()).unwrap();
    assert_eq!(vic_token["account"], "vic");
    assert_eq!(vic_token["label"], XSS_LABEL);
    assert!(
        vic_token["last_used_unix_ms"].as_i64().is_some(),
        "{vic_token}"
    );

    let revoke = |id: &str| {
        call(
            &http,
            "POST",
            &format!("/api/v1/tokens/{id}/revoke"),
            &[("Authorization", &bearer)],
            "",
        )
    };
    assert_eq!(revoke(&id).status, 204);
    assert_eq!(bearer_get(&http, &secret, "/api/v1/overview").status, 401);
    assert_eq!(revoke(&id).status, 404);

    // A session's change through the API needs its CSRF token in X-CSRF-Token.
    let root = sign_in(&http, "root", ROOT_PASSWORD);
    let with = |csrf: &str| {
        call(
            &http,
            "POST",
            "/api/v1/tokens",
            &[
                ("Cookie", &root.cookie),
                ("X-CSRF-Token", csrf),
                ("Content-Type", "application/json"),
            ],
            body,
        )
    };
    assert_eq!(with("").status, 403);
    assert_eq!(with(&root.csrf).status, 201);
    coordinator.kill9();
}
