//! The built-in `fsync` workload: times `count` small `pwrite` + sync pairs at a fixed offset,
//! one latency per operation, as ongardie/diskbenchmark does. It owns (creates and truncates)
//! its target file, and inside the timed loop it must not allocate, log, or make any syscall
//! other than the write and the sync being measured.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;

/// Highest latency the histogram tracks (one hour, in ns). A slower operation is recorded as one
/// hour: the histogram has fixed bounds so that recording never resizes (allocates) mid-run.
const MAX_LATENCY_NS: u64 = 3_600 * 1_000_000_000;
/// Significant digits kept by the latency histogram.
const SIGFIG: u8 = 3;
/// Alignment of the write buffer. 4096 satisfies the memory alignment O_DIRECT asks for on every
/// device we expect (512- and 4096-byte logical blocks); a larger reported alignment wins.
const BUF_ALIGN: usize = 4096;
/// Permissions of a file the workload creates.
const FILE_MODE: u32 = 0o644;

pub(crate) use platter_proto::model::{FsyncParams, SyncMode};

/// The outcome of one run.
pub struct FsyncResult {
    /// Per-operation latency (write + sync) in ns, 3 significant digits, 1 ns .. 1 h.
    pub histogram: Histogram<u64>,
    /// Monotonic time the operations took: from each batch's first operation's start to
    /// its last one's end, summed (the histogram is filled between batches of `BATCH`
    /// operations, outside it).
    pub total: Duration,
    /// Operations done; equals the requested count on success.
    pub ops: u64,
}

/// Everything that can go wrong in a run. Parameter errors are raised before the file is opened.
#[derive(Debug, thiserror::Error)]
pub enum FsyncError {
    #[error("invalid fsync workload: {0}")]
    Invalid(String),
    #[error(
        "invalid fsync workload: with direct: true, {what} must be a multiple of {align} bytes \
         (the O_DIRECT alignment of {path}), got {value}"
    )]
    Unaligned {
        path: PathBuf,
        what: &'static str,
        value: u64,
        align: u64,
    },
    #[error(
        "{path} does not accept O_DIRECT ({source}); use a filesystem or block device that \
         supports it, or direct: false"
    )]
    DirectUnsupported { path: PathBuf, source: io::Error },
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("malformed latency histogram: {0}")]
    Histogram(String),
}

/// The `open(2)` flags for `p`. Kept pure so that the flag choice is testable without
/// inspecting a live descriptor.
pub(crate) fn open_flags(p: &FsyncParams) -> libc::c_int {
    // O_RDWR rather than O_WRONLY: glibc's posix_fallocate emulation (for filesystems without
    // fallocate) reads before it writes.
    let mut flags = libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC;
    if p.sync == SyncMode::Dsync {
        flags |= libc::O_DSYNC;
    }
    if p.direct {
        flags |= libc::O_DIRECT;
    }
    flags
}

/// Checks what can be checked without touching the disk: sizes, counts, and that the whole
/// range fits in an `off_t` and the buffer in memory.
pub(crate) fn validate(p: &FsyncParams) -> Result<(), FsyncError> {
    if p.size == 0 {
        return Err(FsyncError::Invalid("size must be at least 1 byte".into()));
    }
    if p.count == 0 {
        return Err(FsyncError::Invalid("count must be at least 1".into()));
    }
    match p.end() {
        Some(end) if end <= i64::MAX as u64 => {}
        _ => {
            return Err(FsyncError::Invalid(format!(
                "offset + size * count ({} + {} * {}) exceeds the largest file offset",
                p.offset, p.size, p.count
            )))
        }
    }
    if usize::try_from(p.size).map_or(true, |s| s > isize::MAX as usize - BUF_ALIGN) {
        return Err(FsyncError::Invalid(format!(
            "size {} does not fit in memory",
            p.size
        )));
    }
    Ok(())
}

/// Checks `size` and `offset` against an O_DIRECT alignment of `align` bytes.
pub(crate) fn check_alignment(p: &FsyncParams, align: u64) -> Result<(), FsyncError> {
    for (what, value) in [("size", p.size), ("offset", p.offset)] {
        if align == 0 || value % align != 0 {
            return Err(FsyncError::Unaligned {
                path: p.path.clone().into(),
                what,
                value,
                align,
            });
        }
    }
    Ok(())
}

