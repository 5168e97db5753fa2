//! The drive ledger as people ask it: every drive with its latest health and verdicts
//! (`platter drives`), one drive's history — sightings, moves and firmware changes, the runs
//! that measured it with their key results, health over time with each flag transient or
//! sticky, its baseline and what changed since, verdicts (`platter drive`) — and a model's
//! qualification across the fleet (`platter qualification`). Drives and their sightings come
//! from `store::ledger`, a drive's baseline from `store::baseline`; runs, health and verdicts
//! from the runs' own reports (`Report::load`), so the ledger never says other numbers than a
//! report does. The health history is every run's, for the drive's whole life: the store
//! prunes none of it.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use platter_proto::model::CampaignId;
use platter_proto::provenance::HealthReading;

use super::health::{flag_state, FlagState};
use super::{human, Report};
use crate::spec::health::{attribute, show, Worse, ATTRIBUTES};
use crate::store::error::Result;
use crate::store::ledger::{Identity, LedgerDrive};
use crate::store::Store;

/// One line of `platter drives`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriveSummary {
    /// The ledger's key: the WWN, `MODEL/SERIAL`, or `HOST/NAME` for a drive without a serial.
    pub id: String,
    /// wwn | serial | host
    pub identity: String,
    pub model: String,
    pub serial: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub wwn: String,
    /// The firmware of its latest sighting.
    pub firmware: String,
    /// Where it was seen, first sighting first.
    pub hosts: Vec<String>,
    /// The controller chains it sat behind ("sd>ahci"); "" stands for none (a loop device).
    pub controllers: Vec<String>,
    pub first_seen: String,
    pub last_seen: String,
    /// "no serial: tracked per host" where it has none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// Runs that measured it.
    pub runs: usize,
    /// Verdicts (performance and health) on it, over every run.
    pub passed: usize,
    pub failed: usize,
    /// Its latest health: the last run's last reading, or why it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<LatestHealth>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatestHealth {
    pub campaign_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub unreadable: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reading: Option<HealthReading>,
    /// What the run flagged in it ("media_errors 0 → 2 (+2) FLAGGED").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flagged: Vec<String>,
}

/// `platter drive ID`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriveDetail {
    pub drive: DriveSummary,
    pub sightings: Vec<SightingView>,
    /// Moves to another host or controller and firmware changes, in time order.
    pub events: Vec<String>,
    pub runs: Vec<DriveRun>,
    /// Its first health reading in the store and what changed since; `None` when no run
    /// read its health.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<DriveBaseline>,
}

/// A drive's baseline: the first health reading of it the store has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriveBaseline {
    pub campaign_id: String,
    pub campaign: String,
    pub host: String,
    pub submitted: String,
    pub reading: HealthReading,
    /// The errors and wear that changed from it to the latest reading
    /// ("reallocated_sectors 0 → 12 (+12)").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub since: Vec<String>,
}

impl DriveBaseline {
    /// "2026-12-06 11:00 UTC, drive-health (0193…) on rc66; since: reallocated_sectors 0 → 12
    /// (+12)", or "…; no error or wear changed since".
    pub fn text(&self) -> String {
        let since = if self.since.is_empty() {
            "no error or wear changed since".to_string()
        } else {
            format!("since: {}", self.since.join(", "))
        };
        format!(
            "{}, {} ({}) on {}; {since}",
            self.submitted, self.campaign, self.campaign_id, self.host
        )
    }
}

impl HealthFlag {
    /// "media_errors 0 → 2 (+2): transient: cleared by the next reading".
    pub fn text(&self) -> String {
        format!("{}: {}", self.change, self.state.text())
    }
}

/// A change a run flagged in the drive's health, and what the drive's next reading made of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthFlag {
    pub attribute: String,
    /// "media_errors 0 → 2 (+2)".
    pub change: String,
    pub state: FlagState,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SightingView {
    pub host: String,
    pub path: String,
    pub controller: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pci_address: String,
    pub firmware: String,
    pub size_bytes: u64,
    pub transport: String,
    pub write_cache: String,
    pub first_seen: String,
    pub last_seen: String,
}

