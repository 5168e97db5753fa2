//! Alerts: rules that route flag events to channels, silences, and the deliveries owed.
//!
//! Every event (a flag raised, fixed, reopened) is recorded with one delivery row per rule
//! it matches, in the transaction that changed the flag (`record_event`), so nothing is
//! owed that the store does not hold and nothing the store holds is forgotten across a
//! restart. A coordinator delivers a rule's events only while it holds the rule's lease
//! (`claim_rule`), oldest first, and marks each delivered after the channel took it: a
//! coordinator killed between the two leaves the delivery pending, and the next holder
//! sends it again with the same idempotency key (at least once per rule, across all
//! coordinators; the receiver drops repeats by the key).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::db::{params, Conn, Row};
use super::error::{now_ms, Result, StoreError};
use super::Store;

/// What a flag is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlagKind {
    /// A run worse than the run before it in its series.
    Regression,
    /// A series creeping or stepping over several runs.
    Drift,
    /// A `qualify:` limit failed.
    Qualification,
    /// A drive's health got worse over a run, or past its baseline.
    Health,
    /// A drive slower than its identical peers.
    Peer,
    /// A host offline while holding a plan.
    Host,
    /// A schedule's firing that failed to submit.
    Firing,
    /// The store did not commit or answer for a while (said once it does again).
    Store,
}

impl FlagKind {
    pub const ALL: [FlagKind; 8] = [
        FlagKind::Regression,
        FlagKind::Drift,
        FlagKind::Qualification,
        FlagKind::Health,
        FlagKind::Peer,
        FlagKind::Host,
        FlagKind::Firing,
        FlagKind::Store,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FlagKind::Regression => "regression",
            FlagKind::Drift => "drift",
            FlagKind::Qualification => "qualification",
            FlagKind::Health => "health",
            FlagKind::Peer => "peer",
            FlagKind::Host => "host",
            FlagKind::Firing => "firing",
            FlagKind::Store => "store",
        }
    }

    pub fn parse(s: &str) -> Option<FlagKind> {
        FlagKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// How urgent a flag is: what an alert rule's `--min-severity` compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }

    pub fn parse(s: &str) -> Option<Severity> {
        [Severity::Info, Severity::Warning, Severity::Critical]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// A flag as an event tells it (`flags` fills it in: alerts know no flag).
pub(super) struct Happened<'a> {
    pub flag_id: &'a str,
    pub kind: FlagKind,
    pub severity: Severity,
    pub series: &'a str,
    pub host: &'a str,
    pub model: &'a str,
    pub summary: &'a str,
    /// Why it is in its state ("run c-… is back within 3%" for a fix).
    pub note: &'a str,
}

/// What happened to a flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EventWhat {
    Raised,
    Fixed,
    Reopened,
    /// `platter alerts test RULE`.
    Test,
}

impl EventWhat {
    pub fn as_str(self) -> &'static str {
        match self {
            EventWhat::Raised => "raised",
            EventWhat::Fixed => "fixed",
            EventWhat::Reopened => "reopened",
            EventWhat::Test => "test",
        }
    }
}

/// Where a rule sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    /// JSON, signed with HMAC-SHA256 over the timestamp and the body.
    Webhook,
    /// A Slack-compatible incoming webhook: `{"text": …}`.
    Slack,
    /// Mail over SMTP with STARTTLS.
    Email,
}

impl Channel {
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Webhook => "webhook",
            Channel::Slack => "slack",
            Channel::Email => "email",
        }
    }

    pub fn parse(s: &str) -> Option<Channel> {
        [Channel::Webhook, Channel::Slack, Channel::Email]
            .into_iter()
            .find(|c| c.as_str() == s)
    }
}

