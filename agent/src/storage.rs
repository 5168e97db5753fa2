//! Storage setup and teardown: write cache, mkfs and mount of a device, or a tmpfs RAM
//! disk. It owns ARCHITECTURE.md's invariant "Do no harm": a device is touched (set up,
//! purged or preconditioned) only if the operator allowed it (`--allow-device`), it is a
//! whole disk this host's inventory knows, and it is not mounted, stacked under dm/md, or
//! holding `/`; a purge needs `--allow-purge` besides. Teardown undoes what setup changed
//! and is safe to run twice.

use std::path::{Path, PathBuf};

use crate::model::{Encryption, Filesystem, StepKind, StorageConfig, WriteCacheSetting};
use crate::probes::inventory::{self, Device, InventoryError, Transport};

/// Why a storage operation failed. The texts are what users read in a step's error (the
/// executor stores `to_string()`), so they stay as they were when these were strings.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StorageError {
    #[error(transparent)]
    Tool(#[from] crate::process::ToolError),
    /// "Do no harm" refused it: the reason from [`Storage::refusal`].
    #[error("refused: {0}")]
    Refused(String),
    /// `what` is the verb: "reading", "writing", "creating".
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    ReadDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Saving the write cache's original state for teardown.
    #[error("{0}")]
    SaveWriteCache(#[source] std::io::Error),
    #[error(transparent)]
    Inventory(#[from] InventoryError),
    #[error("the storage ({storage}) is no longer mounted at {}: the host restarted without a planned reboot, or something unmounted it; not running on another filesystem", mount_point.display())]
    NotInPlace {
        storage: String,
        mount_point: PathBuf,
    },
    #[error("{device} is not in the inventory")]
    NotInInventory { device: String },
    #[error("no scsi_disk under {}", dir.display())]
    NoScsiDisk { dir: PathBuf },
    #[error("the write cache of {device} ({transport}) cannot be set: only ATA, SCSI/USB and NVMe drives have one")]
    CacheNotSettable {
        device: String,
        transport: Transport,
    },
    #[error("the write cache of {device} ({transport}) cannot be read")]
    CacheNotReadable {
        device: String,
        transport: Transport,
    },
    /// `reported` is "on" or "off".
    #[error("{device} still reports its write cache {reported}")]
    CacheUnchanged {
        device: String,
        reported: &'static str,
    },
    #[error("restoring the write cache: {0}")]
    RestoreWriteCache(Box<StorageError>),
    /// Teardown goes on after a failure and reports every one.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Several(Vec<StorageError>),
}

#[derive(Debug, Clone)]
pub(crate) struct Storage {
    /// Mount points live below this directory, one per device (or `ramdisk`).
    pub mount_dir: PathBuf,
    /// Saved settings (the write cache before setup changed it), so teardown can restore
    /// them even after the agent restarted.
    pub state_dir: PathBuf,
    /// `--allow-device` patterns (paths or globs, e.g. `/dev/loop*`).
    pub allowed: Vec<String>,
    /// `--allow-purge`: plans may purge the devices `allowed` allows.
    pub allow_purge: bool,
    pub inventory_roots: inventory::Roots,
}

/// When a destructive step is judged ([`Storage::step_refusal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Judged {
    /// When its plan arrives: the agent's own mount of the device (a plan held before this
    /// one may have it mounted until its teardown) does not count as "in use".
    OnArrival,
    /// Right before a purge or a precondition runs: any mount refuses, the agent's own too.
    AtRun,
}

fn run(program: &str, args: &[&str]) -> Result<String, StorageError> {
    // Started with the workloads' CPUs: a daemon it leaves (gocryptfs) serves them.
    let _all_cpus = crate::affinity::Widened::new();
    Ok(crate::process::output(program, args)?)
}

impl Storage {
    /// Where `${mount}` is for this configuration.
    pub(crate) fn mount_point(&self, c: &StorageConfig) -> PathBuf {
        let base = self.base_point(c);
        if c.encryption.is_none() {
            return base;
        }
        let mut plain = base.into_os_string();
        plain.push(".plain");
        plain.into()
    }

    /// Where the filesystem itself is mounted (under an encrypted view, if any).
    fn base_point(&self, c: &StorageConfig) -> PathBuf {
        match &c.device {
            Some(d) => self.device_point(d),
            None => self.mount_dir.join("ramdisk"),
        }
    }

    /// Where a filesystem on `device` is mounted.
    fn device_point(&self, device: &str) -> PathBuf {
        let name = Path::new(device)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "device".into());
        self.mount_dir.join(name)
    }

    fn allowed(&self, path: &str, device: Option<&Device>) -> bool {
        let mut names = vec![path.to_string()];
        if let Some(d) = device {
            names.push(d.path.clone());
            names.extend(d.by_id.iter().map(|id| format!("/dev/disk/by-id/{id}")));
            names.extend(d.by_path.iter().map(|p| format!("/dev/disk/by-path/{p}")));
        }
        self.allowed.iter().any(|pattern| {
            let p = glob::Pattern::new(pattern);
            names
                .iter()
                .any(|n| n == pattern || p.as_ref().is_ok_and(|p| p.matches(n)))
        })
    }

    /// Why setting up `c` must not happen, or None. `ours` mounts (our own mount point,
    /// left by an interrupted attempt) do not count as "in use".
    pub(crate) fn refusal(&self, c: &StorageConfig) -> Option<String> {
        let path = c.device.as_deref()?;
        self.device_refusal(path, Some(&self.base_point(c)))
    }

    /// Why the destructive step `kind` must not run, or None (for other kinds, None): a
    /// storage setup's device, a purge's and a precondition's (which overwrites the whole
    /// drive) pass the same rails, and a purge needs `--allow-purge` too, so that a
    /// campaign file alone never erases a drive.
    pub(crate) fn step_refusal(&self, kind: &StepKind, judged: Judged) -> Option<String> {
        let device = match kind {
            StepKind::StorageSetup(c) => return self.refusal(c),
            StepKind::Purge(p) => {
                if !self.allow_purge {
                    return Some(format!(
                        "purge of {} ({}) is not allowed: start platter-agent with --allow-purge \
                         to let plans purge drives it may format",
                        p.device,
                        p.method.name()
                    ));
                }
                &p.device
            }
            StepKind::Precondition(p) => &p.device,
            _ => return None,
        };
        let ours = match judged {
            Judged::OnArrival => Some(self.device_point(device)),
            Judged::AtRun => None,
        };
        self.device_refusal(device, ours.as_deref())
            .map(|why| format!("{} of {device}: {why}", kind.name()))
    }

    /// Why `path` must not be written to, or None. A mount at `ours` does not count.
    fn device_refusal(&self, path: &str, ours: Option<&Path>) -> Option<String> {
        let devices = match inventory::scan(&self.inventory_roots) {
            Ok(d) => d,
            Err(e) => {
                return Some(format!(
                    "cannot read this host's devices to check {path}: {e}"
                ))
            }
        };
        let real = std::fs::canonicalize(path)
            .ok()
            .map(|p| p.display().to_string());
        let device = devices
            .iter()
            .find(|d| d.path == path || Some(&d.path) == real.as_ref());
        if !self.allowed(path, device) {
            return Some(format!(
                "{path} is not allowed: the agent formats only devices its operator named with --allow-device \
                 (e.g. --allow-device {path})"
            ));
        }
        let Some(device) = device else {
            return Some(format!(
                "{path} is not a whole disk this host knows (see `platter inventory`)"
            ));
        };
        if device.holds_root {
            return Some(format!("{path} holds / (the root filesystem)"));
        }
        let ours = ours.map(|p| p.display().to_string());
        let foreign: Vec<&String> = device
            .mounted
            .iter()
            .filter(|m| Some(*m) != ours.as_ref())
            .collect();
        if !foreign.is_empty() {
            return Some(format!(
                "{path} is mounted at {}",
                foreign
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if !device.holders.is_empty() {
            return Some(format!("{path} is in use by {}", device.holders.join(", ")));
        }
        None
    }

    /// The programs setting up and tearing down `c` run (each found in PATH), in the order
    /// they run: write cache (by the drive's transport), mkfs, mount, gocryptfs.
    pub(crate) fn programs(&self, c: &StorageConfig) -> Vec<&'static str> {
        let mut out = Vec::new();
        if let (Some(path), true) = (&c.device, c.write_cache != WriteCacheSetting::Keep) {
            let transport = inventory::scan(&self.inventory_roots)
                .ok()
                .and_then(|ds| ds.into_iter().find(|d| &d.path == path))
                .map(|d| d.transport);
            match transport {
                Some(Transport::Nvme) => out.push("nvme"),
                Some(Transport::Ata) => out.push("hdparm"),
                // SCSI and USB drives are set through sysfs; others cannot be set (setup
                // says why).
                _ => {}
            }
        }
        if c.device.is_some() {
            out.extend(match c.fs {
                Filesystem::Ext2 => Some("mkfs.ext2"),
                Filesystem::Ext4 => Some("mkfs.ext4"),
                Filesystem::Xfs => Some("mkfs.xfs"),
                Filesystem::Btrfs => Some("mkfs.btrfs"),
                Filesystem::None | Filesystem::Tmpfs => None,
            });
        }
        if c.fs.is_mounted() {
            out.extend(["mount", "umount"]);
        }
        if c.encryption == Encryption::Gocryptfs {
            out.extend(["gocryptfs", "fusermount"]);
        }
        out
    }

    /// What setting up `c` does that only root may do (a normal user can neither mount,
    /// nor format a block device, nor set a drive's write cache): for preflight, which
    /// refuses such a plan from an agent that is not root before it looks for programs.
    pub(crate) fn root_needed_for(c: &StorageConfig) -> Vec<&'static str> {
        let mut out = Vec::new();
        if c.device.is_some() && c.write_cache != WriteCacheSetting::Keep {
            out.push("set a drive's write cache");
        }
        if c.device.is_some() && !matches!(c.fs, Filesystem::None | Filesystem::Tmpfs) {
            out.push("format a device");
        }
        if c.fs.is_mounted() {
            out.push("mount");
        }
        out
    }

    /// Err when storage `c`, set up earlier in the plan, is not mounted now: the host
    /// restarted without a planned reboot (a power loss, a crash), or something unmounted
    /// it. A step must then not run, or it would measure whatever filesystem holds the
    /// empty mount point.
    pub(crate) fn check_in_place(&self, c: &StorageConfig) -> Result<(), StorageError> {
        if c.fs == Filesystem::None {
            return Ok(());
        }
        let mp = self.mount_point(c);
        if self.is_mounted(&mp)? {
            return Ok(());
        }
        Err(StorageError::NotInPlace {
            storage: c.to_string(),
            mount_point: mp,
        })
    }

    fn is_mounted(&self, mount_point: &Path) -> Result<bool, StorageError> {
        let mountinfo = &self.inventory_roots.mountinfo;
        let info = std::fs::read_to_string(mountinfo).map_err(|source| StorageError::Io {
            what: "reading",
            path: mountinfo.clone(),
            source,
        })?;
        // The one mountinfo reading of provenance, with every escape undone (a mount point
        // with a tab or a backslash, not only a space, must be found).
        Ok(crate::probes::provenance::mount_at(&info, mount_point).is_some())
    }

    fn saved_cache(&self, device: &str) -> PathBuf {
        let name = Path::new(device)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.state_dir
            .join("storage")
            .join(format!("{name}.write_cache"))
    }

    /// Write cache → mkfs → mount. Re-running it after an interruption starts over.
    /// `shared`: workloads of other users than the agent's use it (an encrypted view is
    /// then opened to them; FUSE shuts out every user but the one who mounted it).
    pub(crate) fn setup(&self, c: &StorageConfig, shared: bool) -> Result<(), StorageError> {
        let mp = self.base_point(c);
        // Left mounted by an attempt that was cut off: start from a clean slate. Patiently:
        // the gocryptfs daemon of the view just unmounted may still hold the base a moment.
        for m in [self.mount_point(c), mp.clone()] {
            if self.is_mounted(&m)? {
                umount_patiently(&m)?;
            }
        }
        if let Some(reason) = self.refusal(c) {
            return Err(StorageError::Refused(reason));
        }
        if let Some(device) = &c.device {
            if c.write_cache != WriteCacheSetting::Keep {
                self.set_write_cache(device, c.write_cache == WriteCacheSetting::On)?;
            }
            self.mkfs(c, device)?;
        }
        if c.fs == Filesystem::None {
            return Ok(());
        }
        create_dir_all(&mp)?;
        let mp_s = mp.display().to_string();
        match &c.device {
            Some(device) => {
                let mut args = vec!["-t", c.fs.name()];
                if !c.mount_options.is_empty() {
                    args.extend(["-o", c.mount_options.as_str()]);
                }
                args.extend([device.as_str(), mp_s.as_str()]);
                run("mount", &args)?;
            }
            None => {
                let mut opts = match c.ramdisk_size {
                    Some(size) => format!("size={size}"),
                    None => String::new(),
                };
                if !c.mount_options.is_empty() {
                    if !opts.is_empty() {
                        opts.push(',');
                    }
                    opts.push_str(&c.mount_options);
                }
                let mut args = vec!["-t", "tmpfs"];
                if !opts.is_empty() {
                    args.extend(["-o", opts.as_str()]);
                }
                args.extend(["platter-ramdisk", mp_s.as_str()]);
                run("mount", &args)?;
            }
        }
        if c.encryption == Encryption::Gocryptfs {
            self.gocryptfs(c, &mp, shared)?;
        }
        Ok(())
    }

    /// An encrypted view of the fresh filesystem at `mount_point(c)`. The password only
    /// keeps the benchmark's own files: it protects nothing, so it is fixed.
    fn gocryptfs(&self, c: &StorageConfig, base: &Path, shared: bool) -> Result<(), StorageError> {
        const PASSWORD: &str = "echo platter-benchmark";
        let cipher = base.join(".gocryptfs");
        let plain = self.mount_point(c);
        for dir in [&cipher, &plain] {
            create_dir_all(dir)?;
        }
        let cipher_s = cipher.display().to_string();
        run(
            "gocryptfs",
            &["-init", "-q", "-extpass", PASSWORD, &cipher_s],
        )?;
        let plain_s = plain.display().to_string();
        let mut args = vec!["-q", "-extpass", PASSWORD];
        if shared {
            // With the kernel checking permissions (`default_permissions`), as on any
            // filesystem. Root may mount so without `user_allow_other` in fuse.conf.
            args.push("-allow_other");
        }
        args.extend([cipher_s.as_str(), plain_s.as_str()]);
        run("gocryptfs", &args)?;
        Ok(())
    }

    fn mkfs(&self, c: &StorageConfig, device: &str) -> Result<(), StorageError> {
        let (program, force) = match c.fs {
            Filesystem::Ext2 => ("mkfs.ext2", "-F"),
            Filesystem::Ext4 => ("mkfs.ext4", "-F"),
            Filesystem::Xfs => ("mkfs.xfs", "-f"),
            Filesystem::Btrfs => ("mkfs.btrfs", "-f"),
            Filesystem::None | Filesystem::Tmpfs => return Ok(()),
        };
        let mut args = vec![force, "-q"];
        args.extend(c.mkfs_options.iter().map(String::as_str));
        args.push(device);
        run(program, &args).map(|_| ())
    }

    /// Unmount, restore the write cache. Safe to run when setup never happened.
    pub(crate) fn teardown(&self, c: &StorageConfig) -> Result<(), StorageError> {
        let mp = self.base_point(c);
        let mut errors = Vec::new();
        let plain = self.mount_point(c);
        if plain != mp && self.is_mounted(&plain)? {
            match run("fusermount", &["-u", &plain.display().to_string()]) {
                Ok(_) => {
                    let _ = std::fs::remove_dir(&plain);
                }
                Err(e) => errors.push(e),
            }
        }
        if c.fs != Filesystem::None && self.is_mounted(&mp)? {
            if let Err(e) = umount_patiently(&mp) {
                errors.push(e);
            } else {
                let _ = std::fs::remove_dir(&mp);
            }
        }
        if let Some(device) = &c.device {
            let saved = self.saved_cache(device);
            if let Ok(original) = std::fs::read_to_string(&saved) {
                match self.set_write_cache(device, original.trim() == "on") {
                    Ok(()) => {
                        let _ = std::fs::remove_file(&saved);
                    }
                    Err(e) => errors.push(StorageError::RestoreWriteCache(Box::new(e))),
                }
            }
        }
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(StorageError::Several(errors)),
        }
    }

    /// Sets the drive's own write cache (never the kernel's `queue/write_cache` flag, which
    /// only changes what the kernel believes) and reads it back. The first change of a
    /// device saves its original state for teardown.
    fn set_write_cache(&self, device: &str, on: bool) -> Result<(), StorageError> {
        let devices = inventory::scan(&self.inventory_roots)?;
        let d = devices.iter().find(|d| d.path == device).ok_or_else(|| {
            StorageError::NotInInventory {
                device: device.to_string(),
            }
        })?;
        let name = &d.name;
        let current = self.read_write_cache(d)?;
        let saved = self.saved_cache(device);
        if !saved.exists() {
            std::fs::create_dir_all(saved.parent().unwrap_or(Path::new(".")))
                .map_err(StorageError::SaveWriteCache)?;
            std::fs::write(&saved, if current { "on\n" } else { "off\n" })
                .map_err(StorageError::SaveWriteCache)?;
        }
        match d.transport {
            Transport::Nvme => {
                run(
                    "nvme",
                    &[
                        "set-feature",
                        device,
                        "-f",
                        "6",
                        "-v",
                        if on { "1" } else { "0" },
                    ],
                )?;
            }
            Transport::Ata => {
                run("hdparm", &[if on { "-W1" } else { "-W0" }, device])?;
            }
            Transport::Scsi | Transport::Usb => {
                let file = scsi_cache_file(&self.inventory_roots.sys, name)?;
                let mode = if on {
                    "temporary write back"
                } else {
                    "temporary write through"
                };
                std::fs::write(&file, mode).map_err(|source| StorageError::Io {
                    what: "writing",
                    path: file.clone(),
                    source,
                })?;
            }
            ref other => {
                return Err(StorageError::CacheNotSettable {
                    device: device.to_string(),
                    transport: other.clone(),
                })
            }
        }
        if self.read_write_cache(d)? != on {
            return Err(StorageError::CacheUnchanged {
                device: device.to_string(),
                reported: if on { "off" } else { "on" },
            });
        }
        Ok(())
    }

    /// What storage `c` is after setup, as the system reports it (for provenance): the
    /// mounts `${mount}` rests on, the mkfs program's version and the write cache read back.
    pub(crate) fn facts(&self, c: &StorageConfig) -> crate::probes::provenance::StorageFacts {
        use crate::probes::provenance;
        let info = std::fs::read_to_string(&self.inventory_roots.mountinfo).unwrap_or_default();
        let mut mounts = Vec::new();
        for mp in [self.mount_point(c), self.base_point(c)] {
            if let Some(m) = provenance::mount_at(&info, &mp) {
                if !mounts.contains(&m) {
                    mounts.push(m);
                }
            }
        }
        let write_cache = match &c.device {
            None => "none (RAM disk)".to_string(),
            Some(device) => {
                let d = inventory::scan(&self.inventory_roots)
                    .ok()
                    .and_then(|all| all.into_iter().find(|d| d.path == *device));
                match d.map(|d| self.read_write_cache(&d)) {
                    Some(Ok(true)) => "on".into(),
                    Some(Ok(false)) => "off".into(),
                    Some(Err(e)) => format!("unknown: {e}"),
                    None => format!("unknown: {device} is not in the inventory"),
                }
            }
        };
        provenance::StorageFacts {
            mounts,
            mkfs_version: if c.device.is_some() {
                provenance::mkfs_version(c.fs)
            } else {
                String::new()
            },
            write_cache,
        }
    }

    fn read_write_cache(&self, d: &Device) -> Result<bool, StorageError> {
        match d.transport {
            Transport::Nvme => {
                let out = run("nvme", &["get-feature", &d.path, "-f", "6"])?;
                Ok(
                    out.trim_end().ends_with("00000001")
                        || out.contains("Current value:0x00000001"),
                )
            }
            Transport::Ata => Ok(run("hdparm", &["-W", &d.path])?.contains("(on)")),
            Transport::Scsi | Transport::Usb => {
                let file = scsi_cache_file(&self.inventory_roots.sys, &d.name)?;
                let v = std::fs::read_to_string(&file).map_err(|source| StorageError::Io {
                    what: "reading",
                    path: file.clone(),
                    source,
                })?;
                Ok(v.trim().starts_with("write back"))
            }
            ref other => Err(StorageError::CacheNotReadable {
                device: d.path.clone(),
                transport: other.clone(),
            }),
        }
    }
}

