//! Tests of the spec module: the invalid corpus (each file names the error it
//! must produce), the valid corpus, and exact expansions and substitutions.

use std::path::{Path, PathBuf};

use super::*;

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/spec-corpus");

fn corpus(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(CORPUS).join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

/// `# expect: LINE:COLUMN PATH -- SUBSTRING`; PATH `(top)` is the root. A file
/// starts with one such line per mistake it holds, in file order, and must
/// produce exactly those.
struct Expect {
    line: usize,
    column: usize,
    path: String,
    substring: String,
}

fn expectations(file: &Path, text: &str) -> Vec<Expect> {
    let all: Vec<Expect> = text
        .lines()
        .map_while(|l| l.strip_prefix("# expect: "))
        .map(|rest| expectation(file, rest))
        .collect();
    assert!(
        !all.is_empty(),
        "{}: first line is not `# expect: …`",
        file.display()
    );
    all
}

fn expectation(file: &Path, rest: &str) -> Expect {
    let (head, substring) = rest
        .split_once(" -- ")
        .unwrap_or_else(|| panic!("{}: no ` -- ` in the expect line", file.display()));
    let (pos, path) = head
        .split_once(' ')
        .unwrap_or_else(|| panic!("{}: no path in the expect line", file.display()));
    let (line, column) = pos
        .split_once(':')
        .and_then(|(l, c)| Some((l.parse().ok()?, c.parse().ok()?)))
        .unwrap_or_else(|| panic!("{}: bad LINE:COLUMN `{pos}`", file.display()));
    Expect {
        line,
        column,
        path: if path == "(top)" {
            String::new()
        } else {
            path.to_string()
        },
        substring: substring.to_string(),
    }
}

#[test]
fn every_invalid_file_fails_where_and_how_it_says() {
    let files = corpus("invalid");
    assert!(
        files.len() >= 25,
        "only {} invalid corpus files",
        files.len()
    );
    let mut failures = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("corpus file is readable");
        let wants = expectations(file, &text);
        let name = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let got = match parse(&name, &text) {
            Ok(_) => {
                failures.push(format!("{name}: parsed, but should fail"));
                continue;
            }
            Err(e) => e,
        };
        if got.len() != wants.len() {
            failures.push(format!(
                "{name}: want {} mistake(s), got {}:\n{got}",
                wants.len(),
                got.len()
            ));
            continue;
        }
        for (want, e) in wants.iter().zip(got.all()) {
            let all = format!("{}\n{}", e.message, e.hint.clone().unwrap_or_default());
            if e.file != name
                || e.line != want.line
                || e.column != want.column
                || e.path != want.path
                || !all.contains(&want.substring)
            {
                failures.push(format!(
                    "{name}: want {}:{} `{}` containing {:?}\n    got  {e}",
                    want.line, want.column, want.path, want.substring
                ));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn every_valid_file_parses() {
    let files = corpus("valid");
    assert!(files.len() >= 4, "only {} valid corpus files", files.len());
    for file in &files {
        if let Err(e) = load(file) {
            panic!("{e}");
        }
    }
}

fn ok(text: &str) -> Campaign {
    parse("test.yaml", text).unwrap_or_else(|e| panic!("{e}"))
}

/// The first mistake in the file.
fn err(text: &str) -> SpecError {
    errs(text).first().clone()
}

/// Every mistake in the file.
fn errs(text: &str) -> SpecErrors {
    match parse("test.yaml", text) {
        Ok(c) => panic!("parsed, but should fail: {c:?}"),
        Err(e) => e,
    }
}

/// Each cell's parameters as `k=v` pairs, for compact expected values.
fn cells(c: &Campaign) -> Vec<String> {
    c.cells
        .iter()
        .map(|cell| {
            cell.params
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn run(cell: &Cell) -> &str {
    let Workload::Command(c) = &cell.workload else {
        panic!("not a command workload")
    };
    &c.run
}

#[test]
fn defaults() {
    let c = ok("name: min\nworkload: { command: { run: \"true\" } }\n");
    assert_eq!(
        c,
        Campaign {
            name: "min".into(),
            series: "min".into(),
            track: Default::default(),
            description: None,
            hosts: vec!["local".into()],
            host_labels: None,
            params: vec![],
            cells: vec![Cell {
                params: IndexMap::new(),
                workload: Workload::Command(CommandWorkload {
                    setup: None,
                    clean: None,
                    run: "true".into(),
                    user: None,
                    home: None,
                }),
                before_each: vec![],
                storage: None,
            }],
            repeat: Repeat::fixed(3),
            warmup: 0,
            order: Order::Interleaved,
            on_failure: OnFailure::Continue,
            devices: None,
            report: Default::default(),
            max_steps_per_plan: MAX_STEPS_PER_PLAN,
            max_total_steps: MAX_TOTAL_STEPS,
            prepare: None,
        }
    );
}

#[test]
fn every_field() {
    let c = ok(r#"
name: fsync-sizes
description: free text
hosts: { names: [rc66, rcmonster] }
matrix:
  bs: [4k, 64k]
workload:
  command:
    setup: "mkdir -p /tmp/x"
    clean: "rm -f /tmp/x/f"
    run: "dd bs=${bs}"
phases:
  before_each: [clean, sync, { fstrim: /mnt }, drop_caches, reboot, { command: "echo ${bs}" }]
repeat: 5
order: shuffled
seed: 42
on_failure: abort
"#);
    assert_eq!(c.description.as_deref(), Some("free text"));
    assert_eq!(c.hosts, ["rc66", "rcmonster"]);
    assert_eq!(c.repeat, Repeat::fixed(5));
    assert_eq!(c.order, Order::Shuffled { seed: 42 });
    assert_eq!(c.on_failure, OnFailure::Abort);
    assert_eq!(c.params, ["bs"]);
    assert_eq!(
        c.cells[1].workload,
        Workload::Command(CommandWorkload {
            setup: Some("mkdir -p /tmp/x".into()),
            clean: Some("rm -f /tmp/x/f".into()),
            run: "dd bs=64k".into(),
            user: None,
            home: None,
        })
    );
    assert_eq!(
        c.cells[1].before_each,
        [
            Phase::Clean,
            Phase::Sync,
            Phase::Fstrim("/mnt".into()),
            Phase::DropCaches,
            Phase::Reboot,
            Phase::Command("echo 64k".into()),
        ]
    );
}

#[test]
fn a_command_runs_as_the_user_it_names_with_its_home_per_cell() {
    let c = ok(r#"
name: as-user
matrix:
  who: [builder, tester]
storage: { fs: tmpfs }
workload:
  command:
    user: "${who}"
    home: "${mount}/home/${who}"
    run: make
"#);
    let users: Vec<_> = c
        .cells
        .iter()
        .map(|cell| match &cell.workload {
            Workload::Command(w) => (w.user.clone().unwrap(), w.home.clone().unwrap()),
            w => panic!("{w:?}"),
        })
        .collect();
    assert_eq!(
        users,
        [
            ("builder".to_string(), "${mount}/home/builder".to_string()),
            ("tester".to_string(), "${mount}/home/tester".to_string()),
        ]
    );
    let e = err("name: x\nworkload: { command: { run: make, user: builder, home: home/b } }\n");
    assert!(e.to_string().contains("is not an absolute path"), "{e}");
}

#[test]
fn shuffled_without_seed_uses_zero() {
    let c = ok("name: s\nworkload: { command: { run: x } }\norder: shuffled\n");
    assert_eq!(c.order, Order::Shuffled { seed: 0 });
    let c = ok("name: s\nworkload: { command: { run: x } }\norder: sequential\n");
    assert_eq!(c.order, Order::Sequential);
}

#[test]
fn product_varies_the_first_key_slowest() {
    let c = ok(r#"
name: p
matrix:
  a: [1, 2]
  b: [x, y, z]
workload: { command: { run: "${a}${b}" } }
"#);
    assert_eq!(
        cells(&c),
        ["a=1 b=x", "a=1 b=y", "a=1 b=z", "a=2 b=x", "a=2 b=y", "a=2 b=z"]
    );
    let runs: Vec<&str> = c.cells.iter().map(run).collect();
    assert_eq!(runs, ["1x", "1y", "1z", "2x", "2y", "2z"]);
}

#[test]
fn values_are_kept_as_written() {
    let c = ok(r#"
name: v
matrix:
  v: [4k, 1024, 0.50, true, on, "quoted", 0x10, '']
workload: { command: { run: "echo [${v}]" } }
"#);
    let runs: Vec<&str> = c.cells.iter().map(run).collect();
    assert_eq!(
        runs,
        [
            "echo [4k]",
            "echo [1024]",
            "echo [0.50]",
            "echo [true]",
            "echo [on]",
            "echo [quoted]",
            "echo [0x10]",
            "echo []",
        ]
    );
}

/// The example from GitHub's documentation of `jobs.<job_id>.strategy.matrix.include`.
#[test]
fn include_follows_the_github_actions_example() {
    let c = ok(r#"
name: gha
matrix:
  fruit: [apple, pear]
  animal: [cat, dog]
  include:
    - color: green
    - color: pink
      animal: cat
    - fruit: apple
      shape: circle
    - fruit: banana
    - fruit: banana
      animal: cat
  labels: [animal, color, shape]
workload: { command: { run: "echo ${fruit}" } }
"#);
    assert_eq!(c.params, ["fruit", "animal", "color", "shape"]);
    assert_eq!(
        cells(&c),
        [
            "fruit=apple animal=cat color=pink shape=circle",
            "fruit=apple animal=dog color=green shape=circle",
            "fruit=pear animal=cat color=pink",
            "fruit=pear animal=dog color=green",
            "fruit=banana",
            "fruit=banana animal=cat",
        ]
    );
}

/// GitHub's exclude example: an entry removes every combination matching all
/// of its pairs, including partial matches.
#[test]
fn exclude_removes_partial_matches() {
    let c = ok(r#"
name: ex
matrix:
  os: [macos, windows]
  version: [12, 14, 16]
  environment: [staging, production]
  exclude:
    - os: macos
      version: 12
      environment: production
    - os: windows
      version: 16
workload: { command: { run: "echo ${os} ${version} ${environment}" } }
"#);
    assert_eq!(c.cells.len(), 12 - 1 - 2);
    let all = cells(&c);
    assert!(!all.contains(&"os=macos version=12 environment=production".to_string()));
    assert!(!all.iter().any(|c| c.starts_with("os=windows version=16")));
    assert_eq!(all[0], "os=macos version=12 environment=staging");
}

#[test]
fn exclude_then_include() {
    let c = ok(r#"
name: ei
matrix:
  bs: [4k, 64k]
  sync: [none, fdatasync]
  exclude: [ { bs: 4k, sync: none } ]
  include: [ { bs: 1m, sync: none, extra: x } ]
  labels: [extra]
workload: { command: { run: "dd bs=${bs} conv=${sync}" } }
"#);
    assert_eq!(
        cells(&c),
        [
            "bs=4k sync=fdatasync",
            "bs=64k sync=none",
            "bs=64k sync=fdatasync",
            "bs=1m sync=none extra=x",
        ]
    );
}

#[test]
fn include_only_matrix_makes_one_cell_per_entry() {
    let c = ok(r#"
name: io
matrix:
  include:
    - { dev: sda, fs: ext4 }
    - { dev: sdb }
  labels: [fs]
workload: { command: { run: "echo ${dev}" } }
"#);
    assert_eq!(c.params, ["dev", "fs"]);
    assert_eq!(cells(&c), ["dev=sda fs=ext4", "dev=sdb"]);
}

#[test]
fn include_may_overwrite_added_values_but_not_original_ones() {
    let c = ok(r#"
name: ow
matrix:
  a: [1, 2]
  include:
    - { tag: base }
    - { a: 2, tag: two }
    - { a: 3, tag: three }
workload: { command: { run: "echo ${a} ${tag}" } }
"#);
    assert_eq!(cells(&c), ["a=1 tag=base", "a=2 tag=two", "a=3 tag=three"]);
    let runs: Vec<&str> = c.cells.iter().map(run).collect();
    assert_eq!(runs, ["echo 1 base", "echo 2 two", "echo 3 three"]);
}

#[test]
fn substitution_escapes_and_reserved_names() {
    let c = ok(r#"
name: subst
matrix:
  bs: [4k]
workload:
  command:
    run: "dd bs=${bs} of=${mount}/f; echo $${HOME} $HOME $$ ${cell} ${repetition} ${host} $${bs}"
phases:
  before_each: [ { fstrim: "${mount}" }, { command: "echo ${bs}$" } ]
"#);
    assert_eq!(
        run(&c.cells[0]),
        "dd bs=4k of=${mount}/f; echo ${HOME} $HOME $$ ${cell} ${repetition} ${host} ${bs}"
    );
    assert_eq!(
        c.cells[0].before_each,
        [
            Phase::Fstrim("${mount}".into()),
            Phase::Command("echo 4k$".into())
        ]
    );
}

#[test]
fn substitution_applies_to_setup_clean_and_fstrim() {
    let c = ok(r#"
name: all-strings
matrix:
  dir: [/mnt/a, /mnt/b]
workload:
  command:
    setup: "mkdir -p ${dir}/x"
    clean: "rm -rf ${dir}/x"
    run: "touch ${dir}/x/f"
phases:
  before_each: [clean, { fstrim: "${dir}" }]
"#);
    let Workload::Command(w) = &c.cells[1].workload else {
        panic!("not a command workload")
    };
    assert_eq!(w.setup.as_deref(), Some("mkdir -p /mnt/b/x"));
    assert_eq!(w.clean.as_deref(), Some("rm -rf /mnt/b/x"));
    assert_eq!(w.run, "touch /mnt/b/x/f");
    assert_eq!(c.cells[1].before_each[1], Phase::Fstrim("/mnt/b".into()));
}

#[test]
fn yaml_1_2_booleans_are_strings_and_commands_keep_their_text() {
    let c = ok("name: on\nworkload: { command: { run: true } }\non_failure: continue\n");
    assert_eq!(c.name, "on");
    assert_eq!(run(&c.cells[0]), "true");
}

#[test]
fn error_display_has_position_path_and_hint() {
    let e = err("name: x\nworkload: { command: { run: \"true\" } }\nrepet: 5\n");
    assert_eq!(
        e.to_string(),
        "test.yaml:3:1: repet: unknown key `repet`\n  hint: did you mean `repeat`?"
    );
    let e = err("- a\n");
    assert!(e.to_string().starts_with("test.yaml:1:1: (top): "), "{e}");
}

#[test]
fn load_reports_unreadable_files_at_line_zero() {
    let path = Path::new(CORPUS).join("does-not-exist.yaml");
    let e = load(&path).unwrap_err();
    assert_eq!(e.len(), 1);
    let e = e.first();
    assert_eq!((e.line, e.column), (0, 0));
    assert!(e.file.ends_with("does-not-exist.yaml"));
    assert!(e.message.contains("cannot read"), "{e}");
}

#[test]
fn repeat_bounds() {
    let base = "name: r\nworkload: { command: { run: x } }\nrepeat: ";
    assert_eq!(ok(&format!("{base}1\n")).repeat, Repeat::fixed(1));
    assert_eq!(ok(&format!("{base}10000\n")).repeat, Repeat::fixed(10000));
    let e = err(&format!("{base}10001\n"));
    assert_eq!((e.line, e.column, e.path.as_str()), (3, 9, "repeat"));
}

#[test]
fn too_many_cells_is_an_error_not_a_hang() {
    let values: Vec<String> = (0..100).map(|i| i.to_string()).collect();
    let list = values.join(", ");
    let e = err(&format!(
        "name: big\nmatrix:\n  a: [{list}]\n  b: [{list}]\n  c: [{list}]\n  d: [{list}]\nworkload: {{ command: {{ run: x }} }}\n"
    ));
    assert_eq!((e.line, e.column, e.path.as_str()), (2, 1, "matrix"));
}

#[test]
fn aliases_resolve_to_their_anchor() {
    let c = ok(r#"
name: alias
matrix:
  a: &vals [1, 2]
  b: *vals
workload: { command: { run: "${a}${b}" } }
"#);
    assert_eq!(c.cells.len(), 4);
}

#[test]
fn errors_report_the_first_problem_in_the_file() {
    // Both `repeat` and `order` are wrong; `repeat` is written first.
    let e = err("name: x\nworkload: { command: { run: x } }\nrepeat: 0\norder: nope\n");
    assert_eq!(e.path, "repeat");
}

#[test]
fn until_a_merged_percentile_means_each_runs_own() {
    let c = parse(
        "t.yaml",
        "name: x\nworkload: { fsync: { path: /tmp/f } }\n\
         repeat: { min: 6, max: 20, until: { metric: latency.p99, ci: 5% } }\n",
    )
    .unwrap();
    assert!(
        c.repetitions_text()
            .contains("the 95% interval of the latency.p99 per run median"),
        "{}",
        c.repetitions_text()
    );
}

#[test]
fn repeat_as_a_mapping_with_equal_bounds_is_a_plain_number() {
    let c = parse(
        "t.yaml",
        "name: x\nworkload: { command: { run: x } }\nrepeat: { min: 4, max: 4 }\n",
    )
    .unwrap();
    assert_eq!(c.repeat, Repeat::fixed(4));
    assert!(!c.repeat.is_adaptive());
    // The worst case counts against the plan limit: 20 cells × (10000 + 5) × 1 step.
    let e = errs(
        "name: x\nmatrix: { a: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20] }\nworkload: { command: { run: \"x ${a}\" } }\nwarmup: 5\n\
         repeat: { min: 5, max: 10000, until: { metric: wall, ci: 1% } }\n",
    );
    assert!(
        e.to_string().contains("20 cell(s) × 10005 repetition(s)"),
        "{e}"
    );
}

#[test]
fn a_pivot_of_several_metrics_lays_them_out_as_columns_unless_placed() {
    let base =
        "name: x\nworkload: { bonnie: { directory: \"/mnt/${fs}\" } }\nmatrix: { fs: [ext4, btrfs] }\n";
    let c = parse(
        "t.yaml",
        &format!("{base}report: {{ pivot: {{ rows: [fs], columns: [], metric: [put_block, seeks] }} }}\n"),
    );
    // `columns: []` is still a missing key.
    assert!(c.is_err());
    let c = parse(
        "t.yaml",
        &format!("{base}report: {{ pivot: {{ rows: [fs], columns: [host], metric: [put_block, seeks] }} }}\n"),
    )
    .unwrap();
    let p = c.report.pivot.unwrap();
    assert_eq!(p.all_metrics(), ["put_block", "seeks"]);
    let names: Vec<&str> = p.columns.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["host", "metric"]);
    // Each listed metric is checked against what the workload produces.
    let e = errs(&format!(
        "{base}report: {{ pivot: {{ rows: [metric], columns: [fs], metric: [put_block, seekz] }} }}\n"
    ));
    assert!(e.to_string().contains("did you mean `seeks`"), "{e}");
}

#[test]
fn valid_corpus_expands_as_documented() {
    let c =
        load(&Path::new(CORPUS).join("valid/fsync-sizes.yaml")).unwrap_or_else(|e| panic!("{e}"));
    // 4 sizes x 2 offsets x 2 syncs, minus the 2 (size 1, offset 512)
    // cells, plus the include entry that matches no original combination.
    assert_eq!(c.cells.len(), 15);
    assert_eq!(c.params, ["size", "offset", "sync", "note"]);
    assert_eq!(c.hosts, ["rc66", "rcmonster", "flygecko"]);
    assert_eq!(c.order, Order::Shuffled { seed: 20140602 });
    let last = c.cells.last().map(|c| c.params.clone()).unwrap_or_default();
    assert_eq!(last.get("note").map(String::as_str), Some("large"));
    assert_eq!(
        run(&c.cells[0]),
        "dd if=/dev/zero of=${mount}/fsync/f bs=1 seek=0 oflag=seek_bytes count=1 conv=fsync status=none"
    );

    let c =
        load(&Path::new(CORPUS).join("valid/yaml-features.yaml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.cells.len(), 2 * 3 * 3);
    assert_eq!(run(&c.cells[0]), "echo on 0.5 0.5\n");
    assert_eq!(c.repeat, Repeat::fixed(10000));
    assert_eq!(c.warmup, 0);

    let c = load(&Path::new(CORPUS).join("valid/adaptive-warmup.yaml"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.warmup, 2);
    assert_eq!(
        c.repeat,
        Repeat {
            min: 5,
            max: 50,
            until: Some(Until {
                metric: "wall".into(),
                ci_pct: 2.0
            })
        }
    );
    assert!(c.repeat.is_adaptive());
    assert_eq!(
        c.repetitions_text(),
        "5–50 repetition(s) (until the 95% interval of the wall median is within ±2%), after 2 warm-up run(s)"
    );

    let c = load(&Path::new(CORPUS).join("valid/github-include.yaml"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        run(&c.cells[4]),
        "echo \"banana on ${HOST:-${host}}, repetition ${repetition}\""
    );
    assert_eq!(
        c.cells[4].before_each[1],
        Phase::Command("logger platter banana ${cell}".into())
    );
}

#[test]
fn empty_list_items_point_at_their_dash() {
    let e = err("name: x\nhosts:\n  names:\n  - rc66\n  -\nworkload: { command: { run: x } }\n");
    assert_eq!(
        (e.line, e.column, e.path.as_str()),
        (5, 3, "hosts.names[1]")
    );
    // An indentless list (the `-` at the key's column) that should be a mapping.
    let e = err("name: x\nworkload:\n- run: x\n");
    assert_eq!((e.line, e.column, e.path.as_str()), (3, 1, "workload"));
}

#[test]
fn a_matrix_without_parameters_is_rejected() {
    for matrix in ["{ include: [] }", "{ exclude: [] }"] {
        let e = err(&format!(
            "name: x\nworkload: {{ command: {{ run: x }} }}\nmatrix: {matrix}\n"
        ));
        assert_eq!((e.line, e.column, e.path.as_str()), (3, 1, "matrix"), "{e}");
        assert!(e.message.contains("no parameters"), "{e}");
    }
}

#[test]
fn exclude_removing_everything_points_at_exclude() {
    let e = err(
        "name: x\nworkload: { command: { run: x } }\nmatrix:\n  a: [1]\n  exclude: [ { a: 1 } ]\n",
    );
    assert_eq!(
        (e.line, e.column, e.path.as_str()),
        (5, 3, "matrix.exclude"),
        "{e}"
    );
}

#[test]
fn byte_order_mark_and_crlf_are_accepted() {
    let c = ok("\u{feff}name: bom\r\nworkload:\r\n  command:\r\n    run: x\r\n");
    assert_eq!(c.name, "bom");
    let e = err("\u{feff}name: x\r\nworkload: { command: { run: x } }\r\nrepeat: 0\r\n");
    assert_eq!((e.line, e.column), (3, 9));
}

#[test]
fn commands_may_be_any_scalar_but_names_must_be_strings() {
    let c = ok("name: \"123\"\nworkload: { command: { run: 42 } }\n");
    assert_eq!((c.name.as_str(), run(&c.cells[0])), ("123", "42"));
    let e = err("name: x\nworkload: { command: { run: } }\n");
    assert_eq!(e.path, "workload.command.run");
    assert!(e.message.contains("found nothing"), "{e}");
}

#[test]
fn hosts_by_label_are_chosen_from_the_agents_at_submission() {
    use std::collections::BTreeMap;
    let mut c = ok("name: x\nhosts: { names: [rc66], labels: { rack: b12 } }\nworkload: { command: { run: \"true\" } }\n");
    let agent = |h: &str, l: &[(&str, &str)]| {
        (
            h.to_string(),
            l.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        )
    };
    let agents = vec![
        agent("flygecko", &[("rack", "b12"), ("role", "lab")]),
        agent("rc66", &[("rack", "b12")]),
        agent("rcmonster", &[("rack", "a01")]),
    ];
    c.select_hosts(&agents).unwrap();
    assert_eq!(c.hosts, ["rc66", "flygecko"]);
    let mut c =
        ok("name: x\nhosts:\n  labels: { rack: c3 }\nworkload: { command: { run: \"true\" } }\n");
    assert!(c.hosts.is_empty());
    let e = c.select_hosts(&agents).unwrap_err();
    assert!(e.starts_with("3:11: hosts.labels: no agent has the labels rack=c3 (known agents: flygecko [rack=b12 role=lab]"), "{e}");
    let e = err("name: x\nhosts: { labels: {} }\nworkload: { command: { run: \"true\" } }\n");
    assert_eq!((e.line, e.path.as_str()), (2, "hosts.labels"));
}

#[test]
fn every_mistake_is_reported_in_file_order_and_the_list_is_capped() {
    // Sixty unknown keys, the first at line 3: each is reported, in order.
    let mut text = String::from("name: x\nworkload: { command: { run: \"true\" } }\n");
    for i in 0..60 {
        text.push_str(&format!("unknown{i:02}: 1\n"));
    }
    let e = errs(&text);
    assert_eq!(e.len(), 60);
    let lines: Vec<usize> = e.all().iter().map(|e| e.line).collect();
    assert_eq!(lines, (3..63).collect::<Vec<_>>());
    let shown = e.to_string();
    assert_eq!(
        shown.matches("error: test.yaml:").count(),
        MAX_SHOWN,
        "{shown}"
    );
    assert!(
        shown
            .ends_with("error: … and 10 more mistakes in test.yaml (the first 50 of 60 are shown)"),
        "{shown}"
    );
    // A byte budget (a gRPC status) shows fewer, never none.
    let short = e.render(MAX_SHOWN, 10);
    assert_eq!(short.matches("error: test.yaml:").count(), 1, "{short}");
    assert!(short.contains("and 59 more"), "{short}");
}

#[test]
fn templates_and_report_keys_are_judged_together_once_the_shape_is_right() {
    let e = errs(
        "name: x\nmatrix: { bs: [4k] }\nworkload: { command: { run: \"dd bs=${bz}\" } }\n\
         phases: { before_each: [{ command: \"echo ${nope}\" }] }\n\
         report: { baseline: { fs: ext4 } }\n",
    );
    let at: Vec<(usize, &str)> = e.all().iter().map(|e| (e.line, e.path.as_str())).collect();
    assert_eq!(
        at,
        [
            (3, "workload.command.run"),
            (4, "phases.before_each[0].command"),
            (5, "report.baseline.fs")
        ],
        "{e}"
    );
}

#[test]
fn a_file_is_read_only_up_to_its_limit_even_without_a_known_size() {
    // /dev/zero has no size and no end: reading stops one byte past the limit.
    let e = read_file(Path::new("/dev/zero"), 16).unwrap_err();
    let e = e.first();
    assert_eq!((e.line, e.column), (0, 0));
    assert!(e.message.starts_with("the file is more than 16 bytes; a campaign file may be at most 16 bytes (--max-file-size): "), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("latin1.yaml");
    std::fs::write(&path, b"name: caf\xe9\n").unwrap();
    let e = read_file(&path, 1024).unwrap_err();
    assert!(
        e.first()
            .message
            .contains("not UTF-8 text (invalid byte at offset 9)"),
        "{e}"
    );
}

#[test]
fn a_stored_campaign_with_a_parameter_used_nowhere_still_reads() {
    // Stored by a platter without the rule: its report must read as it did.
    let text = "name: x\nmatrix: { fs: [ext4, xfs] }\nworkload: { command: { run: \"true\" } }\n";
    let e = errs(text);
    assert_eq!((e.first().line, e.first().column), (2, 11), "{e}");
    let c = parse_with("t.yaml", text, &Limits::NONE).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cells(&c), ["fs=ext4", "fs=xfs"]);
}

#[test]
fn a_percentage_needs_its_sign_except_in_a_stored_campaign() {
    let text = |ci: &str| {
        format!(
            "name: x\nworkload: {{ command: {{ run: \"true\" }} }}\n\
             repeat: {{ min: 2, max: 9, until: {{ metric: wall, ci: {ci} }} }}\n"
        )
    };
    let ci = |c: &Campaign| c.repeat.until.as_ref().map(|u| u.ci_pct);
    assert_eq!(ci(&ok(&text("2%"))), Some(2.0));
    assert_eq!(ci(&ok(&text("\"0.5 %\""))), Some(0.5));
    let e = err(&text("2"));
    assert_eq!(e.hint.as_deref(), Some("did you mean `2%`?"), "{e}");
    let e = err(&text("0.05"));
    assert!(
        e.hint.as_deref().unwrap().starts_with("did you mean `5%`?"),
        "{e}"
    );
    let e = err(&text("0.07"));
    assert!(
        e.hint.as_deref().unwrap().starts_with("did you mean `7%`?"),
        "{e}"
    );
    // Out of range says so, bare or not.
    assert!(err(&text("150")).message.contains("above 0 and below 100"));
    // A platter that took a bare number as a percentage stored this; it ran as ±2%.
    let stored = parse_with("t.yaml", &text("2"), &Limits::NONE).unwrap();
    assert_eq!(ci(&stored), Some(2.0));
}

#[test]
fn series_and_track_name_a_series_and_its_threshold() {
    let c = ok("name: fsync-rc66\nseries: nightly-fsync\ntrack: { threshold: 5% }\nworkload: { command: { run: \"true\" } }\n");
    assert_eq!(
        (c.series.as_str(), c.track.threshold_pct),
        ("nightly-fsync", Some(5.0))
    );
    let c = ok("name: a\ntrack: { against: last-3 }\nworkload: { command: { run: \"true\" } }\n");
    assert_eq!(c.track.against, Some(3));
    let e = errs("name: a\ntrack: { against: last-0 }\nworkload: { command: { run: \"true\" } }\n")
        .to_string();
    assert!(
        e.contains("`last-0` is not `last` or `last-N` (N from 1 to 30)"),
        "{e}"
    );
    let e = errs("name: a\nseries: Nightly Fsync\nworkload: { command: { run: \"true\" } }\n");
    let e = e.to_string();
    assert!(
        e.contains("test.yaml:2:9") && e.contains("`Nightly Fsync` is not a valid series name"),
        "{e}"
    );
    let e = errs("name: a\ntrack: { treshold: 5% }\nworkload: { command: { run: \"true\" } }\n");
    let e = e.to_string();
    assert!(e.contains("did you mean `threshold`"), "{e}");
    let e = errs("name: a\ntrack: { threshold: 0.05 }\nworkload: { command: { run: \"true\" } }\n");
    let e = e.to_string();
    assert!(e.contains("track.threshold"), "{e}");
}

#[test]
fn health_limits_since_the_baseline_and_an_ignore_list_sit_beside_the_attributes() {
    use super::health::{Bound, Since};
    let c = ok("name: a\nworkload: { command: { run: \"true\" } }\n\
         report:\n  qualify:\n    health:\n\
         \x20     reallocated_sectors: { max_increase: 3 }\n\
         \x20     since_baseline:\n\
         \x20       reallocated_sectors: { max_increase: 8 }\n\
         \x20       data_written: { max_increase: 2TB }\n\
         \x20     ignore:\n\
         \x20       - { model: \"KINGSTON SA400*\", attributes: [temperature, crc_errors] }\n");
    let h = &c.report.health;
    let limits: Vec<(&str, Bound, f64, Since)> = h
        .limits
        .iter()
        .map(|l| (l.attribute.name, l.bound, l.value, l.since))
        .collect();
    assert_eq!(
        limits,
        [
            ("reallocated_sectors", Bound::MaxIncrease, 3.0, Since::Run),
            (
                "reallocated_sectors",
                Bound::MaxIncrease,
                8.0,
                Since::Baseline
            ),
            ("data_written", Bound::MaxIncrease, 2e12, Since::Baseline),
        ]
    );
    assert!(h.needs_baseline());
    assert_eq!(h.ignore.len(), 1);
    assert_eq!(h.ignore[0].model, "KINGSTON SA400*");
    let names: Vec<&str> = h.ignore[0].attributes.iter().map(|a| a.name).collect();
    assert_eq!(names, ["temperature", "crc_errors"]);
    assert_eq!(
        h.limits[1].text(),
        "health reallocated_sectors since baseline max_increase 8"
    );
    // Without since_baseline no report reads a baseline.
    let c = ok("name: a\nworkload: { command: { run: \"true\" } }\n\
         report: { qualify: { health: { media_errors: { max_increase: 0 } } } }\n");
    assert!(!c.report.health.needs_baseline());
}

#[test]
fn health_grammar_mistakes_say_where_and_what_instead() {
    let head =
        "name: a\nworkload: { command: { run: \"true\" } }\nreport:\n  qualify:\n    health:\n";
    let at = |body: &str| -> Vec<(usize, usize, String, String)> {
        errs(&format!("{head}{body}"))
            .all()
            .iter()
            .map(|e| {
                (
                    e.line,
                    e.column,
                    e.path.clone(),
                    format!("{} {}", e.message, e.hint.clone().unwrap_or_default()),
                )
            })
            .collect()
    };
    // `max` and `min` bound the value now: not counted since the baseline.
    let e = at("      since_baseline: { temperature: { max: 70C } }\n");
    assert_eq!((e[0].0, e[0].1), (6, 40), "{e:?}");
    assert_eq!(
        e[0].2,
        "report.qualify.health.since_baseline.temperature.max"
    );
    assert!(
        e[0].3
            .contains("only `max_increase` counts since the baseline")
            && e[0].3.contains("beside `since_baseline`"),
        "{e:?}"
    );
    // A misspelt attribute under since_baseline, and since_baseline itself misspelt.
    let e = at("      since_baseline: { realocated_sectors: { max_increase: 8 } }\n");
    assert_eq!(
        e[0].2,
        "report.qualify.health.since_baseline.realocated_sectors"
    );
    assert!(
        e[0].3.contains("did you mean `reallocated_sectors`"),
        "{e:?}"
    );
    let e = at("      since_basline: { reallocated_sectors: { max_increase: 8 } }\n");
    assert!(e[0].3.contains("did you mean `since_baseline`"), "{e:?}");
    // An ignore entry: an unknown attribute, a pattern that is none, a missing key.
    let e = at("      ignore:\n        - { model: \"KINGSTON*\", attributes: [temprature] }\n        - { model: \"[KINGSTON\", attributes: [temperature] }\n        - { attributes: [temperature] }\n");
    let where_: Vec<(usize, usize, &str)> = e.iter().map(|x| (x.0, x.1, x.2.as_str())).collect();
    assert_eq!(
        where_,
        [
            (7, 46, "report.qualify.health.ignore[0].attributes[0]"),
            (8, 20, "report.qualify.health.ignore[1].model"),
            (9, 11, "report.qualify.health.ignore[2].model"),
        ],
        "{e:?}"
    );
    assert!(
        e[0].3.contains("unknown health attribute `temprature`")
            && e[0].3.contains("did you mean `temperature`"),
        "{e:?}"
    );
    assert!(e[1].3.contains("`[KINGSTON` is not a pattern"), "{e:?}");
    assert!(e[2].3.contains("missing required key `model`"), "{e:?}");
    let e = at("      ignore: { model: \"X\" }\n");
    assert!(e[0].3.contains("expected a list like"), "{e:?}");
}
