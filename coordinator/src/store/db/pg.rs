//! The PostgreSQL engine: connections driven by the store's own runtime, statements
//! translated from the SQLite dialect the store is written in, and PostgreSQL's schema.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::error::Error as StdError;
use std::task::Poll;
use std::time::Duration;

use bytes::BytesMut;
use futures::executor::block_on;
use futures::StreamExt;
use std::sync::mpsc;
use tokio::runtime::Handle;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type};
use tokio_postgres::{AsyncMessage, Client, NoTls, Statement};

use super::value::Value;
use crate::store::error::{retrying_collisions, Result, StoreError};
use crate::store::migrations::POSTGRES as MIGRATIONS;

/// The prefix of the channel coordinators tell each other of changes on
/// (`NOTIFY platter_<store id>, '…'`).
pub const CHANNEL: &str = "platter";

/// The runtime that drives a store's PostgreSQL connections: one worker thread (the
/// store's work is waited on with `block_on` from its own threads; the runtime only moves
/// bytes). Shut down without waiting when dropped (dropping a runtime may not block
/// inside another one).
pub struct PgRuntime(Option<tokio::runtime::Runtime>);

impl PgRuntime {
    pub fn new() -> Result<PgRuntime> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("store-pg")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Commit(format!("starting the store's runtime: {e}")))?;
        Ok(PgRuntime(Some(rt)))
    }

    pub fn handle(&self) -> &Handle {
        self.0.as_ref().expect("taken only when dropped").handle()
    }
}

impl Drop for PgRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// A connection; its messages are driven by a task on the store's runtime.
pub struct PgConn {
    client: Client,
    /// Prepared statements by their SQLite-dialect text.
    statements: RefCell<HashMap<String, Statement>>,
    /// The runtime that drives the connection, whose timers time `deadline`.
    rt: Handle,
    /// How long one request waits for the server's answer.
    deadline: Cell<Duration>,
    /// A request outlived its deadline: what the server says next would answer a request
    /// nobody waits for any more, so the connection is given up (`is_closed`).
    timed_out: Cell<bool>,
}

/// How long the store waits for PostgreSQL's answer to one request (a statement, a row of
/// a streamed result, a commit, the whole start-up exchange of a connection) unless told
/// otherwise (`PgConn::set_deadline`, `platter serve --store-deadline`). A server that is
/// frozen (SIGSTOP, a stalled disk, a dead switch) keeps the TCP connection open — the
/// kernel acknowledges its packets — so without a deadline a call would wait for as long
/// as it stays frozen.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(10);

/// Connects to `url` within `deadline` (the TCP connect and PostgreSQL's start-up exchange
/// together). Notifications on the connection (after `LISTEN`) go to `notify`.
pub fn connect(
    url: &str,
    rt: &Handle,
    deadline: Duration,
    notify: Option<mpsc::Sender<String>>,
) -> Result<PgConn> {
    let mut config: tokio_postgres::Config = url.parse()?;
    fit_to_deadline(&mut config, deadline);
    let connecting =
        rt.spawn(async move { tokio::time::timeout(deadline, config.connect(NoTls)).await });
    let (client, mut connection) = match block_on(connecting)
        .map_err(|e| StoreError::Commit(format!("connecting to PostgreSQL: {e}")))?
    {
        Ok(connected) => connected?,
        Err(_) => {
            return Err(StoreError::Timeout {
                what: "connecting to PostgreSQL",
                after: deadline,
            })
        }
    };
    rt.spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        use futures::StreamExt;
        while let Some(m) = messages.next().await {
            match m {
                Ok(AsyncMessage::Notification(n)) => {
                    if let Some(tx) = &notify {
                        let _ = tx.send(n.payload().to_string());
                    }
                }
                Ok(AsyncMessage::Notice(n)) => {
                    tracing::debug!(notice = %n.message(), "PostgreSQL");
                }
                Ok(_) => {}
                Err(e) => {
                    let error = crate::store::error::pg_words(&e);
                    tracing::warn!(%error, "the PostgreSQL connection ended");
                    break;
                }
            }
        }
    });
    Ok(PgConn {
        client,
        statements: RefCell::new(HashMap::new()),
        rt: rt.clone(),
        deadline: Cell::new(deadline),
        timed_out: Cell::new(false),
    })
}

