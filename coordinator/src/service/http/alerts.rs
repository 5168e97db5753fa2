//! The admin's alerts page (`/admin/alerts`, role admin): the alert rules, with a form to
//! add one (checked as `platter alerts add` checks it, `Rule::problem`), remove one, and
//! send one a test message now — from this coordinator, through `channels::send`, as its
//! deliveries go, recorded in the delivery log (`Store::record_test`) and its outcome
//! shown; silences added for a while and ended; and the delivery log, newest first. A
//! rule's target is shown without a URL's path (Slack's is its token), its secret only as
//! where it is read: the store never holds one.

use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::admin::{on_store, page_of, Failure};
use super::auth::{Access, CsrfForm};
use super::Ctx;
use crate::service::alerts::channels;
use crate::store::accounts::AccountRole;
use crate::store::alerts::{Channel, Delivery, Rule, Silence};
use crate::store::error::now_ms;
use crate::store::flags::{FlagKind, Severity};
use crate::store::{Store, StoreError};

/// Deliveries the page shows, the newest.
const LOG_ROWS: usize = 50;

/// The page (`templates/admin/alerts.html`).
#[derive(askama::Template)]
#[template(path = "admin/alerts.html")]
struct AlertsView<'a> {
    csrf: &'a str,
    rules: Vec<Rule>,
    silences: Vec<Silence>,
    log: Vec<Delivery>,
    now: i64,
    /// What the last change or test did (`Ok`) or why it was refused.
    message: Option<Result<String, String>>,
}

impl AlertsView<'_> {
    fn kinds(&self) -> String {
        let words: Vec<&str> = FlagKind::ALL.iter().map(|k| k.as_str()).collect();
        words.join(", ")
    }

    fn ends(&self, s: &Silence) -> String {
        let at = crate::views::clock(s.ends_unix_ms);
        if s.ends_unix_ms > self.now {
            format!("until {at}")
        } else {
            format!("ended {at}")
        }
    }

    /// A delivery's state in words, as `platter alerts log` says it.
    fn delivery_state(&self, d: &Delivery) -> String {
        crate::views::delivery_state(d)
    }

    fn delivery_class(&self, d: &Delivery) -> &'static str {
        match d.state.as_str() {
            "delivered" => "pass",
            "failed" => "fail",
            "pending" if d.attempts > 0 => "warn",
            _ => "muted",
        }
    }
}

/// The page answered with `status`, saying `message` above the lists.
async fn alerts_page(
    ctx: &Ctx,
    access: &Access,
    status: StatusCode,
    message: Option<Result<String, String>>,
) -> Response {
    let read = on_store(ctx, |s| {
        Ok((
            s.alert_rules()?,
            s.alert_silences()?,
            s.alert_log(None, LOG_ROWS)?,
        ))
    })
    .await;
    let (rules, silences, log) = match read {
        Ok(r) => r,
        Err(f) => {
            let view = AlertsView {
                csrf: &access.csrf,
                rules: Vec::new(),
                silences: Vec::new(),
                log: Vec::new(),
                now: now_ms(),
                message: Some(Err(format!("the alert rules cannot be read: {}", f.words))),
            };
            return page_of(access, f.status, "Alerts", &view);
        }
    };
    let view = AlertsView {
        csrf: &access.csrf,
        rules,
        silences,
        log,
        now: now_ms(),
        message,
    };
    page_of(access, status, "Alerts", &view)
}

/// A change's answer: back to the page when it was made, else the page with why not.
async fn changed(ctx: &Ctx, access: &Access, outcome: Result<(), Failure>) -> Response {
    match outcome {
        Ok(()) => Redirect::to("/admin/alerts").into_response(),
        Err(f) => alerts_page(ctx, access, f.status, Some(Err(f.words))).await,
    }
}