/// One run that measured the drive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriveRun {
    pub campaign_id: String,
    pub campaign: String,
    pub state: String,
    pub submitted: String,
    pub host: String,
    pub path: String,
    /// Each cell on the drive: its label and the median of its key metric.
    pub results: Vec<String>,
    pub verdicts: Vec<DriveVerdict>,
    /// Its health over the run, before → after, or why it could not be read.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub health: String,
    /// The changes the run flagged ("media_errors 0 → 2 (+2)").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health_flags: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_after: Option<HealthReading>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub health_unreadable: String,
    /// The drive's model, serial and firmware in this run (the kernel's, else smartctl's).
    pub model: String,
    pub serial: String,
    pub firmware: String,
    /// The run's first reading of the drive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_before: Option<HealthReading>,
    /// Each change the run flagged, transient or sticky by the drive's next reading.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<HealthFlag>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriveVerdict {
    /// The cell, or "serial S1" for a health limit.
    pub cell: String,
    pub threshold: String,
    pub pass: bool,
    /// "measured 2.61 ms", "measured 0 → 2".
    pub measured: String,
}

/// `platter qualification MODEL`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Qualification {
    pub model: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub firmware: String,
    /// The drives of the model in the ledger (with the firmware asked, in a run).
    pub drives: usize,
    /// Of those, the ones some verdict judged.
    pub judged: usize,
    pub passed: usize,
    pub hosts: Vec<String>,
    pub controllers: Vec<String>,
    pub failures: Vec<QualificationFailure>,
    /// Each judged drive: serial, hosts, runs, verdicts passed/failed.
    pub per_drive: Vec<QualifiedDrive>,
    /// Drives of the model no verdict judged, by id.
    pub not_judged: Vec<String>,
    /// The model's drives against their peers (`platter peers`) in a line, and each drive
    /// that stands out: "ID: bs=4k wall ×1.15 (1.08–1.21, 99.97%) 14.7% slower OUTLIER".
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub peers: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peer_outliers: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QualificationFailure {
    pub drive: String,
    pub serial: String,
    pub host: String,
    pub campaign_id: String,
    pub campaign: String,
    pub threshold: String,
    pub measured: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QualifiedDrive {
    pub drive: String,
    pub serial: String,
    pub firmware: String,
    pub hosts: Vec<String>,
    pub runs: usize,
    pub passed: usize,
    pub failed: usize,
}

/// What `platter drives` keeps.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Model, case-insensitive, a part of it.
    pub model: Option<String>,
    pub firmware: Option<String>,
    pub host: Option<String>,
    /// Only drives some verdict failed.
    pub failed: bool,
}

/// A drive's latest health in a few words, for tables (the CLI's and the console's): "44°C,
/// 2 media errors, 0 reallocated, 19% used, flagged: media_errors 0 → 2 (+2)", or why it
/// could not be read, or "—" when no run read it.
pub fn health_words(h: Option<&LatestHealth>) -> String {
    let Some(h) = h else {
        return "—".into();
    };
    let Some(r) = &h.reading else {
        return format!("not readable: {}", h.unreadable);
    };
    let mut parts = Vec::new();
    if let Some(t) = r.temperature_c {
        parts.push(format!("{t}°C"));
    }
    for (v, what) in [
        (r.media_errors, "media errors"),
        (r.reallocated_sectors, "reallocated"),
        (r.pending_sectors, "pending"),
        (r.critical_warning.filter(|w| *w > 0), "critical warning"),
    ] {
        if let Some(v) = v {
            parts.push(format!("{v} {what}"));
        }
    }
    if let Some(p) = r.percentage_used {
        parts.push(format!("{p}% used"));
    }
    if r.passed == Some(false) {
        parts.push("SMART self-assessment FAILED".into());
    }
    if !h.flagged.is_empty() {
        parts.push(format!("flagged: {}", h.flagged.join(", ")));
    }
    if parts.is_empty() {
        "read (no attribute platter follows)".into()
    } else {
        parts.join(", ")
    }
}

/// A question to the ledger, from the CLI or the coordinator's Control service.
#[derive(Debug, Clone)]
pub enum Question {
    Drives(Filter),
    /// A drive by id, serial or WWN.
    Drive(String),
    Qualification {
        model: String,
        firmware: Option<String>,
    },
    /// Each drive of a model against its peers.
    Peers(super::peers::Ask),
}

#[derive(Debug)]
pub enum LedgerError {
    Store(crate::store::error::StoreError),
    /// No such drive, or an id that names several: what to give instead.
    NotFound(String),
}

impl From<crate::store::error::StoreError> for LedgerError {
    fn from(e: crate::store::error::StoreError) -> Self {
        LedgerError::Store(e)
    }
}

/// The ledger's answer to a `Question`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Answer {
    Drives(Vec<DriveSummary>),
    Drive(Box<DriveDetail>),
    Qualification(Box<Qualification>),
    Peers(Box<super::peers::Peers>),
}

