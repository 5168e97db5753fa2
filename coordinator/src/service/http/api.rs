//! `/api/v1/`: each console page's JSON twin, for scripts and CI (with an API token as
//! `Authorization: Bearer`), described by `/api/v1/openapi.json`. Hosts and campaigns are
//! in the shapes `platter agents --output json` and `platter status --output json` print.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use tonic::Status;

use super::auth::Access;
use super::console::{
    http_status, CampaignFilter, CampaignPageView, CampaignsView, CompareQuery, HostFilter,
    HostPageView, HostsView, OverviewView, DOWNLOADS,
};
use super::Ctx;
use crate::store::accounts::AccountRole;

/// The OpenAPI document of this API.
const OPENAPI: &str = include_str!("assets/openapi.json");

/// A failed call as the API's JSON: `{"error": …}` with its HTTP status.
pub(super) fn failed(s: &Status) -> Response {
    (http_status(s), Json(json!({ "error": s.message() }))).into_response()
}

/// A query string for the API: a malformed one is a 400 in the API's JSON
/// (`{"error": …}`), as every other refusal of the API is, not axum's plain text.
pub(super) struct ApiQuery<T>(pub T);

impl<T, S> axum::extract::FromRequestParts<S> for ApiQuery<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(v)) => Ok(ApiQuery(v)),
            Err(r) => Err(failed(&Status::invalid_argument(r.body_text()))),
        }
    }
}

pub(super) async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

pub(super) async fn overview(State(ctx): State<Ctx>, _access: Access) -> Response {
    match OverviewView::load(&ctx).await {
        // Through `Value`, whose objects keep their keys sorted, as this answer always
        // had them.
        Ok(view) => Json(serde_json::to_value(view).expect("a view serializes")).into_response(),
        Err(s) => failed(&s),
    }
}

pub(super) async fn hosts(
    State(ctx): State<Ctx>,
    _access: Access,
    ApiQuery(filter): ApiQuery<HostFilter>,
) -> Response {
    match HostsView::load(&ctx, &filter).await {
        // Through `Value`, whose objects keep their keys sorted, as this answer always
        // had them.
        Ok(view) => Json(serde_json::to_value(view).expect("a view serializes")).into_response(),
        Err(s) => failed(&s),
    }
}

pub(super) async fn host(
    State(ctx): State<Ctx>,
    _access: Access,
    Path(name): Path<String>,
) -> Response {
    match HostPageView::load(&ctx, &name).await {
        // Through `Value`, whose objects keep their keys sorted, as this answer always
        // had them.
        Ok(view) => Json(serde_json::to_value(view).expect("a view serializes")).into_response(),
        Err(s) => failed(&s),
    }
}

pub(super) async fn campaigns(
    State(ctx): State<Ctx>,
    _access: Access,
    ApiQuery(filter): ApiQuery<CampaignFilter>,
) -> Response {
    match CampaignsView::load(&ctx, &filter, false).await {
        // Through `Value`, whose objects keep their keys sorted, as this answer always
        // had them.
        Ok(view) => Json(serde_json::to_value(view).expect("a view serializes")).into_response(),
        Err(s) => failed(&s),
    }
}

/// `platter history NAME`'s answer as JSON (`?metric=`, default `wall`).
pub(super) async fn series(
    State(ctx): State<Ctx>,
    _access: Access,
    Path(name): Path<String>,
    ApiQuery(q): ApiQuery<super::console::SeriesQuery>,
) -> Response {
    let metric = if q.metric.is_empty() {
        "wall"
    } else {
        q.metric.as_str()
    };
    match ctx.history(&name, metric).await {
        Ok(h) => Json(h).into_response(),
        Err(s) => failed(&s),
    }
}

/// `/api/v1/drives?model=&firmware=&host=&failed=true`: `platter drives --format json`.
pub(super) async fn drives(
    State(ctx): State<Ctx>,
    _access: Access,
    ApiQuery(q): ApiQuery<super::console::DrivesQuery>,
) -> Response {
    match ctx.ledger(q.question()).await {
        Ok(answer) => json_text(answer.to_json()),
        Err(s) => failed(&s),
    }
}

