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

/// Makes the C closure: `R.__index` when `index` (a field made once is
/// stored in the `req` table; any other key is a method of the
/// metatable), else `R:body()`'s reader. `current` must outlive the interpreter.
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
            let f: ffi::lua_CFunction = if index { req_index } else { req_body };
            ffi::lua_pushcclosure(l, f, 4);
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

/// The running request whose `req.headers` is the table at index 1.
///
/// The request keeps its table's address (`RawReq::headers`), so the
/// table needs no id of its own (storing one and reading it back was
/// ~350 instructions of a request that reads one field, callgrind). A
/// table kept past its request is alive, so no later table can have its
/// address: it matches no other request.
///
/// # Safety
/// `cur` is the interpreter's `Current`, read during a call from Lua.
unsafe fn headers_owner<'r>(l: *mut ffi::lua_State, cur: *const Current) -> Option<&'r RawReq<'r>> {
    let raw = request(cur, Some((*cur).id.get()))?;
    let t = ffi::lua_topointer(l, 1);
    (!t.is_null() && raw.headers.get() == t).then_some(raw)
}

/// The integer on top of the stack, popped.
unsafe fn pop_id(l: *mut ffi::lua_State) -> Option<i64> {
    let mut isnum = 0;
    let id = ffi::lua_tointegerx(l, -1, &mut isnum);
    ffi::lua_settop(l, -2);
    (isnum != 0).then_some(id)
}

/// `req[k]` (stack: the table, the key): a field of the request (made
/// once, then kept in the table), else a method of the metatable
/// (`req:write`...). Upvalues: the `Current` (light userdata), `"_id"`,
/// a boolean (unused here: `req_body` shares the layout), the metatable
/// of `req.headers`.
///
/// The field names come first: a script reads fields through here, while
/// a method found in the metatable is a miss of the lookup every field
/// read used to start with (a metatable fetch and a raw get, ~130
/// instructions of each field read, callgrind). No field is named as a
/// method, except `body`, which is left to the metatable as before.
unsafe extern "C-unwind" fn req_index(l: *mut ffi::lua_State) -> c_int {
    ffi::lua_settop(l, 2);
    if ffi::lua_type(l, 2) != ffi::LUA_TSTRING {
        return method(l);
    }
    let mut len = 0;
    let s = ffi::lua_tolstring(l, 2, &mut len);
    // SAFETY: a string at index 2, alive while it stays there.
    let key: &[u8] = std::slice::from_raw_parts(s.cast::<u8>(), len);
    if !is_field(key) {
        return method(l);
    }
    if ffi::lua_type(l, 1) != ffi::LUA_TTABLE {
        ffi::lua_pushnil(l);
        return 1;
    }
    let id = table_id(l);
    // The upvalue is the interpreter's `Current`, which outlives it
    // (`closure`'s contract).
    let cur = ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const Current;
    let Some(raw) = request(cur, id) else {
        ffi::lua_pushnil(l);
        return 1;
    };
    if !push_field(l, raw, key) {
        ffi::lua_pushnil(l);
        return 1;
    }
    // Kept in the table: the next read finds it without a call.
    ffi::lua_pushvalue(l, 2);
    ffi::lua_pushvalue(l, -2);
    ffi::lua_rawset(l, 1);
    1
}

/// The fields `push_field` makes for `req[k]` (`body` is `req:body()`).
fn is_field(key: &[u8]) -> bool {
    matches!(
        key,
        b"method" | b"path" | b"query" | b"args" | b"headers" | b"remote_addr" | b"vars"
    )
}

/// `req[k]` for a key that is no field (stack: the table, the key): the
/// metatable's own field of that name (the methods), else nil.
unsafe fn method(l: *mut ffi::lua_State) -> c_int {
    if ffi::lua_getmetatable(l, 1) != 0 {
        ffi::lua_pushvalue(l, 2);
        ffi::lua_rawget(l, -2);
        return 1;
    }
    ffi::lua_pushnil(l);
    1
}

/// The request id the `req` table holds (`_id`, the upvalue's key).
unsafe fn table_id(l: *mut ffi::lua_State) -> Option<i64> {
    ffi::lua_pushvalue(l, ffi::lua_upvalueindex(2));
    ffi::lua_rawget(l, 1);
    pop_id(l)
}

/// `req:body()` (stack: the table). Upvalues as `req_index`'s.
unsafe extern "C-unwind" fn req_body(l: *mut ffi::lua_State) -> c_int {
    ffi::lua_settop(l, 1);
    if ffi::lua_type(l, 1) != ffi::LUA_TTABLE {
        ffi::lua_pushnil(l);
        return 1;
    }
    let id = table_id(l);
    let cur = ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const Current;
    match request(cur, id) {
        Some(raw) => push(l, raw.body),
        None => ffi::lua_pushnil(l),
    }
    1
}

