//! The console's admin pages (`/admin`, role admin) and their JSON twins
//! (`/api/v1/accounts`, `/api/v1/tokens`): accounts and API tokens, changed in the store
//! exactly as `platter users` and `platter tokens` change them, so the same rules hold
//! (the password rule, a token never above its account's role, the last admin kept).
//! Every change is logged with the account that made it; never a password or a secret.
//! A token's secret is shown once, on the answer that made it, and never again.

use std::fmt::Write as _;

use axum::body::Bytes;
use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::api::csrf_header;
use super::auth::{Access, CsrfForm};
use super::layout::url_part;
use super::Ctx;
use crate::report::esc;
use crate::store::accounts::{AccountRole, NewToken, MAX_LABEL_CHARS, MIN_PASSWORD_CHARS};
use crate::store::{Store, StoreError};
use crate::views::clock;

const ROLES: [AccountRole; 3] = [
    AccountRole::Viewer,
    AccountRole::Operator,
    AccountRole::Admin,
];

/// Why a change was not made: words for the admin, and the status they answer with.
struct Failure {
    status: StatusCode,
    words: String,
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        let status = match e {
            // The admin asked for what cannot be: the store says why.
            StoreError::Account(_) => StatusCode::BAD_REQUEST,
            _ => StatusCode::SERVICE_UNAVAILABLE,
        };
        Failure {
            status,
            words: e.to_string(),
        }
    }
}

impl Failure {
    fn bad(words: impl Into<String>) -> Failure {
        Failure {
            status: StatusCode::BAD_REQUEST,
            words: words.into(),
        }
    }

    fn json(&self) -> Response {
        (self.status, Json(json!({ "error": self.words }))).into_response()
    }
}

/// `f` on the store off the async workers: a password's hash takes tens of milliseconds,
/// and every store call blocks.
async fn on_store<T: Send + 'static>(
    ctx: &Ctx,
    f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, Failure> {
    let store = ctx.store.clone();
    match tokio::task::spawn_blocking(move || f(&store)).await {
        Ok(r) => r.map_err(Failure::from),
        Err(e) => Err(Failure {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            words: format!("the store call did not finish: {e}"),
        }),
    }
}

fn role(s: &str) -> Result<AccountRole, Failure> {
    AccountRole::parse(s).ok_or_else(|| {
        Failure::bad(format!(
            "{s:?} is not a role: a role is viewer, operator or admin"
        ))
    })
}

/// The new password, when it was typed the same twice.
fn typed_twice(password: String, again: &str) -> Result<String, Failure> {
    if password != again {
        return Err(Failure::bad(
            "the two passwords differ: type the same one twice",
        ));
    }
    Ok(password)
}

fn role_options(selected: AccountRole) -> String {
    ROLES
        .iter()
        .map(|r| {
            format!(
                "<option value=\"{0}\"{1}>{0}</option>",
                r.as_str(),
                if *r == selected { " selected" } else { "" }
            )
        })
        .collect()
}

/// The hidden field every form carries: the session's CSRF token.
fn csrf_field(access: &Access) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        esc(&access.csrf)
    )
}

