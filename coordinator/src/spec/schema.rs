//! The shape of a campaign file: walks the positioned YAML tree, checks every
//! key, type and value that can be judged on its own, and produces a
//! [`Spec`] that still holds positions and unsubstituted templates. It does
//! not expand the matrix or substitute `${param}`: that needs the whole file.

use std::collections::HashMap;

use super::accessors::{
    choice, integer, known, map, missing, misspelt, optional_text, percent, seq, string, template,
    text,
};
use super::error::{error, Errors, Pos, Result, SpecError, SpecErrors, WithHint};
use super::metrics::{MetricRef, Named};
use super::model::{
    DeviceSelector, HostLabels, OnFailure, Order, Repeat, ReportSpec, Track, Until,
};
use super::prepare::{self, PrepareSpec};
use super::report_spec::read_report;
use super::template::{is_identifier, Template, RESERVED};
use super::tree::{join, Entry, Kind, Node, ScalarType};

const MAX_NAME_LEN: usize = 64;
pub(crate) const MAX_REPEAT: u32 = 10_000;
const DEFAULT_REPEAT: u32 = 3;
pub(crate) const MAX_WARMUP: u32 = 1_000;

const TOP_KEYS: [&str; 17] = [
    "name",
    "series",
    "track",
    "description",
    "hosts",
    "matrix",
    "workload",
    "phases",
    "repeat",
    "warmup",
    "order",
    "seed",
    "on_failure",
    "devices",
    "storage",
    "report",
    "prepare",
];
const PHASE_WORDS: [&str; 4] = ["sync", "drop_caches", "reboot", "clean"];
const PHASE_WITH_ARG: [&str; 2] = ["fstrim", "command"];
const ALL_PHASES: [&str; 6] = [
    "sync",
    "drop_caches",
    "reboot",
    "clean",
    "fstrim",
    "command",
];

#[derive(Debug)]
pub(crate) struct Spec {
    pub name: String,
    /// `series:`: the series its runs belong to, when not its name.
    pub series: Option<String>,
    /// `track: { threshold: 3%, against: last-3 }` (`report::history`).
    pub track: Track,
    pub description: Option<String>,
    pub hosts: Vec<String>,
    pub host_labels: Option<HostLabels>,
    pub matrix: Option<MatrixSpec>,
    pub workload: WorkloadSpec,
    pub devices: Option<DeviceSelector>,
    pub storage: Option<StorageSpec>,
    pub report: ReportSpec,
    /// Every `report:` setting that names a metric, checked once the cells are known.
    pub metric_refs: Vec<MetricRef>,
    pub before_each: Vec<PhaseSpec>,
    pub repeat: Repeat,
    /// Where `repeat` is written (the campaign's first line without it), for the size check.
    pub repeat_pos: Pos,
    pub warmup: u32,
    pub order: Order,
    pub on_failure: OnFailure,
    pub prepare: Option<PrepareSpec>,
}

impl Spec {
    /// Every string that may hold `${param}`: the workload's, the phases', storage's.
    pub(crate) fn templates(&self) -> Vec<&Template> {
        let mut out: Vec<&Template> = Vec::new();
        match &self.workload {
            WorkloadSpec::Command(c) => {
                out.extend(c.setup.iter().chain(&c.clean).chain([&c.run]));
                out.extend(c.user.iter().chain(&c.home));
            }
            WorkloadSpec::Tool(t) => {
                out.extend(t.fields.iter().chain(&t.options).map(|(_, t)| t));
            }
        }
        for p in &self.before_each {
            if let PhaseSpec::Fstrim(t) | PhaseSpec::Command(t) = p {
                out.push(t);
            }
        }
        if let Some(st) = &self.storage {
            out.extend(st.fields.iter().map(|(_, t)| t));
        }
        out
    }
}

/// `storage:` with its settings as templates (they may use `${param}`).
#[derive(Debug)]
pub(crate) struct StorageSpec {
    pub pos: Pos,
    pub fields: Vec<(String, Template)>,
}

#[derive(Debug)]
// One per campaign: its size does not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum WorkloadSpec {
    Command(CommandSpec),
    Tool(ToolSpec),
}

/// A built-in or tool workload (`fsync`, `fio`, `bonnie`, `compilebench`): its fields
/// as templates, typed per cell by `super::workload` once `${param}` is substituted.
#[derive(Debug)]
pub(crate) struct ToolSpec {
    pub kind: &'static str,
    /// The kind's key, for "missing field" errors.
    pub pos: Pos,
    pub fields: Vec<(String, Template)>,
    /// fio's `options:` mapping (fio option → value).
    pub options: Vec<(String, Template)>,
}

#[derive(Debug)]
pub(crate) struct CommandSpec {
    pub setup: Option<Template>,
    pub clean: Option<Template>,
    pub run: Template,
    /// The user setup, clean and run run as, and its HOME.
    pub user: Option<Template>,
    pub home: Option<Template>,
}

#[derive(Debug)]
pub(crate) enum PhaseSpec {
    Sync,
    DropCaches,
    Reboot,
    /// Where the item was written: it is only valid with a clean command.
    Clean {
        pos: Pos,
        path: String,
    },
    Fstrim(Template),
    Command(Template),
}

#[derive(Debug)]
pub(crate) struct MatrixSpec {
    /// The `matrix` key, for errors about the matrix as a whole.
    pub pos: Pos,
    pub params: Vec<Param>,
    /// The `exclude` key, for "exclude removes everything".
    pub exclude_pos: Pos,
    pub exclude: Vec<Pairs>,
    pub include: Vec<Pairs>,
    /// `labels: [replicate]`: parameters that only name cells (deliberate replicates),
    /// exempt from the rule that every parameter changes what runs; with where each is
    /// written.
    pub labels: Vec<(String, Pos)>,
}

#[derive(Debug)]
pub(crate) struct Param {
    pub name: String,
    /// The parameter's key, for errors about the parameter as a whole.
    pub pos: Pos,
    pub values: Vec<String>,
}

