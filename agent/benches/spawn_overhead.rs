//! Overhead benchmark: `process::run` (workload forked by the agent's resident
//! `platter-spawn` helper) against the previous path (std `Command` spawned straight from this process, `wait4`
//! here), interleaved in blocks so drift of the machine hits both alike.
//!
//! ```text
//! cargo bench -p platter-agent --bench spawn_overhead -- [N=1000] [SLEEPS=20]
//! ```
//!
//! For `/bin/true` (N each) and `sleep 0.05` (SLEEPS each) prints the median and mean of
//! the time per step seen by the caller ("step") and of the wall time each path reports,
//! and the median peak RSS each reports. Compare the reported walls with
//! `hyperfine -N --runs 1000 /bin/true 'sleep 0.05'`.

use std::error::Error;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicI32;
use std::time::{Duration, Instant};

use platter_agent::testing as process;

/// The spawn path before the helper: what `process::measure` did (stderr to a memfd).
fn old_run(argv: &[&str]) -> std::io::Result<(Duration, u64)> {
    // SAFETY: literal name; the fd is owned by the File below.
    let fd = unsafe { libc::memfd_create(c"bench-stderr".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptor.
    let err = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let started = Instant::now();
    let child = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(err.try_clone()?))
        .process_group(0)
        .spawn()?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: all-zero rusage is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our child; status and usage are live.
    while unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } != pid {}
    Ok((started.elapsed(), usage.ru_maxrss as u64 * 1024))
}

struct Side {
    step: Vec<Duration>,
    wall: Vec<Duration>,
    rss: Vec<u64>,
}

impl Side {
    fn new() -> Side {
        Side {
            step: Vec::new(),
            wall: Vec::new(),
            rss: Vec::new(),
        }
    }

    fn print(&mut self, name: &str) {
        fn stats(v: &mut [Duration]) -> (f64, f64) {
            v.sort();
            let mean = v.iter().sum::<Duration>().as_secs_f64() / v.len() as f64;
            (v[v.len() / 2].as_secs_f64() * 1e3, mean * 1e3)
        }
        let (sm, sa) = stats(&mut self.step);
        let (wm, wa) = stats(&mut self.wall);
        self.rss.sort();
        println!(
            "  {name:<8} step median {sm:.3} ms mean {sa:.3} ms | reported wall median {wm:.3} ms mean {wa:.3} ms | max_rss median {:.2} MiB",
            self.rss[self.rss.len() / 2] as f64 / (1 << 20) as f64
        );
    }
}

fn compare(argv: &[&str], n: usize) -> Result<(), Box<dyn Error>> {
    let script = argv.join(" ");
    let running = AtomicI32::new(0);
    let (mut new, mut old) = (Side::new(), Side::new());
    let block = 50.min(n);
    for _ in 0..n.div_ceil(block) {
        for _ in 0..block {
            let t = Instant::now();
            let o = process::run_process(&script, &[], &running)?;
            new.step.push(t.elapsed());
            new.wall.push(o.wall);
            new.rss.push(o.max_rss_bytes);
        }
        for _ in 0..block {
            let t = Instant::now();
            let (wall, rss) = old_run(argv)?;
            old.step.push(t.elapsed());
            old.wall.push(wall);
            old.rss.push(rss);
        }
    }
    println!("{script} ({} runs each)", new.step.len());
    new.print("resident");
    old.print("direct");
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let n: usize = args.next().map_or(Ok(1000), |s| s.parse())?;
    let sleeps: usize = args.next().map_or(Ok(20), |s| s.parse())?;
    compare(&["/bin/true"], n)?;
    compare(&["sleep", "0.05"], sleeps)?;
    Ok(())
}
