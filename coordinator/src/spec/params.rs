//! The matrix's parameters across the file, judged once the matrix is expanded and
//! before any cell is rendered: every template compiles, `report:` keys and
//! `matrix.labels` name parameters, and every parameter changes what its cells run (or is
//! declared a label). It renders nothing and never reads YAML.

use std::collections::HashMap;

use super::error::{backticked, closest, error, suggest, Errors, Pos, SpecErrors, WithHint};
use super::matrix::{self, Expansion, Params};
use super::model::DEVICE;
use super::schema::{MatrixSpec, Spec};
use super::subst;

/// Judges every template, report key and label on its own, then, only when all are
/// right, that every parameter is used: each stage reports all of its own mistakes.
pub(crate) fn check(spec: &Spec, expansion: &Expansion, stored: bool) -> Result<(), SpecErrors> {
    let mut errs = Errors::default();
    let used = uses(spec, &expansion.params, &mut errs);
    check_report_keys(spec, &expansion.params, &mut errs);
    if let Some(m) = &spec.matrix {
        check_labels(m, &expansion.params, &mut errs);
    }
    if !errs.is_empty() {
        return Err(errs.finish());
    }
    // Judged only once every template is right: a `${bss}` typo is its own mistake, not
    // also `bs` used nowhere.
    if let (Some(m), false) = (&spec.matrix, stored) {
        check_params_used(m, &expansion.params, &expansion.cells, &used, &mut errs);
        if !errs.is_empty() {
            return Err(errs.finish());
        }
    }
    Ok(())
}

/// Each parameter a template refers to, and the first template that does; a template
/// that does not compile is recorded in `errs`.
fn uses<'s>(spec: &'s Spec, params: &'s [String], errs: &mut Errors) -> HashMap<&'s str, &'s str> {
    let mut used: HashMap<&str, &str> = HashMap::new();
    for t in spec.templates() {
        for piece in errs.ok(subst::compile(t, params)).unwrap_or_default() {
            if let subst::Piece::Param(name) = piece {
                if let Some(name) = params.iter().find(|p| **p == name) {
                    used.entry(name).or_insert(&t.path);
                }
            }
        }
    }
    used
}

/// `matrix.labels` names parameters: each one that is none is recorded, with the closest.
fn check_labels(m: &MatrixSpec, params: &[String], errs: &mut Errors) {
    let names: Vec<&str> = params.iter().map(String::as_str).collect();
    for (i, (label, pos)) in m.labels.iter().enumerate() {
        if !params.contains(label) {
            errs.push(
                error(
                    *pos,
                    &format!("matrix.labels[{i}]"),
                    format!("`{label}` is not a parameter of the matrix"),
                )
                .maybe_hint(suggest(label, &names, "parameters")),
            );
        }
    }
}