/// The connection's own limits, fitted to the store's `deadline`: a connect that gives up
/// within it; TCP keepalives and a user timeout that notice a peer gone for good soon after;
/// and on the server's side, a statement or an idle transaction that outlives any client
/// still waiting for it is ended (a coordinator frozen mid-transaction does not hold its
/// locks for ever). Options the URL sets itself are kept.
fn fit_to_deadline(config: &mut tokio_postgres::Config, deadline: Duration) {
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(deadline);
    }
    config
        .keepalives(true)
        .keepalives_idle(deadline.max(Duration::from_secs(2)) / 2)
        .keepalives_interval(Duration::from_secs(2))
        .keepalives_retries(3)
        .tcp_user_timeout(deadline + Duration::from_secs(5));
    let ms = |d: Duration| d.as_millis();
    let ours = format!(
        "-c statement_timeout={} -c idle_in_transaction_session_timeout={}",
        ms(deadline * 6),
        ms(deadline * 3)
    );
    let options = match config.get_options() {
        Some(theirs) if !theirs.is_empty() => format!("{ours} {theirs}"),
        _ => ours,
    };
    config.options(&options);
}

impl PgConn {
    pub fn is_closed(&self) -> bool {
        self.client.is_closed() || self.timed_out.get()
    }

    /// How long each request waits for the server's answer from now on.
    pub fn set_deadline(&self, deadline: Duration) {
        self.deadline.set(deadline);
    }

    /// `f`'s output, or `StoreError::Timeout` when the server has not answered within the
    /// deadline. `f` is polled here, on the caller's thread; the timer is the store
    /// runtime's (entered for it), which `block_on` alone does not have.
    fn wait<T>(&self, f: impl std::future::Future<Output = T>) -> Result<T> {
        let deadline = self.deadline.get();
        let timed = {
            let _runtime = self.rt.enter();
            tokio::time::timeout(deadline, f)
        };
        block_on(timed).map_err(|_| self.gave_up(deadline))
    }

    /// A request outlived `deadline`: the connection is given up (`timed_out`).
    fn gave_up(&self, deadline: Duration) -> StoreError {
        self.timed_out.set(true);
        StoreError::Timeout {
            what: "waiting for PostgreSQL",
            after: deadline,
        }
    }

    /// `sql` prepared, once per connection.
    pub(super) fn statement(&self, sql: &str) -> Result<Statement> {
        if let Some(s) = self.statements.borrow().get(sql) {
            return Ok(s.clone());
        }
        let s = self.wait(self.client.prepare(&translate(sql)))??;
        self.statements
            .borrow_mut()
            .insert(sql.to_string(), s.clone());
        Ok(s)
    }

