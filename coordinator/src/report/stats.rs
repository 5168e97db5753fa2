//! Statistics behind the reports: per-cell summaries with bootstrap confidence
//! intervals, baseline comparisons, fleet outliers, run warnings and merged HDR
//! latency histograms. Pure functions over numbers: no I/O, no formatting of
//! tables, no knowledge of cells, agents or units.
//!
//! Conventions (the tests pin them against `tests/stats-reference.json`):
//! * the median of an even number of values is the mean of the two middle ones,
//!   as in Python's `statistics.median`;
//! * `stddev` is the sample standard deviation (n − 1);
//! * `mad` is the unscaled median absolute deviation from the median;
//! * confidence intervals are 95% percentile-bootstrap intervals over
//!   [`BOOTSTRAP_RESAMPLES`] resamples, the 2.5th and 97.5th percentiles taken
//!   with linear interpolation (numpy's default `percentile` method);
//! * the bootstrap is seeded and its RNG is part of the contract (see [`Rng`]):
//!   the same values and seed give the same interval, on every platform, forever;
//! * latency percentiles come from merged histograms, never from averaging
//!   per-repetition percentiles.

use std::io::Cursor;

use hdrhistogram::serialization::{DeserializeError, Deserializer};
use hdrhistogram::{AdditionError, Histogram};

/// Number of bootstrap resamples behind every confidence interval.
pub const BOOTSTRAP_RESAMPLES: usize = 10_000;
/// Fewer values than this give no confidence interval (and a warning).
pub const MIN_N_FOR_CI: usize = 3;
/// Confidence level of every interval.
pub const CONFIDENCE: f64 = 0.95;
/// Default `|modified z|` above which a value is an outlier (Iglewicz & Hoaglin).
pub const OUTLIER_THRESHOLD: f64 = 3.5;
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
    /// 95% bootstrap CI of the median; `None` when n < [`MIN_N_FOR_CI`].
    pub median_ci: Option<(f64, f64)>,
    /// 95% bootstrap CI of the mean; `None` when n < [`MIN_N_FOR_CI`].
    pub mean_ci: Option<(f64, f64)>,
}

/// Summarizes `values` (any order). `None` when empty or when any value is
/// not finite: a NaN from a broken parser must not become a plausible number.
pub fn summarize(values: &[f64], seed: u64) -> Option<Summary> {
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

    let (median_ci, mean_ci) = if n < MIN_N_FOR_CI {
        (None, None)
    } else {
        let mut rng = Rng::new(seed);
        let mut buf = vec![0.0; n];
        let mut medians = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
        let mut means = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
        for _ in 0..BOOTSTRAP_RESAMPLES {
            resample(values, &mut rng, &mut buf);
            means.push(mean_in_order(&buf));
            medians.push(median_in_place(&mut buf));
        }
        (
            Some(percentile_ci(&mut medians)),
            Some(percentile_ci(&mut means)),
        )
    };

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
        mean_ci,
    })
}

/// A candidate measured against a baseline. Ratio > 1 means the candidate's
/// median is larger: a penalty for times and latencies (callers comparing
/// throughput swap the arguments or negate the wording).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Comparison {
    /// `median(candidate) / median(baseline)`.
    pub ratio: f64,
    /// `(ratio − 1) × 100`.
    pub penalty_pct: f64,
    /// 95% bootstrap CI of the penalty in percent, resampling both groups
    /// independently; `None` when either group has fewer than [`MIN_N_FOR_CI`] values.
    pub ci_pct: Option<(f64, f64)>,
    /// The CI excludes 0; false when there is no CI.
    pub significant: bool,
}

