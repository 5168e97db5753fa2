//! The shape of a campaign file: walks the positioned YAML tree, checks every
//! key, type and value that can be judged on its own, and produces a
//! [`Spec`] that still holds positions and unsubstituted templates. It does
//! not expand the matrix or substitute `${param}`: that needs the whole file.

use super::error::{error, suggest, Pos, Result, SpecError, WithHint};
use super::metrics::{MetricRef, Named};
use super::tree::{join, Entry, Kind, Node, ScalarType};
use super::{OnFailure, Order};

pub(crate) const RESERVED: [&str; 5] = ["host", "mount", "device", "repetition", "cell"];
const MAX_NAME_LEN: usize = 64;
pub(crate) const MAX_REPEAT: u32 = 10_000;
const DEFAULT_REPEAT: u32 = 3;

const TOP_KEYS: [&str; 13] = [
    "name",
    "description",
    "hosts",
    "matrix",
    "workload",
    "phases",
    "repeat",
    "order",
    "seed",
    "on_failure",
    "devices",
    "storage",
    "report",
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

/// A string from `workload` or `phases` that may contain `${param}`; it keeps
/// its node's position so substitution errors can point at it.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    pub text: String,
    pub pos: Pos,
    pub path: String,
}

#[derive(Debug)]
pub(crate) struct Spec {
    pub name: String,
    pub description: Option<String>,
    pub hosts: Vec<String>,
    pub host_labels: Option<super::HostLabels>,
    pub matrix: Option<MatrixSpec>,
    pub workload: WorkloadSpec,
    pub devices: Option<super::DeviceSelector>,
    pub storage: Option<StorageSpec>,
    pub report: super::ReportSpec,
    /// Every `report:` setting that names a metric, checked once the cells are known.
    pub metric_refs: Vec<MetricRef>,
    pub before_each: Vec<PhaseSpec>,
    pub repeat: u32,
    /// Where `repeat` is written (the campaign's first line without it), for the size check.
    pub repeat_pos: Pos,
    pub order: Order,
    pub on_failure: OnFailure,
}

/// `storage:` with its settings as templates (they may use `${param}`).
#[derive(Debug)]
pub(crate) struct StorageSpec {
    pub pos: Pos,
    pub fields: Vec<(String, Template)>,
}

#[derive(Debug)]
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
}

