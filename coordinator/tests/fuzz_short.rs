//! The fuzz targets' short budget, run by `cargo test` and so by CI: each target
//! (`platter::fuzz`, `platter_agent::fuzz`) gets its seed corpus and then a fixed number of
//! seeded random mutations of it (bit flips, byte changes, insertions, deletions,
//! truncations, duplicated chunks, splices of two entries, tokens). It is deterministic by
//! default; `PLATTER_FUZZ_SEED=<u64>` picks other mutations and `PLATTER_FUZZ_ITERS=<n>`
//! runs `n` per target. A failing input is written to `target/fuzz-short/` so it can be
//! replayed with `cargo fuzz run <target> <file>` and added to `fuzz/corpus/<target>/`.
//! The long runs are libFuzzer's (`fuzz/README.md`); this only keeps the targets honest
//! between them.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DEFAULT_SEED: u64 = 0x0070_6c61_7474_6572; // "platter"

/// A target: its body, where its seeds are (relative to the repository root; the first is
/// its own corpus under `fuzz/corpus/`, which also holds the regression inputs), and how
/// many mutations it gets by default (sized so all targets together take under 30 s in a
/// debug build on a busy two-core machine).
struct Target {
    name: &'static str,
    body: fn(&[u8]),
    seeds: &'static [&'static str],
    iters: usize,
    tokens: &'static [&'static str],
}

const TEXT_TOKENS: &[&str] = &[
    "\n",
    " ",
    "\t",
    ",",
    ":",
    ": ",
    "- ",
    "\"",
    "'",
    "{",
    "}",
    "[",
    "]",
    "0",
    "-1",
    ".",
    "1e999",
    "18446744073709551616",
    "4294967296",
    "NaN",
    "inf",
    "+++++",
    "\u{feff}",
    "é",
    "null",
];

fn run(t: &Target) {
    let corpus = load_corpus(repo_root(), t.seeds);
    assert!(!corpus.is_empty(), "{}: no seeds in {:?}", t.name, t.seeds);
    let seed = env_or("PLATTER_FUZZ_SEED", DEFAULT_SEED);
    let iters = env_or("PLATTER_FUZZ_ITERS", t.iters as u64) as usize;
    let mut rng = StdRng::seed_from_u64(seed ^ fnv(t.name.as_bytes()));
    let disk = tempfile::tempdir().unwrap();

    for input in &corpus {
        check(t, input, seed);
    }
    if t.name == "journal" {
        for input in &corpus {
            check_with(t.name, input, seed, |d| {
                platter_agent::fuzz::journal_on_disk(d, disk.path())
            });
        }
    }
    for i in 0..iters {
        let input = mutate(&mut rng, &corpus, t.tokens);
        check(t, &input, seed);
        // The file path fsyncs, so it gets a sample of the inputs.
        if t.name == "journal" && i % 64 == 0 {
            check_with(t.name, &input, seed, |d| {
                platter_agent::fuzz::journal_on_disk(d, disk.path())
            });
        }
    }
    eprintln!(
        "{}: {} seeds + {iters} mutations (seed {seed:#x}), no failure",
        t.name,
        corpus.len()
    );
}

fn check(t: &Target, input: &[u8], seed: u64) {
    check_with(t.name, input, seed, t.body);
}

/// Runs `body` on `input`; on a panic, saves the input and fails with where it is.
fn check_with(name: &str, input: &[u8], seed: u64, body: impl FnOnce(&[u8])) {
    if catch_unwind(AssertUnwindSafe(|| body(input))).is_ok() {
        return;
    }
    let dir = repo_root().join("target/fuzz-short");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}-{:016x}", fnv(input)));
    std::fs::write(&file, input).unwrap();
    panic!(
        "fuzz target {name} failed (PLATTER_FUZZ_SEED={seed:#x}) on the input saved as {}; \
         replay it with `cargo fuzz run {name} {}` in fuzz/",
        file.display(),
        file.display()
    );
}

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the coordinator crate is in the repository")
}

/// Every file in the seed directories (not recursive), in a stable order.
fn load_corpus(root: &Path, dirs: &[&str]) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        files.extend(
            entries
                .map(|e| e.unwrap().path())
                .filter(|p| p.is_file() && !p.ends_with(".gitkeep")),
        );
    }
    files.sort();
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

