//! A connected agent's drives change (a loop device attached, then detached): the agent
//! sends its new inventory on its own, without reconnecting, and `platter agents` shows it.
//! So do its tools: each program plans may run, with its version, or "not found".

mod common;

use std::time::Duration;

use common::*;

/// The drive paths `platter agents --output json` lists for the only agent.
fn drives(dir: &std::path::Path, port: u16) -> Vec<String> {
    let v = agents_json(dir, port);
    v[0]["drives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_drive_attached_or_detached_while_connected_reaches_platter_agents() {
    if !common::root_or_skip("it attaches a loop device") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve(dir);
    let _agent = agent(dir, port, "rc66", &["--inventory-interval", "1"]);
    wait_agents(dir, 1);
    identity(dir, "operator", "tester");

    let before = drives(dir, port);
    let drive = Loop::new(dir, "new-drive.img", 64);
    assert!(!before.contains(&drive.path), "{before:?}");
    wait_in(
        dir,
        &format!("{} in platter agents", drive.path),
        Duration::from_secs(15),
        || drives(dir, port).contains(&drive.path).then_some(()),
    );
    let path = drive.path.clone();
    drop(drive); // detached
    wait_in(
        dir,
        &format!("{path} gone from platter agents"),
        Duration::from_secs(15),
        || (!drives(dir, port).contains(&path)).then_some(()),
    );

    let logs = logs(dir);
    assert_eq!(
        logs.matches("agent connected").count(),
        1,
        "the change came over the same connection: {logs}"
    );
}

/// The version `platter agents --output json` gives for `tool` of the only agent, and where
/// the agent found it ("" for a tool it lacks).
fn tool(dir: &std::path::Path, port: u16, name: &str) -> Option<(String, String)> {
    let v = agents_json(dir, port);
    let t = v[0]["tools"]
        .as_array()?
        .iter()
        .find(|t| t["name"] == name)?
        .clone();
    Some((
        t["version"].as_str()?.to_string(),
        t["path"].as_str()?.to_string(),
    ))
}

fn fake_tool(bin: &std::path::Path, name: &str, prints: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = bin.join(name);
    // A new file (not rewritten in place): a running probe never sees it half written.
    let tmp = bin.join(format!(".{name}.new"));
    std::fs::write(&tmp, format!("#!/bin/sh\necho {prints}\n")).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
}

#[test]
fn an_agents_tools_and_their_versions_reach_platter_agents_and_follow_a_change() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    fake_tool(&bin, "fio", "fio-9.99-fake");
    // Nothing but the fake on PATH: every other tool is missing unless the host has it in
    // sbin, where the agent also looks (compilebench is never there).
    let path = bin.display().to_string();
    let (_coordinator, port) = serve(dir);
    let tls = identity(dir, "agent", "rc66").display().to_string();
    let boot = dir.join("rc66.boot_id");
    std::fs::write(&boot, "boot-of-rc66-1\n").unwrap();
    let url = url(port);
    let args = [
        "--coordinator",
        &url,
        "--name",
        "rc66",
        "--tls-dir",
        &tls,
        "--boot-id-file",
        boot.to_str().unwrap(),
        "--inventory-interval",
        "1",
    ];
    let _agent = spawn_agent_with_env(dir, "rc66", &args, &[("PATH", &path)]);
    wait_agents(dir, 1);
    identity(dir, "operator", "tester");

    let fio = wait_in(
        dir,
        "fio in platter agents",
        Duration::from_secs(15),
        || tool(dir, port, "fio"),
    );
    assert_eq!(
        fio,
        (
            "fio-9.99-fake".into(),
            bin.join("fio").display().to_string()
        )
    );
    let (missing, nowhere) = tool(dir, port, "compilebench").expect("every tool is listed");
    assert_eq!(
        (missing.as_str(), nowhere.as_str()),
        ("", ""),
        "compilebench is not in the agent's PATH"
    );
    let text = operator(dir, port).arg("agents").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("fio-9.99-fake"), "{text}");
    assert!(text.contains("compilebench  not found"), "{text}");

    // An upgrade: the agent notices the new file at its next rescan.
    fake_tool(&bin, "fio", "fio-10.0-fake");
    wait_in(dir, "the new fio version", Duration::from_secs(15), || {
        (tool(dir, port, "fio")?.0 == "fio-10.0-fake").then_some(())
    });
    let logs = logs(dir);
    assert_eq!(logs.matches("agent connected").count(), 1, "{logs}");
}
