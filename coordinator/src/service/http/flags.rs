//! Flags in the console (`/flags`, `/flags/{id}`) and their JSON twins (`/api/v1/flags`,
//! `/api/v1/flags/{id}`): the store's flags (`store::flags`) listed live ones first and
//! filtered as `platter flags` filters them, each with its evidence laid out for people,
//! and its state changed as `platter flag ID ack|false-positive|fixed|reopen` changes it —
//! by operators and admins only, in their account's name, a browser's form with the
//! session's CSRF token. Alert messages link here (`/flags/ID` under `--public-url`).

use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tonic::Status;

use super::auth::Access;
use super::layout::url_part;
use super::page::{failed, render_page, Main, Pager, PAGE_ROWS};
use super::Ctx;
use crate::store::accounts::AccountRole;
use crate::store::flags::{Flag, FlagFilter, FlagKind, FlagState, Severity};
use crate::store::{Store, StoreError};

/// `/flags?state=&kind=&series=&host=&model=&page=`: `platter flags`' filters. A state is
/// one of `FlagState`'s words, `live` (open or acknowledged) or empty for every state.
#[derive(Debug, Default, Clone, Deserialize)]
pub(super) struct FlagsQuery {
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub series: String,
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub page: usize,
}

/// The state filter's choices: its value and words.
const STATE_CHOICES: [(&str, &str); 6] = [
    ("", "any state"),
    ("live", "live (open or acknowledged)"),
    ("open", "open"),
    ("acknowledged", "acknowledged"),
    ("false-positive", "false positive"),
    ("fixed", "fixed"),
];

impl FlagsQuery {
    /// The store's filter, and whether only live flags are kept; INVALID_ARGUMENT naming
    /// the word that is not a state or a kind.
    fn filter(&self) -> Result<(FlagFilter, bool), Status> {
        let some = |s: &str| Some(s.trim().to_string()).filter(|s| !s.is_empty());
        let state = match self.state.as_str() {
            "" | "live" => None,
            s => Some(FlagState::parse(s).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "state {s:?}: a state is open, acknowledged, false-positive, fixed or live"
                ))
            })?),
        };
        let kind = match self.kind.as_str() {
            "" => None,
            k => Some(FlagKind::parse(k).ok_or_else(|| {
                Status::invalid_argument(format!("kind {k:?}: a kind is one of {}", kinds()))
            })?),
        };
        let filter = FlagFilter {
            state,
            kind,
            series: some(&self.series),
            host: some(&self.host),
            model: some(&self.model),
            limit: None,
        };
        Ok((filter, self.state == "live"))
    }

    fn kind_choices(&self) -> Vec<(&'static str, &'static str)> {
        std::iter::once(("", "any kind"))
            .chain(FlagKind::ALL.iter().map(|k| (k.as_str(), k.as_str())))
            .collect()
    }
}

fn kinds() -> String {
    let words: Vec<&str> = FlagKind::ALL.iter().map(|k| k.as_str()).collect();
    words.join(", ")
}

/// A store call off the async workers; its failure as the Control service would say it
/// (a refusal is the caller's mistake, anything else the store's).
async fn on_store<T: Send + 'static>(
    ctx: &Ctx,
    f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, Status> {
    let store = ctx.store.clone();
    match tokio::task::spawn_blocking(move || f(&store)).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(StoreError::Refused(words))) => Err(Status::invalid_argument(words)),
        Ok(Err(e @ StoreError::NoFlag(_))) => Err(Status::not_found(e.to_string())),
        Ok(Err(e)) => Err(Status::unavailable(e.to_string())),
        Err(e) => Err(Status::internal(format!(
            "the store call did not finish: {e}"
        ))),
    }
}

/// The Flags page and `/api/v1/flags`: one view, shown by `templates/console/flags.html`
/// and serialized as the API's JSON (the filter is the page's only).
#[derive(Serialize, askama::Template)]
#[template(path = "console/flags.html")]
pub(super) struct FlagsView {
    /// Every flag of the store by state (open, acknowledged, false-positive, fixed); an
    /// object in JSON.
    #[serde(serialize_with = "super::page::as_object")]
    pub counts: Vec<(String, usize)>,
    pub matched: usize,
    pub page: usize,
    pub page_rows: usize,
    /// Live ones first (open, then acknowledged), each by severity then newest.
    pub flags: Vec<Flag>,
    #[serde(skip)]
    pub query: FlagsQuery,
}

