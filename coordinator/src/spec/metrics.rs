//! Which metrics each workload produces — the one catalogue of the agent's metric names,
//! kept equal to its parsers by a test that runs them on real tool output — and the check
//! that every `report:` setting naming a metric (`qualify`, `metric`, `pivot.metric`) names
//! one the campaign can produce. It judges names only; computing numbers is the report's.
//!
//! A metric that depends on run-time facts is accepted when the campaign as written can
//! produce it in some cell: `disk.*` counters when a cell has storage on a selected device,
//! fio's `read.*`/`write.*`/`trim.*` by the job's `rw` (and `verify`), `sync.*` with
//! `fsync`/`fdatasync`/`sync_file_range`. With a fio job file the jobs are unknown, so any
//! fio-shaped name is accepted.

use super::error::{backticked, closest, error, Pos, Result, WithHint};
use super::model::{is_merged, Cell, FioWorkload, Workload, MERGED_LATENCY};
use super::threshold::{Stat, Threshold};

/// Every command and tool run: the process's times and peak RSS (`agent::process`).
pub(crate) const PROCESS: [&str; 4] = ["wall", "user", "sys", "max_rss"];

/// The device under test's counters around a measurement (`agent::probes::diskstats`).
pub(crate) const DISK: [&str; 10] = [
    "disk.reads",
    "disk.writes",
    "disk.flushes",
    "disk.discards",
    "disk.read_bytes",
    "disk.write_bytes",
    "disk.read_time",
    "disk.write_time",
    "disk.flush_time",
    "disk.io_time",
];

/// The built-in `fsync` loop: its wall time and its per-run rows; `latency` carries the
/// HDR histogram of every operation.
pub(crate) const FSYNC: [&str; 12] = [
    "wall",
    "latency.mean",
    "latency.p50",
    "latency.p90",
    "latency.p99",
    "latency.p99.9",
    "latency.max",
    "latency.min",
    "ops_per_s",
    "total",
    "ops",
    "latency",
];

/// Suffix of a per-run latency percentile's name in a report (`report::PER_RUN`).
const PER_RUN: &str = " per run";

/// fio's data directions and what the agent reports for each one that did I/O.
const FIO_DIRECTIONS: [&str; 3] = ["read", "write", "trim"];
const FIO_DIRECTION_METRICS: [&str; 10] = [
    "iops",
    "bw",
    "lat.mean",
    "clat.mean",
    "clat.p50",
    "clat.p90",
    "clat.p99",
    "clat.p99.9",
    "lat.max",
    "ios",
];
const FIO_SYNC_METRICS: [&str; 7] = [
    "lat.mean",
    "lat.p50",
    "lat.p90",
    "lat.p99",
    "lat.p99.9",
    "lat.max",
    "ios",
];
/// More jobs than this are not listed one by one; their names are checked for shape.
const MAX_LISTED_JOBS: u64 = 64;

/// bonnie++ operations in B/s and in op/s; each also has `.cpu` and `.latency`.
const BONNIE_THROUGHPUT: [&str; 5] = ["putc", "put_block", "rewrite", "getc", "get_block"];
const BONNIE_RATE: [&str; 7] = [
    "seeks",
    "seq_create",
    "seq_stat",
    "seq_del",
    "ran_create",
    "ran_stat",
    "ran_del",
];
const BONNIE_OTHER: [&str; 2] = ["file_size", "num_files"];

/// compilebench 0.6: the `native …` setup runs (`.throughput`, `.seconds`), the summary's
/// operations measured in MB/s and those measured in seconds (each with `.user`, `.sys`,
/// `.runs`).
const COMPILEBENCH_NATIVE: [&str; 3] = [
    "native_unpatched",
    "native_patched",
    "native_patched_compiled",
];
const COMPILEBENCH_RATE: [&str; 7] = [
    "initial_create",
    "create",
    "patch",
    "compile",
    "clean",
    "read_tree",
    "read_compiled_tree",
];
const COMPILEBENCH_SECONDS: [&str; 4] = [
    "delete_tree",
    "delete_compiled_tree",
    "stat_tree",
    "stat_compiled_tree",
];

