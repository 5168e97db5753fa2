//! Block device I/O counters from /proc/diskstats, their deltas around a measure
//! step, and their conversion to samples. Reads only; one read is one `open` +
//! `read` of a procfs file, cheap enough to take right before and after a step.
//!
//! Not the `procfs` crate (0.18, checked 2026-12-01), though `procfs_core::DiskStat::
//! from_line` parses text: it takes an unreadable discard or flush counter for one the
//! kernel does not print (`None`), where this parser reports the line as malformed, and its
//! errors do not name the line. The parsing here is ~40 lines with tests of both cases.

use std::path::Path;

/// /proc/diskstats counts 512-byte sectors whatever the device's block size.
const SECTOR_BYTES: f64 = 512.0;
const PROC_DISKSTATS: &str = "/proc/diskstats";
/// major, minor, name and the 11 counters every kernel since 2.6 prints.
const MIN_FIELDS: usize = 14;

#[derive(Debug, thiserror::Error)]
pub(crate) enum DiskstatsError {
    #[error("reading {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no device {name:?} in /proc/diskstats")]
    UnknownDevice { name: String },
    #[error("malformed /proc/diskstats line {line:?}: {reason}")]
    Malformed { line: String, reason: &'static str },
}

/// The counters of one device. Times are milliseconds, sizes 512-byte sectors, as
/// the kernel reports them; [`DiskStats::samples`] converts to seconds and bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct DiskStats {
    pub reads: u64,
    pub read_sectors: u64,
    pub read_ms: u64,
    pub writes: u64,
    pub write_sectors: u64,
    pub write_ms: u64,
    /// A gauge, not a counter: requests in flight at the moment of reading.
    pub in_flight: u64,
    pub io_ms: u64,
    /// Kernel 4.18+; 0 on older kernels.
    pub discards: u64,
    pub discard_sectors: u64,
    /// Kernel 5.5+; 0 on older kernels.
    pub flushes: u64,
    pub flush_ms: u64,
}

/// Finds the line for `name` in /proc/diskstats text and parses it. Fields the
/// running kernel does not print (discard: before 4.18, flush: before 5.5) are 0.
pub(crate) fn parse_proc_diskstats(text: &str, name: &str) -> Result<DiskStats, DiskstatsError> {
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(2) != Some(&name) {
            continue;
        }
        return parse_fields(line, &fields);
    }
    Err(DiskstatsError::UnknownDevice {
        name: name.to_string(),
    })
}

/// Reads the counters of `name` ("sda", "nvme0n1p2") from /proc/diskstats.
pub(crate) fn read(name: &str) -> Result<DiskStats, DiskstatsError> {
    read_from(Path::new(PROC_DISKSTATS), name)
}

fn read_from(path: &Path, name: &str) -> Result<DiskStats, DiskstatsError> {
    let text = std::fs::read_to_string(path).map_err(|source| DiskstatsError::Io {
        path: path.display().to_string(),
        source,
    })?;
    parse_proc_diskstats(&text, name)
}

fn parse_fields(line: &str, fields: &[&str]) -> Result<DiskStats, DiskstatsError> {
    if fields.len() < MIN_FIELDS {
        return Err(DiskstatsError::Malformed {
            line: line.to_string(),
            reason: "fewer than 14 fields",
        });
    }
    let mut values = Vec::with_capacity(fields.len() - 3);
    for f in &fields[3..] {
        values.push(f.parse::<u64>().map_err(|_| DiskstatsError::Malformed {
            line: line.to_string(),
            reason: "a counter is not an unsigned integer",
        })?);
    }
    // Index into the counters after the name (Documentation/admin-guide/iostats.rst
    // field N is values[N - 1]); absent fields are from older kernels.
    let v = |field: usize| values.get(field - 1).copied().unwrap_or(0);
    Ok(DiskStats {
        reads: v(1),
        read_sectors: v(3),
        read_ms: v(4),
        writes: v(5),
        write_sectors: v(7),
        write_ms: v(8),
        in_flight: v(9),
        io_ms: v(10),
        discards: v(12),
        discard_sectors: v(14),
        flushes: v(16),
        flush_ms: v(17),
    })
}

impl DiskStats {
    /// What happened between `before` and `self`. Counters subtract saturating, so a
    /// device that was re-created (counters reset) yields 0, never a huge wrap.
    /// `in_flight` is a gauge and keeps the value of `self`.
    pub fn delta(&self, before: &DiskStats) -> DiskStats {
        DiskStats {
            reads: self.reads.saturating_sub(before.reads),
            read_sectors: self.read_sectors.saturating_sub(before.read_sectors),
            read_ms: self.read_ms.saturating_sub(before.read_ms),
            writes: self.writes.saturating_sub(before.writes),
            write_sectors: self.write_sectors.saturating_sub(before.write_sectors),
            write_ms: self.write_ms.saturating_sub(before.write_ms),
            in_flight: self.in_flight,
            io_ms: self.io_ms.saturating_sub(before.io_ms),
            discards: self.discards.saturating_sub(before.discards),
            discard_sectors: self.discard_sectors.saturating_sub(before.discard_sectors),
            flushes: self.flushes.saturating_sub(before.flushes),
            flush_ms: self.flush_ms.saturating_sub(before.flush_ms),
        }
    }

