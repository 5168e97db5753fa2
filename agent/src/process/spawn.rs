//! Starts a workload through `platter-spawn` (`agent/spawn/helper.rs`) and collects what
//! the helper measured. Owns the embedded helper (one sealed memfd per agent process) and
//! the message format; must not write to disk.
//!
//! Why a helper: `exec` folds the exec'ing process's peak RSS into the new program's
//! `ru_maxrss` (Linux `exec_mmap` → `setmax_mm_hiwater_rss`), and a vfork'd or forked
//! child of the agent carries the agent's RSS into that exec. Spawned straight from the
//! agent, `sleep 0.02` read 12.1 MiB (`/usr/bin/time`: 1.6 MiB). The helper is ~2 KiB of
//! static code that peaks at 20 KiB (VmHWM), under any real program's RSS. Its own
//! `wait4` of the workload gives the rusage; the agent's `wait4` of the helper would
//! include the helper's polluted peak again, so the figures come back over a pipe.
//!
//! Why one exec of the helper per workload and not a long-lived spawner serving many: a
//! server needs a request protocol, fd passing (SCM_RIGHTS) for stdio, and its own
//! lifetime and crash handling, to save the exec of a 2 KiB static binary. Measured with
//! `benches/spawn_overhead.rs` (1000 × `/bin/true`, release, 2 busy cores): 0.1–0.2 ms
//! more per step than spawning directly, and the same reported wall time (medians of
//! five runs: 0.83–0.88 ms through the helper, 0.85–0.92 ms direct, `hyperfine -N`
//! 0.86–0.97 ms), because the helper starts its clock only after its own start-up. Per
//! spawn, the helper inherits fds and environment the ordinary way and cannot outlive
//! its one workload.
//!
//! Why hand-written: no crate spawns through a separate minimal process and returns its
//! child's rusage; `std::process::Command` cannot map the report pipe to fd 3 without a
//! `pre_exec` closure, which makes std fork the whole agent instead of vfork'ing.

use std::ffi::{CString, OsStr, OsString};
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

static HELPER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/platter-spawn"));

// Message tags and `FAILED` stages, as in `agent/spawn/helper.rs`.
const STARTED: i64 = 1;
const DONE: i64 = 2;
const FAILED: i64 = 3;
const STAGE_EXEC: i64 = 3;
/// The fd the helper reports on.
const REPORT_FD: RawFd = 3;

/// What the helper measured around its one child.
#[derive(Debug, Clone, Copy)]
pub(super) struct Measured {
    pub wall: Duration,
    pub user: Duration,
    pub sys: Duration,
    pub max_rss_bytes: u64,
    /// Raw `wait4` status.
    pub status: i32,
}

/// The workload's standard fds: stdin, stdout, stderr.
pub(super) type Stdio<'a> = [BorrowedFd<'a>; 3];

/// Runs `program` (looked up in PATH unless it has a `/`) with `args` in its own process
/// group and waits for it. `running` holds the group id while it runs. A program that
/// cannot be found or exec'd is an `Err`, like `Command::spawn`.
pub(super) fn run(
    program: &OsStr,
    args: &[&OsStr],
    env: &[(String, OsString)],
    stdio: Stdio<'_>,
    running: &AtomicI32,
) -> std::io::Result<Measured> {
    let envp = environment(env);
    let path_var = envp
        .iter()
        .find_map(|kv| kv.as_bytes().strip_prefix(b"PATH="))
        .map(OsStr::from_bytes);
    let path = resolve(program, path_var)?;
    let mut argv = vec![
        CString::new("platter-spawn")?,
        CString::new(path.into_os_string().into_vec())?,
        CString::new(program.as_bytes())?,
    ];
    for a in args {
        argv.push(CString::new(a.as_bytes())?);
    }
    let envp: Vec<CString> = envp
        .into_iter()
        .map(|kv| CString::new(kv.into_vec()))
        .collect::<Result<_, _>>()?;

    let (report_r, report_w) = pipe()?;
    let helper = spawn_helper(&argv, &envp, stdio, report_w.as_fd())?;
    // Only the helper may hold the write end, so its exit is our EOF.
    drop(report_w);
    let mut report = std::fs::File::from(report_r);
    let first = read_message(&mut report);
    let result = match first {
        Ok([STARTED, pid, ..]) => {
            running.store(pid as i32, Ordering::SeqCst);
            let last = read_message(&mut report);
            running.store(0, Ordering::SeqCst);
            last
        }
        other => other,
    };
    let helper_status = wait(helper)?;
    match result {
        Ok([DONE, wall_ns, utime_us, stime_us, maxrss_kib, status, ..]) => Ok(Measured {
            wall: Duration::from_nanos(wall_ns.max(0) as u64),
            user: Duration::from_micros(utime_us.max(0) as u64),
            sys: Duration::from_micros(stime_us.max(0) as u64),
            max_rss_bytes: maxrss_kib.max(0) as u64 * 1024,
            status: status as i32,
        }),
        Ok([FAILED, errno, stage, ..]) => {
            let e = std::io::Error::from_raw_os_error(errno as i32);
            if stage == STAGE_EXEC {
                Err(e)
            } else {
                Err(std::io::Error::new(
                    e.kind(),
                    format!("spawn helper failed at stage {stage}: {e}"),
                ))
            }
        }
        Ok(m) => Err(std::io::Error::other(format!(
            "spawn helper sent an unknown message {m:?}"
        ))),
        Err(e) => Err(std::io::Error::other(format!(
            "spawn helper ended without a report ({e}; wait status {helper_status:#x})"
        ))),
    }
}

