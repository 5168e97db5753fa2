//! A report's sentences as typed values: the findings over the tables (`FindingLine`) and
//! the notes under them (`Note`: provenance change, missing measurements, comparison,
//! outlier, verdict, advice, a cell's warning or runs). What a line says is its variant;
//! its sentence is written once, by `Display`. Exporters choose and style lines by variant
//! and `Tone`, never by reading the sentence. Builds nothing of the model.

use std::fmt;

use super::findings::{Undecided, DIFFERENCES_SHOWN, EQUAL_SHOWN};
use super::judge::{FleetOutlier, JudgedComparison, Verdict};
use super::{human, label_with_host, runs_notes, CampaignState, Report};
use crate::stats;

/// How a line reads to a person skimming it: what a terminal colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// A failed verdict.
    Bad,
    /// Every verdict passed.
    Good,
    /// An outlier or a warning.
    Caution,
    Plain,
}

/// What the report says about expected measurements that are not in the store: not stored
/// yet while the campaign runs, or never arrived once it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingMeasurements {
    NotStoredYet { missing: u32, expected: u32 },
    NeverArrived { missing: u32, expected: u32 },
}

impl MissingMeasurements {
    /// The report's missing measurements, if any.
    pub fn of(r: &Report) -> Option<MissingMeasurements> {
        let (missing, expected) = (r.measurements_missing, r.measurements_expected);
        if missing == 0 {
            return None;
        }
        Some(if r.state == CampaignState::Running {
            MissingMeasurements::NotStoredYet { missing, expected }
        } else {
            MissingMeasurements::NeverArrived { missing, expected }
        })
    }
}

impl fmt::Display for MissingMeasurements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MissingMeasurements::NotStoredYet { missing, expected } => write!(
                f,
                "incomplete: the campaign is still running; {missing} of {expected} measurements not stored yet"
            ),
            MissingMeasurements::NeverArrived { missing, expected } => write!(
                f,
                "MISSING: {missing} of {expected} expected measurements never reached this store \
                 (no result, failure or skip was recorded): the summaries rest on the rest"
            ),
        }
    }
}

/// The start of the qualification's summary line: both the notes and the findings open
/// with it.
pub(crate) const QUALIFICATION: &str = "qualification: ";
/// The start of a failed verdict's line.
const FAIL: &str = "FAIL ";
/// The start of an outlier's line.
const OUTLIER: &str = "outlier: ";
/// Between a cell's label and its warning.
const WARNING: &str = ": warning: ";

/// "qualification: PASS (3 checks)", or with the failed count and what follows `checks`.
pub(crate) fn qualification_line(failed: usize, checks: usize, after: &str) -> String {
    if failed == 0 {
        format!("{QUALIFICATION}PASS ({checks} checks)")
    } else {
        format!("{QUALIFICATION}FAIL ({failed} of {checks} checks{after})")
    }
}

/// The tone of a rendered line of the plain table. The table reaches a terminal as text
/// (a coordinator sends it rendered), so its colours are found again from the lines'
/// openings; those openings are the constants the notes and findings are written with.
pub(crate) fn tone_of_line(body: &str) -> Tone {
    let qualification = body.strip_prefix(QUALIFICATION);
    if body.starts_with(FAIL) || qualification.is_some_and(|q| q.starts_with("FAIL")) {
        Tone::Bad
    } else if qualification.is_some_and(|q| q.starts_with("PASS")) {
        Tone::Good
    } else if body.starts_with(OUTLIER) || body.contains(WARNING) {
        Tone::Caution
    } else {
        Tone::Plain
    }
}

