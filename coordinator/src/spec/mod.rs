//! Campaign files: YAML text → a validated, fully expanded [`Campaign`]. Owns
//! every check that can be made before a host is touched (the invariant "Nothing runs
//! for an invalid campaign"); it must not plan, schedule or run anything.
//!
//! ```text
//! text ──tree──► positioned YAML nodes ──schema──► Spec (templates + positions)
//!      ──matrix──► cells (param maps) ──subst──► Campaign (strings per cell)
//! ```
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

mod error;
pub mod health;
mod matrix;
mod metrics;
/// The built-in fsync loop's metrics, in its own order (reports list them so).
pub(crate) use metrics::FSYNC as FSYNC_METRICS;
mod schema;
pub mod set;
mod subst;
mod template;
pub mod threshold;
mod tree;
mod workload;

use std::collections::HashMap;
use std::path::Path;

use indexmap::IndexMap;

pub use error::{SpecError, SpecErrors, MAX_SHOWN};
pub use workload::{parse_bytes, BonnieWorkload, CompilebenchWorkload, FioWorkload, FsyncWorkload};

use error::{error as spec_error, Errors, Pos, WithHint};
use schema::{PhaseSpec, WorkloadSpec};
use template::Template;

/// `track: { threshold: 3%, against: last-3 }`: a run of the series is flagged when its
/// shift from the runs before lies, whole interval, beyond ± the threshold; the runs
/// before are the last one, or the last N pooled.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Track {
    pub threshold_pct: Option<f64>,
    /// How many earlier runs are pooled into the baseline (`last` is 1).
    pub against: Option<u32>,
}

/// One campaign file, validated and expanded into its cells.
#[derive(Debug, Clone, PartialEq)]
pub struct Campaign {
    pub name: String,
    /// The series its runs belong to: `series:`, else its name.
    pub series: String,
    /// `track:`: how its series' runs are judged against the runs before.
    pub track: Track,
    pub description: Option<String>,
    /// `hosts: { names: [...] }`; `["local"]` when absent.
    pub hosts: Vec<String>,
    /// `hosts: { labels: {…} }`: every agent with all these labels is added to `hosts`
    /// when the campaign is submitted (`select_hosts`).
    pub host_labels: Option<HostLabels>,
    /// Parameter names in first-seen order: matrix keys, then keys that only
    /// `include` entries add.
    pub params: Vec<String>,
    /// The expanded matrix, in order. Without `matrix` there is exactly one
    /// cell, with no parameters.
    pub cells: Vec<Cell>,
    pub repeat: Repeat,
    /// `warmup:` repetitions per cell, run before the counted ones and never counted.
    pub warmup: u32,
    pub order: Order,
    pub on_failure: OnFailure,
    /// `devices:`: every matching device of every host is a target the matrix runs on.
    pub devices: Option<DeviceSelector>,
    /// `report:`: baseline comparisons and qualification thresholds.
    pub report: ReportSpec,
    /// The limit it was validated with ([`Limits::max_steps_per_plan`]); the planner
    /// holds each host's plan to it once the devices are known.
    pub max_steps_per_plan: u64,
    /// [`Limits::max_total_steps`]: all hosts' plans together.
    pub max_total_steps: u64,
}

/// `repeat:`: how many repetitions each cell gets. A plain number is `min == max`.
#[derive(Debug, Clone, PartialEq)]
pub struct Repeat {
    pub min: u32,
    pub max: u32,
    /// When a cell has run enough: only with it do cells run more than `min` times.
    pub until: Option<Until>,
}

/// `until: { metric: wall, ci: 2% }`: a cell stops once the 95% interval of its
/// `metric` median lies within ± `ci_pct` percent of the median.
#[derive(Debug, Clone, PartialEq)]
pub struct Until {
    pub metric: String,
    pub ci_pct: f64,
}

impl Pivot {
    /// Every metric the pivot shows, in order.
    pub fn all_metrics(&self) -> Vec<String> {
        if self.metrics.is_empty() {
            vec![self.metric.clone()]
        } else {
            self.metrics.clone()
        }
    }
}

