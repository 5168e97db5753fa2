//! A series as a whole: one line's per-run values (each run's median, oldest first) searched
//! for **steps** and **ramps**, and a new run judged against the **spread of the recent
//! runs**. Pure and deterministic: no I/O, no units, no campaigns — `report::history` names
//! the runs and decides what is flagged.
//!
//! All three work on the logs of the values: a regression is a ratio, and a step of +10% is
//! the same shift in the logs whatever the level.
//!
//! **Steps: E-Divisive means with a t-test, as in Hunter/Otava** (Fleming et al., arXiv
//! 2301.03034). The split of a stretch that maximises the energy distance between its two
//! sides is the candidate; a t-test between the two sides decides it, at
//! [`STEP_ALPHA`]; accepted change points split the series and the search goes on in the
//! pieces, and at the end each change point is tried again against its neighbours' pieces
//! and the weakest that no longer passes is dropped, until all pass. Chosen over PELT
//! because PELT's penalty is a cost per change in units of a noise variance that a series of
//! nightly medians does not know (it varies by host, cell and week), while the t-test gives
//! every change its own p, which is what a flag carries and what the false-flag budget is
//! set in. E-Divisive's permutation test is replaced by the t-test for the reason Hunter
//! gives: it is deterministic and cheap (the permutation test is neither).
//!
//! **Ramps: Mann–Kendall (ties corrected) with a Theil–Sen slope** over the most recent
//! stretch: from the series' start or from one of its steps, to its last run. A change-point
//! method cuts a ramp into a staircase of small steps, and a trend test run only after the
//! last of those steps sees a few runs and misses it. So the two are weighed, not stacked:
//! for each stretch that ends at the last run (from the start, then from each step, earliest
//! first), the ramp — flat up to a corner, then a straight line to the end, the corner where
//! it fits best — is set against the steps found inside that stretch by BIC (the ramp's three
//! parameters against two per step and a level). When Mann–Kendall finds a trend in the
//! stretch at [`RAMP_ALPHA`] and the ramp explains it at least as well, it is a ramp (its
//! slope Theil–Sen's over the part after the corner), and the steps inside it are dropped:
//! they were its pieces. A ramp that has
//! stopped (flat since) stays a step or steps, which are flagged all the same.
//!
//! **A run against the recent runs** ([`against_recent`]): the new run's log value against
//! the mean of the last runs' with a t prediction interval, its spread the recent runs'
//! sample variance pooled with a prior of [`PRIOR_RUN_SD`] (plus the noise within a run)
//! worth [`PRIOR_DF`] degrees of freedom (a conjugate prior on the run-to-run variance: a line with one earlier run is not
//! judged on no spread at all, and a line with many on its own).
//!
//! The levels are set so that noise alone, 20 runs with a 2% run-to-run shift besides the
//! noise within a run, flags at most 1% of lines (`report::history`'s simulations). Nothing
//! here is a crate: the crates of change-point detection on crates.io (`changepoint`, a
//! BOCPD; `augurs-changepoint`, its wrapper) are Bayesian online detectors with a hazard
//! rate and no p per change, and none does Mann–Kendall; statrs gives the distributions.

use statrs::distribution::{ContinuousCDF, StudentsT};

use super::normal_cdf;

/// The level of a step's t-test (after E-Divisive picked it: the pick makes it optimistic,
/// hence far below 5%).
pub const STEP_ALPHA: f64 = 0.0002;
/// The level of a ramp's Mann–Kendall test (two-sided).
pub const RAMP_ALPHA: f64 = 0.002;
/// The fewest runs on either side of a step: two runs make no spread to test against.
pub const MIN_SEGMENT: usize = 3;
/// The fewest runs of a ramp (its corner included): five pairs in the same order are
/// something a run of chance gives too often.
pub const MIN_RAMP_RUNS: usize = 6;
/// The run-to-run standard deviation (of the logs: 1.5%) assumed before a line has shown its
/// own, and the degrees of freedom that assumption is worth. 1.5% rather than the 2% the
/// simulations shift runs by: with 2%, three runs at one level and a fourth 10% slower on a
/// quiet machine were not flagged at 99%; with 1.5% they are, and noise-only lines with a
/// 2% shift stay at 0–0.65% flagged (`report::history`'s simulations).
pub const PRIOR_RUN_SD: f64 = 0.015;
pub const PRIOR_DF: f64 = 10.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Step,
    Ramp,
}

