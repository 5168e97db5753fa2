//! `platter drives`, `platter drive ID` and `platter qualification MODEL`: the drive ledger
//! read from a store (`--db`, or `platter run`'s here) or asked of the coordinator (Control
//! `Ledger`, the same answer as a message), printed for people, as JSON or as CSV.

use super::args::LedgerArgs;
use super::*;
use crate::report::human;
use crate::report::ledger::{
    answer, Answer, DriveDetail, DriveSummary, LedgerError, Qualification, Question,
};
use crate::report::peers::Peers;
use crate::report::table;

/// Exit status of `platter qualification` when no drive of the model was judged.
pub const EXIT_NOT_JUDGED: i32 = 5;

pub(super) async fn drives(a: DrivesArgs) -> anyhow::Result<i32> {
    let DrivesArgs {
        model,
        firmware,
        host,
        failed,
        ledger: args,
    } = a;
    let filter = crate::report::ledger::Filter {
        model,
        firmware,
        host,
        failed,
    };
    ledger(Question::Drives(filter), args).await
}

pub(super) async fn drive(a: DriveArgs) -> anyhow::Result<i32> {
    ledger(Question::Drive(a.id), a.ledger).await
}

pub(super) async fn qualification(a: QualificationArgs) -> anyhow::Result<i32> {
    let QualificationArgs {
        model,
        firmware,
        ledger: args,
    } = a;
    if model.trim().is_empty() {
        eprintln!("platter: give the drive model to qualify (`platter drives` lists them)");
        return Ok(EXIT_INVALID);
    }
    ledger(Question::Qualification { model, firmware }, args).await
}

pub(super) async fn peers(a: PeersArgs) -> anyhow::Result<i32> {
    let PeersArgs {
        model,
        firmware,
        metric,
        series,
        max_slower,
        ledger: args,
    } = a;
    if model.trim().is_empty() {
        eprintln!("platter: give the drive model (`platter drives` lists them)");
        return Ok(EXIT_INVALID);
    }
    let ask = crate::report::peers::Ask {
        model,
        firmware,
        metric,
        series,
        max_slower_pct: max_slower,
    };
    ledger(Question::Peers(ask), args).await
}

async fn ledger(question: Question, args: LedgerArgs) -> anyhow::Result<i32> {
    let LedgerArgs { db, client, format } = args;
    let answer = match local_store(db, &client)? {
        Some(db) => {
            let store = open_local(&db)?;
            match answer(&store, &question) {
                Ok(answer) => answer,
                Err(LedgerError::NotFound(why)) => {
                    eprintln!("platter: {why}");
                    return Ok(EXIT_INVALID);
                }
                Err(LedgerError::Store(e)) => return Err(e.into()),
            }
        }
        None => {
            let req = crate::views::ledger_request(&question);
            match client.connect().await?.ledger(req).await {
                Ok(r) => crate::views::ledger_of(r.into_inner(), &question)?,
                Err(s) if s.code() == tonic::Code::NotFound => {
                    eprintln!("platter: {}", s.message());
                    return Ok(EXIT_INVALID);
                }
                Err(s) => return Err(call_error("reading the drive ledger", s)),
            }
        }
    };
    // `platter qualification` fails (exit 1, as a run whose qualification failed) when a
    // drive of the model failed a verdict, and exits 5 when no drive of it was judged (a
    // mistyped model, health never read): a CI gate on a model passes only on a PASS.
    let mut status = 0;
    if let Answer::Qualification(q) = &answer {
        if !q.failures.is_empty() || !q.peer_outliers.is_empty() {
            status = 1;
        } else if q.judged == 0 {
            status = EXIT_NOT_JUDGED;
        }
    }
    // `platter peers` fails when a drive stands out, and exits 5 when nothing of the model
    // was measured.
    if let Answer::Peers(p) = &answer {
        if !p.outliers().is_empty() {
            status = 1;
        } else if p.groups.is_empty() {
            status = EXIT_NOT_JUDGED;
        }
    }
    let csv = format == Format::Csv;
    let out = match &answer {
        _ if format == Format::Json => {
            // Through `Value`, as this JSON always was.
            let v = serde_json::to_value(&answer)?;
            format!("{}\n", serde_json::to_string_pretty(&v)?)
        }
        Answer::Drives(drives) if csv => drives_csv(drives),
        Answer::Drives(drives) => render_drives(drives),
        Answer::Drive(d) if csv => drive_csv(d),
        Answer::Drive(d) => render_drive(d),
        Answer::Qualification(q) if csv => qualification_csv(q),
        Answer::Qualification(q) => render_qualification(q),
        Answer::Peers(p) if csv => peers_csv(p),
        Answer::Peers(p) => render_peers(p),
    };
    print!("{out}");
    Ok(status)
}

