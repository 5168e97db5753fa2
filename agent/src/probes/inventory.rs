//! Device inventory: which block devices this host has, what they are, how they are
//! attached and whether they are in use. Reads sysfs, `/dev` and mountinfo only; it
//! never opens a device node and never changes anything.
//!
//! Policy (ARCHITECTURE.md's invariant "Do no harm"):
//! * `ram*`, `zram*`, unused `loop*` (no backing file), `dm-*` and `md*` are not
//!   reported: none of them is a drive, and what is not listed cannot be picked as a
//!   raw test target. Their use still counts: a mounted dm/md device makes every disk
//!   and partition below it `mounted` (and `holds_root`), followed through `holders`
//!   to any depth, and the chain is listed in [`Device::holders`].
//! * A loop device whose backing *file* lives on a disk is not a holder of that disk
//!   (the kernel does not link it); the disk is in use only through the filesystem
//!   that holds the file, and that filesystem's mount is already counted.
//! * Mounts match by major:minor and also by mount source (`/dev/sdb1`), because
//!   btrfs reports an anonymous `0:N` device number in mountinfo.
//! * If mountinfo cannot be read the scan fails: "not mounted" must never be a guess.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::probes::mountinfo::{self, Mount};

/// Sysfs `size` files count 512-byte sectors whatever the device's block size.
const SECTOR_BYTES: u64 = 512;

#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}: unexpected content {content:?}: {reason}")]
    Malformed {
        path: PathBuf,
        content: String,
        reason: &'static str,
    },
}

pub(crate) use platter_proto::inventory::{
    Device, Partition, Transport, WriteCache, CACHE_SOURCE_QUEUE, CACHE_SOURCE_SCSI,
};

/// Where the system's views live; tests point these into a fake tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Roots {
    pub sys: PathBuf,
    pub dev: PathBuf,
    pub mountinfo: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            sys: PathBuf::from("/sys"),
            dev: PathBuf::from("/dev"),
            mountinfo: PathBuf::from("/proc/self/mountinfo"),
        }
    }
}

