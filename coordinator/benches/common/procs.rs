//! Processes the scale benches start and watch: `platter serve` children, what /proc says
//! about them and about the machine, the PKI through `platter certs`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What /proc says about a process.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcSnap {
    pub rss_kib: u64,
    pub hwm_kib: u64,
    pub threads: u64,
    /// utime + stime, clock ticks.
    pub cpu_ticks: u64,
    pub fds: u64,
}

pub fn snap(pid: u32) -> anyhow::Result<ProcSnap> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status (did the coordinator die?)"))?;
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces): state is field 3, utime 14.
    let rest = &stat[stat.rfind(')').context("malformed stat")? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let cpu_ticks = f[11].parse::<u64>()? + f[12].parse::<u64>()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count() as u64)
        .unwrap_or(0);
    Ok(ProcSnap {
        rss_kib: field("VmRSS:"),
        hwm_kib: field("VmHWM:"),
        threads: field("Threads:"),
        cpu_ticks,
        fds,
    })
}

/// CPU time of the whole machine so far (all cores, clock ticks): to tell how much of a
/// phase's CPU went to other processes (a build in another terminal skews every figure).
pub fn machine_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = stat.lines().next().unwrap_or_default();
    // cpu user nice system idle iowait irq softirq steal …: everything but idle and iowait.
    line.split_whitespace()
        .skip(1)
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum()
}

pub fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