/// The admin page with `notice` (HTML, a refusal's words) above the lists, answered
/// with `status`.
async fn admin_page(ctx: &Ctx, access: &Access, status: StatusCode, notice: &str) -> Response {
    let listed = on_store(ctx, |s| Ok((s.accounts()?, s.tokens()?))).await;
    let (accounts, tokens) = match listed {
        Ok(l) => l,
        Err(f) => {
            let body = format!("<p class=\"fail\" id=\"message\">{}</p>", esc(&f.words));
            return (f.status, access.page("Admin", &body)).into_response();
        }
    };
    let csrf = csrf_field(access);
    let password_inputs = format!(
        "<input type=\"password\" name=\"password\" autocomplete=\"new-password\" minlength=\"{MIN_PASSWORD_CHARS}\" required placeholder=\"password\"> \
         <input type=\"password\" name=\"again\" autocomplete=\"new-password\" minlength=\"{MIN_PASSWORD_CHARS}\" required placeholder=\"again\">"
    );
    let mut b = notice.to_string();
    b.push_str("<h2>Accounts</h2><table id=\"accounts\"><tr><th>name</th><th>role</th><th>created</th><th>change role</th><th>reset password</th><th></th></tr>");
    for a in &accounts {
        let path = esc(&url_part(&a.name));
        let _ = write!(
            b,
            "<tr><td>{name}</td><td>{role}</td><td>{created}</td>\
             <td><form method=\"post\" action=\"/admin/accounts/{path}/role\">{csrf}<select name=\"role\">{options}</select> <button type=\"submit\">Change</button></form></td>\
             <td><form method=\"post\" action=\"/admin/accounts/{path}/password\">{csrf}{password_inputs} <button type=\"submit\">Reset</button></form></td>\
             <td><form method=\"post\" action=\"/admin/accounts/{path}/remove\">{csrf}<button type=\"submit\">Remove</button></form></td></tr>",
            name = esc(&a.name),
            role = a.role.as_str(),
            created = clock(a.created_unix_ms),
            options = role_options(a.role),
        );
    }
    let _ = write!(
        b,
        "</table><h3>Add an account</h3><form method=\"post\" action=\"/admin/accounts\" id=\"add-account\">{csrf}\
         <label>Name <input name=\"name\" autocomplete=\"off\" required></label> \
         <label>Role <select name=\"role\">{}</select></label> {password_inputs} \
         <button type=\"submit\">Add</button></form>\
         <p class=\"muted\">A password has at least {MIN_PASSWORD_CHARS} characters. A new password signs the account's browsers out; its API tokens stay.</p>",
        role_options(AccountRole::Viewer)
    );
    b.push_str("<h2>API tokens</h2><table id=\"tokens\"><tr><th>id</th><th>account</th><th>role</th><th>label</th><th>created</th><th>last used</th><th></th></tr>");
    for t in &tokens {
        let _ = write!(
            b,
            "<tr><td>{id}</td><td>{account}</td><td>{role}</td><td>{label}</td><td>{created}</td><td>{used}</td>\
             <td><form method=\"post\" action=\"/admin/tokens/{path}/revoke\">{csrf}<button type=\"submit\">Revoke</button></form></td></tr>",
            id = esc(&t.id),
            account = esc(&t.account),
            role = t.role.as_str(),
            label = esc(&t.label),
            created = clock(t.created_unix_ms),
            used = t.last_used_unix_ms.map(clock).unwrap_or_else(|| "never".into()),
            path = esc(&url_part(&t.id)),
        );
    }
    let names: String = accounts
        .iter()
        .map(|a| format!("<option value=\"{0}\">{0}</option>", esc(&a.name)))
        .collect();
    let _ = write!(
        b,
        "</table><h3>Make a token</h3><form method=\"post\" action=\"/admin/tokens\" id=\"add-token\">{csrf}\
         <label>Account <select name=\"account\">{names}</select></label> \
         <label>Role <select name=\"role\">{}</select></label> \
         <label>Label <input name=\"label\" maxlength=\"{MAX_LABEL_CHARS}\" required placeholder=\"what uses it\"></label> \
         <button type=\"submit\">Make</button></form>\
         <p class=\"muted\">A token does at most what its account may, now and after the account's role changes.</p>",
        role_options(AccountRole::Viewer)
    );
    (status, access.page("Admin", &b)).into_response()
}

/// A page change's answer: back to the admin page when it was made, else the page again
/// with the reason.
async fn changed(ctx: &Ctx, access: &Access, outcome: Result<(), Failure>) -> Response {
    match outcome {
        Ok(()) => Redirect::to("/admin").into_response(),
        Err(f) => {
            let notice = format!("<p class=\"fail\" id=\"message\">{}</p>", esc(&f.words));
            admin_page(ctx, access, f.status, &notice).await
        }
    }
}

/// `GET /admin`.
pub(super) async fn page(State(ctx): State<Ctx>, access: Access) -> Response {
    if let Err(refused) = access.require(AccountRole::Admin) {
        return *refused;
    }
    admin_page(&ctx, &access, StatusCode::OK, "").await
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct AccountForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    role: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    again: String,
}

