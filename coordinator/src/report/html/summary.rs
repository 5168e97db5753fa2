//! The page's text sections: the findings, the run against the last one, the summary
//! (extent, verdicts, losses, outliers, failures, hosts, key metrics) and the drives'
//! health, as values for `templates/report/`. Writes no HTML.

use indexmap::IndexMap;

use super::super::notes::MissingMeasurements;
use super::super::notes::{fail_text, findings, outlier_text, qualification_line};
use super::super::{Report, Stats, MAX_FAILURES_SHOWN};
use super::tables::SideTable;
use super::{find_metric, show, unit_suffix, Line, Row, Text, Unit, View, MAX_LISTED};

/// The answer first: the same lines as every text format, what is no significant
/// difference greyed.
pub(super) struct Findings {
    pub(super) title: Text,
    pub(super) lines: Vec<Line>,
}

impl Findings {
    pub(super) fn of(r: &Report) -> Option<Findings> {
        let lines = findings(r);
        if lines.is_empty() {
            return None;
        }
        Some(Findings {
            title: Text::new(super::super::findings_title(r)),
            lines: lines
                .into_iter()
                .map(|l| Line {
                    class: if l.is_equal() {
                        Some("muted")
                    } else if l.is_failure() {
                        Some("fail")
                    } else {
                        None
                    },
                    text: Text::new(l.to_string()),
                })
                .collect(),
        })
    }
}

/// Each cell against the series' run before this one: the shift with its interval, the
/// flag, what changed on the host.
pub(super) struct Since {
    pub(super) title: Text,
    pub(super) rows: Vec<Row>,
}

impl Since {
    pub(super) fn of(r: &Report) -> Option<Since> {
        use super::super::history::Flag;
        let since = r.since_last_run.as_ref()?;
        Some(Since {
            title: Text::new(since.title()),
            rows: since
                .lines
                .iter()
                .map(|l| Row {
                    class: match l.since.flag {
                        Flag::Regression => Some("fail"),
                        Flag::None => None,
                        _ => Some("muted"),
                    },
                    cells: vec![
                        Text::new(&l.host),
                        Text::new(&l.cell),
                        Text::new(l.since.judged_text()),
                        Text::new(l.since.flag.word()),
                        Text::new(l.since.changed_text()),
                    ],
                })
                .collect(),
        })
    }
}

/// Each drive under test: its health before → after the run, a row per attribute it
/// reports, the changes that matter marked; a drive that could not be read says why.
pub(super) struct Health {
    pub(super) title: Text,
    pub(super) drives: Vec<DriveHealth>,
    pub(super) not_judged: Vec<Text>,
}

pub(super) struct DriveHealth {
    pub(super) drive: Text,
    pub(super) flagged: bool,
    /// Why there are no readings to compare (no reading before the run).
    pub(super) unread: Option<Text>,
    pub(super) rows: Vec<Row>,
    /// Whether it was read after the run.
    pub(super) after: bool,
    /// Its baseline, where it came from, and the limited attributes since it.
    pub(super) since_baseline: Option<Text>,
}

impl Health {
    pub(super) fn of(r: &Report) -> Option<Health> {
        if r.health.is_empty() && r.health_not_judged.is_empty() {
            return None;
        }
        let drives = r.health.iter().map(|d| DriveHealth {
            drive: Text::new(d.drive()),
            flagged: d.flagged(),
            unread: d.before.is_none().then(|| Text::new(d.text())),
            rows: d
                .deltas
                .iter()
                .map(|x| {
                    let v = |v: Option<f64>| {
                        Text::new(v.map_or("—".into(), |v| crate::spec::health::show(v, x.unit)))
                    };
                    Row {
                        class: x.flagged.then_some("fail"),
                        cells: vec![
                            Text::new(x.attribute),
                            v(x.before),
                            v(x.after),
                            v(x.max),
                            Text::new(if x.flagged {
                                "FLAGGED"
                            } else if x.ignored {
                                "ignored"
                            } else {
                                ""
                            }),
                        ],
                    }
                })
                .collect(),
            after: d.after.is_some(),
            since_baseline: d.since_baseline_text().map(Text::new),
        });
        Some(Health {
            title: Text::new(super::super::health::TITLE),
            drives: drives.collect(),
            not_judged: r.health_not_judged.iter().map(Text::new).collect(),
        })
    }
}

