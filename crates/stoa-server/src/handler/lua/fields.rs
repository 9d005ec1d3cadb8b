//! A request's lazy fields (`req.args`, `req.headers`, `req.method`...),
//! made by a C function on Lua's own stack.
//!
//! Made through mlua (a Rust callback, each string and each table store
//! a protected call and a reference), reading `req.args`, `req.headers`
//! and `req.method` cost ~42k instructions of a ~72k request (callgrind,
//! docs/BENCHMARKS.md "Lua that reads its request"); pushed here with
//! Lua's C API, a few hundred per field.
//!
//! The C function may be left by a Lua error (out of memory, under the
//! interpreter's limit: a `longjmp`), so nothing with a destructor is
//! alive in its frames across a call of the C API that may raise one:
//! the frames it skips then need no unwinding. Bytes decoded on the way
//! (URL escapes, lowercased names) go through a buffer on the stack, or
//! one Lua allocated when they are longer.

use super::{Current, RawReq};
use mlua::ffi;
use std::ffi::{c_int, c_void};

/// Names and values up to this long are decoded in a buffer on the stack.
const SMALL: usize = 256;

/// The key of a lazy headers table that holds its request's id: a light
/// userdata of this address, which no script can make.
static HEADERS_ID: u8 = 0;

fn headers_id() -> *mut c_void {
    std::ptr::addr_of!(HEADERS_ID) as *mut c_void
}

/// Makes the C closure: `R.__index` when `index` (a method of the
/// metatable first; a field made once is stored in the `req` table),
/// else `R:body()`'s reader. `current` must outlive the interpreter.
pub(super) fn closure(
    lua: &mlua::Lua,
    current: *const Current,
    index: bool,
) -> mlua::Result<mlua::Function> {
    // SAFETY: the closure pushes values and C closures taking them as
    // upvalues, in the protected call `exec_raw` makes; the function it
    // leaves on the stack is the result.
    unsafe {
        lua.exec_raw::<mlua::Function>((), move |l| {
            let cur = current as *mut c_void;
            ffi::lua_pushlightuserdata(l, cur);
            ffi::lua_pushstring(l, c"_id".as_ptr());
            ffi::lua_pushboolean(l, c_int::from(index));
            // The metatable of `req.headers` tables.
            ffi::lua_createtable(l, 0, 2);
            ffi::lua_pushlightuserdata(l, cur);
            ffi::lua_pushcclosure(l, headers_index, 1);
            ffi::lua_setfield(l, -2, c"__index".as_ptr());
            ffi::lua_pushlightuserdata(l, cur);
            ffi::lua_getglobal(l, c"next".as_ptr());
            ffi::lua_pushcclosure(l, headers_pairs, 2);
            ffi::lua_setfield(l, -2, c"__pairs".as_ptr());
            ffi::lua_pushcclosure(l, req_field, 4);
        })
    }
}

/// The request of `id`, if it is the one running.
///
/// # Safety
/// `cur` is the interpreter's `Current`, read during a call from Lua.
unsafe fn request<'r>(cur: *const Current, id: Option<i64>) -> Option<&'r RawReq<'r>> {
    let cur = &*cur;
    let p = cur.req.get();
    if p.is_null() || Some(cur.id.get()) != id {
        return None;
    }
    // SAFETY: `req` is non-null only while `Limits::resume` runs, and
    // points at the `RawReq` of the request it resumes, which the caller
    // of that resume owns for longer (see `Limits`).
    Some(&*p.cast::<RawReq<'r>>())
}

/// The integer on top of the stack, popped.
unsafe fn pop_id(l: *mut ffi::lua_State) -> Option<i64> {
    let mut isnum = 0;
    let id = ffi::lua_tointegerx(l, -1, &mut isnum);
    ffi::lua_settop(l, -2);
    (isnum != 0).then_some(id)
}

/// `req[k]` (stack: the table, the key) or `req:body()` (the table).
/// Upvalues: the `Current` (light userdata), `"_id"`, whether this is
/// `__index`, the metatable of `req.headers`.
unsafe extern "C-unwind" fn req_field(l: *mut ffi::lua_State) -> c_int {
    let index = ffi::lua_toboolean(l, ffi::lua_upvalueindex(3)) != 0;
    if index {
        // The methods (`req:write`...) are the metatable's own fields.
        if ffi::lua_getmetatable(l, 1) != 0 {
            ffi::lua_pushvalue(l, 2);
            if ffi::lua_rawget(l, -2) != ffi::LUA_TNIL {
                return 1;
            }
        }
        ffi::lua_settop(l, 2);
    } else {
        ffi::lua_settop(l, 1);
    }
    if ffi::lua_type(l, 1) != ffi::LUA_TTABLE {
        ffi::lua_pushnil(l);
        return 1;
    }
    ffi::lua_pushvalue(l, ffi::lua_upvalueindex(2));
    ffi::lua_rawget(l, 1);
    let id = pop_id(l);
    // The upvalue is the interpreter's `Current`, which outlives it
    // (`closure`'s contract).
    let cur = ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const Current;
    let Some(raw) = request(cur, id) else {
        ffi::lua_pushnil(l);
        return 1;
    };
    let key: &[u8] = if index {
        if ffi::lua_type(l, 2) != ffi::LUA_TSTRING {
            ffi::lua_pushnil(l);
            return 1;
        }
        let mut len = 0;
        let s = ffi::lua_tolstring(l, 2, &mut len);
        // SAFETY: a string at index 2, alive while it stays there.
        std::slice::from_raw_parts(s.cast::<u8>(), len)
    } else {
        b"body"
    };
    if !push_field(l, raw, key, id) {
        ffi::lua_pushnil(l);
        return 1;
    }
    if index {
        // Kept in the table: the next read finds it without a call.
        ffi::lua_pushvalue(l, 2);
        ffi::lua_pushvalue(l, -2);
        ffi::lua_rawset(l, 1);
    }
    1
}

