//! Each drive against its peers: the drives of one model measured on the same workload and
//! configuration. A drive's evidence is one value per run (the run's median: repetitions
//! within a run are not independent evidence), and its standing is the Hodges–Lehmann shift
//! of its runs' log values against every other drive's, with the distribution-free interval
//! the Mann–Whitney U statistic gives, so a shift reads as a ratio ("×1.15 (1.11–1.19)").
//!
//! **Error control: Holm**, over the drives of one group. The family-wise error is the chance
//! that a group of drives that are all alike has any drive called different; at [`ALPHA`]
//! (1%) that is at most 1% of such groups (`known answers` below measure it over 1,000
//! simulated noise-only fleets). Holm rather than Benjamini–Hochberg because a flag sends
//! someone to pull a drive: a false one costs a person's afternoon whatever the number of
//! true ones beside it.
//!
//! Each drive's interval is at the level of its own Holm step (α/(K − j) for the drive with
//! the j-th smallest p of K), and a drive after the first step that does not reject gets
//! that step's level, so "significant" and "its interval excludes ×1" always agree.
//!
//! **At fleet size** (10,000 drives of 20 runs: 200,000 values) no pair of values is ever
//! listed. The group's values are sorted once into a [`Ranker`] that answers "how many are
//! below v" in O(1) (a bucket index over the sorted values); the rest of the group is the
//! group minus the drive's own values; and each order statistic of the m·n differences is
//! found by bisection on its value, each step counting the differences below it in O(m).
//! The normal approximation of U is used throughout (the rest of the group is large; a
//! group small enough for it to matter is too small to judge, see `MIN_PEERS`).

use super::{each_on_cores, holm, normal_cdf, normal_quantile};

/// The family-wise error rate of one peer group's drives.
pub const ALPHA: f64 = 0.01;

/// A drive's standing in its group.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Standing {
    /// The drive's values over its peers', as a ratio (Hodges–Lehmann shift of the logs).
    pub ratio: f64,
    /// Its interval, at `level`.
    pub ci: (f64, f64),
    /// The interval's confidence (1 − its Holm step's α).
    pub level: f64,
    /// The Mann–Whitney test's two-sided p, and after Holm over the group.
    pub p: f64,
    pub p_holm: f64,
    /// `p_holm` ≤ [`ALPHA`]: the interval excludes ×1.
    pub significant: bool,
    /// How many runs the drive had, and the rest of the group.
    pub runs: usize,
    pub peer_runs: usize,
}

/// Every drive's standing against the rest of its group: `drives[d]` holds drive d's per-run
/// values (positive). A drive without values, or a group of one drive, has `None`.
pub fn standings(drives: &[Vec<f64>]) -> Vec<Option<Standing>> {
    standings_against(drives, &vec![true; drives.len()])
}

/// `standings`, each drive against the drives `reference` keeps (but itself): the group
/// with its odd drives out (`report::peers` leaves a drive it flagged out of the others'
/// reference, so one drive 150× slower does not stretch every other's interval).
pub fn standings_against(drives: &[Vec<f64>], reference: &[bool]) -> Vec<Option<Standing>> {
    let logs: Vec<Vec<f64>> = drives
        .iter()
        .map(|v| {
            let mut l: Vec<f64> = v
                .iter()
                .filter(|x| **x > 0.0 && x.is_finite())
                .map(|x| x.ln())
                .collect();
            l.sort_by(f64::total_cmp);
            l
        })
        .collect();
    let all = Ranker::new(
        logs.iter()
            .zip(reference)
            .filter(|(_, keep)| **keep)
            .flat_map(|(l, _)| l.iter().copied())
            .collect(),
    );
    let index: Vec<usize> = (0..logs.len()).collect();
    let drive = |d: usize| Drive {
        x: &logs[d],
        all: &all,
        own_in_all: reference[d],
    };
    let tests: Vec<Option<(f64, usize)>> = each_on_cores(&index, |&d| {
        let x = drive(d);
        (x.m() > 0 && x.n() > 0).then(|| (x.p(), x.m()))
    });
    // Holm over the drives that have a test.
    let tested: Vec<usize> = (0..tests.len()).filter(|&d| tests[d].is_some()).collect();
    let ps: Vec<f64> = tested
        .iter()
        .map(|&d| tests[d].map_or(1.0, |t| t.0))
        .collect();
    let adjusted = holm(&ps);
    let k = tested.len();
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by(|&a, &b| ps[a].total_cmp(&ps[b]));
    let first_kept = order.iter().position(|&i| adjusted[i] > ALPHA).unwrap_or(k);
    let mut alpha_of = vec![ALPHA; k];
    for (rank, &i) in order.iter().enumerate() {
        alpha_of[i] = ALPHA / (k - rank.min(first_kept)) as f64;
    }
    let mut per_drive: Vec<Option<(f64, f64, f64)>> = vec![None; drives.len()];
    for (i, &d) in tested.iter().enumerate() {
        per_drive[d] = Some((ps[i], adjusted[i], alpha_of[i]));
    }
    each_on_cores(&index, |&d| {
        let (p, p_holm, alpha) = per_drive[d]?;
        let drive = drive(d);
        let (shift, lo, hi) = drive.shift(alpha);
        Some(Standing {
            ratio: shift.exp(),
            ci: (lo.exp(), hi.exp()),
            level: 1.0 - alpha,
            p,
            p_holm,
            significant: p_holm <= ALPHA,
            runs: drive.m(),
            peer_runs: drive.n(),
        })
    })
}

