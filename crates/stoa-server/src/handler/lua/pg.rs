//! `stoa.postgres(conninfo)`: PostgreSQL through tokio-postgres on the
//! worker's event loop. The object a script makes at its top level lives
//! in that worker's interpreter, so its connection is opened on the first
//! query and kept across requests (mod_perl's persistent connections,
//! which the seeds measured), with its prepared statements; a connection
//! the server closed is opened again on the next query.
//!
//! Queries yield the request's coroutine: the worker serves other
//! requests while PostgreSQL works. Parameters are bound (`$1`, `$2`...),
//! sent in text format so that the server converts them to whatever type
//! the statement wants; results come back as Lua values (see
//! [`Cell`]).

use mlua::{Lua, Table, Value};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type};
use tokio_postgres::{Client, Statement};

/// Prepared statements kept per connection; past it the cache starts over.
const MAX_STATEMENTS: usize = 256;

/// The connection of one `stoa.postgres` object.
pub struct Pg {
    conninfo: String,
    conn: RefCell<Option<Rc<Conn>>>,
    /// Held while connecting, so that concurrent first queries of one
    /// worker share one connection.
    connecting: tokio::sync::Mutex<()>,
}

struct Conn {
    client: Client,
    statements: RefCell<HashMap<String, Statement>>,
}

/// The Lua side's handle (`stoa._pg`).
pub struct PgHandle(pub Rc<Pg>);

impl mlua::UserData for PgHandle {}

impl Pg {
    pub fn new(conninfo: String) -> Result<Pg, String> {
        // A malformed string is the script's error at the line that made it.
        conninfo
            .parse::<tokio_postgres::Config>()
            .map_err(|e| format!("postgres: {e}"))?;
        Ok(Pg {
            conninfo,
            conn: RefCell::new(None),
            connecting: tokio::sync::Mutex::new(()),
        })
    }

    async fn conn(&self) -> Result<Rc<Conn>, String> {
        let live = |c: &Option<Rc<Conn>>| c.as_ref().filter(|c| !c.client.is_closed()).cloned();
        if let Some(c) = live(&self.conn.borrow()) {
            return Ok(c);
        }
        let _g = self.connecting.lock().await;
        if let Some(c) = live(&self.conn.borrow()) {
            return Ok(c);
        }
        let (client, connection) = tokio_postgres::connect(&self.conninfo, tokio_postgres::NoTls)
            .await
            .map_err(|e| format!("postgres: connecting: {}", describe(&e)))?;
        // The connection's I/O runs beside the requests; it ends when the
        // client goes (a reload drops the interpreter) or the server
        // closes it (the next query connects again).
        tokio::task::spawn_local(async move {
            if let Err(e) = connection.await {
                tracing::warn!("postgres: connection closed: {e}");
            }
        });
        let c = Rc::new(Conn {
            client,
            statements: RefCell::new(HashMap::new()),
        });
        *self.conn.borrow_mut() = Some(c.clone());
        Ok(c)
    }
}

impl Conn {
    async fn statement(&self, sql: &str) -> Result<Statement, tokio_postgres::Error> {
        if let Some(s) = self.statements.borrow().get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql).await?;
        let mut st = self.statements.borrow_mut();
        if st.len() >= MAX_STATEMENTS {
            st.clear();
        }
        st.insert(sql.to_owned(), s.clone());
        Ok(s)
    }
}

/// The error's text with the server's detail (tokio-postgres's Display
/// says only "db error").
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut s = format!(
                "{}: {} (SQLSTATE {})",
                db.severity(),
                db.message(),
                db.code().code()
            );
            if let Some(d) = db.detail() {
                s.push_str(": ");
                s.push_str(d);
            }
            s
        }
        None => e.to_string(),
    }
}

/// A bound parameter: sent as text, which the server parses as the type
/// the statement gives it (so one Lua string fits an integer, a date or a
/// JSON column alike).
#[derive(Debug)]
pub enum Param {
    Null,
    Text(Vec<u8>),
}

impl ToSql for Param {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Param::Null => Ok(IsNull::Yes),
            Param::Text(b) if *ty == Type::BYTEA => {
                // bytea's text input: hex.
                out.extend_from_slice(b"\\x");
                for &x in b {
                    out.extend_from_slice(format!("{x:02x}").as_bytes());
                }
                Ok(IsNull::No)
            }
            Param::Text(b) => {
                out.extend_from_slice(b);
                Ok(IsNull::No)
            }
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    fn encode_format(&self, _ty: &Type) -> tokio_postgres::types::Format {
        tokio_postgres::types::Format::Text
    }

    tokio_postgres::types::to_sql_checked!();
}

/// A Lua argument as a parameter.
pub fn param(v: Value) -> Result<Param, String> {
    Ok(match v {
        Value::Nil => Param::Null,
        Value::Boolean(b) => Param::Text(if b { b"t".to_vec() } else { b"f".to_vec() }),
        Value::Integer(i) => Param::Text(i.to_string().into_bytes()),
        Value::Number(n) => Param::Text(
            if n.is_nan() {
                "NaN".to_string()
            } else if n.is_infinite() {
                if n > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
            } else {
                format!("{n:?}")
            }
            .into_bytes(),
        ),
        Value::String(s) => Param::Text(s.as_bytes().to_vec()),
        other => return Err(format!("postgres: cannot bind a {}", other.type_name())),
    })
}

