//! Reports: statistics per cell from stored samples, rendered by one exporter per format.
//! Reads the store; never writes it.

pub mod advice;
mod csv;
pub use csv::field as csv_field;
pub mod findings;
pub mod flags;
pub mod health;
pub mod history;
pub mod html;
mod json;
pub mod judge;
mod junit;
pub mod ledger;
mod markdown;
mod markup;
pub mod notes;
pub mod peers;
pub mod provenance;
pub mod side;
pub mod steady;
pub mod table;

use std::collections::HashMap;

use indexmap::IndexMap;
use platter_proto::model::StepKind;
use serde::Serialize;

use crate::spec::DEVICE;
use crate::stats;
use crate::store::reports;
use crate::store::{Result, Store, StoreError};
pub use notes::CellWarning;

pub use crate::stats::Summary as Stats;

/// The metrics a command workload reports, in display order.
pub const COMMAND_METRICS: [&str; 3] = ["wall", "user", "sys"];

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricStats {
    pub metric: String,
    pub unit: String,
    /// Over the measured values only (`n` counts those); see `not_measured`.
    #[serde(flatten)]
    pub stats: Stats,
    /// Repetitions whose tool ran but could not give this metric a value (bonnie++'s
    /// `+++++`: too fast to measure), and why. Not in the statistics, never hidden.
    #[serde(skip_serializing_if = "is_zero")]
    pub not_measured: u32,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub not_measured_reason: String,
    /// The repetitions' values in run order (for comparisons; exported as `samples`).
    #[serde(skip)]
    pub values: Vec<f64>,
    /// Every sample of this metric, in run order: what the statistics were made from.
    pub samples: Vec<RawSample>,
    /// An earlier metric of the cell with the very same values and unit (the fsync loop's
    /// `latency` is `latency.mean`, its `total` is `wall`): kept in JSON, shown once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_as: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One stored sample, as the agent measured it (like hyperfine's `times`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RawSample {
    pub repetition: u32,
    pub attempt: u32,
    /// `None` when the tool could not measure it (`missing` says why).
    pub value: Option<f64>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub missing: String,
    /// When the measure step started (CLOCK_REALTIME, ns since the epoch).
    pub started_unix_ns: i64,
}

/// A metric every repetition of a cell reported without a value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unmeasured {
    pub metric: String,
    pub unit: String,
    pub count: u32,
    pub reason: String,
    pub samples: Vec<RawSample>,
}

/// What one metric of one cell gathered while loading.
#[derive(Default)]
struct Gathered {
    unit: String,
    values: Vec<f64>,
    raw: Vec<RawSample>,
    missing: u32,
    reason: String,
    /// The sample `unit` is the latest measured one's, by `RawSample::order`: samples
    /// come in no set order.
    unit_of: Option<(i64, u32, u32)>,
}

impl Gathered {
    /// Its samples in the order their repetitions started, `values` with them, and
    /// `reason` the latest missing one's.
    fn in_order(&mut self) {
        if !self.raw.is_sorted_by_key(RawSample::order) {
            self.raw.sort_unstable_by_key(RawSample::order);
            self.values = self.raw.iter().filter_map(|r| r.value).collect();
        }
        if self.missing > 0 {
            let latest = self.raw.iter().rev().find(|r| r.value.is_none());
            self.reason = latest.map(|r| r.missing.clone()).unwrap_or_default();
        }
    }
}

