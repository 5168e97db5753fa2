//! The HTML page of each example campaign's kind, run on a fleet of three hosts: the
//! example's own YAML planned for the fleet, samples written through the store as agents
//! would send them (realistic values, fsync's HDR histograms, one failed repetition,
//! provenance snapshots), the page rendered and loaded in headless Chromium. The DOM it
//! builds must open with the summary, hold the charts with every host or drive named in
//! their legends, and fetch nothing. With `PLATTER_UPDATE_SCREENSHOTS=1` the pages'
//! screenshots are written to `examples/screenshots/` (the README and docs/reports.md link them).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use platter::planning::planner::{self, Inventories};
use platter::report::side::{SideRatio, SideValue};
use platter::report::{Format, Report};
use platter::store::Store;
use platter_proto::inventory::Device;
use platter_proto::model::{Record, RecordKind, Sample, StepEvent, StepKind, StepState};
use platter_proto::provenance::{DeviceFacts, HostFacts, Provenance, StorageFacts};

const HOSTS: [&str; 3] = ["rc66", "rcmonster", "flygecko"];
/// The screenshots' window: the page's top (summary, forest plots, first charts), small
/// enough for a README (~200–400 KB of PNG).
const SHOT_WIDTH: u32 = 1200;
const SHOT_HEIGHT: u32 = 1800;

/// Chromium, or `None` (saying so) when it is not installed. `PLATTER_TEST_STRICT=1`
/// (CI, which installs it) makes a missing Chromium a failure, never a quiet skip.
fn chromium_or_skip() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|p| p.join(name))
                    .find(|p| p.is_file())
            })
        });
    if found.is_none() {
        common::skip(
            "loads the pages in headless Chromium; install it (apt install chromium) to include it",
        );
    }
    found
}

