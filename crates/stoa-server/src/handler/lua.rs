//! Embedded Lua 5.4 (mlua, vendored): one interpreter per worker thread
//! and script, the script loaded once per worker (again after a reload:
//! a new runtime gives its route a new id) and kept with its module state,
//! e.g. SQLite connections, across requests — the persistent interpreter
//! of mod_perl that the seeds measured.
//!
//! The script returns a function, called for each request in a fresh
//! coroutine. Whatever must wait — `req:write`/`req:flush`, `stoa.sleep`,
//! `stoa.subrequest` — yields to this handler, which does it on the
//! worker's event loop with the request's own borrows and resumes the
//! coroutine with the answer: the worker serves other connections
//! meanwhile and no Lua callback needs `'static` request state.
//!
//! Limits: an instruction hook aborts code that runs past the route's
//! timeout or instruction budget, a memory cap per interpreter, and the
//! timeout around the whole request. An error is a 500 and a log line
//! naming the script's file and line; the interpreter goes on serving.
//! See docs/LUA.md.

use crate::exchange::{Exchange, Include};
use crate::gateway;
use crate::handler::Outcome;
use mlua::{
    HookTriggers, Lua, MultiValue, Table, ThreadStatus, UserData, UserDataMethods, Value, Variadic,
    VmState,
};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Instructions between two checks of the limits.
const HOOK_EVERY: u32 = 10_000;

/// A `lua` route, validated.
#[derive(Debug)]
pub struct LuaConfig {
    /// The script (absolute).
    pub script: PathBuf,
    /// Distinguishes this route (and this load of the config) from any
    /// other: a worker whose interpreter has another id loads anew.
    id: u64,
    pub timeout: Duration,
    /// Bytes the interpreter may allocate.
    pub memory: usize,
    /// VM instructions one request may run.
    pub max_instructions: u64,
    /// Body bytes kept from one `stoa.subrequest`.
    pub max_subrequest: usize,
    /// Alive as long as this config: a worker drops interpreters whose
    /// config is gone (replaced by a reload).
    alive: std::sync::Arc<()>,
}

impl LuaConfig {
    /// Checks that the script compiles (a syntax error is a config error,
    /// not a 500 per request).
    pub fn new(
        script: PathBuf,
        timeout: Option<Duration>,
        memory: Option<u64>,
        max_instructions: Option<u64>,
    ) -> Result<LuaConfig, String> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Lua::new()
            .load(script.as_path())
            .into_function()
            .map_err(|e| format!("{}: {e}", script.display()))?;
        Ok(LuaConfig {
            script,
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            timeout: timeout.unwrap_or(Duration::from_secs(5)),
            memory: memory.unwrap_or(64 << 20) as usize,
            max_instructions: max_instructions.unwrap_or(1_000_000_000),
            max_subrequest: 16 << 20,
            alive: std::sync::Arc::new(()),
        })
    }
}

/// One worker's interpreter for one route.
struct Vm {
    lua: Lua,
    /// What the script returned.
    handler: mlua::Function,
    /// The metatable of request objects (`req:body()`, `req:write()`...).
    req_meta: Table,
}

/// An interpreter and whether its route's config still exists.
type Entry = (std::sync::Weak<()>, Rc<Vm>);

thread_local! {
    /// Interpreters of this worker, by route id.
    static VMS: RefCell<HashMap<u64, Entry>> = RefCell::new(HashMap::new());
}

/// What Lua code yields to the handler: implemented in Lua so that it
/// works from any depth of the request's coroutine (and through pcall).
const PRELUDE: &str = r#"
local yield = coroutine.yield
local R = {}
R.__index = R
function R:body() return self._body end
function R:write(s) yield("write", tostring(s)) end
function R:flush() return yield("flush") end
function R:start(status, headers) yield("start", status, headers) end
stoa.sleep = function(s) yield("sleep", s) end
stoa.subrequest = function(p) return yield("subrequest", p) end
-- One script must not end the whole server process.
os.exit = nil
return R
"#;

