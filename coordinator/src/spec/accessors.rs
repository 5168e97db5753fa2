//! Typed accessors on the positioned YAML tree, shared by the readers of a campaign's
//! keys: each takes a node as a mapping, list, string, number or one of a set of words,
//! and each names what it expected in its error; and the unknown-key and missing-key
//! checks with their did-you-mean. They judge one node at a time, never a campaign.

use super::error::{backticked, closest, error, suggest, Errors, Pos, Result, SpecError, WithHint};
use super::template::Template;
use super::tree::{join, resolve, Entry, Kind, Node, ScalarType};

/// A mapping's entries.
pub(crate) fn map<'a>(node: &'a Node, path: &str, what: &str) -> Result<&'a [Entry]> {
    match &node.kind {
        Kind::Map(entries) => Ok(entries),
        _ => Err(error(
            node.pos,
            path,
            format!("expected {what}, found {}", node.describe()),
        )),
    }
}

/// A sequence's items.
pub(crate) fn seq<'a>(node: &'a Node, path: &str, what: &str) -> Result<&'a [Node]> {
    match &node.kind {
        Kind::Seq(items) => Ok(items),
        _ => Err(error(
            node.pos,
            path,
            format!("expected {what}, found {}", node.describe()),
        )),
    }
}

/// A string-typed scalar; `name: 123` is rejected because an unquoted number
/// as a name is almost always a mistake in a different key.
pub(crate) fn string(node: &Node, path: &str, what: &str) -> Result<String> {
    match &node.kind {
        Kind::Scalar {
            text,
            ty: ScalarType::Str,
        } => Ok(text.clone()),
        Kind::Scalar { text, ty } if *ty != ScalarType::Null => Err(error(
            node.pos,
            path,
            format!("expected {what} (a string), found {}", node.describe()),
        )
        .hint(format!("quote it if you mean the text: `\"{text}\"`"))),
        _ => Err(error(
            node.pos,
            path,
            format!("expected {what} (a string), found {}", node.describe()),
        )),
    }
}

/// Any non-null scalar, as written: commands like `run: true` or `sleep 1`
/// are text whatever YAML thinks they look like.
pub(crate) fn text(node: &Node, path: &str, what: &str) -> Result<String> {
    match &node.kind {
        Kind::Scalar { text, ty } if *ty != ScalarType::Null => Ok(text.clone()),
        _ => Err(error(
            node.pos,
            path,
            format!("expected {what}, found {}", node.describe()),
        )),
    }
}

/// A string setting that may hold `${param}`, with where it is written.
pub(crate) fn template(node: &Node, path: &str, what: &str) -> Result<Template> {
    Ok(Template {
        text: text(node, path, what)?,
        pos: node.pos,
        path: path.to_string(),
    })
}

/// Text, or nothing for a null (`key:` left empty).
pub(crate) fn optional_text(node: &Node, path: &str, what: &str) -> Result<Option<String>> {
    match &node.kind {
        // `description:` left empty is just no description.
        Kind::Scalar {
            ty: ScalarType::Null,
            ..
        } => Ok(None),
        _ => text(node, path, what).map(Some),
    }
}

/// An integer in `min..=max`. i128 holds every u64 and every value a user
/// could mean, so only absurdly long numbers overflow (reported as such).
pub(crate) fn integer(node: &Node, path: &str, min: i128, max: i128, what: &str) -> Result<i128> {
    let expected = format!("expected a whole number from {min} to {max} ({what})");
    let Kind::Scalar { text, ty } = &node.kind else {
        return Err(error(
            node.pos,
            path,
            format!("{expected}, found {}", node.describe()),
        ));
    };
    if *ty != ScalarType::Int {
        let mut err = error(
            node.pos,
            path,
            format!("{expected}, found {}", node.describe()),
        );
        if *ty == ScalarType::Str && resolve(text) == ScalarType::Int {
            err = err.hint("remove the quotes");
        }
        return Err(err);
    }
    let (digits, radix, negative) = if let Some(h) = text.strip_prefix("0x") {
        (h, 16, false)
    } else if let Some(o) = text.strip_prefix("0o") {
        (o, 8, false)
    } else if let Some(d) = text.strip_prefix('-') {
        (d, 10, true)
    } else {
        (text.strip_prefix('+').unwrap_or(text), 10, false)
    };
    let value = i128::from_str_radix(digits, radix)
        .ok()
        .map(|v| if negative { -v } else { v });
    match value {
        Some(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(error(
            node.pos,
            path,
            format!("{expected}, found {text}, which is out of range"),
        )),
    }
}

/// One of a fixed set of words, with a did-you-mean for near misses.
pub(crate) fn choice<'a>(node: &Node, path: &str, choices: &[&'a str]) -> Result<&'a str> {
    let allowed = backticked(choices);
    match &node.kind {
        Kind::Scalar {
            text,
            ty: ScalarType::Str,
        } => {
            if let Some(c) = choices.iter().find(|c| **c == text) {
                return Ok(c);
            }
            Err(error(
                node.pos,
                path,
                format!("unknown {path} `{text}`; expected one of {allowed}"),
            )
            .maybe_hint(closest(text, choices).map(|c| format!("did you mean `{c}`?"))))
        }
        _ => Err(error(
            node.pos,
            path,
            format!("expected one of {allowed}, found {}", node.describe()),
        )),
    }
}

