//! Starts a workload through `platter-spawn` (`agent/spawn/helper.rs`) and collects what
//! the helper measured. Owns the embedded helper (one sealed memfd per agent process), the
//! resident helper that serves the agent's workloads, and the message format; must not
//! write to disk.
//!
//! Why a helper: `exec` folds the exec'ing process's peak RSS into the new program's
//! `ru_maxrss` (Linux `exec_mmap` → `setmax_mm_hiwater_rss`), and a vfork'd or forked
//! child of the agent carries the agent's RSS into that exec. Spawned straight from the
//! agent, `sleep 0.02` read 12.1 MiB (`/usr/bin/time`: 1.6 MiB). The helper is ~4 KiB of
//! static code that peaks at 16–75 KiB (VmHWM), under any real program's RSS. Its own
//! `wait4` of the workload gives the rusage; the agent's `wait4` of the helper would
//! include the helper's polluted peak again, so the figures come back over a socket
//! (resident) or a pipe (one-shot).
//!
//! Why resident: each agent process starts one helper (`platter-spawn --serve`, lazily, at
//! its first workload) and sends it one request per workload over a `SOCK_SEQPACKET`
//! socketpair: path, working directory, argv and environment in one message, stdin,
//! stdout and stderr as `SCM_RIGHTS`. Exec'ing the helper anew for every workload (the
//! first design: it kept the helper free of a protocol, fd passing and a lifetime of its
//! own) cost ~0.2 ms per step and 15% of the CPU samples of `platter run` over 1000 ×
//! `/bin/true` (`perf record`, BENCHMARKS.md "End to end"), which kept that run above
//! twice `hyperfine -N`'s time. Resident, the helper costs 0.03–0.09 ms per step over
//! spawning directly (`benches/spawn_overhead.rs`, 1000 × `/bin/true`) instead of
//! ~0.2 ms, and 1000 × `/bin/true` under `platter run` went from a median 2.29× to 1.90×
//! `hyperfine -N --runs 1000` (18 alternating rounds on a loaded 2-core machine;
//! BENCHMARKS.md "End to end"). Its peak RSS stays tiny because it has only static
//! buffers (a request is at most `REQ_MAX` bytes and `MAX_PTRS` argv + envp pointers).
//!
//! The one-shot path (`platter-spawn PATH ARGV0 ARGS...`, one exec of the helper per
//! workload, report on a pipe) stays for what the resident helper does not take: a
//! request larger than its buffers, a helper that cannot be started, a second request
//! while one runs (the executor runs one step at a time; parallel callers, such as unit
//! tests, take the one-shot path instead of waiting), and a helper found dead when a
//! request is sent (the request is then sent to a new helper once, then goes one-shot).
//! A helper that dies or whose socket fails once a request was sent fails that step like
//! a failed spawn (its workload's group is killed if it had started) and is replaced at
//! the next step. The helper exits when the agent's end closes (the agent exits); a
//! workload it runs then is left to the agent's own cancellation, as before.
//!
//! The working directory: the resident helper was started in an earlier step, so every
//! request carries the agent's current directory and the child chdirs to it (a directory
//! the agent cannot name, e.g. deleted, is sent empty: the helper's own is kept). The
//! environment is the agent's with the step's variables on top, sent whole per request.
//!
//! Why hand-written: no crate spawns through a separate minimal process and returns its
//! child's rusage; `std::process::Command` cannot map the report pipe to fd 3 without a
//! `pre_exec` closure, which makes std fork the whole agent instead of vfork'ing.

use super::Credentials;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, TryLockError};
use std::time::Duration;

static HELPER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/platter-spawn"));

// Message tags and `FAILED` stages, as in `agent/spawn/helper.rs`.
const STARTED: i64 = 1;
const DONE: i64 = 2;
const FAILED: i64 = 3;
const STAGE_EXEC: i64 = 3;
/// The fd the helper reports on (and, resident, receives requests on).
const REPORT_FD: RawFd = 3;
/// The resident helper's static buffers: the largest request (header and strings) and
/// the most argv + envp pointers (both NULLs included). As in `agent/spawn/helper.rs`.
const REQ_MAX: usize = 32 * 1024;
const MAX_PTRS: usize = 2048;
/// The most supplementary groups `--as` takes. As in `agent/spawn/helper.rs`.
const MAX_GROUPS: usize = 256;
/// The helper's `FAILED` stage when it could not become the workload's user.
const STAGE_USER: i64 = 8;

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

