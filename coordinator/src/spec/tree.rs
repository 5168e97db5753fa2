//! YAML text → a tree of nodes that remember where they were written. Owns
//! YAML syntax errors and the YAML-level rules a campaign relies on (one
//! document, no duplicate keys, bounded aliases); knows nothing of campaigns.
//!
//! serde_yaml's `Value` has no positions, so the file is read once with
//! yaml-rust2's event parser instead, which gives every node its marker and
//! lets every later error point at the exact key or value.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use super::error::{error, Pos, Result, WithHint};

/// Deeper nesting than this is never a campaign; the limit keeps the
/// recursive walks below far from the stack's end.
const MAX_DEPTH: usize = 64;
/// Aliases can expand exponentially ("billion laughs"); a campaign is small.
const MAX_NODES: usize = 100_000;

/// What a plain scalar means under the YAML 1.2 core schema (the one
/// serde_yaml 0.9 uses: `on`, `yes` and `off` are strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScalarType {
    Null,
    Bool,
    Int,
    Float,
    Str,
}

#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub pos: Pos,
    pub kind: Kind,
}

#[derive(Debug, Clone)]
pub(crate) enum Kind {
    Scalar { text: String, ty: ScalarType },
    Seq(Vec<Node>),
    Map(Vec<Entry>),
}

#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The key as written; keys are always scalars (checked while building).
    pub name: String,
    pub key: Node,
    pub value: Node,
}

impl Node {
    /// Phrase for "found …" in messages, with the value when it is short.
    pub fn describe(&self) -> String {
        match &self.kind {
            Kind::Scalar { text, ty } => {
                let what = match ty {
                    ScalarType::Null => return "nothing (null)".to_string(),
                    ScalarType::Bool => "a boolean",
                    ScalarType::Int => "an integer",
                    ScalarType::Float => "a number",
                    ScalarType::Str => "a string",
                };
                if text.chars().count() <= 40 && !text.contains('\n') {
                    format!("{what} `{text}`")
                } else {
                    what.to_string()
                }
            }
            Kind::Seq(_) => "a list".to_string(),
            Kind::Map(_) => "a mapping".to_string(),
        }
    }

    fn count(&self) -> usize {
        match &self.kind {
            Kind::Scalar { .. } => 1,
            Kind::Seq(items) => 1 + items.iter().map(Node::count).sum::<usize>(),
            Kind::Map(entries) => {
                1 + entries
                    .iter()
                    .map(|e| e.key.count() + e.value.count())
                    .sum::<usize>()
            }
        }
    }
}

/// Parses `text` into its single document's root node, or `None` when the
/// file holds no document at all (empty, or only comments).
///
/// Memory stays near the text's own size whatever the file holds: events are
/// read one at a time and counted, and reading stops at the first node past
/// [`MAX_NODES`] (a 20 MiB flow list once took 0.9 GB of events before it was
/// judged; BENCHMARKS.md), and positions are found through [`CharIndex`], not a
/// `Vec<char>` four times the text.
pub(crate) fn parse(text: &str) -> Result<Option<Node>> {
    let mut events: Vec<(Event, Marker)> = Vec::new();
    let mut parser = Parser::new_from_str(text);
    let mut nodes = 0usize;
    loop {
        let (ev, mark) = match parser.next_token() {
            Ok(next) => next,
            Err(e) => return Err(syntax_error(text, &events, &e)),
        };
        if matches!(
            ev,
            Event::Scalar(..)
                | Event::SequenceStart(..)
                | Event::MappingStart(..)
                | Event::Alias(_)
        ) {
            nodes += 1;
            if nodes > MAX_NODES {
                return Err(error(
                    pos_of(&mark),
                    &open_path(&events),
                    format!("more than {MAX_NODES} nodes (MAX_NODES)"),
                )
                .hint("a campaign is a few hundred keys and values; use the matrix to make many cells from short lists"));
            }
        }
        let end = ev == Event::StreamEnd;
        events.push((ev, mark));
        if end {
            break;
        }
    }
    let mut builder = Builder {
        text,
        events,
        at: 0,
        anchors: HashMap::new(),
        nodes: 0,
        chars: CharIndex::new(text),
        pending_key: None,
    };
    builder.stream()
}

