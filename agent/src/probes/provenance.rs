//! What a run ran on: the host (kernel, CPU, memory, boot), the devices under test as the
//! kernel describes them, the storage as actually mounted, the write cache as read back,
//! and the versions of the tools a plan uses. Taken between steps (never while a measure
//! step runs) and sent with the plan's records, so a report printed a year later says
//! what its numbers were measured on. Read-only, except for asking tools their version.

use std::io::Read;
use std::path::Path;
use std::sync::OnceLock;

use platter_proto::model::Filesystem;

use crate::probes::inventory::{self, Device, Roots};
use crate::probes::{mountinfo, tools};

pub(crate) use platter_proto::provenance::{
    DeviceFacts, DriveHealth, HostFacts, MountFacts, Provenance, StorageFacts, AT_PLAN_END,
    AT_PLAN_START, AT_RESUME, AT_STORAGE_SETUP, TICK_ACCOUNTING, VIRTUAL_ACCOUNTING,
};

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

pub(crate) fn host(boot_id: &str) -> HostFacts {
    let cpuinfo = read("/proc/cpuinfo");
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k.trim(), "model name" | "Processor" | "cpu model").then(|| v.trim())
        })
        .unwrap_or_default()
        .to_string();
    let cpu_count = cpuinfo
        .lines()
        .filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "processor"))
        .count() as u32;
    let memory_bytes = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024);
    let (agent_cpus, workload_cpus) = crate::affinity::facts();
    let (tick_hz, cpu_accounting) = kernel_timekeeping(&workload_cpus);
    HostFacts {
        agent_version: env!("CARGO_PKG_VERSION").to_string(),
        kernel_release: read("/proc/sys/kernel/osrelease"),
        kernel_version: read("/proc/sys/kernel/version"),
        boot_id: boot_id.to_string(),
        cpu_model,
        cpu_count,
        memory_bytes,
        agent_cpus,
        workload_cpus,
        tick_hz,
        cpu_accounting,
    }
}

/// `(tick_hz, cpu_accounting)` of the running kernel, from its build configuration
/// (`/proc/config.gz`, CONFIG_IKCONFIG_PROC, else `/boot/config-RELEASE` as Debian, Fedora
/// and Ubuntu install it) and, for `workload_cpus`, its `nohz_full` CPUs; the
/// configuration is read once per agent process. `(0, "")` when there is none.
fn kernel_timekeeping(workload_cpus: &str) -> (u32, String) {
    static CONFIG: OnceLock<Option<(u32, String, bool)>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let gz = std::fs::File::open("/proc/config.gz").ok().and_then(|f| {
            let mut text = String::new();
            flate2::read::GzDecoder::new(f)
                .read_to_string(&mut text)
                .ok()
                .map(|_| text)
        });
        let text = gz.or_else(|| {
            let release = read("/proc/sys/kernel/osrelease");
            std::fs::read_to_string(format!("/boot/config-{release}")).ok()
        })?;
        Some(timekeeping(&text))
    });
    match config {
        Some((hz, accounting, gen)) => {
            let nohz_full = read("/sys/devices/system/cpu/nohz_full");
            (
                *hz,
                accounting_on(accounting, *gen, &nohz_full, workload_cpus),
            )
        }
        None => (0, String::new()),
    }
}

/// `(tick_hz, cpu_accounting, virt_gen)` from a kernel configuration: CONFIG_HZ, whether a
/// task's user/system split is sampled at the tick or measured at every switch, and
/// whether CONFIG_VIRT_CPU_ACCOUNTING_GEN may measure it on `nohz_full` CPUs.
fn timekeeping(config: &str) -> (u32, String, bool) {
    let set = |key: &str| {
        config
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
    };
    let hz = set("CONFIG_HZ").and_then(|v| v.parse().ok()).unwrap_or(0);
    let gen = set("CONFIG_VIRT_CPU_ACCOUNTING_GEN") == Some("y");
    let accounting = if set("CONFIG_VIRT_CPU_ACCOUNTING_NATIVE") == Some("y") {
        VIRTUAL_ACCOUNTING
    } else if set("CONFIG_TICK_CPU_ACCOUNTING") == Some("y") || gen {
        TICK_ACCOUNTING
    } else {
        ""
    };
    (hz, accounting.to_string(), gen)
}

