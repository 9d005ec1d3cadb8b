//! Parked connections: HTTP/1 keep-alive connections that stayed idle for
//! [`PARK_AFTER`] leave their task and wait here as a few dozen bytes
//! each, as nginx keeps an idle keep-alive connection in a small structure
//! and gives its buffers and request memory back.
//!
//! A connection's task (its future, ~1.3 KiB, in a cell tokio allocates
//! 128-byte aligned) and its tokio registration (a `ScheduledIo`, 128-byte
//! aligned in an `Arc`) are what an idle connection costs: 2,606 bytes of
//! RSS per idle keep-alive connection before this, nginx 497-521
//! (docs/BENCHMARKS.md, "Idle keep-alive connections"). Parked, a
//! connection is its socket, peer, runtime and deadline in a [`Slot`]
//! (64 bytes) and a deadline entry; the socket leaves tokio for the lot's
//! own epoll set (one-shot, keyed by slot and generation), the task ends.
//! When the socket turns readable the lot task gives it back to tokio and
//! starts a new connection task for it (`worker.rs`, the one place
//! connection tasks start), which reads the next request at once. The lot
//! task also closes a parked connection at its keep-alive deadline and all
//! of them when the worker stops.
//!
//! Only connections that waited [`PARK_AFTER`] park: a client sending its
//! next request sooner (load generators, pages loading their assets) never
//! pays for a park and a resume (three `epoll_ctl`s and a task spawned).
//!
//! HTTP/2 connections with no stream open park the same way
//! (`conn::h2`), with what the connection must remember in a box (the
//! slot's [`Held::H2`]): the codec's state (its HPACK table, windows,
//! settings and stream counts, its buffers given back) and a few
//! settings, as nginx keeps an idle HTTP/2 connection as its small state
//! and an event. Over TLS the box also holds the TLS stream, whose
//! socket stays registered with tokio (a rustls session cannot be taken
//! apart and put together again): the lot watches the same descriptor
//! in its own set, and the task is what is saved. An HTTP/2 connection
//! does not simply close at its deadline nor when the worker stops: it
//! is resumed then, and its task says GOAWAY (RFC 9113 §6.8) as an
//! unparked one does.

use super::h2::Parked;
use crate::config::Runtime;
use crate::local::{Proto, Worker};
use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// How long a kept-alive connection waits for its next request in its own
/// task before it parks.
pub(crate) const PARK_AFTER: Duration = Duration::from_millis(250);

/// Starts the task of a connection coming back from the lot (its
/// connection count is still taken): `worker.rs`.
pub(crate) type Resume = fn(Back, SocketAddr, Arc<Runtime>, &Rc<Worker>);

/// What waits in a slot.
enum Held {
    /// An HTTP/1 connection: its socket, out of tokio.
    Http1(std::net::TcpStream),
    /// An HTTP/2 connection: the key of its state (with its socket or TLS
    /// stream) in [`Lot::h2`].
    H2(usize),
}

/// A connection on its way into or out of the lot.
enum Loose {
    Http1(std::net::TcpStream),
    H2(Box<Parked>),
}

/// A connection leaving the lot.
pub(crate) enum Back {
    /// An HTTP/1 connection, registered with tokio again.
    Http1(TcpStream),
    /// An HTTP/2 connection (`conn::h2::resume`).
    H2(Box<Parked>),
}

impl Loose {
    fn fd(&self) -> RawFd {
        match self {
            Loose::Http1(s) => s.as_raw_fd(),
            Loose::H2(p) => p.fd(),
        }
    }

    fn proto(&self) -> Proto {
        match self {
            Loose::Http1(_) => Proto::Http1,
            Loose::H2(p) => p.proto(),
        }
    }
}

/// A slot's connection leaving the lot.
struct Leaving {
    conn: Loose,
    peer: SocketAddr,
    rt: Arc<Runtime>,
}

/// A parked connection.
struct Slot {
    /// In the lot's epoll set (and, HTTP/1 and cleartext HTTP/2, out of
    /// tokio's).
    conn: Held,
    /// Told apart from an earlier connection in the same slot.
    gen: u32,
    peer: SocketAddr,
    /// The runtime it last served with (it moves to the newest at its next
    /// request, as every kept-alive connection does).
    rt: Arc<Runtime>,
    /// Its keep-alive deadline.
    deadline: Instant,
}

