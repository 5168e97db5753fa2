//! A series over time (`platter history`): the runs of one campaign name, in the order
//! they were submitted, each cell's median with its interval per run, and each run against
//! the run before it on the same host and parameters — the Hodges–Lehmann shift with its
//! interval, Holm-corrected across that run's comparisons (`judge::compare_campaigns`).
//! A shift is flagged when it is significant **and** its interval lies wholly beyond the
//! practical threshold, named a regression or an improvement when the metric's unit says
//! which way is worse, and carries what changed on that host between the two runs, from
//! their provenance.

use std::collections::HashMap;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::judge::{compare_campaigns, JudgedComparison};
use super::{human, provenance, CellReport, Report};
use crate::stats::{self, drift as series};
use crate::store::{CampaignState, Result, Store};

/// The practical threshold of a flag, in percent of the earlier run's value.
pub const DEFAULT_THRESHOLD_PCT: f64 = 3.0;
/// How many earlier runs of a line a run is set against (their level and spread): enough
/// for their spread to outweigh the prior's after a fortnight of nightly runs, few enough
/// that a slow drift does not widen it much. A history of the last N runs reads this many
/// more to judge its first ones.
pub const RECENT_RUNS: usize = 10;
/// The prediction interval a flag needs wholly beyond the threshold. "Significant" is at
/// 95%, but a line is judged on every run: at 95%, 4.4% of noise-only lines of 20 runs
/// (2% from run to run, 2% within) had a run flagged; at 99%, 0–0.65%
/// (`false_flags_of_noise_only_series_stay_under_one_percent`).
pub const FLAG_CONFIDENCE: f64 = 0.99;

/// `platter history SERIES`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct History {
    pub series: String,
    pub metric: String,
    pub threshold_pct: f64,
    /// The ended runs of the series, oldest first: what the lines' points are of.
    pub runs: Vec<Run>,
    /// Runs left out, with why (cancelled, still running).
    pub left_out: Vec<LeftOut>,
    /// One line per host and cell parameters, in the order the runs first name them.
    pub lines: Vec<Line>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub campaign_id: String,
    pub submitted_unix_ms: i64,
    /// The labels of the schedule's firing that submitted it (`fired_by`, `slot`, a
    /// trigger's), empty for a run submitted by hand.
    pub labels: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeftOut {
    pub campaign_id: String,
    pub why: String,
}

/// A host and cell parameters across the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    pub host: String,
    /// The cell's parameters, `k=v` joined by spaces ("" for a campaign without any).
    pub cell: String,
    pub unit: String,
    pub points: Vec<Point>,
    /// The steps and ramps of the line's medians over the runs shown (`stats::drift`), the
    /// flagged ones beyond the threshold.
    #[serde(default)]
    pub drift: Vec<Drift>,
}

/// A step or a ramp in a line's medians over the series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    pub kind: DriftKind,
    /// 1-based positions in `History::runs`: a step's run (`first_run == last_run`), a
    /// ramp's first (the run it starts from) and last.
    pub first_run: usize,
    pub last_run: usize,
    pub first_campaign: String,
    pub last_campaign: String,
    /// The whole change over the range, in percent of `baseline`.
    pub change_pct: f64,
    /// A ramp's Theil–Sen slope, in percent of its start a run (compounded).
    pub per_run_pct: Option<f64>,
    /// The test's p: Welch's t for a step, Mann–Kendall's for a ramp (each already past
    /// its level, `stats::drift::STEP_ALPHA` / `RAMP_ALPHA`, or it is not listed).
    pub p: f64,
    /// Beyond the history's threshold: which way, by the unit; else none.
    pub flag: Flag,
    /// The value before the range, in the line's unit: a step's level before it, a ramp's
    /// line at its first run.
    pub baseline: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DriftKind {
    Step,
    Ramp,
}

impl Drift {
    /// "+17% over runs 1–15, 1.2% a run", "+10% at run 8".
    pub fn text(&self) -> String {
        let pct = |x: f64| {
            if x.abs() >= 9.95 {
                format!("{x:+.0}%")
            } else {
                format!("{x:+.1}%")
            }
        };
        match self.kind {
            DriftKind::Step => format!("{} at run {}", pct(self.change_pct), self.first_run),
            DriftKind::Ramp => format!(
                "{} over runs {}–{}{}",
                pct(self.change_pct),
                self.first_run,
                self.last_run,
                self.per_run_pct
                    .map(|r| format!(", {r:.1}% a run"))
                    .unwrap_or_default()
            ),
        }
    }

    /// "ramp +17% over runs 1–15, 1.2% a run (p 0.0004) REGRESSION".
    pub fn summary(&self) -> String {
        let kind = match self.kind {
            DriftKind::Step => "step",
            DriftKind::Ramp => "ramp",
        };
        let p = if self.p < 0.0001 {
            "p < 0.0001".to_string()
        } else {
            format!("p {:.4}", self.p)
        };
        let flag = match self.flag {
            Flag::None => " under the threshold".to_string(),
            f => format!(" {}", f.word()),
        };
        format!("{kind} {} ({p}){flag}", self.text())
    }
}

/// The drift of `line` over `runs` (those its points are of), flagged beyond
/// `threshold_pct`: `stats::drift::detect` on its medians, the positions named as runs.
pub fn drift_of(line: &Line, runs: &[Run], threshold_pct: f64) -> Vec<Drift> {
    let medians: Vec<f64> = line.points.iter().map(|p| p.median).collect();
    let position = |i: usize| {
        let id = &line.points[i].campaign_id;
        (
            runs.iter()
                .position(|r| &r.campaign_id == id)
                .map_or(i + 1, |p| p + 1),
            id.clone(),
        )
    };
    series::detect(&medians)
        .into_iter()
        .map(|f| {
            let change_pct = f.change_pct();
            let beyond = change_pct.abs() >= threshold_pct;
            let (first_run, first_campaign) = position(f.first);
            let (last_run, last_campaign) = position(f.last);
            Drift {
                kind: match f.kind {
                    series::Kind::Step => DriftKind::Step,
                    series::Kind::Ramp => DriftKind::Ramp,
                },
                first_run,
                last_run,
                first_campaign,
                last_campaign,
                change_pct,
                per_run_pct: f.per_run.map(|r| (r - 1.0) * 100.0),
                p: f.p,
                flag: if beyond {
                    direction(change_pct, &line.unit)
                } else {
                    Flag::None
                },
                baseline: f.before,
            }
        })
        .collect()
}

/// A run's value on a line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub campaign_id: String,
    pub n: usize,
    pub median: f64,
    /// The median's distribution-free interval and its coverage; none below 5 values.
    pub median_ci: Option<(f64, f64)>,
    pub median_ci_level: Option<f64>,
    /// Against the line's previous point; none for the first.
    pub since_previous: Option<Since>,
}