impl FlagsView {
    pub(super) async fn load(ctx: &Ctx, query: FlagsQuery) -> Result<FlagsView, Status> {
        let (filter, live_only) = query.filter()?;
        let (counts, mut flags) =
            on_store(ctx, move |s| Ok((s.flag_counts()?, s.flags(&filter)?))).await?;
        if live_only {
            flags.retain(|f| f.state.is_live());
        }
        let matched = flags.len();
        let flags = flags
            .into_iter()
            .skip(query.page * PAGE_ROWS)
            .take(PAGE_ROWS)
            .collect();
        Ok(FlagsView {
            counts: counts
                .into_iter()
                .map(|(s, n)| (s.as_str().to_string(), n))
                .collect(),
            matched,
            page: query.page,
            page_rows: PAGE_ROWS,
            flags,
            query,
        })
    }

    /// "3 open, 1 acknowledged, 0 false positive, 12 fixed".
    fn count_words(&self) -> String {
        let words: Vec<String> = self
            .counts
            .iter()
            .map(|(s, n)| format!("{n} {}", s.replace('-', " ")))
            .collect();
        words.join(", ")
    }

    fn pager(&self) -> Option<Pager> {
        let q = &self.query;
        let base = format!(
            "/flags?state={}&kind={}&series={}&host={}&model={}&",
            url_part(&q.state),
            url_part(&q.kind),
            url_part(&q.series),
            url_part(&q.host),
            url_part(&q.model)
        );
        Pager::of(base, self.page, self.matched)
    }
}

/// The class a severity is shown in.
pub(super) fn severity_class(s: &Severity) -> &'static str {
    match s {
        Severity::Critical => "fail",
        Severity::Warning => "warn",
        Severity::Info => "muted",
    }
}

/// A flag's state with who set it and why: "acknowledged by alice: on it", "fixed by
/// platter: run c-2 is back within 3%", "open".
pub(super) fn state_words(f: &Flag) -> String {
    let state = f.state.as_str().replace('-', " ");
    let by = if f.state_by.is_empty() {
        "platter"
    } else {
        f.state_by.as_str()
    };
    match (f.state, f.note.is_empty()) {
        (FlagState::Open, true) => state,
        (FlagState::Open, false) => format!("open: {}", f.note),
        (_, true) => format!("{state} by {by}"),
        (_, false) => format!("{state} by {by}: {}", f.note),
    }
}

/// The Flags page's `<main>` (a live page, `console::Live::Flags`).
pub(super) async fn list_main(ctx: &Ctx, query: &FlagsQuery) -> Main {
    match FlagsView::load(ctx, query.clone()).await {
        Ok(view) => Main::of("Flags", "Flags", &view),
        Err(s) => Main::failed("Flags", &s),
    }
}

/// The flag `id` (or a unique prefix of it); NOT_FOUND when there is none.
pub(super) async fn flag_of(ctx: &Ctx, id: &str) -> Result<Flag, Status> {
    let asked = id.to_string();
    on_store(ctx, move |s| s.flag(&asked))
        .await?
        .ok_or_else(|| Status::not_found(format!("no flag {id:?}")))
}

/// A flag's page (`templates/console/flag.html`) and `/api/v1/flags/ID`: the flag as
/// `platter flags --format json` prints it; the page lays its evidence out and, for an
/// operator, has the forms that change its state.
#[derive(Serialize, askama::Template)]
#[template(path = "console/flag.html")]
pub(super) struct FlagPageView {
    #[serde(flatten)]
    pub flag: Flag,
    /// The evidence, row by row, for people.
    #[serde(skip)]
    pub rows: Vec<EvidenceRow>,
    /// The forms' CSRF token, where they are shown (an operator or an admin).
    #[serde(skip)]
    pub change_csrf: Option<String>,
    /// Why the change asked for was refused.
    #[serde(skip)]
    pub refused: Option<String>,
}