/// A result column's value: booleans, integers (int2/4/8, oid) and floats
/// as Lua numbers; text, varchar, name, json(b), xml, bytea as strings;
/// numeric as its exact decimal string; date and timestamps as ISO 8601
/// strings; uuid as its usual text. NULL is nil. Other types are an error
/// asking for a cast in the SQL (`x::text`).
pub enum Cell {
    Null,
    Bool(bool),
    Int(i64),
    Num(f64),
    Bytes(Vec<u8>),
}

impl<'a> FromSql<'a> for Cell {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> Result<Cell, Box<dyn std::error::Error + Sync + Send>> {
        let be = |n: usize| -> Result<u64, Box<dyn std::error::Error + Sync + Send>> {
            if raw.len() != n {
                return Err(format!("{ty}: {} bytes", raw.len()).into());
            }
            Ok(raw.iter().fold(0u64, |a, &b| (a << 8) | u64::from(b)))
        };
        Ok(match *ty {
            Type::VOID => Cell::Null,
            Type::BOOL => Cell::Bool(be(1)? != 0),
            Type::INT2 => Cell::Int(i64::from(be(2)? as u16 as i16)),
            Type::INT4 => Cell::Int(i64::from(be(4)? as u32 as i32)),
            Type::INT8 => Cell::Int(be(8)? as i64),
            Type::OID => Cell::Int(be(4)? as i64),
            Type::FLOAT4 => Cell::Num(f64::from(f32::from_bits(be(4)? as u32))),
            Type::FLOAT8 => Cell::Num(f64::from_bits(be(8)?)),
            Type::TEXT
            | Type::VARCHAR
            | Type::BPCHAR
            | Type::NAME
            | Type::UNKNOWN
            | Type::JSON
            | Type::XML
            | Type::BYTEA
            | Type::CHAR => Cell::Bytes(raw.to_vec()),
            // Version byte 1, then the text.
            Type::JSONB => Cell::Bytes(raw.get(1..).unwrap_or_default().to_vec()),
            Type::NUMERIC => Cell::Bytes(numeric(raw)?.into_bytes()),
            Type::DATE => Cell::Bytes(date(i64::from(be(4)? as u32 as i32)).into_bytes()),
            Type::TIMESTAMP => Cell::Bytes(timestamp(be(8)? as i64, "").into_bytes()),
            Type::TIMESTAMPTZ => Cell::Bytes(timestamp(be(8)? as i64, "+00").into_bytes()),
            Type::UUID if raw.len() == 16 => {
                let h: String = raw.iter().map(|b| format!("{b:02x}")).collect();
                Cell::Bytes(
                    format!(
                        "{}-{}-{}-{}-{}",
                        &h[..8],
                        &h[8..12],
                        &h[12..16],
                        &h[16..20],
                        &h[20..]
                    )
                    .into_bytes(),
                )
            }
            _ => {
                return Err(format!(
                    "no Lua value for a column of type {ty}: cast it in the SQL (`::text`)"
                )
                .into())
            }
        })
    }

