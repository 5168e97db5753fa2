//! One SQL interface over the store's two engines: SQLite (embedded, the default: `platter
//! run` and a single `platter serve`) and PostgreSQL (`platter serve --db postgres://…`,
//! shared by several coordinators). The store, the reports and the status speak to a
//! [`Conn`] in SQLite's dialect with `?N` parameters; for PostgreSQL the few differences
//! are translated once per statement (`pg::translate`), and the schema is PostgreSQL's own
//! (`store::migrations::POSTGRES`).
//!
//! Both engines are used synchronously, as the store always was: its writer runs on a
//! thread of its own, reads run in `spawn_blocking`. PostgreSQL's client is async
//! (tokio-postgres); its connections are driven by a small runtime of the store's own and
//! waited on with `futures::executor::block_on`, which never enters a tokio runtime and so
//! works from any thread. A wrapper of our own rather than a crate: the crates that unify
//! SQLite and PostgreSQL (sqlx, diesel) are async-only or an ORM, and either would mean
//! rewriting every query and the store's batching writer.

pub mod pg;
mod value;

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::store::error::{Result, StoreError};
pub use value::Value;

/// Where the store lives: an SQLite file, or a PostgreSQL database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Sqlite(PathBuf),
    /// A libpq-style URL, `postgres://user:password@host:port/dbname?options`.
    Postgres(String),
}

impl Location {
    pub fn is_postgres(&self) -> bool {
        matches!(self, Location::Postgres(_))
    }
}

impl Location {
    /// A `--db` argument: a PostgreSQL URL, or else a file.
    pub fn from_arg(arg: &std::path::Path) -> Location {
        match arg.to_str() {
            Some(s) => s
                .parse()
                .unwrap_or_else(|e: std::convert::Infallible| match e {}),
            None => Location::Sqlite(arg.to_path_buf()),
        }
    }
}

impl FromStr for Location {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> std::result::Result<Location, Self::Err> {
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            Ok(Location::Postgres(s.to_string()))
        } else {
            Ok(Location::Sqlite(PathBuf::from(s)))
        }
    }
}

impl From<PathBuf> for Location {
    fn from(p: PathBuf) -> Location {
        Location::Sqlite(p)
    }
}

impl From<&std::path::Path> for Location {
    fn from(p: &std::path::Path) -> Location {
        Location::Sqlite(p.to_path_buf())
    }
}

/// Shown in logs and errors: a PostgreSQL URL without its password.
impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(p) => write!(f, "{}", p.display()),
            Location::Postgres(url) => f.write_str(&pg::without_password(url)),
        }
    }
}

/// What can be a statement's parameter.
pub trait ToValue {
    fn to_value(&self) -> Value<'_>;
}

macro_rules! int_to_value {
    ($($t:ty),*) => {$(
        impl ToValue for $t {
            fn to_value(&self) -> Value<'_> {
                Value::Int(*self as i64)
            }
        }
    )*};
}
int_to_value!(i64, i32, u32, u64, usize, i16, u16, u8);

impl ToValue for bool {
    fn to_value(&self) -> Value<'_> {
        Value::Int(*self as i64)
    }
}

impl ToValue for f64 {
    fn to_value(&self) -> Value<'_> {
        Value::Real(*self)
    }
}

impl ToValue for str {
    fn to_value(&self) -> Value<'_> {
        Value::Text(Cow::Borrowed(self))
    }
}

impl ToValue for String {
    fn to_value(&self) -> Value<'_> {
        Value::Text(Cow::Borrowed(self.as_str()))
    }
}

impl ToValue for [u8] {
    fn to_value(&self) -> Value<'_> {
        Value::Blob(Cow::Borrowed(self))
    }
}

impl ToValue for Vec<u8> {
    fn to_value(&self) -> Value<'_> {
        Value::Blob(Cow::Borrowed(self.as_slice()))
    }
}