fn chromium(browser: &Path, profile: &Path, args: &[String]) -> std::process::Output {
    // `timeout`: a browser that hangs fails the test instead of stalling it.
    let out = Command::new("timeout")
        .arg("120")
        .arg(browser)
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn drive(name: &str, model: &str) -> Device {
    serde_json::from_value(serde_json::json!({
        "name": name, "path": format!("/dev/{name}"), "major_minor": "7:7",
        "vendor": "ATA", "model": model, "serial": format!("S4-{name}"),
        "firmware": "EXT0", "size_bytes": 500_107_862_016u64, "rotational": false,
        "transport": "sata", "controller": [], "pci_address": null, "by_id": [],
        "by_path": [], "write_cache": "write_back", "write_cache_source": "hdparm -W",
        "partitions": [], "mounted": [], "holders": [], "holds_root": false,
        "backing_file": null,
    }))
    .unwrap()
}

/// Each host's drives: `loop7` for the examples' selector, two of one model for the fio
/// fleet's.
fn inventory(host: &str) -> Vec<Device> {
    let model = match host {
        "rc66" => "Samsung SSD 860 EVO 500GB",
        "rcmonster" => "INTEL SSDSC2BW120A4",
        _ => "Crucial CT500MX500SSD1",
    };
    let mut d = vec![drive("loop7", model)];
    for n in ["sdb", "sdc"] {
        let mut x = drive(n, "FLEET TEST DRIVE");
        x.path = format!("/dev/{n}");
        d.push(x);
    }
    d
}

/// A host's snapshot at its plan's start: the host and every drive it has.
fn provenance(host: &str) -> Provenance {
    let cpu = match host {
        "rc66" => "Intel(R) Core(TM) i5-2520M CPU @ 2.50GHz",
        "rcmonster" => "AMD Ryzen 9 5950X 16-Core Processor",
        _ => "Intel(R) Xeon(R) CPU E3-1230 v5 @ 3.40GHz",
    };
    Provenance {
        trigger: "plan_start".into(),
        host: Some(HostFacts {
            agent_version: "0.1.0".into(),
            kernel_release: "6.1.0-28-amd64".into(),
            kernel_version: "#1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1".into(),
            boot_id: format!("boot-{host}"),
            cpu_model: cpu.into(),
            cpu_count: 8,
            memory_bytes: 16 << 30,
            agent_cpus: "7".into(),
            workload_cpus: "0-7".into(),
            tick_hz: 250,
            cpu_accounting: "tick".into(),
        }),
        devices: inventory(host)
            .into_iter()
            .map(|device| DeviceFacts {
                device,
                logical_block_size: 512,
                physical_block_size: 4096,
                scheduler: "mq-deadline".into(),
            })
            .collect(),
        storage: None,
        tools: Default::default(),
        health: vec![health(host, false)],
    }
}

/// The health of each host's drive under test, before the run and (`after`) after it:
/// rc66's grew two media errors and warmed; rcmonster's sits behind a USB bridge smartctl
/// cannot pass through; flygecko's did not change.
fn health(host: &str, after: bool) -> platter_proto::provenance::DriveHealth {
    use platter_proto::provenance::{DriveHealth, HealthReading};
    let reading = |media: u64, temp: i64| HealthReading {
        tool: "smartctl 7.3".into(),
        protocol: "ATA".into(),
        passed: Some(true),
        temperature_c: Some(temp),
        power_on_hours: Some(14551),
        media_errors: Some(media),
        reallocated_sectors: Some(0),
        percentage_used: Some(19),
        data_written_bytes: Some(33_170_000_000_000),
        ..HealthReading::default()
    };
    let mut h = DriveHealth {
        path: "/dev/sdb".into(),
        model: "FLEET TEST DRIVE".into(),
        serial: format!("S4-{host}-sdb"),
        firmware: "EXT0".into(),
        ..DriveHealth::default()
    };
    match (host, after) {
        ("rc66", false) => h.reading = Some(reading(0, 35)),
        ("rc66", true) => h.reading = Some(reading(2, 41)),
        ("rcmonster", _) => {
            h.unreadable = "smartctl: /dev/sdb: Unknown USB bridge [0x152d:0x0578 (0x209)]".into()
        }
        _ => h.reading = Some(reading(0, 30)),
    }
    h
}

fn storage_snapshot(fs: &str) -> Provenance {
    Provenance {
        trigger: "storage_setup".into(),
        storage: Some(StorageFacts {
            mounts: vec![platter_proto::provenance::MountFacts {
                mount_point: "/var/lib/platter/mnt".into(),
                fs_type: fs.into(),
                source: "/dev/loop7".into(),
                options: "rw,noatime".into(),
                super_options: "rw".into(),
            }],
            mkfs_version: format!("mkfs.{fs} 1.47.0"),
            write_cache: "on".into(),
        }),
        ..Default::default()
    }
}

/// A deterministic spread: the same numbers every run.
struct Noise(u64);

impl Noise {
    /// Uniform in [0, 1).
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `x` within ±`pct`% .
    fn around(&mut self, x: f64, pct: f64) -> f64 {
        x * (1.0 + pct / 100.0 * (2.0 * self.next() - 1.0))
    }
}

fn sample(metric: &str, value: f64, unit: &str) -> Sample {
    Sample {
        metric: metric.into(),
        value,
        unit: unit.into(),
        histogram: vec![],
        missing: String::new(),
    }
}

/// How much slower each host is: rcmonster's drive is the odd one out.
fn host_factor(host: &str) -> f64 {
    match host {
        "rc66" => 1.0,
        "rcmonster" => 2.6,
        _ => 0.8,
    }
}

fn param(params: &indexmap::IndexMap<String, String>, k: &str) -> String {
    params.get(k).cloned().unwrap_or_default()
}

fn process(wall: f64, n: &mut Noise) -> Vec<Sample> {
    vec![
        sample("wall", wall, "s"),
        sample("user", n.around(wall * 0.05, 10.0), "s"),
        sample("sys", n.around(wall * 0.3, 10.0), "s"),
        sample("max_rss", n.around(3.2 * 1048576.0, 2.0), "B"),
    ]
}

/// fsync: 1000 write()+fdatasync() per run, as the agent's loop records them.
fn fsync_samples(
    host: &str,
    params: &indexmap::IndexMap<String, String>,
    n: &mut Noise,
) -> Vec<Sample> {
    let size: f64 = param(params, "size").parse().unwrap_or(1.0);
    let offset = if param(params, "offset") == "512" {
        1.3
    } else {
        1.0
    };
    let base = 180e-6 * host_factor(host) * offset * (1.0 + size / 4096.0);
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
    for _ in 0..1000 {
        let u = n.next();
        // A log-normal body and a tail of flushes that waited for the drive.
        let body = base * (0.85 + 0.3 * n.next()) * (1.0 + 0.4 * (-(1.0 - u).ln()).min(6.0) * 0.2);
        let tail = if u > 0.995 {
            8.0 + 20.0 * n.next()
        } else if u > 0.95 {
            2.5
        } else {
            1.0
        };
        h.record((body * tail * 1e9) as u64).unwrap();
    }
    let mut bytes = Vec::new();
    use hdrhistogram::serialization::Serializer as _;
    hdrhistogram::serialization::V2Serializer::new()
        .serialize(&h, &mut bytes)
        .unwrap();
    let s = |q: f64| h.value_at_quantile(q) as f64 / 1e9;
    let mean = h.mean() / 1e9;
    let wall = mean * 1000.0;
    let mut out = process(wall, n);
    out.extend([
        sample("latency.mean", mean, "s"),
        sample("latency.p50", s(0.5), "s"),
        sample("latency.p90", s(0.9), "s"),
        sample("latency.p99", s(0.99), "s"),
        sample("latency.p99.9", s(0.999), "s"),
        sample("latency.max", h.max() as f64 / 1e9, "s"),
        sample("latency.min", h.min() as f64 / 1e9, "s"),
        sample("ops_per_s", 1000.0 / wall, "op/s"),
        sample("ops", 1000.0, "1"),
        sample("disk.flushes", 1000.0 + (n.next() * 4.0).floor(), "1"),
        sample("disk.write_bytes", 1000.0 * size.max(4096.0) + 8192.0, "B"),
    ]);
    out.push(Sample {
        metric: "latency".into(),
        value: mean,
        unit: "s".into(),
        histogram: bytes,
        missing: String::new(),
    });
    out
}

fn command_samples(
    host: &str,
    params: &indexmap::IndexMap<String, String>,
    n: &mut Noise,
) -> Vec<Sample> {
    let wall = if params.contains_key("bs") {
        // quickstart: dd of 32 MiB.
        let bs = if param(params, "bs") == "4k" {
            3.0
        } else {
            1.0
        };
        let sync = if param(params, "sync") == "fdatasync" {
            4.0
        } else {
            1.0
        };
        0.035 * bs * sync * host_factor(host).sqrt()
    } else {
        // build-times: a C build on a drive, through gocryptfs, on a RAM disk.
        let drive = match param(params, "drive").as_str() {
            "encrypted" => 1.11,
            "ramdisk" => 0.93,
            _ => 1.0,
        };
        let cache = if param(params, "ccache") == "warm" {
            0.35
        } else {
            1.0
        };
        41.0 * drive * cache * host_factor(host).sqrt()
    };
    process(n.around(wall, 3.0), n)
}

fn bonnie_samples(
    host: &str,
    params: &indexmap::IndexMap<String, String>,
    n: &mut Noise,
) -> Vec<Sample> {
    let fs = match param(params, "fs").as_str() {
        "btrfs" => 0.85,
        "ext2" => 1.1,
        _ => 1.0,
    };
    let speed = fs / host_factor(host);
    let mut out = process(n.around(95.0 / speed, 3.0), n);
    for (op, bw) in [
        ("put_block", 420.0),
        ("rewrite", 180.0),
        ("get_block", 510.0),
    ] {
        out.push(sample(op, n.around(bw * 1048576.0 * speed, 4.0), "B/s"));
        out.push(sample(&format!("{op}.cpu"), n.around(22.0, 10.0), "%"));
        out.push(sample(
            &format!("{op}.latency"),
            n.around(0.012 / speed, 8.0),
            "s",
        ));
    }
    out.push(sample("seeks", n.around(4800.0 * speed, 5.0), "op/s"));
    out
}

fn compilebench_samples(
    host: &str,
    params: &indexmap::IndexMap<String, String>,
    n: &mut Noise,
) -> Vec<Sample> {
    let fs = match param(params, "fs").as_str() {
        "btrfs" => 0.8,
        "ext2" => 1.05,
        _ => 1.0,
    };
    let speed = fs / host_factor(host);
    let mut out = process(n.around(60.0 / speed, 3.0), n);
    for (op, mbs) in [
        ("intial_create", 160.0),
        ("create", 120.0),
        ("patch", 45.0),
        ("compile", 210.0),
    ] {
        out.push(sample(
            &format!("{op}.throughput"),
            n.around(mbs * 1e6 * speed, 4.0),
            "B/s",
        ));
    }
    out.push(sample("read_tree.seconds", n.around(3.1 / speed, 4.0), "s"));
    out
}

fn fio_samples(
    host: &str,
    params: &indexmap::IndexMap<String, String>,
    n: &mut Noise,
) -> Vec<Sample> {
    let bs = if param(params, "bs") == "64k" {
        4.0
    } else {
        1.0
    };
    // The fleet's second drive on rcmonster is the slow one.
    let slow = if host == "rcmonster" && param(params, "device") == "sdc" {
        3.0
    } else {
        1.0
    };
    let clat = n.around(95e-6 * bs * slow * host_factor(host).sqrt(), 4.0);
    let iops = 1.0 / clat;
    let mut out = process(n.around(30.0, 1.0), n);
    out.extend([
        sample("write.iops", iops, "op/s"),
        sample("write.bw", iops * 4096.0 * bs, "B/s"),
        sample("write.clat.mean", clat * 1.1, "s"),
        sample("write.clat.p50", clat, "s"),
        sample("write.clat.p90", clat * 1.6, "s"),
        sample("write.clat.p99", clat * 4.2, "s"),
        sample("write.clat.p99.9", clat * 11.0, "s"),
        sample("write.lat.max", clat * 60.0, "s"),
        sample("sync.lat.mean", clat * 2.0, "s"),
        sample("sync.lat.p50", clat * 1.8, "s"),
        sample("sync.lat.p90", clat * 2.9, "s"),
        sample("sync.lat.p99", clat * 7.5, "s"),
        sample("sync.lat.p99.9", clat * 19.0, "s"),
    ]);
    out
}

type Samples = fn(&str, &indexmap::IndexMap<String, String>, &mut Noise) -> Vec<Sample>;

struct Case {
    /// The screenshot's name.
    name: &'static str,
    yaml: String,
    samples: Samples,
    /// Figures the page must have (`<figure id=…>`).
    figures: &'static [&'static str],
    /// Sections the page must have.
    sections: &'static [&'static str],
    /// Names the legends must hold: the hosts, or hosts' drives.
    legend: &'static [&'static str],
}

