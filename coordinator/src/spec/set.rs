//! `--set KEY=VALUE` (`platter validate`, `run`, `submit`): a matrix parameter's values or
//! a field of the device selector, given on the command line instead of edited into the
//! file. The override is applied to the campaign's *text*, because the text is what a
//! coordinator stores and what reports and adaptive rounds parse again: a run made with
//! `--set` reads back as what ran. This module knows where values are written and which
//! keys may be set; judging the result is [`super::parse`]'s, and it must not plan or run.
//!
//! Each replaced value is written in flow style (`[4k, 1M]`, `"/dev/loop0"`) where the old
//! one was, padded with the newlines the old one spanned, so every line of the file after
//! it keeps its number and errors still point at the lines the user wrote. The `--set`s
//! are recorded in a comment at the end.

use super::error::{backticked, closest};
use super::model::DEVICE;
use super::tree::{self, Entry, Kind, Node, ScalarType};

/// Keys of `matrix:` that are not parameters.
const MATRIX_WORDS: [&str; 3] = ["include", "exclude", "labels"];
const SELECTOR_KEYS: [&str; 6] = [
    "path",
    "by_id",
    "model",
    "serial",
    "transport",
    "controller",
];

/// A `--set` that cannot be applied: a key that is neither a parameter nor a field of the
/// selector, or a value written in a way this module does not rewrite.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--set {key}: {message}{}", hint.as_ref().map(|h| format!("\n  hint: {h}")).unwrap_or_default())]
pub struct SetError {
    pub key: String,
    pub message: String,
    pub hint: Option<String>,
}

/// `KEY=VALUE` as given on the command line (everything after the first `=` is the value,
/// commas included: `--set mount_options=noatime,nobarrier` is one value).
pub fn parse_arg(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!(
            "`{s}` is not KEY=VALUE (e.g. `bs=4k` or `devices.path=/dev/loop0`)"
        )),
    }
}

/// The campaign `text` with `sets` applied. A matrix parameter given once or more takes
/// exactly the values given, in order; `include` and `exclude` entries that name one of
/// its values no longer among them are dropped (they were about cells that are gone). A
/// `devices.FIELD` replaces that field of the selector. Text that is not YAML, or holds no
/// such key, is returned with the error the key deserves; a file that does not parse is
/// returned unchanged for [`super::parse`] to report.
pub fn apply(text: &str, sets: &[(String, String)]) -> Result<String, SetError> {
    if sets.is_empty() {
        return Ok(text.to_string());
    }
    let root = match tree::parse(text.strip_prefix('\u{feff}').unwrap_or(text)) {
        Ok(Some(root)) => root,
        // Its own mistakes are what the user needs to hear first.
        _ => return Ok(text.to_string()),
    };
    let bom = text.len() - text.strip_prefix('\u{feff}').map_or(text.len(), str::len);
    let layout = Layout::new(text, bom);
    let top: &[Entry] = match &root.kind {
        Kind::Map(entries) => entries,
        _ => &[],
    };
    let field = |name: &str| top.iter().find(|e| e.name == name);
    let matrix: &[Entry] = match field("matrix").map(|e| &e.value.kind) {
        Some(Kind::Map(entries)) => entries,
        _ => &[],
    };
    let devices: &[Entry] = match field("devices").map(|e| &e.value.kind) {
        Some(Kind::Map(entries)) => entries,
        _ => &[],
    };

    // Each key once, with its values in the order given.
    let mut grouped: Vec<(&str, Vec<&str>)> = Vec::new();
    for (k, v) in sets {
        match grouped.iter_mut().find(|(key, _)| key == k) {
            Some((_, values)) => values.push(v),
            None => grouped.push((k, vec![v])),
        }
    }

    let mut edits: Vec<Edit> = Vec::new();
    // Parameters set, with their new values, for include and exclude.
    let mut kept: Vec<(&str, &[&str])> = Vec::new();
    for (key, values) in &grouped {
        let fail = |message: String, hint: Option<String>| SetError {
            key: key.to_string(),
            message,
            hint,
        };
        if let Some(name) = key.strip_prefix("devices.") {
            let Some(e) = devices.iter().find(|e| e.name == name) else {
                return Err(fail(
                    selector_missing(name, devices),
                    Some(settable(matrix, devices)),
                ));
            };
            let [value] = values.as_slice() else {
                return Err(fail(
                    format!("`devices.{name}` takes one value, given {}", values.len()),
                    None,
                ));
            };
            edits.push(
                layout
                    .edit(e, scalar(value, false))
                    .map_err(|m| fail(m, None))?,
            );
            continue;
        }
        let param = matrix
            .iter()
            .find(|e| e.name == *key && !MATRIX_WORDS.contains(key));
        let Some(e) = param else {
            return Err(unknown(key, matrix, devices));
        };
        let list = values
            .iter()
            .map(|v| scalar(v, true))
            .collect::<Vec<_>>()
            .join(", ");
        edits.push(
            layout
                .edit(e, format!("[{list}]"))
                .map_err(|m| fail(m, None))?,
        );
        kept.push((key, values));
    }

    // include and exclude entries about values no longer there.
    for word in ["include", "exclude"] {
        let Some(e) = matrix.iter().find(|e| e.name == word) else {
            continue;
        };
        let Kind::Seq(items) = &e.value.kind else {
            continue;
        };
        let stays = |item: &Node| {
            match &item.kind {
            Kind::Map(pairs) => pairs.iter().all(|p| {
                kept.iter().all(|(k, values)| {
                    p.name != *k
                        || matches!(&p.value.kind, Kind::Scalar { text, .. } if values.contains(&text.as_str()))
                })
            }),
            _ => true,
        }
        };
        if items.iter().all(stays) {
            continue;
        }
        let mut entries = Vec::new();
        for item in items.iter().filter(|i| stays(i)) {
            entries.push(flow_map(item).ok_or_else(|| SetError {
                key: kept.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", "),
                message: format!(
                    "`matrix.{word}` has entries for the values replaced, but an entry at line {} is not a mapping of values this can rewrite",
                    item.pos.line
                ),
                hint: Some(format!("write `{word}` entries as `{{ parameter: value }}`")),
            })?);
        }
        let edit = layout.edit(e, format!("[{}]", entries.join(", ")));
        edits.push(edit.map_err(|m| SetError {
            key: word.to_string(),
            message: m,
            hint: None,
        })?);
    }

    edits.sort_by_key(|e| e.start);
    let mut out = String::with_capacity(text.len() + 128);
    let mut at = 0;
    for e in &edits {
        out.push_str(&text[at..e.start]);
        out.push_str(&e.with);
        at = e.end;
    }
    out.push_str(&text[at..]);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    let given: Vec<String> = sets
        .iter()
        .map(|(k, v)| format!("--set {k}={}", scalar(v, true)))
        .collect();
    out.push_str(&format!(
        "# set on the command line, and written above: {}\n",
        given.join(" ")
    ));
    Ok(out)
}

