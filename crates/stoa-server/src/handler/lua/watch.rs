//! The instruction hook, armed only for code that runs long.
//!
//! A Lua count hook set on a coroutine makes the VM stop at every
//! instruction to count (Lua 5.4's `trap`), which cost a hello handler
//! about a tenth of its time. Instead, each resume of a request's
//! coroutine is registered here; a watchdog thread ticks every
//! [`TICK_MS`] and signals a worker whose resume has run for two ticks or
//! more. The signal handler, on that worker's own thread, sets the count
//! hook on the coroutine being run (`lua_sethook` is meant to be called
//! from signal handlers); from then on the hook checks the request's
//! instruction budget and deadline every [`super::HOOK_EVERY`]
//! instructions and raises a Lua error past either. The handler removes
//! the hook when the resume returns. A request that runs straight
//! through, as almost all do, never has a hook. An idle server's
//! watchdog checks ten times a second instead of every tick.

use mlua::ffi;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The watchdog's period.
pub const TICK_MS: u64 = 5;

/// Ticks per check once no Lua has run for a second.
const IDLE_TICKS: u64 = 20;

/// One worker thread's registration.
struct Slot {
    thread: libc::pthread_t,
    /// The tick at which the running resume started; 0: none running.
    since: AtomicU64,
    /// A signal was sent for the running resume.
    signalled: AtomicBool,
    /// The thread is gone (never signal it).
    gone: AtomicBool,
}

struct Watchdog {
    tick: AtomicU64,
    /// A resume started since the last check.
    seen: AtomicBool,
    slots: Mutex<Vec<Arc<Slot>>>,
}

fn signal_number() -> libc::c_int {
    libc::SIGRTMIN() + 4
}

fn watchdog() -> &'static Watchdog {
    static W: OnceLock<&'static Watchdog> = OnceLock::new();
    W.get_or_init(|| {
        let w: &'static Watchdog = Box::leak(Box::new(Watchdog {
            tick: AtomicU64::new(1),
            seen: AtomicBool::new(false),
            slots: Mutex::new(Vec::new()),
        }));
        // SAFETY: installs a handler that only reads this thread's
        // const-initialized thread-locals and calls lua_sethook, which
        // Lua documents as callable from a signal handler; SA_RESTART
        // keeps interrupted system calls going.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(signal_number(), &sa, std::ptr::null_mut());
        }
        let spawned = std::thread::Builder::new()
            .name("stoa-lua-watch".into())
            .spawn(move || {
                // Ticks since a resume was last seen running: past a
                // second of that the watchdog checks ten times a second
                // only (a runaway resume is then caught within 0.1 s).
                let mut quiet = 0u64;
                loop {
                    let step = if quiet > 1000 / TICK_MS {
                        IDLE_TICKS
                    } else {
                        1
                    };
                    std::thread::sleep(std::time::Duration::from_millis(TICK_MS * step));
                    let now = w.tick.fetch_add(step, Ordering::Relaxed) + step;
                    let slots = w.slots.lock().unwrap_or_else(|p| p.into_inner());
                    let mut busy = false;
                    for s in slots.iter() {
                        let since = s.since.load(Ordering::Acquire);
                        busy |= since != 0;
                        if since != 0
                            && now >= since + 2
                            && !s.gone.load(Ordering::Acquire)
                            && !s.signalled.swap(true, Ordering::AcqRel)
                        {
                            // SAFETY: the thread registered itself and has
                            // not marked itself gone.
                            unsafe { libc::pthread_kill(s.thread, signal_number()) };
                        }
                    }
                    let seen = w.seen.swap(false, Ordering::Relaxed);
                    quiet = if busy || seen { 0 } else { quiet + step };
                }
            });
        if let Err(e) = spawned {
            tracing::error!("lua: no watchdog thread ({e}): long-running code is not stopped");
        }
        w
    })
}

/// Marks a worker's slot gone when its thread ends.
struct Registered(Arc<Slot>);

impl Drop for Registered {
    fn drop(&mut self) {
        self.0.gone.store(true, Ordering::Release);
    }
}

