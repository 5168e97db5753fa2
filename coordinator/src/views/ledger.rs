//! The drive ledger on the wire (`Ledger`): the question as a `LedgerQuestion`, the answer
//! as `LedgerDrives`, `DriveDetail` or `Qualification` messages, and back into
//! `report::ledger`'s types, which the CLI and the console print.

use platter_proto::v1 as pb;
use platter_proto::wire::{reading_from_wire, reading_to_wire};

use crate::report::health::FlagState;
use crate::report::ledger::{
    Answer, DriveBaseline, DriveDetail, DriveRun, DriveSummary, DriveVerdict, Filter, HealthFlag,
    LatestHealth, Qualification, QualificationFailure, QualifiedDrive, Question, SightingView,
};
use crate::report::peers::{PeerDrive, PeerGroup, Peers};
use crate::stats::peers::Standing;
use crate::store::ledger::Identity;
use crate::store::CampaignState;

/// The request that asks `q`, in its enum and in the words an older coordinator reads.
pub fn ledger_request(q: &Question) -> pb::LedgerRequest {
    let mut req = pb::LedgerRequest::default();
    let kind = match q {
        Question::Drives(f) => {
            req.model = f.model.clone().unwrap_or_default();
            req.firmware = f.firmware.clone();
            req.host = f.host.clone().unwrap_or_default();
            req.failed = f.failed;
            pb::LedgerQuestion::Drives
        }
        Question::Drive(id) => {
            req.id = id.clone();
            pb::LedgerQuestion::Drive
        }
        Question::Qualification { model, firmware } => {
            req.model = model.clone();
            req.firmware = firmware.clone();
            pb::LedgerQuestion::Qualification
        }
        Question::Peers(ask) => {
            req.model = ask.model.clone();
            req.firmware = ask.firmware.clone();
            req.metric = ask.metric.clone().unwrap_or_default();
            req.series = ask.series.clone().unwrap_or_default();
            req.max_slower_pct = ask.max_slower_pct;
            pb::LedgerQuestion::Peers
        }
    };
    req.question = question_word(kind).into();
    req.kind = kind as i32;
    req
}

fn question_word(kind: pb::LedgerQuestion) -> &'static str {
    match kind {
        pb::LedgerQuestion::Drives => "drives",
        pb::LedgerQuestion::Drive => "drive",
        pb::LedgerQuestion::Qualification => "qualification",
        pb::LedgerQuestion::Peers => "peers",
        pb::LedgerQuestion::Unspecified => "",
    }
}

/// The question a request asks: its enum, else (an older client) its words; why not, for
/// a request that asks none this build knows.
pub fn question_of(req: pb::LedgerRequest) -> Result<Question, String> {
    let kind = match pb::LedgerQuestion::try_from(req.kind) {
        Ok(pb::LedgerQuestion::Unspecified) => match req.question.as_str() {
            "drives" => pb::LedgerQuestion::Drives,
            "drive" => pb::LedgerQuestion::Drive,
            "qualification" => pb::LedgerQuestion::Qualification,
            "peers" => pb::LedgerQuestion::Peers,
            other => {
                return Err(format!(
                    "no ledger question {other:?}: drives, drive, qualification or peers"
                ))
            }
        },
        Ok(kind) => kind,
        Err(_) => return Err(format!("no ledger question number {}", req.kind)),
    };
    Ok(match kind {
        pb::LedgerQuestion::Drive => Question::Drive(req.id),
        pb::LedgerQuestion::Qualification => Question::Qualification {
            model: req.model,
            firmware: req.firmware,
        },
        pb::LedgerQuestion::Peers => Question::Peers(crate::report::peers::Ask {
            model: req.model,
            firmware: req.firmware,
            metric: Some(req.metric).filter(|m| !m.is_empty()),
            series: Some(req.series).filter(|s| !s.is_empty()),
            max_slower_pct: req.max_slower_pct,
        }),
        _ => Question::Drives(Filter {
            model: Some(req.model).filter(|m| !m.is_empty()),
            firmware: req.firmware,
            host: Some(req.host).filter(|h| !h.is_empty()),
            failed: req.failed,
        }),
    })
}

