//! GitHub-flavoured Markdown: a heading per host and a pipe table.

use super::markup::{self, Grid, Heading, Markup};
use super::{Exporter, Failure, Report};

pub struct Markdown;

impl Exporter for Markdown {
    fn render(&self, r: &Report) -> String {
        markup::render(self, r)
    }
}

/// A `|` in text would end a table cell.
fn esc(s: &str) -> String {
    s.replace('|', "\\|")
}

impl Markup for Markdown {
    type Columns = ();

    fn title(&self, r: &Report) -> String {
        format!("# {} (`{}`, {})\n", r.name, r.campaign_id, r.state)
    }

    fn heading(&self, h: Heading<'_>) -> String {
        match h {
            Heading::Host(text) | Heading::Pivot(text) => format!("\n## {text}\n\n"),
            Heading::RanOn => "\n## Ran on\n\n".into(),
        }
    }

    fn columns<'a>(&self, _: Grid, _: &[String], _: impl IntoIterator<Item = &'a Vec<String>>) {}

    fn header(&self, cells: &[String], columns: &()) -> String {
        self.row(cells, columns) + &format!("|{}\n", "---|".repeat(cells.len()))
    }

    fn row(&self, cells: &[String], _: &()) -> String {
        let cells: Vec<String> = cells.iter().map(|c| esc(c)).collect();
        format!("| {} |\n", cells.join(" | "))
    }

    fn item(&self, text: &str) -> String {
        format!("* {text}\n")
    }

    /// Leading spaces trimmed: the item's text starts right after its bullet.
    fn ran_on(&self, line: &str) -> String {
        self.item(line.trim_start())
    }

    fn refusal(&self, host: &str, reason: &str) -> String {
        format!("\n**{host} refused the plan, nothing ran:** {reason}\n")
    }

    fn failed(&self, steps: u32) -> String {
        format!("\n**{steps} step(s) failed:**\n\n")
    }

    fn failure(&self, f: &Failure) -> String {
        self.item(&esc(&f.headline()))
    }

    fn more_failures(&self, more: usize) -> String {
        self.item(&format!(
            "… and {more} more (the JSON report lists every one)"
        ))
    }
}