/// VIRT_CPU_ACCOUNTING_GEN measures only on `nohz_full` CPUs and samples on the others:
/// "virtual" when every CPU workloads may use is one of them, the configuration's own
/// word otherwise.
fn accounting_on(configured: &str, gen: bool, nohz_full: &str, workload_cpus: &str) -> String {
    let cpus = |list: &str| -> Option<Vec<usize>> {
        let mut out = Vec::new();
        for part in list.split(',').filter(|p| !p.is_empty()) {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            out.extend(a.trim().parse::<usize>().ok()?..=b.trim().parse::<usize>().ok()?);
        }
        (!out.is_empty()).then_some(out)
    };
    match (gen, cpus(nohz_full), cpus(workload_cpus)) {
        (true, Some(isolated), Some(workloads))
            if workloads.iter().all(|c| isolated.contains(c)) =>
        {
            VIRTUAL_ACCOUNTING.to_string()
        }
        _ => configured.to_string(),
    }
}

/// The devices behind `paths` (symlinks such as by-id resolved), as the inventory sees
/// them; every device of the inventory when `paths` is `None`.
pub(crate) fn devices(roots: &Roots, paths: Option<&[&str]>) -> Vec<DeviceFacts> {
    let Ok(all) = inventory::scan(roots) else {
        return Vec::new();
    };
    let wanted = |d: &Device| match paths {
        None => true,
        Some(paths) => paths.iter().any(|p| {
            let real = std::fs::canonicalize(p).unwrap_or_else(|_| p.into());
            Path::new(&d.path) == real || d.path == *p
        }),
    };
    all.iter()
        .filter(|d| wanted(d))
        .map(|d| {
            let queue = roots.sys.join("block").join(&d.name).join("queue");
            let scheduler = read(queue.join("scheduler"))
                .split_whitespace()
                .find_map(|s| s.strip_prefix('[')?.strip_suffix(']').map(str::to_string))
                .unwrap_or_default();
            DeviceFacts {
                device: d.clone(),
                logical_block_size: read(queue.join("logical_block_size")).parse().unwrap_or(0),
                physical_block_size: read(queue.join("physical_block_size")).parse().unwrap_or(0),
                scheduler,
            }
        })
        .collect()
}

/// How long one `smartctl` reading may take: a drive busy with its own recovery can take
/// tens of seconds to answer; past this the reading says so instead of holding the plan.
const HEALTH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The health of each device of `paths` (the drives under test), read with `smartctl
/// --json -x` under `HEALTH_TIMEOUT`; a device that has no drive health (a loop device), a
/// host without smartctl, or smartctl's own failure (no permission, a USB bridge without
/// SAT pass-through) gives the reason instead, never zeros.
pub(crate) fn health(roots: &Roots, paths: &[&str]) -> Vec<DriveHealth> {
    if paths.is_empty() {
        return Vec::new();
    }
    let known = devices(roots, Some(paths));
    // All drives at once: a plan on eight drives waits for the slowest, not for the sum.
    std::thread::scope(|scope| {
        let reads: Vec<_> = paths
            .iter()
            .map(|p| {
                let real = std::fs::canonicalize(p).unwrap_or_else(|_| p.into());
                let device = known
                    .iter()
                    .map(|d| &d.device)
                    .find(|d| Path::new(&d.path) == real || d.path == *p);
                scope.spawn(move || read_health(p, device))
            })
            .collect();
        reads
            .into_iter()
            .zip(paths)
            .map(|(r, p)| {
                r.join().unwrap_or_else(|_| DriveHealth {
                    path: p.to_string(),
                    unreadable: "the health reading panicked".into(),
                    ..DriveHealth::default()
                })
            })
            .collect()
    })
}