/// Pushes the field `key` of the request; false (nothing pushed) when it
/// has none. Called by `req_field` (its upvalues).
unsafe fn push_field(
    l: *mut ffi::lua_State,
    raw: &RawReq<'_>,
    key: &[u8],
    id: Option<i64>,
) -> bool {
    let head = raw.head;
    match key {
        b"method" => push(l, head.method.as_str().as_bytes()),
        b"path" => push(l, raw.path.as_bytes()),
        b"query" => match head.query() {
            Some(q) => push(l, q),
            None => return false,
        },
        b"args" => {
            ffi::lua_createtable(l, 0, 4);
            if let Some(q) = head.query() {
                set_pairs(l, q);
            }
            if raw.form {
                set_pairs(l, raw.body);
            }
        }
        b"headers" => {
            // Filled as it is read (`headers_index`): a script reads a
            // field or two of a request's ten or so (a full table was
            // ~8.5k instructions of the benchmark's request).
            ffi::lua_createtable(l, 0, 2);
            ffi::lua_pushlightuserdata(l, headers_id());
            ffi::lua_pushinteger(l, id.unwrap_or(0));
            ffi::lua_rawset(l, -3);
            ffi::lua_pushvalue(l, ffi::lua_upvalueindex(4));
            ffi::lua_setmetatable(l, -2);
        }
        b"remote_addr" => {
            let mut buf = [0u8; 64];
            let mut w = &mut buf[..];
            // An address is at most 45 bytes.
            let _ = std::io::Write::write_fmt(&mut w, format_args!("{}", raw.peer.ip()));
            let n = 64 - w.len();
            push(l, &buf[..n]);
        }
        b"vars" => {
            ffi::lua_createtable(l, 0, raw.vars.len() as c_int);
            for (n, v) in raw.vars {
                push(l, n.as_bytes());
                push(l, v);
                ffi::lua_rawset(l, -3);
            }
        }
        b"body" => push(l, raw.body),
        _ => return false,
    }
    true
}

/// Every header field into a new table on top, by lower-case name.
unsafe fn push_all_headers(l: *mut ffi::lua_State, raw: &RawReq<'_>) {
    let fields = raw.head.headers();
    ffi::lua_createtable(l, 0, fields.size_hint().0 as c_int);
    for (n, v) in fields {
        push_mapped(l, n, lowercase);
        ffi::lua_pushvalue(l, -1);
        if ffi::lua_rawget(l, -3) == ffi::LUA_TNIL {
            ffi::lua_settop(l, -2);
            push(l, v);
        } else {
            // A repeated field: its values joined (RFC 9110 §5.3).
            push(l, b", ");
            push(l, v);
            ffi::lua_concat(l, 3);
        }
        ffi::lua_rawset(l, -3);
    }
}

/// `headers[k]` on a miss (stack: the table, the key): the request's
/// field of that lower-case name, kept in the table. Upvalue: `Current`.
unsafe extern "C-unwind" fn headers_index(l: *mut ffi::lua_State) -> c_int {
    ffi::lua_settop(l, 2);
    if ffi::lua_type(l, 2) != ffi::LUA_TSTRING {
        ffi::lua_pushnil(l);
        return 1;
    }
    ffi::lua_pushlightuserdata(l, headers_id());
    ffi::lua_rawget(l, 1);
    let id = pop_id(l);
    let cur = ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const Current;
    let Some(raw) = request(cur, id) else {
        ffi::lua_pushnil(l);
        return 1;
    };
    let mut len = 0;
    let s = ffi::lua_tolstring(l, 2, &mut len);
    // SAFETY: a string at index 2, alive while it stays there.
    let key = std::slice::from_raw_parts(s.cast::<u8>(), len);
    // Names are lower case in the table: "User-Agent" finds nothing.
    if key.iter().any(u8::is_ascii_uppercase) {
        ffi::lua_pushnil(l);
        return 1;
    }
    let mut found = 0;
    for (n, v) in raw.head.headers() {
        if n.eq_ignore_ascii_case(key) {
            push(l, v);
            if found > 0 {
                // A repeated field: its values joined (RFC 9110 §5.3).
                push(l, b", ");
                ffi::lua_rotate(l, -2, 1);
                ffi::lua_concat(l, 3);
            }
            found += 1;
        }
    }
    if found == 0 {
        ffi::lua_pushnil(l);
        return 1;
    }
    ffi::lua_pushvalue(l, 2);
    ffi::lua_pushvalue(l, -2);
    ffi::lua_rawset(l, 1);
    1
}

