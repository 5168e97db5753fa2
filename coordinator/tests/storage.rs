//! Storage configurations on real (loop) devices through `platter run`, as root: every
//! filesystem set up, used and torn down, leaving no mount behind; and every reason a
//! device is refused. The drives are loop devices on image files in a temporary
//! directory, never the machine's disks.

mod common;

use std::path::{Path, PathBuf};

use common::Loop;
use std::process::Command as Process;

use assert_cmd::prelude::*;
use common::platter;
use predicates::prelude::*;

#[test]
fn every_filesystem_is_set_up_used_and_torn_down() {
    if !common::root_or_skip("it formats loop devices")
        || !common::tools_or_skip(&[
            ("mkfs.ext4", "e2fsprogs"),
            ("mkfs.xfs", "xfsprogs"),
            ("mkfs.btrfs", "btrfs-progs"),
        ])
    {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // xfs needs at least 300 MiB.
    let drive = Loop::new(tmp.path(), "drive.img", 320);
    let seen = tmp.path().join("fstypes");
    let yaml = format!(
        r#"
name: filesystems
devices: {{ path: {dev} }}
matrix:
  fs: [ext2, ext4, xfs, btrfs]
storage: {{ fs: "${{fs}}", mount_options: [noatime] }}
workload:
  fsync: {{ path: "${{mount}}/fsync.dat", size: 4K, count: 50 }}
phases:
  before_each: [sync, {{ command: "findmnt -n -o SOURCE,FSTYPE,OPTIONS ${{mount}} >> {seen}" }}]
repeat: 1
order: sequential
"#,
        dev = drive.path,
        seen = seen.display()
    );
    let f = common::write(tmp.path(), "c.yaml", &yaml);
    let out = platter()
        .current_dir(tmp.path())
        .args(["run", "--format", "json", "--allow-device", &drive.path])
        .arg(&f)
        .assert()
        .success();
    let report: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    let name = drive.path.trim_start_matches("/dev/");
    for cell in cells {
        assert_eq!(cell["params"]["device"], name);
        let metric = |name: &str| -> f64 {
            let m = cell["metrics"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["metric"] == name);
            m.unwrap_or_else(|| panic!("no {name} in {cell}"))["median"]
                .as_f64()
                .unwrap()
        };
        assert_eq!(metric("ops"), 50.0, "{cell}");
        // The device's own counters saw the writes, and a flush per fdatasync.
        assert!(metric("disk.write_bytes") >= 50.0 * 4096.0, "{cell}");
        assert!(metric("disk.flushes") >= 50.0, "{cell}");
    }
    // Each cell ran on its own filesystem, freshly made on the loop device, with the options.
    let seen = std::fs::read_to_string(&seen).unwrap();
    let lines: Vec<&str> = seen.lines().collect();
    assert_eq!(lines.len(), 4, "{seen}");
    for (line, fs) in lines.iter().zip(["ext2", "ext4", "xfs", "btrfs"]) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields[0], drive.path);
        assert_eq!(fields[1], fs);
        assert!(fields[2].split(',').any(|o| o == "noatime"), "{line}");
    }
    // Teardown left nothing mounted.
    assert!(drive.mounts().is_empty(), "{:?}", drive.mounts());
    let mnt = tmp.path().join("platter-data/agent/mnt");
    let left: Vec<_> = std::fs::read_dir(&mnt)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_ramdisk_needs_no_device_and_is_gone_afterwards() {
    if !common::root_or_skip("it mounts a tmpfs") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let seen = tmp.path().join("seen");
    let yaml = format!(
        r#"
name: ramdisk
storage: {{ ramdisk: {{ size: 64M }} }}
workload:
  fsync: {{ path: "${{mount}}/f.dat", count: 20 }}
phases:
  before_each: [{{ command: "findmnt -n -o FSTYPE,OPTIONS ${{mount}} >> {}" }}]
repeat: 2
"#,
        seen.display()
    );
    let f = common::write(tmp.path(), "c.yaml", &yaml);
    platter()
        .current_dir(tmp.path())
        .arg("run")
        .arg(&f)
        .assert()
        .success();
    let seen = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(seen.lines().count(), 2);
    assert!(
        seen.lines()
            .all(|l| l.starts_with("tmpfs") && l.contains("size=65536k")),
        "{seen}"
    );
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(
        !mounts.contains(&tmp.path().display().to_string()),
        "{mounts}"
    );
}

fn storage_campaign(dir: &Path, device: &str) -> PathBuf {
    common::write(
        dir,
        "c.yaml",
        &format!(
            "name: refused\ndevices: {{ path: {device} }}\nstorage: {{ fs: ext4 }}\n\
             workload: {{ command: {{ run: \"true\" }} }}\nrepeat: 1\n"
        ),
    )
}

fn has_filesystem(device: &str) -> bool {
    Process::new("blkid")
        .arg(device)
        .output()
        .unwrap()
        .status
        .success()
}

#[test]
fn a_device_not_allowed_is_refused_before_anything_runs() {
    if !common::root_or_skip("it attaches a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let drive = Loop::new(tmp.path(), "drive.img", 64);
    let f = storage_campaign(tmp.path(), &drive.path);
    platter()
        .current_dir(tmp.path())
        .arg("run")
        .arg(&f)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("refused the plan, nothing ran"))
        .stdout(predicate::str::contains(format!(
            "{} is not allowed",
            drive.path
        )))
        .stdout(predicate::str::contains("--allow-device"));
    assert!(!has_filesystem(&drive.path), "mkfs must not have run");
}