/// A `report:` setting that names a metric, where it is written.
#[derive(Debug)]
pub(crate) struct MetricRef {
    pub pos: Pos,
    pub path: String,
    pub named: Named,
}

#[derive(Debug)]
pub(crate) enum Named {
    /// `report.metric`, `report.pivot.metric`: a name as a report's rows show it.
    Metric(String),
    /// A `qualify` entry: the report looks up what its metric and statistic say.
    Threshold(Threshold),
}

/// What the cells of one campaign can produce, all cells together.
#[derive(Debug, Default)]
pub(crate) struct Produced {
    kind: &'static str,
    /// As the agent names them, in catalogue order, without repeats.
    names: Vec<String>,
    /// The fsync loop's `latency` histogram: `latency.p99` … are merged values.
    histogram: bool,
    /// fio jobs whose names platter does not know (a job file, a `name` option, very many
    /// jobs): any `JOB.` prefix before a fio name is accepted.
    any_fio_job: bool,
    /// Whether a cell's storage is on a selected device (`disk.*` counters).
    disk: bool,
}

impl Produced {
    /// The union of what `cells` can produce; `devices` is whether `devices:` is given.
    pub(crate) fn of(cells: &[Cell], devices: bool) -> Produced {
        let mut p = Produced::default();
        for cell in cells {
            p.add_cell(cell, devices);
        }
        p
    }

    fn add_cell(&mut self, cell: &Cell, devices: bool) {
        let (kind, names): (&'static str, Vec<String>) = match &cell.workload {
            Workload::Command(_) => ("command", owned(&PROCESS)),
            Workload::Fsync(_) => {
                self.histogram = true;
                ("fsync", owned(&FSYNC))
            }
            Workload::Fio(f) => {
                let mut names = owned(&PROCESS);
                match fio_jobs(f) {
                    Some(jobs) => names.extend(jobs),
                    None => {
                        self.any_fio_job = true;
                        names.extend(fio_job("", &FIO_DIRECTIONS, true));
                    }
                }
                ("fio", names)
            }
            Workload::Bonnie(_) => ("bonnie", bonnie()),
            Workload::Compilebench(_) => ("compilebench", compilebench()),
        };
        self.kind = kind;
        for n in names {
            if !self.names.contains(&n) {
                self.names.push(n);
            }
        }
        if devices && cell.storage.as_ref().is_some_and(|s| s.fs.needs_device()) {
            self.disk = true;
        }
    }

    /// Whether a cell of the campaign can have a sample named `name`.
    fn has(&self, name: &str) -> bool {
        if self.names.iter().any(|n| n == name) || self.disk && DISK.contains(&name) {
            return true;
        }
        self.any_fio_job
            && name.split_once('.').is_some_and(|(job, rest)| {
                is_job_segment(job) && fio_job("", &FIO_DIRECTIONS, true).iter().any(|n| n == rest)
            })
    }

    /// Rejects `r` unless the report can find its metric in some cell.
    pub(crate) fn check(&self, r: &MetricRef) -> Result<()> {
        let problem = match &r.named {
            Named::Metric(name) => self.check_name(name),
            Named::Threshold(t) => self.check_threshold(t),
        };
        let Some((shown, why)) = problem else {
            return Ok(());
        };
        // A message that says what to write needs no guess besides it.
        let hint = self.hint(why.is_none().then_some(shown.as_str()));
        let message =
            why.unwrap_or_else(|| format!("workload `{}` does not produce `{shown}`", self.kind));
        Err(error(r.pos, &r.path, message).hint(hint))
    }

    /// `report.metric`, `pivot.metric`: a name of the report's rows, or a merged latency.
    /// None when it is fine, else the name and, when the general message would mislead,
    /// a better one.
    fn check_name(&self, name: &str) -> Option<(String, Option<String>)> {
        if is_merged(name) {
            return (!self.histogram).then(|| (name.to_string(), None));
        }
        if let Some(base) = name.strip_suffix(PER_RUN) {
            return (!(is_merged(base) && self.has(base))).then(|| (name.to_string(), None));
        }
        (!self.has(name)).then(|| (name.to_string(), self.disk_message(name)))
    }