/// The O_DIRECT offset/size alignment for writes to `path`, found without writing anything.
///
/// The file itself is asked if it exists, else its parent directory:
/// 1. a block device: its logical block size (`ioctl(BLKSSZGET)`);
/// 2. `statx(STATX_DIOALIGN)` (Linux 6.1+), which the filesystem fills for regular files;
/// 3. otherwise `st_blksize`, the preferred I/O size. That is usually 4096 and never smaller
///    than the logical block size, so it is safe, though it may reject a 512-byte-aligned write
///    that a 512-byte device would accept.
pub(crate) fn direct_alignment(path: &Path) -> Result<u64, FsyncError> {
    let target = if path.exists() {
        path
    } else {
        match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        }
    };
    let io_err = |op, source| FsyncError::Io {
        op,
        path: target.to_path_buf(),
        source,
    };
    let c_path = c_path(target)?;
    let st = std::fs::metadata(target).map_err(|e| io_err("stat", e))?;

    if st.file_type().is_block_device() {
        // Opened read-only: nothing is written.
        let dev = File::open(target).map_err(|e| io_err("open", e))?;
        return match rustix::fs::ioctl_blksszget(&dev) {
            Ok(sector) if sector > 0 => Ok(u64::from(sector)),
            Ok(_) => Err(io_err(
                "ioctl(BLKSSZGET)",
                io::Error::other("the device reports a logical block size of 0"),
            )),
            Err(e) => Err(io_err("ioctl(BLKSSZGET)", e.into())),
        };
    }

    // std's metadata does not ask for STATX_DIOALIGN.
    let stx = rustix::fs::statx(
        rustix::fs::CWD,
        c_path.as_c_str(),
        rustix::fs::AtFlags::empty(),
        rustix::fs::StatxFlags::DIOALIGN,
    );
    // stx_dio_offset_align is 0 when the filesystem does not support O_DIRECT on this file (or
    // the target is a directory): fall back rather than report "unsupported" here, because the
    // open itself gives the authoritative answer.
    if let Ok(stx) = stx {
        if stx.stx_mask & rustix::fs::StatxFlags::DIOALIGN.bits() != 0
            && stx.stx_dio_offset_align > 0
        {
            return Ok(u64::from(stx.stx_dio_offset_align).max(u64::from(stx.stx_dio_mem_align)));
        }
    }
    Ok(st.blksize())
}

/// Runs the workload described by `p`.
pub fn run(p: &FsyncParams) -> Result<FsyncResult, FsyncError> {
    run_in_batches(p, BATCH)
}

/// [`run`], its histogram filled after every `batch` operations.
fn run_in_batches(p: &FsyncParams, batch: u64) -> Result<FsyncResult, FsyncError> {
    validate(p)?;
    let align = if p.direct {
        let align = direct_alignment(Path::new(&p.path))?;
        check_alignment(p, align)?;
        align
    } else {
        1
    };
    let size = p.size as usize; // validate() checked that it fits
    let buf_align = BUF_ALIGN.max(usize::try_from(align).unwrap_or(usize::MAX));
    let mut buf = AlignedBuf::new(size, buf_align);
    fill_lowercase(buf.as_mut_slice());

    let path = Path::new(&p.path);
    let io_err = |op, source| FsyncError::Io {
        op,
        path: path.to_path_buf(),
        source,
    };
    // std sets the access mode and O_CLOEXEC itself and ORs in the rest of open_flags.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .custom_flags(open_flags(p))
        .open(path)
        .map_err(|e| open_error(path, p.direct, e))?;

    if p.prealloc {
        // validate() checked that offset and size * count fit in off_t.
        let len = (p.size * p.count) as libc::off_t;
        // Not rustix::fs::fallocate: that is fallocate(2), which fails with EOPNOTSUPP where
        // the filesystem cannot allocate, while glibc's posix_fallocate then writes the
        // blocks itself, as the workload always had.
        // SAFETY: posix_fallocate only reads its integer arguments and acts on the open
        // descriptor `file` owns for the whole call; it touches no memory of ours.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), p.offset as libc::off_t, len) };
        // posix_fallocate returns the error number instead of setting errno.
        if rc != 0 {
            return Err(io_err("posix_fallocate", io::Error::from_raw_os_error(rc)));
        }
    }

    let clock = LoopClock::detect();
    let mut ticks = Histogram::<u64>::new_with_bounds(1, clock.max_ticks(), SIGFIG)
        .map_err(|e| FsyncError::Histogram(e.to_string()))?;
    // The counts array comes from calloc, i.e. untouched zero pages: writing it now takes the
    // page faults here rather than inside the timed loop.
    ticks.reset();

    // The loop stores each latency in this batch and fills the histogram between batches
    // (outside the timed operations): a store is cheaper than a histogram record. Written
    // once now so its pages fault here, not inside the loop.
    let mut batch = vec![1u64; p.count.min(batch) as usize];

    let step = if p.advance { p.size as i64 } else { 0 };
    let looped = {
        let mut l = Loop {
            file: &file,
            buf: buf.as_slice(),
            offset: p.offset as i64,
            step,
            count: p.count,
            histogram: &mut ticks,
            batch: &mut batch,
        };
        // One instantiation per mode and clock, so the loop body has no branch on either.
        macro_rules! run_with {
            ($clock:expr) => {
                match p.sync {
                    SyncMode::Fdatasync => l.run($clock, "fdatasync", libc_fdatasync),
                    SyncMode::Fsync => l.run($clock, "fsync", libc_fsync),
                    SyncMode::Dsync | SyncMode::None => l.run($clock, "sync", |_| 0),
                }
            };
        }
        match clock {
            #[cfg(target_arch = "x86_64")]
            LoopClock::Tsc => run_with!(Tsc),
            LoopClock::Monotonic => run_with!(Monotonic::new()),
        }
    };
    let (total, ns_per_tick) = looped.map_err(|(op, source)| io_err(op, source))?;
    let histogram = in_ns(&ticks, ns_per_tick)?;

    // close(2) can report a deferred write error (e.g. on NFS); a run that lost data must
    // fail. std's File ignores close's result, so the descriptor is closed here.
    let fd = file.into_raw_fd();
    // SAFETY: `into_raw_fd` gave up the File's ownership: fd is closed exactly once.
    if unsafe { libc::close(fd) } != 0 {
        return Err(io_err("close", io::Error::last_os_error()));
    }
    Ok(FsyncResult {
        ops: histogram.len(),
        histogram,
        total,
    })
}

