//! `${param}` substitution in workload and phase strings. Owns the template
//! syntax (`${name}`, the `$${` escape, reserved names left for the agent);
//! it does not decide which strings are templates.

use super::error::{closest, error, Result, WithHint};
use super::matrix::{describe, Params};
use super::template::{is_identifier, Template, RESERVED};

const ESCAPE_HINT: &str = "write `$${` for a literal `${` (e.g. `$${HOME}` for a shell variable)";

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Piece {
    Text(String),
    Param(String),
}

/// Splits a template into text and parameter references, rejecting syntax
/// errors and names that are neither parameters nor reserved. Done once per
/// string, before any cell exists, so such errors do not depend on the matrix.
pub(crate) fn compile(t: &Template, params: &[String]) -> Result<Vec<Piece>> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut rest = t.text.as_str();
    while let Some(at) = rest.find('$') {
        text.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix("$${") {
            // The agent fills reserved names in after this pass, so an
            // escaped `$${host}` would come back as a live `${host}`.
            if let Some(name) = after.split('}').next().filter(|n| RESERVED.contains(n)) {
                if after.len() > name.len() {
                    return Err(error(
                        t.pos,
                        &t.path,
                        format!("`$${{{name}}}` cannot be escaped: it would become `${{{name}}}`, which platter fills in"),
                    )
                    .hint(format!("for a shell variable of that name write `${name}` without braces")));
                }
            }
            text.push_str("${");
            rest = after;
        } else if let Some(after) = rest.strip_prefix("${") {
            let Some(end) = after.find('}') else {
                return Err(error(t.pos, &t.path, "unterminated `${`: no closing `}`")
                    .hint(format!("close it with `}}`, or {ESCAPE_HINT}")));
            };
            let name = &after[..end];
            if !is_identifier(name) {
                return Err(error(
                    t.pos,
                    &t.path,
                    format!("`${{{name}}}` is not a parameter reference"),
                )
                .hint(format!(
                    "`${{…}}` holds a parameter name; for shell syntax {ESCAPE_HINT}"
                )));
            }
            if RESERVED.contains(&name) {
                // Left as written; the agent knows the host, mount point,
                // repetition and cell id only when it runs the step.
                text.push_str(&rest[..end + 3]);
            } else if params.iter().any(|p| p == name) {
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Param(name.to_string()));
            } else {
                let mut known: Vec<&str> = params.iter().map(String::as_str).collect();
                known.extend(RESERVED);
                let hint = match closest(name, &known) {
                    Some(c) => {
                        format!("did you mean `${{{c}}}`? Or, for a shell variable, {ESCAPE_HINT}")
                    }
                    None if params.is_empty() => {
                        format!("there is no matrix, so no parameters; {ESCAPE_HINT}")
                    }
                    None => format!(
                        "parameters are {}; {ESCAPE_HINT}",
                        super::error::backticked(
                            &params.iter().map(String::as_str).collect::<Vec<_>>()
                        )
                    ),
                };
                return Err(error(
                    t.pos,
                    &t.path,
                    format!("`${{{name}}}` is not a matrix parameter"),
                )
                .hint(hint));
            }
            rest = &after[end + 1..];
        } else {
            // A lone `$` (`$HOME`, `$$`): shell syntax, passed through.
            text.push('$');
            rest = &rest[1..];
        }
    }
    text.push_str(rest);
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

/// The template's text for one cell.
pub(crate) fn render(t: &Template, pieces: &[Piece], cell: &Params) -> Result<String> {
    let mut out = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(s) => out.push_str(s),
            Piece::Param(name) => {
                let Some(value) = cell.get(name) else {
                    return Err(error(
                        t.pos,
                        &t.path,
                        format!(
                            "`${{{name}}}` is not set in cell {}",
                            describe(cell)
                        ),
                    )
                    .hint(format!(
                        "`{name}` comes only from `include` entries, and none of them joined this cell; add `{name}` to the entry that made this cell, or to an include entry that matches it"
                    )));
                };
                out.push_str(value);
            }
        }
    }
    Ok(out)
}
