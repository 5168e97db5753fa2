//! Turns compilebench 0.6 output (its `run complete:` summary on stdout and its per-run lines on
//! stderr) into samples; it does not run compilebench.
//!
//! compilebench's MB is 1024 * 1024 bytes (it divides byte counts by `1024 * 1024`), so MB/s
//! becomes B/s by multiplying by 1_048_576.

use thiserror::Error;

use super::sample::{Parsed, Sample};

const BYTES_PER_MB: f64 = 1024.0 * 1024.0;

#[derive(Debug, Error, PartialEq)]
pub enum CompilebenchError {
    #[error(
        "compilebench output has no results: neither a `run complete:` summary nor per-run lines"
    )]
    NoResults,
    #[error("line {line}: compilebench result line not understood: {text:?}")]
    Malformed { line: usize, text: String },
}

/// What compilebench measured for one operation.
enum Measure {
    /// `avg 46.49 MB/s`
    Throughput(f64),
    /// `avg 0.72 seconds` (delete and stat operations)
    Seconds(f64),
}

/// A summary line: `intial create total runs 30 avg 46.49 MB/s (user 0.14s sys 0.96s)`.
struct Summary {
    op: String,
    runs: f64,
    measure: Measure,
    user: f64,
    sys: f64,
}

/// One per-run line carrying a rate: `create dir kernel-3 222MB in 1.99 seconds (111.75 MB/s)`.
struct Run<'a> {
    operation: String,
    dir: &'a str,
    seconds: f64,
    mb_per_s: f64,
}

/// Parses compilebench output. The summary is compilebench's own verdict and is used when present.
/// Without it (output cut short, or only stderr captured) the per-run rate lines are averaged the
/// way compilebench averages them (mean of per-run MB/s) for the operations they identify
/// unambiguously; read, stat and delete lines do not say whether the tree was compiled, so they
/// are not aggregated. The `native …` setup lines appear once each and are always emitted.
pub fn parse(text: &str) -> Result<Parsed, CompilebenchError> {
    let mut summaries = Vec::new();
    let mut summary_seen = false;
    let mut runs = Vec::new();
    let mut initial_dirs = None;

    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let malformed = || CompilebenchError::Malformed {
            line: index + 1,
            text: line.to_string(),
        };
        if line == "run complete:" || line.starts_with("no runs for ") {
            summary_seen = true;
        } else if line.contains(" total runs ") {
            summary_seen = true;
            summaries.push(parse_summary(line).ok_or_else(malformed)?);
        } else if let Some(rest) = line.strip_prefix("using working directory ") {
            initial_dirs = parse_initial_dirs(rest);
        } else if line.ends_with(" MB/s)") {
            runs.push(parse_run(line).ok_or_else(malformed)?);
        }
    }

    let mut samples = Vec::new();
    for run in runs.iter().filter(|r| r.operation.starts_with("native ")) {
        let op = snake_case(&run.operation);
        push(
            &mut samples,
            format!("{op}.throughput"),
            run.mb_per_s * BYTES_PER_MB,
            "B/s",
        );
        push(&mut samples, format!("{op}.seconds"), run.seconds, "s");
    }
    if summary_seen {
        for s in &summaries {
            let op = &s.op;
            match s.measure {
                Measure::Throughput(mbs) => push(
                    &mut samples,
                    format!("{op}.throughput"),
                    mbs * BYTES_PER_MB,
                    "B/s",
                ),
                Measure::Seconds(secs) => push(&mut samples, format!("{op}.seconds"), secs, "s"),
            }
            push(&mut samples, format!("{op}.user"), s.user, "s");
            push(&mut samples, format!("{op}.sys"), s.sys, "s");
            push(&mut samples, format!("{op}.runs"), s.runs, "1");
        }
    } else {
        aggregate_runs(&mut samples, &runs, initial_dirs);
    }

    // A summary of nothing but "no runs for …" measured nothing either.
    if samples.is_empty() {
        return Err(CompilebenchError::NoResults);
    }
    Ok(Parsed {
        samples,
        missing: Vec::new(),
    })
}

