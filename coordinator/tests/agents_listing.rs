//! `platter agents` on a fleet larger than a screen: past 50 hosts the table counts the
//! agents by state and lists those needing attention first, then says how many more there
//! are; `--state`, `--match` and `--all` select and list, `--output json` lists every
//! matching agent. The coordinator selects and counts (a fleet of 100,000 sends 50 rows,
//! not 100,000), so the answer's counts are checked on the wire too.

mod common;

use std::process::Output;
use std::time::{Duration, Instant};

use pb::control_client::ControlClient;
use platter::service::server::{Coordinator, ServeOptions};
use platter_proto::v1 as pb;
use tokio_util::sync::CancellationToken;

const AGENTS: usize = 60;
/// Agents that go away: offline, so listed first.
const GONE: [usize; 3] = [7, 31, 58];

/// A fake agent `a{i:02}`: rack a (the first 40) or b, a Samsung drive on every tenth,
/// fio in one of two versions or none; says hello, then heartbeats until `stop`.
async fn agent(url: String, i: usize, stop: CancellationToken) {
    let mut hello = common::fake_hello(&format!("a{i:02}"), &format!("boot-{i}"), Vec::new());
    let rack = if i < 40 { "a" } else { "b" };
    hello.labels.insert("rack".into(), rack.into());
    if i.is_multiple_of(10) {
        hello.devices.push(pb::Device {
            path: "/dev/sda".into(),
            model: "Samsung SSD 860 EVO 500GB".into(),
            size_bytes: 500 << 30,
            ..Default::default()
        });
    }
    // fio 3.33 on most, 3.28 on two, none on every twentieth.
    let fio = match i {
        12 | 44 => Some("3.28"),
        _ if i.is_multiple_of(20) => None,
        _ => Some("3.33"),
    };
    hello.tools.push(pb::ToolVersion {
        name: "fio".into(),
        path: fio.map_or("", |_| "/usr/bin/fio").into(),
        version: fio.unwrap_or("").into(),
    });
    let (mut inbound, tx) = common::fake_link(&url, hello).await;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            m = inbound.message() => if !matches!(m, Ok(Some(_))) { return },
            _ = tick.tick() => {
                let hb = pb::Heartbeat { current_plan_id: String::new(), current_step_index: 0, journal_fault: String::new() };
                let m = pb::AgentMessage { kind: Some(pb::agent_message::Kind::Heartbeat(hb)) };
                if tx.send(m).await.is_err() { return }
            }
            _ = stop.cancelled() => return,
        }
    }
}

fn agents(url: &str, args: &[&str]) -> Output {
    common::platter()
        .args(["agents", "--coordinator", url, "--dangerously-insecure"])
        .args(args)
        .output()
        .unwrap()
}