    /// (metric, value, unit) triples in the report's units: counts "1", bytes "B",
    /// seconds "s". Meant for a delta.
    pub fn samples(&self) -> Vec<(String, f64, String)> {
        // u64 -> f64 loses precision only above 2^53, far beyond any counter delta.
        let count = |n: &str, v: u64| (n.to_string(), v as f64, "1".to_string());
        let bytes = |n: &str, v: u64| (n.to_string(), v as f64 * SECTOR_BYTES, "B".to_string());
        let secs = |n: &str, v: u64| (n.to_string(), v as f64 / 1000.0, "s".to_string());
        vec![
            count("disk.reads", self.reads),
            count("disk.writes", self.writes),
            count("disk.flushes", self.flushes),
            count("disk.discards", self.discards),
            bytes("disk.read_bytes", self.read_sectors),
            bytes("disk.write_bytes", self.write_sectors),
            secs("disk.read_time", self.read_ms),
            secs("disk.write_time", self.write_ms),
            secs("disk.flush_time", self.flush_ms),
            secs("disk.io_time", self.io_ms),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    // Real lines: a 4.15 kernel (14 fields), a 4.19 kernel (18) and a 6.x kernel (20).
    const TEXT: &str = "\
   8       0 sda 1234 56 78910 1112 1314 1516 171819 2021 3 2223 4455
   8       1 sda1 100 0 800 20 50 5 400 30 0 40 50
 259       0 nvme0n1 11 1 22 3 44 4 55 6 0 77 88 9 0 99 10
 254       0 vda 435759 12301 18762602 1236355 2438684 48297 114643672 5016037 2 107720 6261452 10510 0 17088504 6064 34353 2994
   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
";

    #[test]
    fn parses_14_field_line_without_discard_or_flush() {
        let s = parse_proc_diskstats(TEXT, "sda").unwrap();
        assert_eq!(
            s,
            DiskStats {
                reads: 1234,
                read_sectors: 78910,
                read_ms: 1112,
                writes: 1314,
                write_sectors: 171819,
                write_ms: 2021,
                in_flight: 3,
                io_ms: 2223,
                discards: 0,
                discard_sectors: 0,
                flushes: 0,
                flush_ms: 0,
            }
        );
    }

    #[test]
    fn parses_18_field_line_with_discards() {
        let s = parse_proc_diskstats(TEXT, "nvme0n1").unwrap();
        assert_eq!(
            s,
            DiskStats {
                reads: 11,
                read_sectors: 22,
                read_ms: 3,
                writes: 44,
                write_sectors: 55,
                write_ms: 6,
                in_flight: 0,
                io_ms: 77,
                discards: 9,
                discard_sectors: 99,
                flushes: 0,
                flush_ms: 0,
            }
        );
    }

    #[test]
    fn parses_20_field_line_with_flushes() {
        let s = parse_proc_diskstats(TEXT, "vda").unwrap();
        assert_eq!(
            s,
            DiskStats {
                reads: 435759,
                read_sectors: 18762602,
                read_ms: 1236355,
                writes: 2438684,
                write_sectors: 114643672,
                write_ms: 5016037,
                in_flight: 2,
                io_ms: 107720,
                discards: 10510,
                discard_sectors: 17088504,
                flushes: 34353,
                flush_ms: 2994,
            }
        );
    }

    #[test]
    fn name_must_match_exactly_not_by_prefix() {
        // "sda" must not pick up "sda1", and a partition can be asked for by name.
        assert_eq!(parse_proc_diskstats(TEXT, "sda1").unwrap().reads, 100);
        assert_eq!(parse_proc_diskstats(TEXT, "sda").unwrap().reads, 1234);
    }

    #[test]
    fn unknown_device_is_an_error() {
        let err = parse_proc_diskstats(TEXT, "sdz").unwrap_err();
        assert!(
            matches!(&err, DiskstatsError::UnknownDevice { name } if name == "sdz"),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "no device \"sdz\" in /proc/diskstats");
    }

    #[test]
    fn short_or_non_numeric_lines_are_errors() {
        let short = "8 0 sda 1 2 3 4 5 6 7 8 9 10";
        assert!(matches!(
            parse_proc_diskstats(short, "sda"),
            Err(DiskstatsError::Malformed {
                reason: "fewer than 14 fields",
                ..
            })
        ));
        let junk = "8 0 sda 1 2 3 4 5 6 7 8 9 10 x";
        assert!(matches!(
            parse_proc_diskstats(junk, "sda"),
            Err(DiskstatsError::Malformed {
                reason: "a counter is not an unsigned integer",
                ..
            })
        ));
    }

    #[test]
    fn read_from_missing_file_is_io_error() {
        let err = read_from(Path::new("/nonexistent/diskstats"), "sda").unwrap_err();
        assert!(matches!(err, DiskstatsError::Io { .. }), "{err:?}");
    }

    #[test]
    fn delta_subtracts_saturating_and_keeps_in_flight_gauge() {
        let before = DiskStats {
            reads: 10,
            read_sectors: 100,
            read_ms: 5,
            writes: 20,
            write_sectors: 200,
            write_ms: 7,
            in_flight: 4,
            io_ms: 30,
            discards: 1,
            discard_sectors: 8,
            flushes: 2,
            flush_ms: 3,
        };
        let after = DiskStats {
            reads: 15,
            read_sectors: 140,
            read_ms: 9,
            writes: 25,
            write_sectors: 216,
            write_ms: 10,
            in_flight: 1,
            io_ms: 42,
            discards: 1,
            discard_sectors: 8,
            flushes: 7,
            // Counter went backwards (device re-created): saturates to 0.
            flush_ms: 1,
        };
        assert_eq!(
            after.delta(&before),
            DiskStats {
                reads: 5,
                read_sectors: 40,
                read_ms: 4,
                writes: 5,
                write_sectors: 16,
                write_ms: 3,
                in_flight: 1,
                io_ms: 12,
                discards: 0,
                discard_sectors: 0,
                flushes: 5,
                flush_ms: 0,
            }
        );
    }

    #[test]
    fn samples_convert_units() {
        let d = DiskStats {
            reads: 3,
            read_sectors: 8,
            read_ms: 1500,
            writes: 4,
            write_sectors: 2,
            write_ms: 250,
            in_flight: 9,
            io_ms: 1750,
            discards: 6,
            discard_sectors: 1000,
            flushes: 5,
            flush_ms: 20,
        };
        let s = |n: &str, v: f64, u: &str| (n.to_string(), v, u.to_string());
        assert_eq!(
            d.samples(),
            vec![
                s("disk.reads", 3.0, "1"),
                s("disk.writes", 4.0, "1"),
                s("disk.flushes", 5.0, "1"),
                s("disk.discards", 6.0, "1"),
                s("disk.read_bytes", 4096.0, "B"),
                s("disk.write_bytes", 1024.0, "B"),
                s("disk.read_time", 1.5, "s"),
                s("disk.write_time", 0.25, "s"),
                s("disk.flush_time", 0.02, "s"),
                s("disk.io_time", 1.75, "s"),
            ]
        );
    }

    /// Linux `new_encode_dev` layout of st_dev, decoded without libc.
    fn major_minor(dev: u64) -> (u64, u64) {
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
        let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
        (major, minor)
    }

    #[test]
    fn st_dev_decoding() {
        assert_eq!(major_minor(0xfe00), (254, 0));
        assert_eq!(major_minor(0x0811), (8, 17));
        assert_eq!(major_minor(0x10300), (259, 0));
    }

    /// The name of the whole disk (or, failing that, the device itself) whose
    /// major:minor is the tempdir's st_dev, or None when no block device backs it.
    fn disk_for(dev: u64) -> Option<String> {
        let (major, minor) = major_minor(dev);
        let text = std::fs::read_to_string(PROC_DISKSTATS).ok()?;
        let name = text.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3 && f[0] == major.to_string() && f[1] == minor.to_string())
                .then(|| f[2].to_string())
        })?;
        // A partition's flushes go to the whole disk as well, so count the parent.
        let class = Path::new("/sys/class/block").join(&name);
        if class.join("partition").exists() {
            let parent = std::fs::canonicalize(&class).ok()?;
            let disk = parent.parent()?.file_name()?.to_string_lossy().into_owned();
            return Some(disk);
        }
        Some(name)
    }

    #[test]
    fn live_write_and_fdatasync_move_the_counters() {
        let dir = tempfile::tempdir().unwrap();
        let dev = std::fs::metadata(dir.path()).unwrap().dev();
        let Some(disk) = disk_for(dev) else {
            println!(
                "skipped: {} is on no block device in /proc/diskstats (tmpfs/overlay?)",
                dir.path().display()
            );
            return;
        };
        // Flushes are only sent to a disk with a volatile write cache.
        let cache = std::fs::read_to_string(format!("/sys/block/{disk}/queue/write_cache"))
            .unwrap_or_default();
        let before = read(&disk).unwrap();
        let mut f = std::fs::File::create(dir.path().join("probe")).unwrap();
        f.write_all(&[0x5a; 4096]).unwrap();
        f.sync_data().unwrap();
        let after = read(&disk).unwrap();
        let d = after.delta(&before);
        assert!(d.writes >= 1, "{disk}: {d:?}");
        assert!(d.write_sectors >= 8, "{disk}: 4 KiB written, {d:?}");
        if cache.trim() == "write back" {
            assert!(d.flushes >= 1, "{disk}: {d:?}");
        } else {
            println!("{disk} has no volatile write cache ({cache:?}): flushes not checked");
        }
    }
}