/// One to four stacked mutations of a corpus entry.
fn mutate(rng: &mut StdRng, corpus: &[Vec<u8>], tokens: &[&str]) -> Vec<u8> {
    let mut data = corpus[rng.random_range(0..corpus.len())].clone();
    for _ in 0..rng.random_range(1..=4) {
        let len = data.len();
        let pos = |rng: &mut StdRng| rng.random_range(0..=len);
        match rng.random_range(0..9) {
            0 if len > 0 => {
                let i = rng.random_range(0..len);
                data[i] ^= 1 << rng.random_range(0..8);
            }
            1 if len > 0 => {
                let i = rng.random_range(0..len);
                data[i] = rng.random();
            }
            2 => {
                let at = pos(rng);
                let n = rng.random_range(1..=8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.random()).collect();
                data.splice(at..at, bytes);
            }
            3 if len > 0 => {
                let a = rng.random_range(0..len);
                let b = rng.random_range(a..=len.min(a + 64));
                data.drain(a..b);
            }
            4 => data.truncate(pos(rng)),
            5 if len > 0 => {
                let a = rng.random_range(0..len);
                let b = rng.random_range(a..=len.min(a + 256));
                let chunk = data[a..b].to_vec();
                let at = pos(rng);
                data.splice(at..at, chunk);
            }
            6 => {
                let other = &corpus[rng.random_range(0..corpus.len())];
                let cut = pos(rng);
                let from = rng.random_range(0..=other.len());
                data.truncate(cut);
                data.extend_from_slice(&other[from..]);
            }
            7 if !tokens.is_empty() => {
                let at = pos(rng);
                let token = tokens[rng.random_range(0..tokens.len())].as_bytes();
                data.splice(at..at, token.iter().copied());
            }
            _ => {
                // A line or byte run repeated: deep nesting, long lists, huge numbers.
                let at = pos(rng);
                let b = data.get(at).copied().unwrap_or(b'9');
                let n = rng.random_range(1..=512);
                data.splice(at..at, std::iter::repeat_n(b, n));
            }
        }
    }
    data
}

fn env_or(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => {
            let v = v.trim();
            let parsed = match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => v.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
        }
        Err(_) => default,
    }
}

/// FNV-1a: a stable hash for file names and per-target seeds.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[test]
fn spec() {
    run(&Target {
        name: "spec",
        body: platter::fuzz::spec,
        seeds: &[
            "fuzz/corpus/spec",
            "coordinator/tests/spec-corpus/valid",
            "coordinator/tests/spec-corpus/invalid",
            "examples",
        ],
        iters: 20000,
        tokens: &[
            "name: x\n",
            "workload:\n",
            "matrix:\n",
            "include:\n",
            "exclude:\n",
            "${",
            "}",
            "$${",
            "repeat: ",
            "phases:\n",
            "before_each: ",
            "report:\n",
            "hosts: ",
            "devices: ",
            "storage: ",
            "&a ",
            "*a",
            "<<: ",
            "!!str ",
            "---\n",
            "...\n",
            "|\n",
            ">-\n",
            "? ",
            "\n  ",
            "\n    - ",
            "#",
        ],
    });
}

#[test]
fn wire() {
    run(&Target {
        name: "wire",
        body: platter::fuzz::wire,
        seeds: &["fuzz/corpus/wire"],
        iters: 50000,
        tokens: &[
            "\x00", "\x01", "\x7f", "\u{80}", "\u{ff}", "\x08", "\x10", "\x12", "\x1a", "\x22",
        ],
    });
}

#[test]
fn journal() {
    run(&Target {
        name: "journal",
        body: platter_agent::fuzz::journal,
        seeds: &["fuzz/corpus/journal"],
        iters: 20000,
        tokens: &[
            "{\"acked\":18446744073709551615}\n",
            "{\"next_seq\":18446744073709551615}\n",
            "{\"finished\":[\"p\"]}\n",
            "\"seq\":18446744073709551615",
            "\"seq\":0",
            "\"state\":\"started\"",
            "\"state\":\"failed\"",
            "\"step_index\":4294967295",
            "\n",
            "null",
        ],
    });
}

#[test]
fn fio() {
    run(&Target {
        name: "fio",
        body: platter_agent::fuzz::fio,
        seeds: &["fuzz/corpus/fio", "agent/tests/fixtures"],
        iters: 30000,
        tokens: TEXT_TOKENS,
    });
}

#[test]
fn bonnie() {
    run(&Target {
        name: "bonnie",
        body: platter_agent::fuzz::bonnie,
        seeds: &["fuzz/corpus/bonnie", "agent/tests/fixtures"],
        iters: 20000,
        tokens: TEXT_TOKENS,
    });
}

#[test]
fn smartctl() {
    run(&Target {
        name: "smartctl",
        body: platter_agent::fuzz::smartctl,
        seeds: &["fuzz/corpus/smartctl", "agent/tests/fixtures/smartctl"],
        iters: 20000,
        tokens: TEXT_TOKENS,
    });
}