fn vm_for(cfg: &LuaConfig) -> Result<Rc<Vm>, String> {
    if let Some((_, vm)) = VMS.with(|v| v.borrow().get(&cfg.id).cloned()) {
        return Ok(vm);
    }
    let vm = Rc::new(load(cfg).map_err(|e| e.to_string())?);
    VMS.with(|v| {
        let mut v = v.borrow_mut();
        // Interpreters of configs a reload replaced (and whose last
        // request ended) go; each holds up to its `memory`.
        v.retain(|_, (alive, _)| alive.strong_count() > 0);
        v.insert(cfg.id, (std::sync::Arc::downgrade(&cfg.alive), vm.clone()));
    });
    Ok(vm)
}

fn load(cfg: &LuaConfig) -> mlua::Result<Vm> {
    let lua = Lua::new();
    lua.set_memory_limit(cfg.memory)?;
    let stoa = lua.create_table()?;
    let dir = cfg
        .script
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    stoa.set(
        "sqlite",
        lua.create_function(move |_, path: String| {
            let p = dir.join(path);
            rusqlite::Connection::open(&p)
                .map(Db)
                .map_err(|e| mlua::Error::runtime(format!("sqlite {}: {e}", p.display())))
        })?,
    )?;
    lua.globals().set("stoa", stoa)?;
    let req_meta: Table = lua.load(PRELUDE).set_name("=stoa").eval()?;
    let handler: mlua::Function = lua.load(cfg.script.as_path()).eval()?;
    Ok(Vm {
        lua,
        handler,
        req_meta,
    })
}

/// A SQLite connection, kept by the script (per worker) across requests.
struct Db(rusqlite::Connection);

fn to_sql(v: Value) -> mlua::Result<rusqlite::types::Value> {
    use rusqlite::types::Value as S;
    Ok(match v {
        Value::Nil => S::Null,
        Value::Boolean(b) => S::Integer(i64::from(b)),
        Value::Integer(i) => S::Integer(i),
        Value::Number(n) => S::Real(n),
        Value::String(s) => match s.to_str() {
            Ok(t) => S::Text(t.to_string()),
            Err(_) => S::Blob(s.as_bytes().to_vec()),
        },
        other => {
            return Err(mlua::Error::runtime(format!(
                "sqlite: cannot bind a {}",
                other.type_name()
            )))
        }
    })
}

fn sql_err(e: rusqlite::Error) -> mlua::Error {
    mlua::Error::runtime(format!("sqlite: {e}"))
}

impl UserData for Db {
    fn add_methods<M: UserDataMethods<Self>>(m: &mut M) {
        // db:exec(sql, ...) -> rows changed
        m.add_method("exec", |_, db, (sql, args): (String, Variadic<Value>)| {
            let params = args
                .into_iter()
                .map(to_sql)
                .collect::<mlua::Result<Vec<_>>>()?;
            db.0.execute(&sql, rusqlite::params_from_iter(params))
                .map_err(sql_err)
        });
        // db:query(sql, ...) -> { {col = value, ...}, ... }
        m.add_method(
            "query",
            |lua, db, (sql, args): (String, Variadic<Value>)| {
                let params = args
                    .into_iter()
                    .map(to_sql)
                    .collect::<mlua::Result<Vec<_>>>()?;
                let mut st = db.0.prepare(&sql).map_err(sql_err)?;
                let names: Vec<String> = st.column_names().map(|s| s.to_string()).collect();
                let mut rows = st
                    .query(rusqlite::params_from_iter(params))
                    .map_err(sql_err)?;
                let out = lua.create_table()?;
                let mut n = 0;
                while let Some(row) = rows.next().map_err(sql_err)? {
                    let t = lua.create_table()?;
                    for (i, name) in names.iter().enumerate() {
                        use rusqlite::types::ValueRef as V;
                        let v = match row.get_ref(i).map_err(sql_err)? {
                            V::Null => Value::Nil,
                            V::Integer(x) => Value::Integer(x),
                            V::Real(x) => Value::Number(x),
                            V::Text(b) | V::Blob(b) => Value::String(lua.create_string(b)?),
                        };
                        t.set(name.as_str(), v)?;
                    }
                    n += 1;
                    out.set(n, t)?;
                }
                Ok(out)
            },
        );
        m.add_method("last_insert_rowid", |_, db, ()| {
            Ok(db.0.last_insert_rowid())
        });
    }
}

