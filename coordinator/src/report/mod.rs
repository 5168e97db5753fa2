//! Reports: statistics per cell from stored samples, rendered by one exporter per format.
//! Reads the store; never writes it.

mod csv;
mod json;
mod markdown;
mod table;

use std::collections::HashMap;

use indexmap::IndexMap;
use rusqlite::params;
use serde::Serialize;

use crate::store::{Result, Store, StoreError};

/// The metrics a command workload reports, in display order.
pub const COMMAND_METRICS: [&str; 3] = ["wall", "user", "sys"];

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    pub n: usize,
    pub median: f64,
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 when n < 2.
    pub stddev: f64,
    pub min: f64,
    pub max: f64,
}

impl Stats {
    pub fn of(values: &[f64]) -> Option<Stats> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let mean = v.iter().sum::<f64>() / n as f64;
        let stddev = if n < 2 {
            0.0
        } else {
            (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        };
        Some(Stats {
            n,
            median,
            mean,
            stddev,
            min: v[0],
            max: v[n - 1],
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricStats {
    pub metric: String,
    pub unit: String,
    #[serde(flatten)]
    pub stats: Stats,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellReport {
    pub cell_id: String,
    pub host: String,
    pub params: IndexMap<String, String>,
    pub metrics: Vec<MetricStats>,
    /// Measure steps of this cell that failed (they have no samples).
    pub failed: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    pub host: String,
    pub step: String,
    pub repetition: u32,
    pub error: String,
    pub stderr_tail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub campaign_id: String,
    pub name: String,
    pub state: String,
    pub params: Vec<String>,
    pub repeat: u32,
    pub cells: Vec<CellReport>,
    pub steps_failed: u32,
    /// The first few failures, for the reader to act on.
    pub failures: Vec<Failure>,
    /// Plans an agent refused to run (nothing of them ran): (host, reason).
    pub refused: Vec<Refusal>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refusal {
    pub host: String,
    pub reason: String,
}

/// How many failures a report spells out.
const MAX_FAILURES_SHOWN: usize = 5;

impl Report {
    pub fn load(store: &Store, campaign_id: &str) -> Result<Report> {
        store.read(|c| {
            let (name, state, params, repeat): (String, String, String, u32) = c
                .query_row("SELECT name, state, params, repeat FROM campaigns WHERE id = ?1", [campaign_id], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })
                .map_err(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => StoreError::NoCampaign(campaign_id.to_string()),
                    e => e.into(),
                })?;
            // Steps are found through their plans (the steps table is indexed by plan only).
            let mut values: HashMap<i64, IndexMap<String, (String, Vec<f64>)>> = HashMap::new();
            let mut stmt = c.prepare(
                "SELECT st.cell, sa.metric, sa.unit, sa.value FROM plans p JOIN steps st ON st.plan_id = p.id
                 JOIN samples sa ON sa.step = st.n WHERE p.campaign_id = ?1 AND sa.value IS NOT NULL
                 ORDER BY st.cell, st.repetition",
            )?;
            let rows = stmt.query_map([campaign_id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, f64>(3)?)))?;
            for row in rows {
                let (cell, metric, unit, value) = row?;
                let by_metric = values.entry(cell).or_insert_with(|| {
                    COMMAND_METRICS.iter().map(|m| (m.to_string(), ("s".to_string(), Vec::new()))).collect()
                });
                by_metric.entry(metric).or_insert_with(|| (unit, Vec::new())).1.push(value);
            }
            let mut failed: HashMap<i64, u32> = HashMap::new();
            let mut stmt = c.prepare(
                "SELECT st.cell, COUNT(DISTINCT st.repetition) FROM plans p JOIN steps st ON st.plan_id = p.id
                 WHERE p.campaign_id = ?1 AND st.kind = 'measure' AND st.state = 'failed' GROUP BY st.cell",
            )?;
            for row in stmt.query_map([campaign_id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, u32>(1)?)))? {
                let (cell, n) = row?;
                failed.insert(cell, n);
            }
            let mut cells = Vec::new();
            let mut stmt = c.prepare("SELECT n, id, host, params FROM cells WHERE campaign_id = ?1 ORDER BY host, idx")?;
            let rows = stmt.query_map([campaign_id], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, String>(3)?))
            })?;
            for row in rows {
                let (n, cell_id, host, params) = row?;
                let metrics = values
                    .remove(&n)
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|(metric, (unit, values))| Some(MetricStats { metric, unit, stats: Stats::of(&values)? }))
                    .collect();
                let failed = failed.get(&n).copied().unwrap_or(0);
                cells.push(CellReport { cell_id, host, params: serde_json::from_str(&params)?, metrics, failed });
            }
            let steps_failed: u32 = c.query_row(
                "SELECT COUNT(*) FROM (SELECT DISTINCT s.plan_id, s.step_index FROM steps s JOIN plans p ON p.id = s.plan_id
                 WHERE p.campaign_id = ?1 AND s.state = 'failed')",
                [campaign_id],
                |r| r.get(0),
            )?;
            let mut stmt = c.prepare(
                "SELECT s.host, s.kind, s.repetition, s.error, s.stderr_tail FROM steps s JOIN plans p ON p.id = s.plan_id
                 WHERE p.campaign_id = ?1 AND s.state = 'failed' ORDER BY s.finished_unix_ns LIMIT ?2",
            )?;
            let failures = stmt
                .query_map(params![campaign_id, MAX_FAILURES_SHOWN as i64], |r| {
                    Ok(Failure { host: r.get(0)?, step: r.get(1)?, repetition: r.get(2)?, error: r.get(3)?, stderr_tail: r.get(4)? })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let mut stmt = c.prepare("SELECT host, COALESCE(error, '') FROM plans WHERE campaign_id = ?1 AND state = 'refused' ORDER BY host")?;
            let refused = stmt
                .query_map([campaign_id], |r| Ok(Refusal { host: r.get(0)?, reason: r.get(1)? }))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(Report {
                refused,
                schema_version: 1,
                campaign_id: campaign_id.to_string(),
                name,
                state,
                params: serde_json::from_str(&params)?,
                repeat,
                cells,
                steps_failed,
                failures,
            })
        })
    }
}