/// A point against the one before it, and against the recent runs of its line.
///
/// The rule (`judge_runs`):
/// * against the run before (or the last N pooled): the Hodges–Lehmann shift with its
///   interval and Holm's p over the run's cells — the variation within the two runs only;
/// * against the recent runs ([`Spread`]): the last [`RECENT_RUNS`] points of the line since
///   its last flag or change of drive; the new median's change over their level with a
///   Student t prediction interval, their spread of the logs pooled with a prior (1.5% from
///   run to run plus the noise within a run, worth 10 runs: `stats::drift::against_recent`);
/// * `significant`: that prediction's test at 95% (the run falls outside where the series'
///   own run-to-run variation puts the next run); the run before alone where there is no
///   spread (not compared, values without a ratio);
/// * `flag`: significant, the interval against the run before **and** the
///   [`FLAG_CONFIDENCE`] (99%) interval against the recent runs wholly beyond the threshold,
///   the same way. On noise alone with a 2% run-to-run shift: 3.0–7.1% of runs significant
///   (nominal 5%), 0–0.65% of 20-run lines with any flag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Since {
    /// The earlier run's campaign.
    pub baseline: String,
    /// Hodges–Lehmann shift of this run over the earlier, in percent, with its interval
    /// and that interval's real coverage; `ci_pct` is none when either side has too few
    /// repetitions for one (and then nothing is flagged).
    pub change_pct: f64,
    pub ci_pct: Option<(f64, f64)>,
    pub ci_level: Option<f64>,
    /// Holm-adjusted p over this run's comparisons. The interval is at this comparison's
    /// Holm step's level, so it excludes 0 exactly when Holm calls the shift significant.
    pub holm_p: Option<f64>,
    /// Against the run before, the shift is an estimate: the runs are too few to pass its
    /// Holm step over the run's cells, so it is neither significant nor "no change", and
    /// nothing is flagged; its interval is at its own coverage.
    #[serde(default)]
    pub estimate: bool,
    pub significant: bool,
    pub flag: Flag,
    /// What differs on the host between the two runs (`kernel: 6.1.0 → 6.12.1`), from
    /// their provenance; empty when nothing recorded changed.
    pub changed: Vec<String>,
    /// The comparison's own words.
    pub text: String,
    /// Why the two runs are not compared although their cells match: the cell ran on
    /// another physical drive (its serial differs). Nothing is flagged then.
    pub not_compared: Option<String>,
    /// The earlier runs pooled into the baseline (`track: { against: last-N }`), oldest
    /// first; empty when the baseline is the run before alone.
    pub pooled: Vec<String>,
    /// This run against the recent runs' level and spread: what `significant` is, and half
    /// of what a flag needs. None when the runs were not compared.
    #[serde(default)]
    pub spread: Option<Spread>,
}

/// A run against the last runs of its line at the same level (up to [`RECENT_RUNS`], since
/// its last flag): where their spread says a next run falls (`stats::drift::against_recent`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// How many earlier runs.
    pub runs: usize,
    /// Their level (geometric mean), in the line's unit.
    pub level: f64,
    /// This run over that level, in percent, and its prediction interval at `ci_level`.
    pub change_pct: f64,
    pub ci_pct: (f64, f64),
    pub ci_level: f64,
    /// The interval at [`FLAG_CONFIDENCE`], which a flag needs wholly beyond the threshold.
    pub flag_ci_pct: (f64, f64),
    /// The run-to-run standard deviation used, in percent (the 2% prior pooled in).
    pub sd_pct: f64,
    pub p: f64,
}

impl Spread {
    /// "+9.5% [+3.6%, +15.8%] (95%), [+1.7%, +17.9%] (99%) vs the last 3 runs' level (run to
    /// run ±2.0%)": the interval "significant" is read from, then the one a flag needs wholly
    /// beyond the threshold.
    pub fn text(&self) -> String {
        let against = match self.runs {
            1 => "1 earlier run's level".to_string(),
            n => format!("the last {n} runs' level"),
        };
        format!(
            "{:+.1}% [{:+.1}%, {:+.1}%] ({}%), [{:+.1}%, {:+.1}%] ({}%) vs {against} (run to run ±{:.1}%)",
            self.change_pct,
            self.ci_pct.0,
            self.ci_pct.1,
            stats::level_pct(self.ci_level),
            self.flag_ci_pct.0,
            self.flag_ci_pct.1,
            stats::level_pct(FLAG_CONFIDENCE),
            self.sd_pct
        )
    }
}

impl Point {
    /// "50.00 ms [49.00 ms, 51.00 ms]", or that there is no interval.
    pub fn median_text(&self, unit: &str) -> String {
        match self.median_ci {
            Some((lo, hi)) => format!(
                "{} [{}, {}]",
                human(self.median, unit),
                human(lo, unit),
                human(hi, unit)
            ),
            None => format!("{} (n < 5: no interval)", human(self.median, unit)),
        }
    }
}

impl Since {
    /// A run against `baseline`, the run before it, as their comparison has it: the shift,
    /// its interval and Holm p; nothing changed or said, not judged yet (`judge_runs`).
    pub fn against(
        baseline: String,
        change_pct: f64,
        ci_pct: Option<(f64, f64)>,
        ci_level: Option<f64>,
        holm_p: Option<f64>,
    ) -> Since {
        Since {
            baseline,
            change_pct,
            ci_pct,
            ci_level,
            holm_p,
            estimate: false,
            significant: false,
            flag: Flag::None,
            changed: Vec::new(),
            text: String::new(),
            not_compared: None,
            pooled: Vec::new(),
            spread: None,
        }
    }

    /// "+10.0% [+8.3%, +11.7%] (99.4%) vs the run before", "(96.8%, an estimate)" when the
    /// runs are too few for its Holm step, or that too few repetitions allow no interval,
    /// or why the two runs are not compared.
    pub fn shift_text(&self) -> String {
        if let Some(why) = &self.not_compared {
            return format!("not compared: {why}");
        }
        let against = match self.pooled.len() {
            0 => " vs the run before".to_string(),
            n => format!(" vs the last {n} runs pooled"),
        };
        match self.ci_pct {
            Some((lo, hi)) => format!(
                "{:+.1}% [{lo:+.1}%, {hi:+.1}%]{}{against}",
                self.change_pct,
                match (self.ci_level, self.estimate) {
                    (Some(c), false) => format!(" ({})", stats::level_text(c)),
                    (Some(c), true) => format!(" ({}, an estimate)", stats::level_text(c)),
                    (None, _) => String::new(),
                }
            ),
            None => format!(
                "{:+.1}% (too few repetitions for an interval: not judged)",
                self.change_pct
            ),
        }
    }

    /// Everything the run's verdict rests on: the shift against the run before, then, when
    /// it was judged so, against the recent runs — "significant" is read from the latter's
    /// 95% interval (or the former's, alone), a flag needs the former and the latter's 99%
    /// interval wholly beyond the threshold.
    pub fn judged_text(&self) -> String {
        match &self.spread {
            Some(r) => format!("{}; {}", self.shift_text(), r.text()),
            None => self.shift_text(),
        }
    }

    /// The interval "significant" is read from, at its level: the recent runs' 95%
    /// prediction, or the run before's at its Holm step; none when there is none.
    pub fn significance_interval(&self) -> Option<(f64, f64)> {
        match &self.spread {
            Some(r) => Some(r.ci_pct),
            None => self.ci_pct.filter(|_| !self.estimate),
        }
    }

