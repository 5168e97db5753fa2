//! Steady state as SNIA's Solid State Storage Performance Test Specification (PTS) states
//! it (issue 48): after each round of the stimulus, the last `window` rounds of the tracked
//! variable are a steady window when
//!
//! * their range (max − min) is at most `range_pct` of their average (PTS: 20%), and
//! * the excursion of their least-squares line over the window (|slope| × (window − 1),
//!   the line's rise from the window's first round to its last) is at most `slope_pct` of
//!   their average (PTS: 10%).
//!
//! The rounds run until a window is steady or `max_rounds` ran (PTS: 25), and only the
//! window's rounds count as results. A drift of 5% a round has a range of about 20% over
//! five rounds, which the range alone would let through, but an excursion of about 20%,
//! which the slope does not; PTS passes a drift up to about 2.5% a round (excursion ≈ 10%).

pub use crate::spec::SteadyRule;

/// How a window of rounds measures against the rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Its first and last round, counted from 1.
    pub first: usize,
    pub last: usize,
    pub average: f64,
    /// max − min, in percent of the average.
    pub range_pct: f64,
    /// The least-squares line's excursion over the window, in percent of the average.
    pub excursion_pct: f64,
    /// That line's slope, in the value's unit per round (it passes through the window's
    /// middle round at its average).
    pub slope: f64,
}

impl Window {
    fn is_steady(&self, rule: &SteadyRule) -> bool {
        self.range_pct <= rule.range_pct && self.excursion_pct <= rule.slope_pct
    }
}

/// Where the rounds stand after the last one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Steady {
    /// The last `window` rounds are steady: stop, and count these rounds.
    Reached(Window),
    /// Not yet (fewer rounds than a window, or the latest window is not steady): run
    /// another round. `latest` is the latest full window, if there is one.
    Continue { latest: Option<Window> },
    /// `max_rounds` ran without a steady window; `latest` is how the last one measured.
    NotReached {
        rounds: usize,
        latest: Option<Window>,
    },
}

/// The window of rounds `first..=last` (from 1) of `values`, measured; `None` for a
/// window with a non-finite value or an average of zero, which no rule can call steady.
pub fn window(values: &[f64], first: usize, last: usize) -> Option<Window> {
    let ys = values.get(first.checked_sub(1)?..last)?;
    if ys.len() < 2 || ys.iter().any(|y| !y.is_finite()) {
        return None;
    }
    let n = ys.len() as f64;
    let average = ys.iter().sum::<f64>() / n;
    if average == 0.0 {
        return None;
    }
    let (lo, hi) = ys
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &y| {
            (lo.min(y), hi.max(y))
        });
    // Least squares over x = 0..n−1: slope = Σ(x − x̄)(y − ȳ) / Σ(x − x̄)².
    let x_mean = (n - 1.0) / 2.0;
    let (sxy, sxx) = ys
        .iter()
        .enumerate()
        .fold((0.0, 0.0), |(sxy, sxx), (i, y)| {
            let dx = i as f64 - x_mean;
            (sxy + dx * (y - average), sxx + dx * dx)
        });
    let slope = sxy / sxx;
    Some(Window {
        first,
        last,
        average,
        range_pct: (hi - lo) / average.abs() * 100.0,
        excursion_pct: (slope * (n - 1.0)).abs() / average.abs() * 100.0,
        slope,
    })
}