impl RawSample {
    /// When it started, then its repetition and attempt: one cell's samples of one metric
    /// never tie (a step has one sample of a metric).
    fn order(&self) -> (i64, u32, u32) {
        (self.started_unix_ns, self.repetition, self.attempt)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellReport {
    pub cell_id: String,
    pub host: String,
    pub params: IndexMap<String, String>,
    pub metrics: Vec<MetricStats>,
    /// Metrics no repetition could give a value (all `+++++`), with the reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unmeasured: Vec<Unmeasured>,
    /// Repetitions of this cell without samples: the measure step failed, or it was not run
    /// because its preparation failed.
    pub failed: u32,
    /// Per-operation latency over every repetition, from the merged HDR histograms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<MergedLatency>,
    /// Advice about the repetitions' wall times (cold first run, high variation, …), and
    /// what the reader must know about how the samples came to be: repetitions not
    /// measured and why, measurements retried, preparation skipped on this platform.
    pub warnings: Vec<CellWarning>,
    /// How the runs came out (noise, a cold first run, …): said once per report, every
    /// one kept here and in the details section.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub advice: Vec<advice::Advice>,
    /// Warm-up runs (`warmup:`): stored, shown apart, never in any statistic.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warmup: Vec<Warmup>,
    /// Adaptive repetition (`repeat: { until }`): why this cell stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// The cell's device is read here only. It stays a parameter (the planner's first, under
/// [`DEVICE`]) rather than a field of its own: the JSON report's `params`, the labels
/// (`device=loop0 size=1`), the tables' columns and the store's `cells.params` all show it
/// there, in that place.
impl CellReport {
    /// The name of the device the cell ran on (`loop3`); `None` without `devices:`.
    pub fn device(&self) -> Option<&str> {
        self.params.get(DEVICE).map(String::as_str)
    }

    /// The parameters without the device, in order: the configuration, which cells on
    /// different drives share.
    pub fn configuration(&self) -> impl Iterator<Item = (&String, &String)> {
        self.params.iter().filter(|(k, _)| *k != DEVICE)
    }
}

/// Parameter `names` without the device's: the columns of a configuration.
pub fn configuration_names(names: &[String]) -> impl Iterator<Item = &String> {
    names.iter().filter(|n| *n != DEVICE)
}

#[cfg(test)]
impl CellReport {
    /// A cell for tests: its id, host, parameters and metrics, and nothing else.
    pub(crate) fn for_test(
        cell_id: String,
        host: &str,
        params: &[(&str, &str)],
        metrics: Vec<MetricStats>,
    ) -> CellReport {
        CellReport {
            cell_id,
            host: host.into(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            metrics,
            unmeasured: vec![],
            failed: 0,
            latency: None,
            warnings: vec![],
            advice: vec![],
            warmup: vec![],
            stopped: None,
        }
    }
}

#[cfg(test)]
impl MetricStats {
    /// `metric` summarized from `values`, for tests.
    pub(crate) fn of_values(metric: &str, unit: &str, values: &[f64]) -> MetricStats {
        MetricStats {
            metric: metric.into(),
            unit: unit.into(),
            stats: stats::summarize(values).expect("values to summarize"),
            values: values.to_vec(),
            not_measured: 0,
            not_measured_reason: String::new(),
            samples: vec![],
            same_as: None,
        }
    }
}

/// One metric's values of a cell's warm-up runs, in run order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Warmup {
    pub metric: String,
    pub unit: String,
    pub values: Vec<f64>,
    /// The warm-ups' median over the counted runs' median, when both exist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_counted: Option<f64>,
}

/// Percentiles of the union of all repetitions' operations, in seconds. These are
/// what `latency.p50`, `latency.p90`, `latency.p99`, `latency.p99.9` and `latency.max`
/// mean everywhere in a report; each run's own percentiles are kept as
/// `latency.p99 per run` (…) metrics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MergedLatency {
    /// Repetitions whose histograms were merged.
    pub runs: usize,
    pub ops: u64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    /// (quantile, seconds) at each of `CURVE_QUANTILES` that the operations resolve (at
    /// least one operation above it): the HTML page's percentile curves. Not in JSON.
    #[serde(skip)]
    pub curve: Vec<(f64, f64)>,
}

/// Quantiles of the per-operation latency curves, p50 … p99.99.
pub const CURVE_QUANTILES: [f64; 9] = [0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999];

/// Suffix of a per-repetition percentile's name (`latency.p99 per run`): the name
/// without it is the percentile over every operation of every run.
pub const PER_RUN: &str = " per run";

fn merged_latency(histograms: &[Vec<u8>]) -> Option<MergedLatency> {
    let slices: Vec<&[u8]> = histograms.iter().map(|h| h.as_slice()).collect();
    let h = stats::merge_histograms(&slices).ok()?;
    let q = stats::percentiles(&h, &[0.5, 0.9, 0.99, 0.999]);
    let s = |ns: u64| ns as f64 / 1e9;
    Some(MergedLatency {
        runs: histograms.len(),
        ops: h.len(),
        p50: s(q[0].1),
        p90: s(q[1].1),
        p99: s(q[2].1),
        p999: s(q[3].1),
        max: s(h.max()),
        curve: CURVE_QUANTILES
            .iter()
            .filter(|q| h.len() as f64 * (1.0 - **q) >= 1.0)
            .map(|&q| (q, s(h.value_at_quantile(q))))
            .collect(),
    })
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    pub host: String,
    /// The cell's parameters (`bs=4k sync=none`); "" for a step of no cell's own.
    pub cell: String,
    pub step: String,
    pub repetition: u32,
    pub attempt: u32,
    pub error: String,
    pub stderr_tail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Report {
    pub schema_version: u32,
    pub campaign_id: String,
    pub name: String,
    pub state: CampaignState,
    pub params: Vec<String>,
    pub repeat: u32,
    /// The repetition rule as written when it says more than `repeat` (adaptive
    /// repetition: "5–50 (until …)").
    #[serde(skip_serializing_if = "String::is_empty")]
    pub repetition: String,
    /// Warm-up runs per cell (`warmup:`), excluded from every statistic.
    #[serde(skip_serializing_if = "is_zero")]
    pub warmup: u32,
    pub cells: Vec<CellReport>,
    pub steps_failed: u32,
    /// Measure steps in the campaign's plans (plans an agent refused excepted).
    pub measurements_expected: u32,
    /// Of those, the ones of which no end (measured, failed or skipped) reached the store:
    /// still to run while the campaign runs, lost when it has ended.
    pub measurements_missing: u32,
    /// Every failed step (its latest attempt), in the order they failed.
    pub failures: Vec<Failure>,
    /// Plans an agent refused to run (nothing of them ran): (host, reason).
    pub refused: Vec<Refusal>,
    /// Each cell against its baseline (`report: { baseline }`), decided together.
    pub comparisons: Vec<judge::JudgedComparison>,
    /// `report: { qualify }` verdicts; empty without thresholds.
    pub verdicts: Vec<judge::Verdict>,
    /// `report: { pivot }`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pivot: Option<judge::PivotTable>,
    /// Several hosts or devices: each configuration once, a column per host or device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub side_by_side: Option<side::SideBySide>,
    /// Cells far from the other hosts/devices with the same configuration.
    pub outliers: Vec<judge::FleetOutlier>,
    /// The answer first: significant differences ranked by size, what was found equal.
    pub findings: findings::Findings,
    /// The cells' advice said once: "noise: in 3 of 4 cells …", the CPU split per host.
    pub advice: Vec<String>,
    /// What the campaign ran on: every snapshot the agents took, in order.
    pub provenance: Vec<provenance::Snapshot>,
    /// What changed between snapshots of a host within the run (flagged in the notes).
    pub provenance_changes: Vec<String>,
    /// The devices the cells ran on, (host, name): which of the snapshots' drives to show.
    #[serde(skip)]
    pub devices_used: provenance::UsedDevices,
    /// Each drive under test's health over the run (`smartctl --json` before and after).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub health: Vec<health::DriveHealthReport>,
    /// `qualify: { health }` limits that could not be judged, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub health_not_judged: Vec<String>,
    /// Each cell against the run before it in its series (`Report::load_with_series`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since_last_run: Option<history::SinceLastRun>,
    /// `prepare.steady_state`: each drive's rounds, and which of them its results are.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<steady::DriveRounds>,
    /// `prepare:`: the state each drive was measured in, a line per drive.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drive_states: Vec<String>,
}

pub use crate::store::CampaignState;

impl Report {
    /// "3"; "5–50 (until …)"; with warm-up runs, "3, after 2 warm-up run(s) not counted".
    pub fn repeat_text(&self) -> String {
        let mut t = if self.repetition.is_empty() {
            self.repeat.to_string()
        } else {
            self.repetition.clone()
        };
        if self.warmup > 0 {
            t.push_str(&format!(
                ", after {} warm-up run(s) not counted",
                self.warmup
            ));
        }
        t
    }

    /// Whether any qualification threshold failed.
    pub fn qualification_failed(&self) -> bool {
        self.verdicts.iter().any(|v| !v.pass)
    }

    /// Measurements that should be here and are not, in a campaign that has ended.
    pub fn lost_measurements(&self) -> u32 {
        if self.state == CampaignState::Running {
            0
        } else {
            self.measurements_missing
        }
    }

    /// Reasons for a non-zero exit status: failed steps, refused plans, a failed
    /// qualification, measurements an ended campaign lacks, comparisons not made, and
    /// drives whose rounds ended without steady state.
    pub fn problems(&self) -> u32 {
        self.steps_failed
            + self.refused.len() as u32
            + u32::from(self.qualification_failed())
            + self.lost_measurements()
            + self.uncompared()
            + self.not_steady()
    }

    /// Drives whose rounds ended without steady state (`prepare.steady_state`): their
    /// results are of a drive in no defined state, listed, and not exit 0.
    pub fn not_steady(&self) -> u32 {
        self.rounds.iter().filter(|d| d.ended && !d.steady).count() as u32
    }

    /// Comparisons the report asked for that could not be made (a cell without its
    /// baseline counterpart, or without values on one side): listed, and not exit 0.
    pub fn uncompared(&self) -> u32 {
        self.comparisons.iter().filter(|c| !c.compared).count() as u32
    }
}

impl MergedLatency {
    /// The metric names that mean a merged value, with their quantile.
    pub const NAMES: [(&'static str, f64); 5] = [
        ("latency.p50", 0.5),
        ("latency.p90", 0.9),
        ("latency.p99", 0.99),
        ("latency.p99.9", 0.999),
        ("latency.max", 1.0),
    ];

    pub fn is_merged_name(metric: &str) -> bool {
        Self::NAMES.iter().any(|(n, _)| *n == metric)
    }

    /// The merged value a metric name stands for (`latency.p99` → p99).
    pub fn get(&self, metric: &str) -> Option<f64> {
        let (_, q) = Self::NAMES.iter().find(|(n, _)| *n == metric)?;
        self.at(*q)
    }

    /// The merged per-operation percentile for quantile `q`, if it is one kept.
    pub fn at(&self, q: f64) -> Option<f64> {
        [
            (0.5, self.p50),
            (0.9, self.p90),
            (0.99, self.p99),
            (0.999, self.p999),
            (1.0, self.max),
        ]
        .iter()
        .find(|(k, _)| (k - q).abs() < 1e-9)
        .map(|(_, v)| *v)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refusal {
    pub host: String,
    pub reason: String,
}

/// How many failures the terminal and Markdown reports spell out; the rest are counted
/// ("and 12 more"), and JSON lists every one.
pub const MAX_FAILURES_SHOWN: usize = 10;

/// A cell's parameters as `k=v k=v`.
pub fn label(params: &IndexMap<String, String>) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Failure {
    /// "rc66 bs=4k sync=none: measure (repetition 3, attempt 2): exit status 1"
    pub fn headline(&self) -> String {
        let cell = if self.cell.is_empty() {
            String::new()
        } else {
            format!(" {}", self.cell)
        };
        let attempt = if self.attempt > 1 {
            format!(", attempt {}", self.attempt)
        } else {
            String::new()
        };
        let repetition = if self.repetition > 0 {
            format!(" (repetition {}{attempt})", self.repetition)
        } else {
            attempt
        };
        format!(
            "{}{cell}: {}{repetition}: {}",
            self.host, self.step, self.error
        )
    }
}

impl Format {
    /// Whether the format shows a run's "since the last run" section (the CSVs and JUnit
    /// do not: their rows are the run's own).
    pub fn shows_series(self) -> bool {
        matches!(
            self,
            Format::Table | Format::Markdown | Format::Json | Format::Html
        )
    }
}

impl Report {
    /// `load` for rendering as `format`, with the section a run of a series gets in the
    /// formats that show it: each cell against the series' run before it
    /// (`history::SinceLastRun`). What `platter report`, the coordinator and the console
    /// show; `load` alone is what comparisons and histories read.
    pub fn load_for(store: &Store, campaign: &str, format: Format) -> Result<Report> {
        let mut report = Report::load(store, campaign)?;
        if format.shows_series() {
            report.since_last_run = history::SinceLastRun::load(store, &report)?;
        }
        Ok(report)
    }

    /// The report of the campaign `campaign` names (its id, or its name: the latest
    /// campaign of that name).
    pub fn load(store: &Store, campaign: &str) -> Result<Report> {
        Report::load_as(store, campaign, Judged::Whole)
    }

    /// The run's cells with their values, and its provenance, without the judgements of
    /// the whole report (comparisons, qualification, outliers, side by side, findings,
    /// pivot, health): what a series' history reads of each of its runs. A report of 500
    /// cells loads in about a tenth of the time; a history reads ten runs more than it
    /// shows, and a run's report the history of its last twelve.
    pub fn load_cells(store: &Store, campaign: &str) -> Result<Report> {
        Report::load_as(store, campaign, Judged::CellsOnly)
    }

    fn load_as(store: &Store, campaign: &str, judged: Judged) -> Result<Report> {
        store.read(|c| {
            let campaign_id = &crate::store::resolve_campaign(c, campaign)?;
            let row = reports::campaign(c, campaign_id)?
                .ok_or_else(|| StoreError::NoCampaign(campaign_id.to_string()))?;
            // The stored YAML was valid when it was submitted; settings of a campaign from
            // an older platter that no longer parse just leave the report without them.
            let spec =
                crate::spec::parse_with(&row.file_name, &row.yaml, &crate::spec::Limits::NONE).ok();
            // Rounds towards steady state: only a drive's counted rounds are its results.
            let prepared = spec.as_ref().filter(|s| s.prepare.is_some());
            let drives = match prepared {
                Some(_) => crate::store::rounds::campaign_drives(c, campaign_id)?,
                None => Vec::new(),
            };
            let (rounds, drive_of) = match prepared {
                Some(s) => steady::load(c, campaign_id, s, &drives)?,
                None => Default::default(),
            };
            let counts = |cell: i64, repetition: u32| {
                drive_of
                    .get(&cell)
                    .is_none_or(|&d| rounds[d].counts(repetition))
            };
            let (plans, mut values, histograms) = plans_and_samples(c, campaign_id, &counts)?;
            let failed: HashMap<i64, u32> = reports::failed_repetitions(c, campaign_id)?
                .into_iter()
                .map(|f| (f.cell, f.repetitions))
                .collect();
            let mut notes = how_measured(
                reports::unusual_measures(c, campaign_id)?,
                reports::skipped_steps(c, campaign_id)?,
                &plans,
            );
            let mut warmups = warmup_values(reports::warmup_samples(c, campaign_id)?);
            let mut stopped = match &spec {
                Some(s) => crate::store::rounds::verdicts(c, campaign_id, &s.repeat)?
                    .into_iter()
                    .map(|(cell, v)| (cell, v.describe(&s.repeat)))
                    .collect(),
                None => HashMap::new(),
            };
            stopped.extend(drive_of.iter().map(|(&n, &d)| (n, rounds[d].describe())));
            let mut cells = Vec::new();
            for cell in reports::cells(c, campaign_id)? {
                let n = cell.n;
                cells.push(cell_report(
                    cell,
                    values.remove(&n).unwrap_or_default(),
                    notes.remove(&n).unwrap_or_default(),
                    failed.get(&n).copied().unwrap_or(0),
                    histograms.get(&n).map(Vec::as_slice),
                    warmups.remove(&n).unwrap_or_default(),
                    stopped.remove(&n),
                ));
            }
            let steps_failed = reports::steps_failed(c, campaign_id)?;
            let failures = reports::failed_steps(c, campaign_id)?
                .into_iter()
                .map(|f| Failure {
                    host: f.host.into_string(),
                    cell: label(&f.params),
                    step: f.kind,
                    repetition: f.repetition,
                    attempt: f.attempt,
                    error: f.error,
                    stderr_tail: f.stderr_tail,
                })
                .collect();
            let measurements_expected = measures_planned(&plans);
            let measurements_ended = reports::measurements_ended(c, campaign_id)?;
            let measurements_missing = measurements_expected.saturating_sub(measurements_ended);
            let refused = reports::refused_plans(c, campaign_id)?
                .into_iter()
                .map(|r| Refusal {
                    host: r.host.into_string(),
                    reason: r.reason,
                })
                .collect();
            let settings = spec.as_ref().map(|c| c.report.clone()).unwrap_or_default();
            // Device fields for pivots come from what the run saw, never from today's
            // inventory: a drive swapped since does not change an old report.
            let snapshots = provenance::snapshots(&plans, reports::snapshots(c, campaign_id)?);
            let mut report = Report {
                since_last_run: None,
                health: Vec::new(),
                health_not_judged: Vec::new(),
                provenance: snapshots,
                provenance_changes: Vec::new(),
                devices_used: Default::default(),
                side_by_side: None,
                findings: Default::default(),
                advice: Vec::new(),
                outliers: Vec::new(),
                pivot: None,
                comparisons: Vec::new(),
                verdicts: Vec::new(),
                refused,
                schema_version: 1,
                campaign_id: campaign_id.to_string(),
                name: row.name,
                state: CampaignState::from(row.state),
                params: row.params,
                repeat: row.repeat,
                repetition: String::new(),
                warmup: spec.as_ref().map_or(0, |s| s.warmup),
                cells,
                steps_failed,
                measurements_expected,
                measurements_missing,
                failures,
                drive_states: Vec::new(),
                rounds,
            };
            if judged == Judged::CellsOnly {
                return Ok(report);
            }
            let Report {
                cells,
                rounds,
                provenance: snapshots,
                ..
            } = &mut report;
            let mut comparisons = judge::compare_cells(cells, &settings);
            steady::mark_comparisons(&mut comparisons, cells, rounds);
            let mut verdicts = judge::qualify(cells, &settings);
            steady::not_judged(&mut verdicts, rounds);
            let outliers = judge::fleet_outliers(cells, &settings);
            let mut side_by_side = side::build(cells, &settings, &outliers, &comparisons);
            let outliers =
                side::agreeing_outliers(side_by_side.as_mut(), cells, &settings, outliers);
            let findings = findings::build(cells, &settings, &comparisons, side_by_side.as_ref());
            for cell in cells.iter_mut() {
                let split = advice::cpu_split(snapshots, cell);
                cell.advice.extend(split);
            }
            let device_field = |host: &str, name: &str, field: &str| -> Option<String> {
                provenance::device_field(provenance::device(snapshots, host, name)?, field)
            };
            let pivot = judge::pivot(cells, &settings, &device_field);
            let devices_used: provenance::UsedDevices = cells
                .iter()
                .filter_map(|c| Some((c.host.clone(), c.device()?.to_string())))
                .collect();
            let health = drive_health(c, snapshots, &settings.health)?;
            let (health_verdicts, health_not_judged) = health::judge(&health, &settings.health);
            verdicts.extend(health_verdicts);
            report.provenance_changes = provenance::changes(&report.provenance, &devices_used);
            report.advice = advice::summary(&report.cells);
            report.drive_states = match prepared {
                Some(s) => steady::drive_states(c, campaign_id, s, &drives, &report.rounds)?,
                None => Vec::new(),
            };
            report.repetition = spec
                .as_ref()
                .and_then(|s| match s.steady_state() {
                    Some(_) => Some(s.repetitions_text()),
                    None => s.repeat.is_adaptive().then(|| s.repeat.to_string()),
                })
                .unwrap_or_default();
            Ok(Report {
                health,
                health_not_judged,
                devices_used,
                side_by_side,
                findings,
                outliers,
                pivot,
                comparisons,
                verdicts,
                ..report
            })
        })
    }
}

/// How much of a report `Report::load_as` works out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Judged {
    Whole,
    CellsOnly,
}

/// Each drive under test's health over the run, the attributes `ignore`d on its model
/// marked, and its baseline read from the store when a limit counts since it.
fn drive_health(
    c: &crate::store::db::Conn,
    snapshots: &[provenance::Snapshot],
    spec: &crate::spec::health::HealthSpec,
) -> Result<Vec<health::DriveHealthReport>> {
    let mut drives = health::drives(snapshots);
    health::ignore(&mut drives, spec);
    if !spec.needs_baseline() {
        return Ok(drives);
    }
    for d in drives.iter_mut().filter(|d| d.before.is_some()) {
        let which = crate::store::baseline::WhichDrive {
            serial: &d.serial,
            model: &d.model,
            host: &d.host,
            path: &d.path,
        };
        if let Some(b) = crate::store::baseline::drive_baseline(c, which)? {
            let b = health::Baseline {
                campaign_id: b.campaign_id.to_string(),
                campaign: b.campaign,
                host: b.host.to_string(),
                submitted: ledger::utc(b.submitted_unix_ms),
                reading: b.reading,
            };
            health::set_baseline(d, b, spec);
        }
    }
    Ok(drives)
}

/// The campaign's plans and its samples folded by cell and metric, with their latency
/// histograms. The plans are read first and parsed on another thread while the samples are
/// read and folded (each on a core of its own).
#[allow(clippy::type_complexity)]
fn plans_and_samples(
    c: &crate::store::db::Conn,
    campaign_id: &platter_proto::model::CampaignId,
    counts: &(dyn Fn(i64, u32) -> bool + Sync),
) -> Result<(
    Vec<reports::CampaignPlan>,
    HashMap<i64, IndexMap<String, Gathered>>,
    HashMap<i64, Vec<Vec<u8>>>,
)> {
    let mut values = HashMap::new();
    let mut histograms = HashMap::new();
    let plan_rows = reports::plan_rows(c, campaign_id)?;
    let (plans, read) = std::thread::scope(|scope| {
        let parsing = std::thread::Builder::new()
            .name("report-plans".into())
            .spawn_scoped(scope, move || plan_rows.parse());
        let read = fold_samples(c, campaign_id, counts, &mut values, &mut histograms);
        let plans = match parsing {
            Ok(parsing) => parsing
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => reports::plans(c, campaign_id),
        };
        (plans, read)
    });
    read?;
    Ok((plans?, values, histograms))
}

/// One cell's report from what was gathered for it: each metric summarized (or said
/// unmeasured, and why), the repeated ones marked, its merged latency, its warm-up runs
/// against the counted ones.
fn cell_report(
    cell: reports::CampaignCell,
    mut by_metric: IndexMap<String, Gathered>,
    mut warnings: Vec<CellWarning>,
    failed: u32,
    histograms: Option<&[Vec<u8>]>,
    mut warmup: Vec<Warmup>,
    stopped: Option<String>,
) -> CellReport {
    by_metric.values_mut().for_each(Gathered::in_order);
    // One order whatever order a step's samples came in (SQLite returns them by name,
    // PostgreSQL as stored; sorting them in SQL cost 20–30% of the query): the command's
    // own metrics first, then by name.
    by_metric.sort_by(|a, _, b, _| metric_rank(a).cmp(&metric_rank(b)));
    let advice = by_metric
        .get("wall")
        .map(|g| advice::of_runs("wall", &g.values, stats::summarize(&g.values).as_ref()))
        .unwrap_or_default();
    let (mut metrics, unmeasured) = summarize_metrics(by_metric, &mut warnings);
    mark_repeated(&mut metrics);
    let latency = histograms.and_then(merged_latency);
    against_counted(&mut warmup, &metrics);
    CellReport {
        cell_id: cell.id.into_string(),
        host: cell.host.into_string(),
        params: cell.params,
        metrics,
        unmeasured,
        failed,
        latency,
        warnings,
        advice,
        warmup,
        stopped,
    }
}

/// Each metric's summary, or, for one with no value, what was not measured and why; a
/// metric measured only in part is warned of.
fn summarize_metrics(
    by_metric: IndexMap<String, Gathered>,
    warnings: &mut Vec<CellWarning>,
) -> (Vec<MetricStats>, Vec<Unmeasured>) {
    let mut metrics = Vec::new();
    let mut unmeasured = Vec::new();
    for (metric, g) in by_metric {
        if g.missing > 0 && !g.values.is_empty() {
            warnings.push(CellWarning::PartlyUnmeasured {
                metric: metric.clone(),
                missing: g.missing,
                of: g.raw.len(),
                why: g.reason.clone(),
                rest: g.values.len(),
            });
        }
        let Some(stats) = stats::summarize(&g.values) else {
            if g.missing > 0 {
                unmeasured.push(Unmeasured {
                    metric,
                    unit: g.unit,
                    count: g.missing,
                    reason: g.reason,
                    samples: g.raw,
                });
            }
            continue;
        };
        // Each run's own latency percentile is not the report's `latency.p99` (every
        // operation of every run): it is renamed.
        let metric = if MergedLatency::is_merged_name(&metric) {
            format!("{metric}{PER_RUN}")
        } else {
            metric
        };
        metrics.push(MetricStats {
            metric,
            unit: g.unit,
            stats,
            not_measured: g.missing,
            not_measured_reason: g.reason,
            values: g.values,
            samples: g.raw,
            same_as: None,
        });
    }
    (metrics, unmeasured)
}

/// A metric whose values are an earlier one's (same unit, values and gaps) says so.
fn mark_repeated(metrics: &mut [MetricStats]) {
    for i in 1..metrics.len() {
        let (earlier, rest) = metrics.split_at_mut(i);
        let m = &mut rest[0];
        m.same_as = earlier
            .iter()
            .find(|e| {
                e.same_as.is_none()
                    && e.unit == m.unit
                    && e.values == m.values
                    && e.not_measured == m.not_measured
            })
            .map(|e| e.metric.clone());
    }
}

/// The warm-up runs in the order of the counted metrics (so `wall` comes first as there),
/// each with its median's ratio to the counted one.
fn against_counted(warmup: &mut [Warmup], metrics: &[MetricStats]) {
    warmup.sort_by_key(|w| {
        metrics
            .iter()
            .position(|m| m.metric == w.metric)
            .unwrap_or(usize::MAX)
    });
    for w in warmup {
        let counted = metrics
            .iter()
            .find(|m| m.metric == w.metric)
            .map(|m| m.stats.median);
        let warm = stats::summarize(&w.values).map(|s| s.median);
        w.ratio_to_counted = match (warm, counted) {
            (Some(a), Some(b)) if b != 0.0 => Some(a / b),
            _ => None,
        };
    }
}

/// The measurements the campaign's accepted plans hold.
fn measures_planned(plans: &[reports::CampaignPlan]) -> u32 {
    let measures = plans.iter().filter(|p| !p.refused).flat_map(|p| {
        p.plan
            .steps
            .iter()
            .filter(|s| matches!(s.kind, StepKind::Measure(_)))
    });
    measures.count() as u32
}

/// Where `metric` goes in a cell's list: the command's own metrics (`COMMAND_METRICS`)
/// first, in that order, then the built-in fsync loop's in its own order (`FSYNC`: the
/// mean, the percentiles up to the maximum, the minimum, throughput, …, not by name,
/// which put `latency.max` before `latency.mean`), then the others by name (byte order,
/// as on both engines).
fn metric_rank(metric: &str) -> (usize, &str) {
    let fsync = &crate::spec::FSYNC_METRICS;
    let rank = match COMMAND_METRICS.iter().position(|m| *m == metric) {
        Some(own) => own,
        None => match fsync.iter().position(|m| *m == metric) {
            Some(loop_rank) => COMMAND_METRICS.len() + loop_rank,
            None => COMMAND_METRICS.len() + fsync.len(),
        },
    };
    (rank, metric)
}

/// Each counted sample of the campaign folded into `values` (by cell, then metric) as it
/// is read: a million of them need not be held. The histograms come with their samples
/// rather than by a second pass over them.
fn fold_samples(
    c: &crate::store::db::Conn,
    campaign_id: &platter_proto::model::CampaignId,
    counts: &dyn Fn(i64, u32) -> bool,
    values: &mut HashMap<i64, IndexMap<String, Gathered>>,
    histograms: &mut HashMap<i64, Vec<Vec<u8>>>,
) -> Result<()> {
    reports::each_sample(c, campaign_id, |s| {
        if !counts(s.cell, s.repetition) {
            return Ok(());
        }
        let raw = RawSample {
            value: s.value,
            missing: s.missing,
            repetition: s.repetition,
            attempt: s.attempt,
            started_unix_ns: s.started_unix_ns,
        };
        if let Some(h) = s.histogram {
            histograms.entry(s.cell).or_default().push(h);
        }
        let by_metric = values.entry(s.cell).or_insert_with(|| {
            COMMAND_METRICS
                .iter()
                .map(|m| {
                    let g = Gathered {
                        unit: "s".into(),
                        ..Default::default()
                    };
                    (m.to_string(), g)
                })
                .collect()
        });
        let at = match by_metric.get_index_of(s.metric) {
            Some(at) => at,
            None => {
                by_metric
                    .insert_full(s.metric.to_string(), Gathered::default())
                    .0
            }
        };
        let g = &mut by_metric[at];
        let order = Some(raw.order());
        match raw.value {
            Some(v) => {
                g.values.push(v);
                // A value the tool could not measure has no unit: the latest
                // measured one's.
                if g.unit_of < order {
                    g.unit_of = order;
                    if g.unit != s.unit {
                        g.unit = s.unit.to_string();
                    }
                }
            }
            None => {
                g.missing += 1;
                if g.unit.is_empty() {
                    g.unit = s.unit.to_string();
                }
            }
        }
        g.raw.push(raw);
        Ok(())
    })
}

/// Per cell (`cells.n`), its warm-up runs' values, metric by metric by name.
fn warmup_values(samples: Vec<reports::WarmupSample>) -> HashMap<i64, Vec<Warmup>> {
    let mut out: HashMap<i64, Vec<Warmup>> = HashMap::new();
    for s in samples {
        let list = out.entry(s.cell).or_default();
        match list.iter_mut().find(|w| w.metric == s.metric) {
            Some(w) => w.values.push(s.value),
            None => list.push(Warmup {
                metric: s.metric,
                unit: s.unit,
                values: vec![s.value],
                ratio_to_counted: None,
            }),
        }
    }
    // A step's samples come by name from SQLite, as stored from PostgreSQL: by name from both.
    for list in out.values_mut() {
        list.sort_by(|a, b| a.metric.cmp(&b.metric));
    }
    out
}

/// Per cell (`cells.n`), how its samples came to be where that is not the plain way: a
/// repetition not measured because its preparation failed, a measurement that ran again
/// after the agent stopped during it (its preparation ran again first), a preparation
/// step skipped because the platform does not support it (fstrim on a RAM disk).
fn how_measured(
    unusual: Vec<reports::UnusualMeasure>,
    skipped: Vec<reports::SkippedSteps>,
    plans: &[reports::CampaignPlan],
) -> HashMap<i64, Vec<CellWarning>> {
    let mut notes: HashMap<i64, Vec<CellWarning>> = HashMap::new();
    for m in unusual {
        let note = if m.skipped {
            CellWarning::NotMeasured {
                repetition: m.repetition,
                why: m.error,
            }
        } else {
            let plan = plans.iter().find(|p| p.id == m.plan_id).map(|p| &p.plan);
            let index = m.step_index;
            // The index came from an agent: a plan it does not fit names no preparation.
            let preparation: Vec<String> = plan
                .iter()
                .filter(|p| (index as usize) < p.steps.len())
                .flat_map(|p| {
                    p.preparation(index)
                        .map(|i| p.steps[i as usize].kind.name().to_string())
                })
                .collect();
            CellWarning::Remeasured {
                repetition: m.repetition,
                attempt: m.attempt,
                preparation,
            }
        };
        notes.entry(m.cell).or_default().push(note);
    }
    for s in skipped {
        notes.entry(s.cell).or_default().push(CellWarning::Skipped {
            kind: s.kind,
            count: s.count,
            why: s.error,
        });
    }
    notes
}

/// `s` with the control characters a page cannot show (all below U+0020 but tab and line
/// breaks: a tool's stderr may carry terminal escapes) as U+FFFD, as `esc` shows them, for
/// a template to escape (the HTML report's, the console's pages).
pub fn printable(s: &str) -> String {
    s.chars().map(shown).collect()
}

/// A character as a page or an XML file shows it: a control character other than tab,
/// newline and carriage return (which XML 1.0 forbids even as a reference) as U+FFFD.
fn shown(c: char) -> char {
    match c {
        '\t' | '\n' | '\r' => c,
        c if (c as u32) < 0x20 => '\u{FFFD}',
        c => c,
    }
}

/// Text for XML (the JUnit report), in content and in quoted attributes: the five markup
/// characters as references, control characters as `shown`. Five characters and a range:
/// no crate needed.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars().map(shown) {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(ch),
        }
    }
    out
}

/// One exporter per output format.
pub trait Exporter {
    fn render(&self, report: &Report) -> String;

    /// Writes the rendering to `out`. Exporters of every sample (JSON) stream here
    /// instead of building the whole text first: a million samples are ~175 MB of JSON.
    fn write(&self, report: &Report, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        out.write_all(self.render(report).as_bytes())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Markdown,
    Json,
    /// One row per (cell, metric): the summaries.
    Csv,
    /// One row per sample: every repetition's value, attempt and start time, and why a
    /// value is missing, for pandas or R.
    CsvSamples,
    /// JUnit XML of the qualification verdicts, for CI systems.
    Junit,
    /// A self-contained page with SVG charts (no network needed to view it).
    Html,
}

impl Format {
    pub fn parse(s: &str) -> Option<Format> {
        <Format as clap::ValueEnum>::from_str(s, true).ok()
    }

    pub fn exporter(self) -> Box<dyn Exporter> {
        match self {
            Format::Table => Box::new(table::Table),
            Format::Markdown => Box::new(markdown::Markdown),
            Format::Json => Box::new(json::Json),
            Format::Csv => Box::new(csv::Csv),
            Format::CsvSamples => Box::new(csv::CsvSamples),
            Format::Junit => Box::new(junit::Junit),
            Format::Html => Box::new(html::Html),
        }
    }
}

/// A value with its unit scaled for people: 0.0123 s → "12.30 ms", 2_700_000 B → "2.57 MiB"
/// (the scale `Scale` would choose for it alone).
pub fn human(value: f64, unit: &str) -> String {
    match unit {
        "s" | "B" => Scale::for_value(value, unit).show(value),
        // Counts: as integers when they are.
        "1" if value.fract() == 0.0 => format!("{value}"),
        "1" => format!("{value:.2}"),
        "op/s" | "%" => format!("{value:.1} {unit}"),
        "B/s" => format!("{}/s", human(value, "B")),
        u => format!("{value:.4} {u}"),
    }
}

/// One unit for values read side by side (a table row): seconds as s, ms, µs or ns and bytes as
/// B, KiB, MiB or GiB, chosen by a typical value of them (`factor` is the unit's size: 1e-3
/// for ms); other units as `human` writes them. So `0 s` never sits next to `µs`.
pub(crate) struct Scale {
    unit: String,
    factor: f64,
    suffix: &'static str,
    decimals: usize,
}

impl Scale {
    pub(crate) fn for_value(typical: f64, unit: &str) -> Scale {
        let typical = typical.abs();
        let (factor, suffix, decimals) = match unit {
            "s" if typical >= 1.0 || typical == 0.0 => (1.0, "s", 3),
            "s" if typical >= 1e-3 => (1e-3, "ms", 2),
            "s" if typical >= 1e-6 => (1e-6, "µs", 1),
            // A write into the page cache or tmpfs: "345 ns", not "0.3 µs".
            "s" => (1e-9, "ns", 0),
            "B" if typical >= 1024.0 * 1024.0 * 1024.0 => (1024.0 * 1024.0 * 1024.0, "GiB", 2),
            "B" if typical >= 1024.0 * 1024.0 => (1024.0 * 1024.0, "MiB", 2),
            "B" if typical >= 1024.0 => (1024.0, "KiB", 2),
            "B" => (1.0, "B", 0),
            _ => (0.0, "", 0),
        };
        Scale {
            unit: unit.to_string(),
            factor,
            suffix,
            decimals,
        }
    }

    /// The scale for values read together: chosen by their median, leaving out zeros (a
    /// row of `0` and `487 µs` reads in µs, not as `0.000 s` twice).
    pub(crate) fn for_values(values: &[f64], unit: &str) -> Scale {
        let nonzero: Vec<f64> = values
            .iter()
            .map(|v| v.abs())
            .filter(|v| *v > 0.0 && v.is_finite())
            .collect();
        let typical = stats::summarize(&nonzero).map(|s| s.median).unwrap_or(0.0);
        Scale::for_value(typical, unit)
    }

    /// What a value in base units is divided by to be written in this scale (1 for units
    /// without a scale of their own).
    pub(crate) fn factor(&self) -> f64 {
        if self.factor == 0.0 {
            1.0
        } else {
            self.factor
        }
    }

    /// The unit's name in this scale ("ms", "KiB"); "" for units without a scale.
    pub(crate) fn suffix(&self) -> &'static str {
        self.suffix
    }

    pub(crate) fn bare(&self, v: f64) -> String {
        if self.factor == 0.0 {
            // Units without a scale of their own: as everywhere else, number only.
            let t = human(v, &self.unit);
            return t
                .strip_suffix(&format!(" {}", self.unit))
                .map(str::to_string)
                .unwrap_or(t);
        }
        format!("{:.*}", self.decimals, v / self.factor)
    }

    pub(crate) fn show(&self, v: f64) -> String {
        if self.factor == 0.0 {
            return human(v, &self.unit);
        }
        format!("{} {}", self.bare(v), self.suffix)
    }
}

/// Column widths (in characters) that fit `header` and every row.
pub(crate) fn widths<'a>(
    header: &[String],
    rows: impl IntoIterator<Item = &'a Vec<String>>,
) -> Vec<usize> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    widths
}

