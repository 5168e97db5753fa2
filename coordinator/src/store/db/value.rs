//! The values statements take and give, in SQLite's five storage classes; shared by both
//! engines (`pg` binds them as PostgreSQL's).

use std::borrow::Cow;

/// A value going into or coming out of a statement, in SQLite's five storage classes.
/// Text and bytes going in are borrowed from the caller's values: the store's writer binds
/// millions of them, and copying each cost a third of its throughput.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(Cow<'a, str>),
    Blob(Cow<'a, [u8]>),
}

/// Bound as it is, borrowed.
impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Int(i) => ValueRef::Integer(*i),
            Value::Real(f) => ValueRef::Real(*f),
            Value::Text(t) => ValueRef::Text(t.as_bytes()),
            Value::Blob(b) => ValueRef::Blob(b),
        }))
    }
}