macro_rules! id_to_value {
    ($($t:ty),*) => {$(
        impl ToValue for $t {
            fn to_value(&self) -> Value<'_> {
                Value::Text(Cow::Borrowed(self.as_str()))
            }
        }
    )*};
}
id_to_value!(
    platter_proto::model::PlanId,
    platter_proto::model::CampaignId,
    platter_proto::model::CellId,
    platter_proto::model::HostName
);

impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> Value<'_> {
        (**self).to_value()
    }
}

impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Value<'_> {
        match self {
            Some(v) => v.to_value(),
            None => Value::Null,
        }
    }
}

/// A statement's parameters: `params![a, b]`, an array of one type (`[id]`), or `()`.
pub trait Params {
    fn values(&self) -> Vec<Value<'_>>;
}

impl Params for () {
    fn values(&self) -> Vec<Value<'_>> {
        Vec::new()
    }
}

impl Params for &[&dyn ToValue] {
    fn values(&self) -> Vec<Value<'_>> {
        self.iter().map(|v| v.to_value()).collect()
    }
}

impl<T: ToValue, const N: usize> Params for [T; N] {
    fn values(&self) -> Vec<Value<'_>> {
        self.iter().map(|v| v.to_value()).collect()
    }
}

/// Parameters of mixed types, as rusqlite's `params!`.
#[macro_export]
macro_rules! db_params {
    ($($e:expr),* $(,)?) => {
        &[$(&$e as &dyn $crate::store::db::ToValue),*] as &[&dyn $crate::store::db::ToValue]
    };
}
pub use db_params as params;

/// A result row: SQLite's as the statement holds it (a report reads a million of them,
/// and copying each into values of our own first made it 1.7× slower), or values read off
/// PostgreSQL's wire.
pub struct Row<'r>(RowInner<'r>);

enum RowInner<'r> {
    Lite(&'r rusqlite::Row<'r>),
    Pg(&'r tokio_postgres::Row),
}

impl<'r> Row<'r> {
    /// A row `PgConn::query_typed` returned, read like any other.
    pub fn pg(r: &'r tokio_postgres::Row) -> Row<'r> {
        Row(RowInner::Pg(r))
    }
}

/// Which column of a row to read: its name as the statement gives it (the table's column
/// name, or its `AS` alias; unquoted names only, which PostgreSQL lowercases), or an
/// [`At`], a name resolved once for a statement whose rows are read by the million. Rows
/// are read by name, never by position, so that a column added to or moved in a `SELECT`
/// cannot shift what another is read as; a row of one column is read with [`Row::only`].
pub trait Column: Copy {
    /// Its index in `row`'s statement; a name the statement has not is
    /// [`StoreError::NoColumn`], naming it.
    fn index_in(self, row: &Row<'_>) -> Result<usize>;
}

impl Column for &str {
    fn index_in(self, row: &Row<'_>) -> Result<usize> {
        match &row.0 {
            RowInner::Lite(r) => lite_index(r.as_ref(), self),
            RowInner::Pg(r) => pg_index(r.columns(), self),
        }
    }
}

/// A column's index in a statement's rows, its name resolved once per statement
/// ([`Conn::query_each_at`]): a report reads a million sample rows, and reading each of
/// them by name would compare every name again for every value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At(usize);

impl Column for At {
    fn index_in(self, _: &Row<'_>) -> Result<usize> {
        Ok(self.0)
    }
}

/// `name`'s index among an SQLite statement's columns (rusqlite's lookup, which ignores
/// ASCII case, as SQLite does).
fn lite_index(stmt: &rusqlite::Statement<'_>, name: &str) -> Result<usize> {
    stmt.column_index(name)
        .map_err(|_| no_column(name, stmt.column_names()))
}

/// `name`'s index among a PostgreSQL statement's columns: as tokio-postgres finds it,
/// the name as it is, else ignoring ASCII case.
fn pg_index(columns: &[tokio_postgres::Column], name: &str) -> Result<usize> {
    let names = || columns.iter().map(|c| c.name());
    names()
        .position(|n| n == name)
        .or_else(|| names().position(|n| n.eq_ignore_ascii_case(name)))
        .ok_or_else(|| no_column(name, names()))
}

fn no_column<'a>(name: &str, has: impl IntoIterator<Item = &'a str>) -> StoreError {
    StoreError::NoColumn {
        name: name.to_string(),
        has: has.into_iter().collect::<Vec<_>>().join(", "),
    }
}

impl Row<'_> {
    /// Column `c` as a `T`.
    pub fn get<T: FromValue>(&self, c: impl Column) -> Result<T> {
        let i = c.index_in(self)?;
        T::from_value(&self.value(i)?).map_err(|e| self.in_column(i, e))
    }

