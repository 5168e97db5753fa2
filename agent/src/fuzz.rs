//! Fuzz target bodies for the agent's inputs from outside: the journal file and the tools'
//! outputs. Each takes arbitrary bytes and panics only on a bug (a panic in the code under
//! test or a broken invariant). The libFuzzer targets in `fuzz/` and the short budget in
//! `coordinator/tests/fuzz_short.rs` both call these, so the two never disagree about what
//! a target checks. Nothing here is used by the agent itself.

use std::path::Path;

use crate::journal::{self, Journal, JournalError};
use crate::probes::health::{self, Reading};
use crate::workloads::{bonnie, compilebench, fio, sample::Parsed};

/// The journal: replaying any bytes returns a state or says which line is corrupt. When it
/// returns a state, replaying just the valid part it kept (what `Journal::open` truncates
/// the file to) gives the same state and keeps all of it: replay is idempotent.
pub fn journal(data: &[u8]) {
    match journal::replay_bytes(data) {
        Ok((state, valid_len)) => {
            let valid = usize::try_from(valid_len).expect("valid length fits in memory");
            assert!(
                valid <= data.len(),
                "valid part {valid} > {} bytes",
                data.len()
            );
            let (again, again_len) = journal::replay_bytes(&data[..valid])
                .expect("the valid part of a journal replays again");
            assert_eq!(
                again_len, valid_len,
                "replaying the valid part cut it again"
            );
            assert!(
                again == state,
                "replaying the valid part gave another state"
            );
        }
        Err(JournalError::Corrupt { line, .. }) => assert!(line >= 1, "corrupt line 0"),
        Err(e @ JournalError::Io { .. }) => panic!("in-memory replay failed with I/O: {e}"),
    }
}

/// [`journal`] through the file: `data` is written as `dir/journal.jsonl` and opened with
/// [`Journal::open`], which must agree with the in-memory replay, cut the file to its
/// valid part, and give the same state when opened again. `dir` must be empty or hold
/// only a previous call's journal. Slower (it fsyncs); the short budget runs it on a
/// sample of inputs.
pub fn journal_on_disk(data: &[u8], dir: &Path) {
    let path = dir.join("journal.jsonl");
    std::fs::write(&path, data).expect("writing the journal");
    let memory = journal::replay_bytes(data);
    let opened = Journal::open(dir).map(|(_, state)| state);
    match (memory, opened) {
        (Ok((want, valid_len)), Ok(got)) => {
            assert!(got == want, "open and in-memory replay disagree");
            let len = std::fs::metadata(&path).expect("journal metadata").len();
            assert_eq!(len, valid_len, "open did not cut the torn tail");
            let (_, again) = Journal::open(dir).expect("a journal open accepted opens again");
            assert!(again == got, "the second open gave another state");
        }
        (
            Err(JournalError::Corrupt { line: a, .. }),
            Err(JournalError::Corrupt { line: b, .. }),
        ) => {
            assert_eq!(
                a, b,
                "open and in-memory replay name different corrupt lines"
            );
            let len = std::fs::metadata(&path).expect("journal metadata").len();
            assert_eq!(len, data.len() as u64, "a corrupt journal was changed");
        }
        (m, o) => panic!("open and in-memory replay disagree: {m:?} vs {o:?}"),
    }
}

/// fio's JSON output (with whatever fio printed around it).
pub fn fio(data: &[u8]) {
    if let Ok(parsed) = fio::parse(&String::from_utf8_lossy(data)) {
        check_parsed(&parsed);
    }
}

/// bonnie++'s CSV line (or its full report).
pub fn bonnie(data: &[u8]) {
    if let Ok(parsed) = bonnie::parse_csv(&String::from_utf8_lossy(data)) {
        check_parsed(&parsed);
    }
}

/// compilebench's output.
pub fn compilebench(data: &[u8]) {
    if let Ok(parsed) = compilebench::parse(&String::from_utf8_lossy(data)) {
        check_parsed(&parsed);
    }
}

/// smartctl's `--json` output: a reading, smartctl's reason, or an error that says what is
/// wrong. A reading names its tool and survives the trip through a provenance record
/// (serialized and read back unchanged); an unreadable drive always has a reason.
pub fn smartctl(data: &[u8]) {
    match health::parse(data) {
        Ok(Reading::Read { reading, .. }) => {
            assert!(
                reading.tool.starts_with("smartctl"),
                "a reading without its tool: {reading:?}"
            );
            let json = serde_json::to_string(&reading).expect("a reading serializes");
            let back: platter_proto::provenance::HealthReading =
                serde_json::from_str(&json).expect("a serialized reading reads back");
            assert_eq!(back, reading, "a reading changed through JSON");
        }
        Ok(Reading::Unreadable { message, .. }) => {
            assert!(!message.is_empty(), "an unreadable drive without a reason");
        }
        Err(e) => assert!(!e.to_string().is_empty(), "an error without a message"),
    }
}

/// What a parser returns becomes samples in the store and statistics in reports: every
/// value is a finite number and every metric has a name.
fn check_parsed(parsed: &Parsed) {
    for s in &parsed.samples {
        assert!(!s.metric.is_empty(), "a sample without a metric: {s:?}");
        assert!(s.value.is_finite(), "a sample that is not finite: {s:?}");
    }
    for m in &parsed.missing {
        assert!(
            !m.metric.is_empty(),
            "a missing value without a metric: {m:?}"
        );
    }
}
