//! Compiles `platter/v1/*.proto` with protox (pure Rust), so no `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["platter/v1/agent_link.proto", "platter/v1/control.proto"];
    for f in &files {
        println!("cargo:rerun-if-changed={f}");
    }
    println!("cargo:rerun-if-changed=platter/v1/common.proto");
    let descriptors = protox::compile(files, ["."])?;
    // Small per-stream buffers (src/codec.rs): a coordinator holds one stream per agent.
    tonic_prost_build::configure()
        .codec_path("crate::codec::SmallBuffers")
        .compile_fds(descriptors)?;
    Ok(())
}
