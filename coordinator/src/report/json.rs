//! JSON with a schema version, for scripts.

use super::{Exporter, Report};

pub struct Json;

impl Exporter for Json {
    fn render(&self, r: &Report) -> String {
        serde_json::to_string_pretty(r).expect("reports serialize") + "\n"
    }
}
