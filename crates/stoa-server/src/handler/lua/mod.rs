//! Embedded Lua 5.4 (mlua, vendored): one interpreter per worker thread
//! and script, the script loaded once per worker (again after a reload:
//! a new runtime gives its route a new id) and kept with its module state,
//! e.g. SQLite and PostgreSQL connections, across requests — the
//! persistent interpreter of mod_perl that the seeds measured.
//!
//! The script returns a function, called for each request in a fresh
//! coroutine. Whatever must wait — `req:write`/`req:flush`, `stoa.sleep`,
//! `stoa.subrequest`, PostgreSQL queries — yields to this handler, which
//! does it on the worker's event loop with the request's own borrows and
//! resumes the coroutine with the answer: the worker serves other
//! connections meanwhile and no Lua callback needs `'static` request
//! state.
//!
//! The same machinery runs an `access` script before another handler
//! ([`access`]): it answers, or lets the request through with variables.
//!
//! Limits: an instruction hook aborts code that runs past the route's
//! timeout or instruction budget, a memory cap per interpreter, and the
//! timeout around the whole request. An error is a 500 and a log line
//! naming the script's file and line; the interpreter goes on serving.
//! See docs/LUA.md.

mod alloc;
mod answer;
mod fields;
pub mod pg;
mod resume;
pub mod shared;
mod watch;

use crate::exchange::{Exchange, Include};
use crate::gateway;
use crate::handler::{Authz, Outcome};
use mlua::{
    HookTriggers, Lua, MultiValue, Table, ThreadStatus, UserData, UserDataMethods, Value, Variadic,
    VmState,
};
use rustc_hash::FxHashMap;
use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stoa_h1::RequestHead;

/// Instructions between two checks of the limits.
const HOOK_EVERY: u32 = 10_000;

/// The shared dictionaries a script sees as `stoa.shared.NAME`.
pub type Dicts = Arc<[Arc<shared::Dict>]>;

/// A `lua` script (a route's handler or an `access` script), validated.
#[derive(Debug)]
pub struct LuaConfig {
    /// The script (absolute).
    pub script: PathBuf,
    /// Distinguishes this script (and this load of the config) from any
    /// other: a worker whose interpreter has another id loads anew.
    id: u64,
    pub timeout: Duration,
    /// Bytes the interpreter may allocate.
    pub memory: usize,
    /// VM instructions one request may run.
    pub max_instructions: u64,
    /// Body bytes kept from one `stoa.subrequest`.
    pub max_subrequest: usize,
    /// `[lua.shared]`.
    shared: Dicts,
    /// Alive as long as this config: a worker drops interpreters whose
    /// config is gone (replaced by a reload).
    alive: Arc<()>,
}

impl std::fmt::Debug for shared::Dict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Dict({})", self.name)
    }
}

impl LuaConfig {
    /// Checks that the script compiles (a syntax error is a config error,
    /// not a 500 per request).
    pub fn new(
        script: PathBuf,
        timeout: Option<Duration>,
        memory: Option<u64>,
        max_instructions: Option<u64>,
        shared: Dicts,
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
            shared,
            alive: Arc::new(()),
        })
    }
}

/// The request being run in an interpreter, for the instruction hook: one
/// coroutine runs at a time in a worker, so the handler points this at
/// the request's budget before each resume.
#[derive(Default)]
struct Running {
    /// Hook calls left before the instruction limit.
    budget: Cell<u64>,
    deadline: Cell<Option<Instant>>,
    /// Set by the watchdog's hook when it stopped the request (the
    /// coroutine yielded with nothing): why.
    stopped: Cell<Option<&'static [u8]>>,
}

/// One worker's interpreter for one script.
struct Vm {
    lua: Lua,
    /// The script's function wrapped by the prelude's `entry` (as a
    /// handler) and `access_entry` (as an access check): each takes a
    /// request's id, makes its `req` table in Lua and yields the
    /// response's status, header count (see `scratch`) and body.
    entry: Runner,
    access_entry: Runner,
    /// Where the prelude puts a response's header fields.
    scratch: Table,
    running: Rc<Running>,
    /// The request being resumed, for its lazy fields (`req._id`).
    current: Rc<Current>,
    /// What the prelude's `collect` recorded of a handler's answer.
    answer: Rc<answer::Answer>,
    /// The id of the next request.
    next_id: Cell<i64>,
}

/// A wrapper of the prelude and its coroutines parked between requests.
/// The wrapper loops: it yields [`DONE`] and the response at the end of
/// a request and takes the next request's id as the value of that
/// yield, so a parked coroutine is resumed as it is (no reset, no
/// function pushed anew: mlua's `Thread::reset` and the function's
/// clone were ~1.5k instructions of a hello handler).
struct Runner {
    func: mlua::Function,
    parked: RefCell<Vec<mlua::Thread>>,
}

impl Runner {
    /// Keeps a coroutine parked at its end-of-request yield for the next
    /// request (up to `KEEP_THREADS`).
    fn park(&self, th: mlua::Thread) {
        let mut parked = self.parked.borrow_mut();
        if parked.len() < KEEP_THREADS {
            parked.push(th);
        }
    }
}

/// Coroutines kept for reuse per wrapper.
const KEEP_THREADS: usize = 32;