impl Until {
    /// What the interval is of. A report's `latency.p99` is over every operation of every
    /// run and has no interval; here it is each run's own p99 (`latency.p99 per run`).
    pub fn subject(&self) -> String {
        if metrics::is_merged(&self.metric) {
            format!("{} per run", self.metric)
        } else {
            self.metric.clone()
        }
    }
}

impl Repeat {
    pub fn fixed(n: u32) -> Repeat {
        Repeat {
            min: n,
            max: n,
            until: None,
        }
    }

    /// Whether cells may run more than `min` times: then a campaign runs in rounds.
    pub fn is_adaptive(&self) -> bool {
        self.until.is_some() && self.max > self.min
    }
}

impl std::fmt::Display for Repeat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.until {
            Some(u) if self.is_adaptive() => write!(f, "{}–{} ({u})", self.min, self.max),
            _ => write!(f, "{}", self.max),
        }
    }
}

/// "until the 95% interval of the wall median is within ±2%".
impl std::fmt::Display for Until {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "until the 95% interval of the {} median is within ±{}%",
            self.subject(),
            self.ci_pct
        )
    }
}

/// `hosts: { labels: { rack: b12, role: storage-lab } }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostLabels {
    pub pairs: Vec<(String, String)>,
    pub line: usize,
    pub column: usize,
}

/// Each known agent's labels.
pub type AgentLabels = Vec<(String, std::collections::BTreeMap<String, String>)>;

impl Campaign {
    /// "3 repetition(s)"; "5–50 repetition(s) (until …), after 2 warm-up run(s)".
    pub fn repetitions_text(&self) -> String {
        let r = &self.repeat;
        let mut t = match &r.until {
            Some(u) if r.is_adaptive() => format!("{}–{} repetition(s) ({u})", r.min, r.max),
            _ => format!("{} repetition(s)", r.max),
        };
        if self.warmup > 0 {
            t.push_str(&format!(", after {} warm-up run(s)", self.warmup));
        }
        t
    }

    /// Adds the agents whose labels match `hosts: { labels }` (sorted, after the named
    /// hosts). A selector that matches no agent is an error that says what agents exist.
    pub fn select_hosts(&mut self, agents: &AgentLabels) -> Result<(), String> {
        let Some(sel) = &self.host_labels else {
            return Ok(());
        };
        let mut matched: Vec<&str> = agents
            .iter()
            .filter(|(_, l)| sel.pairs.iter().all(|(k, v)| l.get(k) == Some(v)))
            .map(|(h, _)| h.as_str())
            .collect();
        matched.sort();
        if matched.is_empty() {
            let want: Vec<String> = sel.pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            // A few known agents say what labels look like; a fleet's all would be a
            // megabyte of error.
            const SHOWN: usize = 20;
            let mut known: Vec<String> = agents
                .iter()
                .take(SHOWN)
                .map(|(h, l)| {
                    let l: Vec<String> = l.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    format!("{h} [{}]", l.join(" "))
                })
                .collect();
            if agents.len() > SHOWN {
                known.push(format!("… and {} more", agents.len() - SHOWN));
            }
            return Err(format!(
                "{}:{}: hosts.labels: no agent has the labels {}{}",
                sel.line,
                sel.column,
                want.join(" "),
                if known.is_empty() {
                    " (no agent has connected yet)".to_string()
                } else {
                    format!(" (known agents: {})", known.join(", "))
                }
            ));
        }
        // A set, not a search of the list per host: a label may select 100,000.
        let mut named: std::collections::HashSet<String> = self.hosts.iter().cloned().collect();
        for h in matched {
            if named.insert(h.to_string()) {
                self.hosts.push(h.to_string());
            }
        }
        Ok(())
    }
}