#[derive(Default)]
struct Lot {
    slots: slab::Slab<Slot>,
    /// Parked HTTP/2 connections' state, in one block: boxed one by one,
    /// each landed among the buffers its connection had just given back
    /// and kept that page resident (docs/BENCHMARKS.md, "Idle HTTP/2
    /// connections").
    h2: slab::Slab<Parked>,
    /// (deadline, slot, generation), earliest first. A slot resumed leaves
    /// its entry behind (skipped by generation); the heap is rebuilt from
    /// the slots when such entries outnumber them.
    deadlines: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    next_gen: u32,
    /// When the lot task's timer fires (None: no timer).
    armed: Option<Instant>,
    /// Connections parked since the allocator last gave memory back, and
    /// when it will next (see [`TRIM_AFTER`]).
    parked_since_trim: u32,
    trim_at: Option<Instant>,
}

/// After this many connections parked, the allocator's free pages go back
/// to the kernel ([`TRIM_DELAY`] later): a burst of connections leaves
/// the memory of its buffers free but resident, scattered among the parked
/// state (glibc trims only the top of its heap by itself), so that an idle
/// HTTP/2 connection cost 4.5 KB of RSS for its 0.8 KB in use
/// (docs/BENCHMARKS.md, "Idle HTTP/2 connections park"). HAProxy trims
/// likewise when it releases its pools.
const TRIM_AFTER: u32 = 64;
/// At most one trim per worker this often, after the burst.
const TRIM_DELAY: Duration = Duration::from_secs(1);

thread_local! {
    // Per worker thread, as the worker's tasks are.
    static LOT: RefCell<Lot> = RefCell::new(Lot::default());
    /// How parked connections come back (None: no lot on this thread, so
    /// connections do not park).
    static RESUME: Cell<Option<Resume>> = const { Cell::new(None) };
    /// The lot's epoll descriptor (owned by the lot task's `AsyncFd`).
    static EPOLL: Cell<RawFd> = const { Cell::new(-1) };
    /// The lot task's waker, and whether a park asked it to set its timer
    /// again (a deadline earlier than the one it waits for).
    static LOT_WAKER: Cell<Option<std::task::Waker>> = const { Cell::new(None) };
    static REARM: Cell<bool> = const { Cell::new(false) };
}

/// Starts this worker's lot: connections served on this thread may park
/// from now on, and come back through `resume`. Without an epoll
/// descriptor nothing parks.
pub(crate) fn start(worker: Rc<Worker>, resume: Resume) {
    // SAFETY: epoll_create1 takes no pointer; a non-negative result is a
    // new descriptor that nothing else owns.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        tracing::warn!("epoll_create1: {}", std::io::Error::last_os_error());
        return;
    }
    // SAFETY: `fd` was just created and is owned by nothing else.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: the AsyncFd owns the descriptor, which stays open and the
    // same until the AsyncFd drops it.
    let epoll = unsafe { AsyncFd::register_with_interest(owned, tokio::io::Interest::READABLE) };
    let epoll = match epoll {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!("the lot's epoll descriptor: {e}");
            return;
        }
    };
    EPOLL.with(|e| e.set(fd));
    RESUME.with(|r| r.set(Some(resume)));
    tokio::task::spawn_local(run(worker, resume, epoll));
}

/// Whether connections on this thread can park (a lot runs here).
#[inline]
pub(crate) fn enabled() -> bool {
    RESUME.with(|r| r.get().is_some())
}

/// Parks an idle keep-alive connection until its next request or
/// `deadline`. Its connection count moves to the lot.
pub(crate) fn park(
    stream: TcpStream,
    peer: SocketAddr,
    rt: Arc<Runtime>,
    deadline: Instant,
    worker: &Rc<Worker>,
) {
    // Leaving tokio: its registration is freed (an `epoll_ctl` DEL).
    match stream.into_std() {
        Ok(s) => lodge(Loose::Http1(s), peer, rt, deadline, worker),
        Err(_) => closed(worker, Proto::Http1),
    }
}

/// Parks an idle HTTP/2 connection (its state from `conn::h2`) until
/// the client sends again or `deadline`. Its connection count moves to
/// the lot.
pub(crate) fn park_h2(
    state: Box<Parked>,
    peer: SocketAddr,
    rt: Arc<Runtime>,
    deadline: Instant,
    worker: &Rc<Worker>,
) {
    lodge(Loose::H2(state), peer, rt, deadline, worker);
}