/// What the prelude's wrappers yield first at the end of a request: a
/// light userdata of this address, which no script can make.
static DONE: u8 = 0;

fn done_marker() -> mlua::LightUserData {
    mlua::LightUserData(std::ptr::addr_of!(DONE) as *mut std::ffi::c_void)
}

/// The request whose coroutine is being resumed: `req` tables hold only
/// their request's id, and a lazy field is read through here. It is set
/// for the duration of one resume only ([`Limits::resume`]), so a `req`
/// a script kept past its request reads nothing (its id is not the
/// current one), and nothing of the request is copied to make the
/// fields readable (a copy of the head was ~4 % of a hello handler).
struct Current {
    id: Cell<i64>,
    /// Null outside a resume.
    req: Cell<*const RawReq<'static>>,
}

impl Default for Current {
    fn default() -> Current {
        Current {
            id: Cell::new(0),
            req: Cell::new(std::ptr::null()),
        }
    }
}

/// Puts back what [`Current`] held before a resume, however it ends.
struct Restore<'c> {
    current: &'c Current,
    id: i64,
    req: *const RawReq<'static>,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        self.current.id.set(self.id);
        self.current.req.set(self.req);
    }
}

/// An interpreter and whether its script's config still exists.
type Entry = (std::sync::Weak<()>, Rc<Vm>);

thread_local! {
    /// Interpreters of this worker, by script id (a small integer: no
    /// need for SipHash on every request). Not in `local`, which cannot
    /// name a handler's type (see local.rs).
    static VMS: RefCell<FxHashMap<u64, Entry>> = RefCell::new(FxHashMap::default());
}

/// What Lua code yields to the handler: implemented in Lua so that it
/// works from any depth of the request's coroutine (and through pcall).
/// Request fields are made on first use (`field`, fields.rs) and kept in
/// the request's table.
const PRELUDE: &str = r#"
local yield, rawget, rawset, error, type, pairs, ipairs, tostring, find, concat, setmetatable =
  coroutine.yield, rawget, rawset, error, type, pairs, ipairs, tostring, string.find,
  table.concat, setmetatable
local field, body, collect, newpg, scratch, DONE =
  stoa._field, stoa._body, stoa._collect, stoa._pg, stoa._scratch, stoa._done
stoa._field, stoa._body, stoa._collect, stoa._pg, stoa._scratch, stoa._done =
  nil, nil, nil, nil, nil, nil
local R = {}
-- Kept here, so that `req.method` is never a new string (`method_code`).
local METHODS = { "GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH" }
-- A method of R, else the request's field (made once, then kept in the
-- table): handler/lua/fields.rs.
R.__index = field
-- Response headers as name, value, name, value... in `scratch` (reused:
-- Stoa reads it before this interpreter runs anything else); their count.
local function put(n, k, v)
  local tv = type(v)
  if tv == "number" then
    v = tostring(v)
  elseif tv ~= "string" then
    error("a header value must be a string", 0)
  end
  scratch[n + 1], scratch[n + 2] = k, v
  return n + 2
end
local function flat(h)
  if type(h) ~= "table" then return nil end
  local n = 0
  for k, v in pairs(h) do
    if type(k) ~= "string" then error("a header name must be a string", 0) end
    local tv = type(v)
    if tv == "string" then
      -- The common case inline: no call to `put`, no second `type`.
      scratch[n + 1], scratch[n + 2] = k, v
      n = n + 2
    elseif tv == "table" then
      for _, x in ipairs(v) do n = put(n, k, x) end
    else
      n = put(n, k, v)
    end
  end
  return n
end
function R:body() return body(self) end
function R:write(s) yield("write", tostring(s)) end
function R:flush() return yield("flush") end
function R:start(status, headers) yield("start", status, flat(headers)) end
stoa.sleep = function(s) yield("sleep", s) end
stoa.subrequest = function(p) return yield("subrequest", p) end
local PG = {}
PG.__index = PG
function PG:query(sql, ...)
  local ok, r = yield("pg", self._h, 1, sql, ...)
  if not ok then error(r, 2) end
  return r
end
function PG:exec(sql, ...)
  local ok, r = yield("pg", self._h, 2, sql, ...)
  if not ok then error(r, 2) end
  return r
end
function PG:batch(sql)
  local ok, r = yield("pg", self._h, 3, sql)
  if not ok then error(r, 2) end
  return r
end
stoa.postgres = function(conninfo)
  return setmetatable({ _h = newpg(conninfo) }, PG)
end
-- One script must not end the whole server process.
os.exit = nil
-- What a request's coroutine runs: the request's table is made here, in
-- Lua, from its id. At the end of a request it yields DONE and the
-- response, and the value of that yield is the next request's id: a
-- coroutine serves one request after another.
local function entry(handler)
  return function(id, m)
    while true do
      -- The method comes as a number (`method_code`): its string is one
      -- of METHODS, made once. The nil fields size the table for the
      -- fields a script reads.
      local status, headers, body =
        handler(setmetatable({ _id = id, method = METHODS[m], args = nil, headers = nil }, R))
      -- The plain answer is read where it lies (handler/lua/answer.rs):
      -- these locals keep it alive while the coroutine is parked.
      if collect(status, headers, body) then
        id, m = yield(DONE)
      else
        id, m = yield(DONE, status, flat(headers), body)
      end
    end
  end
