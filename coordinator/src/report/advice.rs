//! Advice about how a cell's runs came out — noise, a cold first run, outlier runs, too
//! few runs, a coarse user/sys split — kept per cell (JSON `advice`, the details section)
//! and said once per report: "3 of 4 cells …", a host-wide fact once per host. What must
//! be read per cell (a value not measured, a retried measurement, a preparation skipped)
//! stays in the cell's `warnings`.
//!
//! The thresholds, and why:
//! * **Noise** is judged by what it does to conclusions, not by a coefficient of
//!   variation: a cell is noisy when the interval of its median reaches further than
//!   ±[`NOISY_INTERVAL`] (10%) from the median, since differences smaller than that cannot
//!   be told apart from it. A CV says nothing of that without n: 6% over 6 runs of a
//!   20 ms dd gives an interval of about ±7%, which resolves any difference worth
//!   reporting; more runs narrow the interval, so the advice is to run more. 10% is the
//!   same line the outlier rule draws (`stats::OUTLIER_MIN_RELATIVE_DEVIATION`).
//! * **Outlier runs** are flagged from [`MIN_N_FOR_OUTLIER_RUNS`] runs on. Every estimate
//!   the report prints is rank-based (median, its order-statistic interval, Hodges–
//!   Lehmann, Mann–Whitney), so one extreme run moves it by one rank at most; with fewer
//!   runs the median absolute deviation the flag rests on is itself a guess.
//! * A **cold first run** (1.5× the others' median) and **too few runs** for an interval
//!   are said as before, counted over the cells.
//! * The **user/sys split** (`cpu_split`) depends on the host's kernel: said
//!   once per host, with the cells it touches counted.

use serde::Serialize;

use super::{human, CellReport};
use crate::stats;

/// How far (relative to the median) the median's interval may reach before a cell is
/// called noisy.
pub const NOISY_INTERVAL: f64 = 0.10;
/// Runs a cell needs before single runs are flagged as outliers.
pub const MIN_N_FOR_OUTLIER_RUNS: usize = 10;

/// One piece of advice about a cell's runs (of `wall`, or of the CPU split).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Advice {
    /// The median's interval reaches `reach` (relative) from the median.
    Noisy {
        reach: f64,
        lo: f64,
        hi: f64,
        text: String,
    },
    ColdFirstRun {
        times: f64,
        text: String,
    },
    OutlierRuns {
        runs: Vec<usize>,
        text: String,
    },
    TooFewRuns {
        n: usize,
        text: String,
    },
    /// The runs used `cpu` seconds of CPU, under 20 ticks of `tick` seconds.
    CoarseSplit {
        cpu: f64,
        tick: f64,
        hz: u32,
        text: String,
    },
}

impl Advice {
    pub fn text(&self) -> &str {
        match self {
            Advice::Noisy { text, .. }
            | Advice::ColdFirstRun { text, .. }
            | Advice::OutlierRuns { text, .. }
            | Advice::TooFewRuns { text, .. }
            | Advice::CoarseSplit { text, .. } => text,
        }
    }
}

/// The advice on one metric's runs (in run order) and its summary.
pub fn of_runs(metric: &str, values: &[f64], summary: Option<&stats::Summary>) -> Vec<Advice> {
    let mut out = Vec::new();
    for w in stats::warnings(values) {
        let text = format!("{metric}: {}", w.advice());
        match w {
            stats::Warning::TooFewForCi { n } => out.push(Advice::TooFewRuns { n, text }),
            stats::Warning::ColdFirstRun { first, rest_median } => out.push(Advice::ColdFirstRun {
                times: first / rest_median,
                text,
            }),
            stats::Warning::OutlierRuns { indices } if values.len() >= MIN_N_FOR_OUTLIER_RUNS => {
                out.push(Advice::OutlierRuns {
                    runs: indices.iter().map(|i| i + 1).collect(),
                    text,
                })
            }
            // Judged by the interval below, not by the CV.
            stats::Warning::OutlierRuns { .. } | stats::Warning::HighVariation { .. } => {}
        }
    }
    if let Some((s, (lo, hi))) = summary.and_then(|s| Some((s, s.median_ci?))) {
        if s.median > 0.0 {
            let (down, up) = (1.0 - lo / s.median, hi / s.median - 1.0);
            let reach = down.max(up);
            if reach > NOISY_INTERVAL {
                out.push(Advice::Noisy {
                    reach,
                    lo,
                    hi,
                    text: format!(
                        "{metric}: the median's interval reaches −{:.0}% … +{:.0}% of it (over ±{:.0}%): differences smaller than that cannot be told apart; increase repeat or quiet the machine",
                        down * 100.0,
                        up * 100.0,
                        NOISY_INTERVAL * 100.0
                    ),
                });
            }
        }
    }
    out
}

