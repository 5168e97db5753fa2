//! Limits that are checked, not discovered: a plan larger than gRPC's default 4 MiB is
//! delivered (up to `MAX_PLAN_BYTES`), and cancelling always frees the host for its next
//! campaign; a campaign file's size is checked before it is read (locally and by the
//! coordinator), and validating a 20 MiB file stays within 300 MB whatever it holds.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;

#[test]
fn a_plan_over_4_mib_is_delivered_and_cancel_frees_its_host() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve(dir);
    let _agent = agent(dir, port, "rc66", &[]);
    wait_agents(dir, 1);
    // 4 cells × 1,000 repetitions of a 1,200-character command: a ~5 MB plan, which
    // tonic's default message limit left undeliverable for good.
    let long = format!("true {}", "x".repeat(1200));
    let big = write(
        dir,
        "big.yaml",
        &format!(
            "name: big\nhosts: {{ names: [rc66] }}\nmatrix: {{ n: [1, 2, 3, 4] }}\n\
             workload: {{ command: {{ run: \"sleep 0.2; {long} ${{n}}\" }} }}\nrepeat: 1000\n"
        ),
    );
    let small = write(
        dir,
        "small.yaml",
        "name: small\nhosts: { names: [rc66] }\nworkload: { command: { run: \"true\" } }\nrepeat: 2\n",
    );
    let big_id = submit(dir, port, &big);
    let small_id = submit(dir, port, &small);
    let body: i64 = query_i64(dir, "SELECT MAX(LENGTH(body)) FROM plan_templates");
    assert!(body > 4 << 20, "the plan is over 4 MiB: {body} bytes");
    wait_in(
        dir,
        "the big plan accepted",
        Duration::from_secs(60),
        || {
            (query_i64(
            dir,
            &format!("SELECT COUNT(*) FROM plans WHERE campaign_id = '{big_id}' AND state = 'accepted'"),
        ) == 1)
            .then_some(())
        },
    );
    common::run_ok(operator(dir, port).args(["cancel", &big_id]));
    // The host is free again: the queued campaign runs to its end.
    wait_in(
        dir,
        "the next campaign to finish",
        Duration::from_secs(120),
        || {
            (query_i64(
                dir,
                &format!(
                    "SELECT COUNT(*) FROM campaigns WHERE id = '{small_id}' AND state = 'done'"
                ),
            ) == 1)
                .then_some(())
        },
    );
    assert_eq!(
        query_i64(
            dir,
            &format!(
                "SELECT COUNT(*) FROM plans WHERE campaign_id = '{big_id}' AND state = 'cancelled'"
            )
        ),
        1
    );
    assert!(!logs(dir).contains("decoded message length too large"));
}

const CAMPAIGN: &str = "name: big\nworkload: { command: { run: \"true\" } }\n";

/// `head` and then `item` repeated until the text is `size` bytes or just under.
fn filled(head: &str, item: &str, tail: &str, size: usize) -> String {
    let n = (size - head.len() - tail.len()) / item.len();
    let mut s = String::with_capacity(size);
    s.push_str(head);
    for _ in 0..n {
        s.push_str(item);
    }
    s.push_str(tail);
    s
}

/// Runs `platter ARGS`, returning its exit code, stderr and peak RSS in KiB (its own,
/// from `wait4`: `getrusage(RUSAGE_CHILDREN)` would count other tests' children too).
#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which also gives its rusage"
)]
fn peak_rss(dir: &Path, args: &[&str]) -> (i32, String, i64) {
    let err = dir.join("stderr");
    let child = platter()
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let pid = i32::try_from(child.id()).unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value, and wait4 writes only to these two.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; pid is our own child, waited once.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (
        code,
        std::fs::read_to_string(&err).unwrap(),
        usage.ru_maxrss,
    )
}

/// Issue 10: "a 100 MB list in YAML took 1.63 GB and 4.9 s to reject; a 100 MB
/// description was accepted with 723 MB peak". Each shape of 20 MiB file, with the size
/// limit raised to let it in, is judged within 300 MB (BENCHMARKS.md has the figures).
#[test]
fn validating_a_20_mib_file_stays_within_300_mb() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let size = 20 << 20;
    let files = [
        (
            "flow.yaml",
            filled(
                &format!("{CAMPAIGN}matrix:\n  bs: ["),
                "4k, ",
                "4k]\n",
                size,
            ),
            Some("flow.yaml:4:399956: matrix.bs: more than 100000 nodes (MAX_NODES)"),
        ),
        (
            "block.yaml",
            filled(
                &format!("{CAMPAIGN}matrix:\n  bs:\n"),
                "    - 4k\n",
                "",
                size,
            ),
            Some("block.yaml:99992:7: matrix.bs: more than 100000 nodes"),
        ),
        (
            "keys.yaml",
            (0..)
                .map(|i| format!("k{i:07}: v\n"))
                .scan(CAMPAIGN.len(), |len, line| {
                    *len += line.len();
                    (*len <= size).then_some(line)
                })
                .fold(CAMPAIGN.to_string(), |s, line| s + &line),
            Some("keys.yaml:49998:11: k0049995: more than 100000 nodes"),
        ),
        (
            "description.yaml",
            filled(&format!("{CAMPAIGN}description: \""), "x", "\"\n", size),
            None,
        ),
    ];
    for (name, text, error) in files {
        let path = write(dir, name, &text);
        drop(text);
        let path = path.to_str().unwrap();
        let (code, stderr, kib) = peak_rss(dir, &["validate", "--max-file-size", "32M", path]);
        match error {
            Some(e) => {
                assert_eq!(code, 2, "{name}: {stderr}");
                assert!(stderr.contains(e), "{name}: want {e:?}, got {stderr}");
            }
            None => assert_eq!(code, 0, "{name}: {stderr}"),
        }
        assert!(
            kib < 300 * 1000,
            "{name}: peak RSS {} MB is over 300 MB",
            kib / 1000
        );
        std::fs::remove_file(path).unwrap();
    }
}