fn read_health(path: &str, device: Option<&Device>) -> DriveHealth {
    use crate::probes::health::Reading;
    let mut h = DriveHealth {
        path: path.to_string(),
        ..DriveHealth::default()
    };
    if let Some(d) = device {
        h.model = d.model.clone();
        h.serial = d.serial.clone();
        h.firmware = d.firmware.clone();
        h.wwn = d.wwn.clone();
    }
    // smartctl is asked even of a loop device (it says it cannot read one); what it says is
    // followed by why.
    let is_loop = device.is_some_and(|d| d.transport == platter_proto::inventory::Transport::Loop);
    let loop_note = match device.and_then(|d| d.backing_file.as_ref()) {
        Some(f) if is_loop => format!(" ({path} is a loop device over {f}: no drive behind it)"),
        _ if is_loop => format!(" ({path} is a loop device: no drive behind it)"),
        _ => String::new(),
    };
    let smartctl = match crate::process::find_program("smartctl".as_ref()) {
        Ok(p) => p,
        Err(_) => {
            h.unreadable = format!(
                "smartctl not found on the agent's PATH (install smartmontools){loop_note}"
            );
            return h;
        }
    };
    let out = match run_for_output(&smartctl, &["--json=c", "-x", path], HEALTH_TIMEOUT) {
        Ok(out) => out,
        Err(why) => {
            h.unreadable = format!("smartctl -x {path}: {why}");
            return h;
        }
    };
    match crate::probes::health::parse(&out) {
        Ok(Reading::Read { reading, identity }) => {
            let fill = |mine: &mut String, theirs: String| {
                if mine.is_empty() {
                    *mine = theirs;
                }
            };
            fill(&mut h.model, identity.model);
            fill(&mut h.serial, identity.serial);
            fill(&mut h.firmware, identity.firmware);
            fill(&mut h.wwn, identity.wwn);
            h.reading = Some(reading);
        }
        Ok(Reading::Unreadable { message, .. }) => {
            h.unreadable = format!("smartctl: {message}{loop_note}")
        }
        Err(e) => h.unreadable = format!("smartctl -x {path}: {e}"),
    }
    h
}

/// What `program args` writes to stdout, read while it runs (smartctl's JSON is larger than
/// a pipe holds), within `limit` (then it is killed). Its exit status is not judged: smartctl
/// sets bits for what it found, and says in the JSON itself what failed.
fn run_for_output(
    program: &Path,
    args: &[&str],
    limit: std::time::Duration,
) -> Result<Vec<u8>, String> {
    use std::process::Stdio;
    let mut child = crate::process::command(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = (&mut stdout).take(16 << 20).read_to_end(&mut out);
        out
    });
    let deadline = std::time::Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = reader.join();
                return Err(format!("no answer within {} s", limit.as_secs()));
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e.to_string());
            }
        }
    }
    reader
        .join()
        .map_err(|_| "its output could not be read".to_string())
}

/// The mount at `mount_point`, the last one mounted there (the one in effect).
pub(crate) fn mount_at(mountinfo: &str, mount_point: &Path) -> Option<MountFacts> {
    let want = mount_point.to_string_lossy();
    mountinfo::parse(mountinfo)
        .into_iter()
        .rev()
        .find(|m| m.complete && m.mount_point == want)
        .map(|m| MountFacts {
            mount_point: m.mount_point,
            fs_type: m.fs_type,
            source: m.source,
            options: m.options,
            super_options: m.super_options,
        })
}

