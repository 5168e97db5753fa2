//! Tidy CSV: one row per (cell, metric) with every parameter as a column, raw SI values.
//! A row summarizes the repetitions (n, median with its interval and the interval's
//! coverage `median_ci_level`, mean with its Student-t interval, …), except the merged
//! latency rows (`latency.p99`: every operation of every run), which carry `value`
//! and `ops` only; each run's own percentile is the `latency.p99 per run` row.

use super::{Exporter, Report};

pub struct Csv;

/// RFC 4180 quoting; small enough not to need a crate.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl Exporter for Csv {
    fn render(&self, r: &Report) -> String {
        let mut header = vec!["campaign".to_string(), "host".into(), "cell".into()];
        header.extend(r.params.iter().cloned());
        header.extend(
            [
                "metric",
                "unit",
                "n",
                "failed",
                "median",
                "mean",
                "stddev",
                "min",
                "max",
                "cv",
                "mad",
                "median_ci_low",
                "median_ci_high",
                "median_ci_level",
                "mean_ci_student_t_low",
                "mean_ci_student_t_high",
                "value",
                "ops",
            ]
            .map(String::from),
        );
        let mut out = header
            .iter()
            .map(|h| field(h))
            .collect::<Vec<_>>()
            .join(",")
            + "\n";
        let line =
            |row: Vec<String>| row.iter().map(|f| field(f)).collect::<Vec<_>>().join(",") + "\n";
        let opt = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
        for c in &r.cells {
            let lead = |metric: &str, unit: &str| {
                let mut row = vec![r.campaign_id.clone(), c.host.clone(), c.cell_id.clone()];
                row.extend(
                    r.params
                        .iter()
                        .map(|p| c.params.get(p).cloned().unwrap_or_default()),
                );
                row.extend([metric.to_string(), unit.to_string()]);
                row
            };
            for m in &c.metrics {
                // The merged value first, under the name thresholds and tables use.
                let merged = m.metric.strip_suffix(super::PER_RUN).and_then(|name| {
                    let l = c.latency.as_ref()?;
                    Some((name, l.get(name)?, l))
                });
                if let Some((name, value, l)) = merged {
                    let mut row = lead(name, "s");
                    row.extend([l.runs.to_string(), c.failed.to_string()]);
                    row.extend(std::iter::repeat_n(String::new(), 12));
                    row.extend([value.to_string(), l.ops.to_string()]);
                    out.push_str(&line(row));
                }
                let s = &m.stats;
                let mut row = lead(&m.metric, &m.unit);
                row.extend([s.n.to_string(), c.failed.to_string()]);
                row.extend(
                    [s.median, s.mean, s.stddev, s.min, s.max, s.cv, s.mad].map(|v| v.to_string()),
                );
                row.extend([
                    opt(s.median_ci.map(|c| c.0)),
                    opt(s.median_ci.map(|c| c.1)),
                    opt(s.median_ci_level),
                    opt(s.mean_ci_student_t.map(|c| c.0)),
                    opt(s.mean_ci_student_t.map(|c| c.1)),
                    String::new(),
                    String::new(),
                ]);
                out.push_str(&line(row));
            }
        }
        out
    }
}