#[test]
fn compilebench() {
    run(&Target {
        name: "compilebench",
        body: platter_agent::fuzz::compilebench,
        seeds: &["fuzz/corpus/compilebench", "agent/tests/fixtures"],
        iters: 20000,
        tokens: TEXT_TOKENS,
    });
}

/// Writes the wire target's seeds from the journal seed (a real `platter run`'s journal):
/// its plan as a `CoordinatorMessage`, one record of each kind as an `AgentMessage` (and a
/// step record with a missing sample), a hello with the provenance's devices, a heartbeat, an ack and a cancel. Run by hand:
/// `cargo test -p platter --test fuzz_short -- --ignored write_wire_seeds`.
#[test]
#[ignore = "writes fuzz/corpus/wire; run by hand"]
fn write_wire_seeds() {
    use platter_agent::testing::Entry;
    use platter_proto::model::RecordKind;
    use platter_proto::v1 as pb;
    use prost::Message;

    let root = repo_root();
    let journal = std::fs::read_to_string(root.join("fuzz/corpus/journal/run.jsonl")).unwrap();
    let out = root.join("fuzz/corpus/wire");
    std::fs::create_dir_all(&out).unwrap();
    let agent = |k| pb::AgentMessage { kind: Some(k) }.encode_to_vec();
    let coordinator = |k| pb::CoordinatorMessage { kind: Some(k) }.encode_to_vec();
    let mut seen = std::collections::BTreeSet::new();
    for line in journal.lines() {
        match serde_json::from_str::<Entry>(line).unwrap() {
            Entry::Plan(p) => {
                let bytes = coordinator(pb::coordinator_message::Kind::Plan((&p).into()));
                std::fs::write(out.join("plan.bin"), bytes).unwrap();
            }
            Entry::Record(r) => {
                let name = match &r.kind {
                    RecordKind::Step(e) => format!("record-step-{}", e.state.as_str()),
                    RecordKind::PlanAccepted { .. } => "record-plan-accepted".into(),
                    RecordKind::PlanFinished { .. } => "record-plan-finished".into(),
                    RecordKind::PlanRefused { .. } => "record-plan-refused".into(),
                    RecordKind::Provenance { facts, .. } => {
                        let hello = pb::Hello {
                            host: "vm".into(),
                            boot_id: "b".into(),
                            agent_version: "0.1.0".into(),
                            held_plan_ids: vec!["p".into()],
                            next_seq: 7,
                            acked_seq: 0,
                            devices: facts.devices.iter().map(|d| (&d.device).into()).collect(),
                            labels: [("rack".to_string(), "b12".to_string())].into(),
                            tools: Vec::new(),
                        };
                        let bytes = agent(pb::agent_message::Kind::Hello(hello));
                        std::fs::write(out.join("hello.bin"), bytes).unwrap();
                        "record-provenance".into()
                    }
                };
                if seen.insert(name.clone()) {
                    let bytes = agent(pb::agent_message::Kind::Record((&r).into()));
                    std::fs::write(out.join(format!("{name}.bin")), bytes).unwrap();
                }
                // A bonnie++ `+++++` field: a sample whose value is NaN, with the reason.
                let step = match &r.kind {
                    RecordKind::Step(e) if e.state.is_end() => Some(e),
                    _ => None,
                };
                if let Some(e) = step.filter(|_| seen.insert("missing".into())) {
                    let mut e = e.clone();
                    e.samples.push(platter_proto::model::Sample {
                        metric: "getc".into(),
                        value: f64::NAN,
                        unit: String::new(),
                        histogram: Vec::new(),
                        missing: "too fast to measure (+++++)".into(),
                    });
                    let r = platter_proto::model::Record {
                        seq: r.seq,
                        kind: RecordKind::Step(e),
                    };
                    let bytes = agent(pb::agent_message::Kind::Record((&r).into()));
                    std::fs::write(out.join("record-step-missing.bin"), bytes).unwrap();
                }
            }
            _ => {}
        }
    }
    let heartbeat = pb::Heartbeat {
        current_plan_id: "p".into(),
        current_step_index: 3,
        journal_fault: String::new(),
    };
    std::fs::write(
        out.join("heartbeat.bin"),
        agent(pb::agent_message::Kind::Heartbeat(heartbeat)),
    )
    .unwrap();
    std::fs::write(
        out.join("ack.bin"),
        coordinator(pb::coordinator_message::Kind::Ack(pb::Ack {
            seq: 42,
            refused: vec![pb::RefusedRecord {
                seq: 41,
                reason: "cannot be stored: UNIQUE constraint failed".into(),
            }],
        })),
    )
    .unwrap();
    std::fs::write(
        out.join("cancel.bin"),
        coordinator(pb::coordinator_message::Kind::Cancel(pb::Cancel {
            plan_id: "p".into(),
        })),
    )
    .unwrap();
}
