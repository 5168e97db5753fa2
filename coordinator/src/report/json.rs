//! JSON with a schema version, for scripts.

use super::{Exporter, Report};

pub struct Json;

impl Exporter for Json {
    fn render(&self, r: &Report) -> String {
        serde_json::to_string_pretty(r).expect("reports serialize") + "\n"
    }

    fn write(&self, r: &Report, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, r)?;
        out.write_all(b"\n")
    }
}
