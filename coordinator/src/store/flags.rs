//! Flags with a life (`flags`): each finding worth a person's attention is one record, keyed
//! by its evidence, with a severity and a state — open, then acknowledged, false positive
//! (never raised again for the same evidence) or fixed (by platter, when later runs are back
//! within the threshold, and said so). Raising and fixing record an alert event for each
//! (`alerts::record_event`) in the same transaction, so what alert rules route is exactly
//! what the store holds.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::alerts::{record_event, EventWhat, Happened};
pub use super::alerts::{FlagKind, Severity};
use super::db::{params, Conn, Row};
use super::error::{now_ms, Result, StoreError};
use super::Store;

/// Where a flag is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlagState {
    Open,
    Acknowledged,
    /// A person said the evidence is not a finding: the same evidence is never raised again.
    FalsePositive,
    /// Later runs are back within the threshold (set by platter), or a person said so.
    Fixed,
}

impl FlagState {
    pub const ALL: [FlagState; 4] = [
        FlagState::Open,
        FlagState::Acknowledged,
        FlagState::FalsePositive,
        FlagState::Fixed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FlagState::Open => "open",
            FlagState::Acknowledged => "acknowledged",
            FlagState::FalsePositive => "false-positive",
            FlagState::Fixed => "fixed",
        }
    }

    pub fn parse(s: &str) -> Option<FlagState> {
        FlagState::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Open or acknowledged: still a finding.
    pub fn is_live(self) -> bool {
        matches!(self, FlagState::Open | FlagState::Acknowledged)
    }
}

/// How far back a coordinator raises the flags of done campaigns it finds unflagged.
pub const RAISE_WINDOW: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// A flag as a check finds it, before the store knows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewFlag {
    pub kind: FlagKind,
    pub severity: Severity,
    /// What makes two findings the same: the kind, its subject (series, host, cell and
    /// metric; a drive; a host) and where its evidence starts (the run range's first run).
    pub evidence_key: String,
    pub series: String,
    pub host: String,
    pub model: String,
    pub drive: String,
    pub metric: String,
    pub cell: String,
    pub campaign_id: String,
    pub summary: String,
    pub evidence: serde_json::Value,
    pub link: String,
}

impl NewFlag {
    /// A flag of `kind` keyed by `evidence_key`, its subject and words empty: filled in by
    /// the caller (`NewFlag { summary, ..NewFlag::of(…) }`).
    pub fn of(kind: FlagKind, severity: Severity, evidence_key: String) -> NewFlag {
        NewFlag {
            kind,
            severity,
            evidence_key,
            series: String::new(),
            host: String::new(),
            model: String::new(),
            drive: String::new(),
            metric: String::new(),
            cell: String::new(),
            campaign_id: String::new(),
            summary: String::new(),
            evidence: serde_json::Value::Null,
            link: String::new(),
        }
    }
}

/// A stored flag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flag {
    pub id: String,
    pub kind: FlagKind,
    pub severity: Severity,
    pub state: FlagState,
    pub series: String,
    pub host: String,
    pub model: String,
    pub drive: String,
    pub metric: String,
    pub cell: String,
    pub campaign_id: String,
    pub summary: String,
    pub evidence: serde_json::Value,
    pub link: String,
    /// Why it is in its state: a person's note, or what platter saw ("fixed: …").
    pub note: String,
    /// Who set the state; "" for platter.
    pub state_by: String,
    pub raised_unix_ms: i64,
    pub updated_unix_ms: i64,
    pub state_unix_ms: i64,
}

/// The flag id of an evidence key: 12 hex digits of its SHA-256, the same on every
/// coordinator.
pub fn flag_id(evidence_key: &str) -> String {
    let digest = Sha256::digest(evidence_key.as_bytes());
    hex::encode(&digest[..6])
}

const COLUMNS: &str = "flag_id, kind, severity, state, series, host, model, drive, metric, cell,
     campaign_id, summary, evidence, link, note, state_by, raised_unix_ms, updated_unix_ms,
     state_unix_ms";