/// An alert rule: which events, to which channel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rule {
    pub name: String,
    pub channel: Channel,
    /// The URL (or `env:NAME`/`file:PATH` naming one, for a URL that is itself a secret),
    /// or for e-mail `smtp://HOST:PORT`.
    pub target: String,
    /// Where the signing key or SMTP password is read at each send: `env:NAME`,
    /// `file:PATH`, or "" for none. Never the secret itself.
    pub secret: String,
    /// E-mail: the recipients and the sender.
    pub recipients: Vec<String>,
    pub sender: String,
    /// The kinds routed; every kind when empty.
    pub kinds: Vec<FlagKind>,
    pub min_severity: Severity,
    /// Globs over the event's series, host and model; "" for any.
    pub series: String,
    pub host: String,
    pub model: String,
    /// More events waiting than this go out as one digest.
    pub digest_after: u32,
    pub created_unix_ms: i64,
}

/// A silence or maintenance window: events it matches are recorded, not sent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Silence {
    pub id: String,
    /// Each "" for any; globs over series, host and model; a kind's word.
    pub kind: String,
    pub series: String,
    pub host: String,
    pub model: String,
    pub ends_unix_ms: i64,
    pub note: String,
    pub created_unix_ms: i64,
}

/// An event as rules and channels see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub event_id: String,
    pub seq: i64,
    pub flag_id: String,
    pub what: String,
    pub kind: String,
    pub severity: String,
    pub series: String,
    pub host: String,
    pub model: String,
    pub summary: String,
    /// The console's path to the evidence (`/flags/ID`); a channel puts the coordinator's
    /// public address in front.
    pub link: String,
    pub created_unix_ms: i64,
}

/// An event owed to a rule, with its key.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Owed {
    pub event: Event,
    pub idempotency_key: String,
    pub attempts: i64,
}

/// A delivery as `platter alerts log` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delivery {
    pub rule: String,
    pub event: Event,
    pub idempotency_key: String,
    /// pending | delivered | silenced
    pub state: String,
    pub attempts: i64,
    pub next_unix_ms: i64,
    pub delivered_unix_ms: i64,
    pub last_error: String,
}

/// The idempotency key of `event_id` for `rule`: one per event and rule, the same on every
/// coordinator and every try.
pub fn idempotency_key(event_id: &str, rule: &str) -> String {
    let digest = Sha256::digest(format!("{event_id}\n{rule}").as_bytes());
    hex::encode(&digest[..16])
}

/// Whether a glob (or "" for any) takes `value`; a pattern that is not a glob is compared
/// as text.
fn takes(pattern: &str, value: &str) -> bool {
    pattern.is_empty() || glob::Pattern::new(pattern).map_or(pattern == value, |p| p.matches(value))
}

impl Rule {
    /// Whether this rule routes `e`. A test event goes to the rule it names only.
    pub fn routes(&self, e: &Event) -> bool {
        let severity = Severity::parse(&e.severity).unwrap_or(Severity::Info);
        (self.kinds.is_empty() || self.kinds.iter().any(|k| k.as_str() == e.kind))
            && severity >= self.min_severity
            && takes(&self.series, &e.series)
            && takes(&self.host, &e.host)
            && takes(&self.model, &e.model)
    }

    /// "flags of kind regression, drift of warning or worse, series nightly-*".
    pub fn selects(&self) -> String {
        let mut parts = vec![if self.kinds.is_empty() {
            "every kind".to_string()
        } else {
            self.kinds
                .iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        }];
        parts.push(format!("{} or worse", self.min_severity.as_str()));
        for (what, glob) in [
            ("series", &self.series),
            ("host", &self.host),
            ("model", &self.model),
        ] {
            if !glob.is_empty() {
                parts.push(format!("{what} {glob}"));
            }
        }
        parts.join("; ")
    }

    fn from_row(r: &Row<'_>) -> Result<Rule> {
        let channel: String = r.get("channel")?;
        let kinds: String = r.get("kinds")?;
        let severity: String = r.get("min_severity")?;
        let recipients: String = r.get("recipients")?;
        Ok(Rule {
            name: r.get("rule_id")?,
            channel: Channel::parse(&channel)
                .ok_or_else(|| StoreError::Decode(format!("unknown channel {channel:?}")))?,
            target: r.get("target")?,
            secret: r.get("secret")?,
            recipients: split(&recipients),
            sender: r.get("sender")?,
            kinds: split(&kinds)
                .iter()
                .filter_map(|k| FlagKind::parse(k))
                .collect(),
            min_severity: Severity::parse(&severity).unwrap_or(Severity::Info),
            series: r.get("series")?,
            host: r.get("host")?,
            model: r.get("model")?,
            digest_after: r.get::<i64>("digest_after")?.max(0) as u32,
            created_unix_ms: r.get("created_unix_ms")?,
        })
    }
}

