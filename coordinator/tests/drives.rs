//! The drive ledger and drive health (issue 31): health read with smartctl before and after a
//! run and judged by `qualify: { health }`; the ledger filled from the agents' inventories,
//! one drive over hosts and firmware, the same on two coordinators of one PostgreSQL store;
//! `platter drives`, `platter drive` and `platter qualification` as a user runs them.

mod common;

use std::path::Path;

use common::{platter, Loop};
use platter::report::ledger::{self, Question};
use platter::store::ledger::Identity;
use platter::store::Store;
use platter_proto::inventory::Device;
use platter_proto::model::HostName;

/// The Samsung 860 EVO's real `smartctl --json -x` output (agent/tests/fixtures/smartctl),
/// and the same drive after a run that grew two reported uncorrectable errors (attribute
/// 187, media errors) and warmed it to 44 °C.
fn readings(dir: &Path) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../agent/tests/fixtures/smartctl/ata-ssd-samsung-860evo.json");
    let before: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let mut after = before.clone();
    let table = after["ata_smart_attributes"]["table"]
        .as_array_mut()
        .unwrap();
    let a187 = table.iter_mut().find(|a| a["id"] == 187).unwrap();
    assert_eq!(a187["raw"]["value"], 0, "the fixture's drive had none");
    a187["raw"]["value"] = 2.into();
    a187["raw"]["string"] = "2".into();
    after["temperature"]["current"] = 44.into();
    std::fs::write(dir.join("before.json"), before.to_string()).unwrap();
    std::fs::write(dir.join("after.json"), after.to_string()).unwrap();
}

/// A directory holding a fake `smartctl`: its first reading of a drive is `before.json`, every
/// later one `after.json`; `--version` says it is a fake.
fn fake_smartctl(dir: &Path) -> std::path::PathBuf {
    readings(dir);
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\n\
         case \"$1\" in --version) echo 'smartctl 7.3 2022-02-28 r5338 (fake for tests)'; exit 0;; esac\n\
         echo \"$@\" >> {d}/calls\n\
         if [ -e {d}/read-once ]; then cat {d}/after.json; else touch {d}/read-once; cat {d}/before.json; fi\n",
        d = dir.display()
    );
    let path = bin.join("smartctl");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

fn campaign(dir: &Path, drive: &str, health: &str) -> std::path::PathBuf {
    common::write(
        dir,
        "health.yaml",
        &format!(
            r#"name: drive-health
devices: {{ path: {drive} }}
storage: {{ fs: ext4 }}
workload:
  fsync: {{ path: "${{mount}}/f.dat", size: 4096, count: 50, sync: fdatasync }}
repeat: 3
report:
  qualify:
    metrics: ["latency.p99 < 10s"]
    health: {health}
"#
        ),
    )
}

const LIMITS: &str =
    "{ media_errors: { max_increase: 0 }, temperature: { max: 70C }, available_spare: { min: 10% } }";