/// One `exclude` or `include` entry.
#[derive(Debug)]
pub(crate) struct Pairs {
    pub pos: Pos,
    pub path: String,
    pub pairs: Vec<Pair>,
}

#[derive(Debug)]
pub(crate) struct Pair {
    pub key: String,
    pub key_pos: Pos,
    pub value: String,
    pub value_pos: Pos,
}

/// Reads the document root into a [`Spec`], or every mistake of its keys, types
/// and values: each key and list item is judged on its own, and one that is wrong
/// does not stop the others being read. Checks between keys (`seed` needs
/// `order: shuffled`) run only when the keys they compare are valid.
pub(crate) fn read(root: &Node, stored: bool) -> std::result::Result<Spec, SpecErrors> {
    let entries = map(
        root,
        "",
        "a campaign (a mapping with `name:`, `workload:`, …)",
    )?;
    let mut errs = Errors::default();
    let root_entries = entries;
    let entries = known(entries, "", &TOP_KEYS, &mut errs);

    let mut keys = TopKeys::new();
    for e in &entries {
        keys.read(e, stored, &mut errs);
    }

    let given =
        |key: &str| entries.iter().any(|e| e.name == key) || misspelt(root_entries, &TOP_KEYS, key);
    if !given("name") {
        errs.push(
            missing(root.pos, "", "name")
                .hint("every campaign needs a name, e.g. `name: fsync-sizes`"),
        );
    }
    if !given("workload") {
        errs.push(
            missing(root.pos, "", "workload")
                .hint("say what to measure, e.g. `workload: { command: { run: \"make -j4\" } }`"),
        );
    }
    keys.check_clean_phase(&mut errs);
    keys.check_prepare(given("devices"), &mut errs);
    let order = keys.order(&mut errs);
    keys.finish(order, errs)
}

/// The top-level keys as [`read`] finds them: `None` where a key is absent or its value
/// wrong (then its error is recorded), the default where a key may be left out.
struct TopKeys {
    name: Option<String>,
    series: Option<String>,
    track: Track,
    description: Option<String>,
    hosts: Option<(Vec<String>, Option<HostLabels>)>,
    matrix: Option<MatrixSpec>,
    workload: Option<WorkloadSpec>,
    devices: Option<DeviceSelector>,
    storage: Option<StorageSpec>,
    report: Option<(ReportSpec, Vec<MetricRef>)>,
    before_each: Option<Vec<PhaseSpec>>,
    repeat: Repeat,
    repeat_pos: Pos,
    warmup: u32,
    /// `repeat.until`'s metric, checked with the report's once the cells are known.
    metric_refs_extra: Vec<MetricRef>,
    /// `None` inside: the key is there but its value is wrong.
    order: Option<Option<Order>>,
    seed: Option<(u64, Pos)>,
    on_failure: OnFailure,
    prepare: Option<PrepareSpec>,
    /// Where `repeat:` and `warmup:` are written, when they are (`prepare` checks them).
    repeat_given: Option<Pos>,
    warmup_given: Option<Pos>,
}

impl TopKeys {
    /// Every key as if absent: a campaign without `report:` or `phases:` has none.
    fn new() -> TopKeys {
        TopKeys {
            name: None,
            series: None,
            track: Track::default(),
            description: None,
            hosts: None,
            matrix: None,
            workload: None,
            devices: None,
            storage: None,
            report: Some((ReportSpec::default(), Vec::new())),
            before_each: Some(Vec::new()),
            repeat: Repeat::fixed(DEFAULT_REPEAT),
            repeat_pos: Pos { line: 1, column: 1 },
            warmup: 0,
            metric_refs_extra: Vec::new(),
            order: None,
            seed: None,
            on_failure: OnFailure::Continue,
            prepare: None,
            repeat_given: None,
            warmup_given: None,
        }
    }

    /// Reads one top-level key `e` (one `known` let through), recording its mistakes.
    fn read(&mut self, e: &Entry, stored: bool, errs: &mut Errors) {
        let path = e.name.as_str();
        let v = &e.value;
        match path {
            "name" => self.name = errs.ok(campaign_name(v)),
            "series" => self.series = errs.ok(series_name(v)),
            "track" => self.track = read_track(v, stored, errs),
            "description" => {
                self.description = errs.ok(optional_text(v, path, "a description")).flatten()
            }
            "hosts" => self.hosts = read_hosts(e, errs),
            "matrix" => self.matrix = read_matrix(e, errs),
            "workload" => self.workload = read_workload(e, errs),
            "devices" => self.devices = read_devices(v, errs),
            "storage" => self.storage = read_storage(e, errs),
            "report" => self.report = read_report(v, errs),
            "phases" => self.before_each = read_phases(v, errs),
            "prepare" => {
                if let Some((p, metric)) = prepare::read(e, stored, errs) {
                    self.prepare = Some(p);
                    self.metric_refs_extra.extend(metric);
                }
            }
            "repeat" => {
                self.repeat_given = Some(e.key.pos);
                if let Some((r, metric)) = read_repeat(v, stored, errs) {
                    self.repeat = r;
                    self.repeat_pos = v.pos;
                    self.metric_refs_extra.extend(metric);
                }
            }
            "warmup" => {
                self.warmup_given = Some(e.key.pos);
                if let Some(n) = errs.ok(integer(
                    v,
                    path,
                    0,
                    i128::from(MAX_WARMUP),
                    "warm-up runs per cell, not counted",
                )) {
                    // In range 0..=MAX_WARMUP, so it fits.
                    self.warmup = u32::try_from(n).unwrap_or(MAX_WARMUP);
                }
            }
            "order" => {
                self.order = Some(
                    errs.ok(choice(v, path, &["interleaved", "sequential", "shuffled"]))
                        .map(|c| match c {
                            "interleaved" => Order::Interleaved,
                            "sequential" => Order::Sequential,
                            _ => Order::Shuffled { seed: 0 },
                        }),
                );
            }
            "seed" => {
                if let Some(n) = errs.ok(integer(v, path, 0, i128::from(u64::MAX), "seed")) {
                    self.seed = Some((u64::try_from(n).unwrap_or(u64::MAX), e.key.pos));
                }
            }
            "on_failure" => {
                if let Some(c) = errs.ok(choice(v, path, &["continue", "abort"])) {
                    self.on_failure = match c {
                        "abort" => OnFailure::Abort,
                        _ => OnFailure::Continue,
                    };
                }
            }
            // `known` left only the keys above.
            _ => {}
        }
    }