/// One value's text replaced.
#[derive(Debug)]
struct Edit {
    start: usize,
    end: usize,
    with: String,
}

/// Byte offsets of the text's lines, to turn the tree's positions (1-based line, column
/// in characters) into byte ranges.
struct Layout<'a> {
    text: &'a str,
    line_starts: Vec<usize>,
}

impl<'a> Layout<'a> {
    /// `bom`: the bytes of a byte-order mark the tree was parsed without.
    fn new(text: &'a str, bom: usize) -> Layout<'a> {
        let mut line_starts = vec![bom];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Layout { text, line_starts }
    }

    fn offset(&self, node: &Node) -> Option<usize> {
        let line = *self.line_starts.get(node.pos.line.checked_sub(1)?)?;
        let rest = &self.text[line..];
        let skip = node.pos.column.checked_sub(1)?;
        match rest.char_indices().nth(skip) {
            Some((i, _)) => Some(line + i),
            None => Some(self.text.len()),
        }
    }

    /// The edit that writes `with` where `entry`'s value is, keeping the line count.
    fn edit(&self, entry: &Entry, with: String) -> Result<Edit, String> {
        let cannot = |why: &str| {
            format!(
                "the value at line {}, column {} {why}; write it on one line, without anchors or tags",
                entry.value.pos.line, entry.value.pos.column
            )
        };
        let start = self
            .offset(&entry.value)
            .ok_or_else(|| cannot("is not where the file says"))?;
        let end = self.end(&entry.value, start).map_err(cannot)?;
        let span = &self.text[start..end];
        let mut with = with;
        // A block sequence written at its key's column (`bs:` then `- 4k` below it) is
        // replaced by a flow one, which must be indented past the key.
        if span.starts_with('-') && entry.value.pos.column <= entry.key.pos.column {
            with.insert_str(0, "  ");
        }
        if let Some(last) = span.rfind('\n') {
            let lines = span.matches('\n').count();
            with.push_str(&"\n".repeat(lines));
            with.push_str(&" ".repeat(span[last + 1..].chars().count()));
        }
        Ok(Edit { start, end, with })
    }

    /// Where the value that starts at `start` ends (exclusive).
    fn end(&self, node: &Node, start: usize) -> Result<usize, &'static str> {
        let rest = &self.text[start..];
        match rest.chars().next() {
            Some('[' | '{') => flow_end(rest).map(|n| start + n),
            Some('"') => quoted_end(rest, '"').map(|n| start + n),
            Some('\'') => quoted_end(rest, '\'').map(|n| start + n),
            Some('&' | '!' | '*' | '|' | '>') => {
                Err("has an anchor, tag or alias, or is a block scalar")
            }
            _ => match &node.kind {
                Kind::Seq(items) => {
                    let last = items.last().ok_or("is an empty list")?;
                    let at = self.offset(last).ok_or("is not where the file says")?;
                    self.end(last, at)
                }
                Kind::Map(entries) => {
                    let last = entries.last().ok_or("is an empty mapping")?;
                    let at = self
                        .offset(&last.value)
                        .ok_or("is not where the file says")?;
                    self.end(&last.value, at)
                }
                Kind::Scalar {
                    ty: ScalarType::Null,
                    text,
                } if text.is_empty() => Err("is empty"),
                Kind::Scalar { text, .. } if rest.starts_with(text.as_str()) => {
                    Ok(start + text.len())
                }
                Kind::Scalar { .. } => Err("is written over several lines"),
            },
        }
    }
}