/// What a reader must know about how a cell's samples came to be (JSON writes each as
/// its sentence).
#[derive(Debug, Clone, PartialEq)]
pub enum CellWarning {
    /// A repetition not measured: its preparation failed, or its measurement did.
    NotMeasured { repetition: u32, why: String },
    /// A measurement that ran again after the agent stopped during it, after `preparation`
    /// (the step kinds that ran again first; none when it had none).
    Remeasured {
        repetition: u32,
        attempt: u32,
        preparation: Vec<String>,
    },
    /// A preparation step skipped because the platform does not support it.
    Skipped {
        kind: String,
        count: u32,
        why: String,
    },
    /// Some repetitions gave no value of `metric` (a tool's `+++++`): the statistics rest
    /// on the others.
    PartlyUnmeasured {
        metric: String,
        missing: u32,
        of: usize,
        why: String,
        rest: usize,
    },
}

impl fmt::Display for CellWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CellWarning::NotMeasured { repetition, why } => write!(f, "repetition {repetition} {why}"),
            CellWarning::Remeasured {
                repetition,
                attempt,
                preparation,
            } => {
                write!(
                    f,
                    "repetition {repetition} measured on attempt {attempt}: the agent stopped during the measurement before; "
                )?;
                if preparation.is_empty() {
                    write!(f, "it has no preparation to run again")
                } else {
                    write!(f, "its preparation ({}) ran again first", preparation.join(", "))
                }
            }
            CellWarning::Skipped { kind, count, why } => {
                write!(f, "{kind} skipped {count}× (not a failure): {why}")
            }
            CellWarning::PartlyUnmeasured {
                metric,
                missing,
                of,
                why,
                rest,
            } => write!(
                f,
                "{metric}: {missing} of {of} repetitions {why} — the statistics rest on the other {rest}"
            ),
        }
    }
}