/// `{op} total runs {n} avg {x} MB/s|seconds (user {u}s sys {s}s)`
fn parse_summary(line: &str) -> Option<Summary> {
    let (op, rest) = line.split_once(" total runs ")?;
    let tokens: Vec<&str> = rest.split_whitespace().collect();
    let [runs, "avg", value, unit, "(user", user, "sys", sys] = tokens.as_slice() else {
        return None;
    };
    let value = number(value)?;
    let measure = match *unit {
        "MB/s" => Measure::Throughput(value),
        "seconds" => Measure::Seconds(value),
        _ => return None,
    };
    Some(Summary {
        op: snake_case(op),
        runs: number(runs)?,
        measure,
        user: number(user.strip_suffix('s')?)?,
        sys: number(sys.strip_suffix("s)")?)?,
    })
}

/// `{operation} {dir} {n}MB in {t} seconds ({r} MB/s)`; the operation may have several words.
fn parse_run(line: &str) -> Option<Run<'_>> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let [operation @ .., dir, size, "in", seconds, "seconds", rate, "MB/s)"] = tokens.as_slice()
    else {
        return None;
    };
    if operation.is_empty() {
        return None;
    }
    number(size.strip_suffix("MB")?)?;
    Some(Run {
        operation: operation.join(" "),
        dir,
        seconds: number(seconds)?,
        mb_per_s: number(rate.strip_prefix('(')?)?,
    })
}

/// `/mnt/, 10 intial dirs 30 runs`: how many `create dir` lines belong to the initial phase.
fn parse_initial_dirs(rest: &str) -> Option<usize> {
    let (_, counts) = rest.rsplit_once(", ")?;
    let (n, _) = counts.split_once(" intial dirs ")?;
    n.trim().parse().ok()
}

