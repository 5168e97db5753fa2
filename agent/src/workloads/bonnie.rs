//! Turns a bonnie++ CSV result line (formats 1.96/1.97 and 1.98, as bonnie++ 1.96 to 2.00a print
//! them) into samples; it reads only the last result line and never turns `+++++` into a number.

use thiserror::Error;

use super::sample::{Missing, Parsed, Sample};

/// bonnie++ reports throughput in K/sec with K = 1024 bytes (its block sizes are multiples of 1024
/// and its text report divides by 1024 again to print `m`).
const BYTES_PER_K: f64 = 1024.0;
/// bonnie++ `-n` counts files in units of 1024.
const FILES_PER_UNIT: f64 = 1024.0;
const TOO_FAST: &str = "too fast to measure (bonnie++ printed +++++)";

#[derive(Debug, Error, PartialEq)]
pub enum BonnieError {
    #[error("no bonnie++ CSV result line (one starting with a format version such as \"1.98,\")")]
    NoResultLine,
    #[error(
        "line {line}: bonnie++ CSV format {version:?} is not supported (known: 1.96, 1.97, 1.98)"
    )]
    UnsupportedFormat { line: usize, version: String },
    /// `field` is the first missing field, or the last expected one when the line is too long.
    #[error("line {line}: format {version} has {expected} fields, this line has {found} (at field `{field}`)")]
    FieldCount {
        line: usize,
        version: String,
        expected: usize,
        found: usize,
        field: &'static str,
    },
    #[error("line {line}: field `{field}` is {value:?}, expected {expected}")]
    BadValue {
        line: usize,
        field: &'static str,
        value: String,
        expected: &'static str,
    },
}

/// The fields every format starts with, up to and including the io chunk size.
const HEAD: [&str; 7] = [
    "format_version",
    "bonnie_version",
    "name",
    "concurrency",
    "seed",
    "file_size",
    "chunk_size",
];
/// Format 1.98 (bonnie++ 1.98 to 2.00a) adds the seek count and seeker process count here; the
/// fixture's `256M,,8192,5,1198,98,…` against its text report (`1198k 98`) confirms the position.
/// bonnie++ 2.00a prints the chunk size field empty in CSV.
const SEEK_SETUP: [&str; 2] = ["seek_count", "seek_proc_count"];
/// The rest, identical in both formats (bon_csv2html's list).
const TAIL: [&str; 41] = [
    "putc",
    "putc_cpu",
    "put_block",
    "put_block_cpu",
    "rewrite",
    "rewrite_cpu",
    "getc",
    "getc_cpu",
    "get_block",
    "get_block_cpu",
    "seeks",
    "seeks_cpu",
    "num_files",
    "max_size",
    "min_size",
    "num_dirs",
    "file_chunk_size",
    "seq_create",
    "seq_create_cpu",
    "seq_stat",
    "seq_stat_cpu",
    "seq_del",
    "seq_del_cpu",
    "ran_create",
    "ran_create_cpu",
    "ran_stat",
    "ran_stat_cpu",
    "ran_del",
    "ran_del_cpu",
    "putc_latency",
    "put_block_latency",
    "rewrite_latency",
    "getc_latency",
    "get_block_latency",
    "seeks_latency",
    "seq_create_latency",
    "seq_stat_latency",
    "seq_del_latency",
    "ran_create_latency",
    "ran_stat_latency",
    "ran_del_latency",
];

/// Operations measured in K/sec.
const THROUGHPUT: [&str; 5] = ["putc", "put_block", "rewrite", "getc", "get_block"];
/// Operations measured in operations per second.
const RATE: [&str; 7] = [
    "seeks",
    "seq_create",
    "seq_stat",
    "seq_del",
    "ran_create",
    "ran_stat",
    "ran_del",
];

/// Parses bonnie++ `-q` output (or a full report, whose last line is the CSV line). Only the
/// last result line counts: with `-x N` bonnie++ prints one per run and the caller runs one.
pub fn parse_csv(text: &str) -> Result<Parsed, BonnieError> {
    let (index, line) = text
        .lines()
        .enumerate()
        .filter(|(_, line)| is_result_line(line))
        .last()
        .ok_or(BonnieError::NoResultLine)?;
    parse_line(index + 1, line.trim())
}