/// The version of the program that makes filesystem `fs`, as the inventory has it.
pub(crate) fn mkfs_version(fs: Filesystem) -> String {
    match fs {
        Filesystem::Ext2 => tools::version("mkfs.ext2"),
        Filesystem::Ext4 => tools::version("mkfs.ext4"),
        Filesystem::Xfs => tools::version("mkfs.xfs"),
        Filesystem::Btrfs => tools::version("mkfs.btrfs"),
        Filesystem::Tmpfs | Filesystem::None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_facts_are_read_from_proc() {
        let h = host("b00t");
        assert_eq!(h.boot_id, "b00t");
        assert!(!h.kernel_release.is_empty());
        assert!(h.cpu_count >= 1);
        assert!(h.memory_bytes > 1 << 20);
        assert_eq!(h.agent_version, env!("CARGO_PKG_VERSION"));
        // Where the kernel says how it was built (this machine's: /proc/config.gz), the
        // tick and the accounting are read from it.
        let mut config = String::new();
        if let Ok(f) = std::fs::File::open("/proc/config.gz") {
            flate2::read::GzDecoder::new(f)
                .read_to_string(&mut config)
                .unwrap();
            let hz = config
                .lines()
                .find_map(|l| l.strip_prefix("CONFIG_HZ="))
                .unwrap();
            assert_eq!(h.tick_hz.to_string(), hz);
            assert!(!h.cpu_accounting.is_empty(), "{h:?}");
        }
    }

    #[test]
    fn the_tick_and_the_cpu_accounting_come_from_the_kernel_configuration() {
        let debian = "# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n\
                      CONFIG_TICK_CPU_ACCOUNTING=y\n# CONFIG_VIRT_CPU_ACCOUNTING_GEN is not set\n";
        let tick = TICK_ACCOUNTING.to_string();
        assert_eq!(timekeeping(debian), (250, tick.clone(), false));
        let gen = "CONFIG_HZ=1000\nCONFIG_VIRT_CPU_ACCOUNTING_GEN=y\n";
        assert_eq!(timekeeping(gen), (1000, tick.clone(), true));
        let s390 = "CONFIG_HZ=100\nCONFIG_VIRT_CPU_ACCOUNTING_NATIVE=y\n";
        assert_eq!(
            timekeeping(s390),
            (100, VIRTUAL_ACCOUNTING.to_string(), false)
        );
        // CONFIG_HZ_250=y is not CONFIG_HZ; nothing known is nothing claimed.
        assert_eq!(timekeeping("CONFIG_HZ_250=y\n"), (0, String::new(), false));
        // VIRT_CPU_ACCOUNTING_GEN measures on nohz_full CPUs only: workloads all on them,
        // or not, or no nohz_full at all.
        assert_eq!(
            accounting_on("tick", true, "2-7", "2-3,5"),
            VIRTUAL_ACCOUNTING
        );
        assert_eq!(accounting_on("tick", true, "2-7", "0-7"), "tick");
        assert_eq!(accounting_on("tick", true, "", "0-7"), "tick");
        assert_eq!(accounting_on("tick", false, "2-7", "3"), "tick");
    }

    #[test]
    fn the_mount_in_effect_is_the_last_at_its_point() {
        let info = "\
22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw,errors=remount-ro
40 22 7:3 / /mnt/x rw,relatime - ext4 /dev/loop3 rw
41 40 0:52 / /mnt/x rw,noatime shared:9 - tmpfs platter-ramdisk rw,size=1024k
42 22 0:53 / /mnt/with\\040space rw - xfs /dev/loop4 rw,attr2
";
        let m = mount_at(info, Path::new("/mnt/x")).unwrap();
        assert_eq!(
            (m.fs_type.as_str(), m.source.as_str(), m.options.as_str()),
            ("tmpfs", "platter-ramdisk", "rw,noatime")
        );
        assert_eq!(m.super_options, "rw,size=1024k");
        let m = mount_at(info, Path::new("/mnt/with space")).unwrap();
        assert_eq!(m.fs_type, "xfs");
        assert!(mount_at(info, Path::new("/nowhere")).is_none());
    }
}
