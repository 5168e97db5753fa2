//! `report:` in a campaign file: the baseline, the metric comparisons use, the `qualify:`
//! thresholds and drive-health limits, and the pivot table, read from the YAML tree into a
//! [`ReportSpec`] with where each setting that names a metric is written. Whether those
//! names are parameters or metrics the campaign has is judged once the cells are known.

use super::accessors::{known, map, missing, misspelt, seq, string, text};
use super::error::{error, suggest, Errors, WithHint};
use super::health::{
    attribute, value, Bound, HealthSpec, Ignore, Limit, Since, ATTRIBUTES, IGNORE, SINCE_BASELINE,
};
use super::metrics::{MetricRef, Named};
use super::model::{Baseline, Pivot, PivotKey, ReportSpec};
use super::threshold;
use super::tree::{join, Entry, Kind, Node};

const REPORT_KEYS: [&str; 4] = ["baseline", "metric", "qualify", "pivot"];

/// `report:` — comparisons against a baseline and qualification thresholds, and where
/// each setting that names a metric is written.
pub(crate) fn read_report(v: &Node, errs: &mut Errors) -> Option<(ReportSpec, Vec<MetricRef>)> {
    let entries = errs.ok(map(
        v,
        "report",
        "report settings like `{ baseline: { fs: ext4 }, qualify: [\"wall.median < 300s\"] }`",
    ))?;
    let start = errs.count();
    let mut spec = ReportSpec::default();
    let mut refs = Vec::new();
    for e in known(entries, "report", &REPORT_KEYS, errs) {
        let path = join("report", &e.name);
        match e.name.as_str() {
            "baseline" => {
                let Some(pairs) = errs.ok(map(
                    &e.value,
                    &path,
                    "a mapping with one key, like `{ fs: ext4 }` or `{ host: rc66 }`",
                )) else {
                    continue;
                };
                let [pair] = pairs else {
                    errs.push(error(
                        e.value.pos,
                        &path,
                        "a baseline names exactly one parameter (or host, or device) and its value",
                    )
                    .hint("e.g. `baseline: { fs: ext4 }`"));
                    continue;
                };
                let Some(value) = errs.ok(text(&pair.value, &join(&path, &pair.name), "a value"))
                else {
                    continue;
                };
                spec.baseline = Some(Baseline {
                    key: pair.name.clone(),
                    value,
                    line: pair.key.pos.line,
                    column: pair.key.pos.column,
                });
            }
            "metric" => {
                let Some(metric) = errs.ok(string(
                    &e.value,
                    &path,
                    "a metric name like `wall` or `latency.mean`",
                )) else {
                    continue;
                };
                spec.metric = metric;
                refs.push(MetricRef {
                    pos: e.value.pos,
                    path,
                    named: Named::Metric(spec.metric.clone()),
                });
            }
            "pivot" => {
                if let Some((pivot, metrics)) = read_pivot(&e.value, &path, errs) {
                    spec.pivot = Some(pivot);
                    refs.extend(metrics);
                }
            }
            "qualify" => {
                // A list of thresholds, or `{ metrics: [thresholds], health: { … } }`.
                let list = if matches!(e.value.kind, Kind::Map(_)) {
                    let Some(entries) = errs.ok(map(&e.value, &path, QUALIFY_WHAT)) else {
                        continue;
                    };
                    let mut list = None;
                    for q in known(entries, &path, &QUALIFY_KEYS, errs) {
                        let q_path = join(&path, &q.name);
                        match q.name.as_str() {
                            "health" => spec.health = read_health(&q.value, &q_path, errs),
                            "peers" => spec.peers_max_slower = read_peers(&q.value, &q_path, errs),
                            "metrics" => list = Some((&q.value, q_path)),
                            _ => {}
                        }
                    }
                    match list {
                        Some(l) => l,
                        None => continue,
                    }
                } else {
                    (&e.value, path.clone())
                };
                let (list, path) = list;
                let Some(items) = errs.ok(seq(list, &path, QUALIFY_WHAT)) else {
                    continue;
                };
                for (i, item) in items.iter().enumerate() {
                    let item_path = format!("{path}[{i}]");
                    let Some(t) = errs.ok(string(
                        item,
                        &item_path,
                        "a threshold like `\"latency.p99 < 1ms\"`",
                    )) else {
                        continue;
                    };
                    let t = threshold::parse(&t).map_err(|why| {
                        error(item.pos, &item_path, why).hint("write `METRIC[.STAT] < VALUE[UNIT]`, e.g. `wall.median < 300s` or `latency.p99 < 1ms`")
                    });
                    let Some(t) = errs.ok(t) else { continue };
                    refs.push(MetricRef {
                        pos: item.pos,
                        path: item_path,
                        named: Named::Threshold(t.clone()),
                    });
                    spec.qualify.push(t);
                }
            }
            _ => {}
        }
    }
    errs.clean_since(start, (spec, refs))
}