fn split(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect()
}

impl Silence {
    pub fn silences(&self, e: &Event, now: i64) -> bool {
        now < self.ends_unix_ms
            && (self.kind.is_empty() || self.kind == e.kind)
            && takes(&self.series, &e.series)
            && takes(&self.host, &e.host)
            && takes(&self.model, &e.model)
    }

    fn from_row(r: &Row<'_>) -> Result<Silence> {
        Ok(Silence {
            id: r.get("silence_id")?,
            kind: r.get("kind")?,
            series: r.get("series")?,
            host: r.get("host")?,
            model: r.get("model")?,
            ends_unix_ms: r.get("ends_unix_ms")?,
            note: r.get("note")?,
            created_unix_ms: r.get("created_unix_ms")?,
        })
    }
}

impl Event {
    fn from_row(r: &Row<'_>) -> Result<Event> {
        Ok(Event {
            event_id: r.get("event_id")?,
            seq: r.get("seq")?,
            flag_id: r.get("flag_id")?,
            what: r.get("what")?,
            kind: r.get("kind")?,
            severity: r.get("severity")?,
            series: r.get("series")?,
            host: r.get("host")?,
            model: r.get("model")?,
            summary: r.get("summary")?,
            link: r.get("link")?,
            created_unix_ms: r.get("created_unix_ms")?,
        })
    }
}

const RULE_COLUMNS: &str = "rule_id, channel, target, secret, recipients, sender, kinds,
     min_severity, series, host, model, digest_after, created_unix_ms";
const EVENT_COLUMNS: &str = "e.event_id, e.seq, e.flag_id, e.what, e.kind, e.severity, e.series,
     e.host, e.model, e.summary, e.link, e.created_unix_ms";

fn rules(c: &Conn) -> Result<Vec<Rule>> {
    c.query_map(
        &format!("SELECT {RULE_COLUMNS} FROM alert_rules ORDER BY rule_id"),
        (),
        Rule::from_row,
    )
}

fn silences(c: &Conn) -> Result<Vec<Silence>> {
    c.query_map(
        "SELECT silence_id, kind, series, host, model, ends_unix_ms, note, created_unix_ms
           FROM alert_silences ORDER BY ends_unix_ms, silence_id",
        (),
        Silence::from_row,
    )
}

/// Records what happened to `flag` as an event, with a delivery row for each rule it
/// matches (silenced ones recorded as such), in the caller's transaction.
pub(super) fn record_event(
    c: &Conn,
    flag: &Happened<'_>,
    what: EventWhat,
    now: i64,
) -> Result<Event> {
    let n: i64 = c.query_row(
        "SELECT COUNT(*) AS n FROM alert_events WHERE flag_id = ?1 AND what = ?2",
        params![flag.flag_id, what.as_str()],
        |r| r.get("n"),
    )?;
    let event = Event {
        event_id: format!("{}.{}.{}", flag.flag_id, what.as_str(), n + 1),
        seq: next_seq(c)?,
        flag_id: flag.flag_id.to_string(),
        what: what.as_str().to_string(),
        kind: flag.kind.as_str().to_string(),
        severity: flag.severity.as_str().to_string(),
        series: flag.series.to_string(),
        host: flag.host.to_string(),
        model: flag.model.to_string(),
        summary: match what {
            EventWhat::Fixed => format!("fixed: {} ({})", flag.summary, flag.note),
            _ => flag.summary.to_string(),
        },
        link: format!("/flags/{}", flag.flag_id),
        created_unix_ms: now,
    };
    insert_event(c, &event)?;
    let silences = silences(c)?;
    for rule in rules(c)?.iter().filter(|r| r.routes(&event)) {
        let silenced = silences.iter().find(|s| s.silences(&event, now));
        owe(c, &event, &rule.name, silenced, now)?;
    }
    Ok(event)
}

