//! Who is asking: a browser's session (a cookie, with a CSRF token for every change) or a
//! script's API token (`Authorization: Bearer`), each with an account's role. Sessions and
//! tokens live in the store, so every coordinator on a shared store serves them; failed
//! sign-ins are counted per client address and per account name, in this process.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Form, FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::Ctx;
use crate::store::accounts::AccountRole;

/// The session cookie's name.
pub(super) const COOKIE: &str = "platter_session";
/// How long a session lasts after sign-in.
const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Failed sign-ins allowed per client address, and per account name, within `WINDOW`.
const MAX_FAILURES: usize = 5;
const WINDOW: Duration = Duration::from_secs(60);

/// A signed-in caller.
#[derive(Debug, Clone)]
pub(super) struct Access {
    pub account: String,
    pub role: AccountRole,
    /// The session's CSRF token; "" for an API token, which needs none.
    pub csrf: String,
    /// The session's own token (the cookie), for signing out.
    session: Option<String>,
    /// The API token's secret, to ask again whether it still holds.
    secret: Option<String>,
    /// Asked under /api/: refusals are JSON.
    api: bool,
}

impl Access {
    /// Refuses (403) an account whose role does not allow `needed`.
    pub(super) fn require(&self, needed: AccountRole) -> Result<(), Box<Response>> {
        if self.role.allows(needed) {
            return Ok(());
        }
        Err(self.refuse(
            StatusCode::FORBIDDEN,
            &format!(
                "{} is {} {}; this needs {} account",
                self.account,
                if self.role == AccountRole::Admin {
                    "an"
                } else {
                    "a"
                },
                self.role.as_str(),
                needed.as_str()
            ),
        ))
    }

    /// Allows a change (a POST): the role must allow `needed`, and a browser's session
    /// must show its CSRF token (`csrf`, from the form or the `X-CSRF-Token` header). An
    /// API token needs none: browsers never send one on their own.
    pub(super) fn change(
        &self,
        needed: AccountRole,
        csrf: Option<&str>,
    ) -> Result<(), Box<Response>> {
        self.require(needed)?;
        if self.session.is_some() && !csrf.is_some_and(|c| same(c, &self.csrf)) {
            return Err(self.refuse(
                StatusCode::FORBIDDEN,
                "this change did not carry the session's CSRF token: reload the page and try again",
            ));
        }
        Ok(())
    }

    /// A page in the console's frame, for this account.
    pub(super) fn page(&self, title: &str, body: &str) -> Html<String> {
        super::layout::page(&self.account, self.role, &self.csrf, title, None, body)
    }

    /// A live page: its `<main>` follows the fleet; `seen` is the hash of the `<main>`
    /// this page shows, so its stream sends it again only once it changed.
    pub(super) fn live_page(&self, title: &str, body: &str, seen: u64) -> Html<String> {
        super::layout::page(
            &self.account,
            self.role,
            &self.csrf,
            title,
            Some(seen),
            body,
        )
    }

    /// A refusal (boxed: a response is large, and the happy path should not carry it).
    fn refuse(&self, code: StatusCode, why: &str) -> Box<Response> {
        #[derive(askama::Template)]
        #[template(source = r#"<p class="fail" id="refused">{{ why }}</p>"#, ext = "html")]
        struct Refused<'a> {
            why: &'a str,
        }
        let body = askama::Template::render(&Refused { why }).expect("a refusal renders");
        Box::new(if self.api {
            (code, axum::Json(serde_json::json!({ "error": why }))).into_response()
        } else {
            (code, self.page("Refused", &body)).into_response()
        })
    }
}

/// Equal strings, compared in time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// A cookie's value in a request's `Cookie` headers. A few lines of splitting: the one
/// cookie the console sets needs no cookie crate.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_string())
}

/// What a caller showed: an API token's secret or a session's token (the cookie).
#[derive(Debug, Clone)]
enum Credential {
    Token(String),
    Session(String),
}

impl Access {
    /// Who `credential` is now, per the store; `None` when it is unknown, revoked, ended
    /// or expired.
    async fn of(
        store: &crate::store::Store,
        credential: Credential,
        api: bool,
    ) -> Result<Option<Access>, Response> {
        let store = store.clone();
        let found = tokio::task::spawn_blocking(move || match credential {
            Credential::Token(secret) => store.token(&secret).map(|t| {
                t.map(|t| Access {
                    account: t.account,
                    role: t.role,
                    csrf: String::new(),
                    session: None,
                    secret: Some(secret),
                    api,
                })
            }),
            Credential::Session(token) => store.session(&token).map(|s| {
                s.map(|s| Access {
                    account: s.account,
                    role: s.role,
                    csrf: s.csrf,
                    session: Some(token),
                    secret: None,
                    api,
                })
            }),
        })
        .await;
        match found {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(e)) => Err(store_unreadable(&e)),
            Err(_) => Err(StatusCode::INTERNAL_SERVER_ERROR.into_response()),
        }
    }

    /// This caller as the store knows them now (an open page's stream asks again before
    /// each update): `Ok(None)` once the session ended or the token was revoked; the
    /// role as it is now.
    pub(super) async fn again(&self, ctx: &Ctx) -> Result<Option<Access>, Response> {
        let credential = match (&self.session, &self.secret) {
            (Some(token), _) => Credential::Session(token.clone()),
            (None, Some(secret)) => Credential::Token(secret.clone()),
            (None, None) => return Ok(None),
        };
        Access::of(&ctx.store, credential, self.api).await
    }
}

