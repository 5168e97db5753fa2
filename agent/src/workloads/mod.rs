//! Measure steps: one function per workload kind, dispatched on `model::Workload`. Each
//! returns its samples or why it failed; none of them writes to the journal or logs.
//! The parsers (`fio`, `bonnie`, `compilebench`) are pure functions of a tool's output.

pub(crate) mod bonnie;
pub(crate) mod compilebench;
pub(crate) mod fio;
pub(crate) mod fsync;
pub(crate) mod memlimit;
pub(crate) mod sample;

use std::ffi::OsString;
use std::sync::atomic::AtomicI32;

use crate::model::{FsyncParams, Sample, Tool, Workload};
use crate::process::{self, Outcome};

/// How a step ended, before the executor makes it a record.
#[derive(Debug, Default)]
pub struct Ending {
    pub failed: bool,
    /// Nothing ran, and not by failure (a cancel arrived before the measurement began):
    /// the step ends as skipped.
    pub skipped: bool,
    pub exit_status: i32,
    pub stderr_tail: String,
    pub error: String,
    pub samples: Vec<Sample>,
}

impl Ending {
    /// A failure without an exit status (nothing ran, or it was not a process). Takes any
    /// message or error: what is stored is its text.
    pub fn error(msg: impl std::fmt::Display) -> Ending {
        Ending {
            failed: true,
            error: msg.to_string(),
            exit_status: -1,
            ..Ending::default()
        }
    }

    /// A command's ending without samples: failed on a non-zero exit.
    pub fn from_outcome(o: &Outcome, what: &str) -> Ending {
        finish(o, what, |_| Ok(Vec::new()))
    }
}

/// A measured value of `metric` in `unit`.
pub(crate) fn sample(metric: &str, value: f64, unit: &str) -> Sample {
    Sample {
        metric: metric.into(),
        value,
        unit: unit.into(),
        histogram: Vec::new(),
        missing: String::new(),
    }
}

/// wall, user and sys seconds and peak RSS of a command.
pub fn outcome_samples(o: &Outcome) -> Vec<Sample> {
    vec![
        sample("wall", o.wall.as_secs_f64(), "s"),
        sample("user", o.user.as_secs_f64(), "s"),
        sample("sys", o.sys.as_secs_f64(), "s"),
        sample("max_rss", o.max_rss_bytes as f64, "B"),
    ]
}

fn from_parsed(parsed: sample::Parsed) -> Vec<Sample> {
    let mut out: Vec<Sample> = parsed
        .samples
        .into_iter()
        .map(|s| sample(&s.metric, s.value, &s.unit))
        .collect();
    out.extend(parsed.missing.into_iter().map(|m| Sample {
        metric: m.metric,
        value: f64::NAN,
        unit: String::new(),
        histogram: Vec::new(),
        missing: m.reason,
    }));
    out
}

/// Runs `workload` (its strings already substituted) and measures it.
pub fn measure(workload: &Workload, env: &[(String, OsString)], running: &AtomicI32) -> Ending {
    measure_as(workload, env, None, running)
}

/// `measure`, a command workload run as `user` (`None`: as the agent).
pub(crate) fn measure_as(
    workload: &Workload,
    env: &[(String, OsString)],
    user: Option<&process::Credentials>,
    running: &AtomicI32,
) -> Ending {
    match workload {
        Workload::Command(script) => match process::run_as(script, env, user, running) {
            Ok(o) => finish(&o, "workload", |o| Ok(outcome_samples(o))),
            Err(e) => Ending::error(format!("could not start `{script}`: {e}")),
        },
        Workload::Fsync(p) => fsync_workload(p),
        Workload::Tool { tool, argv } => {
            let mut argv = argv.clone();
            // bonnie++ refuses to run as root unless told which user to be.
            if *tool == Tool::Bonnie
                && rustix::process::geteuid().is_root()
                && !argv.iter().any(|a| a == "-u")
            {
                argv.extend(["-u".to_string(), "root".to_string()]);
            }
            // `-r` is made true: bonnie++ runs in a memory cgroup of that size (its page
            // cache included), so its files of twice that size are read from the drive.
            // Not on tmpfs, whose pages cannot leave memory: the limit would kill it.
            let program = argv[0].clone();
            let mut _cgroup = None;
            let limit = match tool {
                Tool::Bonnie => memlimit::bonnie_limit(&argv, memlimit::in_memory),
                _ => None,
            };
            if let Some(limit) = limit {
                let name = format!("platter-bonnie-{}", std::process::id());
                match memlimit::MemoryCgroup::create(&name, limit) {
                    Ok(cg) => {
                        argv = cg.wrap(&argv);
                        _cgroup = Some(cg);
                    }
                    Err(e) => {
                        return Ending::error(format!(
                            "cannot hold bonnie++ to the memory its -r gives ({limit} bytes): {e}; \
                             without that limit its reads come from the page cache. Run the agent \
                             as root where it can make cgroups, or give -s of at least twice the \
                             host's RAM and no -r"
                        ))
                    }
                }
            }
            let o = match process::run_argv(&argv, env, running) {
                Ok(o) => o,
                Err(e) => {
                    let hint = match tool {
                        Tool::Fio => " (install fio: apt install fio)",
                        Tool::Bonnie => " (install bonnie++: apt install bonnie++)",
                        Tool::Compilebench => {
                            " (compilebench is not packaged: give its path in `command:`)"
                        }
                    };
                    return Ending::error(format!("could not start `{program}`: {e}{hint}"));
                }
            };
            if *tool == Tool::Fio && !o.success() {
                // fio reports job errors in its JSON; its message beats "exit status 1".
                if let Err(e) = fio::parse(&o.stdout) {
                    let mut m = finish(&o, "fio", |_| Ok(Vec::new()));
                    m.error = format!("fio failed: {e}");
                    return m;
                }
            }
            finish(&o, &program, |o| {
                let parsed = match tool {
                    Tool::Fio => fio::parse(&o.stdout).map_err(|e| e.to_string()),
                    Tool::Bonnie => bonnie::parse_csv(&o.stdout).map_err(|e| e.to_string()),
                    Tool::Compilebench => compilebench::parse(&o.stdout).map_err(|e| e.to_string()),
                };
                let mut samples = outcome_samples(o);
                samples.extend(from_parsed(
                    parsed.map_err(|e| format!("could not read {program}'s output: {e}"))?,
                ));
                Ok(samples)
            })
        }
    }
}

