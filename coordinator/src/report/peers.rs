//! Each drive against its identical peers across the fleet (`platter peers MODEL`, the
//! console's model page, `platter qualification`): the drives of one model and firmware
//! measured on the same workload and configuration, in the same state, whatever the
//! campaign, host or night. A drive's evidence is one median per run; its standing is
//! `stats::peers` (Hodges–Lehmann against the rest of the group, Holm over the group's
//! drives), and it is flagged when significant **and** slower than `max_slower`.
//!
//! The rows come from `drive_results`, written here from each done campaign's report
//! (`index`): which drive a cell measured is read from the campaign's own provenance
//! snapshots, keyed as the ledger keys it.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::history::larger_is_worse;
use super::Report;
use crate::stats::peers::{standings, standings_against, Standing};
use crate::store::error::Result;
use crate::store::peers::{DriveResult, PeerQuery, PeerRun, PeerRuns};
use crate::store::Store;

/// Fewer drives than this in a group cannot show anything: "too few peers to judge".
pub const MIN_PEERS: usize = 5;

/// The practical threshold without `qualify: { peers: { max_slower } }`: 10% slower.
pub const DEFAULT_MAX_SLOWER_PCT: f64 = 10.0;

/// `platter peers MODEL`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peers {
    pub model: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub firmware: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub series: String,
    /// The threshold a significant drive must also pass to be flagged, in percent.
    pub max_slower_pct: f64,
    /// The family-wise error of each group (Holm over its drives).
    pub alpha: f64,
    pub groups: Vec<PeerGroup>,
}

/// Drives of one model and firmware on one workload, configuration, metric and state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerGroup {
    pub firmware: String,
    /// The measured workload in a few words (`fio --rw=randwrite --bs=4k …`).
    pub workload: String,
    /// The configuration but host and device (`bs=4k rw=randwrite`).
    pub configuration: String,
    pub metric: String,
    pub unit: String,
    /// "" (no defined state asked) or "steady".
    pub state: String,
    /// The median of the drives' medians, and the band the middle 80% of them span.
    pub median: f64,
    pub band: (f64, f64),
    /// Why the group's drives are not judged ("too few peers to judge: 3 drives"), "" when
    /// they are.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub not_judged: String,
    /// A controller behind which the drives differ as a whole ("7 of 7 drives behind
    /// mpt3sas are 12% slower than behind ahci: the controller, not the drives").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub controllers: Vec<String>,
    pub drives: Vec<PeerDrive>,
    /// Drives of the model measured on this workload and configuration that are not peers
    /// here, and why ("no steady state").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_compared: Vec<String>,
}

/// One drive of a group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerDrive {
    pub drive: String,
    pub hosts: Vec<String>,
    /// The controller chain it was measured behind (its latest run's).
    pub controller: String,
    /// Its runs' medians, oldest first, and their median with its interval.
    pub runs: Vec<f64>,
    pub median: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci: Option<(f64, f64)>,
    /// Against the rest of the group (or of its controller's drives, when the controller
    /// differs as a whole); `None` when the group is not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standing: Option<Standing>,
    /// How much worse than its peers, in percent (negative: better), by the metric's
    /// direction; `None` for a metric with none (counts, sizes) or not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slower_pct: Option<f64>,
    /// Significant and slower than the threshold: the odd drive out.
    pub outlier: bool,
}

impl PeerDrive {
    /// "×1.15 (1.09–1.22, 99.9%) 15.0% slower OUTLIER", "×0.99 (0.95–1.03, 99%)".
    pub fn standing_text(&self) -> String {
        let Some(s) = &self.standing else {
            return "not judged".into();
        };
        let mut t = format!(
            "×{:.3} ({:.3}–{:.3}, {})",
            s.ratio,
            s.ci.0,
            s.ci.1,
            crate::stats::level_with_sign(s.level)
        );
        if let Some(p) = self.slower_pct {
            if s.significant {
                t.push_str(&format!(
                    " {:.1}% {}",
                    p.abs(),
                    if p > 0.0 { "slower" } else { "faster" }
                ));
            } else {
                t.push_str(" like its peers");
            }
        }
        if self.outlier {
            t.push_str(" OUTLIER");
        }
        t
    }
}