impl Answer {
    /// The JSON document `--format json` prints and `/api/v1/drives` answers: a
    /// `DriveSummary` list, a `DriveDetail` or a `Qualification`.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("the ledger's documents serialize")
    }
}

pub fn answer(store: &Store, q: &Question) -> std::result::Result<Answer, LedgerError> {
    super::peers::index_or_say(store);
    Ok(match q {
        Question::Drives(f) => Answer::Drives(drives(store, f)?),
        Question::Drive(id) => {
            let d = find(store, id)?.map_err(LedgerError::NotFound)?;
            Answer::Drive(Box::new(detail(store, &d)?))
        }
        Question::Qualification { model, firmware } => {
            Answer::Qualification(Box::new(qualification(store, model, firmware.as_deref())?))
        }
        Question::Peers(ask) => Answer::Peers(Box::new(super::peers::peers(store, ask)?)),
    })
}

/// A time as the ledger writes it: `2026-12-03 06:12 UTC`.
pub fn utc(unix_ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(unix_ms)
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| unix_ms.to_string())
}

/// The reports the ledger reads, each loaded once per question.
#[derive(Default)]
struct Reports(HashMap<CampaignId, Option<Report>>);

impl Reports {
    fn get(&mut self, store: &Store, id: &CampaignId) -> Result<Option<&Report>> {
        if !self.0.contains_key(id) {
            // A report that cannot be read (a campaign file this build cannot parse any more)
            // leaves its runs without results rather than the ledger without an answer.
            let r = match Report::load(store, id.as_str()) {
                Ok(r) => Some(r),
                Err(e) if crate::store::error::is_store_fault(&e) => return Err(e),
                Err(_) => None,
            };
            self.0.insert(id.clone(), r);
        }
        Ok(self.0.get(id).and_then(Option::as_ref))
    }
}

/// Every drive of the ledger that `filter` keeps.
pub fn drives(store: &Store, filter: &Filter) -> Result<Vec<DriveSummary>> {
    let mut reports = Reports::default();
    let mut out = Vec::new();
    for d in store.ledger()? {
        if let Some(m) = &filter.model {
            if !d.model.to_lowercase().contains(&m.to_lowercase()) {
                continue;
            }
        }
        if let Some(h) = &filter.host {
            if !d.sightings.iter().any(|s| s.host.as_str() == h) {
                continue;
            }
        }
        if let Some(f) = &filter.firmware {
            if !d.sightings.iter().any(|s| &s.firmware == f) {
                continue;
            }
        }
        let runs = runs_of(store, &d, &mut reports)?;
        let summary = summary(&d, &runs);
        if filter.failed && summary.failed == 0 {
            continue;
        }
        out.push(summary);
    }
    Ok(out)
}