fn decode<T>(what: &str, s: &str, parse: impl Fn(&str) -> Option<T>) -> Result<T> {
    parse(s).ok_or_else(|| StoreError::Decode(format!("unknown flag {what} {s:?}")))
}

impl Flag {
    fn from_row(r: &Row<'_>) -> Result<Flag> {
        let kind: String = r.get("kind")?;
        let severity: String = r.get("severity")?;
        let state: String = r.get("state")?;
        let evidence: String = r.get("evidence")?;
        Ok(Flag {
            id: r.get("flag_id")?,
            kind: decode("kind", &kind, FlagKind::parse)?,
            severity: decode("severity", &severity, Severity::parse)?,
            state: decode("state", &state, FlagState::parse)?,
            series: r.get("series")?,
            host: r.get("host")?,
            model: r.get("model")?,
            drive: r.get("drive")?,
            metric: r.get("metric")?,
            cell: r.get("cell")?,
            campaign_id: r.get("campaign_id")?,
            summary: r.get("summary")?,
            evidence: serde_json::from_str(&evidence)?,
            link: r.get("link")?,
            note: r.get("note")?,
            state_by: r.get("state_by")?,
            raised_unix_ms: r.get("raised_unix_ms")?,
            updated_unix_ms: r.get("updated_unix_ms")?,
            state_unix_ms: r.get("state_unix_ms")?,
        })
    }
}

/// Which flags a listing shows.
#[derive(Debug, Clone, Default)]
pub struct FlagFilter {
    pub state: Option<FlagState>,
    pub kind: Option<FlagKind>,
    pub series: Option<String>,
    pub host: Option<String>,
    pub model: Option<String>,
    /// At most this many, newest first; all when `None`.
    pub limit: Option<usize>,
}

/// What one raising did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Raised {
    /// Flags new to the store, or raised again after they were fixed.
    pub raised: Vec<String>,
    /// Live flags whose evidence was brought up to date (no new event).
    pub refreshed: Vec<String>,
    /// Findings a person marked false positive for this evidence: not raised.
    pub suppressed: Vec<String>,
    /// Live flags platter set fixed.
    pub fixed: Vec<String>,
}

/// A live flag that later runs show fixed, with what shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Fixed {
    pub flag_id: String,
    pub note: String,
}

impl Store {
    /// The done campaigns whose flags are not raised yet, oldest first: those submitted in
    /// the last `RAISE_WINDOW` (a store that no coordinator served for longer — `platter
    /// run`'s, say — is not news for weeks back when one starts serving it).
    pub fn campaigns_to_flag(&self) -> Result<Vec<String>> {
        let since = now_ms() - RAISE_WINDOW.as_millis() as i64;
        self.read(|c| {
            c.query_map(
                "SELECT id FROM campaigns
                  WHERE state = 'done' AND submitted_unix_ms >= ?1
                    AND id NOT IN (SELECT campaign_id FROM flags_raised)
                  ORDER BY submitted_unix_ms, id",
                params![since],
                |r| r.get("id"),
            )
        })
    }

    /// Raises `flags` and fixes `fixed` in one transaction with their alert events. With
    /// `campaign`, the campaign is marked flagged in the same transaction, and when another
    /// coordinator marked it first nothing is done (`None`).
    pub fn raise_flags(
        &self,
        campaign: Option<&str>,
        flags: &[NewFlag],
        fixed: &[Fixed],
    ) -> Result<Option<Raised>> {
        self.write(|c| {
            let tx = c.write_transaction()?;
            if let Some(id) = campaign {
                let marked = c.execute(
                    "INSERT INTO flags_raised (campaign_id, raised_unix_ms) VALUES (?1, ?2)
                     ON CONFLICT (campaign_id) DO NOTHING",
                    params![id, now_ms()],
                )?;
                if marked == 0 {
                    // Dropped uncommitted: rolled back.
                    return Ok(None);
                }
            }
            let mut done = Raised::default();
            for f in flags {
                raise(c, f, &mut done)?;
            }
            for f in fixed {
                if fix(c, f)? {
                    done.fixed.push(f.flag_id.clone());
                }
            }
            tx.commit()?;
            Ok(Some(done))
        })
    }