impl Peers {
    /// The drives flagged in any group, by id, once each.
    pub fn outliers(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for d in self.groups.iter().flat_map(|g| &g.drives) {
            if d.outlier && !out.contains(&d.drive.as_str()) {
                out.push(&d.drive);
            }
        }
        out
    }

    /// "12 drives in 2 groups; 1 outlier: INTEL …/BTWL5123".
    pub fn headline(&self) -> String {
        let mut drives: Vec<&str> = Vec::new();
        for d in self.groups.iter().flat_map(|g| &g.drives) {
            if !drives.contains(&d.drive.as_str()) {
                drives.push(&d.drive);
            }
        }
        let outliers = self.outliers();
        let tail = match outliers.len() {
            0 => "no outlier".to_string(),
            1 => format!("1 outlier: {}", outliers[0]),
            n => format!("{n} outliers: {}", outliers.join(", ")),
        };
        format!(
            "{} drive(s) of {} in {} peer group(s); {tail}",
            drives.len(),
            self.model,
            self.groups.len()
        )
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// What `peers` asks.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    pub model: String,
    pub firmware: Option<String>,
    pub metric: Option<String>,
    pub series: Option<String>,
    /// Percent; when `None`, the series' own (`qualify: { peers: { max_slower } }` of its
    /// latest campaign) with `series`, else `DEFAULT_MAX_SLOWER_PCT`.
    pub max_slower_pct: Option<f64>,
}

/// The model's peer groups, every drive judged in its own.
pub fn peers(store: &Store, ask: &Ask) -> Result<Peers> {
    index_or_say(store);
    let runs = store.peer_runs(&PeerQuery {
        model: &ask.model,
        metric: ask.metric.as_deref(),
        firmware: ask.firmware.as_deref(),
        series: ask.series.as_deref(),
    })?;
    let max_slower = match (ask.max_slower_pct, &ask.series) {
        (Some(p), _) => p,
        (None, Some(series)) => series_max_slower(store, series)?.unwrap_or(DEFAULT_MAX_SLOWER_PCT),
        (None, None) => DEFAULT_MAX_SLOWER_PCT,
    };
    Ok(Peers {
        model: ask.model.clone(),
        firmware: ask.firmware.clone().unwrap_or_default(),
        series: ask.series.clone().unwrap_or_default(),
        max_slower_pct: max_slower,
        alpha: crate::stats::peers::ALPHA,
        groups: groups(&runs, max_slower),
    })
}

/// The threshold the series' latest campaign sets (`qualify: { peers: { max_slower } }`).
fn series_max_slower(store: &Store, series: &str) -> Result<Option<f64>> {
    let latest = store.read(|c| {
        c.query_opt(
            "SELECT file_name, yaml FROM campaigns WHERE series = ?1
              ORDER BY submitted_unix_ms DESC, id DESC LIMIT 1",
            [series],
            |r| Ok((r.get::<String>("file_name")?, r.get::<String>("yaml")?)),
        )
    })?;
    Ok(latest.and_then(|(file, yaml)| {
        crate::spec::parse_with(&file, &yaml, &crate::spec::Limits::NONE)
            .ok()?
            .report
            .peers_max_slower
    }))
}

/// The runs' groups, judged.
pub fn groups(all: &PeerRuns, max_slower_pct: f64) -> Vec<PeerGroup> {
    // (firmware, workload, configuration, metric) → state → drive → its runs.
    type Runs<'r> = IndexMap<&'r str, Vec<&'r PeerRun>>;
    let w = |i: u32| all.word(i);
    let mut by_key: BTreeMap<(&str, &str, &str, &str), BTreeMap<&str, Runs<'_>>> = BTreeMap::new();
    for r in &all.runs {
        by_key
            .entry((
                w(r.firmware),
                w(r.workload),
                w(r.configuration),
                w(r.metric),
            ))
            .or_default()
            .entry(w(r.state))
            .or_default()
            .entry(w(r.drive))
            .or_default()
            .push(r);
    }
    let mut out = Vec::new();
    for ((firmware, workload, configuration, metric), states) in by_key {
        let key = Key {
            firmware,
            workload,
            configuration,
            metric,
        };
        let not_steady: Vec<String> = states
            .get("not steady")
            .map(|d| {
                d.keys()
                    .map(|id| format!("{id}: no steady state, so not compared"))
                    .collect()
            })
            .unwrap_or_default();
        for (state, drives) in states.iter().filter(|(s, _)| **s != "not steady") {
            let mut g = group(all, &key, state, drives, max_slower_pct);
            g.not_compared = not_steady.clone();
            out.push(g);
        }
        if states.keys().all(|s| *s == "not steady") {
            // Every drive of it without steady state: said, not silently dropped.
            let drives = &states["not steady"];
            let mut g = group(all, &key, "not steady", drives, max_slower_pct);
            g.not_judged = "no drive reached steady state: not compared".into();
            for d in &mut g.drives {
                d.standing = None;
                d.slower_pct = None;
                d.outlier = false;
            }
            out.push(g);
        }
    }
    out
}

/// What a group's drives share.
struct Key<'k> {
    firmware: &'k str,
    workload: &'k str,
    configuration: &'k str,
    metric: &'k str,
}