fn next_seq(c: &Conn) -> Result<i64> {
    c.query_row(
        "SELECT COALESCE(MAX(seq), 0) + 1 AS n FROM alert_events",
        (),
        |r| r.get("n"),
    )
}

fn insert_event(c: &Conn, e: &Event) -> Result<()> {
    c.execute(
        "INSERT INTO alert_events (event_id, seq, flag_id, what, kind, severity, series, host,
                                   model, summary, link, created_unix_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![
            e.event_id,
            e.seq,
            e.flag_id,
            e.what,
            e.kind,
            e.severity,
            e.series,
            e.host,
            e.model,
            e.summary,
            e.link,
            e.created_unix_ms
        ],
    )?;
    Ok(())
}

fn owe(c: &Conn, e: &Event, rule: &str, silenced: Option<&Silence>, now: i64) -> Result<()> {
    let (state, why) = match silenced {
        Some(s) => (
            "silenced",
            format!(
                "silenced by {} until {}",
                s.id,
                super::error::since_clock(s.ends_unix_ms)
            ),
        ),
        None => ("pending", String::new()),
    };
    c.execute(
        "INSERT INTO alert_deliveries (event_id, rule_id, seq, idempotency_key, state, attempts,
                                       next_unix_ms, delivered_unix_ms, last_error)
         VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, 0, ?7)
         ON CONFLICT (event_id, rule_id) DO NOTHING",
        params![
            e.event_id,
            rule,
            e.seq,
            idempotency_key(&e.event_id, rule),
            state,
            now,
            why
        ],
    )?;
    Ok(())
}

/// Whether a secret reference names where a secret lives rather than being one.
pub fn is_reference(s: &str) -> bool {
    s.is_empty() || s.starts_with("env:") || s.starts_with("file:")
}

impl Store {
    /// Adds a rule; refused when its name is taken or its secret is written out.
    pub fn add_rule(&self, rule: &Rule) -> Result<()> {
        if !is_reference(&rule.secret) {
            return Err(StoreError::Refused(
                "a secret is never kept in the store: name where it is read, env:NAME or \
                 file:PATH"
                    .into(),
            ));
        }
        self.write(|c| {
            let added = c.execute(
                &format!(
                    "INSERT INTO alert_rules ({RULE_COLUMNS}, lease_holder, lease_until_unix_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, '', 0)
                     ON CONFLICT (rule_id) DO NOTHING"
                ),
                params![
                    rule.name,
                    rule.channel.as_str(),
                    rule.target,
                    rule.secret,
                    rule.recipients.join(","),
                    rule.sender,
                    rule.kinds
                        .iter()
                        .map(|k| k.as_str())
                        .collect::<Vec<_>>()
                        .join(","),
                    rule.min_severity.as_str(),
                    rule.series,
                    rule.host,
                    rule.model,
                    rule.digest_after as i64,
                    rule.created_unix_ms
                ],
            )?;
            if added == 0 {
                return Err(StoreError::Refused(format!(
                    "an alert rule named {:?} exists",
                    rule.name
                )));
            }
            Ok(())
        })
    }

    pub fn alert_rules(&self) -> Result<Vec<Rule>> {
        self.read(rules)
    }

    pub fn alert_rule(&self, name: &str) -> Result<Option<Rule>> {
        self.read(|c| {
            c.query_opt(
                &format!("SELECT {RULE_COLUMNS} FROM alert_rules WHERE rule_id = ?1"),
                params![name],
                Rule::from_row,
            )
        })
    }

    /// Removes a rule and what it still owed (its log stays).
    pub fn remove_rule(&self, name: &str) -> Result<()> {
        self.write(|c| {
            let tx = c.write_transaction()?;
            let gone = c.execute("DELETE FROM alert_rules WHERE rule_id = ?1", params![name])?;
            if gone == 0 {
                return Err(StoreError::Refused(format!("no alert rule named {name:?}")));
            }
            c.execute(
                "DELETE FROM alert_deliveries WHERE rule_id = ?1 AND state = 'pending'",
                params![name],
            )?;
            tx.commit()
        })
    }