impl serde::Serialize for CellWarning {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One line under the tables.
#[derive(Debug, Clone, PartialEq)]
pub enum Note<'a> {
    /// What changed between snapshots of a host within the run.
    ProvenanceChange(&'a str),
    /// The state a prepared drive was measured in (`prepare:`).
    DriveState(&'a str),
    Missing(MissingMeasurements),
    /// A comparison with the baseline.
    Comparison(&'a JudgedComparison),
    /// How many comparisons were made at once and how many are significant, and those
    /// too few runs left estimates.
    Family {
        family: usize,
        together: usize,
        alone: usize,
        undecided: Option<Undecided>,
    },
    Outlier(&'a FleetOutlier),
    /// The qualification's summary: how many checks, how many failed.
    Qualification {
        failed: usize,
        checks: usize,
    },
    /// A failed verdict.
    Fail(&'a Verdict),
    /// Advice on the whole campaign.
    Advice(&'a str),
    /// A cell's warning, after the cell's label.
    CellWarning {
        cell: String,
        warning: &'a CellWarning,
    },
    /// How a cell's runs came to be counted, after the cell's label.
    CellRuns {
        cell: String,
        text: String,
    },
}

impl Note<'_> {
    pub fn tone(&self) -> Tone {
        match self {
            Note::Qualification { failed: 0, .. } => Tone::Good,
            Note::Qualification { .. } | Note::Fail(_) => Tone::Bad,
            Note::Outlier(_) | Note::CellWarning { .. } => Tone::Caution,
            _ => Tone::Plain,
        }
    }
}

impl fmt::Display for Note<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::ProvenanceChange(t) => f.write_str(t),
            Note::DriveState(t) => write!(f, "drive state: {t}"),
            Note::Missing(m) => m.fmt(f),
            Note::Comparison(c) => {
                write!(f, "{}: {} ({})", c.row.context, c.row.text, c.row.metric)
            }
            Note::Family {
                family,
                together,
                alone,
                undecided,
            } => {
                write!(
                    f,
                    "comparisons: {family} tests at once; {together} significant after Holm's correction ({alone} at 5% each; about {:.1} would be by chance alone if nothing differed)",
                    *family as f64 * stats::ALPHA
                )?;
                match undecided {
                    Some(u) => write!(f, "; {}", undecided_text(u)),
                    None => Ok(()),
                }
            }
            Note::Outlier(o) => f.write_str(&outlier_text(o, &human)),
            Note::Qualification { failed, checks } => {
                f.write_str(&qualification_line(*failed, *checks, ""))
            }
            Note::Fail(v) => f.write_str(&fail_text(v, &human)),
            Note::Advice(a) => write!(f, "advice: {a}"),
            Note::CellWarning { cell, warning } => write!(f, "{cell}{WARNING}{warning}"),
            Note::CellRuns { cell, text } => write!(f, "{cell}: {text}"),
        }
    }
}

/// "with 5 runs a side no single configuration can pass Holm over 24 comparisons: their
/// ratios are estimates, unmarked; repeat: 7 would" (or "3 of 14 configurations cannot …
/// alone" when some lines are decided).
pub(crate) fn undecided_text(u: &Undecided) -> String {
    let runs = if u.runs.0 == u.runs.1 {
        u.runs.0.to_string()
    } else {
        format!("{}–{}", u.runs.0, u.runs.1)
    };
    let needed = u.runs_needed;
    let family = match u.family {
        1 => "its test alone".to_string(),
        n => format!("Holm over {n} comparisons"),
    };
    if u.estimates == u.lines {
        let none = if u.lines == 1 {
            "its configuration cannot pass"
        } else {
            "no single configuration can pass"
        };
        let what = if u.lines == 1 {
            "its ratio is an estimate"
        } else {
            "their ratios are estimates"
        };
        format!("with {runs} runs a side {none} {family}: {what}, unmarked; repeat: {needed} would")
    } else {
        format!(
            "with {runs} runs a side {} of {} configurations cannot pass {family} alone: their ratios are estimates, unmarked; repeat: {needed} would",
            u.estimates, u.lines
        )
    }
}

/// How a line shows a value with its unit: `human` in the text formats, the HTML page
/// in its own `Unit`.
pub(crate) type ShowValue<'a> = &'a dyn Fn(f64, &str) -> String;

/// "outlier: rc66 sdb [size=4096]: wall 1.20 s, ×2.00 (1.81–2.22, 99.67%) the rest of its
/// configuration's cells".
pub(crate) fn outlier_text(o: &FleetOutlier, show: ShowValue<'_>) -> String {
    format!(
        "{OUTLIER}{}{} [{}]: {} {}, ×{:.2} ({:.2}–{:.2}, {}) the rest of its configuration's cells",
        o.host,
        with_space(&o.device),
        o.group,
        o.metric,
        show(o.value, &o.unit),
        o.ratio,
        o.ci.0,
        o.ci.1,
        crate::stats::level_with_sign(o.level)
    )
}

/// "FAIL rc66 sdb [size=4096]: latency.p99 < 20ms (measured 103.22 ms)".
pub(crate) fn fail_text(v: &Verdict, show: ShowValue<'_>) -> String {
    let what = match v.value {
        _ if v.measured.starts_with("not judged") => v.measured.clone(),
        _ if !v.measured.is_empty() => format!("measured {}", v.measured),
        Some(x) => format!("measured {}", show(x, &v.unit)),
        None => "not measured".into(),
    };
    format!(
        "{FAIL}{}{} [{}]: {} ({what})",
        v.host,
        with_space(&v.device),
        v.cell,
        v.threshold
    )
}

/// " sdb", or nothing for no device.
fn with_space(device: &str) -> String {
    if device.is_empty() {
        String::new()
    } else {
        format!(" {device}")
    }
}

/// Lines under the tables: provenance changes, missing measurements, comparisons with the
/// baseline, outliers, qualification, advice, and per cell its warnings and runs.
pub fn notes(report: &Report) -> Vec<Note<'_>> {
    let mut out: Vec<Note<'_>> = report
        .provenance_changes
        .iter()
        .map(|c| Note::ProvenanceChange(c))
        .collect();
    out.extend(report.drive_states.iter().map(|s| Note::DriveState(s)));
    out.extend(MissingMeasurements::of(report).map(Note::Missing));
    out.extend(report.comparisons.iter().map(Note::Comparison));
    if let Some(family) = report.comparisons.iter().map(|c| c.family).max() {
        if family > 1 {
            let alone = report
                .comparisons
                .iter()
                .filter(|c| c.p_value.is_some_and(|p| p <= stats::ALPHA))
                .count();
            let together = report
                .comparisons
                .iter()
                .filter(|c| c.row.significant)
                .count();
            out.push(Note::Family {
                family,
                together,
                alone,
                undecided: Undecided::of(
                    report
                        .comparisons
                        .iter()
                        .filter(|c| c.p_value.is_some())
                        .map(|c| c.too_few_runs),
                ),
            });
        }
    }
    out.extend(report.outliers.iter().map(Note::Outlier));
    if !report.verdicts.is_empty() {
        let failed: Vec<&Verdict> = report.verdicts.iter().filter(|v| !v.pass).collect();
        out.push(Note::Qualification {
            failed: failed.len(),
            checks: report.verdicts.len(),
        });
        out.extend(failed.into_iter().map(Note::Fail));
    }
    out.extend(report.advice.iter().map(|a| Note::Advice(a)));
    for c in &report.cells {
        let label = label_with_host(c);
        out.extend(c.warnings.iter().map(|w| Note::CellWarning {
            cell: label.clone(),
            warning: w,
        }));
        out.extend(runs_notes(c).into_iter().map(|text| Note::CellRuns {
            cell: label.clone(),
            text,
        }));
    }
    out
}

/// One line of the findings, the answer first.
#[derive(Debug, Clone, PartialEq)]
pub enum FindingLine {
    /// A significant difference, as `findings` words it.
    Difference(String),
    /// How many more significant differences JSON lists.
    MoreDifferences(usize),
    /// What was found equal, with its estimate.
    NoDifference(String),
    /// The rest of what was found equal, named only.
    NoDifferenceEither(Vec<String>),
    /// A question its runs could not decide, with its estimates.
    Estimate(String),
    /// Lines too few runs left estimates, said once.
    Undecided(Undecided),
    Qualification {
        failed: usize,
        checks: usize,
    },
    /// Measurements an ended campaign lacks, of those expected.
    Missing {
        missing: u32,
        expected: u32,
    },
    StepsFailed(u32),
    Refused(usize),
    Uncompared(u32),
}

impl FindingLine {
    /// What was found equal (shown muted where a format can).
    pub fn is_equal(&self) -> bool {
        matches!(
            self,
            FindingLine::NoDifference(_) | FindingLine::NoDifferenceEither(_)
        )
    }

