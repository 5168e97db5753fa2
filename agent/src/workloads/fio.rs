//! Turns fio's `--output-format=json` / `json+` report into samples; it does not run fio, and it
//! reads only the per-job `read`/`write`/`trim`/`sync` sections (never the `bins` histograms).

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use thiserror::Error;

use super::sample::{Parsed, Sample};

/// fio reports every latency in nanoseconds; samples carry seconds.
const NS_PER_S: f64 = 1e9;

/// fio's percentile keys (as printed with its default `percentile_list`) and the metric suffix each becomes.
const PERCENTILES: [(&str, &str); 4] = [
    ("50.000000", "p50"),
    ("90.000000", "p90"),
    ("99.000000", "p99"),
    ("99.900000", "p99.9"),
];

#[derive(Debug, Error)]
pub enum FioError {
    #[error("fio output has no JSON report: no line starts with '{{'")]
    NoJson,
    #[error("fio JSON report is invalid: {0}")]
    Json(#[source] serde_json::Error),
    #[error("fio JSON report lists no jobs")]
    NoJobs,
    #[error("fio job {job:?} failed with error {error_code}: {message}")]
    Job {
        job: String,
        error_code: i64,
        message: String,
    },
}

#[derive(Deserialize)]
struct Report {
    #[serde(default)]
    jobs: Vec<Job>,
}

#[derive(Deserialize)]
struct Job {
    jobname: String,
    #[serde(default)]
    error: i64,
    read: Option<Direction>,
    write: Option<Direction>,
    trim: Option<Direction>,
    sync: Option<SyncSection>,
}

#[derive(Deserialize)]
struct Direction {
    #[serde(default)]
    io_bytes: u64,
    #[serde(default)]
    total_ios: u64,
    #[serde(default)]
    bw_bytes: f64,
    #[serde(default)]
    iops: f64,
    lat_ns: Option<Latency>,
    clat_ns: Option<Latency>,
}

#[derive(Deserialize)]
struct SyncSection {
    #[serde(default)]
    total_ios: u64,
    lat_ns: Option<Latency>,
}

#[derive(Deserialize)]
struct Latency {
    #[serde(default)]
    mean: f64,
    #[serde(default)]
    max: f64,
    #[serde(rename = "N", default)]
    n: u64,
    /// Only present when fio computed percentiles for this latency (clat by default, and sync).
    #[serde(default)]
    percentile: BTreeMap<String, f64>,
}

/// Parses fio's JSON report, which may be preceded by warnings and followed by notes
/// such as "fio: file hash not empty on exit".
pub fn parse(json_text: &str) -> Result<Parsed, FioError> {
    let (preamble, json) = split_preamble(json_text).ok_or(FioError::NoJson)?;
    // A stream deserializer stops after the first value, so text fio prints after the
    // report does not turn a good report into an error.
    let report: Report = serde_json::Deserializer::from_str(json)
        .into_iter::<Report>()
        .next()
        .ok_or(FioError::NoJson)?
        .map_err(FioError::Json)?;
    if report.jobs.is_empty() {
        return Err(FioError::NoJobs);
    }
    if let Some(job) = report.jobs.iter().find(|j| j.error != 0) {
        return Err(FioError::Job {
            job: job.jobname.clone(),
            error_code: job.error,
            message: error_message(preamble, job.error),
        });
    }

    let prefixes = job_prefixes(&report.jobs);
    let mut samples = Vec::new();
    for (job, prefix) in report.jobs.iter().zip(&prefixes) {
        for (dir_name, dir) in [
            ("read", &job.read),
            ("write", &job.write),
            ("trim", &job.trim),
        ] {
            if let Some(dir) = dir {
                push_direction(&mut samples, &format!("{prefix}{dir_name}"), dir);
            }
        }
        if let Some(sync) = &job.sync {
            push_sync(&mut samples, &format!("{prefix}sync"), sync);
        }
    }
    Ok(Parsed {
        samples,
        missing: Vec::new(),
    })
}

/// Splits off whatever fio printed before the report: the report starts at the first line beginning with `{`.
fn split_preamble(text: &str) -> Option<(&str, &str)> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.starts_with('{') {
            return Some(text.split_at(offset));
        }
        offset += line.len();
    }
    None
}