    pub fn add_silence(&self, s: &Silence) -> Result<()> {
        self.write(|c| {
            let added = c.execute(
                "INSERT INTO alert_silences (silence_id, kind, series, host, model, ends_unix_ms,
                                             note, created_unix_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (silence_id) DO NOTHING",
                params![
                    s.id,
                    s.kind,
                    s.series,
                    s.host,
                    s.model,
                    s.ends_unix_ms,
                    s.note,
                    s.created_unix_ms
                ],
            )?;
            if added == 0 {
                return Err(StoreError::Refused(format!(
                    "a silence named {:?} exists",
                    s.id
                )));
            }
            Ok(())
        })
    }

    pub fn alert_silences(&self) -> Result<Vec<Silence>> {
        self.read(silences)
    }

    pub fn remove_silence(&self, id: &str) -> Result<()> {
        self.write(|c| {
            let gone = c.execute(
                "DELETE FROM alert_silences WHERE silence_id = ?1",
                params![id],
            )?;
            if gone == 0 {
                return Err(StoreError::Refused(format!("no silence named {id:?}")));
            }
            Ok(())
        })
    }

    /// The rules with deliveries due and no live lease: what a delivering coordinator
    /// tries to claim.
    pub fn rules_due(&self, now: i64) -> Result<Vec<String>> {
        self.read(|c| {
            c.query_map(
                "SELECT DISTINCT d.rule_id FROM alert_deliveries d
                   JOIN alert_rules r ON r.rule_id = d.rule_id
                  WHERE d.state = 'pending' AND d.next_unix_ms <= ?1
                    AND r.lease_until_unix_ms < ?1
                  ORDER BY d.rule_id",
                params![now],
                |r| r.get("rule_id"),
            )
        })
    }

    /// Takes `rule`'s lease for `holder` until `until`, when no one else holds it live;
    /// whether it did.
    pub fn claim_rule(&self, rule: &str, holder: &str, now: i64, until: i64) -> Result<bool> {
        self.write(|c| {
            Ok(c.execute(
                "UPDATE alert_rules SET lease_holder = ?2, lease_until_unix_ms = ?4
                  WHERE rule_id = ?1 AND (lease_until_unix_ms < ?3 OR lease_holder = ?2)",
                params![rule, holder, now, until],
            )? == 1)
        })
    }

    /// Who holds `rule`'s lease and until when, while someone does.
    pub fn rule_lease(&self, rule: &str, now: i64) -> Result<Option<(String, i64)>> {
        self.read(|c| {
            c.query_opt(
                "SELECT lease_holder, lease_until_unix_ms FROM alert_rules
                  WHERE rule_id = ?1 AND lease_until_unix_ms >= ?2",
                params![rule, now],
                |r| Ok((r.get("lease_holder")?, r.get("lease_until_unix_ms")?)),
            )
        })
    }

    /// Gives `rule`'s lease back.
    pub fn release_rule(&self, rule: &str, holder: &str) -> Result<()> {
        self.write(|c| {
            c.execute(
                "UPDATE alert_rules SET lease_until_unix_ms = 0
                  WHERE rule_id = ?1 AND lease_holder = ?2",
                params![rule, holder],
            )?;
            Ok(())
        })
    }

    /// What `rule` owes that is due, oldest first, at most `limit`, with how many are
    /// owed in all.
    pub fn owed(&self, rule: &str, now: i64, limit: usize) -> Result<(Vec<Owed>, usize)> {
        self.read(|c| {
            let all: i64 = c.query_row(
                "SELECT COUNT(*) AS n FROM alert_deliveries
                  WHERE rule_id = ?1 AND state = 'pending' AND next_unix_ms <= ?2",
                params![rule, now],
                |r| r.get("n"),
            )?;
            let owed = c.query_map(
                &format!(
                    "SELECT {EVENT_COLUMNS}, d.idempotency_key, d.attempts
                       FROM alert_deliveries d JOIN alert_events e ON e.event_id = d.event_id
                      WHERE d.rule_id = ?1 AND d.state = 'pending' AND d.next_unix_ms <= ?2
                      ORDER BY d.seq, d.event_id
                      LIMIT ?3"
                ),
                params![rule, now, limit as i64],
                |r| {
                    Ok(Owed {
                        event: Event::from_row(r)?,
                        idempotency_key: r.get("idempotency_key")?,
                        attempts: r.get("attempts")?,
                    })
                },
            )?;
            Ok((owed, all as usize))
        })
    }