    /// The `clean` phase runs the workload's clean command, so it needs one.
    fn check_clean_phase(&self, errs: &mut Errors) {
        let (Some(workload), Some(phases)) = (&self.workload, &self.before_each) else {
            return;
        };
        if !matches!(
            workload,
            WorkloadSpec::Command(CommandSpec { clean: Some(_), .. })
        ) {
            if let Some(PhaseSpec::Clean { pos, path }) =
                phases.iter().find(|p| matches!(p, PhaseSpec::Clean { .. }))
            {
                errs.push(error(
                    *pos,
                    path,
                    "the `clean` phase runs the workload's clean command, but `workload.command.clean` is not set",
                )
                .hint("add `clean:` under `workload.command`, or use a `{ command: … }` phase instead"));
            }
        }
    }

    /// What `prepare:` must agree with: `prepare::check_with`.
    fn check_prepare(&self, devices: bool, errs: &mut Errors) {
        let Some(p) = &self.prepare else {
            return;
        };
        let fstrims = self
            .before_each
            .iter()
            .flatten()
            .filter_map(|ph| match ph {
                PhaseSpec::Fstrim(t) => Some((t.pos, t.path.clone())),
                _ => None,
            })
            .collect();
        let elsewhere = prepare::Elsewhere {
            devices,
            repeat: self.repeat_given,
            warmup: self.warmup_given,
            fstrims,
        };
        prepare::check_with(p, &elsewhere, errs);
    }

    /// The campaign's order: `seed` only goes with `order: shuffled`.
    fn order(&self, errs: &mut Errors) -> Order {
        match (self.order, self.seed) {
            (Some(Some(Order::Shuffled { .. })), Some((seed, _))) => Order::Shuffled { seed },
            // A misspelt `order` may have meant `shuffled`: its own error says enough.
            (Some(None), _) => Order::Interleaved,
            (_, Some((_, pos))) => {
                errs.push(
                    error(pos, "seed", "`seed` only applies when `order: shuffled`")
                        .hint("add `order: shuffled`, or remove `seed`"),
                );
                Order::Interleaved
            }
            (order, None) => order.flatten().unwrap_or(Order::Interleaved),
        }
    }

    /// The [`Spec`], unless a required key is absent or wrong or any mistake was recorded.
    fn finish(self, order: Order, errs: Errors) -> std::result::Result<Spec, SpecErrors> {
        // Every `None` here recorded an error (a missing key is recorded by `read`).
        let (Some(name), Some(workload), Some((report, mut metric_refs)), Some(before_each)) =
            (self.name, self.workload, self.report, self.before_each)
        else {
            return Err(errs.finish());
        };
        metric_refs.extend(self.metric_refs_extra);
        if !errs.is_empty() {
            return Err(errs.finish());
        }
        let hosts = self.hosts;
        Ok(Spec {
            name,
            series: self.series,
            track: self.track,
            description: self.description,
            host_labels: hosts.as_ref().and_then(|(_, l)| l.clone()),
            hosts: hosts
                .map(|(names, _)| names)
                .unwrap_or_else(|| vec!["local".to_string()]),
            matrix: self.matrix,
            workload,
            devices: self.devices,
            storage: self.storage,
            report,
            metric_refs,
            before_each,
            repeat: self.repeat,
            repeat_pos: self.repeat_pos,
            warmup: self.warmup,
            order,
            on_failure: self.on_failure,
            prepare: self.prepare,
        })
    }
}

const REPEAT_KEYS: [&str; 3] = ["min", "max", "until"];
const UNTIL_KEYS: [&str; 2] = ["metric", "ci"];

/// `repeat: 5`, or `repeat: { min: 5, max: 50, until: { metric: wall, ci: 2% } }`: at
/// least `min`, at most `max` repetitions per cell, stopping a cell once the 95% interval
/// of its `until.metric` median is within ± `ci` of the median.
fn read_repeat(v: &Node, stored: bool, errs: &mut Errors) -> Option<(Repeat, Option<MetricRef>)> {
    let what = "repetitions per cell";
    let max_repeat = i128::from(MAX_REPEAT);
    if !matches!(v.kind, Kind::Map(_)) {
        let n = errs.ok(integer(v, "repeat", 1, max_repeat, what))?;
        // In range 1..=MAX_REPEAT, so it fits.
        return Some((Repeat::fixed(u32::try_from(n).unwrap_or(MAX_REPEAT)), None));
    }
    let entries = errs.ok(map(
        v,
        "repeat",
        "a number, or `{ min: 5, max: 50, until: { metric: wall, ci: 2% } }`",
    ))?;
    let start = errs.count();
    let (mut min, mut max, mut until, mut metric) = (None, None, None, None);
    for e in known(entries, "repeat", &REPEAT_KEYS, errs) {
        let path = join("repeat", &e.name);
        match e.name.as_str() {
            "min" => min = errs.ok(integer(&e.value, &path, 1, max_repeat, what)),
            "max" => max = errs.ok(integer(&e.value, &path, 1, max_repeat, what)),
            "until" => {
                if let Some((u, m)) = read_until(&e.value, &path, stored, errs) {
                    until = Some(u);
                    metric = Some(m);
                }
            }
            _ => {}
        }
    }
    if errs.count() > start {
        return None;
    }
    let absent = if min.is_none() { "min" } else { "max" };
    let (Some(min), Some(max)) = (min, max) else {
        errs.push(
            error(v.pos, "repeat", format!("`repeat` as a mapping needs `{absent}`"))
                .hint("e.g. `repeat: { min: 5, max: 50, until: { metric: wall, ci: 2% } }`, or a plain number"),
        );
        return None;
    };
    // Both in range 1..=MAX_REPEAT, so they fit.
    let (min, max) = (
        u32::try_from(min).unwrap_or(MAX_REPEAT),
        u32::try_from(max).unwrap_or(MAX_REPEAT),
    );
    if min > max {
        errs.push(error(
            v.pos,
            "repeat",
            format!("`min` ({min}) is more than `max` ({max})"),
        ));
        return None;
    }
    if until.is_none() && min != max {
        errs.push(
            error(
                v.pos,
                "repeat",
                format!("`repeat` from {min} to {max} needs `until`, which says when a cell has run enough"),
            )
            .hint("add `until: { metric: wall, ci: 2% }`, or give one number"),
        );
        return None;
    }
    Some((Repeat { min, max, until }, metric))
}