impl FlagPageView {
    /// The page as an account of `role` sees it, its forms carrying `csrf`.
    fn of(flag: Flag, role: AccountRole, csrf: &str, refused: Option<String>) -> FlagPageView {
        FlagPageView {
            rows: evidence_rows(&flag.evidence),
            change_csrf: role.allows(AccountRole::Operator).then(|| csrf.to_string()),
            refused,
            flag,
        }
    }

    /// The flag's link into the console (its campaign, its host), when it is a path here.
    fn link(&self) -> Option<&str> {
        let l = self.flag.link.as_str();
        (l.starts_with('/') && !l.starts_with("//") && !l.starts_with("/\\")).then_some(l)
    }

    fn severity_class(&self) -> &'static str {
        severity_class(&self.flag.severity)
    }

    fn state_words(&self) -> String {
        state_words(&self.flag)
    }
}

/// A flag's page's `<main>` as an account of `role` sees it, its forms carrying `csrf`
/// ("" where console.js fills it in): a live page, `console::Live::Flag`.
pub(super) async fn flag_main(ctx: &Ctx, id: &str, role: AccountRole, csrf: &str) -> Main {
    match flag_of(ctx, id).await {
        Ok(flag) => {
            let title = format!("Flag {}", flag.id);
            Main::of("Flag", &title, &FlagPageView::of(flag, role, csrf, None))
        }
        Err(s) => Main::failed("Flag", &s),
    }
}

/// A flag's page with why the change asked for was refused (400).
fn refused_page(access: &Access, flag: Flag, why: String) -> Response {
    let title = format!("Flag {}", flag.id);
    let view = FlagPageView::of(flag, access.role, &access.csrf, Some(why));
    let mut r = render_page(access, &title, &view);
    if r.status() == StatusCode::OK {
        *r.status_mut() = StatusCode::BAD_REQUEST;
    }
    r
}

/// A change of a flag's state, from a page's form or the API's body.
#[derive(Debug, Default, Deserialize)]
pub(super) struct StateChange {
    #[serde(default)]
    pub csrf: String,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub note: String,
}

/// Sets flag `id`'s state in `access`'s name, asked `from` the console or the API; the
/// flag as it is now.
pub(super) async fn change(
    ctx: &Ctx,
    access: &Access,
    id: &str,
    asked: &StateChange,
    from: &str,
) -> Result<Flag, Status> {
    let state = FlagState::parse(&asked.state).ok_or_else(|| {
        Status::invalid_argument(format!(
            "state {:?}: a flag is set open, acknowledged, false-positive or fixed",
            asked.state
        ))
    })?;
    // The store refuses a false positive without a note, and answers an unknown id with
    // `NoFlag` (404).
    let (id, by, note) = (
        id.to_string(),
        access.account.clone(),
        asked.note.trim().to_string(),
    );
    let f = on_store(ctx, move |s| s.set_flag_state(&id, state, &note, &by)).await?;
    tracing::info!(flag = %f.id, state = %f.state.as_str(), by = %access.account, "flag's state changed {from}");
    Ok(f)
}

/// `POST /flags/{id}`: an operator's form; back to the flag's page, or the page again
/// with why not.
pub(super) async fn set_state(
    State(ctx): State<Ctx>,
    access: Access,
    Path(id): Path<String>,
    Form(form): Form<StateChange>,
) -> Response {
    if let Err(refused) = access.change(AccountRole::Operator, Some(&form.csrf)) {
        return *refused;
    }
    match change(&ctx, &access, &id, &form, "from the console").await {
        Ok(f) => Redirect::to(&format!("/flags/{}", url_part(&f.id))).into_response(),
        Err(s) if s.code() == tonic::Code::InvalidArgument => match flag_of(&ctx, &id).await {
            Ok(flag) => refused_page(&access, flag, s.message().to_string()),
            Err(s) => failed(&access, "Flag", &s),
        },
        Err(s) => failed(&access, "Flag", &s),
    }
}

/// A row of a flag's evidence as its page lays it out: a label at a depth (a part of the
/// part above it) and its value.
#[derive(Debug, PartialEq)]
pub(super) struct EvidenceRow {
    pub depth: usize,
    pub label: String,
    pub value: Shown,
}

