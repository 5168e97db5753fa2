//! The API's document, `/api/v1/openapi.json`, against the API's real answers, field by
//! field (issue 47). A coordinator serves a fleet with something of everything: three
//! agents with labels, one an outlier; a series run twice over them with a warm-up, a
//! baseline host, verdicts that fail and a pivot; a series that regressed; an fsync loop
//! with adaptive repetition; runs cold, noisy and with an outlier; a failed step, a cell
//! without values, a refused plan; a campaign stored with values its tool could not time;
//! a trigger that fired runs and skipped one; a run cancelled through the API; API tokens
//! made and revoked; and, as root, runs on a loop device whose health a fake smartctl
//! reads (grown errors, an NVMe drive, and none). Every documented route is called, with
//! its refusals and mistakes, and every answer is checked against its route's schema for
//! its status: each field's type, the fields a schema requires, `nullable`, array items and
//! maps (`additionalProperties`); a field no schema declares fails. Then the other way:
//! every property the document declares must be in some answer, but those `UNSEEN` lists
//! with why. So a field the code adds, drops, renames or retypes fails here until the
//! document says so too; the test proves it on a copy of the document at its end.
//!
//! The checker is this file's own (`Checker`): no JSON Schema validator is in Cargo.lock,
//! and OpenAPI 3.0's schemas are a dialect of their own (`nullable`) anyway. It reads the
//! subset the document uses: `$ref` (into `components/schemas`), `type`, `properties`,
//! `required`, `nullable`, `items`, `minItems`/`maxItems`, `enum`, `additionalProperties`,
//! `allOf` (the parts' properties make one object), `oneOf` (exactly one matches) and
//! `anyOf` (one at least). It is stricter than OpenAPI: an object is closed unless it has
//! `additionalProperties`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use common::web::*;
use common::*;

/// Declared properties no answer of this test carries, each with why: states the test
/// cannot bring about on a machine of its own. A name is where the property is declared
/// (as `Checker` names it): `Schema.field`, `Schema.list[].field`, `Schema.map{}` for a
/// map's values; a name stands for what is declared under it too (`Partition`: its every
/// field).
const UNSEEN: &[(&str, &str)] = &[
    (
        "Drift",
        "a step or a ramp needs six runs of a line at least, and the test's series have two \
         (`report::history`'s tests and tests/history.rs bring them about)",
    ),
    (
        "StoreFault",
        "only while the store cannot commit (tests/store_faults.rs fills a tmpfs under it); \
         meanwhile every `store_fault` is null",
    ),
    (
        "SideValueAbsent",
        "a host without a cell of a configuration the others have: hosts that ran on \
         different numbers of drives (`devices:`), and the test has one drive",
    ),
    (
        "AdviceCoarseSplit",
        "said where the kernel splits CPU time by timer ticks; one that measures it \
         (virtual accounting) never has it",
    ),
    (
        "Partition",
        "no drive the test sees has partitions (the loop device it makes has none)",
    ),
    (
        "DriveSummary.wwn",
        "the ledger keys a drive by the WWN the kernel gives it: loop devices and virtio \
         disks have none",
    ),
    (
        "PeerGroup.controllers",
        "said when a controller's drives are slower as a whole; the peers stored here sit \
         behind one (tests/peers.rs has one that is)",
    ),
    (
        "TooFewRuns",
        "said of a ratio too few runs leave an estimate; bench's 5 runs a side over 4 \
         comparisons decide every line alone (tests/html_pages.rs's fleet has estimates)",
    ),
    ("Comparison.too_few_runs", "as TooFewRuns"),
    ("SideRatio.too_few_runs", "as TooFewRuns"),
    ("Findings.undecided", "as TooFewRuns"),
    ("Undecided", "as TooFewRuns"),
    (
        "Findings.estimates",
        "a question of one configuration whose ratio is an estimate; as TooFewRuns",
    ),
    (
        "PeerGroup.not_compared",
        "drives without steady state: the peers stored here ran no `prepare: { steady_state }`",
    ),
];

/// As `UNSEEN`, and these too when the test is not root: without a loop device to format
/// there is no drive under test, so no storage set up, no drive health read, no run on a
/// drive of the ledger and no tool version (the built-in fsync loop and commands have none).
const UNSEEN_WITHOUT_ROOT: &[(&str, &str)] = &[
    (
        "Provenance.storage",
        "storage is set up on a drive under test",
    ),
    ("Snapshot.storage_config", "a storage set-up's snapshot"),
    ("Snapshot.cells", "a storage set-up's snapshot"),
    ("StorageFacts", "storage is set up on a drive under test"),
    ("MountFacts", "storage is set up on a drive under test"),
    ("Provenance.health", "health is read from drives under test"),
    (
        "Provenance.tools",
        "smartctl, read for drives under test, is the only tool here",
    ),
    ("DriveHealth", "health is read from drives under test"),
    ("HealthReading", "health is read from drives under test"),
    ("Report.health", "health is read from drives under test"),
    (
        "Report.health_not_judged",
        "health limits judge drives under test",
    ),
    ("DriveHealthReport", "health is read from drives under test"),
    ("HealthDelta", "health is read from drives under test"),
    ("QualificationVerdict.measured", "said of health limits"),
    ("DriveSummary.health", "a run on the drive read its health"),
    ("LatestHealth", "a run on the drive read its health"),
    (
        "DriveSummary.note",
        "said of a drive without a serial: the loop device the test attaches as root",
    ),
    ("DriveDetail.runs[]", "a run on a drive of the ledger"),
    ("DriveDetail.baseline", "a run on the drive read its health"),
    ("DriveBaseline", "a run on the drive read its health"),
    (
        "HealthBaseline",
        "health limits since the baseline judge drives under test",
    ),
];