const QUALIFY_KEYS: [&str; 3] = ["metrics", "health", "peers"];
const QUALIFY_WHAT: &str = "a list of thresholds like `[\"latency.p99 < 1ms\"]`, or `{ metrics: [\"latency.p99 < 1ms\"], health: { media_errors: { max_increase: 0 } }, peers: { max_slower: 10% } }`";

/// `qualify.peers`: `{ max_slower: PCT }`, how much slower than the rest a significant drive
/// (or a campaign's cell) must be to be flagged; `None` when absent or wrong (said in `errs`).
fn read_peers(v: &Node, path: &str, errs: &mut Errors) -> Option<f64> {
    let entries = errs.ok(map(v, path, "`{ max_slower: 10% }`"))?;
    let mut out = None;
    for e in known(entries, path, &["max_slower"], errs) {
        let p = join(path, &e.name);
        out = errs.ok(super::accessors::percent(&e.value, &p, false));
    }
    out
}

/// `qualify.health`: `{ ATTRIBUTE: { max_increase | max | min: VALUE }, since_baseline: {
/// ATTRIBUTE: { max_increase: VALUE } }, ignore: [{ model: GLOB, attributes: [ATTRIBUTE] }] }`,
/// each limit checked against the attribute's unit.
fn read_health(v: &Node, path: &str, errs: &mut Errors) -> HealthSpec {
    let mut keys: Vec<&str> = ATTRIBUTES.iter().map(|a| a.name).collect();
    keys.extend([SINCE_BASELINE, IGNORE]);
    let mut spec = HealthSpec::default();
    let Some(entries) = errs.ok(map(
        v,
        path,
        "health limits like `{ media_errors: { max_increase: 0 }, temperature: { max: 70C } }`",
    )) else {
        return spec;
    };
    for e in known(entries, path, &keys, errs) {
        let e_path = join(path, &e.name);
        match e.name.as_str() {
            SINCE_BASELINE => {
                let Some(limits) = errs.ok(map(
                    &e.value,
                    &e_path,
                    "limits since the drive's first reading, like `{ reallocated_sectors: { max_increase: 8 } }`",
                )) else {
                    continue;
                };
                for a in known(limits, &e_path, &keys[..ATTRIBUTES.len()], errs) {
                    read_limits(a, &e_path, Since::Baseline, errs, &mut spec.limits);
                }
            }
            IGNORE => spec.ignore = read_ignore(&e.value, &e_path, errs),
            _ => read_limits(e, path, Since::Run, errs, &mut spec.limits),
        }
    }
    spec
}