/// Pushes the field `key` of the request; false (nothing pushed) when it
/// has none. Called by `req_index` (its upvalues).
unsafe fn push_field(l: *mut ffi::lua_State, raw: &RawReq<'_>, key: &[u8]) -> bool {
    let head = raw.head;
    match key {
        b"method" => push(l, head.method.as_str().as_bytes()),
        b"path" => push(l, raw.path.as_bytes()),
        b"query" => match head.query() {
            Some(q) => push(l, q),
            None => return false,
        },
        b"args" => {
            // Sized for its pairs: most queries have one or two, and a
            // larger hash part is more to clear and to collect.
            let pairs = |s: &[u8]| 1 + s.iter().filter(|&&b| b == b'&').count();
            let n = head.query().map_or(0, pairs) + if raw.form { pairs(raw.body) } else { 0 };
            ffi::lua_createtable(l, 0, n.min(64) as c_int);
            if let Some(q) = head.query() {
                set_pairs(l, q);
            }
            if raw.form {
                set_pairs(l, raw.body);
            }
        }
        b"headers" => {
            // Empty, its fields read through `headers_index`: a script
            // reads a field or two of a request's ten or so (a full table
            // was ~8.5k instructions of the benchmark's request).
            ffi::lua_createtable(l, 0, 0);
            ffi::lua_pushvalue(l, ffi::lua_upvalueindex(4));
            ffi::lua_setmetatable(l, -2);
            raw.headers.set(ffi::lua_topointer(l, -1));
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
        _ => return false,
    }
    true
}

/// Every header field into a new table on top, by lower-case name.
unsafe fn push_all_headers(l: *mut ffi::lua_State, raw: &RawReq<'_>) {
    let fields = raw.head.headers();
    ffi::lua_createtable(l, 0, fields.size_hint().0 as c_int);
    for (n, v) in fields {
        push_mapped(l, n, is_lower, lowercase);
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
/// field of that lower-case name. Upvalue: `Current`.
///
/// Not kept in the table: a script reads a field once or twice, and
/// storing it (a new key in the table, which then grows) cost more than
/// a second scan of the request's fields would.
unsafe extern "C-unwind" fn headers_index(l: *mut ffi::lua_State) -> c_int {
    ffi::lua_settop(l, 2);
    if ffi::lua_type(l, 2) != ffi::LUA_TSTRING {
        ffi::lua_pushnil(l);
        return 1;
    }
    let cur = ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const Current;
    let Some(raw) = headers_owner(l, cur) else {
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
    }
    1
}

/// `pairs(headers)`: the table filled with every field not already in it
/// (a script's own assignments stay) and made plain (no metatable), then
/// `next, headers, nil`.
/// Upvalues: `Current`, `next`.
unsafe extern "C-unwind" fn headers_pairs(l: *mut ffi::lua_State) -> c_int {
    ffi::lua_settop(l, 1);
    if ffi::lua_type(l, 1) == ffi::LUA_TTABLE {
        let cur = ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const Current;
        if let Some(raw) = headers_owner(l, cur) {
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
        push_mapped(l, k, is_plain, unescape);
        push_mapped(l, v, is_plain, unescape);
        ffi::lua_rawset(l, -3);
    }
}

/// Pushes `map(src)`: `map` writes at most `src.len()` bytes into its
/// buffer and returns how many; `src` itself when `same(src)` says the
/// map would copy it unchanged (most names and values: no copy, no
/// buffer).
unsafe fn push_mapped(
    l: *mut ffi::lua_State,
    src: &[u8],
    same: fn(&[u8]) -> bool,
    map: fn(&[u8], &mut [u8]) -> usize,
) {
    if same(src) {
        push(l, src);
    } else if src.len() <= SMALL {
        let mut small = [0u8; SMALL];
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

/// `lowercase` would copy `src` as it is.
fn is_lower(src: &[u8]) -> bool {
    !src.iter().any(u8::is_ascii_uppercase)
}

/// `unescape` would copy `src` as it is: no `+`, `%` or NUL.
fn is_plain(src: &[u8]) -> bool {
    !src.iter().any(|&b| b == b'+' || b == b'%' || b == 0)
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

    /// The shortcut of `push_mapped`: what `is_plain` and `is_lower` let
    /// through unmapped is exactly what the maps would copy unchanged.
    #[test]
    fn names_and_values_pushed_unmapped_are_those_the_maps_leave_as_they_are() {
        for s in [
            &b"plain"[..],
            b"",
            b"a+b",
            b"%41",
            b"x%00y",
            b"a\0b",
            b"name=stoa",
            b"User-Agent",
            b"user-agent",
            b"caf\xc3\xa9",
        ] {
            let mut out = vec![0; s.len()];
            let n = unescape(s, &mut out);
            assert_eq!(is_plain(s), &out[..n] == s, "{s:?}");
            if is_plain(s) {
                assert_eq!(un(s), s);
            }
            let n = lowercase(s, &mut out);
            assert_eq!(is_lower(s), &out[..n] == s, "{s:?}");
        }
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