    /// What changed between the two runs, or that nothing recorded did.
    pub fn changed_text(&self) -> String {
        if self.changed.is_empty() {
            "nothing recorded".to_string()
        } else {
            self.changed.join("; ")
        }
    }

    /// "+10.4% since c-…; changed: kernel: 6.1.0 → 6.12.1".
    pub fn summary(&self) -> String {
        format!(
            "{:+.1}% since {}; changed: {}",
            self.change_pct,
            self.baseline,
            self.changed_text()
        )
    }
}

/// A run's report section "since the last run": each of its cells against the series'
/// run before it, as `platter history` judges them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SinceLastRun {
    pub series: String,
    /// The run before it that ended.
    pub previous: String,
    pub metric: String,
    pub threshold_pct: f64,
    pub lines: Vec<SinceLine>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SinceLine {
    pub host: String,
    pub cell: String,
    pub since: Since,
}

impl SinceLine {
    /// "h1 size=4096: +10.2% [+8.1%, +12.0%] (95.9%); +10.2% [+5.8%, +14.3%] vs the last 3
    /// runs' level (run to run ±1.5%) REGRESSION; changed: kernel: …".
    pub fn text(&self) -> String {
        let cell = if self.cell.is_empty() {
            self.host.clone()
        } else {
            format!("{} {}", self.host, self.cell)
        };
        let flag = match self.since.flag.word() {
            "" => String::new(),
            w => format!(" {w}"),
        };
        format!(
            "{cell}: {}{flag}; changed: {}",
            self.since.judged_text(),
            self.since.changed_text()
        )
    }
}

impl SinceLastRun {
    /// "since the last run of series nightly (c-…): wall, flagged beyond ±3%: 1 regression".
    pub fn title(&self) -> String {
        let flagged = self
            .lines
            .iter()
            .filter(|l| l.since.flag != Flag::None)
            .count();
        let regressions = self
            .lines
            .iter()
            .filter(|l| l.since.flag == Flag::Regression)
            .count();
        format!(
            "since the last run of series {} ({}): {}, flagged beyond ±{}%: {}",
            self.series,
            self.previous,
            self.metric,
            self.threshold_pct,
            match (flagged, regressions) {
                (0, _) => "nothing flagged".to_string(),
                (f, 0) => format!("{f} flagged, no regression"),
                (f, r) => format!("{f} flagged, {r} regression(s)"),
            }
        )
    }

    /// The section for `report`, when it is an ended run of a series with an ended run
    /// before it; on `wall` when its cells have it, else their first metric.
    pub fn load(store: &Store, report: &Report) -> Result<Option<SinceLastRun>> {
        if report.state != CampaignState::Done {
            return Ok(None);
        }
        let Some(series) = store.series_of(&report.campaign_id)? else {
            return Ok(None);
        };
        let runs = store.series_runs(&series)?;
        let Some(at) = runs
            .iter()
            .position(|r| r.campaign_id.as_str() == report.campaign_id)
        else {
            return Ok(None);
        };
        // Most campaigns are the only run of their name: nothing more is read for them.
        if !runs[..at].iter().any(|r| r.state == CampaignState::Done) {
            return Ok(None);
        }
        let metric = if report
            .cells
            .iter()
            .any(|c| c.metrics.iter().any(|m| m.metric == "wall"))
        {
            "wall".to_string()
        } else {
            match report.cells.iter().find_map(|c| c.metrics.first()) {
                Some(m) => m.metric.clone(),
                None => return Ok(None),
            }
        };
        let h = History::load(
            store,
            &series,
            &metric,
            None,
            None,
            Some(2),
            Some(&report.campaign_id),
        )?;
        let Some(previous) = h.runs.iter().rev().nth(1).map(|r| r.campaign_id.clone()) else {
            return Ok(None);
        };
        let lines = h
            .lines
            .iter()
            .filter_map(|l| {
                let p = l
                    .points
                    .last()
                    .filter(|p| p.campaign_id == report.campaign_id)?;
                Some(SinceLine {
                    host: l.host.clone(),
                    cell: l.cell.clone(),
                    since: p.since_previous.clone()?,
                })
            })
            .collect();
        Ok(Some(SinceLastRun {
            series: h.series,
            previous,
            metric,
            threshold_pct: h.threshold_pct,
            lines,
        }))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Flag {
    None,
    /// Worse by the metric's unit (a time up, a rate down).
    Regression,
    Improvement,
    /// Beyond the threshold either way, for a metric without a known better direction.
    Changed,
}

impl Flag {
    /// "REGRESSION", "IMPROVEMENT", "CHANGED", or "" for none.
    pub fn word(self) -> &'static str {
        match self {
            Flag::None => "",
            Flag::Regression => "REGRESSION",
            Flag::Improvement => "IMPROVEMENT",
            Flag::Changed => "CHANGED",
        }
    }
}

/// Whether a larger value of a metric in `unit` is worse (times), better (rates), or
/// neither is known (counts, sizes).
pub fn larger_is_worse(unit: &str) -> Option<bool> {
    match unit {
        "s" | "ms" | "µs" | "us" | "ns" => Some(true),
        u if u.ends_with("/s") => Some(false),
        _ => None,
    }
}

/// The flag of a shift of `change_pct` with the interval `ci_pct` on a metric in `unit`:
/// significant, and its whole interval beyond the threshold (a shift whose interval
/// reaches inside it may be smaller than the threshold: a point estimate past it alone
/// flagged 2.1% of noise-only comparisons at a 5% coefficient of variation, the interval
/// 0.34% — `false_flags_of_noise_only_series_stay_under_one_percent`).
pub fn flag_of(
    significant: bool,
    change_pct: f64,
    ci_pct: Option<(f64, f64)>,
    threshold_pct: f64,
    unit: &str,
) -> Flag {
    let Some((lo, hi)) = ci_pct else {
        return Flag::None;
    };
    let beyond = lo >= threshold_pct || hi <= -threshold_pct;
    if !significant || !beyond || !change_pct.is_finite() {
        return Flag::None;
    }
    direction(change_pct, unit)
}

/// Which way a change of `change_pct` on a metric in `unit` goes.
fn direction(change_pct: f64, unit: &str) -> Flag {
    match larger_is_worse(unit) {
        Some(worse_up) if worse_up == (change_pct > 0.0) => Flag::Regression,
        Some(_) => Flag::Improvement,
        None => Flag::Changed,
    }
}

/// The standard error of one run's median from the noise within it, of the logs: the root
/// mean square over `points` of what their medians' intervals say (the interval's half-width
/// over the normal quantile of its coverage); 0 when none has an interval.
fn within_sd<'a>(points: impl Iterator<Item = &'a Point>) -> f64 {
    let ses: Vec<f64> = points
        .filter_map(|p| {
            let (lo, hi) = p.median_ci?;
            let level = p.median_ci_level?;
            (lo > 0.0 && hi >= lo && level > 0.0 && level < 1.0).then(|| {
                let z = stats::normal_quantile(0.5 + level / 2.0);
                (hi / lo).ln() / (2.0 * z)
            })
        })
        .collect();
    if ses.is_empty() {
        0.0
    } else {
        (ses.iter().map(|s| s * s).sum::<f64>() / ses.len() as f64).sqrt()
    }
}