/// Maps an `open(2)` failure: EINVAL with O_DIRECT means the filesystem refuses O_DIRECT
/// (the usual tmpfs answer before Linux 6.6), which deserves a message saying so.
pub(crate) fn open_error(path: &Path, direct: bool, source: io::Error) -> FsyncError {
    if direct && source.raw_os_error() == Some(libc::EINVAL) {
        FsyncError::DirectUnsupported {
            path: path.to_path_buf(),
            source,
        }
    } else {
        FsyncError::Io {
            op: "open",
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Decodes a histogram serialized by [`FsyncResult::samples`] (hdrhistogram V2 format).
pub fn deserialize_histogram(bytes: &[u8]) -> Result<Histogram<u64>, FsyncError> {
    Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| FsyncError::Histogram(format!("{e:?}")))
}

impl FsyncResult {
    /// One row per metric: (name, value, unit, histogram bytes). Latencies and `total` are in
    /// seconds. Only the `latency` row (value: mean seconds) carries bytes: the V2-serialized
    /// histogram, so that repetitions can be merged later.
    pub fn samples(&self) -> Vec<(String, f64, String, Vec<u8>)> {
        let h = &self.histogram;
        let secs = |ns: u64| ns as f64 / 1e9;
        let mean = h.mean() / 1e9;
        let total = self.total.as_secs_f64();
        let ops_per_s = if total > 0.0 {
            self.ops as f64 / total
        } else {
            0.0
        };
        let mut bytes = Vec::new();
        // Writing to a Vec cannot fail, and the only other error (a count above i64::MAX)
        // would need more operations than a run can do.
        V2Serializer::new()
            .serialize(h, &mut bytes)
            .expect("serializing a u64 histogram into a Vec cannot fail");

        let row = |name: &str, value: f64, unit: &str| (name.to_owned(), value, unit.to_owned());
        let mut rows = vec![
            row("latency.mean", mean, "s"),
            row("latency.p50", secs(h.value_at_quantile(0.5)), "s"),
            row("latency.p90", secs(h.value_at_quantile(0.9)), "s"),
            row("latency.p99", secs(h.value_at_quantile(0.99)), "s"),
            row("latency.p99.9", secs(h.value_at_quantile(0.999)), "s"),
            row("latency.max", secs(h.max()), "s"),
            row("latency.min", secs(h.min()), "s"),
            row("ops_per_s", ops_per_s, "op/s"),
            row("total", total, "s"),
            row("ops", self.ops as f64, "1"),
        ]
        .into_iter()
        .map(|(n, v, u)| (n, v, u, Vec::new()))
        .collect::<Vec<_>>();
        rows.push(("latency".to_owned(), mean, "s".to_owned(), bytes));
        rows
    }
}

/// What times each operation. Reading `CLOCK_MONOTONIC` twice per operation cost ~55 ns of
/// a ~800 ns loop (tmpfs) here, most of the gap to a loop that times nothing; the CPU's
/// time-stamp counter costs a fraction of that. It is used only where the kernel itself
/// keeps time with it (clocksource `tsc`: invariant, synchronized across CPUs), and its
/// ticks are converted to ns with a rate measured against `CLOCK_MONOTONIC` around the
/// loop, so latencies stay in the monotonic clock's ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LoopClock {
    #[cfg(target_arch = "x86_64")]
    Tsc,
    Monotonic,
}

impl LoopClock {
    fn detect() -> LoopClock {
        #[cfg(target_arch = "x86_64")]
        {
            static TSC: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
            let tsc = *TSC.get_or_init(|| {
                std::fs::read_to_string(
                    "/sys/devices/system/clocksource/clocksource0/current_clocksource",
                )
                .is_ok_and(|s| s.trim() == "tsc")
            });
            if tsc {
                return LoopClock::Tsc;
            }
        }
        LoopClock::Monotonic
    }

    /// The histogram's bound in this clock's ticks: `MAX_LATENCY_NS` at up to 8 GHz.
    fn max_ticks(self) -> u64 {
        match self {
            #[cfg(target_arch = "x86_64")]
            LoopClock::Tsc => MAX_LATENCY_NS * 8,
            LoopClock::Monotonic => MAX_LATENCY_NS,
        }
    }
}

/// A clock read inside the timed loop.
trait Ticks {
    fn now(&self) -> u64;

    /// Nanoseconds per tick, measured against `Instant` from `(t0, i0)` taken just before
    /// the loop; waits until 5 ms have passed since, so a short loop's rate is as exact as
    /// a long one's (~10 ppm).
    fn ns_per_tick(&self, t0: u64, i0: Instant) -> f64 {
        const WINDOW: Duration = Duration::from_millis(5);
        while i0.elapsed() < WINDOW {
            std::hint::spin_loop();
        }
        let t1 = self.now();
        let ns = i0.elapsed().as_nanos() as f64;
        ns / (t1.saturating_sub(t0).max(1)) as f64
    }
}

/// The time-stamp counter, a plain `rdtsc`. The vDSO fences it (`lfence; rdtsc`) so that
/// it cannot run ahead of the loads before it; here each read follows a system call, and
/// the instructions after a `syscall` are fetched only once it has returned, so the read
/// cannot start before the operation it times has ended. The fence cost ~5–8 ns per
/// operation here (BENCHMARKS.md).
#[cfg(target_arch = "x86_64")]
struct Tsc;

#[cfg(target_arch = "x86_64")]
impl Ticks for Tsc {
    #[inline(always)]
    fn now(&self) -> u64 {
        // SAFETY: rdtsc is available on every x86-64 CPU and has no memory effects.
        unsafe { std::arch::x86_64::_rdtsc() }
    }
}

/// `CLOCK_MONOTONIC` in ns since the loop's clock was made.
struct Monotonic(Instant);

impl Monotonic {
    fn new() -> Self {
        Monotonic(Instant::now())
    }
}

impl Ticks for Monotonic {
    #[inline(always)]
    fn now(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn ns_per_tick(&self, _: u64, _: Instant) -> f64 {
        1.0
    }
}

/// The loop's latencies in ns: each recorded tick count (its bucket's middle value) times
/// `ns_per_tick`. Adds at most the histogram's own precision (3 significant digits) again.
fn in_ns(ticks: &Histogram<u64>, ns_per_tick: f64) -> Result<Histogram<u64>, FsyncError> {
    let mut ns = Histogram::<u64>::new_with_bounds(1, MAX_LATENCY_NS, SIGFIG)
        .map_err(|e| FsyncError::Histogram(e.to_string()))?;
    for v in ticks.iter_recorded() {
        let t = ticks.median_equivalent(v.value_iterated_to());
        let value = (t as f64 * ns_per_tick).round() as u64;
        ns.saturating_record_n(value.max(1), v.count_at_value());
    }
    Ok(ns)
}

/// The timed loop's inputs, borrowed so that the loop itself owns and allocates nothing.
struct Loop<'a> {
    file: &'a File,
    buf: &'a [u8],
    offset: i64,
    step: i64,
    count: u64,
    histogram: &'a mut Histogram<u64>,
    batch: &'a mut [u64],
}

/// Latencies kept per batch before they go into the histogram (512 KiB). Filling it costs
/// ~56 instructions per operation (callgrind), ~2% of an operation on tmpfs: it happens
/// between batches, outside the loop's total.
const BATCH: u64 = 1 << 16;

impl Loop<'_> {
    /// Records each operation's latency in `clock`'s ticks. Returns the time the operations
    /// took (each batch's, from its first operation's start to its last one's end, summed:
    /// not the histogram's filling between batches) and the ns per tick, or the failing
    /// call and its OS error. Errors carry no path so that nothing is allocated here; the
    /// caller adds it.
    ///
    /// The operations are glibc's `pwrite` and `sync` (`fdatasync`, `fsync` or nothing)
    /// called directly, as a C loop calls them: std's `write_all_at` and `sync_data` wrap
    /// each in a retry loop that cost ~65 instructions per operation more (callgrind), 3–5%
    /// of a tmpfs operation. A retry (EINTR) or a short write goes to a cold path instead.
    #[inline(always)]
    fn run(
        &mut self,
        clock: impl Ticks,
        sync_name: &'static str,
        sync: impl Fn(RawFd) -> libc::c_int,
    ) -> Result<(Duration, f64), (&'static str, io::Error)> {
        let fd = self.file.as_raw_fd();
        let (data, len) = (self.buf.as_ptr().cast::<libc::c_void>(), self.buf.len());
        let mut offset = self.offset;
        let (start_ticks, start) = (clock.now(), Instant::now());
        // One clock read per operation: each ends where the next begins, so an operation's
        // latency also holds the loop's bookkeeping after the one before it (a store and
        // an add, a few ns of ~300 on tmpfs here). A second read per operation, and a
        // histogram record inside the loop, cost ~15 ns more (BENCHMARKS.md).
        let mut left = self.count;
        let mut total = Duration::ZERO;
        while left > 0 {
            let n = left.min(self.batch.len() as u64) as usize;
            let batch_start = Instant::now();
            let mut t0 = clock.now();
            for slot in &mut self.batch[..n] {
                // SAFETY: `data` and `len` are `self.buf`'s, borrowed for the whole loop; fd
                // is `self.file`'s, open for as long as the borrow.
                let written = unsafe { libc::pwrite(fd, data, len, offset) };
                if written as usize != len {
                    write_rest(self.file, self.buf, offset, written).map_err(|e| ("pwrite", e))?;
                }
                if sync(fd) != 0 {
                    sync_again(fd, &sync).map_err(|e| (sync_name, e))?;
                }
                let t1 = clock.now();
                *slot = t1.saturating_sub(t0);
                offset += self.step;
                t0 = t1;
            }
            total += batch_start.elapsed();
            // Between batches, outside any operation's time and the total (the next
            // batch's first operation starts its clock after this). Saturates at the bound
            // instead of resizing, so it never allocates.
            for &t in &self.batch[..n] {
                self.histogram.saturating_record(t);
            }
            left -= n as u64;
        }
        Ok((total, clock.ns_per_tick(start_ticks, start)))
    }
}