/// One answer of the API, as the test got it.
struct Seen {
    method: &'static str,
    /// The route as the document names it: `/api/v1/hosts/{host}`.
    route: &'static str,
    /// What was asked: `/api/v1/hosts/h1`.
    path: String,
    status: u16,
    content_type: String,
    body: String,
}

/// The API as a script calls it, each answer kept for the checks.
struct Api {
    http: String,
    /// `Authorization: Bearer …`, an admin's token, once made.
    bearer: String,
    seen: Vec<Seen>,
}

impl Api {
    /// `method path` with `headers`; the answer is kept as one of `route`'s.
    fn ask(
        &mut self,
        method: &'static str,
        route: &'static str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        let a = call(&self.http, method, path, headers, body);
        self.seen.push(Seen {
            method,
            route,
            path: path.to_string(),
            status: a.status,
            content_type: a.header("content-type").unwrap_or_default().to_string(),
            body: a.body.clone(),
        });
        a
    }

    /// `method path` with the admin's token; the answer must have `status`.
    fn with_token(
        &mut self,
        method: &'static str,
        route: &'static str,
        path: &str,
        body: &str,
        status: u16,
    ) -> Answer {
        let bearer = self.bearer.clone();
        let mut headers = vec![("Authorization", bearer.as_str())];
        if body.starts_with('{') {
            headers.push(("Content-Type", "application/json"));
        }
        let a = self.ask(method, route, path, &headers, body);
        assert_eq!(a.status, status, "{method} {path}: {a:?}");
        a
    }

    /// `GET path` with the admin's token: 200 and its JSON.
    fn get(&mut self, route: &'static str, path: &str) -> Value {
        let a = self.with_token("GET", route, path, "", 200);
        serde_json::from_str(&a.body).unwrap_or_else(|e| panic!("GET {path}: {e}: {}", a.body))
    }
}

/// Waits for campaign `id` to end.
fn ended(dir: &Path, id: &str) {
    let sql = format!("SELECT COUNT(*) FROM campaigns WHERE id = '{id}' AND state != 'running'");
    wait_in(
        dir,
        &format!("campaign {id} to end"),
        Duration::from_secs(180),
        || (query_i64(dir, &sql) == 1).then_some(()),
    );
}

