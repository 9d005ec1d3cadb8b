//! A request's first resume, through `lua_resume` itself.
//!
//! mlua's `Thread::resume` locks the interpreter, turns the arguments into
//! values on the main state and moves them over, and turns what the
//! coroutine yields back into a `MultiValue` (a heap-allocated deque) with
//! a reference per value: ~1.1k instructions of a request whose handler
//! ends with the plain answer that `collect` already recorded, where all
//! that comes back is the prelude's `DONE` marker. Here the request's id
//! and method are pushed on the coroutine's own stack, and `DONE` alone is
//! recognised where it lies. Anything else the coroutine yields or
//! returns, and an error, are handed to mlua to become values and errors
//! as its own resume makes them.

use mlua::{ffi, Lua, MultiValue, Value};
use std::ffi::c_int;
use std::ptr;

/// What the first resume of a request gave.
pub(super) enum First {
    /// The prelude yielded `DONE` and nothing else (`collect` took the
    /// answer).
    Done,
    /// Anything else: the values yielded or returned, `DONE` included.
    Values(MultiValue),
}

/// Resumes `th` (parked at its end-of-request yield, or new) with the
/// request's `id` and method code `m`.
pub(super) fn first(
    lua: &Lua,
    th: &mlua::Thread,
    id: i64,
    m: i64,
    done: *mut std::ffi::c_void,
) -> mlua::Result<First> {
    let l = th.to_pointer() as *mut ffi::lua_State;
    // SAFETY: `l` is a coroutine of `lua` that `th` keeps alive; nothing
    // runs in it (this worker runs one resume at a time), and no mlua
    // call is in progress on this thread, so its lock is free to take
    // for the callbacks the script makes.
    unsafe {
        let status = ffi::lua_status(l);
        let resumable =
            status == ffi::LUA_YIELD || (status == ffi::LUA_OK && ffi::lua_gettop(l) > 0);
        if !resumable || ffi::lua_checkstack(l, 2) == 0 {
            // mlua's resume says why (or finds room).
            return th.resume((id, m)).map(First::Values);
        }
        ffi::lua_pushinteger(l, id);
        ffi::lua_pushinteger(l, m);
        let mut n: c_int = 0;
        let rc = ffi::lua_resume(l, ptr::null_mut(), 2, &mut n);
        match rc {
            ffi::LUA_YIELD if n == 1 && ffi::lua_touserdata(l, -1) == done => {
                ffi::lua_settop(l, 0);
                Ok(First::Done)
            }
            ffi::LUA_YIELD | ffi::LUA_OK => {
                let got = lua.exec_raw::<MultiValue>((), |s| {
                    if ffi::lua_checkstack(s, n) != 0 {
                        ffi::lua_xmove(l, s, n);
                    }
                });
                ffi::lua_settop(l, 0);
                got.map(First::Values)
            }
            ffi::LUA_ERRMEM => {
                // As mlua: no traceback for a memory error (making one
                // needs memory).
                let mut len = 0;
                let p = ffi::lua_tolstring(l, -1, &mut len);
                let msg = if p.is_null() {
                    "not enough memory".to_string()
                } else {
                    String::from_utf8_lossy(std::slice::from_raw_parts(p as *const u8, len))
                        .into_owned()
                };
                ffi::lua_settop(l, 0);
                Err(mlua::Error::MemoryError(msg))
            }
            _ => {
                // As mlua's resume: the error object moves to the main
                // state; an error raised by Rust code (mlua's userdata)
                // becomes that error again, anything else its text with
                // the coroutine's traceback.
                let got = lua.exec_raw::<Value>((), |s| {
                    ffi::lua_xmove(l, s, 1);
                    if ffi::lua_type(s, -1) != ffi::LUA_TUSERDATA {
                        let msg = ffi::luaL_tolstring(s, -1, ptr::null_mut());
                        if ffi::lua_checkstack(s, ffi::LUA_TRACEBACK_STACK) != 0 {
                            ffi::luaL_traceback(s, l, msg, 0);
                            ffi::lua_remove(s, -2);
                        }
                        ffi::lua_remove(s, -2);
                    }
                });
                ffi::lua_settop(l, 0);
                Err(match got? {
                    Value::Error(e) => *e,
                    Value::String(s) => mlua::Error::RuntimeError(s.to_string_lossy()),
                    other => mlua::Error::RuntimeError(
                        other.to_string().unwrap_or_else(|e| e.to_string()),
                    ),
                })
            }
        }
    }
}