#[test]
fn a_mounted_device_is_refused_even_when_allowed() {
    if !common::root_or_skip("it attaches a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let drive = Loop::new(tmp.path(), "drive.img", 64);
    assert!(Process::new("mkfs.ext2")
        .args(["-q", "-F", &drive.path])
        .status()
        .unwrap()
        .success());
    let mnt = tmp.path().join("someone-elses");
    std::fs::create_dir(&mnt).unwrap();
    assert!(Process::new("mount")
        .arg(&drive.path)
        .arg(&mnt)
        .status()
        .unwrap()
        .success());
    std::fs::write(mnt.join("precious"), "data").unwrap();
    let f = storage_campaign(tmp.path(), &drive.path);
    platter()
        .current_dir(tmp.path())
        .args(["run", "--allow-device", &drive.path])
        .arg(&f)
        .assert()
        .code(1)
        .stdout(predicate::str::contains(format!(
            "{} is mounted at {}",
            drive.path,
            mnt.display()
        )));
    assert_eq!(
        std::fs::read_to_string(mnt.join("precious")).unwrap(),
        "data"
    );
}

#[test]
fn a_selector_that_matches_nothing_is_an_error_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let f = storage_campaign(tmp.path(), "/dev/platter-no-such-disk*");
    platter()
        .current_dir(tmp.path())
        .arg("run")
        .arg(&f)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "c.yaml:2:10: devices: no device of host",
        ))
        .stderr(predicate::str::contains(
            "matches {path: /dev/platter-no-such-disk*}",
        ));
}

#[test]
fn teardown_runs_after_a_failed_measurement_even_with_on_failure_abort() {
    if !common::root_or_skip("it attaches a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let drive = Loop::new(tmp.path(), "drive.img", 64);
    let f = common::write(
        tmp.path(),
        "c.yaml",
        &format!(
            "name: failing\ndevices: {{ path: {} }}\nstorage: {{ fs: ext2 }}\n\
             workload: {{ command: {{ run: \"touch ${{mount}}/was-here && exit 7\" }} }}\nrepeat: 3\non_failure: abort\n",
            drive.path
        ),
    );
    platter()
        .current_dir(tmp.path())
        .args(["run", "--allow-device", &drive.path])
        .arg(&f)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("workload failed: exit status 7"));
    assert!(drive.mounts().is_empty(), "{:?}", drive.mounts());
    let c = rusqlite::Connection::open(tmp.path().join("platter-data/platter.db")).unwrap();
    let states: Vec<(String, String)> = c
        .prepare("SELECT kind, state FROM steps WHERE state != 'started' ORDER BY step_index")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let states: Vec<String> = states.iter().map(|(k, s)| format!("{k}:{s}")).collect();
    assert_eq!(
        states,
        [
            "storage_setup:succeeded",
            "measure:failed",
            "measure:skipped",
            "measure:skipped",
            "storage_teardown:succeeded"
        ]
    );
}

#[test]
fn validate_lists_every_destructive_action() {
    if !common::root_or_skip("it attaches a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let drive = Loop::new(tmp.path(), "drive.img", 64);
    let f = common::write(
        tmp.path(),
        "c.yaml",
        &format!(
            "name: listing\ndevices: {{ path: {} }}\nmatrix: {{ fs: [ext4, xfs] }}\n\
             storage: {{ fs: \"${{fs}}\", mkfs_options: \"-L bench\" }}\nworkload: {{ fsync: {{ path: \"${{mount}}/f\" }} }}\n",
            drive.path
        ),
    );
    platter()
        .args(["validate", "--local-host", "here"])
        .arg(&f)
        .assert()
        .success()
        .stdout(predicate::str::contains("destructive actions"))
        .stdout(predicate::str::contains(format!(
            "host here: mkfs.ext4 -L bench {} (erases it)",
            drive.path
        )))
        .stdout(predicate::str::contains(format!(
            "host here: mkfs.xfs -L bench {} (erases it)",
            drive.path
        )));
    assert!(
        !has_filesystem(&drive.path),
        "validate must not touch the device"
    );
}

#[test]
fn gocryptfs_gives_the_workload_an_encrypted_view_and_is_unmounted_after() {
    if !common::root_or_skip("it attaches a loop device")
        || !common::tools_or_skip(&[("gocryptfs", "gocryptfs")])
    {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let drive = Loop::new(tmp.path(), "drive.img", 64);
    let seen = tmp.path().join("seen");
    let yaml = format!(
        r#"
name: encrypted
devices: {{ path: {dev} }}
storage: {{ fs: ext4, encryption: gocryptfs }}
workload:
  fsync: {{ path: "${{mount}}/secret.dat", size: 4K, count: 20 }}
phases:
  before_each: [{{ command: "findmnt -n -o FSTYPE ${{mount}} >> {seen}; ls ${{mount}}/../loop*/.gocryptfs >> {seen}" }}]
repeat: 1
"#,
        dev = drive.path,
        seen = seen.display()
    );
    let f = common::write(tmp.path(), "c.yaml", &yaml);
    platter()
        .current_dir(tmp.path())
        .args(["run", "--allow-device", &drive.path])
        .arg(&f)
        .assert()
        .success();
    let seen = std::fs::read_to_string(&seen).unwrap();
    let mut lines = seen.lines();
    assert_eq!(lines.next(), Some("fuse.gocryptfs"), "{seen}");
    // The filesystem underneath holds gocryptfs's own files, not the workload's names.
    assert!(seen.contains("gocryptfs.conf"), "{seen}");
    assert!(!seen.contains("secret.dat"), "{seen}");
    assert!(drive.mounts().is_empty(), "{:?}", drive.mounts());
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(
        !mounts.contains(&tmp.path().display().to_string()),
        "{mounts}"
    );
}