    /// The flags `filter` selects: live ones first (open before acknowledged), then by
    /// severity and newest.
    pub fn flags(&self, filter: &FlagFilter) -> Result<Vec<Flag>> {
        self.read(|c| {
            let sql = format!(
                "SELECT {COLUMNS} FROM flags
                  WHERE (?1 = '' OR state = ?1) AND (?2 = '' OR kind = ?2)
                    AND (?3 = '' OR series = ?3) AND (?4 = '' OR host = ?4)
                    AND (?5 = '' OR model = ?5)
                  ORDER BY CASE state WHEN 'open' THEN 0 WHEN 'acknowledged' THEN 1 ELSE 2 END,
                           CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END,
                           raised_unix_ms DESC, flag_id
                  LIMIT ?6"
            );
            c.query_map(
                &sql,
                params![
                    filter.state.map_or("", FlagState::as_str),
                    filter.kind.map_or("", FlagKind::as_str),
                    filter.series.as_deref().unwrap_or(""),
                    filter.host.as_deref().unwrap_or(""),
                    filter.model.as_deref().unwrap_or(""),
                    filter.limit.map_or(i64::MAX, |l| l as i64)
                ],
                Flag::from_row,
            )
        })
    }

    /// One flag by its id, or by a unique prefix of it.
    pub fn flag(&self, id: &str) -> Result<Option<Flag>> {
        self.read(|c| find(c, id))
    }

    /// Sets a flag's state by a person (`by`) with a note, and returns it. Reopening a
    /// flag records a `reopened` event. Refused: an unknown id, a note missing where one
    /// is owed (false positive), a state platter alone sets from nothing.
    pub fn set_flag_state(&self, id: &str, state: FlagState, note: &str, by: &str) -> Result<Flag> {
        if state == FlagState::FalsePositive && note.trim().is_empty() {
            return Err(StoreError::Refused(
                "a false positive needs a note saying why it is not a finding".into(),
            ));
        }
        self.write(|c| {
            let tx = c.write_transaction()?;
            let Some(flag) = find(c, id)? else {
                return Err(StoreError::NoFlag(id.to_string()));
            };
            let now = now_ms();
            c.execute(
                "UPDATE flags SET state = ?2, note = ?3, state_by = ?4, state_unix_ms = ?5,
                        updated_unix_ms = ?5
                  WHERE flag_id = ?1",
                params![flag.id, state.as_str(), note, by, now],
            )?;
            if state == FlagState::Open && flag.state != FlagState::Open {
                let mut reopened = flag.clone();
                reopened.state = FlagState::Open;
                record_event(c, &happened(&reopened), EventWhat::Reopened, now)?;
            }
            let flag = find(c, &flag.id)?.ok_or(StoreError::NoRows)?;
            tx.commit()?;
            Ok(flag)
        })
    }
}

/// What an alert event says of `flag`.
fn happened(flag: &Flag) -> Happened<'_> {
    Happened {
        flag_id: &flag.id,
        kind: flag.kind,
        severity: flag.severity,
        series: &flag.series,
        host: &flag.host,
        model: &flag.model,
        summary: &flag.summary,
        note: &flag.note,
    }
}

fn find(c: &Conn, id: &str) -> Result<Option<Flag>> {
    if let Some(f) = c.query_opt(
        &format!("SELECT {COLUMNS} FROM flags WHERE flag_id = ?1"),
        params![id],
        Flag::from_row,
    )? {
        return Ok(Some(f));
    }
    // A prefix, as git takes one: only when it names one flag.
    if id.len() < 4 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(None);
    }
    let mut found = c.query_map(
        &format!("SELECT {COLUMNS} FROM flags WHERE flag_id LIKE ?1 LIMIT 2"),
        params![format!("{id}%")],
        Flag::from_row,
    )?;
    Ok(if found.len() == 1 { found.pop() } else { None })
}