pub fn cpu_secs(a: ProcSnap, b: ProcSnap) -> f64 {
    b.cpu_ticks.saturating_sub(a.cpu_ticks) as f64 / clk_tck()
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Raises the open-file limit (children inherit it) as far as allowed, up to 65536.
pub fn raise_nofile() -> libc::rlim_t {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        let want = libc::rlimit {
            rlim_cur: 65536,
            rlim_max: r.rlim_max.max(65536),
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &want) != 0 {
            // Not allowed to raise the hard limit: take what it permits.
            let soft = libc::rlimit {
                rlim_cur: r.rlim_max,
                rlim_max: r.rlim_max,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &soft);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
    }
    r.rlim_cur
}

/// A coordinator child; killed on drop so a failing bench leaves nothing behind.
pub struct Coordinator {
    pub name: &'static str,
    /// The name it goes by on the store (`PLATTER_COORDINATOR_NAME`, where `platter serve`
    /// reads one): fleet-a, fleet-b.
    pub id: String,
    pub child: Child,
    pub pid: u32,
    pub url: String,
    pub log: PathBuf,
}

impl Coordinator {
    /// `platter serve` on a free port of 127.0.0.1; returns once it listens.
    pub fn start(
        bin: &Path,
        name: &'static str,
        db: &std::ffi::OsStr,
        tls_dir: Option<&Path>,
        log: PathBuf,
        extra: &[&str],
    ) -> anyhow::Result<Coordinator> {
        let id = format!("fleet-{}", name.to_lowercase());
        let mut command = Command::new(bin);
        command
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .arg("--db")
            .arg(db);
        // Without a TLS directory: plaintext gRPC, as `platter agent --dangerously-insecure`
        // on loopback speaks it.
        match tls_dir {
            Some(dir) => command.arg("--tls-dir").arg(dir),
            None => command.arg("--dangerously-insecure"),
        };
        let child = command
            .env("PLATTER_COORDINATOR_NAME", &id)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let pid = child.id();
        let mut c = Coordinator {
            name,
            id,
            child,
            pid,
            url: String::new(),
            log,
        };
        let t = Instant::now();
        let port = loop {
            if let Some(port) = announced_port(&c.log) {
                break port;
            }
            if !c.alive() || t.elapsed() > Duration::from_secs(10) {
                bail!(
                    "coordinator {name} did not start:\n{}",
                    log_tail(&c.log, 20)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let scheme = if tls_dir.is_some() { "https" } else { "http" };
        c.url = format!("{scheme}://127.0.0.1:{port}");
        Ok(c)
    }

    /// The address its `--http` serves on (`http on ADDRESS` in its log).
    pub fn http_addr(&mut self) -> anyhow::Result<String> {
        let t = Instant::now();
        loop {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            let found = text
                .split_inclusive('\n')
                .filter(|l| l.ends_with('\n'))
                .find_map(|l| l.trim_end().strip_prefix("http on ").map(str::to_string));
            if let Some(addr) = found {
                return Ok(addr);
            }
            if !self.alive() || t.elapsed() > Duration::from_secs(10) {
                bail!(
                    "coordinator {} serves no HTTP:\n{}",
                    self.name,
                    log_tail(&self.log, 20)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn kill9(&mut self) {
        if self.alive() {
            // SAFETY: signalling our own child, not yet reaped.
            unsafe { libc::kill(self.pid as i32, libc::SIGKILL) };
        }
        let _ = self.child.wait();
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        if !self.alive() {
            return;
        }
        // SIGTERM first: the coordinator finishes in-flight writes and exits.
        // SAFETY: signalling our own child, not yet reaped.
        unsafe { libc::kill(self.pid as i32, libc::SIGTERM) };
        for _ in 0..100 {
            if !self.alive() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn platter_bin() -> PathBuf {
    std::env::var_os("PLATTER_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_platter")))
}

/// What `psql URL -c SQL` printed (unaligned, tuples only), trimmed; None when it failed
/// or is not installed.
pub fn psql(url: &str, sql: &str) -> Option<String> {
    let out = Command::new("psql")
        .arg(url)
        .args(["-XAtc", sql])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `platter_bin`, which must exist.
pub fn built_platter_bin() -> anyhow::Result<PathBuf> {
    let bin = platter_bin();
    if !bin.exists() {
        bail!(
            "{} does not exist: build it with `cargo build --release --bin platter` or set PLATTER_BIN",
            bin.display()
        );
    }
    Ok(bin)
}

/// Where a bench keeps its PKI, database and logs: `FLEET_DIR` (kept), else a temporary
/// directory, removed when this is dropped unless `FLEET_KEEP` is set.
pub struct WorkDir {
    pub dir: PathBuf,
    pub keep: bool,
    tmp: Option<tempfile::TempDir>,
}

impl WorkDir {
    pub fn new(prefix: &str) -> anyhow::Result<WorkDir> {
        let keep =
            std::env::var_os("FLEET_DIR").is_some() || std::env::var_os("FLEET_KEEP").is_some();
        Ok(match std::env::var_os("FLEET_DIR") {
            Some(d) => {
                let dir = PathBuf::from(d);
                std::fs::create_dir_all(&dir)?;
                WorkDir {
                    dir,
                    keep,
                    tmp: None,
                }
            }
            None => {
                let t = tempfile::Builder::new().prefix(prefix).tempdir()?;
                WorkDir {
                    dir: t.path().to_path_buf(),
                    keep,
                    tmp: Some(t),
                }
            }
        })
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if let (true, Some(t)) = (self.keep, self.tmp.take()) {
            let _ = t.keep();
        }
    }
}

/// A bench fleet's CA in `pki_dir` (kept if there), and, issued afresh, one coordinator
/// certificate for `localhost` and 127.0.0.1 (every coordinator serves it) and the
/// operator `bench`.
pub fn fleet_pki(bin: &Path, pki_dir: &Path) -> anyhow::Result<()> {
    if !pki_dir.join("ca/ca.pem").exists() {
        certs(bin, &["init"], pki_dir)?;
    }
    certs(
        bin,
        &["issue", "coordinator", "localhost", "127.0.0.1", "--force"],
        pki_dir,
    )?;
    certs(bin, &["issue", "operator", "bench", "--force"], pki_dir)
}

pub fn certs(bin: &Path, args: &[&str], dir: &Path) -> anyhow::Result<()> {
    let out = Command::new(bin)
        .arg("certs")
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()?;
    if !out.status.success() {
        bail!(
            "platter certs {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// The port `platter serve --listen 127.0.0.1:0` announced in its log ("listening on
/// ADDRESS"), once it has (whole lines only: a line may be written in pieces).
pub fn announced_port(log: &Path) -> Option<u16> {
    let text = std::fs::read_to_string(log).ok()?;
    text.split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .find_map(|l| l.trim_end().strip_prefix("listening on ")?.parse().ok())
        .map(|addr: std::net::SocketAddr| addr.port())
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let k = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[k]
}

pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