/// The example `file`, run on the fleet.
fn example(file: &str, edits: &[(&str, &str)]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(file);
    let mut text = std::fs::read_to_string(path).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{file} no longer contains {from:?}");
        text = text.replacen(from, to, 1);
    }
    text
}

const FLEET: &str = "hosts: { names: [rc66, rcmonster, flygecko] }\n";

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "quickstart",
            yaml: example("quickstart.yaml", &[("hosts: { names: [local] }\n", FLEET)]),
            samples: command_samples,
            figures: &["dots-wall", "side-forest-wall"],
            sections: &["summary", "forest", "metrics", "details"],
            legend: &["rc66", "rcmonster", "flygecko"],
        },
        Case {
            name: "build-times",
            yaml: example(
                "seed-000-002-build-times.yaml",
                &[("devices:", &format!("{FLEET}devices:"))],
            ),
            samples: command_samples,
            figures: &["dots-wall", "forest-wall", "side-forest-wall"],
            sections: &["summary", "pivot", "forest", "metrics", "details"],
            legend: &["rc66", "rcmonster", "flygecko"],
        },
        Case {
            name: "fsync-latency",
            yaml: example(
                "seed-001-fsync-latency.yaml",
                &[
                    ("devices:", &format!("{FLEET}devices:")),
                    ("report:\n", "report:\n  qualify: [\"latency.p99 < 2ms\"]\n"),
                ],
            ),
            samples: fsync_samples,
            figures: &["dots-latency-mean", "dots-wall", "side-forest-latency-mean", "latency-vs-size"],
            sections: &["summary", "pivot", "forest", "metrics", "percentiles", "size", "details"],
            legend: &["rc66", "rcmonster", "flygecko"],
        },
        Case {
            name: "filesystems-bonnie",
            yaml: example("seed-003-filesystems-bonnie.yaml", &[("devices:", &format!("{FLEET}devices:"))]),
            samples: bonnie_samples,
            figures: &["dots-put-block", "dots-get-block", "dots-wall", "side-forest-put-block"],
            sections: &["summary", "forest", "metrics", "details"],
            legend: &["rc66", "rcmonster", "flygecko"],
        },
        Case {
            name: "filesystems-compilebench",
            yaml: example(
                "seed-003-filesystems-compilebench.yaml",
                &[("devices:", &format!("{FLEET}devices:"))],
            ),
            samples: compilebench_samples,
            figures: &["dots-create-throughput", "dots-wall", "side-forest-create-throughput"],
            sections: &["summary", "forest", "metrics", "details"],
            legend: &["rc66", "rcmonster", "flygecko"],
        },
        Case {
            name: "fio-fleet-drives",
            yaml: format!(
                "name: fio-fleet\n{FLEET}devices: {{ model: \"FLEET TEST DRIVE\" }}\n\
                 matrix:\n  bs: [4k, 64k]\n\
                 workload:\n  fio:\n    directory: \"${{mount}}\"\n    options: {{ rw: randwrite, bs: \"${{bs}}\", size: 64M, fdatasync: 1, runtime: 30, time_based: 1 }}\n\
                 storage: {{ fs: ext4 }}\nrepeat: 5\nreport: {{ baseline: {{ host: rc66 }} }}\n"
            ),
            samples: fio_samples,
            figures: &["dots-write-iops", "dots-write-clat-mean", "side-forest-write-iops"],
            sections: &["summary", "forest", "metrics", "percentiles", "details"],
            legend: &["rc66 sdb", "rc66 sdc", "rcmonster sdb", "rcmonster sdc", "flygecko sdb", "flygecko sdc"],
        },
    ]
}

