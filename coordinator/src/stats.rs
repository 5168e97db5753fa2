//! Statistics behind the reports and adaptive repetition's rule: per-cell summaries with
//! confidence intervals, baseline comparisons, Holm's correction, fleet outliers, run
//! warnings and merged HDR latency histograms. Pure functions over numbers: no I/O, no
//! formatting of tables, no knowledge of cells, agents or units. At the crate's top,
//! beneath both `report` and `planning::rounds`, so the writer's round decision and the
//! report's "stopped after …" use one rule without either climbing to the other.
//!
//! Conventions (the tests pin them against `tests/stats-reference.json`):
//! * the median of an even number of values is the mean of the two middle ones,
//!   as in Python's `statistics.median`;
//! * `stddev` is the sample standard deviation (n − 1);
//! * `mad` is the unscaled median absolute deviation from the median;
//! * every interval carries the coverage it really has, never a nominal one:
//!   - the median's is distribution-free, from order statistics: the narrowest
//!     symmetric pair (x₍ₖ₎, x₍ₙ₊₁₋ₖ₎) whose coverage 1 − 2·P(Bin(n, ½) < k) is
//!     at least [`CONFIDENCE`]; below n = 6 no pair reaches 95%, so min … max is
//!     given with the level it has (75% at n = 3, 87.5% at 4, 93.75% at 5);
//!   - the mean's is Student's t (exactly 95% for normal data);
//!   - a comparison's is the Hodges–Lehmann shift of the log values with its
//!     distribution-free interval from the Mann–Whitney U distribution (exact up
//!     to [`EXACT_U_MAX_PAIRS`] pairs): a penalty is a ratio, and for a
//!     multiplicative effect the logs differ by a shift, whatever their spread.
//!     A percentile bootstrap of the ratio of medians covered 74.5% at n = 3
//!     and 92.5% at n = 5 when it claimed 95%; this one is pinned by simulation
//!     (`tests/intervals.rs`);
//! * nothing is random: the same values give the same intervals, everywhere;
//! * latency percentiles come from merged histograms, never from averaging
//!   per-repetition percentiles.

pub mod drift;
pub mod peers;

use std::collections::HashMap;
use std::io::Cursor;
use std::sync::{Arc, Mutex, OnceLock};

use hdrhistogram::serialization::{DeserializeError, Deserializer};
use hdrhistogram::{AdditionError, Histogram};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Fewer values than this give no confidence interval (and a warning).
pub const MIN_N_FOR_CI: usize = 3;
/// The fewest values whose median interval reaches [`CONFIDENCE`] (96.9% at n = 6).
pub const MIN_N_FOR_95_MEDIAN_CI: usize = 6;
/// The coverage every interval aims for; an interval that cannot reach it (too
/// few values) says which level it has instead.
pub const CONFIDENCE: f64 = 0.95;
/// Significance level of one test (`1 − CONFIDENCE`) and of a family after Holm.
pub const ALPHA: f64 = 1.0 - CONFIDENCE;
/// Up to this many baseline × candidate pairs the Mann–Whitney U distribution is
/// computed exactly (30 × 30 repetitions: 900); beyond, its normal approximation,
/// which is accurate to well under 0.1% of coverage there.
pub const EXACT_U_MAX_PAIRS: usize = 2_500;
/// Default `|modified z|` above which a value is an outlier (Iglewicz & Hoaglin).
pub const OUTLIER_THRESHOLD: f64 = 3.5;
/// …and the relative distance from the median it must have as well. With three
/// steady runs the MAD is tiny, so a 2.7% slower run (1.957 s among 1.905 s) scored
/// |z| > 100; run-to-run differences under 10% are the ordinary noise of a storage
/// benchmark on a machine doing anything else (page cache, journal commits, CPU
/// frequency; seed 000's runs spread ±3%) and are the CV warning's business, not an
/// outlier's. A run 10% off its siblings changes a conclusion; 3% does not.
pub const OUTLIER_MIN_RELATIVE_DEVIATION: f64 = 0.10;
/// Coefficient of variation above which repetitions are called noisy.
pub const HIGH_CV: f64 = 0.05;
/// A first repetition slower than this multiple of the others' median is "cold".
pub const COLD_FIRST_RUN_FACTOR: f64 = 1.5;

/// Φ⁻¹(0.75): makes MAD a consistent estimator of σ for normal data.
const MAD_Z: f64 = 0.6745;
/// √(π/2): the same for the mean absolute deviation (the MAD == 0 fallback).
const MEAN_AD_Z: f64 = 1.253314;

#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    #[error("no histograms to merge")]
    NoHistograms,
    #[error("histogram #{index} is not a valid V2 serialized HDR histogram")]
    Deserialize {
        index: usize,
        #[source]
        source: DeserializeError,
    },
    #[error("histogram #{index} cannot be added to the others")]
    Add {
        index: usize,
        #[source]
        source: AdditionError,
    },
}

/// Summary of one cell's repetitions.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub max: f64,
    pub median: f64,
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 for n < 2.
    pub stddev: f64,
    /// `stddev / mean`; 0 if the mean is 0.
    pub cv: f64,
    /// Median absolute deviation from the median, unscaled.
    pub mad: f64,
    /// Distribution-free interval of the median from order statistics; its coverage
    /// is `median_ci_level`. `None` when n < [`MIN_N_FOR_CI`].
    pub median_ci: Option<(f64, f64)>,
    /// The coverage of `median_ci` (0.9375 at n = 5; ≥ 0.95 from n = 6 on).
    pub median_ci_level: Option<f64>,
    /// Student-t interval of the mean at [`CONFIDENCE`] (exact for normal data);
    /// `None` when n < [`MIN_N_FOR_CI`].
    pub mean_ci_student_t: Option<(f64, f64)>,
}

/// Summarizes `values` (any order). `None` when empty or when any value is
/// not finite: a NaN from a broken parser must not become a plausible number.
pub fn summarize(values: &[f64]) -> Option<Summary> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let n = values.len();
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let (min, max) = (sorted[0], sorted[n - 1]);
    let median = median_of_sorted(&sorted);
    let (mean, stddev, cv) = moments(values, min == max);
    let mad = mad_about(&sorted, median);

    let (median_ci, median_ci_level) = match median_ci_rank(n) {
        Some((k, level)) => (Some((sorted[k - 1], sorted[n - k])), Some(level)),
        None => (None, None),
    };
    let mean_ci_student_t = (n >= MIN_N_FOR_CI).then(|| {
        let half = t_quantile(1.0 - ALPHA / 2.0, (n - 1) as f64) * stddev / (n as f64).sqrt();
        (mean - half, mean + half)
    });

    Some(Summary {
        n,
        min,
        max,
        median,
        mean,
        stddev,
        cv,
        mad,
        median_ci,
        median_ci_level,
        mean_ci_student_t,
    })
}

/// The rank k (1-based) of the median interval (x₍ₖ₎, x₍ₙ₊₁₋ₖ₎) of n values and its
/// coverage `1 − 2·P(Bin(n, ½) ≤ k − 1)`: the largest k whose coverage is at least
/// [`CONFIDENCE`], or k = 1 (min … max) with the lower coverage it has when n is too
/// small for that. `None` when n < [`MIN_N_FOR_CI`].
pub fn median_ci_rank(n: usize) -> Option<(usize, f64)> {
    if n < MIN_N_FOR_CI {
        return None;
    }
    // P(Bin(n, ½) = i) in log space: 2⁻ⁿ underflows from n = 1075 on.
    let mut log_pmf = -(n as f64) * std::f64::consts::LN_2;
    let mut below = 0.0; // P(Bin ≤ k − 1)
    let mut best = (1, 1.0 - 2.0 * log_pmf.exp());
    for k in 1..=n.div_ceil(2) {
        below += log_pmf.exp();
        let level = 1.0 - 2.0 * below;
        if level < CONFIDENCE {
            break;
        }
        best = (k, level);
        // P(Bin = k) from P(Bin = k − 1).
        log_pmf += ((n - (k - 1)) as f64 / k as f64).ln();
    }
    Some(best)
}

/// The `p` quantile of Student's t with `df` degrees of freedom.
fn t_quantile(p: f64, df: f64) -> f64 {
    StudentsT::new(0.0, 1.0, df)
        .map(|t| t.inverse_cdf(p))
        // df ≥ 2 here, so the distribution always exists; 1.96 would be its limit.
        .unwrap_or(1.959_963_984_540_054)
}

/// A candidate measured against a baseline. Ratio > 1 means the candidate is
/// larger: a penalty for times and latencies (callers comparing throughput swap
/// the arguments or negate the wording).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Comparison {
    /// `exp(Hodges–Lehmann shift of the log values)`: the median of all
    /// `candidate_j / baseline_i` ratios. For a multiplicative effect it estimates
    /// the ratio of the medians (and equals it when both sides spread alike).
    pub ratio: f64,
    /// `(ratio − 1) × 100`.
    pub penalty_pct: f64,
    /// Distribution-free interval of the penalty in percent (Mann–Whitney on the log
    /// values); its coverage is `ci_level`. `None` when either group has fewer than
    /// [`MIN_N_FOR_CI`] values.
    pub ci_pct: Option<(f64, f64)>,
    /// The coverage of `ci_pct`: ≥ 0.95 when the groups are large enough (6 + 6:
    /// 0.959), less for tiny groups (3 + 3: 0.90).
    pub ci_level: Option<f64>,
    /// Two-sided Mann–Whitney p-value of "no difference" (exact without ties; with
    /// ties the exact distribution is used with mid-ranks, slightly conservative).
    pub p_value: f64,
    /// `p_value ≤ ALPHA`, for this comparison alone; a report of many comparisons
    /// decides with [`holm`] instead. With `ci_level ≥ 0.95` it implies that the
    /// interval excludes 0.
    pub significant: bool,
}