/// Puts a connection in a slot and its descriptor in the lot's set.
fn lodge(conn: Loose, peer: SocketAddr, rt: Arc<Runtime>, deadline: Instant, worker: &Rc<Worker>) {
    let ep = EPOLL.with(|e| e.get());
    let proto = conn.proto();
    if ep < 0 || !enabled() || worker.is_stopping() {
        // No lot here, or it closed what it held as the worker stops: this
        // one closes now (callers park only when neither is so).
        drop(conn);
        return closed(worker, proto);
    }
    let fd = conn.fd();
    let added = LOT.with(|lot| {
        let mut lot = lot.borrow_mut();
        let gen = lot.next_gen;
        lot.next_gen = gen.wrapping_add(1);
        let key = lot.slots.vacant_key();
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLONESHOT) as u32,
            u64: u64::from(gen) << 32 | key as u64,
        };
        // One-shot: a socket parked before is still in the set, disarmed
        // (a socket leaves it only when closed), so it is re-armed.
        // SAFETY: valid descriptors and a pointer to an event that lives
        // across each call.
        let mut r = unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EEXIST) {
            // SAFETY: as above.
            r = unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_MOD, fd, &mut ev) };
        }
        if r < 0 {
            return Err(conn);
        }
        let conn = match conn {
            Loose::Http1(s) => Held::Http1(s),
            Loose::H2(state) => Held::H2(lot.h2.insert(*state)),
        };
        lot.slots.insert(Slot {
            conn,
            gen,
            peer,
            rt,
            deadline,
        });
        lot.deadlines.push(Reverse((deadline, key as u32, gen)));
        lot.parked_since_trim = lot.parked_since_trim.saturating_add(1);
        let mut wake_at = deadline;
        if lot.parked_since_trim >= TRIM_AFTER && lot.trim_at.is_none() {
            let at = Instant::now() + TRIM_DELAY;
            lot.trim_at = Some(at);
            wake_at = wake_at.min(at);
        }
        if lot.deadlines.len() > 2 * lot.slots.len() + 64 {
            let fresh = lot
                .slots
                .iter()
                .map(|(k, s)| Reverse((s.deadline, k as u32, s.gen)))
                .collect();
            lot.deadlines = fresh;
        }
        if lot.armed.is_none_or(|a| wake_at < a) {
            REARM.with(|r| r.set(true));
            if let Some(w) = LOT_WAKER.with(|w| w.take()) {
                w.wake();
            }
        }
        Ok(())
    });
    if let Err(conn) = added {
        drop(conn);
        closed(worker, proto);
    }
}

/// A parked connection closes: its count and the status page's.
fn closed(worker: &Worker, proto: Proto) {
    worker.connection_closed();
    if let Some(s) = worker.stats() {
        s.closed(proto);
    }
}

impl Lot {
    /// Takes slot `key` out of the lot (it must be there).
    fn take(&mut self, key: usize) -> Leaving {
        let s = self.slots.remove(key);
        let conn = match s.conn {
            Held::Http1(socket) => Loose::Http1(socket),
            Held::H2(k) => Loose::H2(Box::new(self.h2.remove(k))),
        };
        Leaving {
            conn,
            peer: s.peer,
            rt: s.rt,
        }
    }
}

/// A connection leaves the lot for a task: back into tokio (a new
/// registration), then its task starts.
fn wake(s: Leaving, resume: Resume, worker: &Rc<Worker>) {
    match s.conn {
        Loose::Http1(socket) => match TcpStream::from_std(socket) {
            Ok(stream) => resume(Back::Http1(stream), s.peer, s.rt, worker),
            Err(_) => closed(worker, Proto::Http1),
        },
        Loose::H2(state) => resume(Back::H2(state), s.peer, s.rt, worker),
    }
}