/// The case's campaign planned for the fleet and its samples stored as the agents would
/// send them; rcmonster's second measurement of the first cell fails.
async fn store_case(dir: &Path, case: &Case) -> Report {
    let store = Store::open(&dir.join(format!("{}.db", case.name))).unwrap();
    let file = format!("{}.yaml", case.name);
    let campaign =
        platter::spec::parse(&file, &case.yaml).unwrap_or_else(|e| panic!("{}: {e:?}", case.name));
    let inventories: Inventories = HOSTS
        .iter()
        .map(|h| (h.to_string(), inventory(h)))
        .collect();
    let planned = planner::plan(&campaign, "", "html", 1, &inventories).unwrap();
    store.insert_campaign(&planned, &file, &case.yaml).unwrap();
    let mut noise = Noise(7);
    for plan in &planned.plans {
        let mut records = vec![Record {
            seq: 1,
            kind: RecordKind::Provenance {
                plan_id: plan.id.clone(),
                step_index: 0,
                facts: Box::new(provenance(&plan.host)),
            },
        }];
        let mut failed_one = false;
        for step in &plan.steps {
            if let StepKind::StorageSetup(cfg) = &step.kind {
                let fs = serde_json::to_value(cfg)
                    .ok()
                    .and_then(|v| v["fs"].as_str().map(str::to_string))
                    .unwrap_or_else(|| "ext4".into());
                records.push(Record {
                    seq: records.len() as u64 + 1,
                    kind: RecordKind::Provenance {
                        plan_id: plan.id.clone(),
                        step_index: step.index,
                        facts: Box::new(storage_snapshot(&fs)),
                    },
                });
            }
            if !matches!(step.kind, StepKind::Measure(_)) {
                continue;
            }
            let cell = planned.cells.iter().find(|c| c.id == step.cell_id).unwrap();
            let seq = records.len() as u64 + 1;
            let started = 1_764_000_000_000_000_000 + seq as i64 * 1_000_000_000;
            if plan.host == "rcmonster" && step.repetition == 2 && !failed_one {
                failed_one = true;
                records.push(Record {
                    seq,
                    kind: RecordKind::Step(StepEvent {
                        plan_id: plan.id.clone(),
                        kind: "measure".into(),
                        step_index: step.index,
                        cell_id: step.cell_id.clone(),
                        repetition: step.repetition,
                        attempt: 1,
                        state: StepState::Failed,
                        started_unix_ns: started,
                        finished_unix_ns: started + 1,
                        exit_status: 1,
                        stderr_tail: "write: Input/output error".into(),
                        error: "exit status 1".into(),
                        samples: vec![],
                    }),
                });
                continue;
            }
            let samples = (case.samples)(&plan.host, &cell.params, &mut noise);
            records.push(common::measured(seq, &plan.id, step, started, samples));
        }
        records.push(Record {
            seq: records.len() as u64 + 1,
            kind: RecordKind::Provenance {
                plan_id: plan.id.clone(),
                step_index: plan.steps.len() as u32 - 1,
                facts: Box::new(Provenance {
                    trigger: "plan_end".into(),
                    health: vec![health(&plan.host, true)],
                    ..Provenance::default()
                }),
            },
        });
        records.push(Record {
            seq: records.len() as u64 + 1,
            kind: RecordKind::PlanFinished {
                plan_id: plan.id.clone(),
                cancelled: false,
            },
        });
        store.write_records(&plan.host, records).await.unwrap();
    }
    Report::load(&store, &planned.id).unwrap()
}