/// A YAML syntax error, at the place the user has to look (an unclosed `[` rather
/// than the line where the parser gave up), with the key path that was open.
fn syntax_error(
    text: &str,
    events: &[(Event, Marker)],
    e: &yaml_rust2::ScanError,
) -> super::SpecError {
    let mut pos = pos_of(e.marker());
    // The tab error is raised after consuming the tab; point at the tab.
    if e.info().contains("tabs") && pos.column > 1 {
        let before = CharIndex::new(text).char_at(e.marker().index().wrapping_sub(1));
        if before == Some('\t') {
            pos.column -= 1;
        }
    }
    if let Some(unclosed) = unclosed_flow(text, events, e.marker(), e.info()) {
        return unclosed;
    }
    error(pos, &open_path(events), e.info().to_string()).hint(
        "this is a YAML syntax error; check indentation (spaces only, no tabs), quotes and brackets",
    )
}

/// Character index → character: yaml-rust2's markers count characters, the text
/// is UTF-8. ASCII text (nearly every campaign) is indexed directly; otherwise a
/// byte offset is kept for every [`CharIndex::STEP`]th character, 1/32 of the
/// text's size where a `Vec<char>` would be four times it.
struct CharIndex<'a> {
    text: &'a str,
    /// Byte offsets of characters 0, STEP, 2·STEP, …; empty for ASCII text.
    checkpoints: Vec<usize>,
}

impl<'a> CharIndex<'a> {
    const STEP: usize = 256;

    fn new(text: &'a str) -> CharIndex<'a> {
        let checkpoints = if text.is_ascii() {
            Vec::new()
        } else {
            text.char_indices()
                .step_by(Self::STEP)
                .map(|(b, _)| b)
                .collect()
        };
        CharIndex { text, checkpoints }
    }

    /// The byte offset of character `index`; the text's length just past its end.
    fn byte(&self, index: usize) -> Option<usize> {
        if self.checkpoints.is_empty() {
            return (index <= self.text.len()).then_some(index);
        }
        let from = *self.checkpoints.get(index / Self::STEP)?;
        let mut rest = self.text[from..].char_indices().map(|(b, _)| from + b);
        match rest.nth(index % Self::STEP) {
            Some(b) => Some(b),
            // One past the last character: the end of the text.
            None => (index == self.text.chars().count()).then_some(self.text.len()),
        }
    }

    fn char_at(&self, index: usize) -> Option<char> {
        self.text.get(self.byte(index)?..)?.chars().next()
    }
}

/// yaml-rust2 markers have 1-based lines and 0-based columns (counted in
/// characters); users and editors count both from 1.
fn pos_of(m: &Marker) -> Pos {
    Pos {
        line: m.line(),
        column: m.col() + 1,
    }
}

/// A position as yaml-rust2 counts it (character index, 1-based line,
/// 0-based column), for positions this module corrects itself.
#[derive(Debug, Clone, Copy)]
struct At {
    index: usize,
    line: usize,
    col: usize,
}

impl At {
    fn pos(self) -> Pos {
        Pos {
            line: self.line,
            column: self.col + 1,
        }
    }
}

/// How far [`Builder::dash`] has read a block sequence's lines: each item's
/// search goes on from the previous one's, so a list of empty items is read
/// once, not once per item (60,000 empty items took 33 s).
#[derive(Debug, Clone, Copy, Default)]
struct DashCursor {
    /// Byte offset of the next line to read, and its 0-based line number.
    byte: usize,
    line: usize,
    /// Dashes found after the first.
    found: usize,
    started: bool,
}

struct Builder<'a> {
    text: &'a str,
    /// Taken out one by one (left as `Event::Nothing`): a scalar's text is moved
    /// into its node, never copied.
    events: Vec<(Event, Marker)>,
    at: usize,
    anchors: HashMap<usize, Node>,
    nodes: usize,
    chars: CharIndex<'a>,
    /// The key whose value is being built next, if any.
    pending_key: Option<Pos>,
}