/// The lot task: resumes parked connections whose socket turned readable,
/// closes those past their keep-alive deadline, and all of them when the
/// worker stops.
async fn run(worker: Rc<Worker>, resume: Resume, epoll: AsyncFd<OwnedFd>) {
    let mut stopped = pin!(worker.stopped());
    let mut events: Vec<libc::epoll_event> = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
    loop {
        let next = LOT.with(|lot| {
            let mut lot = lot.borrow_mut();
            let next = lot.deadlines.peek().map(|Reverse((d, _, _))| *d);
            let next = match (next, lot.trim_at) {
                (Some(d), Some(t)) => Some(d.min(t)),
                (d, t) => d.or(t),
            };
            lot.armed = next;
            next
        });
        // No deadline: a timer far off (a park with a deadline rearms).
        let at = next.unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400));
        tokio::select! {
            biased;
            _ = &mut stopped => break,
            r = epoll.readable() => {
                let Ok(mut guard) = r else { break };
                // Until the set is empty: `try_io` then clears the
                // readiness.
                while let Ok(Ok(n)) =
                    guard.try_io(|e| wait_events(e.get_ref().as_raw_fd(), &mut events))
                {
                    for ev in &events[..n] {
                        let data = ev.u64;
                        let (key, gen) = ((data & 0xffff_ffff) as usize, (data >> 32) as u32);
                        let slot = LOT.with(|lot| {
                            let mut lot = lot.borrow_mut();
                            match lot.slots.get(key) {
                                Some(s) if s.gen == gen => Some(lot.take(key)),
                                _ => None,
                            }
                        });
                        let Some(s) = slot else { continue };
                        wake(s, resume, &worker);
                    }
                }
            }
            _ = rearmed() => {}
            _ = tokio::time::sleep_until(at) => {
                expire(&worker, resume);
                trim_if_due();
            }
        }
    }
    // Stopping: every parked HTTP/1 connection closes now (idle ones need
    // no answer), as the worker's idle tasks do; an HTTP/2 one goes back
    // to a task, which sees the stop and says GOAWAY.
    RESUME.with(|r| r.set(None));
    let all: Vec<Leaving> = LOT.with(|lot| {
        let mut lot = lot.borrow_mut();
        lot.deadlines.clear();
        lot.armed = None;
        let keys: Vec<usize> = lot.slots.iter().map(|(k, _)| k).collect();
        keys.into_iter().map(|k| lot.take(k)).collect()
    });
    for s in all {
        if matches!(s.conn, Loose::H2(_)) {
            wake(s, resume, &worker);
        } else {
            drop(s);
            closed(&worker, Proto::Http1);
        }
    }
}

/// Takes the events ready in the lot's epoll set without waiting;
/// `WouldBlock` when there are none (so `try_io` clears the readiness).
fn wait_events(ep: RawFd, events: &mut [libc::epoll_event]) -> std::io::Result<usize> {
    let max = events.len().min(i32::MAX as usize) as i32;
    // SAFETY: `events` is valid for `max` entries, written by the kernel.
    let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), max, 0) };
    match n {
        n if n < 0 => Err(std::io::Error::last_os_error()),
        0 => Err(std::io::ErrorKind::WouldBlock.into()),
        n => Ok(n as usize),
    }
}

/// Closes the parked connections whose keep-alive deadline has passed;
/// an HTTP/2 one goes back to a task, which says GOAWAY.
fn expire(worker: &Rc<Worker>, resume: Resume) {
    let now = Instant::now();
    loop {
        let gone = LOT.with(|lot| {
            let mut lot = lot.borrow_mut();
            match lot.deadlines.peek() {
                Some(Reverse((d, _, _))) if *d <= now => {}
                _ => return None,
            }
            let Reverse((_, key, gen)) = lot.deadlines.pop()?;
            match lot.slots.get(key as usize) {
                Some(s) if s.gen == gen => Some(Some(lot.take(key as usize))),
                _ => Some(None),
            }
        });
        match gone {
            None => break,
            Some(Some(s)) if matches!(s.conn, Loose::H2(_)) => wake(s, resume, worker),
            Some(Some(s)) => {
                drop(s);
                closed(worker, Proto::Http1);
            }
            Some(None) => {}
        }
    }
}

/// Gives the allocator's free pages back once [`TRIM_DELAY`] has passed
/// since a burst of parks.
fn trim_if_due() {
    let due = LOT.with(|lot| {
        let mut lot = lot.borrow_mut();
        match lot.trim_at {
            Some(t) if t <= Instant::now() => {
                lot.trim_at = None;
                lot.parked_since_trim = 0;
                true
            }
            _ => false,
        }
    });
    if due {
        trim();
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim takes no pointer and only releases free memory
    // (madvise on whole free pages, and the top of each arena); it locks
    // each arena as malloc does.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

/// Resolves when a park asked the lot to set its timer again.
fn rearmed() -> impl Future<Output = ()> {
    std::future::poll_fn(|cx| {
        if REARM.with(|r| r.replace(false)) {
            return Poll::Ready(());
        }
        LOT_WAKER.with(|w| w.set(Some(cx.waker().clone())));
        Poll::Pending
    })
}