/// `fdatasync(2)` through glibc, as [`Loop::run`] calls it: 0 or -1 and `errno`.
fn libc_fdatasync(fd: RawFd) -> libc::c_int {
    // SAFETY: acts on a descriptor the caller keeps open; touches no memory of ours.
    unsafe { libc::fdatasync(fd) }
}

/// `fsync(2)` through glibc, as [`Loop::run`] calls it: 0 or -1 and `errno`.
fn libc_fsync(fd: RawFd) -> libc::c_int {
    // SAFETY: as `libc_fdatasync`.
    unsafe { libc::fsync(fd) }
}

/// After a `pwrite` at `offset` that returned `written` rather than all of `buf`: the
/// error, or the rest written (again after EINTR). Reads `errno` before anything else.
#[cold]
#[inline(never)]
fn write_rest(file: &File, buf: &[u8], offset: i64, written: isize) -> io::Result<()> {
    match usize::try_from(written) {
        Ok(done) => file.write_all_at(&buf[done..], offset as u64 + done as u64),
        Err(_) => {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
            file.write_all_at(buf, offset as u64)
        }
    }
}

/// After `sync(fd)` failed: its error, or it again until it is not interrupted.
#[cold]
#[inline(never)]
fn sync_again(fd: RawFd, sync: &impl Fn(RawFd) -> libc::c_int) -> io::Result<()> {
    loop {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
        if sync(fd) == 0 {
            return Ok(());
        }
    }
}