fn path_with(bin: &Path) -> String {
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn a_drive_that_grew_media_errors_fails_its_health_limit_naming_the_serial() {
    if !common::root_or_skip("it formats a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bin = fake_smartctl(dir);
    let drive = Loop::new(dir, "drive.img", 64);
    let file = campaign(dir, &drive.path, LIMITS);
    let out = platter()
        .current_dir(dir)
        .env("PATH", path_with(&bin))
        .args(["run", "--allow-device", &drive.path])
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "a qualification FAIL: {stdout}");
    assert!(
        stdout.contains(&format!(
            "FAIL {} {} [serial S3YZNB0KB00864E]: health media_errors max_increase 0 (measured 0 → 2)",
            platter_agent::cli::hostname(),
            drive.path
        )),
        "{stdout}"
    );
    // The health section: the drive by smartctl's identity, before → after.
    assert!(stdout.contains("drive health (smartctl before → after the run)"));
    assert!(
        stdout.contains("Samsung SSD 860 EVO 500GB serial S3YZNB0KB00864E firmware RVT02B6Q: media_errors 0 → 2 (+2) FLAGGED"),
        "{stdout}"
    );
    assert!(stdout.contains("temperature 36°C → 44°C"), "{stdout}");
    // smartctl was asked before the first measurement and after the last: twice.
    let calls = std::fs::read_to_string(dir.join("calls")).unwrap();
    assert_eq!(
        calls.lines().collect::<Vec<_>>(),
        [
            format!("--json=c -x {}", drive.path),
            format!("--json=c -x {}", drive.path)
        ]
    );

    // The same in JSON, HTML and JUnit.
    let db = dir.join("platter-data/platter.db");
    let report = |format: &str| {
        let out = platter()
            .args(["report", "--db"])
            .arg(&db)
            .args(["--format", format, "drive-health"])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let json: serde_json::Value = serde_json::from_str(&report("json")).unwrap();
    let h = &json["health"][0];
    assert_eq!(h["serial"], "S3YZNB0KB00864E");
    assert_eq!(h["readings"], 2);
    let media = h["deltas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["attribute"] == "media_errors")
        .unwrap();
    assert_eq!(
        (media["before"].as_f64(), media["after"].as_f64()),
        (Some(0.0), Some(2.0))
    );
    assert_eq!(media["flagged"], true);
    // The drive does not report available spare (an NVMe attribute): not judged, said so.
    assert!(json["health_not_judged"][0]
        .as_str()
        .unwrap()
        .ends_with("health available_spare min 10% not judged: the drive does not report it"));
    let html = report("html");
    assert!(html.contains("<section id=\"health\">"), "{html}");
    assert!(html.contains("<tr class=\"fail\"><td>media_errors</td><td>0</td><td>2</td>"));
    let junit = report("junit");
    assert!(junit.contains("fails health media_errors max_increase 0: measured 0 → 2"));

    // The ledger: the loop device (no serial of its own) is tracked per host; its run, the
    // verdicts and the health it read are on it.
    let host = platter_agent::cli::hostname();
    let name = drive.path.trim_start_matches("/dev/");
    let id = format!("{host}/{name}");
    let drives = common::run_ok(
        platter()
            .current_dir(dir)
            .args(["drives", "--format", "json"]),
    );
    let drives: serde_json::Value = serde_json::from_slice(&drives.stdout).unwrap();
    let d = drives
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == id.as_str())
        .unwrap_or_else(|| panic!("{id} in {drives}"));
    assert_eq!(
        (d["runs"].as_u64(), d["failed"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(d["note"], "no serial: tracked per host");
    assert_eq!(d["health"]["reading"]["media_errors"], 2);
    let failed = common::run_ok(platter().current_dir(dir).args(["drives", "--failed"]));
    assert!(String::from_utf8_lossy(&failed.stdout).contains(&id));
    // By the serial the FAIL names (smartctl's: the kernel has none for a loop device).
    let by_serial = common::run_ok(
        platter()
            .current_dir(dir)
            .args(["drive", "S3YZNB0KB00864E"]),
    );
    assert!(String::from_utf8_lossy(&by_serial.stdout).starts_with(&format!("drive {id} (host)")));
    let one = common::run_ok(platter().current_dir(dir).args(["drive", &id]));
    let text = String::from_utf8_lossy(&one.stdout);
    assert!(
        text.contains(
            "FAIL [serial S3YZNB0KB00864E]: health media_errors max_increase 0 (measured 0 → 2)"
        ),
        "{text}"
    );
    assert!(
        text.contains("PASS [serial S3YZNB0KB00864E]: health temperature max 70°C (measured 44°C)")
    );
    // The model's qualification names the failure with its serial and campaign, and fails.
    let q = platter()
        .current_dir(dir)
        .args(["qualification", "Samsung SSD 860 EVO 500GB"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&q.stdout);
    assert_eq!(q.status.code(), Some(1), "{text}");
    assert!(
        text.starts_with("Samsung SSD 860 EVO 500GB: qualified on 0 of 1 judged drive(s) across 1 host(s) and 1 controller type(s); 1 drive(s) FAIL (serial S3YZNB0KB00864E, campaign drive-health ("),
        "{text}"
    );
    let csv = common::run_ok(
        platter()
            .current_dir(dir)
            .args(["drive", &id, "--format", "csv"]),
    );
    let csv = String::from_utf8_lossy(&csv.stdout);
    assert_eq!(csv.lines().count(), 2, "{csv}");
    assert!(csv.lines().nth(1).unwrap().contains(",drive-health,"));
    // No model: exit 2, what to give.
    let empty = platter()
        .current_dir(dir)
        .args(["qualification", ""])
        .output()
        .unwrap();
    assert_eq!(empty.status.code(), Some(2));
    // A drive nobody has: exit 2, what to give instead.
    let none = platter()
        .current_dir(dir)
        .args(["drive", "nope"])
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stderr).contains("no drive \"nope\" in the ledger"));
}

#[test]
fn a_loop_device_says_its_health_is_not_readable_and_qualifies_on_performance() {
    if !common::root_or_skip("it formats a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let drive = Loop::new(dir, "drive.img", 64);
    let file = campaign(dir, &drive.path, LIMITS);
    // Whatever smartctl this machine has (the real one says it cannot read a loop device;
    // none at all is said too): never zeros, never a health verdict.
    let out = common::run_ok(
        platter()
            .current_dir(dir)
            .args(["run", "--allow-device", &drive.path])
            .arg(&file),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains(&format!("{}: health not readable: ", drive.path)))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains("is a loop device"), "{line}");
    assert!(stdout.contains("health limits not judged: health not readable"));
    assert!(stdout.contains("qualification: PASS (1 check"), "{stdout}");
    assert!(!stdout.contains("media_errors 0"), "{stdout}");
}

fn device(name: &str, serial: &str, firmware: &str, controller: &[&str]) -> Device {
    let mut d: Device = serde_json::from_value(serde_json::json!({
        "name": name, "path": format!("/dev/{name}"), "major_minor": "8:16",
        "vendor": "ATA", "model": "INTEL SSDSC2BW120A4", "serial": serial,
        "firmware": firmware, "size_bytes": 120_034_123_776u64, "rotational": false,
        "transport": "ata", "controller": controller, "pci_address": "0000:00:1f.2",
        "by_id": [], "by_path": [], "write_cache": "write_back",
        "write_cache_source": "scsi_disk cache_type", "partitions": [], "mounted": [],
        "holders": [], "holds_root": false, "backing_file": null,
    }))
    .unwrap();
    d.wwn = String::new();
    d
}

fn host(name: &str) -> HostName {
    name.to_string().into()
}

/// A drive seen on rc66, then on flygecko behind another controller, then with new
/// firmware: one drive, three sightings, the move and the firmware change as events; a
/// loop device without a serial is a drive per host. Both engines.
#[tokio::test]
async fn one_drive_over_two_hosts_and_a_firmware_change_is_one_history() {
    let tmp = tempfile::tempdir().unwrap();
    for store in platter::store::testing::stores(tmp.path()) {
        let sdb = device("sdb", "CVWL4211", "DL2B", &["sd", "ahci"]);
        let mut lo = device("loop3", "", "", &[]);
        lo.model = String::new();
        lo.transport = platter_proto::inventory::Transport::Loop;
        store
            .agent_seen(
                &host("rc66"),
                "b1",
                "0.1.0",
                &[sdb.clone(), lo.clone()],
                &[],
            )
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        // Gone from rc66 before flygecko sees it: a move.
        store
            .agent_devices(&host("rc66"), std::slice::from_ref(&lo))
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let moved = device("sdc", "CVWL4211", "DL2B", &["sd", "mpt3sas"]);
        store
            .agent_seen(&host("flygecko"), "b2", "0.1.0", &[moved, lo], &[])
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let flashed = device("sdc", "CVWL4211", "DL2C", &["sd", "mpt3sas"]);
        store
            .agent_devices(&host("flygecko"), std::slice::from_ref(&flashed))
            .await
            .unwrap();
        // Seen again as it was: no new sighting.
        store
            .agent_devices(&host("flygecko"), &[flashed])
            .await
            .unwrap();

        let all = store.ledger().unwrap();
        let ids: Vec<&str> = all.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "flygecko/loop3",
                "rc66/loop3",
                "INTEL SSDSC2BW120A4/CVWL4211"
            ],
            "a drive without a serial is one per host (by model, then id)"
        );
        let Ok(d) = ledger::find(&store, "CVWL4211").unwrap() else {
            panic!("found by serial")
        };
        assert_eq!(d.sightings.len(), 3);
        let detail = ledger::detail(&store, &d).unwrap();
        assert_eq!(detail.events.len(), 2, "{:?}", detail.events);
        assert!(
            detail.events[0].ends_with(
                "moved from rc66 (/dev/sdb behind sd>ahci at 0000:00:1f.2) to flygecko (/dev/sdc behind sd>mpt3sas at 0000:00:1f.2)"
            ),
            "{:?}",
            detail.events
        );
        assert!(detail.events[1].ends_with("firmware DL2B → DL2C (on flygecko)"));
        assert_eq!(detail.drive.hosts, ["rc66", "flygecko"]);
        assert_eq!(detail.drive.firmware, "DL2C");
        assert_eq!(detail.runs, []);
        // Filters: by model part, firmware seen, host.
        let f = |filter: ledger::Filter| -> Vec<String> {
            ledger::drives(&store, &filter)
                .unwrap()
                .into_iter()
                .map(|d| d.id)
                .collect()
        };
        let by_model = f(ledger::Filter {
            model: Some("ssdsc2bw".into()),
            ..Default::default()
        });
        assert_eq!(by_model, ["INTEL SSDSC2BW120A4/CVWL4211"]);
        let old_firmware = f(ledger::Filter {
            firmware: Some("DL2B".into()),
            ..Default::default()
        });
        assert_eq!(old_firmware, ["INTEL SSDSC2BW120A4/CVWL4211"]);
        assert_eq!(
            f(ledger::Filter {
                host: Some("rc66".into()),
                ..Default::default()
            }),
            ["rc66/loop3", "INTEL SSDSC2BW120A4/CVWL4211"]
        );
        assert!(f(ledger::Filter {
            failed: true,
            ..Default::default()
        })
        .is_empty());
        // The same answer as a document, as `--format json` and `/api/v1` give it, and
        // as the message the coordinator sends the CLI.
        let question = Question::Drive("CVWL4211".into());
        let answer = ledger::answer(&store, &question).unwrap();
        let back: ledger::DriveDetail = serde_json::from_str(&answer.to_json()).unwrap();
        assert_eq!(back, detail);
        let mut wire = platter::views::ledger_to_pb(&answer);
        assert_eq!(
            platter::views::ledger_of(wire.clone(), &question).unwrap(),
            answer
        );
        wire.answer = None;
        let old = platter::views::ledger_of(wire, &question).unwrap();
        assert_eq!(old, answer, "an older coordinator's document");
    }
}

/// Identities that do not tell one drive from another are not taken for one drive that
/// moved: a virtio disk three agents of one machine see, a serial without a model, a
/// placeholder serial, a WWN of zeros; and one identity live on two hosts at once is
/// shared or not unique, while one gone from a host before another sees it moved. Both
/// engines.
#[tokio::test]
async fn identities_that_do_not_name_one_drive_are_tracked_per_host_and_said_so() {
    use platter_proto::inventory::Transport;
    let tmp = tempfile::tempdir().unwrap();
    for store in platter::store::testing::stores(tmp.path()) {
        let mut virtio = device("vda", "overlayblk", "", &["virtio_blk"]);
        virtio.model = String::new();
        virtio.transport = Transport::Virtio;
        let mut no_model = device("sdb", "S3Z9NB0K", "", &["sd", "ahci"]);
        no_model.model = String::new();
        let placeholder = device("sdc", "0123456789ABCDEF", "1.0", &["sd", "uas"]);
        let mut zero_wwn = device("sdd", "WD-WCC4N1234567", "82.00A82", &["sd", "ahci"]);
        zero_wwn.model = "WDC WD40EFRX-68N32N0".into();
        zero_wwn.wwn = "naa.0000000000000000".into();
        let dual = device("sde", "S2TANX0H", "DL2B", &["sd", "mpt3sas"]);
        let all = [virtio, no_model, placeholder, zero_wwn, dual];
        // Three agents of one machine report within the same minute, each still listing
        // everything when the next one does.
        for h in ["rcmonster", "rc66", "flygecko"] {
            store
                .agent_seen(&host(h), "b1", "0.1.0", &all, &[])
                .await
                .unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        }
        let ledger = store.ledger().unwrap();
        let by_id = |id: &str| ledger.iter().find(|d| d.id == id);
        for h in ["rcmonster", "rc66", "flygecko"] {
            for (name, why) in [
                ("vda", "virtual disk (virtio): tracked per host"),
                (
                    "sdb",
                    "serial \"S3Z9NB0K\" without a model: tracked per host",
                ),
                (
                    "sdc",
                    "placeholder serial \"0123456789ABCDEF\": tracked per host",
                ),
            ] {
                let d = by_id(&format!("{h}/{name}")).unwrap_or_else(|| panic!("{h}/{name}"));
                assert_eq!(d.identity, Identity::Host);
                assert_eq!(d.note, why);
                assert_eq!(d.shared(), None);
                let detail = ledger::detail(&store, d).unwrap();
                assert_eq!(detail.events, Vec::<String>::new());
                assert_eq!(detail.drive.note, why);
            }
        }
        // A WWN of zeros names no drive; its model and serial do.
        let wd = by_id("WDC WD40EFRX-68N32N0/WD-WCC4N1234567").expect("keyed by model and serial");
        assert_eq!(wd.identity, Identity::Serial);
        assert!(by_id("naa.0000000000000000").is_none());
        // Live on three hosts at once: shared or not unique, never a move.
        let dual = by_id("INTEL SSDSC2BW120A4/S2TANX0H").unwrap();
        let shared = dual.shared().expect("shared");
        assert_eq!(
            shared.hosts.iter().map(|h| h.as_str()).collect::<Vec<_>>(),
            ["flygecko", "rc66", "rcmonster"]
        );
        let detail = ledger::detail(&store, dual).unwrap();
        assert!(
            detail.events.iter().all(|e| !e.contains("moved")),
            "{:?}",
            detail.events
        );
        assert!(
            detail.drive.note.starts_with(
                "shared or not unique: live on flygecko and rc66 and rcmonster at once since "
            ),
            "{}",
            detail.drive.note
        );
        assert_eq!(
            ledger.len(),
            3 * 3 + 2,
            "{:?}",
            ledger.iter().map(|d| &d.id).collect::<Vec<_>>()
        );

        // A drive gone from one host before another sees it moved.
        let mover = device("sdf", "BTWL5123", "G2010150", &["sd", "ahci"]);
        store
            .agent_devices(&host("rc66"), std::slice::from_ref(&mover))
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        store.agent_devices(&host("rc66"), &[]).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        store
            .agent_devices(&host("flygecko"), std::slice::from_ref(&mover))
            .await
            .unwrap();
        let ledger = store.ledger().unwrap();
        let d = ledger
            .iter()
            .find(|d| d.id == "INTEL SSDSC2BW120A4/BTWL5123")
            .unwrap();
        assert_eq!(d.shared(), None);
        let detail = ledger::detail(&store, d).unwrap();
        assert_eq!(detail.events.len(), 1, "{:?}", detail.events);
        assert!(
            detail.events[0].contains("moved from rc66 (/dev/sdf"),
            "{:?}",
            detail.events
        );
        assert_eq!(detail.drive.note, "");
    }
}

/// Two coordinators on one PostgreSQL store, agents reporting to either at once: one ledger,
/// the same from both.
#[tokio::test]
async fn two_coordinators_on_postgresql_build_one_ledger() {
    let Some(url) = platter::store::testing::postgres_url() else {
        return;
    };
    let location = platter::store::testing::fresh_postgres(&url);
    let a = Store::open_at(&location).unwrap();
    let b = Store::open_at(&location).unwrap();
    let mut tasks = Vec::new();
    for i in 0..20 {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            // Every host has its own drive and the shared one a drive shelf moves around.
            let own = device("sdb", &format!("OWN{i:02}"), "DL2B", &["sd", "ahci"]);
            let shared = device("sdc", "SHARED", "DL2B", &["sd", "ahci"]);
            store
                .agent_seen(
                    &host(&format!("h{i:02}")),
                    "b",
                    "0.1.0",
                    &[own, shared],
                    &[],
                )
                .await
                .unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let (la, lb) = (a.ledger().unwrap(), b.ledger().unwrap());
    assert_eq!(la, lb);
    assert_eq!(la.len(), 21);
    let shared = la.iter().find(|d| d.serial == "SHARED").unwrap();
    assert_eq!(shared.sightings.len(), 20);
}

/// The console's drives table and a drive's page, and their JSON twins, say what the CLI
/// says; a drive nobody has is a 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_lists_the_drives_and_shows_one() {
    use common::web::{add_user, call, http_addr, sign_in, urlencode};
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    {
        let store = Store::open(&dir.join("coordinator.db")).unwrap();
        let sdb = device("sdb", "CVWL4211", "DL2B", &["sd", "ahci"]);
        store
            .agent_seen(&host("rc66"), "b1", "0.1.0", &[sdb], &[])
            .await
            .unwrap();
        // Sightings are ordered by when first seen (to the millisecond): one later, after
        // rc66 listed its drives without it (a move).
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        store.agent_devices(&host("rc66"), &[]).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let moved = device("sdc", "CVWL4211", "DL2C", &["sd", "mpt3sas"]);
        store
            .agent_seen(&host("flygecko"), "b2", "0.1.0", &[moved], &[])
            .await
            .unwrap();
    }
    let (mut coordinator, port) = common::serve_with(dir, &["--http", "127.0.0.1:0"]);
    // The CLI asks the coordinator (Control.Ledger) when one is named: the same documents.
    let listed = common::operator_json(dir, port, &["drives", "--format", "json"]);
    assert_eq!(listed[0]["id"], "INTEL SSDSC2BW120A4/CVWL4211");
    assert_eq!(listed[0]["hosts"], serde_json::json!(["rc66", "flygecko"]));
    let shown = common::run_ok(common::operator(dir, port).args(["drive", "CVWL4211"]));
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("firmware DL2B → DL2C (on flygecko)"),
        "{shown}"
    );
    let q = common::operator(dir, port)
        .args(["qualification", "INTEL SSDSC2BW120A4"])
        .output()
        .unwrap();
    assert_eq!(q.status.code(), Some(5), "nothing judged is not a PASS");
    assert!(String::from_utf8_lossy(&q.stdout).starts_with(
        "INTEL SSDSC2BW120A4: not qualified: 1 drive(s) in the ledger, none judged by a verdict"
    ));
    let unknown = common::operator(dir, port)
        .args(["drive", "nope"])
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no drive \"nope\" in the ledger"));
    let http = http_addr(dir);
    add_user(dir, "vera", "viewer", "vera's long password");
    let vera = sign_in(&http, "vera", "vera's long password");
    let cookie = [("Cookie", vera.cookie.as_str())];
    let id = "INTEL SSDSC2BW120A4/CVWL4211";
    let page = call(&http, "GET", "/drives?model=intel", &cookie, "");
    assert_eq!(page.status, 200, "{page:?}");
    assert!(
        page.body
            .contains("<a href=\"/drives/INTEL%20SSDSC2BW120A4%2FCVWL4211\">"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("<td>rc66, flygecko</td>"),
        "{}",
        page.body
    );
    let none = call(&http, "GET", "/drives?model=samsung", &cookie, "");
    assert!(none.body.contains("id=\"no-drives\""));
    let one = call(
        &http,
        "GET",
        &format!("/drives/{}", urlencode(id)),
        &cookie,
        "",
    );
    assert_eq!(one.status, 200, "{one:?}");
    assert!(
        one.body.contains("firmware DL2B → DL2C (on flygecko)"),
        "{}",
        one.body
    );
    assert!(one.body.contains("moved from rc66"), "{}", one.body);
    let json = call(&http, "GET", "/api/v1/drives/CVWL4211", &cookie, "");
    assert_eq!(json.status, 200);
    let d: serde_json::Value = serde_json::from_str(&json.body).unwrap();
    assert_eq!(d["drive"]["id"], id);
    assert_eq!(d["sightings"].as_array().unwrap().len(), 2);
    let list = call(&http, "GET", "/api/v1/drives?host=flygecko", &cookie, "");
    let list: serde_json::Value = serde_json::from_str(&list.body).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1);
    let missing = call(&http, "GET", "/api/v1/drives/nope", &cookie, "");
    assert_eq!(missing.status, 404);
    assert!(
        missing.body.contains("no drive \\\"nope\\\" in the ledger"),
        "{}",
        missing.body
    );
    coordinator.kill9();
}

