//! `platter-spawn`: the tiny program between the agent and a workload. It vforks, the child
//! execs the workload in its own process group, and the helper reports what only the
//! workload's parent can see: the pid, the wall time around vfork → `wait4`, and the
//! `wait4` rusage of the workload's process tree. It must stay tiny: `exec` folds the
//! exec'ing process's peak RSS (with vfork: the helper's own mm) into the new program's
//! `ru_maxrss`, so whatever forks the workload sets a floor under its peak RSS (the
//! agent's was 12–20 MiB; this is 16–32 KiB, ~75 KiB after a request that fills the
//! static buffers below).
//!
//! Hence no std, no libc: raw system calls, a hand-written `_start`, static, no
//! relocations, static buffers only (no allocator, nothing grows). (A static std `main`
//! that only reads /proc/self/status peaks at 1 MiB, as much as all of `/bin/true`.)
//! Built by `agent/build.rs` with the same `rustc`, embedded in the agent.
//!
//! Two modes, same child:
//!
//! * Resident, `platter-spawn --serve` with fd 3 a `SOCK_SEQPACKET` socket to the agent:
//!   one request per message, served one at a time until the agent's end is closed
//!   (`recvmsg` returns 0: exit 0). A request is a header of two native-endian `u32`s
//!   (argc, envc), then NUL-terminated strings: the path to exec, the working directory
//!   (empty: the helper's own), argc argv strings and envc `NAME=value` strings, at most
//!   `REQ_MAX` bytes and `MAX_PTRS` pointers (argc + envc + 2) in all (the agent checks
//!   both before it sends and runs a larger workload through the one-shot mode); the
//!   message carries the workload's stdin, stdout and stderr as `SCM_RIGHTS` (received
//!   close-on-exec, dup'd onto 0–2 in the child, closed here once the child has exec'd).
//!   Replies are sent with `MSG_NOSIGNAL`: a closed agent end never kills the helper
//!   with SIGPIPE; it finishes the workload and exits at the next `recvmsg`.
//! * One-shot, `platter-spawn [--as=UID:GID:G1,G2,...] PATH ARGV0 ARGS...` with fd 3 a pipe
//!   to the agent: the workload gets PATH exec'd with ARGV0 ARGS..., this environment, this
//!   working directory and fds 0–2; the helper exits after its one report. With `--as` the
//!   helper first becomes that user (`setgroups`, `setresgid`,
//!   `setresuid`: what `initgroups` + `setgid` + `setuid` do, as raw calls of this one
//!   thread), so the workload is forked and exec'd as the user; failing that it reports
//!   `FAILED` with stage `STAGE_USER` and runs nothing.
//!
//! In both, the workload starts as a program started from a login shell would: every
//! signal's disposition `SIG_DFL` and no signal blocked, whatever the agent inherited.
//!
//! Messages to the agent (8 native-endian i64 each, sent whole):
//! `[STARTED, pid]`, then `[DONE, wall_ns, utime_us, stime_us, maxrss_kib, wait_status]`,
//! or `[FAILED, errno, stage]` at any point.

#![no_std]
#![no_main]

use core::arch::{asm, global_asm};

const STARTED: i64 = 1;
const DONE: i64 = 2;
const FAILED: i64 = 3;
/// Stages of `FAILED`: which call failed.
const STAGE_FORK: i32 = 2;
const STAGE_EXEC: i32 = 3;
const STAGE_WAIT: i32 = 4;
const STAGE_ARGS: i32 = 5;
/// The child's dup2/dup3 of a received descriptor onto 0–2.
const STAGE_STDIO: i32 = 6;
/// The child's chdir to the requested working directory.
const STAGE_CHDIR: i32 = 7;
/// Becoming the `--as` user (or reading the option).
const STAGE_USER: i32 = 8;
/// The most supplementary groups `--as` takes. `agent/src/process/spawn.rs` has it too.
const MAX_GROUPS: usize = 256;