/// Rows under a header, columns aligned two spaces apart, no trailing spaces: the one
/// table writer of every listing (`status`, `agents`, `users`, `drives`, …).
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    let widths = widths(&header, rows);
    let mut out = String::new();
    for r in std::iter::once(&header).chain(rows) {
        out += &aligned(r, &widths, "", "  ");
        out.push('\n');
    }
    out
}

/// One line of an aligned text table, without trailing spaces or newline.
pub(crate) fn aligned(cells: &[String], widths: &[usize], indent: &str, sep: &str) -> String {
    let padded: Vec<String> = cells
        .iter()
        .zip(widths)
        .map(|(c, w)| format!("{c:<w$}", w = *w))
        .collect();
    format!("{indent}{}", padded.join(sep))
        .trim_end()
        .to_string()
}

/// The pivot as a title, a header and rows of text, for the markup formats.
pub(crate) fn pivot_text(report: &Report) -> Option<(String, Vec<String>, Vec<Vec<String>>)> {
    let p = report.pivot.as_ref()?;
    let title = format!(
        "{} of {} by {} × {}",
        p.stat,
        p.metric,
        p.row_keys.join(", "),
        p.column_keys.join(", ")
    );
    let mut header = p.row_keys.clone();
    header.extend(p.columns.iter().cloned());
    let rows = p
        .rows
        .iter()
        .enumerate()
        .map(|(r, (labels, values))| {
            let mut row = labels.clone();
            row.extend(
                values
                    .iter()
                    .enumerate()
                    .map(|(c, v)| p.slot_text(r, c, v.map(|v| human(v, p.unit_at(r, c))))),
            );
            row
        })
        .collect();
    Some((title, header, rows))
}