/// Sorted values that say how many of them lie below a value in O(1): a bucket index over
/// their range (about one bucket per value), searched within its one bucket.
#[derive(Debug)]
pub struct Ranker {
    sorted: Vec<f64>,
    min: f64,
    scale: f64,
    /// `starts[b]`: the first value in bucket b or later; one past the last bucket at the end.
    starts: Vec<u32>,
}

impl Ranker {
    pub fn new(mut values: Vec<f64>) -> Ranker {
        values.sort_by(f64::total_cmp);
        let (min, max) = match (values.first(), values.last()) {
            (Some(a), Some(b)) => (*a, *b),
            _ => (0.0, 0.0),
        };
        let buckets = values.len().clamp(16, 1 << 22);
        let scale = if max > min {
            buckets as f64 / (max - min)
        } else {
            0.0
        };
        let mut starts = Vec::with_capacity(buckets + 2);
        let mut i = 0;
        for b in 0..=buckets + 1 {
            while i < values.len() && Self::bucket_of(values[i], min, scale, buckets) < b {
                i += 1;
            }
            starts.push(i as u32);
        }
        Ranker {
            sorted: values,
            min,
            scale,
            starts,
        }
    }

    fn bucket_of(v: f64, min: f64, scale: f64, buckets: usize) -> usize {
        (((v - min) * scale).max(0.0) as usize).min(buckets)
    }

    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// How many values are < `v` (`strictly`) or ≤ `v`.
    fn count(&self, v: f64, strictly: bool) -> usize {
        let (Some(first), Some(last)) = (self.sorted.first(), self.sorted.last()) else {
            return 0;
        };
        if v < *first || (strictly && v == *first) {
            return 0;
        }
        if v > *last || (!strictly && v == *last) {
            return self.sorted.len();
        }
        let buckets = self.starts.len() - 2;
        let b = Self::bucket_of(v, self.min, self.scale, buckets);
        let (from, to) = (self.starts[b] as usize, self.starts[b + 1] as usize);
        let within = &self.sorted[from..to];
        from + if strictly {
            within.partition_point(|x| *x < v)
        } else {
            within.partition_point(|x| *x <= v)
        }
    }

    pub fn below(&self, v: f64) -> usize {
        self.count(v, true)
    }

    pub fn at_or_below(&self, v: f64) -> usize {
        self.count(v, false)
    }
}

/// One drive's sorted log values `x` and its reference's (`all`, its own among them when
/// `own_in_all`).
struct Drive<'a> {
    x: &'a [f64],
    all: &'a Ranker,
    own_in_all: bool,
}