/// `report:` settings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReportSpec {
    /// Cells with this parameter value (or `host`, or `device`) are the baseline others
    /// are compared with.
    pub baseline: Option<Baseline>,
    /// The metric comparisons use; empty means `wall`.
    pub metric: String,
    pub qualify: Vec<threshold::Threshold>,
    /// `qualify: { health: { media_errors: { max_increase: 0 } } }`: limits on the drives'
    /// health, judged on each drive under test from its readings before and after the run.
    pub health: Vec<health::Limit>,
    pub pivot: Option<Pivot>,
}

/// `report.pivot`: one statistic of one metric (or of several, laid out by the key
/// `metric` in `rows` or `columns`), rows × columns.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Pivot {
    pub rows: Vec<PivotKey>,
    pub columns: Vec<PivotKey>,
    /// The metric, or the first of `metrics`.
    pub metric: String,
    /// `metric: [put_block, get_block, seeks]`: every metric, in order; empty when one.
    pub metrics: Vec<String>,
    /// min | median | mean | max | pNN, over every repetition of every cell in the slot.
    pub stat: String,
    pub line: usize,
    pub column: usize,
}

/// `host`, `device`, `device.model` (…serial, transport, controller, vendor, firmware)
/// or a parameter.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PivotKey {
    pub name: String,
    pub line: usize,
    pub column: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Baseline {
    pub key: String,
    pub value: String,
    pub line: usize,
    pub column: usize,
}

/// The parameter that names a cell's device (`loop3`) with `devices:`: reserved in the
/// matrix, a key of `report.baseline` and `report.pivot`, and the planner's first parameter
/// of each cell, so stored cells and reports carry it with the others.
pub const DEVICE: &str = "device";

/// Which devices of a host a campaign runs on. Every given field must match; `path` and
/// `by_id` are globs (`/dev/loop*`), the others compare whole values (`controller`:
/// any driver in the chain, e.g. `uas` or `ahci`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DeviceSelector {
    pub path: Option<String>,
    pub by_id: Option<String>,
    pub model: Option<String>,
    pub serial: Option<String>,
    pub transport: Option<String>,
    pub controller: Option<String>,
    /// Where `devices:` is in the file, for "matches nothing" errors found later.
    pub line: usize,
    pub column: usize,
}

pub use platter_proto::model::{Encryption, Filesystem, WriteCacheSetting};

/// `storage:` for one cell, substituted and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Storage {
    pub fs: Filesystem,
    pub mkfs_options: Vec<String>,
    /// Comma-separated, as `mount -o` takes them.
    pub mount_options: String,
    pub write_cache: WriteCacheSetting,
    /// tmpfs size in bytes (`ramdisk: { size }`); None: the kernel's default.
    pub ramdisk_size: Option<u64>,
    /// `encryption: gocryptfs`: the workload sees a gocryptfs (FUSE) view of the
    /// filesystem, like seed 000's ecryptfs home directory.
    pub encryption: Encryption,
}

/// One point of the matrix, with its strings already substituted.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// In [`Campaign::params`] order. A parameter added only by `include` is
    /// absent from cells that entry did not join, as in GitHub Actions.
    pub params: IndexMap<String, String>,
    pub workload: Workload,
    pub before_each: Vec<Phase>,
    /// `storage:`, set up before the cell's measurements and torn down after.
    pub storage: Option<Storage>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    Command(CommandWorkload),
    Fsync(FsyncWorkload),
    Fio(FioWorkload),
    Bonnie(BonnieWorkload),
    Compilebench(CompilebenchWorkload),
}

#[derive(Debug, Clone, PartialEq)]
pub struct CommandWorkload {
    /// Run once per cell, before its first repetition.
    pub setup: Option<String>,
    /// Run by the [`Phase::Clean`] phase.
    pub clean: Option<String>,
    /// The measured command.
    pub run: String,
    /// The host's user that setup, clean and run run as (the agent must be root).
    pub user: Option<String>,
    /// HOME for `user`, made and owned by it on the storage under test (`${mount}/…`).
    pub home: Option<String>,
}

/// A preparation step before each repetition.
#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    Sync,
    DropCaches,
    /// The mount point to trim (may be the reserved `${mount}`).
    Fstrim(String),
    Reboot,
    Command(String),
    /// Runs the workload's own `clean` command; only allowed when it has one.
    Clean,
}