/// Fills `buf` with lowercase a-z, as the seed's random string of characters. A fixed-seed
/// xorshift: the data is the same on every run, so runs are comparable.
fn fill_lowercase(buf: &mut [u8]) {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for b in buf {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = b'a' + (x % 26) as u8;
    }
}

fn c_path(path: &Path) -> Result<CString, FsyncError> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| FsyncError::Invalid(format!("path {} contains a NUL byte", path.display())))
}

/// A zeroed buffer of `len` bytes starting at an address aligned to `align`, as O_DIRECT
/// requires: a Vec with `align` bytes to spare, used from its first aligned byte.
struct AlignedBuf {
    bytes: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    fn new(len: usize, align: usize) -> Self {
        let bytes = vec![0u8; len + align];
        let start = bytes.as_ptr().align_offset(align);
        AlignedBuf { bytes, start, len }
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[self.start..self.start + self.len]
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..self.start + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn params(dir: &Path) -> FsyncParams {
        FsyncParams {
            count: 20,
            ..FsyncParams::new(dir.join("f").display().to_string())
        }
    }

    fn all_lowercase(path: &Path, from: u64, to: u64) {
        let data = std::fs::read(path).unwrap();
        let range = &data[from as usize..to as usize];
        assert!(!range.is_empty());
        assert!(
            range.iter().all(u8::is_ascii_lowercase),
            "bytes {from}..{to} are not all a-z"
        );
    }

    #[test]
    fn counts_and_size_rewriting_one_place() {
        let dir = tempfile::tempdir().unwrap();
        let p = FsyncParams {
            size: 100,
            offset: 512,
            count: 30,
            prealloc: false,
            ..params(dir.path())
        };
        let r = run(&p).unwrap();
        assert_eq!(r.ops, 30);
        assert_eq!(r.histogram.len(), 30);
        assert_eq!(std::fs::metadata(&p.path).unwrap().len(), 512 + 100);
        all_lowercase(Path::new(&p.path), 512, 612);
    }

    #[test]
    fn counts_and_size_advancing() {
        let dir = tempfile::tempdir().unwrap();
        let p = FsyncParams {
            size: 100,
            offset: 512,
            count: 30,
            prealloc: false,
            advance: true,
            ..params(dir.path())
        };
        let r = run(&p).unwrap();
        assert_eq!(r.ops, 30);
        assert_eq!(r.histogram.len(), 30);
        assert_eq!(std::fs::metadata(&p.path).unwrap().len(), 512 + 100 * 30);
        all_lowercase(Path::new(&p.path), 512, 512 + 3000);
    }

    #[test]
    fn every_operation_of_several_batches_is_recorded_and_written() {
        // A hundred whole batches and three more: the histogram fills between batches. (Long
        // enough that a preemption of the test, ~1 ms, stays under half the total.)
        let dir = tempfile::TempDir::new_in("/dev/shm").unwrap();
        let batch = 1000;
        let count = 100 * batch + 3;
        let p = FsyncParams {
            size: 1,
            count,
            sync: SyncMode::None,
            advance: true,
            prealloc: false,
            ..params(dir.path())
        };
        let r = run_in_batches(&p, batch).unwrap();
        assert_eq!((r.ops, r.histogram.len()), (count, count));
        assert_eq!(std::fs::metadata(&p.path).unwrap().len(), count);
        // No latency is a batch boundary's artefact: none is zero, and the slowest is well
        // below the whole run.
        assert!(r.histogram.min() >= 1);
        assert!((r.histogram.max() as f64) < r.total.as_nanos() as f64 / 2.0);
        // The latencies tile each batch, and the total is the batches' time without the
        // histogram's filling between them: the two agree (to the histogram's precision).
        let sum = r.histogram.mean() * count as f64;
        let total = r.total.as_nanos() as f64;
        assert!(
            (0.97 * total..=1.01 * total).contains(&sum),
            "latencies sum to {sum} ns, the total is {total} ns"
        );
    }

    #[test]
    fn prealloc_sets_size_to_whole_range_even_when_rewriting() {
        let dir = tempfile::tempdir().unwrap();
        let p = FsyncParams {
            size: 100,
            offset: 512,
            count: 30,
            prealloc: true,
            advance: false,
            ..params(dir.path())
        };
        run(&p).unwrap();
        assert_eq!(std::fs::metadata(&p.path).unwrap().len(), 512 + 100 * 30);
        all_lowercase(Path::new(&p.path), 512, 612);
        // Beyond the written bytes, preallocated space reads as zeros.
        let data = std::fs::read(&p.path).unwrap();
        assert!(data[612..].iter().all(|&b| b == 0));
    }

    #[test]
    fn existing_file_is_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let p = FsyncParams {
            prealloc: false,
            ..params(dir.path())
        };
        std::fs::write(&p.path, vec![b'X'; 10_000]).unwrap();
        run(&p).unwrap();
        assert_eq!(std::fs::metadata(&p.path).unwrap().len(), 1);
    }