/// The summary: what the run spans, its verdicts, what was lost, the outliers, the
/// comparisons, what changed on the hosts; then the failures, the hosts and the key
/// metrics.
pub(super) struct Summary {
    pub(super) cells: usize,
    pub(super) configs: usize,
    pub(super) hosts: usize,
    /// How many drives, when the columns are drives (more of them than hosts).
    pub(super) drives: Option<usize>,
    pub(super) stored: u32,
    pub(super) expected: u32,
    /// Why there are no samples, if there are none.
    pub(super) no_samples: Option<&'static str>,
    pub(super) verdicts_passed: Option<Text>,
    pub(super) verdicts_failed: Option<Folded>,
    pub(super) steps_failed: u32,
    /// (repetitions without samples, in how many cells).
    pub(super) failed_repetitions: Option<(u32, usize)>,
    pub(super) missing: Option<Text>,
    /// Metrics of some cells the tool could not measure.
    pub(super) unmeasured: usize,
    /// (host, why) of each plan refused.
    pub(super) refused: Vec<(Text, Text)>,
    pub(super) outliers: Option<Folded>,
    pub(super) comparisons: Option<ComparisonCount>,
    pub(super) provenance_changes: Vec<Text>,
    /// `prepare:`: the state each drive was measured in.
    pub(super) drive_states: Vec<Text>,
    pub(super) problems: Option<Problems>,
    pub(super) hosts_compared: Vec<HostFacts>,
    pub(super) key_side: Option<SideTable>,
    pub(super) key_table: Option<KeyTable>,
}

/// A fact with a list under it: the first `shown` items listed, the rest folded.
pub(super) struct Folded {
    pub(super) class: &'static str,
    pub(super) head: Text,
    pub(super) items: Vec<Text>,
    pub(super) shown: usize,
}

/// How many comparisons with the baseline were made, were significant, could not be made.
pub(super) struct ComparisonCount {
    pub(super) made: usize,
    pub(super) significant: usize,
    pub(super) uncompared: usize,
}

/// Every failed step, (headline, stderr's tail), the first `shown` open.
pub(super) struct Problems {
    pub(super) failures: Vec<(Text, Text)>,
    pub(super) shown: usize,
}

/// A host compared: its columns (colour, drive or host) and what the run saw of it.
pub(super) struct HostFacts {
    pub(super) host: Text,
    pub(super) columns: Vec<(String, Text)>,
    pub(super) facts: Vec<Text>,
}

/// One row per cell with its key metrics, one unit per column.
pub(super) struct KeyTable {
    /// The parameters', then the key metrics' headers (with their unit).
    pub(super) headers: Vec<Text>,
    pub(super) rows: Vec<KeyRow>,
}

pub(super) struct KeyRow {
    pub(super) host: Text,
    pub(super) params: Vec<Text>,
    pub(super) values: Vec<KeyValue>,
}

/// A key metric of a cell: its median (CI), or why it has none (`median` is `None`).
pub(super) struct KeyValue {
    pub(super) median: Option<f64>,
    pub(super) outlier: bool,
    pub(super) text: Text,
}

impl Summary {
    pub(super) fn of(v: &View<'_>) -> Summary {
        let r = v.r;
        let mut hosts: Vec<&str> = r.cells.iter().map(|c| c.host.as_str()).collect();
        hosts.sort_unstable();
        hosts.dedup();
        let failed_reps: u32 = r.cells.iter().map(|c| c.failed).sum();
        let failed: Vec<_> = r.verdicts.iter().filter(|x| !x.pass).collect();
        let keys = v.key_metrics();
        let (key_side, key_table) = match &r.side_by_side {
            _ if keys.is_empty() => (None, None),
            Some(s) => (Some(SideTable::of(v, s, &keys)), None),
            None => (None, Some(KeyTable::of(v, &keys))),
        };
        Summary {
            cells: r.cells.len(),
            configs: v.configs.len(),
            hosts: hosts.len(),
            drives: (v.columns.len() > hosts.len()).then_some(v.columns.len()),
            stored: r
                .measurements_expected
                .saturating_sub(r.measurements_missing),
            expected: r.measurements_expected,
            no_samples: match () {
                _ if r.cells.iter().any(|c| !c.metrics.is_empty()) => None,
                _ if r.cells.is_empty() => Some("this campaign has no cells"),
                _ => Some("no cell recorded a metric"),
            },
            verdicts_passed: (!r.verdicts.is_empty() && failed.is_empty())
                .then(|| Text::new(qualification_line(0, r.verdicts.len(), ""))),
            verdicts_failed: (!failed.is_empty()).then(|| Folded {
                class: "fail",
                head: Text::new(qualification_line(failed.len(), r.verdicts.len(), "")),
                items: failed
                    .iter()
                    .map(|x| Text::new(fail_text(x, &show)))
                    .collect(),
                shown: MAX_LISTED,
            }),
            steps_failed: r.steps_failed,
            failed_repetitions: (failed_reps > 0)
                .then(|| (failed_reps, r.cells.iter().filter(|c| c.failed > 0).count())),
            missing: MissingMeasurements::of(r).map(|m| Text::new(m.to_string())),
            unmeasured: r.cells.iter().map(|c| c.unmeasured.len()).sum(),
            refused: r
                .refused
                .iter()
                .map(|x| (Text::new(&x.host), Text::new(&x.reason)))
                .collect(),
            outliers: (!r.outliers.is_empty()).then(|| Folded {
                class: "warn",
                head: Text::new(format!(
                    "{} outlier(s): far from the other hosts/drives with the same configuration",
                    r.outliers.len()
                )),
                items: r
                    .outliers
                    .iter()
                    .map(|o| Text::new(outlier_text(o, &show)))
                    .collect(),
                shown: MAX_LISTED,
            }),
            comparisons: (!r.comparisons.is_empty()).then(|| {
                let made = r.comparisons.iter().filter(|c| c.compared).count();
                ComparisonCount {
                    made,
                    significant: r.comparisons.iter().filter(|c| c.row.significant).count(),
                    uncompared: r.comparisons.len() - made,
                }
            }),
            provenance_changes: r.provenance_changes.iter().map(Text::new).collect(),
            drive_states: r.drive_states.iter().map(Text::new).collect(),
            problems: (!r.failures.is_empty()).then(|| Problems {
                failures: r
                    .failures
                    .iter()
                    .map(|f| (Text::new(f.headline()), Text::new(&f.stderr_tail)))
                    .collect(),
                shown: MAX_FAILURES_SHOWN,
            }),
            hosts_compared: HostFacts::of(v),
            key_side,
            key_table,
        }
    }
}

