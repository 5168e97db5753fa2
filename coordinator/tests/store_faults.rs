//! The coordinator's store cannot commit — its disk is full, twice — while an agent
//! measures. Operators see why in `status`, `agents` and `watch` (before, status
//! said "running" and the agent "offline", nothing said why); the agent keeps its
//! records; within seconds of the store's recovery the campaign goes on (before: up to
//! a reconnect backoff later), and every measurement is stored exactly once.
//!
//! Needs root (it mounts a small tmpfs for the store). A read-only store is not tested
//! here: remounting a filesystem read-only fails (EBUSY) while the database is open for
//! writing, which is also why it is rare in the field; its error is classified with the
//! same rule (`store::is_store_fault`).
//!
//! The agent's side: its state directory (the journal) full or read-only makes it say so
//! at once, at ERROR, with the journal's path and the errno, and `platter run` ends with
//! that error and what to do.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const CAMPAIGN: &str = r#"
name: store-faults
hosts: { names: [a1] }
workload:
  command:
    run: "sleep 0.1"
repeat: 60
"#;

/// A tmpfs of `mib` MiB mounted at `path`, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(path: &Path, mib: u32) -> Tmpfs {
        std::fs::create_dir_all(path).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(path)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mounting a tmpfs (this test needs root)");
        Tmpfs(path.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Writes zeros to `path` until the filesystem is full.
fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 64 << 10];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
}

fn wall_samples(dir: &Path) -> i64 {
    query_i64(
        dir,
        "SELECT COUNT(*) FROM sample_rows WHERE metric = 'wall'",
    )
}

fn status(dir: &Path, port: u16, campaign: &str) -> serde_json::Value {
    operator_json(dir, port, &["status", campaign, "--output", "json"])
}

fn text(dir: &Path, port: u16, args: &[&str]) -> String {
    let out = run_ok(operator(dir, port).args(args));
    String::from_utf8(out.stdout).unwrap()
}

/// Waits for the store fault to show, checks every view of it, then lets the store
/// recover with `recover` and returns how long the first commit after it took.
fn fault_shows_then_recovers(
    dir: &Path,
    port: u16,
    campaign: &str,
    reason: &str,
    recover: impl FnOnce(),
) -> Duration {
    let fault = wait_in(
        dir,
        &format!("status to show the store fault ({reason})"),
        Duration::from_secs(60),
        || {
            let s = status(dir, port, campaign);
            (!s["store_fault"].is_null()).then_some(s["store_fault"].clone())
        },
    );
    assert!(
        fault["reason"].as_str().unwrap().contains(reason),
        "{fault}"
    );
    let shown = text(dir, port, &["status", campaign]);
    assert!(
        shown.contains("STORE FAULT") && shown.contains(reason),
        "{shown}"
    );
    let agents = text(dir, port, &["agents"]);
    assert!(
        agents.contains("STORE FAULT") && agents.contains("(waiting for the store)"),
        "the agent is connected and waits, not offline:\n{agents}"
    );
    assert_eq!(
        agents_json(dir, port)[0]["waiting_for_store"]
            .as_str()
            .unwrap_or_default(),
        fault["reason"].as_str().unwrap()
    );
    // The standard health check says so too (within its 1 s poll), for load balancers.
    let said = wait_in(
        dir,
        "health to say NOT serving",
        Duration::from_secs(5),
        || {
            let out = operator(dir, port).arg("health").output().unwrap();
            let said = String::from_utf8_lossy(&out.stdout).into_owned();
            (out.status.code() == Some(1)).then_some(said)
        },
    );
    assert!(
        said.contains("NOT serving: its store cannot commit since ")
            && said.contains(&format!(" UTC: {}", fault["reason"].as_str().unwrap())),
        "health names the store's fault and since when: {said}"
    );
    // Nothing commits meanwhile, and the campaign is not over.
    let stuck = wall_samples(dir);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(wall_samples(dir), stuck);
    assert!(stuck < 60, "the fault must come mid-campaign: {stuck}");

    recover();
    let t0 = Instant::now();
    wait_in(
        dir,
        "records to be stored again after the store recovered",
        Duration::from_secs(30),
        || (wall_samples(dir) > stuck).then_some(()),
    );
    let took = t0.elapsed();
    wait_in(
        dir,
        "status without a fault",
        Duration::from_secs(10),
        || {
            status(dir, port, campaign)["store_fault"]
                .is_null()
                .then_some(())
        },
    );
    wait_in(dir, "health to say serving", Duration::from_secs(5), || {
        let out = operator(dir, port).arg("health").output().unwrap();
        out.status.success().then_some(())
    });
    took
}

