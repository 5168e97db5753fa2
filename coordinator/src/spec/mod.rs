//! Campaign files: YAML text → a validated, fully expanded [`Campaign`]. Owns
//! every check that can be made before a host is touched (the invariant "Nothing runs
//! for an invalid campaign"); it must not plan, schedule or run anything.
//!
//! ```text
//! text ──tree──► positioned YAML nodes ──schema──► Spec (templates + positions)
//!      ──matrix──► cells (param maps) ──subst──► Campaign (strings per cell)
//! ```
//!
//! Each stage is a file: `tree`; `schema`, with `accessors` (typed reads of a node) and
//! `report_spec` (`report:`); `matrix`; `params` (the parameters across the file);
//! `cells` (templates rendered per cell through `subst`, typed by `workload`, checked
//! against `metrics`). What they make, [`Campaign`] and its parts, is `model`, beneath
//! them all: it imports none of them. This file is the face: the entry points
//! ([`parse_with`], [`load_with`], [`read_file`]) and `build`, the stages in order.
//!
//! Every error is a [`SpecError`] with file, 1-based line and column, the key
//! path (`matrix.bs[2]`, `workload.command.run`) and, where one helps, a hint.
//! A file is rejected with [`SpecErrors`]: every mistake found, in file order.
//! Each stage reports all of its own; a stage that needs the one before it to be
//! right (expansion needs a valid matrix, cells need valid templates) runs only
//! when it is, so a mistake is never reported again as its consequences.
//!
//! # The file
//!
//! ```yaml
//! name: fsync-sizes            # required; [a-z0-9][a-z0-9._-]*, at most 64 characters
//! description: free text       # optional
//! hosts: { names: [local] }    # optional; default [local]
//! matrix:                      # optional; parameter -> non-empty list of scalars
//!   bs: [4k, 64k]
//!   sync: [none, fdatasync]
//!   exclude: [ { bs: 4k, sync: none } ]
//!   include: [ { bs: 1m, sync: none } ]
//!   labels: [replicate]        # optional; parameters that only name cells (see below)
//! workload:
//!   command:
//!     setup: "mkdir -p /tmp/x"   # optional, once per cell
//!     clean: "rm -f /tmp/x/f"    # optional; run by the `clean` phase
//!     run: "dd if=/dev/zero of=/tmp/x/f bs=${bs} count=16 conv=${sync}"
//! phases:
//!   before_each: [clean, sync, { fstrim: "${mount}" }, drop_caches, reboot, { command: "echo hi" }]
//! repeat: 5                    # 1..=10000, default 3; or bounded adaptive repetition:
//! # repeat: { min: 5, max: 50, until: { metric: wall, ci: 2% } }
//! warmup: 2                    # 0..=1000, default 0: runs per cell before the counted ones
//! order: interleaved           # interleaved (default) | sequential | shuffled
//! seed: 42                     # only with `order: shuffled`; default 0
//! on_failure: continue         # continue (default) | abort
//! ```
//!
//! The matrix expands like GitHub Actions' `strategy.matrix`: the cartesian
//! product (first key varies slowest), minus `exclude` entries, plus
//! `include` entries, which join every combination whose original values
//! they do not overwrite, or else become a cell of their own. Exclude
//! entries that match nothing and include entries that change nothing are
//! rejected as the typos they almost always are.
//!
//! Every parameter must change what its cells run: a `${param}` in the workload, a phase
//! or `storage:` uses it. One that nothing uses (`fs: [ext4, xfs]` in a campaign without
//! storage) is refused, unless `matrix.labels` declares it a label — deliberate
//! replicates, or a name for what include entries set — and then nothing may use it.
//! Report keys (pivot, baseline) do not count as uses: they only group cells.
//!
//! In workload and phase strings `${param}` is replaced per cell. The
//! reserved names `${host}`, `${mount}`, `${repetition}` and `${cell}` are
//! left as written for the agent to fill in; `$${` is a literal `${`
//! (shell `$${HOME}`), and `$NAME` without braces is left alone.
//!
//! YAML is read as YAML 1.2 (as serde_yaml 0.9 does): `on`, `off` and `yes`
//! are strings. Matrix values keep the text as written (`4k`, `0.50`, `true`).

mod accessors;
mod cells;
mod error;
pub mod health;
mod matrix;
mod metrics;
mod model;
mod params;
mod prepare;
mod report_spec;
/// The built-in fsync loop's metrics, in its own order (reports list them so).
pub(crate) use metrics::FSYNC as FSYNC_METRICS;
mod schema;
pub mod set;
mod subst;
mod template;
pub mod threshold;
mod tree;
mod workload;

use std::path::Path;

use indexmap::IndexMap;

pub use error::{SpecError, SpecErrors, MAX_SHOWN};
pub use model::*;
pub use workload::parse_bytes;

use error::{error, Pos, WithHint};

/// Reads and validates the campaign file at `path` with the default [`Limits`].
pub fn load(path: &Path) -> Result<Campaign, SpecErrors> {
    load_with(path, &Limits::default())
}

/// Reads and validates the campaign file at `path`. A file that cannot be read or is
/// over the size limit is an error without a position (line 0).
pub fn load_with(path: &Path, limits: &Limits) -> Result<Campaign, SpecErrors> {
    let file = path.display().to_string();
    let text = read_file(path, limits.max_file_bytes)?;
    parse_with(&file, &text, limits)
}