fn read_message(f: &mut std::fs::File) -> std::io::Result<[i64; 8]> {
    let mut buf = [0u8; 64];
    // read_exact retries on EINTR.
    f.read_exact(&mut buf)?;
    let mut m = [0i64; 8];
    for (w, b) in m.iter_mut().zip(buf.chunks_exact(8)) {
        *w = i64::from_ne_bytes(b.try_into().expect("8-byte chunk"));
    }
    Ok(m)
}

/// The agent's environment with `env` set on top, as `Command::envs` would pass it.
fn environment(env: &[(String, OsString)]) -> Vec<OsString> {
    let mut vars: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| !env.iter().any(|(e, _)| OsStr::new(e) == k))
        .collect();
    vars.extend(env.iter().map(|(k, v)| (k.into(), v.clone())));
    vars.into_iter()
        .map(|(mut k, v)| {
            k.push("=");
            k.push(v);
            k
        })
        .collect()
}

/// `execvp`'s search: a name with a `/` is used as is, otherwise the first executable
/// file of that name in `path` (the workload's PATH; the usual default without one).
fn resolve(program: &OsStr, path: Option<&OsStr>) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    let path = path.unwrap_or(OsStr::new("/usr/local/bin:/usr/bin:/bin"));
    for dir in path.as_bytes().split(|&b| b == b':') {
        let dir = if dir.is_empty() { b"." } else { dir };
        let candidate = Path::new(OsStr::from_bytes(dir)).join(program);
        let executable = std::fs::metadata(&candidate)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        if executable {
            return Ok(candidate);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("{} not found in PATH", program.to_string_lossy()),
    ))
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?)
}

/// The helper's path, `/proc/self/fd/N` of a sealed read-only memfd made once per
/// process: nothing is written to disk, and it works in a container built FROM scratch.
fn helper_path() -> std::io::Result<&'static CString> {
    static PATH: OnceLock<Result<CString, String>> = OnceLock::new();
    PATH.get_or_init(|| install_helper().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| std::io::Error::other(format!("cannot install the spawn helper: {e}")))
}

fn install_helper() -> std::io::Result<CString> {
    use rustix::fs::{MemfdFlags, SealFlags};
    use std::io::Write;
    let fd = rustix::fs::memfd_create(
        c"platter-spawn",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )?;
    let mut rw = std::fs::File::from(fd);
    rw.write_all(HELPER)?;
    let seals = SealFlags::SEAL | SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE;
    rustix::fs::fcntl_add_seals(&rw, seals)?;
    // exec refuses a file that is open for writing (ETXTBSY), so keep a read-only
    // descriptor and close the writable one. It lives as long as the process.
    let ro = std::fs::File::open(format!("/proc/self/fd/{}", rw.as_raw_fd()))?;
    drop(rw);
    // Above the fds a spawn maps (0–3): with a low number (one another thread had just
    // closed), the child's dup2 onto it replaced the helper before the exec, and every
    // spawn of the process failed with EACCES (seen once in CI: fd 3 was free).
    // Never closed: the helper's descriptor lives as long as the process.
    let high = rustix::io::fcntl_dupfd_cloexec(&ro, HELPER_FD_MIN)?.into_raw_fd();
    drop(ro);
    Ok(CString::new(format!("/proc/self/fd/{high}"))?)
}

/// The lowest descriptor the helper's memfd may have: well above the fds a spawn maps.
const HELPER_FD_MIN: RawFd = 64;