    /// What the report's judge looks up for `t` (see `report::judge::judged_value`).
    fn check_threshold(&self, t: &Threshold) -> Option<(String, Option<String>)> {
        let merged_q = match t.stat {
            Stat::Percentile(q) if t.metric == "latency" => Some(q),
            Stat::Max if t.metric == "latency" => Some(1.0),
            _ => None,
        };
        if let Some(q) = merged_q {
            let shown = match t.stat {
                Stat::Max => "latency.max".to_string(),
                _ => percentile_name("latency", q),
            };
            if !self.histogram {
                return Some((shown, None));
            }
            if MERGED_LATENCY.iter().any(|(_, k)| (k - q).abs() < 1e-9) {
                return None;
            }
            let kept: Vec<&str> = MERGED_LATENCY.iter().map(|(n, _)| *n).collect();
            return Some((
                shown.clone(),
                Some(format!(
                    "`{shown}` is not kept: latency over every operation is reported as {}",
                    backticked(&kept)
                )),
            ));
        }
        let name = match t.stat {
            Stat::Percentile(q) => percentile_name(&t.metric, q),
            _ => t.metric.clone(),
        };
        // Reports keep each run's own `latency.p99` as `latency.p99 per run`, a name a
        // threshold cannot spell; `latency.p99` alone is the merged value.
        if !is_merged(&name) && self.has(&name) {
            return None;
        }
        let stat = match t.stat {
            Stat::Median => Some("median"),
            Stat::Mean => Some("mean"),
            Stat::Min => Some("min"),
            Stat::Max => Some("max"),
            Stat::Percentile(_) => None,
        };
        // `write.clat.mean < 1ms` reads as the mean of `write.clat`, which is no metric;
        // the metric `write.clat.mean` needs a statistic of its own.
        let whole = stat.map(|s| format!("{}.{s}", t.metric));
        if let Some(whole) = whole.filter(|w| !is_merged(w) && self.has(w)) {
            return Some((
                name,
                Some(format!(
                    "`.{}` after a name picks a statistic of the repetitions, and workload `{}` has no metric `{}`; the metric `{whole}` needs a statistic of its own: `{whole}.median`",
                    stat.unwrap_or_default(),
                    self.kind,
                    t.metric,
                )),
            ));
        }
        if is_merged(&name) && self.histogram {
            return Some((
                name.clone(),
                Some(format!(
                    "`{name}` with a statistic is each run's own percentile, which a threshold cannot name; `{name}` alone is the percentile over every operation of every run"
                )),
            ));
        }
        Some((name.clone(), self.disk_message(&name)))
    }

    /// Why a `disk.*` counter is missing: no cell measures on a selected device.
    fn disk_message(&self, name: &str) -> Option<String> {
        DISK.contains(&name).then(|| {
            format!("`{name}` is counted on the device under test, but no cell of this campaign has storage on a selected device")
        })
    }

    /// The names this campaign's workload produces, and the closest to `wanted`.
    fn hint(&self, wanted: Option<&str>) -> String {
        let mut names: Vec<&str> = self.names.iter().map(String::as_str).collect();
        if self.disk {
            names.extend(DISK);
        }
        let mut hint = format!("workload `{}` produces ", self.kind);
        const SHOWN: usize = 48;
        hint.push_str(&backticked(&names[..names.len().min(SHOWN)]));
        if names.len() > SHOWN {
            hint.push_str(&format!(" and {} more", names.len() - SHOWN));
        }
        if self.any_fio_job {
            hint.push_str(
                " (each prefixed with its job's name, `JOB.`, when fio runs several jobs)",
            );
        }
        if let Some(c) = wanted.and_then(|w| closest(w, &names)) {
            hint.push_str(&format!("; did you mean `{c}`?"));
        }
        hint
    }
}