    fn from_sql_null(_: &Type) -> Result<Cell, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Cell::Null)
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// NUMERIC's binary form (base-10000 digits) as its decimal text.
fn numeric(raw: &[u8]) -> Result<String, Box<dyn std::error::Error + Sync + Send>> {
    let r16 = |i: usize| -> Result<u16, Box<dyn std::error::Error + Sync + Send>> {
        raw.get(i..i + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(|| "numeric: short".into())
    };
    let ndigits = r16(0)? as usize;
    let weight = r16(2)? as i16 as i32;
    let sign = r16(4)?;
    let dscale = r16(6)? as usize;
    match sign {
        0xC000 => return Ok("NaN".into()),
        0xD000 => return Ok("Infinity".into()),
        0xF000 => return Ok("-Infinity".into()),
        _ => {}
    }
    let digits = (0..ndigits)
        .map(|i| r16(8 + 2 * i))
        .collect::<Result<Vec<u16>, _>>()?;
    let d = |i: i32| -> u16 {
        if i < 0 {
            0
        } else {
            digits.get(i as usize).copied().unwrap_or(0)
        }
    };
    let mut s = String::new();
    if sign == 0x4000 {
        s.push('-');
    }
    if weight < 0 {
        s.push('0');
    } else {
        for i in 0..=weight {
            if i == 0 {
                s.push_str(&d(i).to_string());
            } else {
                s.push_str(&format!("{:04}", d(i)));
            }
        }
    }
    if dscale > 0 {
        s.push('.');
        let mut frac = String::new();
        let mut i = weight + 1;
        while frac.len() < dscale {
            frac.push_str(&format!("{:04}", d(i)));
            i += 1;
        }
        frac.truncate(dscale);
        s.push_str(&frac);
    }
    Ok(s)
}

/// Days since 2000-01-01 as YYYY-MM-DD (proleptic Gregorian).
fn date(days: i64) -> String {
    // Howard Hinnant's civil_from_days, from 1970-01-01.
    let z = days + 10_957 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Microseconds since 2000-01-01 00:00 as `YYYY-MM-DD HH:MM:SS[.ffffff]`.
fn timestamp(us: i64, zone: &str) -> String {
    if us == i64::MAX {
        return "infinity".into();
    }
    if us == i64::MIN {
        return "-infinity".into();
    }
    let day = us.div_euclid(86_400_000_000);
    let rest = us.rem_euclid(86_400_000_000);
    let (secs, micros) = (rest / 1_000_000, rest % 1_000_000);
    let mut s = format!(
        "{} {:02}:{:02}:{:02}",
        date(day),
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    if micros != 0 {
        let f = format!(".{micros:06}");
        s.push_str(f.trim_end_matches('0'));
    }
    s.push_str(zone);
    s
}

fn cell_value(lua: &Lua, c: Cell) -> mlua::Result<Value> {
    Ok(match c {
        Cell::Null => Value::Nil,
        Cell::Bool(b) => Value::Boolean(b),
        Cell::Int(i) => Value::Integer(i),
        Cell::Num(n) => Value::Number(n),
        Cell::Bytes(b) => Value::String(lua.create_string(b)?),
    })
}

/// What a script asked: `pg:query` (rows), `pg:exec` (a count) or
/// `pg:batch` (statements without parameters, e.g. a transaction).
#[derive(Clone, Copy)]
pub enum Op {
    Query,
    Exec,
    Batch,
}

impl Op {
    pub fn from_code(i: i64) -> Option<Op> {
        match i {
            1 => Some(Op::Query),
            2 => Some(Op::Exec),
            3 => Some(Op::Batch),
            _ => None,
        }
    }
}

/// Runs one call; Err is the message the script's `error` gets.
pub async fn run(
    lua: &Lua,
    pg: &Pg,
    op: Op,
    sql: &str,
    params: &[Param],
) -> mlua::Result<Result<Value, String>> {
    let conn = match pg.conn().await {
        Ok(c) => c,
        Err(e) => return Ok(Err(e)),
    };
    let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as _).collect();
    let fail = |e: &tokio_postgres::Error| {
        // A statement the server no longer knows (a schema change, a
        // session reset) is prepared again next time.
        conn.statements.borrow_mut().remove(sql);
        format!("postgres: {}", describe(e))
    };
    match op {
        Op::Batch => match conn.client.batch_execute(sql).await {
            Ok(()) => Ok(Ok(Value::Boolean(true))),
            Err(e) => Ok(Err(fail(&e))),
        },
        Op::Exec | Op::Query => {
            let st = match conn.statement(sql).await {
                Ok(s) => s,
                Err(e) => return Ok(Err(fail(&e))),
            };
            if st.params().len() != params.len() {
                return Ok(Err(format!(
                    "postgres: the statement takes {} parameters, {} given",
                    st.params().len(),
                    params.len()
                )));
            }
            if let Op::Exec = op {
                return match conn.client.execute(&st, &refs).await {
                    Ok(n) => Ok(Ok(Value::Integer(n as i64))),
                    Err(e) => Ok(Err(fail(&e))),
                };
            }
            let rows = match conn.client.query(&st, &refs).await {
                Ok(r) => r,
                Err(e) => return Ok(Err(fail(&e))),
            };
            let out: Table = lua.create_table_with_capacity(rows.len(), 0)?;
            for (n, row) in rows.iter().enumerate() {
                let t = lua.create_table_with_capacity(0, row.len())?;
                for (i, col) in row.columns().iter().enumerate() {
                    match row.try_get::<_, Cell>(i) {
                        Ok(c) => t.raw_set(col.name(), cell_value(lua, c)?)?,
                        Err(e) => {
                            return Ok(Err(format!("postgres: column {}: {e}", col.name())));
                        }
                    }
                }
                out.raw_set(n + 1, t)?;
            }
            Ok(Ok(Value::Table(out)))
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates_and_numerics_decode() {
        assert_eq!(super::date(0), "2000-01-01");
        assert_eq!(super::date(-1), "1999-12-31");
        assert_eq!(super::date(9190), "2025-02-28");
        assert_eq!(
            super::timestamp(86_400_000_000 + 3_723_500_000, "+00"),
            "2000-01-02 01:02:03.5+00"
        );
        // 12345.678: digits 1, 2345, 6780; weight 1; dscale 3.
        let raw = [0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 0x09, 0x29, 0x1a, 0x7c];
        assert_eq!(super::numeric(&raw).unwrap(), "12345.678");
        // -0.05: digit 500, weight -1, dscale 2.
        let raw = [0, 1, 0xff, 0xff, 0x40, 0, 0, 2, 0x01, 0xf4];
        assert_eq!(super::numeric(&raw).unwrap(), "-0.05");
        // 0 with no digits.
        assert_eq!(super::numeric(&[0, 0, 0, 0, 0, 0, 0, 0]).unwrap(), "0");
    }
}
