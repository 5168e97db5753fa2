//! What a plan needs of its host, end to end through `platter run`: a program or a user the
//! host lacks makes its agent refuse the whole plan before anything runs, which `run` and
//! `status` say (and exit non-zero); a command workload with `user:` and `home:` runs as
//! that user, with its home made on the storage under test.

mod common;

use std::path::Path;

use common::platter;

/// `platter run FILE` in `dir` with `env` set: (exit code, stdout).
fn run(dir: &Path, file: &Path, env: &[(&str, &str)]) -> (i32, String) {
    let out = platter()
        .current_dir(dir)
        .envs(env.iter().copied())
        .arg("run")
        .arg(file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), format!("{stdout}{stderr}"))
}

/// `platter status NAME` of the store `platter run` left in `dir`: (exit code, stdout).
fn status(dir: &Path, name: &str) -> (i32, String) {
    let out = platter()
        .current_dir(dir)
        .args(["status", "--db"])
        .arg(dir.join("platter-data/platter.db"))
        .arg(name)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn a_program_the_host_lacks_refuses_the_plan_naming_it_and_nothing_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let marker = dir.join("setup-ran");
    let f = common::write(
        dir,
        "c.yaml",
        &format!(
            "name: lacks-a-program\nworkload:\n  command:\n    setup: touch {}\n    run: platter-no-such-tool --fast\nrepeat: 1\n",
            marker.display()
        ),
    );
    let (code, out) = run(dir, &f, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("refused the plan, nothing ran"), "{out}");
    // The cell's row says why it is empty.
    assert!(out.contains("0 (its host refused the plan)"), "{out}");
    assert!(
        out.contains("lacks: platter-no-such-tool (for the measure of cell "),
        "{out}"
    );
    assert!(!marker.exists(), "the setup ran");

    let (code, shown) = status(dir, "lacks-a-program");
    assert_eq!(code, 1, "{shown}");
    assert!(
        shown.contains("refused the plan, nothing ran: host "),
        "{shown}"
    );
    assert!(shown.contains("lacks: platter-no-such-tool"), "{shown}");
}

/// A tool the campaign names (fio) that is not in the agent's PATH.
#[test]
fn a_tool_missing_from_path_refuses_the_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let empty = dir.join("empty-bin");
    std::fs::create_dir(&empty).unwrap();
    let f = common::write(
        dir,
        "c.yaml",
        &format!(
            "name: lacks-fio\nworkload:\n  fio: {{ directory: {}, options: {{ rw: write, size: 1m }} }}\nrepeat: 1\n",
            dir.display()
        ),
    );
    let (code, out) = run(dir, &f, &[("PATH", empty.to_str().unwrap())]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("lacks: fio (for the measure of cell "),
        "{out}"
    );
}

/// A storage campaign run by a normal user is refused for needing root, which `run` says
/// (it was told only that mkfs.ext4 was missing). As root, `platter run` is started as
/// nobody (uid 65534) to be such a user.
#[test]
fn storage_setup_by_an_agent_that_is_not_root_is_refused_as_needing_root() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let marker = dir.join("setup-ran");
    let f = common::write(
        dir,
        "c.yaml",
        &format!(
            "name: needs-root\nstorage: {{ ramdisk: {{ size: 16M }} }}\nworkload:\n  command:\n    setup: touch {}\n    run: \"true\"\nrepeat: 1\n",
            marker.display()
        ),
    );
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let root = euid == 0;
    let mut run = platter();
    if root {
        // nobody must reach and write the run's directory.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        run.uid(65534).gid(65534);
    }
    let out = run.current_dir(dir).arg("run").arg(&f).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    let uid = if root { 65534 } else { euid };
    assert!(
        text.contains(&format!(
            ": storage setup needs root to mount (the agent runs as uid {uid}); run the agent as root"
        )),
        "{text}"
    );
    assert!(!marker.exists(), "the setup ran");
}

