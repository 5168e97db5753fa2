//! Aligned plain-text table for terminals, one block per host.

use super::markup::{self, Grid, Heading, Markup};
use super::notes::{tone_of_line, Tone};
use super::{aligned, widths, Exporter, Failure, Report};

pub struct Table;

/// The start of a host's heading and of a refusal: both name the host first.
const HOST: &str = "host ";

impl Exporter for Table {
    fn render(&self, r: &Report) -> String {
        markup::render(self, r)
    }
}

impl Markup for Table {
    /// Each column's width, and what separates columns.
    type Columns = (Vec<usize>, &'static str);

    fn title(&self, r: &Report) -> String {
        format!(
            "campaign {} ({}): {}, repeat {}\n",
            r.name,
            r.campaign_id,
            r.state,
            r.repeat_text()
        )
    }

    fn heading(&self, h: Heading<'_>) -> String {
        match h {
            Heading::Host(host) => format!("\n{HOST}{host}\n"),
            Heading::Pivot(title) => format!("\n{title}\n"),
            Heading::RanOn => "\nran on\n".into(),
        }
    }

    fn columns<'a>(
        &self,
        grid: Grid,
        header: &[String],
        rows: impl IntoIterator<Item = &'a Vec<String>>,
    ) -> Self::Columns {
        let sep = match grid {
            Grid::Hosts => " ",
            Grid::Pivot => "  ",
        };
        (widths(header, rows), sep)
    }

    fn header(&self, cells: &[String], columns: &Self::Columns) -> String {
        self.row(cells, columns)
    }

    fn row(&self, cells: &[String], (widths, sep): &Self::Columns) -> String {
        aligned(cells, widths, "  ", sep) + "\n"
    }

    fn item(&self, text: &str) -> String {
        format!("  {text}\n")
    }

    fn refusal(&self, host: &str, reason: &str) -> String {
        format!("\n{HOST}{host} refused the plan, nothing ran: {reason}\n")
    }

    fn failed(&self, steps: u32) -> String {
        format!("\n{steps} step(s) failed:\n")
    }

    /// The headline and the last three lines of the step's stderr.
    fn failure(&self, f: &Failure) -> String {
        let mut out = self.item(&f.headline());
        let tail: Vec<&str> = f.stderr_tail.lines().rev().take(3).collect();
        for l in tail.into_iter().rev() {
            out.push_str(&format!("      {l}\n"));
        }
        out
    }

    fn more_failures(&self, more: usize) -> String {
        self.item(&format!(
            "… and {more} more (`--format json` lists every one)"
        ))
    }
}

/// Colour for a terminal: verdicts red or green, outliers and warnings yellow, host
/// headings bold. Applied to the rendered table by the CLI, only when stdout is a terminal
/// and NO_COLOR is unset, so files, pipes and scripts get the plain text. A coordinator
/// sends the table rendered, so the tones are read back from the lines' openings, which
/// `notes` and this file write from the same constants.
pub fn colorize(text: &str) -> String {
    const RED: &str = "\x1b[31m";
    const GREEN: &str = "\x1b[32m";
    const YELLOW: &str = "\x1b[33m";
    const BOLD: &str = "\x1b[1m";
    const RESET: &str = "\x1b[0m";
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let colour = match tone_of_line(line.trim_start()) {
            Tone::Bad => Some(RED),
            Tone::Good => Some(GREEN),
            Tone::Caution => Some(YELLOW),
            Tone::Plain if line.starts_with(HOST) => Some(BOLD),
            Tone::Plain => None,
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