/// How repetitions of different cells are ordered on a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// ABCABC, so slow drift of the machine spreads over all cells.
    Interleaved,
    /// AAABBBCCC.
    Sequential,
    Shuffled {
        seed: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    Continue,
    Abort,
}

/// What a campaign may ask for. Each limit is checked before the work it bounds is
/// done, and each has a flag to raise it (`--max-file-size`, `--max-steps-per-plan` on
/// `platter validate`, `run` and, for a coordinator, `serve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The campaign file's size in bytes, checked before it is read or parsed.
    pub max_file_bytes: u64,
    /// Steps (measurements and their preparation) one host's plan may hold.
    pub max_steps_per_plan: u64,
    /// Steps of all hosts' plans together: what a submission makes the coordinator hold
    /// (a few hundred bytes each) before anything runs.
    pub max_total_steps: u64,
    /// A campaign the store holds, read again (reports, adaptive rounds): it is judged
    /// by what it means, without the checks that only catch mistakes on the way in (a
    /// parameter used nowhere, a bare number for a percentage), which an older platter
    /// did not make: what it ran then must read the same now.
    pub stored: bool,
}

impl Limits {
    /// No limit: for reading a campaign the store holds, which was held to the limits it
    /// was submitted with (perhaps raised by flags) when it was; [`Limits::stored`].
    pub const NONE: Limits = Limits {
        max_file_bytes: u64::MAX,
        max_steps_per_plan: u64::MAX,
        max_total_steps: u64::MAX,
        stored: true,
    };
}

/// 2,000,000 steps across a campaign's plans: about 1 GB planned and stored at most,
/// within a 2-core/24 GiB coordinator; 200 hosts at 10,000 steps each.
pub const MAX_TOTAL_STEPS: u64 = 2_000_000;

/// A campaign is a few KB; a 20 MiB file costs validation about 0.2 s and 130 MB of
/// memory (BENCHMARKS.md), so the default keeps a mistake (a generated file, the wrong
/// file) far from costing anything.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 1 << 20;

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_steps_per_plan: MAX_STEPS_PER_PLAN,
            max_total_steps: MAX_TOTAL_STEPS,
            stored: false,
        }
    }
}

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