/// posix_spawn (vfork + exec: the agent's memory is not copied) of the helper with the
/// workload's stdio on fds 0–2 and the report pipe on fd 3. SIGPIPE is reset to its
/// default (the Rust runtime ignores it, and a shell pipeline needs it) and no signal is
/// blocked, as `std::process::Command` does.
fn spawn_helper(
    argv: &[CString],
    envp: &[CString],
    stdio: Stdio<'_>,
    report: BorrowedFd<'_>,
) -> std::io::Result<libc::pid_t> {
    let helper = helper_path()?;
    // dup2 runs in order: a source below 4 could be overwritten before it is used.
    let mut lifted = Vec::new();
    let mut sources = [0; 4];
    for (s, fd) in sources
        .iter_mut()
        .zip([stdio[0], stdio[1], stdio[2], report])
    {
        *s = fd.as_raw_fd();
        if *s <= REPORT_FD {
            let d = rustix::io::fcntl_dupfd_cloexec(fd, REPORT_FD + 1)?;
            *s = d.as_raw_fd();
            lifted.push(d);
        }
    }
    let mut argv_p: Vec<*mut libc::c_char> = argv.iter().map(|a| a.as_ptr() as *mut _).collect();
    argv_p.push(std::ptr::null_mut());
    let mut envp_p: Vec<*mut libc::c_char> = envp.iter().map(|a| a.as_ptr() as *mut _).collect();
    envp_p.push(std::ptr::null_mut());

    // No safe wrapper: neither std nor rustix has posix_spawn (std's Command would fork the
    // agent instead of vfork'ing, see the module docs).
    // SAFETY: the attribute and file-action objects are initialised before use and
    // destroyed after, on every path; every pointer passed to posix_spawn outlives the call:
    // `helper` is 'static, `argv_p`/`envp_p` are NULL-terminated and point into `argv`/`envp`,
    // borrowed for the whole function; the descriptors in `sources` stay open until it
    // returns (borrowed from the caller, or owned by `lifted`).
    unsafe {
        let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        cvt(libc::posix_spawn_file_actions_init(&mut actions))?;
        cvt(libc::posix_spawnattr_init(&mut attr))?;
        let r = (|| {
            for (target, source) in sources.iter().enumerate() {
                // dup2 onto itself clears close-on-exec (glibc ≥ 2.29, POSIX 2024).
                cvt(libc::posix_spawn_file_actions_adddup2(
                    &mut actions,
                    *source,
                    target as RawFd,
                ))?;
            }
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            cvt(libc::posix_spawnattr_setsigmask(&mut attr, &set))?;
            libc::sigaddset(&mut set, libc::SIGPIPE);
            cvt(libc::posix_spawnattr_setsigdefault(&mut attr, &set))?;
            cvt(libc::posix_spawnattr_setflags(
                &mut attr,
                (libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF) as _,
            ))?;
            let mut pid = 0;
            cvt(libc::posix_spawn(
                &mut pid,
                helper.as_ptr(),
                &actions,
                &attr,
                argv_p.as_ptr(),
                envp_p.as_ptr(),
            ))?;
            Ok(pid)
        })();
        libc::posix_spawn_file_actions_destroy(&mut actions);
        libc::posix_spawnattr_destroy(&mut attr);
        r
    }
}

/// posix_spawn* return an error number instead of setting errno.
fn cvt(r: libc::c_int) -> std::io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(r))
    }
}

/// Reaps the helper; its own rusage is of no interest.
fn wait(pid: libc::pid_t) -> std::io::Result<libc::c_int> {
    use rustix::process::{waitpid, Pid, WaitOptions};
    let child = Pid::from_raw(pid).ok_or_else(|| std::io::Error::other("pid 0"))?;
    loop {
        match waitpid(Some(child), WaitOptions::empty()) {
            Ok(Some((_, status))) => return Ok(status.as_raw()),
            // Only with WNOHANG, which is not asked.
            Ok(None) => return Err(std::io::Error::other("waitpid returned no child")),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The helper's descriptor must never be one a spawn maps (0–3), whichever low fds
    /// are free when it is installed: a dup2 onto it would replace the helper.
    #[test]
    fn the_helper_lives_above_the_fds_a_spawn_maps() {
        // Free a low descriptor just before installing, as a parallel test may.
        let low = std::fs::File::open("/dev/null").unwrap();
        drop(low);
        let path = install_helper().unwrap();
        let fd: RawFd = path
            .to_str()
            .unwrap()
            .strip_prefix("/proc/self/fd/")
            .unwrap()
            .parse()
            .unwrap();
        assert!(fd >= HELPER_FD_MIN, "{path:?}");
        let meta = std::fs::metadata(path.to_str().unwrap()).unwrap();
        assert_eq!(meta.len(), HELPER.len() as u64);
        // SAFETY: `install_helper` leaked this descriptor on purpose and nothing else holds
        // it (the process's own helper is another one): the OwnedFd closes it exactly once.
        drop(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) });
    }
}
