//! Every result says what it ran on: the agent's snapshots (host, device under test,
//! storage as mounted, write cache read back, tool versions) are stored with the plan,
//! shown in every format, used by pivots instead of today's inventory, and a change in
//! the middle of a run is flagged. Needs root: the drive is a loop device.

mod common;

use std::path::Path;

use common::*;
use platter::report::{Format, Report};
use platter::store::Store;

fn run(dir: &Path, file: &Path, device: &str, format: &str) -> String {
    run_with(dir, file, &["--format", format, "--allow-device", device])
}

/// `platter run FILE ARGS…` with its store and journal in `dir`: its stdout, once it
/// succeeded.
fn run_with(dir: &Path, file: &Path, args: &[&str]) -> String {
    let out = common::run_ok(
        platter()
            .arg("run")
            .arg(file)
            .args(args)
            .arg("--db")
            .arg(dir.join("p.db"))
            .arg("--state-dir")
            .arg(dir.join("agent")),
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_report_says_what_it_ran_on_in_every_format() {
    if !common::root_or_skip("it formats a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let drive = Loop::new(dir, "drive.img", 64);
    let file = write(
        dir,
        "p.yaml",
        &format!(
            "name: prov\nhosts: {{ names: [local] }}\ndevices: {{ path: {} }}\n\
             storage: {{ fs: ext4, mount_options: [noatime] }}\n\
             workload: {{ command: {{ run: \"dd if=/dev/zero of=${{mount}}/f bs=64k count=4 conv=fsync status=none\" }} }}\n\
             repeat: 2\nreport: {{ pivot: {{ rows: [device.transport], columns: [device], metric: wall }} }}\n",
            drive.path
        ),
    );
    let json: serde_json::Value =
        serde_json::from_str(&run(dir, &file, &drive.path, "json")).unwrap();
    let snapshots = json["provenance"].as_array().unwrap();
    let start = &snapshots[0]["facts"];
    assert_eq!(start["trigger"], "plan_start");
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(start["host"]["kernel_release"], kernel.trim());
    assert!(start["host"]["cpu_count"].as_u64().unwrap() >= 1);
    let ours = start["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["device"]["path"] == drive.path.as_str())
        .expect("the drive under test among the host's drives");
    assert_eq!(ours["device"]["transport"], "loop");
    assert_eq!(ours["logical_block_size"], 512);
    let storage = snapshots
        .iter()
        .find(|s| s["facts"]["trigger"] == "storage_setup")
        .expect("a snapshot after the storage setup");
    let mount = &storage["facts"]["storage"]["mounts"][0];
    assert_eq!(mount["fs_type"], "ext4");
    assert_eq!(mount["source"], drive.path.as_str());
    assert!(
        mount["options"].as_str().unwrap().contains("noatime"),
        "{mount}"
    );
    assert!(
        storage["facts"]["storage"]["mkfs_version"]
            .as_str()
            .unwrap()
            .starts_with("mke2fs"),
        "{storage}"
    );
    // A loop device has no write cache of its own to read back: it says why.
    assert!(storage["facts"]["storage"]["write_cache"]
        .as_str()
        .unwrap()
        .starts_with("unknown"));
    assert_eq!(json["provenance_changes"].as_array().unwrap().len(), 0);

    let table = run(dir, &file, &drive.path, "table");
    assert!(table.contains("\nran on\n"), "{table}");
    assert!(
        table.contains(&format!("Linux {}", kernel.trim())),
        "{table}"
    );
    assert!(
        table.contains(&format!("storage ext4 on {}", drive.path)),
        "{table}"
    );
    assert!(table.contains("made by mke2fs"), "{table}");
    let markdown = run(dir, &file, &drive.path, "markdown");
    assert!(markdown.contains("## Ran on"), "{markdown}");
    let csv = run(dir, &file, &drive.path, "csv");
    let header = csv.lines().next().unwrap();
    assert!(
        header.ends_with(
            ",kernel,device_model,device_serial,device_firmware,mounted,mkfs,write_cache_read_back"
        ),
        "{header}"
    );
    let wall = csv.lines().find(|l| l.contains(",wall,")).unwrap();
    assert!(wall.contains(&format!(",{},", kernel.trim())), "{wall}");
    assert!(
        wall.contains(&format!("\"ext4 {} (rw,noatime", drive.path)),
        "{wall}"
    );
    assert!(wall.contains(",mke2fs "), "{wall}");
}

#[test]
fn pivots_read_the_runs_snapshot_and_a_change_within_a_run_is_flagged() {
    if !common::root_or_skip("it formats a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let drive = Loop::new(dir, "drive.img", 64);
    let file = write(
        dir,
        "p.yaml",
        &format!(
            "name: prov\nhosts: {{ names: [local] }}\ndevices: {{ path: {} }}\n\
             workload: {{ command: {{ run: \"true\" }} }}\nrepeat: 2\n\
             report: {{ pivot: {{ rows: [device.model], columns: [device], metric: wall }} }}\n",
            drive.path
        ),
    );
    let json: serde_json::Value =
        serde_json::from_str(&run(dir, &file, &drive.path, "json")).unwrap();
    let id = json["campaign_id"].as_str().unwrap().to_string();
    let store = Store::open(&dir.join("p.db")).unwrap();
    let before = Report::load(&store, &id).unwrap();

    // Today's inventory says the drive is another model: an old report must not change.
    let conn = rusqlite::Connection::open(dir.join("p.db")).unwrap();
    let devices: String = conn
        .query_row("SELECT devices FROM agents", [], |r| r.get(0))
        .unwrap();
    let swapped = devices.replace("\"model\":\"\"", "\"model\":\"SWAPPED-DRIVE\"");
    assert_ne!(
        swapped, devices,
        "the inventory has the drive with no model"
    );
    conn.execute("UPDATE agents SET devices = ?1", [&swapped])
        .unwrap();
    let after = Report::load(&store, &id).unwrap();
    assert_eq!(before.pivot, after.pivot);
    let table = Format::Table.exporter().render(&after);
    assert!(!table.contains("SWAPPED-DRIVE"), "{table}");

    // A snapshot later in the run that saw another kernel and firmware is flagged.
    let (plan, facts): (String, String) = conn
        .query_row(
            "SELECT plan_id, facts FROM provenance WHERE trigger = 'plan_start'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let mut later: serde_json::Value = serde_json::from_str(&facts).unwrap();
    later["trigger"] = "resume".into();
    later["host"]["kernel_release"] = "9.9.9-other".into();
    later["host"]["boot_id"] = "another-boot".into();
    // The agent restarted with another --agent-cpu.
    let workload_cpus = later["host"]["workload_cpus"].as_str().unwrap().to_string();
    let agent_cpu = later["host"]["agent_cpus"].as_str().unwrap().to_string();
    later["host"]["agent_cpus"] = if agent_cpu.is_empty() { "0" } else { "" }.into();
    for d in later["devices"].as_array_mut().unwrap() {
        if d["device"]["path"] == drive.path.as_str() {
            d["device"]["firmware"] = "FW2".into();
        }
    }
    conn.execute(
        "INSERT INTO provenance (plan_id, seq, host, step_index, trigger, facts) \
         SELECT ?1, 999999, host, 3, 'resume', ?2 FROM provenance WHERE trigger = 'plan_start'",
        rusqlite::params![plan, later.to_string()],
    )
    .unwrap();
    let changed = Report::load(&store, &id).unwrap();
    // The console's overview reads the same changes without loading the samples.
    let so_far = platter::report::provenance::changes_so_far(
        &store,
        &platter_proto::model::CampaignId::from(id.clone()),
    )
    .unwrap();
    assert_eq!(so_far, changed.provenance_changes);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert!(
        changed
            .provenance_changes
            .iter()
            .any(|c| c.contains(&format!(
                "kernel {} → 9.9.9-other (from step 3)",
                kernel.trim()
            ))),
        "{:?}",
        changed.provenance_changes
    );
    assert!(
        changed
            .provenance_changes
            .iter()
            .any(|c| c.contains(&format!("{} firmware", drive.path)) && c.contains("→ FW2")),
        "{:?}",
        changed.provenance_changes
    );
    let cpus = if workload_cpus.contains([',', '-']) {
        format!("CPUs {workload_cpus}")
    } else {
        format!("CPU {workload_cpus}")
    };
    let (was, now) = if agent_cpu.is_empty() {
        (
            format!("workloads and the agent on {cpus}"),
            format!("workloads on {cpus}, the agent's threads on CPU 0"),
        )
    } else {
        (
            format!("workloads on {cpus}, the agent's threads on CPU {agent_cpu}"),
            format!("workloads and the agent on {cpus}"),
        )
    };
    assert!(
        changed
            .provenance_changes
            .iter()
            .any(|c| c.ends_with(&format!(": {was} → {now} (from step 3)"))),
        "{:?}",
        changed.provenance_changes
    );
    // A new boot id alone (a reboot phase) is not a change worth flagging.
    assert!(!changed
        .provenance_changes
        .iter()
        .any(|c| c.contains("boot")));
    let table = Format::Table.exporter().render(&changed);
    assert!(table.contains("CHANGED during the run on"), "{table}");
}

/// The CPUs a process may run on, as `/proc/PID/status` lists them.
fn allowed_cpus(status: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list in a status file")
        .trim()
        .to_string()
}

/// `platter run --agent-cpu PLACEMENT` of a workload that writes down its own CPUs, its
/// spawn helper's and every thread's of the platter process (the helper's parent), and
/// the report's provenance: (workload, helper, platter's threads, host facts).
fn placement(dir: &Path, placement: &str) -> (String, String, Vec<String>, serde_json::Value) {
    let out = dir.join(placement);
    std::fs::create_dir_all(&out).unwrap();
    let probe = write(
        &out,
        "probe.sh",
        &format!(
            "#!/bin/sh\ncd {}\ncat /proc/self/status > workload\ncat /proc/$PPID/status > helper\n\
             agent=$(awk '/^PPid/ {{ print $2 }}' helper)\n\
             for t in /proc/$agent/task/*; do s=$(cat $t/status 2>/dev/null) && echo \"$s\" > thread-${{t##*/}}; done\n",
            out.display()
        ),
    );
    let mut perms = std::fs::metadata(&probe).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&probe, perms).unwrap();
    let file = write(
        &out,
        "cpus.yaml",
        &format!(
            "name: cpus\nworkload: {{ command: {{ run: {} }} }}\nrepeat: 1\n",
            probe.display()
        ),
    );
    let run = run_with(&out, &file, &["--format", "json", "--agent-cpu", placement]);
    let json: serde_json::Value = serde_json::from_str(&run).unwrap();
    let read = |name: &str| allowed_cpus(&std::fs::read_to_string(out.join(name)).unwrap());
    let mut threads = Vec::new();
    for e in std::fs::read_dir(&out).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if name.starts_with("thread-") {
            threads.push(read(&name));
        }
    }
    assert!(threads.len() >= 3, "platter run's threads: {threads:?}");
    let host = json["provenance"][0]["facts"]["host"].clone();
    (read("workload"), read("helper"), threads, host)
}

#[test]
fn the_agent_keeps_its_threads_to_one_cpu_and_workloads_get_them_all() {
    let tmp = tempfile::tempdir().unwrap();
    let ours = allowed_cpus(&std::fs::read_to_string("/proc/self/status").unwrap());
    let last = ours.rsplit([',', '-']).next().unwrap().to_string();
    let several = ours != last;

    let (workload, helper, threads, host) = placement(tmp.path(), "auto");
    assert_eq!(
        workload, ours,
        "the workload may run on every CPU platter was given"
    );
    assert_eq!(helper, ours);
    let kept = if several {
        last.as_str()
    } else {
        ours.as_str()
    };
    assert!(
        threads.iter().all(|t| t == kept),
        "{threads:?}, kept to {kept}"
    );
    assert_eq!(host["workload_cpus"], ours.as_str());
    assert_eq!(host["agent_cpus"], if several { last.as_str() } else { "" });

    let (workload, helper, threads, host) = placement(tmp.path(), "off");
    assert_eq!(
        (workload.as_str(), helper.as_str()),
        (ours.as_str(), ours.as_str())
    );
    assert!(threads.iter().all(|t| *t == ours), "{threads:?}");
    assert_eq!(host["agent_cpus"], "");
    assert_eq!(host["workload_cpus"], ours.as_str());

    // A CPU given by number must be one the process may use.
    let out = platter()
        .args(["run", "x.yaml", "--agent-cpu", "4095"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "CPU 4095 is not one this process may use ({ours})"
        )),
        "{stderr}"
    );
}

#[test]
fn a_user_sys_split_of_too_few_ticks_is_said_to_be_coarse() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // A shell loop: ~1 ms of CPU at n = 1, ~1 s at 1,200,000 here; each cell warns exactly
    // when its runs' median user + sys is under 20 of the host's ticks.
    let file = write(
        dir,
        "split.yaml",
        "name: split\nmatrix: { n: [1, 1200000] }\n\
         workload: { command: { run: \"i=0; while [ $i -lt ${n} ]; do i=$((i+1)); done\" } }\n\
         repeat: 3\n",
    );
    let json: serde_json::Value =
        serde_json::from_str(&run_with(dir, &file, &["--format", "json"])).unwrap();
    let host = &json["provenance"][0]["facts"]["host"];
    let (tick, how) = match host["tick_hz"].as_u64().unwrap() {
        0 => (0.01, "this host's tick unknown, taken as 10 ms".to_string()),
        hz => (1.0 / hz as f64, format!("CONFIG_HZ={hz}")),
    };
    let virtual_accounting = host["cpu_accounting"] == "virtual";
    for n in ["1", "1200000"] {
        let cell = json["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["params"]["n"] == n)
            .unwrap();
        let value = |metric: &str| -> Vec<f64> {
            let m = cell["metrics"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["metric"] == metric)
                .unwrap();
            m["samples"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["value"].as_f64().unwrap())
                .collect()
        };
        let mut cpu: Vec<f64> = value("user")
            .iter()
            .zip(value("sys"))
            .map(|(u, s)| u + s)
            .collect();
        cpu.sort_by(f64::total_cmp);
        let median = cpu[1];
        // Advice, not a warning: said once per host in the notes, per cell in JSON.
        let warnings: Vec<&str> = cell["advice"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter(|a| a["kind"] == "coarse_split")
            .map(|a| a["text"].as_str().unwrap())
            .collect();
        if virtual_accounting || median >= 20.0 * tick {
            assert!(
                warnings.is_empty(),
                "n={n}, median {median} s: {warnings:?}"
            );
        } else {
            assert_eq!(warnings.len(), 1, "n={n}: {warnings:?}");
            assert!(warnings[0].contains(&how), "{warnings:?}");
            assert!(
                warnings[0].contains("under 20 ticks (")
                    && warnings[0].contains("the split is coarse"),
                "{warnings:?}"
            );
        }
        // A run of a millisecond is under 20 ticks of any kernel's; a second is over.
        assert_eq!(median < 20.0 * tick, n == "1", "n={n}, median {median} s");
    }
}