const REPORT_FD: usize = 3;
const EINTR: isize = 4;
const E2BIG: isize = 7;
const EINVAL: isize = 22;
const SIGCHLD: usize = 17;
const SIG_BLOCK: usize = 0;
const SIG_SETMASK: usize = 2;
/// SIGHUP, SIGINT, SIGQUIT, SIGTERM: what a terminal, `timeout` or a service manager sends
/// to the agent's whole process group. The agent handles them (it kills the workload's
/// group, and a step cut off is run again); the helper blocks them so it is not the one
/// that ends first, which would make the step look failed. The child unblocks them.
const BLOCKED: u64 = (1 << (1 - 1)) | (1 << (2 - 1)) | (1 << (3 - 1)) | (1 << (15 - 1));
const CLONE_VM: usize = 0x100;
const CLONE_VFORK: usize = 0x4000;
const CLOCK_MONOTONIC: usize = 1;
const MSG_CTRUNC: u32 = 0x8;
const MSG_TRUNC: u32 = 0x20;
const MSG_NOSIGNAL: usize = 0x4000;
const MSG_CMSG_CLOEXEC: usize = 0x4000_0000;
const SOL_SOCKET: u64 = 1;
const SCM_RIGHTS: u64 = 1;

/// Largest request (header and strings), and most argv + envp pointers (NULLs included)
/// one request may need. `agent/src/process/spawn.rs` has the same two numbers.
const REQ_MAX: usize = 32 * 1024;
const MAX_PTRS: usize = 2048;

#[cfg(target_arch = "x86_64")]
mod nr {
    pub const WRITE: usize = 1;
    pub const CLOSE: usize = 3;
    pub const DUP2: usize = 33;
    pub const SENDTO: usize = 44;
    pub const RECVMSG: usize = 47;
    pub const CLONE: usize = 56;
    pub const EXECVE: usize = 59;
    pub const WAIT4: usize = 61;
    pub const CHDIR: usize = 80;
    pub const CLOSE_RANGE: usize = 436;
    pub const SETPGID: usize = 109;
    pub const RT_SIGPROCMASK: usize = 14;
    pub const RT_SIGACTION: usize = 13;
    pub const CLOCK_GETTIME: usize = 228;
    pub const EXIT: usize = 60;
    pub const EXIT_GROUP: usize = 231;
    pub const SETGROUPS: usize = 116;
    pub const SETRESUID: usize = 117;
    pub const SETRESGID: usize = 119;
}

#[cfg(target_arch = "aarch64")]
mod nr {
    pub const WRITE: usize = 64;
    pub const CLOSE: usize = 57;
    /// aarch64 has no dup2; dup3 with flags 0 does the same for two different fds.
    pub const DUP3: usize = 24;
    pub const SENDTO: usize = 206;
    pub const RECVMSG: usize = 212;
    pub const CLONE: usize = 220;
    pub const EXECVE: usize = 221;
    pub const WAIT4: usize = 260;
    pub const CHDIR: usize = 49;
    pub const CLOSE_RANGE: usize = 436;
    pub const SETPGID: usize = 154;
    pub const RT_SIGPROCMASK: usize = 135;
    pub const RT_SIGACTION: usize = 134;
    pub const CLOCK_GETTIME: usize = 113;
    pub const EXIT: usize = 93;
    pub const EXIT_GROUP: usize = 94;
    pub const SETGROUPS: usize = 159;
    pub const SETRESUID: usize = 147;
    pub const SETRESGID: usize = 149;
}

