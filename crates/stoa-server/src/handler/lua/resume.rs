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

#[cfg(test)]
mod tests {
    use super::*;

    static MARK: u8 = 0;

    fn mark() -> *mut std::ffi::c_void {
        std::ptr::addr_of!(MARK) as *mut std::ffi::c_void
    }

    /// A coroutine running `body` (a Lua function of `id, m`), with
    /// `DONE` as a global, as the prelude's wrappers see it.
    fn coroutine(lua: &Lua, body: &str) -> mlua::Thread {
        lua.globals()
            .set("DONE", mlua::LightUserData(mark()))
            .unwrap();
        let f: mlua::Function = lua.load(body).eval().unwrap();
        lua.create_thread(f).unwrap()
    }

    #[test]
    fn a_yield_of_done_alone_is_recognised_and_the_coroutine_serves_the_next_request() {
        let lua = Lua::new();
        let th = coroutine(
            &lua,
            "return function(id, m) while true do seen = id * 10 + m; id, m = coroutine.yield(DONE) end end",
        );
        assert!(matches!(first(&lua, &th, 4, 2, mark()), Ok(First::Done)));
        assert_eq!(lua.globals().get::<i64>("seen").unwrap(), 42);
        // Parked at its yield: the next request's id and method are the
        // values of that yield.
        assert!(matches!(first(&lua, &th, 5, 1, mark()), Ok(First::Done)));
        assert_eq!(lua.globals().get::<i64>("seen").unwrap(), 51);
    }

    #[test]
    fn any_other_yield_comes_back_as_mlua_values() {
        let lua = Lua::new();
        let th = coroutine(
            &lua,
            "return function(id) coroutine.yield('write', 'x' .. id) return DONE, 200 end",
        );
        let Ok(First::Values(v)) = first(&lua, &th, 7, 1, mark()) else {
            panic!("values expected");
        };
        let v: Vec<Value> = v.into_iter().collect();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].to_string().unwrap(), "write");
        assert_eq!(v[1].to_string().unwrap(), "x7");
        // mlua's resume goes on from there, as the handler's loop does.
        let rest: MultiValue = th.resume(()).unwrap();
        assert_eq!(rest.len(), 2);
    }

    #[test]
    fn a_lua_error_carries_its_message_and_the_coroutine_s_traceback_as_mlua_s_resume_does() {
        let lua = Lua::new();
        let th = coroutine(
            &lua,
            "return function(id)\n  local t = nil\n  return t.x\nend",
        );
        match first(&lua, &th, 1, 1, mark()) {
            Err(mlua::Error::RuntimeError(msg)) => {
                assert!(msg.contains(":3: attempt to index"), "{msg}");
                assert!(msg.contains("stack traceback:"), "{msg}");
            }
            Err(e) => panic!("a runtime error expected, got {e:?}"),
            Ok(_) => panic!("an error expected"),
        }
    }

    #[test]
    fn an_error_raised_by_rust_code_comes_back_as_that_error() {
        let lua = Lua::new();
        let fail = lua
            .create_function(|_, ()| -> mlua::Result<()> {
                Err(mlua::Error::runtime("refused by rust"))
            })
            .unwrap();
        lua.globals().set("fail", fail).unwrap();
        let th = coroutine(&lua, "return function(id) fail() end");
        match first(&lua, &th, 1, 1, mark()) {
            Err(e) => assert!(e.to_string().contains("refused by rust"), "{e}"),
            Ok(_) => panic!("an error expected"),
        }
    }

    #[test]
    fn a_memory_error_is_mlua_s_memory_error() {
        let lua = Lua::new();
        lua.set_memory_limit(1 << 20).unwrap();
        let th = coroutine(
            &lua,
            "return function(id) local t = {} for i = 1, 1e7 do t[i] = i end end",
        );
        assert!(matches!(
            first(&lua, &th, 1, 1, mark()),
            Err(mlua::Error::MemoryError(_))
        ));
    }
}