/// Compares medians. `None` when either side is empty or not finite, or the
/// baseline median is 0 (no meaningful ratio).
pub fn compare(baseline: &[f64], candidate: &[f64], seed: u64) -> Option<Comparison> {
    let all_finite = |xs: &[f64]| !xs.is_empty() && xs.iter().all(|v| v.is_finite());
    if !all_finite(baseline) || !all_finite(candidate) {
        return None;
    }
    let base_median = median(baseline);
    if base_median == 0.0 {
        return None;
    }
    let ratio = median(candidate) / base_median;
    let penalty_pct = (ratio - 1.0) * 100.0;

    let ci_pct = if baseline.len() < MIN_N_FOR_CI || candidate.len() < MIN_N_FOR_CI {
        None
    } else {
        let mut rng = Rng::new(seed);
        let mut b = vec![0.0; baseline.len()];
        let mut c = vec![0.0; candidate.len()];
        let mut penalties = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
        for _ in 0..BOOTSTRAP_RESAMPLES {
            resample(baseline, &mut rng, &mut b);
            resample(candidate, &mut rng, &mut c);
            penalties.push((median_in_place(&mut c) / median_in_place(&mut b) - 1.0) * 100.0);
        }
        // A resampled baseline median of 0 makes the interval meaningless.
        penalties
            .iter()
            .all(|p| p.is_finite())
            .then(|| percentile_ci(&mut penalties))
    };
    let significant = ci_pct.is_some_and(|(lo, hi)| lo > 0.0 || hi < 0.0);
    Some(Comparison {
        ratio,
        penalty_pct,
        ci_pct,
        significant,
    })
}