    /// Column `c`, text, to `f` as it lies in the row (nothing copied).
    pub fn text<R>(&self, c: impl Column, f: impl FnOnce(&str) -> R) -> Result<R> {
        let i = c.index_in(self)?;
        match &self.value(i)? {
            Value::Text(t) => Ok(f(t)),
            v => mismatch(v, "text").map_err(|e| self.in_column(i, e)),
        }
    }

    /// The value of a row of one column (`SELECT COUNT(*) …`, `RETURNING id`): a scalar
    /// is read without a name, and only so. A statement of more columns is an error: its
    /// columns are read by name.
    pub fn only<T: FromValue>(&self) -> Result<T> {
        let n = match &self.0 {
            RowInner::Lite(r) => r.as_ref().column_count(),
            RowInner::Pg(r) => r.len(),
        };
        if n != 1 {
            return Err(StoreError::Decode(format!(
                "a row of {n} columns read as one value"
            )));
        }
        self.get(At(0))
    }

    /// Column `i`'s value, text and bytes borrowed from the row.
    fn value(&self, i: usize) -> Result<Value<'_>> {
        match &self.0 {
            RowInner::Lite(r) => Ok(borrowed(r.get_ref(i)?)),
            RowInner::Pg(r) => {
                if i >= r.len() {
                    return Err(StoreError::Decode(format!("no column {i}")));
                }
                pg::value(r, i)
            }
        }
    }

    /// A value of column `i` that could not be read, said with the column's name (asked
    /// only then: an [`At`] carries none).
    fn in_column(&self, i: usize, e: StoreError) -> StoreError {
        let name = match &self.0 {
            RowInner::Lite(r) => r.as_ref().column_name(i).ok(),
            RowInner::Pg(r) => r.columns().get(i).map(|c| c.name()),
        };
        match (e, name) {
            (StoreError::Decode(words), Some(name)) => {
                StoreError::Decode(format!("column {name}: {words}"))
            }
            (e, _) => e,
        }
    }
}

/// SQLite's value as one of ours, text and bytes borrowed.
fn borrowed(v: rusqlite::types::ValueRef<'_>) -> Value<'_> {
    use rusqlite::types::ValueRef as L;
    match v {
        L::Null => Value::Null,
        L::Integer(i) => Value::Int(i),
        L::Real(f) => Value::Real(f),
        L::Text(t) => Value::Text(String::from_utf8_lossy(t)),
        L::Blob(b) => Value::Blob(Cow::Borrowed(b)),
    }
}

/// What a column can be read as.
pub trait FromValue: Sized {
    fn from_value(v: &Value<'_>) -> Result<Self>;
}

fn mismatch<T>(v: &Value<'_>, want: &str) -> Result<T> {
    Err(StoreError::Decode(format!("expected {want}, found {v:?}")))
}

macro_rules! int_from_value {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(v: &Value<'_>) -> Result<$t> {
                match v {
                    Value::Int(i) => <$t>::try_from(*i)
                        .map_err(|_| StoreError::Decode(format!("{i} is out of range for {}", stringify!($t)))),
                    // PostgreSQL's SUM and AVG give NUMERIC, read as a float.
                    Value::Real(f) if f.fract() == 0.0 => Ok(*f as $t),
                    v => mismatch(v, "an integer"),
                }
            }
        }
    )*};
}
int_from_value!(i64, i32, u32, u64, usize, u8, i16, u16);