fn owned(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// `write.clat` and 0.999 → `write.clat.p99.9`, as the report's judge names it.
fn percentile_name(metric: &str, q: f64) -> String {
    let pct = format!("{:.3}", q * 100.0);
    format!(
        "{metric}.p{}",
        pct.trim_end_matches('0').trim_end_matches('.')
    )
}

/// A fio job name as the agent puts it before a metric: lowercase letters, digits, `_`, `-`.
fn is_job_segment(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// One fio job's metrics: `PREFIXdir.…` for each direction, `PREFIXsync.…` with syncs.
fn fio_job(prefix: &str, directions: &[&str], sync: bool) -> Vec<String> {
    let mut out = Vec::new();
    for d in directions {
        out.extend(
            FIO_DIRECTION_METRICS
                .iter()
                .map(|m| format!("{prefix}{d}.{m}")),
        );
    }
    if sync {
        out.extend(FIO_SYNC_METRICS.iter().map(|m| format!("{prefix}sync.{m}")));
    }
    out
}

/// The metrics of fio with inline options (run as `--name=platter --OPTION=VALUE…`), or
/// None when the jobs cannot be known from the campaign.
fn fio_jobs(f: &FioWorkload) -> Option<Vec<String>> {
    if f.job_file.is_some() || f.options.contains_key("name") {
        return None;
    }
    let opt = |k: &str| f.options.get(k).map(|v| v.trim());
    let on = |k: &str| opt(k).is_some_and(|v| !matches!(v, "0" | "false" | "none" | ""));
    // `rw=randread:8` (an offset modifier) reads as `randread`; fio's default is `read`.
    let rw = opt("rw")
        .or_else(|| opt("readwrite"))
        .unwrap_or("read")
        .split(':')
        .next()
        .unwrap_or_default();
    let mut directions: Vec<&str> = match rw {
        "read" | "randread" => vec!["read"],
        "write" | "randwrite" => vec!["write"],
        "trim" | "randtrim" => vec!["trim"],
        "rw" | "readwrite" | "randrw" => vec!["read", "write"],
        "trimwrite" | "randtrimwrite" => vec!["write", "trim"],
        // fio rejects it when it runs; meanwhile nothing is ruled out.
        _ => FIO_DIRECTIONS.to_vec(),
    };
    let writes = directions.contains(&"write");
    // Verifying what was written reads it back (fio 3.33 reports those reads).
    if writes && on("verify") && opt("do_verify").is_none_or(|v| !matches!(v, "0" | "false")) {
        directions.insert(0, "read");
    }
    // fio times the syncs it issues per write; `end_fsync` and `fsync_on_close` are not timed.
    let sync = writes
        && ["fsync", "fdatasync", "sync_file_range"]
            .iter()
            .any(|k| on(k));
    // Without group_reporting each of `numjobs` clones is reported as a job of its own.
    let jobs: u64 = match opt("numjobs") {
        None => 1,
        Some(n) => n.parse().ok()?,
    };
    if jobs <= 1 || on("group_reporting") {
        return Some(fio_job("", &directions, sync));
    }
    if jobs > MAX_LISTED_JOBS {
        return None;
    }
    Some(
        (0..jobs)
            .flat_map(|i| fio_job(&format!("platter_{i}."), &directions, sync))
            .collect(),
    )
}

fn bonnie() -> Vec<String> {
    let mut out = owned(&PROCESS);
    let ops = || BONNIE_THROUGHPUT.iter().chain(&BONNIE_RATE);
    out.extend(ops().map(|o| o.to_string()));
    out.extend(ops().map(|o| format!("{o}.cpu")));
    out.extend(ops().map(|o| format!("{o}.latency")));
    out.extend(owned(&BONNIE_OTHER));
    out
}

fn compilebench() -> Vec<String> {
    let mut out = owned(&PROCESS);
    for op in COMPILEBENCH_NATIVE {
        out.extend([format!("{op}.throughput"), format!("{op}.seconds")]);
    }
    for (ops, measure) in [
        (&COMPILEBENCH_RATE[..], "throughput"),
        (&COMPILEBENCH_SECONDS[..], "seconds"),
    ] {
        for op in ops {
            out.extend(
                [measure, "user", "sys", "runs"]
                    .iter()
                    .map(|m| format!("{op}.{m}")),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    //! The catalogue against the agent itself: its parsers on real tool output (the
    //! agent's own fixtures), its command and fsync measurements, its disk counters.

    use std::collections::BTreeSet;

    use platter_agent::testing::{self as workloads, parse};

    use super::*;
    use crate::spec::parse;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../agent/tests/fixtures");

    fn fixture(name: &str) -> String {
        let path = format!("{FIXTURES}/{name}");
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn produced(yaml: &str) -> Produced {
        let c = parse("t.yaml", yaml).unwrap_or_else(|e| panic!("{e}"));
        Produced::of(&c.cells, c.devices.is_some())
    }

    /// Every name the agent emitted for a run, samples and "not measured" alike.
    fn emitted(parsed: workloads::Parsed) -> BTreeSet<String> {
        parsed
            .samples
            .into_iter()
            .map(|s| s.metric)
            .chain(parsed.missing.into_iter().map(|m| m.metric))
            .collect()
    }

    fn outcome() -> platter_agent::testing::Outcome {
        platter_agent::testing::Outcome {
            wall: std::time::Duration::from_millis(3),
            user: std::time::Duration::ZERO,
            sys: std::time::Duration::ZERO,
            max_rss_bytes: 1,
            exit_code: Some(0),
            signal: None,
            stderr_tail: String::new(),
            stdout: String::new(),
        }
    }

    fn assert_all_in(p: &Produced, names: &BTreeSet<String>, what: &str) {
        let missing: Vec<&String> = names.iter().filter(|n| !p.has(n)).collect();
        assert!(
            missing.is_empty(),
            "{what}: not in the catalogue: {missing:?}"
        );
    }

    #[test]
    fn every_process_and_disk_metric_of_the_agent_is_catalogued() {
        let names: Vec<String> = workloads::outcome_samples(&outcome())
            .into_iter()
            .map(|s| s.metric)
            .collect();
        assert_eq!(names, PROCESS);
        let disk: Vec<String> = platter_agent::testing::DiskStats::default()
            .samples()
            .into_iter()
            .map(|(n, _, _)| n)
            .collect();
        assert_eq!(disk, DISK);
    }

    #[test]
    fn the_fsync_loop_produces_exactly_its_catalogue() {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = platter_proto::model::Workload::Fsync(platter_proto::model::FsyncParams {
            path: dir.path().join("f").display().to_string(),
            size: 512,
            offset: 0,
            count: 20,
            sync: platter_proto::model::SyncMode::None,
            direct: false,
            prealloc: true,
            advance: false,
        });
        let m = workloads::measure(&w, &[], &std::sync::atomic::AtomicI32::new(0));
        assert!(!m.failed, "{}", m.error);
        let names: Vec<&str> = m.samples.iter().map(|s| s.metric.as_str()).collect();
        let mut want = vec!["wall"];
        want.extend(FSYNC.iter().filter(|n| **n != "wall"));
        assert_eq!(names, want);
        // The histogram rides on `latency`: that is what makes `latency.p99` merged.
        let carrier = m.samples.iter().find(|s| !s.histogram.is_empty());
        assert_eq!(carrier.map(|s| s.metric.as_str()), Some("latency"));
    }

    #[test]
    fn fio_fixtures_produce_only_catalogued_metrics_for_their_options() {
        // The fixtures' own job options (fio prints them in `job options`).
        for (file, options) in [
            (
                "fio-randread-4k.json",
                "{ rw: randread, bs: 4k, size: 64M, runtime: 3, ioengine: psync, direct: 1 }",
            ),
            (
                "fio-fdatasync-1b.json",
                "{ rw: write, bs: 1, size: 1000, fdatasync: 1, ioengine: sync }",
            ),
        ] {
            let p = produced(&format!(
                "name: f\nworkload: {{ fio: {{ directory: /tmp, options: {options} }} }}\n"
            ));
            let names = emitted(parse::fio(&fixture(file)).expect("fixture parses"));
            assert!(names.len() > 5, "{file}: {names:?}");
            assert_all_in(&p, &names, file);
        }
        let names = emitted(parse::fio(&fixture("fio-fdatasync-1b.json")).expect("parses"));
        assert!(names.contains("sync.lat.p99"), "{names:?}");
    }

    #[test]
    fn bonnie_fixtures_produce_only_catalogued_metrics() {
        let p = produced("name: b\nworkload: { bonnie: { directory: /tmp } }\n");
        for file in [
            "bonnie-2.00a-ext4-loop.csv",
            "bonnie-2.00a-ext4-loop.txt",
            "seed003-bonnie.csv",
        ] {
            let names = emitted(parse::bonnie_csv(&fixture(file)).expect("fixture parses"));
            assert!(names.len() > 20, "{file}: {names:?}");
            assert_all_in(&p, &names, file);
        }
    }

    #[test]
    fn compilebench_output_produces_only_catalogued_metrics() {
        let p = produced("name: c\nworkload: { compilebench: { directory: /tmp } }\n");
        let names = emitted(
            parse::compilebench(&fixture("seed003-compilebench.txt")).expect("fixture parses"),
        );
        assert_all_in(&p, &names, "seed003-compilebench.txt");
        // Every operation of compilebench 0.6's summary, as it prints it.
        let summary = "\
native unpatched native-0 222MB in 1.11 seconds (200.34 MB/s)
native patched native-0 109MB in 0.35 seconds (313.34 MB/s)
native patched compiled native-0 691MB in 3.12 seconds (221.67 MB/s)
run complete:
intial create total runs 3 avg 46.74 MB/s (user 0.14s sys 0.96s)
create total runs 1 avg 41.88 MB/s (user 0.15s sys 0.90s)
patch total runs 2 avg 31.88 MB/s (user 0.15s sys 0.90s)
compile total runs 1 avg 60.71 MB/s (user 0.03s sys 0.24s)
clean total runs 1 avg 293.12 MB/s (user 0.01s sys 0.06s)
read tree total runs 1 avg 21.65 MB/s (user 0.22s sys 1.29s)
read compiled tree total runs 1 avg 22.65 MB/s (user 0.22s sys 1.29s)
delete tree total runs 1 avg 2.50 seconds (user 0.07s sys 0.72s)
delete compiled tree total runs 1 avg 3.50 seconds (user 0.07s sys 0.72s)
stat tree total runs 1 avg 0.95 seconds (user 0.06s sys 0.44s)
stat compiled tree total runs 1 avg 1.95 seconds (user 0.06s sys 0.44s)
";
        let names = emitted(parse::compilebench(summary).expect("summary parses"));
        assert_eq!(names.len(), 6 + 11 * 4, "{names:?}");
        assert_all_in(&p, &names, "a full summary");
    }

    #[test]
    fn merged_latency_names_are_the_reports() {
        assert_eq!(MERGED_LATENCY, crate::report::MergedLatency::NAMES);
        assert_eq!(PER_RUN, crate::report::PER_RUN);
    }

    #[test]
    fn fio_directions_follow_rw_verify_and_syncs() {
        let fio = |options: &str| {
            produced(&format!(
                "name: f\nworkload: {{ fio: {{ options: {options} }} }}\n"
            ))
        };
        let p = fio("{ rw: randwrite }");
        assert!(p.has("write.iops") && !p.has("read.iops") && !p.has("sync.lat.p99"));
        let p = fio("{ rw: \"randrw:8\", fdatasync: 1 }");
        assert!(p.has("read.clat.p99") && p.has("write.bw") && p.has("sync.ios"));
        assert!(!p.has("trim.iops"));
        // A read job issues no syncs, whatever `fdatasync` says.
        assert!(!fio("{ rw: read, fdatasync: 1 }").has("sync.ios"));
        assert!(
            fio("{ size: 1M }").has("read.iops"),
            "fio's default is rw=read"
        );
        assert!(fio("{ rw: write, verify: crc32c }").has("read.iops"));
        assert!(!fio("{ rw: write, verify: crc32c, do_verify: 0 }").has("read.iops"));
        assert!(!fio("{ rw: write, end_fsync: 1 }").has("sync.ios"));
        // numjobs clones are jobs of their own unless reported as a group.
        let p = fio("{ rw: read, numjobs: 2 }");
        assert!(p.has("platter_1.read.iops") && !p.has("read.iops"));
        assert!(!p.has("platter_2.read.iops"));
        assert!(fio("{ rw: read, numjobs: 2, group_reporting: 1 }").has("read.iops"));
    }

    #[test]
    fn a_matrix_makes_the_union_of_its_cells() {
        let p = produced(
            "name: f\nmatrix: { rw: [read, write] }\nworkload: { fio: { options: { rw: \"${rw}\" } } }\n",
        );
        assert!(p.has("read.iops") && p.has("write.iops"));
    }

    #[test]
    fn a_job_file_accepts_any_job_but_only_fio_shaped_names() {
        let p = produced("name: f\nworkload: { fio: { job_file: /etc/jobs.fio } }\n");
        for ok in [
            "write.iops",
            "seq-read.read.bw",
            "log_1.sync.lat.p99.9",
            "wall",
        ] {
            assert!(p.has(ok), "{ok}");
        }
        for bad in [
            "write.iosp",
            "Job.read.bw",
            "a.b.read.bw",
            "latency.p99",
            "read",
        ] {
            assert!(!p.has(bad), "{bad}");
        }
    }

    #[test]
    fn disk_counters_need_storage_on_a_selected_device() {
        let on_device = "name: d\ndevices: { path: /dev/loop7 }\nstorage: { fs: ext4 }\nworkload: { fsync: { path: \"${mount}/f\" } }\nreport: { pivot: { rows: [device], columns: [host], metric: disk.flushes } }\n";
        assert!(produced(on_device).has("disk.flushes"));
        let e = parse(
            "t.yaml",
            &on_device.replace("fs: ext4", "ramdisk: { size: 1M }"),
        )
        .expect_err("a RAM disk has no device counters")
        .first()
        .clone();
        assert_eq!(
            (e.line, e.column, e.path.as_str()),
            (5, 61, "report.pivot.metric")
        );
        assert!(e.message.contains("device under test"), "{e}");
    }

    #[test]
    fn report_names_and_thresholds_as_the_report_reads_them() {
        let fsync = "name: s\nworkload: { fsync: { path: /tmp/f } }\nreport: ";
        for ok in [
            "{ qualify: [\"latency.p99.9 < 1ms\", \"latency.max < 1s\", \"latency.mean < 1ms\", \"ops_per_s > 10\", \"wall.max < 9s\"] }",
            "{ metric: latency.p99 }",
            "{ metric: \"latency.p99 per run\" }",
            "{ pivot: { rows: [host], columns: [host], metric: latency.p50 } }",
        ] {
            if let Err(e) = parse("t.yaml", &format!("{fsync}{ok}\n")) {
                panic!("{ok}: {e}");
            }
        }
        for (bad, says) in [
            (
                "{ qualify: [\"latency.p99.median < 1ms\"] }",
                "each run's own percentile",
            ),
            ("{ qualify: [\"user < 1s\"] }", "does not produce `user`"),
            (
                "{ metric: \"wall per run\" }",
                "does not produce `wall per run`",
            ),
        ] {
            let e = parse("t.yaml", &format!("{fsync}{bad}\n"))
                .expect_err(bad)
                .first()
                .clone();
            assert!(e.message.contains(says), "{bad}: {e}");
        }
        // fio's own per-run percentiles are metrics; the merged names are not fio's.
        let fio = "name: f\nworkload: { fio: { options: { rw: write, fdatasync: 1 } } }\nreport: ";
        parse("t.yaml", &format!("{fio}{{ qualify: [\"sync.lat.p99.9 < 5ms\", \"write.clat.mean.median < 1ms\"] }}\n"))
            .unwrap_or_else(|e| panic!("{e}"));
        let e = parse(
            "t.yaml",
            &format!("{fio}{{ qualify: [\"latency.p99 < 5ms\"] }}\n"),
        )
        .expect_err("fio has no merged histogram")
        .first()
        .clone();
        assert!(e.message.contains("does not produce `latency.p99`"), "{e}");
    }
}