/// The length of the flow collection `text` starts with, through its closing bracket.
/// Quoted scalars and comments are skipped; a quote inside a plain scalar (`it's`) is text.
fn flow_end(text: &str) -> Result<usize, &'static str> {
    let mut depth = 0usize;
    let mut chars = text.char_indices().peekable();
    // The last character that was not a space: a quote opens a scalar only after one of
    // `[{,:` (or at the start), and `#` starts a comment only after a space.
    let mut prev: Option<char> = None;
    let mut prev_raw: Option<char> = None;
    while let Some((i, c)) = chars.next() {
        match c {
            '[' | '{' => depth += 1,
            ']' | '}' => {
                depth = depth.checked_sub(1).ok_or("is not a closed list")?;
                if depth == 0 {
                    return Ok(i + 1);
                }
            }
            '"' | '\'' if matches!(prev, None | Some('[' | '{' | ',' | ':')) => {
                let n = quoted_end(&text[i..], c)?;
                // Past the closing quote.
                while chars.peek().is_some_and(|(j, _)| *j < i + n) {
                    chars.next();
                }
                prev = Some(c);
                prev_raw = Some(c);
                continue;
            }
            '#' if prev_raw.is_none_or(char::is_whitespace) => {
                while chars.peek().is_some_and(|(_, c)| *c != '\n') {
                    chars.next();
                }
                continue;
            }
            _ => {}
        }
        if !c.is_whitespace() {
            prev = Some(c);
        }
        prev_raw = Some(c);
    }
    Err("is not a closed list")
}

/// The length of the quoted scalar `text` starts with, through its closing quote: `\`
/// escapes in double quotes, `''` is a quote in single quotes.
fn quoted_end(text: &str, quote: char) -> Result<usize, &'static str> {
    let mut chars = text.char_indices().skip(1).peekable();
    while let Some((i, c)) = chars.next() {
        if quote == '"' && c == '\\' {
            chars.next();
        } else if c == quote {
            if quote == '\'' && chars.peek().is_some_and(|(_, n)| *n == '\'') {
                chars.next();
            } else {
                return Ok(i + c.len_utf8());
            }
        }
    }
    Err("is an unterminated quoted string")
}

/// A value as YAML in flow context: plain when that reads back as the same text (and, for
/// a matrix value, any plain scalar but null; elsewhere only a string), else quoted.
fn scalar(value: &str, matrix: bool) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_'))
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '+'))
        && match tree::resolve(value) {
            ScalarType::Str => true,
            ScalarType::Null => false,
            _ => matrix,
        };
    if plain {
        value.to_string()
    } else {
        // A JSON string is a YAML double-quoted scalar.
        serde_json::Value::String(value.to_string()).to_string()
    }
}

