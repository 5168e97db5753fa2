//! The programs plans may run, found in the agent's PATH, with their versions: part of the
//! inventory (`platter agents`, `platter inventory`), so a missing tool shows before a plan
//! is refused for it. Each version is asked for under a time limit, all at once. The link
//! asks when it connects and again only when a program's file changed (`fingerprint`, a
//! `stat` per program, on its rescans, which skip measurements).

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use platter_proto::inventory::ToolVersion;

/// How long one program may take to say its version.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// How a program tells its version.
enum Ask {
    /// These arguments; the first line printed.
    Args(&'static [&'static str]),
    /// These arguments; the first line naming a version (bonnie++ has no version flag: its
    /// usage, printed for any unknown option, says "Version: 2.00a").
    Usage(&'static [&'static str]),
    /// It cannot say: only where it is.
    Nothing,
}

/// The programs the agent runs for plans (`workloads`, `storage`, the fstrim phase).
const TOOLS: &[(&str, Ask)] = &[
    ("fio", Ask::Args(&["--version"])),
    ("bonnie++", Ask::Usage(&["--version"])),
    ("compilebench", Ask::Nothing),
    ("mkfs.ext2", Ask::Args(&["-V"])),
    ("mkfs.ext4", Ask::Args(&["-V"])),
    ("mkfs.xfs", Ask::Args(&["-V"])),
    ("mkfs.btrfs", Ask::Args(&["--version"])),
    ("gocryptfs", Ask::Args(&["--version"])),
    ("fstrim", Ask::Args(&["--version"])),
    ("hdparm", Ask::Args(&["-V"])),
    ("nvme", Ask::Args(&["version"])),
];

/// Where each program is and when its file last changed: what the versions depend on.
pub(crate) fn fingerprint() -> Vec<Option<(std::path::PathBuf, i64, u64)>> {
    TOOLS
        .iter()
        .map(|(name, _)| {
            let path = crate::process::find_program(name.as_ref()).ok()?;
            let meta = std::fs::metadata(&path).ok()?;
            Some((path, meta.mtime(), meta.ino()))
        })
        .collect()
}

/// Every program of `TOOLS`, found or not, with its version.
pub(crate) fn probe() -> Vec<ToolVersion> {
    std::thread::scope(|s| {
        let probes: Vec<_> = TOOLS
            .iter()
            .map(|(name, ask)| s.spawn(move || tool(name, ask)))
            .collect();
        probes
            .into_iter()
            .zip(TOOLS)
            .map(|(p, (name, _))| {
                p.join().unwrap_or_else(|_| ToolVersion {
                    name: name.to_string(),
                    path: String::new(),
                    version: "unknown: the probe panicked".into(),
                })
            })
            .collect()
    })
}

fn tool(name: &str, ask: &Ask) -> ToolVersion {
    let Ok(path) = crate::process::find_program(name.as_ref()) else {
        return ToolVersion {
            name: name.to_string(),
            path: String::new(),
            version: String::new(),
        };
    };
    let version = match ask {
        Ask::Nothing => "(it does not report a version)".to_string(),
        Ask::Args(args) => first_line(&path, args, |_| true),
        Ask::Usage(args) => first_line(&path, args, |l| l.to_lowercase().contains("version")),
    };
    ToolVersion {
        name: name.to_string(),
        path: path.display().to_string(),
        version,
    }
}

/// The first line `program args` prints (stdout, then stderr) that `wanted` takes, within
/// `PROBE_TIMEOUT` (then it is killed), or why there is none.
fn first_line(program: &std::path::Path, args: &[&str], wanted: impl Fn(&str) -> bool) -> String {
    let child = crate::process::command(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return format!("unknown: {e}"),
    };
    let deadline = Instant::now() + PROBE_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return format!("unknown: no answer within {}s", PROBE_TIMEOUT.as_secs());
            }
            Err(e) => return format!("unknown: {e}"),
        }
    }
    // The program has exited: its pipes hold all it wrote (a version is a line or two).
    let mut text = String::new();
    for pipe in [
        child.stdout.take().map(|p| Box::new(p) as Box<dyn Read>),
        child.stderr.take().map(|p| Box::new(p) as Box<dyn Read>),
    ]
    .into_iter()
    .flatten()
    {
        let mut out = Vec::new();
        let _ = pipe.take(64 * 1024).read_to_end(&mut out);
        text.push_str(&String::from_utf8_lossy(&out));
        text.push('\n');
    }
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && wanted(l))
        .unwrap_or("(no version printed)")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tool is listed, found or not; one that is found has its path, one that is not
    /// has none; a program that does not answer is cut off at the time limit.
    #[test]
    fn every_tool_is_listed_with_its_path_and_a_silent_one_is_cut_off() {
        let tools = probe();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, TOOLS.iter().map(|(n, _)| *n).collect::<Vec<_>>());
        for t in &tools {
            let found = crate::process::find_program(t.name.as_ref()).is_ok();
            assert_eq!(!t.path.is_empty(), found, "{t:?}");
            assert_eq!(t.version.is_empty(), !found, "{t:?}");
        }
        let started = Instant::now();
        let silent = first_line("sleep".as_ref(), &["30"], |_| true);
        assert!(silent.contains("no answer within"), "{silent}");
        assert!(started.elapsed() < PROBE_TIMEOUT + Duration::from_secs(2));
        let usage = first_line(
            "sh".as_ref(),
            &["-c", "echo usage: x; echo Version: 2.00a >&2; exit 1"],
            |l| l.to_lowercase().contains("version"),
        );
        assert_eq!(usage, "Version: 2.00a");
    }
}