fn build(text: &str, limits: &Limits) -> Result<Campaign, SpecErrors> {
    // yaml-rust2 would read a byte-order mark as part of the first key.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(root) = tree::parse(text)? else {
        return Err(
            spec_error(Pos { line: 1, column: 1 }, "", "the file is empty")
                .hint("a campaign needs at least `name:` and `workload:`")
                .into(),
        );
    };
    let spec = schema::read(&root, limits.stored)?;

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
    let mut errs = Errors::default();
    // Each parameter a template refers to, and the first template that does.
    let mut used: HashMap<&str, &str> = HashMap::new();
    for t in spec.templates() {
        for piece in errs
            .ok(subst::compile(t, &expansion.params))
            .unwrap_or_default()
        {
            if let subst::Piece::Param(name) = piece {
                if let Some(name) = expansion.params.iter().find(|p| **p == name) {
                    used.entry(name).or_insert(&t.path);
                }
            }
        }
    }
    check_report_keys(&spec, &expansion.params, &mut errs);
    if let Some(m) = &spec.matrix {
        check_labels(m, &expansion.params, &mut errs);
    }
    if !errs.is_empty() {
        return Err(errs.finish());
    }
    // Judged only once every template is right: a `${bss}` typo is its own mistake, not
    // also `bs` used nowhere.
    if let (Some(m), false) = (&spec.matrix, limits.stored) {
        check_params_used(m, &expansion.params, &expansion.cells, &used, &mut errs);
        if !errs.is_empty() {
            return Err(errs.finish());
        }
    }

    // Compile every template once.
    let names = &expansion.params;
    let compile = |t| compile(t, names);
    let workload = match &spec.workload {
        WorkloadSpec::Command(c) => WorkloadTemplate::Command {
            setup: c.setup.as_ref().map(compile).transpose()?,
            clean: c.clean.as_ref().map(compile).transpose()?,
            run: compile(&c.run)?,
            user: c.user.as_ref().map(compile).transpose()?,
            home: c.home.as_ref().map(compile).transpose()?,
        },
        WorkloadSpec::Tool(t) => WorkloadTemplate::Tool {
            kind: t.kind,
            pos: t.pos,
            fields: t
                .fields
                .iter()
                .map(|(k, v)| Ok((k.as_str(), compile(v)?)))
                .collect::<Result<_, SpecError>>()?,
            options: t
                .options
                .iter()
                .map(|(k, v)| Ok((k.as_str(), compile(v)?)))
                .collect::<Result<_, SpecError>>()?,
        },
    };
    let phases = spec
        .before_each
        .iter()
        .map(|phase| {
            Ok(match phase {
                PhaseSpec::Sync => PhaseTemplate::Fixed(Phase::Sync),
                PhaseSpec::DropCaches => PhaseTemplate::Fixed(Phase::DropCaches),
                PhaseSpec::Reboot => PhaseTemplate::Fixed(Phase::Reboot),
                PhaseSpec::Clean { .. } => PhaseTemplate::Fixed(Phase::Clean),
                PhaseSpec::Fstrim(t) => PhaseTemplate::Fstrim(compile(t)?),
                PhaseSpec::Command(t) => PhaseTemplate::Command(compile(t)?),
            })
        })
        .collect::<Result<Vec<_>, SpecError>>()?;

    let storage = match &spec.storage {
        Some(st) => Some((
            st.pos,
            st.fields
                .iter()
                .map(|(k, v)| Ok((k.as_str(), compile(v)?)))
                .collect::<Result<Vec<_>, SpecError>>()?,
        )),
        None => None,
    };

    let mut cells = Vec::with_capacity(expansion.cells.len());
    for params in expansion.cells {
        let render = |(t, pieces): &Compiled<'_>| -> Result<String, SpecError> {
            let s = subst::render(t, pieces, &params)?;
            if s.trim().is_empty() {
                return Err(spec_error(
                    t.pos,
                    &t.path,
                    format!("the command is empty in cell {}", matrix::describe(&params)),
                ));
            }
            Ok(s)
        };
        let workload = match &workload {
            WorkloadTemplate::Command {
                setup,
                clean,
                run,
                user,
                home,
            } => Workload::Command(CommandWorkload {
                setup: setup.as_ref().map(render).transpose()?,
                clean: clean.as_ref().map(render).transpose()?,
                run: render(run)?,
                user: user.as_ref().map(|u| user_name(u, &params)).transpose()?,
                home: home
                    .as_ref()
                    .map(|h| home_dir(h, &params, spec.storage.is_some()))
                    .transpose()?,
            }),
            WorkloadTemplate::Tool {
                kind,
                pos,
                fields,
                options,
            } => workload::build(
                kind,
                &settings(fields, &params)?,
                &settings(options, &params)?,
                *pos,
            )?,
        };
        let mut before_each = Vec::with_capacity(phases.len());
        for phase in &phases {
            before_each.push(match phase {
                PhaseTemplate::Fixed(p) => p.clone(),
                PhaseTemplate::Fstrim(c) => Phase::Fstrim(mount_point(c, &params)?),
                PhaseTemplate::Command(c) => Phase::Command(render(c)?),
            });
        }
        let storage = match &storage {
            Some((pos, fields)) => Some(workload::storage(
                &settings(fields, &params)?,
                *pos,
                spec.devices.is_some(),
            )?),
            None => None,
        };
        cells.push(Cell {
            params,
            workload,
            before_each,
            storage,
        });
    }

    // A threshold or pivot on a metric no cell can produce would only ever say "not
    // measured": reject it, now that every cell's workload is known.
    // The size of what would run, checked before anything is expanded into steps: a
    // few lines of YAML can ask for 10⁸ steps.
    // Adaptive repetition is held to its worst case: every cell runs `max` times.
    let runs = u64::from(spec.repeat.max) + u64::from(spec.warmup);
    let per_device = (cells.len() as u64)
        .saturating_mul(runs)
        .saturating_mul(1 + spec.before_each.len() as u64);
    let max = limits.max_steps_per_plan;
    if per_device > max {
        return Err(error::error(
            spec.repeat_pos,
            "repeat",
            format!(
                "{} cell(s) × {runs} repetition(s) × {} step(s) each make {per_device} steps per host and device; \
                 the limit is {max} steps per plan (--max-steps-per-plan): fewer repetitions or matrix values, \
                 split the campaign, or raise the limit",
                cells.len(),
                1 + spec.before_each.len()
            ),
        )
        .into());
    }
    let produced = metrics::Produced::of(&cells, spec.devices.is_some());
    let mut errs = Errors::default();
    for r in &spec.metric_refs {
        errs.ok(produced.check(r));
    }
    if !errs.is_empty() {
        return Err(errs.finish());
    }

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
        max_steps_per_plan: max,
        max_total_steps: limits.max_total_steps,
    })
}