/// The page's DOM as Chromium built it (the sort script has run).
fn dump_dom(browser: &Path, dir: &Path, page: &Path) -> String {
    let out = chromium(
        browser,
        &dir.join("profile"),
        &[
            "--dump-dom".into(),
            "--virtual-time-budget=2000".into(),
            format!("file://{}", page.display()),
        ],
    );
    String::from_utf8(out.stdout).unwrap()
}

fn screenshot(browser: &Path, dir: &Path, page: &Path, png: &Path, height: u32) {
    chromium(
        browser,
        &dir.join("profile"),
        &[
            format!("--screenshot={}", png.display()),
            format!("--window-size={SHOT_WIDTH},{height}"),
            format!("file://{}", page.display()),
        ],
    );
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// The text of `<figure id="ID" …>…</figure>`.
fn figure<'a>(dom: &'a str, id: &str) -> Option<&'a str> {
    let start = dom.find(&format!("<figure id=\"{id}\""))?;
    let len = dom[start..].find("</figure>")?;
    Some(&dom[start..start + len])
}

#[tokio::test]
async fn each_example_kind_renders_a_page_chromium_shows_with_its_charts() {
    let Some(browser) = chromium_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let update = std::env::var_os("PLATTER_UPDATE_SCREENSHOTS").is_some_and(|v| v == "1");
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/screenshots");
    for case in cases() {
        let report = store_case(tmp.path(), &case).await;
        let html = Format::Html.exporter().render(&report);
        let page = tmp.path().join(format!("{}.html", case.name));
        std::fs::write(&page, &html).unwrap();
        // To look at the pages: PLATTER_HTML_DIR=/tmp/pages cargo test --test html_pages
        if let Some(dir) = std::env::var_os("PLATTER_HTML_DIR") {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(Path::new(&dir).join(format!("{}.html", case.name)), &html).unwrap();
        }
        let dom = dump_dom(&browser, tmp.path(), &page);
        let name = case.name;
        assert!(
            dom.contains("<h1>"),
            "{name}: Chromium built no page: {dom}"
        );

        // The summary comes first: before any chart or section.
        let summary = dom
            .find("<section id=\"summary\"")
            .unwrap_or_else(|| panic!("{name}: no summary"));
        let first_svg = dom
            .find("<svg")
            .unwrap_or_else(|| panic!("{name}: no chart"));
        assert!(
            summary < first_svg,
            "{name}: a chart comes before the summary"
        );
        let sections: Vec<&str> = dom
            .split("<section id=\"")
            .skip(1)
            .map(|s| s.split('"').next().unwrap())
            .collect();
        // The answer first: the findings (every example's matrix varies something), then
        // the summary.
        assert_eq!(
            sections[..2],
            ["findings", "summary"],
            "{name}: {sections:?}"
        );
        let findings = &dom[dom.find("<section id=\"findings\"").unwrap()..summary];
        assert!(
            findings.contains("<li") && findings.contains(" vs "),
            "{name}: findings say nothing: {findings}"
        );
        for s in case.sections {
            assert!(
                sections.contains(s),
                "{name}: no section {s} in {sections:?}"
            );
        }
        // The summary names what went wrong and every host with what it ran on.
        let summary_text = &dom[summary..dom[summary..].find("</section>").unwrap() + summary];
        assert!(
            summary_text.contains("1 step(s) failed"),
            "{name}: failure not in the summary"
        );
        assert!(
            summary_text.contains("write: Input/output error"),
            "{name}: stderr"
        );
        for host in HOSTS {
            assert!(
                summary_text.contains(&format!("<b>{host}</b>")),
                "{name}: host {host}"
            );
        }
        assert!(
            summary_text.contains("Linux 6.1.0-28-amd64"),
            "{name}: provenance"
        );
        assert!(
            summary_text.contains("id=\"side-by-side\""),
            "{name}: side by side"
        );

        // The charts, with their series named in the legends.
        for id in case.figures {
            let f = figure(&dom, id).unwrap_or_else(|| panic!("{name}: no figure {id}"));
            assert!(f.contains("<svg"), "{name}: figure {id} has no SVG");
            assert!(count(f, "<circle") >= 2, "{name}: figure {id} has no dots");
            if id.starts_with("side-forest") || id.starts_with("dots-") {
                for l in case.legend {
                    assert!(
                        f.contains(&format!("</span>{l}</li>")),
                        "{name}: figure {id}'s legend lacks {l}"
                    );
                }
            }
        }
        // The forests draw their line at 1×; a log ratio axis says so.
        let forest = figure(
            &dom,
            case.figures.iter().find(|f| f.contains("forest")).unwrap(),
        )
        .unwrap();
        assert!(
            forest.contains("stroke=\"#C0392B\""),
            "{name}: no reference line"
        );
        assert!(
            forest.contains("(×, log scale)"),
            "{name}: ratio axis title"
        );
        if case.sections.contains(&"percentiles") {
            let s = &dom[dom.find("<section id=\"percentiles\"").unwrap()..];
            let s = &s[..s.find("</section>").unwrap()];
            assert!(count(s, "<svg") >= 2, "{name}: percentile panels");
            // p99 always; the last tick is the curve's last point (a unit test has the rule).
            assert!(s.contains("\np99\n"), "{name}: percentile ticks");
            assert!(count(s, "<polyline") >= 3, "{name}: percentile lines");
        }
        // The drives' health: rc66's grown media errors flagged, rcmonster's bridge said.
        let health = &dom[dom
            .find("<section id=\"health\">")
            .unwrap_or_else(|| panic!("{name}: no health section"))..];
        let health = &health[..health.find("</section>").unwrap()];
        assert!(
            health.contains("<h3 class=\"fail\">rc66 /dev/sdb FLEET TEST DRIVE serial S4-rc66-sdb firmware EXT0</h3>"),
            "{name}: {health}"
        );
        assert!(
            health.contains("<tr class=\"fail\"><td>media_errors</td><td>0</td><td>2</td><td>2</td><td>FLAGGED</td></tr>"),
            "{name}: {health}"
        );
        assert!(
            health.contains("rcmonster /dev/sdb FLEET TEST DRIVE serial S4-rcmonster-sdb firmware EXT0: health not readable: smartctl: /dev/sdb: Unknown USB bridge"),
            "{name}: {health}"
        );
        assert!(dom.contains("<a href=\"#health\">Drive health</a>"));
        // Fetches nothing: no URL but the SVG namespace.
        let stripped = dom.replace("http://www.w3.org/2000/svg", "");
        assert!(
            !stripped.contains("http://") && !stripped.contains("https://"),
            "{name}: a URL"
        );
        assert!(!dom.contains(" src=\""), "{name}: something to load");
        // The sort script ran: it titles the sortable headers.
        assert!(
            dom.contains("<th title=\"sort\""),
            "{name}: the sort script did not run"
        );

        let png = tmp.path().join(format!("{name}.png"));
        screenshot(&browser, tmp.path(), &page, &png, SHOT_HEIGHT);
        let size = std::fs::metadata(&png).unwrap().len();
        assert!(size > 20_000, "{name}: screenshot of {size} bytes is blank");
        let mut pngs = vec![(format!("{name}.png"), png)];
        if case.sections.contains(&"percentiles") {
            // The percentile curves, further down: the section alone.
            let only = tmp.path().join(format!("{name}-percentiles.html"));
            let css = "<style>body>*:not(#percentiles){display:none}</style></head>";
            std::fs::write(&only, html.replacen("</head>", css, 1)).unwrap();
            let png = tmp.path().join(format!("{name}-percentiles.png"));
            screenshot(&browser, tmp.path(), &only, &png, 1300);
            pngs.push((format!("{name}-percentiles.png"), png));
        }
        if update {
            std::fs::create_dir_all(&shots).unwrap();
            for (file, png) in pngs {
                std::fs::copy(&png, shots.join(file)).unwrap();
            }
        }
    }
}