    /// A failed qualification or lost measurements: the answer is not whole.
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            FindingLine::Qualification { failed: 1.., .. } | FindingLine::Missing { .. }
        )
    }
}

impl fmt::Display for FindingLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FindingLine::Difference(t) => f.write_str(t),
            FindingLine::MoreDifferences(more) => write!(
                f,
                "… and {more} more significant differences (`--format json`: findings)"
            ),
            FindingLine::NoDifference(t) => write!(f, "no significant difference: {t}"),
            FindingLine::NoDifferenceEither(rest) => {
                write!(f, "no significant difference either: {}", rest.join("; "))
            }
            FindingLine::Estimate(t) => write!(f, "undecided (an estimate): {t}"),
            FindingLine::Undecided(u) => f.write_str(&undecided_text(u)),
            FindingLine::Qualification { failed, checks } => {
                f.write_str(&qualification_line(*failed, *checks, "; below"))
            }
            FindingLine::Missing { missing, expected } => write!(
                f,
                "MISSING: {missing} of {expected} measurements; the answer rests on the rest"
            ),
            FindingLine::StepsFailed(n) => write!(f, "{n} step(s) failed (below)"),
            FindingLine::Refused(n) => write!(f, "{n} host(s) refused their plan (below)"),
            FindingLine::Uncompared(n) => {
                write!(f, "{n} comparison(s) could not be made (below)")
            }
        }
    }
}