/// A directory holding a fake `smartctl` for `host`'s PATH: it reads any drive as the drive
/// of `fixture` (a real `smartctl --json -x` output, agent/tests/fixtures/smartctl), and with
/// `grows` every reading after the first has two reported uncorrectable errors more (media
/// errors).
fn fake_smartctl(dir: &Path, host: &str, fixture: &str, grows: bool) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../agent/tests/fixtures/smartctl")
        .join(fixture);
    let before: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let mut after = before.clone();
    if grows {
        let table = after["ata_smart_attributes"]["table"]
            .as_array_mut()
            .unwrap();
        let a187 = table.iter_mut().find(|a| a["id"] == 187).unwrap();
        let grown = a187["raw"]["value"].as_u64().unwrap() + 2;
        a187["raw"]["value"] = grown.into();
        a187["raw"]["string"] = grown.to_string().into();
    }
    let home = dir.join(format!("smartctl-{host}"));
    let bin = home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    write(&home, "before.json", &before.to_string());
    write(&home, "after.json", &after.to_string());
    let script = write(
        &bin,
        "smartctl",
        &format!(
            "#!/bin/sh\n\
             case \"$1\" in --version) echo 'smartctl 7.3 2022-02-28 r5338 (fake)'; exit 0;; esac\n\
             if [ -e {d}/read-once ]; then cat {d}/after.json; else touch {d}/read-once; cat {d}/before.json; fi\n",
            d = home.display()
        ),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(script, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// Stores, before the coordinator starts, a campaign of a host that never connects whose
/// tool could not time every value (as bonnie++'s `+++++`): `wall` in one run of three, `sys`
/// in none. It runs as long as the test.
fn store_gaps(db: &Path) {
    use platter_proto::model::{Sample, StepKind};
    let yaml = concat!(
        "name: gaps\nhosts: { names: [ghost] }\nworkload: { command: { run: x } }\nrepeat: 3\n",
        "report: { pivot: { rows: [host], columns: [metric], metric: [wall, sys] } }\n",
    );
    let campaign = platter::spec::parse("gaps.yaml", yaml).unwrap();
    let store = platter::store::Store::open(db).unwrap();
    let planned =
        platter::planning::planner::plan(&campaign, "", store.id(), 1, &Default::default())
            .unwrap();
    store.insert_campaign(&planned, "gaps.yaml", yaml).unwrap();
    let plan = &planned.plans[0];
    let too_fast = "too fast to measure (bonnie++ printed +++++)";
    let sample = |metric: &str, value: Option<f64>| Sample {
        metric: metric.into(),
        value: value.unwrap_or(f64::NAN),
        unit: "s".into(),
        histogram: Vec::new(),
        missing: if value.is_some() {
            String::new()
        } else {
            too_fast.into()
        },
    };
    let records = plan
        .steps
        .iter()
        .filter(|s| matches!(s.kind, StepKind::Measure(_)))
        .enumerate()
        .map(|(i, step)| {
            let wall = (i != 1).then_some(0.5 + i as f64 / 100.0);
            let samples = vec![sample("wall", wall), sample("sys", None)];
            measured(i as u64 + 1, &plan.id, step, 1_000 + i as i64, samples)
        })
        .collect();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(store.write_records(&"ghost".to_string().into(), records))
        .unwrap();
}

/// Stores, before the coordinator starts, six nights of a model's drives on hosts that never
/// connect (`common::fleet`): 6 drives on one configuration, one of them 15% slower, and one
/// alone on another (too few peers to judge), for `/api/v1/models/{model}`.
fn store_peers(db: &Path) {
    use common::fleet::{drive, night, MODEL};
    use rand::SeedableRng;
    let store = platter::store::Store::open(db).unwrap();
    let fleet: Vec<_> = (0..7).map(|i| drive(i, MODEL, "ahci")).collect();
    let config: Vec<&str> = (0..7).map(|d| if d == 6 { "64k" } else { "4k" }).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(49);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for n in 0..6 {
        let level: Vec<f64> = (0..7)
            .map(|d| if d == 0 { 0.023 } else { 0.020 } * (1.0 + 0.01 * n as f64))
            .collect();
        runtime.block_on(night(&store, n, &fleet, &config, &level, &mut rng));
    }
}

#[test]
fn every_answer_of_the_api_is_as_the_openapi_document_says() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Without root, what needs a drive under test is left out (`UNSEEN_WITHOUT_ROOT`).
    let root = root_or_skip("a loop device for the runs on a drive; the rest is checked without");
    store_gaps(&dir.join("coordinator.db"));
    store_peers(&dir.join("coordinator.db"));
    // Flags as the coordinators raise them, one of each state (the runs below raise more).
    let flags = common::flagged::raise(&dir.join("coordinator.db"));
    let (mut coordinator, port) = serve_with(dir, &["--http", "127.0.0.1:0"]);
    let http = http_addr(dir);
    add_user(dir, "ada", "admin", "ada's long password");
    add_user(dir, "vic", "viewer", "vic's long password");

    // Three agents, each with a label (h3 slower by 50 ms a run: an outlier). As root each
    // may format a loop device, whose health h1 reads as a Micron 5300's that grows errors,
    // h3 as an NVMe drive's, and h2 cannot read (smartctl cannot read a loop device).
    let drive = root.then(|| Loop::new(dir, "drive.img", 64));
    let mut agents = Vec::new();
    for (host, extra, smartctl) in [
        ("h1", "0", Some(("ata-ssd-micron-5300.json", true))),
        ("h2", "0", None),
        ("h3", "0.05", Some(("nvme-samsung-pm9a1.json", false))),
    ] {
        write(dir, &format!("{host}.extra"), extra);
        let mut flags = vec!["--label".to_string(), format!("rack=r-{host}")];
        let mut env = Vec::new();
        if let Some(drive) = &drive {
            flags.extend(["--allow-device".to_string(), drive.path.clone()]);
            if let Some((fixture, grows)) = smartctl {
                let bin = fake_smartctl(dir, host, fixture, grows);
                let path = std::env::var("PATH").unwrap_or_default();
                env.push(("PATH", format!("{}:{path}", bin.display())));
            }
        }
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let args = agent_args(dir, port, host, &flags);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        agents.push(spawn_agent_with_env(dir, host, &args, &env));
    }
    wait_agents(dir, 3);

    let mut api = Api {
        http: http.clone(),
        bearer: String::new(),
        seen: Vec::new(),
    };
    // Nobody signed in: 401.
    api.ask("GET", "/api/v1/overview", "/api/v1/overview", &[], "");

    // Tokens made through the API by a signed-in admin (with the session's CSRF token): the
    // admin's own, which the rest of the test uses, a viewer's, and one to revoke.
    let ada = sign_in(&http, "ada", "ada's long password");
    let make_token = |api: &mut Api, account: &str, role: &str| -> (String, String) {
        let body =
            format!(r#"{{"account": "{account}", "role": "{role}", "label": "openapi {role}"}}"#);
        let a = api.ask(
            "POST",
            "/api/v1/tokens",
            "/api/v1/tokens",
            &[
                ("Cookie", &ada.cookie),
                ("X-CSRF-Token", &ada.csrf),
                ("Content-Type", "application/json"),
            ],
            &body,
        );
        assert_eq!(a.status, 201, "{a:?}");
        let v: Value = serde_json::from_str(&a.body).unwrap();
        (
            v["id"].as_str().unwrap().to_string(),
            v["secret"].as_str().unwrap().to_string(),
        )
    };
    let (_, admin) = make_token(&mut api, "ada", "admin");
    let (_, viewer) = make_token(&mut api, "vic", "viewer");
    let (spare, _) = make_token(&mut api, "vic", "viewer");
    api.bearer = format!("Bearer {admin}");
    let viewer = format!("Bearer {viewer}");

    // The campaigns.
    let d = dir.display();
    let bench = format!(
        "name: bench\nhosts: {{ names: [h1, h2, h3] }}\nmatrix:\n  ms: [\"02\", \"05\"]\n\
         workload: {{ command: {{ run: \"sleep 0.${{ms}}; sleep $(cat {d}/${{host}}.extra)\" }} }}\n\
         repeat: 5\nwarmup: 1\n\
         report:\n  baseline: {{ host: h1 }}\n  qualify: [\"wall.median < 10s\", \"wall.median < 1ms\"]\n\
         \x20 pivot: {{ rows: [host], columns: [ms, metric], metric: [wall, user] }}\n"
    );
    let drift = |seconds: &str| {
        format!(
            "name: drift\nhosts: {{ names: [h2] }}\nworkload: {{ command: {{ run: \"sleep {seconds}\" }} }}\nrepeat: 6\n"
        )
    };
    let fsync = format!(
        "name: fsync\nhosts: {{ names: [h3] }}\n\
         workload: {{ fsync: {{ path: \"{d}/fsync-${{host}}.dat\", count: 100 }} }}\n\
         repeat: {{ min: 5, max: 6, until: {{ metric: wall, ci: 50% }} }}\n\
         report: {{ pivot: {{ rows: [metric], columns: [host], metric: [wall, latency.p99] }} }}\n"
    );
    // h1 passes, h2 fails every run (a cell without values); few runs.
    let failing = "name: failing\nhosts: { names: [h1, h2] }\nmatrix: { code: [\"3\"] }\n\
                   workload: { command: { run: \"echo oops >&2; test ${host} = h1 || exit ${code}\" } }\nrepeat: 2\n";
    // A cold first run, a run far from the other nine, and runs all over the place.
    let shapes = "name: shapes\nhosts: { names: [h3] }\nmatrix: { shape: [cold, outlier, noisy] }\n\
                  workload: { command: { run: \"case ${shape}-${repetition} in cold-1|outlier-7) sleep 0.3;; \
                  noisy-*) sleep 0.0${repetition};; *) sleep 0.02;; esac\" } }\nrepeat: 10\n";
    // A program h3 does not have: its agent refuses the plan.
    let refused = "name: refused\nhosts: { names: [h3] }\nworkload: { command: { run: \"platter-no-such-program\" } }\nrepeat: 1\n";
    let submit_file =
        |name: &str, yaml: &str| submit(dir, port, &write(dir, &format!("{name}.yaml"), yaml));

    // Checked, then submitted, through the API; the rest through the CLI.
    let a = api.with_token(
        "POST",
        "/api/v1/campaigns",
        "/api/v1/campaigns?check=true&file_name=failing.yaml",
        failing,
        200,
    );
    assert!(a.body.contains("plan"), "{a:?}");
    let a = api.with_token(
        "POST",
        "/api/v1/campaigns",
        "/api/v1/campaigns",
        failing,
        201,
    );
    let failing: Value = serde_json::from_str(&a.body).unwrap();
    let failing = failing["campaign_id"].as_str().unwrap().to_string();
    let bench1 = submit_file("bench", &bench);
    let drift1 = submit_file("drift", &drift("0.02"));
    let fsync = submit_file("fsync", &fsync);
    let shapes = submit_file("shapes", shapes);
    let refused = submit_file("refused", refused);
    for id in [&failing, &bench1, &drift1, &fsync, &shapes, &refused] {
        ended(dir, id);
    }
    // As root, each host's run on the loop device in turn (one device: one at a time), h1's
    // judged by health limits.
    let mut disks = Vec::new();
    for host in ["h1", "h2", "h3"].into_iter().filter(|_| root) {
        let drive = &drive.as_ref().unwrap().path;
        let limits = if host == "h1" {
            "report:\n  qualify:\n    metrics: [\"latency.p99 < 10s\"]\n    \
             health: { media_errors: { max_increase: 0 }, temperature: { max: 70C }, available_spare: { min: 10% }, \
             since_baseline: { media_errors: { max_increase: 5 } }, ignore: [{ model: \"Micron_5300*\", attributes: [crc_errors] }] }\n"
        } else {
            ""
        };
        let id = submit_file(
            "disk",
            &format!(
                "name: disk-{host}\nhosts: {{ names: [{host}] }}\ndevices: {{ path: {drive} }}\nstorage: {{ fs: ext4 }}\n\
                 workload: {{ fsync: {{ path: \"${{mount}}/f.dat\", size: 4096, count: 50 }} }}\nrepeat: 3\n{limits}"
            ),
        );
        ended(dir, &id);
        disks.push(id);
    }
    // The second runs of the two series: bench again, drift ten times slower.
    let bench2 = submit_file("bench", &bench);
    let drift2 = submit_file("drift", &drift("0.2"));
    ended(dir, &bench2);
    ended(dir, &drift2);

    // A trigger fires three schedules: `long` runs (and is cancelled below), `quick` runs
    // and ends, `ci-paused` is paused; pulled again while `long` runs, its firing is skipped.
    let campaign = |name: &str, host: &str, run: &str| {
        write(
            dir,
            &format!("{name}.yaml"),
            &format!(
                "name: {name}\nhosts: {{ names: [{host}] }}\nworkload: {{ command: {{ run: \"{run}\" }} }}\nrepeat: 1\n"
            ),
        )
    };
    let schedule = |file: &Path, args: &[&str]| {
        run_ok(
            operator(dir, port)
                .args(["schedule", "add"])
                .arg(file)
                .args(["--on-trigger", "ci"])
                .args(args),
        )
    };
    schedule(&campaign("long", "h1", "sleep 60"), &[]);
    schedule(&campaign("quick", "h2", "true"), &["--policy", "queue"]);
    schedule(&campaign("paused", "h3", "true"), &["--name", "ci-paused"]);
    run_ok(operator(dir, port).args(["schedule", "pause", "ci-paused"]));
    let fired = api.with_token(
        "POST",
        "/api/v1/triggers/{name}",
        "/api/v1/triggers/ci",
        r#"{"labels": {"commit": "abc123"}}"#,
        200,
    );
    let fired: Value = serde_json::from_str(&fired.body).unwrap();
    let run_of = |schedule: &str| {
        fired["fired"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["schedule"] == schedule)
            .and_then(|f| f["campaign_id"].as_str())
            .unwrap_or_else(|| panic!("no run of {schedule} in {fired}"))
            .to_string()
    };
    let (long, quick) = (run_of("long"), run_of("quick"));
    api.with_token(
        "POST",
        "/api/v1/triggers/{name}",
        "/api/v1/triggers/ci",
        "",
        200,
    );
    ended(dir, &quick);
    wait_in(dir, "h1 to run `long`", Duration::from_secs(30), || {
        let sql = format!(
            "SELECT COUNT(*) FROM steps s JOIN plans p ON p.id = s.plan_id WHERE p.campaign_id = '{long}' AND s.kind = 'measure'"
        );
        (query_i64(dir, &sql) >= 1).then_some(())
    });

    // Every route that reads, while `long` runs.
    api.get("/api/v1/overview", "/api/v1/overview");
    api.get("/api/v1/hosts", "/api/v1/hosts");
    api.get(
        "/api/v1/hosts",
        "/api/v1/hosts?q=rack%3Dr-h1&state=busy&page=0",
    );
    for h in ["h1", "h2", "h3"] {
        api.get("/api/v1/hosts/{host}", &format!("/api/v1/hosts/{h}"));
    }
    api.get("/api/v1/campaigns", "/api/v1/campaigns");
    api.get(
        "/api/v1/campaigns",
        "/api/v1/campaigns?name=bench&state=done&host=h3&page=0",
    );
    let all: Vec<&String> = [
        &failing, &bench1, &drift1, &fsync, &shapes, &refused, &bench2, &drift2, &long, &quick,
    ]
    .into_iter()
    .chain(&disks)
    .collect();
    for id in &all {
        api.get("/api/v1/campaigns/{id}", &format!("/api/v1/campaigns/{id}"));
        api.get(
            "/api/v1/campaigns/{id}/report",
            &format!("/api/v1/campaigns/{id}/report"),
        );
    }
    // By name: `gaps`, stored before the coordinator started, and bench's latest run.
    api.get("/api/v1/campaigns/{id}", "/api/v1/campaigns/gaps");
    api.get(
        "/api/v1/campaigns/{id}/report",
        "/api/v1/campaigns/gaps/report",
    );
    api.get(
        "/api/v1/campaigns/{id}/report",
        "/api/v1/campaigns/bench/report?format=json",
    );
    api.get(
        "/api/v1/compare",
        &format!("/api/v1/compare?a={bench1}&b={bench2}&metric=wall"),
    );
    api.get(
        "/api/v1/compare",
        &format!(
            "/api/v1/compare?a={}&b={}",
            urlencode("bench@h1"),
            urlencode("bench@h3")
        ),
    );
    for series in ["bench", "drift", "fsync", "quick"] {
        api.get("/api/v1/series/{name}", &format!("/api/v1/series/{series}"));
    }
    let drives = api.get("/api/v1/drives", "/api/v1/drives");
    api.get("/api/v1/drives", "/api/v1/drives?failed=true&host=h1");
    for d in drives.as_array().unwrap() {
        let id = urlencode(d["id"].as_str().unwrap());
        api.get("/api/v1/drives/{id}", &format!("/api/v1/drives/{id}"));
    }
    let model = urlencode(common::fleet::MODEL);
    let peers = api.get("/api/v1/models/{model}", &format!("/api/v1/models/{model}"));
    assert_eq!(peers["groups"].as_array().unwrap().len(), 2, "{peers}");
    api.get(
        "/api/v1/models/{model}",
        &format!("/api/v1/models/{model}?firmware=HXT7404Q&series=fleet-qualification&metric=wall"),
    );
    api.get("/api/v1/accounts", "/api/v1/accounts");
    let listed = api.get("/api/v1/flags", "/api/v1/flags");
    assert!(listed["matched"].as_u64().unwrap() >= 4, "{listed}");
    api.get(
        "/api/v1/flags",
        "/api/v1/flags?state=live&kind=regression&series=nightly&host=h2&model=&page=0",
    );
    for id in [&flags.fail, &flags.regression, &flags.health, &flags.drift] {
        api.get("/api/v1/flags/{id}", &format!("/api/v1/flags/{id}"));
    }
    let acked = api.with_token(
        "POST",
        "/api/v1/flags/{id}",
        &format!("/api/v1/flags/{}", flags.regression),
        r#"{"state": "acknowledged", "note": "bisecting"}"#,
        200,
    );
    assert!(acked.body.contains("\"state_by\":\"ada\""), "{acked:?}");

    // Changes: `long` cancelled, a token revoked; then the series of `long`, which left it out.
    api.with_token(
        "POST",
        "/api/v1/campaigns/{id}/cancel",
        &format!("/api/v1/campaigns/{long}/cancel"),
        "",
        204,
    );
    ended(dir, &long);
    api.get("/api/v1/series/{name}", "/api/v1/series/long");
    api.with_token(
        "POST",
        "/api/v1/tokens/{id}/revoke",
        &format!("/api/v1/tokens/{spare}/revoke"),
        "",
        204,
    );
    api.get("/api/v1/tokens", "/api/v1/tokens");

    // Refusals and mistakes, each with its status.
    let viewer = [("Authorization", viewer.as_str())];
    let a = api.ask(
        "POST",
        "/api/v1/campaigns/{id}/cancel",
        &format!("/api/v1/campaigns/{bench2}/cancel"),
        &viewer,
        "",
    );
    assert_eq!(a.status, 403, "{a:?}");
    let a = api.ask("GET", "/api/v1/tokens", "/api/v1/tokens", &viewer, "");
    assert_eq!(a.status, 403, "{a:?}");
    for (route, path) in [
        ("/api/v1/hosts/{host}", "/api/v1/hosts/nope"),
        ("/api/v1/campaigns/{id}", "/api/v1/campaigns/nope"),
        (
            "/api/v1/campaigns/{id}/report",
            "/api/v1/campaigns/nope/report",
        ),
        ("/api/v1/series/{name}", "/api/v1/series/nope"),
        ("/api/v1/drives/{id}", "/api/v1/drives/nope"),
        ("/api/v1/models/{model}", "/api/v1/models/nope"),
    ] {
        api.with_token("GET", route, path, "", 404);
    }
    api.with_token("GET", "/api/v1/compare", "/api/v1/compare?a=bench", "", 400);
    let change = format!("/api/v1/flags/{}", flags.fail);
    let a = api.ask(
        "POST",
        "/api/v1/flags/{id}",
        &change,
        &viewer,
        r#"{"state": "fixed"}"#,
    );
    assert_eq!(a.status, 403, "{a:?}");
    api.with_token(
        "GET",
        "/api/v1/flags/{id}",
        "/api/v1/flags/ffffffffffff",
        "",
        404,
    );
    api.with_token(
        "GET",
        "/api/v1/flags",
        "/api/v1/flags?state=closed",
        "",
        400,
    );
    api.with_token(
        "POST",
        "/api/v1/flags/{id}",
        "/api/v1/flags/ffffffffffff",
        r#"{"state": "fixed"}"#,
        404,
    );
    for body in [
        r#"{"state": "closed"}"#,
        r#"{"state": "false-positive"}"#,
        "{state",
    ] {
        api.with_token("POST", "/api/v1/flags/{id}", &change, body, 400);
    }
    api.with_token(
        "GET",
        "/api/v1/compare",
        "/api/v1/compare?a=bench&b=nope",
        "",
        404,
    );
    api.with_token(
        "GET",
        "/api/v1/campaigns/{id}/report",
        "/api/v1/campaigns/bench/report?format=nope",
        "",
        400,
    );
    // A malformed query string is refused in the API's JSON, as every other refusal.
    for (route, path) in [
        ("/api/v1/hosts", "/api/v1/hosts?page=x"),
        ("/api/v1/campaigns", "/api/v1/campaigns?page=-1"),
    ] {
        let a = api.with_token("GET", route, path, "", 400);
        let v: Value =
            serde_json::from_str(&a.body).unwrap_or_else(|e| panic!("{path}: {e}: {a:?}"));
        assert!(
            v["error"].as_str().unwrap().contains("page: invalid digit"),
            "{path}: {a:?}"
        );
    }
    api.with_token(
        "POST",
        "/api/v1/campaigns",
        "/api/v1/campaigns?check=maybe",
        "name: bad\n",
        400,
    );
    api.with_token(
        "POST",
        "/api/v1/campaigns/{id}/cancel",
        "/api/v1/campaigns/nope/cancel",
        "",
        404,
    );
    api.with_token(
        "POST",
        "/api/v1/triggers/{name}",
        "/api/v1/triggers/nope",
        "",
        404,
    );
    api.with_token(
        "POST",
        "/api/v1/triggers/{name}",
        "/api/v1/triggers/ci",
        "{labels",
        400,
    );
    api.with_token(
        "POST",
        "/api/v1/tokens/{id}/revoke",
        "/api/v1/tokens/nope/revoke",
        "",
        404,
    );
    api.with_token(
        "POST",
        "/api/v1/tokens",
        "/api/v1/tokens",
        r#"{"account": "ada"}"#,
        400,
    );
    api.with_token(
        "POST",
        "/api/v1/campaigns",
        "/api/v1/campaigns?file_name=bad.yaml",
        "name: bad\nrepet: 3\n",
        400,
    );

    // The document as the coordinator serves it, to anyone.
    let served = call(&http, "GET", "/api/v1/openapi.json", &[], "");
    assert_eq!(served.status, 200, "{served:?}");
    let doc: Value = serde_json::from_str(&served.body).expect("the document is JSON");
    drop(agents);
    coordinator.kill9();

    // Every answer as its route's schema for its status says.
    let (errors, covered) = check_all(&doc, &api.seen);
    assert!(
        errors.is_empty(),
        "{} difference(s) between the answers and the document:\n{}",
        errors.len(),
        errors.join("\n")
    );
    // Every documented answer with a body was seen, each success at least.
    let asked: BTreeSet<(String, &str, String)> = api
        .seen
        .iter()
        .map(|s| (s.method.to_lowercase(), s.route, s.status.to_string()))
        .collect();
    for (route, methods) in doc["paths"].as_object().unwrap() {
        for (method, op) in methods.as_object().unwrap() {
            for status in op["responses"].as_object().unwrap().keys() {
                if status.starts_with('2') {
                    assert!(
                        asked.contains(&(method.clone(), route.as_str(), status.clone())),
                        "{method} {route} never answered {status} here"
                    );
                }
            }
        }
    }
    // Every declared property in some answer, but those listed with why.
    let unseen: BTreeMap<&str, &str> = UNSEEN
        .iter()
        .chain(if root { &[][..] } else { UNSEEN_WITHOUT_ROOT })
        .copied()
        .collect();
    let names = declared(&doc);
    // `name` is `u` or declared under it.
    let under = |name: &str, u: &str| {
        name.strip_prefix(u)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[', '{', '|']))
    };
    let excused = |name: &str| unseen.keys().any(|u| under(name, u));
    for name in unseen.keys() {
        assert!(
            names.iter().any(|n| under(n, name)),
            "UNSEEN lists {name}, which the document does not declare"
        );
    }
    let never: Vec<&String> = names
        .iter()
        .filter(|d| !covered.contains(*d) && !excused(d))
        .collect();
    assert!(
        never.is_empty(),
        "declared, but in no answer (the code never sends them, or the test never brings them about: say why in UNSEEN):\n{never:#?}"
    );
    let seen_anyway: Vec<&String> = names
        .iter()
        .filter(|n| excused(n) && covered.contains(*n))
        .collect();
    eprintln!(
        "openapi: {} answers checked, {} of {} declared properties seen ({} names listed unseen{})",
        api.seen.len(),
        covered.len(),
        names.len(),
        unseen.len(),
        if seen_anyway.is_empty() {
            String::new()
        } else {
            format!(", of which seen anyway: {seen_anyway:?}")
        }
    );

    // The checks catch a document that drifted from the code: a field the code sends that
    // the document lost fails, and so does a field the document requires that never comes.
    let mut lost = doc.clone();
    let campaign = &mut lost["components"]["schemas"]["Campaign"];
    campaign["properties"]
        .as_object_mut()
        .unwrap()
        .remove("series");
    campaign["required"]
        .as_array_mut()
        .unwrap()
        .retain(|r| r != "series");
    let (errors, _) = check_all(&lost, &api.seen);
    assert!(
        errors
            .iter()
            .any(|e| e.contains(".series: a field Campaign does not declare")),
        "{errors:#?}"
    );
    let mut invented = doc.clone();
    let campaign = &mut invented["components"]["schemas"]["Campaign"];
    campaign["properties"]["bogus"] = serde_json::json!({ "type": "string" });
    campaign["required"]
        .as_array_mut()
        .unwrap()
        .push("bogus".into());
    let (errors, covered) = check_all(&invented, &api.seen);
    assert!(
        errors
            .iter()
            .any(|e| e.contains(": no bogus, which Campaign requires")),
        "{errors:#?}"
    );
    assert!(declared(&invented).contains("Campaign.bogus") && !covered.contains("Campaign.bogus"));
}

/// Each answer in `seen` checked against `doc`: what differs, and the declared
/// properties the answers carried.
fn check_all(doc: &Value, seen: &[Seen]) -> (Vec<String>, BTreeSet<String>) {
    let mut checker = Checker {
        doc,
        covered: BTreeSet::new(),
    };
    let mut errors = Vec::new();
    for s in seen {
        let what = format!("{} {} ({})", s.method, s.path, s.status);
        let Some(answer) =
            doc["paths"][s.route][s.method.to_lowercase()]["responses"].get(s.status.to_string())
        else {
            errors.push(format!(
                "{what}: the document has no {} answer for {} {}",
                s.status, s.method, s.route
            ));
            continue;
        };
        let media = s.content_type.split(';').next().unwrap_or_default().trim();
        let Some(content) = answer.get("content") else {
            if !s.body.is_empty() {
                errors.push(format!(
                    "{what}: a body ({media}) where the document says none"
                ));
            }
            continue;
        };
        let Some(schema) = content.get(media).map(|c| &c["schema"]) else {
            errors.push(format!(
                "{what}: {media:?}, which the document does not list"
            ));
            continue;
        };
        if media != "application/json" {
            continue;
        }
        match serde_json::from_str::<Value>(&s.body) {
            Ok(v) => {
                let at = format!("{} {} {}", s.method, s.route, s.status);
                checker.check(&at, schema, &v, &what, &mut errors);
            }
            Err(e) => errors.push(format!("{what}: not JSON: {e}")),
        }
    }
    (errors, checker.covered)
}

/// Checks JSON against the document's schemas, noting the properties it met.
///
/// A schema is named where it is declared: `Campaign` (a component), `GET /api/v1/hosts 200`
/// (a route's answer), then `.field` for a property, `[]` for an array's items, `{}` for a
/// map's values and `|N` for an inline alternative of a `oneOf` or `anyOf`.
struct Checker<'d> {
    doc: &'d Value,
    /// The properties and maps' values met in an answer, by name.
    covered: BTreeSet<String>,
}

impl<'d> Checker<'d> {
    /// The component a `$ref` names, and its name.
    fn resolve(&self, reference: &Value) -> (String, &'d Value) {
        let name = reference
            .as_str()
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
            .unwrap_or_else(|| panic!("a $ref into components/schemas, not {reference}"));
        let schema = &self.doc["components"]["schemas"][name];
        assert!(!schema.is_null(), "no schema {name}");
        (name.to_string(), schema)
    }

    /// `schema`, declared at `at`, as the parts it is made of: itself, or its `allOf`'s
    /// parts (theirs, where they have parts), each with where it is declared.
    fn parts(&self, at: &str, schema: &'d Value) -> Vec<(String, &'d Value)> {
        let Some(parts) = schema["allOf"].as_array() else {
            return vec![(at.to_string(), schema)];
        };
        parts
            .iter()
            .flat_map(|p| match p.get("$ref") {
                Some(r) => {
                    let (name, p) = self.resolve(r);
                    self.parts(&name, p)
                }
                None => self.parts(at, p),
            })
            .collect()
    }

    /// `v`, found at `path` of an answer, against `schema`, declared at `at`.
    fn check(
        &mut self,
        at: &str,
        schema: &'d Value,
        v: &Value,
        path: &str,
        errors: &mut Vec<String>,
    ) {
        if let Some(r) = schema.get("$ref") {
            let (name, schema) = self.resolve(r);
            return self.check(&name, schema, v, path, errors);
        }
        if v.is_null() {
            if schema["nullable"] != true {
                errors.push(format!("{path}: null, which {at} may not be"));
            }
            return;
        }
        // Alternatives: `oneOf` exactly one of them, `anyOf` one at least (the first counts).
        let (alternatives, one) = match (schema["oneOf"].as_array(), schema["anyOf"].as_array()) {
            (Some(a), _) => (Some(a), true),
            (None, a) => (a, false),
        };
        if let Some(alternatives) = alternatives {
            let mut matched = Vec::new();
            for (i, alternative) in alternatives.iter().enumerate() {
                let mut trial = Checker {
                    doc: self.doc,
                    covered: BTreeSet::new(),
                };
                let mut wrong = Vec::new();
                trial.check(&format!("{at}|{i}"), alternative, v, path, &mut wrong);
                if wrong.is_empty() {
                    matched.push(trial.covered);
                }
            }
            match matched.len() {
                0 => errors.push(format!(
                    "{path}: {v} matches none of {at}'s {} alternatives",
                    alternatives.len()
                )),
                n if one && n > 1 => errors.push(format!(
                    "{path}: {v} matches {n} of {at}'s alternatives, not one"
                )),
                _ => self.covered.extend(matched.swap_remove(0)),
            }
            return;
        }
        // An object made of parts (`allOf`, any deep): their properties and requirements
        // together.
        let parts = self.parts(at, schema);
        let type_ = parts.iter().find_map(|(_, p)| p["type"].as_str());
        let fits = match type_ {
            Some("object") => v.is_object(),
            Some("array") => v.is_array(),
            Some("string") => v.is_string(),
            Some("integer") => v.is_i64() || v.is_u64(),
            Some("number") => v.is_number(),
            Some("boolean") => v.is_boolean(),
            _ => {
                errors.push(format!("{path}: {at} says no type"));
                return;
            }
        };
        if !fits {
            errors.push(format!("{path}: {v}, not the {} {at} says", type_.unwrap()));
            return;
        }
        for allowed in parts.iter().filter_map(|(_, p)| p["enum"].as_array()) {
            if !allowed.contains(v) {
                errors.push(format!(
                    "{path}: {v}, not one of {at}'s {}",
                    Value::from(allowed.clone())
                ));
            }
        }
        if let Some(items) = v.as_array() {
            let (min, max) = (schema["minItems"].as_u64(), schema["maxItems"].as_u64());
            let n = items.len() as u64;
            if min.is_some_and(|m| n < m) || max.is_some_and(|m| n > m) {
                errors.push(format!("{path}: {n} items, not as many as {at} says"));
            }
            for (i, item) in items.iter().enumerate() {
                self.check(
                    &format!("{at}[]"),
                    &schema["items"],
                    item,
                    &format!("{path}[{i}]"),
                    errors,
                );
            }
        }
        let Some(fields) = v.as_object() else {
            return;
        };
        for (part_at, part) in &parts {
            for required in part["required"].as_array().into_iter().flatten() {
                let name = required.as_str().unwrap();
                if !fields.contains_key(name) {
                    errors.push(format!("{path}: no {name}, which {part_at} requires"));
                }
            }
        }
        for (name, field) in fields {
            let declared = parts.iter().find_map(|(part_at, part)| {
                Some((format!("{part_at}.{name}"), part["properties"].get(name)?))
            });
            let map = parts.iter().find_map(|(part_at, part)| {
                Some((
                    format!("{part_at}{{}}"),
                    part["additionalProperties"]
                        .as_object()
                        .map(|_| &part["additionalProperties"])?,
                ))
            });
            match declared.or(map) {
                Some((name_at, schema)) => {
                    self.covered.insert(name_at.clone());
                    self.check(&name_at, schema, field, &format!("{path}.{name}"), errors);
                }
                None => errors.push(format!(
                    "{path}.{name}: a field {} does not declare",
                    parts
                        .iter()
                        .map(|(a, _)| a.as_str())
                        .collect::<Vec<_>>()
                        .join(" + ")
                )),
            }
        }
    }
}

/// Every property and map the document's answers declare, by name (as `Checker` names
/// them): each component's, and each route's own.
fn declared(doc: &Value) -> BTreeSet<String> {
    fn walk(at: &str, schema: &Value, out: &mut BTreeSet<String>) {
        if schema.get("$ref").is_some() {
            return;
        }
        for (name, s) in schema["properties"].as_object().into_iter().flatten() {
            let at = format!("{at}.{name}");
            out.insert(at.clone());
            walk(&at, s, out);
        }
        if schema["additionalProperties"].is_object() {
            let at = format!("{at}{{}}");
            out.insert(at.clone());
            walk(&at, &schema["additionalProperties"], out);
        }
        if schema["items"].is_object() {
            walk(&format!("{at}[]"), &schema["items"], out);
        }
        for part in schema["allOf"].as_array().into_iter().flatten() {
            walk(at, part, out);
        }
        let alternatives = [&schema["oneOf"], &schema["anyOf"]];
        let alternatives = alternatives
            .into_iter()
            .filter_map(Value::as_array)
            .flatten();
        for (i, alternative) in alternatives.enumerate() {
            walk(&format!("{at}|{i}"), alternative, out);
        }
    }
    let mut out = BTreeSet::new();
    for (name, schema) in doc["components"]["schemas"].as_object().unwrap() {
        walk(name, schema, &mut out);
    }
    for (route, methods) in doc["paths"].as_object().unwrap() {
        for (method, op) in methods.as_object().unwrap() {
            for (status, answer) in op["responses"].as_object().unwrap() {
                if let Some(schema) = answer["content"].get("application/json") {
                    let at = format!("{} {route} {status}", method.to_uppercase());
                    walk(&at, &schema["schema"], &mut out);
                }
            }
        }
    }
    out
}