/// Every ratio `r` prints, with what it is: a comparison with the baseline, a value of the
/// side-by-side view, an instance of a finding.
fn every_ratio(r: &Report) -> Vec<(String, SideRatio)> {
    let mut out: Vec<(String, SideRatio)> = r
        .comparisons
        .iter()
        .filter_map(|c| {
            Some((
                format!("comparison {}", c.row.text),
                SideRatio::of_comparison(c)?,
            ))
        })
        .collect();
    for row in r.side_by_side.iter().flat_map(|s| &s.rows) {
        for v in &row.values {
            if let SideValue::Measured {
                ratio: Some(x),
                outlier,
                ..
            } = v
            {
                let what = format!("side {:?} {}", row.params, row.metric);
                // An outlier mark never stands beside a ratio decided equal.
                assert!(!(*outlier && x.no_difference()), "{what}: OUTLIER beside ~");
                out.push((what, x.clone()));
            }
        }
    }
    let f = &r.findings;
    for finding in f
        .differences
        .iter()
        .chain(&f.no_difference)
        .chain(&f.estimates)
    {
        for i in &finding.at {
            out.push((
                format!("finding {} at {}", finding.what, i.context),
                i.ratio.clone(),
            ));
        }
    }
    out
}

/// A decided ratio is marked significant exactly when its interval excludes ×1, and is
/// written with `~` exactly when it is not; an estimate is neither significant nor `~`.
fn assert_marks_agree_with_intervals(name: &str, r: &Report) -> (usize, usize) {
    let (mut decided, mut estimates) = (0, 0);
    for (what, x) in every_ratio(r) {
        let text = x.text();
        if x.too_few_runs.is_some() {
            estimates += 1;
            assert!(
                !x.significant && !text.contains('~'),
                "{name}: {what}: {x:?}"
            );
            continue;
        }
        decided += 1;
        let Some((lo, hi)) = x.ratio_ci else {
            continue;
        };
        let excludes_one = lo > 1.0 || hi < 1.0;
        assert_eq!(x.significant, excludes_one, "{name}: {what}: {text} {x:?}");
        assert_eq!(
            text.ends_with(" ~"),
            !x.significant,
            "{name}: {what}: {text}"
        );
    }
    (decided, estimates)
}

