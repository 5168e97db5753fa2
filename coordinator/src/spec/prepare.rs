//! `prepare:`: how each drive is brought to a defined state before it is measured, as
//! SNIA's Solid State Storage Performance Test Specification (PTS) does it: purge,
//! workload-independent preconditioning (the whole drive written twice), and rounds of the
//! stimulus until a tracked value is steady.
//!
//! ```yaml
//! prepare:
//!   purge: discard            # or secure-erase, nvme-format, nvme-sanitize, sanitize
//!   precondition: { fill: 2x, bs: 128k }
//!   steady_state: { metric: write.iops, window: 5, range: 20%, slope: 10%, max_rounds: 25,
//!                   cell: { bs: 4k, mix: 0 } }
//! ```
//!
//! This file reads the key on its own; what it must agree with elsewhere in the file
//! (`devices:`, `repeat:`, `warmup:`, an `fstrim` phase, the storage's filesystem, the
//! tracked cell's parameters) is checked by [`check_with`] and [`tracked_point`].

use super::accessors::percent;
use super::accessors::{choice, integer, known, map, string, text};
use super::error::{closest, error, Errors, Pos, Result, SpecErrors, WithHint};
use super::metrics::{MetricRef, Named};
use super::model::{Cell, Filesystem, Precondition, Prepare, PurgeMethod, SteadyRule, SteadyState};
use super::tree::{join, Entry, Kind, Node};

const KEYS: [&str; 3] = ["purge", "precondition", "steady_state"];
const PRECONDITION_KEYS: [&str; 2] = ["fill", "bs"];
const STEADY_KEYS: [&str; 6] = ["metric", "window", "range", "slope", "max_rounds", "cell"];
/// Rounds a drive may be given at most: 25 is PTS's figure, a few hundred a patient lab's.
const MAX_ROUNDS: i128 = 1_000;
const MAX_PASSES: i128 = 10;

/// `prepare:` as written, with the positions its later checks point at.
#[derive(Debug)]
pub(crate) struct PrepareSpec {
    /// The `prepare` key.
    pub pos: Pos,
    pub purge: Option<PurgeMethod>,
    pub precondition: Option<Precondition>,
    pub steady: Option<SteadySpec>,
}

#[derive(Debug)]
pub(crate) struct SteadySpec {
    /// The `steady_state` key.
    pub pos: Pos,
    pub metric: String,
    pub rule: SteadyRule,
    /// `cell: { bs: 4k }`: parameter, value, and where the pair is written.
    pub cell: Vec<(String, String, Pos)>,
}

impl PrepareSpec {
    pub fn builds_state(&self) -> bool {
        self.precondition.is_some() || self.steady.is_some()
    }
}

/// Reads `prepare:` (entry `e`); the steady state's metric is returned to be checked with
/// the report's once the cells are known.
pub(crate) fn read(
    e: &Entry,
    stored: bool,
    errs: &mut Errors,
) -> Option<(PrepareSpec, Option<MetricRef>)> {
    let entries = errs.ok(map(
        &e.value,
        "prepare",
        "a mapping like `{ purge: discard, precondition: { fill: 2x, bs: 128k } }`",
    ))?;
    let start = errs.count();
    let mut out = PrepareSpec {
        pos: e.key.pos,
        purge: None,
        precondition: None,
        steady: None,
    };
    let mut metric = None;
    for f in known(entries, "prepare", &KEYS, errs) {
        let path = join("prepare", &f.name);
        match f.name.as_str() {
            "purge" => {
                let names: Vec<&str> = PurgeMethod::ALL.iter().map(|m| m.name()).collect();
                out.purge = errs
                    .ok(choice(&f.value, &path, &names))
                    .and_then(PurgeMethod::from_name);
            }
            "precondition" => out.precondition = read_precondition(&f.value, &path, errs),
            "steady_state" => {
                if let Some((s, m)) = read_steady(f, &path, stored, errs) {
                    out.steady = Some(s);
                    metric = Some(m);
                }
            }
            _ => {}
        }
    }
    if entries.is_empty() {
        errs.push(
            error(e.value.pos, "prepare", "`prepare` is empty")
                .hint("give `purge`, `precondition` or `steady_state`, or remove `prepare`"),
        );
    }
    errs.clean_since(start, (out, metric))
}

/// `{ fill: 2x, bs: 128k }`: both may be left out (PTS: twice, in 128 KiB writes).
fn read_precondition(v: &Node, path: &str, errs: &mut Errors) -> Option<Precondition> {
    let entries = errs.ok(map(v, path, "a mapping like `{ fill: 2x, bs: 128k }`"))?;
    let start = errs.count();
    let mut p = Precondition {
        passes: 2,
        block_size: 128 << 10,
    };
    for f in known(entries, path, &PRECONDITION_KEYS, errs) {
        let key_path = join(path, &f.name);
        match f.name.as_str() {
            "fill" => {
                if let Some(n) = errs.ok(fill(&f.value, &key_path)) {
                    p.passes = n;
                }
            }
            "bs" => {
                if let Some(n) = errs.ok(block_size(&f.value, &key_path)) {
                    p.block_size = n;
                }
            }
            _ => {}
        }
    }
    errs.clean_since(start, p)
}