#[cfg(target_arch = "x86_64")]
unsafe fn syscall(n: usize, a: [usize; 6]) -> isize {
    let r: isize;
    // SAFETY: the caller passes arguments valid for system call `n`.
    unsafe {
        asm!("syscall", inlateout("rax") n as isize => r, in("rdi") a[0], in("rsi") a[1],
             in("rdx") a[2], in("r10") a[3], in("r8") a[4], in("r9") a[5],
             lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    r
}

#[cfg(target_arch = "aarch64")]
unsafe fn syscall(n: usize, a: [usize; 6]) -> isize {
    let r: isize;
    // SAFETY: the caller passes arguments valid for system call `n`.
    unsafe {
        asm!("svc 0", in("x8") n, inlateout("x0") a[0] as isize => r, in("x1") a[1],
             in("x2") a[2], in("x3") a[3], in("x4") a[4], in("x5") a[5], options(nostack));
    }
    r
}

#[cfg(target_arch = "x86_64")]
global_asm!(
    ".globl _start",
    "_start:",
    "xor rbp, rbp",
    "mov rdi, rsp",
    "and rsp, -16",
    "call {main}",
    "ud2",
    main = sym start,
);

#[cfg(target_arch = "aarch64")]
global_asm!(
    ".globl _start",
    "_start:",
    "mov x0, sp",
    "bl {main}",
    "brk #0",
    main = sym start,
);

fn exit(code: usize) -> ! {
    loop {
        // SAFETY: exit_group takes a plain integer.
        unsafe { syscall(nr::EXIT_GROUP, [code, 0, 0, 0, 0, 0]) };
    }
}

/// How messages go back: a pipe in the one-shot mode, the socket when resident.
#[derive(Clone, Copy, PartialEq)]
enum Channel {
    Pipe,
    Socket,
}

fn report(channel: Channel, msg: [i64; 8]) {
    let buf = msg.as_ptr() as usize;
    // SAFETY: msg is a live 64-byte buffer. A failed send is not retried: the agent's end
    // is gone, and the next recvmsg says so.
    unsafe {
        match channel {
            Channel::Pipe => syscall(nr::WRITE, [REPORT_FD, buf, 64, 0, 0, 0]),
            Channel::Socket => syscall(nr::SENDTO, [REPORT_FD, buf, 64, MSG_NOSIGNAL, 0, 0]),
        }
    };
}

fn failed(errno: isize, stage: i32) -> [i64; 8] {
    [FAILED, -errno as i64, stage as i64, 0, 0, 0, 0, 0]
}

fn now_ns() -> i64 {
    let mut ts = [0i64; 2];
    // SAFETY: ts is a live struct timespec.
    unsafe {
        syscall(
            nr::CLOCK_GETTIME,
            [CLOCK_MONOTONIC, ts.as_mut_ptr() as usize, 0, 0, 0, 0],
        )
    };
    ts[0] * 1_000_000_000 + ts[1]
}

/// The kernel's `struct sigaction` (handler, flags, restorer, mask: 32 bytes on x86_64 and
/// aarch64) with every field 0: `SIG_DFL`, no flags, an empty mask.
static DEFAULT_ACTION: [u64; 4] = [0; 4];
/// Signals 1 to `NSIG` (64 on Linux): every one, the real-time ones included.
const NSIG: usize = 64;
const SIGKILL: usize = 9;
const SIGSTOP: usize = 19;

/// Sets every signal's disposition to `SIG_DFL`, which the workload then inherits (the
/// vfork'd child copies the helper's dispositions, and exec keeps an ignored signal
/// ignored). What the helper was started with is not what a workload should get: a
/// `nohup` or a background job of a non-interactive shell ignores SIGHUP, or SIGINT and
/// SIGQUIT, in the agent and so in everything it starts, and glibc's `posix_spawn` leaves
/// its internal signals 32 and 33 ignored (`SigIgn: 0000000180000000`; its `sigfillset`
/// and `sigaction` refuse to name them, so only a raw system call resets them). The
/// helper installs no handler of its own, so nothing it relies on changes.
fn default_dispositions() {
    for sig in 1..=NSIG {
        if sig == SIGKILL || sig == SIGSTOP {
            continue;
        }
        // SAFETY: DEFAULT_ACTION is a live, all-zero kernel sigaction; no old one is asked
        // for. A signal the kernel refuses (EINVAL) keeps its disposition.
        unsafe {
            syscall(
                nr::RT_SIGACTION,
                [sig, DEFAULT_ACTION.as_ptr() as usize, 0, 8, 0, 0],
            )
        };
    }
}

fn block_signals() {
    // SAFETY: BLOCKED is a live sigset_t of 8 bytes; no old set is asked for.
    unsafe {
        syscall(
            nr::RT_SIGPROCMASK,
            [SIG_BLOCK, &BLOCKED as *const u64 as usize, 0, 8, 0, 0],
        )
    };
}

/// `sp` points at argc, then argv[0..argc], NULL, envp..., NULL (the ELF entry stack).
unsafe extern "C" fn start(sp: *const usize) -> ! {
    // SAFETY: the kernel lays out the entry stack as described above.
    let (argc, argv) = unsafe { (*sp, sp.add(1) as *const *const u8) };
    // SAFETY: envp follows argv's terminating NULL.
    let envp = unsafe { argv.add(argc + 1) };
    default_dispositions();
    block_signals();
    // SAFETY: argv[1] exists when argc == 2 and is NUL-terminated.
    if argc == 2 && unsafe { is_serve(*argv.add(1)) } {
        serve()
    }
    // The option before PATH.
    let mut first = 1;
    // SAFETY: argv[1] is a NUL-terminated argument when argc > 1.
    if let Some(spec) = (argc > 1).then(|| unsafe { after(*argv.add(1), b"--as=") }).flatten() {
        // SAFETY: spec is the rest of a NUL-terminated argument.
        if let Err(errno) = unsafe { become_user(spec) } {
            report(Channel::Pipe, failed(errno, STAGE_USER));
            exit(127)
        }
        first = 2;
    }
    if argc < first + 2 {
        report(Channel::Pipe, failed(-EINVAL, STAGE_ARGS));
        exit(127)
    }
    // SAFETY: argc >= first + 2, so argv[first] and argv[first + 1..] exist.
    let (path, child_argv) = unsafe { (*argv.add(first), argv.add(first + 1)) };
    let mut child = Child {
        path,
        argv: child_argv,
        envp,
        cwd: core::ptr::null(),
        fds: [-1; 3],
        errno: 0,
        stage: 0,
    };
    let last = run(Channel::Pipe, &mut child);
    report(Channel::Pipe, last);
    exit(if last[0] == DONE { 0 } else { 127 })
}

/// Whether the NUL-terminated `arg` is `--serve`.
unsafe fn is_serve(arg: *const u8) -> bool {
    for (i, b) in b"--serve\0".iter().enumerate() {
        // SAFETY: the bytes up to the first difference or NUL are part of the string.
        if unsafe { *arg.add(i) } != *b {
            return false;
        }
    }
    true
}

/// The rest of the NUL-terminated `arg` after `prefix`, if it starts with it.
unsafe fn after(arg: *const u8, prefix: &[u8]) -> Option<*const u8> {
    for (i, b) in prefix.iter().enumerate() {
        // SAFETY: the bytes up to the first difference or NUL are part of the string
        // (`prefix` has no NUL).
        if unsafe { *arg.add(i) } != *b {
            return None;
        }
    }
    // SAFETY: the prefix matched, so the string is at least that long.
    Some(unsafe { arg.add(prefix.len()) })
}

/// The decimal number at `p` (one digit at least) and where it ends.
unsafe fn number(mut p: *const u8) -> Option<(usize, *const u8)> {
    let mut n: usize = 0;
    let mut digits = 0;
    loop {
        // SAFETY: p is within a NUL-terminated string: reading stops at a non-digit.
        let b = unsafe { *p };
        if !b.is_ascii_digit() {
            break;
        }
        n = n.checked_mul(10)?.checked_add((b - b'0') as usize)?;
        if n > u32::MAX as usize {
            return None;
        }
        digits += 1;
        // SAFETY: b was not the NUL.
        p = unsafe { p.add(1) };
    }
    (digits > 0).then_some((n, p))
}

/// `--as=UID:GID:G1,G2,...` (the groups may be none): sets the groups, then the group, then
/// the user, so the last call gives up the right to make the others. Err: `-errno`.
unsafe fn become_user(spec: *const u8) -> Result<(), isize> {
    let mut p = spec;
    let mut ids = [0usize; 2];
    for id in &mut ids {
        // SAFETY: p is within the NUL-terminated option (number stops at its NUL).
        let (n, end) = unsafe { number(p) }.ok_or(-EINVAL)?;
        // SAFETY: end is at a byte of the string (a non-digit, maybe its NUL).
        if unsafe { *end } != b':' {
            return Err(-EINVAL);
        }
        *id = n;
        // SAFETY: end was the ':', not the NUL.
        p = unsafe { end.add(1) };
    }
    let mut groups = [0u32; MAX_GROUPS];
    let mut count = 0;
    // SAFETY: p is at a byte of the string.
    while unsafe { *p } != 0 {
        // SAFETY: as above.
        let (n, end) = unsafe { number(p) }.ok_or(-EINVAL)?;
        if count == MAX_GROUPS {
            return Err(-E2BIG);
        }
        groups[count] = n as u32;
        count += 1;
        // SAFETY: end is at a byte of the string; past a ',' is another one.
        match unsafe { *end } {
            b',' => p = unsafe { end.add(1) },
            0 => break,
            _ => return Err(-EINVAL),
        }
    }
    let [uid, gid] = ids;
    let calls = [
        (nr::SETGROUPS, [count, groups.as_ptr() as usize, 0]),
        (nr::SETRESGID, [gid; 3]),
        (nr::SETRESUID, [uid; 3]),
    ];
    for (n, [a, b, c]) in calls {
        // SAFETY: setgroups gets `count` gids in `groups`; the others take integers.
        let r = unsafe { syscall(n, [a, b, c, 0, 0, 0]) };
        if r < 0 {
            return Err(r);
        }
    }
    Ok(())
}

/// What the child needs, read by the vfork'd child from memory (it shares this one).
/// `vfork_exec`'s assembly uses the field offsets, checked below.
#[repr(C)]
struct Child {
    path: *const u8,
    argv: *const *const u8,
    envp: *const *const u8,
    /// NULL: stay in the helper's working directory.
    cwd: *const u8,
    /// Put on 0, 1, 2; `fds[0] < 0`: keep the helper's 0–2.
    fds: [i32; 3],
    /// Set by the child if it fails: errno and the stage.
    errno: i32,
    stage: i32,
}

const _: () = {
    use core::mem::offset_of;
    assert!(offset_of!(Child, argv) == 8 && offset_of!(Child, envp) == 16);
    assert!(offset_of!(Child, cwd) == 24 && offset_of!(Child, fds) == 32);
    assert!(offset_of!(Child, errno) == 44 && offset_of!(Child, stage) == 48);
};

/// vfork + exec, all in one `asm!` block: the child runs on this stack until it execs, so
/// it touches nothing but registers and `c`'s `errno` and `stage`. This process sleeps
/// until the child has exec'd (or exited); then the child's mm is its own, and the copy
/// the exec folds into its peak RSS is this process's few dozen KiB. The child: its own
/// process group, no blocked signals (and every disposition `SIG_DFL`, copied from this
/// process: `default_dispositions`), the received fds on 0–2 (dup2 of two different
/// descriptors: received ones are never below 4), the working directory, fd 3 closed,
/// execve. Returns the pid (or -errno of clone); the child sets `errno` and `stage` if a
/// call failed, then exits 127.
#[cfg(target_arch = "x86_64")]
fn vfork_exec(c: &mut Child) -> isize {
    let r: isize;
    // SAFETY: clone with CLONE_VM | CLONE_VFORK and no new stack: the child only issues
    // system calls from registers and `*c` (shared memory, alive: the parent is suspended
    // in this block), writes `c.errno` and `c.stage`, and exits or execs before the parent
    // continues. Linux preserves every register but rax, rcx and r11 across `syscall`.
    unsafe {
        asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov eax, {setpgid}", "xor edi, edi", "xor esi, esi", "syscall",
            "mov eax, {sigprocmask}", "mov edi, {setmask}", "mov rsi, r9", "xor edx, edx",
            "mov r10d, 8", "syscall",
            "mov edi, dword ptr [r12 + 32]",
            "test edi, edi",
            "js 3f",
            "mov eax, {dup2}", "xor esi, esi", "syscall",
            "test rax, rax", "js 5f",
            "mov eax, {dup2}", "mov edi, dword ptr [r12 + 36]", "mov esi, 1", "syscall",
            "test rax, rax", "js 5f",
            "mov eax, {dup2}", "mov edi, dword ptr [r12 + 40]", "mov esi, 2", "syscall",
            "test rax, rax", "js 5f",
            "3:",
            "mov rdi, qword ptr [r12 + 24]",
            "test rdi, rdi",
            "jz 4f",
            "mov eax, {chdir}", "syscall",
            "test rax, rax", "js 6f",
            "4:",
            "mov eax, {close}", "mov edi, {report_fd}", "syscall",
            "mov eax, {execve}", "mov rdi, qword ptr [r12]", "mov rsi, qword ptr [r12 + 8]",
            "mov rdx, qword ptr [r12 + 16]", "syscall",
            "mov ecx, {stage_exec}", "jmp 7f",
            "5:", "mov ecx, {stage_stdio}", "jmp 7f",
            "6:", "mov ecx, {stage_chdir}",
            "7:",
            "neg eax", "mov dword ptr [r12 + 44], eax", "mov dword ptr [r12 + 48], ecx",
            "mov eax, {exit}", "mov edi, 127", "syscall",
            "2:",
            setpgid = const nr::SETPGID,
            sigprocmask = const nr::RT_SIGPROCMASK,
            setmask = const SIG_SETMASK,
            dup2 = const nr::DUP2,
            chdir = const nr::CHDIR,
            close = const nr::CLOSE,
            execve = const nr::EXECVE,
            exit = const nr::EXIT,
            report_fd = const REPORT_FD,
            stage_exec = const STAGE_EXEC,
            stage_stdio = const STAGE_STDIO,
            stage_chdir = const STAGE_CHDIR,
            inlateout("rax") nr::CLONE as isize => r,
            in("rdi") CLONE_VM | CLONE_VFORK | SIGCHLD,
            in("rsi") 0, in("rdx") 0, in("r10") 0, in("r8") 0,
            in("r12") c as *mut Child,
            in("r9") &EMPTY_SET as *const u64,
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    r
}

#[cfg(target_arch = "aarch64")]
fn vfork_exec(c: &mut Child) -> isize {
    let r: isize;
    // SAFETY: as for x86_64: the child uses registers and `*c` only (x10 as scratch, in
    // the child alone); Linux preserves every register but x0 across `svc`.
    unsafe {
        asm!(
            "svc 0",
            "cbnz x0, 2f",
            "mov x8, {setpgid}", "mov x0, xzr", "mov x1, xzr", "svc 0",
            "mov x8, {sigprocmask}", "mov x0, {setmask}", "mov x1, x13", "mov x2, xzr",
            "mov x3, 8", "svc 0",
            "ldrsw x0, [x9, #32]",
            "tbnz x0, #63, 3f",
            "mov x8, {dup3}", "mov x1, xzr", "mov x2, xzr", "svc 0",
            "tbnz x0, #63, 5f",
            "mov x8, {dup3}", "ldrsw x0, [x9, #36]", "mov x1, 1", "mov x2, xzr", "svc 0",
            "tbnz x0, #63, 5f",
            "mov x8, {dup3}", "ldrsw x0, [x9, #40]", "mov x1, 2", "mov x2, xzr", "svc 0",
            "tbnz x0, #63, 5f",
            "3:",
            "ldr x0, [x9, #24]",
            "cbz x0, 4f",
            "mov x8, {chdir}", "svc 0",
            "tbnz x0, #63, 6f",
            "4:",
            "mov x8, {close}", "mov x0, {report_fd}", "svc 0",
            "mov x8, {execve}", "ldr x0, [x9]", "ldr x1, [x9, #8]", "ldr x2, [x9, #16]",
            "svc 0",
            "mov w10, {stage_exec}", "b 7f",
            "5:", "mov w10, {stage_stdio}", "b 7f",
            "6:", "mov w10, {stage_chdir}",
            "7:",
            "neg w0, w0", "str w0, [x9, #44]", "str w10, [x9, #48]",
            "mov x8, {exit}", "mov x0, 127", "svc 0",
            "2:",
            setpgid = const nr::SETPGID,
            sigprocmask = const nr::RT_SIGPROCMASK,
            setmask = const SIG_SETMASK,
            dup3 = const nr::DUP3,
            chdir = const nr::CHDIR,
            close = const nr::CLOSE,
            execve = const nr::EXECVE,
            exit = const nr::EXIT,
            report_fd = const REPORT_FD,
            stage_exec = const STAGE_EXEC,
            stage_stdio = const STAGE_STDIO,
            stage_chdir = const STAGE_CHDIR,
            in("x8") nr::CLONE,
            inlateout("x0") (CLONE_VM | CLONE_VFORK | SIGCHLD) as isize => r,
            in("x1") 0, in("x2") 0, in("x3") 0, in("x4") 0,
            in("x9") c as *mut Child,
            in("x13") &EMPTY_SET as *const u64,
            lateout("x10") _,
            options(nostack),
        );
    }
    r
}

/// The signal mask the workload starts with (the agent spawned the helper with this one).
static EMPTY_SET: u64 = 0;

/// Starts `c`, sends `STARTED` once it has exec'd, waits for it; returns the last message
/// (`DONE` or `FAILED`) for the caller to send.
fn run(channel: Channel, c: &mut Child) -> [i64; 8] {
    let started = now_ns();
    let pid = vfork_exec(c);
    if pid < 0 {
        return failed(pid, STAGE_FORK);
    }
    if c.errno == 0 {
        // The child set its process group before its exec, which has happened.
        report(channel, [STARTED, pid as i64, 0, 0, 0, 0, 0, 0]);
    }
    let mut status = 0i32;
    // struct rusage: two timevals, then 14 longs (ru_maxrss first).
    let mut ru = [0i64; 18];
    loop {
        // SAFETY: status and ru are live and large enough for int and struct rusage.
        let r = unsafe {
            syscall(
                nr::WAIT4,
                [
                    pid as usize,
                    &mut status as *mut i32 as usize,
                    0,
                    ru.as_mut_ptr() as usize,
                    0,
                    0,
                ],
            )
        };
        if r == pid {
            break;
        }
        if r != -EINTR {
            return failed(r, STAGE_WAIT);
        }
    }
    let wall = now_ns() - started;
    if c.errno != 0 {
        return failed(-(c.errno as isize), c.stage);
    }
    let utime = ru[0] * 1_000_000 + ru[1];
    let stime = ru[2] * 1_000_000 + ru[3];
    [DONE, wall, utime, stime, ru[4], status as i64, 0, 0]
}

/// The request being served and the argv/envp pointer arrays built from it: static, so
/// the helper's RSS is the pages a request touched, never more than these two.
static mut REQ: [u8; REQ_MAX] = [0; REQ_MAX];
static mut PTRS: [usize; MAX_PTRS] = [0; MAX_PTRS];
/// Ancillary data: one SCM_RIGHTS header (16 bytes) and up to 12 descriptors.
static mut CONTROL: [u64; 8] = [0; 8];

/// The resident mode: one request at a time until the agent's end is closed.
fn serve() -> ! {
    // Descriptors the agent's process did not mark close-on-exec (a test harness's
    // jobserver pipe, say) would reach every workload: only 0–3 are the helper's. (Linux
    // 5.9; without it they stay, as with the one-shot helper.)
    // SAFETY: closes descriptors this process does not use.
    unsafe { syscall(nr::CLOSE_RANGE, [REPORT_FD + 1, !0, 0, 0, 0, 0]) };
    let req = (&raw mut REQ) as *mut u8;
    let control = (&raw mut CONTROL) as *mut u8;
    loop {
        let iov = [req as usize, REQ_MAX];
        // struct msghdr: name, namelen (+ padding), iov, iovlen, control, controllen,
        // flags (+ padding).
        let mut hdr = [0, 0, iov.as_ptr() as usize, 1, control as usize, 64, 0usize];
        let n = loop {
            // SAFETY: hdr is a live struct msghdr whose buffers are the static ones.
            let r = unsafe {
                syscall(
                    nr::RECVMSG,
                    [
                        REPORT_FD,
                        hdr.as_mut_ptr() as usize,
                        MSG_CMSG_CLOEXEC,
                        0,
                        0,
                        0,
                    ],
                )
            };
            if r != -EINTR {
                break r;
            }
        };
        if n == 0 {
            // The agent closed its end (or exited).
            exit(0)
        }
        if n < 0 {
            exit(1)
        }
        let (fds, count) = received_fds(control, hdr[5]);
        let flags = hdr[6] as u32;
        let last = if flags & (MSG_TRUNC | MSG_CTRUNC) != 0 {
            failed(-E2BIG, STAGE_ARGS)
        } else if count != 3 {
            failed(-EINVAL, STAGE_ARGS)
        } else {
            // SAFETY: the kernel wrote n bytes into REQ; no other reference to REQ or
            // PTRS exists while the request is served.
            match unsafe { parse(req, n as usize, [fds[0], fds[1], fds[2]]) } {
                Some(mut child) => run(Channel::Socket, &mut child),
                None => failed(-EINVAL, STAGE_ARGS),
            }
        };
        for fd in &fds[..count] {
            // SAFETY: closing a descriptor this process received and no longer needs.
            unsafe { syscall(nr::CLOSE, [*fd as usize, 0, 0, 0, 0, 0]) };
        }
        report(Channel::Socket, last);
    }
}

/// The descriptors of an SCM_RIGHTS message in the first `len` bytes of `control`.
fn received_fds(control: *const u8, len: usize) -> ([i32; 12], usize) {
    let mut fds = [-1i32; 12];
    if len < 16 {
        return (fds, 0);
    }
    // SAFETY: control is the 64-byte, 8-aligned CONTROL; len >= 16 bytes were written:
    // struct cmsghdr (len: usize, level: i32, type: i32), then the descriptors.
    let (cmsg_len, level, kind) = unsafe {
        (
            *(control as *const usize),
            *(control.add(8) as *const i32) as u64,
            *(control.add(12) as *const i32) as u64,
        )
    };
    if level != SOL_SOCKET || kind != SCM_RIGHTS || cmsg_len < 16 || cmsg_len > len {
        return (fds, 0);
    }
    let count = ((cmsg_len - 16) / 4).min(fds.len());
    for (i, fd) in fds.iter_mut().enumerate().take(count) {
        // SAFETY: within the cmsg_len bytes the kernel wrote.
        *fd = unsafe { *(control.add(16 + 4 * i) as *const i32) };
    }
    (fds, count)
}

/// The request in `req[..n]` (see the module docs) as a `Child`, with argv and envp in
/// PTRS; `None` if it is malformed.
unsafe fn parse(req: *const u8, n: usize, fds: [i32; 3]) -> Option<Child> {
    if n < 8 {
        return None;
    }
    // SAFETY: called for at 0 and 4 only, below n >= 8 received bytes.
    let word = |at: usize| unsafe {
        u32::from_ne_bytes([
            *req.add(at),
            *req.add(at + 1),
            *req.add(at + 2),
            *req.add(at + 3),
        ])
    } as usize;
    let (argc, envc) = (word(0), word(4));
    if argc == 0 || argc > MAX_PTRS || envc > MAX_PTRS || argc + envc + 2 > MAX_PTRS {
        return None;
    }
    let mut at = 8;
    // The next NUL-terminated string, if it ends within the request.
    let mut next = || -> Option<*const u8> {
        let s = at;
        while at < n {
            // SAFETY: at < n, within the received bytes.
            let b = unsafe { *req.add(at) };
            at += 1;
            if b == 0 {
                // SAFETY: s < n.
                return Some(unsafe { req.add(s) });
            }
        }
        None
    };
    let path = next()?;
    let cwd = next()?;
    // SAFETY: cwd points at a received byte (its NUL at least).
    let cwd = if unsafe { *cwd } == 0 {
        core::ptr::null()
    } else {
        cwd
    };
    let ptrs = (&raw mut PTRS) as *mut usize;
    for i in 0..argc {
        // SAFETY: i < argc < MAX_PTRS.
        unsafe { *ptrs.add(i) = next()? as usize };
    }
    for i in 0..envc {
        // SAFETY: argc + 1 + i < argc + envc + 2 <= MAX_PTRS.
        unsafe { *ptrs.add(argc + 1 + i) = next()? as usize };
    }
    // SAFETY: both indexes are below argc + envc + 2 <= MAX_PTRS.
    unsafe {
        *ptrs.add(argc) = 0;
        *ptrs.add(argc + 1 + envc) = 0;
    }
    if at != n {
        return None;
    }
    Some(Child {
        path,
        argv: ptrs as *const *const u8,
        // SAFETY: within PTRS, see above.
        envp: unsafe { ptrs.add(argc + 1) } as *const *const u8,
        cwd,
        fds,
        errno: 0,
        stage: 0,
    })
}

// The compiler may call these for array initialisation and copies; with no libc they are
// ours. Volatile stores keep LLVM from turning the loops back into calls to themselves.
#[no_mangle]
unsafe extern "C" fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8 {
    for i in 0..n {
        // SAFETY: the caller owns dst[..n].
        unsafe { core::ptr::write_volatile(dst.add(i), c as u8) };
    }
    dst
}

#[no_mangle]
unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    for i in 0..n {
        // SAFETY: the caller owns dst[..n] and src[..n], which do not overlap.
        unsafe { core::ptr::write_volatile(dst.add(i), *src.add(i)) };
    }
    dst
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    exit(126)
}