/// A step or a ramp, in positions of the values it was found in.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub kind: Kind,
    /// A step: the first value at the new level (`first == last`). A ramp: its corner, the
    /// last value before it climbs, to its last value.
    pub first: usize,
    pub last: usize,
    /// The level before (a step: the geometric mean of the values since the step before; a
    /// ramp: its line at `first`), and after (a step: of the values up to the next step; a
    /// ramp: its line at `last`), in the values' unit.
    pub before: f64,
    pub after: f64,
    /// A ramp's Theil–Sen slope, as a ratio a run (1.012: 1.2% a run).
    pub per_run: Option<f64>,
    /// The test's p: Student's t for a step, Mann–Kendall's for a ramp.
    pub p: f64,
}

impl Found {
    /// The whole change, in percent of `before`.
    pub fn change_pct(&self) -> f64 {
        (self.after / self.before - 1.0) * 100.0
    }
}

/// The steps and the ramp of `values` (oldest first), by position. Nothing when a value is
/// not positive and finite (no ratio), or there are too few to split.
pub fn detect(values: &[f64]) -> Vec<Found> {
    if values.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return Vec::new();
    }
    let y: Vec<f64> = values.iter().map(|v| v.ln()).collect();
    let mut cps = change_points(&y);
    let ramp = ramp(&y, &mut cps);
    let mut out: Vec<Found> = cps
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let from = if i == 0 { 0 } else { cps[i - 1] };
            let to = cps.get(i + 1).copied().unwrap_or(y.len());
            let (left, right) = (&y[from..c], &y[c..to]);
            Found {
                kind: Kind::Step,
                first: c,
                last: c,
                before: mean(left).exp(),
                after: mean(right).exp(),
                per_run: None,
                p: t_test_p(left, right),
            }
        })
        .collect();
    out.extend(ramp);
    out
}

/// Where `y` changes level (each the first index of a new level), E-Divisive with a t-test.
fn change_points(y: &[f64]) -> Vec<usize> {
    let mut cps: Vec<usize> = Vec::new();
    // The best split of each piece, kept until the piece is split.
    let mut best: Vec<Option<(f64, usize)>> = vec![best_split(y, 0, y.len())];
    loop {
        let bounds = bounds(&cps, y.len());
        // The piece with the strongest candidate.
        let Some((piece, (_, at))) = best
            .iter()
            .enumerate()
            .filter_map(|(i, b)| b.map(|b| (i, b)))
            .max_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
        else {
            break;
        };
        let (from, to) = (bounds[piece], bounds[piece + 1]);
        if t_test_p(&y[from..at], &y[at..to]) > STEP_ALPHA {
            break;
        }
        cps.insert(piece, at);
        best.splice(
            piece..=piece,
            [best_split(y, from, at), best_split(y, at, to)],
        );
    }
    // Each change again, against the pieces on either side of it now: the weakest that no
    // longer passes goes, until every one does.
    loop {
        let bounds = bounds(&cps, y.len());
        let weakest = (0..cps.len())
            .map(|i| {
                (
                    i,
                    t_test_p(&y[bounds[i]..cps[i]], &y[cps[i]..bounds[i + 2]]),
                )
            })
            .filter(|(_, p)| *p > STEP_ALPHA)
            .max_by(|a, b| a.1.total_cmp(&b.1));
        match weakest {
            Some((i, _)) => {
                cps.remove(i);
            }
            None => break,
        }
    }
    cps
}

/// 0, the change points, the end.
fn bounds(cps: &[usize], n: usize) -> Vec<usize> {
    std::iter::once(0)
        .chain(cps.iter().copied())
        .chain(std::iter::once(n))
        .collect()
}

/// The split of `y[from..to]` with the largest energy statistic (Székely and Rizzo's, α = 1,
/// scaled by the sides' sizes), each side at least [`MIN_SEGMENT`] long: `(q, index)`.
/// O(n²): the sums within each side are kept as the split moves.
fn best_split(y: &[f64], from: usize, to: usize) -> Option<(f64, usize)> {
    let z = &y[from..to];
    let n = z.len();
    if n < 2 * MIN_SEGMENT {
        return None;
    }
    // within_left[t]: Σ|zᵢ − zₖ| over i < k < t; within_right[t]: over t ≤ i < k.
    let mut within_left = vec![0.0; n + 1];
    for t in 1..n {
        let added: f64 = z[..t].iter().map(|v| (v - z[t]).abs()).sum();
        within_left[t + 1] = within_left[t] + added;
    }
    let mut within_right = vec![0.0; n + 1];
    for t in (0..n - 1).rev() {
        let added: f64 = z[t + 1..].iter().map(|v| (v - z[t]).abs()).sum();
        within_right[t] = within_right[t + 1] + added;
    }
    let total = within_left[n];
    let mut best: Option<(f64, usize)> = None;
    for t in MIN_SEGMENT..=n - MIN_SEGMENT {
        let (a, b) = (t as f64, (n - t) as f64);
        let cross = total - within_left[t] - within_right[t];
        let e = 2.0 * cross / (a * b)
            - within_left[t] / (a * (a - 1.0) / 2.0)
            - within_right[t] / (b * (b - 1.0) / 2.0);
        let q = a * b / (a + b) * e;
        if best.is_none_or(|(bq, _)| q > bq) {
            best = Some((q, from + t));
        }
    }
    best
}

