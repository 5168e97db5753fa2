//! Templates: strings of a campaign that may hold `${param}`, and which names they may
//! use. Beneath `schema` (which makes them and checks parameter names), `workload` (which
//! types them once rendered) and `subst` (which renders them), so none of those needs
//! another to know what a template is.

use super::error::Pos;
use super::model::DEVICE;

/// A string from `workload` or `phases` that may contain `${param}`; it keeps
/// its node's position so substitution errors can point at it.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    pub text: String,
    pub pos: Pos,
    pub path: String,
}

/// The names platter fills in itself (the agent, at run time): no parameter may take them.
pub(crate) const RESERVED: [&str; 5] = ["host", "mount", DEVICE, "repetition", "cell"];

/// A name `${name}` can hold, matrix parameters' names included: a letter or `_`, then
/// letters, digits and `_`.
pub(crate) fn is_identifier(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