fn read_until(v: &Node, path: &str, stored: bool, errs: &mut Errors) -> Option<(Until, MetricRef)> {
    let entries = errs.ok(map(v, path, "`{ metric: wall, ci: 2% }`"))?;
    let start = errs.count();
    let (mut metric, mut ci) = (None, None);
    for e in known(entries, path, &UNTIL_KEYS, errs) {
        let key_path = join(path, &e.name);
        match e.name.as_str() {
            "metric" => {
                metric = errs
                    .ok(string(&e.value, &key_path, "a metric name like `wall`"))
                    .map(|m| (m, e.value.pos, key_path))
            }
            "ci" => ci = errs.ok(percent(&e.value, &key_path, stored)),
            _ => {}
        }
    }
    if errs.count() > start {
        return None;
    }
    let absent = if metric.is_none() { "metric" } else { "ci" };
    let (Some((metric, pos, metric_path)), Some(ci_pct)) = (metric, ci) else {
        errs.push(
            error(v.pos, path, format!("`until` needs `{absent}`"))
                .hint("e.g. `until: { metric: wall, ci: 2% }`"),
        );
        return None;
    };
    let r = MetricRef {
        pos,
        path: metric_path,
        named: Named::Metric(metric.clone()),
    };
    Some((Until { metric, ci_pct }, r))
}

const TRACK_KEYS: [&str; 2] = ["threshold", "against"];

/// The most earlier runs a baseline pools.
const MAX_AGAINST: u32 = 30;
/// `track: { threshold: 3%, against: last-3 }`: a run of the series is flagged against
/// the run before (`last`), or the last N pooled, only when its shift's whole interval lies
/// beyond ± the threshold.
fn read_track(v: &Node, stored: bool, errs: &mut Errors) -> Track {
    let mut track = Track::default();
    let Some(entries) = errs.ok(map(
        v,
        "track",
        "`{ threshold: 3%, against: last }` (or `against: last-3`)",
    )) else {
        return track;
    };
    for e in known(entries, "track", &TRACK_KEYS, errs) {
        match e.name.as_str() {
            "threshold" => {
                track.threshold_pct = errs.ok(percent(&e.value, "track.threshold", stored))
            }
            "against" => track.against = errs.ok(against(&e.value)),
            _ => {}
        }
    }
    track
}

/// `last`, or `last-N` with N from 1 to `MAX_AGAINST`.
fn against(v: &Node) -> Result<u32> {
    let text = string(v, "track.against", "`last` or `last-N`")?;
    let n = match text.trim() {
        "last" => Some(1),
        t => t.strip_prefix("last-").and_then(|n| n.parse::<u32>().ok()),
    };
    match n {
        Some(n) if (1..=MAX_AGAINST).contains(&n) => Ok(n),
        _ => Err(error(
            v.pos,
            "track.against",
            format!("`{text}` is not `last` or `last-N` (N from 1 to {MAX_AGAINST})"),
        )
        .hint("e.g. `against: last-3`: the last three runs pooled")),
    }
}

/// `series:` is named as a campaign is.
fn series_name(v: &Node) -> Result<String> {
    named(v, "series", "a series name")
}

fn campaign_name(v: &Node) -> Result<String> {
    named(v, "name", "a campaign name")
}

fn named(v: &Node, key: &str, what: &str) -> Result<String> {
    let name = string(v, key, what)?;
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
    if !valid {
        let lower = name.to_lowercase().replace(' ', "-");
        return Err(error(v.pos, key, format!("`{name}` is not a valid {}", &what[2..]))
            .hint(format!(
                "use lowercase letters, digits, `.`, `_` and `-`, starting with a letter or digit (e.g. `{lower}`)"
            )));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(error(
            v.pos,
            key,
            format!(
                "the {} is {} characters long; at most {MAX_NAME_LEN} are allowed",
                &what[2..],
                name.len()
            ),
        ));
    }
    Ok(name)
}