/// `matrix.labels` names parameters: each one that is none is recorded, with the closest.
fn check_labels(m: &schema::MatrixSpec, params: &[String], errs: &mut Errors) {
    let names: Vec<&str> = params.iter().map(String::as_str).collect();
    for (i, (label, pos)) in m.labels.iter().enumerate() {
        if !params.contains(label) {
            errs.push(
                spec_error(
                    *pos,
                    &format!("matrix.labels[{i}]"),
                    format!("`{label}` is not a parameter of the matrix"),
                )
                .maybe_hint(error::suggest(label, &names, "parameters")),
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
    m: &schema::MatrixSpec,
    params: &[String],
    cells: &[matrix::Params],
    used: &HashMap<&str, &str>,
    errs: &mut Errors,
) {
    for (i, (label, pos)) in m.labels.iter().enumerate() {
        if let Some(path) = used.get(label.as_str()) {
            errs.push(
                spec_error(
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
        .filter_map(|p| {
            Some((
                p,
                error::closest(&p.name, &["labels", "include", "exclude"])?,
            ))
        })
        .collect();
    for (p, word) in &misspelt {
        errs.push(
            spec_error(
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
            spec_error(
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
    cells: &'c [matrix::Params],
    name: &str,
    used: &HashMap<&str, &str>,
) -> Option<(&'c matrix::Params, &'c matrix::Params)> {
    let mut seen: HashMap<Vec<(&str, &str)>, &matrix::Params> = HashMap::new();
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
fn check_report_keys(spec: &schema::Spec, params: &[String], errs: &mut Errors) {
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
                spec_error(
                    pos,
                    &format!("report.baseline.{}", b.key),
                    format!("`{}` is not a parameter of this campaign", b.key),
                )
                .hint(format!("compare by one of {}", error::backticked(&names))),
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
                errs.push(spec_error(pos, "report.pivot", format!("`{}` is not a pivot key of this campaign", k.name))
                    .hint("use `host`, `metric`, a parameter, or with `devices:` `device` or `device.model` (serial, transport, controller, vendor, firmware)"));
            }
        }
    }
}

/// The most steps one host's plan may hold by default (measurements and their
/// preparation): at ~1 ms a step, a few minutes of trivial steps; a plan this size is
/// tens of MB on the wire and in the agent's journal. `--max-steps-per-plan` raises it.
pub const MAX_STEPS_PER_PLAN: u64 = 200_000;

/// A template with its compiled pieces; the template stays for positions.
type Compiled<'a> = (&'a Template, Vec<subst::Piece>);

/// The workload's strings, compiled but not yet rendered for a cell.
enum WorkloadTemplate<'a> {
    Command {
        setup: Option<Compiled<'a>>,
        clean: Option<Compiled<'a>>,
        run: Compiled<'a>,
        user: Option<Compiled<'a>>,
        home: Option<Compiled<'a>>,
    },
    Tool {
        kind: &'static str,
        pos: Pos,
        fields: Vec<(&'a str, Compiled<'a>)>,
        options: Vec<(&'a str, Compiled<'a>)>,
    },
}

/// A phase whose strings are compiled but not yet rendered for a cell.
enum PhaseTemplate<'a> {
    Fixed(Phase),
    Fstrim(Compiled<'a>),
    Command(Compiled<'a>),
}

/// Renders a tool workload's settings for one cell.
fn settings<'a>(
    list: &[(&str, Compiled<'a>)],
    params: &IndexMap<String, String>,
) -> Result<IndexMap<String, workload::Setting<'a>>, SpecError> {
    list.iter()
        .map(|(k, (t, pieces))| {
            let value = subst::render(t, pieces, params)?;
            // Name the cell only when a parameter made the value what it is.
            let cell = if value == t.text {
                String::new()
            } else {
                matrix::describe(params)
            };
            Ok((
                k.to_string(),
                workload::Setting {
                    value,
                    template: t,
                    cell,
                },
            ))
        })
        .collect()
}

fn compile<'a>(t: &'a Template, params: &[String]) -> Result<Compiled<'a>, SpecError> {
    Ok((t, subst::compile(t, params)?))
}

/// fstrim takes a mount point: an absolute path, or the reserved `${mount}`
/// (or another reserved name) that the agent fills in.
fn mount_point(
    (t, pieces): &Compiled<'_>,
    params: &IndexMap<String, String>,
) -> Result<String, SpecError> {
    let path = subst::render(t, pieces, params)?;
    if path.trim().is_empty() {
        return Err(spec_error(
            t.pos,
            &t.path,
            format!(
                "the fstrim mount point is empty in cell {}",
                matrix::describe(params)
            ),
        ));
    }
    if !path.starts_with('/') && !path.starts_with("${") {
        return Err(spec_error(
            t.pos,
            &t.path,
            format!("the fstrim mount point `{path}` is not an absolute path"),
        )
        .hint("write the full path of the mount point, e.g. `/mnt/test`, or `${mount}`"));
    }
    Ok(path)
}

/// `workload.command.user`: a user name as `useradd` takes it (letters, digits, `_`, `.`,
/// `-`, not first; at most 32), so it can only name a user, never hold shell syntax.
fn user_name(
    (t, pieces): &Compiled<'_>,
    params: &IndexMap<String, String>,
) -> Result<String, SpecError> {
    let name = subst::render(t, pieces, params)?;
    let valid = !name.is_empty()
        && name.len() <= 32
        && !name.starts_with('-')
        && !name.bytes().all(|b| b.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if !valid {
        return Err(spec_error(
            t.pos,
            &t.path,
            format!(
                "`{name}` is not a user name (in cell {})",
                matrix::describe(params)
            ),
        )
        .hint("name a user of the host, e.g. `user: builder` (letters, digits, `_`, `.`, `-`)"));
    }
    Ok(name)
}

/// `workload.command.home`: an absolute path, or one under `${mount}` with `storage:`.
fn home_dir(
    (t, pieces): &Compiled<'_>,
    params: &IndexMap<String, String>,
    has_storage: bool,
) -> Result<String, SpecError> {
    let path = subst::render(t, pieces, params)?;
    if path.contains("${mount}") && !has_storage {
        return Err(spec_error(
            t.pos,
            &t.path,
            "`${mount}` is the storage under test, but the campaign has no `storage:`",
        )
        .hint("add `storage:` (e.g. `storage: { fs: tmpfs }`), or give an absolute path"));
    }
    if !path.starts_with('/') && !path.starts_with("${mount}") {
        return Err(spec_error(
            t.pos,
            &t.path,
            format!("the home directory `{path}` is not an absolute path"),
        )
        .hint("put it on the storage under test, e.g. `home: \"${mount}/home/builder\"`"));
    }
    Ok(path)
}

#[cfg(test)]
mod tests;