impl HostFacts {
    /// The hosts and drives compared, with what the run saw of each (provenance).
    fn of(v: &View<'_>) -> Vec<HostFacts> {
        let r = v.r;
        let lines = super::super::provenance::lines(&r.provenance, &r.devices_used);
        let mut hosts: IndexMap<&str, ()> = IndexMap::new();
        for host in r
            .cells
            .iter()
            .map(|c| &c.host)
            .chain(r.refused.iter().map(|x| &x.host))
        {
            hosts.entry(host.as_str()).or_default();
        }
        hosts
            .into_keys()
            .map(|host| HostFacts {
                host: Text::new(host),
                columns: (0..v.columns.len())
                    .filter(|i| v.column_hosts[*i] == host)
                    .map(|i| v.swatch(i))
                    .collect(),
                facts: lines
                    .iter()
                    .filter(|l| l.host == host)
                    .map(|l| Text::new(l.text.trim_start()))
                    .collect(),
            })
            .collect()
    }
}

impl KeyTable {
    /// One row per cell with its key metrics; one unit per column.
    fn of(v: &View<'_>, keys: &[&str]) -> KeyTable {
        let params: Vec<&String> = v
            .order
            .iter()
            .filter(|k| v.r.cells.iter().any(|c| c.params.contains_key(*k)))
            .collect();
        let units: Vec<Unit> = keys
            .iter()
            .map(|k| {
                let values: Vec<f64> =
                    v.r.cells
                        .iter()
                        .filter_map(|c| find_metric(c, k).map(|m| m.stats.median))
                        .collect();
                let unit =
                    v.r.cells
                        .iter()
                        .find_map(|c| find_metric(c, k).map(|m| m.unit.clone()))
                        .unwrap_or_default();
                Unit::for_values(&values, &unit)
            })
            .collect();
        let headers = params
            .iter()
            .map(Text::new)
            .chain(
                keys.iter()
                    .zip(&units)
                    .map(|(k, u)| Text::new(format!("{k}{}", unit_suffix(u)))),
            )
            .collect();
        let rows =
            v.r.cells
                .iter()
                .map(|c| KeyRow {
                    host: Text::new(&c.host),
                    params: params
                        .iter()
                        .map(|p| Text::new(c.params.get(*p).map_or("", |x| x)))
                        .collect(),
                    values: keys
                        .iter()
                        .zip(&units)
                        .map(|(k, u)| match find_metric(c, k) {
                            Some(m) => KeyValue {
                                median: Some(m.stats.median),
                                outlier: v.is_outlier(c, k),
                                text: Text::new(median_ci(&m.stats, u)),
                            },
                            None => KeyValue {
                                median: None,
                                outlier: false,
                                text: Text::new(why_absent(c, k)),
                            },
                        })
                        .collect(),
                })
                .collect();
        KeyTable { headers, rows }
    }
}

fn why_absent(c: &super::CellReport, metric: &str) -> String {
    if let Some(u) = c.unmeasured.iter().find(|u| u.metric == metric) {
        return format!("— (not measured ×{}: {})", u.count, u.reason);
    }
    if c.failed > 0 {
        format!("— ({} failed)", c.failed)
    } else {
        "—".into()
    }
}

/// "12.30 (11.90 … 12.60)" in the column's unit.
fn median_ci(s: &Stats, u: &Unit) -> String {
    match s.median_ci {
        Some((lo, hi)) => format!("{} ({} … {})", u.bare(s.median), u.bare(lo), u.bare(hi)),
        None => u.bare(s.median),
    }
}