impl Builder<'_> {
    fn next(&mut self) -> Option<(Event, Marker)> {
        let slot = self.events.get_mut(self.at)?;
        self.at += 1;
        Some((std::mem::replace(&mut slot.0, Event::Nothing), slot.1))
    }

    fn peek(&self) -> Option<&(Event, Marker)> {
        self.events.get(self.at)
    }

    fn stream(&mut self) -> Result<Option<Node>> {
        let mut root = None;
        while let Some((ev, mark)) = self.next() {
            match ev {
                Event::DocumentStart if root.is_some() => {
                    return Err(error(
                        pos_of(&mark),
                        "",
                        "a campaign file holds one YAML document, but a second one starts here",
                    )
                    .hint("remove the `---` line and what follows, or put that campaign in its own file"));
                }
                Event::DocumentStart => {
                    let node = self.node("", 0)?;
                    root = Some(node);
                }
                _ => {}
            }
        }
        // `---` alone is a document whose root is an empty scalar: as empty
        // as a file with nothing in it.
        Ok(root.filter(|n| !is_empty(n)))
    }

    /// The next node and everything in it: a scalar, sequence or mapping (anchored for
    /// later aliases), or a copy of an anchored one; `path` is its key path for errors.
    fn node(&mut self, path: &str, depth: usize) -> Result<Node> {
        let Some((ev, mark)) = self.next() else {
            return Err(error(
                Pos::default(),
                path,
                "unexpected end of the YAML events",
            ));
        };
        let pos = pos_of(&mark);
        let key = self.pending_key.take();
        if depth > MAX_DEPTH {
            return Err(error(
                pos,
                path,
                format!("nesting is deeper than {MAX_DEPTH} levels"),
            ));
        }
        let (node, anchor) = match ev {
            Event::Scalar(text, style, anchor, tag) => {
                (scalar(text, style, tag.as_ref(), pos, path)?, anchor)
            }
            Event::SequenceStart(anchor, tag) => {
                check_tag(tag.as_ref(), "seq", pos, path)?;
                (self.sequence(&mark, key, path, depth)?, anchor)
            }
            Event::MappingStart(anchor, tag) => {
                check_tag(tag.as_ref(), "map", pos, path)?;
                (self.mapping(&mark, pos, path, depth)?, anchor)
            }
            Event::Alias(id) => return self.alias(id, pos, path),
            other => {
                return Err(error(pos, path, format!("unexpected YAML event {other:?}")));
            }
        };
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(error(pos, path, format!("more than {MAX_NODES} nodes")));
        }
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        Ok(node)
    }

    /// A sequence's items, up to its end; an empty item points at its `-`. `key` is the
    /// key whose value the sequence is, if any.
    fn sequence(
        &mut self,
        mark: &Marker,
        key: Option<Pos>,
        path: &str,
        depth: usize,
    ) -> Result<Node> {
        let start = self.sequence_start(mark, key);
        let mut items = Vec::new();
        let mut cursor = DashCursor::default();
        loop {
            if matches!(self.peek(), Some((Event::SequenceEnd, _))) {
                self.at += 1;
                break;
            }
            let item_path = format!("{path}[{}]", items.len());
            let mut item = self.node(&item_path, depth + 1)?;
            if is_empty(&item) {
                if let Some(dash) = self.dash(start, items.len(), &mut cursor) {
                    item.pos = dash;
                }
            }
            items.push(item);
        }
        Ok(Node {
            pos: start.pos(),
            kind: Kind::Seq(items),
        })
    }

    /// A mapping's entries, up to its end: each key a scalar, written once; an empty
    /// value points at its key. `pos` is where the parser marked the mapping's start.
    fn mapping(&mut self, mark: &Marker, pos: Pos, path: &str, depth: usize) -> Result<Node> {
        let mut entries: Vec<Entry> = Vec::new();
        // Where each key was first written: a linear search per key made a
        // mapping of 50,000 keys take seconds.
        let mut seen: HashMap<String, Pos> = HashMap::new();
        loop {
            if matches!(self.peek(), Some((Event::MappingEnd, _))) {
                self.at += 1;
                break;
            }
            let key = self.node(path, depth + 1)?;
            let Kind::Scalar { text: name, .. } = &key.kind else {
                return Err(error(
                    key.pos,
                    path,
                    format!("a key must be a plain name, found {}", key.describe()),
                ));
            };
            let name = name.clone();
            let value_path = join(path, &name);
            if let Some(first) = seen.insert(name.clone(), key.pos) {
                return Err(error(
                    key.pos,
                    &value_path,
                    format!(
                        "duplicate key `{name}` (first written at line {}, column {})",
                        first.line, first.column
                    ),
                )
                .hint("a key may appear only once in a mapping; merge the two or remove one"));
            }
            self.pending_key = Some(key.pos);
            let mut value = self.node(&value_path, depth + 1)?;
            // An empty value (`name:` and nothing) has no text of its
            // own to point at; its key is what the user wrote.
            if is_empty(&value) {
                value.pos = key.pos;
            }
            entries.push(Entry { name, key, value });
        }
        // A block mapping's start marker sits after its first key;
        // the first key is where the mapping visibly begins.
        let pos = match entries.first() {
            Some(first) if self.char_at(mark) != Some('{') => first.key.pos,
            _ => pos,
        };
        Ok(Node {
            pos,
            kind: Kind::Map(entries),
        })
    }

    /// A copy of the node anchored as `id`, counted again towards [`MAX_NODES`].
    fn alias(&mut self, id: usize, pos: Pos, path: &str) -> Result<Node> {
        let Some(target) = self.anchors.get(&id) else {
            return Err(error(pos, path, "alias to an unknown anchor"));
        };
        let mut node = target.clone();
        self.nodes += node.count();
        if self.nodes > MAX_NODES {
            return Err(error(
                pos,
                path,
                format!("aliases expand to more than {MAX_NODES} nodes"),
            ));
        }
        // Errors about the value as a whole point at the use; errors
        // inside it point into the anchored original.
        node.pos = pos;
        Ok(node)
    }

    fn char_at(&self, mark: &Marker) -> Option<char> {
        self.chars.char_at(mark.index())
    }

    /// Where a sequence really starts. For an "indentless" sequence (a
    /// mapping value whose `-` sits at the key's column) yaml-rust2 marks the
    /// first item's content instead of the `-`; walk back to that `-`.
    fn sequence_start(&self, mark: &Marker, key: Option<Pos>) -> At {
        let at = At {
            index: mark.index(),
            line: mark.line(),
            col: mark.col(),
        };
        let Some(key) = key else { return at };
        let mut i = at.index;
        while i > 0 && self.chars.char_at(i - 1) == Some(' ') {
            i -= 1;
        }
        if i == 0 || self.chars.char_at(i - 1) != Some('-') {
            return at;
        }
        let dash = i - 1;
        let col = at.col.checked_sub(at.index - dash);
        match col {
            Some(col) if col + 1 == key.column => At {
                index: dash,
                line: at.line,
                col,
            },
            _ => at,
        }
    }

    /// The `-` of item `i` of the block sequence whose first `-` is at
    /// `start`. Needed only for an empty item, whose own marker is the next
    /// token's (and scanner token markers are no better). Every `-` of a
    /// block sequence is at the same column; the later ones start their line
    /// (nested sequences are further right, so they do not count). Calls for
    /// one sequence come with growing `i`; `cursor` carries the search on.
    fn dash(&self, start: At, i: usize, cursor: &mut DashCursor) -> Option<Pos> {
        if self.chars.char_at(start.index) != Some('-') {
            return None; // a flow sequence: its items cannot be empty
        }
        if i == 0 {
            return Some(start.pos());
        }
        let col = start.col;
        if !cursor.started {
            // The line after the first dash's (whose 1-based number is start.line).
            let from = self.chars.byte(start.index)?;
            cursor.byte = self.text[from..]
                .find('\n')
                .map_or(self.text.len(), |n| from + n + 1);
            cursor.line = start.line;
            cursor.started = true;
        }
        while cursor.found < i && cursor.byte < self.text.len() {
            let rest = &self.text[cursor.byte..];
            let len = rest.find('\n').map_or(rest.len(), |n| n + 1);
            let line = rest[..len].trim_end_matches('\n').trim_end_matches('\r');
            let mut chars = line.chars();
            let is_dash = chars.by_ref().take(col).all(|c| c == ' ')
                && chars.next() == Some('-')
                && chars.next().is_none_or(char::is_whitespace);
            cursor.byte += len;
            cursor.line += 1;
            if is_dash {
                cursor.found += 1;
                if cursor.found == i {
                    return Some(Pos {
                        line: cursor.line,
                        column: col + 1,
                    });
                }
            }
        }
        None
    }
}

