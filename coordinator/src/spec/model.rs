//! What a campaign is once read: the validated, fully expanded [`Campaign`] — its cells
//! with their workload, phases and storage, its repetitions and order, its devices and
//! `report:` settings — and the [`Limits`] it is read under. Plain data and what it says
//! of itself; it reads and checks nothing. The parsers beside it (`schema`, `matrix`,
//! `workload`, …) build it and import it from here, never the other way round.

use indexmap::IndexMap;

use super::{health, threshold};

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
    /// `prepare:`: how each drive is brought to a defined state before it is measured.
    pub prepare: Option<Prepare>,
}

pub use platter_proto::model::PurgeMethod;

/// `prepare:` (SNIA PTS): purge the drive, write it whole, then run rounds of the
/// stimulus until the tracked value is steady. Only with `devices:`.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepare {
    pub purge: Option<PurgeMethod>,
    pub precondition: Option<Precondition>,
    pub steady_state: Option<SteadyState>,
}

impl Prepare {
    /// Whether the drive's state is built up before the measurements (a fill, or rounds
    /// towards steady state), so nothing may trim or format it between.
    pub fn builds_state(&self) -> bool {
        self.precondition.is_some() || self.steady_state.is_some()
    }
}

/// `precondition: { fill: 2x, bs: 128k }`: the whole drive written `passes` times in
/// sequential writes of `block_size` bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Precondition {
    pub passes: u32,
    pub block_size: u64,
}

/// `steady_state: { metric: write.iops, window: 5, range: 20%, slope: 10%, max_rounds: 25 }`:
/// each round runs every cell of the drive once; the tracked cell's `metric` decides.
#[derive(Debug, Clone, PartialEq)]
pub struct SteadyState {
    pub metric: String,
    pub rule: SteadyRule,
    /// The tracked matrix point (index into [`Campaign::cells`]): `cell:`, else the first.
    pub tracked: usize,
}

/// The steady-state rule of a campaign (`steady_state: { window, range, slope, max_rounds }`),
/// judged by `planning::steady`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SteadyRule {
    /// Rounds in the window (PTS: 5).
    pub window: usize,
    /// The window's largest range, in percent of its average (PTS: 20).
    pub range_pct: f64,
    /// The window's largest excursion of its least-squares line, in percent of its
    /// average (PTS: 10).
    pub slope_pct: f64,
    /// Rounds after which the drive is said not steady (PTS: 25).
    pub max_rounds: usize,
}

impl SteadyRule {
    /// PTS's own figures: a window of 5 rounds, range ≤ 20%, excursion ≤ 10%, at most 25
    /// rounds.
    pub const PTS: SteadyRule = SteadyRule {
        window: 5,
        range_pct: 20.0,
        slope_pct: 10.0,
        max_rounds: 25,
    };
}

impl Campaign {
    /// `prepare.steady_state`: the campaign runs in rounds until each drive is steady.
    pub fn steady_state(&self) -> Option<&SteadyState> {
        self.prepare.as_ref()?.steady_state.as_ref()
    }

    /// "3 repetition(s)"; "5–50 repetition(s) (until …), after 2 warm-up run(s)".
    pub fn repetitions_text(&self) -> String {
        if let Some(s) = self.steady_state() {
            return format!(
                "rounds until {} is steady ({} rounds within {}% range and {}% slope; at most {})",
                s.metric, s.rule.window, s.rule.range_pct, s.rule.slope_pct, s.rule.max_rounds
            );
        }
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

/// `track: { threshold: 3%, against: last-3 }`: a run of the series is flagged when its
/// shift from the runs before lies, whole interval, beyond ± the threshold; the runs
/// before are the last one, or the last N pooled.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Track {
    pub threshold_pct: Option<f64>,
    /// How many earlier runs are pooled into the baseline (`last` is 1).
    pub against: Option<u32>,
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

impl Until {
    /// What the interval is of. A report's `latency.p99` is over every operation of every
    /// run and has no interval; here it is each run's own p99 (`latency.p99 per run`).
    pub fn subject(&self) -> String {
        if is_merged(&self.metric) {
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

/// Names that mean the percentile over every operation of every run (the merged
/// histograms) in a report; each run's own value is renamed `NAME per run` there.
/// The same list as `report::MergedLatency::NAMES` (a test holds them equal).
pub(crate) const MERGED_LATENCY: [(&str, f64); 5] = [
    ("latency.p50", 0.5),
    ("latency.p90", 0.9),
    ("latency.p99", 0.99),
    ("latency.p99.9", 0.999),
    ("latency.max", 1.0),
];

/// Whether `name` is one of the report's merged latencies (over every operation of every
/// run, `report::MergedLatency`), which have no per-run interval.
pub(crate) fn is_merged(name: &str) -> bool {
    MERGED_LATENCY.iter().any(|(n, _)| *n == name)
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

pub use platter_proto::model::SyncMode;

/// write()+sync of `size` bytes at `offset`, `count` times (seed 001's microbenchmark): the
/// model's type, the same from the campaign file to the loop that runs it.
pub type FsyncWorkload = platter_proto::model::FsyncParams;

/// fio with inline options (one job) or a job file on the agent's host.
#[derive(Debug, Clone, PartialEq)]
pub struct FioWorkload {
    pub job_file: Option<String>,
    pub directory: Option<String>,
    pub options: IndexMap<String, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BonnieWorkload {
    pub directory: String,
    /// Extra bonnie++ arguments, split on whitespace (e.g. `-s 2G -n 0`).
    pub args: Vec<String>,
    /// `memory:` (default [`BONNIE_MEMORY`]) when `args` size nothing: bonnie++ is told
    /// this is its RAM (`-r`) and writes files of twice that (`-s`); the agent holds it to
    /// that memory, page cache included, with a cgroup. `None` when `args` give `-s` or `-r`.
    pub memory: Option<u64>,
}

/// 512 MiB: bonnie++'s files are then 1 GiB, which its block tests read from the drive
/// in a second or more on today's SSDs (shorter tests print `+++++`), on any host RAM.
pub const BONNIE_MEMORY: u64 = 512 << 20;

#[derive(Debug, Clone, PartialEq)]
pub struct CompilebenchWorkload {
    /// The compilebench program (it is not packaged; users supply it).
    pub command: String,
    pub directory: String,
    pub args: Vec<String>,
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
    /// health, judged on each drive under test from its readings before and after the run
    /// (and from its baseline, `since_baseline`), and the attributes ignored on some models.
    pub health: health::HealthSpec,
    /// `qualify: { peers: { max_slower: 10% } }`, in percent: how much slower than the rest
    /// a significant cell (this campaign's fleet outliers) or drive (`platter peers
    /// --series`, of this campaign's series) must be to be flagged; 10% when `None`.
    pub peers_max_slower: Option<f64>,
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

/// The most steps one host's plan may hold by default (measurements and their
/// preparation): at ~1 ms a step, a few minutes of trivial steps; a plan this size is
/// tens of MB on the wire and in the agent's journal. `--max-steps-per-plan` raises it.
pub const MAX_STEPS_PER_PLAN: u64 = 200_000;

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
