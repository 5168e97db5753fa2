//! Judgements on a report, pure functions of the cells and the campaign's `report:`
//! settings, one module per job: `comparisons` of cells against a baseline (Holm over the
//! report's family), `qualification` thresholds (PASS/FAIL per cell, device and host), the
//! `pivot`, fleet `outliers`, and `campaigns` (`platter compare`: two campaigns or two hosts
//! cell by cell). This module holds what they share: how a cell's value of a metric is read.
//!
//! A name means one number everywhere: `latency.p99` (p50, p90, p99.9, max) is the
//! percentile of every operation of every repetition (the merged histograms) in
//! thresholds, pivots, comparisons and fleet outliers, as in the tables.

mod campaigns;
mod comparisons;
mod outliers;
mod pivot;
mod qualification;
#[cfg(test)]
mod tests;

pub use campaigns::{
    check_side_host, compare_campaigns, compare_sides, split_side, CampaignComparison, Together,
};
pub use comparisons::{
    compare_cells, ComparedCells, ComparisonRow, JudgedComparison, UnmatchedCell,
};
pub use outliers::{fleet_outliers, group_of, FleetOutlier};
pub use pivot::{pivot, PivotMissing, PivotTable};
pub use qualification::{qualify, Verdict};

use crate::report::CellReport;

fn values<'a>(cell: &'a CellReport, metric: &str) -> Option<&'a [f64]> {
    cell.metrics
        .iter()
        .find(|m| m.metric == metric)
        .map(|m| m.values.as_slice())
}

/// The merged per-operation value of `metric` (`latency.p99`, …) when it is one.
fn merged(cell: &CellReport, metric: &str) -> Option<f64> {
    cell.latency.as_ref().and_then(|l| l.get(metric))
}
