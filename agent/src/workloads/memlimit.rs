//! bonnie++ under a memory limit. bonnie++ defeats the page cache by writing files of
//! twice the RAM it is told of (`-r`); on a 24 GiB host that is 48 GiB per run. Instead
//! the agent makes `-r` true: bonnie++ runs in a memory cgroup of that size, which holds
//! its page cache too, so reads of a file of twice that size come from the drive.
//!
//! Written here rather than taken from a crate: the few cgroup files involved are plain
//! text (cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`), and the crates for it
//! (cgroups-rs) bring a whole cgroup manager for two writes and an rmdir.

use std::path::{Path, PathBuf};

/// Where cgroups are mounted on every distribution platter runs on.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// A memory cgroup made for one run; removed when dropped (the run has ended by then,
/// so it is empty).
#[derive(Debug)]
pub(crate) struct MemoryCgroup {
    dir: PathBuf,
}

impl MemoryCgroup {
    /// Makes a cgroup named `name` whose memory, page cache included, is limited to
    /// `limit` bytes: under the unified hierarchy (v2) if it has the memory controller,
    /// else under v1's `memory`.
    pub(crate) fn create(name: &str, limit: u64) -> Result<MemoryCgroup, String> {
        Self::create_under(Path::new(CGROUP_ROOT), name, limit)
    }

    fn create_under(root: &Path, name: &str, limit: u64) -> Result<MemoryCgroup, String> {
        let v2 = std::fs::read_to_string(root.join("cgroup.subtree_control"))
            .is_ok_and(|c| c.split_whitespace().any(|w| w == "memory"));
        let (parent, file) = if v2 {
            (root.to_path_buf(), "memory.max")
        } else if root.join("memory/memory.limit_in_bytes").exists() {
            (root.join("memory"), "memory.limit_in_bytes")
        } else {
            return Err(format!(
                "no memory cgroup controller under {} (neither cgroup v2 with `memory` in \
                 cgroup.subtree_control nor cgroup v1's memory hierarchy)",
                root.display()
            ));
        };
        let dir = parent.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            // Left by a run this agent did not see end (it was killed): reuse it.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot make the cgroup {}: {e}", dir.display())),
        }
        let cg = MemoryCgroup { dir };
        std::fs::write(cg.dir.join(file), limit.to_string())
            .map_err(|e| format!("cannot limit {} to {limit} bytes: {e}", cg.dir.display()))?;
        Ok(cg)
    }

    /// `argv` run through a shell that first moves itself into the cgroup, then becomes
    /// the program (`exec`), so the measured process is the program itself.
    pub(crate) fn wrap(&self, argv: &[String]) -> Vec<String> {
        let procs = self.dir.join("cgroup.procs");
        let mut out = vec![
            "/bin/sh".to_string(),
            "-c".to_string(),
            format!(
                "echo $$ > '{}' && exec \"$@\"",
                procs.display().to_string().replace('\'', r"'\''")
            ),
            "sh".to_string(),
        ];
        out.extend(argv.iter().cloned());
        out
    }

    #[cfg(test)]
    fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            tracing::warn!(cgroup = %self.dir.display(), error = %e, "could not remove a memory cgroup");
        }
    }
}

/// The bytes bonnie++'s `-r` gives (MiB without a suffix, as bonnie++ reads it; `k`, `m`,
/// `g` suffixes in either case), if `argv` has it.
pub(crate) fn bonnie_ram(argv: &[String]) -> Option<u64> {
    let value = argv
        .iter()
        .position(|a| a == "-r")
        .and_then(|i| argv.get(i + 1))?;
    let value = value.trim();
    let (digits, unit) = match value.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => value.split_at(i),
        None => (value, "m"),
    };
    let n: u64 = digits.parse().ok()?;
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// The memory limit a bonnie++ run of `argv` is held to with a cgroup: its `-r`, unless its
/// `-d` directory lives in memory (`in_memory` says; tmpfs pages cannot leave memory, so
/// the limit would kill the run instead). Decided here for the run and for the preflight,
/// which refuses a plan needing a cgroup an agent that is not root cannot make.
pub(crate) fn bonnie_limit(argv: &[String], in_memory: impl Fn(&str) -> bool) -> Option<u64> {
    let limit = bonnie_ram(argv)?;
    let dir = bonnie_directory(argv).unwrap_or(".");
    (!in_memory(dir)).then_some(limit)
}

/// bonnie++'s `-d` directory.
fn bonnie_directory(argv: &[String]) -> Option<&str> {
    let i = argv.iter().position(|a| a == "-d")?;
    argv.get(i + 1).map(String::as_str)
}

