//! What the table and Markdown share: the order and structure of a text report (a title,
//! the hosts side by side when there are several, a table per host, the pivot, "ran on",
//! notes, refusals, failures), walked once by
//! `render`. A format says only how it writes a heading, a table line and a list item
//! (`Markup`); it decides nothing about what a report shows.

use super::notes::{findings, notes, Note};
use super::{
    details, findings_title, pivot_text, provenance, rows, Failure, Report, MAX_FAILURES_SHOWN,
};

/// What a section heading introduces.
pub(super) enum Heading<'a> {
    /// A host's table.
    Host(&'a str),
    /// The pivot or the side-by-side view, by its title.
    Pivot(&'a str),
    RanOn,
}

/// Which table: the hosts' (one table split by host headings) or the pivot.
pub(super) enum Grid {
    Hosts,
    Pivot,
}

/// The syntax of one text format.
pub(super) trait Markup {
    /// What a table's lines need to know of all its rows (for the plain table, the column
    /// widths).
    type Columns;

    /// The first line: the campaign, its id and state.
    fn title(&self, r: &Report) -> String;
    fn heading(&self, h: Heading<'_>) -> String;
    fn columns<'a>(
        &self,
        grid: Grid,
        header: &[String],
        rows: impl IntoIterator<Item = &'a Vec<String>>,
    ) -> Self::Columns;
    /// A table's header, after each heading that starts one.
    fn header(&self, cells: &[String], columns: &Self::Columns) -> String;
    fn row(&self, cells: &[String], columns: &Self::Columns) -> String;
    /// A list item: a note (warning, comparison, verdict), a failure, a line of "ran on".
    fn item(&self, text: &str) -> String;
    /// A note under the tables.
    fn note(&self, n: &Note<'_>) -> String {
        self.item(&n.to_string())
    }
    fn ran_on(&self, line: &str) -> String {
        self.item(line)
    }
    fn refusal(&self, host: &str, reason: &str) -> String;
    /// The heading of the failures: how many steps failed.
    fn failed(&self, steps: u32) -> String;
    fn failure(&self, f: &Failure) -> String;
    /// The failures past `MAX_FAILURES_SHOWN`, counted.
    fn more_failures(&self, more: usize) -> String;
}

pub(super) fn render(m: &impl Markup, r: &Report) -> String {
    let mut out = m.title(r);
    let findings = findings(r);
    if !findings.is_empty() {
        out.push_str(&m.heading(Heading::Pivot(&findings_title(r))));
        for f in findings {
            out.push_str(&m.item(&f.to_string()));
        }
    }
    if let Some(s) = &r.side_by_side {
        let (title, header, rows) = super::side::text(r, s);
        let columns = m.columns(Grid::Pivot, &header, &rows);
        out.push_str(&m.heading(Heading::Pivot(&title)));
        out.push_str(&m.header(&header, &columns));
        for row in &rows {
            out.push_str(&m.row(row, &columns));
        }
    }
    if let Some(since) = &r.since_last_run {
        out.push_str(&m.heading(Heading::Pivot(&since.title())));
        for l in &since.lines {
            out.push_str(&m.item(&l.text()));
        }
    }
    let (header, rows) = rows(r);
    let columns = m.columns(Grid::Hosts, &header, rows.iter().map(|(_, row)| row));
    let mut host: Option<&str> = None;
    for (h, row) in &rows {
        if host != Some(h.as_str()) {
            out.push_str(&m.heading(Heading::Host(h)));
            out.push_str(&m.header(&header, &columns));
            host = Some(h);
        }
        out.push_str(&m.row(row, &columns));
    }
    if let Some((title, header, rows)) = pivot_text(r) {
        let columns = m.columns(Grid::Pivot, &header, &rows);
        out.push_str(&m.heading(Heading::Pivot(&title)));
        out.push_str(&m.header(&header, &columns));
        for row in &rows {
            out.push_str(&m.row(row, &columns));
        }
    }
    let ran_on = provenance::lines(&r.provenance, &r.devices_used);
    if !ran_on.is_empty() {
        out.push_str(&m.heading(Heading::RanOn));
        for l in ran_on {
            out.push_str(&m.ran_on(&l.to_string()));
        }
    }
    if !r.health.is_empty() || !r.health_not_judged.is_empty() {
        out.push_str(&m.heading(Heading::Pivot(super::health::TITLE)));
        for d in &r.health {
            out.push_str(&m.item(&d.text()));
        }
        for n in &r.health_not_judged {
            out.push_str(&m.item(n));
        }
    }
    let notes = notes(r);
    if !notes.is_empty() {
        out.push('\n');
        for n in &notes {
            out.push_str(&m.note(n));
        }
    }
    for refusal in &r.refused {
        out.push_str(&m.refusal(&refusal.host, &refusal.reason));
    }
    if r.steps_failed > 0 {
        out.push_str(&m.failed(r.steps_failed));
        for f in r.failures.iter().take(MAX_FAILURES_SHOWN) {
            out.push_str(&m.failure(f));
        }
        let more = r.failures.len().saturating_sub(MAX_FAILURES_SHOWN);
        if more > 0 {
            out.push_str(&m.more_failures(more));
        }
    }
    let details = details(r);
    if !details.is_empty() {
        out.push_str(&m.heading(Heading::Pivot("details: each cell's advice")));
        for d in details {
            out.push_str(&m.item(&d));
        }
    }
    out
}
