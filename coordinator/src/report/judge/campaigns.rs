//! `platter compare`: two campaigns (or two hosts of them) cell by cell.

use serde::Serialize;

use super::comparisons::{context, judge_family, pending, Compared, UnmatchedCell};
use super::JudgedComparison;
use crate::report::{CellReport, Report};

/// What pairs a cell of one side with its counterpart on the other: a host ("" across
/// hosts), parameters, and a drive's position on its host.
type PairKey = (String, Vec<(String, String)>, usize);

/// `platter compare A B`: what it compared and what it could not.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CampaignComparison {
    /// Campaign A's id.
    pub baseline: String,
    /// Campaign B's id.
    pub candidate: String,
    pub metric: String,
    /// Each cell of B that A has too, decided together with Holm's correction; a row with
    /// `compared: false` when either side has no usable values of the metric.
    pub rows: Vec<JudgedComparison>,
    /// Cells of A without a cell of the same host and parameters in B, and the reverse.
    pub only_in_a: Vec<UnmatchedCell>,
    pub only_in_b: Vec<UnmatchedCell>,
    /// B against A over every cell compared with a test, asked once: one question, so a
    /// difference too small for any cell alone after Holm can still be found over all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub together: Option<Together>,
    /// The rows that are estimates (too few runs for their Holm step), said once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undecided: Option<crate::stats::Undecided>,
}

/// One verdict over several cells: each cell's Mann–Whitney test combined by Stouffer's
/// method (`stats::stouffer`), signed by its ratio, so effects in opposite directions
/// cancel; one test, at [`crate::stats::ALPHA`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Together {
    pub cells: usize,
    pub p_value: f64,
    pub significant: bool,
    /// The geometric mean of the cells' ratios, B over A.
    pub ratio: f64,
}

impl CampaignComparison {
    /// Fills what is worked out from the rows alone: the verdict over all cells and the
    /// estimates said once. Made where the rows are judged and again where a client reads
    /// them off the wire, so both print the same.
    pub fn with_summary(mut self) -> CampaignComparison {
        let tested: Vec<(f64, f64)> = self
            .rows
            .iter()
            .filter(|r| r.compared && r.row.ratio > 0.0 && r.row.ratio.is_finite())
            .filter_map(|r| Some((r.p_value?, r.row.ratio.ln())))
            .collect();
        self.together = (tested.len() > 1)
            .then(|| crate::stats::stouffer(&tested))
            .flatten()
            .map(|p| Together {
                cells: tested.len(),
                p_value: p,
                significant: p <= crate::stats::ALPHA,
                ratio: (tested.iter().map(|t| t.1).sum::<f64>() / tested.len() as f64).exp(),
            });
        self.undecided = crate::stats::Undecided::of(
            self.rows
                .iter()
                .filter(|r| r.p_value.is_some())
                .map(|r| r.too_few_runs),
        );
        self
    }

    /// Cells that were not compared: without a counterpart, or without values.
    pub fn incomplete(&self) -> usize {
        self.only_in_a.len()
            + self.only_in_b.len()
            + self.rows.iter().filter(|r| !r.compared).count()
    }
}

/// A side of `platter compare`: a campaign (id, or name for its latest run), narrowed to
/// one host by `@HOST` (`fleet-fsync@rc66`).
pub fn split_side(reference: &str) -> (&str, Option<&str>) {
    match reference.rsplit_once('@') {
        Some((campaign, host)) if !campaign.is_empty() && !host.is_empty() => {
            (campaign, Some(host))
        }
        _ => (reference, None),
    }
}