fn health_words(d: &DriveSummary) -> String {
    crate::report::ledger::health_words(d.health.as_ref())
}

fn verdict_words(d: &DriveSummary) -> String {
    match (d.passed, d.failed) {
        (0, 0) => "—".into(),
        (p, 0) => format!("{p} PASS"),
        (p, f) => format!("{f} FAIL, {p} PASS"),
    }
}

fn render_drives(drives: &[DriveSummary]) -> String {
    if drives.is_empty() {
        return "no drive in the ledger matches (agents report their drives when they connect)\n"
            .into();
    }
    let rows: Vec<Vec<String>> = drives
        .iter()
        .map(|d| {
            vec![
                d.id.clone(),
                d.model.clone(),
                if d.serial.is_empty() {
                    "(none)".into()
                } else {
                    d.serial.clone()
                },
                d.firmware.clone(),
                d.hosts.join(","),
                d.runs.to_string(),
                verdict_words(d),
                health_words(d),
            ]
        })
        .collect();
    table(
        &[
            "DRIVE", "MODEL", "SERIAL", "FIRMWARE", "HOSTS", "RUNS", "VERDICTS", "HEALTH",
        ],
        &rows,
    )
}

fn csv_line(cells: &[String]) -> String {
    let quoted: Vec<String> = cells.iter().map(|c| crate::report::csv_field(c)).collect();
    quoted.join(",") + "\n"
}

fn drives_csv(drives: &[DriveSummary]) -> String {
    let mut out = csv_line(
        &[
            "drive",
            "identity",
            "model",
            "serial",
            "wwn",
            "firmware",
            "hosts",
            "controllers",
            "first_seen",
            "last_seen",
            "runs",
            "passed",
            "failed",
            "health",
        ]
        .map(String::from),
    );
    for d in drives {
        out.push_str(&csv_line(&[
            d.id.clone(),
            d.identity.clone(),
            d.model.clone(),
            d.serial.clone(),
            d.wwn.clone(),
            d.firmware.clone(),
            d.hosts.join(";"),
            d.controllers.join(";"),
            d.first_seen.clone(),
            d.last_seen.clone(),
            d.runs.to_string(),
            d.passed.to_string(),
            d.failed.to_string(),
            health_words(d),
        ]));
    }
    out
}