    pub fn execute(&self, sql: &str, values: &[Value<'_>]) -> Result<u64> {
        let stmt = self.statement(sql)?;
        let refs: Vec<&(dyn ToSql + Sync)> =
            values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        Ok(self.wait(self.client.execute(&stmt, &refs))??)
    }

    pub fn query(&self, sql: &str, values: &[Value<'_>]) -> Result<Vec<tokio_postgres::Row>> {
        let stmt = self.statement(sql)?;
        let refs: Vec<&(dyn ToSql + Sync)> =
            values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        Ok(self.wait(self.client.query(&stmt, &refs))??)
    }

    /// Each row to `f` as it arrives, never all rows at once: a report reads a million,
    /// and collecting them first held 680 MiB and decoded nothing until the server was done
    /// (BENCHMARKS.md). The connection reads the socket only as fast as rows are taken
    /// (tokio-postgres hands rows over a channel of one message), so memory stays flat.
    pub fn for_each(
        &self,
        sql: &str,
        values: &[Value<'_>],
        mut f: impl FnMut(&tokio_postgres::Row) -> Result<()>,
    ) -> Result<()> {
        let stmt = self.statement(sql)?;
        let rows = self.wait(self.client.query_raw(&stmt, values.iter()))??;
        // The rows are taken in one `block_on`, each within the deadline: a `block_on` per
        // row (its waker and thread park) was a sixth of a 1M-sample report's CPU.
        let deadline = self.deadline.get();
        let taken = {
            let _runtime = self.rt.enter();
            block_on(async {
                let mut rows = std::pin::pin!(rows);
                // Every row is read even after `f` fails: the statement must finish before
                // the connection takes the next one.
                let mut failed = None;
                loop {
                    // A row already here is taken without a timer: one set per row (the
                    // clock read, the timer wheel) was a twentieth of the client's CPU.
                    let next = match futures::poll!(rows.next()) {
                        Poll::Ready(next) => next,
                        Poll::Pending => {
                            let Ok(next) = tokio::time::timeout(deadline, rows.next()).await else {
                                return Err(());
                            };
                            next
                        }
                    };
                    let Some(row) = next else {
                        return Ok(failed.map_or(Ok(()), Err));
                    };
                    match row {
                        Ok(row) if failed.is_none() => {
                            if let Err(e) = f(&row) {
                                failed = Some(e);
                            }
                        }
                        Ok(_) => {}
                        Err(e) => return Ok(Err(e.into())),
                    }
                }
            })
        };
        taken.unwrap_or_else(|()| Err(self.gave_up(deadline)))
    }

    /// `COPY … FROM STDIN (FORMAT binary)` of `rows`, each its columns of `types`; the
    /// number of rows copied.
    pub fn copy_in<'a, const N: usize>(
        &self,
        sql: &str,
        types: &[Type; N],
        rows: impl Iterator<Item = [&'a (dyn ToSql + Sync); N]>,
    ) -> Result<u64> {
        let stmt = self.statement(sql)?;
        self.wait(async {
            let sink = self.client.copy_in(&stmt).await?;
            let writer = BinaryCopyInWriter::new(sink, types);
            let mut writer = std::pin::pin!(writer);
            for row in rows {
                writer.as_mut().write(&row).await?;
            }
            writer.finish().await
        })?
        .map_err(Into::into)
    }

    /// A statement in PostgreSQL's own dialect with typed parameters (arrays for bulk
    /// inserts), its rows as tokio-postgres gives them.
    pub fn query_typed(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>> {
        let stmt = self.statement(sql)?;
        Ok(self.wait(self.client.query(&stmt, params))??)
    }

    pub fn batch(&self, sql: &str) -> Result<()> {
        Ok(self.wait(self.client.batch_execute(sql))??)
    }
}

/// Column `i` of `row` as a [`Value`], by its PostgreSQL type; text and bytes borrowed
/// from the row.
pub(super) fn value(row: &tokio_postgres::Row, i: usize) -> Result<Value<'_>> {
    let ty = row.columns()[i].type_();
    let v = match *ty {
        Type::INT8 => row.try_get::<_, Option<i64>>(i)?.map(Value::Int),
        Type::INT4 => row
            .try_get::<_, Option<i32>>(i)?
            .map(|v| Value::Int(v.into())),
        Type::INT2 => row
            .try_get::<_, Option<i16>>(i)?
            .map(|v| Value::Int(v.into())),
        Type::OID => row
            .try_get::<_, Option<u32>>(i)?
            .map(|v| Value::Int(v.into())),
        Type::BOOL => row
            .try_get::<_, Option<bool>>(i)?
            .map(|v| Value::Int(v.into())),
        Type::FLOAT8 => row.try_get::<_, Option<f64>>(i)?.map(Value::Real),
        Type::FLOAT4 => row
            .try_get::<_, Option<f32>>(i)?
            .map(|v| Value::Real(v.into())),
        Type::NUMERIC => row
            .try_get::<_, Option<Numeric>>(i)?
            .map(|n| Value::Real(n.0)),
        Type::BYTEA => row
            .try_get::<_, Option<&[u8]>>(i)?
            .map(|b| Value::Blob(b.into())),
        _ => row
            .try_get::<_, Option<&str>>(i)?
            .map(|t| Value::Text(t.into())),
    };
    Ok(v.unwrap_or(Value::Null))
}

/// A NUMERIC (what SUM and AVG of integers give) as a float; tokio-postgres reads NUMERIC
/// only through an extra decimal crate, which a float is enough for here.
struct Numeric(f64);

impl<'a> FromSql<'a> for Numeric {
    fn from_sql(
        _: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn StdError + Sync + Send>> {
        // Binary NUMERIC: ndigits, weight, sign, dscale (i16/u16 each), then ndigits
        // base-10000 digits, the first worth 10000^weight.
        let word = |i: usize| -> std::result::Result<u16, Box<dyn StdError + Sync + Send>> {
            raw.get(i * 2..i * 2 + 2)
                .map(|b| u16::from_be_bytes([b[0], b[1]]))
                .ok_or_else(|| "a truncated NUMERIC".into())
        };
        let ndigits = word(0)? as usize;
        let weight = word(1)? as i16;
        let sign = word(2)?;
        if sign == 0xC000 {
            return Ok(Numeric(f64::NAN));
        }
        let mut v = 0.0;
        for k in 0..ndigits {
            v += f64::from(word(4 + k)?) * 10000f64.powi(i32::from(weight) - k as i32);
        }
        Ok(Numeric(if sign == 0x4000 { -v } else { v }))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }
}

/// A parameter is sent as the type PostgreSQL inferred for its place: the store's SQL
/// binds integers to BIGINT, FLOAT8, INT4 or BOOL columns alike, as SQLite allows.
impl ToSql for Value<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn StdError + Sync + Send>> {
        match (self, ty) {
            (Value::Null, _) => Ok(IsNull::Yes),
            (Value::Int(i), &Type::INT8) => i.to_sql(ty, out),
            (Value::Int(i), &Type::INT4) => i32::try_from(*i)?.to_sql(ty, out),
            (Value::Int(i), &Type::INT2) => i16::try_from(*i)?.to_sql(ty, out),
            (Value::Int(i), &Type::FLOAT8) => (*i as f64).to_sql(ty, out),
            (Value::Int(i), &Type::FLOAT4) => (*i as f32).to_sql(ty, out),
            (Value::Int(i), &Type::BOOL) => (*i != 0).to_sql(ty, out),
            (Value::Int(i), _) => i.to_string().to_sql(ty, out),
            (Value::Real(f), &Type::FLOAT8) => f.to_sql(ty, out),
            (Value::Real(f), &Type::FLOAT4) => (*f as f32).to_sql(ty, out),
            (Value::Real(f), &Type::INT8) if f.fract() == 0.0 => (*f as i64).to_sql(ty, out),
            (Value::Real(f), _) => f.to_string().to_sql(ty, out),
            (Value::Text(s), _) => s.as_ref().to_sql(ty, out),
            (Value::Blob(b), _) => b.as_ref().to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

/// A statement in the store's SQLite dialect, in PostgreSQL's: `?N` parameters become
/// `$N`, `INSERT OR IGNORE` becomes `ON CONFLICT DO NOTHING`, `REAL` (a 4-byte float in
/// PostgreSQL) becomes `DOUBLE PRECISION`. Text in quotes is left alone.
pub fn translate(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 32);
    let mut quoted = false;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = !quoted;
                out.push(c);
            }
            '?' if !quoted && chars.peek().is_some_and(|d| d.is_ascii_digit()) => out.push('$'),
            c => out.push(c),
        }
    }
    let mut out = out.replace(" AS REAL)", " AS DOUBLE PRECISION)");
    if let Some(at) = out.find("INSERT OR IGNORE INTO") {
        out.replace_range(at..at + "INSERT OR IGNORE INTO".len(), "INSERT INTO");
        let end = out.trim_end().trim_end_matches(';').len();
        let at = out.find(" RETURNING ").unwrap_or(end);
        out.insert_str(at, " ON CONFLICT DO NOTHING");
    }
    out
}

/// `url` without its password, for logs and errors.
pub fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((user, host)) => {
            let user = user.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{host}{path}")
        }
        None => url.to_string(),
    }
}

