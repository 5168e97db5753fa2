//! A connected agent's drives change (a loop device attached, then detached): the agent
//! sends its new inventory on its own, without reconnecting, and `platter agents` shows it.

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
