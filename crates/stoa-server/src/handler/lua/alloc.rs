//! A size-class allocator for one Lua interpreter, with its memory cap.
//!
//! A request's run makes and frees the same small objects every time
//! (its `req`, `args` and `headers` tables and their node arrays, the
//! strings of the answer, the script's header table): mlua's allocator
//! sends each to the global allocator (glibc malloc) through
//! `std::alloc` with its own accounting, ~3.7k instructions of a Lua
//! request that reads its fields (docs/BENCHMARKS.md "Lua"). Here blocks
//! of up to [`MAX_SMALL`] bytes come from a region reserved for the
//! interpreter, cut in classes of 16 bytes; a freed block goes on its
//! class's free list and is the next one handed out (the same scheme as
//! LuaJIT's and nginx's slab allocators: no search, no header, no lock —
//! an interpreter lives on one worker thread). Larger blocks, and small
//! ones once the region is used up, go to the allocator the interpreter
//! had before (mlua's), as do blocks that it allocated before this one
//! was installed: a block is ours exactly when its address is inside the
//! region.
//!
//! The memory cap counts what Lua asked for, as mlua's did (its
//! `set_memory_limit`): an allocation that would take the interpreter
//! past it fails and Lua raises "not enough memory". Blocks on the free
//! lists are not counted; they are at most the region, which is the cap
//! in size. mlua's own cap is left off once this allocator is in place
//! (mlua finds its state only while its own allocator is installed).
//!
//! The region and the allocator's state are given back when Lua frees
//! the main state's block, the last thing `lua_close` does. mlua's own
//! accounting record (24 bytes, which it frees only while its allocator
//! is the one installed) stays allocated after the close: one per
//! interpreter a reload replaces.

use mlua::{ffi, Lua};
use std::ffi::c_void;
use std::ptr;

/// Bytes between two size classes; also the alignment of every block,
/// more than any Lua object needs (`LUAI_MAXALIGN`).
const STEP: usize = 16;

/// The largest block served from the region.
const MAX_SMALL: usize = 1024;

const CLASSES: usize = MAX_SMALL / STEP;

/// The largest region reserved, whatever the cap (address space only:
/// pages are touched as blocks are first cut from them).
const MAX_REGION: usize = 1 << 30;

/// An interpreter's allocator state: the `ud` of its `lua_Alloc`.
struct Arena {
    /// The first free block of each class; a free block holds the
    /// address of the next.
    free: [*mut u8; CLASSES],
    /// Where the next block is cut from the region, and its end.
    next: *mut u8,
    end: *mut u8,
    base: *mut u8,
    len: usize,
    /// Bytes Lua holds (ours and the previous allocator's), as Lua counts
    /// them.
    used: usize,
    /// 0: no cap.
    limit: usize,
    /// The allocator installed before this one, for what is not ours.
    inner: ffi::lua_Alloc,
    inner_ud: *mut c_void,
    /// The block of the main state (`lua_newstate`'s first allocation):
    /// when it is freed the state is closed.
    main: *mut c_void,
}

impl Arena {
    #[inline]
    fn ours(&self, p: *mut c_void) -> bool {
        let p = p as usize;
        p >= self.base as usize && p < self.end as usize
    }

    /// A block of `class` (0-based: `(class + 1) * STEP` bytes) from the
    /// region, or null when the region is used up.
    #[inline]
    unsafe fn take(&mut self, class: usize) -> *mut u8 {
        let head = self.free[class];
        if !head.is_null() {
            // SAFETY: a free block of ours holds the address of the next
            // free block of its class (`give`).
            self.free[class] = unsafe { *(head as *mut *mut u8) };
            return head;
        }
        let size = (class + 1) * STEP;
        if (self.end as usize) - (self.next as usize) < size {
            return ptr::null_mut();
        }
        let p = self.next;
        // SAFETY: `p + size` is within the region (checked above).
        self.next = unsafe { p.add(size) };
        p
    }

    #[inline]
    unsafe fn give(&mut self, p: *mut u8, class: usize) {
        // SAFETY: `p` is a block of ours of at least STEP bytes, aligned
        // to STEP, that Lua no longer uses.
        unsafe { *(p as *mut *mut u8) = self.free[class] };
        self.free[class] = p;
    }
}

