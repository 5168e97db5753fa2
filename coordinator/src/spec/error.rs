//! The one error type of the spec module and the helpers that build it; it
//! carries a position and a key path so a user can fix the file without
//! guessing, and it must not know anything about campaigns itself.

use std::fmt;

/// A campaign file was rejected: where, and why.
///
/// `line` and `column` are 1-based and point at the offending node (the key
/// for an unknown key, the value for a wrong value, the element for a bad list
/// item). They are 0 only when the file could not be read at all. `path` is
/// the key path (`matrix.bs[1]`, `workload.command.run`); it is empty for the
/// document root, which [`fmt::Display`] shows as `(top)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct SpecError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub path: String,
    pub message: String,
    pub hint: Option<String>,
}

impl SpecError {
    fn render(&self) -> Rendered<'_> {
        Rendered(self)
    }

    /// The path as shown to users: the root has no key, so it gets a name.
    pub fn shown_path(&self) -> &str {
        if self.path.is_empty() {
            "(top)"
        } else {
            &self.path
        }
    }
}

struct Rendered<'a>(&'a SpecError);

impl fmt::Display for Rendered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.0;
        if e.line == 0 {
            // The file could not be read: there is no position, so none is made up.
            return write!(f, "{}: {}", e.file, e.message);
        }
        write!(
            f,
            "{}:{}:{}: {}: {}",
            e.file,
            e.line,
            e.column,
            e.shown_path(),
            e.message
        )?;
        if let Some(hint) = &e.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

/// How many mistakes are shown; the rest are counted ("and 12 more").
pub const MAX_SHOWN: usize = 50;

/// Every mistake found in a campaign file, in file order (line, then column);
/// never empty. Displayed one `error: ` paragraph per mistake, at most
/// [`MAX_SHOWN`] of them.
///
/// Checks that need an earlier part to be valid run only when it is: the
/// matrix is expanded only from a file whose keys, types and values are all
/// right, and per-cell values are judged only for a matrix that expanded; so a
/// file is fixed in at most a few rounds, each listing everything it can.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render(MAX_SHOWN, usize::MAX))]
pub struct SpecErrors {
    errors: Vec<SpecError>,
}

impl SpecErrors {
    /// Sorts by position (stable: mistakes at one place keep the order they were
    /// found in) and drops exact repeats.
    pub(crate) fn new(mut errors: Vec<SpecError>) -> SpecErrors {
        assert!(!errors.is_empty(), "SpecErrors holds at least one error");
        errors.sort_by_key(|e| (e.line, e.column));
        errors.dedup();
        SpecErrors { errors }
    }

    /// The first mistake in the file.
    pub fn first(&self) -> &SpecError {
        &self.errors[0]
    }

    pub fn all(&self) -> &[SpecError] {
        &self.errors
    }

    pub fn len(&self) -> usize {
        self.errors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// Sets the file name every error is reported in.
    pub(crate) fn in_file(mut self, file: &str) -> SpecErrors {
        for e in &mut self.errors {
            e.file = file.to_string();
        }
        self
    }

    /// At most `count` mistakes in at most `bytes` bytes as a gRPC status message
    /// carries them (percent-encoded as tonic does: a space, backtick, brace, newline
    /// or non-ASCII byte takes three), then how many more there are; at least one is
    /// always shown. The budget is for a status, which travels in an HTTP/2 header that
    /// hyper's client limits to 16 KiB.
    pub fn render(&self, count: usize, bytes: usize) -> String {
        let encoded = |s: &str| -> usize {
            s.bytes()
                .map(|b| match b {
                    b' ' | b'"' | b'#' | b'%' | b'<' | b'>' | b'`' | b'?' | b'{' | b'}' => 3,
                    0x21..0x7f => 1,
                    _ => 3,
                })
                .sum()
        };
        let mut out = String::new();
        let (mut shown, mut used) = (0, 0);
        for e in &self.errors {
            let one = format!("error: {e}\n");
            let size = encoded(&one);
            if shown > 0 && (shown == count || used + size > bytes) {
                break;
            }
            out.push_str(&one);
            used += size;
            shown += 1;
        }
        let more = self.errors.len() - shown;
        if more > 0 {
            out.push_str(&format!(
                "error: … and {more} more mistake{} in {} (the first {shown} of {} are shown)\n",
                if more == 1 { "" } else { "s" },
                self.errors[0].file,
                self.errors.len()
            ));
        }
        out.pop(); // the last newline; the caller's println! adds it back
        out
    }
}

impl From<SpecError> for SpecErrors {
    fn from(e: SpecError) -> SpecErrors {
        SpecErrors { errors: vec![e] }
    }
}

/// Mistakes found so far while reading a file: a reader records one and goes on
/// with the next part that does not depend on it.
#[derive(Debug, Default)]
pub(crate) struct Errors(Vec<SpecError>);

impl Errors {
    pub fn push(&mut self, e: SpecError) {
        self.0.push(e);
    }

    /// The value, or `None` with its error recorded.
    pub fn ok<T>(&mut self, r: Result<T>) -> Option<T> {
        r.map_err(|e| self.0.push(e)).ok()
    }

    /// How many are recorded, to tell later whether a part added any.
    pub fn count(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `value` if nothing was recorded since `count` was taken.
    pub fn clean_since<T>(&self, count: usize, value: T) -> Option<T> {
        (self.0.len() == count).then_some(value)
    }

    /// The errors recorded; call it only when there is one (it panics otherwise).
    pub fn finish(self) -> SpecErrors {
        SpecErrors::new(self.0)
    }
}

/// A 1-based line and column in the campaign text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Pos {
    pub line: usize,
    pub column: usize,
}

/// Builds an error whose `file` is filled in by [`super::parse`], so the
/// layers below never need to carry the file name around.
pub(crate) fn error(pos: Pos, path: &str, message: impl Into<String>) -> SpecError {
    SpecError {
        file: String::new(),
        line: pos.line,
        column: pos.column,
        path: path.to_string(),
        message: message.into(),
        hint: None,
    }
}

pub(crate) trait WithHint {
    fn hint(self, hint: impl Into<String>) -> Self;
    fn maybe_hint(self, hint: Option<String>) -> Self;
}

impl WithHint for SpecError {
    fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
    fn maybe_hint(mut self, hint: Option<String>) -> Self {
        self.hint = hint;
        self
    }
}

pub(crate) type Result<T, E = SpecError> = std::result::Result<T, E>;

/// The closest candidate to a misspelt word, if it is close enough to be a
/// plausible typo rather than a different word altogether.
pub(crate) fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let word = word.to_lowercase();
    candidates
        .iter()
        .map(|c| (strsim::damerau_levenshtein(&word, &c.to_lowercase()), *c))
        // One edit per three characters, at least one: `rnu` → `run`,
        // `repet` → `repeat`, but `size` does not become `seed`.
        .filter(|(d, c)| *d <= (c.chars().count() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// "did you mean `x`?" when a candidate is close, else the full list, so an
/// error about a name always tells the user what would have been accepted.
pub(crate) fn suggest(word: &str, candidates: &[&str], what: &str) -> Option<String> {
    if let Some(c) = closest(word, candidates) {
        return Some(format!("did you mean `{c}`?"));
    }
    if candidates.is_empty() {
        return None;
    }
    Some(format!("{what}: {}", backticked(candidates)))
}

pub(crate) fn backticked(items: &[&str]) -> String {
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