impl FromValue for bool {
    fn from_value(v: &Value<'_>) -> Result<bool> {
        match v {
            Value::Int(i) => Ok(*i != 0),
            v => mismatch(v, "a boolean"),
        }
    }
}

impl FromValue for f64 {
    fn from_value(v: &Value<'_>) -> Result<f64> {
        match v {
            Value::Real(f) => Ok(*f),
            Value::Int(i) => Ok(*i as f64),
            v => mismatch(v, "a number"),
        }
    }
}

impl FromValue for String {
    fn from_value(v: &Value<'_>) -> Result<String> {
        match v {
            Value::Text(s) => Ok(s.to_string()),
            v => mismatch(v, "text"),
        }
    }
}

macro_rules! id_from_value {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(v: &Value<'_>) -> Result<$t> {
                String::from_value(v).map(<$t>::from)
            }
        }
    )*};
}
id_from_value!(
    platter_proto::model::PlanId,
    platter_proto::model::CampaignId,
    platter_proto::model::CellId,
    platter_proto::model::HostName
);

impl FromValue for Vec<u8> {
    fn from_value(v: &Value<'_>) -> Result<Vec<u8>> {
        match v {
            Value::Blob(b) => Ok(b.to_vec()),
            v => mismatch(v, "bytes"),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: &Value<'_>) -> Result<Option<T>> {
        match v {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}

/// Each of `names` as its index, by `index`.
fn resolve<const N: usize>(
    names: [&str; N],
    index: impl Fn(&str) -> Result<usize>,
) -> Result<[At; N]> {
    let mut at = [At(0); N];
    for (at, name) in at.iter_mut().zip(names) {
        *at = At(index(name)?);
    }
    Ok(at)
}

enum Engine {
    Lite(rusqlite::Connection),
    Pg(pg::PgConn),
}

/// One connection to the store's database, of either engine.
pub struct Conn {
    engine: Engine,
    /// Open savepoints, for their names.
    depth: Cell<u32>,
}

impl Conn {
    pub fn sqlite(c: rusqlite::Connection) -> Conn {
        Conn {
            engine: Engine::Lite(c),
            depth: Cell::new(0),
        }
    }

    pub fn postgres(c: pg::PgConn) -> Conn {
        Conn {
            engine: Engine::Pg(c),
            depth: Cell::new(0),
        }
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self.engine, Engine::Pg(_))
    }

    /// Whether the connection is lost for good (PostgreSQL went away): open another.
    pub fn is_broken(&self) -> bool {
        match &self.engine {
            Engine::Lite(_) => false,
            Engine::Pg(c) => c.is_closed(),
        }
    }

    /// How long a request on this connection waits for the database from now on:
    /// PostgreSQL's answer (`pg::PgConn::set_deadline`), SQLite's lock (its busy timeout;
    /// an SQLite file answers at once otherwise).
    pub fn set_deadline(&self, deadline: std::time::Duration) {
        match &self.engine {
            Engine::Lite(c) => {
                let _ = c.busy_timeout(deadline);
            }
            Engine::Pg(c) => c.set_deadline(deadline),
        }
    }

    /// The SQLite connection under this one (migrations, tests that lock the file).
    pub fn as_sqlite(&self) -> Option<&rusqlite::Connection> {
        match &self.engine {
            Engine::Lite(c) => Some(c),
            Engine::Pg(_) => None,
        }
    }

    /// The PostgreSQL connection under this one (migrations).
    pub fn as_postgres(&self) -> Option<&pg::PgConn> {
        match &self.engine {
            Engine::Pg(c) => Some(c),
            Engine::Lite(_) => None,
        }
    }

    /// Runs a statement; the number of rows it changed.
    pub fn execute(&self, sql: &str, p: impl Params) -> Result<u64> {
        let values = p.values();
        match &self.engine {
            Engine::Lite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                let n = stmt.execute(rusqlite::params_from_iter(values.iter()))?;
                Ok(n as u64)
            }
            Engine::Pg(c) => c.execute(sql, &values),
        }
    }

    /// Runs one statement once per parameter set, prepared once (a step's samples).
    pub fn execute_each<P: Params>(
        &self,
        sql: &str,
        each: impl IntoIterator<Item = P>,
    ) -> Result<()> {
        match &self.engine {
            Engine::Lite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                for p in each {
                    stmt.execute(rusqlite::params_from_iter(p.values().iter()))?;
                }
                Ok(())
            }
            Engine::Pg(c) => {
                for p in each {
                    c.execute(sql, &p.values())?;
                }
                Ok(())
            }
        }
    }