/// Checks that `host` ran cells in `report`, or says which hosts did.
pub fn check_side_host(report: &Report, host: Option<&str>) -> Result<(), String> {
    let Some(host) = host else { return Ok(()) };
    if report.cells.iter().any(|c| c.host == host) {
        return Ok(());
    }
    let mut hosts: Vec<&str> = report.cells.iter().map(|c| c.host.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    Err(format!(
        "campaign {} ({}) ran nothing on host {host}; its hosts: {}",
        report.name,
        report.campaign_id,
        hosts.join(", ")
    ))
}

/// `platter compare A B`: every cell of `b` against the cell of `a` with the same host
/// and parameters (the same matrix run on another day or fleet), on `metric`, decided
/// together with Holm's correction (the verdict is in `significant` and `text`); the
/// cells of either without a counterpart in the other are listed.
pub fn compare_campaigns(a: &Report, b: &Report, metric: &str) -> CampaignComparison {
    compare_sides((a, None), (b, None), metric)
}

/// `platter compare A@HOST B@HOST2`: the cells of `b` on its host against the cells of `a`
/// on its host with the same parameters (a device matched by its position on its host, as
/// in `report: { baseline: { host } }`) — two hosts or drives of one campaign, or of two.
/// Without hosts, a cell faces the cell of the same host and parameters.
pub fn compare_sides(
    (a, a_host): (&Report, Option<&str>),
    (b, b_host): (&Report, Option<&str>),
    metric: &str,
) -> CampaignComparison {
    let by_host = a_host.is_some() || b_host.is_some();
    let a_cells: Vec<&CellReport> = a
        .cells
        .iter()
        .filter(|c| a_host.is_none_or(|h| c.host == h))
        .collect();
    let b_cells: Vec<&CellReport> = b
        .cells
        .iter()
        .filter(|c| b_host.is_none_or(|h| c.host == h))
        .collect();
    // What pairs a cell with its counterpart, worked out once per cell and looked up in a
    // map (a series' history compares runs of hundreds of cells, tens of runs at a time).
    // Across hosts: the parameters without the device, and the device's position on its
    // host (its n-th drive in the order its cells name them). Else the host and every
    // parameter, in a fixed order (a cell's parameters match whatever their order).
    let keys = |cells: &[&CellReport]| -> Vec<PairKey> {
        let mut devices: std::collections::HashMap<&str, Vec<&str>> = Default::default();
        for x in cells {
            let d = x.device().unwrap_or("");
            let seen = devices.entry(x.host.as_str()).or_default();
            if !seen.contains(&d) {
                seen.push(d);
            }
        }
        cells
            .iter()
            .map(|c| {
                if by_host {
                    let d = c.device().unwrap_or("");
                    let position = devices[c.host.as_str()]
                        .iter()
                        .position(|x| *x == d)
                        .unwrap_or(0);
                    let params = c.configuration().map(|(k, v)| (k.clone(), v.clone()));
                    (String::new(), params.collect(), position)
                } else {
                    let mut params: Vec<(String, String)> = c
                        .params
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    params.sort_unstable();
                    (c.host.clone(), params, 0)
                }
            })
            .collect()
    };
    let (a_keys, b_keys) = (keys(&a_cells), keys(&b_cells));
    // The first cell of a side with a key, as a scan in order would find it.
    let mut a_of = std::collections::HashMap::new();
    for (i, k) in a_keys.iter().enumerate() {
        a_of.entry(k).or_insert(i);
    }
    let b_has: std::collections::HashSet<_> = b_keys.iter().collect();
    let side = |r: &Report, host: Option<&str>| match host {
        Some(h) => format!("{}@{h}", r.campaign_id),
        None => r.campaign_id.clone(),
    };
    let (a_name, b_name) = (side(a, a_host), side(b, b_host));
    let mut rows = Vec::new();
    let mut only_in_b = Vec::new();
    for (cell, k) in b_cells.iter().zip(&b_keys) {
        let Some(base) = a_of.get(k).map(|&i| a_cells[i]) else {
            only_in_b.push(UnmatchedCell::of(cell));
            continue;
        };
        let label = if by_host {
            format!(
                "{} {} vs {} {}",
                b_name,
                device_of(cell),
                a_name,
                device_of(base)
            )
        } else {
            format!("{b_name} vs {a_name}")
        };
        let what = Compared {
            host: cell.host.clone(),
            context: if by_host {
                context(cell, "host", false)
            } else {
                context(cell, "", true)
            },
            key: if by_host { "host" } else { "campaign" }.into(),
            baseline: a_name.clone(),
            candidate: b_name.clone(),
        };
        rows.push(pending(what, base, cell, metric, label));
    }
    let only_in_a = a_cells
        .iter()
        .zip(&a_keys)
        .filter(|(_, k)| !b_has.contains(k))
        .map(|(c, _)| UnmatchedCell::of(c))
        .collect();
    CampaignComparison {
        baseline: a_name,
        candidate: b_name,
        metric: metric.to_string(),
        rows: judge_family(rows),
        only_in_a,
        only_in_b,
        together: None,
        undecided: None,
    }
    .with_summary()
}

fn device_of(c: &CellReport) -> String {
    c.device().unwrap_or_default().to_string()
}