/// Each point of `line` against the recent runs before it: sets `significant`, `flag` and
/// `spread` of its `Since`, from what `since_previous` judged against the run before (its
/// Holm p and interval) and the medians. The recent runs are the last [`RECENT_RUNS`]
/// points since the line's last flag or change of drive (a flagged run starts a new level:
/// the runs before it say nothing of the spread after it). A flag needs the run against the
/// run before and against the recent runs to be flagged alike.
pub fn judge_runs(line: &mut Line, threshold_pct: f64) {
    let mut start = 0;
    for i in 0..line.points.len() {
        let (before, rest) = line.points.split_at_mut(i);
        let point = &mut rest[0];
        let window = &before[start.max(i.saturating_sub(RECENT_RUNS))..];
        let spread_within = within_sd(window.iter().chain([&*point]));
        let median = point.median;
        let Some(s) = point.since_previous.as_mut() else {
            continue;
        };
        // Significant against the run before: decided at its Holm step (not an estimate),
        // and its interval, at that step's level, excludes 0.
        let within = !s.estimate
            && s.holm_p.is_some_and(|p| p <= stats::ALPHA)
            && s.ci_pct.is_some_and(|(lo, hi)| lo > 0.0 || hi < 0.0)
            && s.not_compared.is_none();
        let against_before = flag_of(within, s.change_pct, s.ci_pct, threshold_pct, &line.unit);
        let earlier: Vec<f64> = window.iter().map(|q| q.median).collect();
        let recent = s
            .not_compared
            .is_none()
            .then(|| series::against_recent(&earlier, median, spread_within, stats::CONFIDENCE))
            .flatten();
        match recent {
            Some(r) => {
                s.significant = r.p <= stats::ALPHA;
                let flag_ci =
                    series::against_recent(&earlier, median, spread_within, FLAG_CONFIDENCE)
                        .map(|f| f.ci_pct);
                let against_recent = flag_of(
                    s.significant,
                    r.change_pct,
                    flag_ci,
                    threshold_pct,
                    &line.unit,
                );
                s.flag = if against_recent == against_before {
                    against_before
                } else {
                    Flag::None
                };
                s.spread = Some(Spread {
                    runs: earlier.len(),
                    level: r.level,
                    change_pct: r.change_pct,
                    ci_pct: r.ci_pct,
                    ci_level: stats::CONFIDENCE,
                    flag_ci_pct: flag_ci.unwrap_or(r.ci_pct),
                    sd_pct: r.sd * 100.0,
                    p: r.p,
                });
            }
            // Not compared, or values with no ratio: the run before alone.
            None => {
                s.significant = within;
                s.flag = against_before;
                s.spread = None;
            }
        }
        if s.flag != Flag::None || s.not_compared.is_some() {
            start = i;
        }
    }
}

impl History {
    /// The history of the campaigns named `series` on `metric`, of `host`'s cells only
    /// when given, over the `last` runs that ended when given (each report is read: a
    /// page shows a window, not every night since the fleet began), up to and with run
    /// `until` when given.
    pub fn load(
        store: &Store,
        series: &str,
        metric: &str,
        host: Option<&str>,
        threshold_pct: Option<f64>,
        last: Option<usize>,
        until: Option<&str>,
    ) -> Result<History> {
        // A run asked for by id is judged within its own series, whatever name it has.
        let series = match until {
            Some(run) => store.series_of(run)?.unwrap_or_else(|| series.to_string()),
            None => series.to_string(),
        };
        let series = series.as_str();
        // The last runs asked for, and as many before them to judge the first against.
        let SeriesRuns {
            mut runs,
            left_out,
            reports,
            files,
        } = read_runs(store, series, last.map(|n| n + RECENT_RUNS), until)?;
        // The threshold asked for, else the latest run's `track: { threshold: … }`; the
        // runs pooled into a baseline, its `track: { against: last-N }` (else 1).
        let track = files
            .last()
            .and_then(|(_, yaml)| crate::spec::parse("campaign.yaml", yaml).ok())
            .map(|c| c.track)
            .unwrap_or_default();
        let threshold_pct = threshold_pct
            .or(track.threshold_pct)
            .unwrap_or(DEFAULT_THRESHOLD_PCT);
        let against = track.against.unwrap_or(1).max(1) as usize;
        let mut lines: Vec<Line> = Vec::new();
        let mut index: HashMap<(String, String), usize> = HashMap::new();
        for (i, report) in reports.iter().enumerate() {
            // This run against the one before it (or the last `against` pooled), decided
            // together (Holm over its cells).
            let earlier = &reports[i.saturating_sub(against)..i];
            let pooled_ids: Vec<String> = if earlier.len() > 1 {
                earlier.iter().map(|r| r.campaign_id.clone()).collect()
            } else {
                Vec::new()
            };
            let judged = (i > 0).then(|| match earlier {
                [one] => compare_campaigns(one, report, metric),
                many => compare_campaigns(&pooled(many), report, metric),
            });
            let by_cell: HashMap<&str, &JudgedComparison> = judged
                .iter()
                .flat_map(|c| c.rows.iter())
                .filter_map(|r| Some((r.cells.as_ref()?.candidate.as_str(), r)))
                .collect();
            for cell in &report.cells {
                if host.is_some_and(|h| h != cell.host) {
                    continue;
                }
                let Some(m) = cell.metrics.iter().find(|m| m.metric == metric) else {
                    continue;
                };
                let params: Vec<String> = cell
                    .params
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                let key = (cell.host.clone(), params.join(" "));
                let at = *index.entry(key.clone()).or_insert_with(|| {
                    lines.push(Line {
                        host: key.0.clone(),
                        cell: key.1.clone(),
                        unit: m.unit.clone(),
                        points: Vec::new(),
                        drift: Vec::new(),
                    });
                    lines.len() - 1
                });
                let since = by_cell
                    .get(cell.cell_id.as_str())
                    .filter(|r| r.compared)
                    .map(|r| {
                        since_previous(
                            r,
                            (&reports[i - 1], &files[i - 1]),
                            (report, &files[i]),
                            cell,
                            &m.unit,
                            &pooled_ids,
                            threshold_pct,
                        )
                    });
                lines[at].points.push(Point {
                    campaign_id: report.campaign_id.clone(),
                    n: m.stats.n,
                    median: m.stats.median,
                    median_ci: m.stats.median_ci,
                    median_ci_level: m.stats.median_ci_level,
                    since_previous: since,
                });
            }
        }
        for line in &mut lines {
            judge_runs(line, threshold_pct);
        }
        // The runs read only to judge the first of the window by go: the window's first run
        // on each line is against nothing, as if they had not been read.
        if let Some(n) = last {
            let context: Vec<String> = runs
                .drain(..runs.len().saturating_sub(n))
                .map(|r| r.campaign_id)
                .collect();
            for line in &mut lines {
                let before = line.points.len();
                line.points.retain(|p| !context.contains(&p.campaign_id));
                if line.points.len() < before {
                    if let Some(first) = line.points.first_mut() {
                        first.since_previous = None;
                    }
                }
            }
            lines.retain(|l| !l.points.is_empty());
        }
        for line in &mut lines {
            line.drift = drift_of(line, &runs, threshold_pct);
        }
        Ok(History {
            series: series.to_string(),
            metric: metric.to_string(),
            threshold_pct,
            runs,
            left_out,
            lines,
        })
    }