/// A scalar node: its type resolved when plain, a string when quoted or tagged `!!str`.
fn scalar(
    text: String,
    style: TScalarStyle,
    tag: Option<&Tag>,
    pos: Pos,
    path: &str,
) -> Result<Node> {
    let ty = if style == TScalarStyle::Plain {
        resolve(&text)
    } else {
        ScalarType::Str
    };
    let ty = match tag {
        None => ty,
        Some(tag) if tag.handle == "tag:yaml.org,2002:" && tag.suffix == "str" => ScalarType::Str,
        Some(tag) => return Err(unsupported_tag(pos, path, &tag.handle, &tag.suffix)),
    };
    Ok(Node {
        pos,
        kind: Kind::Scalar { text, ty },
    })
}

/// A collection may carry only its own core tag (`!!seq`, `!!map`), or none.
fn check_tag(tag: Option<&Tag>, suffix: &str, pos: Pos, path: &str) -> Result<()> {
    match tag {
        Some(tag) if !(tag.handle == "tag:yaml.org,2002:" && tag.suffix == suffix) => {
            Err(unsupported_tag(pos, path, &tag.handle, &tag.suffix))
        }
        _ => Ok(()),
    }
}

fn unsupported_tag(pos: Pos, path: &str, handle: &str, suffix: &str) -> super::SpecError {
    let shown = if handle == "tag:yaml.org,2002:" {
        format!("!!{suffix}")
    } else {
        format!("{handle}{suffix}")
    };
    error(pos, path, format!("YAML tag `{shown}` is not supported"))
        .hint("only `!!str` is accepted (to force a string); quoting does the same")
}