impl FromRequestParts<Ctx> for Access {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, ctx: &Ctx) -> Result<Access, Response> {
        let api = parts.uri.path().starts_with("/api/");
        let (credential, unknown) = if let Some(secret) = bearer(&parts.headers) {
            (
                Credential::Token(secret),
                "this API token is unknown or revoked",
            )
        } else if let Some(token) = cookie(&parts.headers, COOKIE) {
            (
                Credential::Session(token),
                "the session ended or expired: sign in again",
            )
        } else {
            return Err(unauthorized(
                api,
                parts,
                "sign in first (or send an API token as Authorization: Bearer)",
            ));
        };
        Access::of(&ctx.store, credential, api)
            .await?
            .ok_or_else(|| unauthorized(api, parts, unknown))
    }
}

fn store_unreadable(e: &crate::store::StoreError) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("the store cannot be read to check who is asking: {e}\n"),
    )
        .into_response()
}

/// An API call answers 401; a page sends the browser to sign in, and back here after.
fn unauthorized(api: bool, parts: &Parts, why: &str) -> Response {
    if api {
        let mut r = (
            StatusCode::UNAUTHORIZED,
            axum::Json(serde_json::json!({ "error": why })),
        )
            .into_response();
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return r;
    }
    let next = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    Redirect::to(&format!("/login?next={}", super::layout::url_part(next))).into_response()
}

/// A form whose only field is the CSRF token.
#[derive(Debug, Deserialize)]
pub(super) struct CsrfForm {
    #[serde(default)]
    pub csrf: String,
}

/// Failed sign-ins by client address and by account name, each within `WINDOW`.
#[derive(Default)]
pub(super) struct Failures(Mutex<HashMap<String, VecDeque<Instant>>>);

impl Failures {
    /// How long `keys` must wait before trying again, if any of them failed too often.
    fn wait(&self, keys: &[String]) -> Option<Duration> {
        let mut m = self.0.lock().expect("failures");
        let now = Instant::now();
        let mut wait = None;
        for k in keys {
            if let Some(q) = m.get_mut(k) {
                while q.front().is_some_and(|t| now.duration_since(*t) >= WINDOW) {
                    q.pop_front();
                }
                if q.len() >= MAX_FAILURES {
                    let left = WINDOW - now.duration_since(q[0]);
                    wait = Some(wait.map_or(left, |w: Duration| w.max(left)));
                }
            }
        }
        m.retain(|_, q| !q.is_empty());
        wait
    }

    fn failed(&self, keys: &[String]) {
        let mut m = self.0.lock().expect("failures");
        for k in keys {
            m.entry(k.clone()).or_default().push_back(Instant::now());
        }
    }
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct LoginQuery {
    #[serde(default)]
    next: String,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct LoginForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    next: String,
}

/// Where to go after signing in: a path on this server, never another site.
fn local(next: &str) -> &str {
    if next.starts_with('/') && !next.starts_with("//") && !next.starts_with("/\\") {
        next
    } else {
        "/"
    }
}

/// Whether the store has no account yet (a newcomer's first visit), false when unsure.
async fn no_accounts(ctx: &Ctx) -> bool {
    let store = ctx.store.clone();
    let accounts = tokio::task::spawn_blocking(move || store.accounts()).await;
    matches!(accounts, Ok(Ok(a)) if a.is_empty())
}

/// The sign-in page (`templates/auth/login.html`).
#[derive(askama::Template)]
#[template(path = "auth/login.html")]
struct LoginView<'a> {
    /// Whether to say how to make the first account.
    no_accounts: bool,
    /// Where to go after signing in (`local`).
    next: &'a str,
    message: Option<LoginMessage>,
}

/// Why the last sign-in failed.
enum LoginMessage {
    /// Too many failures: seconds to wait.
    TooMany(u64),
    Wrong,
}

