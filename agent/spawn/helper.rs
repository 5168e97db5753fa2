//! `platter-spawn`: the tiny program between the agent and a workload. It forks, the child
//! execs the workload in its own process group, and the helper reports on fd 3 what only
//! the workload's parent can see: the pid, the wall time around fork → `wait4`, and the
//! `wait4` rusage of the workload's process tree. It must stay tiny: `exec` folds the
//! exec'ing process's peak RSS into the new program's `ru_maxrss`, so whatever forks the
//! workload sets a floor under its peak RSS (the agent's was 12–20 MiB; this is ~10 KiB).
//!
//! Hence no std, no libc: raw system calls, a hand-written `_start`, static, no
//! relocations. Built by `agent/build.rs` with the same `rustc`, embedded in the agent.
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
const STAGE_PIPE: i64 = 1;
const STAGE_FORK: i64 = 2;
const STAGE_EXEC: i64 = 3;
const STAGE_WAIT: i64 = 4;
const STAGE_ARGS: i64 = 5;

const REPORT_FD: usize = 3;
const EINTR: isize = 4;
const O_CLOEXEC: usize = 0o2000000;
const SIGCHLD: usize = 17;
const CLOCK_MONOTONIC: usize = 1;

#[cfg(target_arch = "x86_64")]
mod nr {
    pub const READ: usize = 0;
    pub const WRITE: usize = 1;
    pub const CLOSE: usize = 3;
    pub const CLONE: usize = 56;
    pub const EXECVE: usize = 59;
    pub const WAIT4: usize = 61;
    pub const SETPGID: usize = 109;
    pub const CLOCK_GETTIME: usize = 228;
    pub const EXIT_GROUP: usize = 231;
    pub const PIPE2: usize = 293;
}

#[cfg(target_arch = "aarch64")]
mod nr {
    pub const READ: usize = 63;
    pub const WRITE: usize = 64;
    pub const CLOSE: usize = 57;
    pub const CLONE: usize = 220;
    pub const EXECVE: usize = 221;
    pub const WAIT4: usize = 260;
    pub const SETPGID: usize = 154;
    pub const CLOCK_GETTIME: usize = 113;
    pub const EXIT_GROUP: usize = 94;
    pub const PIPE2: usize = 59;
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
        fail(22, STAGE_ARGS);
    }
    // SAFETY: argc >= 3, so argv[1] and argv[2..] exist.
    let (path, child_argv) = unsafe { (*argv.add(1), argv.add(2)) };
    run(path, child_argv, envp)
}

fn run(path: *const u8, argv: *const *const u8, envp: *const *const u8) -> ! {
    // An exec failure travels back on a close-on-exec pipe; EOF means the exec happened.
    let mut p = [0i32; 2];
    // SAFETY: p is a live int[2].
    let r = unsafe { syscall(nr::PIPE2, [p.as_mut_ptr() as usize, O_CLOEXEC, 0, 0, 0]) };
    if r < 0 {
        fail(r, STAGE_PIPE);
    }
    let (rd, wr) = (p[0] as usize, p[1] as usize);

    let started = now_ns();
    // A plain fork (clone with SIGCHLD): the copy of this tiny process is what exec
    // replaces, so the workload's peak RSS starts from ~10 KiB, not from the agent's.
    // SAFETY: no shared memory, no stack: fork semantics.
    let pid = unsafe { syscall(nr::CLONE, [SIGCHLD, 0, 0, 0, 0]) };
    if pid == 0 {
        // SAFETY: plain system calls on our own fds and the argument strings.
        unsafe {
            syscall(nr::SETPGID, [0, 0, 0, 0, 0]);
            syscall(nr::CLOSE, [REPORT_FD, 0, 0, 0, 0]);
            let e = syscall(
                nr::EXECVE,
                [path as usize, argv as usize, envp as usize, 0, 0],
            );
            let errno = -(e as i32);
            syscall(nr::WRITE, [wr, &errno as *const i32 as usize, 4, 0, 0]);
        }
        exit(127);
    }
    if pid < 0 {
        fail(pid, STAGE_FORK);
    }
    // Set the group from this side too, so it exists before the agent may kill it.
    // SAFETY: plain integers.
    unsafe { syscall(nr::SETPGID, [pid as usize, pid as usize, 0, 0, 0]) };
    report([STARTED, pid as i64, 0, 0, 0, 0, 0, 0]);
    // SAFETY: wr is our fd.
    unsafe { syscall(nr::CLOSE, [wr, 0, 0, 0, 0]) };
    let mut errno = 0i32;
    let n = loop {
        // SAFETY: errno is a live 4-byte buffer.
        let n = unsafe { syscall(nr::READ, [rd, &mut errno as *mut i32 as usize, 4, 0, 0]) };
        if n != -EINTR {
            break n;
        }
    };

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
    if n == 4 {
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