/// `f` of each of `items`, in their order, the items split evenly over the machine's
/// cores. (std's scoped threads, not a thread pool: a report makes its tests in one batch,
/// and a pool would live on in the coordinator for nothing in between.) A part whose
/// thread cannot be started is done on this one.
pub fn each_on_cores<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 || items.len() < 2 {
        return items.iter().map(f).collect();
    }
    let part = items.len().div_ceil(cores);
    std::thread::scope(|scope| {
        let f = &f;
        let mut parts = items.chunks(part);
        let here = parts.next().unwrap_or_default();
        let elsewhere: Vec<_> = parts
            .map(|p| {
                let spawned = std::thread::Builder::new()
                    .name("stats".into())
                    .spawn_scoped(scope, move || p.iter().map(f).collect::<Vec<R>>());
                (p, spawned)
            })
            .collect();
        let mut out: Vec<R> = here.iter().map(f).collect();
        for (p, spawned) in elsewhere {
            match spawned {
                Ok(h) => out.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))),
                Err(_) => out.extend(p.iter().map(f)),
            }
        }
        out
    })
}

/// Compares the two groups. `None` when either side is empty, not finite, or not
/// positive (a ratio of times, sizes or rates needs positive values).
pub fn compare(baseline: &[f64], candidate: &[f64]) -> Option<Comparison> {
    compare_at(baseline, candidate, CONFIDENCE)
}

/// [`compare`] with the interval at `confidence` (or the widest there is, k = 1, with the
/// coverage it has when the groups are too small for it).
pub fn compare_at(baseline: &[f64], candidate: &[f64], confidence: f64) -> Option<Comparison> {
    let usable = |xs: &[f64]| !xs.is_empty() && xs.iter().all(|v| v.is_finite() && *v > 0.0);
    if !usable(baseline) || !usable(candidate) {
        return None;
    }
    let (m, n) = (baseline.len(), candidate.len());
    let diffs = PairwiseDiffs::new(baseline, candidate);
    let pairs = m * n;
    let shift = if pairs % 2 == 1 {
        diffs.kth(pairs / 2 + 1)
    } else {
        let (lower, upper) = diffs.kth_and_next(pairs / 2);
        (lower + upper) / 2.0
    };
    let ratio = shift.exp();
    let pct = |d: f64| d.exp_m1() * 100.0;

    let u_dist = UDistribution::new(m, n);
    let (ci_pct, ci_level) = if m < MIN_N_FOR_CI || n < MIN_N_FOR_CI {
        (None, None)
    } else {
        let (k, level) = u_dist.ci_rank(confidence);
        (
            Some((pct(diffs.kth(k)), pct(diffs.kth(pairs + 1 - k)))),
            Some(level),
        )
    };
    // U = pairs where the candidate is larger, ties counting one half.
    let at_most_zero = diffs.count(|d| d <= 0.0);
    let below_zero = diffs.count(|d| d < 0.0);
    let above = (pairs - at_most_zero) as f64;
    let ties = (at_most_zero - below_zero) as f64;
    let p_value = u_dist.two_sided_p(above + ties / 2.0);
    Some(Comparison {
        ratio,
        penalty_pct: pct(shift),
        ci_pct,
        ci_level,
        p_value,
        significant: p_value <= ALPHA,
    })
}

/// The m·n differences `ln c − ln b` of two groups, without making them: order
/// statistics are found by counting (O(m + n) per count over the sorted logs), so two
/// groups of 10,000 values cost a few milliseconds instead of 800 MB of differences.
/// The counts use the very subtraction a list of differences would hold, so the k-th
/// smallest is the same float a sort would give.
struct PairwiseDiffs {
    /// ln of the baseline, ascending.
    x: Vec<f64>,
    /// ln of the candidate, ascending.
    y: Vec<f64>,
}

impl PairwiseDiffs {
    fn new(baseline: &[f64], candidate: &[f64]) -> Self {
        let sorted_logs = |v: &[f64]| {
            let mut l: Vec<f64> = v.iter().map(|v| v.ln()).collect();
            l.sort_by(f64::total_cmp);
            l
        };
        PairwiseDiffs {
            x: sorted_logs(baseline),
            y: sorted_logs(candidate),
        }
    }

    /// How many differences `y − x` satisfy `keep`, a predicate that holds for all
    /// differences up to some threshold and none beyond (`d <= t`, `d < t`). For a
    /// fixed y, `y − x` falls as x grows, so the x kept are a suffix of `x`, whose start
    /// only moves right as y grows (IEEE subtraction is monotone in each argument).
    fn count(&self, keep: impl Fn(f64) -> bool) -> usize {
        let mut start = 0;
        let mut total = 0;
        for &y in &self.y {
            while start < self.x.len() && !keep(y - self.x[start]) {
                start += 1;
            }
            total += self.x.len() - start;
        }
        total
    }

    /// The k-th smallest difference (1-based): the smallest float t with at least k
    /// differences ≤ t, found by bisecting the floats between the smallest and the
    /// largest difference in their total order until few differences lie between the
    /// two (at most 64 counts), then selecting among those.
    fn kth(&self, k: usize) -> f64 {
        debug_assert!(k >= 1 && k <= self.x.len() * self.y.len());
        // Floats → integers with the same order (negative floats flipped).
        let key = |f: f64| {
            let b = f.to_bits() as i64;
            b ^ (((b >> 63) as u64) >> 1) as i64
        };
        let float = |k: i64| f64::from_bits((k ^ (((k >> 63) as u64) >> 1) as i64) as u64);
        let (first_y, last_y) = (self.y[0], self.y[self.y.len() - 1]);
        let (first_x, last_x) = (self.x[0], self.x[self.x.len() - 1]);
        let (mut lo, mut hi) = (key(first_y - last_x), key(last_y - first_x));
        // Invariant: the answer is in [lo, hi]; `below` differences are ≤ `under` (none
        // when it is None: lo is the smallest), `upto` are ≤ float(hi) (below < k ≤ upto).
        // (`under` is the float below float(lo), not float(lo) itself: −0.0 and 0.0 are
        // next to each other in the order but equal.)
        let (mut below, mut under, mut upto) = (0, None, self.x.len() * self.y.len());
        // Few enough to hold and select from: what a count costs to pass over anyway.
        let few = 4 * (self.x.len() + self.y.len());
        while lo < hi {
            if upto - below <= few {
                let mut between = self.between(under, float(hi));
                debug_assert_eq!(between.len(), upto - below);
                let (_, kth, _) = between.select_nth_unstable_by(k - below - 1, f64::total_cmp);
                // −0.0 counts like 0.0, but no difference is −0.0 (x − x is +0.0).
                return *kth + 0.0;
            }
            let mid = ((i128::from(lo) + i128::from(hi)) >> 1) as i64;
            let t = float(mid);
            let n = self.count(|d| d <= t);
            if n >= k {
                hi = mid;
                upto = n;
            } else {
                lo = mid + 1;
                below = n;
                under = Some(t);
            }
        }
        float(lo) + 0.0
    }

    /// The k-th and the (k + 1)-th smallest differences (1 ≤ k < m·n): the second is the
    /// first again when more than k differences equal it, else the smallest difference
    /// above it, found in one more pass rather than a second selection (an even number
    /// of pairs takes the mean of both as its shift).
    fn kth_and_next(&self, k: usize) -> (f64, f64) {
        let kth = self.kth(k);
        // For each y the x with y − x > kth are a prefix of `x` (as in `count`); its last
        // gives the row's smallest difference above kth.
        let (mut start, mut upto, mut next) = (0, 0, f64::INFINITY);
        for &y in &self.y {
            while start < self.x.len() && y - self.x[start] > kth {
                start += 1;
            }
            upto += self.x.len() - start;
            if start > 0 {
                next = next.min(y - self.x[start - 1]);
            }
        }
        if upto > k {
            (kth, kth)
        } else {
            (kth, next + 0.0)
        }
    }

    /// Every difference d with under < d ≤ hi (any d ≤ hi when `under` is None). For a
    /// fixed y those are the x of one run of `x`, whose two ends only move right as y grows
    /// (as in `count`).
    fn between(&self, under: Option<f64>, hi: f64) -> Vec<f64> {
        let (mut first, mut end) = (0, 0);
        let mut out = Vec::new();
        for &y in &self.y {
            while first < self.x.len() && y - self.x[first] > hi {
                first += 1;
            }
            end = end.max(first);
            while end < self.x.len() && under.is_none_or(|u| y - self.x[end] > u) {
                end += 1;
            }
            out.extend(self.x[first..end].iter().map(|&x| y - x));
        }
        out
    }
}

/// A comparison's standing in its report: Holm's adjusted p-value and how many
/// comparisons were made together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Family {
    pub adjusted_p: f64,
    pub size: usize,
}

impl Comparison {
    /// One line for a report, e.g.
    /// `encryption penalty 11.0% (96.8% CI 8.2% … 13.9%)`. "No significant
    /// difference" only when the interval covers 0; an interval that excludes 0
    /// without a significant test (too few values for 95%, or not after Holm's
    /// correction) says so.
    pub fn describe(&self, label: &str, family: Option<Family>) -> String {
        let (Some((lo, hi)), Some(level)) = (self.ci_pct, self.ci_level) else {
            return format!(
                "{label} penalty {:.1}% (too few repetitions for an interval)",
                self.penalty_pct
            );
        };
        let verdict = if lo <= 0.0 && 0.0 <= hi {
            ": no significant difference".to_string()
        } else if !self.significant {
            format!(
                ": not significant at the {}% level (p = {:.2})",
                level_pct(ALPHA),
                self.p_value
            )
        } else {
            match family {
                Some(f) if f.size > 1 && f.adjusted_p > ALPHA => format!(
                    ": not significant after Holm's correction for {} comparisons (adjusted p = {:.2})",
                    f.size, f.adjusted_p
                ),
                _ => String::new(),
            }
        };
        format!(
            "{label} penalty {:.1}% ({}% CI {lo:.1}% … {hi:.1}%){verdict}",
            self.penalty_pct,
            level_pct(level)
        )
    }
}