#[test]
fn a_full_store_is_shown_and_left_behind_within_seconds() {
    if !common::root_or_skip("it mounts a small tmpfs for the store") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let store = Tmpfs::mount(&dir.join("store"), 16);
    let db = store.0.join("coordinator.db");
    // The helpers read dir/coordinator.db.
    std::os::unix::fs::symlink(&db, dir.join("coordinator.db")).unwrap();
    let tls = identity(dir, "coordinator", "localhost");
    let (_coordinator, port) = spawn_listening(
        platter()
            .args(["serve", "--listen", "127.0.0.1:0"])
            .arg("--tls-dir")
            .arg(tls)
            .arg("--db")
            .arg(&db)
            .env("PLATTER_LOG", "info"),
        dir,
        "coordinator",
    );
    let _agent = agent(dir, port, "a1", &[]);
    wait_agents(dir, 1);
    let file = write(dir, "c.yaml", CAMPAIGN);
    let campaign = submit(dir, port, &file);
    let watch = Proc {
        child: operator(dir, port)
            .args(["watch", &campaign])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("watch.out")).unwrap())
            .spawn()
            .unwrap(),
        name: "watch".into(),
    };
    wait_in(dir, "5 measurements", Duration::from_secs(30), || {
        (wall_samples(dir) >= 5).then_some(())
    });

    // The disk fills up.
    let filler = store.0.join("filler");
    fill(&filler);
    let full = fault_shows_then_recovers(dir, port, &campaign, "full", || {
        std::fs::remove_file(&filler).unwrap()
    });

    // And once more, later: a second episode is reported and left behind the same way.
    let before = wall_samples(dir);
    wait_in(dir, "5 more measurements", Duration::from_secs(30), || {
        (wall_samples(dir) >= before + 5).then_some(())
    });
    fill(&filler);
    let again = fault_shows_then_recovers(dir, port, &campaign, "full", || {
        std::fs::remove_file(&filler).unwrap()
    });

    wait_in(dir, "the campaign to end", Duration::from_secs(60), || {
        (query_i64(
            dir,
            &format!("SELECT COUNT(*) FROM campaigns WHERE id = '{campaign}' AND state = 'done'"),
        ) == 1)
            .then_some(())
    });
    // Every repetition once: nothing lost, nothing doubled by the agent's resending.
    assert_eq!(wall_samples(dir), 60);
    assert_eq!(
        query_i64(
            dir,
            "SELECT COUNT(DISTINCT repetition) FROM sample_rows WHERE metric = 'wall'"
        ),
        60
    );
    let report = operator(dir, port)
        .args(["report", &campaign])
        .output()
        .unwrap();
    assert!(report.status.success(), "{report:?}");

    // The agent waited on one stream: it was never dropped and never reconnected.
    let agent_log = std::fs::read_to_string(dir.join("a1.log")).unwrap();
    assert_eq!(
        agent_log.matches(" connected ").count(),
        1,
        "the agent reconnected:\n{agent_log}"
    );
    // Each episode is a critical flag once the store commits again (and an alert rule
    // would send it): when, how long, why.
    let flags = wait_in(dir, "a flag per episode", Duration::from_secs(10), || {
        let out = platter()
            .args(["flags", "--kind", "store", "--format", "json", "--db"])
            .arg(dir.join("coordinator.db"))
            .output()
            .unwrap();
        let flags: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        (flags.len() == 2).then_some(flags)
    });
    for f in &flags {
        assert_eq!(f["severity"], "critical");
        let summary = f["summary"].as_str().unwrap();
        assert!(
            summary.starts_with("the store could not commit from ")
                && summary.ends_with("; it commits again"),
            "{summary}"
        );
    }
    // `watch` said when the fault began and when it ended, twice.
    drop(watch);
    let watched = std::fs::read_to_string(dir.join("watch.out")).unwrap();
    assert_eq!(watched.matches("STORE FAULT").count(), 2, "{watched}");
    assert_eq!(watched.matches("commits again").count(), 2, "{watched}");
    // Within a few retry intervals, not a reconnect backoff (before: up to ~60 s).
    eprintln!("stored again after recovery: first episode {full:?}, second {again:?}");
    for (what, took) in [("first", full), ("second", again)] {
        assert!(
            took < Duration::from_secs(5),
            "{what}: stored again only {took:?} after recovery"
        );
    }
}