#[derive(Debug)]
pub(crate) struct Param {
    pub name: String,
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

/// Reads the document root into a [`Spec`]. Keys are judged in the order
/// they are written, so the first error reported is the first in the file.
pub(crate) fn read(root: &Node) -> Result<Spec> {
    let entries = map(
        root,
        "",
        "a campaign (a mapping with `name:`, `workload:`, …)",
    )?;
    check_keys(entries, "", &TOP_KEYS)?;

    let mut name = None;
    let mut description = None;
    let mut hosts = None;
    let mut matrix = None;
    let mut workload = None;
    let mut devices = None;
    let mut storage = None;
    let mut report = super::ReportSpec::default();
    let mut metric_refs = Vec::new();
    let mut before_each = Vec::new();
    let mut repeat = DEFAULT_REPEAT;
    let mut repeat_pos = Pos { line: 1, column: 1 };
    let mut order = None;
    let mut seed: Option<(u64, Pos)> = None;
    let mut on_failure = OnFailure::Continue;

    for e in entries {
        let path = e.name.as_str();
        let v = &e.value;
        match path {
            "name" => name = Some(campaign_name(v)?),
            "description" => description = optional_text(v, path, "a description")?,
            "hosts" => hosts = Some(read_hosts(e)?),
            "matrix" => matrix = Some(read_matrix(e)?),
            "workload" => workload = Some(read_workload(e)?),
            "devices" => devices = Some(read_devices(v)?),
            "storage" => storage = Some(read_storage(e)?),
            "report" => (report, metric_refs) = read_report(v)?,
            "phases" => before_each = read_phases(v)?,
            "repeat" => {
                let n = integer(v, path, 1, i128::from(MAX_REPEAT), "repetitions")?;
                // In range 1..=MAX_REPEAT, so it fits.
                repeat = u32::try_from(n).unwrap_or(MAX_REPEAT);
                repeat_pos = v.pos;
            }
            "order" => {
                order = Some(
                    match choice(v, path, &["interleaved", "sequential", "shuffled"])? {
                        "interleaved" => Order::Interleaved,
                        "sequential" => Order::Sequential,
                        _ => Order::Shuffled { seed: 0 },
                    },
                );
            }
            "seed" => {
                let n = integer(v, path, 0, i128::from(u64::MAX), "seed")?;
                seed = Some((u64::try_from(n).unwrap_or(u64::MAX), e.key.pos));
            }
            "on_failure" => {
                on_failure = match choice(v, path, &["continue", "abort"])? {
                    "abort" => OnFailure::Abort,
                    _ => OnFailure::Continue,
                };
            }
            // check_keys rejected everything else.
            _ => {}
        }
    }

    let Some(name) = name else {
        return Err(missing(root.pos, "", "name")
            .hint("every campaign needs a name, e.g. `name: fsync-sizes`"));
    };
    let Some(workload) = workload else {
        return Err(missing(root.pos, "", "workload")
            .hint("say what to measure, e.g. `workload: { command: { run: \"make -j4\" } }`"));
    };
    if !matches!(
        &workload,
        WorkloadSpec::Command(CommandSpec { clean: Some(_), .. })
    ) {
        if let Some(PhaseSpec::Clean { pos, path }) = before_each
            .iter()
            .find(|p| matches!(p, PhaseSpec::Clean { .. }))
        {
            return Err(error(
                *pos,
                path,
                "the `clean` phase runs the workload's clean command, but `workload.command.clean` is not set",
            )
            .hint("add `clean:` under `workload.command`, or use a `{ command: … }` phase instead"));
        }
    }
    let order = match (order, seed) {
        (Some(Order::Shuffled { .. }), Some((seed, _))) => Order::Shuffled { seed },
        (_, Some((_, pos))) => {
            return Err(
                error(pos, "seed", "`seed` only applies when `order: shuffled`")
                    .hint("add `order: shuffled`, or remove `seed`"),
            );
        }
        (order, None) => order.unwrap_or(Order::Interleaved),
    };
    Ok(Spec {
        name,
        description,
        host_labels: hosts.as_ref().and_then(|(_, l)| l.clone()),
        hosts: hosts
            .map(|(names, _)| names)
            .unwrap_or_else(|| vec!["local".to_string()]),
        matrix,
        workload,
        devices,
        storage,
        report,
        metric_refs,
        before_each,
        repeat,
        repeat_pos,
        order,
        on_failure,
    })
}

fn campaign_name(v: &Node) -> Result<String> {
    let name = string(v, "name", "a campaign name")?;
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
    if !valid {
        let lower = name.to_lowercase().replace(' ', "-");
        return Err(error(v.pos, "name", format!("`{name}` is not a valid campaign name"))
            .hint(format!(
                "use lowercase letters, digits, `.`, `_` and `-`, starting with a letter or digit (e.g. `{lower}`)"
            )));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(error(
            v.pos,
            "name",
            format!(
                "the campaign name is {} characters long; at most {MAX_NAME_LEN} are allowed",
                name.len()
            ),
        ));
    }
    Ok(name)
}

fn read_hosts(e: &Entry) -> Result<(Vec<String>, Option<super::HostLabels>)> {
    let entries = map(
        &e.value,
        "hosts",
        "a mapping like `{ names: [rc66, rcmonster] }` or `{ labels: { rack: b12 } }`",
    )?;
    check_keys(entries, "hosts", &["names", "labels"])?;
    let labels = match entries.iter().find(|e| e.name == "labels") {
        None => None,
        Some(l) => {
            let pairs = map(
                &l.value,
                "hosts.labels",
                "a mapping of label to value, like `{ rack: b12 }`",
            )?;
            if pairs.is_empty() {
                return Err(error(l.value.pos, "hosts.labels", "no labels given")
                    .hint("e.g. `labels: { role: storage-lab }` selects every agent started with `--label role=storage-lab`"));
            }
            let mut out = Vec::new();
            for p in pairs {
                let path = format!("hosts.labels.{}", p.name);
                out.push((p.name.clone(), text(&p.value, &path, "a label value")?));
            }
            Some(super::HostLabels {
                pairs: out,
                line: l.value.pos.line,
                column: l.value.pos.column,
            })
        }
    };
    let Some(names) = entries.iter().find(|e| e.name == "names") else {
        if labels.is_some() {
            return Ok((Vec::new(), labels));
        }
        return Err(missing(e.key.pos, "hosts", "names").hint(
            "list the hosts to run on, e.g. `hosts: { names: [rc66] }`, or select them by label",
        ));
    };
    let items = seq(&names.value, "hosts.names", "a list of host names")?;
    if items.is_empty() {
        return Err(error(
            names.value.pos,
            "hosts.names",
            "the list of host names is empty",
        )
        .hint("name at least one host, or remove `hosts` to run on this machine (`local`)"));
    }
    let mut hosts: Vec<(String, Pos)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("hosts.names[{i}]");
        let host = text(item, &path, "a host name")?;
        if !valid_hostname(&host) {
            return Err(error(item.pos, &path, format!("`{host}` is not a valid host name"))
                .hint("host names are letters, digits and `-`, in dot-separated labels of at most 63 characters"));
        }
        if let Some((_, first)) = hosts.iter().find(|(h, _)| h.eq_ignore_ascii_case(&host)) {
            return Err(error(
                item.pos,
                &path,
                format!(
                    "duplicate host `{host}` (first listed at line {}, column {})",
                    first.line, first.column
                ),
            ));
        }
        hosts.push((host, item.pos));
    }
    Ok((hosts.into_iter().map(|(h, _)| h).collect(), labels))
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

fn read_matrix(e: &Entry) -> Result<MatrixSpec> {
    let entries = map(
        &e.value,
        "matrix",
        "a mapping of parameter names to lists of values",
    )?;
    if entries.is_empty() {
        return Err(error(e.value.pos, "matrix", "the matrix is empty")
            .hint("add a parameter with its values, e.g. `bs: [4k, 64k]`, or remove `matrix`"));
    }
    let mut m = MatrixSpec {
        pos: e.key.pos,
        params: Vec::new(),
        exclude_pos: e.key.pos,
        exclude: Vec::new(),
        include: Vec::new(),
    };
    for entry in entries {
        let path = join("matrix", &entry.name);
        match entry.name.as_str() {
            "exclude" => {
                m.exclude_pos = entry.key.pos;
                m.exclude = read_pairs_list(&entry.value, &path, false)?;
            }
            "include" => m.include = read_pairs_list(&entry.value, &path, true)?,
            name => {
                param_name(name, entry.key.pos, &path)?;
                m.params.push(read_param(entry, &path)?);
            }
        }
    }
    Ok(m)
}

/// A parameter name must be usable as `${name}` and must not shadow a name
/// platter fills in itself.
fn param_name(name: &str, pos: Pos, path: &str) -> Result<()> {
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
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

fn read_param(entry: &Entry, path: &str) -> Result<Param> {
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
        return Err(err);
    };
    if items.is_empty() {
        return Err(error(
            entry.value.pos,
            path,
            format!("the list of values for `{name}` is empty"),
        )
        .hint(format!("give `{name}` at least one value, or remove it")));
    }
    let mut values: Vec<(String, Pos)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_path = format!("{path}[{i}]");
        let value = matrix_value(item, &item_path)?;
        if let Some((_, first)) = values.iter().find(|(v, _)| *v == value) {
            return Err(error(
                item.pos,
                &item_path,
                format!(
                    "duplicate value `{value}` for `{name}` (first at line {}, column {})",
                    first.line, first.column
                ),
            )
            .hint("each value makes its own cells; listing it twice would run them twice"));
        }
        values.push((value, item.pos));
    }
    Ok(Param {
        name: name.clone(),
        values: values.into_iter().map(|(v, _)| v).collect(),
    })
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

fn read_pairs_list(node: &Node, path: &str, include: bool) -> Result<Vec<Pairs>> {
    let what = if include { "include" } else { "exclude" };
    let items = seq(node, path, "a list of mappings (parameter: value)")?;
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_path = format!("{path}[{i}]");
        let entries = map(item, &item_path, "a mapping of parameter: value")?;
        if entries.is_empty() {
            let message = if include {
                "this include entry is empty and adds nothing"
            } else {
                "this exclude entry is empty and would remove every combination"
            };
            return Err(error(item.pos, &item_path, message).hint(format!(
                "give {what} entries `parameter: value` pairs, e.g. `{{ bs: 4k }}`"
            )));
        }
        let mut pairs = Vec::new();
        for e in entries {
            let pair_path = join(&item_path, &e.name);
            if include {
                param_name(&e.name, e.key.pos, &pair_path)?;
            }
            pairs.push(Pair {
                key: e.name.clone(),
                key_pos: e.key.pos,
                value: matrix_value(&e.value, &pair_path)?,
                value_pos: e.value.pos,
            });
        }
        out.push(Pairs {
            pos: item.pos,
            path: item_path,
            pairs,
        });
    }
    Ok(out)
}