/// Averages per-run rates as compilebench's summary does (the mean of per-run MB/s). The printed
/// rates are rounded to 0.01 MB/s, so this can differ from compilebench's own figure by that much.
fn aggregate_runs(samples: &mut Vec<Sample>, runs: &[Run<'_>], initial_dirs: Option<usize>) {
    let mut groups: Vec<(&str, Vec<f64>)> =
        ["initial_create", "create", "patch", "compile", "clean"]
            .iter()
            .map(|op| (*op, Vec::new()))
            .collect();
    let mut initial_phase = true;
    let mut initial_count = 0;
    for run in runs {
        let op = match run.operation.as_str() {
            "create dir" => {
                // The initial phase creates kernel-0, kernel-1, … in order before any random
                // operation; random creates use kernel-100 and up.
                let expected_dir = format!("kernel-{initial_count}");
                let in_initial = initial_phase
                    && initial_dirs.is_none_or(|n| initial_count < n)
                    && run.dir == expected_dir;
                if in_initial {
                    initial_count += 1;
                    "initial_create"
                } else {
                    initial_phase = false;
                    "create"
                }
            }
            "patch dir" => "patch",
            "compile dir" => "compile",
            "clean" => "clean",
            _ => continue,
        };
        if op != "initial_create" {
            initial_phase = false;
        }
        if let Some((_, rates)) = groups.iter_mut().find(|(name, _)| *name == op) {
            rates.push(run.mb_per_s);
        }
    }
    for (op, rates) in groups {
        if rates.is_empty() {
            continue;
        }
        let mean = rates.iter().sum::<f64>() / rates.len() as f64;
        push(
            samples,
            format!("{op}.throughput"),
            mean * BYTES_PER_MB,
            "B/s",
        );
        push(samples, format!("{op}.runs"), rates.len() as f64, "1");
    }
}

/// `intial create` → `initial_create`: metric names use the correct spelling so they do not
/// carry compilebench's typo into reports.
fn snake_case(op: &str) -> String {
    let name = op
        .split_whitespace()
        .collect::<Vec<_>>()
        .join("_")
        .to_lowercase();
    match name.strip_prefix("intial_") {
        Some(rest) => format!("initial_{rest}"),
        None => name,
    }
}

/// A plain non-negative decimal as compilebench prints with `%.2f` or `%d`, small enough
/// that its conversion to bytes is finite (a number too long for that is no measurement).
fn number(text: &str) -> Option<f64> {
    let plain = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && text.bytes().any(|b| b.is_ascii_digit());
    if plain {
        text.parse()
            .ok()
            .filter(|v: &f64| (v * BYTES_PER_MB).is_finite())
    } else {
        None
    }
}

fn push(out: &mut Vec<Sample>, metric: String, value: f64, unit: &str) {
    out.push(Sample {
        metric,
        value,
        unit: unit.to_string(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED003: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/seed003-compilebench.txt"
    ));

    /// A complete run as compilebench 0.6 prints it (stderr then stdout), numbers made up.
    const COMPLETE: &str = "\
using working directory /mnt/bench, 3 intial dirs 6 runs
native unpatched native-0 222MB in 1.11 seconds (200.34 MB/s)
native patched native-0 109MB in 0.35 seconds (313.34 MB/s)
native patched compiled native-0 691MB in 3.12 seconds (221.67 MB/s)
create dir kernel-0 222MB in 4.50 seconds (49.33 MB/s)
create dir kernel-1 222MB in 4.90 seconds (45.30 MB/s)
create dir kernel-2 222MB in 4.87 seconds (45.58 MB/s)
compile dir kernel-1 680MB in 11.20 seconds (60.71 MB/s)
read dir kernel-2 in 9.80 22.65 MB/s
delete kernel-0 in 2.50 seconds
create dir kernel-5501 222MB in 5.30 seconds (41.88 MB/s)
stat dir kernel-1 in 1.95 seconds
clean kernel-1 469MB in 1.60 seconds (293.12 MB/s)

run complete:
==========================================================================
intial create total runs 3 avg 46.74 MB/s (user 0.14s sys 0.96s)
create total runs 1 avg 41.88 MB/s (user 0.15s sys 0.90s)
no runs for patch
compile total runs 1 avg 60.71 MB/s (user 0.03s sys 0.24s)
clean total runs 1 avg 293.12 MB/s (user 0.01s sys 0.06s)
no runs for read tree
read compiled tree total runs 1 avg 22.65 MB/s (user 0.22s sys 1.29s)
delete tree total runs 1 avg 2.50 seconds (user 0.07s sys 0.72s)
no runs for delete compiled tree
no runs for stat tree
stat compiled tree total runs 1 avg 1.95 seconds (user 0.06s sys 0.44s)
";

    fn value(p: &Parsed, metric: &str, unit: &str) -> f64 {
        let s = p
            .samples
            .iter()
            .find(|s| s.metric == metric)
            .unwrap_or_else(|| panic!("no sample {metric} in {:?}", names(p)));
        assert_eq!(s.unit, unit, "{metric} unit");
        s.value
    }

    fn names(p: &Parsed) -> Vec<&str> {
        p.samples.iter().map(|s| s.metric.as_str()).collect()
    }

    #[test]
    fn seed003_ext4_output() {
        let p = parse(SEED003).unwrap();
        assert_eq!(
            value(&p, "native_unpatched.throughput", "B/s"),
            200.34 * 1048576.0
        );
        assert_eq!(value(&p, "native_unpatched.seconds", "s"), 1.11);
        assert_eq!(
            value(&p, "native_patched.throughput", "B/s"),
            313.34 * 1048576.0
        );
        assert_eq!(value(&p, "native_patched.seconds", "s"), 0.35);
        assert_eq!(
            value(&p, "native_patched_compiled.throughput", "B/s"),
            221.67 * 1048576.0
        );
        assert_eq!(value(&p, "native_patched_compiled.seconds", "s"), 3.12);

        // The ten initial `create dir kernel-N` lines, averaged as compilebench averages them.
        let rates = [
            196.79, 176.49, 93.83, 111.75, 93.04, 115.82, 115.82, 93.83, 115.22, 89.67,
        ];
        let mean: f64 = rates.iter().sum::<f64>() / 10.0;
        assert!((mean - 120.226).abs() < 1e-9, "{mean}");
        assert_eq!(
            value(&p, "initial_create.throughput", "B/s"),
            mean * 1048576.0
        );
        assert_eq!(value(&p, "initial_create.runs", "1"), 10.0);
        assert_eq!(
            names(&p),
            [
                "native_unpatched.throughput",
                "native_unpatched.seconds",
                "native_patched.throughput",
                "native_patched.seconds",
                "native_patched_compiled.throughput",
                "native_patched_compiled.seconds",
                "initial_create.throughput",
                "initial_create.runs",
            ]
        );
        assert!(p.missing.is_empty());
    }

    #[test]
    fn summary_block_wins_over_per_run_lines() {
        let p = parse(COMPLETE).unwrap();
        assert_eq!(
            value(&p, "initial_create.throughput", "B/s"),
            46.74 * 1048576.0
        );
        assert_eq!(value(&p, "initial_create.user", "s"), 0.14);
        assert_eq!(value(&p, "initial_create.sys", "s"), 0.96);
        assert_eq!(value(&p, "initial_create.runs", "1"), 3.0);
        assert_eq!(value(&p, "create.throughput", "B/s"), 41.88 * 1048576.0);
        assert_eq!(value(&p, "compile.throughput", "B/s"), 60.71 * 1048576.0);
        assert_eq!(value(&p, "clean.throughput", "B/s"), 293.12 * 1048576.0);
        assert_eq!(
            value(&p, "read_compiled_tree.throughput", "B/s"),
            22.65 * 1048576.0
        );
        assert_eq!(value(&p, "read_compiled_tree.sys", "s"), 1.29);
        assert_eq!(value(&p, "delete_tree.seconds", "s"), 2.50);
        assert_eq!(value(&p, "delete_tree.user", "s"), 0.07);
        assert_eq!(value(&p, "stat_compiled_tree.seconds", "s"), 1.95);
        assert_eq!(value(&p, "native_patched.seconds", "s"), 0.35);
        // Each summarised operation appears exactly once: the per-run lines are not averaged too.
        let mut all = names(&p);
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count);
        // Operations with "no runs for" are simply absent.
        assert!(names(&p)
            .iter()
            .all(|n| !n.starts_with("patch.") && !n.starts_with("read_tree.")));
        assert!(!names(&p).iter().any(|n| n.starts_with("stat_tree.")));
        assert_eq!(count, 6 + 7 * 4);
    }

    #[test]
    fn per_run_fallback_splits_initial_and_random_creates() {
        let (stderr_part, _) = COMPLETE.split_once("\nrun complete:").unwrap();
        let p = parse(stderr_part).unwrap();
        assert_eq!(
            value(&p, "initial_create.throughput", "B/s"),
            (49.33 + 45.30 + 45.58) / 3.0 * 1048576.0
        );
        assert_eq!(value(&p, "initial_create.runs", "1"), 3.0);
        assert_eq!(value(&p, "create.throughput", "B/s"), 41.88 * 1048576.0);
        assert_eq!(value(&p, "create.runs", "1"), 1.0);
        assert_eq!(value(&p, "compile.throughput", "B/s"), 60.71 * 1048576.0);
        assert_eq!(value(&p, "clean.throughput", "B/s"), 293.12 * 1048576.0);
        assert!(names(&p).iter().all(|n| !n.contains("read")
            && !n.contains("stat")
            && !n.contains("delete")
            && !n.ends_with(".user")));
    }

    #[test]
    fn op_names_are_snake_case() {
        assert_eq!(snake_case("intial create"), "initial_create");
        assert_eq!(snake_case("read compiled tree"), "read_compiled_tree");
        assert_eq!(snake_case("delete compiled tree"), "delete_compiled_tree");
        assert_eq!(snake_case("stat tree"), "stat_tree");
        assert_eq!(
            snake_case("native patched compiled"),
            "native_patched_compiled"
        );
    }

    #[test]
    fn errors() {
        assert_eq!(parse(""), Err(CompilebenchError::NoResults));
        assert_eq!(
            parse("run complete:\nno runs for create\nno runs for patch\n"),
            Err(CompilebenchError::NoResults)
        );
        assert_eq!(
            parse("Traceback (most recent call last):\nIOError: [Errno 2] No such file\n"),
            Err(CompilebenchError::NoResults)
        );
        assert_eq!(
            parse("run complete:\ncompile total runs 7 avg fast MB/s (user 0.03s sys 0.24s)\n"),
            Err(CompilebenchError::Malformed {
                line: 2,
                text: "compile total runs 7 avg fast MB/s (user 0.03s sys 0.24s)".into()
            })
        );
        assert!(matches!(
            parse("create dir kernel-0 222MB in 1.13 (196.79 MB/s)"),
            Err(CompilebenchError::Malformed { line: 1, .. })
        ));
    }
}
