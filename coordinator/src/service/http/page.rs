//! The console's page machinery, below every page: a page's query string read or refused
//! (`PageQuery`), a failed call as a page (`failed`) and its HTTP status, a live page's
//! `<main>` (`Main`) and its fingerprint (`seen`), a long list's pages (`Pager`), and a
//! page rendered in the frame (`render_page`). The pages themselves are `console`'s,
//! `flags`'s and the admin's.

use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tonic::Status;

use super::auth::Access;
use super::Ctx;

/// Rows a list shows per page: a fleet of 10,000 is paged and filtered, not one wall.
pub(super) const PAGE_ROWS: usize = 100;

/// A failed call as a page with its status: the service's own words.
pub(super) fn failed(access: &Access, what: &str, s: &Status) -> Response {
    let code = http_status(s);
    (code, access.page(what, &failure(what, s))).into_response()
}

/// A page's query string read as `T`. A malformed one ("?page=x") is refused on a page of
/// the console (400, saying what was wrong), as `api::ApiQuery` refuses it in the API's
/// JSON, not in axum's plain text.
pub(super) struct PageQuery<T>(pub T);

impl<T: serde::de::DeserializeOwned> axum::extract::FromRequestParts<Ctx> for PageQuery<T> {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        ctx: &Ctx,
    ) -> Result<Self, Self::Rejection> {
        let why = match Query::<T>::from_request_parts(parts, ctx).await {
            Ok(Query(v)) => return Ok(PageQuery(v)),
            Err(r) => Status::invalid_argument(r.body_text()),
        };
        let access = Access::from_request_parts(parts, ctx).await?;
        Err(failed(&access, "Bad request", &why))
    }
}

/// Why a page could not be shown, as its body: what failed, in the service's own words.
fn failure(what: &str, s: &Status) -> String {
    #[derive(askama::Template)]
    #[template(
        source = r#"<p class="fail">{{ what }}: {{ message }}</p>"#,
        ext = "html"
    )]
    struct Failure<'a> {
        what: &'a str,
        message: &'a str,
    }
    let failure = Failure {
        what,
        message: s.message(),
    };
    askama::Template::render(&failure).expect("a failure renders")
}

/// The HTTP status of a Control service's answer.
pub(super) fn http_status(s: &Status) -> StatusCode {
    use tonic::Code;
    match s.code() {
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::InvalidArgument | Code::FailedPrecondition => StatusCode::BAD_REQUEST,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::Unavailable | Code::DeadlineExceeded => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A live page's `<main>`: what its handler puts in the page frame, and what `/events`
/// sends an open page when it changed.
pub(super) struct Main {
    status: StatusCode,
    title: String,
    body: String,
}

impl Main {
    pub(super) fn ok(title: &str, body: String) -> Main {
        Main {
            status: StatusCode::OK,
            title: title.to_string(),
            body,
        }
    }

    /// A page's `<main>` from its view, under `title`; `what` names the page should the
    /// view not render.
    pub(super) fn of(what: &str, title: &str, view: &impl askama::Template) -> Main {
        match view.render() {
            Ok(body) => Main::ok(title, body),
            Err(e) => Main::failed(what, &Status::internal(e.to_string())),
        }
    }

    /// A failed call, in the service's own words, with its HTTP status.
    pub(super) fn failed(what: &str, s: &Status) -> Main {
        Main {
            status: http_status(s),
            title: what.to_string(),
            body: failure(what, s),
        }
    }

    /// The whole page, for `access`.
    pub(super) fn page(self, access: &Access) -> Response {
        let seen = seen(&self.inner_html());
        (self.status, access.live_page(&self.title, &self.body, seen)).into_response()
    }

    /// What goes inside `<main>`, as `layout::page` puts it there.
    pub(super) fn inner_html(&self) -> String {
        #[derive(askama::Template)]
        #[template(source = "\n<h1>{{ title }}</h1>\n{{ body|safe }}", ext = "html")]
        struct Inner<'a> {
            title: &'a str,
            body: &'a str,
        }
        let inner = Inner {
            title: &self.title,
            body: &self.body,
        };
        askama::Template::render(&inner).expect("a page's main renders")
    }
}

/// A `<main>`'s fingerprint: an open page names the one it shows, and its stream sends
/// one only when it differs. (The same in every coordinator built alike; a mismatch only
/// costs one send.)
pub(super) fn seen(inner_html: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    inner_html.hash(&mut h);
    h.finish()
}

/// A long list's pages, as `templates/console/pager.html` links them.
#[derive(askama::Template)]
#[template(path = "console/pager.html")]
pub(super) struct Pager {
    /// The list's address up to its `page=`, ending in `&` or `?`.
    base: String,
    /// From 0.
    page: usize,
    pages: usize,
}

impl Pager {
    /// The pages of a list of `total` rows at `page`; none when one holds them all.
    pub(super) fn of(base: String, page: usize, total: usize) -> Option<Pager> {
        let pages = total.div_ceil(PAGE_ROWS).max(1);
        (pages > 1).then_some(Pager { base, page, pages })
    }
}

/// A page of `view` under `title`, or why it could not be rendered.
pub(super) fn render_page(access: &Access, title: &str, view: &impl askama::Template) -> Response {
    match view.render() {
        Ok(body) => access.page(title, &body).into_response(),
        Err(e) => failed(access, title, &Status::internal(e.to_string())),
    }
}

/// `(key, value)` pairs as a JSON object.
pub(super) fn as_object<S: serde::Serializer>(
    pairs: &[(String, usize)],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map(pairs.iter().map(|(k, v)| (k, v)))
}