fn raise(c: &Conn, f: &NewFlag, done: &mut Raised) -> Result<()> {
    let id = flag_id(&f.evidence_key);
    let now = now_ms();
    let evidence = serde_json::to_string(&f.evidence)?;
    let state: Option<String> = c.query_opt(
        "SELECT state FROM flags WHERE flag_id = ?1",
        params![id],
        |r| r.get("state"),
    )?;
    match state.as_deref().and_then(FlagState::parse) {
        None => {
            c.execute(
                &format!(
                    "INSERT INTO flags (evidence_key, {COLUMNS})
                     VALUES (?1, ?2, ?3, ?4, 'open', ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,
                             '', '', ?15, ?15, ?15)"
                ),
                params![
                    f.evidence_key,
                    id,
                    f.kind.as_str(),
                    f.severity.as_str(),
                    f.series,
                    f.host,
                    f.model,
                    f.drive,
                    f.metric,
                    f.cell,
                    f.campaign_id,
                    f.summary,
                    evidence,
                    f.link,
                    now
                ],
            )?;
            let flag = find(c, &id)?.ok_or(StoreError::NoRows)?;
            record_event(c, &happened(&flag), EventWhat::Raised, now)?;
            done.raised.push(id);
        }
        Some(FlagState::FalsePositive) => done.suppressed.push(id),
        Some(state) => {
            let again = state == FlagState::Fixed;
            c.execute(
                "UPDATE flags SET summary = ?2, evidence = ?3, campaign_id = ?4, severity = ?5,
                        updated_unix_ms = ?6,
                        state = CASE WHEN ?7 = 1 THEN 'open' ELSE state END,
                        note = CASE WHEN ?7 = 1 THEN ?8 ELSE note END,
                        state_by = CASE WHEN ?7 = 1 THEN '' ELSE state_by END,
                        state_unix_ms = CASE WHEN ?7 = 1 THEN ?6 ELSE state_unix_ms END
                  WHERE flag_id = ?1",
                params![
                    id,
                    f.summary,
                    evidence,
                    f.campaign_id,
                    f.severity.as_str(),
                    now,
                    again as i64,
                    format!("raised again by {}", f.campaign_id)
                ],
            )?;
            if again {
                let flag = find(c, &id)?.ok_or(StoreError::NoRows)?;
                record_event(c, &happened(&flag), EventWhat::Reopened, now)?;
                done.raised.push(id);
            } else {
                done.refreshed.push(id);
            }
        }
    }
    Ok(())
}

/// Sets a live flag fixed by platter; whether it was live.
fn fix(c: &Conn, f: &Fixed) -> Result<bool> {
    let now = now_ms();
    let changed = c.execute(
        "UPDATE flags SET state = 'fixed', note = ?2, state_by = '', state_unix_ms = ?3,
                updated_unix_ms = ?3
          WHERE flag_id = ?1 AND state IN ('open', 'acknowledged')",
        params![f.flag_id, f.note, now],
    )?;
    if changed == 0 {
        return Ok(false);
    }
    let flag = find(c, &f.flag_id)?.ok_or(StoreError::NoRows)?;
    record_event(c, &happened(&flag), EventWhat::Fixed, now)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_id_is_its_evidence_keys_and_the_same_everywhere() {
        let a = flag_id("regression|nightly|rc66|bs=4k|wall|c-1");
        assert_eq!(a.len(), 12);
        assert_eq!(a, flag_id("regression|nightly|rc66|bs=4k|wall|c-1"));
        assert_ne!(a, flag_id("regression|nightly|rc66|bs=4k|wall|c-2"));
    }

    #[test]
    fn words_read_back() {
        for k in FlagKind::ALL {
            assert_eq!(FlagKind::parse(k.as_str()), Some(k));
        }
        for s in FlagState::ALL {
            assert_eq!(FlagState::parse(s.as_str()), Some(s));
        }
        assert!(Severity::Critical > Severity::Warning && Severity::Warning > Severity::Info);
    }
}