/// The example fleet's findings (5 runs a side) no longer mark a fivefold difference with a
/// tight interval "not significant": no ratio of any example's report bears a mark its
/// interval contradicts, and a report whose lines cannot be decided one by one says so once,
/// with the repeat count that would.
#[tokio::test]
async fn every_examples_marks_agree_with_their_intervals() {
    let tmp = tempfile::tempdir().unwrap();
    for case in cases() {
        let report = store_case(tmp.path(), &case).await;
        let (decided, estimates) = assert_marks_agree_with_intervals(case.name, &report);
        assert!(decided + estimates > 0, "{}: no ratio", case.name);
        if case.name != "fio-fleet-drives" {
            continue;
        }
        // 5 runs a side (4 where a run failed) over families of 8 and 12: no line alone.
        assert_eq!(decided, 0, "every line of the fleet is an estimate");
        let table = Format::Table.exporter().render(&report);
        let findings: Vec<&str> = table
            .lines()
            .skip_while(|l| !l.starts_with("findings"))
            .take_while(|l| !l.is_empty())
            .collect();
        let slow = findings
            .iter()
            .find(|l| l.contains("host=rcmonster sdc vs rc66:"))
            .unwrap_or_else(|| panic!("{table}"));
        assert!(
            slow.contains("×0.20 (0.20–0.21) at bs=4k") && !slow.contains('~'),
            "{slow}"
        );
        assert!(
            slow.contains("together significant over all 2 configurations"),
            "{slow}"
        );
        let once: Vec<&&str> = findings.iter().filter(|l| l.contains("repeat:")).collect();
        assert_eq!(
            once,
            [&"  with 4–5 runs a side no single configuration can pass Holm over 12 comparisons: their ratios are estimates, unmarked; repeat: 6 would"],
            "{table}"
        );
        // No line under the heading (which says what `~` means) bears one.
        assert!(!findings[1..].iter().any(|l| l.contains('~')), "{table}");
    }
}

/// Markup and control characters, to be escaped (and the control characters shown as
/// U+FFFD) wherever text from outside reaches the page.
const HOSTILE: &str = "<i>\"&'\u{1}\u{1b}[31m";

