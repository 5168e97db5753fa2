//! Bounded adaptive repetition (`repeat: { min, max, until: { metric, ci } }`).
//!
//! A campaign with it runs in rounds. Each host's first plan holds the warm-ups and
//! `min` repetitions of every cell; when a round's plan ends, the store's writer judges
//! each cell of it from the stored samples, in the same transaction that records the
//! plan's end, and queues the next round — one more repetition of each cell still
//! running — as a plan of its own. So a decision is made exactly once: a restarted or
//! replaced coordinator finds either the plan still running (no decision yet) or the
//! next round queued (the decision made), never half of it; a resent end record changes
//! nothing, and the next round's plan id is a hash of its content.
//!
//! A cell stops once the 95% interval of its `until.metric` median lies within ± `ci`
//! of the median, or at `max` repetitions. The report states which, with the interval's
//! width, from the same rule ([`judge`]).

use crate::spec::Repeat;
use crate::stats;

/// A cell's counted repetitions that ended, and its measured values of one metric: what
/// the rule judges (`verdicts_of`).
#[derive(Debug, Clone, PartialEq)]
pub struct CellMeasured {
    /// `cells.n`
    pub cell: i64,
    /// The highest counted repetition whose measure step ended.
    pub repetitions: u32,
    pub values: Vec<f64>,
}

/// Why a cell of an adaptive campaign stopped, or that it goes on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Its interval is still wider than asked, and it has not reached `max`.
    Continue,
    /// The interval of the median is within ± `pct` percent of it, at most the `ci` asked.
    Reached { pct: f64, n: usize },
    /// `max` repetitions ran; the interval was ± `pct` percent (`None`: no interval,
    /// fewer than 6 values were measured).
    HitMax { pct: Option<f64>, n: usize },
}

impl Verdict {
    /// "stopped after 7 repetitions: the 95% interval is within ±1.4% of the median
    /// (asked ±2%)".
    pub fn describe(&self, repeat: &Repeat) -> String {
        let asked = repeat.until.as_ref().map_or(0.0, |u| u.ci_pct);
        match *self {
            Verdict::Continue => "still running".into(),
            Verdict::Reached { pct, n } => format!(
                "stopped after {n} repetition(s): the 95% interval is within ±{} of the median (asked ±{asked}%)",
                pct_text(pct)
            ),
            Verdict::HitMax { pct: Some(pct), n } => format!(
                "hit max ({n} repetitions) with the 95% interval at ±{} of the median (asked ±{asked}%)",
                pct_text(pct)
            ),
            Verdict::HitMax { pct: None, n } => format!(
                "hit max ({n} repetitions) without a 95% interval (fewer than 6 values measured)"
            ),
        }
    }
}

fn pct_text(pct: f64) -> String {
    if pct < 10.0 {
        format!("{pct:.2}%")
    } else {
        format!("{pct:.1}%")
    }
}

/// How far the 95% interval of the median reaches from it, in percent of the median:
/// `None` without an interval of at least 95% coverage (fewer than 6 values) or with a
/// median of zero.
pub fn half_width_pct(values: &[f64]) -> Option<f64> {
    let s = stats::summarize(values)?;
    let (lo, hi) = s.median_ci?;
    if s.median_ci_level? < stats::CONFIDENCE || s.median == 0.0 {
        return None;
    }
    Some((s.median - lo).max(hi - s.median) / s.median.abs() * 100.0)
}

/// The rule: `values` are the cell's measured `until.metric` values of its counted
/// repetitions, `planned` how many counted repetitions it has run (measured or not).
pub fn judge(values: &[f64], planned: u32, repeat: &Repeat) -> Verdict {
    let n = values.len();
    let pct = half_width_pct(values);
    if let (Some(u), Some(p)) = (&repeat.until, pct) {
        if planned >= repeat.min && p <= u.ci_pct {
            return Verdict::Reached { pct: p, n };
        }
    }
    if planned >= repeat.max {
        return Verdict::HitMax { pct, n };
    }
    Verdict::Continue
}

/// Per cell (`cells.n`): why it stopped (or that it still runs), judged from what was
/// measured (`Store::cells_measured`, of `repeat.until.metric`).
pub fn verdicts_of(
    measured: &[CellMeasured],
    repeat: &Repeat,
) -> std::collections::HashMap<i64, Verdict> {
    measured
        .iter()
        .map(|m| (m.cell, judge(&m.values, m.repetitions, repeat)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Until;

    fn adaptive(min: u32, max: u32, ci: f64) -> Repeat {
        Repeat {
            min,
            max,
            until: Some(Until {
                metric: "wall".into(),
                ci_pct: ci,
            }),
        }
    }

    #[test]
    fn a_tight_cell_stops_at_min_a_noisy_one_at_max() {
        let r = adaptive(6, 20, 2.0);
        let tight = [1.00, 1.001, 0.999, 1.002, 0.998, 1.0];
        match judge(&tight, 6, &r) {
            Verdict::Reached { pct, n: 6 } => assert!(pct <= 2.0, "{pct}"),
            v => panic!("{v:?}"),
        }
        let noisy = [1.0, 1.5, 0.7, 1.3, 0.9, 1.2];
        assert_eq!(judge(&noisy, 6, &r), Verdict::Continue);
        match judge(&noisy, 20, &r) {
            Verdict::HitMax { pct: Some(p), n: 6 } => assert!(p > 2.0),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn no_decision_below_min_or_without_a_95_percent_interval() {
        let r = adaptive(8, 20, 50.0);
        let same = [1.0; 6];
        // Within ±0% but `min` is 8: goes on.
        assert_eq!(judge(&same, 6, &r), Verdict::Continue);
        assert!(matches!(judge(&[1.0; 8], 8, &r), Verdict::Reached { .. }));
        // Five values have no interval of 95% coverage (only 93.75%).
        let r = adaptive(2, 20, 50.0);
        assert_eq!(judge(&[1.0; 5], 5, &r), Verdict::Continue);
        assert_eq!(half_width_pct(&[1.0; 5]), None);
        assert_eq!(
            judge(&[1.0; 3], 20, &r),
            Verdict::HitMax { pct: None, n: 3 }
        );
    }

    #[test]
    fn half_width_is_the_farther_end_of_the_interval() {
        // n = 6: the interval is (min, max), k = 1.
        let v = [9.0, 10.0, 10.0, 10.0, 10.0, 12.0];
        let p = half_width_pct(&v).unwrap();
        assert!((p - 20.0).abs() < 1e-9, "{p}");
    }
}