    #[test]
    fn prealloc_allocates_the_whole_range_from_offset_zero() {
        let dir = tempfile::tempdir().unwrap();
        let (size, count) = (4096, 64);
        let with = FsyncParams {
            size,
            count,
            prealloc: true,
            ..params(dir.path())
        };
        run(&with).unwrap();
        let blocks = std::fs::metadata(&with.path).unwrap().blocks() * 512;
        assert!(blocks >= size * count, "{blocks} bytes allocated");

        let without = FsyncParams {
            path: dir.path().join("sparse").display().to_string(),
            prealloc: false,
            ..with
        };
        run(&without).unwrap();
        let blocks = std::fs::metadata(&without.path).unwrap().blocks() * 512;
        assert!(blocks < size * count, "{blocks} bytes allocated");
    }

    #[test]
    fn prealloc_covers_the_range_after_a_nonzero_offset() {
        // posix_fallocate(offset, size * count) leaves [0, offset) a hole, so with an offset the
        // allocation covers the written range, not the whole file.
        let dir = tempfile::tempdir().unwrap();
        let (size, offset, count) = (4096, 1 << 20, 64);
        let with = FsyncParams {
            size,
            offset,
            count,
            prealloc: true,
            ..params(dir.path())
        };
        run(&with).unwrap();
        let meta = std::fs::metadata(&with.path).unwrap();
        assert_eq!(meta.len(), offset + size * count);
        assert!(meta.blocks() * 512 >= size * count);

        let without = FsyncParams {
            path: dir.path().join("sparse").display().to_string(),
            prealloc: false,
            advance: true,
            ..with
        };
        run(&without).unwrap();
        let meta = std::fs::metadata(&without.path).unwrap();
        assert_eq!(meta.len(), offset + size * count);
        // The hole before `offset` is not allocated.
        assert!(meta.blocks() * 512 < offset + size * count);
    }

    #[test]
    fn open_flags_per_mode() {
        let base = libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC;
        let mut p = FsyncParams::new("/x");
        for (sync, dsync) in [
            (SyncMode::Fdatasync, false),
            (SyncMode::Fsync, false),
            (SyncMode::Dsync, true),
            (SyncMode::None, false),
        ] {
            for direct in [false, true] {
                p.sync = sync;
                p.direct = direct;
                let f = open_flags(&p);
                assert_eq!(f & base, base);
                assert_eq!(f & libc::O_DSYNC == libc::O_DSYNC, dsync, "{sync:?}");
                assert_eq!(f & libc::O_DIRECT != 0, direct, "{sync:?} direct={direct}");
            }
        }
    }

    #[test]
    fn every_sync_mode_runs() {
        let dir = tempfile::tempdir().unwrap();
        for sync in [
            SyncMode::Fdatasync,
            SyncMode::Fsync,
            SyncMode::Dsync,
            SyncMode::None,
        ] {
            let r = run(&FsyncParams {
                sync,
                ..params(dir.path())
            })
            .unwrap();
            assert_eq!(r.ops, 20, "{sync:?}");
        }
    }