/// The agent's resident helper.
static RESIDENT: Resident = Resident::new();

/// Runs `program` (looked up in PATH unless it has a `/`) with `args` in its own process
/// group and waits for it. `running` holds the group id while it runs. A program that
/// cannot be found or exec'd is an `Err`, like `Command::spawn`.
pub(super) fn run(
    program: &OsStr,
    args: &[&OsStr],
    env: &[(String, OsString)],
    stdio: Stdio<'_>,
    user: Option<&Credentials>,
    running: &AtomicI32,
) -> std::io::Result<Measured> {
    run_with(&RESIDENT, program, args, env, stdio, user, running)
}

#[allow(clippy::too_many_arguments)]
fn run_with(
    resident: &Resident,
    program: &OsStr,
    args: &[&OsStr],
    env: &[(String, OsString)],
    stdio: Stdio<'_>,
    user: Option<&Credentials>,
    running: &AtomicI32,
) -> std::io::Result<Measured> {
    let envp = environment(env);
    let path_var = envp
        .iter()
        .find_map(|kv| kv.as_bytes().strip_prefix(b"PATH="))
        .map(OsStr::from_bytes);
    let path = CString::new(resolve(program, path_var)?.into_os_string().into_vec())?;
    let mut argv = vec![CString::new(program.as_bytes())?];
    for a in args {
        argv.push(CString::new(a.as_bytes())?);
    }
    let envp: Vec<CString> = envp
        .into_iter()
        .map(|kv| CString::new(kv.into_vec()))
        .collect::<Result<_, _>>()?;
    // A workload of another user takes the one-shot path: the helper exec'd for it drops
    // to the user before it forks (`--as`), so the resident one stays the agent's. Such
    // workloads (builds) run for seconds; the ~0.2 ms of an exec does not show.
    let options = match user {
        Some(u) => user_options(u)?,
        None => {
            if let Some(result) = resident.run(&path, &argv, &envp, stdio, running) {
                return result;
            }
            Vec::new()
        }
    };
    resident.one_shot.fetch_add(1, Ordering::Relaxed);
    let helper_argv: Vec<&CStr> = [c"platter-spawn"]
        .into_iter()
        .chain(options.iter().map(CString::as_c_str))
        .chain([path.as_c_str()])
        .chain(argv.iter().map(CString::as_c_str))
        .collect();
    run_once(&helper_argv, &envp, stdio, running)
}

/// The one-shot helper's option for a workload run as `u` (see `agent/spawn/helper.rs`):
/// `--as=UID:GID:G1,G2,…`.
fn user_options(u: &Credentials) -> std::io::Result<Vec<CString>> {
    if u.groups.len() > MAX_GROUPS {
        return Err(std::io::Error::other(format!(
            "the user is in {} groups; a workload can run with at most {MAX_GROUPS}",
            u.groups.len()
        )));
    }
    let groups: Vec<String> = u.groups.iter().map(u32::to_string).collect();
    let option = format!("--as={}:{}:{}", u.uid, u.gid, groups.join(","));
    Ok(vec![CString::new(option)?])
}

/// A resident helper, started at the first request and replaced when it fails.
struct Resident {
    server: Mutex<Option<Server>>,
    /// Helpers started, and workloads that took the one-shot path: for the tests.
    started: AtomicU64,
    one_shot: AtomicU64,
}

/// A running `platter-spawn --serve` and the agent's end of its socket.
struct Server {
    sock: OwnedFd,
    pid: libc::pid_t,
}

/// How a request to the resident helper went wrong.
enum Broken {
    /// The request never reached the helper: it may go to another one.
    Unsent,
    /// After it was sent: the step fails with this error.
    Sent(std::io::Error),
}

impl Resident {
    const fn new() -> Resident {
        Resident {
            server: Mutex::new(None),
            started: AtomicU64::new(0),
            one_shot: AtomicU64::new(0),
        }
    }