/// One exporter per output format.
pub trait Exporter {
    fn render(&self, report: &Report) -> String;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Markdown,
    Json,
    Csv,
}

impl Format {
    pub fn parse(s: &str) -> Option<Format> {
        <Format as clap::ValueEnum>::from_str(s, true).ok()
    }

    pub fn exporter(self) -> Box<dyn Exporter> {
        match self {
            Format::Table => Box::new(table::Table),
            Format::Markdown => Box::new(markdown::Markdown),
            Format::Json => Box::new(json::Json),
            Format::Csv => Box::new(csv::Csv),
        }
    }
}

/// A value with its unit scaled for people: 0.0123 s → "12.30 ms".
pub fn human(value: f64, unit: &str) -> String {
    match unit {
        "s" => {
            let a = value.abs();
            if a >= 1.0 || a == 0.0 {
                format!("{value:.3} s")
            } else if a >= 1e-3 {
                format!("{:.2} ms", value * 1e3)
            } else {
                format!("{:.1} µs", value * 1e6)
            }
        }
        "B" => {
            let a = value.abs();
            if a >= 1024.0 * 1024.0 * 1024.0 {
                format!("{:.1} GiB", value / (1024.0 * 1024.0 * 1024.0))
            } else if a >= 1024.0 * 1024.0 {
                format!("{:.1} MiB", value / (1024.0 * 1024.0))
            } else if a >= 1024.0 {
                format!("{:.1} KiB", value / 1024.0)
            } else {
                format!("{value:.0} B")
            }
        }
        u => format!("{value:.4} {u}"),
    }
}

/// Rows shared by the markup formats: one per (cell, metric), grouped by host.
pub(crate) fn rows(report: &Report) -> (Vec<String>, Vec<(String, Vec<String>)>) {
    let mut header: Vec<String> = report.params.clone();
    header.extend(["metric", "n", "median", "mean ± stddev", "min", "max"].map(String::from));
    let mut out = Vec::new();
    for cell in &report.cells {
        for (i, m) in cell
            .metrics
            .iter()
            // Peak RSS is in JSON and CSV; in tables it is noise for most workloads.
            .filter(|m| m.metric != "max_rss")
            .enumerate()
        {
            let mut row: Vec<String> = report
                .params
                .iter()
                .map(|p| {
                    if i == 0 {
                        cell.params.get(p).cloned().unwrap_or_else(|| "-".into())
                    } else {
                        String::new()
                    }
                })
                .collect();
            let s = &m.stats;
            let n = if cell.failed > 0 {
                format!("{} ({} failed)", s.n, cell.failed)
            } else {
                s.n.to_string()
            };
            row.extend([
                m.metric.clone(),
                n,
                human(s.median, &m.unit),
                format!("{} ± {}", human(s.mean, &m.unit), human(s.stddev, &m.unit)),
                human(s.min, &m.unit),
                human(s.max, &m.unit),
            ]);
            out.push((cell.host.clone(), row));
        }
        if cell.metrics.is_empty() {
            let mut row: Vec<String> = report
                .params
                .iter()
                .map(|p| cell.params.get(p).cloned().unwrap_or_default())
                .collect();
            row.extend([
                "-".into(),
                format!("0 ({} failed)", cell.failed),
                "".into(),
                "".into(),
                "".into(),
                "".into(),
            ]);
            out.push((cell.host.clone(), row));
        }
    }
    (header, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_match_hand_computed_values() {
        let s = Stats::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.n, 8);
        assert_eq!(s.median, 4.5);
        assert_eq!(s.mean, 5.0);
        // Sample stddev: sqrt(32/7)
        assert!((s.stddev - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!((s.min, s.max), (2.0, 9.0));
        let one = Stats::of(&[3.0]).unwrap();
        assert_eq!((one.median, one.stddev), (3.0, 0.0));
        assert!(Stats::of(&[]).is_none());
    }

    #[test]
    fn human_units() {
        assert_eq!(human(1.5, "s"), "1.500 s");
        assert_eq!(human(0.0123, "s"), "12.30 ms");
        assert_eq!(human(0.0000123, "s"), "12.3 µs");
        assert_eq!(human(2048.0, "B"), "2.0 KiB");
    }
}