#[derive(Debug, PartialEq)]
pub(super) enum Shown {
    Text(String),
    /// Campaigns, each a link to its page.
    Campaigns(Vec<String>),
    /// The label heads the parts below it.
    Parts,
}

/// What an evidence key is called on the page; others are their words ("offline since").
fn label(key: &str) -> String {
    match key {
        "runs" => "runs compared".into(),
        "since" => "against the run before".into(),
        "change_pct" => "shift".into(),
        "ci_pct" => "interval".into(),
        "ci_level" => "interval's level".into(),
        "holm_p" => "p (Holm-adjusted)".into(),
        "changed" => "what changed".into(),
        "threshold_pct" => "threshold".into(),
        "text" => "in words".into(),
        "pooled" => "pooled into the baseline".into(),
        k => k.trim_end_matches("_unix_ms").replace('_', " "),
    }
}

/// A flag's evidence (free-form JSON: each kind's own) laid out for people: the change
/// first where there is a before and an after, campaigns as links, values in their unit,
/// percentages, moments as dates, parts under their heading.
pub(super) fn evidence_rows(evidence: &Value) -> Vec<EvidenceRow> {
    let mut rows = Vec::new();
    let Value::Object(map) = evidence else {
        rows.push(EvidenceRow {
            depth: 0,
            label: "evidence".into(),
            value: Shown::Text(evidence.to_string()),
        });
        return rows;
    };
    let unit = map.get("unit").and_then(Value::as_str).unwrap_or("");
    // The change says the before and the after: they are not said again.
    let mut said: Vec<&str> = vec!["unit"];
    if let (Some(before), Some(after)) = (
        map.get("before").and_then(Value::as_f64),
        map.get("after").and_then(Value::as_f64),
    ) {
        let pct = if before != 0.0 {
            format!(" ({:+.1}%)", (after / before - 1.0) * 100.0)
        } else {
            String::new()
        };
        rows.push(EvidenceRow {
            depth: 0,
            label: "change".into(),
            value: Shown::Text(format!(
                "{} → {}{pct}",
                shown_number("before", before, unit),
                shown_number("after", after, unit)
            )),
        });
        said.extend(["before", "after"]);
    }
    for (k, v) in map.iter().filter(|(k, _)| !said.contains(&k.as_str())) {
        walk(k, v, 0, unit, &mut rows);
    }
    rows
}

fn walk(key: &str, v: &Value, depth: usize, unit: &str, rows: &mut Vec<EvidenceRow>) {
    let mut push = |value| {
        rows.push(EvidenceRow {
            depth,
            label: label(key),
            value,
        })
    };
    match v {
        Value::Object(map) => {
            push(Shown::Parts);
            for (k, v) in map {
                walk(k, v, depth + 1, unit, rows);
            }
        }
        Value::Array(items)
            if matches!(key, "runs" | "pooled") && items.iter().all(Value::is_string) =>
        {
            push(Shown::Campaigns(
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect(),
            ))
        }
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            let words: Vec<String> = items.iter().map(|i| scalar(key, i, unit)).collect();
            push(Shown::Text(match key {
                "changed" if words.is_empty() => "nothing recorded".into(),
                "changed" => words.join("; "),
                _ if key.ends_with("_pct") => format!("[{}]", words.join(", ")),
                _ => words.join(", "),
            }))
        }
        Value::Array(items) => {
            push(Shown::Parts);
            for (i, item) in items.iter().enumerate() {
                walk(
                    &format!("{} {}", label(key), i + 1),
                    item,
                    depth + 1,
                    unit,
                    rows,
                );
            }
        }
        Value::String(s) if matches!(key, "campaign" | "campaign_id" | "baseline") => {
            push(Shown::Campaigns(vec![s.clone()]))
        }
        other => push(Shown::Text(scalar(key, other, unit))),
    }
}