    /// Runs an INSERT (an `INSERT OR IGNORE`); the new row's `id_column`, or None when a
    /// conflict left nothing inserted.
    pub fn insert_id(&self, sql: &str, id_column: &str, p: impl Params) -> Result<Option<i64>> {
        match &self.engine {
            Engine::Lite(c) => {
                let n = self.execute(sql, p)?;
                Ok((n > 0).then(|| c.last_insert_rowid()))
            }
            Engine::Pg(_) => self.query_opt(&format!("{sql} RETURNING {id_column}"), p, |r| {
                r.get(id_column)
            }),
        }
    }

    /// Every row, each made into a `T` by `f`.
    pub fn query_map<T>(
        &self,
        sql: &str,
        p: impl Params,
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.query_each(sql, p, |r| {
            out.push(f(r)?);
            Ok(())
        })?;
        Ok(out)
    }

    /// Each row to `f` as it is read, none kept: what a report over a million samples
    /// reads with, so that it holds only what it makes of them.
    pub fn query_each(
        &self,
        sql: &str,
        p: impl Params,
        mut f: impl FnMut(&Row<'_>) -> Result<()>,
    ) -> Result<()> {
        let values = p.values();
        match &self.engine {
            Engine::Lite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                let mut rows = stmt.query(rusqlite::params_from_iter(values.iter()))?;
                while let Some(r) = rows.next()? {
                    f(&Row(RowInner::Lite(r)))?;
                }
                Ok(())
            }
            Engine::Pg(c) => c.for_each(sql, &values, |r| f(&Row(RowInner::Pg(r)))),
        }
    }

    /// Each row to `f` as it is read, as `query_each`, with the columns `names` resolved
    /// to their indexes once, before the first row: what rows read by the million are read
    /// with (`reports::CountedSteps`), for a cost per row of reading by position.
    pub fn query_each_at<const N: usize>(
        &self,
        sql: &str,
        p: impl Params,
        names: [&str; N],
        mut f: impl FnMut(&Row<'_>, [At; N]) -> Result<()>,
    ) -> Result<()> {
        let values = p.values();
        match &self.engine {
            Engine::Lite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                let at = resolve(names, |name| lite_index(&stmt, name))?;
                let mut rows = stmt.query(rusqlite::params_from_iter(values.iter()))?;
                while let Some(r) = rows.next()? {
                    f(&Row(RowInner::Lite(r)), at)?;
                }
                Ok(())
            }
            Engine::Pg(c) => {
                let stmt = c.statement(sql)?;
                let at = resolve(names, |name| pg_index(stmt.columns(), name))?;
                c.for_each(sql, &values, |r| f(&Row(RowInner::Pg(r)), at))
            }
        }
    }

    /// The first row made into a `T`, if there is one.
    pub fn query_opt<T>(
        &self,
        sql: &str,
        p: impl Params,
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        let mut f = Some(f);
        let mut first = None;
        // Every row is read (a statement that writes finishes its work), the first used.
        self.query_map(sql, p, |r| {
            if let Some(f) = f.take() {
                first = Some(f(r)?);
            }
            Ok(())
        })?;
        Ok(first)
    }