/// Nothing written at all (as opposed to an explicit `~` or `null`).
fn is_empty(node: &Node) -> bool {
    matches!(&node.kind, Kind::Scalar { text, ty: ScalarType::Null } if text.is_empty())
}

/// `parent.key`, or just `key` at the root.
pub(crate) fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// A syntax error after a `[` or `{` that was never closed: yaml-rust2 reads
/// the following lines into the flow collection (`bs: [4k, 64k` takes the next
/// key as a list item) and stops lines later, at a `:` it cannot place. The
/// collection is unclosed when the error is on a later line and the text
/// between left it: a line indented no deeper than the `[`'s own line (flow
/// content must be indented more than its block), or the end of the file. The
/// error is then reported at the `[`, with the path of its key.
fn unclosed_flow(
    text: &str,
    events: &[(Event, Marker)],
    at: &Marker,
    info: &str,
) -> Option<super::SpecError> {
    let chars = CharIndex::new(text);
    let lines: Vec<&str> = text.lines().collect();
    let indent = |line: &str| line.len() - line.trim_start_matches(' ').len();
    // Open collections (event index, marker, bracket), innermost last.
    let mut open: Vec<(usize, &Marker, Option<char>)> = Vec::new();
    for (i, (ev, mark)) in events.iter().enumerate() {
        match ev {
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                let c = chars.char_at(mark.index());
                open.push((i, mark, c.filter(|c| matches!(c, '[' | '{'))));
            }
            Event::SequenceEnd | Event::MappingEnd => {
                open.pop();
            }
            _ => {}
        }
    }
    let at_end = chars
        .byte(at.index())
        .is_none_or(|b| text[b..].chars().all(char::is_whitespace));
    open.iter().rev().find_map(|&(i, mark, bracket)| {
        let bracket = bracket?;
        let own = lines.get(mark.line().checked_sub(1)?)?;
        if at.line() <= mark.line() {
            return None;
        }
        let left = lines
            .iter()
            .take(at.line())
            .skip(mark.line())
            .map(|l| l.trim_end())
            .any(|l| !l.is_empty() && !l.trim_start().starts_with('#') && indent(l) <= indent(own));
        if !(left || at_end) {
            return None;
        }
        let close = if bracket == '[' { ']' } else { '}' };
        Some(
            error(
                pos_of(mark),
                &open_path(&events[..=i]),
                format!("unclosed `{bracket}`: expected `,` or `{close}`"),
            )
            .hint(format!(
                "the `{bracket}` opened here is never closed, so the lines after it were read \
                 as its items until line {} ({info})",
                at.line()
            )),
        )
    })
}