impl Drive<'_> {
    fn m(&self) -> usize {
        self.x.len()
    }

    fn n(&self) -> usize {
        self.all.len() - self.own(|_| true)
    }

    /// How many of its own values the reference holds that `keep`.
    fn own(&self, keep: impl Fn(&f64) -> bool) -> usize {
        if self.own_in_all {
            self.x.partition_point(keep)
        } else {
            0
        }
    }

    /// Values of the rest of the group < v, or ≤ v.
    fn rest_below(&self, v: f64) -> usize {
        self.all.below(v) - self.own(|x| *x < v)
    }

    fn rest_at_or_below(&self, v: f64) -> usize {
        self.all.at_or_below(v) - self.own(|x| *x <= v)
    }

    /// The Mann–Whitney test's two-sided p (normal approximation, continuity corrected).
    fn p(&self) -> f64 {
        let (m, n) = (self.m() as f64, self.n() as f64);
        let u: f64 = self
            .x
            .iter()
            .map(|&v| {
                let below = self.rest_below(v) as f64;
                let ties = self.rest_at_or_below(v) as f64 - below;
                below + ties / 2.0
            })
            .sum();
        let sigma = (m * n * (m + n + 1.0) / 12.0).sqrt();
        if sigma == 0.0 {
            return 1.0;
        }
        let z = ((u - m * n / 2.0).abs() - 0.5).max(0.0) / sigma;
        (2.0 * (1.0 - normal_cdf(z))).min(1.0)
    }

    /// How many differences x_i − y_j are ≤ t.
    fn differences_at_or_below(&self, t: f64) -> u64 {
        let n = self.n();
        self.x
            .iter()
            .map(|&v| (n - self.rest_below(v - t)) as u64)
            .sum()
    }

    /// The k-th smallest difference (1-based), to 1e-10 in the log (a ratio to 1e-10).
    fn kth(&self, k: u64) -> f64 {
        self.kth_from(k, f64::NEG_INFINITY)
    }

    /// `kth`, known to be at least `floor` (an earlier, smaller order statistic): the
    /// bisection starts there.
    fn kth_from(&self, k: u64, floor: f64) -> f64 {
        let (Some(x0), Some(x1)) = (self.x.first(), self.x.last()) else {
            return f64::NAN;
        };
        let (y0, y1) = (
            self.all.sorted.first().copied().unwrap_or(0.0),
            self.all.sorted.last().copied().unwrap_or(0.0),
        );
        let (mut lo, mut hi) = ((x0 - y1).max(floor) - 1e-9, x1 - y0);
        while hi - lo > 1e-10 {
            let mid = lo + (hi - lo) / 2.0;
            if mid <= lo || mid >= hi {
                break;
            }
            if self.differences_at_or_below(mid) >= k {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi
    }

    /// The Hodges–Lehmann shift and its interval at 1 − `alpha` (logs), each order
    /// statistic searched from the one below it.
    fn shift(&self, alpha: f64) -> (f64, f64, f64) {
        let (m, n) = (self.m() as u64, self.n() as u64);
        let pairs = m * n;
        let sigma = ((m * n) as f64 * (m + n + 1) as f64 / 12.0).sqrt();
        let z = normal_quantile(1.0 - alpha / 2.0);
        let k = ((pairs as f64 / 2.0 - z * sigma).floor() as i64).max(1) as u64;
        let interval = k <= pairs / 2;
        let lo = if interval {
            self.kth(k)
        } else {
            f64::NEG_INFINITY
        };
        let median = if pairs % 2 == 1 {
            self.kth_from(pairs / 2 + 1, lo)
        } else {
            let a = self.kth_from(pairs / 2, lo);
            (a + self.kth_from(pairs / 2 + 1, a)) / 2.0
        };
        if !interval {
            return (median, median, median);
        }
        let hi = self.kth_from(pairs - k + 1, median);
        (median, lo, hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Every difference listed and sorted: the answer the bisection must give.
    fn brute(x: &[f64], rest: &[f64], k: usize) -> f64 {
        let mut d: Vec<f64> = x
            .iter()
            .flat_map(|a| rest.iter().map(move |b| a - b))
            .collect();
        d.sort_by(f64::total_cmp);
        d[k - 1]
    }

    #[test]
    fn the_ranker_counts_like_a_scan_with_ties_and_at_the_ends() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut values: Vec<f64> = (0..5000).map(|_| rng.random_range(0.0..10.0)).collect();
        values.extend([3.0; 50]);
        values.extend([0.0, 10.0]);
        let r = Ranker::new(values.clone());
        for v in [
            -1.0, 0.0, 3.0, 2.999999, 5.5, 9.99, 10.0, 11.0, 1e-300, 7.123,
        ] {
            assert_eq!(
                r.below(v),
                values.iter().filter(|x| **x < v).count(),
                "below {v}"
            );
            assert_eq!(
                r.at_or_below(v),
                values.iter().filter(|x| **x <= v).count(),
                "at or below {v}"
            );
        }
        let one = Ranker::new(vec![2.0; 10]);
        assert_eq!((one.below(2.0), one.at_or_below(2.0)), (0, 10));
    }

    #[test]
    fn order_statistics_of_differences_match_listing_them_all() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for trial in 0..20 {
            let mut groups: Vec<Vec<f64>> = (0..8)
                .map(|_| {
                    (0..rng.random_range(1..7))
                        .map(|_| rng.random_range(-1.0..1.0))
                        .collect()
                })
                .collect();
            if trial % 2 == 0 {
                // Ties across drives, as rounded values have them.
                groups[0].extend([0.25, 0.25]);
                groups[1].push(0.25);
            }
            for g in &mut groups {
                g.sort_by(f64::total_cmp);
            }
            let all = Ranker::new(groups.iter().flatten().copied().collect());
            let x = &groups[0];
            let rest: Vec<f64> = groups[1..].iter().flatten().copied().collect();
            let d = Drive {
                x,
                all: &all,
                own_in_all: true,
            };
            let pairs = x.len() * rest.len();
            for k in [1, 2, pairs / 3 + 1, pairs / 2 + 1, pairs] {
                let want = brute(x, &rest, k);
                let got = d.kth(k as u64);
                assert!(
                    (got - want).abs() < 1e-9,
                    "trial {trial} k {k}: {got} vs {want}"
                );
            }
        }
    }

    /// A fleet of `drives` drives, `runs` runs each, with `noise` run-to-run (log-normal), the
    /// drives in `slow` that much slower.
    fn fleet(
        rng: &mut impl Rng,
        drives: usize,
        runs: usize,
        noise: f64,
        slow: &[(usize, f64)],
    ) -> Vec<Vec<f64>> {
        let normal = rand_distr_normal;
        (0..drives)
            .map(|d| {
                let factor = slow.iter().find(|s| s.0 == d).map_or(1.0, |s| s.1);
                (0..runs)
                    .map(|_| 20.0 * factor * (noise * normal(rng)).exp())
                    .collect()
            })
            .collect()
    }

    /// A standard normal draw (Box–Muller), so the test needs nothing beyond `rand`.
    fn rand_distr_normal(rng: &mut impl Rng) -> f64 {
        let u1: f64 = rng.random_range(f64::EPSILON..1.0);
        let u2: f64 = rng.random_range(0.0..1.0);
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    #[test]
    fn two_slow_drives_of_forty_stand_out_and_their_intervals_agree_with_the_mark() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(49);
        let drives = fleet(&mut rng, 40, 6, 0.05, &[(7, 1.15), (31, 1.15)]);
        let s = standings(&drives);
        let significant: Vec<usize> = (0..40)
            .filter(|&d| s[d].as_ref().unwrap().significant)
            .collect();
        assert_eq!(significant, [7, 31]);
        for (d, st) in s.iter().enumerate() {
            let st = st.as_ref().unwrap();
            assert_eq!(
                st.significant,
                st.ci.0 > 1.0 || st.ci.1 < 1.0,
                "drive {d}: {st:?}"
            );
            assert!(st.ci.0 <= st.ratio && st.ratio <= st.ci.1, "{st:?}");
            assert_eq!((st.runs, st.peer_runs), (6, 234));
        }
        let slow = s[7].as_ref().unwrap();
        assert!((1.10..1.20).contains(&slow.ratio), "{slow:?}");
    }

    /// The target stated in the module's head: over 1,000 noise-only fleets of 40 drives of 6
    /// runs with 5% run-to-run noise, at most 1% have any drive significant.
    #[test]
    fn noise_only_fleets_have_a_significant_drive_in_at_most_one_percent() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(2026);
        let mut with_any = 0;
        for _ in 0..1000 {
            let drives = fleet(&mut rng, 40, 6, 0.05, &[]);
            if standings(&drives).iter().flatten().any(|s| s.significant) {
                with_any += 1;
            }
        }
        eprintln!("noise-only fleets with a significant drive: {with_any} of 1000");
        assert!(with_any <= 10, "{with_any} of 1000");
    }
}