fn render_drive(d: &DriveDetail) -> String {
    let s = &d.drive;
    let mut out = format!("drive {} ({})\n", s.id, s.identity);
    let or = |v: &str, none: &'static str| {
        if v.is_empty() {
            none.to_string()
        } else {
            v.to_string()
        }
    };
    out.push_str(&format!(
        "  model {}  serial {}  firmware {}{}\n",
        or(&s.model, "(the kernel names none)"),
        or(&s.serial, "(none)"),
        or(&s.firmware, "(the kernel names none)"),
        if s.wwn.is_empty() {
            String::new()
        } else {
            format!("  wwn {}", s.wwn)
        }
    ));
    if !s.note.is_empty() {
        out.push_str(&format!("  {}\n", s.note));
    }
    out.push_str(&format!(
        "  first seen {}, last seen {}; {} run(s), verdicts: {}; latest health: {}\n",
        s.first_seen,
        s.last_seen,
        s.runs,
        verdict_words(s),
        health_words(s)
    ));
    if let Some(b) = &d.baseline {
        out.push_str(&format!("  health baseline: {}\n", b.text()));
    }
    out.push_str("\nsightings\n");
    let rows: Vec<Vec<String>> = d
        .sightings
        .iter()
        .map(|x| {
            vec![
                x.host.clone(),
                x.path.clone(),
                if x.controller.is_empty() {
                    "—".into()
                } else {
                    x.controller.clone()
                },
                if x.pci_address.is_empty() {
                    "—".into()
                } else {
                    x.pci_address.clone()
                },
                x.firmware.clone(),
                x.transport.clone(),
                x.write_cache.clone(),
                x.first_seen.clone(),
                x.last_seen.clone(),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "  HOST",
            "PATH",
            "CONTROLLER",
            "PCI",
            "FIRMWARE",
            "TRANSPORT",
            "WRITE CACHE",
            "FIRST SEEN",
            "LAST SEEN",
        ],
        &rows
            .into_iter()
            .map(|mut r| {
                r[0] = format!("  {}", r[0]);
                r
            })
            .collect::<Vec<_>>(),
    ));
    if !d.events.is_empty() {
        out.push_str("\nevents\n");
        for e in &d.events {
            out.push_str(&format!("  {e}\n"));
        }
    }
    out.push_str("\nruns\n");
    if d.runs.is_empty() {
        out.push_str("  none measured it yet\n");
    }
    for r in &d.runs {
        let firmware = if r.firmware.is_empty() {
            String::new()
        } else {
            format!(", firmware {}", r.firmware)
        };
        out.push_str(&format!(
            "  {} {} ({}) on {} {}{firmware}, {}\n",
            r.submitted, r.campaign, r.campaign_id, r.host, r.path, r.state
        ));
        for x in &r.results {
            out.push_str(&format!("    {x}\n"));
        }
        for v in &r.verdicts {
            out.push_str(&format!(
                "    {} [{}]: {} ({})\n",
                if v.pass { "PASS" } else { "FAIL" },
                v.cell,
                v.threshold,
                v.measured
            ));
        }
        if !r.health_unreadable.is_empty() {
            out.push_str(&format!(
                "    health not readable: {}\n",
                r.health_unreadable
            ));
        } else if !r.health.is_empty() {
            out.push_str(&format!("    health: {}\n", r.health));
        }
        for f in &r.flags {
            out.push_str(&format!("    flagged {}\n", f.text()));
        }
    }
    out
}

fn drive_csv(d: &DriveDetail) -> String {
    let mut out = csv_line(
        &[
            "drive",
            "campaign_id",
            "campaign",
            "submitted",
            "host",
            "path",
            "firmware",
            "state",
            "passed",
            "failed",
            "health_flagged",
            "health",
        ]
        .map(String::from),
    );
    for r in &d.runs {
        out.push_str(&csv_line(&[
            d.drive.id.clone(),
            r.campaign_id.clone(),
            r.campaign.clone(),
            r.submitted.clone(),
            r.host.clone(),
            r.path.clone(),
            r.firmware.clone(),
            r.state.clone(),
            r.verdicts.iter().filter(|v| v.pass).count().to_string(),
            r.verdicts.iter().filter(|v| !v.pass).count().to_string(),
            (!r.health_flags.is_empty()).to_string(),
            r.health.clone(),
        ]));
    }
    out
}

fn render_qualification(q: &Qualification) -> String {
    let mut out = format!("{}\n", q.headline());
    if !q.per_drive.is_empty() {
        out.push('\n');
        let rows: Vec<Vec<String>> = q
            .per_drive
            .iter()
            .map(|d| {
                vec![
                    d.drive.clone(),
                    d.serial.clone(),
                    d.firmware.clone(),
                    d.hosts.join(","),
                    d.runs.to_string(),
                    if d.failed == 0 {
                        format!("PASS ({} checks)", d.passed)
                    } else {
                        format!("FAIL ({} of {} checks)", d.failed, d.failed + d.passed)
                    },
                ]
            })
            .collect();
        out.push_str(&table(
            &["DRIVE", "SERIAL", "FIRMWARE", "HOSTS", "RUNS", "VERDICT"],
            &rows,
        ));
    }
    if !q.controllers.is_empty() {
        out.push_str(&format!("controllers: {}\n", q.controllers.join("; ")));
    }
    for f in &q.failures {
        out.push_str(&format!(
            "FAIL serial {} on {}: {} ({}), campaign {} ({})\n",
            f.serial, f.host, f.threshold, f.measured, f.campaign, f.campaign_id
        ));
    }
    if !q.peers.is_empty() {
        out.push_str(&format!("peers: {}\n", q.peers));
    }
    for o in &q.peer_outliers {
        out.push_str(&format!("PEER OUTLIER {o}\n"));
    }
    out
}