    /// The flagged steps and ramps of the series: (line, drift).
    pub fn drift_flags(&self) -> Vec<(&Line, &Drift)> {
        self.lines
            .iter()
            .flat_map(|l| l.drift.iter().map(move |d| (l, d)))
            .filter(|(_, d)| d.flag != Flag::None)
            .collect()
    }

    /// The flagged steps and ramps of the latest run: a ramp that goes on to it (the latest
    /// run is its worst yet), and a step it brought — flagged now, not found (the same way,
    /// within two runs) in the line without its latest run, and not already flagged run to
    /// run at its own run. What `--fail-on-regression` fails on beside the latest run's own
    /// flags: a step is told once, when it is seen, not on every run after it (the store's
    /// flags keep it open until it is dealt with); a ramp as long as it climbs.
    pub fn latest_drift_flags(&self) -> Vec<(&Line, &Drift)> {
        let Some(latest) = self.runs.last() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for line in &self.lines {
            if line.points.last().map(|p| &p.campaign_id) != Some(&latest.campaign_id) {
                continue;
            }
            let shorter = Line {
                points: line.points[..line.points.len() - 1].to_vec(),
                drift: Vec::new(),
                ..line.clone()
            };
            let before = drift_of(&shorter, &self.runs, self.threshold_pct);
            for d in line.drift.iter().filter(|d| d.flag != Flag::None) {
                let seen = before.iter().any(|b| {
                    b.kind == d.kind
                        && b.flag == d.flag
                        && b.first_run <= d.last_run + 2
                        && d.first_run <= b.last_run + 2
                });
                let flagged_at_its_run = d.kind == DriftKind::Step
                    && line
                        .points
                        .iter()
                        .find(|p| p.campaign_id == d.first_campaign)
                        .and_then(|p| p.since_previous.as_ref())
                        .is_some_and(|s| s.flag == d.flag);
                let climbing = d.kind == DriftKind::Ramp && d.last_run == self.runs.len();
                if climbing || (!seen && !flagged_at_its_run) {
                    out.push((line, d));
                }
            }
        }
        out
    }

    /// The flags of the series' latest run: (line, its last point), flagged ones only.
    pub fn latest_flags(&self) -> Vec<(&Line, &Point)> {
        let Some(latest) = self.runs.last() else {
            return Vec::new();
        };
        self.lines
            .iter()
            .filter_map(|l| {
                let p = l.points.last()?;
                (p.campaign_id == latest.campaign_id
                    && p.since_previous
                        .as_ref()
                        .is_some_and(|s| s.flag != Flag::None))
                .then_some((l, p))
            })
            .collect()
    }
}

/// What a history reads of a series: the runs that ended, their reports and files, the rest.
struct SeriesRuns {
    runs: Vec<Run>,
    left_out: Vec<LeftOut>,
    reports: Vec<Report>,
    /// What each run's campaign file said (`(content hash, text)`): a run of a changed
    /// file is compared, and the change is named with every flag.
    files: Vec<(String, String)>,
}

/// The runs of `series` up to and with `until`, the `last` that ended when given.
fn read_runs(
    store: &Store,
    series: &str,
    last: Option<usize>,
    until: Option<&str>,
) -> Result<SeriesRuns> {
    let mut runs = Vec::new();
    let mut left_out = Vec::new();
    let mut reports: Vec<Report> = Vec::new();
    let mut files: Vec<(String, String)> = Vec::new();
    let mut all = store.series_runs(series)?;
    let firings = store.firings_of(
        &all.iter()
            .map(|r| r.campaign_id.clone())
            .collect::<Vec<_>>(),
    )?;
    if let Some(at) = until.and_then(|u| all.iter().position(|r| r.campaign_id.as_str() == u)) {
        all.truncate(at + 1);
    }
    let ended = all
        .iter()
        .filter(|r| r.state == CampaignState::Done)
        .count();
    let skip = last.map_or(0, |n| ended.saturating_sub(n));
    let mut done_seen = 0;
    for run in all {
        if run.state == CampaignState::Done {
            done_seen += 1;
            if done_seen <= skip {
                continue;
            }
        }
        match run.state {
            CampaignState::Done => {
                files.push((run.content_hash.clone(), run.yaml.clone()));
                reports.push(Report::load_cells(store, run.campaign_id.as_str())?);
                runs.push(Run {
                    campaign_id: run.campaign_id.to_string(),
                    submitted_unix_ms: run.submitted_unix_ms,
                    labels: firings
                        .get(&run.campaign_id)
                        .map(|f| f.labels.clone())
                        .unwrap_or_default(),
                });
            }
            other => left_out.push(LeftOut {
                campaign_id: run.campaign_id.to_string(),
                why: format!("{} (only runs that ended are tracked)", other.as_str()),
            }),
        }
    }
    Ok(SeriesRuns {
        runs,
        left_out,
        reports,
        files,
    })
}

/// A cell's shift since the run `before` (judged in `r`), flagged beyond `threshold_pct`.
fn since_previous(
    r: &JudgedComparison,
    before: (&Report, &(String, String)),
    now: (&Report, &(String, String)),
    cell: &CellReport,
    unit: &str,
    pooled: &[String],
    threshold_pct: f64,
) -> Since {
    let baseline = before.0.campaign_id.clone();
    let changed = what_changed(before, now, &cell.host);
    let change_pct = r.row.penalty_pct;
    let not_compared = other_drive(
        before.0,
        now.0,
        &cell.host,
        cell.params.get(crate::spec::DEVICE).map(String::as_str),
    );
    let significant = r.row.significant && r.row.ci_pct.is_some() && not_compared.is_none();
    // `judge_runs` sets `significant` and `flag` again, with `spread`.
    Since {
        estimate: r.too_few_runs.is_some(),
        pooled: pooled.to_vec(),
        not_compared,
        significant,
        flag: flag_of(significant, change_pct, r.row.ci_pct, threshold_pct, unit),
        changed,
        text: r.row.text.clone(),
        ..Since::against(baseline, change_pct, r.row.ci_pct, r.ci_level, r.holm_p)
    }
}

/// What differs on `host` between two runs, each `(report, campaign file)`: file, then facts.
fn what_changed(
    before: (&Report, &(String, String)),
    now: (&Report, &(String, String)),
    host: &str,
) -> Vec<String> {
    let mut changed = file_changes(before.1, now.1);
    // What the host ran each run on (`host_facts`).
    match (&host_facts(before.0, host), &host_facts(now.0, host)) {
        (Some(b), Some(n)) => changed.extend(provenance::changed(n, b).into_iter().map(|k| {
            let was = b.get(&k).map_or("-", String::as_str);
            let is = n.get(&k).map_or("-", String::as_str);
            format!("{k}: {was} → {is}")
        })),
        _ => changed.push("what it ran on was not recorded for both runs".into()),
    }
    changed
}