fn read_workload(e: &Entry) -> Result<WorkloadSpec> {
    let entries = map(&e.value, "workload", "a mapping naming the workload kind")?;
    check_keys(entries, "workload", &super::workload::KINDS)?;
    let Some(kind) = entries.first() else {
        return Err(error(e.value.pos, "workload", "the workload is empty")
            .hint("name its kind, e.g. `workload: { command: { run: \"make -j4\" } }`"));
    };
    if let Some(second) = entries.get(1) {
        return Err(error(
            second.key.pos,
            &join("workload", &second.name),
            format!(
                "a campaign measures one workload, but `{}` and `{}` are both given",
                kind.name, second.name
            ),
        )
        .hint("put different workloads in different campaigns"));
    }
    let path = join("workload", &kind.name);
    if kind.name != "command" {
        return read_tool(kind, &path).map(WorkloadSpec::Tool);
    }
    let command = kind;
    let path = path.as_str();
    let fields = map(
        &command.value,
        path,
        "a mapping with `run:` (and optional `setup:`, `clean:`)",
    )?;
    check_keys(fields, path, &["setup", "clean", "run"])?;
    let mut setup = None;
    let mut clean = None;
    let mut run = None;
    for f in fields {
        let t = Some(command_template(&f.value, &join(path, &f.name))?);
        match f.name.as_str() {
            "setup" => setup = t,
            "clean" => clean = t,
            _ => run = t,
        }
    }
    let Some(run) = run else {
        return Err(missing(command.key.pos, path, "run")
            .hint("`run:` is the command whose execution is measured"));
    };
    Ok(WorkloadSpec::Command(CommandSpec { setup, clean, run }))
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

fn read_devices(v: &Node) -> Result<super::DeviceSelector> {
    let entries = map(
        v,
        "devices",
        "a device selector like `{ model: \"INTEL SSDSC2BW120A4\" }` or `{ path: /dev/loop7 }`",
    )?;
    check_keys(entries, "devices", &SELECTOR_KEYS)?;
    if entries.is_empty() {
        return Err(
            error(v.pos, "devices", "the device selector is empty").hint(format!(
                "select by {}",
                super::error::backticked(&SELECTOR_KEYS)
            )),
        );
    }
    let mut sel = super::DeviceSelector {
        line: v.pos.line,
        column: v.pos.column,
        ..Default::default()
    };
    for e in entries {
        let path = join("devices", &e.name);
        let value = string(&e.value, &path, "a value to match")?;
        if value.trim().is_empty() {
            return Err(error(e.value.pos, &path, "the value is empty"));
        }
        match e.name.as_str() {
            "path" => {
                if !value.starts_with("/dev/") {
                    return Err(error(
                        e.value.pos,
                        &path,
                        format!("`{value}` is not a device path"),
                    )
                    .hint("write the device node, e.g. `/dev/sdb` or a glob like `/dev/loop*`"));
                }
                sel.path = Some(value);
            }
            "by_id" => sel.by_id = Some(value),
            "model" => sel.model = Some(value),
            "serial" => sel.serial = Some(value),
            "transport" => {
                choice(&e.value, &path, &TRANSPORTS)?;
                sel.transport = Some(value);
            }
            _ => sel.controller = Some(value),
        }
    }
    Ok(sel)
}

const STORAGE_KEYS: [&str; 6] = [
    "fs",
    "mkfs_options",
    "mount_options",
    "write_cache",
    "ramdisk",
    "encryption",
];

fn read_storage(e: &Entry) -> Result<StorageSpec> {
    let entries = map(
        &e.value,
        "storage",
        "a storage configuration like `{ fs: ext4, mount_options: noatime }`",
    )?;
    check_keys(entries, "storage", &STORAGE_KEYS)?;
    let mut fields = Vec::new();
    for f in entries {
        let path = join("storage", &f.name);
        match f.name.as_str() {
            "ramdisk" => {
                let r = map(&f.value, &path, "a mapping like `{ size: 1G }`")?;
                check_keys(r, &path, &["size"])?;
                let Some(size) = r.first() else {
                    return Err(missing(f.key.pos, &path, "size"));
                };
                fields.push((
                    "ramdisk.size".to_string(),
                    template(&size.value, &join(&path, "size"), "a size")?,
                ));
            }
            "mount_options" if matches!(f.value.kind, Kind::Seq(_)) => {
                let items = seq(&f.value, &path, "mount options")?;
                let mut parts = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    parts.push(text(item, &format!("{path}[{i}]"), "a mount option")?);
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
            _ => fields.push((f.name.clone(), template(&f.value, &path, "a value")?)),
        }
    }
    Ok(StorageSpec {
        pos: e.key.pos,
        fields,
    })
}

fn read_tool(kind: &Entry, path: &str) -> Result<ToolSpec> {
    let (name, allowed, required) = super::workload::fields_of(&kind.name);
    let entries = map(
        &kind.value,
        path,
        &format!("a mapping of `{name}` settings"),
    )?;
    check_keys(entries, path, allowed)?;
    let mut spec = ToolSpec {
        kind: name,
        pos: kind.key.pos,
        fields: Vec::new(),
        options: Vec::new(),
    };
    for f in entries {
        let field_path = join(path, &f.name);
        if f.name == "options" {
            for o in map(
                &f.value,
                &field_path,
                "a mapping of fio options, e.g. `{ rw: randwrite, bs: 4k }`",
            )? {
                let t = template(&o.value, &join(&field_path, &o.name), "an option value")?;
                spec.options.push((o.name.clone(), t));
            }
            continue;
        }
        spec.fields
            .push((f.name.clone(), template(&f.value, &field_path, "a value")?));
    }
    for r in required {
        if !entries.iter().any(|e| e.name == *r) {
            return Err(missing(kind.key.pos, path, r));
        }
    }
    Ok(spec)
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

fn read_phases(v: &Node) -> Result<Vec<PhaseSpec>> {
    let entries = map(
        v,
        "phases",
        "a mapping like `{ before_each: [sync, drop_caches] }`",
    )?;
    check_keys(entries, "phases", &["before_each"])?;
    let mut phases = Vec::new();
    for e in entries {
        let path = "phases.before_each";
        let items = seq(&e.value, path, "a list of phases")?;
        for (i, item) in items.iter().enumerate() {
            phases.push(read_phase(item, &format!("{path}[{i}]"))?);
        }
    }
    Ok(phases)
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

// ---- small typed accessors; each names what it expected in its error ----

fn map<'a>(node: &'a Node, path: &str, what: &str) -> Result<&'a [Entry]> {
    match &node.kind {
        Kind::Map(entries) => Ok(entries),
        _ => Err(error(
            node.pos,
            path,
            format!("expected {what}, found {}", node.describe()),
        )),
    }
}

fn seq<'a>(node: &'a Node, path: &str, what: &str) -> Result<&'a [Node]> {
    match &node.kind {
        Kind::Seq(items) => Ok(items),
        _ => Err(error(
            node.pos,
            path,
            format!("expected {what}, found {}", node.describe()),
        )),
    }
}