fn qualification_csv(q: &Qualification) -> String {
    let mut out = csv_line(
        &[
            "model", "drive", "serial", "firmware", "hosts", "runs", "passed", "failed",
        ]
        .map(String::from),
    );
    for d in &q.per_drive {
        out.push_str(&csv_line(&[
            q.model.clone(),
            d.drive.clone(),
            d.serial.clone(),
            d.firmware.clone(),
            d.hosts.join(";"),
            d.runs.to_string(),
            d.passed.to_string(),
            d.failed.to_string(),
        ]));
    }
    out
}

fn render_peers(p: &Peers) -> String {
    if p.groups.is_empty() {
        return format!(
            "no run of a {} drive in the store{} (a drive's runs count once their campaign is done)\n",
            p.model,
            if p.firmware.is_empty() { String::new() } else { format!(" with firmware {}", p.firmware) }
        );
    }
    let mut out = format!("{}\n", p.headline());
    out.push_str(&format!(
        "each drive's runs against the rest of its group: Hodges–Lehmann ratio with its interval at its Holm step's level (1% family-wise per group); OUTLIER when significant and more than {}% slower\n",
        p.max_slower_pct
    ));
    for g in &p.groups {
        let state = match g.state.as_str() {
            "" => String::new(),
            s => format!(" [{s}]"),
        };
        out.push_str(&format!(
            "\n{} firmware {}: {} [{}] {}{state}: median of drives {}, middle 80% {} – {}\n",
            p.model,
            if g.firmware.is_empty() {
                "(none)"
            } else {
                &g.firmware
            },
            g.workload,
            g.configuration,
            g.metric,
            human(g.median, &g.unit),
            human(g.band.0, &g.unit),
            human(g.band.1, &g.unit),
        ));
        if !g.not_judged.is_empty() {
            out.push_str(&format!("  {}\n", g.not_judged));
        }
        for c in &g.controllers {
            out.push_str(&format!("  {c}\n"));
        }
        let rows: Vec<Vec<String>> = g
            .drives
            .iter()
            .map(|d| {
                vec![
                    d.drive.clone(),
                    d.hosts.join(","),
                    d.controller.clone(),
                    d.runs.len().to_string(),
                    match d.ci {
                        Some((lo, hi)) => format!(
                            "{} ({}–{})",
                            human(d.median, &g.unit),
                            human(lo, &g.unit),
                            human(hi, &g.unit)
                        ),
                        None => human(d.median, &g.unit),
                    },
                    d.standing_text(),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "DRIVE",
                "HOSTS",
                "CONTROLLER",
                "RUNS",
                "MEDIAN",
                "AGAINST ITS PEERS",
            ],
            &rows,
        ));
        for n in &g.not_compared {
            out.push_str(&format!("  {n}\n"));
        }
    }
    out
}

fn peers_csv(p: &Peers) -> String {
    let mut out = csv_line(
        &[
            "model",
            "firmware",
            "workload",
            "configuration",
            "metric",
            "unit",
            "state",
            "drive",
            "hosts",
            "controller",
            "runs",
            "median",
            "ratio",
            "ratio_lo",
            "ratio_hi",
            "level",
            "p_holm",
            "significant",
            "slower_pct",
            "outlier",
            "not_judged",
        ]
        .map(String::from),
    );
    let num = |x: Option<f64>| x.map(|v| v.to_string()).unwrap_or_default();
    for g in &p.groups {
        for d in &g.drives {
            let s = d.standing.as_ref();
            out.push_str(&csv_line(&[
                p.model.clone(),
                g.firmware.clone(),
                g.workload.clone(),
                g.configuration.clone(),
                g.metric.clone(),
                g.unit.clone(),
                g.state.clone(),
                d.drive.clone(),
                d.hosts.join(" "),
                d.controller.clone(),
                d.runs.len().to_string(),
                d.median.to_string(),
                num(s.map(|s| s.ratio)),
                num(s.map(|s| s.ci.0)),
                num(s.map(|s| s.ci.1)),
                num(s.map(|s| s.level)),
                num(s.map(|s| s.p_holm)),
                s.map(|s| s.significant.to_string()).unwrap_or_default(),
                num(d.slower_pct),
                d.outlier.to_string(),
                g.not_judged.clone(),
            ]));
        }
    }
    out
}
