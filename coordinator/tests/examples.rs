//! The example campaigns stay valid, and the seed examples run as documented, on a loop
//! device given with `--set devices.path=…` as examples/README.md does (shortened: fewer
//! repetitions, smaller builds).

mod common;

use std::path::Path;

use assert_cmd::prelude::*;
use common::platter;
use common::Loop;
use predicates::prelude::*;

fn examples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// The example, shortened by `edits` (from, to).
fn adapted(dir: &Path, name: &str, edits: &[(&str, &str)]) -> std::path::PathBuf {
    let mut text = std::fs::read_to_string(examples().join(name)).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{name} no longer contains {from:?}");
        text = text.replace(from, to);
    }
    common::write(dir, name, &text)
}

#[test]
fn every_example_validates_and_lists_what_it_would_erase() {
    if !common::root_or_skip("it attaches a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let drive = Loop::new(tmp.path(), "drive.img", 320);
    let mut seen = 0;
    for entry in std::fs::read_dir(examples()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if !name.ends_with(".yaml") {
            continue;
        }
        seen += 1;
        let mut validate = platter();
        validate.args(["validate", "--local-host", "here"]);
        let on_a_drive = name.starts_with("seed-") || name.starts_with("ssd-");
        if on_a_drive {
            validate.args(["--set", &format!("devices.path={}", drive.path)]);
        }
        let assert = validate.arg(examples().join(&name)).assert().success();
        if name.starts_with("seed-") {
            assert.stdout(predicate::str::contains(format!(
                "{} (erases it)",
                drive.path
            )));
        } else if on_a_drive {
            assert.stdout(predicate::str::contains(format!(
                "purge {} with discard (erases it; the agent must also be started with --allow-purge",
                drive.path
            )))
            .stdout(predicate::str::contains(
                "Then up to 24 more round(s), each a plan of its own run before any other plan on the host",
            ));
        }
    }
    assert_eq!(seen, 8);
}

#[test]
fn the_adaptive_example_stops_each_cell_within_its_bounds() {
    let tmp = tempfile::tempdir().unwrap();
    let out = common::run_ok(
        platter()
            .current_dir(tmp.path())
            .args(["run", "--format", "json"])
            .arg(examples().join("adaptive-repeat.yaml")),
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["state"], "done");
    for cell in report["cells"].as_array().unwrap() {
        let wall = common::wall_of(cell);
        let n = wall["n"].as_u64().unwrap();
        assert!((6..=30).contains(&n), "{cell}");
        let stopped = cell["stopped"].as_str().unwrap();
        // Either it got narrow enough, or it ran all 30.
        assert!(
            stopped.starts_with(&format!("stopped after {n} repetition(s)"))
                || (n == 30 && stopped.starts_with("hit max (30 repetitions)")),
            "{stopped}"
        );
        assert_eq!(cell["warmup"][0]["values"].as_array().unwrap().len(), 1);
    }
}

#[test]
fn seed_001_fsync_latency_runs_on_a_loop_device() {
    if !common::root_or_skip("it attaches a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let drive = Loop::new(tmp.path(), "drive.img", 128);
    let f = adapted(
        tmp.path(),
        "seed-001-fsync-latency.yaml",
        &[("count: 1000", "count: 100"), ("repeat: 5", "repeat: 2")],
    );
    let out = platter()
        .current_dir(tmp.path())
        .args(["run", "--format", "csv", "--allow-device", &drive.path])
        .args(["--set", &format!("devices.path={}", drive.path)])
        .arg(&f)
        .assert()
        .success();
    let csv = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    // 8 cells (size × offset), each with its latency percentiles over 2 runs.
    let p99: Vec<&str> = csv
        .lines()
        .filter(|l| l.contains(",latency.p99,"))
        .collect();
    assert_eq!(p99.len(), 8, "{csv}");
    assert!(p99.iter().all(|l| l.contains(",s,2,0,")), "{p99:?}");
}

#[test]
fn seed_000_002_build_times_runs_on_a_drive_encrypted_and_a_ramdisk() {
    if !common::root_or_skip("it attaches a loop device")
        || !common::tools_or_skip(&[
            ("gocryptfs", "gocryptfs"),
            ("make", "make"),
            ("cc", "gcc"),
            ("ccache", "ccache"),
        ])
    {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // The builds run as a user of their own, who must reach the mount points in here.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let user = common::TestUser::new("pltbuild");
    let drive = Loop::new(tmp.path(), "drive.img", 256);
    let f = adapted(
        tmp.path(),
        "seed-000-002-build-times.yaml",
        &[
            (
                "sh examples/gen-c-project.sh $HOME/src 300",
                "sh {EXAMPLES}/gen-c-project.sh $HOME/src 30",
            ),
            ("user: builder", &format!("user: {}", user.0)),
            ("repeat: 3", "repeat: 2"),
        ],
    );
    let text = std::fs::read_to_string(&f)
        .unwrap()
        .replace("{EXAMPLES}", &examples().display().to_string());
    std::fs::write(&f, text).unwrap();
    let out = platter()
        .current_dir(tmp.path())
        .args(["run", "--format", "json", "--allow-device", &drive.path])
        .args(["--set", &format!("devices.path={}", drive.path)])
        .arg(&f)
        .assert()
        .success();
    let report: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 6);
    let wall = |drive: &str, cache: &str| -> f64 {
        let cell = cells
            .iter()
            .find(|c| c["params"]["drive"] == drive && c["params"]["ccache"] == cache)
            .unwrap();
        let m = common::wall_of(cell);
        // The warm-up build is stored and shown, and not among the counted two.
        assert_eq!(m["n"], 2, "{cell}");
        assert_eq!(cell["warmup"][0]["metric"], "wall", "{cell}");
        assert_eq!(cell["warmup"][0]["values"].as_array().unwrap().len(), 1);
        m["median"].as_f64().unwrap()
    };
    // A warm ccache turns 30 compilations into cache hits: the build is faster on each.
    for drive in ["plain", "encrypted", "ramdisk"] {
        let (warm, cold) = (wall(drive, "warm"), wall(drive, "cold"));
        assert!(warm < cold, "{drive}: warm {warm} cold {cold}");
    }
}

#[test]
fn the_pts_example_purges_fills_and_rounds_a_loop_device_only_with_allow_purge() {
    if !common::root_or_skip("it attaches a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let drive = Loop::new(tmp.path(), "drive.img", 64);
    // A mark at the start of the drive, which the purge must take away.
    std::fs::write(&drive.path, b"platter-was-here").unwrap();
    let example = examples().join("ssd-qualification-pts.yaml");
    let args = |purge: bool| {
        let mut c = platter();
        c.current_dir(tmp.path())
            .args(["run", "--format", "json", "--allow-device", &drive.path])
            .args(["--set", &format!("devices.path={}", drive.path)])
            .args(["--set", "runtime=1s", "--set", "bs=4k", "--set", "mix=0"]);
        if purge {
            c.arg("--allow-purge");
        }
        c.arg(&example);
        c
    };
    // Without --allow-purge the agent refuses the plan: nothing is erased.
    let refused = args(false).output().unwrap();
    assert!(!refused.status.success());
    let report: serde_json::Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert!(
        report["refused"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("--allow-purge"),
        "{report}"
    );
    let start = std::fs::read(&drive.path).unwrap();
    assert!(start.starts_with(b"platter-was-here"));

    let out = args(true).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    // The fill wrote the drive whole: the mark is gone, and so are the zeros.
    let data = std::fs::read(&drive.path).unwrap();
    assert!(!data.starts_with(b"platter-was-here"));
    assert!(data[..4096].iter().any(|b| *b != 0));
    let r = &report["rounds"][0];
    assert_eq!(r["tracked"], "bs=4k mix=0 runtime=1s", "{r}");
    let rounds = r["values"].as_array().unwrap().len();
    assert!((5..=25).contains(&rounds), "{r}");
    let state = report["drive_states"][0].as_str().unwrap_or_default();
    assert!(state.contains("purged with discard"), "{report}");
    assert!(state.contains("not a PTS purge"), "{state}");
    assert!(
        state.contains("preconditioned: 128.00 MiB written"),
        "{state}"
    );
}