/// A coverage level for people: 0.9375 → "93.8", 0.95 → "95", 0.75 → "75".
pub fn level_pct(level: f64) -> String {
    let s = format!("{:.1}", level * 100.0);
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// A confidence level as a percentage to a tenth ("96.8%"), with as many decimals as it
/// takes not to read as 100 at a Holm step ("99.997%").
pub fn level_text(level: f64) -> String {
    match level_pct(level) {
        l if l == "100" => level_with_sign(level),
        l => format!("{l}%"),
    }
}

/// A confidence level as a percentage with as many decimals as it takes not to read as
/// 100 (Holm's steps over a large family reach 99.997%): "99%", "99.97%", "99.9997%".
pub fn level_with_sign(level: f64) -> String {
    let pct = level * 100.0;
    for digits in 0..=6 {
        let s = format!("{pct:.digits$}");
        if s.parse::<f64>().is_ok_and(|v| v < 100.0) || pct >= 100.0 {
            let s = if s.contains('.') {
                s.trim_end_matches('0').trim_end_matches('.').to_string()
            } else {
                s
            };
            return format!("{s}%");
        }
    }
    format!("{pct}%")
}

/// Holm's step-down adjusted p-values (same order as `p`): a comparison is
/// significant in its family when its adjusted p is ≤ [`ALPHA`], which keeps the
/// chance of any false "significant" among all of them at most `ALPHA`.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut adjusted = vec![0.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p[i]).min(1.0));
        adjusted[i] = running;
    }
    adjusted
}

/// The smallest two-sided p the Mann–Whitney test can give groups of `m` and `n` values,
/// when they do not overlap at all: 2/C(m + n, m) (0.0079 at 5 + 5, 0.0022 at 6 + 6,
/// 0.00058 at 7 + 7); the normal approximation's beyond [`EXACT_U_MAX_PAIRS`] pairs. 1
/// when either group is empty.
pub fn smallest_p(m: usize, n: usize) -> f64 {
    if m == 0 || n == 0 {
        return 1.0;
    }
    UDistribution::new(m, n).two_sided_p(0.0)
}

/// The fewest runs a side (n against n) whose comparison can reach `alpha`: the smallest n
/// with 2/C(2n, n) ≤ `alpha` (7 for 5% over 24 comparisons).
pub fn runs_to_reach(alpha: f64) -> usize {
    // Past 40 a side the smallest p is below 1e-22: no family of a report needs more.
    (1..=40)
        .find(|&n| reaches(smallest_p(n, n), alpha))
        .unwrap_or(40)
}

/// `p ≤ alpha`, forgiving the last bits of a float (2/C(2n, n) against α/K).
fn reaches(p: f64, alpha: f64) -> bool {
    p <= alpha * (1.0 + 1e-9)
}

/// Each test's Holm step, in `p`'s order: its adjusted p and the α its step holds it to.
/// The j-th smallest of K p-values is held to α/(K − j) while the steps before it reject;
/// from the first step that does not reject on, every test is held to that step's α. An
/// interval at 1 − its step's α then excludes "no difference" exactly when Holm calls the
/// test significant (`stats::peers` draws its drives' intervals the same way).
pub fn holm_steps(p: &[f64], alpha: f64) -> Vec<(f64, f64)> {
    let adjusted = holm(p);
    let k = p.len();
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = vec![(1.0, alpha); k];
    let mut held = None;
    for (rank, &i) in order.iter().enumerate() {
        if held.is_none() && adjusted[i] > alpha {
            held = Some(rank);
        }
        let step = held.unwrap_or(rank);
        out[i] = (adjusted[i], alpha / (k - step) as f64);
    }
    out
}

/// One comparison of a family, decided with the others by Holm at [`ALPHA`].
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Its ratio and test; its interval at 1 − `step_alpha` when `decided`, else at
    /// [`CONFIDENCE`] (`ci_level` is the coverage it really has).
    pub comparison: Comparison,
    pub holm_p: f64,
    /// How many tests the family holds.
    pub family: usize,
    /// The α of its Holm step.
    pub step_alpha: f64,
    /// Its runs, baseline and candidate.
    pub runs: (usize, usize),
    /// Whether the line is decided at all: its groups can reach its step's α (the exact
    /// test's smallest p, [`smallest_p`], is at most that α). When they cannot, no
    /// interval at that level exists and the test cannot pass: the line is an estimate,
    /// neither significant nor "no difference".
    pub decided: bool,
    /// Decided, Holm's adjusted p ≤ [`ALPHA`] and its interval excludes ×1. For a decided
    /// line the two agree by construction (the interval is at its Holm step's level); the
    /// second guards the ties, where the exact test is conservative.
    pub significant: bool,
}

/// Why a line of a family is an estimate, not a verdict: its runs cannot reach its Holm
/// step's level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TooFewRuns {
    /// The line's runs, baseline and candidate.
    pub runs: (usize, usize),
    /// The tests of its family.
    pub family: usize,
    /// Runs a side (n against n) that would let such a line pass its step alone.
    pub runs_needed: usize,
}

/// Lines too few runs left undecided: their ratios are estimates, without a mark. Said once
/// ("with 5 runs a side no single configuration can pass Holm over 24 comparisons; repeat: 7
/// would"), not as `~` on every line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Undecided {
    /// How many lines are estimates, of how many.
    pub estimates: usize,
    pub lines: usize,
    /// The fewest and the most runs a side among the estimates.
    pub runs: (usize, usize),
    /// The largest family among them.
    pub family: usize,
    /// Runs a side that would let every one of them be decided alone.
    pub runs_needed: usize,
}

impl Undecided {
    /// Over `lines`, each a ratio's reason to be an estimate (`None`: decided). `None` when
    /// every line is decided.
    pub fn of(lines: impl IntoIterator<Item = Option<TooFewRuns>>) -> Option<Undecided> {
        let mut out: Option<Undecided> = None;
        let mut count = 0;
        for t in lines {
            count += 1;
            let Some(t) = t else { continue };
            let (few, many) = (t.runs.0.min(t.runs.1), t.runs.0.max(t.runs.1));
            let u = out.get_or_insert(Undecided {
                estimates: 0,
                lines: 0,
                runs: (few, many),
                family: 0,
                runs_needed: 0,
            });
            u.estimates += 1;
            u.runs = (u.runs.0.min(few), u.runs.1.max(many));
            u.family = u.family.max(t.family);
            u.runs_needed = u.runs_needed.max(t.runs_needed);
        }
        out.map(|u| Undecided { lines: count, ..u })
    }
}

impl Decision {
    /// Why the line is not decided; `None` when it is.
    pub fn too_few_runs(&self) -> Option<TooFewRuns> {
        (!self.decided).then(|| TooFewRuns {
            runs: self.runs,
            family: self.family,
            runs_needed: runs_to_reach(self.step_alpha),
        })
    }
}

/// Every pair of groups (baseline, candidate) compared and decided together: Holm over
/// those that can be compared, each decided line's interval at its Holm step's level, so
/// its mark and its interval say the same. `None` for a pair that cannot be compared
/// (see [`compare`]). The tests are made on every core.
pub fn decide_family(pairs: &[(&[f64], &[f64])]) -> Vec<Option<Decision>> {
    let tests: Vec<Option<Comparison>> = each_on_cores(pairs, |(b, c)| compare(b, c));
    let ps: Vec<f64> = tests.iter().flatten().map(|t| t.p_value).collect();
    let family = ps.len();
    let mut steps = holm_steps(&ps, ALPHA).into_iter();
    // Each line with its own 95% interval first, then decided where its runs allow.
    let judged: Vec<Option<Decision>> = tests
        .into_iter()
        .zip(pairs)
        .map(|(t, (b, c))| {
            let comparison = t?;
            let (holm_p, step_alpha) = steps.next()?;
            Some(Decision {
                comparison,
                holm_p,
                family,
                step_alpha,
                runs: (b.len(), c.len()),
                decided: false,
                significant: false,
            })
        })
        .collect();
    let index: Vec<usize> = (0..pairs.len()).collect();
    each_on_cores(&index, |&i| {
        let mut d = judged[i].clone()?;
        let (m, n) = d.runs;
        d.decided =
            m >= MIN_N_FOR_CI && n >= MIN_N_FOR_CI && reaches(smallest_p(m, n), d.step_alpha);
        if !d.decided {
            return Some(d);
        }
        if let Some(c) = compare_at(pairs[i].0, pairs[i].1, 1.0 - d.step_alpha) {
            d.comparison = c;
        }
        let excludes_one = d
            .comparison
            .ci_pct
            .is_some_and(|(lo, hi)| lo > 0.0 || hi < 0.0);
        d.significant = d.holm_p <= ALPHA && excludes_one;
        Some(d)
    })
}

/// Exact U distributions by (smaller, larger) group size: a report compares many cells
/// with the same repetition counts.
type UCdfCache = HashMap<(usize, usize), Arc<Vec<f64>>>;

/// The null distribution of the Mann–Whitney U statistic for groups of m and n
/// values: exact (cached per size pair) up to [`EXACT_U_MAX_PAIRS`] pairs, else
/// the normal approximation.
enum UDistribution {
    /// `cdf[u] = P(U ≤ u)`.
    Exact(Arc<Vec<f64>>),
    Normal {
        pairs: f64,
        mean: f64,
        sd: f64,
    },
}

