//! The series-as-a-whole check at scale (issue 50): a series of 200 runs × 50 cells, each
//! line's medians searched for steps and ramps (`report::history::drift_of`: E-Divisive with
//! a t-test, Mann–Kendall with Theil–Sen) and every run set against its recent runs'
//! spread (`judge_runs`). Pure computation over lines already read: reading the runs'
//! reports is `platter history`'s and measured with it. Run:
//! `cargo bench -p platter --bench drift_scale` (`-- RUNS CELLS ROUNDS` to change the size).
//!
//! The lines are noise (2% from run to run) with, on every fifth cell, a step of 10% at run
//! 120 and, on every seventh, a ramp of 0.5% a run over the last 60 runs: the search then
//! splits and tries stretches as it would on a real series, not only on flat ones. Prints
//! the best and the median of the rounds, and what was found (so nothing is optimised out).

use std::time::Instant;

use platter::report::history::{drift_of, judge_runs, Flag, Line, Point, Run, Since};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let runs = args.first().copied().unwrap_or(200);
    let cells = args.get(1).copied().unwrap_or(50);
    let rounds = args.get(2).copied().unwrap_or(5);
    let mut state: u64 = 50;
    let mut normal = || {
        let mut uniform = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let (u1, u2) = (uniform(), uniform());
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    };
    let series: Vec<Run> = (1..=runs)
        .map(|i| Run {
            campaign_id: format!("c-{i}"),
            submitted_unix_ms: i as i64,
            labels: Default::default(),
        })
        .collect();
    let lines: Vec<Line> = (0..cells)
        .map(|c| Line {
            host: "h1".into(),
            cell: format!("cell={c}"),
            unit: "s".into(),
            points: (0..runs)
                .map(|r| {
                    let step = if c % 5 == 0 && r >= 120 { 1.10 } else { 1.0 };
                    let ramp = if c % 7 == 0 && r + 60 >= runs {
                        1.005f64.powi((r + 60 - runs) as i32)
                    } else {
                        1.0
                    };
                    let median = 0.05 * step * ramp * (0.02 * normal()).exp();
                    Point {
                        campaign_id: format!("c-{}", r + 1),
                        n: 8,
                        median,
                        median_ci: Some((median * 0.99, median * 1.01)),
                        median_ci_level: Some(0.9922),
                        // What `since_previous` gives: the shift against the run before.
                        since_previous: (r > 0).then(|| {
                            Since::against(
                                format!("c-{r}"),
                                0.0,
                                Some((-1.0, 1.0)),
                                Some(0.95),
                                Some(1.0),
                            )
                        }),
                    }
                })
                .collect(),
            drift: Vec::new(),
        })
        .collect();
    let mut times = Vec::new();
    let mut found = (0, 0);
    for _ in 0..rounds {
        let mut judged = lines.clone();
        let start = Instant::now();
        for line in &mut judged {
            judge_runs(line, 3.0);
            line.drift = drift_of(line, &series, 3.0);
        }
        times.push(start.elapsed().as_secs_f64());
        found = (
            judged.iter().map(|l| l.drift.len()).sum::<usize>(),
            judged
                .iter()
                .flat_map(|l| &l.drift)
                .filter(|d| d.flag != Flag::None)
                .count(),
        );
    }
    times.sort_by(f64::total_cmp);
    println!(
        "drift_scale: {runs} runs × {cells} cells: best {:.3} s, median {:.3} s of {rounds} rounds \
         ({} steps and ramps, {} flagged)",
        times[0],
        times[times.len() / 2],
        found.0,
        found.1
    );
}