    /// Runs the workload through the resident helper; `None` when it must take the
    /// one-shot path (see the module docs).
    fn run(
        &self,
        path: &CStr,
        argv: &[CString],
        envp: &[CString],
        stdio: Stdio<'_>,
        running: &AtomicI32,
    ) -> Option<std::io::Result<Measured>> {
        let cwd = std::env::current_dir()
            .map(|d| d.into_os_string().into_vec())
            .unwrap_or_default();
        let req = request(path, &cwd, argv, envp)?;
        let mut slot = match self.server.try_lock() {
            Ok(slot) => slot,
            Err(TryLockError::WouldBlock) => return None,
            // A panic while it was held left at worst a helper that is replaced below.
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
        };
        for _ in 0..2 {
            if slot.is_none() {
                *slot = Some(Server::start().ok()?);
                self.started.fetch_add(1, Ordering::Relaxed);
            }
            let server = slot.as_ref()?;
            match server.request(&req, stdio, running) {
                Ok(last) => return Some(last),
                Err(Broken::Unsent) => {
                    // Found dead (or its socket broken) between requests: try a new one.
                    *slot = None;
                }
                Err(Broken::Sent(e)) => {
                    *slot = None;
                    return Some(Err(e));
                }
            }
        }
        None
    }

    /// The resident helper's pid, if one runs.
    #[cfg(test)]
    fn pid(&self) -> Option<libc::pid_t> {
        self.server.lock().unwrap().as_ref().map(|s| s.pid)
    }
}

/// The request for the resident helper (see `agent/spawn/helper.rs`), or `None` if it does
/// not fit its buffers.
fn request(path: &CStr, cwd: &[u8], argv: &[CString], envp: &[CString]) -> Option<Vec<u8>> {
    if argv.len() + envp.len() + 2 > MAX_PTRS || cwd.contains(&0) {
        return None;
    }
    let strings = || {
        [path.to_bytes(), cwd]
            .into_iter()
            .chain(argv.iter().chain(envp).map(|s| s.to_bytes()))
    };
    let len = 8 + strings().map(|s| s.len() + 1).sum::<usize>();
    if len > REQ_MAX {
        return None;
    }
    let mut req = Vec::with_capacity(len);
    req.extend_from_slice(&u32::try_from(argv.len()).ok()?.to_ne_bytes());
    req.extend_from_slice(&u32::try_from(envp.len()).ok()?.to_ne_bytes());
    for s in strings() {
        req.extend_from_slice(s);
        req.push(0);
    }
    Some(req)
}

impl Server {
    /// posix_spawn of `platter-spawn --serve` with one end of a new socketpair on fd 3,
    /// /dev/null on 0–2 (so descriptors it receives are never below 4) and no environment.
    fn start() -> std::io::Result<Server> {
        use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
        let (sock, theirs) = socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )?;
        let null = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")?;
        let pid = spawn_helper(
            &[c"platter-spawn", c"--serve"],
            &[],
            [null.as_fd(); 3],
            theirs.as_fd(),
        )?;
        Ok(Server { sock, pid })
    }

    /// Sends one request and reads its replies: the workload's `Measured`, or its spawn
    /// error as the one-shot path reports it.
    fn request(
        &self,
        req: &[u8],
        stdio: Stdio<'_>,
        running: &AtomicI32,
    ) -> Result<std::io::Result<Measured>, Broken> {
        use rustix::net::{sendmsg, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !control.push(SendAncillaryMessage::ScmRights(&stdio)) {
            return Err(Broken::Unsent);
        }
        let iov = [std::io::IoSlice::new(req)];
        loop {
            match sendmsg(&self.sock, &iov, &mut control, SendFlags::NOSIGNAL) {
                Ok(n) if n == req.len() => break,
                Err(rustix::io::Errno::INTR) => continue,
                // SOCK_SEQPACKET sends a message whole or not at all; EPIPE: the helper died.
                _ => return Err(Broken::Unsent),
            }
        }
        let broken = |what: &str, e: std::io::Error| {
            Broken::Sent(std::io::Error::other(format!(
                "the resident spawn helper {what} ({e})"
            )))
        };
        let first = self
            .reply()
            .map_err(|e| broken("ended without a report", e))?;
        let last = match first {
            [STARTED, pid, ..] => {
                running.store(pid as i32, Ordering::SeqCst);
                let last = self.reply();
                running.store(0, Ordering::SeqCst);
                match last {
                    Ok(last) => last,
                    Err(e) => {
                        // The workload runs on unmeasured: end it with its helper.
                        if let Some(pgid) = rustix::process::Pid::from_raw(pid as i32) {
                            let _ = rustix::process::kill_process_group(
                                pgid,
                                rustix::process::Signal::KILL,
                            );
                        }
                        return Err(broken("ended while its workload ran", e));
                    }
                }
            }
            other => other,
        };
        Ok(interpret(last))
    }

    fn reply(&self) -> std::io::Result<[i64; 8]> {
        let mut buf = [0u8; 64];
        let n = loop {
            match rustix::net::recv(&self.sock, &mut buf, rustix::net::RecvFlags::empty()) {
                Ok((_, n)) => break n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        };
        if n != buf.len() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("a message of {n} bytes"),
            ));
        }
        Ok(message(&buf))
    }
}