/// How `platter run FILE` with the agent's state in `state` ended: its exit status (None
/// when it was still running after 60 s, or a second after a line holding `until`, and
/// was killed), its stderr and how long it took (until that line, if given).
fn run_to_end(
    dir: &Path,
    file: &Path,
    state: &Path,
    until: Option<&str>,
) -> (Option<i32>, String, Duration) {
    let start = Instant::now();
    let mut run = Proc {
        child: platter()
            .current_dir(dir)
            .arg("run")
            .arg(file)
            .arg("--state-dir")
            .arg(state)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        name: "run".into(),
    };
    let stderr = run.child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = start + Duration::from_secs(60);
    let mut seen = String::new();
    // Until its stderr closes (it is exiting) or the deadline.
    let status = loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => {
                seen.push_str(&line);
                seen.push('\n');
                if until.is_some_and(|u| line.contains(u)) {
                    let took = start.elapsed();
                    std::thread::sleep(Duration::from_secs(1));
                    let status = run.exited().and_then(|s| s.code());
                    run.kill9();
                    return (status, seen, took);
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                break run.child.wait().unwrap().code();
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => break None,
        }
    };
    let took = start.elapsed();
    run.kill9();
    (status, seen, took)
}

/// The agent's state directory on a full filesystem: `platter run` used to wait at
/// "(not connected)" without a word, and again after "dropping the journal's torn tail".
/// Now the agent says at once, at ERROR, that it holds its steps, with the journal's path
/// and the errno, and waits for room (the next test frees it). A read-only one at the
/// start makes the agent stop: `platter run` then waited 20 s for the agent to connect,
/// and now ends at once with the agent's error and what to do.
#[test]
fn a_full_or_read_only_state_directory_is_said_at_once() {
    if !common::root_or_skip("it mounts a small tmpfs for the agent's state") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let fs = Tmpfs::mount(&dir.join("state"), 1);
    fill(&fs.0.join("filler"));
    let file = write(
        dir,
        "c.yaml",
        "name: full\nworkload: { command: { run: \"true\" } }\nrepeat: 2\n",
    );
    // The tmpfs itself: `platter run`'s lock of the state directory is beside it, on the
    // test's own filesystem, so what fails here is the agent's journal.
    let state = fs.0.clone();
    let journal = state.join("journal.jsonl");
    let error_line = |seen: &str, log: &str, why: &str| {
        let error = seen
            .lines()
            .find(|l| l.contains("ERROR"))
            .unwrap_or_else(|| panic!("no ERROR line:\n{seen}"))
            .to_string();
        assert!(error.contains(log), "{error}");
        assert!(
            error.contains(&format!("journal {}: {why}", journal.display())),
            "{error}"
        );
    };
    for _ in 0..2 {
        let (status, seen, took) = run_to_end(dir, &file, &state, Some("ERROR"));
        error_line(
            &seen,
            "the agent holds its steps",
            "No space left on device (os error 28)",
        );
        assert!(took < Duration::from_secs(15), "took {took:?}:\n{seen}");
        assert_eq!(status, None, "it waits for room:\n{seen}");
    }
    let ok = Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(&fs.0)
        .status()
        .unwrap()
        .success();
    assert!(ok, "remounting read-only");
    let (status, seen, took) = run_to_end(dir, &file, &state, None);
    let why = "Read-only file system (os error 30)";
    error_line(&seen, "the agent cannot start", why);
    assert_eq!(status, Some(1), "{seen}");
    assert!(took < Duration::from_secs(15), "took {took:?}:\n{seen}");
    assert_eq!(
        seen.lines().last().unwrap_or_default(),
        format!(
            "platter: the local agent stopped: journal {}: {why}; make {} writable or give --state-dir elsewhere, then run again — nothing is lost",
            journal.display(),
            state.display()
        ),
        "{seen}"
    );
}