/// `application/x-www-form-urlencoded` pairs into `t` (later ones win).
fn decode_pairs(t: &Table, lua: &Lua, s: &[u8]) -> mlua::Result<()> {
    for pair in s.split(|&b| b == b'&').filter(|p| !p.is_empty()) {
        let (k, v) = match pair.iter().position(|&b| b == b'=') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &b""[..]),
        };
        t.set(
            lua.create_string(stoa_ssi::format::unescape_urlencoded(k))?,
            lua.create_string(stoa_ssi::format::unescape_urlencoded(v))?,
        )?;
    }
    Ok(())
}

/// The request object the script's function gets.
fn request_table(vm: &Vm, ex: &Exchange<'_>, norm: &str, body: &[u8]) -> mlua::Result<Table> {
    let lua = &vm.lua;
    let head = ex.req();
    let t = lua.create_table()?;
    t.set("method", head.method.as_str())?;
    t.set("path", norm)?;
    let args = lua.create_table()?;
    if let Some(q) = head.query() {
        t.set("query", lua.create_string(q)?)?;
        decode_pairs(&args, lua, q)?;
    }
    let form = head.header("content-type").is_some_and(|c| {
        c.get(..33)
            .is_some_and(|p| p.eq_ignore_ascii_case(b"application/x-www-form-urlencoded"))
    });
    if form {
        decode_pairs(&args, lua, body)?;
    }
    t.set("args", args)?;
    let headers = lua.create_table()?;
    for (n, v) in head.headers() {
        let name = String::from_utf8_lossy(n).to_ascii_lowercase();
        let value = match headers.get::<Option<mlua::String>>(name.as_str())? {
            Some(prev) => {
                let mut joined = prev.as_bytes().to_vec();
                joined.extend_from_slice(b", ");
                joined.extend_from_slice(v);
                joined
            }
            None => v.to_vec(),
        };
        headers.set(name, lua.create_string(value)?)?;
    }
    t.set("headers", headers)?;
    t.set("remote_addr", ex.peer().ip().to_string())?;
    t.set("_body", lua.create_string(body)?)?;
    t.set_metatable(Some(vm.req_meta.clone()));
    Ok(t)
}

/// Response headers from a Lua table (`name = "value"` or
/// `name = { "v1", "v2" }`), checked before anything is written so that a
/// bad one is still a clean 500; whether a Content-Type was among them.
type Headers = Vec<(String, Vec<u8>)>;

fn collect_headers(headers: Option<Table>) -> mlua::Result<(Headers, bool)> {
    let mut out = Vec::new();
    let mut typed = false;
    let Some(h) = headers else {
        return Ok((out, typed));
    };
    for pair in h.pairs::<mlua::String, Value>() {
        let (n, v) = pair?;
        let name = n.to_str()?.to_string();
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_!#$%&'*+.^`|~".contains(&b))
        {
            return Err(mlua::Error::runtime(format!("bad header name {name:?}")));
        }
        // Framing is the exchange's business.
        if ["content-length", "transfer-encoding", "connection"]
            .iter()
            .any(|f| name.eq_ignore_ascii_case(f))
        {
            continue;
        }
        typed |= name.eq_ignore_ascii_case("content-type");
        let values: Vec<Value> = match v {
            Value::Table(list) => list
                .sequence_values::<Value>()
                .collect::<mlua::Result<_>>()?,
            v => vec![v],
        };
        for v in values {
            let s = match v {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Integer(i) => i.to_string().into_bytes(),
                Value::Number(n) => n.to_string().into_bytes(),
                _ => return Err(mlua::Error::runtime("a header value must be a string")),
            };
            if s.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0) {
                return Err(mlua::Error::runtime("a header value holds CR, LF or NUL"));
            }
            out.push((name.clone(), s));
        }
    }
    Ok((out, typed))
}