impl UDistribution {
    fn new(m: usize, n: usize) -> Self {
        if m * n > EXACT_U_MAX_PAIRS {
            let pairs = (m * n) as f64;
            return UDistribution::Normal {
                pairs,
                mean: pairs / 2.0,
                sd: (pairs * (m + n + 1) as f64 / 12.0).sqrt(),
            };
        }
        static CACHE: OnceLock<Mutex<UCdfCache>> = OnceLock::new();
        let key = (m.min(n), m.max(n));
        let cache = CACHE.get_or_init(Default::default);
        if let Some(cdf) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return UDistribution::Exact(cdf);
        }
        let cdf = Arc::new(exact_u_cdf(key.0, key.1));
        if let Ok(mut c) = cache.lock() {
            c.insert(key, cdf.clone());
        }
        UDistribution::Exact(cdf)
    }

    /// P(U ≤ u) for a whole u (symmetric around pairs / 2).
    fn cdf(&self, u: f64) -> f64 {
        match self {
            UDistribution::Exact(cdf) => {
                if u < 0.0 {
                    0.0
                } else {
                    cdf[(u as usize).min(cdf.len() - 1)]
                }
            }
            UDistribution::Normal { mean, sd, .. } => normal_cdf((u + 0.5 - mean) / sd),
        }
    }

    fn pairs(&self) -> usize {
        match self {
            UDistribution::Exact(cdf) => cdf.len() - 1,
            UDistribution::Normal { pairs, .. } => *pairs as usize,
        }
    }

    /// The interval's rank k (1-based, from each end of the sorted differences) and
    /// coverage `1 − 2·P(U ≤ k − 1)`: the largest k with coverage ≥ `confidence`,
    /// or k = 1 with the coverage it has.
    fn ci_rank(&self, confidence: f64) -> (usize, f64) {
        let level = |k: usize| 1.0 - 2.0 * self.cdf((k - 1) as f64);
        // The coverage falls as k grows: bisect for the last k that keeps `confidence`
        // (10,000 × 10,000 values have 5·10⁷ candidates).
        let (mut lo, mut hi) = (1, self.pairs().div_ceil(2).max(1));
        if level(lo) < confidence {
            return (1, level(1));
        }
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if level(mid) >= confidence {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        (lo, level(lo))
    }

    /// Two-sided p of an observed U (a half-integer with ties: the tail is taken
    /// from the nearer whole value on the far side, which is conservative).
    fn two_sided_p(&self, u: f64) -> f64 {
        let pairs = self.pairs() as f64;
        // By symmetry P(U ≥ u) = P(U ≤ pairs − u).
        let tail = self.cdf(u.floor()).min(self.cdf((pairs - u).floor()));
        (2.0 * tail).min(1.0)
    }
}

/// P(U ≤ u) for u in 0..=m·n, from the recursion on the probability of U = u:
/// p(i, j, u) = i/(i+j)·p(i−1, j, u−j) + j/(i+j)·p(i, j−1, u) (the largest of all
/// i + j values belongs to one group or the other). O(m·n·m·n) time, O(n·m·n) memory.
fn exact_u_cdf(m: usize, n: usize) -> Vec<f64> {
    // row[j] = distribution of U for (i, j).
    let mut prev: Vec<Vec<f64>> = (0..=n).map(|_| vec![1.0]).collect();
    for i in 1..=m {
        let mut row: Vec<Vec<f64>> = Vec::with_capacity(n + 1);
        row.push(vec![1.0]);
        for j in 1..=n {
            let mut p = vec![0.0; i * j + 1];
            let (wi, wj) = (i as f64 / (i + j) as f64, j as f64 / (i + j) as f64);
            // The largest value is in the first group: it beats all j of the other.
            for (u, q) in prev[j].iter().enumerate() {
                p[u + j] += wi * q;
            }
            for (u, q) in row[j - 1].iter().enumerate() {
                p[u] += wj * q;
            }
            row.push(p);
        }
        prev = row;
    }
    let mut cdf = prev.pop().unwrap_or_else(|| vec![1.0]);
    let mut total = 0.0;
    for p in cdf.iter_mut() {
        total += *p;
        *p = total;
    }
    cdf
}

/// One p for one question asked in several configurations (strata): Stouffer's
/// combination of each test's signed z, `sign · Φ⁻¹(1 − p/2)` from its two-sided p and
/// the direction of its effect, as `Σz / √k`; two-sided. Effects in opposite directions
/// cancel, as they should for "is this host slower?". Each exact Mann–Whitney p is at
/// least its discrete floor, so the combination errs on the side of "no difference".
pub fn stouffer(tests: &[(f64, f64)]) -> Option<f64> {
    if tests.is_empty() {
        return None;
    }
    let z: f64 = tests
        .iter()
        .map(|(p, direction)| {
            let p = p.clamp(1e-300, 1.0);
            direction.signum() * -normal_quantile(p / 2.0)
        })
        .sum::<f64>()
        / (tests.len() as f64).sqrt();
    Some((2.0 * normal_cdf(-z.abs())).min(1.0))
}

/// Φ⁻¹(p).
pub(crate) fn normal_quantile(p: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, Normal};
    Normal::new(0.0, 1.0)
        .map(|n| n.inverse_cdf(p))
        // The standard normal always exists.
        .unwrap_or(0.0)
}

/// Φ(x), with erfc from statrs (accurate in the tails).
fn normal_cdf(x: f64) -> f64 {
    0.5 * statrs::function::erf::erfc(-x / std::f64::consts::SQRT_2)
}

/// A value far from its group's median.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Outlier {
    /// Position in the input slice.
    pub index: usize,
    pub value: f64,
    /// Modified z-score `0.6745 × (x − median) / MAD` (signed; see
    /// [`fleet_outliers`] for the MAD == 0 fallback).
    pub score: f64,
    /// `value / median` ("10× the fleet median"); infinite when the median is 0.
    pub times_median: f64,
}

/// Values whose `|modified z|` exceeds `threshold` (usually
/// [`OUTLIER_THRESHOLD`]) **and** that are at least
/// [`OUTLIER_MIN_RELATIVE_DEVIATION`] away from the median (relative to it), in
/// input order. The score alone flags 3% differences whenever the others agree
/// closely; the floor alone would flag every value of a noisy group.
///
/// When more than half the values are equal the MAD is 0; the score then falls
/// back to `(x − median) / (1.253314 × mean absolute deviation from the median)`
/// (as IBM SPSS does). With that fallback a single deviant among otherwise equal
/// values scores n / 1.2533, so at the default threshold it is flagged from
/// n = 5 on. All values equal: nothing is flagged. Non-finite values are ignored
/// (neither used for the median nor flagged).
pub fn fleet_outliers(values: &[f64], threshold: f64) -> Vec<Outlier> {
    let mut finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.len() < 3 {
        return Vec::new();
    }
    finite.sort_by(f64::total_cmp);
    let median = median_of_sorted(&finite);
    let mad = mad_about(&finite, median);
    let scale = if mad > 0.0 {
        mad / MAD_Z
    } else {
        let mean_ad = finite.iter().map(|x| (x - median).abs()).sum::<f64>() / finite.len() as f64;
        MEAN_AD_Z * mean_ad
    };
    if scale == 0.0 {
        return Vec::new();
    }
    values
        .iter()
        .enumerate()
        .filter(|(_, v)| v.is_finite())
        .map(|(index, &value)| Outlier {
            index,
            value,
            score: (value - median) / scale,
            times_median: value / median,
        })
        .filter(|o| o.score.abs() > threshold)
        .filter(|o| (o.value - median).abs() >= OUTLIER_MIN_RELATIVE_DEVIATION * median.abs())
        .collect()
}

/// Something about a cell's repetitions that the reader should know.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum Warning {
    TooFewForCi {
        n: usize,
    },
    HighVariation {
        cv: f64,
    },
    ColdFirstRun {
        first: f64,
        rest_median: f64,
    },
    /// 0-based indices in run order.
    OutlierRuns {
        indices: Vec<usize>,
    },
}

/// Warnings for one cell, in this order: too few repetitions (n < 3), a cold
/// first run (n ≥ 3 and first > 1.5 × median of the rest), outlier runs
/// (`|modified z|` > 3.5 and ≥ 10% from the median, see [`fleet_outliers`]; not
/// counting a first run already reported as cold),
/// high variation (CV > 5%). Non-finite values are ignored.
pub fn warnings(values_in_run_order: &[f64]) -> Vec<Warning> {
    let values = values_in_run_order;
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let mut out = Vec::new();
    if finite.len() < MIN_N_FOR_CI {
        out.push(Warning::TooFewForCi { n: finite.len() });
    }
    let mut cold_first = false;
    if finite.len() >= MIN_N_FOR_CI && values[0].is_finite() {
        let first = values[0];
        let rest_median = median(&finite[1..]);
        if first > rest_median * COLD_FIRST_RUN_FACTOR {
            cold_first = true;
            out.push(Warning::ColdFirstRun { first, rest_median });
        }
    }
    let indices: Vec<usize> = fleet_outliers(values, OUTLIER_THRESHOLD)
        .into_iter()
        .map(|o| o.index)
        .filter(|&i| !(cold_first && i == 0))
        .collect();
    if !indices.is_empty() {
        out.push(Warning::OutlierRuns { indices });
    }
    if let Some(&first) = finite.first() {
        let (_, _, cv) = moments(&finite, finite.iter().all(|&v| v == first));
        if cv > HIGH_CV {
            out.push(Warning::HighVariation { cv });
        }
    }
    out
}

impl Warning {
    /// One sentence: what was seen, the likely cause, what to change.
    pub fn advice(&self) -> String {
        match self {
            Warning::TooFewForCi { n } => format!(
                "only {n} repetition{}: too few for a confidence interval; set repeat to at least {MIN_N_FOR_CI} ({MIN_N_FOR_95_MEDIAN_CI} or more for a 95% interval of the median)",
                if *n == 1 { "" } else { "s" }
            ),
            Warning::HighVariation { cv } => format!(
                "the repetitions vary by {:.1}% (coefficient of variation): results are noisy; increase repeat or add drop_caches to phases",
                cv * 100.0
            ),
            Warning::ColdFirstRun { first, rest_median } => format!(
                "the first repetition took {:.1}× the median of the others: a cold cache? add drop_caches (or a warm-up) to phases",
                first / rest_median
            ),
            Warning::OutlierRuns { indices } => {
                let runs: Vec<String> = indices.iter().map(|i| format!("#{}", i + 1)).collect();
                format!(
                    "repetition{} {} {} far from the others (statistical outlier{}): other activity on the machine? rerun on a quiet system or increase repeat",
                    if runs.len() == 1 { "" } else { "s" },
                    runs.join(", "),
                    if runs.len() == 1 { "is" } else { "are" },
                    if runs.len() == 1 { "" } else { "s" },
                )
            }
        }
    }
}

