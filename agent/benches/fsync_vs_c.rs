//! Overhead benchmark: the Rust `fsync` workload's timed loop against the same loop in C
//! (`fsync-loop.c`), on tmpfs, where fdatasync costs only the syscall so any loop overhead shows.
//! It builds nothing: compile the C side first.
//!
//! ```text
//! gcc -O2 -o /tmp/loop agent/benches/fsync-loop.c
//! cargo bench -p platter-agent --bench fsync_vs_c -- /tmp/loop [DIR=/dev/shm] [RUNS=5] [COUNT=200000]
//! ```
//!
//! Prints each run, the median total of each side and the ratio rust/C (target <= 1.03), and
//! the same for the best run of each side.

use std::error::Error;
use std::path::PathBuf;
use std::process::Command;

use platter_agent::workloads::fsync::{run, FsyncParams, SyncMode};

fn main() -> Result<(), Box<dyn Error>> {
    // `cargo bench` appends `--bench`; options are not ours.
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let c_loop = args
        .next()
        .ok_or("usage: fsync-vs-c C_LOOP_BINARY [DIR] [RUNS] [COUNT]")?;
    let dir = PathBuf::from(args.next().unwrap_or_else(|| "/dev/shm".into()));
    let runs: usize = args.next().map_or(Ok(5), |s| s.parse())?;
    let count: u64 = args.next().map_or(Ok(200_000), |s| s.parse())?;

    let rust_file = dir.join(format!("fsync-vs-c.{}.rust", std::process::id()));
    let c_file = dir.join(format!("fsync-vs-c.{}.c", std::process::id()));
    let params = FsyncParams {
        path: rust_file.clone(),
        size: 1,
        offset: 0,
        count,
        sync: SyncMode::Fdatasync,
        direct: false,
        prealloc: true,
        advance: false,
    };

    let (mut rust_ns, mut c_ns) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let r = run(&params)?;
        let rust = r.total.as_nanos() as u64;
        rust_ns.push(rust);

        let out = Command::new(&c_loop)
            .arg(&c_file)
            .arg(count.to_string())
            .output()?;
        if !out.status.success() {
            return Err(format!(
                "{c_loop} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )
            .into());
        }
        let stdout = String::from_utf8(out.stdout)?;
        let c: u64 = stdout
            .split_whitespace()
            .next()
            .ok_or("no output from the C loop")?
            .parse()?;
        c_ns.push(c);
        println!(
            "run {i}: rust {:.1} ms ({:.0} ns/op)   C {:.1} ms ({:.0} ns/op)",
            rust as f64 / 1e6,
            rust as f64 / count as f64,
            c as f64 / 1e6,
            c as f64 / count as f64
        );
    }
    let _ = std::fs::remove_file(&rust_file);
    let _ = std::fs::remove_file(&c_file);

    let (rust, c) = (median(&mut rust_ns), median(&mut c_ns));
    println!(
        "median total: rust {:.1} ms, C {:.1} ms",
        rust / 1e6,
        c / 1e6
    );
    println!("ratio rust/C: {:.3}", rust / c);
    // Run-to-run noise on a shared VM is several percent; the best run of each side (the
    // seed's "best time") is a steadier second view of the same comparison.
    let (rust_min, c_min) = (rust_ns[0] as f64, c_ns[0] as f64);
    println!(
        "best total: rust {:.1} ms, C {:.1} ms, ratio {:.3}",
        rust_min / 1e6,
        c_min / 1e6,
        rust_min / c_min
    );
    Ok(())
}

fn median(v: &mut [u64]) -> f64 {
    v.sort_unstable();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2] as f64
    } else {
        (v[n / 2 - 1] + v[n / 2]) as f64 / 2.0
    }
}