/// The ramp that ends at the last value, if one explains a recent stretch better than the
/// steps `cps` inside it (which it then takes out of `cps`).
fn ramp(y: &[f64], cps: &mut Vec<usize>) -> Option<Found> {
    let n = y.len();
    let starts: Vec<usize> = std::iter::once(0).chain(cps.iter().copied()).collect();
    for (i, &from) in starts.iter().enumerate() {
        if n - from < MIN_RAMP_RUNS {
            continue;
        }
        let inside = &cps[i..];
        let Some((corner, hinge_rss)) = best_corner(&y[from..]) else {
            continue;
        };
        let corner = from + corner;
        let part = &y[corner..];
        // The trend of the whole stretch: the runs before the corner are its baseline, and
        // a ramp 1% a run under 2% noise shows in 12 runs against them, not in its own.
        let p = mann_kendall_p(&y[from..]);
        if p > RAMP_ALPHA {
            continue;
        }
        let steps_rss = levels_rss(
            &y[from..],
            &inside.iter().map(|c| c - from).collect::<Vec<_>>(),
        );
        let len = n - from;
        let ramp_params = if corner == from { 2.0 } else { 3.0 };
        let steps_params = 1.0 + 2.0 * inside.len() as f64;
        if bic(hinge_rss, len, ramp_params) > bic(steps_rss, len, steps_params) {
            continue;
        }
        let slope = theil_sen(part);
        let intercept = median(
            part.iter()
                .enumerate()
                .map(|(t, v)| v - slope * t as f64)
                .collect(),
        );
        cps.truncate(i);
        return Some(Found {
            kind: Kind::Ramp,
            first: corner,
            last: n - 1,
            before: intercept.exp(),
            after: (intercept + slope * (n - 1 - corner) as f64).exp(),
            per_run: Some(slope.exp()),
            p,
        });
    }
    None
}