/// Status line and headers.
fn start(ex: &mut Exchange<'_>, status: u16, headers: &Headers, typed: bool) {
    ex.start(status);
    for (n, v) in headers {
        ex.header(n, v);
    }
    if !typed {
        ex.header("Content-Type", b"text/html; charset=utf-8");
    }
}

fn status_of(v: Option<Value>) -> mlua::Result<u16> {
    match v {
        None | Some(Value::Nil) => Ok(200),
        Some(Value::Integer(i)) if (100..=999).contains(&i) => Ok(i as u16),
        Some(Value::Number(n)) if (100.0..=999.0).contains(&n) => Ok(n as u16),
        Some(other) => Err(mlua::Error::runtime(format!(
            "status must be a number from 100 to 999, not {other:?}"
        ))),
    }
}

/// Runs the route's script for one request. `inc` runs subrequests.
pub async fn serve(
    cfg: &LuaConfig,
    norm: String,
    ex: &mut Exchange<'_>,
    inc: &impl Include,
) -> Outcome {
    let vm = match vm_for(cfg) {
        Ok(vm) => vm,
        Err(e) => {
            tracing::error!("lua: loading {}: {e}", cfg.script.display());
            gateway::simple(ex, 500, &[]);
            return Outcome::Done;
        }
    };
    let Some(input) = gateway::read_input(ex, true).await else {
        return Outcome::Done;
    };
    let body = match input {
        gateway::Input::Memory(v) => v,
        gateway::Input::File(mut f, _) => {
            let mut v = Vec::new();
            if let Err(e) = std::io::Read::read_to_end(&mut f, &mut v) {
                tracing::error!("lua: reading the spooled body: {e}");
                gateway::simple(ex, 500, &[]);
                return Outcome::Done;
            }
            v
        }
        _ => Vec::new(),
    };
    let started = Cell::new(false);
    let run = run(cfg, &vm, &norm, &body, ex, inc, &started);
    let res = match tokio::time::timeout(cfg.timeout, run).await {
        Ok(r) => r,
        Err(_) => Err(mlua::Error::runtime(format!(
            "timed out after {:?}",
            cfg.timeout
        ))),
    };
    match res {
        Ok(()) => {}
        Err(e) => {
            // mlua's message starts with "file:line:" for a Lua error.
            tracing::error!("lua: {}: {e}", cfg.script.display());
            if started.get() {
                // Part of the body is out: the client must see a cut.
                ex.abort();
            } else {
                gateway::simple(ex, 500, &[]);
            }
        }
    }
    Outcome::Done
}

