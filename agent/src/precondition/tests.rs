//! The fill's data (pure), and the fill on loop devices: its last partial block, a cancel,
//! and its bandwidth under a cgroup v1 blkio throttle.

use super::*;

use std::path::{Path, PathBuf};

use crate::executor::tests::{skip, LoopDevice};

const MIB: u64 = 1 << 20;

fn precondition(device: &str, passes: u32, block_size: u64) -> Precondition {
    Precondition {
        device: device.into(),
        passes,
        block_size,
    }
}

fn value(samples: &[Sample], metric: &str) -> f64 {
    samples
        .iter()
        .find(|s| s.metric == metric)
        .unwrap_or_else(|| panic!("no {metric} in {samples:?}"))
        .value
}

#[test]
fn the_buffer_is_aligned_for_direct_io() {
    for len in [512, 4096, 128 << 10, 1 << 20] {
        let mut b = Aligned::new(len);
        let s = b.as_mut();
        assert_eq!(s.len(), len);
        assert_eq!(s.as_ptr() as usize % ALIGN, 0);
    }
}

/// No two sectors written, in one pass or two, carry the same stamp, and the data around
/// them does not compress.
#[test]
fn every_sector_of_every_pass_differs_and_the_data_does_not_compress() {
    let block = 128 << 10;
    let mut buf = vec![0u8; block];
    Pattern::new(7).fill(&mut buf);
    let mut seen = std::collections::HashSet::new();
    for pass in 1..=2 {
        for b in 0..64u64 {
            stamp(&mut buf, b * block as u64, pass);
            for sector in buf.chunks(STAMP_EVERY) {
                assert!(
                    seen.insert(sector.to_vec()),
                    "a sector repeats (pass {pass})"
                );
            }
        }
    }
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut z, &buf).unwrap();
    assert!(z.finish().unwrap().len() as f64 > 0.99 * block as f64);
}

#[test]
fn a_block_size_direct_writes_cannot_use_is_refused() {
    assert_eq!(block_size_refusal("/dev/sdq", 128 << 10, 512), None);
    assert_eq!(block_size_refusal("/dev/sdq", 128 << 10, 4096), None);
    assert_eq!(
        block_size_refusal("/dev/sdq", 512, 4096).as_deref(),
        Some(
            "a precondition block size of 512 bytes is not a multiple of /dev/sdq's logical \
             block size (4096 bytes), which direct writes need"
        )
    );
    assert_eq!(
        block_size_refusal("/dev/sdq", 128 << 20, 512).as_deref(),
        Some(
            "a precondition block size of 134217728 bytes is more than the 64 MiB the agent \
             writes at once"
        )
    );
}

/// A device whose size is not a multiple of the block size is written to its last byte,
/// once per pass, and no further.
#[test]
fn the_last_partial_block_is_written_and_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let size = 8 * MIB + 4096;
    let Some(drive) = LoopDevice::new(tmp.path(), size) else {
        return;
    };
    let samples = run(&precondition(&drive.path, 1, 128 << 10), &|| false).unwrap();
    assert_eq!(value(&samples, "precondition.bytes"), size as f64);
    let image = std::fs::read(&drive.image).unwrap();
    assert_eq!(image.len() as u64, size, "written past the end");
    assert!(image[image.len() - 4096..].iter().any(|b| *b != 0));
}

/// A cancel ends the fill between two writes, saying how far it got.
#[test]
fn a_cancel_ends_the_fill() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(drive) = LoopDevice::new(tmp.path(), 64 * MIB) else {
        return;
    };
    let err = run(&precondition(&drive.path, 2, 1 << 20), &|| true).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cancelled after 67108864 of 134217728 bytes"
    );
}

/// A blkio cgroup (v1) of its own, removed on drop.
struct BlkioGroup(PathBuf);

impl Drop for BlkioGroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

const BLKIO: &str = "/sys/fs/cgroup/blkio";
/// The throttle: 8 MiB/s.
const THROTTLE_BPS: u64 = 8 << 20;

/// The fill's bandwidth sample is what reached the device: with the loop device throttled
/// to 8 MiB/s of writes (cgroup v1 blkio, the filling thread alone in the group), the
/// fill ends, and says at most that (1.2× for the throttle's slack); unthrottled the same
/// loop device takes hundreds of MiB/s.
#[test]
fn a_fill_under_a_write_throttle_reports_the_throttled_bandwidth() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(drive) = LoopDevice::new(tmp.path(), 24 * MIB) else {
        return;
    };
    let root = Path::new(BLKIO);
    if !root.join("blkio.throttle.write_bps_device").exists() {
        skip("needs cgroup v1 blkio throttling (/sys/fs/cgroup/blkio)");
        return;
    }
    let group = BlkioGroup(root.join(format!("platter-test-{}", std::process::id())));
    std::fs::create_dir(&group.0).unwrap();
    let dev = std::fs::read_to_string(format!("/sys/block/{}/dev", drive.name())).unwrap();
    std::fs::write(
        group.0.join("blkio.throttle.write_bps_device"),
        format!("{} {THROTTLE_BPS}", dev.trim()),
    )
    .unwrap();
    let p = precondition(&drive.path, 1, 128 << 10);
    let tasks = group.0.join("tasks");
    // cgroup v1 takes single threads: only this one is throttled, not the test binary.
    let samples = std::thread::spawn(move || {
        let tid = rustix::thread::gettid().as_raw_nonzero().to_string();
        std::fs::write(&tasks, &tid).unwrap();
        let r = run(&p, &|| false);
        std::fs::write(Path::new(BLKIO).join("tasks"), &tid).unwrap();
        r
    })
    .join()
    .unwrap()
    .unwrap();
    let throttled = value(&samples, "precondition.bandwidth");
    assert_eq!(value(&samples, "precondition.bytes"), (24 * MIB) as f64);
    assert!(
        throttled < 1.2 * THROTTLE_BPS as f64,
        "{throttled} B/s through an {THROTTLE_BPS} B/s throttle"
    );
    let free = run(&precondition(&drive.path, 1, 128 << 10), &|| false).unwrap();
    let unthrottled = value(&free, "precondition.bandwidth");
    eprintln!(
        "precondition of a 24 MiB loop device in 128 KiB writes: {:.1} MiB/s under an 8 MiB/s \
         throttle, {:.1} MiB/s without",
        throttled / MIB as f64,
        unthrottled / MIB as f64
    );
    assert!(
        unthrottled > 2.0 * throttled,
        "{unthrottled} vs {throttled}"
    );
}