/// One attribute's limits, `ATTRIBUTE: { BOUND: VALUE }`, counted from the run's first
/// reading or from the drive's baseline.
fn read_limits(e: &Entry, path: &str, since: Since, errs: &mut Errors, out: &mut Vec<Limit>) {
    let Some(a) = attribute(&e.name) else {
        return;
    };
    let a_path = join(path, &e.name);
    let Some(bounds) = errs.ok(map(
        &e.value,
        &a_path,
        match since {
            Since::Run => "limits like `{ max_increase: 0 }`, `{ max: 70C }` or `{ min: 10% }`",
            Since::Baseline => "a limit like `{ max_increase: 8 }`",
        },
    )) else {
        return;
    };
    for b in known(bounds, &a_path, &Bound::WORDS, errs) {
        let Some(bound) = Bound::from_word(&b.name) else {
            continue;
        };
        let b_path = join(&a_path, &b.name);
        if since == Since::Baseline && bound != Bound::MaxIncrease {
            errs.push(
                error(
                    b.key.pos,
                    &b_path,
                    format!(
                        "`{}` bounds the value after the run, whatever its past: only `max_increase` counts since the baseline",
                        b.name
                    ),
                )
                .hint(format!(
                    "write `{}: {{ {}: … }}` beside `since_baseline`, not under it",
                    a.name, b.name
                )),
            );
            continue;
        }
        let Some(written) = errs.ok(text(&b.value, &b_path, "a number")) else {
            continue;
        };
        let unit = if a.unit.is_empty() { "a count" } else { a.unit };
        let v = value(&written, a)
            .map_err(|why| error(b.value.pos, &b_path, why).hint(format!("{} is {unit}", a.name)));
        if let Some(value) = errs.ok(v) {
            out.push(Limit {
                attribute: a,
                bound,
                value,
                since,
            });
        }
    }
}

const IGNORE_KEYS: [&str; 2] = ["model", "attributes"];
const IGNORE_WHAT: &str =
    "a list like `[{ model: \"KINGSTON SA400*\", attributes: [temperature] }]`";

/// `qualify.health.ignore`: which attributes of which models are never flagged nor judged.
fn read_ignore(v: &Node, path: &str, errs: &mut Errors) -> Vec<Ignore> {
    let names: Vec<&str> = ATTRIBUTES.iter().map(|a| a.name).collect();
    let mut out = Vec::new();
    let Some(items) = errs.ok(seq(v, path, IGNORE_WHAT)) else {
        return out;
    };
    for (i, item) in items.iter().enumerate() {
        let item_path = format!("{path}[{i}]");
        let Some(entries) = errs.ok(map(item, &item_path, IGNORE_WHAT)) else {
            continue;
        };
        let (mut model, mut attributes) = (None, Vec::new());
        let known_entries = known(entries, &item_path, &IGNORE_KEYS, errs);
        for e in &known_entries {
            let e_path = join(&item_path, &e.name);
            if e.name == "model" {
                let Some(m) = errs.ok(string(
                    &e.value,
                    &e_path,
                    "a drive model as smartctl reads it, `*` for any characters",
                )) else {
                    continue;
                };
                if let Err(why) = glob::Pattern::new(&m) {
                    errs.push(error(
                        e.value.pos,
                        &e_path,
                        format!("`{m}` is not a pattern: {}", why.msg),
                    ));
                    continue;
                }
                model = Some(m);
                continue;
            }
            let Some(list) = errs.ok(seq(
                &e.value,
                &e_path,
                "a list of attributes like `[temperature, crc_errors]`",
            )) else {
                continue;
            };
            if list.is_empty() {
                errs.push(error(e.value.pos, &e_path, "no attribute is listed"));
            }
            for (j, a) in list.iter().enumerate() {
                let a_path = format!("{e_path}[{j}]");
                let Some(name) = errs.ok(string(a, &a_path, "an attribute")) else {
                    continue;
                };
                match attribute(&name) {
                    Some(a) => attributes.push(a),
                    None => errs.push(
                        error(a.pos, &a_path, format!("unknown health attribute `{name}`"))
                            .maybe_hint(suggest(&name, &names, "attributes")),
                    ),
                }
            }
        }
        for key in IGNORE_KEYS {
            if !known_entries.iter().any(|e| e.name == key) && !misspelt(entries, &IGNORE_KEYS, key)
            {
                errs.push(missing(item.pos, &item_path, key));
            }
        }
        if let Some(model) = model.filter(|_| !attributes.is_empty()) {
            out.push(Ignore { model, attributes });
        }
    }
    out
}

const PIVOT_KEYS: [&str; 4] = ["rows", "columns", "metric", "stat"];