/// `POST /admin/accounts`: adds an account.
pub(super) async fn add_account(
    State(ctx): State<Ctx>,
    access: Access,
    Form(form): Form<AccountForm>,
) -> Response {
    if let Err(refused) = access.change(AccountRole::Admin, Some(&form.csrf)) {
        return *refused;
    }
    let outcome = async {
        let role = role(&form.role)?;
        let password = typed_twice(form.password, &form.again)?;
        let name = form.name.clone();
        on_store(&ctx, move |s| s.add_account(&name, role, &password)).await?;
        tracing::info!(by = %access.account, account = %form.name, role = %role, "account added from the console");
        Ok(())
    }
    .await;
    changed(&ctx, &access, outcome).await
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RoleForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    role: String,
}

/// `POST /admin/accounts/{name}/role`: gives an account another role.
pub(super) async fn set_role(
    State(ctx): State<Ctx>,
    access: Access,
    Path(name): Path<String>,
    Form(form): Form<RoleForm>,
) -> Response {
    if let Err(refused) = access.change(AccountRole::Admin, Some(&form.csrf)) {
        return *refused;
    }
    let outcome = async {
        let role = role(&form.role)?;
        let asked = name.clone();
        on_store(&ctx, move |s| s.set_role(&asked, role)).await?;
        tracing::info!(by = %access.account, account = %name, role = %role, "account's role changed from the console");
        Ok(())
    }
    .await;
    changed(&ctx, &access, outcome).await
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct PasswordForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    again: String,
}

/// `POST /admin/accounts/{name}/password`: a new password, which signs the account's
/// browsers out.
pub(super) async fn set_password(
    State(ctx): State<Ctx>,
    access: Access,
    Path(name): Path<String>,
    Form(form): Form<PasswordForm>,
) -> Response {
    if let Err(refused) = access.change(AccountRole::Admin, Some(&form.csrf)) {
        return *refused;
    }
    let outcome = async {
        let password = typed_twice(form.password, &form.again)?;
        let asked = name.clone();
        on_store(&ctx, move |s| s.set_password(&asked, &password)).await?;
        tracing::info!(by = %access.account, account = %name, "account's password reset from the console");
        Ok(())
    }
    .await;
    changed(&ctx, &access, outcome).await
}

/// `POST /admin/accounts/{name}/remove`: removes an account with its sessions and tokens.
pub(super) async fn remove_account(
    State(ctx): State<Ctx>,
    access: Access,
    Path(name): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Err(refused) = access.change(AccountRole::Admin, Some(&form.csrf)) {
        return *refused;
    }
    let asked = name.clone();
    let outcome = on_store(&ctx, move |s| s.remove_account(&asked)).await;
    if outcome.is_ok() {
        tracing::info!(by = %access.account, account = %name, "account removed from the console");
    }
    changed(&ctx, &access, outcome).await
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct TokenForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    account: String,
    #[serde(default)]
    role: String,
    #[serde(default)]
    label: String,
}

/// Makes a token; the caller shows its secret once.
async fn make_token(
    ctx: &Ctx,
    access: &Access,
    account: String,
    role: &str,
    label: String,
    from: &str,
) -> Result<NewToken, Failure> {
    let role = self::role(role)?;
    let made = on_store(ctx, move |s| s.add_token(&account, role, &label)).await?;
    let t = &made.token;
    tracing::info!(by = %access.account, token = %t.id, account = %t.account, role = %t.role, label = %t.label, "API token made {from}");
    Ok(made)
}

