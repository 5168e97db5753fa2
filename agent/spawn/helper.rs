//! `platter-spawn`: the tiny program between the agent and a workload. It vforks, the child
//! execs the workload in its own process group, and the helper reports on fd 3 what only
//! the workload's parent can see: the pid, the wall time around vfork → `wait4`, and the
//! `wait4` rusage of the workload's process tree. It must stay tiny: `exec` folds the
//! exec'ing process's peak RSS into the new program's `ru_maxrss`, so whatever forks the
//! workload sets a floor under its peak RSS (the agent's was 12–20 MiB; this is ~20 KiB).
//!
//! Hence no std, no libc: raw system calls, a hand-written `_start`, static, no
//! relocations. (A static std `main` that only reads /proc/self/status peaks at 1 MiB,
//! as much as all of `/bin/true`.) Built by `agent/build.rs` with the same `rustc`,
//! embedded in the agent.
//!
//! Usage: `platter-spawn PATH ARGV0 ARGS...` with fd 3 a pipe to the agent; the
//! workload gets PATH exec'd with ARGV0 ARGS..., this environment and fds 0–2.
//! Messages (8 native-endian i64 each, one `write` so they arrive whole):
//! `[STARTED, pid]`, then `[DONE, wall_ns, utime_us, stime_us, maxrss_kib, wait_status]`,
//! or `[FAILED, errno, stage]` at any point.

#![no_std]
#![no_main]

use core::arch::{asm, global_asm};

const STARTED: i64 = 1;
const DONE: i64 = 2;
const FAILED: i64 = 3;
/// Stages of `FAILED`: which call failed.
const STAGE_FORK: i64 = 2;
const STAGE_EXEC: i64 = 3;
const STAGE_WAIT: i64 = 4;
const STAGE_ARGS: i64 = 5;

const REPORT_FD: usize = 3;
const EINTR: isize = 4;
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

#[cfg(target_arch = "x86_64")]
mod nr {
    pub const WRITE: usize = 1;
    pub const CLOSE: usize = 3;
    pub const CLONE: usize = 56;
    pub const EXECVE: usize = 59;
    pub const WAIT4: usize = 61;
    pub const SETPGID: usize = 109;
    pub const RT_SIGPROCMASK: usize = 14;
    pub const CLOCK_GETTIME: usize = 228;
    pub const EXIT: usize = 60;
    pub const EXIT_GROUP: usize = 231;
}

#[cfg(target_arch = "aarch64")]
mod nr {
    pub const WRITE: usize = 64;
    pub const CLOSE: usize = 57;
    pub const CLONE: usize = 220;
    pub const EXECVE: usize = 221;
    pub const WAIT4: usize = 260;
    pub const SETPGID: usize = 154;
    pub const RT_SIGPROCMASK: usize = 135;
    pub const CLOCK_GETTIME: usize = 113;
    pub const EXIT: usize = 93;
    pub const EXIT_GROUP: usize = 94;
}

#[cfg(target_arch = "x86_64")]
unsafe fn syscall(n: usize, a: [usize; 5]) -> isize {
    let r: isize;
    // SAFETY: the caller passes arguments valid for system call `n`.
    unsafe {
        asm!("syscall", inlateout("rax") n as isize => r, in("rdi") a[0], in("rsi") a[1],
             in("rdx") a[2], in("r10") a[3], in("r8") a[4],
             lateout("rcx") _, lateout("r11") _, options(nostack));
    }
    r
}

#[cfg(target_arch = "aarch64")]
unsafe fn syscall(n: usize, a: [usize; 5]) -> isize {
    let r: isize;
    // SAFETY: the caller passes arguments valid for system call `n`.
    unsafe {
        asm!("svc 0", in("x8") n, inlateout("x0") a[0] as isize => r, in("x1") a[1],
             in("x2") a[2], in("x3") a[3], in("x4") a[4], options(nostack));
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
        unsafe { syscall(nr::EXIT_GROUP, [code, 0, 0, 0, 0]) };
    }
}

fn report(msg: [i64; 8]) {
    // SAFETY: msg is a live 64-byte buffer.
    unsafe { syscall(nr::WRITE, [REPORT_FD, msg.as_ptr() as usize, 64, 0, 0]) };
}

fn fail(errno: isize, stage: i64) -> ! {
    report([FAILED, -errno as i64, stage, 0, 0, 0, 0, 0]);
    exit(127)
}

fn now_ns() -> i64 {
    let mut ts = [0i64; 2];
    // SAFETY: ts is a live struct timespec.
    unsafe {
        syscall(
            nr::CLOCK_GETTIME,
            [CLOCK_MONOTONIC, ts.as_mut_ptr() as usize, 0, 0, 0],
        )
    };
    ts[0] * 1_000_000_000 + ts[1]
}

/// `sp` points at argc, then argv[0..argc], NULL, envp..., NULL (the ELF entry stack).
unsafe extern "C" fn start(sp: *const usize) -> ! {
    // SAFETY: the kernel lays out the entry stack as described above.
    let (argc, argv) = unsafe { (*sp, sp.add(1) as *const *const u8) };
    // SAFETY: envp follows argv's terminating NULL.
    let envp = unsafe { argv.add(argc + 1) };
    if argc < 3 {
        fail(-22, STAGE_ARGS);
    }
    // SAFETY: argc >= 3, so argv[1] and argv[2..] exist.
    let (path, child_argv) = unsafe { (*argv.add(1), argv.add(2)) };
    run(path, child_argv, envp)
}