impl Comparison {
    /// One line for a report, e.g.
    /// `encryption penalty 11.0% (95% CI 8.2% … 13.9%)`.
    pub fn describe(&self, label: &str) -> String {
        match self.ci_pct {
            Some((lo, hi)) => {
                let verdict = if self.significant {
                    ""
                } else {
                    ": no significant difference"
                };
                format!(
                    "{label} penalty {:.1}% (95% CI {lo:.1}% … {hi:.1}%){verdict}",
                    self.penalty_pct
                )
            }
            None => format!(
                "{label} penalty {:.1}% (too few repetitions for a confidence interval)",
                self.penalty_pct
            ),
        }
    }
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
/// [`OUTLIER_THRESHOLD`]), in input order.
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
/// (`|modified z|` > 3.5, not counting a first run already reported as cold),
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
                "only {n} repetition{}: too few for a confidence interval; set repeat to at least {MIN_N_FOR_CI} (5 or more for a useful interval)",
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

/// Mean summing in slice order; the bootstrap contract depends on the order.
fn mean_in_order(values: &[f64]) -> f64 {
    let mut s = 0.0;
    for v in values {
        s += v;
    }
    s / values.len() as f64
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

/// Median without a full sort (the bootstrap's inner loop). Reorders `buf`.
fn median_in_place(buf: &mut [f64]) -> f64 {
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

/// Linear-interpolated quantile of a sorted slice (numpy's default method).
fn quantile_of_sorted(sorted: &[f64], q: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

fn percentile_ci(stats: &mut [f64]) -> (f64, f64) {
    stats.sort_by(f64::total_cmp);
    let tail = (1.0 - CONFIDENCE) / 2.0;
    (
        quantile_of_sorted(stats, tail),
        quantile_of_sorted(stats, 1.0 - tail),
    )
}

fn resample(values: &[f64], rng: &mut Rng, out: &mut [f64]) {
    for slot in out.iter_mut() {
        *slot = values[rng.below(values.len())];
    }
}

/// The bootstrap's random numbers. **Fixed forever**: reports promise that a
/// seed gives the same intervals, so neither this generator nor the way
/// [`resample`] and the bootstrap loops consume it may change (golden values in
/// `tests/stats-reference.json`, reproduced by `tests/gen_reference.py`).
///
/// xoshiro256** (Blackman & Vigna) with its state filled by four successive
/// splitmix64 outputs from the seed; an index below n is `(r × n) >> 64`
/// (Lemire's multiply-shift, no rejection: the bias is below n / 2⁶⁴).
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

    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    // --- summaries -----------------------------------------------------------

    #[test]
    fn summaries_match_python_statistics() {
        let r = reference();
        let cases = r["summaries"].as_array().expect("summaries");
        assert!(cases.len() >= 15);
        for case in cases {
            let name = case["name"].as_str().expect("name");
            let e = &case["expected"];
            let s = summarize(&floats(&case["values"]), 1).expect("non-empty");
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
            assert_eq!(s.median_ci.is_some(), s.n >= MIN_N_FOR_CI, "{name}");
            assert_eq!(s.mean_ci.is_some(), s.n >= MIN_N_FOR_CI, "{name}");
        }
    }

    #[test]
    fn summarize_rejects_empty_and_non_finite() {
        assert_eq!(summarize(&[], 0), None);
        assert_eq!(summarize(&[1.0, f64::NAN, 2.0], 0), None);
        assert_eq!(summarize(&[1.0, f64::INFINITY], 0), None);
    }

    #[test]
    fn interval_quantiles_match_numpy_percentile() {
        let r = reference();
        for case in r["quantiles"].as_array().expect("quantiles") {
            let sorted = floats(&case["sorted"]);
            for (q, expected) in floats(&case["qs"])
                .into_iter()
                .zip(floats(&case["expected"]))
            {
                let what = format!("{} q={q}", case["name"]);
                assert_close(quantile_of_sorted(&sorted, q), expected, &what);
            }
        }
    }

    // --- bootstrap -----------------------------------------------------------

    #[test]
    fn bootstrap_is_pinned_forever() {
        // Golden values reproduced independently in tests/gen_reference.py. If
        // this fails, published seeds no longer give the published intervals.
        let r = reference();
        let g = &r["bootstrap_golden"];
        let mut rng = Rng::new(0);
        for expected in g["rng_seed0_first4"].as_array().expect("rng") {
            let expected: u64 = expected.as_str().expect("str").parse().expect("u64");
            assert_eq!(rng.next_u64(), expected);
        }
        for case in g["summary"].as_array().expect("summary") {
            let seed = case["seed"].as_u64().expect("seed");
            let s = summarize(&floats(&case["values"]), seed).expect("summary");
            for (field, actual) in [("median_ci", s.median_ci), ("mean_ci", s.mean_ci)] {
                let (lo, hi) = actual.expect("n >= 3");
                let (elo, ehi) = pair(&case[field]);
                assert_close(lo, elo, &format!("{} {field} low", case["name"]));
                assert_close(hi, ehi, &format!("{} {field} high", case["name"]));
            }
        }
        for case in g["compare"].as_array().expect("compare") {
            let seed = case["seed"].as_u64().expect("seed");
            let c = compare(
                &floats(&case["baseline"]),
                &floats(&case["candidate"]),
                seed,
            )
            .expect("comparison");
            let (lo, hi) = c.ci_pct.expect("n >= 3");
            let (elo, ehi) = pair(&case["ci_pct"]);
            assert_close(lo, elo, "compare ci low");
            assert_close(hi, ehi, "compare ci high");
        }
    }

    #[test]
    fn ci_contains_the_point_estimate() {
        let r = reference();
        for case in r["summaries"].as_array().expect("summaries") {
            let s = summarize(&floats(&case["values"]), 42).expect("summary");
            if s.n < MIN_N_FOR_CI {
                continue;
            }
            let (lo, hi) = s.median_ci.expect("median ci");
            assert!(lo <= s.median && s.median <= hi, "{}: {s:?}", case["name"]);
            let (lo, hi) = s.mean_ci.expect("mean ci");
            assert!(lo <= s.mean && s.mean <= hi, "{}: {s:?}", case["name"]);
            assert!(lo >= s.min && hi <= s.max, "{}: {s:?}", case["name"]);
        }
    }

    #[test]
    fn ci_narrows_as_n_grows() {
        let mut rng = Rng::new(2024);
        let widths: Vec<(f64, f64)> = [5, 50, 500]
            .iter()
            .map(|&n| {
                let s = summarize(&normal(&mut rng, n, 100.0, 10.0), 3).expect("summary");
                (ci_width(s.median_ci), ci_width(s.mean_ci))
            })
            .collect();
        for w in widths.windows(2) {
            assert!(w[1].0 < w[0].0, "median CI widths {widths:?}");
            assert!(w[1].1 < w[0].1, "mean CI widths {widths:?}");
        }
        // √10 more data: roughly 3× narrower, certainly more than 2×.
        assert!(widths[2].1 * 2.0 < widths[1].1, "{widths:?}");
    }

    #[test]
    fn ci_is_deterministic_for_a_seed() {
        let values = floats(&reference()["summaries"][9]["values"]);
        assert_eq!(values.len(), 25);
        let a = summarize(&values, 11).expect("summary");
        assert_eq!(a, summarize(&values, 11).expect("summary"));
        assert_ne!(a.mean_ci, summarize(&values, 12).expect("summary").mean_ci);
        // Medians of 5 values take few distinct values, so other seeds often
        // give the same interval; only sameness for the same seed is promised.
        let (b, c) = (spread(273.0), spread(303.0));
        assert_eq!(compare(&b, &c, 5), compare(&b, &c, 5));
    }

    #[test]
    fn ci_coverage_is_about_95_percent() {
        const TRIALS: usize = 400;
        let (mu, sigma, n) = (50.0, 5.0, 30);
        let mut rng = Rng::new(95);
        let (mut median_hits, mut mean_hits) = (0, 0);
        for trial in 0..TRIALS {
            let s = summarize(&normal(&mut rng, n, mu, sigma), trial as u64).expect("summary");
            let covers = |ci: Option<(f64, f64)>| ci.is_some_and(|(lo, hi)| lo <= mu && mu <= hi);
            median_hits += usize::from(covers(s.median_ci));
            mean_hits += usize::from(covers(s.mean_ci));
        }
        eprintln!("coverage: median {median_hits}/{TRIALS}, mean {mean_hits}/{TRIALS}");
        for (what, hits) in [("median", median_hits), ("mean", mean_hits)] {
            let coverage = hits as f64 / TRIALS as f64;
            assert!(
                (0.92..=0.98).contains(&coverage),
                "{what} CI coverage {coverage}"
            );
        }
    }

    // --- comparisons ---------------------------------------------------------

    #[test]
    fn comparisons_match_python_statistics() {
        let r = reference();
        for case in r["comparisons"].as_array().expect("comparisons") {
            let name = case["name"].as_str().expect("name");
            let c = compare(&floats(&case["baseline"]), &floats(&case["candidate"]), 0)
                .expect("comparison");
            assert_close(c.ratio, case["ratio"].as_f64().expect("ratio"), name);
            let penalty = case["penalty_pct"].as_f64().expect("penalty");
            assert_close(c.penalty_pct, penalty, name);
            let (lo, hi) = c.ci_pct.expect("n = 5");
            assert!(lo <= c.penalty_pct && c.penalty_pct <= hi, "{name}: {c:?}");
            assert_eq!(c.significant, lo > 0.0 || hi < 0.0, "{name}");
        }
    }

    #[test]
    fn seed000_spinning_rust_on_scala_is_not_significant() {
        let c = compare(&spread(471.0), &spread(477.0), 0).expect("comparison");
        assert!((c.penalty_pct - 1.27).abs() < 0.01, "{c:?}");
        let (lo, hi) = c.ci_pct.expect("ci");
        assert!(lo < 0.0 && 0.0 < hi, "{c:?}");
        assert!(!c.significant);
        let line = c.describe("spinning rust");
        assert!(
            line.starts_with("spinning rust penalty 1.3% (95% CI -"),
            "{line}"
        );
        assert!(line.ends_with("): no significant difference"), "{line}");
    }

    #[test]
    fn seed000_encryption_on_spring_is_significant() {
        let c = compare(&spread(273.0), &spread(303.0), 0).expect("comparison");
        assert!((c.penalty_pct - 10.99).abs() < 0.01, "{c:?}");
        let (lo, hi) = c.ci_pct.expect("ci");
        assert!(0.0 < lo && lo < 11.0 && 11.0 < hi, "{c:?}");
        assert!(c.significant);
        assert_eq!(
            c.describe("encryption"),
            format!("encryption penalty 11.0% (95% CI {lo:.1}% … {hi:.1}%)")
        );
    }

    #[test]
    fn compare_without_enough_data() {
        let c = compare(&[10.0, 10.2], &[20.0, 20.4, 19.8], 0).expect("comparison");
        assert_eq!(c.ci_pct, None);
        assert!(
            !c.significant,
            "a 100% penalty but no CI is not significant"
        );
        assert_close(c.ratio, 20.0 / 10.1, "ratio");
        assert!(c.describe("x").contains("too few repetitions"));
        assert_eq!(compare(&[], &[1.0], 0), None);
        assert_eq!(compare(&[1.0], &[], 0), None);
        assert_eq!(compare(&[0.0, 0.0, 1.0], &[1.0, 2.0, 3.0], 0), None);
        assert_eq!(compare(&[1.0, f64::NAN, 1.0], &[1.0, 2.0, 3.0], 0), None);
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
        // Modified z is relative to the spread: 103 would be an outlier here
        // (|z| = 4.0), but 102 is not (2.7).
        let w = warnings(&[100.0, 101.0, 99.0, 100.0, 102.0, 100.5, 99.5]);
        assert!(
            !w.iter().any(|x| matches!(x, Warning::OutlierRuns { .. })),
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
}
