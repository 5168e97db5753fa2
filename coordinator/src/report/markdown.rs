//! GitHub-flavoured Markdown: a heading per host and a pipe table.

use super::{rows, Exporter, Report};

pub struct Markdown;

impl Exporter for Markdown {
    fn render(&self, r: &Report) -> String {
        let (header, rows) = rows(r);
        let esc = |s: &String| s.replace('|', "\\|");
        let line = |cells: &[String]| {
            format!(
                "| {} |\n",
                cells.iter().map(esc).collect::<Vec<_>>().join(" | ")
            )
        };
        let mut out = format!("# {} (`{}`, {})\n", r.name, r.campaign_id, r.state);
        let mut host: Option<&str> = None;
        for (h, row) in &rows {
            if host != Some(h.as_str()) {
                out.push_str(&format!("\n## {h}\n\n"));
                out.push_str(&line(&header));
                out.push_str(&format!("|{}\n", "---|".repeat(header.len())));
                host = Some(h);
            }
            out.push_str(&line(row));
        }
        if let Some((title, header, rows)) = super::pivot_text(r) {
            out.push_str(&format!("\n## {title}\n\n"));
            out.push_str(&line(&header));
            out.push_str(&format!("|{}\n", "---|".repeat(header.len())));
            for row in &rows {
                out.push_str(&line(row));
            }
        }
        let ran_on = super::provenance::lines(&r.provenance, &r.devices_used);
        if !ran_on.is_empty() {
            out.push_str("\n## Ran on\n\n");
            for l in ran_on {
                out.push_str(&format!("* {}\n", l.trim_start()));
            }
        }
        let notes = super::notes(r);
        if !notes.is_empty() {
            out.push('\n');
            for n in notes {
                out.push_str(&format!("* {n}\n"));
            }
        }
        for refusal in &r.refused {
            out.push_str(&format!(
                "\n**{} refused the plan, nothing ran:** {}\n",
                refusal.host, refusal.reason
            ));
        }
        if r.steps_failed > 0 {
            out.push_str(&format!("\n**{} step(s) failed:**\n\n", r.steps_failed));
            for f in r.failures.iter().take(super::MAX_FAILURES_SHOWN) {
                out.push_str(&format!("* {}\n", f.headline().replace('|', "\\|")));
            }
            let more = r.failures.len().saturating_sub(super::MAX_FAILURES_SHOWN);
            if more > 0 {
                out.push_str(&format!(
                    "* … and {more} more (the JSON report lists every one)\n"
                ));
            }
        }
        out
    }
}