/// A string-typed scalar; `name: 123` is rejected because an unquoted number
/// as a name is almost always a mistake in a different key.
fn string(node: &Node, path: &str, what: &str) -> Result<String> {
    match &node.kind {
        Kind::Scalar {
            text,
            ty: ScalarType::Str,
        } => Ok(text.clone()),
        Kind::Scalar { text, ty } if *ty != ScalarType::Null => Err(error(
            node.pos,
            path,
            format!("expected {what} (a string), found {}", node.describe()),
        )
        .hint(format!("quote it if you mean the text: `\"{text}\"`"))),
        _ => Err(error(
            node.pos,
            path,
            format!("expected {what} (a string), found {}", node.describe()),
        )),
    }
}

/// Any non-null scalar, as written: commands like `run: true` or `sleep 1`
/// are text whatever YAML thinks they look like.
fn text(node: &Node, path: &str, what: &str) -> Result<String> {
    match &node.kind {
        Kind::Scalar { text, ty } if *ty != ScalarType::Null => Ok(text.clone()),
        _ => Err(error(
            node.pos,
            path,
            format!("expected {what}, found {}", node.describe()),
        )),
    }
}

fn template(node: &Node, path: &str, what: &str) -> Result<Template> {
    Ok(Template {
        text: text(node, path, what)?,
        pos: node.pos,
        path: path.to_string(),
    })
}

