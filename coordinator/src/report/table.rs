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
        let ran_on = super::provenance::lines(&r.provenance, &r.devices_used);
        if !ran_on.is_empty() {
            out.push_str("\nran on\n");
            for l in ran_on {
                out.push_str(&format!("  {l}\n"));
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
            for f in r.failures.iter().take(super::MAX_FAILURES_SHOWN) {
                out.push_str(&format!("  {}\n", f.headline()));
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
            if let Some(more) = r.failures.len().checked_sub(super::MAX_FAILURES_SHOWN) {
                if more > 0 {
                    out.push_str(&format!(
                        "  … and {more} more (`--format json` lists every one)\n"
                    ));
                }
            }
        }
        out
    }
}

/// Colour for a terminal: verdicts red or green, outliers and warnings yellow, host
/// headings bold. Applied to the rendered table by the CLI, only when stdout is a terminal
/// and NO_COLOR is unset, so files, pipes and scripts get the plain text.
pub fn colorize(text: &str) -> String {
    const RED: &str = "\x1b[31m";
    const GREEN: &str = "\x1b[32m";
    const YELLOW: &str = "\x1b[33m";
    const BOLD: &str = "\x1b[1m";
    const RESET: &str = "\x1b[0m";
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let body = line.trim_start();
        let colour = if body.starts_with("FAIL ") || body.starts_with("qualification: FAIL") {
            Some(RED)
        } else if body.starts_with("qualification: PASS") {
            Some(GREEN)
        } else if body.starts_with("outlier: ") || body.contains(": warning: ") {
            Some(YELLOW)
        } else if line.starts_with("host ") {
            Some(BOLD)
        } else {
            None
        };
        match colour {
            Some(c) => {
                let (content, newline) = match line.strip_suffix('\n') {
                    Some(l) => (l, "\n"),
                    None => (line, ""),
                };
                out.push_str(c);
                out.push_str(content);
                out.push_str(RESET);
                out.push_str(newline);
            }
            None => out.push_str(line),
        }
    }
    out
}

#[cfg(test)]
mod colour_tests {
    use super::colorize;

    #[test]
    fn verdicts_and_warnings_are_coloured_and_the_rest_is_untouched() {
        let text = "host rc66\n  loop0  wall  3 1.0 s\n  qualification: FAIL (1 of 3 checks)\n  FAIL flygecko loop2 [size=4096]: latency.p99 < 20ms (measured 103.22 ms)\n  rc66 size=1: warning: wall: CV 9%\n  qualification: PASS (3 checks)";
        let c = colorize(text);
        let lines: Vec<&str> = c.lines().collect();
        assert_eq!(lines[0], "\x1b[1mhost rc66\x1b[0m");
        assert_eq!(lines[1], "  loop0  wall  3 1.0 s");
        assert!(
            lines[2].starts_with("\x1b[31m  qualification: FAIL") && lines[2].ends_with("\x1b[0m")
        );
        assert!(lines[3].starts_with("\x1b[31m  FAIL flygecko"));
        assert!(lines[4].starts_with("\x1b[33m"));
        assert_eq!(lines[5], "\x1b[32m  qualification: PASS (3 checks)\x1b[0m");
        // Without colour codes it is the same text.
        assert_eq!(
            c.replace("\x1b[31m", "")
                .replace("\x1b[32m", "")
                .replace("\x1b[33m", "")
                .replace("\x1b[1m", "")
                .replace("\x1b[0m", ""),
            text
        );
    }
}