/// Whether a required `key` is absent only because it is misspelt (`rnu:` for
/// `run:`): its unknown-key error says so, a "missing `run`" would repeat it.
pub(crate) fn misspelt(entries: &[Entry], allowed: &[&str], key: &str) -> bool {
    entries
        .iter()
        .any(|e| !allowed.contains(&e.name.as_str()) && closest(&e.name, allowed) == Some(key))
}

/// The entries whose keys are allowed here; every other key is recorded as unknown
/// (with a did-you-mean) and left out, so the caller reads only what it knows.
pub(crate) fn known<'a>(
    entries: &'a [Entry],
    path: &str,
    allowed: &[&str],
    errs: &mut Errors,
) -> Vec<&'a Entry> {
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        if allowed.contains(&e.name.as_str()) {
            out.push(e);
            continue;
        }
        let key_path = join(path, &e.name);
        let hint = if e.name == "<<" {
            Some("YAML merge keys (`<<`) are not supported; write the keys out".to_string())
        } else {
            suggest(&e.name, allowed, "allowed keys here")
        };
        let at = if path.is_empty() {
            String::new()
        } else {
            format!(" in `{path}`")
        };
        errs.push(
            error(
                e.key.pos,
                &key_path,
                format!("unknown key `{}`{at}", e.name),
            )
            .maybe_hint(hint),
        );
    }
    out
}

/// "missing required key", at `pos` (the mapping that lacks it).
pub(crate) fn missing(pos: Pos, path: &str, key: &str) -> SpecError {
    let at = if path.is_empty() {
        String::new()
    } else {
        format!(" in `{path}`")
    };
    error(
        pos,
        &join(path, key),
        format!("missing required key `{key}`{at}"),
    )
}

/// A percentage above 0 and below 100, with its sign: `2%`, `0.5%`. A bare number is
/// refused: `ci: 0.05` was once taken as ±0.05% where the writer meant 5%, a bound a
/// hundred times tighter that runs every cell to `max`. A stored campaign (`stored`), from
/// a platter that read a bare number as a percentage, reads as it ran.
pub(crate) fn percent(v: &Node, path: &str, stored: bool) -> Result<f64> {
    let expected = "expected a percentage above 0 and below 100, like `2%`";
    let Kind::Scalar { text, .. } = &v.kind else {
        return Err(error(
            v.pos,
            path,
            format!("{expected}, found {}", v.describe()),
        ));
    };
    let (number, signed) = match text.trim().strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (text.trim(), false),
    };
    match number.parse::<f64>() {
        Ok(p) if !signed && !stored && p > 0.0 && p < 100.0 => Err(error(
            v.pos,
            path,
            format!("expected a percentage like `5%`, found the bare number `{text}`"),
        )
        .hint(bare_percent_hint(p, number))),
        Ok(p) if p > 0.0 && p < 100.0 => Ok(p),
        _ => Err(error(v.pos, path, format!("{expected}, found `{text}`"))),
    }
}

/// "did you mean `2%`?"; below 1 the number may be a fraction (0.05 → 5%) or a small
/// percentage, so both are offered, the fraction first.
fn bare_percent_hint(p: f64, written: &str) -> String {
    if p >= 1.0 {
        return format!("did you mean `{written}%`?");
    }
    // ×100 in decimal, not in binary floating point (0.05 × 100 = 5.000000000000001).
    let scaled = (p * 100.0 * 1e9).round() / 1e9;
    format!("did you mean `{scaled}%`? ({written} as a fraction is {scaled}%; for ±{written}% write `{written}%`)")
}