fn read_hosts(e: &Entry, errs: &mut Errors) -> Option<(Vec<String>, Option<HostLabels>)> {
    let entries = errs.ok(map(
        &e.value,
        "hosts",
        "a mapping like `{ names: [rc66, rcmonster] }` or `{ labels: { rack: b12 } }`",
    ))?;
    let start = errs.count();
    let all = entries;
    let entries = known(entries, "hosts", &["names", "labels"], errs);
    let labels_entry = entries.iter().find(|e| e.name == "labels");
    let labels = labels_entry.and_then(|l| {
        let pairs = errs.ok(map(
            &l.value,
            "hosts.labels",
            "a mapping of label to value, like `{ rack: b12 }`",
        ))?;
        if pairs.is_empty() {
            errs.push(error(l.value.pos, "hosts.labels", "no labels given")
                .hint("e.g. `labels: { role: storage-lab }` selects every agent started with `--label role=storage-lab`"));
            return None;
        }
        let mut out = Vec::new();
        for p in pairs {
            let path = format!("hosts.labels.{}", p.name);
            if let Some(value) = errs.ok(text(&p.value, &path, "a label value")) {
                out.push((p.name.clone(), value));
            }
        }
        Some(HostLabels {
            pairs: out,
            line: l.value.pos.line,
            column: l.value.pos.column,
        })
    });
    let Some(names) = entries.iter().find(|e| e.name == "names") else {
        if labels_entry.is_none() && !misspelt(all, &["names", "labels"], "names") {
            errs.push(missing(e.key.pos, "hosts", "names").hint(
                "list the hosts to run on, e.g. `hosts: { names: [rc66] }`, or select them by label",
            ));
        }
        return errs.clean_since(start, (Vec::new(), labels));
    };
    let items = errs.ok(seq(&names.value, "hosts.names", "a list of host names"))?;
    if items.is_empty() {
        errs.push(
            error(
                names.value.pos,
                "hosts.names",
                "the list of host names is empty",
            )
            .hint("name at least one host, or remove `hosts` to run on this machine (`local`)"),
        );
    }
    let mut hosts: Vec<String> = Vec::new();
    // Lowercased name → where it was first listed.
    let mut seen: HashMap<String, Pos> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("hosts.names[{i}]");
        let Some(host) = errs.ok(text(item, &path, "a host name")) else {
            continue;
        };
        if !valid_hostname(&host) {
            errs.push(error(item.pos, &path, format!("`{host}` is not a valid host name"))
                .hint("host names are letters, digits and `-`, in dot-separated labels of at most 63 characters"));
            continue;
        }
        if let Some(first) = seen.insert(host.to_ascii_lowercase(), item.pos) {
            errs.push(error(
                item.pos,
                &path,
                format!(
                    "duplicate host `{host}` (first listed at line {}, column {})",
                    first.line, first.column
                ),
            ));
            continue;
        }
        hosts.push(host);
    }
    errs.clean_since(start, (hosts, labels))
}

/// RFC 1123 host names: what an operator can put in DNS or /etc/hosts.
fn valid_hostname(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

fn read_matrix(e: &Entry, errs: &mut Errors) -> Option<MatrixSpec> {
    let entries = errs.ok(map(
        &e.value,
        "matrix",
        "a mapping of parameter names to lists of values",
    ))?;
    if entries.is_empty() {
        errs.push(
            error(e.value.pos, "matrix", "the matrix is empty")
                .hint("add a parameter with its values, e.g. `bs: [4k, 64k]`, or remove `matrix`"),
        );
        return None;
    }
    let start = errs.count();
    let mut m = MatrixSpec {
        pos: e.key.pos,
        params: Vec::new(),
        exclude_pos: e.key.pos,
        exclude: Vec::new(),
        include: Vec::new(),
        labels: Vec::new(),
    };
    for entry in entries {
        let path = join("matrix", &entry.name);
        match entry.name.as_str() {
            "labels" => m.labels = read_labels(&entry.value, &path, errs),
            "exclude" => {
                m.exclude_pos = entry.key.pos;
                m.exclude = read_pairs_list(&entry.value, &path, false, errs);
            }
            "include" => m.include = read_pairs_list(&entry.value, &path, true, errs),
            name => {
                errs.ok(param_name(name, entry.key.pos, &path));
                if let Some(p) = read_param(entry, &path, errs) {
                    m.params.push(p);
                }
            }
        }
    }
    errs.clean_since(start, m)
}

/// A parameter name must be usable as `${name}` and must not shadow a name
/// platter fills in itself.
fn param_name(name: &str, pos: Pos, path: &str) -> Result<()> {
    if !is_identifier(name) {
        let fixed: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        return Err(error(pos, path, format!("`{name}` is not a valid parameter name"))
            .hint(format!(
                "parameter names are letters, digits and `_`, not starting with a digit, so that `${{name}}` can refer to them (e.g. `{fixed}`)"
            )));
    }
    if RESERVED.contains(&name) {
        return Err(error(
            pos,
            path,
            format!("`{name}` is a reserved name: platter fills in `${{{name}}}` itself"),
        )
        .hint(format!(
            "reserved names are {}; pick another parameter name",
            super::error::backticked(&RESERVED)
        )));
    }
    Ok(())
}

fn read_param(entry: &Entry, path: &str, errs: &mut Errors) -> Option<Param> {
    let name = &entry.name;
    let Kind::Seq(items) = &entry.value.kind else {
        let mut err = error(
            entry.value.pos,
            path,
            format!(
                "expected a list of values, found {}",
                entry.value.describe()
            ),
        );
        if let Kind::Scalar { text, ty } = &entry.value.kind {
            if *ty != ScalarType::Null {
                err = err.hint(format!("for a single value write `{name}: [{text}]`"));
            }
        }
        errs.push(err);
        return None;
    };
    if items.is_empty() {
        errs.push(
            error(
                entry.value.pos,
                path,
                format!("the list of values for `{name}` is empty"),
            )
            .hint(format!("give `{name}` at least one value, or remove it")),
        );
        return None;
    }
    let start = errs.count();
    let mut values: Vec<String> = Vec::new();
    // Where each value was first written (a linear search is quadratic in long lists).
    let mut seen: HashMap<String, Pos> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        let item_path = format!("{path}[{i}]");
        let Some(value) = errs.ok(matrix_value(item, &item_path)) else {
            continue;
        };
        if let Some(first) = seen.insert(value.clone(), item.pos) {
            errs.push(
                error(
                    item.pos,
                    &item_path,
                    format!(
                        "duplicate value `{value}` for `{name}` (first at line {}, column {})",
                        first.line, first.column
                    ),
                )
                .hint("each value makes its own cells; listing it twice would run them twice"),
            );
            continue;
        }
        values.push(value);
    }
    errs.clean_since(
        start,
        Param {
            name: name.clone(),
            pos: entry.key.pos,
            values,
        },
    )
}