/// The findings as lines: the significant differences, largest first; what was found
/// equal; the verdicts; and what the answer lacks (missing measurements, failed steps,
/// refused plans, comparisons not made). Empty when there is nothing to say.
pub fn findings(report: &Report) -> Vec<FindingLine> {
    let f = &report.findings;
    let mut out: Vec<FindingLine> = f
        .differences
        .iter()
        .take(DIFFERENCES_SHOWN)
        .map(|d| FindingLine::Difference(d.text()))
        .collect();
    let more = f.differences.len().saturating_sub(DIFFERENCES_SHOWN);
    if more > 0 {
        out.push(FindingLine::MoreDifferences(more));
    }
    // What was found equal, with its estimate (a cost too small to tell apart is still an
    // answer); past a few, named only.
    out.extend(
        f.no_difference
            .iter()
            .take(EQUAL_SHOWN)
            .map(|x| FindingLine::NoDifference(x.text())),
    );
    let rest: Vec<String> = f
        .no_difference
        .iter()
        .skip(EQUAL_SHOWN)
        .map(|x| x.equal_text())
        .collect();
    if !rest.is_empty() {
        out.push(FindingLine::NoDifferenceEither(rest));
    }
    out.extend(f.estimates.iter().map(|x| FindingLine::Estimate(x.text())));
    out.extend(f.undecided.map(FindingLine::Undecided));
    if !report.verdicts.is_empty() {
        out.push(FindingLine::Qualification {
            failed: report.verdicts.iter().filter(|v| !v.pass).count(),
            checks: report.verdicts.len(),
        });
    }
    let missing = report.lost_measurements();
    if missing > 0 {
        out.push(FindingLine::Missing {
            missing,
            expected: report.measurements_expected,
        });
    }
    if report.steps_failed > 0 {
        out.push(FindingLine::StepsFailed(report.steps_failed));
    }
    if !report.refused.is_empty() {
        out.push(FindingLine::Refused(report.refused.len()));
    }
    let uncompared = report.uncompared();
    if uncompared > 0 {
        out.push(FindingLine::Uncompared(uncompared));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::CellReport;

    fn verdict(pass: bool) -> Verdict {
        Verdict {
            host: "rc66".into(),
            device: "sdb".into(),
            cell: "size=4096".into(),
            threshold: "latency.p99 < 20ms".into(),
            value: Some(0.1),
            unit: "s".into(),
            pass,
            measured: String::new(),
        }
    }

    /// The colours a terminal gives a rendered table's lines are the tones of the notes
    /// those lines are: reading the text back agrees with the types.
    #[test]
    fn every_note_reads_back_with_its_tone() {
        let mut cell = CellReport::for_test("c1".into(), "rc66", &[("size", "4096")], vec![]);
        cell.warnings.push(CellWarning::Skipped {
            kind: "fstrim".into(),
            count: 2,
            why: "not supported on tmpfs".into(),
        });
        cell.stopped = Some("stopped after 6 runs".into());
        let report = Report {
            state: CampaignState::Done,
            measurements_expected: 10,
            measurements_missing: 2,
            provenance_changes: vec!["rc66: kernel changed".into()],
            verdicts: vec![verdict(true), verdict(false)],
            outliers: vec![FleetOutlier {
                host: "rc66".into(),
                device: String::new(),
                group: "size=4096".into(),
                metric: "wall".into(),
                value: 1.0,
                unit: "s".into(),
                ratio: 2.0,
                ci: (1.8, 2.2),
                level: 0.9967,
                p_holm: 0.002,
            }],
            advice: vec!["quiet the machine".into()],
            cells: vec![cell],
            ..Default::default()
        };
        let notes = notes(&report);
        assert_eq!(notes.len(), 8, "{notes:?}");
        for n in &notes {
            assert_eq!(tone_of_line(&n.to_string()), n.tone(), "{n}");
        }
        let all_pass = Note::Qualification {
            failed: 0,
            checks: 2,
        };
        assert_eq!(tone_of_line(&all_pass.to_string()), Tone::Good);
        assert_eq!(
            notes[1].to_string(),
            "MISSING: 2 of 10 expected measurements never reached this store (no result, failure or skip was recorded): the summaries rest on the rest"
        );
    }
}