end
local function access_entry(handler)
  return function(id, m)
    while true do
      local a, b, c = handler(setmetatable({ _id = id, method = METHODS[m] }, R))
      if type(a) == "number" then b = flat(b) end
      id, m = yield(DONE, a, b, c)
    end
  end
end
return entry, access_entry
"#;

fn vm_for(cfg: &LuaConfig) -> Result<Rc<Vm>, String> {
    // Only the interpreter is cloned: the entry's `Weak` stays (its clone
    // and drop were a third of this lookup, callgrind).
    if let Some(vm) = VMS.with(|v| v.borrow().get(&cfg.id).map(|(_, vm)| vm.clone())) {
        return Ok(vm);
    }
    let vm = Rc::new(load(cfg).map_err(|e| e.to_string())?);
    VMS.with(|v| {
        let mut v = v.borrow_mut();
        // Interpreters of configs a reload replaced (and whose last
        // request ended) go; each holds up to its `memory`.
        v.retain(|_, (alive, _)| alive.strong_count() > 0);
        v.insert(cfg.id, (Arc::downgrade(&cfg.alive), vm.clone()));
    });
    Ok(vm)
}

fn load(cfg: &LuaConfig) -> mlua::Result<Vm> {
    let lua = Lua::new();
    // The size-class allocator keeps the cap itself (alloc.rs); mlua's
    // stays where no region could be reserved.
    if !alloc::install(&lua, cfg.memory) {
        lua.set_memory_limit(cfg.memory)?;
    }
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
    stoa.set(
        "_pg",
        lua.create_function(|_, conninfo: String| {
            pg::Pg::new(conninfo)
                .map(|p| pg::PgHandle(Rc::new(p)))
                .map_err(mlua::Error::runtime)
        })?,
    )?;
    let scratch = lua.create_table()?;
    stoa.set("_scratch", scratch.clone())?;
    stoa.set("_done", done_marker())?;
    let current = Rc::new(Current::default());
    // The C closures point at `current`: the interpreter keeps a handle
    // to it for as long as it lives.
    lua.set_app_data(current.clone());
    stoa.set("_field", fields::closure(&lua, Rc::as_ptr(&current), true)?)?;
    stoa.set("_body", fields::closure(&lua, Rc::as_ptr(&current), false)?)?;
    let answer = Rc::new(answer::Answer::default());
    lua.set_app_data(answer.clone());
    stoa.set("_collect", answer::closure(&lua, Rc::as_ptr(&answer))?)?;
    let dicts = lua.create_table()?;
    for d in cfg.shared.iter() {
        dicts.set(d.name.as_str(), SharedDict(d.clone()))?;
    }
    stoa.set("shared", dicts)?;
    lua.globals().set("stoa", stoa)?;
    let (entry, access_entry): (mlua::Function, mlua::Function) =
        lua.load(PRELUDE).set_name("=stoa").eval()?;
    // The hook reads the budget of whichever request is running; mlua
    // keeps one hooked thread per interpreter, so each resume hooks its
    // coroutine again (see `Limits::resume`).
    let running = Rc::new(Running::default());
    lua.set_hook(hook_triggers(), hook(running.clone()));
    // The script's top level runs under the same limits as a request.
    running
        .budget
        .set(cfg.max_instructions / u64::from(HOOK_EVERY));
    running.deadline.set(Some(Instant::now() + cfg.timeout));
    let handler: mlua::Function = lua.load(cfg.script.as_path()).eval()?;
    let entry: mlua::Function = entry.call(&handler)?;
    let access_entry: mlua::Function = access_entry.call(&handler)?;
    // Generational collection: each request leaves young garbage only.
    lua.gc_gen(0, 0);
    running.budget.set(u64::MAX);
    running.deadline.set(None);
    // Requests are watched by `watch` instead: a hook on the main state
    // would be inherited by every coroutine.
    lua.remove_hook();
    Ok(Vm {
        lua,
        scratch,
        entry: Runner {
            func: entry,
            parked: RefCell::new(Vec::new()),
        },
        access_entry: Runner {
            func: access_entry,
            parked: RefCell::new(Vec::new()),
        },
        running,
        current,
        answer,
        next_id: Cell::new(1),
    })
}

fn hook_triggers() -> HookTriggers {
    HookTriggers::new().every_nth_instruction(HOOK_EVERY)
}

/// The instruction hook: stops code past its budget or deadline.
fn hook(r: Rc<Running>) -> impl Fn(&Lua, mlua::Debug) -> mlua::Result<VmState> {
    move |_, _| {
        let left = r.budget.get();
        if left == 0 {
            return Err(mlua::Error::runtime("instruction limit reached"));
        }
        r.budget.set(left - 1);
        if r.deadline.get().is_some_and(|d| Instant::now() > d) {
            return Err(mlua::Error::runtime("time limit reached"));
        }
        Ok(VmState::Continue)
    }
}

/// `stoa.shared.NAME`.
struct SharedDict(Arc<shared::Dict>);