/// `matrix.labels`: a list of parameter names. Whether each names a parameter is judged
/// once the matrix is expanded (include entries add parameters too).
fn read_labels(node: &Node, path: &str, errs: &mut Errors) -> Vec<(String, Pos)> {
    let what = "a list of parameter names, like `[replicate]`";
    let Some(items) = errs.ok(seq(node, path, what)) else {
        return Vec::new();
    };
    if items.is_empty() {
        errs.push(
            error(node.pos, path, "the list of labels is empty")
                .hint("name the parameters that only label cells, or remove `labels`"),
        );
    }
    let mut out: Vec<(String, Pos)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_path = format!("{path}[{i}]");
        let Some(name) = errs.ok(string(item, &item_path, "a parameter name")) else {
            continue;
        };
        if let Some((_, first)) = out.iter().find(|(n, _)| *n == name) {
            errs.push(error(
                item.pos,
                &item_path,
                format!(
                    "`{name}` is listed twice (first at line {}, column {})",
                    first.line, first.column
                ),
            ));
            continue;
        }
        out.push((name, item.pos));
    }
    out
}

/// A matrix value: any scalar but null, kept as written (`4k`, `0.5`, `true`)
/// because it ends up inside command lines.
fn matrix_value(node: &Node, path: &str) -> Result<String> {
    let err = || {
        error(
            node.pos,
            path,
            format!(
                "a matrix value must be a single string, number or boolean, found {}",
                node.describe()
            ),
        )
    };
    match &node.kind {
        Kind::Scalar {
            ty: ScalarType::Null,
            ..
        } => Err(err().hint("write `\"\"` if you mean an empty string")),
        Kind::Seq(_) | Kind::Map(_) => Err(err()),
        Kind::Scalar { text, .. } => Ok(text.clone()),
    }
}

fn read_pairs_list(node: &Node, path: &str, include: bool, errs: &mut Errors) -> Vec<Pairs> {
    let what = if include { "include" } else { "exclude" };
    let Some(items) = errs.ok(seq(node, path, "a list of mappings (parameter: value)")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_path = format!("{path}[{i}]");
        let Some(entries) = errs.ok(map(item, &item_path, "a mapping of parameter: value")) else {
            continue;
        };
        if entries.is_empty() {
            let message = if include {
                "this include entry is empty and adds nothing"
            } else {
                "this exclude entry is empty and would remove every combination"
            };
            errs.push(error(item.pos, &item_path, message).hint(format!(
                "give {what} entries `parameter: value` pairs, e.g. `{{ bs: 4k }}`"
            )));
            continue;
        }
        let mut pairs = Vec::new();
        for e in entries {
            let pair_path = join(&item_path, &e.name);
            if include {
                errs.ok(param_name(&e.name, e.key.pos, &pair_path));
            }
            if let Some(value) = errs.ok(matrix_value(&e.value, &pair_path)) {
                pairs.push(Pair {
                    key: e.name.clone(),
                    key_pos: e.key.pos,
                    value,
                    value_pos: e.value.pos,
                });
            }
        }
        out.push(Pairs {
            pos: item.pos,
            path: item_path,
            pairs,
        });
    }
    out
}

fn read_workload(e: &Entry, errs: &mut Errors) -> Option<WorkloadSpec> {
    let entries = errs.ok(map(
        &e.value,
        "workload",
        "a mapping naming the workload kind",
    ))?;
    let start = errs.count();
    let entries = known(entries, "workload", &super::workload::KINDS, errs);
    let Some(kind) = entries.first() else {
        // An unknown kind was reported as such.
        if errs.count() == start {
            errs.push(
                error(e.value.pos, "workload", "the workload is empty")
                    .hint("name its kind, e.g. `workload: { command: { run: \"make -j4\" } }`"),
            );
        }
        return None;
    };
    if let Some(second) = entries.get(1) {
        errs.push(
            error(
                second.key.pos,
                &join("workload", &second.name),
                format!(
                    "a campaign measures one workload, but `{}` and `{}` are both given",
                    kind.name, second.name
                ),
            )
            .hint("put different workloads in different campaigns"),
        );
    }
    let path = join("workload", &kind.name);
    let workload = if kind.name != "command" {
        read_tool(kind, &path, errs).map(WorkloadSpec::Tool)
    } else {
        read_command(kind, &path, errs).map(WorkloadSpec::Command)
    };
    errs.clean_since(start, workload).flatten()
}

fn read_command(command: &Entry, path: &str, errs: &mut Errors) -> Option<CommandSpec> {
    let fields = errs.ok(map(
        &command.value,
        path,
        "a mapping with `run:` (and optional `setup:`, `clean:`, `user:`, `home:`)",
    ))?;
    let start = errs.count();
    let all = fields;
    let keys = ["setup", "clean", "run", "user", "home"];
    let fields = known(fields, path, &keys, errs);
    let mut setup = None;
    let mut clean = None;
    let mut run = None;
    let mut user = None;
    let mut home = None;
    for f in &fields {
        let at = join(path, &f.name);
        match f.name.as_str() {
            "setup" => setup = errs.ok(command_template(&f.value, &at)),
            "clean" => clean = errs.ok(command_template(&f.value, &at)),
            "run" => run = errs.ok(command_template(&f.value, &at)),
            "user" => user = errs.ok(named_template(&f.value, &at, "a user name")),
            "home" => home = errs.ok(named_template(&f.value, &at, "a directory")),
            _ => {}
        }
    }
    if let (Some(h), None) = (&home, fields.iter().find(|f| f.name == "user")) {
        errs.push(
            error(
                h.pos,
                &h.path,
                "`home` is the HOME of `user`, which is not set",
            )
            .hint("add `user: NAME` (a user of the host) next to it, or drop `home:`"),
        );
    }
    if !fields.iter().any(|f| f.name == "run") && !misspelt(all, &keys, "run") {
        errs.push(
            missing(command.key.pos, path, "run")
                .hint("`run:` is the command whose execution is measured"),
        );
    }
    let run = run?;
    let spec = CommandSpec {
        setup,
        clean,
        run,
        user,
        home,
    };
    errs.clean_since(start, spec)
}