/// "vm bs=4k sync=none": a cell by its host and parameters.
pub(crate) fn label_with_host(c: &CellReport) -> String {
    let params = label(&c.params);
    if params.is_empty() {
        c.host.clone()
    } else {
        format!("{} {params}", c.host)
    }
}

/// Every cell's advice, one line each: the details the notes' "advice:" lines count.
pub(crate) fn details(report: &Report) -> Vec<String> {
    report
        .cells
        .iter()
        .flat_map(|c| {
            let label = label_with_host(c);
            c.advice
                .iter()
                .map(move |a| format!("{label}: {}", a.text()))
        })
        .collect()
}

/// The findings' heading: the metric, what × means.
pub(crate) fn findings_title(report: &Report) -> String {
    format!(
        "findings ({}): × = Hodges–Lehmann ratio (its interval at its Holm step's level), ~ = no significant difference after Holm's correction over all of them; a ratio too few runs leave undecided is an estimate, unmarked, with its own 95% interval",
        report.findings.metric
    )
}

/// How a cell's runs came to be counted: why adaptive repetition stopped it, and its
/// warm-up runs (one metric is enough to see a cold start; JSON has them all).
pub(crate) fn runs_notes(c: &CellReport) -> Vec<String> {
    let mut out: Vec<String> = c.stopped.iter().cloned().collect();
    let shown = c
        .warmup
        .iter()
        .find(|w| w.metric == "wall")
        .or(c.warmup.first());
    if let Some(w) = shown {
        let values: Vec<String> = w.values.iter().map(|v| human(*v, &w.unit)).collect();
        let ratio = match w.ratio_to_counted {
            Some(r) => format!("; their median is {r:.2}× the counted runs'"),
            None => String::new(),
        };
        out.push(format!(
            "warm-up (not counted): {} {}{ratio}",
            w.metric,
            values.join(", ")
        ));
    }
    out
}