fn to_stored(v: Value, what: &str) -> mlua::Result<Option<shared::Stored>> {
    use shared::Stored;
    Ok(Some(match v {
        Value::Nil => return Ok(None),
        Value::Boolean(b) => Stored::Bool(b),
        Value::Integer(i) => Stored::Int(i),
        Value::Number(n) => Stored::Num(n),
        Value::String(s) => Stored::Str(s.as_bytes().to_vec().into()),
        other => {
            return Err(mlua::Error::runtime(format!(
                "stoa.shared: {what} cannot be a {}",
                other.type_name()
            )))
        }
    }))
}

fn from_stored(lua: &Lua, v: shared::Stored) -> mlua::Result<Value> {
    use shared::Stored;
    Ok(match v {
        Stored::Bool(b) => Value::Boolean(b),
        Stored::Int(i) => Value::Integer(i),
        Stored::Num(n) => Value::Number(n),
        Stored::Str(s) => Value::String(lua.create_string(&s)?),
    })
}

fn ttl(v: Option<f64>) -> Option<Duration> {
    v.filter(|s| *s > 0.0 && s.is_finite())
        .map(Duration::from_secs_f64)
}

fn number(v: Option<Value>, default: i64) -> mlua::Result<shared::Stored> {
    match v {
        None | Some(Value::Nil) => Ok(shared::Stored::Int(default)),
        Some(Value::Integer(i)) => Ok(shared::Stored::Int(i)),
        Some(Value::Number(n)) => Ok(shared::Stored::Num(n)),
        Some(other) => Err(mlua::Error::runtime(format!(
            "stoa.shared: incr takes numbers, not a {}",
            other.type_name()
        ))),
    }
}

impl UserData for SharedDict {
    fn add_methods<M: UserDataMethods<Self>>(m: &mut M) {
        m.add_method("get", |lua, d, key: mlua::String| {
            match d.0.get(&key.as_bytes()) {
                Some(v) => from_stored(lua, v),
                None => Ok(Value::Nil),
            }
        });
        // d:set(key, value, ttl) -> true | false, "no memory"
        m.add_method(
            "set",
            |_, d, (key, value, ttl_s): (mlua::String, Value, Option<f64>)| {
                let v = to_stored(value, "a value")?;
                Ok(match d.0.set(&key.as_bytes(), v, ttl(ttl_s)) {
                    Ok(()) => (true, None),
                    Err(e) => (false, Some(e.to_string())),
                })
            },
        );
        // d:incr(key, by = 1, init = 0, ttl) -> new value | nil, error
        m.add_method(
            "incr",
            |lua, d, (key, by, init, ttl_s): (mlua::String, Option<Value>, Option<Value>, Option<f64>)| {
                let by = number(by, 1)?;
                let init = number(init, 0)?;
                Ok(match d.0.incr(&key.as_bytes(), by, init, ttl(ttl_s)) {
                    Ok(v) => (from_stored(lua, v)?, None),
                    Err(e) => (Value::Nil, Some(e.to_string())),
                })
            },
        );
        m.add_method("delete", |_, d, key: mlua::String| {
            d.0.delete(&key.as_bytes());
            Ok(())
        });
    }
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

/// What a request's lazy fields are made from: borrowed from the
/// handler's call for the request.
struct RawReq<'a> {
    head: &'a RequestHead,
    /// The decoded, normalized path.
    path: &'a str,
    peer: std::net::SocketAddr,
    body: &'a [u8],
    /// The body is `application/x-www-form-urlencoded`: its fields join
    /// `req.args`.
    form: bool,
    vars: &'a [(String, Vec<u8>)],
    /// The address of its `req.headers` table once made (fields.rs):
    /// that table reads this request's fields, no other does.
    headers: Cell<*const std::ffi::c_void>,
}

/// A request as its script sees it: the `req` table is made from the id
/// in Lua, its fields on first use.
fn raw_req<'a>(
    vm: &Vm,
    ex: &Exchange<'a>,
    norm: &'a str,
    body: &'a [u8],
    vars: &'a [(String, Vec<u8>)],
) -> (i64, RawReq<'a>) {
    let head = ex.req();
    let form = !body.is_empty()
        && head.header("content-type").is_some_and(|c| {
            c.get(..33)
                .is_some_and(|p| p.eq_ignore_ascii_case(b"application/x-www-form-urlencoded"))
        });
    let id = vm.next_id.get();
    vm.next_id.set(id.wrapping_add(1));
    let raw = RawReq {
        head,
        path: norm,
        peer: ex.peer(),
        body,
        form,
        vars,
        headers: Cell::new(std::ptr::null()),
    };
    (id, raw)
}

/// Response headers as the prelude lays them out (`n` strings in the
/// scratch table: name, value, name, value...), checked before anything
/// is written so that a bad one is still a clean 500.
fn start(ex: &mut Exchange<'_>, vm: &Vm, status: u16, n: Option<Value>) -> mlua::Result<()> {
    let n = match n {
        Some(Value::Integer(n)) => n,
        _ => 0,
    };
    let mut strings = Vec::with_capacity(n as usize);
    for i in 1..=n {
        strings.push(vm.scratch.raw_get::<mlua::String>(i)?);
    }
    let bytes: Vec<_> = strings.iter().map(|s| s.as_bytes()).collect();
    write_head(ex, status, bytes.chunks_exact(2).map(|p| (&*p[0], &*p[1])))
}