/// `platter inventory --health`: this machine's drives read now, as a plan reads them, one
/// reading each (no before and after); the same readings as JSON.
#[test]
fn inventory_reads_each_drives_health_on_request() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bin = fake_smartctl(dir);
    // Every reading is the "before" fixture: the fake reads "after" only once told to.
    std::fs::remove_file(dir.join("after.json")).unwrap();
    std::fs::copy(dir.join("before.json"), dir.join("after.json")).unwrap();
    let json = common::run_ok(platter().env("PATH", path_with(&bin)).args([
        "inventory",
        "--health",
        "--format",
        "json",
    ]));
    let read: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    // (Other tests attach and detach loop devices meanwhile: no count is compared.)
    let read = read.as_array().unwrap();
    assert!(!read.is_empty());
    for r in read {
        assert_eq!(r["reading"]["media_errors"], 0, "{r}");
        assert_eq!(r["reading"]["tool"], "smartctl 7.0");
    }
    let text = common::run_ok(
        platter()
            .env("PATH", path_with(&bin))
            .args(["inventory", "--health"]),
    );
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.lines().count() > 0, "{text}");
    for line in text.lines() {
        assert!(line.contains(": media_errors 0; "), "{line}");
        assert!(
            !line.contains('→') && !line.contains("after the run"),
            "{line}"
        );
    }
    let both = platter()
        .args([
            "inventory",
            "--health",
            "--coordinator",
            "https://127.0.0.1:1",
        ])
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(2));
}