/// The corner of the best "flat, then a straight line to the end" fit of `z` by least
/// squares (the line at least [`MIN_RAMP_RUNS`] values long, corner included), with its
/// residual sum of squares.
fn best_corner(z: &[f64]) -> Option<(usize, f64)> {
    let n = z.len();
    let zbar = mean(z);
    let syy: f64 = z.iter().map(|v| (v - zbar).powi(2)).sum();
    (0..=n.checked_sub(MIN_RAMP_RUNS)?)
        .map(|s| {
            // z = a + c·max(0, t − s): one regressor.
            let h = |t: usize| t.saturating_sub(s) as f64;
            let hbar = (0..n).map(h).sum::<f64>() / n as f64;
            let (mut shh, mut shy) = (0.0, 0.0);
            for (t, v) in z.iter().enumerate() {
                shh += (h(t) - hbar).powi(2);
                shy += (h(t) - hbar) * (v - zbar);
            }
            (s, (syy - shy * shy / shh).max(0.0))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// The residual sum of squares of `z` about the means of its pieces between `cps`.
fn levels_rss(z: &[f64], cps: &[usize]) -> f64 {
    let b = bounds(cps, z.len());
    b.windows(2)
        .map(|w| {
            let piece = &z[w[0]..w[1]];
            let m = mean(piece);
            piece.iter().map(|v| (v - m).powi(2)).sum::<f64>()
        })
        .sum()
}

/// Schwarz's criterion of a fit with `rss` over `n` values and `k` parameters (a floor on
/// the RSS: a fit can be exact, and identical values are no reason for −∞).
fn bic(rss: f64, n: usize, k: f64) -> f64 {
    let n = n as f64;
    n * (rss / n).max(1e-18).ln() + k * n.ln()
}

/// Mann–Kendall's two-sided p for a monotone trend in `z`, ties corrected, by the normal
/// approximation with a continuity correction.
pub fn mann_kendall_p(z: &[f64]) -> f64 {
    let n = z.len();
    if n < 3 {
        return 1.0;
    }
    let mut s = 0i64;
    for i in 0..n {
        for j in i + 1..n {
            s += match z[j].total_cmp(&z[i]) {
                std::cmp::Ordering::Greater => 1,
                std::cmp::Ordering::Less => -1,
                std::cmp::Ordering::Equal => 0,
            };
        }
    }
    let mut sorted = z.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut ties = 0.0;
    let mut i = 0;
    while i < n {
        let j = sorted[i..].iter().take_while(|v| **v == sorted[i]).count();
        let t = j as f64;
        ties += t * (t - 1.0) * (2.0 * t + 5.0);
        i += j;
    }
    let nf = n as f64;
    let var = (nf * (nf - 1.0) * (2.0 * nf + 5.0) - ties) / 18.0;
    if var <= 0.0 || s == 0 {
        return 1.0;
    }
    let z = (s.abs() as f64 - 1.0) / var.sqrt();
    (2.0 * normal_cdf(-z)).min(1.0)
}

/// Theil–Sen's slope of `z` against its positions: the median of the pairwise slopes.
pub fn theil_sen(z: &[f64]) -> f64 {
    let mut slopes = Vec::with_capacity(z.len() * z.len().saturating_sub(1) / 2);
    for i in 0..z.len() {
        for j in i + 1..z.len() {
            slopes.push((z[j] - z[i]) / (j - i) as f64);
        }
    }
    median(slopes)
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mid = v.len() / 2;
    let (_, upper, _) = v.select_nth_unstable_by(mid, f64::total_cmp);
    let upper = *upper;
    if v.len() % 2 == 1 {
        upper
    } else {
        let lower = v[..mid].iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lower + upper) / 2.0
    }
}

fn mean(z: &[f64]) -> f64 {
    z.iter().sum::<f64>() / z.len() as f64
}

fn variance(z: &[f64]) -> f64 {
    let m = mean(z);
    z.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (z.len() as f64 - 1.0)
}

/// Student's two-sided t-test p of `a` against `b` (each ≥ 2 values), the variance pooled:
/// a step moves the level, not the noise, and Welch's test on pieces of three runs took a
/// side that happened to be tight for a step (1.1% of noise-only lines flagged). Two sides
/// without any spread: 0 when their means differ, else 1.
fn t_test_p(a: &[f64], b: &[f64]) -> f64 {
    if a.len() < 2 || b.len() < 2 {
        return 1.0;
    }
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let df = na + nb - 2.0;
    let pooled = (variance(a) * (na - 1.0) + variance(b) * (nb - 1.0)) / df;
    let se2 = pooled * (1.0 / na + 1.0 / nb);
    let diff = mean(a) - mean(b);
    // Below rounding: the sides are constant.
    if se2 <= 1e-24 {
        return if diff.abs() > 1e-12 { 0.0 } else { 1.0 };
    }
    two_sided_t(diff / se2.sqrt(), df)
}

fn two_sided_t(t: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df.max(1.0)) {
        Ok(d) => (2.0 * d.cdf(-t.abs())).min(1.0),
        Err(_) => 1.0,
    }
}

fn t_quantile(p: f64, df: f64) -> f64 {
    StudentsT::new(0.0, 1.0, df.max(1.0))
        .map(|d| d.inverse_cdf(p))
        // A Student's t with df ≥ 1 always exists.
        .unwrap_or(f64::INFINITY)
}

/// A run against the recent runs before it.
#[derive(Debug, Clone, PartialEq)]
pub struct Recent {
    /// The recent runs' level (geometric mean), in the values' unit.
    pub level: f64,
    /// The new run over that level, in percent, and its prediction interval at `level_ci`.
    pub change_pct: f64,
    pub ci_pct: (f64, f64),
    /// The run-to-run standard deviation used (of the logs, ≈ a fraction), prior included.
    pub sd: f64,
    /// The prediction's two-sided p.
    pub p: f64,
}

/// `new` against `earlier` (≥ 1 value, all positive): is it where the recent runs' spread
/// says a next run falls, at `confidence`? The spread is the earlier values' sample variance
/// of the logs pooled with a prior worth [`PRIOR_DF`] degrees of freedom: [`PRIOR_RUN_SD`]
/// from run to run plus `within_sd`, the standard error of one run's value from the noise
/// within it (of the logs; a median of 8 repetitions at 5% is ±2.2% before any run-to-run
/// shift, and a prior of run-to-run variation alone let 12% of noise-only runs be
/// "significant"). The
/// interval is Student's t with the pooled degrees of freedom for `new − mean(earlier)`,
/// whose variance is s²·(1 + 1/m).
pub fn against_recent(
    earlier: &[f64],
    new: f64,
    within_sd: f64,
    confidence: f64,
) -> Option<Recent> {
    if earlier.is_empty()
        || !(new.is_finite() && new > 0.0)
        || earlier.iter().any(|v| !(v.is_finite() && *v > 0.0))
    {
        return None;
    }
    let logs: Vec<f64> = earlier.iter().map(|v| v.ln()).collect();
    let m = logs.len() as f64;
    let own_df = m - 1.0;
    let own_ss = if logs.len() > 1 {
        variance(&logs) * own_df
    } else {
        0.0
    };
    let df = PRIOR_DF + own_df;
    let prior = PRIOR_RUN_SD * PRIOR_RUN_SD + within_sd * within_sd;
    let sd = ((PRIOR_DF * prior + own_ss) / df).sqrt();
    let level = mean(&logs);
    let d = new.ln() - level;
    let se = sd * (1.0 + 1.0 / m).sqrt();
    let half = t_quantile(0.5 + confidence / 2.0, df) * se;
    let pct = |x: f64| (x.exp() - 1.0) * 100.0;
    Some(Recent {
        level: level.exp(),
        change_pct: pct(d),
        ci_pct: (pct(d - half), pct(d + half)),
        sd,
        p: two_sided_t(d / se, df),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_step_is_found_at_its_run() {
        let mut v = vec![1.0; 8];
        v.extend([1.1; 6]);
        let found = detect(&v);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].kind, Kind::Step);
        assert_eq!(found[0].first, 8);
        assert!((found[0].change_pct() - 10.0).abs() < 1e-9);
        assert_eq!(found[0].p, 0.0);
    }

    #[test]
    fn a_clean_ramp_is_one_ramp_not_a_staircase() {
        let v: Vec<f64> = (0..15).map(|i| 21.09 * 1.0115f64.powi(i)).collect();
        let found = detect(&v);
        assert_eq!(found.len(), 1, "{found:?}");
        let r = &found[0];
        assert_eq!((r.kind, r.first, r.last), (Kind::Ramp, 0, 14));
        assert!((r.per_run.unwrap() - 1.0115).abs() < 1e-9, "{r:?}");
        assert!((r.change_pct() - (1.0115f64.powi(14) - 1.0) * 100.0).abs() < 1e-6);
    }

    #[test]
    fn mann_kendall_and_theil_sen_against_hand_worked_values() {
        // S = 8 of n = 5 with no ties: var = 5·4·15/18 = 16.67, z = 7/4.08 = 1.715.
        let p = mann_kendall_p(&[1.0, 3.0, 2.0, 4.0, 5.0]);
        assert!((p - 2.0 * normal_cdf(-7.0 / (50.0f64 / 3.0).sqrt())).abs() < 1e-12);
        // Ties: {2, 2} takes 2·1·9 = 18 off 5·4·15 = 300.
        let p = mann_kendall_p(&[1.0, 2.0, 2.0, 4.0, 5.0]);
        assert!((p - 2.0 * normal_cdf(-8.0 / (282.0f64 / 18.0).sqrt())).abs() < 1e-12);
        assert_eq!(mann_kendall_p(&[3.0; 6]), 1.0);
        // Slopes 1, 1, 1, 3, 4, 7: the median is 2.
        assert_eq!(theil_sen(&[1.0, 2.0, 3.0, 10.0]), 2.0);
    }

    #[test]
    fn a_run_against_the_recent_runs_uses_their_spread_and_the_prior() {
        // One earlier run: the prior alone, 1.5% with 10 degrees of freedom.
        let r = against_recent(&[1.0], 1.1, 0.0, 0.95).unwrap();
        assert!((r.sd - PRIOR_RUN_SD).abs() < 1e-12);
        let half = t_quantile(0.975, PRIOR_DF) * PRIOR_RUN_SD * 2f64.sqrt();
        assert!((r.ci_pct.0 - ((1.1f64.ln() - half).exp() - 1.0) * 100.0).abs() < 1e-9);
        assert!(r.ci_pct.0 > 3.0, "{r:?}");
        // Many wide runs: their own spread wins.
        let wide: Vec<f64> = (0..40)
            .map(|i| if i % 2 == 0 { 0.9 } else { 1.1 })
            .collect();
        let r = against_recent(&wide, 1.1, 0.0, 0.95).unwrap();
        assert!(r.sd > 0.08 && r.p > 0.05, "{r:?}");
        assert!(against_recent(&[], 1.0, 0.0, 0.95).is_none());
        assert!(against_recent(&[0.0], 1.0, 0.0, 0.95).is_none());
    }
}