    /// Marks `events` delivered to `rule` by `holder` (`how`: delivered, or digest), and
    /// logs the try.
    pub fn delivered(&self, rule: &str, events: &[&str], holder: &str, how: &str) -> Result<()> {
        self.write(|c| {
            let tx = c.write_transaction()?;
            let now = now_ms();
            for e in events {
                c.execute(
                    "UPDATE alert_deliveries
                        SET state = 'delivered', attempts = attempts + 1, delivered_unix_ms = ?3,
                            last_error = ''
                      WHERE event_id = ?1 AND rule_id = ?2 AND state = 'pending'",
                    params![e, rule, now],
                )?;
                attempt(c, e, rule, holder, how, "", now)?;
            }
            tx.commit()
        })
    }

    /// Marks `events`' delivery to `rule` failed with `error`, to be tried again at
    /// `next_unix_ms`.
    pub fn delivery_failed(
        &self,
        rule: &str,
        events: &[&str],
        holder: &str,
        error: &str,
        next_unix_ms: i64,
    ) -> Result<()> {
        self.write(|c| {
            let tx = c.write_transaction()?;
            let now = now_ms();
            for e in events {
                c.execute(
                    "UPDATE alert_deliveries
                        SET attempts = attempts + 1, next_unix_ms = ?3, last_error = ?4
                      WHERE event_id = ?1 AND rule_id = ?2 AND state = 'pending'",
                    params![e, rule, next_unix_ms, error],
                )?;
                attempt(c, e, rule, holder, "failed", error, now)?;
            }
            tx.commit()
        })
    }

    /// Records a test message sent to `rule` and how it went.
    pub fn record_test(
        &self,
        rule: &str,
        outcome: std::result::Result<(), String>,
        holder: &str,
    ) -> Result<Event> {
        self.write(|c| {
            let tx = c.write_transaction()?;
            let now = now_ms();
            let event = test_event(rule, next_seq(c)?, now);
            insert_event(c, &event)?;
            // A test is tried once, here: failed is final for it.
            let (state, error) = match &outcome {
                Ok(()) => ("delivered", String::new()),
                Err(e) => ("failed", e.clone()),
            };
            c.execute(
                "INSERT INTO alert_deliveries (event_id, rule_id, seq, idempotency_key, state,
                                               attempts, next_unix_ms, delivered_unix_ms,
                                               last_error)
                 VALUES (?1, ?2, ?3, ?4, ?5, 1, 0, ?6, ?7)",
                params![
                    event.event_id,
                    rule,
                    event.seq,
                    idempotency_key(&event.event_id, rule),
                    state,
                    if outcome.is_ok() { now } else { 0 },
                    error
                ],
            )?;
            attempt(c, &event.event_id, rule, holder, state, &error, now)?;
            tx.commit()?;
            Ok(event)
        })
    }

    /// The delivery log, newest first: every delivery of `rule` (all rules when `None`).
    pub fn alert_log(&self, rule: Option<&str>, limit: usize) -> Result<Vec<Delivery>> {
        self.read(|c| {
            c.query_map(
                &format!(
                    "SELECT {EVENT_COLUMNS}, d.rule_id, d.idempotency_key, d.state, d.attempts,
                            d.next_unix_ms, d.delivered_unix_ms, d.last_error
                       FROM alert_deliveries d JOIN alert_events e ON e.event_id = d.event_id
                      WHERE (?1 = '' OR d.rule_id = ?1)
                      ORDER BY d.seq DESC, d.event_id DESC, d.rule_id
                      LIMIT ?2"
                ),
                params![rule.unwrap_or(""), limit as i64],
                |r| {
                    Ok(Delivery {
                        rule: r.get("rule_id")?,
                        event: Event::from_row(r)?,
                        idempotency_key: r.get("idempotency_key")?,
                        state: r.get("state")?,
                        attempts: r.get("attempts")?,
                        next_unix_ms: r.get("next_unix_ms")?,
                        delivered_unix_ms: r.get("delivered_unix_ms")?,
                        last_error: r.get("last_error")?,
                    })
                },
            )
        })
    }
}