/// A non-empty string setting that may hold `${param}` (`user:`, `home:`).
fn named_template(node: &Node, path: &str, expected: &str) -> Result<Template> {
    let text = text(node, path, expected)?;
    if text.trim().is_empty() {
        return Err(error(
            node.pos,
            path,
            format!("expected {expected}, found an empty string"),
        ));
    }
    Ok(Template {
        text,
        pos: node.pos,
        path: path.to_string(),
    })
}

const SELECTOR_KEYS: [&str; 6] = [
    "path",
    "by_id",
    "model",
    "serial",
    "transport",
    "controller",
];
const TRANSPORTS: [&str; 7] = ["ata", "usb", "nvme", "scsi", "virtio", "loop", "mmc"];

fn read_devices(v: &Node, errs: &mut Errors) -> Option<DeviceSelector> {
    let entries = errs.ok(map(
        v,
        "devices",
        "a device selector like `{ model: \"INTEL SSDSC2BW120A4\" }` or `{ path: /dev/loop7 }`",
    ))?;
    if entries.is_empty() {
        errs.push(
            error(v.pos, "devices", "the device selector is empty").hint(format!(
                "select by {}",
                super::error::backticked(&SELECTOR_KEYS)
            )),
        );
        return None;
    }
    let start = errs.count();
    let mut sel = DeviceSelector {
        line: v.pos.line,
        column: v.pos.column,
        ..Default::default()
    };
    for e in known(entries, "devices", &SELECTOR_KEYS, errs) {
        let path = join("devices", &e.name);
        let Some(value) = errs.ok(string(&e.value, &path, "a value to match")) else {
            continue;
        };
        if value.trim().is_empty() {
            errs.push(error(e.value.pos, &path, "the value is empty"));
            continue;
        }
        match e.name.as_str() {
            "path" => {
                if !value.starts_with("/dev/") {
                    errs.push(
                        error(
                            e.value.pos,
                            &path,
                            format!("`{value}` is not a device path"),
                        )
                        .hint("write the device node, e.g. `/dev/sdb` or a glob like `/dev/loop*`"),
                    );
                }
                sel.path = Some(value);
            }
            "by_id" => sel.by_id = Some(value),
            "model" => sel.model = Some(value),
            "serial" => sel.serial = Some(value),
            "transport" => {
                errs.ok(choice(&e.value, &path, &TRANSPORTS));
                sel.transport = Some(value);
            }
            "controller" => sel.controller = Some(value),
            _ => {}
        }
    }
    errs.clean_since(start, sel)
}

const STORAGE_KEYS: [&str; 6] = [
    "fs",
    "mkfs_options",
    "mount_options",
    "write_cache",
    "ramdisk",
    "encryption",
];

fn read_storage(e: &Entry, errs: &mut Errors) -> Option<StorageSpec> {
    let entries = errs.ok(map(
        &e.value,
        "storage",
        "a storage configuration like `{ fs: ext4, mount_options: noatime }`",
    ))?;
    let start = errs.count();
    let mut fields = Vec::new();
    for f in known(entries, "storage", &STORAGE_KEYS, errs) {
        let path = join("storage", &f.name);
        match f.name.as_str() {
            "ramdisk" => {
                let Some(r) = errs.ok(map(&f.value, &path, "a mapping like `{ size: 1G }`")) else {
                    continue;
                };
                let r = known(r, &path, &["size"], errs);
                let Some(size) = r.first() else {
                    errs.push(missing(f.key.pos, &path, "size"));
                    continue;
                };
                if let Some(t) = errs.ok(template(&size.value, &join(&path, "size"), "a size")) {
                    fields.push(("ramdisk.size".to_string(), t));
                }
            }
            "mount_options" if matches!(f.value.kind, Kind::Seq(_)) => {
                let Some(items) = errs.ok(seq(&f.value, &path, "mount options")) else {
                    continue;
                };
                let mut parts = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    if let Some(p) = errs.ok(text(item, &format!("{path}[{i}]"), "a mount option"))
                    {
                        parts.push(p);
                    }
                }
                fields.push((
                    f.name.clone(),
                    Template {
                        text: parts.join(","),
                        pos: f.value.pos,
                        path,
                    },
                ));
            }
            _ => {
                if let Some(t) = errs.ok(template(&f.value, &path, "a value")) {
                    fields.push((f.name.clone(), t));
                }
            }
        }
    }
    errs.clean_since(
        start,
        StorageSpec {
            pos: e.key.pos,
            fields,
        },
    )
}

fn read_tool(kind: &Entry, path: &str, errs: &mut Errors) -> Option<ToolSpec> {
    let (name, allowed, required) = super::workload::fields_of(&kind.name);
    let entries = errs.ok(map(
        &kind.value,
        path,
        &format!("a mapping of `{name}` settings"),
    ))?;
    let start = errs.count();
    let all = entries;
    let entries = known(entries, path, allowed, errs);
    let mut spec = ToolSpec {
        kind: name,
        pos: kind.key.pos,
        fields: Vec::new(),
        options: Vec::new(),
    };
    for f in &entries {
        let field_path = join(path, &f.name);
        if f.name == "options" {
            let Some(options) = errs.ok(map(
                &f.value,
                &field_path,
                "a mapping of fio options, e.g. `{ rw: randwrite, bs: 4k }`",
            )) else {
                continue;
            };
            for o in options {
                if let Some(why) = fio_owned(&o.name) {
                    let at = join(&field_path, &o.name);
                    errs.push(
                        error(o.key.pos, &at, format!("platter sets `{}` itself", o.name))
                            .hint(why),
                    );
                    continue;
                }
                let t = template(&o.value, &join(&field_path, &o.name), "an option value");
                if let Some(t) = errs.ok(t) {
                    spec.options.push((o.name.clone(), t));
                }
            }
            continue;
        }
        if let Some(t) = errs.ok(template(&f.value, &field_path, "a value")) {
            spec.fields.push((f.name.clone(), t));
        }
    }
    for r in required {
        if !entries.iter().any(|e| e.name == *r) && !misspelt(all, allowed, r) {
            errs.push(missing(kind.key.pos, path, r));
        }
    }
    errs.clean_since(start, spec)
}