/// The text of a campaign file, read only if it is at most `max_bytes` long (and never
/// more than that, even from a pipe whose size is not known beforehand).
pub fn read_file(path: &Path, max_bytes: u64) -> Result<String, SpecErrors> {
    use std::io::Read;
    let file = path.display().to_string();
    let unreadable = |e: std::io::Error| whole_file(&file, format!("cannot read: {e}"));
    let f = std::fs::File::open(path).map_err(unreadable)?;
    let known = f.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
    if let Some(size) = known.filter(|s| *s > max_bytes) {
        return Err(too_large(&file, Some(size), max_bytes));
    }
    let mut bytes = Vec::new();
    f.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > max_bytes {
        // A pipe or device: how much more there is was not read.
        return Err(too_large(&file, None, max_bytes));
    }
    String::from_utf8(bytes).map_err(|e| {
        whole_file(
            &file,
            format!(
                "cannot read: not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// An error about the file as a whole: no line or column to point at.
fn whole_file(file: &str, message: String) -> SpecErrors {
    SpecErrors::from(SpecError {
        file: file.to_string(),
        line: 0,
        column: 0,
        path: String::new(),
        message,
        hint: None,
    })
}

/// `size`: the file's, when known.
fn too_large(file: &str, size: Option<u64>, max: u64) -> SpecErrors {
    // `1 MiB (1048576 bytes`, or just `300 bytes`, to be closed by the caller.
    let exact = |n: u64| match human_bytes(n) {
        h if n < 1 << 10 => h,
        h => format!("{h} ({n} bytes"),
    };
    let close = |n: u64, more: &str| {
        if n < 1 << 10 {
            format!(" ({more}")
        } else {
            format!(", {more}")
        }
    };
    let size = match size {
        Some(n) if n < 1 << 10 => exact(n),
        Some(n) => format!("{})", exact(n)),
        None => format!("more than {max} bytes"),
    };
    whole_file(
        file,
        format!(
            "the file is {size}; a campaign file may be at most {}{}: a campaign is a few KB, \
             so this is probably not the file you meant; if it is, raise the limit with \
             --max-file-size (a coordinator's on `platter serve`)",
            exact(max),
            close(max, "--max-file-size)")
        ),
    )
}

/// `1 MiB`, `20.0 MiB`, `512 KiB`, `300 bytes`.
fn human_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / 1048576.0),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} bytes"),
    }
}

/// Validates and expands campaign `text` with the default [`Limits`]. `file` is only
/// used in errors.
pub fn parse(file: &str, text: &str) -> Result<Campaign, SpecErrors> {
    parse_with(file, text, &Limits::default())
}

/// Validates and expands campaign `text`: every mistake, in file order.
pub fn parse_with(file: &str, text: &str, limits: &Limits) -> Result<Campaign, SpecErrors> {
    // Text that came another way than `load_with` (a submission) is held to the same size.
    if text.len() as u64 > limits.max_file_bytes {
        return Err(too_large(
            file,
            Some(text.len() as u64),
            limits.max_file_bytes,
        ));
    }
    build(text, limits).map_err(|e| e.in_file(file))
}

/// The stages of the module doc, each run only when the one before it is right: text →
/// YAML tree → [`schema::Spec`] → expanded matrix → parameters judged → cells → the
/// checks on all cells → [`Campaign`].
fn build(text: &str, limits: &Limits) -> Result<Campaign, SpecErrors> {
    // yaml-rust2 would read a byte-order mark as part of the first key.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(root) = tree::parse(text)? else {
        return Err(error(Pos { line: 1, column: 1 }, "", "the file is empty")
            .hint("a campaign needs at least `name:` and `workload:`")
            .into());
    };
    let mut spec = schema::read(&root, limits.stored)?;

    let expansion = match &spec.matrix {
        Some(m) => matrix::expand(m)?,
        None => matrix::Expansion {
            params: Vec::new(),
            cells: vec![IndexMap::new()],
        },
    };

    // Every template and every report key is judged on its own first: syntax
    // and unknown names are errors of the file, whatever the matrix. Cells are
    // rendered only when all are right; a cell's value (a size that is not one)
    // stops at the first cell that has a wrong one, as the rest mostly repeat it.
    params::check(&spec, &expansion, limits.stored)?;
    let cells = cells::render(&spec, &expansion.params, expansion.cells)?;
    let storage_pos = spec.storage.as_ref().map(|s| s.pos);
    let prepare = match spec.prepare.take() {
        Some(p) => Some(prepare::resolve(p, &expansion.params, &cells, storage_pos)?),
        None => None,
    };
    // Rounds towards steady state are the repetitions: a drive runs at most `max_rounds`.
    if let Some(s) = prepare.as_ref().and_then(|p| p.steady_state.as_ref()) {
        spec.repeat = Repeat::fixed(u32::try_from(s.rule.max_rounds).unwrap_or(u32::MAX));
    }
    cells::check_size(&spec, cells.len(), limits)?;
    cells::check_metrics(&spec, &cells)?;

    Ok(Campaign {
        series: spec.series.unwrap_or_else(|| spec.name.clone()),
        track: spec.track,
        name: spec.name,
        description: spec.description,
        hosts: spec.hosts,
        host_labels: spec.host_labels,
        params: expansion.params,
        cells,
        repeat: spec.repeat,
        warmup: spec.warmup,
        order: spec.order,
        on_failure: spec.on_failure,
        devices: spec.devices,
        report: spec.report,
        max_steps_per_plan: limits.max_steps_per_plan,
        max_total_steps: limits.max_total_steps,
        prepare,
    })
}

#[cfg(test)]
mod tests;