/// A median with its interval and the interval's real coverage:
/// "11.40 ms (93.8% CI 11.37 ms … 11.80 ms)".
pub(crate) fn median_text(s: &Stats, scale: &Scale) -> String {
    match (s.median_ci, s.median_ci_level) {
        (Some((lo, hi)), Some(level)) => format!(
            "{} ({}% CI {} … {})",
            scale.show(s.median),
            stats::level_pct(level),
            scale.show(lo),
            scale.show(hi)
        ),
        _ => scale.show(s.median),
    }
}

/// A merged per-operation value for the median column: "206.7 µs over all 5000 ops".
pub(crate) fn merged_text(value: f64, l: &MergedLatency) -> String {
    format!("{} over all {} ops", human(value, "s"), l.ops)
}

/// Rows shared by the markup formats: one per (cell, metric), grouped by host. A
/// cell's `latency.p99` (…) row is its merged value over every operation of every run,
/// in place of the per-run metric it replaces.
pub(crate) fn rows(report: &Report) -> (Vec<String>, Vec<(String, Vec<String>)>) {
    let mut header: Vec<String> = report.params.clone();
    header.extend(["metric", "n", "median (CI)", "mean ± stddev", "min", "max"].map(String::from));
    let mut out = Vec::new();
    for cell in &report.cells {
        // Peak RSS included: it is the workload's own (see `process`), in every mode.
        for (i, m) in cell
            .metrics
            .iter()
            .filter(|m| m.same_as.is_none())
            .enumerate()
        {
            let mut row: Vec<String> = report
                .params
                .iter()
                .map(|p| {
                    if i == 0 {
                        cell.params.get(p).cloned().unwrap_or_else(|| "-".into())
                    } else {
                        String::new()
                    }
                })
                .collect();
            let merged = m.metric.strip_suffix(PER_RUN).and_then(|name| {
                cell.latency
                    .as_ref()
                    .and_then(|l| Some((name, l.get(name)?, l)))
            });
            if let Some((name, value, l)) = merged {
                row.extend([
                    name.to_string(),
                    l.runs.to_string(),
                    merged_text(value, l),
                    String::new(),
                    String::new(),
                    String::new(),
                ]);
                out.push((cell.host.clone(), row));
                continue;
            }
            let s = &m.stats;
            let mut n = s.n.to_string();
            if m.not_measured > 0 {
                n.push_str(&format!(" (+{} {})", m.not_measured, m.not_measured_reason));
            }
            if cell.failed > 0 {
                n.push_str(&format!(" ({} failed)", cell.failed));
            }
            // One unit for the row, chosen by its median: a stddev of 0 reads "0.00 ms"
            // next to "12.30 ms", not "0.000 s".
            let scale = if s.median != 0.0 {
                Scale::for_value(s.median, &m.unit)
            } else {
                Scale::for_values(&[s.mean, s.max], &m.unit)
            };
            row.extend([
                m.metric.clone(),
                n,
                median_text(s, &scale),
                format!("{} ± {}", scale.show(s.mean), scale.show(s.stddev)),
                scale.show(s.min),
                scale.show(s.max),
            ]);
            out.push((cell.host.clone(), row));
        }
        for u in &cell.unmeasured {
            let mut row: Vec<String> = report
                .params
                .iter()
                .map(|p| {
                    if cell.metrics.is_empty() {
                        cell.params.get(p).cloned().unwrap_or_default()
                    } else {
                        String::new()
                    }
                })
                .collect();
            row.extend([
                u.metric.clone(),
                format!("0 (+{} {})", u.count, u.reason),
                u.reason.clone(),
                String::new(),
                String::new(),
                String::new(),
            ]);
            out.push((cell.host.clone(), row));
        }
        if cell.metrics.is_empty() && cell.unmeasured.is_empty() {
            let mut row: Vec<String> = report
                .params
                .iter()
                .map(|p| cell.params.get(p).cloned().unwrap_or_default())
                .collect();
            // Why a cell has nothing at all, in the words a reader looks for.
            let why = if report.refused.iter().any(|r| r.host == cell.host) {
                "its host refused the plan".to_string()
            } else if cell.failed > 0 {
                format!("{} failed", cell.failed)
            } else if report.state == CampaignState::Running {
                "not run yet".to_string()
            } else {
                "no measurement arrived".to_string()
            };
            row.extend([
                "-".into(),
                format!("0 ({why})"),
                "".into(),
                "".into(),
                "".into(),
                "".into(),
            ]);
            out.push((cell.host.clone(), row));
        }
    }
    (header, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cells_metrics_are_the_commands_then_the_fsync_loops_then_by_name() {
        let mut metrics = vec![
            "total",
            "latency.max",
            "disk.writes",
            "latency.p50",
            "sys",
            "latency.mean",
            "wall",
            "ops_per_s",
            "a.tool.metric",
            "latency.p99.9",
            "latency",
        ];
        metrics.sort_by(|a, b| metric_rank(a).cmp(&metric_rank(b)));
        assert_eq!(
            metrics,
            [
                "wall",
                "sys",
                "latency.mean",
                "latency.p50",
                "latency.p99.9",
                "latency.max",
                "ops_per_s",
                "total",
                "latency",
                "a.tool.metric",
                "disk.writes",
            ]
        );
    }

    #[test]
    fn human_units() {
        assert_eq!(human(1.5, "s"), "1.500 s");
        assert_eq!(human(0.0123, "s"), "12.30 ms");
        assert_eq!(human(0.0000123, "s"), "12.3 µs");
        assert_eq!(human(0.000_000_345, "s"), "345 ns");
        assert_eq!(human(0.000_001, "s"), "1.0 µs");
        assert_eq!(human(2048.0, "B"), "2.00 KiB");
        assert_eq!(human(300.0, "1"), "300");
        assert_eq!(human(2822.0695, "op/s"), "2822.1 op/s");
        assert_eq!(human(3.0 * 1024.0 * 1024.0, "B/s"), "3.00 MiB/s");
    }

    /// A table row shows every value in the unit its median chose (issue 13: `0.000 s`
    /// stood next to µs).
    #[test]
    fn a_row_keeps_one_unit() {
        let s = stats::summarize(&[0.0123, 0.0123, 0.0123]).unwrap();
        let scale = Scale::for_value(s.median, "s");
        assert_eq!(scale.show(s.stddev), "0.00 ms");
        assert_eq!(scale.show(0.000_05), "0.05 ms");
        let rss = Scale::for_value(2.6 * 1024.0 * 1024.0, "B");
        assert_eq!(rss.show(63.1 * 1024.0), "0.06 MiB");
        // Zeros do not choose: 0 and 487 µs read in µs.
        let sys = Scale::for_values(&[0.0, 0.000_487, 0.0], "s");
        assert_eq!(sys.show(0.000_487), "487.0 µs");
        assert_eq!(sys.show(0.0), "0.0 µs");
    }

    /// One escape for HTML and JUnit XML: markup characters as references, and a tool's
    /// stray control characters (XML 1.0 forbids them, even as `&#1;`) replaced.
    #[test]
    fn markup_escaping_keeps_xml_well_formed() {
        assert_eq!(
            esc("a<b>&\"c'\td\ne\u{1}\u{1b}[31mf"),
            "a&lt;b&gt;&amp;&quot;c&#39;\td\ne\u{FFFD}\u{FFFD}[31mf"
        );
        assert_eq!(esc("µs ≤ 2%"), "µs ≤ 2%");
    }
}