impl Drop for Server {
    /// Ends the helper and reaps it: SIGKILL, as it is dropped between requests or after a
    /// failed one (it would exit at the socket's close too, once its workload ended).
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.pid) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
        let _ = wait(self.pid);
    }
}

/// Runs the workload through a helper exec'd for it alone (`helper_argv`: `platter-spawn`,
/// the path, argv), its report on a pipe.
fn run_once(
    helper_argv: &[&CStr],
    envp: &[CString],
    stdio: Stdio<'_>,
    running: &AtomicI32,
) -> std::io::Result<Measured> {
    let envp: Vec<&CStr> = envp.iter().map(CString::as_c_str).collect();
    let (report_r, report_w) = pipe()?;
    let helper = spawn_helper(helper_argv, &envp, stdio, report_w.as_fd())?;
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
        Ok(m) => interpret(m),
        Err(e) => Err(std::io::Error::other(format!(
            "spawn helper ended without a report ({e}; wait status {helper_status:#x})"
        ))),
    }
}

/// The helper's last message as the result of the run.
fn interpret(m: [i64; 8]) -> std::io::Result<Measured> {
    match m {
        [DONE, wall_ns, utime_us, stime_us, maxrss_kib, status, ..] => Ok(Measured {
            wall: Duration::from_nanos(wall_ns.max(0) as u64),
            user: Duration::from_micros(utime_us.max(0) as u64),
            sys: Duration::from_micros(stime_us.max(0) as u64),
            max_rss_bytes: maxrss_kib.max(0) as u64 * 1024,
            status: status as i32,
        }),
        [FAILED, errno, stage, ..] => {
            let e = std::io::Error::from_raw_os_error(errno as i32);
            if stage == STAGE_EXEC {
                Err(e)
            } else if stage == STAGE_USER {
                Err(std::io::Error::new(
                    e.kind(),
                    format!("could not switch to the workload's user: {e}"),
                ))
            } else {
                Err(std::io::Error::new(
                    e.kind(),
                    format!("spawn helper failed at stage {stage}: {e}"),
                ))
            }
        }
        m => Err(std::io::Error::other(format!(
            "spawn helper sent an unknown message {m:?}"
        ))),
    }
}

fn read_message(f: &mut std::fs::File) -> std::io::Result<[i64; 8]> {
    let mut buf = [0u8; 64];
    // read_exact retries on EINTR.
    f.read_exact(&mut buf)?;
    Ok(message(&buf))
}

fn message(buf: &[u8; 64]) -> [i64; 8] {
    let mut m = [0i64; 8];
    for (w, b) in m.iter_mut().zip(buf.chunks_exact(8)) {
        *w = i64::from_ne_bytes(b.try_into().expect("8-byte chunk"));
    }
    m
}