/// Brings the schema to the latest migration; several coordinators starting at once take
/// turns (an advisory lock), and each migration commits with its version. Returns the
/// migrations applied.
pub fn migrate(c: &PgConn) -> Result<usize> {
    // A migration may rewrite a large table, or wait for another coordinator's: it is not
    // held to the store's deadline (nor the server's statement_timeout, below), which is
    // for the requests of a running coordinator.
    let deadline = c.deadline.replace(MIGRATION_DEADLINE);
    // A migration that locks tables coordinators of the previous version are writing can
    // be chosen as a deadlock's victim: it is tried again (it was undone whole).
    let migrated = retrying_collisions(
        || migrate_once(c),
        |e| tracing::info!(error = %e, "migrating the PostgreSQL store collided with its users; trying again"),
    );
    c.set_deadline(deadline);
    migrated
}

/// How long one step of a migration may wait for the server.
const MIGRATION_DEADLINE: Duration = Duration::from_secs(3600);

fn migrate_once(c: &PgConn) -> Result<usize> {
    c.batch(
        "BEGIN; SET LOCAL statement_timeout = 0; SELECT pg_advisory_xact_lock(7461);
         CREATE TABLE IF NOT EXISTS platter_schema (version BIGINT NOT NULL);",
    )?;
    let applied = (|| {
        let rows = c.query("SELECT COALESCE(MAX(version), 0) FROM platter_schema", &[])?;
        let done: i64 = rows[0].try_get(0)?;
        let mut n = 0;
        for (i, m) in MIGRATIONS.iter().enumerate().skip(done as usize) {
            c.batch(m.sql)?;
            c.execute(
                "INSERT INTO platter_schema (version) VALUES (?1)",
                &[Value::Int(i as i64 + 1)],
            )?;
            n += 1;
        }
        Ok(n)
    })();
    match applied {
        Ok(n) => {
            c.batch("COMMIT")?;
            Ok(n)
        }
        Err(e) => {
            let _ = c.batch("ROLLBACK");
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_translated_to_postgresql() {
        assert_eq!(
            translate("SELECT x FROM t WHERE a = ?1 AND b = '?2' AND c = ?12"),
            "SELECT x FROM t WHERE a = $1 AND b = '?2' AND c = $12"
        );
        assert_eq!(
            translate("INSERT OR IGNORE INTO t (a) VALUES (?1)"),
            "INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING"
        );
        assert_eq!(
            translate("INSERT OR IGNORE INTO t (a) VALUES (?1) RETURNING n"),
            "INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING RETURNING n"
        );
        assert_eq!(
            translate("SELECT SUM(CAST(x AS REAL)) FROM t"),
            "SELECT SUM(CAST(x AS DOUBLE PRECISION)) FROM t"
        );
    }

    #[test]
    fn a_numeric_is_read_as_a_float() {
        // 12345.6789: ndigits 3, weight 1, sign +, dscale 4; digits 1, 2345, 6789.
        let raw: Vec<u8> = [3u16, 1, 0, 4, 1, 2345, 6789]
            .iter()
            .flat_map(|w| w.to_be_bytes())
            .collect();
        let n = Numeric::from_sql(&Type::NUMERIC, &raw).unwrap();
        assert!((n.0 - 12345.6789).abs() < 1e-9, "{}", n.0);
        let raw: Vec<u8> = [1u16, 0, 0x4000, 0, 42]
            .iter()
            .flat_map(|w| w.to_be_bytes())
            .collect();
        assert_eq!(Numeric::from_sql(&Type::NUMERIC, &raw).unwrap().0, -42.0);
    }

    #[test]
    fn a_password_is_never_shown() {
        assert_eq!(
            without_password("postgres://platter:pw@db:5432/p?sslmode=disable"),
            "postgres://platter:***@db:5432/p?sslmode=disable"
        );
        assert_eq!(without_password("postgres://db/p"), "postgres://db/p");
    }
}