/// An include or exclude entry as a flow mapping, if it is a mapping of scalars.
fn flow_map(item: &Node) -> Option<String> {
    let Kind::Map(pairs) = &item.kind else {
        return None;
    };
    let mut out = Vec::new();
    for p in pairs {
        let Kind::Scalar { text, ty } = &p.value.kind else {
            return None;
        };
        // A value quoted because it looked like another type keeps its quotes.
        let value = match (ty, tree::resolve(text)) {
            (ScalarType::Str, t) if t != ScalarType::Str => {
                serde_json::Value::String(text.clone()).to_string()
            }
            _ => scalar(text, true),
        };
        out.push(format!("{}: {value}", scalar(&p.name, false)));
    }
    Some(format!("{{ {} }}", out.join(", ")))
}

/// Every key `--set` takes for this campaign.
fn settable(matrix: &[Entry], devices: &[Entry]) -> String {
    let keys = settable_keys(matrix, devices);
    if keys.is_empty() {
        return "this campaign has no matrix parameter and no `devices:` to set".to_string();
    }
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    format!("this campaign can set {}", backticked(&keys))
}

fn settable_keys(matrix: &[Entry], devices: &[Entry]) -> Vec<String> {
    matrix
        .iter()
        .filter(|e| !MATRIX_WORDS.contains(&e.name.as_str()))
        .map(|e| e.name.clone())
        .chain(devices.iter().map(|e| format!("devices.{}", e.name)))
        .collect()
}

/// `devices.FIELD` for a field the selector does not have.
fn selector_missing(name: &str, devices: &[Entry]) -> String {
    if devices.is_empty() {
        return "the campaign has no `devices:` selector to set".to_string();
    }
    let has: Vec<&str> = devices.iter().map(|e| e.name.as_str()).collect();
    if SELECTOR_KEYS.contains(&name) {
        format!(
            "the campaign's `devices:` has no `{name}`: it selects by {} (`--set` replaces a value, it adds none)",
            backticked(&has)
        )
    } else {
        format!(
            "`{name}` is not a field of a device selector ({})",
            backticked(&SELECTOR_KEYS)
        )
    }
}