/// Why a fio option is platter's, not the campaign's: fio runs as `fio
/// --output-format=json+ [--directory=…] --name=platter --OPTION=VALUE…`, and platter reads
/// the one JSON report fio prints. A second `name` opens a second job that takes the
/// options after it (the first is left with none: "you need to specify size="); the output
/// options take that report away; the others run nothing, or run elsewhere.
fn fio_owned(option: &str) -> Option<&'static str> {
    // fio reads `-` and `_` alike in option names.
    Some(match option.replace('_', "-").as_str() {
        "name" => {
            "the job is `platter`, and a second `name` starts a second job; for several jobs, \
             give a fio job file (`job_file:`)"
        }
        "output-format" | "output" | "minimal" | "terse-version" | "append-terse" => {
            "platter reads the JSON report fio prints on its standard output"
        }
        "status-interval" | "eta" | "eta-newline" | "eta-interval" => {
            "fio would print more than the one report platter reads"
        }
        "directory" => "give `directory:` beside `options:` (fio: { directory: …, options: … })",
        "client" | "server" | "daemonize" | "remote-config" => {
            "fio runs on each host the campaign selects (`hosts:`), never on another"
        }
        "parse-only" | "showcmd" | "version" | "help" | "cmdhelp" | "enghelp" | "crctest" => {
            "fio would run no job"
        }
        _ => return None,
    })
}

pub(crate) fn command_template(node: &Node, path: &str) -> Result<Template> {
    let text = text(node, path, "a command")?;
    if text.trim().is_empty() {
        return Err(error(node.pos, path, "the command is empty"));
    }
    Ok(Template {
        text,
        pos: node.pos,
        path: path.to_string(),
    })
}

fn read_phases(v: &Node, errs: &mut Errors) -> Option<Vec<PhaseSpec>> {
    let entries = errs.ok(map(
        v,
        "phases",
        "a mapping like `{ before_each: [sync, drop_caches] }`",
    ))?;
    let start = errs.count();
    let mut phases = Vec::new();
    for e in known(entries, "phases", &["before_each"], errs) {
        let path = "phases.before_each";
        let Some(items) = errs.ok(seq(&e.value, path, "a list of phases")) else {
            continue;
        };
        for (i, item) in items.iter().enumerate() {
            if let Some(p) = errs.ok(read_phase(item, &format!("{path}[{i}]"))) {
                phases.push(p);
            }
        }
    }
    errs.clean_since(start, phases)
}

fn read_phase(item: &Node, path: &str) -> Result<PhaseSpec> {
    match &item.kind {
        Kind::Scalar {
            text,
            ty: ScalarType::Str,
        } => match text.as_str() {
            "sync" => Ok(PhaseSpec::Sync),
            "drop_caches" => Ok(PhaseSpec::DropCaches),
            "reboot" => Ok(PhaseSpec::Reboot),
            "clean" => Ok(PhaseSpec::Clean {
                pos: item.pos,
                path: path.to_string(),
            }),
            "fstrim" => Err(
                error(item.pos, path, "the `fstrim` phase needs a mount point")
                    .hint("write it as `{ fstrim: /mnt/test }`"),
            ),
            "command" => Err(error(item.pos, path, "the `command` phase needs a command")
                .hint("write it as `{ command: \"echo 3 > /proc/sys/vm/drop_caches\" }`")),
            other => Err(unknown_phase(other, item.pos, path)),
        },
        Kind::Map(entries) => {
            if let Some(second) = entries.get(1) {
                return Err(error(
                    second.key.pos,
                    &join(path, &second.name),
                    "a phase is a mapping with exactly one key",
                )
                .hint("put each phase in its own list item"));
            }
            let Some(e) = entries.first() else {
                return Err(
                    error(item.pos, path, "an empty mapping is not a phase").hint(phase_list())
                );
            };
            let arg_path = join(path, &e.name);
            match e.name.as_str() {
                "fstrim" => {
                    let t = template(&e.value, &arg_path, "a mount point")?;
                    if t.text.trim().is_empty() {
                        return Err(error(e.value.pos, &arg_path, "the fstrim mount point is empty")
                            .hint("write the mount point to trim, e.g. `{ fstrim: /mnt/test }` or `{ fstrim: \"${mount}\" }`"));
                    }
                    Ok(PhaseSpec::Fstrim(t))
                }
                "command" => Ok(PhaseSpec::Command(command_template(&e.value, &arg_path)?)),
                word if PHASE_WORDS.contains(&word) => Err(error(
                    e.key.pos,
                    &arg_path,
                    format!("the `{word}` phase takes no argument"),
                )
                .hint(format!("write it as a plain list item: `- {word}`"))),
                other => Err(unknown_phase(other, e.key.pos, &arg_path)),
            }
        }
        _ => Err(error(
            item.pos,
            path,
            format!("expected a phase, found {}", item.describe()),
        )
        .hint(phase_list())),
    }
}

fn unknown_phase(word: &str, pos: Pos, path: &str) -> SpecError {
    let hint = match super::error::closest(word, &ALL_PHASES) {
        Some(c) => format!("did you mean `{c}`?"),
        None => phase_list(),
    };
    error(pos, path, format!("unknown phase `{word}`")).hint(hint)
}

fn phase_list() -> String {
    format!(
        "phases are {} and {}",
        super::error::backticked(&PHASE_WORDS),
        PHASE_WITH_ARG
            .iter()
            .map(|p| format!("`{{ {p}: … }}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}