/// The head of a script's answer. Every field is checked before the head
/// starts, so that a bad one is still a clean 500; none is copied.
fn write_head<'f>(
    ex: &mut Exchange<'_>,
    status: u16,
    fields: impl Iterator<Item = (&'f [u8], &'f [u8])> + Clone,
) -> mlua::Result<()> {
    let mut typed = false;
    for (n, v) in fields.clone() {
        if !header_name_ok(n) {
            return Err(mlua::Error::runtime(format!(
                "bad header name {:?}",
                String::from_utf8_lossy(n)
            )));
        }
        if v.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0) {
            return Err(mlua::Error::runtime("a header value holds CR, LF or NUL"));
        }
        typed |= n.eq_ignore_ascii_case(b"content-type");
    }
    ex.start(status);
    for (n, v) in fields {
        // Framing is the exchange's business.
        if [&b"content-length"[..], b"transfer-encoding", b"connection"]
            .iter()
            .any(|f| n.eq_ignore_ascii_case(f))
        {
            continue;
        }
        // SAFETY: checked above: a token, so ASCII, so UTF-8 (a
        // `from_utf8` here was ~100 instructions a field, callgrind).
        let name = unsafe { std::str::from_utf8_unchecked(n) };
        ex.header(name, v);
    }
    if !typed {
        ex.header("Content-Type", b"text/html; charset=utf-8");
    }
    Ok(())
}