/// `2x`: how many times the drive's whole capacity is written.
fn fill(v: &Node, path: &str) -> Result<u32> {
    let expected = format!(
        "expected how many times to write the whole drive, like `2x` (1x to {MAX_PASSES}x)"
    );
    let t = text(v, path, "a fill like `2x`")?;
    match t
        .trim()
        .strip_suffix(['x', 'X'])
        .map(|n| n.trim().parse::<i128>())
    {
        Some(Ok(n)) if (1..=MAX_PASSES).contains(&n) => Ok(n as u32),
        _ => Err(error(v.pos, path, format!("{expected}, found `{t}`"))),
    }
}

/// `128k`: a size that direct I/O can write, a multiple of 4 KiB (a drive's sectors are
/// 512 or 4096 bytes), at most 64 MiB.
fn block_size(v: &Node, path: &str) -> Result<u64> {
    let t = text(v, path, "a block size like `128k`")?;
    match super::workload::parse_bytes(&t) {
        Some(n) if n > 0 && n % 4096 == 0 && n <= 64 << 20 => Ok(n),
        _ => Err(error(
            v.pos,
            path,
            format!("expected a block size that is a multiple of 4k, at most 64M (like `128k`), found `{t}`"),
        )),
    }
}

fn read_steady(
    e: &Entry,
    path: &str,
    stored: bool,
    errs: &mut Errors,
) -> Option<(SteadySpec, MetricRef)> {
    let entries = errs.ok(map(
        &e.value,
        path,
        "a mapping like `{ metric: write.iops, window: 5, range: 20%, slope: 10%, max_rounds: 25 }`",
    ))?;
    let start = errs.count();
    let mut rule = SteadyRule::PTS;
    let (mut metric, mut cell) = (None, Vec::new());
    for f in known(entries, path, &STEADY_KEYS, errs) {
        let key_path = join(path, &f.name);
        let v = &f.value;
        match f.name.as_str() {
            "metric" => {
                metric = errs
                    .ok(string(v, &key_path, "a metric name like `write.iops`"))
                    .map(|m| (m, v.pos, key_path))
            }
            "window" => {
                if let Some(n) = errs.ok(integer(v, &key_path, 2, 100, "rounds in the window")) {
                    rule.window = n as usize;
                }
            }
            "max_rounds" => {
                if let Some(n) = errs.ok(integer(v, &key_path, 2, MAX_ROUNDS, "rounds at most")) {
                    rule.max_rounds = n as usize;
                }
            }
            "range" => {
                if let Some(p) = errs.ok(percent(v, &key_path, stored)) {
                    rule.range_pct = p;
                }
            }
            "slope" => {
                if let Some(p) = errs.ok(percent(v, &key_path, stored)) {
                    rule.slope_pct = p;
                }
            }
            "cell" => cell = read_cell(v, &key_path, errs),
            _ => {}
        }
    }
    if errs.count() > start {
        return None;
    }
    let Some((metric, metric_pos, metric_path)) = metric else {
        errs.push(
            error(
                e.value.pos,
                path,
                "`steady_state` needs `metric`, the value it tracks",
            )
            .hint("e.g. `steady_state: { metric: write.iops }`"),
        );
        return None;
    };
    if rule.max_rounds < rule.window {
        errs.push(error(
            e.value.pos,
            path,
            format!(
                "`max_rounds` ({}) is less than `window` ({}): no window could ever be judged",
                rule.max_rounds, rule.window
            ),
        ));
        return None;
    }
    let r = MetricRef {
        pos: metric_pos,
        path: metric_path,
        named: Named::Metric(metric.clone()),
    };
    Some((
        SteadySpec {
            pos: e.key.pos,
            metric,
            rule,
            cell,
        },
        r,
    ))
}

fn read_cell(v: &Node, path: &str, errs: &mut Errors) -> Vec<(String, String, Pos)> {
    let Some(entries) = errs.ok(map(
        v,
        path,
        "a mapping of matrix parameters like `{ bs: 4k }`",
    )) else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|p| {
            let value = match &p.value.kind {
                Kind::Scalar { .. } => errs.ok(text(&p.value, &join(path, &p.name), "a value")),
                _ => {
                    errs.push(error(
                        p.value.pos,
                        &join(path, &p.name),
                        format!("expected a matrix value, found {}", p.value.describe()),
                    ));
                    None
                }
            }?;
            Some((p.name.clone(), value, p.key.pos))
        })
        .collect()
}