fn optional_text(node: &Node, path: &str, what: &str) -> Result<Option<String>> {
    match &node.kind {
        // `description:` left empty is just no description.
        Kind::Scalar {
            ty: ScalarType::Null,
            ..
        } => Ok(None),
        _ => text(node, path, what).map(Some),
    }
}

/// An integer in `min..=max`. i128 holds every u64 and every value a user
/// could mean, so only absurdly long numbers overflow (reported as such).
fn integer(node: &Node, path: &str, min: i128, max: i128, what: &str) -> Result<i128> {
    let expected = format!("expected a whole number from {min} to {max} ({what})");
    let Kind::Scalar { text, ty } = &node.kind else {
        return Err(error(
            node.pos,
            path,
            format!("{expected}, found {}", node.describe()),
        ));
    };
    if *ty != ScalarType::Int {
        let mut err = error(
            node.pos,
            path,
            format!("{expected}, found {}", node.describe()),
        );
        if *ty == ScalarType::Str && super::tree::resolve(text) == ScalarType::Int {
            err = err.hint("remove the quotes");
        }
        return Err(err);
    }
    let (digits, radix, negative) = if let Some(h) = text.strip_prefix("0x") {
        (h, 16, false)
    } else if let Some(o) = text.strip_prefix("0o") {
        (o, 8, false)
    } else if let Some(d) = text.strip_prefix('-') {
        (d, 10, true)
    } else {
        (text.strip_prefix('+').unwrap_or(text), 10, false)
    };
    let value = i128::from_str_radix(digits, radix)
        .ok()
        .map(|v| if negative { -v } else { v });
    match value {
        Some(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(error(
            node.pos,
            path,
            format!("{expected}, found {text}, which is out of range"),
        )),
    }
}

/// One of a fixed set of words, with a did-you-mean for near misses.
fn choice<'a>(node: &Node, path: &str, choices: &[&'a str]) -> Result<&'a str> {
    let allowed = super::error::backticked(choices);
    match &node.kind {
        Kind::Scalar {
            text,
            ty: ScalarType::Str,
        } => {
            if let Some(c) = choices.iter().find(|c| **c == text) {
                return Ok(c);
            }
            Err(error(
                node.pos,
                path,
                format!("unknown {path} `{text}`; expected one of {allowed}"),
            )
            .maybe_hint(
                super::error::closest(text, choices).map(|c| format!("did you mean `{c}`?")),
            ))
        }
        _ => Err(error(
            node.pos,
            path,
            format!("expected one of {allowed}, found {}", node.describe()),
        )),
    }
}

