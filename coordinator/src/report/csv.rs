//! Tidy CSV: one row per (cell, metric) with every parameter as a column, raw SI values.
//! A row summarizes the repetitions (n, median with its interval and the interval's
//! coverage `median_ci_level`, mean with its Student-t interval, …), except the merged
//! latency rows (`latency.p99`: every operation of every run), which carry `value`
//! and `ops` only; each run's own percentile is the `latency.p99 per run` row.

use super::{Exporter, RawSample, Report};

pub struct Csv;

/// RFC 4180 quoting; small enough not to need a crate. Every CSV platter writes uses it.
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The columns every row starts with: campaign, host, cell, then each parameter.
fn lead_header(r: &Report) -> Vec<String> {
    let mut header = vec!["campaign".to_string(), "host".into(), "cell".into()];
    header.extend(r.params.iter().cloned());
    header
}

fn lead(r: &Report, c: &super::CellReport) -> Vec<String> {
    let mut row = vec![r.campaign_id.clone(), c.host.clone(), c.cell_id.clone()];
    row.extend(
        r.params
            .iter()
            .map(|p| c.params.get(p).cloned().unwrap_or_default()),
    );
    row
}

fn line(row: &[String]) -> String {
    row.iter().map(|f| field(f)).collect::<Vec<_>>().join(",") + "\n"
}

impl Exporter for Csv {
    fn render(&self, r: &Report) -> String {
        let mut header = lead_header(r);
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
                "not_measured",
                "not_measured_reason",
            ]
            .map(String::from),
        );
        // What each cell ran on, from the run's own snapshots.
        header.extend(super::provenance::CELL_COLUMNS.map(String::from));
        let mut out = line(&header);
        let opt = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
        for c in &r.cells {
            let ran_on =
                super::provenance::cell_columns(&r.provenance, &c.host, &c.cell_id, c.device());
            let tail = |row: &mut Vec<String>, not_measured: u32, reason: &str| {
                row.extend([not_measured.to_string(), reason.to_string()]);
                row.extend(ran_on.iter().cloned());
            };
            let lead = |metric: &str, unit: &str| {
                let mut row = lead(r, c);
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
                    tail(&mut row, 0, "");
                    out.push_str(&line(&row));
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
                tail(&mut row, m.not_measured, &m.not_measured_reason);
                out.push_str(&line(&row));
            }
            for u in &c.unmeasured {
                let mut row = lead(&u.metric, &u.unit);
                row.extend(["0".to_string(), c.failed.to_string()]);
                row.extend(std::iter::repeat_n(String::new(), 14));
                tail(&mut row, u.count, &u.reason);
                out.push_str(&line(&row));
            }
        }
        out
    }
}

/// One row per stored sample, every parameter a column: the raw data behind the
/// summaries (`platter report ID --format csv-samples`, read with pandas or R).
pub struct CsvSamples;

impl Exporter for CsvSamples {
    fn render(&self, r: &Report) -> String {
        let mut header = lead_header(r);
        header.extend(
            [
                "metric",
                "unit",
                "repetition",
                "attempt",
                "started_unix_ns",
                "value",
                "missing",
            ]
            .map(String::from),
        );
        let mut out = line(&header);
        for c in &r.cells {
            let metrics = c
                .metrics
                .iter()
                .map(|m| (&m.metric, &m.unit, &m.samples))
                .chain(
                    c.unmeasured
                        .iter()
                        .map(|u| (&u.metric, &u.unit, &u.samples)),
                );
            for (metric, unit, samples) in metrics {
                for s in samples {
                    let RawSample {
                        repetition,
                        attempt,
                        value,
                        missing,
                        started_unix_ns,
                    } = s;
                    let mut row = lead(r, c);
                    // A per-run latency percentile keeps its report name (`latency.p99
                    // per run`): `latency.p99` alone is over every operation of every run.
                    row.extend([
                        metric.clone(),
                        unit.clone(),
                        repetition.to_string(),
                        attempt.to_string(),
                        started_unix_ns.to_string(),
                        value.map(|v| v.to_string()).unwrap_or_default(),
                        missing.clone(),
                    ]);
                    out.push_str(&line(&row));
                }
            }
        }
        out
    }
}
