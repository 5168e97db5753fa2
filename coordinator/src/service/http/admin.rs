//! The console's admin pages (`/admin`, role admin) and their JSON twins
//! (`/api/v1/accounts`, `/api/v1/tokens`): accounts and API tokens, changed in the store
//! exactly as `platter users` and `platter tokens` change them, so the same rules hold
//! (the password rule, a token never above its account's role, the last admin kept).
//! Every change is logged with the account that made it; never a password or a secret.
//! A token's secret is shown once, on the answer that made it, and never again.

use axum::body::Bytes;
use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::api::csrf_header;
use super::auth::{Access, CsrfForm};
use super::Ctx;
use crate::store::accounts::{AccountRole, NewToken, MAX_LABEL_CHARS, MIN_PASSWORD_CHARS};
use crate::store::{Store, StoreError};

const ROLES: [AccountRole; 3] = [
    AccountRole::Viewer,
    AccountRole::Operator,
    AccountRole::Admin,
];

/// Why a change was not made: words for the admin, and the status they answer with.
pub(super) struct Failure {
    pub status: StatusCode,
    pub words: String,
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        let status = match e {
            // The admin asked for what cannot be: the store says why.
            StoreError::Account(_) | StoreError::Refused(_) => StatusCode::BAD_REQUEST,
            _ => StatusCode::SERVICE_UNAVAILABLE,
        };
        Failure {
            status,
            words: e.to_string(),
        }
    }
}

impl Failure {
    pub(super) fn bad(words: impl Into<String>) -> Failure {
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
pub(super) async fn on_store<T: Send + 'static>(
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

/// The Admin page (`templates/admin/admin.html`): accounts and tokens with their forms.
#[derive(askama::Template)]
#[template(path = "admin/admin.html")]
struct AdminView<'a> {
    csrf: &'a str,
    accounts: Vec<crate::store::accounts::Account>,
    tokens: Vec<crate::store::accounts::ApiToken>,
    /// Why the change asked for was refused.
    refused: Option<&'a str>,
}

/// A token just made (`templates/admin/token_made.html`), its secret shown this once.
#[derive(askama::Template)]
#[template(path = "admin/token_made.html")]
struct TokenMadeView<'a> {
    t: &'a crate::store::accounts::ApiToken,
    secret: &'a str,
}

/// A page of `view` under `title`, answered with `status`.
pub(super) fn page_of(
    access: &Access,
    status: StatusCode,
    title: &str,
    view: &impl askama::Template,
) -> Response {
    match view.render() {
        Ok(body) => (status, access.page(title, &body)).into_response(),
        Err(e) => super::console::failed(access, title, &tonic::Status::internal(e.to_string())),
    }
}

/// The admin page with why the last change was refused, if it was, above the lists,
/// answered with `status`.
async fn admin_page(
    ctx: &Ctx,
    access: &Access,
    status: StatusCode,
    refused: Option<&str>,
) -> Response {
    let listed = on_store(ctx, |s| Ok((s.accounts()?, s.tokens()?))).await;
    let (accounts, tokens) = match listed {
        Ok(l) => l,
        Err(f) => {
            #[derive(askama::Template)]
            #[template(
                source = r#"<p class="fail" id="message">{{ words }}</p>"#,
                ext = "html"
            )]
            struct Message<'a> {
                words: &'a str,
            }
            return page_of(access, f.status, "Admin", &Message { words: &f.words });
        }
    };
    let view = AdminView {
        csrf: &access.csrf,
        accounts,
        tokens,
        refused,
    };
    page_of(access, status, "Admin", &view)
}

/// A page change's answer: back to the admin page when it was made, else the page again
/// with the reason.
async fn changed(ctx: &Ctx, access: &Access, outcome: Result<(), Failure>) -> Response {
    match outcome {
        Ok(()) => Redirect::to("/admin").into_response(),
        Err(f) => admin_page(ctx, access, f.status, Some(&f.words)).await,
    }
}

/// `GET /admin`.
pub(super) async fn page(State(ctx): State<Ctx>, access: Access) -> Response {
    if let Err(refused) = access.require(AccountRole::Admin) {
        return *refused;
    }
    admin_page(&ctx, &access, StatusCode::OK, None).await
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
            let view = TokenMadeView {
                t: &made.token,
                secret: &made.secret,
            };
            page_of(&access, StatusCode::OK, "API token made", &view)
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