/// `report.pivot`: a table like seed 001's (rows × columns of one statistic), and where
/// its metric is written.
fn read_pivot(v: &Node, path: &str, errs: &mut Errors) -> Option<(Pivot, Vec<MetricRef>)> {
    let entries = errs.ok(map(v, path, "a pivot like `{ rows: [host, write_cache], columns: [size], metric: latency.mean, stat: min }`"))?;
    let start = errs.count();
    let all = entries;
    let entries = known(entries, path, &PIVOT_KEYS, errs);
    let mut pivot = Pivot {
        line: v.pos.line,
        column: v.pos.column,
        ..Default::default()
    };
    let mut metric_refs = Vec::new();
    for e in &entries {
        let p = join(path, &e.name);
        match e.name.as_str() {
            "rows" | "columns" => {
                let Some(items) = errs.ok(seq(
                    &e.value,
                    &p,
                    "a list of keys: `host`, `device.model`, or parameters",
                )) else {
                    continue;
                };
                if items.is_empty() {
                    errs.push(missing(v.pos, path, &e.name));
                    continue;
                }
                let mut keys = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    if let Some(key) = errs.ok(string(item, &format!("{p}[{i}]"), "a key")) {
                        keys.push(PivotKey {
                            name: key,
                            line: item.pos.line,
                            column: item.pos.column,
                        });
                    }
                }
                if e.name == "rows" {
                    pivot.rows = keys
                } else {
                    pivot.columns = keys
                }
            }
            "metric" => {
                // One metric, or a list laid out by the key `metric`.
                let (items, listed): (Vec<(String, &Node)>, bool) = match &e.value.kind {
                    Kind::Seq(items) => (
                        items
                            .iter()
                            .enumerate()
                            .filter_map(|(i, item)| {
                                let m =
                                    errs.ok(string(item, &format!("{p}[{i}]"), "a metric name"))?;
                                Some((m, item))
                            })
                            .collect(),
                        true,
                    ),
                    _ => (
                        errs.ok(string(&e.value, &p, "a metric name, or a list of them"))
                            .map(|m| (m, &e.value))
                            .into_iter()
                            .collect(),
                        false,
                    ),
                };
                if items.is_empty() || items.iter().any(|(m, _)| m.is_empty()) {
                    errs.push(missing(v.pos, path, "metric"));
                    continue;
                }
                for (m, node) in &items {
                    metric_refs.push(MetricRef {
                        pos: node.pos,
                        path: p.clone(),
                        named: Named::Metric(m.clone()),
                    });
                }
                pivot.metric = items[0].0.clone();
                if listed && items.len() > 1 {
                    pivot.metrics = items.into_iter().map(|(m, _)| m).collect();
                }
            }
            "stat" => {
                let Some(stat) = errs.ok(string(&e.value, &p, "a statistic")) else {
                    continue;
                };
                let valid = ["min", "median", "mean", "max"].contains(&stat.as_str())
                    || stat.strip_prefix('p').is_some_and(|n| {
                        n.parse::<f64>().is_ok_and(|x| (0.0..=100.0).contains(&x))
                    });
                if !valid {
                    errs.push(error(e.value.pos, &p, format!("unknown statistic `{stat}`; expected min, median, mean, max or pNN (e.g. p99)")));
                    continue;
                }
                pivot.stat = stat;
            }
            _ => {}
        }
    }
    for what in ["rows", "columns", "metric"] {
        if !entries.iter().any(|e| e.name == what) && !misspelt(all, &PIVOT_KEYS, what) {
            errs.push(missing(v.pos, path, what));
        }
    }
    if pivot.stat.is_empty() {
        pivot.stat = "median".into();
    }
    // Several metrics need a place: a column each unless `metric` is among the rows.
    let placed = pivot
        .rows
        .iter()
        .chain(&pivot.columns)
        .any(|k| k.name == "metric");
    if !pivot.metrics.is_empty() && !placed {
        pivot.columns.push(PivotKey {
            name: "metric".into(),
            line: v.pos.line,
            column: v.pos.column,
        });
    }
    errs.clean_since(start, (pivot, metric_refs))
}