/// A result line starts with a format version (`1.98,`); the header line starts with
/// `format_version,` and the text report has no commas, so both are skipped.
fn is_result_line(line: &str) -> bool {
    let Some((first, _)) = line.trim().split_once(',') else {
        return false;
    };
    match first.split_once('.') {
        Some((major, minor)) => {
            !major.is_empty()
                && !minor.is_empty()
                && major.bytes().all(|b| b.is_ascii_digit())
                && minor.bytes().all(|b| b.is_ascii_alphanumeric())
        }
        None => false,
    }
}

fn field_names(version: &str) -> Option<Vec<&'static str>> {
    let mut names: Vec<&'static str> = HEAD.to_vec();
    match version {
        "1.96" | "1.97" => {}
        "1.98" => names.extend(SEEK_SETUP),
        _ => return None,
    }
    names.extend(TAIL);
    Some(names)
}

struct Line<'a> {
    number: usize,
    fields: Vec<(&'static str, &'a str)>,
}

impl<'a> Line<'a> {
    fn get(&self, name: &str) -> &'a str {
        // Every name looked up comes from the layout the line was checked against.
        self.fields
            .iter()
            .find(|(n, _)| *n == name)
            .map_or("", |(_, v)| v)
    }

    fn name_of(&self, name: &str) -> &'static str {
        self.fields
            .iter()
            .find(|(n, _)| *n == name)
            .map_or("?", |(n, _)| n)
    }

    fn bad(&self, name: &str, value: &str, expected: &'static str) -> BonnieError {
        BonnieError::BadValue {
            line: self.number,
            field: self.name_of(name),
            value: value.to_string(),
            expected,
        }
    }
}

fn parse_line(number: usize, text: &str) -> Result<Parsed, BonnieError> {
    let raw: Vec<&str> = text.split(',').collect();
    let version = raw[0].to_string();
    let names = field_names(&version).ok_or_else(|| BonnieError::UnsupportedFormat {
        line: number,
        version: version.clone(),
    })?;
    if raw.len() != names.len() {
        return Err(BonnieError::FieldCount {
            line: number,
            version,
            expected: names.len(),
            found: raw.len(),
            field: names[raw.len().min(names.len() - 1)],
        });
    }
    let line = Line {
        number,
        fields: names.into_iter().zip(raw).collect(),
    };

    let mut out = Parsed::default();
    for op in THROUGHPUT {
        emit(&line, &mut out, op, op, "B/s", |v| {
            number_of(v).map(|k| k * BYTES_PER_K)
        })?;
    }
    for op in RATE {
        emit(&line, &mut out, op, op, "op/s", number_of)?;
    }
    for op in THROUGHPUT.iter().chain(&RATE) {
        emit(
            &line,
            &mut out,
            &format!("{op}_cpu"),
            &format!("{op}.cpu"),
            "%",
            number_of,
        )?;
    }
    for op in THROUGHPUT.iter().chain(&RATE) {
        emit(
            &line,
            &mut out,
            &format!("{op}_latency"),
            &format!("{op}.latency"),
            "s",
            latency_seconds,
        )?;
    }
    emit(&line, &mut out, "file_size", "file_size", "B", size_bytes)?;
    emit(&line, &mut out, "num_files", "num_files", "1", |v| {
        number_of(v).map(|n| n * FILES_PER_UNIT)
    })?;
    Ok(out)
}

/// Emits one field: empty means the test was not run (e.g. `-n 0`), all `+` means bonnie++ ran it
/// but it finished too fast to time.
fn emit(
    line: &Line<'_>,
    out: &mut Parsed,
    field: &str,
    metric: &str,
    unit: &str,
    convert: impl Fn(&str) -> Option<f64>,
) -> Result<(), BonnieError> {
    let value = line.get(field).trim();
    if value.is_empty() {
        return Ok(());
    }
    if value.bytes().all(|b| b == b'+') {
        out.missing.push(Missing {
            metric: metric.to_string(),
            reason: TOO_FAST.to_string(),
        });
        return Ok(());
    }
    let expected = match unit {
        "s" => "a latency such as 850us, 12ms or 3s",
        "B" => "a size such as 300M, 8G or a number of MiB",
        _ => "a non-negative number or +++++",
    };
    // A number too long for an f64 (or whose conversion is) is no measurement either.
    let value = convert(value)
        .filter(|v| v.is_finite())
        .ok_or_else(|| line.bad(field, value, expected))?;
    out.samples.push(Sample {
        metric: metric.to_string(),
        value,
        unit: unit.to_string(),
    });
    Ok(())
}