/// The agent's state directory fills up in the middle of a campaign and is freed again:
/// the agent used to stop (and `platter run` with it). Now it holds its steps while its
/// journal cannot be written (said once at ERROR, and once by the progress), goes on
/// when a write succeeds (said once by each), and the campaign completes with every
/// sample stored exactly once.
#[test]
fn a_state_directory_full_mid_run_holds_the_steps_and_they_go_on_when_freed() {
    if !common::root_or_skip("it mounts a small tmpfs for the agent's state") {
        return;
    }
    const REPEAT: i64 = 30;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let fs = Tmpfs::mount(&dir.join("state"), 1);
    let file = write(
        dir,
        "c.yaml",
        &format!(
            "name: fills\nworkload: {{ command: {{ run: \"sleep 0.1\" }} }}\nrepeat: {REPEAT}\n"
        ),
    );
    let mut run = Proc {
        child: platter()
            .current_dir(dir)
            .arg("run")
            .arg(&file)
            .arg("--db")
            .arg(dir.join("coordinator.db"))
            .arg("--state-dir")
            .arg(&fs.0)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        name: "run".into(),
    };
    let stderr = run.child.stderr.take().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let seen = seen.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let mut s = seen.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        })
    };
    let said = |what: &str| seen.lock().unwrap().contains(what);
    let wait = |what: &str, ok: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ok() {
            assert!(
                Instant::now() < deadline,
                "no {what} within 30 s:\n{}",
                seen.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait("3 samples", &|| wall_samples(dir) >= 3);
    fill(&fs.0.join("filler"));
    wait("ERROR", &|| said("ERROR"));
    // The progress says it too, from the agent's heartbeat.
    wait("the progress to show it", &|| said("JOURNAL FAULT"));
    // Held: nothing more is measured while the journal cannot be written, and the run
    // does not end.
    std::thread::sleep(Duration::from_secs(1));
    let before = wall_samples(dir);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(wall_samples(dir), before, "{}", seen.lock().unwrap());
    assert!(before < REPEAT, "the campaign ended before the fault");
    assert!(run.exited().is_none(), "{}", seen.lock().unwrap());
    std::fs::remove_file(fs.0.join("filler")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = run.exited() {
            break s;
        }
        assert!(Instant::now() < deadline, "{}", seen.lock().unwrap());
        std::thread::sleep(Duration::from_millis(50));
    };
    reader.join().unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(status.code(), Some(0), "{seen}");
    let errors: Vec<&str> = seen.lines().filter(|l| l.contains("ERROR")).collect();
    assert_eq!(errors.len(), 1, "{seen}");
    assert!(errors[0].contains("the agent holds its steps"), "{seen}");
    assert!(
        errors[0].contains(&format!(
            "journal {}: No space left on device (os error 28)",
            fs.0.join("journal.jsonl").display()
        )),
        "{seen}"
    );
    let resumed = seen
        .lines()
        .filter(|l| l.contains("the journal can be written again"))
        .count();
    assert_eq!(resumed, 1, "{seen}");
    let progress: Vec<&str> = seen
        .lines()
        .filter(|l| l.contains("JOURNAL FAULT: the agent holds its steps"))
        .collect();
    assert_eq!(progress.len(), 1, "said once:\n{seen}");
    assert!(
        progress[0].contains("No space left on device (os error 28)"),
        "{seen}"
    );
    assert_eq!(
        seen.lines()
            .filter(|l| l.contains("the agent's journal can be written again"))
            .count(),
        1,
        "{seen}"
    );
    // The line the full filesystem cut short was cut off before it was written again:
    // each line of the journal is whole (a piece followed by a line is corruption).
    let journal = std::fs::read_to_string(fs.0.join("journal.jsonl")).unwrap();
    for (n, line) in journal.lines().enumerate() {
        if let Err(e) = serde_json::from_str::<serde_json::Value>(line) {
            panic!("journal line {}: {e}: {line}", n + 1);
        }
    }
    // Exactly once: one sample per repetition, none missing, none twice.
    assert_eq!(wall_samples(dir), REPEAT, "{seen}");
    assert_eq!(
        query_i64(
            dir,
            "SELECT COUNT(DISTINCT repetition) FROM sample_rows WHERE metric = 'wall'"
        ),
        REPEAT
    );
}

/// A fleet agent whose state directory fills mid-campaign: `platter agents` (and `platter
/// status`) show it connected and holding its steps, with why ("journal fault: journal PATH: No space left
/// on device …"; before, it said "busy" while nothing ran), and after the space is freed
/// shows it busy again and the campaign completes, each sample stored once.
#[test]
fn an_agents_journal_fault_is_shown_by_platter_agents() {
    if !common::root_or_skip("it mounts a small tmpfs for the agent's state") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // `agent` keeps a1's state in dir/a1.state.
    let fs = Tmpfs::mount(&dir.join("a1.state"), 1);
    let (_coordinator, port) = serve(dir);
    let _agent = agent(dir, port, "a1", &[]);
    wait_agents(dir, 1);
    let file = write(dir, "c.yaml", CAMPAIGN);
    let campaign = submit(dir, port, &file);
    wait_in(dir, "3 samples", Duration::from_secs(60), || {
        (wall_samples(dir) >= 3).then_some(())
    });
    fill(&fs.0.join("filler"));
    let state = wait_in(
        dir,
        "agents to show the journal fault",
        Duration::from_secs(30),
        || {
            let state = agents_json(dir, port)[0]["state"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            state.starts_with("journal fault: ").then_some(state)
        },
    );
    assert_eq!(
        state,
        format!(
            "journal fault: journal {}: No space left on device (os error 28)",
            fs.0.join("journal.jsonl").display()
        )
    );
    let shown = text(dir, port, &["agents"]);
    assert!(shown.contains(&state), "{shown}");
    let shown = text(dir, port, &["status", &campaign]);
    assert!(
        shown.contains(&state.replacen("journal fault", "JOURNAL FAULT", 1)),
        "{shown}"
    );
    assert!(wall_samples(dir) < 60, "the fault must come mid-campaign");
    // A critical flag says so (and an alert rule would send it), fixed once it is over.
    let db = dir.join("coordinator.db").display().to_string();
    let host_flags = |state: &str| -> Vec<serde_json::Value> {
        let out = common::platter()
            .args([
                "flags", "--kind", "host", "--state", state, "--format", "json", "--db", &db,
            ])
            .output()
            .unwrap();
        serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout).unwrap()
    };
    let flag = wait_in(
        dir,
        "the journal fault flagged",
        Duration::from_secs(30),
        || host_flags("open").into_iter().next(),
    );
    assert_eq!(flag["severity"], "critical");
    let summary = flag["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("a1 holds the steps of campaign ")
            && summary.contains("its journal cannot be written (journal "),
        "{summary}"
    );
    std::fs::remove_file(fs.0.join("filler")).unwrap();
    let fixed = wait_in(
        dir,
        "the journal flag fixed",
        Duration::from_secs(30),
        || host_flags("fixed").into_iter().next(),
    );
    assert!(
        fixed["note"]
            .as_str()
            .unwrap()
            .starts_with("a1's journal can be written again"),
        "{fixed}"
    );
    wait_in(
        dir,
        "agents without the fault",
        Duration::from_secs(30),
        || {
            let state = agents_json(dir, port)[0]["state"].clone();
            (!state
                .as_str()
                .unwrap_or_default()
                .starts_with("journal fault"))
            .then_some(())
        },
    );
    wait_in(dir, "the campaign to end", Duration::from_secs(120), || {
        let done = query_i64(
            dir,
            &format!("SELECT COUNT(*) FROM campaigns WHERE id = '{campaign}' AND state = 'done'"),
        );
        (done == 1).then_some(())
    });
    assert_eq!(wall_samples(dir), 60, "{}", store_summary(dir));
    assert_eq!(
        query_i64(
            dir,
            "SELECT COUNT(DISTINCT repetition) FROM sample_rows WHERE metric = 'wall'"
        ),
        60
    );
}