/// The agent's environment with `env` set on top, as `Command::envs` would pass it, and
/// PATH the agent's `search_path`.
fn environment(env: &[(String, OsString)]) -> Vec<OsString> {
    let mut vars: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| !env.iter().any(|(e, _)| OsStr::new(e) == k))
        .collect();
    // The PATH programs were found in (preflight judged the plan by it), unless a step sets
    // its own.
    if !env.iter().any(|(k, _)| k == "PATH") {
        vars.retain(|(k, _)| k != "PATH");
        vars.push(("PATH".into(), super::search_path()));
    }
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
pub(super) fn resolve(program: &OsStr, path: Option<&OsStr>) -> std::io::Result<PathBuf> {
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
/// workload's stdio on fds 0–2 and the report pipe on fd 3, no signal blocked and every
/// signal glibc lets us name at its default (SIGPIPE, which the Rust runtime ignores, and
/// whatever the agent inherited ignored). glibc's own 32 and 33 it sets ignored whatever
/// we ask: the helper resets those itself before it starts anything.
fn spawn_helper(
    argv: &[&CStr],
    envp: &[&CStr],
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
            libc::sigfillset(&mut set);
            cvt(libc::posix_spawnattr_setsigdefault(&mut attr, &set))?;
            cvt(libc::posix_spawnattr_setflags(
                &mut attr,
                (libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF) as _,
            ))?;
            let mut pid = 0;
            // The helper, and so every workload it starts, gets the CPUs the agent was
            // given, not the one its own threads are kept to (`affinity`).
            let _all_cpus = crate::affinity::Widened::new();
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

    fn null() -> std::fs::File {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
            .unwrap()
    }

    fn memfd() -> std::fs::File {
        std::fs::File::from(
            rustix::fs::memfd_create(c"test", rustix::fs::MemfdFlags::CLOEXEC).unwrap(),
        )
    }

    fn contents(f: &mut std::fs::File) -> String {
        use std::io::{Seek, SeekFrom};
        let mut s = String::new();
        f.seek(SeekFrom::Start(0)).unwrap();
        f.read_to_string(&mut s).unwrap();
        s
    }

    /// Runs `argv` through `resident` with stdin and stdout /dev/null and stderr `err`.
    fn run_in(
        resident: &Resident,
        argv: &[&str],
        env: &[(String, OsString)],
        err: BorrowedFd<'_>,
        running: &AtomicI32,
    ) -> std::io::Result<Measured> {
        let null = null();
        let args: Vec<&OsStr> = argv[1..].iter().map(OsStr::new).collect();
        run_with(
            resident,
            OsStr::new(argv[0]),
            &args,
            env,
            [null.as_fd(), null.as_fd(), err],
            None,
            running,
        )
    }

    fn run_ok(resident: &Resident, argv: &[&str]) -> Measured {
        let null = null();
        run_in(resident, argv, &[], null.as_fd(), &AtomicI32::new(0)).unwrap()
    }

    /// The `VmHWM` line of a process's status, in KiB.
    fn peak_rss_kib(pid: libc::pid_t) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Whether `pid` is a zombie (state Z in /proc/PID/stat): it has exited.
    fn exited(pid: libc::pid_t) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.rsplit(") ").next().unwrap().starts_with('Z'))
            .unwrap_or(true)
    }

    fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(std::time::Instant::now() < deadline, "timed out: {what}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn one_resident_helper_serves_many_requests_and_stays_tiny() {
        let resident = Resident::new();
        let long_arg = "a".repeat(8 << 10);
        let long_env = vec![(
            "PLATTER_LONG".to_string(),
            OsString::from("b".repeat(12 << 10)),
        )];
        let null = null();
        for i in 0..1000 {
            let m = if i % 100 == 99 {
                // A long argv and environment (still within the helper's buffers).
                let argv = ["/bin/sh", "-c", "exit 3", "sh", &long_arg];
                run_in(
                    &resident,
                    &argv,
                    &long_env,
                    null.as_fd(),
                    &AtomicI32::new(0),
                )
                .unwrap()
            } else if i % 2 == 0 {
                run_ok(&resident, &["/bin/true"])
            } else {
                run_ok(&resident, &["false"])
            };
            let expected = match i {
                i if i % 100 == 99 => 3 << 8,
                i if i % 2 == 0 => 0,
                _ => 1 << 8,
            };
            assert_eq!(m.status, expected, "request {i}: {m:?}");
            assert!(m.max_rss_bytes > 0, "{m:?}");
        }
        assert_eq!(resident.started.load(Ordering::Relaxed), 1);
        assert_eq!(resident.one_shot.load(Ordering::Relaxed), 0);
        // exec folds the helper's peak RSS into every workload's: it must stay far below
        // any real program's (/bin/true: ~1 MiB).
        let pid = resident.pid().unwrap();
        let peak = peak_rss_kib(pid);
        eprintln!("resident helper VmHWM after 1000 requests: {peak} KiB");
        assert!(peak <= 100, "VmHWM {peak} KiB");
    }

    #[test]
    fn a_failed_exec_is_reported_as_by_the_one_shot_helper_and_the_helper_goes_on() {
        let resident = Resident::new();
        run_ok(&resident, &["/bin/true"]);
        let pid = resident.pid().unwrap();
        let null = null();
        let e = run_in(
            &resident,
            &["/nonexistent/program"],
            &[],
            null.as_fd(),
            &AtomicI32::new(0),
        )
        .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}");
        let file = tempfile::NamedTempFile::new().unwrap();
        let name = file.path().to_str().unwrap();
        let e = run_in(&resident, &[name], &[], null.as_fd(), &AtomicI32::new(0)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EACCES), "{e}");
        assert_eq!(run_ok(&resident, &["/bin/true"]).status, 0);
        assert_eq!(resident.pid(), Some(pid));
        assert_eq!(resident.one_shot.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_killed_group_is_reported_with_its_signal() {
        let resident = std::sync::Arc::new(Resident::new());
        let running = std::sync::Arc::new(AtomicI32::new(0));
        let (r, res) = (running.clone(), resident.clone());
        let t = std::thread::spawn(move || {
            let null = null();
            run_in(&res, &["sleep", "30"], &[], null.as_fd(), &r)
        });
        wait_until("the workload started", || {
            running.load(Ordering::SeqCst) != 0
        });
        super::super::kill_group(&running);
        let m = t.join().unwrap().unwrap();
        assert_eq!(m.status & 0x7f, libc::SIGKILL, "{m:?}");
        assert!(m.wall < Duration::from_secs(10), "{m:?}");
        assert_eq!(running.load(Ordering::SeqCst), 0);
        assert_eq!(run_ok(&resident, &["/bin/true"]).status, 0);
        assert_eq!(resident.started.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_helper_killed_between_requests_is_replaced() {
        let resident = Resident::new();
        run_ok(&resident, &["/bin/true"]);
        let pid = resident.pid().unwrap();
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap();
        wait_until("the helper died", || exited(pid));
        // The next step still runs: its request goes to a new helper.
        assert_eq!(run_ok(&resident, &["false"]).status, 1 << 8);
        assert_eq!(resident.started.load(Ordering::Relaxed), 2);
        assert_ne!(resident.pid(), Some(pid));
        assert_eq!(resident.one_shot.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_helper_killed_while_its_workload_runs_fails_that_step_only() {
        let resident = std::sync::Arc::new(Resident::new());
        let running = std::sync::Arc::new(AtomicI32::new(0));
        let (r, res) = (running.clone(), resident.clone());
        let t = std::thread::spawn(move || {
            let null = null();
            run_in(&res, &["sleep", "30"], &[], null.as_fd(), &r)
        });
        wait_until("the workload started", || {
            running.load(Ordering::SeqCst) != 0
        });
        let workload = running.load(Ordering::SeqCst);
        let helper = resident
            .server
            .try_lock()
            .map(|s| s.as_ref().map(|s| s.pid));
        // The mutex is held for the whole request: read the helper from the workload.
        assert!(matches!(helper, Err(TryLockError::WouldBlock)));
        let helper = super::super::parent_of(workload);
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(helper).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap();
        let e = t.join().unwrap().unwrap_err();
        assert!(e.to_string().contains("resident spawn helper"), "{e}");
        // Its workload was killed with it, and the next step gets a new helper.
        wait_until("the orphaned workload was killed", || exited(workload));
        assert_eq!(run_ok(&resident, &["/bin/true"]).status, 0);
        assert_eq!(resident.started.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_request_too_large_for_the_helper_takes_the_one_shot_path() {
        let resident = Resident::new();
        let big = "x".repeat(REQ_MAX);
        let null = null();
        let m = run_in(
            &resident,
            &["/bin/sh", "-c", "test ${#1} = 32768", "sh", &big],
            &[],
            null.as_fd(),
            &AtomicI32::new(0),
        )
        .unwrap();
        assert_eq!(m.status, 0, "{m:?}");
        let many: Vec<String> = (0..MAX_PTRS).map(|i| i.to_string()).collect();
        let mut argv = vec!["/bin/sh", "-c", "test $# = 2048", "sh"];
        argv.extend(many.iter().map(String::as_str));
        let m = run_in(&resident, &argv, &[], null.as_fd(), &AtomicI32::new(0)).unwrap();
        assert_eq!(m.status, 0, "{m:?}");
        assert_eq!(resident.one_shot.load(Ordering::Relaxed), 2);
        assert_eq!(resident.started.load(Ordering::Relaxed), 0);
    }

    /// Resident or one-shot, the helper starts a workload with every signal at its default
    /// and none blocked, whatever the agent inherited (see `process::tests`).
    #[test]
    fn both_paths_start_the_workload_with_default_signals() {
        let _inherited = super::super::tests::InheritedSignals::new();
        let resident = Resident::new();
        let argv = super::super::tests::signal_lines_argv();
        let args: Vec<&OsStr> = argv[1..].iter().map(OsStr::new).collect();
        // Too large for the resident helper's buffers: the one-shot path.
        let padding = [(
            "PLATTER_PAD".to_string(),
            OsString::from("p".repeat(REQ_MAX)),
        )];
        for env in [&[][..], &padding[..]] {
            let (null, mut out) = (null(), memfd());
            let m = run_with(
                &resident,
                OsStr::new(&argv[0]),
                &args,
                env,
                [null.as_fd(), out.as_fd(), null.as_fd()],
                None,
                &AtomicI32::new(0),
            )
            .unwrap();
            assert_eq!(m.status, 0, "{m:?}");
            let what = format!(
                "{} helper",
                if env.is_empty() {
                    "resident"
                } else {
                    "one-shot"
                }
            );
            super::super::tests::assert_no_blocked_or_ignored_signals(&contents(&mut out), &what);
        }
        assert_eq!(resident.started.load(Ordering::Relaxed), 1);
        assert_eq!(resident.one_shot.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn stdio_environment_and_working_directory_reach_the_workload() {
        let resident = Resident::new();
        let err = memfd();
        let env = vec![("PLATTER_Y".to_string(), OsString::from("7"))];
        let script = "echo \"$PLATTER_Y $(pwd)\" >&2; ls /proc/self/fd >&2; read x || echo eof >&2";
        let m = run_in(
            &resident,
            &["/bin/sh", "-c", script],
            &env,
            err.as_fd(),
            &AtomicI32::new(0),
        )
        .unwrap();
        assert_eq!(m.status, 0, "{m:?}");
        let cwd = std::env::current_dir().unwrap();
        let mut err = err;
        let out = contents(&mut err);
        let mut lines = out.lines();
        assert_eq!(
            lines.next(),
            Some(format!("7 {}", cwd.display()).as_str()),
            "{out}"
        );
        // ls's own fds: 0–2 and the directory it lists; nothing of the helper's.
        let fds: Vec<&str> = lines.by_ref().take(4).collect();
        assert_eq!(fds, ["0", "1", "2", "3"], "{out}");
        assert_eq!(lines.next(), Some("eof"), "{out}");
        assert_eq!(resident.started.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn the_resident_helper_exits_when_the_agents_end_closes() {
        let server = Server::start().unwrap();
        let pid = server.pid;
        rustix::net::shutdown(&server.sock, rustix::net::Shutdown::Both).unwrap();
        let status = wait(pid).unwrap();
        assert_eq!(status, 0, "exit 0, not a signal: {status:#x}");
        // Reaped already: Drop must not signal a pid that may be reused.
        std::mem::forget(server);
    }
}