/// One prefix per job: none for a single job; otherwise the job name made safe for a dotted metric
/// name, with `_N` added when several jobs share a name (numjobs without group_reporting).
fn job_prefixes(jobs: &[Job]) -> Vec<String> {
    if jobs.len() == 1 {
        return vec![String::new()];
    }
    let names: Vec<String> = jobs.iter().map(|j| metric_segment(&j.jobname)).collect();
    let mut total: HashMap<&str, usize> = HashMap::new();
    for name in &names {
        *total.entry(name).or_default() += 1;
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    names
        .iter()
        .map(|name| {
            if total[name.as_str()] == 1 {
                return format!("{name}.");
            }
            let index = seen.entry(name).or_default();
            let prefix = format!("{name}_{index}.");
            *index += 1;
            prefix
        })
        .collect()
}

/// Job names are free text; a dot or space in one would break the metric's dotted structure.
fn metric_segment(name: &str) -> String {
    let segment: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if segment.is_empty() {
        "job".to_string()
    } else {
        segment
    }
}

fn push_direction(out: &mut Vec<Sample>, base: &str, dir: &Direction) {
    // fio prints all three directions for every job; one without io was not exercised.
    if dir.total_ios == 0 && dir.io_bytes == 0 {
        return;
    }
    push(out, format!("{base}.iops"), dir.iops, "op/s");
    push(out, format!("{base}.bw"), dir.bw_bytes, "B/s");
    if let Some(lat) = &dir.lat_ns {
        push(out, format!("{base}.lat.mean"), lat.mean / NS_PER_S, "s");
    }
    if let Some(clat) = &dir.clat_ns {
        push(out, format!("{base}.clat.mean"), clat.mean / NS_PER_S, "s");
        push_percentiles(out, &format!("{base}.clat"), clat);
    }
    if let Some(lat) = &dir.lat_ns {
        push(out, format!("{base}.lat.max"), lat.max / NS_PER_S, "s");
    }
    push(out, format!("{base}.ios"), dir.total_ios as f64, "1");
}

fn push_sync(out: &mut Vec<Sample>, base: &str, sync: &SyncSection) {
    let Some(lat) = &sync.lat_ns else { return };
    // fio 3.33 leaves sync.total_ios at 0 even when it timed every fdatasync (see the
    // fio-fdatasync-1b fixture: total_ios 0, lat_ns.N 999), so the latency count is the real one.
    let ios = sync.total_ios.max(lat.n);
    if ios == 0 {
        return;
    }
    push(out, format!("{base}.lat.mean"), lat.mean / NS_PER_S, "s");
    push_percentiles(out, &format!("{base}.lat"), lat);
    push(out, format!("{base}.lat.max"), lat.max / NS_PER_S, "s");
    push(out, format!("{base}.ios"), ios as f64, "1");
}

fn push_percentiles(out: &mut Vec<Sample>, base: &str, lat: &Latency) {
    for (key, suffix) in PERCENTILES {
        if let Some(ns) = lat.percentile.get(key) {
            push(out, format!("{base}.{suffix}"), ns / NS_PER_S, "s");
        }
    }
}

fn push(out: &mut Vec<Sample>, metric: String, value: f64, unit: &str) {
    out.push(Sample {
        metric,
        value,
        unit: unit.to_string(),
    });
}

/// fio's JSON holds only the errno. Its text, when fio printed it, is in the lines before the
/// report (`fio: pid=…, err=28/file:…, func=…, error=No space left on device`); otherwise the
/// errno is named from a table of the ones storage jobs hit.
fn error_message(preamble: &str, code: i64) -> String {
    let err_tag = format!("err={code}/");
    let from_fio = preamble
        .lines()
        .filter(|line| line.contains(&err_tag))
        .find_map(|line| line.split_once("error=").map(|(_, msg)| msg.trim()))
        .filter(|msg| !msg.is_empty());
    match from_fio.or_else(|| errno_text(code)) {
        Some(text) => format!("fio error {code}: {text}"),
        None => format!("fio error {code}"),
    }
}

/// Linux errno texts (as strerror prints them) for the errors storage jobs commonly end with.
fn errno_text(code: i64) -> Option<&'static str> {
    Some(match code {
        1 => "Operation not permitted",
        2 => "No such file or directory",
        5 => "Input/output error",
        9 => "Bad file descriptor",
        12 => "Cannot allocate memory",
        13 => "Permission denied",
        16 => "Device or resource busy",
        19 => "No such device",
        21 => "Is a directory",
        22 => "Invalid argument",
        24 => "Too many open files",
        27 => "File too large",
        28 => "No space left on device",
        30 => "Read-only file system",
        61 => "No data available",
        // fio reports verification failures as EILSEQ.
        84 => "Invalid or incomplete multibyte or wide character",
        95 => "Operation not supported",
        110 => "Connection timed out",
        122 => "Disk quota exceeded",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FDATASYNC: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/fio-fdatasync-1b.json"
    ));
    const RANDREAD: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/fio-randread-4k.json"
    ));

    fn get<'a>(parsed: &'a Parsed, metric: &str) -> &'a Sample {
        parsed
            .samples
            .iter()
            .find(|s| s.metric == metric)
            .unwrap_or_else(|| panic!("no sample {metric}; have {:?}", names(parsed)))
    }

    fn names(parsed: &Parsed) -> Vec<&str> {
        parsed.samples.iter().map(|s| s.metric.as_str()).collect()
    }

    /// Converted values are compared to the hand-read value in seconds; the tolerance only
    /// absorbs the last bit of a division, not a wrong unit.
    fn assert_value(parsed: &Parsed, metric: &str, want: f64, unit: &str) {
        let s = get(parsed, metric);
        assert_eq!(s.unit, unit, "{metric} unit");
        assert!(
            (s.value - want).abs() <= want.abs() * 1e-12,
            "{metric}: got {}, want {want}",
            s.value
        );
    }

    /// A minimal fio report with the given jobs, each as `(name, error, read_ios)`.
    fn report(jobs: &[(&str, i64, u64)]) -> String {
        let jobs: Vec<String> = jobs
            .iter()
            .map(|(name, error, ios)| {
                format!(
                    r#"{{"jobname": "{name}", "error": {error},
                      "read": {{"io_bytes": {bytes}, "bw_bytes": 1000, "iops": 2.5, "total_ios": {ios},
                               "lat_ns": {{"mean": 1500.0, "max": 9000, "N": {ios}}},
                               "clat_ns": {{"mean": 1000.0, "max": 8000, "N": {ios},
                                            "percentile": {{"50.000000": 700, "99.000000": 8000}}}}}},
                      "write": {{"io_bytes": 0, "total_ios": 0}}}}"#,
                    bytes = ios * 4096
                )
            })
            .collect();
        format!(
            "{{\"fio version\": \"fio-3.33\", \"jobs\": [{}]}}",
            jobs.join(",")
        )
    }

    #[test]
    fn fdatasync_write_and_sync() {
        let p = parse(FDATASYNC).unwrap();
        assert!(p.missing.is_empty());
        assert_value(&p, "write.iops", 4629.629630, "op/s");
        assert_value(&p, "write.bw", 4629.0, "B/s");
        assert_value(&p, "write.lat.mean", 4.022643e-6, "s");
        assert_value(&p, "write.clat.mean", 3.833633e-6, "s");
        assert_value(&p, "write.clat.p50", 3.312e-6, "s");
        assert_value(&p, "write.clat.p90", 4.640e-6, "s");
        assert_value(&p, "write.clat.p99", 13.760e-6, "s");
        assert_value(&p, "write.clat.p99.9", 48.384e-6, "s");
        assert_value(&p, "write.lat.max", 48.462e-6, "s");
        assert_value(&p, "write.ios", 1000.0, "1");

        assert_value(&p, "sync.lat.mean", 210.282055055e-6, "s");
        assert_value(&p, "sync.lat.p50", 197.632e-6, "s");
        assert_value(&p, "sync.lat.p90", 268.288e-6, "s");
        assert_value(&p, "sync.lat.p99", 497.664e-6, "s");
        assert_value(&p, "sync.lat.p99.9", 1236.992e-6, "s");
        assert_value(&p, "sync.lat.max", 1238.331e-6, "s");
        // total_ios is 0 in this fio version; the 999 timed fdatasyncs are the count.
        assert_value(&p, "sync.ios", 999.0, "1");

        // read and trim did no io, so nothing of theirs is emitted.
        assert!(names(&p)
            .iter()
            .all(|n| !n.starts_with("read.") && !n.starts_with("trim.")));
        assert_eq!(p.samples.len(), 10 + 7);
    }

    #[test]
    fn randread_read_only() {
        let p = parse(RANDREAD).unwrap();
        assert_value(&p, "read.iops", 23566.811063, "op/s");
        assert_value(&p, "read.bw", 96529658.0, "B/s");
        assert_value(&p, "read.lat.mean", 41.626915446e-6, "s");
        assert_value(&p, "read.clat.mean", 41.536452491e-6, "s");
        assert_value(&p, "read.clat.p50", 40.704e-6, "s");
        assert_value(&p, "read.clat.p90", 59.648e-6, "s");
        assert_value(&p, "read.clat.p99", 97.792e-6, "s");
        assert_value(&p, "read.clat.p99.9", 242.688e-6, "s");
        assert_value(&p, "read.lat.max", 2318.935e-6, "s");
        assert_value(&p, "read.ios", 70724.0, "1");
        // The sync section is all zeros for a job without fsync: no sync samples.
        assert!(names(&p).iter().all(|n| n.starts_with("read.")));
        assert_eq!(p.samples.len(), 10);
    }

    #[test]
    fn warnings_before_and_notes_after_the_json() {
        let text = format!(
            "fio: this platform does not support process shared mutexes, forcing use of threads\n\
             note: both iodepth >= 1 and synchronous I/O engine are selected\n{}\n\
             fio: file hash not empty on exit\n",
            RANDREAD
        );
        assert_eq!(parse(&text).unwrap(), parse(RANDREAD).unwrap());
    }

    #[test]
    fn missing_percentile_keys_are_skipped() {
        let p = parse(&report(&[("a", 0, 4)])).unwrap();
        assert_value(&p, "read.clat.p50", 700e-9, "s");
        assert_value(&p, "read.clat.p99", 8000e-9, "s");
        assert!(!names(&p).contains(&"read.clat.p90"));
        assert!(!names(&p).contains(&"read.clat.p99.9"));
        assert_eq!(
            names(&p),
            [
                "read.iops",
                "read.bw",
                "read.lat.mean",
                "read.clat.mean",
                "read.clat.p50",
                "read.clat.p99",
                "read.lat.max",
                "read.ios"
            ]
        );
    }

    #[test]
    fn several_jobs_are_prefixed_by_name() {
        let p = parse(&report(&[("seq.Read 1", 0, 4), ("rand", 0, 8)])).unwrap();
        assert_value(&p, "seq_read_1.read.ios", 4.0, "1");
        assert_value(&p, "rand.read.ios", 8.0, "1");
        assert_value(&p, "rand.read.lat.mean", 1.5e-6, "s");
        assert!(names(&p)
            .iter()
            .all(|n| n.starts_with("seq_read_1.read.") || n.starts_with("rand.read.")));
    }

    #[test]
    fn jobs_sharing_a_name_are_numbered() {
        let p = parse(&report(&[("w", 0, 1), ("w", 0, 2), ("x", 0, 3)])).unwrap();
        assert_value(&p, "w_0.read.ios", 1.0, "1");
        assert_value(&p, "w_1.read.ios", 2.0, "1");
        assert_value(&p, "x.read.ios", 3.0, "1");
    }

    #[test]
    fn job_error_with_text_from_fio() {
        let text = format!(
            "fio: io_u error on file /mnt/bench/f: No space left on device: write offset=0, buflen=4096\n\
             fio: pid=4242, err=28/file:io_u.c:1889, func=io_u error, error=No space left on device\n{}",
            report(&[("ok", 0, 1), ("fill", 28, 0)])
        );
        match parse(&text) {
            Err(FioError::Job {
                job,
                error_code,
                message,
            }) => {
                assert_eq!(job, "fill");
                assert_eq!(error_code, 28);
                assert_eq!(message, "fio error 28: No space left on device");
            }
            other => panic!("want a job error, got {other:?}"),
        }
    }

    #[test]
    fn job_error_named_from_errno_table() {
        match parse(&report(&[("ro", 30, 0)])) {
            Err(FioError::Job {
                error_code,
                message,
                ..
            }) => {
                assert_eq!(error_code, 30);
                assert_eq!(message, "fio error 30: Read-only file system");
            }
            other => panic!("want a job error, got {other:?}"),
        }
        match parse(&report(&[("odd", 4095, 0)])) {
            Err(FioError::Job { message, .. }) => assert_eq!(message, "fio error 4095"),
            other => panic!("want a job error, got {other:?}"),
        }
    }

    #[test]
    fn invalid_json_reports_serde_message() {
        let err = parse("{\"jobs\": [ {\"jobname\": 3} ]}").unwrap_err();
        assert!(matches!(err, FioError::Json(_)), "{err:?}");
        assert!(err.to_string().contains("invalid type"), "{err}");

        let err = parse("{\"jobs\": [").unwrap_err();
        assert!(matches!(err, FioError::Json(_)), "{err:?}");
    }

    #[test]
    fn no_json_and_no_jobs_are_errors() {
        assert!(matches!(
            parse("fio: failed to open /dev/nvme9n1\n"),
            Err(FioError::NoJson)
        ));
        assert!(matches!(parse(""), Err(FioError::NoJson)));
        assert!(matches!(
            parse("{\"fio version\": \"fio-3.33\", \"jobs\": []}"),
            Err(FioError::NoJobs)
        ));
        assert!(matches!(
            parse("{\"fio version\": \"fio-3.33\"}"),
            Err(FioError::NoJobs)
        ));
    }
}