fn check_keys(entries: &[Entry], path: &str, allowed: &[&str]) -> Result<()> {
    for e in entries {
        if allowed.contains(&e.name.as_str()) {
            continue;
        }
        let key_path = join(path, &e.name);
        let hint = if e.name == "<<" {
            Some("YAML merge keys (`<<`) are not supported; write the keys out".to_string())
        } else {
            suggest(&e.name, allowed, "allowed keys here")
        };
        let at = if path.is_empty() {
            String::new()
        } else {
            format!(" in `{path}`")
        };
        return Err(error(
            e.key.pos,
            &key_path,
            format!("unknown key `{}`{at}", e.name),
        )
        .maybe_hint(hint));
    }
    Ok(())
}

fn missing(pos: Pos, path: &str, key: &str) -> SpecError {
    let at = if path.is_empty() {
        String::new()
    } else {
        format!(" in `{path}`")
    };
    error(
        pos,
        &join(path, key),
        format!("missing required key `{key}`{at}"),
    )
}

const REPORT_KEYS: [&str; 4] = ["baseline", "metric", "qualify", "pivot"];

/// `report:` — comparisons against a baseline and qualification thresholds, and where
/// each setting that names a metric is written.
fn read_report(v: &Node) -> Result<(super::ReportSpec, Vec<MetricRef>)> {
    let entries = map(
        v,
        "report",
        "report settings like `{ baseline: { fs: ext4 }, qualify: [\"wall.median < 300s\"] }`",
    )?;
    check_keys(entries, "report", &REPORT_KEYS)?;
    let mut spec = super::ReportSpec::default();
    let mut refs = Vec::new();
    for e in entries {
        let path = join("report", &e.name);
        match e.name.as_str() {
            "baseline" => {
                let pairs = map(
                    &e.value,
                    &path,
                    "a mapping with one key, like `{ fs: ext4 }` or `{ host: rc66 }`",
                )?;
                let [pair] = pairs else {
                    return Err(error(
                        e.value.pos,
                        &path,
                        "a baseline names exactly one parameter (or host, or device) and its value",
                    )
                    .hint("e.g. `baseline: { fs: ext4 }`"));
                };
                let value = text(&pair.value, &join(&path, &pair.name), "a value")?;
                spec.baseline = Some(super::Baseline {
                    key: pair.name.clone(),
                    value,
                    line: pair.key.pos.line,
                    column: pair.key.pos.column,
                });
            }
            "metric" => {
                spec.metric = string(
                    &e.value,
                    &path,
                    "a metric name like `wall` or `latency.mean`",
                )?;
                refs.push(MetricRef {
                    pos: e.value.pos,
                    path,
                    named: Named::Metric(spec.metric.clone()),
                });
            }
            "pivot" => {
                let (pivot, metric) = read_pivot(&e.value, &path)?;
                spec.pivot = Some(pivot);
                refs.push(metric);
            }
            _ => {
                for (i, item) in seq(
                    &e.value,
                    &path,
                    "a list of thresholds like `\"latency.p99 < 1ms\"`",
                )?
                .iter()
                .enumerate()
                {
                    let item_path = format!("{path}[{i}]");
                    let t = string(item, &item_path, "a threshold like `\"latency.p99 < 1ms\"`")?;
                    let t = super::threshold::parse(&t).map_err(|why| {
                        error(item.pos, &item_path, why).hint("write `METRIC[.STAT] < VALUE[UNIT]`, e.g. `wall.median < 300s` or `latency.p99 < 1ms`")
                    })?;
                    refs.push(MetricRef {
                        pos: item.pos,
                        path: item_path,
                        named: Named::Threshold(t.clone()),
                    });
                    spec.qualify.push(t);
                }
            }
        }
    }
    Ok((spec, refs))
}