    /// The first row made into a `T`; no row is an error.
    pub fn query_row<T>(
        &self,
        sql: &str,
        p: impl Params,
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        self.query_opt(sql, p, f)?.ok_or(StoreError::NoRows)
    }

    /// Whether the query returns a row.
    pub fn exists(&self, sql: &str, p: impl Params) -> Result<bool> {
        Ok(self.query_opt(sql, p, |_| Ok(()))?.is_some())
    }

    /// Several statements without parameters, as they are (no translation).
    pub fn batch(&self, sql: &str) -> Result<()> {
        match &self.engine {
            Engine::Lite(c) => Ok(c.execute_batch(sql)?),
            Engine::Pg(c) => c.batch(sql),
        }
    }

    /// A transaction that may write. SQLite's takes the write lock first (IMMEDIATE): a
    /// deferred one that read and then wrote would fail at once if the other writing
    /// connection committed in between. PostgreSQL's is READ COMMITTED; the statements
    /// that must see each other's writes across coordinators lock rows first.
    pub fn write_transaction(&self) -> Result<Tx<'_>> {
        self.batch(match self.engine {
            Engine::Lite(_) => "BEGIN IMMEDIATE",
            Engine::Pg(_) => "BEGIN",
        })?;
        Ok(Tx {
            conn: self,
            open: true,
        })
    }

    /// A transaction for reads that must agree with each other.
    pub fn read_transaction(&self) -> Result<Tx<'_>> {
        self.batch(match self.engine {
            Engine::Lite(_) => "BEGIN DEFERRED",
            Engine::Pg(_) => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        })?;
        Ok(Tx {
            conn: self,
            open: true,
        })
    }

    /// A savepoint inside the open transaction; rolled back unless committed.
    pub fn savepoint(&self) -> Result<Savepoint<'_>> {
        let n = self.depth.get() + 1;
        let name = format!("sp{n}");
        self.batch(&format!("SAVEPOINT {name}"))?;
        self.depth.set(n);
        Ok(Savepoint {
            conn: self,
            name,
            open: true,
        })
    }
}

/// An open transaction: rolled back when dropped uncommitted.
pub struct Tx<'a> {
    conn: &'a Conn,
    open: bool,
}

impl Tx<'_> {
    pub fn commit(mut self) -> Result<()> {
        self.open = false;
        self.conn.batch("COMMIT")
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        self.conn
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.open {
            // Fails only when the connection is gone, which ends the transaction anyway.
            let _ = self.conn.batch("ROLLBACK");
        }
    }
}

/// An open savepoint: rolled back (and released) when dropped uncommitted.
pub struct Savepoint<'a> {
    conn: &'a Conn,
    name: String,
    open: bool,
}

impl Savepoint<'_> {
    pub fn commit(mut self) -> Result<()> {
        self.open = false;
        self.conn.depth.set(self.conn.depth.get() - 1);
        self.conn.batch(&format!("RELEASE {}", self.name))
    }

    pub fn rollback(mut self) -> Result<()> {
        self.open = false;
        self.conn.depth.set(self.conn.depth.get() - 1);
        self.conn
            .batch(&format!("ROLLBACK TO {n}; RELEASE {n}", n = self.name))
    }
}

impl std::ops::Deref for Savepoint<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        self.conn
    }
}

