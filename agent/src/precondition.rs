//! Workload-independent preconditioning (`prepare.precondition`, SNIA PTS): the whole
//! device written `passes` times, sequentially, in writes of `block_size` bytes, with
//! direct I/O (nothing staged in the page cache) and incompressible data that no two
//! 4 KiB sectors share (a drive that compresses or deduplicates still writes every byte).
//! Each pass ends with an fdatasync, so its time counts what reached the drive.
//!
//! Written here rather than run through fio or dd: every prepared campaign runs it, and it
//! then needs no tool on the host; and the bytes written are counted exactly (the whole
//! device, its last partial block included), not read back from a tool's report.
//!
//! Whether it may touch the device is `Storage::step_refusal`'s to say (the executor asks
//! before it runs); the device is also opened exclusively (`O_EXCL`), which the kernel
//! refuses for a device mounted or held by dm/md. A cancel, or the agent stopping, ends
//! the fill between two writes; the fill is not resumed where it stopped: the executor
//! runs a step cut off from its start.

use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::time::{Duration, Instant};

use crate::model::{Precondition, Sample};
use crate::workloads::sample;

/// The largest write the agent makes: its buffer is allocated once, this size at most.
pub(crate) const MAX_BLOCK_SIZE: u64 = 64 << 20;
/// Direct I/O wants buffers aligned to the device's logical block size; 4 KiB covers every
/// drive (512-byte and 4Kn).
const ALIGN: usize = 4096;
/// Each `ALIGN` bytes of a block start with a stamp of their place on the device and the
/// pass, so no two sectors of the device, nor of two passes, are the same.
const STAMP_EVERY: usize = ALIGN;
/// How much is written between two looks at whether to stop.
const CHECK_EVERY: u64 = 64 << 20;
/// Progress is logged at most this often.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub(crate) enum PreconditionError {
    #[error("opening {device} for direct writes: {source}")]
    Open {
        device: String,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the size of {device}: {source}")]
    Size {
        device: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{device} has a size of 0 bytes")]
    Empty { device: String },
    #[error("{why}")]
    BlockSize { why: String },
    #[error("writing {device} at byte {offset} (pass {pass}): {source}")]
    Write {
        device: String,
        offset: u64,
        pass: u32,
        #[source]
        source: std::io::Error,
    },
    #[error("fdatasync of {device} after pass {pass}: {source}")]
    Sync {
        device: String,
        pass: u32,
        #[source]
        source: std::io::Error,
    },
    #[error("cancelled after {written} of {total} bytes")]
    Cancelled { written: u64, total: u64 },
}

/// Why `block_size` cannot be written to a device of `logical` bytes per block, or None.
pub(crate) fn block_size_refusal(device: &str, block_size: u64, logical: u64) -> Option<String> {
    if block_size > MAX_BLOCK_SIZE {
        return Some(format!(
            "a precondition block size of {block_size} bytes is more than the {} MiB the agent \
             writes at once",
            MAX_BLOCK_SIZE >> 20
        ));
    }
    if logical == 0 || !block_size.is_multiple_of(logical) {
        return Some(format!(
            "a precondition block size of {block_size} bytes is not a multiple of {device}'s \
             logical block size ({logical} bytes), which direct writes need"
        ));
    }
    None
}

/// Fills `p.device` `p.passes` times; `stop` is asked between writes (every 64 MiB)
/// whether to give up. Samples: `precondition.bytes`, `precondition.seconds`,
/// `precondition.bandwidth`, and `precondition.passN.seconds` for each pass.
pub(crate) fn run(
    p: &Precondition,
    stop: &dyn Fn() -> bool,
) -> Result<Vec<Sample>, PreconditionError> {
    let device = p.device.as_str();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT | libc::O_EXCL)
        .open(device)
        .map_err(|source| PreconditionError::Open {
            device: device.to_string(),
            source,
        })?;
    // A block device's end is its size in bytes (what BLKGETSIZE64 says).
    let size = file
        .seek(SeekFrom::End(0))
        .map_err(|source| PreconditionError::Size {
            device: device.to_string(),
            source,
        })?;
    if size == 0 {
        return Err(PreconditionError::Empty {
            device: device.to_string(),
        });
    }
    let logical = rustix::fs::ioctl_blksszget(&file).map_err(|e| PreconditionError::Size {
        device: device.to_string(),
        source: e.into(),
    })?;
    if let Some(why) = block_size_refusal(device, p.block_size, logical.into()) {
        return Err(PreconditionError::BlockSize { why });
    }
    let total = size * u64::from(p.passes);
    tracing::info!(
        device,
        size,
        passes = p.passes,
        block_size = p.block_size,
        "preconditioning"
    );
    let mut buffer = Aligned::new(p.block_size as usize);
    Pattern::new(0x5eed_1e55_u64 ^ size).fill(buffer.as_mut());
    let started = Instant::now();
    let mut said = Instant::now();
    let mut written = 0u64;
    let mut checked = 0u64;
    let mut pass_seconds = Vec::new();
    for pass in 1..=p.passes {
        let pass_started = Instant::now();
        let mut offset = 0u64;
        while offset < size {
            if written - checked >= CHECK_EVERY {
                checked = written;
                if stop() {
                    return Err(PreconditionError::Cancelled { written, total });
                }
            }
            // The last block may be short: the device's size is a multiple of its logical
            // block size, not of ours.
            let n = (size - offset).min(p.block_size) as usize;
            let block = &mut buffer.as_mut()[..n];
            stamp(block, offset, pass);
            file.write_all_at(block, offset)
                .map_err(|source| PreconditionError::Write {
                    device: device.to_string(),
                    offset,
                    pass,
                    source,
                })?;
            offset += n as u64;
            written += n as u64;
            if said.elapsed() >= PROGRESS_EVERY {
                tracing::info!(
                    device,
                    pass,
                    percent = format!("{:.1}", written as f64 * 100.0 / total as f64),
                    "preconditioning"
                );
                said = Instant::now();
            }
        }
        rustix::fs::fdatasync(&file).map_err(|e| PreconditionError::Sync {
            device: device.to_string(),
            pass,
            source: e.into(),
        })?;
        pass_seconds.push(pass_started.elapsed().as_secs_f64());
    }
    let seconds = started.elapsed().as_secs_f64();
    let bandwidth = written as f64 / seconds;
    tracing::info!(
        device,
        bytes = written,
        seconds,
        bandwidth,
        "precondition done"
    );
    let mut samples = vec![
        sample("precondition.bytes", written as f64, "B"),
        sample("precondition.seconds", seconds, "s"),
        sample("precondition.bandwidth", bandwidth, "B/s"),
    ];
    for (i, s) in pass_seconds.into_iter().enumerate() {
        samples.push(sample(
            &format!("precondition.pass{}.seconds", i + 1),
            s,
            "s",
        ));
    }
    Ok(samples)
}