/// `umount`, retried for a while when the filesystem is busy: a FUSE daemon unmounted
/// just before (gocryptfs) may still hold files below it for a moment.
fn umount_patiently(mount_point: &Path) -> Result<(), StorageError> {
    const TRIES: u32 = 30;
    let target = mount_point.display().to_string();
    for attempt in 1..=TRIES {
        match run("umount", &[&target]) {
            Ok(_) => return Ok(()),
            Err(e) if e.to_string().contains("busy") && attempt < TRIES => {
                std::thread::sleep(std::time::Duration::from_millis(100))
            }
            Err(e) => return Err(e),
        }
    }
    unreachable!("the last attempt returns")
}

fn scsi_cache_file(sys: &Path, name: &str) -> Result<PathBuf, StorageError> {
    let dir = sys.join("block").join(name).join("device/scsi_disk");
    let entry = std::fs::read_dir(&dir)
        .map_err(|source| StorageError::ReadDir {
            path: dir.clone(),
            source,
        })?
        .flatten()
        .next()
        .ok_or(StorageError::NoScsiDisk { dir })?;
    Ok(entry.path().join("cache_type"))
}

fn create_dir_all(dir: &Path) -> Result<(), StorageError> {
    std::fs::create_dir_all(dir).map_err(|source| StorageError::Io {
        what: "creating",
        path: dir.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A fake host: four virtio disks, vdz holding /, vdy mounted, vdx under dm-0, vdw free.
    fn fake() -> (tempfile::TempDir, Storage) {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        for (i, name) in ["vdw", "vdx", "vdy", "vdz"].iter().enumerate() {
            let dir = root.join(format!("sys/devices/virtual/block/{name}"));
            std::fs::create_dir_all(dir.join("queue")).unwrap();
            std::fs::create_dir_all(dir.join("holders")).unwrap();
            std::fs::write(dir.join("dev"), format!("253:{i}\n")).unwrap();
            std::fs::write(dir.join("size"), "2097152\n").unwrap();
            std::fs::write(dir.join("queue/rotational"), "0\n").unwrap();
            std::fs::write(dir.join("queue/write_cache"), "write back\n").unwrap();
            std::fs::create_dir_all(root.join("sys/block")).unwrap();
            symlink(&dir, root.join(format!("sys/block/{name}"))).unwrap();
        }
        symlink(
            "../../dm-0",
            root.join("sys/devices/virtual/block/vdx/holders/dm-0"),
        )
        .unwrap();
        std::fs::create_dir_all(root.join("dev")).unwrap();
        for name in ["vdw", "vdx", "vdy", "vdz"] {
            std::fs::write(root.join("dev").join(name), "").unwrap();
        }
        std::fs::write(
            root.join("mountinfo"),
            "22 1 253:3 / / rw,relatime - ext4 /dev/vdz rw\n\
             40 22 253:2 / /mnt/data rw,relatime - xfs /dev/vdy rw\n",
        )
        .unwrap();
        let storage = Storage {
            mount_dir: root.join("mnt"),
            state_dir: root.join("state"),
            allowed: vec![format!("{}/dev/vd*", root.display())],
            allow_purge: false,
            inventory_roots: inventory::Roots {
                sys: root.join("sys"),
                dev: root.join("dev"),
                mountinfo: root.join("mountinfo"),
            },
        };
        (tmp, storage)
    }

    fn config(storage: &Storage, name: &str) -> StorageConfig {
        StorageConfig {
            device: Some(storage.inventory_roots.dev.join(name).display().to_string()),
            fs: Filesystem::Ext4,
            mkfs_options: vec![],
            mount_options: String::new(),
            write_cache: WriteCacheSetting::Keep,
            ramdisk_size: None,
            encryption: Encryption::None,
        }
    }

    /// Mount points are found with the kernel's escapes undone: a space, a tab, a
    /// backslash (before, only `\040` was).
    #[test]
    fn a_mount_point_with_escaped_characters_is_found() {
        let (_tmp, s) = fake();
        std::fs::write(
            &s.inventory_roots.mountinfo,
            "22 1 253:3 / / rw - ext4 /dev/vdz rw\n\
             41 22 253:4 / /mnt/a\\040b\\011c\\134d rw - ext4 /dev/vdw rw\n",
        )
        .unwrap();
        assert!(s.is_mounted(Path::new("/mnt/a b\tc\\d")).unwrap());
        assert!(!s.is_mounted(Path::new("/mnt/a b")).unwrap());
        assert!(s.is_mounted(Path::new("/")).unwrap());
    }

    #[test]
    fn every_reason_to_refuse_a_device_is_named() {
        let (_tmp, s) = fake();
        let why = |name: &str| s.refusal(&config(&s, name));
        assert!(
            why("vdz")
                .unwrap()
                .ends_with("vdz holds / (the root filesystem)"),
            "{:?}",
            why("vdz")
        );
        assert!(
            why("vdy").unwrap().ends_with("vdy is mounted at /mnt/data"),
            "{:?}",
            why("vdy")
        );
        assert!(
            why("vdx").unwrap().ends_with("vdx is in use by dm-0"),
            "{:?}",
            why("vdx")
        );
        assert_eq!(why("vdw"), None);
        assert!(why("vdv")
            .unwrap()
            .contains("is not a whole disk this host knows"));

        let strict = Storage {
            allowed: vec!["/dev/sdq".into()],
            ..s.clone()
        };
        let refusal = strict.refusal(&config(&s, "vdw")).unwrap();
        assert!(
            refusal.contains("vdw is not allowed") && refusal.contains("--allow-device"),
            "{refusal}"
        );
        // A RAM disk touches no device.
        assert_eq!(
            s.refusal(&StorageConfig {
                device: None,
                fs: Filesystem::Tmpfs,
                ..config(&s, "vdw")
            }),
            None
        );
    }

    /// A purge needs `--allow-purge` on top of the device rails; a precondition (which
    /// overwrites the drive too) the rails alone. When the plan arrives the agent's own
    /// mount of the device does not count (a plan before it may hold it until its
    /// teardown); right before the step runs, any mount refuses.
    #[test]
    fn purges_need_allow_purge_and_purges_and_preconditions_the_device_rails() {
        use crate::model::{Precondition, Purge, PurgeMethod};
        let (_tmp, s) = fake();
        let dev = |name: &str| s.inventory_roots.dev.join(name).display().to_string();
        let purge = |name: &str| {
            StepKind::Purge(Purge {
                device: dev(name),
                method: PurgeMethod::NvmeSanitize,
            })
        };
        let precondition = |name: &str| {
            StepKind::Precondition(Precondition {
                device: dev(name),
                passes: 2,
                block_size: 128 << 10,
            })
        };
        assert_eq!(
            s.step_refusal(&purge("vdw"), Judged::OnArrival).as_deref(),
            Some(
                format!(
                    "purge of {} (nvme-sanitize) is not allowed: start platter-agent with \
                     --allow-purge to let plans purge drives it may format",
                    dev("vdw")
                )
                .as_str()
            )
        );
        assert_eq!(s.step_refusal(&precondition("vdw"), Judged::AtRun), None);
        let allowed = Storage {
            allow_purge: true,
            ..s.clone()
        };
        assert_eq!(allowed.step_refusal(&purge("vdw"), Judged::AtRun), None);
        assert_eq!(
            allowed
                .step_refusal(&purge("vdy"), Judged::AtRun)
                .as_deref(),
            Some(format!("purge of {0}: {0} is mounted at /mnt/data", dev("vdy")).as_str())
        );
        assert!(allowed
            .step_refusal(&precondition("vdz"), Judged::OnArrival)
            .unwrap()
            .ends_with("vdz holds / (the root filesystem)"));
        let strict = Storage {
            allowed: vec!["/dev/sdq".into()],
            ..allowed.clone()
        };
        assert!(strict
            .step_refusal(&precondition("vdw"), Judged::OnArrival)
            .unwrap()
            .contains("vdw is not allowed"));
        // The agent's own mount of the device: not in use when the plan arrives, in use
        // when the purge would run.
        let ours = s.mount_dir.join("vdw");
        std::fs::write(
            &s.inventory_roots.mountinfo,
            format!(
                "22 1 253:3 / / rw - ext4 /dev/vdz rw\n\
                 41 22 253:0 / {} rw - ext4 /dev/vdw rw\n",
                ours.display()
            ),
        )
        .unwrap();
        assert_eq!(allowed.step_refusal(&purge("vdw"), Judged::OnArrival), None);
        assert_eq!(
            allowed.step_refusal(&purge("vdw"), Judged::AtRun),
            Some(format!(
                "purge of {0}: {0} is mounted at {1}",
                dev("vdw"),
                ours.display()
            ))
        );
        // Other steps are not this judgement's.
        assert_eq!(s.step_refusal(&StepKind::Sync, Judged::AtRun), None);
    }

    #[test]
    fn mount_points_are_per_device_and_the_write_cache_of_a_virtio_disk_is_not_settable() {
        let (_tmp, s) = fake();
        let c = config(&s, "vdw");
        assert_eq!(s.mount_point(&c), s.mount_dir.join("vdw"));
        assert_eq!(
            s.mount_point(&StorageConfig {
                device: None,
                ..c.clone()
            }),
            s.mount_dir.join("ramdisk")
        );
        let err = s
            .set_write_cache(c.device.as_deref().unwrap(), false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cannot be read") || err.contains("cannot be set"),
            "{err}"
        );
        // Nothing was saved for teardown to "restore".
        assert!(!s.saved_cache(c.device.as_deref().unwrap()).exists());
    }
}