thread_local! {
    static SLOT: Registered = {
        let s = Arc::new(Slot {
            // SAFETY: pthread_self has no preconditions.
            thread: unsafe { libc::pthread_self() },
            since: AtomicU64::new(0),
            signalled: AtomicBool::new(false),
            gone: AtomicBool::new(false),
        });
        watchdog()
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(s.clone());
        Registered(s)
    };
    /// The coroutine being resumed on this thread, or null.
    static CURRENT: Cell<*mut ffi::lua_State> = const { Cell::new(std::ptr::null_mut()) };
    /// Whether the signal handler hooked CURRENT.
    static ARMED: Cell<bool> = const { Cell::new(false) };
    /// The running request's limits.
    static LIMITS: Cell<*const super::Running> = const { Cell::new(std::ptr::null()) };
}

extern "C" fn on_signal(_: libc::c_int) {
    let l = CURRENT.with(Cell::get);
    if !l.is_null() && !ARMED.with(Cell::get) {
        ARMED.with(|a| a.set(true));
        // SAFETY: `l` is the coroutine this thread is running right now;
        // lua_sethook only sets fields of it (documented signal-safe).
        unsafe {
            ffi::lua_sethook(
                l,
                Some(hook),
                ffi::LUA_MASKCOUNT,
                super::HOOK_EVERY as libc::c_int,
            )
        };
    }
}

/// The count hook: the request's budget and deadline.
unsafe extern "C-unwind" fn hook(l: *mut ffi::lua_State, _: *mut ffi::lua_Debug) {
    let r = LIMITS.with(Cell::get);
    if r.is_null() {
        return;
    }
    // SAFETY: LIMITS points at the running request's limits for the
    // whole resume (set and cleared around it by `resume`).
    let r = unsafe { &*r };
    let msg: &'static [u8] = {
        let left = r.budget.get();
        if left == 0 {
            b"instruction limit reached\0"
        } else {
            r.budget.set(left - 1);
            if r.deadline
                .get()
                .is_some_and(|d| std::time::Instant::now() > d)
            {
                b"time limit reached\0"
            } else {
                return;
            }
        }
    };
    r.stopped.set(Some(msg));
    // SAFETY: a count hook may yield (with no values), and a yield is
    // what no `pcall` in the script can catch: the handler sees
    // `stopped` and ends the request. Where the coroutine cannot yield
    // (inside a C call), a Lua error is raised instead. This frame owns
    // nothing that needs dropping.
    unsafe {
        if ffi::lua_isyieldable(l) != 0 {
            ffi::lua_yield(l, 0);
        } else {
            ffi::lua_pushstring(l, msg.as_ptr().cast());
            ffi::lua_error(l);
        }
    }
}

/// Resumes `th` under the watchdog: hooked only if it runs for more than
/// one or two ticks; the hook then reads `limits`.
pub fn resume(
    th: &mlua::Thread,
    limits: &super::Running,
    args: impl mlua::IntoLuaMulti,
) -> mlua::Result<mlua::MultiValue> {
    watched(th.to_pointer() as *mut ffi::lua_State, limits, || {
        th.resume(args)
    })
}

/// Runs `f`, which resumes the coroutine `l`, under the watchdog.
pub fn watched<R>(l: *mut ffi::lua_State, limits: &super::Running, f: impl FnOnce() -> R) -> R {
    SLOT.with(|s| {
        let slot = &s.0;
        CURRENT.with(|c| c.set(l));
        ARMED.with(|a| a.set(false));
        LIMITS.with(|p| p.set(limits));
        slot.signalled.store(false, Ordering::Release);
        let w = watchdog();
        if !w.seen.load(Ordering::Relaxed) {
            w.seen.store(true, Ordering::Relaxed);
        }
        slot.since
            .store(w.tick.load(Ordering::Relaxed), Ordering::Release);
        let r = f();
        slot.since.store(0, Ordering::Release);
        CURRENT.with(|c| c.set(std::ptr::null_mut()));
        LIMITS.with(|p| p.set(std::ptr::null()));
        if ARMED.with(Cell::get) {
            ARMED.with(|a| a.set(false));
            // SAFETY: `l` is a live coroutine of this thread's interpreter
            // (the caller holds it); nothing runs in it now.
            unsafe { ffi::lua_sethook(l, None, 0, 0) };
        }
        r
    })
}