    #[test]
    fn invalid_parameters_are_rejected_before_the_file_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let p = params(dir.path());
        let cases = [
            (
                FsyncParams {
                    size: 0,
                    ..p.clone()
                },
                "size",
            ),
            (
                FsyncParams {
                    count: 0,
                    ..p.clone()
                },
                "count",
            ),
            (
                FsyncParams {
                    offset: u64::MAX - 1,
                    ..p.clone()
                },
                "offset",
            ),
            (
                FsyncParams {
                    direct: true,
                    size: 100,
                    ..p.clone()
                },
                "size must be a multiple of",
            ),
            (
                FsyncParams {
                    direct: true,
                    size: 4096,
                    offset: 100,
                    ..p.clone()
                },
                "offset must be a multiple of",
            ),
        ];
        for (bad, needle) in cases {
            let err = run(&bad).err().expect("must fail").to_string();
            assert!(err.contains(needle), "{err:?} lacks {needle:?}");
            assert!(
                !Path::new(&p.path).exists(),
                "{err} but the file was created"
            );
        }
    }

    #[test]
    fn alignment_check_names_the_alignment() {
        let p = FsyncParams {
            size: 1024,
            offset: 4096,
            ..FsyncParams::new("/x")
        };
        assert!(check_alignment(&p, 512).is_ok());
        let err = check_alignment(&p, 4096).unwrap_err().to_string();
        assert!(
            err.contains("size must be a multiple of 4096 bytes"),
            "{err}"
        );
        assert!(err.contains("got 1024"), "{err}");
        let p = FsyncParams { offset: 512, ..p };
        let err = check_alignment(&p, 1024).unwrap_err().to_string();
        assert!(
            err.contains("offset must be a multiple of 1024 bytes"),
            "{err}"
        );
    }

    #[test]
    fn direct_alignment_is_a_power_of_two_of_at_least_512() {
        let dir = tempfile::tempdir().unwrap();
        for path in [dir.path().join("missing"), dir.path().to_path_buf()] {
            let a = direct_alignment(&path).unwrap();
            assert!(a >= 512 && a.is_power_of_two(), "{a}");
        }
    }

    #[test]
    fn einval_on_direct_open_says_o_direct_is_unsupported() {
        let einval = || io::Error::from_raw_os_error(libc::EINVAL);
        let err = open_error(Path::new("/dev/shm/f"), true, einval());
        assert!(matches!(err, FsyncError::DirectUnsupported { .. }));
        let msg = err.to_string();
        assert!(msg.contains("/dev/shm/f does not accept O_DIRECT"), "{msg}");
        let err = open_error(Path::new("/dev/shm/f"), false, einval());
        assert!(matches!(err, FsyncError::Io { op: "open", .. }), "{err}");
    }

    #[test]
    fn direct_on_tmpfs_runs_or_fails_clearly() {
        // tmpfs accepts O_DIRECT since Linux 6.6 and refused it with EINVAL before.
        let Ok(dir) = tempfile::tempdir_in("/dev/shm") else {
            return;
        };
        let p = FsyncParams {
            direct: true,
            size: 4096,
            count: 5,
            ..params(dir.path())
        };
        match run(&p) {
            Ok(r) => assert_eq!(r.ops, 5),
            Err(e @ FsyncError::DirectUnsupported { .. }) => {
                assert!(e.to_string().contains("O_DIRECT"), "{e}")
            }
            Err(e) => panic!("unexpected error: {e}"),
        }
    }

    #[test]
    fn direct_writes_land() {
        let dir = tempfile::tempdir().unwrap();
        let p = FsyncParams {
            direct: true,
            size: 4096,
            offset: 8192,
            count: 8,
            advance: true,
            ..params(dir.path())
        };
        match run(&p) {
            Ok(r) => {
                assert_eq!(r.ops, 8);
                all_lowercase(Path::new(&p.path), 8192, 8192 + 4096 * 8);
            }
            // A temp dir on a filesystem without O_DIRECT: nothing more to check here.
            Err(FsyncError::DirectUnsupported { .. }) => {}
            Err(e) => panic!("unexpected error: {e}"),
        }
    }

    #[test]
    fn io_errors_name_operation_and_path() {
        let p = FsyncParams::new("/nonexistent-dir/f");
        let msg = run(&p).err().unwrap().to_string();
        assert!(msg.starts_with("open /nonexistent-dir/f: "), "{msg}");
        assert!(msg.contains("os error"), "{msg}");
    }

    #[test]
    fn a_failing_write_is_an_error_naming_pwrite() {
        // /dev/full takes the open and refuses every write with ENOSPC.
        let p = FsyncParams {
            prealloc: false,
            ..FsyncParams::new("/dev/full")
        };
        let msg = run(&p).err().unwrap().to_string();
        assert!(msg.starts_with("pwrite /dev/full: "), "{msg}");
        assert!(msg.contains("No space left on device"), "{msg}");
    }

    #[test]
    fn a_short_write_is_finished_at_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = File::create(&path).unwrap();
        // As if pwrite had written 2 of the 5 bytes at offset 3.
        write_rest(&file, b"abcde", 3, 2).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"\0\0\0\0\0cde");
        // A whole write after EINTR (-1 with errno EINTR).
        set_errno(libc::EINTR);
        write_rest(&file, b"xyz", 0, -1).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"xyz\0\0cde");
        // Any other errno is the error.
        set_errno(libc::EIO);
        let e = write_rest(&file, b"xyz", 0, -1).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
    }

    #[test]
    fn an_interrupted_sync_is_made_again_and_another_error_returned() {
        let calls = std::cell::Cell::new(0);
        // Interrupted twice, then done.
        let flaky = |_| {
            calls.set(calls.get() + 1);
            if calls.get() < 3 {
                set_errno(libc::EINTR);
                -1
            } else {
                0
            }
        };
        set_errno(libc::EINTR);
        sync_again(0, &flaky).unwrap();
        assert_eq!(calls.get(), 3);
        let broken = |_| {
            set_errno(libc::EIO);
            -1
        };
        set_errno(libc::EINTR);
        let e = sync_again(0, &broken).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
    }

    fn set_errno(e: libc::c_int) {
        // SAFETY: the calling thread's errno, a plain int glibc keeps per thread.
        unsafe { *libc::__errno_location() = e };
    }

    #[test]
    fn samples_rows_and_histogram_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let r = run(&FsyncParams {
            count: 50,
            ..params(dir.path())
        })
        .unwrap();
        let rows = r.samples();
        let names: Vec<(&str, &str)> = rows
            .iter()
            .map(|(n, _, u, _)| (n.as_str(), u.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("latency.mean", "s"),
                ("latency.p50", "s"),
                ("latency.p90", "s"),
                ("latency.p99", "s"),
                ("latency.p99.9", "s"),
                ("latency.max", "s"),
                ("latency.min", "s"),
                ("ops_per_s", "op/s"),
                ("total", "s"),
                ("ops", "1"),
                ("latency", "s"),
            ]
        );
        let value = |name: &str| rows.iter().find(|r| r.0 == name).unwrap().1;
        let with_bytes: Vec<_> = rows.iter().filter(|r| !r.3.is_empty()).collect();
        assert_eq!(with_bytes.len(), 1);
        assert_eq!(with_bytes[0].0, "latency");
        assert_eq!(with_bytes[0].1, value("latency.mean"));

        let h = deserialize_histogram(&with_bytes[0].3).unwrap();
        assert_eq!(h.len(), 50);
        assert_eq!(h.max(), r.histogram.max());
        assert_eq!(h, r.histogram);

        let ladder = [
            "latency.min",
            "latency.p50",
            "latency.p90",
            "latency.p99",
            "latency.p99.9",
            "latency.max",
        ];
        for w in ladder.windows(2) {
            assert!(value(w[0]) <= value(w[1]), "{} > {}", w[0], w[1]);
        }
        assert!(value("latency.min") > 0.0);
        assert_eq!(value("ops"), 50.0);
        assert!((value("ops_per_s") * value("total") - 50.0).abs() < 1e-6);
    }

    #[test]
    fn deserialize_rejects_garbage() {
        assert!(matches!(
            deserialize_histogram(b"not a histogram"),
            Err(FsyncError::Histogram(_))
        ));
    }

    #[test]
    fn latencies_are_plausible_against_total() {
        let dir = tempfile::tempdir().unwrap();
        let r = run(&FsyncParams {
            count: 200,
            ..params(dir.path())
        })
        .unwrap();
        let mean_ns = r.histogram.mean();
        assert!(mean_ns > 0.0);
        let sum_ns = mean_ns * r.histogram.len() as f64;
        let total_ns = r.total.as_nanos() as f64;
        assert!(
            total_ns >= sum_ns * 0.9,
            "total {total_ns} < 0.9 * {sum_ns}"
        );
        // And the loop adds little beyond the operations it times.
        assert!(
            total_ns <= sum_ns * 2.0 + 1e6,
            "total {total_ns} vs {sum_ns}"
        );
    }

    /// Ticks become ns at the measured rate, within the histogram's 3 significant digits,
    /// with every count kept.
    #[test]
    fn tick_histograms_convert_to_ns() {
        let mut ticks = Histogram::<u64>::new_with_bounds(1, MAX_LATENCY_NS * 8, SIGFIG).unwrap();
        ticks.record_n(3_000, 700).unwrap();
        ticks.record_n(2_400_000, 300).unwrap();
        let ns = in_ns(&ticks, 1.0 / 2.4).unwrap(); // a 2.4 GHz counter
        assert_eq!(ns.len(), 1000);
        let close = |a: f64, b: f64| (a - b).abs() <= b * 2e-3;
        assert!(
            close(ns.value_at_quantile(0.5) as f64, 1_250.0),
            "{}",
            ns.value_at_quantile(0.5)
        );
        assert!(close(ns.max() as f64, 1_000_000.0), "{}", ns.max());
        assert!(close(ns.min() as f64, 1_250.0), "{}", ns.min());
        // The monotonic clock's ticks are ns already.
        assert_eq!(Monotonic::new().ns_per_tick(0, Instant::now()), 1.0);
    }

    /// On x86-64 with the kernel keeping time by the TSC, the TSC's measured rate is that
    /// of the monotonic clock's ns (a GHz-range counter), and a short wait measured in
    /// ticks agrees with `Instant`.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_tsc_rate_is_measured_against_the_monotonic_clock() {
        if LoopClock::detect() != LoopClock::Tsc {
            eprintln!("clocksource is not tsc here; the loop uses CLOCK_MONOTONIC");
            return;
        }
        let (t0, i0) = (Tsc.now(), Instant::now());
        let rate = Tsc.ns_per_tick(t0, i0);
        assert!((0.1..2.0).contains(&rate), "{rate} ns per tick");
        // The two clocks are read one after the other: a preemption between the reads
        // (a loaded machine) skews one attempt, not the rate, so the best of five counts.
        let mut seen = Vec::new();
        for _ in 0..5 {
            let (t1, i1) = (Tsc.now(), Instant::now());
            std::thread::sleep(Duration::from_millis(30));
            let by_ticks = (Tsc.now() - t1) as f64 * rate;
            let by_instant = i1.elapsed().as_nanos() as f64;
            if (by_ticks - by_instant).abs() < by_instant * 0.01 {
                return;
            }
            seen.push(format!("{by_ticks:.0} vs {by_instant:.0} ns"));
        }
        panic!("the TSC disagrees with CLOCK_MONOTONIC by 1% or more: {seen:?}");
    }

    #[test]
    fn lowercase_data_is_varied() {
        let mut buf = [0u8; 4096];
        fill_lowercase(&mut buf);
        assert!(buf.iter().all(u8::is_ascii_lowercase));
        let distinct: std::collections::HashSet<u8> = buf.iter().copied().collect();
        assert_eq!(distinct.len(), 26);
    }
}