/// The key path that was open when a syntax error stopped the parser, so
/// even a syntax error names the section it is in.
fn open_path(events: &[(Event, Marker)]) -> String {
    enum Frame {
        Seq(usize),
        Map {
            key: Option<String>,
            expect_key: bool,
        },
    }
    let mut stack: Vec<Frame> = Vec::new();
    // A finished node in a mapping flips it between key and value.
    fn finish(stack: &mut [Frame], scalar: Option<&str>) {
        match stack.last_mut() {
            Some(Frame::Seq(n)) => *n += 1,
            Some(Frame::Map { key, expect_key }) => {
                if *expect_key {
                    *key = Some(scalar.unwrap_or("?").to_string());
                }
                *expect_key = !*expect_key;
            }
            None => {}
        }
    }
    for (ev, _) in events {
        match ev {
            Event::SequenceStart(..) => stack.push(Frame::Seq(0)),
            Event::MappingStart(..) => stack.push(Frame::Map {
                key: None,
                expect_key: true,
            }),
            Event::SequenceEnd | Event::MappingEnd => {
                stack.pop();
                finish(&mut stack, None);
            }
            Event::Scalar(text, ..) => finish(&mut stack, Some(text)),
            Event::Alias(_) => finish(&mut stack, None),
            _ => {}
        }
    }
    let mut path = String::new();
    let depth = stack.len();
    for (i, frame) in stack.iter().enumerate() {
        let innermost = i + 1 == depth;
        match frame {
            Frame::Seq(n) => {
                if !innermost {
                    path.push_str(&format!("[{n}]"));
                }
            }
            Frame::Map { key, expect_key } => {
                // Inside an unfinished value (not at the innermost level,
                // or awaiting one), the last key names where we are.
                if !innermost || !*expect_key {
                    if let Some(key) = key {
                        path = join(&path, key);
                    }
                }
            }
        }
    }
    path
}

/// YAML 1.2 core schema resolution of a plain scalar.
pub(crate) fn resolve(text: &str) -> ScalarType {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return ScalarType::Null,
        "true" | "True" | "TRUE" | "false" | "False" | "FALSE" => return ScalarType::Bool,
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF"
        | ".nan" | ".NaN" | ".NAN" => return ScalarType::Float,
        _ => {}
    }
    if is_int(text) {
        ScalarType::Int
    } else if is_float(text) {
        ScalarType::Float
    } else {
        ScalarType::Str
    }
}

fn is_int(text: &str) -> bool {
    if let Some(hex) = text.strip_prefix("0x") {
        return !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit());
    }
    if let Some(oct) = text.strip_prefix("0o") {
        return !oct.is_empty() && oct.chars().all(|c| ('0'..='7').contains(&c));
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
}