/// `/api/v1/drives/ID`: `platter drive ID --format json`.
pub(super) async fn drive(
    State(ctx): State<Ctx>,
    _access: Access,
    Path(id): Path<String>,
) -> Response {
    match ctx.ledger(crate::report::ledger::Question::Drive(id)).await {
        Ok(answer) => json_text(answer.to_json()),
        Err(s) => failed(&s),
    }
}

/// `/api/v1/models/MODEL?firmware=&metric=&series=`: `platter peers MODEL --format json`;
/// 404 for a model no drive of the ledger has.
pub(super) async fn model(
    State(ctx): State<Ctx>,
    _access: Access,
    Path(model): Path<String>,
    ApiQuery(q): ApiQuery<super::models::ModelQuery>,
) -> Response {
    match super::models::peers(&ctx, &model, &q).await {
        Ok(p) => Json(p).into_response(),
        Err(s) => failed(&s),
    }
}

/// A JSON document made elsewhere, sent as it is.
fn json_text(json: String) -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        json,
    )
        .into_response()
}

pub(super) async fn campaign(
    State(ctx): State<Ctx>,
    _access: Access,
    Path(id): Path<String>,
) -> Response {
    match CampaignPageView::load(&ctx, &id).await {
        // Through `Value`, whose objects keep their keys sorted, as this JSON always had them.
        Ok(v) => Json(serde_json::to_value(v).expect("a campaign serializes")).into_response(),
        Err(s) => failed(&s),
    }
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct ReportQuery {
    #[serde(default)]
    format: String,
}

pub(super) async fn report(
    State(ctx): State<Ctx>,
    _access: Access,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<ReportQuery>,
) -> Response {
    let format = if q.format.is_empty() {
        "json"
    } else {
        &q.format
    };
    let media = DOWNLOADS
        .iter()
        .find(|(f, _, _)| *f == format)
        .map(|(_, _, m)| *m)
        .unwrap_or("text/plain; charset=utf-8");
    match ctx.report(&id, format).await {
        Ok(r) => {
            let mut resp = r.rendered.into_response();
            resp.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
            if format == "html" {
                if let Ok(v) = HeaderValue::from_str(&super::report_policy()) {
                    resp.headers_mut()
                        .insert(header::CONTENT_SECURITY_POLICY, v);
                }
            }
            resp
        }
        Err(s) => failed(&s),
    }
}

/// A session's CSRF token as a script sends it, in `X-CSRF-Token`.
pub(super) fn csrf_header(headers: &HeaderMap) -> Option<&str> {
    headers.get("x-csrf-token").and_then(|v| v.to_str().ok())
}

pub(super) async fn cancel(
    State(ctx): State<Ctx>,
    access: Access,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(refused) = access.change(AccountRole::Operator, csrf_header(&headers)) {
        return *refused;
    }
    match ctx.cancel(&id).await {
        Ok(()) => {
            tracing::info!(campaign = %id, account = %access.account, "campaign cancelled through the API");
            StatusCode::NO_CONTENT.into_response()
        }
        Err(s) => failed(&s),
    }
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct SubmitQuery {
    /// Only check the campaign: what it would plan, or its mistakes.
    #[serde(default)]
    check: bool,
    #[serde(default)]
    file_name: String,
}

/// `POST /api/v1/campaigns` with the campaign's YAML as the body.
pub(super) async fn submit(
    State(ctx): State<Ctx>,
    access: Access,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<SubmitQuery>,
    body: Bytes,
) -> Response {
    if let Err(refused) = access.change(AccountRole::Operator, csrf_header(&headers)) {
        return *refused;
    }
    let Ok(yaml) = std::str::from_utf8(&body) else {
        return failed(&Status::invalid_argument("the campaign is not UTF-8 text"));
    };
    let file = if q.file_name.is_empty() {
        "campaign.yaml"
    } else {
        &q.file_name
    };
    if q.check {
        return match ctx.plan(file, yaml).await {
            Ok(plan) => Json(json!({ "plan": plan })).into_response(),
            Err(s) => failed(&s),
        };
    }
    match ctx.submit(file, yaml).await {
        Ok(id) => {
            tracing::info!(campaign = %id, account = %access.account, "campaign submitted through the API");
            (StatusCode::CREATED, Json(json!({ "campaign_id": id }))).into_response()
        }
        Err(s) => failed(&s),
    }
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct TriggerBody {
    /// Kept with each run it fires: `{"labels": {"kernel": "6.12.1"}}`.
    #[serde(default)]
    labels: std::collections::BTreeMap<String, String>,
}

/// `POST /api/v1/triggers/{name}`, for CI systems: fires the schedules made `--on-trigger
/// NAME` (else the schedule called NAME), as `platter trigger` does; an operator's token.
/// The body, if any, is JSON: `{"labels": {"commit": "abc123"}}`.
pub(super) async fn trigger(
    State(ctx): State<Ctx>,
    access: Access,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    if let Err(refused) = access.change(AccountRole::Operator, csrf_header(&headers)) {
        return *refused;
    }
    let labels = if body.iter().all(u8::is_ascii_whitespace) {
        TriggerBody::default()
    } else {
        match serde_json::from_slice::<TriggerBody>(&body) {
            Ok(b) => b,
            Err(e) => {
                return failed(&Status::invalid_argument(format!(
                    "the body is not {{\"labels\": {{\"KEY\": \"VALUE\", …}}}}: {e}"
                )))
            }
        }
    };
    match ctx.trigger(&name, labels.labels).await {
        Ok(r) => {
            tracing::info!(trigger = %name, account = %access.account, fired = r.fired.len(), "trigger pulled through the API");
            Json(json!({
                "fired": r.fired.iter().map(crate::views::firing_json).collect::<Vec<_>>(),
                "not_fired": r.not_fired,
            }))
            .into_response()
        }
        Err(s) => failed(&s),
    }
}

pub(super) async fn compare(
    State(ctx): State<Ctx>,
    _access: Access,
    ApiQuery(q): ApiQuery<CompareQuery>,
) -> Response {
    if q.a.is_empty() || q.b.is_empty() {
        return failed(&Status::invalid_argument(
            "give a and b: two campaigns (ids or names), or CAMPAIGN@HOST twice",
        ));
    }
    let metric = if q.metric.is_empty() {
        "wall"
    } else {
        &q.metric
    };
    match ctx.compare(&q.a, &q.b, metric).await {
        Ok(r) => {
            let c = crate::service::rpc::control::comparison_from_pb(r, &q.a, &q.b, metric);
            Json(json!({
                "baseline": c.baseline,
                "candidate": c.candidate,
                "metric": c.metric,
                "text": crate::views::render_comparison(&c),
            }))
            .into_response()
        }
        Err(s) => failed(&s),
    }
}

/// `GET /api/v1/flags`.
pub(super) async fn flags(
    State(ctx): State<Ctx>,
    _access: Access,
    ApiQuery(query): ApiQuery<super::flags::FlagsQuery>,
) -> Response {
    match super::flags::FlagsView::load(&ctx, query).await {
        Ok(view) => Json(view).into_response(),
        Err(s) => failed(&s),
    }
}

/// `GET /api/v1/flags/{id}`.
pub(super) async fn flag(
    State(ctx): State<Ctx>,
    _access: Access,
    Path(id): Path<String>,
) -> Response {
    match super::flags::flag_of(&ctx, &id).await {
        Ok(flag) => Json(flag).into_response(),
        Err(s) => failed(&s),
    }
}

/// `POST /api/v1/flags/{id}` with `{"state": …, "note": …}`: the flag as it is now.
pub(super) async fn set_flag_state(
    State(ctx): State<Ctx>,
    access: Access,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    if let Err(refused) = access.change(AccountRole::Operator, csrf_header(&headers)) {
        return *refused;
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        state: String,
        #[serde(default)]
        note: String,
    }
    let asked: Body = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => {
            return failed(&Status::invalid_argument(format!(
                "the body is not {{\"state\", \"note\"}} as JSON: {e}"
            )))
        }
    };
    let asked = super::flags::StateChange {
        csrf: String::new(),
        state: asked.state,
        note: asked.note,
    };
    match super::flags::change(&ctx, &access, &id, &asked, "through the API").await {
        Ok(f) => Json(f).into_response(),
        Err(s) => failed(&s),
    }
}