fn text(url: &str, args: &[&str]) -> String {
    let out = agents(url, args);
    assert!(
        out.status.success(),
        "platter agents {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The hosts of a table's rows, in order (not those of its tools below).
fn listed(table: &str) -> Vec<String> {
    table
        .lines()
        .take_while(|l| !l.starts_with("tools"))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.len() == 3 && w.starts_with('a'))
        .map(String::from)
        .collect()
}

#[test]
fn a_large_fleet_is_counted_and_those_needing_attention_are_listed_first() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let shutdown = CancellationToken::new();
    let coordinator = rt.block_on(async {
        let mut opts = ServeOptions::plaintext(&db, "127.0.0.1:0".parse().unwrap());
        opts.http = Some("127.0.0.1:0".parse().unwrap());
        Coordinator::start(opts, shutdown.clone()).await.unwrap()
    });
    let url = format!("http://{}", coordinator.addr);
    let stops: Vec<CancellationToken> = (0..AGENTS).map(|_| CancellationToken::new()).collect();
    let mut control = rt.block_on(async {
        for (i, stop) in stops.iter().enumerate() {
            tokio::spawn(agent(url.clone(), i, stop.clone()));
        }
        ControlClient::connect(url.clone()).await.unwrap()
    });
    let mut wait_for = |what: &str, want: &dyn Fn(&pb::ListAgentsResponse) -> bool| {
        let t0 = Instant::now();
        loop {
            let r = rt
                .block_on(control.list_agents(pb::ListAgentsRequest::default()))
                .unwrap()
                .into_inner();
            if want(&r) {
                return;
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "{what}: {r:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let count = |r: &pb::ListAgentsResponse, s: &str| r.counts.get(s).copied().unwrap_or(0);
    wait_for("every agent idle", &|r| count(r, "idle") == AGENTS as u64);
    for i in GONE {
        stops[i].cancel();
    }
    wait_for("three agents offline", &|r| count(r, "offline") == 3);

    // The table: counts, the offline first, 50 in all, how many more.
    let shown = text(&url, &[]);
    let first = shown.lines().next().unwrap();
    assert_eq!(first, "60 agents: 57 idle, 3 offline", "{shown}");
    let hosts = listed(&shown);
    assert_eq!(hosts.len(), 50, "{shown}");
    assert_eq!(hosts[..3], ["a07", "a31", "a58"], "{shown}");
    assert_eq!(hosts[3..6], ["a00", "a01", "a02"], "then by name: {shown}");
    assert!(shown.contains("… 10 more agent(s) not listed"), "{shown}");
    // The tools of all 60, not of the 50 listed, counted by version, the most common first.
    let (_, tools) = shown
        .split_once("tools of the 60 agents (as each reported them when it connected):\n")
        .unwrap_or_else(|| panic!("no tools summary: {shown}"));
    let rows: Vec<String> = tools
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        rows,
        [
            "tool version hosts e.g.",
            "fio 3.33 55 a01, a02, a03, …",
            "fio not found 3 a00, a20, a40",
            "fio 3.28 2 a12, a44",
        ],
        "{shown}"
    );

    // Every one, by name, without counts.
    let all = text(&url, &["--all"]);
    let hosts = listed(&all);
    let want: Vec<String> = (0..AGENTS).map(|i| format!("a{i:02}")).collect();
    assert_eq!(hosts, want, "{all}");
    assert!(!all.contains("more agent(s)"), "{all}");
    // Listed whole, each host's tools are shown host by host.
    assert!(all.contains("tools (as each agent reported them"), "{all}");
    assert!(!all.contains("tools of the"), "{all}");

    // Selections: small ones are listed whole, by name.
    let offline = text(&url, &["--state", "offline"]);
    assert_eq!(listed(&offline), ["a07", "a31", "a58"], "{offline}");
    assert_eq!(
        text(&url, &["--state", "lost"]),
        "none of the 60 agents match\n"
    );
    let rack_b = text(&url, &["--match", "rack=b"]);
    let want: Vec<String> = (40..AGENTS).map(|i| format!("a{i:02}")).collect();
    assert_eq!(listed(&rack_b), want, "{rack_b}");
    let idle_b = text(&url, &["--match", "rack=b", "--state", "idle"]);
    assert_eq!(listed(&idle_b).len(), 19, "{idle_b}");
    // A selection past 50: counted against the whole fleet.
    let rack_a = text(&url, &["--match", "a"]);
    assert_eq!(
        rack_a.lines().next().unwrap(),
        "60 agents: 57 idle, 3 offline",
        "every name contains `a`: {rack_a}"
    );
    let idle = text(&url, &["--state", "idle"]);
    assert_eq!(
        idle.lines().next().unwrap(),
        "57 of 60 agents match: 57 idle",
        "{idle}"
    );

    // JSON: every matching agent, whatever their number.
    let json: serde_json::Value = serde_json::from_str(&text(&url, &["--output", "json"])).unwrap();
    assert_eq!(json.as_array().unwrap().len(), AGENTS);
    let samsung: serde_json::Value = serde_json::from_str(&text(
        &url,
        &["--output", "json", "--match", "Samsung SSD 860"],
    ))
    .unwrap();
    let hosts: Vec<&str> = samsung
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["a00", "a10", "a20", "a30", "a40", "a50"]);
    assert_eq!(
        samsung[0]["drives"][0]["model"], "Samsung SSD 860 EVO 500GB",
        "{samsung}"
    );
    // The coordinator reads an agent's drives only where they may match or are listed:
    // what the drives' stored form holds besides models (its keys, a path) matches none.
    for q in ["model", "/dev/sda", "\"size_bytes\"", "EVO\" "] {
        assert_eq!(
            text(&url, &["--match", q]),
            "none of the 60 agents match\n",
            "--match {q}"
        );
    }

    // On the wire: 50 rows asked for, the counts of all that match.
    let r = rt
        .block_on(control.list_agents(pb::ListAgentsRequest {
            state: "idle".into(),
            limit: 5,
            ..Default::default()
        }))
        .unwrap()
        .into_inner();
    assert_eq!((r.agents.len(), r.matched, r.total), (5, 57, 60));
    // Those listed carry their drives: a00 has one, a01 none.
    let drives: Vec<(&str, Vec<&str>)> = r
        .agents
        .iter()
        .map(|a| {
            (
                a.host.as_str(),
                a.devices.iter().map(|d| d.model.as_str()).collect(),
            )
        })
        .collect();
    assert_eq!(drives[0], ("a00", vec!["Samsung SSD 860 EVO 500GB"]));
    assert_eq!(drives[1], ("a01", vec![]));
    // The tools of the 57 that match, not of the 5 listed: a00, a20, a40 are idle.
    let fio: Vec<(&str, u64)> = r
        .tools
        .iter()
        .map(|t| (t.version.as_str(), t.hosts))
        .collect();
    assert_eq!(fio, [("3.33", 52), ("", 3), ("3.28", 2)], "{:?}", r.tools);
    // Each agent's state as the enum, and as the words older clients read.
    for a in &r.agents {
        assert_eq!(a.agent_state, pb::AgentState::Idle as i32, "{}", a.host);
        assert_eq!((a.state.as_str(), a.journal_fault.as_str()), ("idle", ""));
    }
    // The filter as the enum (this build's clients): the same selection as the words.
    let typed = rt
        .block_on(control.list_agents(pb::ListAgentsRequest {
            state_filter: pb::AgentState::Idle as i32,
            limit: 5,
            ..Default::default()
        }))
        .unwrap()
        .into_inner();
    assert_eq!((typed.matched, typed.total), (57, 60));
    let offline = rt
        .block_on(control.list_agents(pb::ListAgentsRequest {
            state_filter: pb::AgentState::Offline as i32,
            // Where both are sent the enum is read.
            state: "idle".into(),
            ..Default::default()
        }))
        .unwrap()
        .into_inner();
    assert_eq!(offline.matched, 3, "{:?}", offline.counts);
    assert!(offline
        .agents
        .iter()
        .all(|a| a.agent_state == pb::AgentState::Offline as i32 && a.state == "offline"));
    // A state that does not exist: said, with those that do.
    let e = rt
        .block_on(control.list_agents(pb::ListAgentsRequest {
            state: "sleeping".into(),
            ..Default::default()
        }))
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(
        e.message()
            .contains("idle, busy, lost, offline, journal fault"),
        "{e:?}"
    );
    let out = agents(&url, &["--state", "sleeping"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("journal-fault"), "{err}");

    // The console pages through the same fleet, reading drives only for the hosts it
    // shows, or for a filter, those whose drives' JSON holds the words.
    let http = coordinator.http.unwrap().to_string();
    common::web::add_user_to(
        dir.path(),
        db.to_str().unwrap(),
        "ops",
        "viewer",
        "a long enough password",
    );
    let token = common::run_ok(common::platter().args([
        "tokens",
        "add",
        "--user",
        "ops",
        "--label",
        "test",
        "--db",
        db.to_str().unwrap(),
    ]));
    let bearer = format!("Bearer {}", String::from_utf8(token.stdout).unwrap().trim());
    let get = |path: &str| {
        let a = common::web::call(&http, "GET", path, &[("Authorization", &bearer)], "");
        assert_eq!(a.status, 200, "{path}: {a:?}");
        serde_json::from_str::<serde_json::Value>(&a.body).unwrap()
    };
    let hosts_of = |v: &serde_json::Value| -> Vec<(String, Vec<String>)> {
        v["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                let models = h["drives"].as_array().unwrap().iter();
                let models = models.map(|d| d["model"].as_str().unwrap().to_string());
                (h["host"].as_str().unwrap().to_string(), models.collect())
            })
            .collect()
    };
    let samsung = || vec!["Samsung SSD 860 EVO 500GB".to_string()];
    let page = get("/api/v1/hosts?q=SSD%20860");
    assert_eq!(
        (&page["total"], &page["matched"]),
        (&60.into(), &6.into()),
        "{page}"
    );
    let found = hosts_of(&page);
    let names: Vec<&str> = found.iter().map(|(h, _)| h.as_str()).collect();
    assert_eq!(names, ["a00", "a10", "a20", "a30", "a40", "a50"]);
    assert!(found.iter().all(|(_, m)| *m == samsung()), "{found:?}");
    // A page of 100 by name, each with its drives or none; the page after it, empty.
    let first = get("/api/v1/hosts");
    assert_eq!(
        (&first["total"], &first["matched"]),
        (&60.into(), &60.into())
    );
    let rows = hosts_of(&first);
    assert_eq!(rows.len(), 60, "{first}");
    assert_eq!(rows[50], ("a50".to_string(), samsung()));
    assert_eq!(rows[51], ("a51".to_string(), vec![]));
    let second = get("/api/v1/hosts?page=1");
    assert_eq!(
        (&second["matched"], hosts_of(&second).len()),
        (&60.into(), 0)
    );
    for q in ["%2Fdev%2Fsda", "model", "%22size_bytes%22"] {
        assert_eq!(get(&format!("/api/v1/hosts?q={q}"))["matched"], 0, "{q}");
    }
    let a30 = get("/api/v1/hosts/a30");
    assert_eq!(
        hosts_of(&serde_json::json!({ "hosts": [a30] })),
        [("a30".to_string(), samsung())]
    );
    let page =
        |path: &str| common::web::call(&http, "GET", path, &[("Authorization", &bearer)], "").body;
    let idle = page("/hosts?q=Samsung&state=idle");
    assert!(idle.contains("6 of 60 host(s)"), "{idle}");
    let offline = page("/hosts?q=Samsung&state=offline");
    assert!(offline.contains("0 of 60 host(s)"), "{offline}");
    let html = page("/hosts?q=Samsung");
    assert!(html.contains("6 of 60 host(s)"), "{html}");
    assert!(
        html.contains("/dev/sda Samsung SSD 860 EVO 500GB"),
        "{html}"
    );

    for s in &stops {
        s.cancel();
    }
    shutdown.cancel();
    rt.block_on(async { drop(coordinator) });
}