/// Deserializes V2 histograms (plain or DEFLATE-compressed) and adds them all:
/// the merged histogram holds every recorded value of every repetition. The
/// result auto-resizes, so repetitions with different ranges merge.
pub fn merge_histograms(serialized: &[&[u8]]) -> Result<Histogram<u64>, StatsError> {
    let mut deserializer = Deserializer::new();
    let mut merged: Option<Histogram<u64>> = None;
    for (index, bytes) in serialized.iter().enumerate() {
        let h: Histogram<u64> = deserializer
            .deserialize(&mut Cursor::new(bytes))
            .map_err(|source| StatsError::Deserialize { index, source })?;
        match merged.as_mut() {
            None => {
                let mut h = h;
                h.auto(true);
                merged = Some(h);
            }
            Some(m) => m
                .add(&h)
                .map_err(|source| StatsError::Add { index, source })?,
        }
    }
    merged.ok_or(StatsError::NoHistograms)
}

/// `(q, value)` for each quantile `q` in `0.0..=1.0` (0.99 is p99; values
/// above 1 are treated as 1). Values are the highest equivalent value of the
/// bucket, as `Histogram::value_at_quantile` returns them.
pub fn percentiles(h: &Histogram<u64>, qs: &[f64]) -> Vec<(f64, u64)> {
    qs.iter().map(|&q| (q, h.value_at_quantile(q))).collect()
}

// ---------------------------------------------------------------------------
// helpers

/// `(mean, sample stddev, cv)` of a non-empty slice.
fn moments(values: &[f64], all_equal: bool) -> (f64, f64, f64) {
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    // Equal values have exactly zero spread even if `mean` rounded.
    let stddev = if n < 2 || all_equal {
        0.0
    } else {
        let ss: f64 = values.iter().map(|x| (x - mean) * (x - mean)).sum();
        (ss / (n - 1) as f64).sqrt()
    };
    let cv = if mean == 0.0 { 0.0 } else { stddev / mean };
    (mean, stddev, cv)
}

fn median(values: &[f64]) -> f64 {
    median_in_place(&mut values.to_vec())
}

/// Caller guarantees a non-empty, sorted slice.
fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Median without a full sort. Reorders `buf`.
pub(crate) fn median_in_place(buf: &mut [f64]) -> f64 {
    let n = buf.len();
    let k = n / 2;
    let (left, &mut upper, _) = buf.select_nth_unstable_by(k, f64::total_cmp);
    if n % 2 == 1 {
        upper
    } else {
        // The lower middle is the largest element left of k.
        let lower = left.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lower + upper) / 2.0
    }
}