/// `/dev/loop3` → `loop3`, the name /proc/diskstats and /sys/block use (symlinks such as
/// by-id resolved).
pub(crate) fn disk_name(device: &str) -> String {
    let real = fs::canonicalize(device).unwrap_or_else(|_| device.into());
    real.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Lists the host's block devices, sorted by name. See the module docs for which
/// devices are left out.
pub(crate) fn scan(roots: &Roots) -> Result<Vec<Device>, InventoryError> {
    let mountinfo = read_string(&roots.mountinfo)?;
    // Incomplete lines count too: a device is matched by major:minor alone if need be.
    let mounts = mountinfo::parse(&mountinfo);

    let block = roots.sys.join("block");
    let mut names = Vec::new();
    for entry in fs::read_dir(&block).map_err(|e| io_err(&block, e))? {
        let entry = entry.map_err(|e| io_err(&block, e))?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();

    let mut devices = Vec::new();
    for name in names {
        // No node in /dev: not usable here (a container sees the whole machine's /sys
        // but only the devices passed to it).
        if is_never_a_drive(&name) || !roots.dev.join(&name).exists() {
            continue;
        }
        let dir = block.join(&name);
        let backing_file = if name.starts_with("loop") {
            match read_trimmed(&dir.join("loop/backing_file")) {
                Some(f) if !f.is_empty() => Some(f),
                // No `loop/` directory: the loop device is unused, nothing to test on.
                _ => continue,
            }
        } else {
            None
        };
        devices.push(scan_device(roots, &mounts, &name, &dir, backing_file)?);
    }
    Ok(devices)
}

fn is_never_a_drive(name: &str) -> bool {
    ["ram", "zram", "dm-", "md"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

fn scan_device(
    roots: &Roots,
    mounts: &[Mount],
    name: &str,
    dir: &Path,
    backing_file: Option<String>,
) -> Result<Device, InventoryError> {
    let major_minor = read_major_minor(&dir.join("dev"))?;
    let size_bytes = read_sectors(&dir.join("size"))?;
    let rotational = read_trimmed(&dir.join("queue/rotational")).as_deref() == Some("1");

    let dev_dir = dir.join("device");
    let attr = |file: &str| read_trimmed(&dev_dir.join(file)).unwrap_or_default();
    let vendor = attr("vendor");
    // Behind some USB bridges only udev knows the model (from the USB descriptor or its
    // own probe); what the kernel says comes first.
    let model = Some(attr("model"))
        .filter(|m| !m.is_empty())
        .or_else(|| udev_model(roots, &major_minor))
        .unwrap_or_default();
    // NVMe controllers call it firmware_rev, SCSI/ATA devices rev.
    let firmware = read_trimmed(&dev_dir.join("firmware_rev"))
        .unwrap_or_else(|| attr("rev"))
        .to_string();
    let firmware = if firmware.is_empty() {
        udev_property(roots, &major_minor, "ID_REVISION").unwrap_or_default()
    } else {
        firmware
    };
    let serial = read_serial(roots, dir, &major_minor);
    let wwn = read_wwn(dir);

    let (transport, controller, pci_address) = if name.starts_with("loop") {
        (Transport::Loop, Vec::new(), None)
    } else {
        walk_parents(&roots.sys, dir)
    };

    let (write_cache, write_cache_source) = read_write_cache(dir);

    let mut partitions = Vec::new();
    let mut all_holders = Vec::new();
    let mut whole_disk_names: BTreeSet<(String, String)> = BTreeSet::new();
    whole_disk_names.insert((name.to_string(), major_minor.clone()));
    collect_holders(&roots.sys, dir, &mut all_holders);
    for (pname, pdir) in list_partitions(dir)? {
        let pmm = read_major_minor(&pdir.join("dev"))?;
        let psize = read_sectors(&pdir.join("size"))?;
        let mut pholders = Vec::new();
        collect_holders(&roots.sys, &pdir, &mut pholders);
        let mut pset = BTreeSet::new();
        pset.insert((pname.clone(), pmm.clone()));
        for h in &pholders {
            pset.insert(holder_key(&roots.sys, h));
        }
        let pmounted = mount_points(roots, mounts, &pset);
        whole_disk_names.extend(pset);
        for h in pholders {
            if !all_holders.contains(&h) {
                all_holders.push(h);
            }
        }
        partitions.push(Partition {
            name: pname,
            major_minor: pmm,
            size_bytes: psize,
            mounted: pmounted,
        });
    }
    for h in &all_holders {
        whole_disk_names.insert(holder_key(&roots.sys, h));
    }
    let mounted = mount_points(roots, mounts, &whole_disk_names);
    let holds_root = mounts
        .iter()
        .any(|m| m.mount_point == "/" && mount_matches(roots, m, &whole_disk_names));

    Ok(Device {
        name: name.to_string(),
        path: roots.dev.join(name).to_string_lossy().into_owned(),
        major_minor,
        vendor,
        model,
        serial,
        firmware,
        size_bytes,
        rotational,
        transport,
        controller,
        pci_address,
        by_id: links_to(&roots.dev.join("disk/by-id"), name),
        by_path: links_to(&roots.dev.join("disk/by-path"), name),
        write_cache,
        write_cache_source,
        partitions,
        mounted,
        holders: all_holders,
        holds_root,
        backing_file,
        wwn,
    })
}

/// The drive's world wide name: `wwid` of an NVMe namespace or of a SCSI/ATA device, kept
/// only when it is a real name (`naa.…`, `eui.…`); the kernel's made-up `t10.ATA …` and
/// `nvme.…` strings are only the model and serial again, and a name of zeros is none.
fn read_wwn(dir: &Path) -> String {
    [dir.join("wwid"), dir.join("device/wwid")]
        .iter()
        .filter_map(|p| read_trimmed(p))
        .find(|w| w.starts_with("naa.") || w.starts_with("eui."))
        // Some bridges report a name of zeros: no name at all.
        .filter(|w| w[4..].chars().any(|c| c != '0'))
        .map(|w| w.to_ascii_lowercase())
        .unwrap_or_default()
}

/// (name, major:minor) of a holder; major:minor is "" if its `dev` is unreadable,
/// so it can still match by mount source.
fn holder_key(sys: &Path, holder: &str) -> (String, String) {
    let mm = read_trimmed(&sys.join("block").join(holder).join("dev")).unwrap_or_default();
    (holder.to_string(), mm)
}

/// Appends the names in `dir/holders`, then theirs, depth first. Stacks are a DAG in
/// practice; `out` doubles as the visited set so a malformed tree cannot loop.
fn collect_holders(sys: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir.join("holders")) else {
        return;
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for h in names {
        if out.contains(&h) {
            continue;
        }
        out.push(h.clone());
        collect_holders(sys, &sys.join("block").join(&h), out);
    }
}

/// Partition subdirectories of a disk directory, ordered by partition number
/// (so sda2 comes before sda10).
fn list_partitions(dir: &Path) -> Result<Vec<(String, PathBuf)>, InventoryError> {
    let mut parts = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| io_err(dir, e))? {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        let path = entry.path();
        let Some(number) = read_trimmed(&path.join("partition")) else {
            continue;
        };
        let number: u32 = number.parse().unwrap_or(u32::MAX);
        parts.push((
            number,
            entry.file_name().to_string_lossy().into_owned(),
            path,
        ));
    }
    parts.sort();
    Ok(parts.into_iter().map(|(_, n, p)| (n, p)).collect())
}

fn mount_points(roots: &Roots, mounts: &[Mount], set: &BTreeSet<(String, String)>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in mounts {
        if mount_matches(roots, m, set) && !out.contains(&m.mount_point) {
            out.push(m.mount_point.clone());
        }
    }
    out
}

fn mount_matches(roots: &Roots, m: &Mount, set: &BTreeSet<(String, String)>) -> bool {
    let source = source_name(&roots.dev, &m.source);
    set.iter().any(|(name, mm)| {
        (!mm.is_empty() && *mm == m.major_minor) || source.as_deref() == Some(name)
    })
}

/// Kernel name behind a mount source such as "/dev/sda1" or "/dev/mapper/home"
/// (a symlink to "../dm-0"), looked up under `dev` so fake trees work.
fn source_name(dev: &Path, source: &str) -> Option<String> {
    let rest = source.strip_prefix("/dev/")?;
    let path = dev.join(rest);
    let resolved = fs::read_link(&path).unwrap_or(path);
    resolved
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
}

/// Walks from the disk's sysfs directory up through `/sys/devices`, reading each
/// level's driver, to find transport, driver chain and the nearest PCI device.
fn walk_parents(sys: &Path, disk_dir: &Path) -> (Transport, Vec<String>, Option<String>) {
    let Ok(devices_root) = fs::canonicalize(sys.join("devices")) else {
        return (Transport::Other("unknown".into()), Vec::new(), None);
    };
    let start = fs::canonicalize(disk_dir).ok();
    let mut walk = start.as_deref().map(|s| walk_from(&devices_root, s));
    // NVMe multipath disks live under /sys/devices/virtual; their `device` link
    // leads back to a real controller, so try that when the first walk found no PCI.
    if walk.as_ref().is_none_or(|w| w.pci.is_none()) {
        if let Ok(dev) = fs::canonicalize(disk_dir.join("device")) {
            let second = walk_from(&devices_root, &dev);
            if second.pci.is_some() {
                walk = Some(second);
            }
        }
    }
    let Some(w) = walk else {
        return (Transport::Other("unknown".into()), Vec::new(), None);
    };
    let has = |d: &str| w.drivers.iter().any(|x| x == d);
    let transport = if w.usb || has("usb-storage") || has("uas") {
        Transport::Usb
    } else if w.ata
        || has("ahci")
        || has("ata_piix")
        || w.drivers
            .iter()
            .any(|d| d.starts_with("sata_") || d.starts_with("pata_"))
    {
        Transport::Ata
    } else if w.nvme || has("nvme") {
        Transport::Nvme
    } else if has("virtio_blk") {
        Transport::Virtio
    } else if has("sd") {
        // SAS/FC HBAs, virtio-scsi, iSCSI: SCSI disks not on ATA or USB.
        Transport::Scsi
    } else if w.virtio {
        Transport::Virtio
    } else {
        Transport::Other(
            w.drivers
                .first()
                .cloned()
                .unwrap_or_else(|| "unknown".into()),
        )
    };
    (transport, w.drivers, w.pci)
}

#[derive(Debug, Default)]
struct Walk {
    drivers: Vec<String>,
    pci: Option<String>,
    usb: bool,
    ata: bool,
    nvme: bool,
    virtio: bool,
}

/// Drivers bound to every USB device and hub; they say nothing about the disk's path.
const GENERIC_DRIVERS: [&str; 2] = ["usb", "hub"];

fn walk_from(devices_root: &Path, start: &Path) -> Walk {
    let mut w = Walk::default();
    let mut cur = Some(start);
    while let Some(p) = cur {
        if p == devices_root || !p.starts_with(devices_root) {
            break;
        }
        let comp = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        w.usb |= numbered(&comp, "usb");
        w.ata |= numbered(&comp, "ata");
        w.nvme |= comp == "nvme" || numbered(&comp, "nvme");
        w.virtio |= numbered(&comp, "virtio");
        if let Ok(target) = fs::read_link(p.join("driver")) {
            if let Some(d) = target.file_name().map(|n| n.to_string_lossy().into_owned()) {
                if !GENERIC_DRIVERS.contains(&d.as_str()) && !w.drivers.contains(&d) {
                    w.drivers.push(d);
                }
            }
        }
        if is_pci_address(&comp) {
            w.pci = Some(comp);
            break;
        }
        cur = p.parent();
    }
    w
}

/// "usb2", "ata1": the prefix followed by digits only.
fn numbered(comp: &str, prefix: &str) -> bool {
    comp.strip_prefix(prefix)
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
}

/// "0000:00:1f.2": domain:bus:device.function in hex.
fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    let hex = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_hexdigit);
    b.len() == 12
        && hex(0..4)
        && b[4] == b':'
        && hex(5..7)
        && b[7] == b':'
        && hex(8..10)
        && b[10] == b'.'
        && hex(11..12)
}

fn read_serial(roots: &Roots, dir: &Path, major_minor: &str) -> String {
    // NVMe controller attribute.
    if let Some(s) = read_trimmed(&dir.join("device/serial")).filter(|s| !s.is_empty()) {
        return s;
    }
    // virtio_blk exposes the serial on the disk itself.
    if let Some(s) = read_trimmed(&dir.join("serial")).filter(|s| !s.is_empty()) {
        return s;
    }
    // SCSI/ATA: VPD page 0x80 is a 4-byte header (peripheral, page code, length)
    // followed by the serial number.
    if let Ok(bytes) = fs::read(dir.join("device/vpd_pg80")) {
        if bytes.len() > 4 {
            let len = usize::from(u16::from_be_bytes([bytes[2], bytes[3]]));
            let end = bytes.len().min(4 + len);
            let s = String::from_utf8_lossy(&bytes[4..end]);
            let s = s.trim_matches(|c: char| c.is_whitespace() || c == '\0');
            if !s.is_empty() {
                return s.to_string();
            }
        }
    }
    // Some USB bridges answer no VPD; udev may have got the serial from the USB
    // descriptor.
    udev_property(roots, major_minor, "ID_SERIAL_SHORT").unwrap_or_default()
}

/// A property udev recorded for the block device `major_minor` (`E:KEY=value` in its
/// database, which sits at /run/udev beside /dev), if any.
fn udev_property(roots: &Roots, major_minor: &str, key: &str) -> Option<String> {
    let udev = roots
        .dev
        .join("../run/udev/data")
        .join(format!("b{major_minor}"));
    let text = fs::read_to_string(udev).ok()?;
    let prefix = format!("E:{key}=");
    text.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The model udev knows: `ID_MODEL_ENC` with its `\xNN` escapes undone, else `ID_MODEL`
/// (udev's, with `_` for each space).
fn udev_model(roots: &Roots, major_minor: &str) -> Option<String> {
    if let Some(enc) = udev_property(roots, major_minor, "ID_MODEL_ENC") {
        let mut out = Vec::new();
        let b = enc.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let hex = b
                .get(i + 2..i + 4)
                .and_then(|h| std::str::from_utf8(h).ok());
            match (
                b[i],
                b.get(i + 1),
                hex.and_then(|h| u8::from_str_radix(h, 16).ok()),
            ) {
                (b'\\', Some(b'x'), Some(byte)) => {
                    out.push(byte);
                    i += 4;
                }
                (c, _, _) => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        let model = String::from_utf8_lossy(&out).trim().to_string();
        if !model.is_empty() {
            return Some(model);
        }
    }
    udev_property(roots, major_minor, "ID_MODEL").map(|m| m.replace('_', " "))
}

fn read_write_cache(dir: &Path) -> (WriteCache, String) {
    if let Ok(entries) = fs::read_dir(dir.join("device/scsi_disk")) {
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for p in paths {
            if let Some(v) = read_trimmed(&p.join("cache_type")) {
                return (parse_cache_type(&v), CACHE_SOURCE_SCSI.to_string());
            }
        }
    }
    match read_trimmed(&dir.join("queue/write_cache")) {
        Some(v) => (parse_cache_type(&v), CACHE_SOURCE_QUEUE.to_string()),
        None => (WriteCache::Unknown, String::new()),
    }
}

/// sd's cache_type strings, from the WCE and RCD bits: "write through" (WCE=0),
/// "none" (WCE=0, RCD=1), "write back" (WCE=1), "write back, no read (daddy)"
/// (WCE=1, RCD=1). The queue flag uses the first and third.
fn parse_cache_type(v: &str) -> WriteCache {
    if v.starts_with("write back") {
        WriteCache::WriteBack
    } else if v == "write through" || v == "none" {
        WriteCache::WriteThrough
    } else {
        WriteCache::Unknown
    }
}

/// Names of the symlinks in `dir` whose target's basename is `name`, sorted.
fn links_to(dir: &Path, name: &str) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter(|e| {
            fs::read_link(e.path())
                .ok()
                .and_then(|t| t.file_name().map(|n| n == name))
                .unwrap_or(false)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

fn io_err(path: &Path, source: io::Error) -> InventoryError {
    InventoryError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn read_string(path: &Path) -> Result<String, InventoryError> {
    fs::read_to_string(path).map_err(|e| io_err(path, e))
}

/// Optional attributes: absent or unreadable means "the kernel does not say".
fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn read_major_minor(path: &Path) -> Result<String, InventoryError> {
    let raw = read_string(path)?;
    let v = raw.trim();
    let ok = v
        .split_once(':')
        .is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok());
    if !ok {
        return Err(InventoryError::Malformed {
            path: path.to_path_buf(),
            content: raw,
            reason: "expected major:minor",
        });
    }
    Ok(v.to_string())
}

fn read_sectors(path: &Path) -> Result<u64, InventoryError> {
    let raw = read_string(path)?;
    raw.trim()
        .parse::<u64>()
        .ok()
        .and_then(|s| s.checked_mul(SECTOR_BYTES))
        .ok_or_else(|| InventoryError::Malformed {
            path: path.to_path_buf(),
            content: raw.clone(),
            reason: "expected a sector count",
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A fake host: `root/sys`, `root/dev`, `root/run`, `root/mountinfo`.
    struct Fake {
        _tmp: tempfile::TempDir,
        root: PathBuf,
    }

    impl Fake {
        fn new() -> Fake {
            let tmp = tempfile::tempdir().unwrap();
            // Canonical, so relative links computed below match what canonicalize sees.
            let root = fs::canonicalize(tmp.path()).unwrap();
            Fake { _tmp: tmp, root }
        }

        fn roots(&self) -> Roots {
            Roots {
                sys: self.root.join("sys"),
                dev: self.root.join("dev"),
                mountinfo: self.root.join("mountinfo"),
            }
        }

        fn p(&self, rel: &str) -> PathBuf {
            self.root.join(rel)
        }

        fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
            let path = self.p(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, content).unwrap();
        }

        fn mkdir(&self, rel: &str) {
            fs::create_dir_all(self.p(rel)).unwrap();
        }

        /// A relative symlink at `link` pointing at `target`, as sysfs and udev make them.
        fn link(&self, target: &str, link: &str) {
            let (t, l) = (Path::new(target), Path::new(link));
            let lparent = l.parent().unwrap();
            let common = t
                .components()
                .zip(lparent.components())
                .take_while(|(a, b)| a == b)
                .count();
            let mut rel = PathBuf::new();
            for _ in lparent.components().skip(common) {
                rel.push("..");
            }
            for c in t.components().skip(common) {
                rel.push(c);
            }
            fs::create_dir_all(self.p(link).parent().unwrap()).unwrap();
            symlink(rel, self.p(link)).unwrap();
        }

        /// A disk directory under `devpath` (relative to sys/devices) with the common
        /// attributes, plus its /sys/block link.
        fn disk(
            &self,
            devpath: &str,
            name: &str,
            mm: &str,
            sectors: u64,
            rot: &str,
            wc: &str,
        ) -> String {
            let dir = format!("sys/devices/{devpath}");
            self.write(&format!("{dir}/dev"), format!("{mm}\n"));
            self.write(&format!("{dir}/size"), format!("{sectors}\n"));
            self.write(&format!("{dir}/queue/rotational"), format!("{rot}\n"));
            self.write(&format!("{dir}/queue/write_cache"), format!("{wc}\n"));
            self.mkdir(&format!("{dir}/holders"));
            self.link(&dir, &format!("sys/block/{name}"));
            self.write(&format!("dev/{name}"), "");
            dir
        }

        fn partition(
            &self,
            disk_dir: &str,
            name: &str,
            mm: &str,
            number: u32,
            sectors: u64,
        ) -> String {
            let dir = format!("{disk_dir}/{name}");
            self.write(&format!("{dir}/dev"), format!("{mm}\n"));
            self.write(&format!("{dir}/size"), format!("{sectors}\n"));
            self.write(&format!("{dir}/partition"), format!("{number}\n"));
            self.mkdir(&format!("{dir}/holders"));
            dir
        }

        fn driver(&self, dev_dir: &str, bus: &str, driver: &str) {
            let target = format!("sys/bus/{bus}/drivers/{driver}");
            self.mkdir(&target);
            self.link(&target, &format!("{dev_dir}/driver"));
        }
    }

    /// SATA SSD on AHCI with two partitions, one under dm-crypt; USB-SATA Intel 530
    /// on uas; NVMe behind a PCIe bridge; virtio disk; used and unused loops; ram,
    /// zram and the dm device itself.
    fn build() -> Fake {
        let f = Fake::new();
        let r = "pci0000:00";

        // --- sda: SATA SSD on AHCI.
        let ahci = format!("{r}/0000:00:1f.2");
        f.driver(&format!("sys/devices/{ahci}"), "pci", "ahci");
        let scsi = format!("sys/devices/{ahci}/ata1/host0/target0:0:0/0:0:0:0");
        f.driver(&scsi, "scsi", "sd");
        f.write(&format!("{scsi}/vendor"), "ATA     \n");
        f.write(&format!("{scsi}/model"), "Samsung SSD 860 \n");
        f.write(&format!("{scsi}/rev"), "4B6Q\n");
        let mut pg80 = vec![0x00, 0x80, 0x00, 20];
        pg80.extend_from_slice(b"     S3Z9NB0K123456A");
        f.write(&format!("{scsi}/vpd_pg80"), pg80);
        f.write(
            &format!("{scsi}/scsi_disk/0:0:0:0/cache_type"),
            "write back\n",
        );
        // The kernel's flag disagrees with the drive: the drive's word wins.
        let sda = f.disk(
            &format!("{ahci}/ata1/host0/target0:0:0/0:0:0:0/block/sda"),
            "sda",
            "8:0",
            1_000_215_216,
            "0",
            "write through",
        );
        f.link(&scsi, &format!("{sda}/device"));
        f.partition(&sda, "sda1", "8:1", 1, 1_048_576);
        let sda2 = f.partition(&sda, "sda2", "8:2", 2, 999_164_592);
        // sda10 exists to check numeric ordering.
        f.partition(&sda, "sda10", "8:10", 10, 2048);
        let dm0 = f.disk(
            "virtual/block/dm-0",
            "dm-0",
            "253:0",
            999_160_496,
            "0",
            "write through",
        );
        f.link(&dm0, &format!("{sda2}/holders/dm-0"));
        f.link(&sda2, &format!("{dm0}/slaves/sda2"));
        f.link("sys/devices/virtual/block/dm-0", "dev/mapper/home");

        // --- sdb: Intel 530 behind a USB-to-SATA bridge on uas.
        let xhci = format!("{r}/0000:00:14.0");
        f.driver(&format!("sys/devices/{xhci}"), "pci", "xhci_hcd");
        f.driver(&format!("sys/devices/{xhci}/usb2"), "usb", "usb");
        f.driver(&format!("sys/devices/{xhci}/usb2/2-1"), "usb", "usb");
        f.driver(
            &format!("sys/devices/{xhci}/usb2/2-1/2-1:1.0"),
            "usb",
            "uas",
        );
        let scsi_b = format!("sys/devices/{xhci}/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0");
        f.driver(&scsi_b, "scsi", "sd");
        f.write(&format!("{scsi_b}/vendor"), "INTEL   \n");
        f.write(&format!("{scsi_b}/model"), "SSDSC2BW120A4   \n");
        f.write(&format!("{scsi_b}/rev"), "DC32\n");
        f.write(&format!("{scsi_b}/scsi_disk/6:0:0:0/cache_type"), "none\n");
        let sdb = f.disk(
            &format!("{xhci}/usb2/2-1/2-1:1.0/host6/target6:0:0/6:0:0:0/block/sdb"),
            "sdb",
            "8:16",
            234_441_648,
            "0",
            "write through",
        );
        f.link(&scsi_b, &format!("{sdb}/device"));
        f.partition(&sdb, "sdb1", "8:17", 1, 234_438_656);
        // No VPD page 80 from this bridge: the serial comes from udev.
        f.write(
            "run/udev/data/b8:16",
            "S:disk/by-id/usb-INTEL_SSDSC2BW120A4\nE:ID_SERIAL=INTEL_SSDSC2BW120A4_CVDA1234\nE:ID_SERIAL_SHORT=CVDA123400AB120AGN\n",
        );

        // --- nvme0n1 behind a PCIe root port (pcieport), so the nearest PCI is the SSD.
        let port = format!("{r}/0000:00:1d.0");
        f.driver(&format!("sys/devices/{port}"), "pci", "pcieport");
        let ctrl_pci = format!("{port}/0000:01:00.0");
        f.driver(&format!("sys/devices/{ctrl_pci}"), "pci", "nvme");
        let ctrl = format!("sys/devices/{ctrl_pci}/nvme/nvme0");
        f.write(
            &format!("{ctrl}/model"),
            "Samsung SSD 970 EVO Plus 500GB          \n",
        );
        f.write(&format!("{ctrl}/serial"), "S4EVNX0N123456      \n");
        f.write(&format!("{ctrl}/firmware_rev"), "2B2QEXM7\n");
        let nvme = f.disk(
            &format!("{ctrl_pci}/nvme/nvme0/nvme0n1"),
            "nvme0n1",
            "259:0",
            976_773_168,
            "0",
            "write back",
        );
        f.link(&ctrl, &format!("{nvme}/device"));

        // --- vda: virtio disk.
        let vpci = format!("{r}/0000:00:02.0");
        f.driver(&format!("sys/devices/{vpci}"), "pci", "virtio-pci");
        let virtio = format!("sys/devices/{vpci}/virtio1");
        f.driver(&virtio, "virtio", "virtio_blk");
        f.write(&format!("{virtio}/vendor"), "0x1af4\n");
        let vda = f.disk(
            &format!("{vpci}/virtio1/block/vda"),
            "vda",
            "254:0",
            536_870_912,
            "1",
            "write back",
        );
        f.link(&virtio, &format!("{vda}/device"));
        f.write(&format!("{vda}/serial"), "platter-vd0\n");

        // --- loops: loop3 attached, loop0 unused.
        let loop3 = f.disk(
            "virtual/block/loop3",
            "loop3",
            "7:3",
            2_097_152,
            "1",
            "write back",
        );
        f.write(
            &format!("{loop3}/loop/backing_file"),
            "/var/tmp/drive a.img\n",
        );
        f.disk("virtual/block/loop0", "loop0", "7:0", 0, "1", "write back");
        f.disk(
            "virtual/block/ram0",
            "ram0",
            "1:0",
            131_072,
            "0",
            "write through",
        );
        f.disk(
            "virtual/block/zram0",
            "zram0",
            "252:0",
            0,
            "0",
            "write through",
        );

        // --- /dev/disk links; partition links must not count for the disk.
        for (target, link) in [
            (
                "dev/sda",
                "dev/disk/by-id/ata-Samsung_SSD_860_S3Z9NB0K123456A",
            ),
            ("dev/sda", "dev/disk/by-id/wwn-0x5002538e40a1b2c3"),
            (
                "dev/sda1",
                "dev/disk/by-id/ata-Samsung_SSD_860_S3Z9NB0K123456A-part1",
            ),
            ("dev/sda", "dev/disk/by-path/pci-0000:00:1f.2-ata-1"),
            ("dev/sda1", "dev/disk/by-path/pci-0000:00:1f.2-ata-1-part1"),
            (
                "dev/sdb",
                "dev/disk/by-id/usb-INTEL_SSDSC2BW120A4_CVDA1234-0:0",
            ),
            (
                "dev/sdb",
                "dev/disk/by-path/pci-0000:00:14.0-usb-0:1:1.0-scsi-0:0:0:0",
            ),
            (
                "dev/nvme0n1",
                "dev/disk/by-id/nvme-Samsung_SSD_970_EVO_Plus_500GB_S4EVNX0N123456",
            ),
            ("dev/nvme0n1", "dev/disk/by-id/nvme-eui.0025385b71b2c3d4"),
            ("dev/vda", "dev/disk/by-path/virtio-pci-0000:00:02.0"),
        ] {
            f.link(target, link);
        }

        // Bind mount of / (same 8:1, listed once), dm-crypt /home, btrfs on sdb1 with
        // an anonymous device number and an escaped space, the loop, and noise.
        f.write(
            "mountinfo",
            "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:21 / /proc rw,nosuid shared:12 - proc proc rw
24 22 253:0 / /home rw,relatime shared:2 - ext4 /dev/mapper/home rw
25 22 0:45 / /mnt/usb\\040disk rw,relatime shared:3 - btrfs /dev/sdb1 rw,ssd
26 22 7:3 / /mnt/loop rw,relatime - ext4 /dev/loop3 rw
27 22 8:1 /var/lib/docker /var/lib/docker rw,relatime - ext4 /dev/sda1 rw
28 22 8:1 / / rw,relatime - ext4 /dev/sda1 rw
29 22 0:26 / /dev/shm rw - tmpfs tmpfs rw
",
        );
        f
    }

    fn s(v: &str) -> String {
        v.to_string()
    }

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|i| i.to_string()).collect()
    }

    #[test]
    fn fake_host_every_field() {
        let f = build();
        let devices = scan(&f.roots()).unwrap();
        let dev = |n: &str| f.p("dev").join(n).to_string_lossy().into_owned();
        let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["loop3", "nvme0n1", "sda", "sdb", "vda"]);
        // A device with no node in /dev (another container's drive) is not listed.
        fs::remove_file(f.p("dev/vda")).unwrap();
        let names: Vec<String> = scan(&f.roots())
            .unwrap()
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(names, ["loop3", "nvme0n1", "sda", "sdb"]);

        let sda = Device {
            name: s("sda"),
            path: dev("sda"),
            major_minor: s("8:0"),
            vendor: s("ATA"),
            model: s("Samsung SSD 860"),
            serial: s("S3Z9NB0K123456A"),
            firmware: s("4B6Q"),
            size_bytes: 1_000_215_216 * 512,
            rotational: false,
            transport: Transport::Ata,
            controller: v(&["sd", "ahci"]),
            pci_address: Some(s("0000:00:1f.2")),
            by_id: v(&[
                "ata-Samsung_SSD_860_S3Z9NB0K123456A",
                "wwn-0x5002538e40a1b2c3",
            ]),
            by_path: v(&["pci-0000:00:1f.2-ata-1"]),
            write_cache: WriteCache::WriteBack,
            write_cache_source: s(CACHE_SOURCE_SCSI),
            partitions: vec![
                Partition {
                    name: s("sda1"),
                    major_minor: s("8:1"),
                    size_bytes: 1_048_576 * 512,
                    mounted: v(&["/", "/var/lib/docker"]),
                },
                Partition {
                    name: s("sda2"),
                    major_minor: s("8:2"),
                    size_bytes: 999_164_592 * 512,
                    mounted: v(&["/home"]),
                },
                Partition {
                    name: s("sda10"),
                    major_minor: s("8:10"),
                    size_bytes: 2048 * 512,
                    mounted: vec![],
                },
            ],
            mounted: v(&["/", "/home", "/var/lib/docker"]),
            holders: v(&["dm-0"]),
            holds_root: true,
            backing_file: None,
            wwn: String::new(),
        };
        assert_eq!(devices[2], sda);

        let sdb = Device {
            name: s("sdb"),
            path: dev("sdb"),
            major_minor: s("8:16"),
            vendor: s("INTEL"),
            model: s("SSDSC2BW120A4"),
            serial: s("CVDA123400AB120AGN"),
            firmware: s("DC32"),
            size_bytes: 234_441_648 * 512,
            rotational: false,
            transport: Transport::Usb,
            controller: v(&["sd", "uas", "xhci_hcd"]),
            pci_address: Some(s("0000:00:14.0")),
            by_id: v(&["usb-INTEL_SSDSC2BW120A4_CVDA1234-0:0"]),
            by_path: v(&["pci-0000:00:14.0-usb-0:1:1.0-scsi-0:0:0:0"]),
            write_cache: WriteCache::WriteThrough,
            write_cache_source: s(CACHE_SOURCE_SCSI),
            partitions: vec![Partition {
                name: s("sdb1"),
                major_minor: s("8:17"),
                size_bytes: 234_438_656 * 512,
                mounted: v(&["/mnt/usb disk"]),
            }],
            mounted: v(&["/mnt/usb disk"]),
            holders: vec![],
            holds_root: false,
            backing_file: None,
            wwn: String::new(),
        };
        assert_eq!(devices[3], sdb);

        let nvme = Device {
            name: s("nvme0n1"),
            path: dev("nvme0n1"),
            major_minor: s("259:0"),
            vendor: s(""),
            model: s("Samsung SSD 970 EVO Plus 500GB"),
            serial: s("S4EVNX0N123456"),
            firmware: s("2B2QEXM7"),
            size_bytes: 976_773_168 * 512,
            rotational: false,
            transport: Transport::Nvme,
            controller: v(&["nvme"]),
            pci_address: Some(s("0000:01:00.0")),
            by_id: v(&[
                "nvme-Samsung_SSD_970_EVO_Plus_500GB_S4EVNX0N123456",
                "nvme-eui.0025385b71b2c3d4",
            ]),
            by_path: vec![],
            write_cache: WriteCache::WriteBack,
            write_cache_source: s(CACHE_SOURCE_QUEUE),
            partitions: vec![],
            mounted: vec![],
            holders: vec![],
            holds_root: false,
            backing_file: None,
            wwn: String::new(),
        };
        assert_eq!(devices[1], nvme);

        let vda = Device {
            name: s("vda"),
            path: dev("vda"),
            major_minor: s("254:0"),
            // virtio reports the PCI vendor id, not a name; passed through as is.
            vendor: s("0x1af4"),
            model: s(""),
            serial: s("platter-vd0"),
            firmware: s(""),
            size_bytes: 536_870_912 * 512,
            rotational: true,
            transport: Transport::Virtio,
            controller: v(&["virtio_blk", "virtio-pci"]),
            pci_address: Some(s("0000:00:02.0")),
            by_id: vec![],
            by_path: v(&["virtio-pci-0000:00:02.0"]),
            write_cache: WriteCache::WriteBack,
            write_cache_source: s(CACHE_SOURCE_QUEUE),
            partitions: vec![],
            mounted: vec![],
            holders: vec![],
            holds_root: false,
            backing_file: None,
            wwn: String::new(),
        };
        assert_eq!(devices[4], vda);

        let loop3 = Device {
            name: s("loop3"),
            path: dev("loop3"),
            major_minor: s("7:3"),
            vendor: s(""),
            model: s(""),
            serial: s(""),
            firmware: s(""),
            size_bytes: 2_097_152 * 512,
            rotational: true,
            transport: Transport::Loop,
            controller: vec![],
            pci_address: None,
            by_id: vec![],
            by_path: vec![],
            write_cache: WriteCache::WriteBack,
            write_cache_source: s(CACHE_SOURCE_QUEUE),
            partitions: vec![],
            mounted: v(&["/mnt/loop"]),
            holders: vec![],
            holds_root: false,
            backing_file: Some(s("/var/tmp/drive a.img")),
            wwn: String::new(),
        };
        assert_eq!(devices[0], loop3);
    }

    #[test]
    fn udev_gives_the_model_serial_and_firmware_the_kernel_does_not() {
        // A loop device (the container lab's drives) whose udev database names it, and the
        // USB bridge's sdb, whose kernel model stays first.
        let f = build();
        f.write(
            "run/udev/data/b7:3",
            "E:ID_MODEL_ENC=PLATTER\\x20LAB\\x20DRIVE\\x20\nE:ID_MODEL=PLATTER_LAB_DRIVE\nE:ID_SERIAL_SHORT=LAB-flygecko-1\nE:ID_REVISION=L4B1\n",
        );
        f.write(
            "run/udev/data/b8:16",
            "E:ID_MODEL=Other_Model\nE:ID_SERIAL_SHORT=CVDA123400AB120AGN\n",
        );
        let devices = scan(&f.roots()).unwrap();
        let by = |n: &str| devices.iter().find(|d| d.name == n).unwrap();
        let lo = by("loop3");
        assert_eq!(
            (lo.model.as_str(), lo.serial.as_str(), lo.firmware.as_str()),
            ("PLATTER LAB DRIVE", "LAB-flygecko-1", "L4B1")
        );
        assert_eq!(by("sdb").model, "SSDSC2BW120A4");
        // ID_MODEL alone: udev's underscores are spaces.
        f.write("run/udev/data/b7:3", "E:ID_MODEL=PLATTER_LAB_DRIVE\n");
        let devices = scan(&f.roots()).unwrap();
        let lo = devices.iter().find(|d| d.name == "loop3").unwrap();
        assert_eq!(lo.model, "PLATTER LAB DRIVE");
    }

    #[test]
    fn holders_are_followed_to_any_depth() {
        // LVM on dm-crypt on sda2: sda2 -> dm-0 (crypt) -> dm-1 (lv), dm-1 is "/".
        let f = build();
        let dm1 = f.disk(
            "virtual/block/dm-1",
            "dm-1",
            "253:1",
            1000,
            "0",
            "write through",
        );
        f.link(&dm1, "sys/devices/virtual/block/dm-0/holders/dm-1");
        f.write(
            "mountinfo",
            "30 1 253:1 / / rw - xfs /dev/mapper/vg-root rw\n",
        );
        let devices = scan(&f.roots()).unwrap();
        let sda = devices.iter().find(|d| d.name == "sda").unwrap();
        assert_eq!(sda.holders, v(&["dm-0", "dm-1"]));
        assert!(sda.holds_root);
        assert_eq!(sda.mounted, v(&["/"]));
        assert_eq!(sda.partitions[1].mounted, v(&["/"]));
        assert_eq!(sda.partitions[0].mounted, Vec::<String>::new());
        let others: Vec<&str> = devices
            .iter()
            .filter(|d| d.holds_root)
            .map(|d| d.name.as_str())
            .collect();
        assert_eq!(others, ["sda"]);
    }

    #[test]
    fn whole_disk_mount_and_mount_by_source_symlink() {
        // mkfs on the whole disk (no partitions), mounted via a by-id path whose
        // major:minor is anonymous: matched through the /dev symlink.
        let f = build();
        f.write(
            "mountinfo",
            "30 1 0:50 / /srv rw - btrfs /dev/disk/by-id/nvme-eui.0025385b71b2c3d4 rw\n",
        );
        let devices = scan(&f.roots()).unwrap();
        let nvme = devices.iter().find(|d| d.name == "nvme0n1").unwrap();
        assert_eq!(nvme.mounted, v(&["/srv"]));
        assert!(!nvme.holds_root);
    }

    #[test]
    fn missing_mountinfo_fails_rather_than_guessing_unmounted() {
        let f = build();
        fs::remove_file(f.p("mountinfo")).unwrap();
        let err = scan(&f.roots()).unwrap_err();
        assert!(
            matches!(&err, InventoryError::Io { path, .. } if *path == f.p("mountinfo")),
            "{err:?}"
        );
    }

    #[test]
    fn missing_sys_block_is_an_error() {
        let f = Fake::new();
        f.write("mountinfo", "");
        assert!(matches!(scan(&f.roots()), Err(InventoryError::Io { .. })));
    }

    #[test]
    fn malformed_size_names_the_file() {
        let f = build();
        let size = f.p("sys/block/vda/size");
        fs::write(&size, "lots\n").unwrap();
        let err = scan(&f.roots()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}: unexpected content \"lots\\n\": expected a sector count",
                size.display()
            )
        );
    }

    #[test]
    fn cache_type_strings() {
        assert_eq!(parse_cache_type("write back"), WriteCache::WriteBack);
        assert_eq!(
            parse_cache_type("write back, no read (daddy)"),
            WriteCache::WriteBack
        );
        assert_eq!(parse_cache_type("write through"), WriteCache::WriteThrough);
        assert_eq!(parse_cache_type("none"), WriteCache::WriteThrough);
        assert_eq!(parse_cache_type(""), WriteCache::Unknown);
    }

    #[test]
    fn transport_is_one_lowercase_word() {
        let all = [
            (Transport::Ata, "ata"),
            (Transport::Usb, "usb"),
            (Transport::Nvme, "nvme"),
            (Transport::Scsi, "scsi"),
            (Transport::Virtio, "virtio"),
            (Transport::Loop, "loop"),
            (Transport::Other(s("mmc_block")), "mmc_block"),
        ];
        for (t, word) in all {
            assert_eq!(String::from(t.clone()), word);
            assert_eq!(Transport::from(s(word)), t);
        }
    }

    #[test]
    fn pci_address_shape() {
        assert!(is_pci_address("0000:00:1f.2"));
        assert!(!is_pci_address("10000:00:00.0"));
        assert!(!is_pci_address("pci0000:00"));
        assert!(!is_pci_address("0000:00:1g.2"));
    }

    #[test]
    fn real_host_smoke() {
        let roots = Roots::default();
        let devices = scan(&roots).unwrap();
        assert!(!devices.is_empty(), "no block device found in /sys/block");
        for d in &devices {
            assert!(
                !d.name.starts_with("zram") && !d.name.starts_with("dm-"),
                "{d:?}"
            );
            if d.transport == Transport::Loop {
                assert!(d.backing_file.is_some(), "{d:?}");
            }
        }
        // Only assert holds_root when "/" is on a block device at all (not in a
        // container whose root is overlay or tmpfs).
        let mountinfo = fs::read_to_string(&roots.mountinfo).unwrap();
        let root_on_block = mountinfo::parse(&mountinfo).iter().any(|m| {
            m.mount_point == "/"
                && (!m.major_minor.starts_with("0:") || m.source.starts_with("/dev/"))
        });
        let holders: Vec<&Device> = devices.iter().filter(|d| d.holds_root).collect();
        if root_on_block {
            assert_eq!(holders.len(), 1, "{devices:#?}");
            assert!(holders[0].size_bytes > 0);
            assert!(holders[0].mounted.contains(&s("/")));
            println!("root is on {:?}", holders[0]);
        } else {
            println!("skipped holds_root: / is not on a block device here");
        }
    }
}