/// The size is checked before the file is read, by `validate` and `run` here and by a
/// coordinator on Submit, and the error names the file, its size, the limit and the flag.
#[test]
fn a_campaign_file_over_the_size_limit_is_refused_before_it_is_parsed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Valid YAML just over 1 MiB: a campaign with a long description.
    let text = filled(
        &format!("{CAMPAIGN}description: \""),
        "x",
        "\"\n",
        (1 << 20) + 2,
    );
    let file = write(dir, "huge.yaml", &text);
    let file_s = file.display().to_string();
    let want = format!(
        "error: {file_s}: the file is 1.0 MiB (1048578 bytes); a campaign file may be at most \
         1 MiB (1048576 bytes, --max-file-size)"
    );
    for args in [
        vec!["validate", &file_s],
        vec!["run", "--db", "p.db", &file_s],
    ] {
        let out = platter().current_dir(dir).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with(&want), "{args:?}: {stderr}");
        assert!(
            stderr.contains("raise the limit with --max-file-size"),
            "{stderr}"
        );
    }
    assert!(!dir.join("p.db").exists(), "nothing started");
    // Raised, it is read and judged: the same file is valid.
    common::run_ok(platter().args(["validate", "--max-file-size", "2M", &file_s]));

    // A coordinator holds submissions to its own limit, whatever the client allows.
    let (_coordinator, port) = serve_with(
        dir,
        &["--max-file-size", "1000K", "--max-steps-per-plan", "5"],
    );
    let submit = |extra: &[&str]| {
        let out = operator(dir, port)
            .arg("submit")
            .args(extra)
            .arg(&file)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stderr) = submit(&[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&want),
        "the client's own check: {stderr}"
    );
    let (code, stderr) = wait_for("the coordinator to answer", Duration::from_secs(20), || {
        let (code, stderr) = submit(&["--max-file-size", "2M"]);
        (!stderr.contains("connecting to coordinator")).then_some((code, stderr))
    });
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "error: {file_s}: the file is 1.0 MiB (1048578 bytes); a campaign file may be at \
             most 1000 KiB (1024000 bytes, --max-file-size)"
        )),
        "the coordinator's check: {stderr}"
    );

    // Steps per plan: 6 repetitions are over a limit of 5, here and on the coordinator.
    let small = write(dir, "six.yaml", &format!("{CAMPAIGN}repeat: 6\n"));
    let over = "1 cell(s) × 6 repetition(s) × 1 step(s) each make 6 steps per host and \
                device; the limit is 5 steps per plan (--max-steps-per-plan)";
    let out = platter()
        .args(["validate", "--max-steps-per-plan", "5"])
        .arg(&small)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(over), "{stderr}");
    let out = operator(dir, port)
        .arg("submit")
        .arg(&small)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(over), "the coordinator's limit: {stderr}");
    common::run_ok(platter().args(["validate"]).arg(&small));
}

/// The steps of all hosts' plans together are limited too, checked host by host before
/// each plan is made: 3 hosts × 400 repetitions are over a limit of 1,000.
#[test]
fn steps_across_hosts_are_limited() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let f = write(
        dir,
        "fleet.yaml",
        "name: wide\nhosts: { names: [a, b, c] }\nworkload: { command: { run: 'true' } }\nrepeat: 400\n",
    );
    let out = platter()
        .args(["validate", "--max-total-steps", "1000"])
        .arg(&f)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "the plans of this campaign's hosts would hold more than 1000 steps together \
             (already 1200 with the first 3 host(s), up to c); the limit is 1000 steps per \
             campaign (--max-total-steps"
        ),
        "{stderr}"
    );
    common::run_ok(platter().arg("validate").arg(&f));
}

/// Every mistake of an invalid campaign crosses gRPC as readable lines, in file order,
/// within what an HTTP/2 header may carry.
#[test]
fn submit_shows_every_mistake_the_coordinator_found() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_coordinator, port) = serve(dir);
    let mut text = format!("{CAMPAIGN}repet: 5\norder: shufled\n");
    for i in 0..80 {
        // Non-ASCII and spaces take three bytes each in a grpc-message header.
        text.push_str(&format!("ünknöwn{i:02}: \"a value × {i}\"\n"));
    }
    let file = write(dir, "bad.yaml", &text);
    let out = wait_for("the coordinator to answer", Duration::from_secs(20), || {
        let out = operator(dir, port)
            .arg("submit")
            .arg(&file)
            .output()
            .unwrap();
        (!String::from_utf8_lossy(&out.stderr).contains("connecting to coordinator")).then_some(out)
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let f = file.display();
    assert!(
        stderr.starts_with(&format!(
            "error: {f}:3:1: repet: unknown key `repet`\n  hint: did you mean `repeat`?\n\
             error: {f}:4:8: order: unknown order `shufled`"
        )),
        "{stderr}"
    );
    let shown = stderr.matches("error: ").count();
    assert!(shown >= 20, "{shown} shown: {stderr}");
    assert!(
        stderr.trim_end().ends_with(&format!(
            "more mistakes in {f} (the first {} of 82 are shown)",
            shown - 1
        )),
        "{stderr}"
    );
}