/// A command's ending: failed on a non-zero exit, else the samples `ok` makes of it.
fn finish(
    o: &Outcome,
    what: &str,
    ok: impl FnOnce(&Outcome) -> Result<Vec<Sample>, String>,
) -> Ending {
    let mut m = Ending {
        exit_status: o.exit_code.unwrap_or(-1),
        stderr_tail: o.stderr_tail.clone(),
        ..Ending::default()
    };
    if !o.success() {
        m.failed = true;
        m.error = format!("{what} failed: {}", o.describe());
        return m;
    }
    match ok(o) {
        Ok(samples) => m.samples = samples,
        Err(e) => {
            m.failed = true;
            m.error = e;
        }
    }
    m
}

/// Runs `f` on a thread of its own with a file descriptor table of its own.
///
/// A process with more threads than one shares its descriptor table between them, and then
/// every system call on a descriptor takes and drops a reference to its file (`fdget`,
/// `fput`: two atomic operations) that a single-threaded process skips. The agent has a
/// runtime's threads (and under `platter run` a coordinator's too), so its fsync loop paid
/// that on each `pwrite` and `fdatasync`: measured here with a C loop of write+fdatasync
/// of 1 byte on /dev/shm, 770 ns per operation alone against 910–990 ns with one idle
/// thread beside it, and 780–800 ns with that thread and the loop's own table
/// (`unshare(CLONE_FILES)`), which is what this gives the loop (BENCHMARKS.md).
/// Falls back to the calling thread when no thread can be started or unshared.
fn run_alone<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    // Taken by the thread, or back here when none could be started.
    let f = std::sync::Mutex::new(Some(f));
    let spawned = std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("fsync-loop".into())
            .spawn_scoped(s, || {
                // SAFETY: this thread has seen no descriptor yet and shows none to any
                // other: the closure opens, uses and closes its own files and returns only
                // values, so no thread ever uses a descriptor of the other's table. Those
                // already open are copies in the new table, which closes them when the
                // thread ends (the files stay open through the shared table).
                let alone = unsafe {
                    rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::FILES)
                };
                if let Err(e) = alone {
                    tracing::debug!(error = %e, "the fsync loop shares the agent's descriptor table");
                }
                let f = f.lock().ok().and_then(|mut f| f.take());
                f.map(|f| f())
            });
        match handle {
            Ok(h) => h
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(e) => {
                tracing::debug!(error = %e, "the fsync loop runs on the executor's thread");
                None
            }
        }
    });
    match spawned {
        Some(t) => t,
        None => {
            let f = f.into_inner().ok().and_then(|mut f| f.take());
            // The thread either ran the closure (Some above) or never took it.
            f.map(|f| f())
                .expect("the fsync loop's closure ran nowhere")
        }
    }
}

fn fsync_workload(p: &FsyncParams) -> Ending {
    // The loop gets the CPUs a spawned workload gets (a thread inherits the mask it was
    // started with).
    let _all_cpus = crate::affinity::Widened::new();
    match run_alone(|| fsync::run(p)) {
        Ok(r) => {
            let mut samples = vec![sample("wall", r.total.as_secs_f64(), "s")];
            samples.extend(
                r.samples()
                    .into_iter()
                    .map(|(metric, value, unit, histogram)| Sample {
                        metric,
                        value,
                        unit,
                        histogram,
                        missing: String::new(),
                    }),
            );
            Ending {
                samples,
                ..Ending::default()
            }
        }
        Err(e) => Ending::error(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::{AsRawFd, IntoRawFd};

    use super::run_alone;

    #[test]
    fn the_fsync_loop_runs_on_a_thread_with_a_descriptor_table_of_its_own() {
        // Kept open by the caller: the loop's thread sees it too (its table is a copy).
        let shared = std::fs::File::open("/proc/self/status").unwrap();
        let fd = shared.as_raw_fd();
        let (seen, leaked) = run_alone(|| {
            let seen = rustix::io::fcntl_getfd(unsafe_borrow(fd)).is_ok();
            // Left open on purpose: it lives in the loop's table alone. Numbered high, so
            // that no other test's file takes the number once the thread is gone.
            let file = std::fs::File::open("/proc/self/stat").unwrap();
            let leaked = rustix::io::fcntl_dupfd_cloexec(&file, 900)
                .unwrap()
                .into_raw_fd();
            (seen, leaked)
        });
        assert!(seen, "the loop's table starts as a copy of the agent's");
        // Gone with the thread's table: never in the agent's, whose descriptors stay open.
        assert!(rustix::io::fcntl_getfd(unsafe_borrow(leaked)).is_err());
        assert!(rustix::io::fcntl_getfd(unsafe_borrow(fd)).is_ok());
    }

    fn unsafe_borrow(fd: i32) -> std::os::fd::BorrowedFd<'static> {
        // SAFETY: only asked whether it is open (F_GETFD), which any number may be.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }
    }
}
