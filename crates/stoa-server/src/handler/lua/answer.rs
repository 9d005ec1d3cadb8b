//! A handler's answer (`status, headers, body`) read where it lies.
//!
//! The prelude's wrapper calls `collect` with what the script returned
//! and then yields at the end of the request, its locals (the answer)
//! kept alive on the parked coroutine's stack. `collect` records the
//! answer as pointers into those Lua strings, so the head and body are
//! written from them without a reference or a copy each (through mlua,
//! ~3k instructions of the benchmark's request, docs/BENCHMARKS.md).
//! Anything but the plain case (a status that is an integer or nil,
//! string header names and values, a string body or nil) is left to
//! the Lua path (`flat` and the scratch table).
//!
//! `collect` calls nothing of Lua's that may raise an error (it reads
//! strings that are strings, walks a table it does not change), so no
//! `longjmp` crosses the `RefMut` it holds.

use mlua::ffi;
use std::cell::{Cell, Ref, RefCell};
use std::ffi::c_int;

/// A string of Lua's: alive while the coroutine that returned it stays
/// parked at its end-of-request yield.
#[derive(Clone, Copy)]
struct LuaStr(*const u8, usize);

impl LuaStr {
    /// # Safety
    /// The string is still alive (see the type).
    unsafe fn bytes<'a>(self) -> &'a [u8] {
        std::slice::from_raw_parts(self.0, self.1)
    }
}

/// The answer `collect` recorded for the request being resumed.
#[derive(Default)]
pub(super) struct Answer {
    /// Set by `collect`; cleared before each request's first resume.
    ready: Cell<bool>,
    status: Cell<u16>,
    body: Cell<Option<LuaStr>>,
    fields: RefCell<Vec<(LuaStr, LuaStr)>>,
}

/// The recorded answer: status, header fields (name, value), body.
pub(super) struct Collected<'a> {
    pub status: u16,
    /// Read in place, not copied into a new `Vec` (a `malloc` and a
    /// `free` per request).
    fields: Ref<'a, Vec<(LuaStr, LuaStr)>>,
    pub body: Option<&'a [u8]>,
}

impl<'a> Collected<'a> {
    /// The header fields (name, value), in the order `collect` met them.
    pub(super) fn fields(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone + '_ {
        // SAFETY: alive as long as the answer is (`Answer::take`'s
        // contract, which made `self`).
        self.fields
            .iter()
            .map(|&(n, v)| unsafe { (n.bytes(), v.bytes()) })
    }
}

impl Answer {
    pub(super) fn clear(&self) {
        self.ready.set(false);
    }

    pub(super) fn is_ready(&self) -> bool {
        self.ready.get()
    }

    /// # Safety
    /// The coroutine that recorded the answer has not been resumed since
    /// and is still referenced (parked or held).
    /// The answer is read while no Lua runs in this interpreter (`collect`
    /// would find its fields borrowed).
    pub(super) unsafe fn take(&self) -> Collected<'_> {
        self.ready.set(false);
        Collected {
            status: self.status.get(),
            fields: self.fields.borrow(),
            body: self.body.get().map(|b| b.bytes()),
        }
    }
}

/// Makes `collect`. `answer` must outlive the interpreter.
pub(super) fn closure(lua: &mlua::Lua, answer: *const Answer) -> mlua::Result<mlua::Function> {
    // SAFETY: pushes a light userdata and a C closure taking it as its
    // upvalue, in the protected call `exec_raw` makes.
    unsafe {
        lua.exec_raw::<mlua::Function>((), move |l| {
            ffi::lua_pushlightuserdata(l, answer as *mut std::ffi::c_void);
            ffi::lua_pushcclosure(l, collect, 1);
        })
    }
}

/// `collect(status, headers, body)` -> true when recorded, false when
/// the Lua path must take it. Upvalue: the `Answer`.
unsafe extern "C-unwind" fn collect(l: *mut ffi::lua_State) -> c_int {
    ffi::lua_settop(l, 3);
    // SAFETY: the upvalue is the interpreter's `Answer` (`closure`).
    let answer = &*(ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const Answer);
    answer.ready.set(false);
    let ok = record(l, answer);
    ffi::lua_pushboolean(l, c_int::from(ok));
    answer.ready.set(ok);
    1
}

unsafe fn record(l: *mut ffi::lua_State, answer: &Answer) -> bool {
    let status = match ffi::lua_type(l, 1) {
        ffi::LUA_TNIL => 200,
        ffi::LUA_TNUMBER if ffi::lua_isinteger(l, 1) != 0 => match ffi::lua_tointeger(l, 1) {
            s @ 100..=999 => s as u16,
            _ => return false,
        },
        _ => return false,
    };
    let body = match ffi::lua_type(l, 3) {
        ffi::LUA_TNIL => None,
        ffi::LUA_TSTRING => Some(string(l, 3)),
        _ => return false,
    };
    let mut fields = answer.fields.borrow_mut();
    fields.clear();
    match ffi::lua_type(l, 2) {
        ffi::LUA_TNIL => {}
        ffi::LUA_TTABLE => {
            ffi::lua_pushnil(l);
            while ffi::lua_next(l, 2) != 0 {
                // Stack: ..., name, value. Both strings, else the Lua path.
                if ffi::lua_type(l, -2) != ffi::LUA_TSTRING
                    || ffi::lua_type(l, -1) != ffi::LUA_TSTRING
                {
                    ffi::lua_settop(l, 3);
                    return false;
                }
                // The table holds both, and the table is a local of the
                // parked wrapper.
                fields.push((string(l, -2), string(l, -1)));
                ffi::lua_settop(l, -2);
            }
        }
        _ => return false,
    }
    answer.status.set(status);
    answer.body.set(body);
    true
}

/// The string at `idx` (a string: no conversion, nothing allocated).
unsafe fn string(l: *mut ffi::lua_State, idx: c_int) -> LuaStr {
    let mut len = 0;
    let p = ffi::lua_tolstring(l, idx, &mut len);
    LuaStr(p.cast(), len)
}