/// What `prepare:` must agree with elsewhere in the file, known before the matrix is
/// expanded: `devices:` to say which drive, no `repeat:` or `warmup:` beside rounds, and
/// no `fstrim` phase after a fill (it would undo it).
pub(crate) struct Elsewhere {
    pub devices: bool,
    /// Where `repeat:` is written, if it is.
    pub repeat: Option<Pos>,
    pub warmup: Option<Pos>,
    /// Each `fstrim` phase's position and path.
    pub fstrims: Vec<(Pos, String)>,
}

pub(crate) fn check_with(p: &PrepareSpec, other: &Elsewhere, errs: &mut Errors) {
    if !other.devices {
        errs.push(
            error(
                p.pos,
                "prepare",
                "`prepare` brings a drive to a defined state, but no `devices:` says which drive",
            )
            .hint("add `devices: { path: /dev/nvme1n1 }` (or by_id, model, serial …)"),
        );
    }
    if let (Some(s), Some(pos)) = (&p.steady, other.repeat) {
        errs.push(
            error(pos, "repeat", "`repeat` and `prepare.steady_state` cannot both be given: the rounds towards steady state are the repetitions, and the window's rounds the results")
                .hint(format!("remove `repeat`; `max_rounds` ({}) bounds the rounds", s.rule.max_rounds)),
        );
    }
    if let (Some(_), Some(pos)) = (&p.steady, other.warmup) {
        errs.push(
            error(pos, "warmup", "`warmup` and `prepare.steady_state` cannot both be given: the rounds before the steady window are the warm-up")
                .hint("remove `warmup`"),
        );
    }
    if p.builds_state() {
        for (pos, path) in &other.fstrims {
            errs.push(
                error(*pos, path, "an `fstrim` phase would undo `prepare`: trimming discards what preconditioning wrote, and the drive is fresh again")
                    .hint("remove the `fstrim` phase"),
            );
        }
    }
}

/// `prepare:` made whole once the cells are known: the tracked cell found, and the
/// storage checked (a fill or rounds need the raw drive: a filesystem made on it after
/// the fill would discard what the fill wrote, and PTS measures the raw device).
pub(crate) fn resolve(
    p: PrepareSpec,
    params: &[String],
    cells: &[Cell],
    storage: Option<Pos>,
) -> std::result::Result<Prepare, SpecErrors> {
    let mut errs = Errors::default();
    if p.builds_state() {
        let formatted = cells
            .iter()
            .filter_map(|c| c.storage.as_ref())
            .find(|s| s.fs != Filesystem::None);
        if let Some(s) = formatted {
            errs.push(
                error(
                    storage.unwrap_or(p.pos),
                    "storage",
                    format!(
                        "`prepare` writes the whole drive and measures it in that state, but `storage` makes {} on it, which would discard what the fill wrote",
                        s.fs.name()
                    ),
                )
                .hint("measure the raw drive as PTS does: `storage: { fs: none }` (the workload names `${device}`), or keep only `prepare.purge`"),
            );
        }
    }
    let steady_state = p.steady.and_then(|s| {
        let tracked = errs.ok(tracked_point(&s, params, cells))?;
        Some(SteadyState {
            metric: s.metric,
            rule: s.rule,
            tracked,
        })
    });
    if !errs.is_empty() {
        return Err(errs.finish());
    }
    Ok(Prepare {
        purge: p.purge,
        precondition: p.precondition,
        steady_state,
    })
}

/// The matrix point `cell:` names (the first without it): each pair a parameter of the
/// matrix, and exactly one point matching them all.
fn tracked_point(s: &SteadySpec, params: &[String], cells: &[Cell]) -> Result<usize> {
    let path = "prepare.steady_state.cell";
    for (name, _, pos) in &s.cell {
        if !params.contains(name) {
            return Err(error(
                *pos,
                &join(path, name),
                format!("`{name}` is not a matrix parameter"),
            )
            .maybe_hint({
                let names: Vec<&str> = params.iter().map(String::as_str).collect();
                closest(name, &names).map(|c| format!("did you mean `{c}`?"))
            }));
        }
    }
    let matching: Vec<usize> = cells
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            s.cell
                .iter()
                .all(|(k, v, _)| c.params.get(k).is_some_and(|x| x == v))
        })
        .map(|(i, _)| i)
        .collect();
    let shown = || {
        s.cell
            .iter()
            .map(|(k, v, _)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match matching.as_slice() {
        [one] => Ok(*one),
        [] => Err(error(
            s.pos,
            path,
            format!("no cell of the matrix has {{{}}}", shown()),
        )),
        [first, ..] if s.cell.is_empty() => Ok(*first),
        more => Err(error(
            s.pos,
            path,
            format!(
                "{} cells of the matrix have {{{}}}; the tracked cell must be one",
                more.len(),
                shown()
            ),
        )
        .hint("name a value for every matrix parameter in `cell:`")),
    }
}