/// A key that is neither a parameter nor `devices.…`.
fn unknown(key: &str, matrix: &[Entry], devices: &[Entry]) -> SetError {
    let keys = settable_keys(matrix, devices);
    let names: Vec<&str> = keys.iter().map(String::as_str).collect();
    let added_by_include =
        matrix
            .iter()
            .filter(|e| e.name == "include")
            .any(|e| match &e.value.kind {
                Kind::Seq(items) => items.iter().any(|i| match &i.kind {
                    Kind::Map(pairs) => pairs.iter().any(|p| p.name == key),
                    _ => false,
                }),
                _ => false,
            });
    let message = if added_by_include {
        format!("`{key}` is set by `matrix.include` entries, not listed as a parameter of its own; set the parameter those entries match, or edit them")
    } else {
        format!("`{key}` is neither a parameter of the matrix nor a field of `devices:`")
    };
    let guess = match closest(key, &names) {
        Some(c) => Some(c.to_string()),
        // `device` is what people call it.
        None if key == DEVICE => names
            .iter()
            .find(|n| n.starts_with("devices."))
            .map(|n| n.to_string()),
        None => None,
    };
    let hint = match guess {
        Some(c) => format!("did you mean `{c}`? ({})", settable(matrix, devices)),
        None => settable(matrix, devices),
    };
    SetError {
        key: key.to_string(),
        message,
        hint: Some(hint),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str, sets: &[(&str, &str)]) -> Result<String, SetError> {
        let sets: Vec<(String, String)> = sets
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        apply(text, &sets)
    }

    /// The text without the trailing record of the `--set`s.
    fn body(out: &str) -> &str {
        out.rsplit_once("# set on the command line")
            .map_or(out, |(b, _)| b)
    }

    #[test]
    fn a_parameter_takes_the_values_given_and_every_line_keeps_its_number() {
        let text = "name: x\nmatrix:\n  bs:\n    - 4k   # small\n    - 1M\n  n: [1,\n      2]\nworkload: { command: { run: \"dd bs=${bs} ${n}\" } }\n";
        let out = set(text, &[("bs", "64k"), ("bs", "2M"), ("n", "3")]).unwrap();
        assert_eq!(
            body(&out),
            // The comment was among the values replaced.
            "name: x\nmatrix:\n  bs:\n    [64k, 2M]\n        \n  n: [3]\n        \nworkload: { command: { run: \"dd bs=${bs} ${n}\" } }\n"
        );
        assert!(out.ends_with("# set on the command line, and written above: --set bs=64k --set bs=2M --set n=3\n"), "{out}");
        let c = super::super::parse("t.yaml", &out).unwrap();
        let cells: Vec<String> = c
            .cells
            .iter()
            .map(|c| super::super::matrix::describe(&c.params))
            .collect();
        assert_eq!(cells, ["{bs: 64k, n: 3}", "{bs: 2M, n: 3}"]);
        assert_eq!(out.lines().position(|l| l.starts_with("workload")), Some(7));
    }

    #[test]
    fn an_indentless_list_and_values_that_need_quotes() {
        let text = "name: x\nmatrix:\n  opts:\n  - noatime\n  - 'a: b'\nworkload: { command: { run: \"mount -o ${opts}\" } }\n";
        let out = set(
            text,
            &[
                ("opts", "noatime,nobarrier"),
                ("opts", "true"),
                ("opts", "a #b"),
            ],
        )
        .unwrap();
        let c = super::super::parse("t.yaml", &out).unwrap_or_else(|e| panic!("{e}\n{out}"));
        let values: Vec<&str> = c.cells.iter().map(|c| c.params["opts"].as_str()).collect();
        assert_eq!(values, ["noatime,nobarrier", "true", "a #b"]);
    }

    #[test]
    fn the_device_path_is_replaced_and_include_and_exclude_follow_the_values() {
        let text = r#"name: x
devices: { path: /dev/loop7, transport: loop }   # the drive
matrix:
  sync: [none, fdatasync]
  bs: [4k, 1M]
  include:
    # dd has no conv=none
    - { sync: none, conv: notrunc }
    - sync: fdatasync
      conv: fdatasync
  exclude: [ { sync: fdatasync, bs: 4k }, { bs: 1M, sync: "none" } ]
  labels: [sync]
workload: { command: { run: "dd bs=${bs} conv=${conv} of=${mount}/f" } }
storage: { fs: ext4 }
"#;
        let out = set(
            text,
            &[("devices.path", "/dev/loop0"), ("sync", "fdatasync")],
        )
        .unwrap();
        assert!(
            body(&out).starts_with("name: x\ndevices: { path: /dev/loop0, transport: loop }   # the drive\nmatrix:\n  sync: [fdatasync]\n"),
            "{out}"
        );
        assert_eq!(body(&out).lines().count(), text.lines().count());
        let c = super::super::parse("t.yaml", &out).unwrap_or_else(|e| panic!("{e}\n{out}"));
        assert_eq!(c.devices.unwrap().path.as_deref(), Some("/dev/loop0"));
        let cells: Vec<String> = c
            .cells
            .iter()
            .map(|c| super::super::matrix::describe(&c.params))
            .collect();
        // The entries for sync=none are gone; exclude still drops {fdatasync, 4k}.
        assert_eq!(cells, ["{sync: fdatasync, bs: 1M, conv: fdatasync}"]);
    }

    #[test]
    fn a_key_that_cannot_be_set_names_those_that_can() {
        let text = "name: x\ndevices: { path: /dev/loop7 }\nmatrix:\n  bs: [4k]\n  include: [ { bs: 4k, conv: x } ]\nworkload: { command: { run: \"dd bs=${bs} conv=${conv}\" } }\n";
        let e = set(text, &[("device", "/dev/loop0")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--set device: `device` is neither a parameter of the matrix nor a field of `devices:`\n  hint: did you mean `devices.path`? (this campaign can set `bs`, `devices.path`)"
        );
        let e = set(text, &[("bss", "4k")]).unwrap_err();
        assert!(e.to_string().contains("did you mean `bs`?"), "{e}");
        let e = set(text, &[("conv", "y")]).unwrap_err();
        assert!(e.message.contains("set by `matrix.include` entries"), "{e}");
        let e = set(text, &[("devices.model", "X")]).unwrap_err();
        assert!(
            e.message.contains("has no `model`: it selects by `path`"),
            "{e}"
        );
        let e = set(
            text,
            &[("devices.path", "/dev/a"), ("devices.path", "/dev/b")],
        )
        .unwrap_err();
        assert!(e.message.contains("takes one value, given 2"), "{e}");
        let e = set(text, &[("include", "x")]).unwrap_err();
        assert!(e.message.contains("neither a parameter"), "{e}");
        assert_eq!(parse_arg("bs=4k=x"), Ok(("bs".into(), "4k=x".into())));
        assert!(parse_arg("bs").is_err() && parse_arg("=4k").is_err());
        // Nothing to set: the text as it was.
        assert_eq!(set(text, &[]).unwrap(), text);
    }
}