/// A number of the evidence: a value in its unit, a percentage, a moment, or as it is.
fn shown_number(key: &str, n: f64, unit: &str) -> String {
    match key {
        k if k.ends_with("_unix_ms") => crate::views::clock(n as i64),
        "threshold_pct" | "ci_level" => format!("{}%", trimmed(n)),
        k if k.ends_with("_pct") => format!("{n:+.1}%"),
        "before" | "after" | "baseline" | "max" | "median" | "value" if !unit.is_empty() => {
            crate::report::human(n, unit)
        }
        _ => trimmed(n),
    }
}

/// `n` without trailing zeros: 3, 0.25, 1.2346.
fn trimmed(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{n:.0}")
    } else {
        let s = format!("{n:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn scalar(key: &str, v: &Value, unit: &str) -> String {
    match v {
        Value::Null => "none".into(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        Value::Number(n) => n
            .as_f64()
            .map_or_else(|| n.to_string(), |n| shown_number(key, n, unit)),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_regressions_evidence_reads_as_runs_change_interval_and_what_changed() {
        let evidence = json!({
            "runs": ["c-1", "c-2"],
            "before": 0.020,
            "after": 0.0231,
            "unit": "s",
            "threshold_pct": 3.0,
            "since": {
                "baseline": "c-1",
                "change_pct": 15.5,
                "ci_pct": [12.0, 19.25],
                "significant": true,
                "changed": ["kernel: 6.1.0 → 6.12.1"],
                "not_compared": null,
            },
        });
        let rows = evidence_rows(&evidence);
        let find = |label: &str| {
            rows.iter()
                .find(|r| r.label == label)
                .unwrap_or_else(|| panic!("no {label} in {rows:#?}"))
        };
        assert_eq!(rows[0].label, "change");
        assert_eq!(
            rows[0].value,
            Shown::Text("20.00 ms → 23.10 ms (+15.5%)".into())
        );
        assert_eq!(
            find("runs compared").value,
            Shown::Campaigns(vec!["c-1".into(), "c-2".into()])
        );
        assert_eq!(find("threshold").value, Shown::Text("3%".into()));
        assert_eq!(find("against the run before").value, Shown::Parts);
        let interval = find("interval");
        assert_eq!(interval.depth, 1);
        assert_eq!(interval.value, Shown::Text("[+12.0%, +19.2%]".into()));
        assert_eq!(find("shift").value, Shown::Text("+15.5%".into()));
        assert_eq!(
            find("what changed").value,
            Shown::Text("kernel: 6.1.0 → 6.12.1".into())
        );
        assert_eq!(find("significant").value, Shown::Text("yes".into()));
        assert_eq!(find("not compared").value, Shown::Text("none".into()));
        for said in ["unit", "before", "after"] {
            assert!(rows.iter().all(|r| r.label != said), "{said}: {rows:#?}");
        }
    }

    #[test]
    fn a_hosts_evidence_reads_its_moment_as_a_date() {
        let rows = evidence_rows(&json!({ "campaign": "c-9", "offline_since_unix_ms": 0 }));
        assert_eq!(
            rows,
            vec![
                EvidenceRow {
                    depth: 0,
                    label: "campaign".into(),
                    value: Shown::Campaigns(vec!["c-9".into()]),
                },
                EvidenceRow {
                    depth: 0,
                    label: "offline since".into(),
                    value: Shown::Text("1970-01-01 00:00:00 UTC".into()),
                },
            ]
        );
    }

    #[test]
    fn filters_are_read_as_platter_flags_reads_them() {
        let q = FlagsQuery {
            state: "live".into(),
            kind: "drift".into(),
            series: " nightly ".into(),
            ..FlagsQuery::default()
        };
        let (f, live) = q.filter().unwrap();
        assert!(live && f.state.is_none());
        assert_eq!(f.kind, Some(FlagKind::Drift));
        assert_eq!(f.series.as_deref(), Some("nightly"));
        assert_eq!(f.host, None);
        let bad = FlagsQuery {
            state: "closed".into(),
            ..FlagsQuery::default()
        };
        assert!(bad
            .filter()
            .unwrap_err()
            .message()
            .contains("a state is open"));
        let bad = FlagsQuery {
            kind: "bogus".into(),
            ..FlagsQuery::default()
        };
        assert!(bad
            .filter()
            .unwrap_err()
            .message()
            .contains("regression, drift"));
    }
}