fn group(
    all: &PeerRuns,
    key: &Key<'_>,
    state: &str,
    drives: &IndexMap<&str, Vec<&PeerRun>>,
    max_slower_pct: f64,
) -> PeerGroup {
    let w = |i: u32| all.word(i);
    let unit = drives
        .values()
        .flatten()
        .next()
        .map(|r| w(r.unit).to_string())
        .unwrap_or_default();
    let worse = larger_is_worse(&unit);
    let ids: Vec<&str> = drives.keys().copied().collect();
    let values: Vec<Vec<f64>> = drives
        .values()
        .map(|runs| runs.iter().map(|r| r.median).collect())
        .collect();
    let controller_of = |runs: &[&PeerRun]| {
        runs.last()
            .map(|r| w(r.controller).to_string())
            .unwrap_or_default()
    };
    let controllers: Vec<String> = drives.values().map(|r| controller_of(r)).collect();
    let medians: Vec<f64> = values
        .iter()
        .map(|v| crate::stats::summarize(v).map_or(f64::NAN, |s| s.median))
        .collect();
    let mut sorted: Vec<f64> = medians.iter().copied().filter(|m| m.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let at = |q: f64| -> f64 {
        if sorted.is_empty() {
            return f64::NAN;
        }
        sorted[((sorted.len() - 1) as f64 * q).round() as usize]
    };
    let too_few = ids.len() < MIN_PEERS;
    // The controller as a factor: each controller's drives against the others'.
    let mut controller_lines = Vec::new();
    let mut judged_within_controller = false;
    let kinds: Vec<&String> = {
        let mut k: Vec<&String> = Vec::new();
        for c in &controllers {
            if !k.contains(&c) {
                k.push(c);
            }
        }
        k
    };
    if !too_few && kinds.len() > 1 {
        let pooled: Vec<Vec<f64>> = kinds
            .iter()
            .map(|k| {
                values
                    .iter()
                    .zip(&controllers)
                    .filter(|(_, c)| c == k)
                    .flat_map(|(v, _)| v.iter().copied())
                    .collect()
            })
            .collect();
        for (i, s) in standings(&pooled).into_iter().enumerate() {
            let Some(s) = s else { continue };
            let Some(pct) = slower(s.ratio, worse) else {
                continue;
            };
            // Named by the slower side: the faster controller's drives are the others.
            if s.significant && pct > max_slower_pct {
                let behind: Vec<usize> = (0..ids.len())
                    .filter(|&d| controllers[d] == *kinds[i])
                    .collect();
                let others: Vec<&str> = kinds
                    .iter()
                    .filter(|k| **k != kinds[i])
                    .map(|k| controller_name(k))
                    .collect();
                let rest_median = {
                    let mut v: Vec<f64> = (0..ids.len())
                        .filter(|&d| controllers[d] != *kinds[i])
                        .map(|d| medians[d])
                        .collect();
                    v.sort_by(f64::total_cmp);
                    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
                };
                let like = behind
                    .iter()
                    .filter(|&&d| slower(medians[d] / rest_median, worse).is_some_and(|p| p > 0.0))
                    .count();
                controller_lines.push(format!(
                    "{like} of {} drives behind {} are {:.0}% slower than behind {}: the controller, not the drives",
                    behind.len(),
                    controller_name(kinds[i]),
                    pct,
                    others.join(" and ")
                ));
                judged_within_controller = true;
            }
        }
    }
    // Each drive against its peers: behind the same controller when the controller
    // differs as a whole, else the whole group.
    let mut standing: Vec<Option<Standing>> = vec![None; ids.len()];
    if !too_few {
        if judged_within_controller {
            for k in &kinds {
                let members: Vec<usize> =
                    (0..ids.len()).filter(|&d| controllers[d] == **k).collect();
                if members.len() < MIN_PEERS {
                    continue;
                }
                let sub: Vec<Vec<f64>> = members.iter().map(|&d| values[d].clone()).collect();
                for (j, s) in judged(&sub, worse, max_slower_pct).into_iter().enumerate() {
                    standing[members[j]] = s;
                }
            }
        } else {
            standing = judged(&values, worse, max_slower_pct);
        }
    }
    let drives_out: Vec<PeerDrive> = ids
        .iter()
        .enumerate()
        .map(|(d, id)| {
            let runs = &drives[id];
            let mut hosts: Vec<String> = Vec::new();
            for r in runs {
                if !hosts.iter().any(|h| h == w(r.host)) {
                    hosts.push(w(r.host).to_string());
                }
            }
            let summary = crate::stats::summarize(&values[d]);
            let slower_pct = standing[d].as_ref().and_then(|s| slower(s.ratio, worse));
            let outlier = standing[d].as_ref().is_some_and(|s| s.significant)
                && slower_pct.is_some_and(|p| p > max_slower_pct);
            PeerDrive {
                drive: id.to_string(),
                hosts,
                controller: controllers[d].clone(),
                runs: values[d].clone(),
                median: summary.as_ref().map_or(f64::NAN, |s| s.median),
                ci: summary.and_then(|s| s.median_ci),
                standing: standing[d].clone(),
                slower_pct,
                outlier,
            }
        })
        .collect();
    PeerGroup {
        firmware: key.firmware.to_string(),
        workload: workload_words(key.workload),
        configuration: key.configuration.to_string(),
        metric: key.metric.to_string(),
        unit,
        state: state.to_string(),
        median: at(0.5),
        band: (at(0.1), at(0.9)),
        not_judged: if too_few {
            format!(
                "too few peers to judge: {} drive(s), {MIN_PEERS} needed",
                ids.len()
            )
        } else {
            String::new()
        },
        controllers: controller_lines,
        drives: drives_out,
        not_compared: Vec::new(),
    }
}

/// Each drive's standing, the drives it flags left out of the others' reference, again
/// until no other is flagged (at most 5 rounds, and never fewer than `MIN_PEERS` drives
/// left): a drive 150× slower would otherwise stretch every other drive's interval down to
/// ×0.006, and could hide a second, milder one.
fn judged(values: &[Vec<f64>], worse: Option<bool>, max_slower_pct: f64) -> Vec<Option<Standing>> {
    let mut reference = vec![true; values.len()];
    let mut s = standings(values);
    for _ in 0..5 {
        let next: Vec<bool> = s
            .iter()
            .map(|x| {
                !x.as_ref().is_some_and(|x| {
                    x.significant && slower(x.ratio, worse).is_some_and(|p| p > max_slower_pct)
                })
            })
            .collect();
        if next == reference || next.iter().filter(|k| **k).count() < MIN_PEERS {
            break;
        }
        reference = next;
        s = standings_against(values, &reference);
    }
    s
}

/// How much worse a ratio is, in percent, by the metric's direction: times grow, rates
/// shrink. `None` when the unit has no direction.
fn slower(ratio: f64, larger_is_worse: Option<bool>) -> Option<f64> {
    match larger_is_worse? {
        true => Some((ratio - 1.0) * 100.0),
        false => Some((1.0 - ratio) * 100.0),
    }
}

/// The driver nearest the controller ("mpt3sas" of "sd>mpt3sas"), "no controller" for none.
fn controller_name(chain: &str) -> &str {
    match chain.rsplit('>').next() {
        Some(c) if !c.is_empty() => c,
        _ => "no controller",
    }
}

/// A measure step's JSON in a few words: the command, or the tool's argv.
pub fn workload_words(json: &str) -> String {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
        return json.to_string();
    };
    fn words(v: &serde_json::Value) -> Option<String> {
        match v {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Array(a) => Some(
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            serde_json::Value::Object(o) => {
                if let Some(argv) = o.get("argv") {
                    return words(argv);
                }
                if o.len() == 1 {
                    let (k, inner) = o.iter().next()?;
                    return match inner {
                        serde_json::Value::Object(fields) if !fields.contains_key("argv") => {
                            let f: Vec<String> = fields
                                .iter()
                                .map(|(k, v)| format!("{k}={}", v.to_string().trim_matches('"')))
                                .collect();
                            Some(format!("{} {}", k.to_lowercase(), f.join(" ")))
                        }
                        _ => words(inner),
                    };
                }
                None
            }
            _ => None,
        }
    }
    words(&v).unwrap_or_else(|| json.to_string())
}

/// `index`, its failure logged rather than the question's: a store that cannot commit
/// right now (locked, read-only) still answers with the runs already written; the
/// campaigns done since are written by the next question that can.
pub fn index_or_say(store: &Store) {
    if let Err(e) = index(store) {
        tracing::warn!(error = %e, "drive results of the latest done campaigns not written yet; answering without them");
    }
}

/// Writes the drive results of every done campaign not indexed yet; how many campaigns.
/// A campaign whose report cannot be read is left for the next call (and logged).
pub fn index(store: &Store) -> Result<usize> {
    let mut done = 0;
    for campaign_id in store.campaigns_to_index()? {
        let report = match Report::load(store, &campaign_id) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(campaign = %campaign_id, error = %e, "drive results not indexed");
                continue;
            }
        };
        let rows = rows_of(store, &report)?;
        if store.put_drive_results(&campaign_id, &rows)? {
            done += 1;
        }
    }
    Ok(done)
}