/// The runs `reports` (oldest first) as one baseline: the latest's report with each cell's
/// values joined by those of the same host and parameters in the runs before it. Pooling
/// assumes the runs differ by noise alone; drift between them narrows the interval, which
/// is why `last` (one run) is the default.
fn pooled(reports: &[Report]) -> Report {
    let (latest, before) = reports.split_last().expect("at least one run");
    let mut out = latest.clone();
    for cell in &mut out.cells {
        for m in &mut cell.metrics {
            for r in before {
                let Some(same) = r
                    .cells
                    .iter()
                    .find(|c| c.host == cell.host && c.params == cell.params)
                    .and_then(|c| {
                        c.metrics
                            .iter()
                            .find(|x| x.metric == m.metric && x.unit == m.unit)
                    })
                else {
                    continue;
                };
                m.values.extend_from_slice(&same.values);
            }
        }
    }
    out
}

/// Whether `host`'s cell on drive `device` (any drive of the host, for a cell without a
/// device) ran on another physical drive in `now` than in `before`: the same path with
/// another serial, said as "another drive at /dev/sdb: serial S1 → S2".
fn other_drive(before: &Report, now: &Report, host: &str, device: Option<&str>) -> Option<String> {
    let serials = |r: &Report| -> std::collections::BTreeMap<String, String> {
        r.provenance
            .iter()
            .filter(|s| s.host == host)
            .flat_map(|s| s.facts.devices.iter())
            .filter(|d| !d.device.serial.is_empty())
            .map(|d| (d.device.path.clone(), d.device.serial.clone()))
            .collect()
    };
    let (was, is) = (serials(before), serials(now));
    was.iter()
        .filter(|(path, _)| {
            device.is_none_or(|d| d == path.as_str() || path.ends_with(&format!("/{d}")))
        })
        .find_map(|(path, old)| {
            let new = is.get(path)?;
            (new != old).then(|| format!("another drive at {path}: serial {old} → {new}"))
        })
}

/// What `host` ran a run on: the facts of its snapshots, each fact as first taken (the
/// plan's start for the host, the first storage setup for mounts and the write cache).
fn host_facts(report: &Report, host: &str) -> Option<IndexMap<String, String>> {
    let mut out: Option<IndexMap<String, String>> = None;
    for s in report.provenance.iter().filter(|s| s.host == host) {
        let all = out.get_or_insert_with(IndexMap::new);
        for (k, v) in provenance::facts(&s.facts) {
            all.entry(k).or_insert(v);
        }
    }
    out
}