async fn run(
    cfg: &LuaConfig,
    vm: &Vm,
    norm: &str,
    body: &[u8],
    ex: &mut Exchange<'_>,
    inc: &impl Include,
    started: &Cell<bool>,
) -> mlua::Result<()> {
    let lua = &vm.lua;
    let req = request_table(vm, ex, norm, body)?;
    let th = lua.create_thread(vm.handler.clone())?;
    let deadline = Instant::now() + cfg.timeout;
    let budget = Rc::new(Cell::new(cfg.max_instructions / u64::from(HOOK_EVERY)));
    let b = budget.clone();
    th.set_hook(
        HookTriggers::new().every_nth_instruction(HOOK_EVERY),
        move |_, _| {
            let left = b.get();
            if left == 0 {
                return Err(mlua::Error::runtime("instruction limit reached"));
            }
            b.set(left - 1);
            if Instant::now() > deadline {
                return Err(mlua::Error::runtime("time limit reached"));
            }
            Ok(VmState::Continue)
        },
    );
    let mut args = MultiValue::from_iter([Value::Table(req)]);
    loop {
        let out: MultiValue = th.resume(args)?;
        if th.status() != ThreadStatus::Resumable {
            return finish(ex, out, started);
        }
        let mut out = out.into_iter();
        let op = match out.next() {
            Some(Value::String(s)) => s.to_str()?.to_string(),
            _ => return Err(mlua::Error::runtime("coroutine.yield outside stoa's calls")),
        };
        args = MultiValue::new();
        match op.as_str() {
            "start" if !started.get() => {
                let status = status_of(out.next())?;
                let headers = match out.next() {
                    Some(Value::Table(t)) => Some(t),
                    _ => None,
                };
                let (h, typed) = collect_headers(headers)?;
                start(ex, status, &h, typed);
                ex.end_head_stream();
                started.set(true);
            }
            "start" => return Err(mlua::Error::runtime("req:start() after the head was sent")),
            "write" => {
                if !started.get() {
                    start(ex, 200, &Vec::new(), false);
                    ex.end_head_stream();
                    started.set(true);
                }
                if let Some(Value::String(s)) = out.next() {
                    ex.write(&s.as_bytes());
                }
            }
            "flush" => {
                let ok = ex.flush().await;
                args = MultiValue::from_iter([Value::Boolean(ok)]);
                if !ok {
                    // The client is gone: nothing more to do for it.
                    return Ok(());
                }
            }
            "sleep" => {
                let secs = match out.next() {
                    Some(Value::Integer(i)) => i as f64,
                    Some(Value::Number(n)) => n,
                    _ => 0.0,
                };
                let d = Duration::from_secs_f64(secs.clamp(0.0, cfg.timeout.as_secs_f64()));
                tokio::time::sleep(d).await;
            }
            "subrequest" => {
                let target = match out.next() {
                    Some(Value::String(s)) if s.as_bytes().starts_with(b"/") => {
                        s.as_bytes().to_vec()
                    }
                    _ => {
                        return Err(mlua::Error::runtime(
                            "stoa.subrequest needs a path starting with '/'",
                        ))
                    }
                };
                let r = inc.include(ex.req(), &target).await;
                let headers = lua.create_table()?;
                for line in r.head.split(|&b| b == b'\n') {
                    let line = line.strip_suffix(b"\r").unwrap_or(line);
                    if let Some(i) = line.iter().position(|&b| b == b':') {
                        let name = String::from_utf8_lossy(&line[..i]).to_ascii_lowercase();
                        let v = line[i + 1..].trim_ascii();
                        headers.set(name, lua.create_string(v)?)?;
                    }
                }
                args = MultiValue::from_iter([
                    Value::Integer(i64::from(r.status)),
                    Value::String(lua.create_string(&r.body)?),
                    Value::Table(headers),
                ]);
            }
            other => {
                return Err(mlua::Error::runtime(format!(
                    "coroutine.yield({other:?}) outside stoa's calls"
                )))
            }
        }
    }
}

/// The function returned: `status, headers, body` (or nothing after
/// streaming).
fn finish(ex: &mut Exchange<'_>, out: MultiValue, started: &Cell<bool>) -> mlua::Result<()> {
    if started.get() {
        ex.finish();
        return Ok(());
    }
    let mut out = out.into_iter();
    let status = status_of(out.next())?;
    let headers = match out.next() {
        Some(Value::Table(t)) => Some(t),
        _ => None,
    };
    let body = match out.next() {
        Some(Value::String(s)) => s.as_bytes().to_vec(),
        None | Some(Value::Nil) => Vec::new(),
        Some(other) => {
            return Err(mlua::Error::runtime(format!(
                "the body must be a string, not a {}",
                other.type_name()
            )))
        }
    };
    let (h, typed) = collect_headers(headers)?;
    start(ex, status, &h, typed);
    ex.end_head(Some(body.len() as u64));
    ex.write(&body);
    ex.finish();
    Ok(())
}
