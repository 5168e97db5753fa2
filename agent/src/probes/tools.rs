//! The programs plans may run, found in the agent's PATH, with their versions: part of the
//! inventory (`platter agents`, `platter inventory`), so a missing tool shows before a plan
//! is refused for it. Each version is asked for under a time limit, all at once. The link
//! asks when it connects and again only when a program's file changed (`fingerprint`, a
//! `stat` per program, on its rescans, which skip measurements). A run's provenance asks
//! through `version`, the same probe keyed by program, so "ran on" and the inventory never
//! disagree about a tool (they did: bonnie++ 2.00a in one, "version not reported" in the other).

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use platter_proto::inventory::ToolVersion;

/// How long one program may take to say its version for the inventory (rescanned every
/// 30 s, and at connection, where a slow tool must not hold the hello up).
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// …and for a run's provenance, asked once at a plan's start and kept for good: a tool
/// started cold on a loaded host took 16 s to print its version here once, and "unknown"
/// in a report is forever.
pub(crate) const PROVENANCE_TIMEOUT: Duration = Duration::from_secs(30);

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
    // Reads the drives' health before and after a plan (`provenance::health`).
    ("smartctl", Ask::Args(&["--version"])),
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
    ToolVersion {
        name: name.to_string(),
        version: say(name, &path, ask, PROBE_TIMEOUT),
        path: path.display().to_string(),
    }
}

/// The version of `program` (a name found as the agent finds it, or a path) for a run's
/// provenance: asked the way `TOOLS` asks the program of that file name (`--version` for
/// one it does not list), under `PROVENANCE_TIMEOUT`, and said as the inventory says it.
pub(crate) fn version(program: &str) -> String {
    let name = std::path::Path::new(program)
        .file_name()
        .map_or(program.into(), |n| n.to_string_lossy());
    const DEFAULT: Ask = Ask::Args(&["--version"]);
    let ask = TOOLS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(&DEFAULT, |(_, a)| a);
    match crate::process::find_program(program.as_ref()) {
        Ok(path) => say(&name, &path, ask, PROVENANCE_TIMEOUT),
        Err(e) => format!("unknown: {program}: {e}"),
    }
}

/// What the program `name` at `path` says of its version, as one line that names it: a
/// provenance lists the versions alone ("bonnie++ 2.00a; fio-3.33"), so a line the agent
/// makes up (no version, an error, a usage's "Version: 2.00a") carries the name too.
fn say(name: &str, path: &std::path::Path, ask: &Ask, limit: Duration) -> String {
    let line = match ask {
        Ask::Nothing => return format!("{name} (it does not report a version)"),
        Ask::Args(args) => first_line(path, args, limit, |_| true),
        Ask::Usage(args) => first_line(path, args, limit, |l| l.to_lowercase().contains("version"))
            .map(|l| usage_version(name, &l)),
    };
    line.unwrap_or_else(|why| format!("{name}: {why}"))
}

/// "bonnie++ 2.00a" from its usage's "Version: 2.00a" (any line naming a version, the
/// label dropped); a line in another shape is kept whole after the name.
fn usage_version(name: &str, line: &str) -> String {
    let labelled = line
        .get(.."version".len())
        .filter(|l| l.eq_ignore_ascii_case("version"))
        .map(|_| line["version".len()..].trim_start_matches([':', ' ', '\t']))
        .filter(|v| !v.is_empty());
    format!("{name} {}", labelled.unwrap_or(line).trim())
}

/// The first line `program args` prints (stdout, then stderr) that `wanted` takes, within
/// `limit` (then it is killed), or why there is none.
fn first_line(
    program: &std::path::Path,
    args: &[&str],
    limit: Duration,
    wanted: impl Fn(&str) -> bool,
) -> Result<String, String> {
    let child = crate::process::command(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return Err(format!("unknown: {e}")),
    };
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("unknown: no answer within {}s", limit.as_secs()));
            }
            Err(e) => return Err(format!("unknown: {e}")),
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
        .map(str::to_string)
        .ok_or_else(|| "no version printed".to_string())
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
        let silent = first_line("sleep".as_ref(), &["30"], PROBE_TIMEOUT, |_| true).unwrap_err();
        assert!(silent.contains("no answer within"), "{silent}");
        assert!(started.elapsed() < PROBE_TIMEOUT + Duration::from_secs(2));
        let usage = first_line(
            "sh".as_ref(),
            &["-c", "echo usage: x; echo Version: 2.00a >&2; exit 1"],
            PROBE_TIMEOUT,
            |l| l.to_lowercase().contains("version"),
        );
        assert_eq!(usage.as_deref(), Ok("Version: 2.00a"));
    }

    /// What `bonnie++ --version 2>&1` printed on the Debian 12 test VM (bonnie++ 2.00a-2,
    /// /usr/sbin/bonnie++, exit status 1): it has no version flag, so it complains and
    /// prints its usage, whose last line is the version.
    const BONNIE_200A_USAGE: &str = "\
bonnie++: invalid option -- '-'
usage:
bonnie++ [-d scratch-dir] [-c concurrency] [-s size(MiB)[:chunk-size(b)]]
      [-n number-to-stat[:max-size[:min-size][:num-directories[:chunk-size]]]]
      [-m machine-name] [-r ram-size-in-MiB]
      [-x number-of-tests] [-u uid-to-use:gid-to-use] [-g gid-to-use]
      [-q] [-f] [-b] [-p processes | -y] [-z seed | -Z random-file]
      [-D]

Version: 2.00a
";

    /// bonnie++'s usage text gives "bonnie++ 2.00a"; compilebench, which cannot say, says
    /// so by name; a program that fails to answer is named with why.
    #[test]
    fn a_version_names_its_program_whatever_the_program_said() {
        let printed = format!(
            "printf '%s' '{}'; exit 1",
            BONNIE_200A_USAGE.replace('\'', r"'\''")
        );
        let line = first_line("sh".as_ref(), &["-c", &printed], PROBE_TIMEOUT, |l| {
            l.to_lowercase().contains("version")
        })
        .unwrap();
        assert_eq!(usage_version("bonnie++", &line), "bonnie++ 2.00a");
        // The usage's `ram-size-in-MiB` lines do not say "version"; one that says it in
        // another shape is kept whole.
        assert_eq!(
            usage_version("x", "x version 1.2 (2024)"),
            "x x version 1.2 (2024)"
        );
        let nothing = Ask::Nothing;
        assert_eq!(
            say(
                "compilebench",
                "/opt/compilebench".as_ref(),
                &nothing,
                PROBE_TIMEOUT
            ),
            "compilebench (it does not report a version)"
        );
        let sleeper = Ask::Args(&["30"]);
        assert_eq!(
            say("sleep", "sleep".as_ref(), &sleeper, PROBE_TIMEOUT),
            format!(
                "sleep: unknown: no answer within {}s",
                PROBE_TIMEOUT.as_secs()
            )
        );
        assert!(version("platter-no-such-tool").starts_with("unknown: platter-no-such-tool: "));
    }

    /// The provenance and the inventory say one thing of each program this host has.
    #[test]
    fn provenance_says_what_the_inventory_says() {
        for t in probe() {
            if t.path.is_empty() || t.version.contains("no answer within") {
                continue;
            }
            assert_eq!(version(&t.name), t.version, "{t:?}");
            if t.name == "bonnie++" {
                assert!(t.version.starts_with("bonnie++ 2."), "{t:?}");
            }
        }
    }
}