/// Stamps each `STAMP_EVERY` bytes of `block` (written at `offset` of the device in `pass`)
/// with 8 bytes no other sector of any pass has: SplitMix64's mix of its sector number and
/// the pass, a bijection, so distinct places give distinct stamps, which look as random as
/// the rest of the block. The rest of the buffer stays as filled once.
fn stamp(block: &mut [u8], offset: u64, pass: u32) {
    for (i, sector) in block.chunks_mut(STAMP_EVERY).enumerate() {
        let place = (offset / STAMP_EVERY as u64 + i as u64) ^ (u64::from(pass) << 48);
        let n = sector.len().min(8);
        sector[..n].copy_from_slice(&mix(place).to_le_bytes()[..n]);
    }
}

/// SplitMix64's output function (Steele, Lea and Flood, 2014): a bijection of u64 whose
/// outputs pass BigCrush.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// SplitMix64: fast, and statistically random enough that no compressor finds anything in
/// its output, which is all a fill needs of it (it is no cryptographic generator).
struct Pattern(u64);

impl Pattern {
    fn new(seed: u64) -> Pattern {
        Pattern(seed)
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let v = mix(self.0).to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// A zeroed buffer of `len` bytes starting on an `ALIGN` boundary: a `Vec` one alignment
/// longer, used from its first aligned byte (no allocator call of our own, no unsafe).
struct Aligned {
    bytes: Vec<u8>,
    start: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let bytes = vec![0u8; len + ALIGN];
        let start = bytes.as_ptr().align_offset(ALIGN);
        Aligned { bytes, start, len }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..self.start + self.len]
    }
}

#[cfg(test)]
mod tests;