const PIVOT_KEYS: [&str; 4] = ["rows", "columns", "metric", "stat"];

/// `report.pivot`: a table like seed 001's (rows × columns of one statistic), and where
/// its metric is written.
fn read_pivot(v: &Node, path: &str) -> Result<(super::Pivot, MetricRef)> {
    let entries = map(v, path, "a pivot like `{ rows: [host, write_cache], columns: [size], metric: latency.mean, stat: min }`")?;
    check_keys(entries, path, &PIVOT_KEYS)?;
    let mut pivot = super::Pivot {
        line: v.pos.line,
        column: v.pos.column,
        ..Default::default()
    };
    let mut metric_pos = v.pos;
    for e in entries {
        let p = join(path, &e.name);
        match e.name.as_str() {
            "rows" | "columns" => {
                let mut keys = Vec::new();
                for (i, item) in seq(
                    &e.value,
                    &p,
                    "a list of keys: `host`, `device.model`, or parameters",
                )?
                .iter()
                .enumerate()
                {
                    let key = string(item, &format!("{p}[{i}]"), "a key")?;
                    keys.push(super::PivotKey {
                        name: key,
                        line: item.pos.line,
                        column: item.pos.column,
                    });
                }
                if e.name == "rows" {
                    pivot.rows = keys
                } else {
                    pivot.columns = keys
                }
            }
            "metric" => {
                pivot.metric = string(&e.value, &p, "a metric name")?;
                metric_pos = e.value.pos;
            }
            _ => {
                let stat = string(&e.value, &p, "a statistic")?;
                let valid = ["min", "median", "mean", "max"].contains(&stat.as_str())
                    || stat.strip_prefix('p').is_some_and(|n| {
                        n.parse::<f64>().is_ok_and(|x| (0.0..=100.0).contains(&x))
                    });
                if !valid {
                    return Err(error(e.value.pos, &p, format!("unknown statistic `{stat}`; expected min, median, mean, max or pNN (e.g. p99)")));
                }
                pivot.stat = stat;
            }
        }
    }
    for (what, field) in [
        ("rows", pivot.rows.is_empty()),
        ("columns", pivot.columns.is_empty()),
    ] {
        if field {
            return Err(missing(v.pos, path, what));
        }
    }
    if pivot.metric.is_empty() {
        return Err(missing(v.pos, path, "metric"));
    }
    if pivot.stat.is_empty() {
        pivot.stat = "median".into();
    }
    let metric = MetricRef {
        pos: metric_pos,
        path: join(path, "metric"),
        named: Named::Metric(pivot.metric.clone()),
    };
    Ok((pivot, metric))
}