impl Drop for Savepoint<'_> {
    fn drop(&mut self) {
        if self.open {
            self.conn.depth.set(self.conn.depth.get() - 1);
            let _ = self
                .conn
                .batch(&format!("ROLLBACK TO {n}; RELEASE {n}", n = self.name));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_is_postgres_only_by_its_scheme() {
        assert!("postgres://u@h/db"
            .parse::<Location>()
            .unwrap()
            .is_postgres());
        assert!("postgresql://h/db"
            .parse::<Location>()
            .unwrap()
            .is_postgres());
        assert_eq!(
            "platter-data/platter.db".parse::<Location>().unwrap(),
            Location::Sqlite("platter-data/platter.db".into())
        );
        let shown = "postgres://platter:s3cret@db.lab:5432/platter"
            .parse::<Location>()
            .unwrap()
            .to_string();
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("db.lab:5432/platter"), "{shown}");
    }

    #[test]
    fn values_round_trip_through_sqlite() {
        let c = Conn::sqlite(rusqlite::Connection::open_in_memory().unwrap());
        c.batch("CREATE TABLE t (i INTEGER, r REAL, s TEXT, b BLOB)")
            .unwrap();
        let tx = c.write_transaction().unwrap();
        tx.execute(
            "INSERT INTO t VALUES (?1, ?2, ?3, ?4)",
            params![7u32, 0.5, "x", vec![1u8, 2]],
        )
        .unwrap();
        {
            let sp = tx.savepoint().unwrap();
            sp.execute("INSERT INTO t VALUES (?1, NULL, NULL, NULL)", [8])
                .unwrap();
            // dropped: rolled back
        }
        tx.commit().unwrap();
        let rows = c
            .query_map("SELECT i, r, s, b FROM t", (), |r| {
                Ok((
                    r.get::<u32>("i")?,
                    r.get::<f64>("r")?,
                    r.get::<String>("s")?,
                    r.get::<Vec<u8>>("b")?,
                ))
            })
            .unwrap();
        assert_eq!(rows, vec![(7, 0.5, "x".to_string(), vec![1, 2])]);
        assert!(c
            .query_opt("SELECT i FROM t WHERE i = 8", (), |r| r.only::<i64>())
            .unwrap()
            .is_none());
        assert!(matches!(
            c.query_row("SELECT i FROM t WHERE i = 9", (), |r| r.only::<i64>()),
            Err(StoreError::NoRows)
        ));
        assert!(c.get_negative().is_err());
    }

    #[test]
    fn columns_are_read_by_name_and_a_wrong_name_is_an_error_naming_it() {
        let c = Conn::sqlite(rusqlite::Connection::open_in_memory().unwrap());
        c.batch("CREATE TABLE t (i INTEGER, s TEXT); INSERT INTO t VALUES (1, 'a'), (2, NULL)")
            .unwrap();
        let sql = "SELECT s, COUNT(*) AS n FROM t GROUP BY s ORDER BY s";
        let rows = c
            .query_map(sql, (), |r| {
                Ok((r.get::<Option<String>>("s")?, r.get::<i64>("N")?))
            })
            .unwrap();
        assert_eq!(rows, [(None, 1), (Some("a".to_string()), 1)]);
        let mut seen = Vec::new();
        c.query_each_at(
            "SELECT i, s FROM t ORDER BY i",
            (),
            ["s", "i"],
            |r, [s, i]| {
                seen.push((r.get::<i64>(i)?, r.get::<Option<String>>(s)?));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(seen, [(1, Some("a".to_string())), (2, None)]);
        let wrong = c.query_row(sql, (), |r| r.get::<i64>("count")).unwrap_err();
        assert!(
            matches!(&wrong, StoreError::NoColumn { name, has } if name == "count" && has == "s, n"),
            "{wrong:?}"
        );
        let wrong = c
            .query_each_at(sql, (), ["nope"], |_, _| Ok(()))
            .unwrap_err();
        assert!(wrong.to_string().contains("\"nope\""), "{wrong}");
        let null = c.query_row(sql, (), |r| r.get::<String>("s")).unwrap_err();
        assert!(
            null.to_string().contains("column s: expected text"),
            "{null}"
        );
        assert!(c.query_row(sql, (), |r| r.only::<i64>()).is_err());
    }

    impl Conn {
        fn get_negative(&self) -> Result<u32> {
            self.query_row("SELECT -1", (), |r| r.only())
        }
    }
}