/// Whether `dir` is on a filesystem that lives in memory (tmpfs, ramfs): its pages cannot
/// be evicted to a drive, so a memory limit smaller than the files would kill the run.
pub(crate) fn in_memory(dir: &str) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    rustix::fs::statfs(dir).is_ok_and(|s| {
        // `f_type` is i64 here and i32 or u32 on other targets.
        #[allow(clippy::unnecessary_cast)]
        let t = s.f_type as i64;
        t == TMPFS_MAGIC || t == RAMFS_MAGIC
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn bonnie_ram_reads_the_units_bonnie_reads() {
        assert_eq!(bonnie_ram(&argv("bonnie++ -q -r 512")), Some(512 << 20));
        assert_eq!(
            bonnie_ram(&argv("bonnie++ -r 256M -s 512M")),
            Some(256 << 20)
        );
        assert_eq!(bonnie_ram(&argv("bonnie++ -r 2g")), Some(2 << 30));
        assert_eq!(bonnie_ram(&argv("bonnie++ -s 512M")), None);
        assert_eq!(bonnie_ram(&argv("bonnie++ -r")), None);
        assert_eq!(bonnie_ram(&argv("bonnie++ -r 5x")), None);
    }

    #[test]
    fn a_cgroup_is_made_for_a_run_with_r_on_a_directory_not_in_memory() {
        let on_disk = |_: &str| false;
        assert_eq!(
            bonnie_limit(&argv("bonnie++ -q -d /mnt/x -r 512 -s 1024"), on_disk),
            Some(512 << 20)
        );
        // Sized by -s alone: bonnie++ reads the host's RAM itself, no cgroup.
        assert_eq!(
            bonnie_limit(&argv("bonnie++ -d /mnt/x -s 4096"), on_disk),
            None
        );
        let shm = |d: &str| d == "/dev/shm";
        assert_eq!(bonnie_limit(&argv("bonnie++ -d /dev/shm -r 64"), shm), None);
        assert_eq!(bonnie_limit(&argv("bonnie++ -r 64"), shm), Some(64 << 20));
    }

    #[test]
    fn tmpfs_is_in_memory_and_the_working_directory_usually_is_not() {
        assert!(in_memory("/dev/shm"));
    }

    #[test]
    fn a_fake_hierarchy_gets_the_limit_and_the_cgroup_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        // v1 layout: memory/memory.limit_in_bytes marks the hierarchy.
        std::fs::create_dir(tmp.path().join("memory")).unwrap();
        std::fs::write(tmp.path().join("memory/memory.limit_in_bytes"), "max").unwrap();
        let cg = MemoryCgroup::create_under(tmp.path(), "platter-test", 64 << 20).unwrap();
        let limit = std::fs::read_to_string(cg.dir().join("memory.limit_in_bytes")).unwrap();
        assert_eq!(limit, (64u64 << 20).to_string());
        let wrapped = cg.wrap(&argv("bonnie++ -r 64"));
        assert_eq!(&wrapped[..2], ["/bin/sh", "-c"]);
        assert!(wrapped[2].contains("cgroup.procs") && wrapped[2].contains("exec \"$@\""));
        assert_eq!(&wrapped[3..], ["sh", "bonnie++", "-r", "64"]);
        // A real cgroup directory is empty once its processes ended; here the limit
        // file is an ordinary file, so remove it for the drop to succeed.
        std::fs::remove_file(cg.dir().join("memory.limit_in_bytes")).unwrap();
        let dir = cg.dir().to_path_buf();
        drop(cg);
        assert!(!dir.exists());
        // No hierarchy at all: a reason, not a run without the limit.
        let empty = tempfile::tempdir().unwrap();
        let e = MemoryCgroup::create_under(empty.path(), "x", 1).unwrap_err();
        assert!(e.contains("no memory cgroup controller"), "{e}");
    }

    #[test]
    fn a_real_cgroup_holds_the_program_at_its_limit() {
        if !crate::executor::tests::root_or_skip("making a cgroup") {
            return;
        }
        let cg = MemoryCgroup::create(&format!("platter-test-{}", std::process::id()), 64 << 20)
            .unwrap();
        let out = std::process::Command::new(&cg.wrap(&argv("cat /proc/self/cgroup"))[0])
            .args(&cg.wrap(&argv("cat /proc/self/cgroup"))[1..])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let cgroups = String::from_utf8_lossy(&out.stdout);
        let name = cg.dir().file_name().unwrap().to_string_lossy().into_owned();
        assert!(cgroups.contains(&name), "{cgroups}");
    }
}
