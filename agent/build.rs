//! Builds `spawn/helper.rs`, the tiny static program that forks every workload (see
//! `process::spawn`), with the same `rustc` and target, into `$OUT_DIR/platter-spawn`.
//! It has no dependencies and no libc, so it needs no crate and no C compiler, only the
//! linker every Rust build of the agent already uses.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let src = "spawn/helper.rs";
    println!("cargo:rerun-if-changed={src}");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let target = env::var("TARGET").expect("cargo sets TARGET");
    let mut cmd = Command::new(rustc);
    cmd.args([
        "--edition=2021",
        "--crate-type=bin",
        "--crate-name=platter_spawn",
    ])
    .args(["--target", &target])
    .args([
        "-C",
        "panic=abort",
        "-C",
        "opt-level=s",
        "-C",
        "strip=symbols",
    ])
    // Static and position-dependent: no interpreter, no relocations to apply.
    .args([
        "-C",
        "relocation-model=static",
        "-C",
        "target-feature=+crt-static",
    ])
    .args(["-C", "link-arg=-nostartfiles", "-C", "link-arg=-nostdlib"])
    .args([
        "-C",
        "link-arg=-static",
        "-C",
        "link-arg=-Wl,--build-id=none",
    ]);
    // A cross build names its linker the way cargo would use it for the agent itself.
    let linker_var = format!(
        "CARGO_TARGET_{}_LINKER",
        target.to_uppercase().replace(['-', '.'], "_")
    );
    if let Some(linker) = env::var_os(&linker_var) {
        cmd.arg("-C").arg({
            let mut a = std::ffi::OsString::from("linker=");
            a.push(linker);
            a
        });
    }
    println!("cargo:rerun-if-env-changed={linker_var}");
    let status = cmd
        .arg("-o")
        .arg(out.join("platter-spawn"))
        .arg(src)
        .status()
        .expect("running rustc for the spawn helper");
    assert!(status.success(), "building {src} failed: {status}");
}