fn login_page(no_accounts: bool, next: &str, message: Option<LoginMessage>) -> Html<String> {
    let view = LoginView {
        no_accounts,
        next: local(next),
        message,
    };
    Html(askama::Template::render(&view).expect("the sign-in page renders"))
}

pub(super) async fn login_form(
    State(ctx): State<Ctx>,
    Query(q): Query<LoginQuery>,
) -> Html<String> {
    login_page(no_accounts(&ctx).await, &q.next, None)
}

pub(super) async fn login(
    State(ctx): State<Ctx>,
    ConnectInfo(super::ClientAddr(peer)): ConnectInfo<super::ClientAddr>,
    Form(form): Form<LoginForm>,
) -> Response {
    let keys = vec![
        format!("address {}", peer.ip()),
        format!("account {}", form.name),
    ];
    if let Some(wait) = ctx.failures.wait(&keys) {
        tracing::warn!(peer = %peer, account = %form.name, "sign-in refused: too many failures");
        let message = LoginMessage::TooMany(wait.as_secs().max(1));
        let mut r = (
            StatusCode::TOO_MANY_REQUESTS,
            login_page(false, &form.next, Some(message)),
        )
            .into_response();
        if let Ok(v) = HeaderValue::from_str(&wait.as_secs().max(1).to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return r;
    }
    let store = ctx.store.clone();
    let (name, password) = (form.name.clone(), form.password.clone());
    let opened =
        tokio::task::spawn_blocking(move || match store.check_password(&name, &password)? {
            Some(account) => store.open_session(&account.name, SESSION_TTL).map(Some),
            None => Ok(None),
        })
        .await;
    match opened {
        Ok(Ok(Some(new))) => {
            tracing::info!(peer = %peer, account = %new.session.account, "signed in to the console");
            let mut r = Redirect::to(local(&form.next)).into_response();
            let cookie = format!(
                "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}",
                new.token,
                SESSION_TTL.as_secs(),
                if ctx.https { "; Secure" } else { "" }
            );
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Ok(Ok(None)) => {
            ctx.failures.failed(&keys);
            tracing::warn!(peer = %peer, account = %form.name, "sign-in failed: wrong name or password");
            (
                StatusCode::UNAUTHORIZED,
                login_page(
                    no_accounts(&ctx).await,
                    &form.next,
                    Some(LoginMessage::Wrong),
                ),
            )
                .into_response()
        }
        Ok(Err(e)) => store_unreadable(&e),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

pub(super) async fn logout(
    State(ctx): State<Ctx>,
    access: Access,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Err(refused) = access.change(AccountRole::Viewer, Some(&form.csrf)) {
        return *refused;
    }
    if let Some(token) = access.session.clone() {
        let store = ctx.store.clone();
        let ended = tokio::task::spawn_blocking(move || store.end_session(&token)).await;
        if let Ok(Err(e)) = ended {
            return store_unreadable(&e);
        }
    }
    tracing::info!(account = %access.account, "signed out of the console");
    let mut r = Redirect::to("/login").into_response();
    let gone = format!(
        "{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{}",
        if ctx.https { "; Secure" } else { "" }
    );
    if let Ok(v) = HeaderValue::from_str(&gone) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_lock_out_after_the_limit_and_only_those_keys() {
        let f = Failures::default();
        let mallory = vec!["address 10.0.0.9".to_string(), "account alice".to_string()];
        for _ in 0..MAX_FAILURES - 1 {
            f.failed(&mallory);
        }
        assert_eq!(f.wait(&mallory), None);
        f.failed(&mallory);
        let wait = f.wait(&mallory).expect("locked out");
        assert!(wait <= WINDOW && wait > WINDOW - Duration::from_secs(5));
        // Another account from another address is not held up by alice's failures.
        assert_eq!(
            f.wait(&["address 10.0.0.1".into(), "account bob".into()]),
            None
        );
        // alice from another address is: her name is being guessed.
        assert!(f
            .wait(&["address 10.0.0.1".into(), "account alice".into()])
            .is_some());
    }

    #[test]
    fn only_local_paths_are_followed_after_sign_in() {
        assert_eq!(local("/campaigns/x?y=1"), "/campaigns/x?y=1");
        for outside in ["//evil.example/", "https://evil.example/", "/\\evil", ""] {
            assert_eq!(local(outside), "/", "{outside}");
        }
    }

    #[test]
    fn cookies_and_bearer_tokens_are_read_from_their_headers() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; platter_session=abc; b=2"),
        );
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer plt_x"),
        );
        assert_eq!(cookie(&h, COOKIE).as_deref(), Some("abc"));
        assert_eq!(cookie(&h, "c"), None);
        assert_eq!(bearer(&h).as_deref(), Some("plt_x"));
        assert!(same("abc", "abc") && !same("abc", "abd") && !same("abc", "ab"));
    }
}