/// The ledger's answer on the wire: the message, and the JSON document older clients read.
pub fn ledger_to_pb(a: &Answer) -> pb::LedgerResponse {
    use pb::ledger_response::Answer as A;
    let answer = match a {
        Answer::Drives(drives) => A::Drives(pb::LedgerDrives {
            drives: drives.iter().map(summary_to_pb).collect(),
        }),
        Answer::Drive(d) => A::Drive(detail_to_pb(d)),
        Answer::Qualification(q) => A::Qualification(qualification_to_pb(q)),
        Answer::Peers(p) => A::Peers(peers_to_pb(p)),
    };
    pb::LedgerResponse {
        json: a.to_json(),
        answer: Some(answer),
    }
}

/// The answer a coordinator gave to `q`: its message, or the JSON document of a
/// coordinator older than the message (COMPATIBILITY.md).
pub fn ledger_of(r: pb::LedgerResponse, q: &Question) -> Result<Answer, serde_json::Error> {
    use pb::ledger_response::Answer as A;
    Ok(match r.answer {
        Some(A::Drives(d)) => Answer::Drives(d.drives.into_iter().map(summary_of).collect()),
        Some(A::Drive(d)) => Answer::Drive(Box::new(detail_of(d))),
        Some(A::Qualification(q)) => Answer::Qualification(Box::new(qualification_of(q))),
        Some(A::Peers(p)) => Answer::Peers(Box::new(peers_of(p))),
        None => match q {
            Question::Drives(_) => Answer::Drives(serde_json::from_str(&r.json)?),
            Question::Drive(_) => Answer::Drive(serde_json::from_str(&r.json)?),
            Question::Qualification { .. } => Answer::Qualification(serde_json::from_str(&r.json)?),
            Question::Peers(_) => Answer::Peers(serde_json::from_str(&r.json)?),
        },
    })
}

/// The ledger's identities and their enum values; the words are `Identity::as_str`'s.
const IDENTITIES: [(Identity, pb::DriveIdentity); 3] = [
    (Identity::Wwn, pb::DriveIdentity::Wwn),
    (Identity::Serial, pb::DriveIdentity::Serial),
    (Identity::Host, pb::DriveIdentity::Host),
];

fn identity_to_pb(word: &str) -> pb::DriveIdentity {
    IDENTITIES
        .iter()
        .find(|(i, _)| i.as_str() == word)
        .map_or(pb::DriveIdentity::Unspecified, |(_, p)| *p)
}

/// The ledger's word for an identity; one a later coordinator added reads as "unknown".
fn identity_word(identity: i32) -> String {
    IDENTITIES
        .iter()
        .find(|(_, p)| *p as i32 == identity)
        .map_or("unknown", |(i, _)| i.as_str())
        .into()
}

