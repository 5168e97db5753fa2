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
use crate::store::{CampaignState, Result, Store};

/// The practical threshold of a flag, in percent of the earlier run's value.
pub const DEFAULT_THRESHOLD_PCT: f64 = 3.0;

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

/// A point against the one before it.
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
    /// Holm-adjusted p over this run's comparisons.
    pub holm_p: Option<f64>,
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
    /// "+10.0% [+8.3%, +11.7%] (95.0%)", or that too few repetitions allow no interval,
    /// or why the two runs are not compared.
    pub fn shift_text(&self) -> String {
        if let Some(why) = &self.not_compared {
            return format!("not compared: {why}");
        }
        let pooled = match self.pooled.len() {
            0 => String::new(),
            n => format!(" vs the last {n} runs pooled"),
        };
        match self.ci_pct {
            Some((lo, hi)) => format!(
                "{:+.1}% [{lo:+.1}%, {hi:+.1}%]{}{pooled}",
                self.change_pct,
                self.ci_level
                    .map(|c| format!(" ({:.1}%)", c * 100.0))
                    .unwrap_or_default()
            ),
            None => format!(
                "{:+.1}% (too few repetitions for an interval: not judged)",
                self.change_pct
            ),
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
    /// "h1 size=4096: +10.2% [+8.1%, +12.0%] (95.9%) REGRESSION; changed: kernel: …".
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
            self.since.shift_text(),
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
    match larger_is_worse(unit) {
        Some(worse_up) if worse_up == (change_pct > 0.0) => Flag::Regression,
        Some(_) => Flag::Improvement,
        None => Flag::Changed,
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
        let SeriesRuns {
            runs,
            left_out,
            reports,
            files,
        } = read_runs(store, series, last, until)?;
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
        Ok(History {
            series: series.to_string(),
            metric: metric.to_string(),
            threshold_pct,
            runs,
            left_out,
            lines,
        })
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
                reports.push(Report::load(store, run.campaign_id.as_str())?);
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
    Since {
        pooled: pooled.to_vec(),
        not_compared,
        baseline,
        change_pct,
        ci_pct: r.row.ci_pct,
        ci_level: r.ci_level,
        holm_p: r.holm_p,
        significant,
        flag: flag_of(significant, change_pct, r.row.ci_pct, threshold_pct, unit),
        changed,
        text: r.row.text.clone(),
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

    /// The false-flag rate of a series of noise only, as `History` decides it (each run
    /// against the one before, Holm across the run's cells, significant and ≥ 3%): 1,000
    /// series of 20 runs, two cells each, 8 repetitions a run, values drawn around the
    /// same median with a coefficient of variation of 2% and of 5%, uniform and
    /// log-normal. Printed (`cargo test -p platter false_flags -- --nocapture`); the
    /// goal, ≤ 1% of a run's comparisons, is asserted.
    #[test]
    fn false_flags_of_noise_only_series_stay_under_one_percent() {
        // xorshift64*: a fixed, reproducible stream; no crate needed for a test's noise.
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let mut uniform = move || {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
        };
        for (cv, lognormal) in [(0.02, false), (0.05, false), (0.02, true), (0.05, true)] {
            let mut draw = |n: usize| -> Vec<f64> {
                (0..n)
                    .map(|_| {
                        if lognormal {
                            // Box–Muller.
                            let (u, v) = (uniform().max(1e-12), uniform());
                            let z = (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos();
                            (cv * z).exp()
                        } else {
                            // Uniform with the same standard deviation.
                            1.0 + cv * 3f64.sqrt() * (2.0 * uniform() - 1.0)
                        }
                    })
                    .collect()
            };
            let (mut comparisons, mut flags) = (0usize, 0usize);
            for _series in 0..1000 {
                let mut before: Vec<Vec<f64>> = (0..2).map(|_| draw(8)).collect();
                for _run in 1..20 {
                    let now: Vec<Vec<f64>> = (0..2).map(|_| draw(8)).collect();
                    let tests: Vec<crate::stats::Comparison> = before
                        .iter()
                        .zip(&now)
                        .filter_map(|(b, n)| crate::stats::compare(b, n))
                        .collect();
                    let ps: Vec<f64> = tests.iter().map(|t| t.p_value).collect();
                    for (t, holm_p) in tests.iter().zip(crate::stats::holm(&ps)) {
                        comparisons += 1;
                        let significant =
                            t.significant && holm_p <= crate::stats::ALPHA && t.ci_pct.is_some();
                        if flag_of(
                            significant,
                            t.penalty_pct,
                            t.ci_pct,
                            DEFAULT_THRESHOLD_PCT,
                            "s",
                        ) != Flag::None
                        {
                            flags += 1;
                        }
                    }
                    before = now;
                }
            }
            let rate = flags as f64 / comparisons as f64;
            println!(
                "noise only, cv {:.0}% {}: {flags} flags in {comparisons} comparisons ({:.3}%)",
                cv * 100.0,
                if lognormal { "log-normal" } else { "uniform" },
                rate * 100.0
            );
            assert!(rate <= 0.01, "cv {cv}: {rate}");
        }
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
