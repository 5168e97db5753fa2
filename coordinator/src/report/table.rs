//! Aligned plain-text table for terminals, one block per host.

use super::{aligned, rows, widths, Exporter, Report};

pub struct Table;

impl Exporter for Table {
    fn render(&self, r: &Report) -> String {
        let (header, rows) = rows(r);
        let column_widths = widths(&header, rows.iter().map(|(_, row)| row));
        let line = |cells: &[String]| aligned(cells, &column_widths, "  ", " ") + "\n";
        let mut out = format!(
            "campaign {} ({}): {}, repeat {}\n",
            r.name, r.campaign_id, r.state, r.repeat
        );
        let mut host: Option<&str> = None;
        for (h, row) in &rows {
            if host != Some(h.as_str()) {
                out.push_str(&format!("\nhost {h}\n"));
                out.push_str(&line(&header));
                host = Some(h);
            }
            out.push_str(&line(row));
        }
        if let Some((title, header, rows)) = super::pivot_text(r) {
            let widths = widths(&header, &rows);
            let line = |cells: &[String]| aligned(cells, &widths, "  ", "  ") + "\n";
            out.push_str(&format!("\n{title}\n"));
            out.push_str(&line(&header));
            for row in &rows {
                out.push_str(&line(row));
            }
        }
        let notes = super::notes(r);
        if !notes.is_empty() {
            out.push('\n');
            for n in notes {
                out.push_str(&format!("  {n}\n"));
            }
        }
        for refusal in &r.refused {
            out.push_str(&format!(
                "\nhost {} refused the plan, nothing ran: {}\n",
                refusal.host, refusal.reason
            ));
        }
        if r.steps_failed > 0 {
            out.push_str(&format!("\n{} step(s) failed:\n", r.steps_failed));
            for f in &r.failures {
                out.push_str(&format!(
                    "  {} {} (repetition {}): {}\n",
                    f.host, f.step, f.repetition, f.error
                ));
                for l in f
                    .stderr_tail
                    .lines()
                    .rev()
                    .take(3)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                {
                    out.push_str(&format!("      {l}\n"));
                }
            }
        }
        out
    }
}