fn mad_about(values: &[f64], median: f64) -> f64 {
    let mut dev: Vec<f64> = values.iter().map(|x| (x - median).abs()).collect();
    median_in_place(&mut dev)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_never_reads_as_a_hundred_percent() {
        assert_eq!(level_with_sign(0.99), "99%");
        assert_eq!(level_with_sign(0.95), "95%");
        assert_eq!(level_with_sign(0.9997), "99.97%");
        assert_eq!(level_with_sign(0.999997), "99.9997%");
        assert_eq!(level_with_sign(0.999), "99.9%");
    }
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer, V2Serializer};
    use serde_json::Value;

    const REFERENCE: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/stats-reference.json"
    ));

    fn reference() -> Value {
        serde_json::from_str(REFERENCE).expect("tests/stats-reference.json is valid JSON")
    }

    fn floats(v: &Value) -> Vec<f64> {
        v.as_array()
            .expect("array")
            .iter()
            .map(|x| x.as_f64().expect("number"))
            .collect()
    }

    fn pair(v: &Value) -> (f64, f64) {
        let xs = floats(v);
        (xs[0], xs[1])
    }

    /// 1e-9 relative; an expected 0 must be exactly 0.
    #[track_caller]
    fn assert_close(actual: f64, expected: f64, what: &str) {
        assert!(
            (actual - expected).abs() <= 1e-9 * expected.abs(),
            "{what}: got {actual}, expected {expected}"
        );
    }

    /// Random numbers for the tests' simulated data: xoshiro256** (Blackman & Vigna)
    /// with its state filled by four successive splitmix64 outputs from the seed.
    struct Rng {
        s: [u64; 4],
    }

    impl Rng {
        fn new(seed: u64) -> Self {
            let mut sm = seed;
            let mut next = || {
                sm = sm.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = sm;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^ (z >> 31)
            };
            Rng {
                s: [next(), next(), next(), next()],
            }
        }

        fn next_u64(&mut self) -> u64 {
            let s = &mut self.s;
            let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
            let t = s[1] << 17;
            s[2] ^= s[0];
            s[3] ^= s[1];
            s[1] ^= s[2];
            s[0] ^= s[3];
            s[2] ^= t;
            s[3] = s[3].rotate_left(45);
            result
        }
    }

    /// Normal(mu, sigma) samples from our own generator (Box–Muller).
    fn normal(rng: &mut Rng, n: usize, mu: f64, sigma: f64) -> Vec<f64> {
        let mut unit = || ((rng.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        (0..n)
            .map(|_| {
                let (u1, u2) = (unit(), unit());
                mu + sigma * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
            })
            .collect()
    }

    fn ci_width(ci: Option<(f64, f64)>) -> f64 {
        let (lo, hi) = ci.expect("a CI");
        hi - lo
    }

    /// Five repetitions spread ±3% around a published time, as in the reference.
    fn spread(t: f64) -> Vec<f64> {
        [1.00, 0.97, 1.02, 0.99, 1.03]
            .iter()
            .map(|f| t * f)
            .collect()
    }

    fn optional_pair(v: &Value) -> Option<(f64, f64)> {
        (!v.is_null()).then(|| pair(v))
    }

    // --- summaries -----------------------------------------------------------

    #[test]
    fn summaries_match_python_statistics_and_scipy() {
        let r = reference();
        let cases = r["summaries"].as_array().expect("summaries");
        assert!(cases.len() >= 15);
        for case in cases {
            let name = case["name"].as_str().expect("name");
            let e = &case["expected"];
            let s = summarize(&floats(&case["values"])).expect("non-empty");
            assert_eq!(s.n as u64, e["n"].as_u64().expect("n"), "{name}: n");
            for (field, actual) in [
                ("min", s.min),
                ("max", s.max),
                ("median", s.median),
                ("mean", s.mean),
                ("stddev", s.stddev),
                ("cv", s.cv),
                ("mad", s.mad),
            ] {
                let expected = e[field].as_f64().expect("number");
                assert_close(actual, expected, &format!("{name}: {field}"));
            }
            // Intervals: order statistics (scipy's binomial) and Student's t (scipy).
            for (field, actual) in [
                ("median_ci", s.median_ci),
                ("mean_ci_student_t", s.mean_ci_student_t),
            ] {
                match (actual, optional_pair(&e[field])) {
                    (Some((lo, hi)), Some((elo, ehi))) => {
                        assert_close(lo, elo, &format!("{name}: {field} low"));
                        assert_close(hi, ehi, &format!("{name}: {field} high"));
                    }
                    (None, None) => {}
                    (a, b) => panic!("{name}: {field} {a:?}, expected {b:?}"),
                }
            }
            match (s.median_ci_level, e["median_ci_level"].as_f64()) {
                (Some(a), Some(b)) => assert_close(a, b, &format!("{name}: median_ci_level")),
                (None, None) => {}
                (a, b) => panic!("{name}: median_ci_level {a:?}, expected {b:?}"),
            }
            assert_eq!(s.median_ci.is_some(), s.n >= MIN_N_FOR_CI, "{name}");
        }
    }

    #[test]
    fn median_ci_ranks_match_scipy_binomial() {
        let r = reference();
        for case in r["median_ci_ranks"].as_array().expect("ranks") {
            let n = case["n"].as_u64().expect("n") as usize;
            let (k, level) = median_ci_rank(n).expect("n >= 3");
            assert_eq!(k as u64, case["k"].as_u64().expect("k"), "n = {n}");
            assert_close(level, case["level"].as_f64().expect("level"), "level");
            assert!(level >= CONFIDENCE || n < MIN_N_FOR_95_MEDIAN_CI, "n = {n}");
        }
        // The levels the report prints below n = 6, never "95%".
        let levels: Vec<String> = (3..=6)
            .map(|n| level_pct(median_ci_rank(n).expect("n >= 3").1))
            .collect();
        assert_eq!(levels, ["75", "87.5", "93.8", "96.9"]);
        assert_eq!(median_ci_rank(2), None);
        // Huge n: no underflow, the interval hugs the median (1.96·√n/2 ranks).
        let (k, level) = median_ci_rank(100_000).expect("big n");
        assert!((0.95..0.951).contains(&level), "{level}");
        assert!((49_680..49_700).contains(&k), "{k}");
    }

    #[test]
    fn summarize_rejects_empty_and_non_finite() {
        assert_eq!(summarize(&[]), None);
        assert_eq!(summarize(&[1.0, f64::NAN, 2.0]), None);
        assert_eq!(summarize(&[1.0, f64::INFINITY]), None);
    }

    #[test]
    fn intervals_contain_the_point_estimate() {
        let r = reference();
        for case in r["summaries"].as_array().expect("summaries") {
            let s = summarize(&floats(&case["values"])).expect("summary");
            if s.n < MIN_N_FOR_CI {
                continue;
            }
            let (lo, hi) = s.median_ci.expect("median ci");
            assert!(lo <= s.median && s.median <= hi, "{}: {s:?}", case["name"]);
            // Order statistics never leave the data.
            assert!(lo >= s.min && hi <= s.max, "{}: {s:?}", case["name"]);
            let (lo, hi) = s.mean_ci_student_t.expect("mean ci");
            assert!(lo <= s.mean && s.mean <= hi, "{}: {s:?}", case["name"]);
        }
    }

    #[test]
    fn intervals_narrow_as_n_grows() {
        let mut rng = Rng::new(2024);
        let widths: Vec<(f64, f64)> = [5, 50, 500]
            .iter()
            .map(|&n| {
                let s = summarize(&normal(&mut rng, n, 100.0, 10.0)).expect("summary");
                (ci_width(s.median_ci), ci_width(s.mean_ci_student_t))
            })
            .collect();
        for w in widths.windows(2) {
            assert!(w[1].0 < w[0].0, "median CI widths {widths:?}");
            assert!(w[1].1 < w[0].1, "mean CI widths {widths:?}");
        }
        // √10 more data: roughly 3× narrower, certainly more than 2×.
        assert!(widths[2].1 * 2.0 < widths[1].1, "{widths:?}");
    }

    // Coverage by simulation is pinned in tests/intervals.rs.

    // --- comparisons ---------------------------------------------------------

    #[test]
    fn comparisons_match_scipy_and_enumeration() {
        let r = reference();
        for case in r["comparisons"].as_array().expect("comparisons") {
            let name = case["name"].as_str().expect("name");
            let c = compare(&floats(&case["baseline"]), &floats(&case["candidate"]))
                .expect("comparison");
            assert_close(c.ratio, case["ratio"].as_f64().expect("ratio"), name);
            let penalty = case["penalty_pct"].as_f64().expect("penalty");
            assert_close(c.penalty_pct, penalty, name);
            assert_close(c.p_value, case["p_value"].as_f64().expect("p"), name);
            let (lo, hi) = c.ci_pct.expect("n >= 3");
            let (elo, ehi) = pair(&case["ci_pct"]);
            assert_close(lo, elo, &format!("{name} ci low"));
            assert_close(hi, ehi, &format!("{name} ci high"));
            let level = c.ci_level.expect("level");
            assert_close(level, case["ci_level"].as_f64().expect("level"), name);
            assert!(lo <= c.penalty_pct && c.penalty_pct <= hi, "{name}: {c:?}");
            assert_eq!(c.significant, c.p_value <= ALPHA, "{name}");
            // A ≥ 95% interval that excludes 0 is a significant test, and back.
            if level >= CONFIDENCE {
                assert_eq!(c.significant, lo > 0.0 || hi < 0.0, "{name}: {c:?}");
            }
        }
    }

    /// Every difference `ln c − ln b`, sorted: formed the way `PairwiseDiffs` forms them
    /// (logs first, then subtract), so its k-th is the very float `kth` must give.
    fn every_difference(b: &[f64], c: &[f64]) -> Vec<f64> {
        let mut all: Vec<f64> = c
            .iter()
            .flat_map(|c| b.iter().map(move |b| c.ln() - b.ln()))
            .collect();
        all.sort_by(f64::total_cmp);
        all
    }

    /// The counting selection gives the very floats a sorted list of all m·n
    /// differences holds, with ties, negative and positive shifts, and one-value groups.
    #[test]
    fn pairwise_order_statistics_match_sorting_every_difference() {
        let mut rng = Rng::new(7);
        for (m, n, distinct) in [
            (1, 1, 5),
            (1, 9, 5),
            (3, 3, 2),
            (7, 5, 3),
            (40, 31, 1000),
            (64, 64, 4),
            // Past `few`: bisected first, then selected.
            (300, 250, 1_000_000),
            (200, 220, 7),
        ] {
            let draw = |rng: &mut Rng, k: usize| -> Vec<f64> {
                (0..k)
                    .map(|_| 0.5 + (rng.next_u64() % distinct) as f64 * 0.37)
                    .collect()
            };
            let (b, c) = (draw(&mut rng, m), draw(&mut rng, n));
            let all = every_difference(&b, &c);
            let d = PairwiseDiffs::new(&b, &c);
            for k in
                (1..=m * n).filter(|k| m * n < 5000 || k % 97 == 0 || *k <= 3 || *k > m * n - 3)
            {
                assert_eq!(
                    d.kth(k).to_bits(),
                    all[k - 1].to_bits(),
                    "m={m} n={n} k={k}"
                );
                if k < m * n {
                    let (kth, next) = d.kth_and_next(k);
                    assert_eq!(next.to_bits(), all[k].to_bits(), "m={m} n={n} k={k}, next");
                    assert_eq!(kth.to_bits(), all[k - 1].to_bits());
                }
            }
            assert_eq!(
                d.count(|x| x <= 0.0),
                all.iter().filter(|x| **x <= 0.0).count()
            );
            assert_eq!(
                d.count(|x| x < 0.0),
                all.iter().filter(|x| **x < 0.0).count()
            );
        }
    }

    /// Parts done on other cores come back in the items' order, whatever their number.
    #[test]
    fn each_on_cores_keeps_the_items_order() {
        for n in [0, 1, 2, 3, 7, 100] {
            let items: Vec<u64> = (0..n).collect();
            let squares = each_on_cores(&items, |i| i * i);
            assert_eq!(squares, items.iter().map(|i| i * i).collect::<Vec<_>>());
        }
    }

    /// Groups the size of a million-sample report's cells (~1,700 values: millions of
    /// differences, bisected many times before few remain to select among): distinct
    /// values, values with many ties (a window of equal differences that bisecting cannot
    /// split), and a shifted candidate.
    #[test]
    fn pairwise_order_statistics_of_large_groups_match_sorting() {
        let mut rng = Rng::new(11);
        for (m, n, distinct, shift) in [
            (1700, 1650, 1_000_000, 1.0),
            (1500, 1600, 3, 1.0),
            (1600, 1700, 40, 1.3),
        ] {
            let draw = |rng: &mut Rng, k: usize, scale: f64| -> Vec<f64> {
                (0..k)
                    .map(|_| (0.5 + (rng.next_u64() % distinct) as f64 * 0.37) * scale)
                    .collect()
            };
            let (b, c) = (draw(&mut rng, m, 1.0), draw(&mut rng, n, shift));
            let all = every_difference(&b, &c);
            let d = PairwiseDiffs::new(&b, &c);
            let total = m * n;
            for k in [
                1,
                2,
                977,
                total / 3,
                total / 2,
                total / 2 + 1,
                total - 5000,
                total,
            ] {
                assert_eq!(
                    d.kth(k).to_bits(),
                    all[k - 1].to_bits(),
                    "m={m} n={n} distinct={distinct} k={k}"
                );
            }
        }
    }

    /// Differences −d, 0 and d, few of them above 0: the first bisection lands on −0.0
    /// (next to 0.0 in the order, and equal to it), then few enough remain to select
    /// among, none of them the zeros already counted below.
    #[test]
    fn pairwise_order_statistics_past_a_tie_at_zero() {
        let mut b = vec![1.0_f64; 50];
        b.push(2.0);
        let mut c = vec![1.0_f64; 49];
        c.extend([2.0, 2.0]);
        let all = every_difference(&b, &c);
        let d = PairwiseDiffs::new(&b, &c);
        for k in 1..=all.len() {
            assert_eq!(d.kth(k).to_bits(), all[k - 1].to_bits(), "k={k}");
            if k < all.len() {
                let (kth, next) = d.kth_and_next(k);
                assert_eq!(
                    (kth.to_bits(), next.to_bits()),
                    (all[k - 1].to_bits(), all[k].to_bits()),
                    "k={k}"
                );
            }
        }
    }

    /// The bisection finds the rank a scan over every k finds.
    #[test]
    fn ci_rank_bisection_matches_a_scan() {
        for (m, n) in [(3, 3), (4, 6), (10, 10), (30, 40), (100, 120)] {
            let u = UDistribution::new(m, n);
            let level = |k: usize| 1.0 - 2.0 * u.cdf((k - 1) as f64);
            let mut scan = (1, level(1));
            for k in 2..=u.pairs().div_ceil(2) {
                if level(k) < CONFIDENCE {
                    break;
                }
                scan = (k, level(k));
            }
            assert_eq!(u.ci_rank(CONFIDENCE), scan, "m={m} n={n}");
        }
    }

    #[test]
    fn exact_u_distribution_is_symmetric_and_sums_to_one() {
        for (m, n) in [(3, 3), (5, 7), (30, 30)] {
            let cdf = exact_u_cdf(m, n);
            assert_eq!(cdf.len(), m * n + 1);
            assert!((cdf[m * n] - 1.0).abs() < 1e-12);
            for u in 0..m * n {
                // P(U ≤ u) = P(U ≥ mn − u) = 1 − P(U ≤ mn − u − 1).
                assert!(
                    (cdf[u] - (1.0 - cdf[m * n - u - 1])).abs() < 1e-12,
                    "{m} {n} {u}"
                );
            }
        }
        // 3 + 3 values: 20 orderings, U = 0 in one of them.
        assert_close(exact_u_cdf(3, 3)[0], 1.0 / 20.0, "P(U = 0)");
        // The normal approximation beyond EXACT_U_MAX_PAIRS agrees with the exact one
        // at the interval's rank: 50 × 50 exactly vs approximately.
        let exact = UDistribution::Exact(Arc::new(exact_u_cdf(50, 50))).ci_rank(CONFIDENCE);
        let approx = UDistribution::new(51, 51).ci_rank(CONFIDENCE);
        assert!((exact.1 - 0.95).abs() < 0.002 && (approx.1 - 0.95).abs() < 0.002);
        assert!((exact.0 as i64 - 1000).abs() < 80, "{exact:?}");
    }

    #[test]
    fn holm_matches_the_reference() {
        let r = reference();
        let adjusted = holm(&floats(&r["holm"]["p"]));
        for (a, e) in adjusted.iter().zip(floats(&r["holm"]["adjusted"])) {
            assert_close(*a, e, "holm");
        }
        assert!(holm(&[]).is_empty());
        assert_eq!(holm(&[0.03]), vec![0.03]);
    }

    #[test]
    fn seed000_spinning_rust_on_scala_is_not_significant() {
        let c = compare(&spread(471.0), &spread(477.0)).expect("comparison");
        assert!((c.penalty_pct - 1.27).abs() < 0.01, "{c:?}");
        let (lo, hi) = c.ci_pct.expect("ci");
        assert!(lo < 0.0 && 0.0 < hi, "{c:?}");
        assert!(!c.significant);
        let line = c.describe("spinning rust", None);
        assert!(
            line.starts_with("spinning rust penalty 1.3% (96.8% CI -"),
            "{line}"
        );
        assert!(line.ends_with("): no significant difference"), "{line}");
    }

    #[test]
    fn seed000_encryption_on_spring_is_significant() {
        let c = compare(&spread(273.0), &spread(303.0)).expect("comparison");
        assert!((c.penalty_pct - 10.99).abs() < 0.01, "{c:?}");
        let (lo, hi) = c.ci_pct.expect("ci");
        assert!(0.0 < lo && lo < 11.0 && 11.0 < hi, "{c:?}");
        assert!(c.significant);
        assert_eq!(
            c.describe("encryption", None),
            format!("encryption penalty 11.0% (96.8% CI {lo:.1}% … {hi:.1}%)")
        );
        // One of 12 comparisons: p = 0.0079 × 12 is no longer significant.
        let family = Family {
            adjusted_p: (c.p_value * 12.0).min(1.0),
            size: 12,
        };
        assert!(c.describe("encryption", Some(family)).ends_with(
            ": not significant after Holm's correction for 12 comparisons (adjusted p = 0.10)"
        ));
    }

    #[test]
    fn an_interval_below_95_percent_is_labelled_and_not_called_significant() {
        // 3 + 3 runs, 20% apart: the 90% interval excludes 0, but the best p a
        // two-sided test of 3 + 3 can reach is 0.1.
        let c = compare(&[100.0, 101.0, 99.0], &[120.0, 121.0, 119.0]).expect("comparison");
        assert_eq!(c.ci_level, Some(0.9));
        assert_close(c.p_value, 0.1, "p");
        assert!(!c.significant);
        let line = c.describe("x", None);
        assert!(line.contains("(90% CI 17.8% … 22.2%)"), "{line}");
        assert!(
            line.ends_with(": not significant at the 5% level (p = 0.10)"),
            "{line}"
        );
    }

    #[test]
    fn compare_without_enough_data() {
        let c = compare(&[10.0, 10.2], &[20.0, 20.4, 19.8]).expect("comparison");
        assert_eq!((c.ci_pct, c.ci_level), (None, None));
        assert!(
            !c.significant,
            "a 100% penalty from 2 + 3 runs is not significant"
        );
        assert!(c.describe("x", None).contains("too few repetitions"));
        assert_eq!(compare(&[], &[1.0]), None);
        assert_eq!(compare(&[1.0], &[]), None);
        assert_eq!(compare(&[0.0, 0.0, 1.0], &[1.0, 2.0, 3.0]), None);
        assert_eq!(compare(&[1.0, f64::NAN, 1.0], &[1.0, 2.0, 3.0]), None);
        assert_eq!(compare(&[1.0, -1.0, 1.0], &[1.0, 2.0, 3.0]), None);
    }

    #[test]
    fn equal_groups_are_not_different() {
        let c = compare(&[5.0; 6], &[5.0; 6]).expect("comparison");
        assert_eq!((c.ratio, c.penalty_pct), (1.0, 0.0));
        assert_eq!(c.ci_pct, Some((0.0, 0.0)));
        assert_close(c.p_value, 1.0, "p");
        assert!(c.describe("x", None).ends_with("no significant difference"));
    }

    // --- fleet outliers ------------------------------------------------------

    #[test]
    fn fleet_outliers_match_python_reference() {
        let r = reference();
        for case in r["fleet_outliers"].as_array().expect("fleet_outliers") {
            let name = case["name"].as_str().expect("name");
            let values = floats(&case["values"]);
            let found = fleet_outliers(&values, case["threshold"].as_f64().expect("thr"));
            let flagged: Vec<u64> = case["flagged"]
                .as_array()
                .expect("flagged")
                .iter()
                .map(|i| i.as_u64().expect("index"))
                .collect();
            let indices: Vec<u64> = found.iter().map(|o| o.index as u64).collect();
            assert_eq!(indices, flagged, "{name}");
            let scores = floats(&case["scores"]);
            let times = floats(&case["times_median"]);
            for o in &found {
                assert_eq!(o.value, values[o.index]);
                assert_close(o.score, scores[o.index], name);
                assert_close(o.times_median, times[o.index], name);
            }
        }
    }

    #[test]
    fn a_10ms_agent_among_sub_ms_agents_is_flagged() {
        let values = [
            0.21, 0.35, 0.48, 0.52, 0.6, 0.73, 0.81, 0.95, 1.0, 10.0, 0.44, 0.66,
        ];
        let median = 0.63; // (0.6 + 0.66) / 2
        let found = fleet_outliers(&values, OUTLIER_THRESHOLD);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].index, found[0].value), (9, 10.0));
        assert!((found[0].times_median - 10.0 / median).abs() < 1e-9);
        assert!(found[0].score > 30.0);
    }

    #[test]
    fn similar_values_are_not_outliers() {
        let similar = [0.5, 0.55, 0.47, 0.52, 0.6, 0.49, 0.58, 0.51];
        assert!(fleet_outliers(&similar, OUTLIER_THRESHOLD).is_empty());
        assert!(fleet_outliers(&[3.0; 8], OUTLIER_THRESHOLD).is_empty());
        assert!(fleet_outliers(&[1.0, 100.0], OUTLIER_THRESHOLD).is_empty());
    }

    #[test]
    fn mad_zero_falls_back_to_mean_absolute_deviation() {
        // Lone deviant among equal values scores n / 1.2533: flagged from n = 5.
        let four = [1.0, 1.0, 1.0, 9.0];
        assert!(fleet_outliers(&four, OUTLIER_THRESHOLD).is_empty());
        let five = [1.0, 1.0, 9.0, 1.0, 1.0];
        let found = fleet_outliers(&five, OUTLIER_THRESHOLD);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].index, 2);
        assert_close(found[0].score, 5.0 / MEAN_AD_Z, "score");
        assert_close(found[0].times_median, 9.0, "times_median");
    }

    #[test]
    fn fleet_outliers_ignore_non_finite_values() {
        let values = [0.5, f64::NAN, 0.52, 0.49, 0.51, 0.5, 10.0];
        let idx: Vec<usize> = fleet_outliers(&values, OUTLIER_THRESHOLD)
            .iter()
            .map(|o| o.index)
            .collect();
        assert_eq!(idx, vec![6]);
    }

    // --- warnings ------------------------------------------------------------

    #[test]
    fn steady_runs_give_no_warnings() {
        assert_eq!(warnings(&[100.0, 101.0, 99.0, 100.5, 99.5]), vec![]);
        assert_eq!(warnings(&spread(273.0)), vec![]);
    }

    #[test]
    fn too_few_for_ci() {
        assert_eq!(
            warnings(&[100.0, 101.0]),
            vec![Warning::TooFewForCi { n: 2 }]
        );
        assert_eq!(warnings(&[100.0]), vec![Warning::TooFewForCi { n: 1 }]);
        assert_eq!(warnings(&[]), vec![Warning::TooFewForCi { n: 0 }]);
        assert!(!warnings(&[100.0, 101.0, 100.0])
            .iter()
            .any(|w| matches!(w, Warning::TooFewForCi { .. })));
        let advice = Warning::TooFewForCi { n: 2 }.advice();
        assert!(
            advice.starts_with("only 2 repetitions: too few"),
            "{advice}"
        );
    }

    #[test]
    fn high_variation() {
        let w = warnings(&[100.0, 120.0, 90.0, 110.0, 80.0]);
        assert_eq!(w.len(), 1, "{w:?}");
        let Warning::HighVariation { cv } = w[0] else {
            panic!("{w:?}")
        };
        assert_close(cv, 250f64.sqrt() / 100.0, "cv");
        assert!(w[0].advice().contains("15.8%"), "{}", w[0].advice());
        assert!(w[0].advice().contains("increase repeat or add drop_caches"));
        // 4.7% is below the threshold.
        assert!(warnings(&[100.0, 106.0, 95.0, 103.0, 97.0]).is_empty());
    }

    #[test]
    fn cold_first_run() {
        let w = warnings(&[250.0, 100.0, 101.0, 99.0, 100.0]);
        assert_eq!(
            w[0],
            Warning::ColdFirstRun {
                first: 250.0,
                rest_median: 100.0
            }
        );
        // Reported once, as a cold cache, not again as an outlier run.
        assert!(
            !w.iter().any(|x| matches!(x, Warning::OutlierRuns { .. })),
            "{w:?}"
        );
        assert!(w.iter().any(|x| matches!(x, Warning::HighVariation { .. })));
        assert_eq!(
            w[0].advice(),
            "the first repetition took 2.5× the median of the others: a cold cache? add drop_caches (or a warm-up) to phases"
        );
        // 1.4× is not cold; a slow *last* run is not cold either.
        let w = warnings(&[140.0, 100.0, 101.0, 99.0, 100.0]);
        assert!(
            !w.iter().any(|x| matches!(x, Warning::ColdFirstRun { .. })),
            "{w:?}"
        );
        let w = warnings(&[100.0, 101.0, 99.0, 100.0, 250.0]);
        assert!(
            !w.iter().any(|x| matches!(x, Warning::ColdFirstRun { .. })),
            "{w:?}"
        );
        // n = 2 is too few to call the first run cold.
        assert_eq!(warnings(&[300.0, 100.0])[0], Warning::TooFewForCi { n: 2 });
        assert_eq!(warnings(&[300.0, 100.0]).len(), 2); // + HighVariation
    }

    #[test]
    fn outlier_runs() {
        let w = warnings(&[100.0, 101.0, 99.0, 100.0, 180.0, 100.5, 99.5]);
        assert!(
            w.contains(&Warning::OutlierRuns { indices: vec![4] }),
            "{w:?}"
        );
        let advice = Warning::OutlierRuns { indices: vec![4] }.advice();
        assert!(
            advice.starts_with("repetition #5 is far from the others"),
            "{advice}"
        );
        let advice = Warning::OutlierRuns {
            indices: vec![1, 4],
        }
        .advice();
        assert!(advice.starts_with("repetitions #2, #5 are far"), "{advice}");
        // Modified z is relative to the spread: 102 is not an outlier here (|z| =
        // 2.7); 103 scores 4.0 but is 3% from the median, under the 10% floor.
        for run in [102.0, 103.0] {
            let w = warnings(&[100.0, 101.0, 99.0, 100.0, run, 100.5, 99.5]);
            assert!(
                !w.iter().any(|x| matches!(x, Warning::OutlierRuns { .. })),
                "{w:?}"
            );
        }
    }

    #[test]
    fn a_few_percent_among_steady_runs_is_not_an_outlier() {
        // Both scored far above 3.5 (the MAD of three steady runs is tiny) and were
        // reported as "repetition #3 is far from the others".
        for runs in [
            [1.905, 1.905, 1.957],
            [1.9051, 1.9049, 1.957],
            [11.37e-3, 11.46e-3, 11.80e-3],
            [11.40e-3, 11.41e-3, 11.80e-3],
        ] {
            assert!(
                fleet_outliers(&runs, OUTLIER_THRESHOLD).is_empty(),
                "{runs:?}"
            );
            assert_eq!(warnings(&runs), vec![], "{runs:?}");
        }
        // A 2× run among steady ones is.
        let w = warnings(&[1.905, 1.906, 3.81, 1.904, 1.905]);
        assert!(
            w.contains(&Warning::OutlierRuns { indices: vec![2] }),
            "{w:?}"
        );
        let w = warnings(&[11.40e-3, 11.41e-3, 22.8e-3]);
        assert!(
            w.contains(&Warning::OutlierRuns { indices: vec![2] }),
            "{w:?}"
        );
    }

    // --- histograms ----------------------------------------------------------

    fn new_histogram() -> Histogram<u64> {
        Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
    }

    fn v2(h: &Histogram<u64>) -> Vec<u8> {
        let mut out = Vec::new();
        V2Serializer::new()
            .serialize(h, &mut out)
            .expect("serialize");
        out
    }

    fn v2_deflate(h: &Histogram<u64>) -> Vec<u8> {
        let mut out = Vec::new();
        V2DeflateSerializer::new()
            .serialize(h, &mut out)
            .expect("serialize");
        out
    }

    #[test]
    fn merged_histograms_equal_one_histogram_of_all_values() {
        let mut rng = Rng::new(7);
        let mut direct = new_histogram();
        let mut serialized = Vec::new();
        // Three repetitions with different latency profiles (µs), one with a tail.
        for (rep, (mu, n)) in [(5.0, 20_000), (5.5, 5_000), (4.8, 30_000)]
            .iter()
            .enumerate()
        {
            let mut h = new_histogram();
            for x in normal(&mut rng, *n, *mu, 0.7) {
                let us = x.exp().round().clamp(1.0, 50_000_000.0) as u64;
                h.record(us).expect("in range");
                direct.record(us).expect("in range");
            }
            // Alternate formats: both must deserialize.
            serialized.push(if rep % 2 == 0 { v2(&h) } else { v2_deflate(&h) });
        }
        let slices: Vec<&[u8]> = serialized.iter().map(Vec::as_slice).collect();
        let merged = merge_histograms(&slices).expect("merge");
        assert_eq!(merged.len(), 55_000);
        assert_eq!((merged.min(), merged.max()), (direct.min(), direct.max()));
        let mut qs: Vec<f64> = (0..=1000).map(|i| f64::from(i) / 1000.0).collect();
        qs.extend([0.9995, 0.9999, 0.99999]);
        assert_eq!(percentiles(&merged, &qs), percentiles(&direct, &qs));
    }

    #[test]
    fn merging_is_not_averaging_percentiles() {
        // Run A: all fast. Run B: 10% of requests at 10 ms.
        let mut a = new_histogram();
        a.record_n(100, 100).expect("record");
        let mut b = new_histogram();
        b.record_n(100, 90).expect("record");
        b.record_n(10_000, 10).expect("record");
        let mut direct = new_histogram();
        direct.add(&a).expect("add");
        direct.add(&b).expect("add");

        let merged = merge_histograms(&[&v2(&a), &v2_deflate(&b)]).expect("merge");
        let p99 = percentiles(&merged, &[0.99])[0].1;
        assert_eq!(p99, direct.value_at_quantile(0.99));
        assert!(
            direct.equivalent(p99, 10_000),
            "5% of all requests took 10 ms: {p99}"
        );
        let averaged = (a.value_at_quantile(0.99) + b.value_at_quantile(0.99)) / 2;
        assert!(
            averaged < 6_000 && p99 > 9_000,
            "averaged {averaged}, merged {p99}"
        );
    }

    #[test]
    fn merge_handles_different_ranges() {
        let mut small = Histogram::<u64>::new_with_bounds(1, 1_000, 2).expect("bounds");
        small.record(500).expect("record");
        let mut big = new_histogram();
        big.record(5_000_000).expect("record");
        let merged = merge_histograms(&[&v2(&small), &v2(&big)]).expect("merge");
        assert_eq!(merged.len(), 2);
        assert!(merged.equivalent(merged.max(), 5_000_000));
    }

    #[test]
    fn merge_errors_name_the_histogram() {
        assert!(matches!(
            merge_histograms(&[]),
            Err(StatsError::NoHistograms)
        ));
        let good = v2(&new_histogram());
        let err = merge_histograms(&[&good, b"not a histogram"]).expect_err("garbage");
        assert!(
            matches!(err, StatsError::Deserialize { index: 1, .. }),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "histogram #1 is not a valid V2 serialized HDR histogram"
        );
    }

    #[test]
    fn the_smallest_p_and_the_runs_that_reach_a_family() {
        assert!((smallest_p(5, 5) - 2.0 / 252.0).abs() < 1e-12);
        assert!((smallest_p(7, 7) - 2.0 / 3432.0).abs() < 1e-12);
        assert!((smallest_p(4, 5) - 2.0 / 126.0).abs() < 1e-12);
        assert_eq!(smallest_p(0, 5), 1.0);
        // The example: 24 comparisons need 7 a side (2/C(12, 6) = 0.00216 is
        // just above 0.05/24 = 0.00208), 8 need 6, one alone needs 4.
        assert_eq!(runs_to_reach(ALPHA / 24.0), 7);
        assert_eq!(runs_to_reach(ALPHA / 8.0), 6);
        assert_eq!(runs_to_reach(ALPHA), 4);
    }

    #[test]
    fn holm_steps_hold_each_test_to_the_step_that_decides_it() {
        // Sorted: 0.001 (step α/4), 0.01 (α/3), 0.04 (α/2: 0.025, kept), 0.5.
        let steps = holm_steps(&[0.04, 0.001, 0.5, 0.01], ALPHA);
        let alphas: Vec<f64> = steps.iter().map(|s| s.1).collect();
        let want = [ALPHA / 2.0, ALPHA / 4.0, ALPHA / 2.0, ALPHA / 3.0];
        for (a, w) in alphas.iter().zip(want) {
            assert!((a - w).abs() < 1e-15, "{alphas:?}");
        }
        let adjusted: Vec<f64> = steps.iter().map(|s| s.0).collect();
        assert_eq!(adjusted, holm(&[0.04, 0.001, 0.5, 0.01]));
    }

    /// A family of two-group samples: `shift` (log) between the groups, runs a side drawn
    /// from `runs`.
    fn family(rng: &mut Rng, lines: usize, runs: &[usize]) -> Vec<(Vec<f64>, Vec<f64>)> {
        let pick = |rng: &mut Rng| runs[(rng.next_u64() % runs.len() as u64) as usize];
        (0..lines)
            .map(|_| {
                let (m, n) = (pick(rng), pick(rng));
                // Half the lines differ, by up to ×3 either way; spreads of 2% to 30%.
                let uniform = |rng: &mut Rng| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                let shift = if rng.next_u64().is_multiple_of(2) {
                    0.0
                } else {
                    (uniform(rng) - 0.5) * 2.2
                };
                let noise = 0.02 + uniform(rng) * 0.3;
                let exp = |v: Vec<f64>| v.into_iter().map(f64::exp).collect::<Vec<f64>>();
                (
                    exp(normal(rng, m, 0.0, noise)),
                    exp(normal(rng, n, shift, noise)),
                )
            })
            .collect()
    }

    /// The promise of a decided line: "significant" ⇔ its interval excludes ×1 ⇔ Holm's
    /// adjusted p ≤ α; an undecided one is neither significant nor drawn at its step's
    /// level; over random families of random sizes.
    #[test]
    fn a_decided_line_is_significant_exactly_when_its_interval_excludes_one() {
        let mut rng = Rng::new(50);
        let (mut decided, mut undecided, mut significant) = (0, 0, 0);
        for round in 0..300 {
            let runs: &[usize] = match round % 3 {
                0 => &[5],
                1 => &[3, 4, 5, 6, 7, 8, 10, 12],
                _ => &[8, 10, 20],
            };
            let lines = 1 + (rng.next_u64() % 30) as usize;
            let groups = family(&mut rng, lines, runs);
            let pairs: Vec<(&[f64], &[f64])> = groups
                .iter()
                .map(|(b, c)| (b.as_slice(), c.as_slice()))
                .collect();
            for d in decide_family(&pairs).into_iter().map(Option::unwrap) {
                assert_eq!(d.family, lines);
                let (lo, hi) = d.comparison.ci_pct.expect("3 a side or more");
                let excludes = lo > 0.0 || hi < 0.0;
                if d.decided {
                    decided += 1;
                    assert_eq!(d.significant, excludes, "{d:?}");
                    assert_eq!(d.significant, d.holm_p <= ALPHA, "{d:?}");
                    let level = d.comparison.ci_level.unwrap();
                    assert!(level >= 1.0 - d.step_alpha - 1e-12, "{d:?}");
                } else {
                    undecided += 1;
                    assert!(!d.significant, "{d:?}");
                    assert!(d.holm_p > ALPHA, "an undecided line cannot pass: {d:?}");
                    assert!(smallest_p(d.runs.0, d.runs.1) > d.step_alpha, "{d:?}");
                }
                significant += usize::from(d.significant);
            }
        }
        // Every kind of line was met.
        assert!(
            decided > 500 && undecided > 500 && significant > 200,
            "{decided} {undecided} {significant}"
        );
    }
}