/// The rule after `values.len()` rounds (each round's tracked value, in order).
pub fn judge(values: &[f64], rule: &SteadyRule) -> Steady {
    let rounds = values.len();
    let latest = (rounds >= rule.window)
        .then(|| window(values, rounds + 1 - rule.window, rounds))
        .flatten();
    match latest {
        Some(w) if w.is_steady(rule) => Steady::Reached(w),
        _ if rounds >= rule.max_rounds => Steady::NotReached { rounds, latest },
        _ => Steady::Continue { latest },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rounds as they would run: the rule judged after each one, until it stops.
    fn run(values: &[f64], rule: &SteadyRule) -> Steady {
        for n in 1..=values.len() {
            match judge(&values[..n], rule) {
                Steady::Continue { .. } => continue,
                stop => return stop,
            }
        }
        judge(values, rule)
    }

    /// A value that falls from 3× to 1× over `settle` rounds, then stays, with ±`noise`
    /// (fraction) of deterministic jitter.
    fn settling(rounds: usize, settle: usize, noise: f64) -> Vec<f64> {
        (0..rounds)
            .map(|i| {
                let level = if i < settle {
                    3.0 - 2.0 * i as f64 / settle as f64
                } else {
                    1.0
                };
                // A fixed pattern of jitter within ±noise, not a trend.
                let jitter = [0.0, 1.0, -1.0, 0.5, -0.5, 0.8, -0.8][i % 7] * noise;
                level * (1.0 + jitter)
            })
            .collect()
    }

    #[test]
    fn a_value_that_settles_is_steady_in_the_window_right_after() {
        for settle in [3, 6, 10, 15] {
            let values = settling(25, settle, 0.03);
            let Steady::Reached(w) = run(&values, &SteadyRule::PTS) else {
                panic!(
                    "settles after {settle} rounds: {:?}",
                    run(&values, &SteadyRule::PTS)
                );
            };
            // The first round at the level is round settle+1; the window may start one
            // round before it (the last step down is within the range) or at it.
            let at_level = settle + 1;
            assert!(
                w.first + 1 >= at_level && w.first <= at_level + 1,
                "settled at round {at_level}, window {w:?}"
            );
            assert_eq!(w.last - w.first + 1, 5);
        }
    }

    #[test]
    fn a_drift_of_five_percent_a_round_is_never_steady() {
        for direction in [1.05, 1.0 / 1.05] {
            let values: Vec<f64> = (0..25).map(|i| 100.0 * f64::powi(direction, i)).collect();
            let w = window(&values, 1, 5).unwrap();
            // The range alone would let it through; the slope does not.
            assert!(w.range_pct <= 20.5, "{w:?}");
            assert!(w.excursion_pct > 18.0, "{w:?}");
            assert_eq!(
                run(&values, &SteadyRule::PTS),
                Steady::NotReached {
                    rounds: 25,
                    latest: window(&values, 21, 25)
                }
            );
        }
    }

    #[test]
    fn a_drift_of_two_percent_a_round_passes_as_in_pts() {
        let values: Vec<f64> = (0..25).map(|i| 100.0 * f64::powi(1.02, i)).collect();
        let Steady::Reached(w) = run(&values, &SteadyRule::PTS) else {
            panic!("2% a round is within PTS's excursion");
        };
        assert_eq!((w.first, w.last), (1, 5));
        assert!((w.excursion_pct - 7.9).abs() < 0.2, "{w:?}");
    }

    #[test]
    fn noisy_but_level_is_steady_at_rounds_one_to_five() {
        let values = settling(25, 0, 0.08);
        let Steady::Reached(w) = run(&values, &SteadyRule::PTS) else {
            panic!("±8% around a level");
        };
        assert_eq!((w.first, w.last), (1, 5));
        assert!(w.range_pct > 10.0 && w.range_pct <= 20.0, "{w:?}");
    }

    #[test]
    fn too_noisy_is_not_steady_and_says_how_far() {
        let values = settling(25, 0, 0.15);
        let Steady::NotReached { rounds, latest } = run(&values, &SteadyRule::PTS) else {
            panic!("±15% swings past a 20% range");
        };
        assert_eq!(rounds, 25);
        assert!(latest.unwrap().range_pct > 20.0);
    }

    #[test]
    fn fewer_rounds_than_a_window_go_on_and_odd_values_are_never_steady() {
        let rule = SteadyRule::PTS;
        assert_eq!(
            judge(&[1.0, 1.0, 1.0], &rule),
            Steady::Continue { latest: None }
        );
        assert_eq!(
            judge(&[0.0; 5], &rule),
            Steady::Continue { latest: None },
            "an average of zero"
        );
        let with_nan = [1.0, 1.0, f64::NAN, 1.0, 1.0];
        assert_eq!(judge(&with_nan, &rule), Steady::Continue { latest: None });
        assert_eq!(window(&[1.0, 2.0], 0, 2), None, "rounds count from 1");
        assert_eq!(window(&[1.0, 2.0], 2, 3), None, "past the last round");
    }

    #[test]
    fn a_line_through_the_window_measures_its_rise() {
        // y = 10, 11, 12, 13, 14: slope 1, excursion 4 of an average of 12.
        let w = window(&[10.0, 11.0, 12.0, 13.0, 14.0], 1, 5).unwrap();
        assert!((w.excursion_pct - 100.0 * 4.0 / 12.0).abs() < 1e-9, "{w:?}");
        assert!((w.range_pct - 100.0 * 4.0 / 12.0).abs() < 1e-9, "{w:?}");
        // A level window with one high round: range but almost no slope.
        let w = window(&[10.0, 10.0, 12.0, 10.0, 10.0], 1, 5).unwrap();
        assert!(w.excursion_pct.abs() < 1e-9, "{w:?}");
    }
}