fn count(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn summary_to_pb(d: &DriveSummary) -> pb::DriveSummary {
    pb::DriveSummary {
        id: d.id.clone(),
        identity: identity_to_pb(&d.identity) as i32,
        model: d.model.clone(),
        serial: d.serial.clone(),
        wwn: d.wwn.clone(),
        firmware: d.firmware.clone(),
        hosts: d.hosts.clone(),
        controllers: d.controllers.clone(),
        first_seen: d.first_seen.clone(),
        last_seen: d.last_seen.clone(),
        note: d.note.clone(),
        runs: d.runs as u64,
        passed: d.passed as u64,
        failed: d.failed as u64,
        health: d.health.as_ref().map(|h| pb::LatestHealth {
            campaign_id: h.campaign_id.clone(),
            unreadable: h.unreadable.clone(),
            reading: h.reading.as_ref().map(reading_to_wire),
            flagged: h.flagged.clone(),
        }),
    }
}

fn summary_of(d: pb::DriveSummary) -> DriveSummary {
    DriveSummary {
        id: d.id,
        identity: identity_word(d.identity),
        model: d.model,
        serial: d.serial,
        wwn: d.wwn,
        firmware: d.firmware,
        hosts: d.hosts,
        controllers: d.controllers,
        first_seen: d.first_seen,
        last_seen: d.last_seen,
        note: d.note,
        runs: count(d.runs),
        passed: count(d.passed),
        failed: count(d.failed),
        health: d.health.map(|h| LatestHealth {
            campaign_id: h.campaign_id,
            unreadable: h.unreadable,
            reading: h.reading.map(reading_from_wire),
            flagged: h.flagged,
        }),
    }
}

fn detail_to_pb(d: &DriveDetail) -> pb::DriveDetail {
    pb::DriveDetail {
        drive: Some(summary_to_pb(&d.drive)),
        sightings: d
            .sightings
            .iter()
            .map(|s| pb::DriveSighting {
                host: s.host.clone(),
                path: s.path.clone(),
                controller: s.controller.clone(),
                pci_address: s.pci_address.clone(),
                firmware: s.firmware.clone(),
                size_bytes: s.size_bytes,
                transport: s.transport.clone(),
                write_cache: s.write_cache.clone(),
                first_seen: s.first_seen.clone(),
                last_seen: s.last_seen.clone(),
            })
            .collect(),
        events: d.events.clone(),
        runs: d.runs.iter().map(run_to_pb).collect(),
        baseline: d.baseline.as_ref().map(|b| pb::DriveBaseline {
            campaign_id: b.campaign_id.clone(),
            campaign: b.campaign.clone(),
            host: b.host.clone(),
            submitted: b.submitted.clone(),
            reading: Some(reading_to_wire(&b.reading)),
            since: b.since.clone(),
        }),
    }
}

/// The flag states and their enum values.
const FLAG_STATES: [(FlagState, pb::HealthFlagState); 3] = [
    (FlagState::Transient, pb::HealthFlagState::Transient),
    (FlagState::Sticky, pb::HealthFlagState::Sticky),
    (FlagState::Unconfirmed, pb::HealthFlagState::Unconfirmed),
];

fn flag_to_pb(f: &HealthFlag) -> pb::HealthFlag {
    let state = FLAG_STATES
        .iter()
        .find(|(s, _)| *s == f.state)
        .map_or(pb::HealthFlagState::Unspecified, |(_, p)| *p);
    pb::HealthFlag {
        attribute: f.attribute.clone(),
        change: f.change.clone(),
        state: state as i32,
    }
}

/// A flag's state; one a later coordinator added reads as unconfirmed.
fn flag_of(f: pb::HealthFlag) -> HealthFlag {
    let state = FLAG_STATES
        .iter()
        .find(|(_, p)| *p as i32 == f.state)
        .map_or(FlagState::Unconfirmed, |(s, _)| *s);
    HealthFlag {
        attribute: f.attribute,
        change: f.change,
        state,
    }
}

fn detail_of(d: pb::DriveDetail) -> DriveDetail {
    DriveDetail {
        drive: summary_of(d.drive.unwrap_or_default()),
        sightings: d
            .sightings
            .into_iter()
            .map(|s| SightingView {
                host: s.host,
                path: s.path,
                controller: s.controller,
                pci_address: s.pci_address,
                firmware: s.firmware,
                size_bytes: s.size_bytes,
                transport: s.transport,
                write_cache: s.write_cache,
                first_seen: s.first_seen,
                last_seen: s.last_seen,
            })
            .collect(),
        events: d.events,
        runs: d.runs.into_iter().map(run_of).collect(),
        baseline: d.baseline.map(|b| DriveBaseline {
            campaign_id: b.campaign_id,
            campaign: b.campaign,
            host: b.host,
            submitted: b.submitted,
            reading: b.reading.map(reading_from_wire).unwrap_or_default(),
            since: b.since,
        }),
    }
}

fn run_to_pb(r: &DriveRun) -> pb::DriveRun {
    let state = match CampaignState::from(r.state.clone()) {
        CampaignState::Running => pb::CampaignState::Running,
        CampaignState::Done => pb::CampaignState::Done,
        CampaignState::Cancelled => pb::CampaignState::Cancelled,
        CampaignState::Other(_) => pb::CampaignState::Unspecified,
    };
    pb::DriveRun {
        campaign_id: r.campaign_id.clone(),
        campaign: r.campaign.clone(),
        state: state as i32,
        submitted: r.submitted.clone(),
        host: r.host.clone(),
        path: r.path.clone(),
        results: r.results.clone(),
        verdicts: r
            .verdicts
            .iter()
            .map(|v| pb::DriveVerdict {
                cell: v.cell.clone(),
                threshold: v.threshold.clone(),
                pass: v.pass,
                measured: v.measured.clone(),
            })
            .collect(),
        health: r.health.clone(),
        health_flags: r.health_flags.clone(),
        health_after: r.health_after.as_ref().map(reading_to_wire),
        health_unreadable: r.health_unreadable.clone(),
        model: r.model.clone(),
        serial: r.serial.clone(),
        firmware: r.firmware.clone(),
        health_before: r.health_before.as_ref().map(reading_to_wire),
        flags: r.flags.iter().map(flag_to_pb).collect(),
    }
}

fn run_of(r: pb::DriveRun) -> DriveRun {
    DriveRun {
        campaign_id: r.campaign_id,
        campaign: r.campaign,
        // A state this CLI does not know reads as "?", as `platter status` shows it.
        state: super::state_name(r.state).into(),
        submitted: r.submitted,
        host: r.host,
        path: r.path,
        results: r.results,
        verdicts: r
            .verdicts
            .into_iter()
            .map(|v| DriveVerdict {
                cell: v.cell,
                threshold: v.threshold,
                pass: v.pass,
                measured: v.measured,
            })
            .collect(),
        health: r.health,
        health_flags: r.health_flags,
        health_after: r.health_after.map(reading_from_wire),
        health_unreadable: r.health_unreadable,
        model: r.model,
        serial: r.serial,
        firmware: r.firmware,
        health_before: r.health_before.map(reading_from_wire),
        flags: r.flags.into_iter().map(flag_of).collect(),
    }
}

fn qualification_to_pb(q: &Qualification) -> pb::Qualification {
    pb::Qualification {
        model: q.model.clone(),
        firmware: q.firmware.clone(),
        drives: q.drives as u64,
        judged: q.judged as u64,
        passed: q.passed as u64,
        hosts: q.hosts.clone(),
        controllers: q.controllers.clone(),
        failures: q
            .failures
            .iter()
            .map(|f| pb::QualificationFailure {
                drive: f.drive.clone(),
                serial: f.serial.clone(),
                host: f.host.clone(),
                campaign_id: f.campaign_id.clone(),
                campaign: f.campaign.clone(),
                threshold: f.threshold.clone(),
                measured: f.measured.clone(),
            })
            .collect(),
        per_drive: q
            .per_drive
            .iter()
            .map(|d| pb::QualifiedDrive {
                drive: d.drive.clone(),
                serial: d.serial.clone(),
                firmware: d.firmware.clone(),
                hosts: d.hosts.clone(),
                runs: d.runs as u64,
                passed: d.passed as u64,
                failed: d.failed as u64,
            })
            .collect(),
        not_judged: q.not_judged.clone(),
        peers: q.peers.clone(),
        peer_outliers: q.peer_outliers.clone(),
    }
}

fn qualification_of(q: pb::Qualification) -> Qualification {
    Qualification {
        model: q.model,
        firmware: q.firmware,
        drives: count(q.drives),
        judged: count(q.judged),
        passed: count(q.passed),
        hosts: q.hosts,
        controllers: q.controllers,
        failures: q
            .failures
            .into_iter()
            .map(|f| QualificationFailure {
                drive: f.drive,
                serial: f.serial,
                host: f.host,
                campaign_id: f.campaign_id,
                campaign: f.campaign,
                threshold: f.threshold,
                measured: f.measured,
            })
            .collect(),
        per_drive: q
            .per_drive
            .into_iter()
            .map(|d| QualifiedDrive {
                drive: d.drive,
                serial: d.serial,
                firmware: d.firmware,
                hosts: d.hosts,
                runs: count(d.runs),
                passed: count(d.passed),
                failed: count(d.failed),
            })
            .collect(),
        not_judged: q.not_judged,
        peers: q.peers,
        peer_outliers: q.peer_outliers,
    }
}

fn interval_to_pb((lo, hi): (f64, f64)) -> pb::Interval {
    pb::Interval { lo, hi }
}

fn interval_of(i: Option<pb::Interval>) -> (f64, f64) {
    i.map_or((f64::NAN, f64::NAN), |i| (i.lo, i.hi))
}

fn peers_to_pb(p: &Peers) -> pb::Peers {
    pb::Peers {
        model: p.model.clone(),
        firmware: p.firmware.clone(),
        series: p.series.clone(),
        max_slower_pct: p.max_slower_pct,
        alpha: p.alpha,
        groups: p
            .groups
            .iter()
            .map(|g| pb::PeerGroup {
                firmware: g.firmware.clone(),
                workload: g.workload.clone(),
                configuration: g.configuration.clone(),
                metric: g.metric.clone(),
                unit: g.unit.clone(),
                state: g.state.clone(),
                median: g.median,
                band: Some(interval_to_pb(g.band)),
                not_judged: g.not_judged.clone(),
                controllers: g.controllers.clone(),
                drives: g
                    .drives
                    .iter()
                    .map(|d| pb::PeerDrive {
                        drive: d.drive.clone(),
                        hosts: d.hosts.clone(),
                        controller: d.controller.clone(),
                        runs: d.runs.clone(),
                        median: d.median,
                        ci: d.ci.map(interval_to_pb),
                        standing: d.standing.as_ref().map(|s| pb::PeerStanding {
                            ratio: s.ratio,
                            ci: Some(interval_to_pb(s.ci)),
                            level: s.level,
                            p: s.p,
                            p_holm: s.p_holm,
                            significant: s.significant,
                            runs: s.runs as u64,
                            peer_runs: s.peer_runs as u64,
                        }),
                        slower_pct: d.slower_pct,
                        outlier: d.outlier,
                    })
                    .collect(),
                not_compared: g.not_compared.clone(),
            })
            .collect(),
    }
}

fn peers_of(p: pb::Peers) -> Peers {
    Peers {
        model: p.model,
        firmware: p.firmware,
        series: p.series,
        max_slower_pct: p.max_slower_pct,
        alpha: p.alpha,
        groups: p
            .groups
            .into_iter()
            .map(|g| PeerGroup {
                firmware: g.firmware,
                workload: g.workload,
                configuration: g.configuration,
                metric: g.metric,
                unit: g.unit,
                state: g.state,
                median: g.median,
                band: interval_of(g.band),
                not_judged: g.not_judged,
                controllers: g.controllers,
                drives: g
                    .drives
                    .into_iter()
                    .map(|d| PeerDrive {
                        drive: d.drive,
                        hosts: d.hosts,
                        controller: d.controller,
                        runs: d.runs,
                        median: d.median,
                        ci: d.ci.map(|i| (i.lo, i.hi)),
                        standing: d.standing.map(|s| Standing {
                            ratio: s.ratio,
                            ci: interval_of(s.ci),
                            level: s.level,
                            p: s.p,
                            p_holm: s.p_holm,
                            significant: s.significant,
                            runs: count(s.runs),
                            peer_runs: count(s.peer_runs),
                        }),
                        slower_pct: d.slower_pct,
                        outlier: d.outlier,
                    })
                    .collect(),
                not_compared: g.not_compared,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use platter_proto::provenance::HealthReading;

    #[test]
    fn a_question_is_its_enum_else_an_older_clients_words() {
        let questions = [
            Question::Drives(Filter {
                model: Some("INTEL".into()),
                firmware: Some("4PC10362".into()),
                host: Some("rc66".into()),
                failed: true,
            }),
            Question::Drives(Filter::default()),
            Question::Drive("CVWL4211".into()),
            Question::Qualification {
                model: "INTEL SSDSC2BW120A4".into(),
                firmware: None,
            },
        ];
        for q in questions {
            let req = ledger_request(&q);
            let read = format!("{:?}", question_of(req.clone()).unwrap());
            assert_eq!(read, format!("{q:?}"));
            // An older client sends only the words.
            let old = pb::LedgerRequest { kind: 0, ..req };
            assert_eq!(format!("{:?}", question_of(old).unwrap()), read);
        }
        let unknown = pb::LedgerRequest {
            question: "drivez".into(),
            ..Default::default()
        };
        assert!(question_of(unknown).unwrap_err().contains("\"drivez\""));
        let later = pb::LedgerRequest {
            kind: 9,
            ..Default::default()
        };
        assert!(question_of(later).is_err());
    }

    fn summary(serial: &str, health: bool) -> DriveSummary {
        DriveSummary {
            id: format!("INTEL/{serial}"),
            identity: "serial".into(),
            model: "INTEL".into(),
            serial: serial.into(),
            wwn: String::new(),
            firmware: "4PC10362".into(),
            hosts: vec!["rc66".into(), "flygecko".into()],
            controllers: vec!["sd>ahci".into(), String::new()],
            first_seen: "2026-12-03 06:12 UTC".into(),
            last_seen: "2026-12-04 06:12 UTC".into(),
            note: String::new(),
            runs: 3,
            passed: 2,
            failed: 1,
            health: health.then(|| LatestHealth {
                campaign_id: "c-1".into(),
                unreadable: String::new(),
                reading: Some(HealthReading {
                    tool: "smartctl 7.3".into(),
                    protocol: "NVMe".into(),
                    passed: Some(true),
                    temperature_c: Some(-1),
                    media_errors: Some(2),
                    ..Default::default()
                }),
                flagged: vec!["media_errors 0 → 2 (+2) FLAGGED".into()],
            }),
        }
    }

    /// Each answer reads back from its message as it was, and from an older coordinator's
    /// document.
    fn round_trip(a: Answer, q: &Question) {
        let wire = ledger_to_pb(&a);
        assert!(wire.answer.is_some());
        assert_eq!(ledger_of(wire.clone(), q).unwrap(), a);
        let old = pb::LedgerResponse {
            answer: None,
            ..wire
        };
        assert_eq!(ledger_of(old, q).unwrap(), a);
    }

    #[test]
    fn every_answer_reads_back_from_its_message_and_from_an_old_coordinators_json() {
        let drives = Answer::Drives(vec![summary("S1", true), summary("S2", false)]);
        round_trip(drives, &Question::Drives(Filter::default()));
        let run = DriveRun {
            campaign_id: "c-1".into(),
            campaign: "fsync".into(),
            state: "done".into(),
            submitted: "2026-12-03 06:12 UTC".into(),
            host: "rc66".into(),
            path: "/dev/sdc".into(),
            results: vec!["size=4096: wall 2.61 ms".into()],
            verdicts: vec![DriveVerdict {
                cell: "size=4096".into(),
                threshold: "wall p50 ≤ 2 ms".into(),
                pass: false,
                measured: "measured 2.61 ms".into(),
            }],
            health: "44°C → 45°C".into(),
            health_flags: vec!["media_errors 0 → 2 (+2)".into()],
            health_after: Some(HealthReading::default()),
            health_unreadable: String::new(),
            model: "INTEL".into(),
            serial: "S1".into(),
            firmware: "4PC10362".into(),
            health_before: Some(HealthReading {
                media_errors: Some(0),
                ..HealthReading::default()
            }),
            flags: vec![
                HealthFlag {
                    attribute: "media_errors".into(),
                    change: "media_errors 0 → 2 (+2)".into(),
                    state: FlagState::Sticky,
                },
                HealthFlag {
                    attribute: "critical_warning".into(),
                    change: "critical_warning 1".into(),
                    state: FlagState::Transient,
                },
            ],
        };
        let detail = Answer::Drive(Box::new(DriveDetail {
            drive: summary("S1", true),
            sightings: vec![SightingView {
                host: "rc66".into(),
                path: "/dev/sdc".into(),
                controller: "sd>ahci".into(),
                pci_address: "0000:00:1f.2".into(),
                firmware: "4PC10362".into(),
                size_bytes: 120_034_123_776,
                transport: "sata".into(),
                write_cache: "write back".into(),
                first_seen: "2026-12-03 06:12 UTC".into(),
                last_seen: "2026-12-04 06:12 UTC".into(),
            }],
            events: vec!["2026-12-04 06:12 UTC moved rc66 → flygecko".into()],
            runs: vec![
                run.clone(),
                DriveRun {
                    state: "cancelled".into(),
                    health_after: None,
                    health_unreadable: "a loop device has no drive health".into(),
                    flags: Vec::new(),
                    ..run
                },
            ],
            baseline: Some(DriveBaseline {
                campaign_id: "c-0".into(),
                campaign: "burn-in".into(),
                host: "rc66".into(),
                submitted: "2026-12-01 06:12 UTC".into(),
                reading: HealthReading {
                    media_errors: Some(0),
                    ..HealthReading::default()
                },
                since: vec!["media_errors 0 → 2 (+2)".into()],
            }),
        }));
        round_trip(detail, &Question::Drive("S1".into()));
        let qualification = Answer::Qualification(Box::new(Qualification {
            model: "INTEL".into(),
            firmware: String::new(),
            drives: 3,
            judged: 2,
            passed: 1,
            hosts: vec!["rc66".into()],
            controllers: vec!["sd>ahci".into()],
            failures: vec![QualificationFailure {
                drive: "INTEL/S1".into(),
                serial: "S1".into(),
                host: "rc66".into(),
                campaign_id: "c-1".into(),
                campaign: "fsync".into(),
                threshold: "wall p50 ≤ 2 ms".into(),
                measured: "measured 2.61 ms".into(),
            }],
            per_drive: vec![QualifiedDrive {
                drive: "INTEL/S1".into(),
                serial: "S1".into(),
                firmware: "4PC10362".into(),
                hosts: vec!["rc66".into()],
                runs: 2,
                passed: 1,
                failed: 1,
            }],
            not_judged: vec!["rc66/loop3".into()],
            peers: "12 drive(s) of INTEL SSDSC2BW120A4 in 1 peer group(s); 1 outlier: X".into(),
            peer_outliers: vec![
                "X: bs=4k wall ×1.150 (1.080–1.210, 99.97%) 15.0% slower OUTLIER".into(),
            ],
        }));
        let q = Question::Qualification {
            model: "INTEL".into(),
            firmware: None,
        };
        round_trip(qualification, &q);
    }

    #[test]
    fn words_a_later_coordinator_added_read_as_unknown() {
        let mut wire = ledger_to_pb(&Answer::Drives(vec![summary("S1", false)]));
        let Some(pb::ledger_response::Answer::Drives(d)) = wire.answer.as_mut() else {
            panic!("drives");
        };
        d.drives[0].identity = 7;
        let Answer::Drives(read) = ledger_of(wire, &Question::Drives(Filter::default())).unwrap()
        else {
            panic!("drives");
        };
        assert_eq!(read[0].identity, "unknown");
    }
}