/// `POST /admin/tokens`: makes a token and shows its secret, this once.
pub(super) async fn add_token(
    State(ctx): State<Ctx>,
    access: Access,
    Form(form): Form<TokenForm>,
) -> Response {
    if let Err(refused) = access.change(AccountRole::Admin, Some(&form.csrf)) {
        return *refused;
    }
    let made = make_token(
        &ctx,
        &access,
        form.account,
        &form.role,
        form.label,
        "from the console",
    )
    .await;
    match made {
        Ok(made) => {
            let t = &made.token;
            let body = format!(
                "<p class=\"pass\" id=\"message\">Token {} made for {} ({}), labelled {}.</p>\
                 <p class=\"warn\" id=\"once\">Copy the secret now: it will not be shown again (the store keeps only its hash).</p>\
                 <pre id=\"secret\">{}</pre>\
                 <p>A script sends it as <code>Authorization: Bearer SECRET</code>.</p>\
                 <p><a href=\"/admin\">Back to accounts and tokens</a></p>",
                esc(&t.id),
                esc(&t.account),
                t.role.as_str(),
                esc(&t.label),
                esc(&made.secret)
            );
            access.page("API token made", &body).into_response()
        }
        Err(f) => changed(&ctx, &access, Err(f)).await,
    }
}

/// `POST /admin/tokens/{id}/revoke`.
pub(super) async fn revoke_token(
    State(ctx): State<Ctx>,
    access: Access,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Err(refused) = access.change(AccountRole::Admin, Some(&form.csrf)) {
        return *refused;
    }
    let asked = id.clone();
    let outcome = on_store(&ctx, move |s| s.revoke_token(&asked)).await;
    if outcome.is_ok() {
        tracing::info!(by = %access.account, token = %id, "API token revoked from the console");
    }
    changed(&ctx, &access, outcome).await
}

/// `GET /api/v1/accounts`.
pub(super) async fn accounts_json(State(ctx): State<Ctx>, access: Access) -> Response {
    if let Err(refused) = access.require(AccountRole::Admin) {
        return *refused;
    }
    match on_store(&ctx, |s| s.accounts()).await {
        Ok(accounts) => Json(json!({ "accounts": accounts })).into_response(),
        Err(f) => f.json(),
    }
}

/// `GET /api/v1/tokens`: never a secret.
pub(super) async fn tokens_json(State(ctx): State<Ctx>, access: Access) -> Response {
    if let Err(refused) = access.require(AccountRole::Admin) {
        return *refused;
    }
    match on_store(&ctx, |s| s.tokens()).await {
        Ok(tokens) => Json(json!({ "tokens": tokens })).into_response(),
        Err(f) => f.json(),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenBody {
    account: String,
    role: String,
    label: String,
}

/// `POST /api/v1/tokens` with `{account, role, label}`: 201 `{id, secret}`.
pub(super) async fn add_token_json(
    State(ctx): State<Ctx>,
    access: Access,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(refused) = access.change(AccountRole::Admin, csrf_header(&headers)) {
        return *refused;
    }
    let asked: TokenBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => {
            return Failure::bad(format!(
                "the body is not {{\"account\", \"role\", \"label\"}} as JSON: {e}"
            ))
            .json()
        }
    };
    match make_token(
        &ctx,
        &access,
        asked.account,
        &asked.role,
        asked.label,
        "through the API",
    )
    .await
    {
        Ok(made) => (
            StatusCode::CREATED,
            Json(json!({ "id": made.token.id, "secret": made.secret })),
        )
            .into_response(),
        Err(f) => f.json(),
    }
}

/// `POST /api/v1/tokens/{id}/revoke`: 204, or 404 for a token there is not.
pub(super) async fn revoke_token_json(
    State(ctx): State<Ctx>,
    access: Access,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(refused) = access.change(AccountRole::Admin, csrf_header(&headers)) {
        return *refused;
    }
    let asked = id.clone();
    let revoked = on_store(&ctx, move |s| {
        // Looked for first, so an unknown id answers 404 rather than the 400 of a
        // refused change.
        if !s.tokens()?.iter().any(|t| t.id == asked) {
            return Ok(false);
        }
        s.revoke_token(&asked).map(|()| true)
    })
    .await;
    match revoked {
        Ok(true) => {
            tracing::info!(by = %access.account, token = %id, "API token revoked through the API");
            StatusCode::NO_CONTENT.into_response()
        }
        Ok(false) => Failure {
            status: StatusCode::NOT_FOUND,
            words: format!("no API token with id {id:?}"),
        }
        .json(),
        Err(f) => f.json(),
    }
}