/// `GET /admin/alerts`.
pub(super) async fn page(State(ctx): State<Ctx>, access: Access) -> Response {
    if let Err(refused) = access.require(AccountRole::Admin) {
        return *refused;
    }
    alerts_page(&ctx, &access, StatusCode::OK, None).await
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RuleForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    channel: String,
    #[serde(default)]
    target: String,
    #[serde(default)]
    secret: String,
    /// E-mail recipients, separated by commas or spaces.
    #[serde(default)]
    to: String,
    #[serde(default)]
    from: String,
    /// Kinds separated by commas or spaces; every kind when empty.
    #[serde(default)]
    kinds: String,
    #[serde(default)]
    min_severity: String,
    #[serde(default)]
    series: String,
    #[serde(default)]
    host: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    digest_after: String,
}

fn words(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
}

impl RuleForm {
    /// The rule the form asks for, or why it cannot be.
    fn rule(&self) -> Result<Rule, Failure> {
        let channel = Channel::parse(&self.channel).ok_or_else(|| {
            Failure::bad(format!(
                "channel {:?}: webhook, slack or email",
                self.channel
            ))
        })?;
        let kinds = words(&self.kinds)
            .map(|k| {
                FlagKind::parse(k)
                    .ok_or_else(|| Failure::bad(format!("kind {k:?} is not a kind of flag")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let min_severity = match self.min_severity.as_str() {
            "" => Severity::Warning,
            s => Severity::parse(s).ok_or_else(|| {
                Failure::bad(format!("severity {s:?}: info, warning or critical"))
            })?,
        };
        let digest_after = match self.digest_after.trim() {
            "" => 5,
            n => n.parse().map_err(|_| {
                Failure::bad(format!("digest after {n:?}: a count of events, 0 or more"))
            })?,
        };
        let rule = Rule {
            name: self.name.trim().to_string(),
            channel,
            target: self.target.trim().to_string(),
            secret: self.secret.trim().to_string(),
            recipients: words(&self.to).map(String::from).collect(),
            sender: match self.from.trim() {
                "" => "platter@localhost".to_string(),
                f => f.to_string(),
            },
            kinds,
            min_severity,
            series: self.series.trim().to_string(),
            host: self.host.trim().to_string(),
            model: self.model.trim().to_string(),
            digest_after,
            created_unix_ms: now_ms(),
        };
        match rule.problem() {
            Some(why) => Err(Failure::bad(why)),
            None => Ok(rule),
        }
    }
}

/// A change the admin asked for with `csrf`: `made` (a rule or silence read from its
/// form, or why not) kept by `keep`, logged as `what`; back to the page, or the page with
/// why not.
async fn add<T: Send + 'static>(
    ctx: &Ctx,
    access: &Access,
    csrf: &str,
    made: Result<(String, T), Failure>,
    keep: fn(&Store, &T) -> Result<(), StoreError>,
    what: &str,
) -> Response {
    if let Err(refused) = access.change(AccountRole::Admin, Some(csrf)) {
        return *refused;
    }
    let outcome = async {
        let (name, made) = made?;
        on_store(ctx, move |s| keep(s, &made)).await?;
        tracing::info!(by = %access.account, name = %name, "{what} from the console");
        Ok(())
    }
    .await;
    changed(ctx, access, outcome).await
}

/// `POST /admin/alerts/rules`: adds a rule.
pub(super) async fn add_rule(
    State(ctx): State<Ctx>,
    access: Access,
    Form(form): Form<RuleForm>,
) -> Response {
    let made = form.rule().map(|r| (r.name.clone(), r));
    let what = "alert rule added";
    add(&ctx, &access, &form.csrf, made, Store::add_rule, what).await
}

/// `POST /admin/alerts/rules/{name}/remove`: removes a rule and what it still owes.
pub(super) async fn remove_rule(
    State(ctx): State<Ctx>,
    access: Access,
    Path(name): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Response {
    let remove = |s: &Store, name: &String| s.remove_rule(name);
    let what = "alert rule removed";
    add(
        &ctx,
        &access,
        &form.csrf,
        Ok((name.clone(), name)),
        remove,
        what,
    )
    .await
}

/// `POST /admin/alerts/rules/{name}/test`: sends the rule a test message now, from this
/// coordinator, records how it went, and shows it.
pub(super) async fn test_rule(
    State(ctx): State<Ctx>,
    access: Access,
    Path(name): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Err(refused) = access.change(AccountRole::Admin, Some(&form.csrf)) {
        return *refused;
    }
    let asked = name.clone();
    let rule = match on_store(&ctx, move |s| s.alert_rule(&asked)).await {
        Ok(Some(rule)) => rule,
        Ok(None) => {
            let f = Failure {
                status: StatusCode::NOT_FOUND,
                words: format!("no alert rule named {name:?}"),
            };
            return changed(&ctx, &access, Err(f)).await;
        }
        Err(f) => return changed(&ctx, &access, Err(f)).await,
    };
    let sent = channels::send_test(&rule, &ctx.alerts.public_url).await;
    let holder = format!("console on {} ({})", ctx.alerts.coordinator, access.account);
    let logged = sent.clone();
    if let Err(f) = on_store(&ctx, move |s| s.record_test(&rule.name, logged, &holder)).await {
        return changed(&ctx, &access, Err(f)).await;
    }
    tracing::info!(by = %access.account, rule = %name, ok = sent.is_ok(), "alert rule tested from the console");
    let message = match sent {
        Ok(()) => Ok(format!(
            "test message sent through {name}: the channel took it"
        )),
        Err(e) => Err(format!("test message through {name} failed: {e}")),
    };
    alerts_page(&ctx, &access, StatusCode::OK, Some(message)).await
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct SilenceForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    series: String,
    #[serde(default)]
    host: String,
    #[serde(default)]
    model: String,
    /// How long from now: 2h, 30m, 1d.
    #[serde(default, rename = "for")]
    duration: String,
    #[serde(default)]
    note: String,
}

impl SilenceForm {
    fn silence(&self) -> Result<Silence, Failure> {
        let duration: std::time::Duration = self
            .duration
            .trim()
            .parse::<humantime::Duration>()
            .map_err(|e| {
                Failure::bad(format!(
                    "for {:?}: a duration such as 2h, 30m or 1d ({e})",
                    self.duration
                ))
            })?
            .into();
        if duration.is_zero() {
            return Err(Failure::bad("a silence lasts a while: 2h, 30m, 1d"));
        }
        let now = now_ms();
        let silence = Silence {
            id: self.name.trim().to_string(),
            kind: self.kind.trim().to_string(),
            series: self.series.trim().to_string(),
            host: self.host.trim().to_string(),
            model: self.model.trim().to_string(),
            ends_unix_ms: now.saturating_add(duration.as_millis().min(i64::MAX as u128) as i64),
            note: self.note.trim().to_string(),
            created_unix_ms: now,
        };
        match silence.problem() {
            Some(why) => Err(Failure::bad(why)),
            None => Ok(silence),
        }
    }
}

/// `POST /admin/alerts/silences`: silences what it names until its end.
pub(super) async fn add_silence(
    State(ctx): State<Ctx>,
    access: Access,
    Form(form): Form<SilenceForm>,
) -> Response {
    let made = form.silence().map(|s| (s.id.clone(), s));
    let what = "alert silence added";
    add(&ctx, &access, &form.csrf, made, Store::add_silence, what).await
}

/// `POST /admin/alerts/silences/{name}/end`: ends a silence now.
pub(super) async fn end_silence(
    State(ctx): State<Ctx>,
    access: Access,
    Path(name): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Response {
    let end = |s: &Store, name: &String| s.remove_silence(name);
    let what = "alert silence ended";
    add(
        &ctx,
        &access,
        &form.csrf,
        Ok((name.clone(), name)),
        end,
        what,
    )
    .await
}