/// The drive whose id, serial or WWN is `id`; `Ok(None)` when none is, `Err` text when
/// several are (a serial two models share).
pub fn find(store: &Store, id: &str) -> Result<std::result::Result<LedgerDrive, String>> {
    let all = store.ledger()?;
    let exact: Vec<&LedgerDrive> = all.iter().filter(|d| d.id == id).collect();
    let mut matches: Vec<&LedgerDrive> = if exact.is_empty() {
        all.iter()
            .filter(|d| d.serial == id || (!d.wwn.is_empty() && d.wwn == id))
            .collect()
    } else {
        exact
    };
    if matches.is_empty() && !id.is_empty() {
        // A serial only smartctl read (the kernel names none behind some USB bridges): the
        // drive whose health reading carried it, by its host and path.
        for s in store.drive_snapshots(id, None)? {
            for h in s.facts.health.iter().filter(|h| h.serial == id) {
                let seen_there = |d: &&LedgerDrive| {
                    d.sightings
                        .iter()
                        .any(|x| x.host == s.host && x.path == h.path)
                };
                if let Some(d) = all.iter().find(seen_there) {
                    if !matches.iter().any(|m| m.id == d.id) {
                        matches.push(d);
                    }
                }
            }
        }
    }
    Ok(match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(format!(
            "no drive {id:?} in the ledger (give its id, serial or WWN as `platter drives` lists them)"
        )),
        many => Err(format!(
            "{id:?} names {} drives: {}; give the id",
            many.len(),
            many.iter()
                .map(|d| d.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    })
}

/// One drive's history.
pub fn detail(store: &Store, d: &LedgerDrive) -> Result<DriveDetail> {
    let mut reports = Reports::default();
    let runs = runs_of(store, d, &mut reports)?;
    Ok(DriveDetail {
        drive: summary(d, &runs),
        sightings: d
            .sightings
            .iter()
            .map(|s| SightingView {
                host: s.host.to_string(),
                path: s.path.clone(),
                controller: s.controller.clone(),
                pci_address: s.pci_address.clone(),
                firmware: s.firmware.clone(),
                size_bytes: s.size_bytes,
                transport: s.transport.clone(),
                write_cache: s.write_cache.clone(),
                first_seen: utc(s.first_seen_unix_ms),
                last_seen: utc(s.last_seen_unix_ms),
            })
            .collect(),
        events: events(d),
        baseline: baseline(store, d, &runs)?,
        runs,
    })
}

/// Why the drive is not one record across hosts, or is one seen on two at once: "" for a
/// drive keyed by WWN or model and serial that only ever moved.
fn note(d: &LedgerDrive) -> String {
    if let Some(shared) = d.shared() {
        let hosts: Vec<&str> = shared.hosts.iter().map(|h| h.as_str()).collect();
        return format!(
            "shared or not unique: live on {} at once since {} (dual-ported, multipath, or an identity other drives share); its runs are told apart by host",
            hosts.join(" and "),
            utc(shared.since_unix_ms)
        );
    }
    match (d.identity, d.note.as_str()) {
        // A record from before the ledger said why.
        (Identity::Host, "") => "no serial: tracked per host".into(),
        (_, note) => note.to_string(),
    }
}

/// `d`'s first health reading in the store, and the errors and wear changed since to its
/// latest reading.
fn baseline(store: &Store, d: &LedgerDrive, runs: &[DriveRun]) -> Result<Option<DriveBaseline>> {
    let first = d.sightings.first();
    let by_serial = d.identity != Identity::Host && !d.serial.is_empty();
    let which = crate::store::baseline::WhichDrive {
        serial: if by_serial { &d.serial } else { "" },
        model: &d.model,
        host: first.map_or("", |s| s.host.as_str()),
        path: first.map_or("", |s| s.path.as_str()),
    };
    let Some(b) = store.drive_baseline(which)? else {
        return Ok(None);
    };
    let latest = runs
        .iter()
        .rev()
        .find_map(|r| r.health_after.as_ref().or(r.health_before.as_ref()));
    let since = latest.map_or_else(Vec::new, |now| changed_since(&b.reading, now));
    Ok(Some(DriveBaseline {
        campaign_id: b.campaign_id.to_string(),
        campaign: b.campaign,
        host: b.host.to_string(),
        submitted: utc(b.submitted_unix_ms),
        reading: b.reading,
        since,
    }))
}

/// The errors and wear (attributes with a worse direction) that differ from `then` to `now`.
fn changed_since(then: &HealthReading, now: &HealthReading) -> Vec<String> {
    ATTRIBUTES
        .iter()
        .filter(|a| a.worse != Worse::Neither)
        .filter_map(|a| {
            let (b, x) = (a.of(then)?, a.of(now)?);
            (b != x).then(|| {
                format!(
                    "{} {} → {} ({:+})",
                    a.name,
                    show(b, a.unit),
                    show(x, a.unit),
                    x - b
                )
            })
        })
        .collect()
}

/// Each run's flags, transient or sticky by the drive's next reading: the first reading of
/// the next run that read it. Runs are in time order.
fn classify_flags(runs: &mut [DriveRun]) {
    for i in 0..runs.len() {
        let next = runs[i + 1..]
            .iter()
            .find_map(|r| r.health_before.as_ref().or(r.health_after.as_ref()))
            .cloned();
        let run = &mut runs[i];
        for f in &mut run.flags {
            let Some(a) = attribute(&f.attribute) else {
                continue;
            };
            let before = run.health_before.as_ref().and_then(|r| a.of(r));
            f.state = flag_state(a, before, next.as_ref().and_then(|r| a.of(r)));
        }
    }
}

/// Moves and firmware changes, from one sighting to the next in time order. A move is a
/// drive gone from one host before another saw it; one live on two at once did not move
/// (`note` says it is shared or not unique).
fn events(d: &LedgerDrive) -> Vec<String> {
    let mut s: Vec<_> = d.sightings.iter().collect();
    s.sort_by_key(|s| (s.first_seen_unix_ms, s.last_seen_unix_ms));
    let shared = d.shared().is_some();
    let mut out = Vec::new();
    for w in s.windows(2) {
        let (a, b) = (w[0], w[1]);
        let when = utc(b.first_seen_unix_ms);
        if a.host != b.host {
            if shared {
                continue;
            }
            out.push(format!(
                "{when}: moved from {} ({}) to {} ({})",
                a.host,
                place(&a.controller, &a.pci_address, &a.path),
                b.host,
                place(&b.controller, &b.pci_address, &b.path)
            ));
        } else if a.controller != b.controller || a.pci_address != b.pci_address {
            out.push(format!(
                "{when}: on {} moved from {} to {}",
                b.host,
                place(&a.controller, &a.pci_address, &a.path),
                place(&b.controller, &b.pci_address, &b.path)
            ));
        }
        if a.firmware != b.firmware {
            out.push(format!(
                "{when}: firmware {} → {} (on {})",
                or_none(&a.firmware),
                or_none(&b.firmware),
                b.host
            ));
        }
    }
    out
}

fn place(controller: &str, pci: &str, path: &str) -> String {
    let mut t = path.to_string();
    if !controller.is_empty() {
        t.push_str(&format!(" behind {controller}"));
    }
    if !pci.is_empty() {
        t.push_str(&format!(" at {pci}"));
    }
    t
}

fn or_none(s: &str) -> &str {
    if s.is_empty() {
        "(none)"
    } else {
        s
    }
}

fn summary(d: &LedgerDrive, runs: &[DriveRun]) -> DriveSummary {
    let mut hosts: Vec<String> = Vec::new();
    let mut controllers: Vec<String> = Vec::new();
    for s in &d.sightings {
        if !hosts.contains(&s.host.to_string()) {
            hosts.push(s.host.to_string());
        }
        if !controllers.contains(&s.controller) {
            controllers.push(s.controller.clone());
        }
    }
    let latest = d.sightings.iter().max_by_key(|s| s.last_seen_unix_ms);
    let verdicts = runs.iter().flat_map(|r| &r.verdicts);
    let health = runs
        .iter()
        .rev()
        .find(|r| r.health_after.is_some() || !r.health_unreadable.is_empty())
        .map(|r| LatestHealth {
            campaign_id: r.campaign_id.clone(),
            unreadable: r.health_unreadable.clone(),
            reading: r.health_after.clone(),
            flagged: r.health_flags.clone(),
        });
    DriveSummary {
        id: d.id.clone(),
        identity: d.identity.as_str().into(),
        model: d.model.clone(),
        serial: d.serial.clone(),
        wwn: d.wwn.clone(),
        firmware: latest.map(|s| s.firmware.clone()).unwrap_or_default(),
        hosts,
        controllers,
        first_seen: utc(d.first_seen_unix_ms),
        last_seen: utc(d.last_seen_unix_ms),
        note: note(d),
        runs: runs.len(),
        passed: verdicts.clone().filter(|v| v.pass).count(),
        failed: verdicts.filter(|v| !v.pass).count(),
        health,
    }
}

/// The runs that measured `d`: the runs whose snapshots read its health (its serial, or its
/// path on its host when it has none), or whose cells name it as their device.
fn runs_of(store: &Store, d: &LedgerDrive, reports: &mut Reports) -> Result<Vec<DriveRun>> {
    let first = d.sightings.first();
    let host_and_path = first.map(|s| (s.host.as_str(), s.path.as_str()));
    let serial = if d.identity == Identity::Host || d.serial.is_empty() {
        ""
    } else {
        d.serial.as_str()
    };
    let snaps = store.drive_snapshots(serial, host_and_path)?;
    // The runs whose results name it (`drive_results`, written once a campaign is done,
    // `peers::index` at each question's start): runs on the raw device, without storage
    // made on it or its health read, count too.
    let measured: std::collections::HashSet<(CampaignId, String)> = store
        .drive_results(&d.id)?
        .into_iter()
        .map(|r| (r.campaign_id, r.host))
        .collect();
    // (campaign, host) in the order of the runs.
    let mut groups: Vec<(CampaignId, String)> = Vec::new();
    for s in &snaps {
        let key = (s.campaign_id.clone(), s.host.to_string());
        if !groups.contains(&key) {
            groups.push(key);
        }
    }
    // The drive in a snapshot: by its path on its host when it has no serial, else by serial
    // and model (two models may share a serial; smartctl may know a model the kernel does not).
    let is_it = |model_seen: &str, serial_seen: &str, path_seen: &str, host: &str| {
        if d.identity == Identity::Host || d.serial.is_empty() {
            host_and_path.is_some_and(|(h, p)| h == host && p == path_seen)
        } else {
            serial_seen == d.serial
                && (model_seen == d.model || model_seen.is_empty() || d.model.is_empty())
        }
    };
    let mut out = Vec::new();
    for (campaign_id, host) in groups {
        let group: Vec<_> = snaps
            .iter()
            .filter(|s| s.campaign_id == campaign_id && s.host.as_str() == host)
            .collect();
        // Its name and path on that host in that run, and its firmware then.
        let device = group
            .iter()
            .flat_map(|s| &s.facts.devices)
            .find(|f| is_it(&f.device.model, &f.device.serial, &f.device.path, &host))
            .map(|f| &f.device);
        let under_test_health = group
            .iter()
            .flat_map(|s| &s.facts.health)
            .any(|h| is_it(&h.model, &h.serial, &h.path, &host));
        // A plan's first snapshot lists every drive of its host; the drives it measured are
        // the ones its storage was made on (their own snapshot) or whose health it read. Only
        // those runs' reports are read.
        let storage_on_it = group.iter().any(|s| {
            s.facts.trigger == platter_proto::provenance::AT_STORAGE_SETUP
                && s.facts
                    .devices
                    .iter()
                    .any(|f| is_it(&f.device.model, &f.device.serial, &f.device.path, &host))
        });
        let results_name_it = measured.contains(&(campaign_id.clone(), host.clone()));
        if !under_test_health && !storage_on_it && !results_name_it {
            continue;
        }
        let Some(report) = reports.get(store, &campaign_id)? else {
            continue;
        };
        let (name, path) = match device {
            Some(dev) => (dev.name.clone(), dev.path.clone()),
            None => (String::new(), String::new()),
        };
        let on_it = |device: Option<&str>| match device {
            Some(x) => !name.is_empty() && (x == name || x == path),
            None => under_test_health,
        };
        let cells: Vec<_> = report
            .cells
            .iter()
            .filter(|c| c.host == host && on_it(c.device()))
            .collect();
        if cells.is_empty() && !under_test_health {
            continue;
        }
        let results = cells
            .iter()
            .filter_map(|c| {
                let m = c
                    .metrics
                    .iter()
                    .find(|m| m.metric == "wall")
                    .or(c.metrics.first())?;
                let label: Vec<String> =
                    c.configuration().map(|(k, v)| format!("{k}={v}")).collect();
                Some(format!(
                    "[{}] {} median {} (n={})",
                    label.join(" "),
                    m.metric,
                    human(m.stats.median, &m.unit),
                    m.stats.n
                ))
            })
            .collect();
        let health = report
            .health
            .iter()
            .find(|h| h.host == host && is_it(&h.model, &h.serial, &h.path, &host));
        let under_test_here = report.health.iter().filter(|h| h.host == host).count();
        let verdicts = report
            .verdicts
            .iter()
            .filter(|v| {
                v.host == host
                    && if v.device.is_empty() {
                        under_test_health && under_test_here == 1
                    } else {
                        on_it(Some(v.device.as_str())) || health.is_some_and(|h| v.device == h.path)
                    }
            })
            .map(|v| DriveVerdict {
                cell: v.cell.clone(),
                threshold: v.threshold.clone(),
                pass: v.pass,
                measured: match v.value {
                    _ if !v.measured.is_empty() => format!("measured {}", v.measured),
                    Some(x) => format!("measured {}", human(x, &v.unit)),
                    None => "not measured".into(),
                },
            })
            .collect();
        let first_snap = group.first().expect("a group has a snapshot");
        out.push(DriveRun {
            campaign_id: campaign_id.to_string(),
            campaign: first_snap.campaign.clone(),
            state: first_snap.state.clone(),
            submitted: utc(first_snap.created_unix_ms),
            host: host.clone(),
            path: health
                .map(|h| h.path.clone())
                .or(device.map(|d| d.path.clone()))
                .unwrap_or_default(),
            results,
            verdicts,
            health: health.map(|h| h.readings_text(true)).unwrap_or_default(),
            health_flags: health.map(|h| h.flags()).unwrap_or_default(),
            health_after: health.and_then(|h| h.after.clone().or(h.before.clone())),
            health_unreadable: health
                .filter(|h| h.before.is_none())
                .map(|h| h.unreadable.clone())
                .unwrap_or_default(),
            model: seen(device.map(|d| &d.model), health.map(|h| &h.model)),
            serial: seen(device.map(|d| &d.serial), health.map(|h| &h.serial)),
            firmware: seen(device.map(|d| &d.firmware), health.map(|h| &h.firmware)),
            health_before: health.and_then(|h| h.before.clone()),
            flags: health
                .map(|h| {
                    h.deltas
                        .iter()
                        .filter(|x| x.flagged)
                        .map(|x| HealthFlag {
                            attribute: x.attribute.to_string(),
                            change: x.change_text(),
                            state: FlagState::Unconfirmed,
                        })
                        .collect()
                })
                .unwrap_or_default(),
        });
    }
    classify_flags(&mut out);
    Ok(out)
}

/// The kernel's word for a drive's model, serial or firmware, else smartctl's.
fn seen(kernel: Option<&String>, smartctl: Option<&String>) -> String {
    kernel
        .filter(|s| !s.is_empty())
        .or(smartctl)
        .cloned()
        .unwrap_or_default()
}

/// A model's qualification over the ledger: every drive of it (with `firmware` in the run,
/// when given) that a verdict judged, where, and every failure with its campaign.
pub fn qualification(store: &Store, model: &str, firmware: Option<&str>) -> Result<Qualification> {
    let mut reports = Reports::default();
    let mut q = Qualification {
        model: model.to_string(),
        firmware: firmware.unwrap_or_default().to_string(),
        drives: 0,
        judged: 0,
        passed: 0,
        hosts: Vec::new(),
        controllers: Vec::new(),
        failures: Vec::new(),
        per_drive: Vec::new(),
        not_judged: Vec::new(),
        peers: String::new(),
        peer_outliers: Vec::new(),
    };
    let (mut hosts, mut controllers) = (BTreeSet::new(), BTreeSet::new());
    for d in store.ledger()? {
        // The ledger's model is the kernel's; a drive the kernel names no model for (behind
        // some USB bridges) is the model smartctl read in its runs.
        let maybe = d.model.is_empty() || d.model.eq_ignore_ascii_case(model);
        if !maybe {
            continue;
        }
        let runs: Vec<DriveRun> = runs_of(store, &d, &mut reports)?
            .into_iter()
            .filter(|r| r.model.eq_ignore_ascii_case(model))
            .filter(|r| firmware.is_none_or(|f| r.firmware == f))
            .collect();
        if runs.is_empty() && (d.model.is_empty() || firmware.is_some()) {
            continue;
        }
        q.drives += 1;
        let judged: Vec<&DriveRun> = runs.iter().filter(|r| !r.verdicts.is_empty()).collect();
        if judged.is_empty() {
            q.not_judged.push(d.id.clone());
            continue;
        }
        q.judged += 1;
        let mut drive_hosts = Vec::new();
        for r in &judged {
            hosts.insert(r.host.clone());
            if !drive_hosts.contains(&r.host) {
                drive_hosts.push(r.host.clone());
            }
            for s in d.sightings.iter().filter(|s| s.host.as_str() == r.host) {
                controllers.insert(if s.controller.is_empty() {
                    "(none)".to_string()
                } else {
                    s.controller.clone()
                });
            }
            for v in r.verdicts.iter().filter(|v| !v.pass) {
                q.failures.push(QualificationFailure {
                    drive: d.id.clone(),
                    serial: r.serial.clone(),
                    host: r.host.clone(),
                    campaign_id: r.campaign_id.clone(),
                    campaign: r.campaign.clone(),
                    threshold: v.threshold.clone(),
                    measured: v.measured.clone(),
                });
            }
        }
        let verdicts = judged.iter().flat_map(|r| &r.verdicts);
        let failed = verdicts.clone().filter(|v| !v.pass).count();
        if failed == 0 {
            q.passed += 1;
        }
        q.per_drive.push(QualifiedDrive {
            drive: d.id.clone(),
            serial: judged.last().map(|r| r.serial.clone()).unwrap_or_default(),
            firmware: judged
                .last()
                .map(|r| r.firmware.clone())
                .unwrap_or_default(),
            hosts: drive_hosts,
            runs: judged.len(),
            passed: verdicts.clone().filter(|v| v.pass).count(),
            failed,
        });
    }
    q.hosts = hosts.into_iter().collect();
    q.controllers = controllers.into_iter().collect();
    let peers = super::peers::peers(
        store,
        &super::peers::Ask {
            model: model.to_string(),
            firmware: firmware.map(str::to_string),
            ..Default::default()
        },
    )?;
    if !peers.groups.is_empty() {
        q.peers = peers.headline();
    }
    q.peer_outliers = peers
        .groups
        .iter()
        .flat_map(|g| {
            g.drives.iter().filter(|d| d.outlier).map(move |d| {
                format!(
                    "{}: {} {} {}",
                    d.drive,
                    g.configuration,
                    g.metric,
                    d.standing_text()
                )
            })
        })
        .collect();
    Ok(q)
}

impl Qualification {
    /// "qualified on 11 of 12 drives across 4 hosts and 2 controller types; 1 FAIL (serial …,
    /// campaign …, latency.p99 < 2ms: measured 2.61 ms)".
    pub fn headline(&self) -> String {
        let firmware = if self.firmware.is_empty() {
            String::new()
        } else {
            format!(" firmware {}", self.firmware)
        };
        let peers = if self.peer_outliers.is_empty() {
            String::new()
        } else {
            format!(
                "; {} peer outlier(s): slower than the model's other drives (platter peers)",
                self.peer_outliers.len()
            )
        };
        if self.judged == 0 {
            return format!(
                "{}{firmware}: not qualified: {} drive(s) in the ledger, none judged by a verdict (a campaign with `report: {{ qualify }}`){peers}",
                self.model, self.drives
            );
        }
        let failed = self.judged - self.passed;
        let mut t = format!(
            "{}{firmware}: qualified on {} of {} judged drive(s) across {} host(s) and {} controller type(s)",
            self.model,
            self.passed,
            self.judged,
            self.hosts.len(),
            self.controllers.len()
        );
        if failed > 0 {
            const SHOWN: usize = 5;
            let mut shown: Vec<String> = self
                .failures
                .iter()
                .take(SHOWN)
                .map(|f| {
                    format!(
                        "serial {}, campaign {} ({}) on {}, {}: {}",
                        or_none(&f.serial),
                        f.campaign,
                        f.campaign_id,
                        f.host,
                        f.threshold,
                        f.measured
                    )
                })
                .collect();
            if self.failures.len() > SHOWN {
                shown.push(format!(
                    "{} more failed verdict(s): --format json lists them",
                    self.failures.len() - SHOWN
                ));
            }
            t.push_str(&format!("; {failed} drive(s) FAIL ({})", shown.join("; ")));
        }
        if !self.not_judged.is_empty() {
            t.push_str(&format!(
                "; {} drive(s) of the model not judged",
                self.not_judged.len()
            ));
        }
        t.push_str(&peers);
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(before: HealthReading, after: HealthReading, flagged: &[&str]) -> DriveRun {
        DriveRun {
            campaign_id: "c".into(),
            campaign: "c".into(),
            state: "done".into(),
            submitted: String::new(),
            host: "h".into(),
            path: "/dev/sdb".into(),
            results: Vec::new(),
            verdicts: Vec::new(),
            health: String::new(),
            health_flags: Vec::new(),
            health_after: Some(after),
            health_unreadable: String::new(),
            model: String::new(),
            serial: String::new(),
            firmware: String::new(),
            health_before: Some(before),
            flags: flagged
                .iter()
                .map(|a| HealthFlag {
                    attribute: a.to_string(),
                    change: String::new(),
                    state: FlagState::Unconfirmed,
                })
                .collect(),
        }
    }

    fn reading(pending: u64, media: u64) -> HealthReading {
        HealthReading {
            pending_sectors: Some(pending),
            media_errors: Some(media),
            ..HealthReading::default()
        }
    }

    /// Pending sectors that the next run finds remapped are transient; media errors that
    /// stay are sticky; the last run's flags wait for a reading; a run without health in
    /// between is passed over.
    #[test]
    fn each_runs_flags_are_judged_by_the_next_reading_of_the_drive() {
        let mut runs = vec![
            run(
                reading(0, 0),
                reading(4, 2),
                &["pending_sectors", "media_errors"],
            ),
            DriveRun {
                health_before: None,
                health_after: None,
                flags: Vec::new(),
                ..run(reading(0, 0), reading(0, 0), &[])
            },
            run(reading(0, 2), reading(0, 3), &["media_errors"]),
        ];
        classify_flags(&mut runs);
        let states: Vec<Vec<(&str, FlagState)>> = runs
            .iter()
            .map(|r| {
                r.flags
                    .iter()
                    .map(|f| (f.attribute.as_str(), f.state))
                    .collect()
            })
            .collect();
        assert_eq!(
            states,
            [
                vec![
                    ("pending_sectors", FlagState::Transient),
                    ("media_errors", FlagState::Sticky)
                ],
                vec![],
                vec![("media_errors", FlagState::Unconfirmed)],
            ]
        );
        assert_eq!(
            changed_since(&reading(0, 0), &reading(0, 3)),
            ["media_errors 0 → 3 (+3)"]
        );
    }
}