/// How the campaign file of a run differs from the one before it (`(content hash, text)`
/// each): the lines only the earlier has, then those only the later has, a few of each.
fn file_changes(before: &(String, String), now: &(String, String)) -> Vec<String> {
    if before.0 == now.0 {
        return Vec::new();
    }
    let lines = |text: &str| -> Vec<String> {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_string)
            .collect()
    };
    let (was, is) = (lines(&before.1), lines(&now.1));
    let gone: Vec<&String> = was.iter().filter(|l| !is.contains(l)).take(3).collect();
    let came: Vec<&String> = is.iter().filter(|l| !was.contains(l)).take(3).collect();
    let quote = |ls: &[&String]| {
        if ls.is_empty() {
            "-".to_string()
        } else {
            ls.iter()
                .map(|l| format!("`{l}`"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    vec![format!(
        "campaign file: {} → {}",
        quote(&gone),
        quote(&came)
    )]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift64* with Box–Muller: a fixed, reproducible stream; no crate needed for a
    /// test's noise.
    struct Noise(u64);

    impl Noise {
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
        }

        fn normal(&mut self) -> f64 {
            let (u, v) = (self.uniform().max(1e-12), self.uniform());
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        }

        /// `n` repetitions around 1 with a coefficient of variation `cv`, log-normal or
        /// uniform with the same standard deviation.
        fn run(&mut self, n: usize, cv: f64, lognormal: bool) -> Vec<f64> {
            (0..n)
                .map(|_| {
                    if lognormal {
                        (cv * self.normal()).exp()
                    } else {
                        1.0 + cv * 3f64.sqrt() * (2.0 * self.uniform() - 1.0)
                    }
                })
                .collect()
        }
    }

    /// A series of two cells as `History::load` judges it: each cell's run `r` is `levels[r]`
    /// (its true value, one per cell) times a run-level shift (log-normal, `run_sd`) times 8
    /// repetitions of noise within the run (`cv`); each run against the one before (decided
    /// at Holm's steps across the two cells), `judge_runs` and `drift_of`. The runs are named `c-1`, `c-2`….
    fn simulated(
        noise: &mut Noise,
        levels: &[[f64; 2]],
        run_sd: f64,
        cv: f64,
        lognormal: bool,
    ) -> (Vec<Run>, Vec<Line>) {
        let runs: Vec<Run> = (1..=levels.len())
            .map(|i| Run {
                campaign_id: format!("c-{i}"),
                submitted_unix_ms: i as i64,
                labels: Default::default(),
            })
            .collect();
        let values: Vec<[Vec<f64>; 2]> = levels
            .iter()
            .map(|l| {
                [0, 1].map(|c| {
                    let shift = l[c] * (run_sd * noise.normal()).exp();
                    noise
                        .run(8, cv, lognormal)
                        .iter()
                        .map(|v| v * shift)
                        .collect()
                })
            })
            .collect();
        let mut lines: Vec<Line> = (0..2)
            .map(|c| Line {
                host: "h".into(),
                cell: format!("cell={c}"),
                unit: "s".into(),
                points: Vec::new(),
                drift: Vec::new(),
            })
            .collect();
        for (r, run) in values.iter().enumerate() {
            // As `compare_campaigns` decides a run's cells: at their Holm steps.
            let decided = match r {
                0 => vec![None, None],
                _ => stats::decide_family(&[
                    (&values[r - 1][0], &run[0]),
                    (&values[r - 1][1], &run[1]),
                ]),
            };
            for (c, line) in lines.iter_mut().enumerate() {
                let summary = stats::summarize(&run[c]).unwrap();
                let since = decided[c].as_ref().map(|d| Since {
                    estimate: !d.decided,
                    ..Since::against(
                        format!("c-{r}"),
                        d.comparison.penalty_pct,
                        d.comparison.ci_pct,
                        d.comparison.ci_level,
                        Some(d.holm_p),
                    )
                });
                line.points.push(Point {
                    campaign_id: format!("c-{}", r + 1),
                    n: 8,
                    median: summary.median,
                    median_ci: summary.median_ci,
                    median_ci_level: summary.median_ci_level,
                    since_previous: since,
                });
            }
        }
        for line in &mut lines {
            judge_runs(line, DEFAULT_THRESHOLD_PCT);
            line.drift = drift_of(line, &runs, DEFAULT_THRESHOLD_PCT);
        }
        (runs, lines)
    }

    /// Noise only, as real series are: 1,000 series of 20 runs, two cells each, every run
    /// shifted as a whole (2% standard deviation from run to run) besides the noise within
    /// it (8 repetitions, a coefficient of variation of 2% and of 5%, uniform and
    /// log-normal). Counted per line (host × cell × metric): the lines with any run-to-run
    /// flag, and with any drift flag, each ≤ 1%; and how often a run is marked
    /// "significant", beside its nominal 5%. Printed (`cargo test -p platter --lib
    /// false_flags -- --nocapture`); BENCHMARKS.md has the figures.
    #[test]
    fn false_flags_of_noise_only_series_stay_under_one_percent() {
        let mut noise = Noise(0x9E37_79B9_7F4A_7C15);
        for (cv, lognormal) in [(0.02, false), (0.05, false), (0.02, true), (0.05, true)] {
            let (mut lines, mut run_flagged, mut drift_flagged) = (0usize, 0usize, 0usize);
            let (mut judged, mut significant, mut against_before) = (0usize, 0usize, 0usize);
            for _series in 0..1000 {
                let (_, judged_lines) = simulated(&mut noise, &[[1.0; 2]; 20], 0.02, cv, lognormal);
                for line in &judged_lines {
                    lines += 1;
                    let sinces: Vec<&Since> = line
                        .points
                        .iter()
                        .filter_map(|p| p.since_previous.as_ref())
                        .collect();
                    run_flagged += usize::from(sinces.iter().any(|s| s.flag != Flag::None));
                    drift_flagged += usize::from(line.drift.iter().any(|d| d.flag != Flag::None));
                    judged += sinces.len();
                    significant += sinces.iter().filter(|s| s.significant).count();
                    // What "significant" was before: the run before alone, Holm over the run.
                    against_before += sinces
                        .iter()
                        .filter(|s| s.holm_p.is_some_and(|p| p <= stats::ALPHA))
                        .count();
                }
            }
            let pct = |k: usize, of: usize| 100.0 * k as f64 / of as f64;
            println!(
                "noise only, 2% run to run, cv {:.0}% {}: lines flagged run to run {run_flagged}/{lines} ({:.2}%), \
                 by drift {drift_flagged}/{lines} ({:.2}%); marked significant {:.2}% of {judged} runs (nominal 5%; \
                 against the run before alone {:.1}%)",
                cv * 100.0,
                if lognormal { "log-normal" } else { "uniform" },
                pct(run_flagged, lines),
                pct(drift_flagged, lines),
                pct(significant, judged),
                pct(against_before, judged),
            );
            assert!(pct(run_flagged, lines) <= 1.0, "cv {cv}: run to run");
            assert!(pct(drift_flagged, lines) <= 1.0, "cv {cv}: drift");
            assert!(pct(significant, judged) <= 7.5, "cv {cv}: significant");
        }
    }

    /// A step of 10% from run 8 of 20 (2% from run to run, 2% within): flagged as a step at
    /// run 8 on the line, in ≥ 95% of 200 simulated series.
    /// Issue 50: the mark beside a run and the intervals printed beside it agree, on noise,
    /// steps and ramps. "significant" is exactly the printed 95% interval against the recent
    /// runs excluding 0 (or, without one, the run before's interval at its Holm step); a
    /// flag stands only where the interval against the run before and the printed 99% one
    /// both lie wholly beyond the threshold, its way; an estimate is never significant.
    #[test]
    fn each_runs_mark_agrees_with_the_intervals_printed_beside_it() {
        let mut noise = Noise(0x51_7CC1_B727_220A);
        let (mut marked, mut flagged, mut points) = (0, 0, 0);
        for series in 0..300 {
            let levels: Vec<[f64; 2]> = (0..20)
                .map(|r| match series % 3 {
                    0 => [1.0; 2],
                    1 if r >= 10 => [1.12, 0.9],
                    1 => [1.0; 2],
                    _ => [1.0 + 0.012 * r as f64, 1.0 - 0.01 * r as f64],
                })
                .collect();
            let (_, lines) = simulated(&mut noise, &levels, 0.02, 0.03, series % 2 == 0);
            for line in &lines {
                for s in line.points.iter().filter_map(|p| p.since_previous.as_ref()) {
                    points += 1;
                    let text = s.judged_text();
                    let excludes_0 = |(lo, hi): (f64, f64)| lo > 0.0 || hi < 0.0;
                    let (lo, hi) = s.ci_pct.expect("8 + 8 runs have an interval");
                    assert!(text.contains(&format!("[{lo:+.1}%, {hi:+.1}%]")), "{text}");
                    match &s.spread {
                        Some(r) => {
                            assert_eq!(s.significant, excludes_0(r.ci_pct), "{text}");
                            for (lo, hi) in [r.ci_pct, r.flag_ci_pct] {
                                assert!(
                                    text.contains(&format!("[{lo:+.1}%, {hi:+.1}%]")),
                                    "{text}"
                                );
                            }
                            assert!(text.contains("(95%), ["), "{text}");
                            assert!(text.contains("(99%) vs "), "{text}");
                        }
                        None => {
                            assert_eq!(s.significant, !s.estimate && excludes_0((lo, hi)), "{text}")
                        }
                    }
                    if s.estimate {
                        assert!(text.contains(", an estimate)"), "{text}");
                    }
                    marked += usize::from(s.significant);
                    if s.flag == Flag::None {
                        continue;
                    }
                    flagged += 1;
                    let t = DEFAULT_THRESHOLD_PCT;
                    let beyond = |(lo, hi): (f64, f64)| match s.flag {
                        Flag::Regression => lo > t,
                        Flag::Improvement => hi < -t,
                        _ => lo > t || hi < -t,
                    };
                    let r = s
                        .spread
                        .as_ref()
                        .expect("a flag judged against the recent runs");
                    assert!(s.significant && !s.estimate, "{text}");
                    assert!(
                        beyond((lo, hi)) && beyond(r.flag_ci_pct),
                        "{:?} {text}",
                        s.flag
                    );
                }
            }
        }
        // Both marks were tried, not vacuously true.
        assert!(
            marked > 300 && flagged > 50,
            "{marked} marked, {flagged} flagged of {points}"
        );
    }

    #[test]
    fn a_step_of_ten_percent_is_flagged_at_its_run() {
        let mut noise = Noise(7);
        let levels: Vec<[f64; 2]> = (1..=20)
            .map(|r| if r >= 8 { [1.10; 2] } else { [1.0; 2] })
            .collect();
        let (mut lines, mut at_its_run, mut run_to_run) = (0, 0, 0);
        for _ in 0..100 {
            let (_, judged) = simulated(&mut noise, &levels, 0.02, 0.02, true);
            for line in &judged {
                lines += 1;
                at_its_run += usize::from(line.drift.iter().any(|d| {
                    d.kind == DriftKind::Step && d.first_run == 8 && d.flag == Flag::Regression
                }));
                run_to_run += usize::from(
                    line.points[7]
                        .since_previous
                        .as_ref()
                        .is_some_and(|s| s.flag == Flag::Regression),
                );
            }
        }
        println!("a 10% step at run 8: a step at run 8 on {at_its_run}/{lines} lines, flagged run to run at run 8 on {run_to_run}");
        assert!(at_its_run * 100 >= lines * 95, "{at_its_run}/{lines}");
    }

    /// A ramp of 1% a run from run 6 on (2% from run to run, 2% within): flagged by its 12th
    /// run in ≥ 90% of 200 simulated lines — as a ramp whose range ends at the latest run,
    /// or as a step inside it (an early ramp looks like one); the run it is first flagged
    /// at, how often as a ramp, and how far off the ramp's start its range starts, printed.
    #[test]
    fn a_ramp_of_one_percent_a_run_is_flagged_by_its_twelfth_run() {
        let mut noise = Noise(11);
        let start: usize = 5; // index of its corner: run 6
        let (mut lines, mut as_ramp, mut first_seen, mut start_off) =
            (0, 0, Vec::new(), Vec::new());
        for _ in 0..100 {
            let levels: Vec<[f64; 2]> = (0..start + 12)
                .map(|i| [1.01f64.powi(i.saturating_sub(start) as i32); 2])
                .collect();
            let (runs, judged) = simulated(&mut noise, &levels, 0.02, 0.02, true);
            for line in &judged {
                lines += 1;
                // The history as it stood after each run of the ramp.
                let seen = (start + 2..=start + 12).find_map(|last| {
                    let mut shorter = line.clone();
                    shorter.points.truncate(last);
                    drift_of(&shorter, &runs[..last], DEFAULT_THRESHOLD_PCT)
                        .into_iter()
                        .find(|d| {
                            d.flag == Flag::Regression
                                && match d.kind {
                                    DriftKind::Ramp => d.last_run == last,
                                    DriftKind::Step => d.first_run > start,
                                }
                        })
                        .map(|d| (last, d))
                });
                if let Some((last, _)) = seen {
                    first_seen.push(last - start);
                }
                // At its 12th run: a ramp, and where its range starts.
                if let Some(d) = drift_of(line, &runs, DEFAULT_THRESHOLD_PCT)
                    .iter()
                    .find(|d| d.kind == DriftKind::Ramp && d.flag == Flag::Regression)
                {
                    as_ramp += 1;
                    start_off.push(d.first_run as i64 - (start as i64 + 1));
                }
            }
        }
        first_seen.sort();
        start_off.sort();
        let at = |v: &[usize], q: f64| v.get((v.len() as f64 * q) as usize).copied().unwrap_or(0);
        println!(
            "a ramp of 1% a run: flagged by its 12th run on {}/{lines} lines, at it a ramp on {as_ramp}; first flagged at its run {} (median), {} (90th percentile); a ramp's range starts {} runs off its start (median; {}..{} the middle 80%)",
            first_seen.len(),
            at(&first_seen, 0.5),
            at(&first_seen, 0.9),
            start_off.get(start_off.len() / 2).copied().unwrap_or(0),
            start_off.get(start_off.len() / 10).copied().unwrap_or(0),
            start_off.get(start_off.len() * 9 / 10).copied().unwrap_or(0),
        );
        assert!(
            first_seen.len() * 100 >= lines * 90,
            "{}/{lines}",
            first_seen.len()
        );
        assert!(as_ramp * 100 >= lines * 60, "{as_ramp}/{lines}");
    }

    /// The creeping regression: 15 runs of a 20 ms workload, each 1.2% slower than
    /// the one before (21.09 → 24.76 ms), under 3% run to run: flagged as a ramp over all 15.
    #[test]
    fn a_creeping_regression_is_one_ramp_over_its_runs() {
        let ratio = (24.76f64 / 21.09).powf(1.0 / 14.0);
        let runs: Vec<Run> = (1..=15)
            .map(|i| Run {
                campaign_id: format!("c-{i}"),
                submitted_unix_ms: i,
                labels: Default::default(),
            })
            .collect();
        let line = Line {
            host: "h".into(),
            cell: String::new(),
            unit: "ms".into(),
            points: (0..15)
                .map(|i| Point {
                    campaign_id: format!("c-{}", i + 1),
                    n: 8,
                    median: 21.09 * ratio.powi(i),
                    median_ci: None,
                    median_ci_level: None,
                    since_previous: None,
                })
                .collect(),
            drift: Vec::new(),
        };
        let drift = drift_of(&line, &runs, DEFAULT_THRESHOLD_PCT);
        assert_eq!(drift.len(), 1, "{drift:#?}");
        let d = &drift[0];
        assert_eq!(d.text(), "+17% over runs 1–15, 1.2% a run");
        assert_eq!((d.kind, d.flag), (DriftKind::Ramp, Flag::Regression));
        assert_eq!(
            (d.first_campaign.as_str(), d.last_campaign.as_str()),
            ("c-1", "c-15")
        );
        assert!((d.baseline - 21.09).abs() < 1e-9, "{d:#?}");
        // Faster by as much: an improvement; under the threshold: listed, not flagged.
        let mut faster = line.clone();
        faster.points.reverse();
        for (p, r) in faster.points.iter_mut().zip(&runs) {
            p.campaign_id = r.campaign_id.clone();
        }
        assert_eq!(drift_of(&faster, &runs, 3.0)[0].flag, Flag::Improvement);
        assert_eq!(drift_of(&line, &runs, 20.0)[0].flag, Flag::None);
    }

    #[test]
    fn a_changed_campaign_file_is_named_by_its_lines() {
        let file = |hash: &str, text: &str| (hash.to_string(), text.to_string());
        let a = file(
            "h1",
            "name: s\nworkload:\n  command:\n    run: sleep 0.05\nrepeat: 6\n",
        );
        let b = file(
            "h2",
            "name: s\n# slower\nworkload:\n  command:\n    run: sleep 0.06\nrepeat: 6\n",
        );
        assert_eq!(
            file_changes(&a, &b),
            ["campaign file: `run: sleep 0.05` → `run: sleep 0.06`"]
        );
        let c = file(
            "h3",
            "name: s\nworkload:\n  command:\n    run: sleep 0.05\nrepeat: 6\nwarmup: 1\n",
        );
        assert_eq!(file_changes(&a, &c), ["campaign file: - → `warmup: 1`"]);
        // The same file (by its hash): nothing.
        assert!(file_changes(&a, &a.clone()).is_empty());
    }

    #[test]
    fn a_flag_needs_significance_the_threshold_and_says_which_way() {
        let up = Some((6.0, 14.0));
        let down = Some((-14.0, -6.0));
        assert_eq!(flag_of(true, 10.0, up, 3.0, "s"), Flag::Regression);
        assert_eq!(flag_of(true, -10.0, down, 3.0, "s"), Flag::Improvement);
        assert_eq!(flag_of(true, -10.0, down, 3.0, "B/s"), Flag::Regression);
        assert_eq!(flag_of(true, 10.0, up, 3.0, "op/s"), Flag::Improvement);
        assert_eq!(flag_of(true, 10.0, up, 3.0, "B"), Flag::Changed);
        // Not significant, an interval reaching inside the threshold, or none: nothing.
        assert_eq!(flag_of(false, 10.0, up, 3.0, "s"), Flag::None);
        assert_eq!(flag_of(true, 5.0, Some((2.0, 8.0)), 3.0, "s"), Flag::None);
        assert_eq!(flag_of(true, 10.0, None, 3.0, "s"), Flag::None);
        assert_eq!(flag_of(true, f64::NAN, up, 3.0, "s"), Flag::None);
    }
}