#[inline]
fn class_of(size: usize) -> usize {
    (size - 1) / STEP
}

/// The `lua_Alloc` (Lua 5.4 manual §4.6 "lua_Alloc"): `ptr` null means a
/// new block (`osize` is then the kind of object, not a size); `nsize` 0
/// frees `ptr`; otherwise `ptr` (of `osize` bytes) becomes `nsize` bytes.
/// It must not fail when `nsize <= osize`.
///
/// What a request does almost every time — a small block freed, taken
/// from its free list, or resized within its class — is here; the rest
/// is in [`slow`], out of line, so that this part saves no registers.
unsafe extern "C-unwind" fn alloc(
    ud: *mut c_void,
    p: *mut c_void,
    osize: usize,
    nsize: usize,
) -> *mut c_void {
    // SAFETY: `ud` is the `Arena` that `install` gave Lua with this
    // function; only this interpreter's thread calls it.
    let a = unsafe { &mut *(ud as *mut Arena) };
    if p.is_null() {
        if nsize != 0 && nsize <= MAX_SMALL && (a.limit == 0 || a.used + nsize <= a.limit) {
            let class = class_of(nsize);
            let head = a.free[class];
            if !head.is_null() {
                // SAFETY: a free block of ours holds the address of the
                // next free block of its class (`give`).
                a.free[class] = unsafe { *(head as *mut *mut u8) };
                a.used += nsize;
                return head as *mut c_void;
            }
        }
    } else if a.ours(p) {
        if nsize == 0 {
            a.used = a.used.saturating_sub(osize);
            // SAFETY: a block of ours of `osize` bytes Lua is done with.
            unsafe { a.give(p as *mut u8, class_of(osize)) };
            return ptr::null_mut();
        }
        if nsize <= MAX_SMALL
            && class_of(nsize) == class_of(osize)
            && (nsize <= osize || a.limit == 0 || a.used + (nsize - osize) <= a.limit)
        {
            a.used = (a.used + nsize).saturating_sub(osize);
            return p;
        }
    }
    // SAFETY: as for this function.
    unsafe { slow(a, p, osize, nsize) }
}

/// Everything [`alloc`] does not do inline.
#[cold]
#[inline(never)]
unsafe fn slow(a: &mut Arena, p: *mut c_void, osize: usize, nsize: usize) -> *mut c_void {
    let old = if p.is_null() { 0 } else { osize };
    if nsize == 0 {
        if !p.is_null() {
            a.used = a.used.saturating_sub(old);
            if a.ours(p) {
                // SAFETY: a block of ours of `osize` bytes Lua is done with.
                unsafe { a.give(p as *mut u8, class_of(osize)) };
            } else {
                // SAFETY: not ours, so the previous allocator's.
                unsafe { (a.inner)(a.inner_ud, p, osize, 0) };
                if p == a.main {
                    // SAFETY: `lua_close` frees the main state's block
                    // last: nothing of this interpreter calls the
                    // allocator again.
                    unsafe { destroy(a) };
                }
            }
        }
        return ptr::null_mut();
    }
    if nsize > old && a.limit != 0 && a.used + (nsize - old) > a.limit {
        return ptr::null_mut();
    }
    let q = if p.is_null() {
        if nsize <= MAX_SMALL {
            // SAFETY: a class index below CLASSES.
            let q = unsafe { a.take(class_of(nsize)) };
            if q.is_null() {
                // SAFETY: a new block from the previous allocator.
                unsafe { (a.inner)(a.inner_ud, p, osize, nsize) }
            } else {
                q as *mut c_void
            }
        } else {
            // SAFETY: as above.
            unsafe { (a.inner)(a.inner_ud, p, osize, nsize) }
        }
    } else if !a.ours(p) {
        // SAFETY: the previous allocator's block, resized by it.
        unsafe { (a.inner)(a.inner_ud, p, osize, nsize) }
    } else if nsize <= MAX_SMALL && class_of(nsize) == class_of(osize) {
        p
    } else {
        // A block of ours changes class: a new one, the bytes copied.
        let small = if nsize <= MAX_SMALL {
            // SAFETY: a class index below CLASSES.
            unsafe { a.take(class_of(nsize)) as *mut c_void }
        } else {
            ptr::null_mut()
        };
        let q = if small.is_null() {
            // SAFETY: a new block from the previous allocator.
            unsafe { (a.inner)(a.inner_ud, ptr::null_mut(), 0, nsize) }
        } else {
            small
        };
        if q.is_null() {
            if nsize <= osize {
                // Shrinking must not fail: the block stays where it is,
                // and goes to the smaller class's list when freed.
                a.used = a.used.saturating_sub(old - nsize);
                return p;
            }
            return ptr::null_mut();
        }
        // SAFETY: both blocks are live, distinct, and at least
        // `min(osize, nsize)` bytes; `p` is ours and given back.
        unsafe {
            ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, osize.min(nsize));
            a.give(p as *mut u8, class_of(osize));
        }
        q
    };
    if !q.is_null() {
        a.used = (a.used + nsize).saturating_sub(old);
    }
    q
}