/// The event a rule's test message carries.
pub fn test_event(rule: &str, seq: i64, now: i64) -> Event {
    Event {
        event_id: format!("test.{rule}.{now}"),
        seq,
        flag_id: String::new(),
        what: EventWhat::Test.as_str().to_string(),
        kind: "test".into(),
        severity: Severity::Info.as_str().to_string(),
        series: String::new(),
        host: String::new(),
        model: String::new(),
        summary: format!("a test message of alert rule {rule}: it reaches you"),
        link: "/flags".into(),
        created_unix_ms: now,
    }
}

fn attempt(
    c: &Conn,
    event: &str,
    rule: &str,
    holder: &str,
    outcome: &str,
    detail: &str,
    now: i64,
) -> Result<()> {
    let n: i64 = c.query_row(
        "SELECT COUNT(*) AS n FROM alert_attempts WHERE event_id = ?1 AND rule_id = ?2",
        params![event, rule],
        |r| r.get("n"),
    )?;
    c.execute(
        "INSERT INTO alert_attempts (event_id, rule_id, attempt, at_unix_ms, coordinator, outcome,
                                     detail)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![event, rule, n + 1, now, holder, outcome, detail],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, severity: &str, series: &str, host: &str) -> Event {
        Event {
            kind: kind.into(),
            severity: severity.into(),
            series: series.into(),
            host: host.into(),
            ..test_event("r", 1, 0)
        }
    }

    fn rule() -> Rule {
        Rule {
            name: "r".into(),
            channel: Channel::Webhook,
            target: "http://127.0.0.1:9/".into(),
            secret: String::new(),
            recipients: Vec::new(),
            sender: String::new(),
            kinds: Vec::new(),
            min_severity: Severity::Warning,
            series: String::new(),
            host: String::new(),
            model: String::new(),
            digest_after: 5,
            created_unix_ms: 0,
        }
    }

    #[test]
    fn a_rule_routes_by_kind_severity_and_globs() {
        let mut r = rule();
        assert!(r.routes(&event("regression", "warning", "nightly", "rc66")));
        assert!(!r.routes(&event("regression", "info", "nightly", "rc66")));
        r.kinds = vec![FlagKind::Drift, FlagKind::Health];
        assert!(!r.routes(&event("regression", "critical", "nightly", "rc66")));
        assert!(r.routes(&event("drift", "critical", "nightly", "rc66")));
        r.series = "night*".into();
        r.host = "rc6?".into();
        assert!(r.routes(&event("drift", "warning", "nightly-fio", "rc66")));
        assert!(!r.routes(&event("drift", "warning", "weekly", "rc66")));
        assert!(!r.routes(&event("drift", "warning", "nightly", "rcmonster")));
    }

    #[test]
    fn a_silence_holds_until_its_end_only() {
        let s = Silence {
            id: "upgrade".into(),
            kind: String::new(),
            series: String::new(),
            host: "rc66".into(),
            model: String::new(),
            ends_unix_ms: 1_000,
            note: String::new(),
            created_unix_ms: 0,
        };
        let e = event("host", "critical", "", "rc66");
        assert!(s.silences(&e, 999));
        assert!(!s.silences(&e, 1_000));
        assert!(!s.silences(&event("host", "critical", "", "flygecko"), 10));
    }

    #[test]
    fn keys_are_one_per_event_and_rule() {
        assert_eq!(
            idempotency_key("a.raised.1", "ops"),
            idempotency_key("a.raised.1", "ops")
        );
        assert_ne!(
            idempotency_key("a.raised.1", "ops"),
            idempotency_key("a.raised.1", "mail")
        );
        assert_ne!(
            idempotency_key("a.raised.1", "ops"),
            idempotency_key("a.raised.2", "ops")
        );
        assert!(is_reference("env:HOOK_KEY") && is_reference("file:/etc/k") && is_reference(""));
        assert!(!is_reference("hunter2"));
    }
}