/// Every parameter must change what a cell runs: `fs: [ext4, xfs]` that no template
/// refers to makes cells that run the same thing, and a report would set "xfs" against
/// "ext4" as if they differed. "Uses" is a `${name}` in what is executed or set up — the
/// workload, a phase, `storage:` (the only strings that take `${…}`; `devices:`, `hosts:`
/// and thresholds take none). A `report:` pivot or baseline key does not count: it only
/// groups cells, and a pivot by `fs` over cells that all ran one filesystem is exactly the
/// untruth this prevents. Deliberate replicates say so with `labels: [name]`; a label a
/// template uses would be a false declaration, so that is refused too.
fn check_params_used(
    m: &MatrixSpec,
    params: &[String],
    cells: &[Params],
    used: &HashMap<&str, &str>,
    errs: &mut Errors,
) {
    for (i, (label, pos)) in m.labels.iter().enumerate() {
        if let Some(path) = used.get(label.as_str()) {
            errs.push(
                error(
                    *pos,
                    &format!("matrix.labels[{i}]"),
                    format!("`{label}` is declared a label, but `{path}` uses `${{{label}}}`, so its cells differ in what they run"),
                )
                .hint(format!("remove `{label}` from `labels`")),
            );
        }
    }
    // `lables: [replicate]` is read as a parameter named `lables`: that is the mistake,
    // and the parameters it would have declared are not used nowhere because of it.
    let misspelt: Vec<_> = m
        .params
        .iter()
        .filter(|p| !used.contains_key(p.name.as_str()))
        .filter_map(|p| Some((p, closest(&p.name, &["labels", "include", "exclude"])?)))
        .collect();
    for (p, word) in &misspelt {
        errs.push(
            error(
                p.pos,
                &format!("matrix.{}", p.name),
                format!("parameter `{}` is used nowhere", p.name),
            )
            .hint(format!("did you mean `{word}`?")),
        );
    }
    if !misspelt.is_empty() {
        return;
    }
    for name in params {
        if used.contains_key(name.as_str()) || m.labels.iter().any(|(l, _)| l == name) {
            continue;
        }
        // A matrix key, else the first include entry that adds it.
        let (pos, path) = match m.params.iter().find(|p| p.name == *name) {
            Some(p) => (p.pos, format!("matrix.{name}")),
            None => match m
                .include
                .iter()
                .find_map(|e| e.pairs.iter().find(|p| p.key == *name).map(|p| (e, p)))
            {
                Some((entry, pair)) => (pair.key_pos, format!("{}.{name}", entry.path)),
                None => (m.pos, "matrix".to_string()),
            },
        };
        let same = match twins(cells, name, used) {
            Some((a, b)) => format!(
                ", so {} and {} would run the same thing",
                matrix::describe(a),
                matrix::describe(b)
            ),
            None => String::new(),
        };
        errs.push(
            error(
                pos,
                &path,
                format!(
                    "parameter `{name}` is used nowhere: no command, phase or storage setting refers to `${{{name}}}`{same}"
                ),
            )
            .hint(format!(
                "use `${{{name}}}` where it should make a difference (the workload, a phase or `storage:`); \
                 if it only names cells (deliberate replicates, or what its include entries set), \
                 declare it a label: `labels: [{name}]` under `matrix:`"
            )),
        );
    }
}

/// Two cells that differ in the unused parameter `name` and in no parameter a template
/// uses: what the user would be told differ, though they run the same thing.
fn twins<'c>(
    cells: &'c [Params],
    name: &str,
    used: &HashMap<&str, &str>,
) -> Option<(&'c Params, &'c Params)> {
    let mut seen: HashMap<Vec<(&str, &str)>, &Params> = HashMap::new();
    for cell in cells {
        let key: Vec<(&str, &str)> = cell
            .iter()
            .filter(|(k, _)| used.contains_key(k.as_str()))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        match seen.get(&key) {
            Some(first) if first.get(name) != cell.get(name) => return Some((first, cell)),
            Some(_) => {}
            None => {
                seen.insert(key, cell);
            }
        }
    }
    None
}

/// `report.baseline` and `report.pivot` name parameters (or `host`, `device`): each
/// one that is none of them is recorded.
fn check_report_keys(spec: &Spec, params: &[String], errs: &mut Errors) {
    if let Some(b) = &spec.report.baseline {
        let known = b.key == "host"
            || (b.key == DEVICE && spec.devices.is_some())
            || params.contains(&b.key);
        if !known {
            let mut names: Vec<&str> = params.iter().map(String::as_str).collect();
            names.push("host");
            if spec.devices.is_some() {
                names.push(DEVICE);
            }
            let pos = Pos {
                line: b.line,
                column: b.column,
            };
            errs.push(
                error(
                    pos,
                    &format!("report.baseline.{}", b.key),
                    format!("`{}` is not a parameter of this campaign", b.key),
                )
                .hint(format!("compare by one of {}", backticked(&names))),
            );
        }
    }
    if let Some(p) = &spec.report.pivot {
        for k in p.rows.iter().chain(&p.columns) {
            let device_field = k.name.strip_prefix("device.").is_some_and(|f| {
                [
                    "model",
                    "serial",
                    "transport",
                    "controller",
                    "vendor",
                    "firmware",
                ]
                .contains(&f)
            });
            let known = k.name == "host"
                || k.name == "metric"
                || ((k.name == DEVICE || device_field) && spec.devices.is_some())
                || params.contains(&k.name);
            if !known {
                let pos = Pos {
                    line: k.line,
                    column: k.column,
                };
                errs.push(error(pos, "report.pivot", format!("`{}` is not a pivot key of this campaign", k.name))
                    .hint("use `host`, `metric`, a parameter, or with `devices:` `device` or `device.model` (serial, transport, controller, vendor, firmware)"));
            }
        }
    }
}
