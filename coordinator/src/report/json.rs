//! JSON with a schema version, for scripts.

use std::io::Write;

use super::{Exporter, Report};

pub struct Json;

impl Exporter for Json {
    fn render(&self, r: &Report) -> String {
        serde_json::to_string_pretty(r).expect("reports serialize") + "\n"
    }

    fn write(&self, r: &Report, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        // serde_json writes a pretty report a few bytes at a time (each indent, key and
        // value): through `dyn Write` every one was a call through a vtable (~14% of the
        // CPU samples of a report over 1M samples). A buffer of a type it knows takes them
        // inline and passes them on 64 KiB at a time: 4–10% less wall time (BENCHMARKS.md).
        let mut buffered = std::io::BufWriter::with_capacity(1 << 16, out);
        serde_json::to_writer_pretty(&mut buffered, r)?;
        buffered.write_all(b"\n")?;
        buffered.flush()
    }
}