/// A header field name: a non-empty token (RFC 9110 §5.1).
/// A token (RFC 9110 §5.6.2): a lookup in stoa-h1's table per byte, not a
/// search of the punctuation (this runs for every header of every answer).
fn header_name_ok(n: &[u8]) -> bool {
    !n.is_empty() && n.iter().all(|&b| stoa_h1::is_tchar(b))
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

/// How a script's function ended.
enum Ended {
    /// It returned these values without streaming.
    Returned(MultiValue),
    /// It returned a plain answer, recorded by `collect` (`Vm::answer`)
    /// and alive on this coroutine's stack until it is parked again.
    Collected(mlua::Thread),
    /// It streamed (`req:start`/`req:write`): the body is to be finished.
    Streamed,
    /// The client went away while it streamed.
    Gone,
}

/// Reads the request body whole for a script.
async fn body_of(ex: &mut Exchange<'_>) -> Option<Vec<u8>> {
    let input = gateway::read_input(ex, true).await?;
    Some(match input {
        gateway::Input::Memory(v) => v,
        gateway::Input::File(mut f, _) => {
            let mut v = Vec::new();
            if let Err(e) = std::io::Read::read_to_end(&mut f, &mut v) {
                tracing::error!("lua: reading the spooled body: {e}");
                gateway::simple(ex, 500, &[]);
                return None;
            }
            v
        }
        _ => Vec::new(),
    })
}

/// The interpreter of `cfg` for this worker, or a 500.
fn vm_or_500(cfg: &LuaConfig, ex: &mut Exchange<'_>) -> Option<Rc<Vm>> {
    match vm_for(cfg) {
        Ok(vm) => Some(vm),
        Err(e) => {
            tracing::error!("lua: loading {}: {e}", cfg.script.display());
            gateway::simple(ex, 500, &[]);
            None
        }
    }
}

/// The index of a method in the prelude's METHODS (0: made on first read
/// like the other fields).
fn method_code(m: &str) -> i64 {
    match m {
        "GET" => 1,
        "POST" => 2,
        "HEAD" => 3,
        "PUT" => 4,
        "DELETE" => 5,
        "OPTIONS" => 6,
        "PATCH" => 7,
        _ => 0,
    }
}

/// Runs the function under the route's timeout; an error is logged and
/// answered (500, or a cut once the body has started).
async fn run_logged(
    cfg: &LuaConfig,
    vm: &Vm,
    entry: &Runner,
    req: (i64, &RawReq<'_>),
    ex: &mut Exchange<'_>,
    inc: &impl Include,
) -> Option<Ended> {
    let started = Cell::new(false);
    let res = run(cfg, vm, entry, req, ex, inc, &started).await;
    match res {
        Ok(e) => Some(e),
        Err(e) => {
            // mlua's message starts with "file:line:" for a Lua error.
            tracing::error!("lua: {}: {e}", cfg.script.display());
            if started.get() {
                // Part of the body is out: the client must see a cut.
                ex.abort();
            } else {
                gateway::simple(ex, 500, &[]);
            }
            None
        }
    }
}

/// Runs the route's script for one request. `inc` runs subrequests;
/// `vars` are an access check's grants (`req.vars`).
pub async fn serve(
    cfg: &LuaConfig,
    norm: String,
    ex: &mut Exchange<'_>,
    inc: &impl Include,
    vars: &[(String, Vec<u8>)],
) -> Outcome {
    let Some(vm) = vm_or_500(cfg, ex) else {
        return Outcome::Done;
    };
    let Some(body) = body_of(ex).await else {
        return Outcome::Done;
    };
    let (id, raw) = raw_req(&vm, ex, &norm, &body, vars);
    match run_logged(cfg, &vm, &vm.entry, (id, &raw), ex, inc).await {
        Some(Ended::Returned(out)) => {
            if let Err(e) = respond(ex, &vm, out) {
                tracing::error!("lua: {}: {e}", cfg.script.display());
                gateway::simple(ex, 500, &[]);
            }
        }
        Some(Ended::Collected(th)) => {
            if let Err(e) = respond_collected(ex, &vm) {
                tracing::error!("lua: {}: {e}", cfg.script.display());
                gateway::simple(ex, 500, &[]);
            }
            vm.entry.park(th);
        }
        Some(Ended::Streamed) => ex.finish(),
        Some(Ended::Gone) | None => {}
    }
    Outcome::Done
}

/// An `access` script (`lua = { access = ... }` on a route): returning
/// nothing, `nil` or `true` lets the request through, with the variables
/// of a table returned second; a status (with headers and a body, as a
/// handler returns them), a stream or an error answers instead. The
/// request body is left for the handler: `req:body()` is empty here and
/// `req.args` holds the query's fields only.
pub async fn access(cfg: &LuaConfig, ex: &mut Exchange<'_>, inc: &impl Include) -> Authz {
    let Some(vm) = vm_or_500(cfg, ex) else {
        return Authz::Answered;
    };
    let norm = crate::http::path::normalize(ex.req().path()).unwrap_or_default();
    let (id, raw) = raw_req(&vm, ex, &norm, &[], &[]);
    let out = match run_logged(cfg, &vm, &vm.access_entry, (id, &raw), ex, inc).await {
        Some(Ended::Returned(out)) => out,
        Some(Ended::Collected(th)) => {
            // Not made by the access wrapper; answered as a handler's.
            if let Err(e) = respond_collected(ex, &vm) {
                tracing::error!("lua: {}: {e}", cfg.script.display());
                gateway::simple(ex, 500, &[]);
            }
            vm.access_entry.park(th);
            return Authz::Answered;
        }
        Some(Ended::Streamed) => {
            ex.finish();
            return Authz::Answered;
        }
        Some(Ended::Gone) | None => return Authz::Answered,
    };
    let decided = match out.front() {
        None | Some(Value::Nil) | Some(Value::Boolean(true)) => grants(out.get(1)).map(Some),
        Some(Value::Boolean(false)) => Ok(None),
        Some(_) => {
            // An answer, as a handler gives it.
            if let Err(e) = respond(ex, &vm, out) {
                tracing::error!("lua: {}: {e}", cfg.script.display());
                gateway::simple(ex, 500, &[]);
            }
            return Authz::Answered;
        }
    };
    match decided {
        Ok(Some(vars)) => Authz::Allow(vars),
        Ok(None) => {
            gateway::simple(ex, 403, &[]);
            Authz::Answered
        }
        Err(e) => {
            tracing::error!("lua: {}: {e}", cfg.script.display());
            gateway::simple(ex, 500, &[]);
            Authz::Answered
        }
    }
}

/// The variables an access script grants: a table of names to strings,
/// numbers or booleans.
fn grants(v: Option<&Value>) -> mlua::Result<Vec<(String, Vec<u8>)>> {
    let Some(Value::Table(t)) = v else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for pair in t.pairs::<mlua::String, Value>() {
        let (k, v) = pair?;
        let name = k.to_str()?.to_string();
        if name.is_empty() || name.bytes().any(|b| b == b'=' || b == 0) {
            return Err(mlua::Error::runtime(format!("bad variable name {name:?}")));
        }
        let value = match v {
            Value::String(s) => s.as_bytes().to_vec(),
            Value::Integer(i) => i.to_string().into_bytes(),
            Value::Number(n) => n.to_string().into_bytes(),
            Value::Boolean(b) => {
                if b {
                    b"1".to_vec()
                } else {
                    Vec::new()
                }
            }
            other => {
                return Err(mlua::Error::runtime(format!(
                    "variable {name} cannot be a {}",
                    other.type_name()
                )))
            }
        };
        out.push((name, value));
    }
    out.sort();
    Ok(out)
}

/// Points the interpreter's hook at this request's limits, and
/// [`Current`] at the request, while it runs.
struct Limits<'v> {
    running: &'v Rc<Running>,
    budget: u64,
    deadline: Instant,
    current: &'v Current,
    id: i64,
    /// The request's fields: the `RawReq` that `run`'s caller owns for
    /// the whole run.
    req: *const RawReq<'static>,
}

impl Limits<'_> {
    fn resume(
        &mut self,
        th: &mlua::Thread,
        args: impl mlua::IntoLuaMulti,
    ) -> mlua::Result<MultiValue> {
        self.running.budget.set(self.budget);
        self.running.deadline.set(Some(self.deadline));
        self.running.stopped.set(None);
        let _restore = Restore {
            current: self.current,
            id: self.current.id.replace(self.id),
            req: self.current.req.replace(self.req),
        };
        let r = watch::resume(th, self.running, args);
        self.after(th)?;
        r
    }

    /// The request's first resume ([`resume::first`]): its id and method.
    fn first(&mut self, lua: &Lua, th: &mlua::Thread, m: i64) -> mlua::Result<resume::First> {
        self.running.budget.set(self.budget);
        self.running.deadline.set(Some(self.deadline));
        self.running.stopped.set(None);
        let _restore = Restore {
            current: self.current,
            id: self.current.id.replace(self.id),
            req: self.current.req.replace(self.req),
        };
        let done = done_marker().0;
        let r = watch::watched(
            th.to_pointer() as *mut mlua::ffi::lua_State,
            self.running,
            || resume::first(lua, th, self.id, m, done),
        );
        self.after(th)?;
        r
    }

    /// Takes back the budget left; an error if the watchdog stopped the
    /// coroutine.
    fn after(&mut self, th: &mlua::Thread) -> mlua::Result<()> {
        self.budget = self.running.budget.get();
        self.running.budget.set(u64::MAX);
        self.running.deadline.set(None);
        if let Some(why) = self.running.stopped.take() {
            if th.status() == ThreadStatus::Resumable {
                let why = String::from_utf8_lossy(why.strip_suffix(b"\0").unwrap_or(why));
                return Err(mlua::Error::runtime(why.into_owned()));
            }
        }
        Ok(())
    }
}