/// The drive results of one done campaign: each cell measured on a drive the campaign's
/// snapshots name, each metric's median.
pub fn rows_of(store: &Store, report: &Report) -> Result<Vec<DriveResult>> {
    let campaign_id = &report.campaign_id;
    let (series, submitted, plans, yaml, cells) = store.read(|c| {
        let (series, submitted) = c
            .query_opt(
                "SELECT series, submitted_unix_ms FROM campaigns WHERE id = ?1",
                [campaign_id],
                |r| {
                    Ok((
                        r.get::<String>("series")?,
                        r.get::<i64>("submitted_unix_ms")?,
                    ))
                },
            )?
            .unwrap_or_default();
        let plans = crate::store::reports::plans(c, &campaign_id.clone().into())?;
        let row = crate::store::reports::campaign(c, &campaign_id.clone().into())?;
        let cells = crate::store::reports::cells(c, &campaign_id.clone().into())?;
        Ok((series, submitted, plans, row, cells))
    })?;
    let cell_n: std::collections::HashMap<String, i64> =
        cells.into_iter().map(|c| (c.id.to_string(), c.n)).collect();
    let spec = yaml.and_then(|row| {
        crate::spec::parse_with(&row.file_name, &row.yaml, &crate::spec::Limits::NONE).ok()
    });
    let key_metric = spec
        .as_ref()
        .map(|s| s.report.metric.clone())
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "wall".into());
    // Each cell's measure step.
    let mut measure: std::collections::HashMap<String, &platter_proto::model::Workload> =
        std::collections::HashMap::new();
    for p in &plans {
        for s in &p.plan.steps {
            if let platter_proto::model::StepKind::Measure(w) = &s.kind {
                measure.entry(s.cell_id.to_string()).or_insert(w);
            }
        }
    }
    let mut out = Vec::new();
    for cell in &report.cells {
        let (Some(device), Some(&n)) = (cell.device(), cell_n.get(&cell.cell_id)) else {
            continue;
        };
        // The drive: in the storage snapshot of this cell, else any snapshot of its host.
        let facts = report
            .provenance
            .iter()
            .filter(|s| s.host == cell.host)
            .map(|s| (s.cells.iter().any(|c| c.as_str() == cell.cell_id), s))
            .flat_map(|(mine, s)| s.facts.devices.iter().map(move |f| (mine, f)))
            .filter(|(_, f)| f.device.name == device || f.device.path == device)
            .max_by_key(|(mine, _)| *mine)
            .map(|(_, f)| &f.device);
        let Some(d) = facts else { continue };
        let drive_id = store.ledger_id(&cell.host, d)?;
        let state = match report
            .rounds
            .iter()
            .find(|r| r.host == cell.host && r.device == d.name)
        {
            Some(r) if r.steady => "steady",
            Some(r) if r.ended => "not steady",
            Some(_) => continue,
            None => "",
        };
        let workload = measure
            .get(&cell.cell_id)
            .and_then(|w| serde_json::to_string(w).ok())
            .unwrap_or_default()
            .replace(&d.path, "${device}")
            .replace(&format!("\"{}\"", d.name), "\"${device}\"");
        let configuration: Vec<String> = cell
            .configuration()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        for m in &cell.metrics {
            if m.stats.n == 0 || !m.stats.median.is_finite() {
                continue;
            }
            out.push(DriveResult {
                campaign_id: campaign_id.clone().into(),
                host: cell.host.clone(),
                cell: n,
                drive_id: drive_id.clone(),
                metric: m.metric.clone(),
                model: d.model.clone(),
                firmware: d.firmware.clone(),
                controller: d.controller.join(">"),
                series: series.clone(),
                workload: workload.clone(),
                configuration: configuration.join(" "),
                state: state.into(),
                key_metric: m.metric == key_metric,
                unit: m.unit.clone(),
                median: m.stats.median,
                n: m.stats.n as i64,
                finished_unix_ms: submitted,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::peers::{PeerRun, PeerRuns};

    /// Twelve drives of five runs (the container lab's), one throttled 150× slower: it is the
    /// one outlier, and the others' intervals are against each other, not stretched to it.
    #[test]
    fn a_drive_far_out_does_not_stretch_the_others_intervals() {
        let mut runs = PeerRuns {
            words: ["", "fsync", "size=4096", "wall", "s", "sd>ahci"]
                .map(String::from)
                .to_vec(),
            runs: Vec::new(),
        };
        for d in 0..12u32 {
            runs.words.push(format!("host/loop{d}"));
            let drive = runs.words.len() as u32 - 1;
            for r in 0..5 {
                let noise = 1.0 + 0.03 * (((d * 7 + r * 3) % 11) as f64 - 5.0) / 5.0;
                let slow = if d == 8 { 150.0 } else { 1.0 };
                runs.runs.push(PeerRun {
                    drive,
                    host: drive,
                    firmware: 0,
                    controller: 5,
                    workload: 1,
                    configuration: 2,
                    state: 0,
                    metric: 3,
                    unit: 4,
                    median: 0.025 * slow * noise,
                    finished_unix_ms: r as i64,
                });
            }
        }
        let g = &groups(&runs, DEFAULT_MAX_SLOWER_PCT)[0];
        let flagged: Vec<&str> = g
            .drives
            .iter()
            .filter(|d| d.outlier)
            .map(|d| d.drive.as_str())
            .collect();
        assert_eq!(flagged, ["host/loop8"]);
        for d in g.drives.iter().filter(|d| !d.outlier) {
            let s = d.standing.as_ref().unwrap();
            assert!(s.ci.0 > 0.8 && s.ci.1 < 1.25, "{}: {s:?}", d.drive);
            assert_eq!(s.peer_runs, 50, "against the ten other drives like it");
        }
        let slow = g
            .drives
            .iter()
            .find(|d| d.outlier)
            .unwrap()
            .standing
            .clone()
            .unwrap();
        assert!(slow.ratio > 100.0 && slow.ci.0 > 100.0, "{slow:?}");
    }
}