/// A normal user's PATH lacks sbin, where Debian puts bonnie++, fstrim and the mkfs tools:
/// the agent looks there after PATH, and its workloads find them too.
#[test]
fn a_program_only_in_sbin_is_found_off_a_normal_users_path() {
    let only_in_sbin = ["blkid", "losetup", "wipefs", "fstrim"]
        .into_iter()
        .find(|p| {
            Path::new("/usr/sbin").join(p).is_file()
                && !Path::new("/usr/bin").join(p).exists()
                && !Path::new("/bin").join(p).exists()
        });
    let Some(program) = only_in_sbin else {
        common::skip("needs a program in /usr/sbin only (blkid, losetup, wipefs or fstrim)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let f = common::write(
        dir,
        "c.yaml",
        &format!(
            "name: sbin\nworkload:\n  command:\n    setup: \"command -v {program} > {}\"\n    run: {program} --version\nrepeat: 1\n",
            dir.join("found").display()
        ),
    );
    let (code, out) = run(dir, &f, &[("PATH", "/usr/local/bin:/usr/bin:/bin")]);
    assert_eq!(code, 0, "{out}");
    let found = std::fs::read_to_string(dir.join("found")).unwrap();
    assert_eq!(found.trim(), format!("/usr/sbin/{program}"));
}

#[test]
fn a_user_the_host_lacks_refuses_the_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let marker = dir.join("setup-ran");
    let f = common::write(
        dir,
        "c.yaml",
        &format!(
            "name: lacks-a-user\nworkload:\n  command:\n    user: platter-no-such-user\n    setup: touch {}\n    run: \"true\"\nrepeat: 1\n",
            marker.display()
        ),
    );
    let (code, out) = run(dir, &f, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("refused the plan, nothing ran"), "{out}");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert!(
            out.contains("lacks: user platter-no-such-user (for the workload of cell "),
            "{out}"
        );
    } else {
        assert!(out.contains("not root"), "{out}");
    }
    assert!(!marker.exists(), "the setup ran");
}

#[test]
fn a_command_runs_as_its_user_with_its_home_on_the_storage_under_test() {
    if !common::root_or_skip("it adds a user and mounts a RAM disk") {
        return;
    }
    let user = common::TestUser::new("pltrun");
    let name = user.0.clone();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    use std::os::unix::fs::PermissionsExt;
    // The user must reach the mount point under the run's directory, and write `out`.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = dir.join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o777)).unwrap();
    let who = out.join("who");
    let f = common::write(
        dir,
        "c.yaml",
        &format!(
            "name: as-user\nstorage: {{ fs: tmpfs }}\nworkload:\n  command:\n    user: {name}\n    home: \"${{mount}}/home/{name}\"\n    \
             setup: \"touch $HOME/setup-was-here\"\n    \
             run: \"id -un > {w}; echo $HOME >> {w}; stat -c %U $HOME >> {w}; ls $HOME >> {w}\"\nrepeat: 1\n",
            w = who.display()
        ),
    );
    let shown = platter().arg("validate").arg(&f).output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains(&format!(
            "as user {name} (HOME ${{mount}}/home/{name}, made for it)"
        )),
        "{shown}"
    );
    let (code, text) = run(dir, &f, &[]);
    assert_eq!(code, 0, "{text}");
    let written = std::fs::read_to_string(&who).unwrap();
    let lines: Vec<&str> = written.lines().collect();
    assert_eq!(lines.len(), 4, "{written}");
    assert_eq!(lines[0], user.0, "id -un");
    assert!(
        lines[1].starts_with(&dir.display().to_string())
            && lines[1].ends_with(&format!("/home/{name}")),
        "HOME on the RAM disk under {}: {written}",
        dir.display()
    );
    assert_eq!(lines[2], user.0, "the home's owner");
    assert_eq!(
        lines[3], "setup-was-here",
        "setup ran as the user, in the same home"
    );
}