/// `pairs(headers)`: the table filled with every field not already in it
/// and made plain (no metatable, no id), then `next, headers, nil`.
/// Upvalues: `Current`, `next`.
unsafe extern "C-unwind" fn headers_pairs(l: *mut ffi::lua_State) -> c_int {
    ffi::lua_settop(l, 1);
    if ffi::lua_type(l, 1) == ffi::LUA_TTABLE {
        ffi::lua_pushlightuserdata(l, headers_id());
        ffi::lua_rawget(l, 1);
        let id = pop_id(l);
        let cur = ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const Current;
        if let Some(raw) = request(cur, id) {
            push_all_headers(l, raw);
            ffi::lua_pushnil(l);
            while ffi::lua_next(l, 2) != 0 {
                // Stack: headers, all, name, value.
                ffi::lua_pushvalue(l, 3);
                if ffi::lua_rawget(l, 1) == ffi::LUA_TNIL {
                    ffi::lua_settop(l, -2);
                    ffi::lua_pushvalue(l, 3);
                    ffi::lua_rotate(l, -2, 1);
                    ffi::lua_rawset(l, 1);
                } else {
                    ffi::lua_settop(l, -3);
                }
            }
            ffi::lua_settop(l, 1);
        }
        ffi::lua_pushlightuserdata(l, headers_id());
        ffi::lua_pushnil(l);
        ffi::lua_rawset(l, 1);
        ffi::lua_pushnil(l);
        ffi::lua_setmetatable(l, 1);
    }
    ffi::lua_pushvalue(l, ffi::lua_upvalueindex(2));
    ffi::lua_pushvalue(l, 1);
    ffi::lua_pushnil(l);
    3
}

unsafe fn push(l: *mut ffi::lua_State, s: &[u8]) {
    ffi::lua_pushlstring(l, s.as_ptr().cast(), s.len());
}

/// `application/x-www-form-urlencoded` pairs into the table on top
/// (later ones win).
unsafe fn set_pairs(l: *mut ffi::lua_State, s: &[u8]) {
    for pair in s.split(|&b| b == b'&').filter(|p| !p.is_empty()) {
        let (k, v) = match pair.iter().position(|&b| b == b'=') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &b""[..]),
        };
        push_mapped(l, k, unescape);
        push_mapped(l, v, unescape);
        ffi::lua_rawset(l, -3);
    }
}

/// Pushes `map(src)`: `map` writes at most `src.len()` bytes into its
/// buffer and returns how many.
unsafe fn push_mapped(l: *mut ffi::lua_State, src: &[u8], map: fn(&[u8], &mut [u8]) -> usize) {
    let mut small = [0u8; SMALL];
    if src.len() <= SMALL {
        let n = map(src, &mut small);
        push(l, &small[..n]);
    } else {
        let p = ffi::lua_newuserdatauv(l, src.len(), 0).cast::<u8>();
        // SAFETY: Lua gave `src.len()` bytes, alive while the userdata
        // stays on the stack (until the `lua_remove` below).
        let buf = std::slice::from_raw_parts_mut(p, src.len());
        let n = map(src, buf);
        push(l, &buf[..n]);
        ffi::lua_remove(l, -2);
    }
}

fn lowercase(src: &[u8], out: &mut [u8]) -> usize {
    for (o, &b) in out.iter_mut().zip(src) {
        *o = b.to_ascii_lowercase();
    }
    src.len()
}

/// `ap_unescape_urlencoded` (as `stoa_ssi::format::unescape_urlencoded`):
/// `+` is a space, `%xx` decoded, a bad escape stays as written, a NUL
/// ends the string.
fn unescape(src: &[u8], out: &mut [u8]) -> usize {
    let hex = |b: Option<&u8>| b.and_then(|&b| (b as char).to_digit(16)).map(|d| d as u8);
    let (mut i, mut n) = (0, 0);
    while i < src.len() {
        let mut b = src[i];
        i += 1;
        if b == b'+' {
            b = b' ';
        } else if b == b'%' {
            if let (Some(h), Some(lo)) = (hex(src.get(i)), hex(src.get(i + 1))) {
                b = h << 4 | lo;
                i += 2;
            }
        }
        if b == 0 {
            break;
        }
        out[n] = b;
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn un(s: &[u8]) -> Vec<u8> {
        let mut out = vec![0; s.len()];
        let n = unescape(s, &mut out);
        out.truncate(n);
        out
    }

    #[test]
    fn unescape_decodes_as_apache_ap_unescape_urlencoded_does() {
        for s in [
            &b"plain"[..],
            b"a+b",
            b"%41%62c",
            b"%zz%4",
            b"%",
            b"100%",
            b"x%00y",
            b"a\0b",
            b"%2B+%2b",
            b"caf%C3%A9",
        ] {
            assert_eq!(
                un(s),
                stoa_ssi::format::unescape_urlencoded(s),
                "{}",
                String::from_utf8_lossy(s)
            );
        }
    }
}