/// A fake smartctl's readings for one run of a drive whose reallocated sector count grows by
/// two over each run: `before` at the run's first reading, `before + 2` at every later one.
fn reallocating(dir: &Path, before: u64) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../agent/tests/fixtures/smartctl/ata-ssd-samsung-860evo.json");
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    for (file, value) in [("before.json", before), ("after.json", before + 2)] {
        let mut reading = fixture.clone();
        let table = reading["ata_smart_attributes"]["table"]
            .as_array_mut()
            .unwrap();
        let a5 = table.iter_mut().find(|a| a["id"] == 5).unwrap();
        a5["raw"]["value"] = value.into();
        a5["raw"]["string"] = value.to_string().into();
        std::fs::write(dir.join(file), reading.to_string()).unwrap();
    }
    // The next run's first reading is `before.json` again.
    let _ = std::fs::remove_file(dir.join("read-once"));
}

/// Issue 49's baseline health: a drive gaining two reallocated sectors in each of six runs
/// never trips a limit of 3 over a run, and trips `since_baseline` 8 at the fifth run (10
/// since its first reading); the report names the baseline's value, date and run, and the
/// drive's page has its baseline, the same verdicts, and every flag sticky but the last
/// (which no reading has followed yet).
#[test]
fn a_drive_reallocating_a_little_each_run_trips_its_limit_since_baseline_at_the_fifth() {
    if !common::root_or_skip("it formats a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bin = fake_smartctl(dir);
    let drive = Loop::new(dir, "drive.img", 64);
    let file = campaign(
        dir,
        &drive.path,
        "{ reallocated_sectors: { max_increase: 3 }, since_baseline: { reallocated_sectors: { max_increase: 8 } } }",
    );
    let host = platter_agent::cli::hostname();
    let db = dir.join("platter-data/platter.db");
    let mut first_campaign = String::new();
    for run in 1..=6u64 {
        reallocating(dir, 2 * (run - 1));
        let out = platter()
            .current_dir(dir)
            .env("PATH", path_with(&bin))
            .args(["run", "--allow-device", &drive.path])
            .arg(&file)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let json = platter()
            .args(["report", "--db"])
            .arg(&db)
            .args(["--format", "json", "drive-health"])
            .output()
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        if run == 1 {
            first_campaign = json["campaign_id"].as_str().unwrap().to_string();
        }
        let verdict = |threshold: &str| {
            json["verdicts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["threshold"] == threshold)
                .unwrap_or_else(|| panic!("run {run}: no verdict {threshold}: {stdout}"))
                .clone()
        };
        let within = verdict("health reallocated_sectors max_increase 3");
        assert_eq!(within["pass"], true, "run {run}: {within}");
        assert_eq!(within["value"], 2.0, "run {run}");
        let since = verdict("health reallocated_sectors since baseline max_increase 8");
        assert_eq!(since["value"], (2 * run) as f64, "run {run}: {since}");
        let tripped = run >= 5;
        assert_eq!(since["pass"], !tripped, "run {run}: {since}");
        assert_eq!(
            out.status.code(),
            Some(if tripped { 1 } else { 0 }),
            "run {run}: {stdout}"
        );
        // The report's health section: the baseline's value, date and run.
        let baseline = &json["health"][0]["baseline"];
        assert_eq!(
            baseline["campaign_id"],
            first_campaign.as_str(),
            "run {run}"
        );
        assert_eq!(baseline["reading"]["reallocated_sectors"], 0, "run {run}");
        assert_eq!(baseline["host"], host.as_str());
        let since_text = format!(
            "since baseline ({}, drive-health ({first_campaign}) on {host}): reallocated_sectors 0 → {} (+{})",
            baseline["submitted"].as_str().unwrap(),
            2 * run,
            2 * run
        );
        assert!(stdout.contains(&since_text), "run {run}: {stdout}");
        if tripped {
            assert!(
                stdout.contains(&format!(
                    "FAIL {host} {} [serial S3YZNB0KB00864E]: health reallocated_sectors since baseline max_increase 8 (measured 0 → {} since baseline of {}, drive-health ({first_campaign}) on {host})",
                    drive.path,
                    2 * run,
                    baseline["submitted"].as_str().unwrap(),
                )),
                "run {run}: {stdout}"
            );
        }
        assert!(
            !stdout.contains(&format!(
                "FAIL {host} {} [serial S3YZNB0KB00864E]: health reallocated_sectors max_increase 3",
                drive.path
            )),
            "run {run}: the limit over a run never trips: {stdout}"
        );
    }

    // The drive's page: its baseline and what changed since, the verdicts since the baseline
    // in each run, and each run's flag sticky (the next run began where it ended) but the
    // last, which no reading has followed.
    let name = drive.path.trim_start_matches("/dev/");
    let id = format!("{host}/{name}");
    let json = common::run_ok(
        platter()
            .current_dir(dir)
            .args(["drive", &id, "--format", "json"]),
    );
    let d: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(d["baseline"]["campaign_id"], first_campaign.as_str());
    assert_eq!(d["baseline"]["reading"]["reallocated_sectors"], 0);
    assert_eq!(
        d["baseline"]["since"],
        serde_json::json!(["reallocated_sectors 0 → 12 (+12)"])
    );
    let runs = d["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 6, "{d}");
    let states: Vec<&str> = runs
        .iter()
        .map(|r| r["flags"][0]["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        [
            "sticky",
            "sticky",
            "sticky",
            "sticky",
            "sticky",
            "unconfirmed"
        ]
    );
    assert_eq!((d["drive"]["failed"].as_u64()), Some(2), "{d}");
    let text = common::run_ok(platter().current_dir(dir).args(["drive", &id]));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!(
            "  health baseline: {}, drive-health ({first_campaign}) on {host}; since: reallocated_sectors 0 → 12 (+12)",
            d["baseline"]["submitted"].as_str().unwrap()
        )),
        "{text}"
    );
    assert!(
        text.contains("FAIL [serial S3YZNB0KB00864E]: health reallocated_sectors since baseline max_increase 8 (measured 0 → 10 since baseline of"),
        "{text}"
    );
    assert!(
        text.contains(
            "    flagged reallocated_sectors 0 → 2 (+2): sticky: the next reading still shows it"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "    flagged reallocated_sectors 10 → 12 (+2): unconfirmed: not read again since"
        ),
        "{text}"
    );
}

/// Stores a campaign (`generation` of one file) whose one plan on h1 took `health` at its
/// start and `later` at its end, as an agent sends them.
async fn run_reading(
    store: &Store,
    generation: u32,
    health: Vec<platter_proto::provenance::DriveHealth>,
    later: Vec<platter_proto::provenance::DriveHealth>,
) -> String {
    use platter_proto::model::{Record, RecordKind};
    use platter_proto::provenance::Provenance;
    let yaml = "name: readings\nhosts: { names: [h1] }\nworkload: { command: { run: \"true\" } }\n";
    let campaign = platter::spec::parse("readings.yaml", yaml).unwrap();
    let planned =
        platter::planning::planner::plan(&campaign, "", "seed", generation, &Default::default())
            .unwrap();
    store
        .insert_campaign(&planned, "readings.yaml", yaml)
        .unwrap();
    let plan = &planned.plans[0];
    let snapshot = |seq: u64, trigger: &str, health| Record {
        seq,
        kind: RecordKind::Provenance {
            plan_id: plan.id.clone(),
            step_index: 0,
            facts: Box::new(Provenance {
                trigger: trigger.into(),
                health,
                ..Default::default()
            }),
        },
    };
    let records = vec![
        Record {
            seq: 1,
            kind: RecordKind::PlanAccepted {
                plan_id: plan.id.clone(),
            },
        },
        snapshot(2, "plan_start", health),
        snapshot(3, "plan_end", later),
    ];
    store.write_records(&plan.host, records).await.unwrap();
    // Campaigns are ordered by when they were submitted, to the millisecond.
    tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    planned.id.to_string()
}

fn reading_of(
    serial: &str,
    path: &str,
    reallocated: Option<u64>,
) -> platter_proto::provenance::DriveHealth {
    platter_proto::provenance::DriveHealth {
        path: path.into(),
        model: if serial.is_empty() { "" } else { "M" }.into(),
        serial: serial.into(),
        unreadable: if reallocated.is_none() {
            "smartctl not found on the agent's PATH".into()
        } else {
            String::new()
        },
        reading: reallocated.map(|n| platter_proto::provenance::HealthReading {
            reallocated_sectors: Some(n),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A drive's baseline is its first reading in the store, whichever campaign took it: not a
/// snapshot that could not read it, not another drive whose serial a LIKE wildcard would
/// match, and by host and path for a drive without a serial. Both engines.
#[tokio::test]
async fn a_drives_baseline_is_its_first_reading_in_any_campaign() {
    use platter::store::baseline::WhichDrive;
    let tmp = tempfile::tempdir().unwrap();
    for store in platter::store::testing::stores(tmp.path()) {
        let which = |serial, path| WhichDrive {
            serial,
            model: "M",
            host: "h1",
            path,
        };
        assert_eq!(store.drive_baseline(which("S_1", "")).unwrap(), None);
        // The first campaign could not read S_1 and read SX1, whose serial `S_1` matches as
        // a LIKE pattern; the loop device has no serial.
        let unread = run_reading(
            &store,
            1,
            vec![
                reading_of("S_1", "/dev/sdb", None),
                reading_of("SX1", "/dev/sdc", Some(40)),
                reading_of("", "/dev/loop3", Some(7)),
            ],
            vec![reading_of("S_1", "/dev/sdb", None)],
        )
        .await;
        let first = run_reading(
            &store,
            2,
            vec![reading_of("S_1", "/dev/sdb", Some(4))],
            vec![reading_of("S_1", "/dev/sdb", Some(6))],
        )
        .await;
        run_reading(
            &store,
            3,
            vec![reading_of("S_1", "/dev/sdb", Some(6))],
            vec![reading_of("S_1", "/dev/sdb", Some(8))],
        )
        .await;
        let b = store.drive_baseline(which("S_1", "")).unwrap().unwrap();
        assert_eq!(b.campaign_id.as_str(), first);
        assert_eq!(b.host.as_str(), "h1");
        assert_eq!(b.reading.reallocated_sectors, Some(4));
        let lo = store
            .drive_baseline(which("", "/dev/loop3"))
            .unwrap()
            .unwrap();
        assert_eq!(
            (lo.campaign_id.as_str(), lo.reading.reallocated_sectors),
            (unread.as_str(), Some(7))
        );
        let elsewhere = WhichDrive {
            host: "h2",
            ..which("", "/dev/loop3")
        };
        assert_eq!(store.drive_baseline(elsewhere).unwrap(), None);
    }
}
