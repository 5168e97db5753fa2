//! The page's stylesheet and its one script, kept as files beside this one (`report.css`
//! and `report.js`) and compiled into the binary; a page carries each inline, as the file
//! is.

/// The page's stylesheet.
pub(super) const CSS: &str = include_str!("report.css");

/// Sorts a `table.sortable` by the clicked column: by `data-v` (the raw value) where a
/// cell has one, else by its text, numbers in text compared as numbers. The report's one
/// script: a page that serves the report allows it by its hash.
pub const SORT_SCRIPT: &str = include_str!("report.js");