fn is_float(text: &str) -> bool {
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (int, frac) = match mantissa.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mantissa, None),
    };
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    let mantissa_ok = match frac {
        Some(f) => digits(int) && digits(f) && !(int.is_empty() && f.is_empty()),
        None => !int.is_empty() && digits(int),
    };
    let exponent_ok = match exponent {
        Some(e) => {
            let e = e.strip_prefix(['-', '+']).unwrap_or(e);
            !e.is_empty() && digits(e)
        }
        None => true,
    };
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_like_the_core_schema() {
        for (text, ty) in [
            ("", ScalarType::Null),
            ("~", ScalarType::Null),
            ("true", ScalarType::Bool),
            ("on", ScalarType::Str),
            ("yes", ScalarType::Str),
            ("1024", ScalarType::Int),
            ("-1", ScalarType::Int),
            ("0x1f", ScalarType::Int),
            ("0.5", ScalarType::Float),
            ("1e3", ScalarType::Float),
            (".5", ScalarType::Float),
            ("1.", ScalarType::Float),
            (".", ScalarType::Str),
            ("4k", ScalarType::Str),
            ("1.2.3", ScalarType::Str),
            ("-.inf", ScalarType::Float),
        ] {
            assert_eq!(resolve(text), ty, "{text:?}");
        }
    }

    #[test]
    fn positions_are_one_based() {
        let root = parse("# c\nname: x\nm:\n  k: [a, 'b']\n").unwrap().unwrap();
        let Kind::Map(entries) = &root.kind else {
            panic!("root is not a map")
        };
        assert_eq!(root.pos, Pos { line: 2, column: 1 });
        assert_eq!(entries[0].value.pos, Pos { line: 2, column: 7 });
        let Kind::Map(inner) = &entries[1].value.kind else {
            panic!("m is not a map")
        };
        assert_eq!(entries[1].value.pos, Pos { line: 4, column: 3 });
        let Kind::Seq(items) = &inner[0].value.kind else {
            panic!("k is not a list")
        };
        assert_eq!(
            items[1].pos,
            Pos {
                line: 4,
                column: 10
            }
        );
    }

    #[test]
    fn empty_values_point_at_their_key_or_dash() {
        let root = parse("a:\nb:\n  -\n  - x\n").unwrap().unwrap();
        let Kind::Map(entries) = &root.kind else {
            panic!("root is not a map")
        };
        assert_eq!(entries[0].value.pos, Pos { line: 1, column: 1 });
        let Kind::Seq(items) = &entries[1].value.kind else {
            panic!("b is not a list")
        };
        assert_eq!(items[0].pos, Pos { line: 3, column: 3 });
        let root = parse("b:\n- - x\n  -\n-\n").unwrap().unwrap();
        let Kind::Map(entries) = &root.kind else {
            panic!("root is not a map")
        };
        let Kind::Seq(items) = &entries[0].value.kind else {
            panic!("b is not a list")
        };
        let Kind::Seq(inner) = &items[0].kind else {
            panic!("b[0] is not a list")
        };
        assert_eq!(inner[1].pos, Pos { line: 3, column: 3 });
        assert_eq!(items[1].pos, Pos { line: 4, column: 1 });
        // The indentless sequence itself starts at its first `-`.
        assert_eq!(entries[0].value.pos, Pos { line: 2, column: 1 });
    }

    #[test]
    fn positions_count_characters_in_non_ascii_text() {
        // Markers count characters; the index finds them in UTF-8 (past a checkpoint too).
        let long = "é".repeat(600);
        let text = format!("d: \"{long}\"\nb:\n- ä\n-\nm: {{ k: ü }}\n");
        let root = parse(&text).unwrap().unwrap();
        let Kind::Map(entries) = &root.kind else {
            panic!("root is not a map")
        };
        let Kind::Seq(items) = &entries[1].value.kind else {
            panic!("b is not a list")
        };
        assert_eq!(entries[1].value.pos, Pos { line: 3, column: 1 });
        assert_eq!(items[1].pos, Pos { line: 4, column: 1 });
        assert_eq!(entries[2].value.pos, Pos { line: 5, column: 4 });
        let index = CharIndex::new(&text);
        let chars: Vec<char> = text.chars().collect();
        for (i, c) in chars.iter().enumerate() {
            assert_eq!(index.char_at(i), Some(*c), "{i}");
        }
        assert_eq!(index.byte(chars.len()), Some(text.len()));
        assert_eq!(index.char_at(chars.len()), None);
    }

    #[test]
    fn many_empty_items_are_placed_in_linear_time() {
        // 60,000 empty items took 33 s when each searched for its dash from the start.
        let text = format!("b:\n{}", "  -\n".repeat(60_000));
        let start = std::time::Instant::now();
        let root = parse(&text).unwrap().unwrap();
        let Kind::Map(entries) = &root.kind else {
            panic!("root is not a map")
        };
        let Kind::Seq(items) = &entries[0].value.kind else {
            panic!("b is not a list")
        };
        assert_eq!(
            items[59_999].pos,
            Pos {
                line: 60_001,
                column: 3
            }
        );
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn billion_laughs_is_bounded() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let err = parse(&text).unwrap_err();
        assert!(err.message.contains("aliases expand"), "{err}");
    }

    #[test]
    fn deep_nesting_is_bounded() {
        let text = format!("a: {}{}", "[".repeat(500), "]".repeat(500));
        // yaml-rust2 has its own limit, below ours; either is fine.
        let err = parse(&text).unwrap_err();
        assert!(
            err.message.contains("deeper") || err.message.contains("recursion limit"),
            "{err}"
        );
    }
}