/// The report's advice, a line per kind (and per host for the CPU split), each counting
/// the cells it concerns and naming the worst.
pub fn summary(cells: &[CellReport]) -> Vec<String> {
    let n = cells.len();
    let label = |c: &CellReport| super::label_with_host(c);
    let mut out = Vec::new();
    let worst = |pick: &dyn Fn(&Advice) -> Option<f64>| {
        let mut hits: Vec<(&CellReport, f64)> = cells
            .iter()
            .filter_map(|c| Some((c, c.advice.iter().find_map(pick)?)))
            .collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1));
        hits
    };
    let noisy = worst(&|a| match a {
        Advice::Noisy { reach, .. } => Some(*reach),
        _ => None,
    });
    if let Some((c, reach)) = noisy.first() {
        out.push(format!(
            "noise: in {} of {n} cells the median's interval reaches more than ±{:.0}% (widest: {}, {:.0}%): differences smaller than that cannot be told apart there; increase repeat or quiet the machine",
            noisy.len(),
            NOISY_INTERVAL * 100.0,
            label(c),
            reach * 100.0
        ));
    }
    let cold = worst(&|a| match a {
        Advice::ColdFirstRun { times, .. } => Some(*times),
        _ => None,
    });
    if let Some((c, times)) = cold.first() {
        out.push(format!(
            "cold start: in {} of {n} cells the first run took {:.1}× the others' median or more (most: {}, {times:.1}×): add drop_caches to phases, or `warmup: 1`",
            cold.len(),
            stats::COLD_FIRST_RUN_FACTOR,
            label(c)
        ));
    }
    let outliers = worst(&|a| match a {
        Advice::OutlierRuns { runs, .. } => Some(runs.len() as f64),
        _ => None,
    });
    if !outliers.is_empty() {
        out.push(format!(
            "outlier runs: {} of {n} cells have runs far from their others ({}): other activity on the machine? the medians and comparisons are rank-based and move by one rank at most",
            outliers.len(),
            outliers.iter().take(3).map(|(c, _)| label(c)).collect::<Vec<_>>().join("; ")
        ));
    }
    let few = worst(&|a| match a {
        Advice::TooFewRuns { n, .. } => Some(*n as f64),
        _ => None,
    });
    if !few.is_empty() {
        out.push(format!(
            "too few runs: {} of {n} cells have fewer than {} runs, so no interval: set repeat to {} or more",
            few.len(),
            stats::MIN_N_FOR_CI,
            stats::MIN_N_FOR_95_MEDIAN_CI
        ));
    }
    // The CPU split: a fact of each host's kernel.
    let mut hosts: indexmap::IndexMap<&str, (usize, usize, f64, f64, u32)> =
        indexmap::IndexMap::new();
    for c in cells {
        let e = hosts.entry(c.host.as_str()).or_insert((0, 0, 0.0, 0.0, 0));
        e.1 += 1;
        for a in &c.advice {
            if let Advice::CoarseSplit { cpu, tick, hz, .. } = a {
                e.0 += 1;
                e.2 = e.2.max(*cpu);
                e.3 = *tick;
                e.4 = *hz;
            }
        }
    }
    for (host, (coarse, total, _, tick, hz)) in hosts {
        if coarse == 0 {
            continue;
        }
        let how = if hz > 0 {
            format!("a tick is {} here, CONFIG_HZ={hz}", human(tick, "s"))
        } else {
            "this host's tick unknown, taken as 10 ms".to_string()
        };
        out.push(format!(
            "{host}: user and sys are split by timer ticks ({how}); in {coarse} of {total} cells a run used under {} ticks ({}) of CPU, so their split is coarse; user + sys is exact",
            SPLIT_TICKS,
            human(SPLIT_TICKS * tick, "s")
        ));
    }
    out
}

/// Fewer timer ticks of CPU than this in a run, and the kernel's split of it between
/// user and system rests on too few samples to read much into (each is ≥ 5% of it).
pub const SPLIT_TICKS: f64 = 20.0;

/// What a reader must know of a cell's `user` and `sys` when the kernel samples their
/// split at the timer tick and the median run used fewer than [`SPLIT_TICKS`] ticks of
/// CPU: the split is coarse (a run no tick caught is all `user`), their sum is exact (the
/// kernel scales the samples to the scheduler's own account of the run). `None` when the
/// split is measured, or there is enough CPU time, or no `user`/`sys`.
pub fn cpu_split(snapshots: &[super::provenance::Snapshot], cell: &CellReport) -> Option<Advice> {
    let host = snapshots
        .iter()
        .rev()
        .filter(|s| s.host == cell.host)
        .find_map(|s| s.facts.host.as_ref());
    let (hz, accounting) = host.map_or((0, ""), |h| (h.tick_hz, h.cpu_accounting.as_str()));
    if accounting == platter_proto::provenance::VIRTUAL_ACCOUNTING {
        return None;
    }
    let metric = |name: &str| {
        cell.metrics
            .iter()
            .find(|m| m.metric == name && m.unit == "s")
    };
    let (user, sys) = (metric("user")?, metric("sys")?);
    // Each run's own user + sys; the two medians' sum only if a run lacks one of them.
    let cpu = if user.values.len() == sys.values.len() {
        let mut sums: Vec<f64> = user
            .values
            .iter()
            .zip(&sys.values)
            .map(|(u, s)| u + s)
            .collect();
        stats::median_in_place(&mut sums)
    } else {
        user.stats.median + sys.stats.median
    };
    // An unknown tick is taken as 100 Hz, the coarsest of x86's and arm64's choices.
    let tick = if hz > 0 { 1.0 / f64::from(hz) } else { 0.01 };
    if cpu >= SPLIT_TICKS * tick {
        return None;
    }
    let how = if hz > 0 {
        format!("every {} here, CONFIG_HZ={hz}", human(tick, "s"))
    } else {
        "this host's tick unknown, taken as 10 ms".to_string()
    };
    Some(Advice::CoarseSplit {
        cpu,
        tick,
        hz,
        text: format!(
            "user, sys: the kernel splits CPU time between them by timer-tick samples ({how}) \
             and the median run used {} of CPU, under {SPLIT_TICKS} ticks ({}): the split is \
             coarse (a run no tick caught is all user); user + sys is exact",
            human(cpu, "s"),
            human(SPLIT_TICKS * tick, "s")
        ),
    })
}