/// A plain non-negative decimal; `f64::from_str` alone would also take "inf" and "NaN".
fn number_of(text: &str) -> Option<f64> {
    let plain = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && text.bytes().any(|b| b.is_ascii_digit());
    if plain {
        text.parse().ok()
    } else {
        None
    }
}

/// bonnie++ prints latency as `{n}us` below 0.1 s, `{n}ms` below 100 s and `{n}s` above
/// (bon_time.cpp print_latency); it never prints a bare number, so one is rejected as ambiguous.
fn latency_seconds(text: &str) -> Option<f64> {
    let (number, scale) = if let Some(n) = text.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else {
        return None;
    };
    number_of(number).map(|n| n * scale)
}

/// bonnie++ prints the file size in MiB with a unit letter (`300M`, or `8G` when a multiple of
/// 1024); older versions printed a bare number of MiB.
fn size_bytes(text: &str) -> Option<f64> {
    const MIB: f64 = 1024.0 * 1024.0;
    let (number, scale) = match text.as_bytes().last()?.to_ascii_uppercase() {
        b'K' => (&text[..text.len() - 1], 1024.0),
        b'M' => (&text[..text.len() - 1], MIB),
        b'G' => (&text[..text.len() - 1], MIB * 1024.0),
        b'T' => (&text[..text.len() - 1], MIB * 1024.0 * 1024.0),
        _ => (text, MIB),
    };
    number_of(number).map(|n| n * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV_200A: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/bonnie-2.00a-ext4-loop.csv"
    ));
    const TXT_200A: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/bonnie-2.00a-ext4-loop.txt"
    ));
    const SEED003: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/seed003-bonnie.csv"
    ));

    fn value(p: &Parsed, metric: &str, unit: &str) -> f64 {
        let s = p
            .samples
            .iter()
            .find(|s| s.metric == metric)
            .unwrap_or_else(|| panic!("no sample {metric} in {:?}", p.samples));
        assert_eq!(s.unit, unit, "{metric} unit");
        s.value
    }

    fn assert_seconds(p: &Parsed, metric: &str, want: f64) {
        let got = value(p, metric, "s");
        assert!(
            (got - want).abs() <= want * 1e-12,
            "{metric}: got {got}, want {want}"
        );
    }

    fn missing(p: &Parsed) -> Vec<&str> {
        p.missing.iter().map(|m| m.metric.as_str()).collect()
    }

    fn has_sample(p: &Parsed, metric: &str) -> bool {
        p.samples.iter().any(|s| s.metric == metric)
    }

    const FILE_OPS: [&str; 6] = [
        "seq_create",
        "seq_stat",
        "seq_del",
        "ran_create",
        "ran_stat",
        "ran_del",
    ];

    #[test]
    fn bonnie_200a_csv_fixture() {
        let p = parse_csv(CSV_200A).unwrap();
        assert_eq!(value(&p, "putc", "B/s"), 1253.0 * 1024.0);
        assert_eq!(value(&p, "putc.cpu", "%"), 99.0);
        assert_eq!(value(&p, "put_block", "B/s"), 441163.0 * 1024.0);
        assert_eq!(value(&p, "put_block.cpu", "%"), 39.0);
        assert_eq!(value(&p, "getc", "B/s"), 1923.0 * 1024.0);
        assert_eq!(value(&p, "getc.cpu", "%"), 98.0);
        assert_eq!(value(&p, "file_size", "B"), 256.0 * 1024.0 * 1024.0);
        assert_eq!(value(&p, "num_files", "1"), 1024.0);
        assert_seconds(&p, "putc.latency", 10850e-6);
        assert_seconds(&p, "put_block.latency", 0.287);
        assert_seconds(&p, "ran_del.latency", 102e-6);
        // The seek count (8192) and seeker count (5) of format 1.98 are not mistaken for putc.
        assert!(p
            .samples
            .iter()
            .all(|s| s.value != 8192.0 && s.value != 5.0));

        let too_fast = ["rewrite", "get_block", "seeks"].iter().chain(&FILE_OPS);
        let mut want_missing: Vec<String> = too_fast.clone().map(|op| op.to_string()).collect();
        want_missing.extend(too_fast.map(|op| format!("{op}.cpu")));
        want_missing.sort();
        let mut got: Vec<String> = missing(&p).iter().map(|m| m.to_string()).collect();
        got.sort();
        assert_eq!(got, want_missing);
        assert!(p.missing.iter().all(|m| m.reason == TOO_FAST));
        for m in &p.missing {
            assert!(
                !has_sample(&p, &m.metric),
                "{} is both missing and a sample",
                m.metric
            );
        }
        // 5 throughputs + seeks + 6 file ops, each with cpu, and 12 latencies, file_size, num_files.
        assert_eq!(p.samples.len() + p.missing.len(), 12 * 2 + 12 + 2);
    }

    #[test]
    fn bonnie_200a_full_report_matches_its_text_table() {
        // The text table reads: putc 1198k 98%, put_block 478m 75%, getc 1809k 98%,
        // latencies 9782us 64244us 159us 8379us 83us 7603us / 85us 49us 241us 118us 467us 545us.
        let p = parse_csv(TXT_200A).unwrap();
        assert_eq!(value(&p, "putc", "B/s"), 1198.0 * 1024.0);
        assert_eq!(value(&p, "putc.cpu", "%"), 98.0);
        assert_eq!(value(&p, "put_block", "B/s"), 489408.0 * 1024.0);
        assert_eq!((489408.0_f64 / 1024.0).round(), 478.0);
        assert_eq!(value(&p, "put_block.cpu", "%"), 75.0);
        assert_eq!(value(&p, "getc", "B/s"), 1809.0 * 1024.0);
        let latencies = [
            ("putc", 9782e-6),
            ("put_block", 64244e-6),
            ("rewrite", 159e-6),
            ("getc", 8379e-6),
            ("get_block", 83e-6),
            ("seeks", 7603e-6),
            ("seq_create", 85e-6),
            ("seq_stat", 49e-6),
            ("seq_del", 241e-6),
            ("ran_create", 118e-6),
            ("ran_stat", 467e-6),
            ("ran_del", 545e-6),
        ];
        for (op, secs) in latencies {
            assert_seconds(&p, &format!("{op}.latency"), secs);
        }
        assert!(missing(&p).contains(&"rewrite"));
        assert!(!has_sample(&p, "rewrite"));
    }

    #[test]
    fn seed003_lines_format_196() {
        let mut lines = SEED003.lines();
        let first = parse_csv(lines.next().unwrap()).unwrap();
        assert_eq!(value(&first, "putc", "B/s"), 1021.0 * 1024.0);
        assert_eq!(value(&first, "putc.cpu", "%"), 98.0);
        assert_eq!(value(&first, "put_block", "B/s"), 126814.0 * 1024.0);
        assert_eq!(value(&first, "rewrite", "B/s"), 88654.0 * 1024.0);
        assert_eq!(value(&first, "getc", "B/s"), 5418.0 * 1024.0);
        assert_eq!(value(&first, "get_block", "B/s"), 454866.0 * 1024.0);
        assert_eq!(value(&first, "seeks", "op/s"), 7928.0);
        assert_eq!(value(&first, "seeks.cpu", "%"), 115.0);
        assert_eq!(value(&first, "file_size", "B"), 8000.0 * 1024.0 * 1024.0);
        assert_eq!(value(&first, "num_files", "1"), 16.0 * 1024.0);
        assert_seconds(&first, "putc.latency", 13040e-6);
        assert_seconds(&first, "put_block.latency", 0.146);
        assert_seconds(&first, "rewrite.latency", 0.668);
        assert_seconds(&first, "ran_stat.latency", 65e-6);
        let mut want: Vec<String> = FILE_OPS.iter().map(|s| s.to_string()).collect();
        want.extend(FILE_OPS.iter().map(|s| format!("{s}.cpu")));
        want.sort();
        let mut got: Vec<String> = missing(&first).iter().map(|s| s.to_string()).collect();
        got.sort();
        assert_eq!(got, want);
        for op in FILE_OPS {
            assert!(!has_sample(&first, op), "{op} must not be a sample");
        }

        // parse_csv takes the last result line of several.
        let last = parse_csv(SEED003).unwrap();
        assert_eq!(value(&last, "putc", "B/s"), 497.0 * 1024.0);
        assert_eq!(value(&last, "seeks", "op/s"), 1133.0);
        assert_eq!(value(&last, "seeks.cpu", "%"), 424.0);
        assert_seconds(&last, "rewrite.latency", 1.916);
        assert_seconds(&last, "get_block.latency", 53188e-6);
        assert_eq!(parse_csv(lines.next().unwrap()).unwrap(), last);
    }

    #[test]
    fn latency_units_and_sizes() {
        assert_eq!(latency_seconds("1234us"), Some(1234.0 * 1e-6));
        assert_eq!(latency_seconds("56ms"), Some(56.0 * 1e-3));
        assert_eq!(latency_seconds("2s"), Some(2.0));
        assert_eq!(latency_seconds("120"), None);
        assert_eq!(latency_seconds("us"), None);
        assert_eq!(latency_seconds("5ks"), None);
        assert_eq!(size_bytes("300M"), Some(300.0 * 1048576.0));
        assert_eq!(size_bytes("8G"), Some(8.0 * 1073741824.0));
        assert_eq!(size_bytes("1G"), Some(1073741824.0));
        assert_eq!(size_bytes("512"), Some(512.0 * 1048576.0));
        assert_eq!(size_bytes("M"), None);
        assert_eq!(number_of("inf"), None);
        assert_eq!(number_of("NaN"), None);
        assert_eq!(number_of("379.6"), Some(379.6));
    }

    #[test]
    fn seconds_latency_and_fractional_seeks_in_a_line() {
        // bonnie++ prints seeks below 1000/s with one decimal and latencies above 100 s in s.
        let mut fields = vec!["1.98", "2.00a", "h", "1", "1", "1G", "", "8192", "5"];
        fields.extend([
            "100", "1", "200", "2", "300", "3", "400", "4", "500", "5", "379.6", "6",
        ]);
        fields.extend([""; 17]);
        fields.extend(["101s", "5ms", "7us"]);
        fields.extend([""; 9]);
        assert_eq!(fields.len(), 50);
        let p = parse_csv(&fields.join(",")).unwrap();
        assert_eq!(value(&p, "seeks", "op/s"), 379.6);
        assert_seconds(&p, "putc.latency", 101.0);
        assert_seconds(&p, "put_block.latency", 0.005);
        assert_seconds(&p, "rewrite.latency", 7e-6);
        // -n 0: every file-test field is empty, so nothing about file ops is emitted at all.
        assert!(p.missing.is_empty());
        assert!(p.samples.iter().all(|s| !s.metric.starts_with("seq_")
            && !s.metric.starts_with("ran_")
            && s.metric != "num_files"));
        assert!(!has_sample(&p, "getc.latency"));
    }

    #[test]
    fn malformed_lines_name_the_field() {
        let good = SEED003.lines().next().unwrap();

        let bad_cpu = good.replacen(",98,", ",9x,", 1);
        assert_eq!(
            parse_csv(&bad_cpu),
            Err(BonnieError::BadValue {
                line: 1,
                field: "putc_cpu",
                value: "9x".into(),
                expected: "a non-negative number or +++++",
            })
        );

        let bare_latency = good.replace("13040us", "13040");
        let err = parse_csv(&format!("header text\n{bare_latency}\n")).unwrap_err();
        assert_eq!(
            err,
            BonnieError::BadValue {
                line: 2,
                field: "putc_latency",
                value: "13040".into(),
                expected: "a latency such as 850us, 12ms or 3s",
            }
        );
        assert!(err.to_string().contains("line 2"), "{err}");
        assert!(err.to_string().contains("putc_latency"), "{err}");

        let (short, _) = good.rsplit_once(',').unwrap();
        assert_eq!(
            parse_csv(short),
            Err(BonnieError::FieldCount {
                line: 1,
                version: "1.96".into(),
                expected: 48,
                found: 47,
                field: "ran_del_latency",
            })
        );
        let long = format!("{good},extra");
        assert!(matches!(
            parse_csv(&long),
            Err(BonnieError::FieldCount {
                found: 49,
                field: "ran_del_latency",
                ..
            })
        ));
        // A 1.96 line claiming format 1.98 lacks two fields.
        assert!(matches!(
            parse_csv(&good.replacen("1.96,", "1.98,", 1)),
            Err(BonnieError::FieldCount {
                expected: 50,
                found: 48,
                ..
            })
        ));
        let bad_size = good.replace("8000M", "8000X");
        assert!(matches!(
            parse_csv(&bad_size),
            Err(BonnieError::BadValue {
                field: "file_size",
                ..
            })
        ));
    }

    #[test]
    fn no_result_line_and_unknown_format() {
        assert_eq!(parse_csv(""), Err(BonnieError::NoResultLine));
        assert_eq!(
            parse_csv("Using uid:0, gid:0.\nformat_version,bonnie_version,name\n"),
            Err(BonnieError::NoResultLine)
        );
        assert_eq!(
            parse_csv("2.10,2.10,h,1"),
            Err(BonnieError::UnsupportedFormat {
                line: 1,
                version: "2.10".into()
            })
        );
    }
}