/// Awaits `f` until the request's deadline: the timeout is armed only
/// when the script waits for something (a request that runs straight
/// through, checked by the hook, sets no timer).
async fn until<T>(
    deadline: Instant,
    cfg: &LuaConfig,
    f: impl std::future::Future<Output = T>,
) -> mlua::Result<T> {
    tokio::time::timeout_at(deadline.into(), f)
        .await
        .map_err(|_| mlua::Error::runtime(format!("timed out after {:?}", cfg.timeout)))
}

async fn run(
    cfg: &LuaConfig,
    vm: &Vm,
    entry: &Runner,
    (id, req): (i64, &RawReq<'_>),
    ex: &mut Exchange<'_>,
    inc: &impl Include,
    started: &Cell<bool>,
) -> mlua::Result<Ended> {
    let lua = &vm.lua;
    // A coroutine parked at the end of an earlier request, or a new one.
    let parked = entry.parked.borrow_mut().pop();
    let th = match parked {
        Some(t) => t,
        None => lua.create_thread(entry.func.clone())?,
    };
    let deadline = Instant::now() + cfg.timeout;
    let mut limits = Limits {
        running: &vm.running,
        budget: cfg.max_instructions / u64::from(HOOK_EVERY),
        deadline,
        current: &vm.current,
        id,
        // Only the lifetime is erased: `req` outlives this function,
        // hence every resume below.
        req: (req as *const RawReq<'_>).cast(),
    };
    vm.answer.clear();
    let m = method_code(req.head.method.as_str());
    // A handler's plain answer comes back as `DONE` alone: the direct
    // resume pays. An access check always yields its verdict as values.
    let mut got = if std::ptr::eq(entry, &vm.entry) {
        match limits.first(lua, &th, m)? {
            resume::First::Done if vm.answer.is_ready() && !started.get() => {
                return Ok(Ended::Collected(th));
            }
            resume::First::Done => MultiValue::from_iter([Value::LightUserData(done_marker())]),
            resume::First::Values(v) => v,
        }
    } else {
        limits.resume(&th, (id, m))?
    };
    loop {
        if matches!(got.front(), Some(Value::LightUserData(d)) if *d == done_marker()) {
            got.pop_front();
            if got.is_empty() && vm.answer.is_ready() && !started.get() {
                return Ok(Ended::Collected(th));
            }
            entry.park(th);
            return Ok(if started.get() {
                Ended::Streamed
            } else {
                Ended::Returned(got)
            });
        }
        if th.status() != ThreadStatus::Resumable {
            // The wrapper never returns; should it, what it returned is
            // the answer and the coroutine is not kept.
            return Ok(if started.get() {
                Ended::Streamed
            } else {
                Ended::Returned(got)
            });
        }
        // Code that yields often is hooked by no watchdog: its time is
        // counted here.
        if Instant::now() > deadline {
            return Err(mlua::Error::runtime(format!(
                "timed out after {:?}",
                cfg.timeout
            )));
        }
        let mut out = got.into_iter();
        let op = match out.next() {
            Some(Value::String(s)) => s,
            _ => return Err(mlua::Error::runtime("coroutine.yield outside stoa's calls")),
        };
        let mut args = MultiValue::new();
        match &*op.as_bytes() {
            b"start" if !started.get() => {
                let status = status_of(out.next())?;
                start(ex, vm, status, out.next())?;
                ex.end_head_stream();
                started.set(true);
            }
            b"start" => return Err(mlua::Error::runtime("req:start() after the head was sent")),
            b"write" => {
                if !started.get() {
                    start(ex, vm, 200, None)?;
                    ex.end_head_stream();
                    started.set(true);
                }
                if let Some(Value::String(s)) = out.next() {
                    ex.write(&s.as_bytes());
                }
            }
            b"flush" => {
                let ok = until(deadline, cfg, ex.flush()).await?;
                args = MultiValue::from_iter([Value::Boolean(ok)]);
                if !ok {
                    // The client is gone: nothing more to do for it.
                    return Ok(Ended::Gone);
                }
            }
            b"sleep" => {
                let secs = match out.next() {
                    Some(Value::Integer(i)) => i as f64,
                    Some(Value::Number(n)) => n,
                    _ => 0.0,
                };
                let d = Duration::from_secs_f64(secs.clamp(0.0, cfg.timeout.as_secs_f64()));
                until(deadline, cfg, tokio::time::sleep(d)).await?;
            }
            b"subrequest" => {
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
                let r = until(deadline, cfg, inc.include(ex.req(), &target)).await?;
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
            b"pg" => {
                let handle = match out.next() {
                    Some(Value::UserData(u)) => u.borrow::<pg::PgHandle>()?.0.clone(),
                    _ => return Err(mlua::Error::runtime("postgres: not a connection")),
                };
                let op = match out.next() {
                    Some(Value::Integer(i)) => pg::Op::from_code(i),
                    _ => None,
                }
                .ok_or_else(|| mlua::Error::runtime("postgres: bad call"))?;
                let sql = match out.next() {
                    Some(Value::String(s)) => s.to_str()?.to_string(),
                    _ => return Err(mlua::Error::runtime("postgres: the SQL must be a string")),
                };
                let params = out
                    .map(pg::param)
                    .collect::<Result<Vec<_>, String>>()
                    .map_err(mlua::Error::runtime)?;
                args =
                    match until(deadline, cfg, pg::run(lua, &handle, op, &sql, &params)).await?? {
                        Ok(v) => MultiValue::from_iter([Value::Boolean(true), v]),
                        Err(e) => MultiValue::from_iter([
                            Value::Boolean(false),
                            Value::String(lua.create_string(e)?),
                        ]),
                    };
            }
            other => {
                return Err(mlua::Error::runtime(format!(
                    "coroutine.yield({:?}) outside stoa's calls",
                    String::from_utf8_lossy(other)
                )))
            }
        }
        got = limits.resume(&th, args)?;
    }
}

/// What `collect` recorded: `status, headers, body`.
fn respond_collected(ex: &mut Exchange<'_>, vm: &Vm) -> mlua::Result<()> {
    // SAFETY: the caller holds the coroutine that recorded the answer
    // (`Ended::Collected`) and parks it only after this returns.
    let a = unsafe { vm.answer.take() };
    write_head(ex, a.status, a.fields())?;
    match a.body {
        Some(body) => {
            ex.end_head(Some(body.len() as u64));
            ex.write(body);
        }
        None => ex.end_head(Some(0)),
    }
    ex.finish();
    Ok(())
}

/// What the function returned: `status, headers, body`.
fn respond(ex: &mut Exchange<'_>, vm: &Vm, out: MultiValue) -> mlua::Result<()> {
    let mut out = out.into_iter();
    let status = status_of(out.next())?;
    let headers = out.next();
    let body = match out.next() {
        Some(Value::String(s)) => s,
        None | Some(Value::Nil) => {
            start(ex, vm, status, headers)?;
            ex.end_head(Some(0));
            ex.finish();
            return Ok(());
        }
        Some(other) => {
            return Err(mlua::Error::runtime(format!(
                "the body must be a string, not a {}",
                other.type_name()
            )))
        }
    };
    let body = body.as_bytes();
    start(ex, vm, status, headers)?;
    ex.end_head(Some(body.len() as u64));
    ex.write(&body);
    ex.finish();
    Ok(())
}

// ---- configuration: `lua = {...}` of a route ----

/// `lua = {...}`: a Lua script answers (docs/LUA.md).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LuaRouteConfig {
    /// The script (relative to the config file's directory); it returns
    /// the function called for each request. Without it the route needs
    /// another handler, and `access` is its check.
    pub script: Option<String>,
    /// A script run before the route's handler (any handler): it answers
    /// (401, 403, a redirect...) or lets the request through, with
    /// variables for the handler.
    pub access: Option<String>,
    /// The whole request, Lua and what it waits for (default 5s).
    pub timeout: Option<crate::units::Dur>,
    /// What one worker's interpreter may allocate (default 64 MiB).
    pub memory: Option<crate::units::Size>,
    /// VM instructions one request may run (default 1e9).
    pub max_instructions: Option<u64>,
}

impl LuaRouteConfig {
    /// The script at `path` (as written) with this table's limits.
    pub(crate) fn script_config(
        &self,
        path: &str,
        resolve: &dyn Fn(&str) -> PathBuf,
        dicts: &Dicts,
    ) -> Result<LuaConfig, String> {
        LuaConfig::new(
            resolve(path),
            self.timeout.map(|d| d.0),
            self.memory.map(|m| m.0),
            self.max_instructions,
            dicts.clone(),
        )
    }
}

impl super::configure::Configure for LuaRouteConfig {
    fn configure(
        &self,
        cx: &super::configure::Ctx<'_>,
    ) -> Result<super::Handler, super::configure::Fail> {
        use super::configure::Fail;
        let Some(script) = &self.script else {
            return Err(Fail::new("lua", "no `script`"));
        };
        let cfg = self
            .script_config(script, cx.resolve, cx.lua_dicts)
            .map_err(Fail::at("lua.script"))?;
        Ok(super::Handler::Lua(Arc::new(cfg)))
    }
}
