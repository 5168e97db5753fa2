//! Tidy CSV: one row per (cell, metric) with every parameter as a column, raw SI values.

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
            ]
            .map(String::from),
        );
        let mut out = header
            .iter()
            .map(|h| field(h))
            .collect::<Vec<_>>()
            .join(",")
            + "\n";
        for c in &r.cells {
            for m in &c.metrics {
                let mut row = vec![r.campaign_id.clone(), c.host.clone(), c.cell_id.clone()];
                row.extend(
                    r.params
                        .iter()
                        .map(|p| c.params.get(p).cloned().unwrap_or_default()),
                );
                let s = &m.stats;
                row.extend([
                    m.metric.clone(),
                    m.unit.clone(),
                    s.n.to_string(),
                    c.failed.to_string(),
                ]);
                row.extend(
                    [s.median, s.mean, s.stddev, s.min, s.max, s.cv, s.mad].map(|v| v.to_string()),
                );
                let (lo, hi) = s
                    .median_ci
                    .map(|(l, h)| (l.to_string(), h.to_string()))
                    .unwrap_or_default();
                row.extend([lo, hi]);
                out.push_str(&(row.iter().map(|f| field(f)).collect::<Vec<_>>().join(",") + "\n"));
            }
        }
        out
    }
}