/// vfork + exec, all in one `asm!` block: the child runs on this stack until it execs, so
/// it touches nothing but registers and `errno`. This process sleeps until the child has
/// exec'd (or exited); then the child's mm is its own, and the copy the exec folds into
/// its peak RSS is this process's ~20 KiB. Returns the pid (or -errno of clone), and
/// sets `errno` if the exec failed (the child then exits 127).
#[cfg(target_arch = "x86_64")]
fn vfork_exec(
    path: *const u8,
    argv: *const *const u8,
    envp: *const *const u8,
    errno: &mut i32,
) -> isize {
    let r: isize;
    // SAFETY: clone with CLONE_VM | CLONE_VFORK and no new stack: the child only issues
    // system calls from registers (setpgid, unblock signals, close fd 3, execve), writes
    // `errno` (shared memory) and exits or execs before the parent continues.
    unsafe {
        asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov eax, {setpgid}", "xor edi, edi", "xor esi, esi", "syscall",
            "mov eax, {sigprocmask}", "mov edi, {setmask}", "mov rsi, r9", "xor edx, edx",
            "mov r10d, 8", "syscall",
            "mov eax, {close}", "mov edi, {report_fd}", "syscall",
            "mov eax, {execve}", "mov rdi, r12", "mov rsi, r13", "mov rdx, r14", "syscall",
            "neg eax", "mov dword ptr [r15], eax",
            "mov eax, {exit}", "mov edi, 127", "syscall",
            "2:",
            setpgid = const nr::SETPGID,
            sigprocmask = const nr::RT_SIGPROCMASK,
            setmask = const SIG_SETMASK,
            close = const nr::CLOSE,
            execve = const nr::EXECVE,
            exit = const nr::EXIT,
            report_fd = const REPORT_FD,
            inlateout("rax") nr::CLONE as isize => r,
            in("rdi") CLONE_VM | CLONE_VFORK | SIGCHLD,
            in("rsi") 0, in("rdx") 0, in("r10") 0, in("r8") 0,
            in("r12") path, in("r13") argv, in("r14") envp, in("r15") errno as *mut i32,
            in("r9") &EMPTY_SET as *const u64,
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    r
}

#[cfg(target_arch = "aarch64")]
fn vfork_exec(
    path: *const u8,
    argv: *const *const u8,
    envp: *const *const u8,
    errno: &mut i32,
) -> isize {
    let r: isize;
    // SAFETY: as for x86_64: the child uses registers and `errno` only.
    unsafe {
        asm!(
            "svc 0",
            "cbnz x0, 2f",
            "mov x8, {setpgid}", "mov x0, xzr", "mov x1, xzr", "svc 0",
            "mov x8, {sigprocmask}", "mov x0, {setmask}", "mov x1, x13", "mov x2, xzr",
            "mov x3, 8", "svc 0",
            "mov x8, {close}", "mov x0, {report_fd}", "svc 0",
            "mov x8, {execve}", "mov x0, x9", "mov x1, x10", "mov x2, x11", "svc 0",
            "neg w0, w0", "str w0, [x12]",
            "mov x8, {exit}", "mov x0, 127", "svc 0",
            "2:",
            setpgid = const nr::SETPGID,
            sigprocmask = const nr::RT_SIGPROCMASK,
            setmask = const SIG_SETMASK,
            close = const nr::CLOSE,
            execve = const nr::EXECVE,
            exit = const nr::EXIT,
            report_fd = const REPORT_FD,
            in("x8") nr::CLONE,
            inlateout("x0") (CLONE_VM | CLONE_VFORK | SIGCHLD) as isize => r,
            in("x1") 0, in("x2") 0, in("x3") 0, in("x4") 0,
            in("x9") path, in("x10") argv, in("x11") envp, in("x12") errno as *mut i32,
            in("x13") &EMPTY_SET as *const u64,
            options(nostack),
        );
    }
    r
}

/// The signal mask the workload starts with (the agent spawned the helper with this one).
static EMPTY_SET: u64 = 0;

fn run(path: *const u8, argv: *const *const u8, envp: *const *const u8) -> ! {
    // SAFETY: BLOCKED is a live sigset_t of 8 bytes; no old set is asked for.
    unsafe {
        syscall(
            nr::RT_SIGPROCMASK,
            [SIG_BLOCK, &BLOCKED as *const u64 as usize, 0, 8, 0],
        )
    };
    let mut errno = 0i32;
    let started = now_ns();
    let pid = vfork_exec(path, argv, envp, &mut errno);
    if pid < 0 {
        fail(pid, STAGE_FORK);
    }
    if errno == 0 {
        // The child set its process group before its exec, which has happened.
        report([STARTED, pid as i64, 0, 0, 0, 0, 0, 0]);
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
                ],
            )
        };
        if r == pid {
            break;
        }
        if r != -EINTR {
            fail(r, STAGE_WAIT);
        }
    }
    let wall = now_ns() - started;
    if errno != 0 {
        fail(-(errno as isize), STAGE_EXEC);
    }
    let utime = ru[0] * 1_000_000 + ru[1];
    let stime = ru[2] * 1_000_000 + ru[3];
    report([DONE, wall, utime, stime, ru[4], status as i64, 0, 0]);
    exit(0)
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