/// Gives back the region and the state.
unsafe fn destroy(a: *mut Arena) {
    // SAFETY: `a` came from `Box::into_raw` in `install` and is dropped
    // once, here; the region was mapped there with this length.
    unsafe {
        let a = Box::from_raw(a);
        libc::munmap(a.base as *mut c_void, a.len);
    }
    #[cfg(test)]
    tests::LIVE.with(|l| l.set(l.get() - 1));
}

/// Puts the allocator in front of `lua`'s, with a cap of `limit` bytes
/// (0: none). False when no region could be reserved: the interpreter
/// keeps mlua's allocator, and the caller sets the cap through mlua.
pub(super) fn install(lua: &Lua, limit: usize) -> bool {
    let len = if limit == 0 { 64 << 20 } else { limit }
        .min(MAX_REGION)
        .next_multiple_of(2 << 20);
    // SAFETY: a fresh private anonymous mapping; NORESERVE: address space
    // only, pages are backed as blocks are first cut from them.
    let base = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return false;
    }
    let base = base as *mut u8;
    let mut done = false;
    // SAFETY: `exec_raw` runs the closure on the interpreter's main state
    // with the interpreter locked; the closure reads the count and swaps
    // the allocator without allocating in between, so `used` is exact.
    let r = unsafe {
        lua.exec_raw::<()>((), |l| {
            let mut inner_ud = ptr::null_mut();
            let inner = ffi::lua_getallocf(l, &mut inner_ud);
            ffi::lua_rawgeti(l, ffi::LUA_REGISTRYINDEX, ffi::LUA_RIDX_MAINTHREAD);
            let main = ffi::lua_tothread(l, -1);
            ffi::lua_settop(l, -2);
            // Lua counts every block it holds (`gettotalbytes`).
            let used = (ffi::lua_gc(l, ffi::LUA_GCCOUNT, 0) as usize) * 1024
                + ffi::lua_gc(l, ffi::LUA_GCCOUNTB, 0) as usize;
            let arena = Box::into_raw(Box::new(Arena {
                free: [ptr::null_mut(); CLASSES],
                next: base,
                end: base.add(len),
                base,
                len,
                used,
                limit,
                inner,
                inner_ud,
                // The main state sits in the block `lua_newstate`
                // allocated, right after the extra space
                // (`lua_getextraspace`).
                main: ffi::lua_getextraspace(main),
            }));
            ffi::lua_setallocf(l, alloc, arena as *mut c_void);
            done = true;
        })
    };
    if r.is_err() || !done {
        // SAFETY: the mapping above, unused.
        unsafe { libc::munmap(base as *mut c_void, len) };
        return false;
    }
    #[cfg(test)]
    tests::LIVE.with(|l| l.set(l.get() + 1));
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        /// Arenas installed and not yet given back, on this thread.
        pub(super) static LIVE: Cell<usize> = const { Cell::new(0) };
    }

    fn lua_with(limit: usize) -> Lua {
        let lua = Lua::new();
        assert!(install(&lua, limit));
        lua
    }

    /// Bytes cut from the region so far, and the region's length.
    fn cut(lua: &Lua) -> (usize, usize) {
        // SAFETY: read only, on this thread, with Lua idle.
        unsafe {
            lua.exec_raw::<(usize, usize)>((), |l| {
                let mut ud = ptr::null_mut();
                ffi::lua_getallocf(l, &mut ud);
                let a = &*(ud as *const Arena);
                ffi::lua_pushinteger(l, (a.next as usize - a.base as usize) as i64);
                ffi::lua_pushinteger(l, a.len as i64);
            })
            .unwrap()
        }
    }

    #[test]
    fn blocks_freed_by_the_collector_are_reused_for_the_next_objects_of_their_size() {
        let lua = lua_with(0);
        let grown = |lua: &Lua| -> usize {
            lua.load("local t = {} for i = 1, 2000 do t[i] = { i, tostring(i) } end")
                .exec()
                .unwrap();
            lua.gc_collect().unwrap();
            lua.gc_collect().unwrap();
            cut(lua).0
        };
        let first = grown(&lua);
        assert!(first > 0, "small blocks come from the region");
        // The same objects again: the free lists serve them, the region
        // is cut no further.
        assert_eq!(grown(&lua), first);
    }

    #[test]
    fn values_survive_tables_and_strings_growing_across_classes_and_past_the_largest_class() {
        let lua = lua_with(0);
        let s: String = lua
            .load(
                r#"
                local t = {}
                for i = 1, 5000 do t[i] = i end           -- array part regrown many times
                local h = {}
                for i = 1, 300 do h["k" .. i] = string.rep("x", i) end
                local parts = {}
                for i = 1, 300 do parts[#parts + 1] = h["k" .. i]:sub(1, 1) end
                local big = string.rep("y", 100000)       -- larger than any class
                return #t .. " " .. t[4321] .. " " .. #h.k300 .. " " .. #table.concat(parts) .. " " .. #big
                "#,
            )
            .eval()
            .unwrap();
        assert_eq!(s, "5000 4321 300 300 100000");
    }

    #[test]
    fn the_cap_refuses_growth_past_it_and_lua_raises_not_enough_memory_as_with_mlua_s_limit() {
        let lua = lua_with(4 << 20);
        let r = lua
            .load("local t = {} for i = 1, 1e7 do t[i] = string.rep('z', 64) .. i end")
            .exec();
        assert!(matches!(r, Err(mlua::Error::MemoryError(_))), "{r:?}");
        // The interpreter goes on once the garbage is collected.
        lua.gc_collect().unwrap();
        let n: i64 = lua.load("return #string.rep('a', 1000)").eval().unwrap();
        assert_eq!(n, 1000);
    }

    #[test]
    fn once_the_region_is_cut_up_small_blocks_come_from_the_previous_allocator() {
        // A 2 MiB cap reserves a 2 MiB region: strings of one class fill
        // it, are freed, and tables of other classes must then come from
        // mlua's allocator, under the same cap.
        let lua = lua_with(2 << 20);
        lua.load("local t = {} for i = 1, 12000 do t[i] = ('%60d'):format(i) end")
            .exec()
            .unwrap();
        lua.gc_collect().unwrap();
        let n: i64 = lua
            .load("local t = {} for i = 1, 12000 do t[i] = { i, i } end local s = 0 for _, v in ipairs(t) do s = s + v[2] end return s")
            .eval()
            .unwrap();
        assert_eq!(n, 12000 * 12001 / 2);
        let (cut, len) = cut(&lua);
        assert!(
            len - cut < MAX_SMALL,
            "the region is used up: {cut} of {len}"
        );
    }

    #[test]
    fn closing_the_interpreter_gives_the_region_back() {
        let before = LIVE.with(Cell::get);
        {
            let lua = lua_with(1 << 20);
            lua.load("x = {} for i = 1, 100 do x[i] = {} end")
                .exec()
                .unwrap();
            assert_eq!(LIVE.with(Cell::get), before + 1);
        }
        assert_eq!(LIVE.with(Cell::get), before);
    }
}