/// `report` with `HOSTILE` text in everything that came from outside: the campaign's name,
/// a host, parameter values, a metric, failures, refusals, warnings, provenance notes.
fn hostile(mut r: Report) -> Report {
    let host = format!("rc66{HOSTILE}");
    r.name.push_str(HOSTILE);
    for c in &mut r.cells {
        if c.host == "rc66" {
            c.host = host.clone();
        }
        for v in c.params.values_mut() {
            v.push_str(HOSTILE);
        }
        for m in &mut c.metrics {
            if m.metric == "wall" {
                m.metric = format!("wall{HOSTILE}");
            }
        }
    }
    if let Some(c) = r.cells.first_mut() {
        c.unmeasured.push(platter::report::Unmeasured {
            metric: format!("seeks{HOSTILE}"),
            unit: "1/s".into(),
            count: 2,
            reason: format!("+++++ {HOSTILE}"),
            samples: vec![],
        });
    }
    if let Some(p) = &mut r.pivot {
        p.metric.push_str(HOSTILE);
        for c in &mut p.columns {
            c.push_str(HOSTILE);
        }
        for (labels, _) in &mut p.rows {
            for l in labels {
                l.push_str(HOSTILE);
            }
        }
    }
    for o in &mut r.outliers {
        o.host = host.clone();
    }
    for f in &mut r.failures {
        f.stderr_tail.push_str(HOSTILE);
        f.cell.push_str(HOSTILE);
    }
    for i in 0..12 {
        r.failures.push(platter::report::Failure {
            host: host.clone(),
            cell: format!("bs=4k{HOSTILE}"),
            step: "measure".into(),
            repetition: i,
            attempt: 1,
            error: format!("exit status {i}{HOSTILE}"),
            stderr_tail: format!("line one\nline two {HOSTILE}"),
        });
    }
    r.steps_failed += 12;
    r.refused.push(platter::report::Refusal {
        host: format!("x1{HOSTILE}"),
        reason: format!("lacks: gocryptfs {HOSTILE}"),
    });
    r.provenance_changes
        .push(format!("rc66: kernel changed {HOSTILE}"));
    r.drive_states.push(format!(
        "{host} loop0: purged with discard at 2026-12-06 08:10 UTC; not yet steady {HOSTILE}"
    ));
    r.health_not_judged
        .push(format!("media_errors not judged {HOSTILE}"));
    r.advice.push(format!("noise {HOSTILE}"));
    if let Some(c) = r.comparisons.first_mut() {
        c.compared = false;
        c.row.context.push_str(HOSTILE);
        c.row.text = format!("no counterpart {HOSTILE}");
    }
    if let Some(d) = r.health.first_mut() {
        d.after = None;
        d.model.push_str(HOSTILE);
    }
    r
}

/// Every case's page, and each with hostile text, and its plain-text report, written to
/// `PLATTER_HTML_DUMP` (a directory) to compare two builds' pages byte for byte; without
/// it, nothing.
#[tokio::test]
async fn pages_to_compare_between_builds() {
    let Some(dir) = std::env::var_os("PLATTER_HTML_DUMP") else {
        return;
    };
    let dir = Path::new(&dir);
    std::fs::create_dir_all(dir).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for case in cases() {
        let report = store_case(tmp.path(), &case).await;
        let html = Format::Html.exporter().render(&report);
        std::fs::write(dir.join(format!("{}.html", case.name)), &html).unwrap();
        let text = Format::Table.exporter().render(&report);
        std::fs::write(dir.join(format!("{}.txt", case.name)), &text).unwrap();
        let html = Format::Html.exporter().render(&hostile(report));
        std::fs::write(dir.join(format!("{}-hostile.html", case.name)), &html).unwrap();
    }
}

/// Text from outside never reaches a page raw: with `HOSTILE` text in everything that came
/// from a campaign, a host or a tool, every case's page (tables, captions and the SVG
/// charts alike) holds no markup of it and no control character, and shows them as U+FFFD.
#[tokio::test]
async fn hostile_text_is_escaped_and_its_control_characters_shown_everywhere() {
    let tmp = tempfile::tempdir().unwrap();
    for case in cases() {
        let report = store_case(tmp.path(), &case).await;
        let html = Format::Html.exporter().render(&hostile(report));
        let name = &case.name;
        assert!(
            !html.contains("<i>"),
            "{name}: markup of a name reached the page"
        );
        let raw: Vec<(usize, char)> = html
            .char_indices()
            .filter(|(_, c)| (*c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r'))
            .collect();
        assert!(
            raw.is_empty(),
            "{name}: control characters at {:?}, e.g. …{}…",
            &raw[..raw.len().min(5)],
            &html[raw[0].0.saturating_sub(80)..raw[0].0]
        );
        assert!(html.contains("\u{FFFD}[31m"), "{name}: shown as U+FFFD");
    }
}
