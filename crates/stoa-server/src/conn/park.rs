//! Parked connections: HTTP/1 keep-alive connections that stayed idle for
//! [`PARK_AFTER`] leave their task and wait here as a few dozen bytes
//! each, as nginx keeps an idle keep-alive connection in a small structure
//! and gives its buffers and request memory back.
//!
//! A connection's task (its future, ~1.3 KiB, in a cell tokio allocates
//! 128-byte aligned) is most of what an idle connection costs: 2,615 bytes
//! of RSS per idle keep-alive connection before this, nginx 596
//! (docs/BENCHMARKS.md, "Idle keep-alive connections"). Parked, a
//! connection keeps its socket and its tokio registration (the socket
//! stays in tokio's epoll set: parking and resuming make no system call)
//! and a [`Slot`]; the task ends. The socket's read readiness wakes a
//! waker that is only the slot's number ([`slot_waker`]); the worker's one
//! lot task then starts a new connection task for it (`worker.rs`, the one
//! place connection tasks start), which reads the next request at once.
//! The lot task also closes a parked connection at its keep-alive deadline
//! and all of them when the worker stops.
//!
//! Only connections that waited [`PARK_AFTER`] park: a client sending its
//! next request sooner (load generators, pages loading their assets) never
//! pays for a resume (a task spawned, ~1 µs).

use crate::config::Runtime;
use crate::local::{Proto, Worker};
use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// How long a kept-alive connection waits for its next request in its own
/// task before it parks.
pub(crate) const PARK_AFTER: Duration = Duration::from_millis(250);

/// Starts the task of a connection coming back from the lot (its
/// connection count is still taken): `worker.rs`.
pub(crate) type Resume = fn(TcpStream, SocketAddr, Arc<Runtime>, &Rc<Worker>);

/// A parked connection.
struct Slot {
    stream: TcpStream,
    peer: SocketAddr,
    /// The runtime it last served with (it moves to the newest at its next
    /// request, as every kept-alive connection does).
    rt: Arc<Runtime>,
    /// Its keep-alive deadline.
    deadline: Instant,
    /// Told apart from an earlier connection in the same slot.
    gen: u32,
}

#[derive(Default)]
struct Lot {
    slots: slab::Slab<Slot>,
    /// (deadline, slot, generation), earliest first. A slot resumed leaves
    /// its entry behind (skipped by generation); the heap is rebuilt from
    /// the slots when such entries outnumber them.
    deadlines: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    next_gen: u32,
    /// When the lot task's timer fires (None: no timer).
    armed: Option<Instant>,
}

thread_local! {
    // Per worker thread, as the worker's tasks are.
    static LOT: RefCell<Lot> = RefCell::new(Lot::default());
    /// How parked connections come back (None: no lot on this thread, so
    /// connections do not park).
    static RESUME: Cell<Option<Resume>> = const { Cell::new(None) };
    /// Slots whose sockets turned readable (slot | generation << 32),
    /// filled by the slot wakers, emptied by the lot task.
    static READY: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    /// The lot task's waker, and whether it has something to do besides
    /// `READY` (a parked deadline earlier than its timer).
    static LOT_WAKER: Cell<Option<Waker>> = const { Cell::new(None) };
    static REARM: Cell<bool> = const { Cell::new(false) };
}

/// Starts this worker's lot: connections served on this thread may park
/// from now on, and come back through `resume`.
pub(crate) fn start(worker: Rc<Worker>, resume: Resume) {
    RESUME.with(|r| r.set(Some(resume)));
    tokio::task::spawn_local(run(worker, resume));
}

/// Whether connections on this thread can park (a lot runs here).
#[inline]
pub(crate) fn enabled() -> bool {
    RESUME.with(|r| r.get().is_some())
}

/// Parks an idle keep-alive connection until its next request or
/// `deadline`. Its connection count moves to the lot. If the socket is
/// readable already, the connection resumes at once.
pub(crate) fn park(
    stream: TcpStream,
    peer: SocketAddr,
    rt: Arc<Runtime>,
    deadline: Instant,
    worker: &Rc<Worker>,
) {
    let resume = RESUME.with(|r| r.get());
    let Some(resume) = resume.filter(|_| !worker.is_stopping()) else {
        // No lot here, or it closed what it held as the worker stops:
        // this one closes now.
        drop(stream);
        closed(worker);
        return;
    };
    let rest = LOT.with(|lot| {
        let mut lot = lot.borrow_mut();
        let gen = lot.next_gen;
        lot.next_gen = gen.wrapping_add(1);
        let key = lot.slots.vacant_key();
        let waker = slot_waker(key as u32, gen);
        let mut cx = Context::from_waker(&waker);
        // Outside tokio's cooperative budget: a budget spent would answer
        // Pending and wake the slot at once (a needless resume).
        let ready = pin!(tokio::task::unconstrained(std::future::poll_fn(|cx| {
            stream.poll_read_ready(cx)
        })))
        .poll(&mut cx);
        if ready.is_ready() {
            // Bytes (or the client's close) came meanwhile.
            return Some((stream, rt));
        }
        lot.slots.insert(Slot {
            stream,
            peer,
            rt,
            deadline,
            gen,
        });
        lot.deadlines.push(Reverse((deadline, key as u32, gen)));
        if lot.deadlines.len() > 2 * lot.slots.len() + 64 {
            let fresh = lot
                .slots
                .iter()
                .map(|(k, s)| Reverse((s.deadline, k as u32, s.gen)))
                .collect();
            lot.deadlines = fresh;
        }
        if lot.armed.is_none_or(|a| deadline < a) {
            REARM.with(|r| r.set(true));
            wake_lot();
        }
        None
    });
    if let Some((stream, rt)) = rest {
        resume(stream, peer, rt, worker);
    }
}

/// A parked connection closes: its count and the status page's.
fn closed(worker: &Worker) {
    worker.connection_closed();
    if let Some(s) = worker.stats() {
        s.closed(Proto::Http1);
    }
}

fn wake_lot() {
    if let Some(w) = LOT_WAKER.with(|w| w.take()) {
        w.wake();
    }
}

/// The lot task: resumes parked connections whose socket turned readable,
/// closes those past their keep-alive deadline, and all of them when the
/// worker stops.
async fn run(worker: Rc<Worker>, resume: Resume) {
    let mut stopped = pin!(worker.stopped());
    loop {
        let next = LOT.with(|lot| {
            let mut lot = lot.borrow_mut();
            let next = lot.deadlines.peek().map(|Reverse((d, _, _))| *d);
            lot.armed = next;
            next
        });
        // No deadline: a timer far off (a park with a deadline rearms).
        let at = next.unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400));
        let woke = tokio::select! {
            biased;
            _ = &mut stopped => None,
            _ = wait_ready() => Some(false),
            _ = tokio::time::sleep_until(at) => Some(true),
        };
        match woke {
            None => break,
            Some(false) => {
                let ready = READY.with(|r| std::mem::take(&mut *r.borrow_mut()));
                for data in ready {
                    let (key, gen) = ((data & 0xffff_ffff) as usize, (data >> 32) as u32);
                    let slot = LOT.with(|lot| {
                        let mut lot = lot.borrow_mut();
                        match lot.slots.get(key) {
                            Some(s) if s.gen == gen => Some(lot.slots.remove(key)),
                            _ => None,
                        }
                    });
                    if let Some(s) = slot {
                        resume(s.stream, s.peer, s.rt, &worker);
                    }
                }
            }
            Some(true) => expire(&worker),
        }
    }
    // Stopping: every parked connection closes now (idle ones need no
    // answer), as the worker's idle tasks do.
    let all: Vec<Slot> = LOT.with(|lot| {
        let mut lot = lot.borrow_mut();
        lot.deadlines.clear();
        lot.armed = None;
        lot.slots.drain().collect()
    });
    for s in all {
        drop(s);
        closed(&worker);
    }
}

/// Closes the parked connections whose keep-alive deadline has passed.
fn expire(worker: &Worker) {
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
                Some(s) if s.gen == gen => Some(Some(lot.slots.remove(key as usize))),
                _ => Some(None),
            }
        });
        match gone {
            None => break,
            Some(Some(s)) => {
                drop(s);
                closed(worker);
            }
            Some(None) => {}
        }
    }
}

/// Resolves when a slot's socket turned readable or a park asked the lot
/// to set its timer again.
fn wait_ready() -> impl Future<Output = ()> {
    std::future::poll_fn(|cx| {
        if READY.with(|r| !r.borrow().is_empty()) || REARM.with(|r| r.replace(false)) {
            return Poll::Ready(());
        }
        LOT_WAKER.with(|w| w.set(Some(cx.waker().clone())));
        Poll::Pending
    })
}

// A slot's waker is its number and generation, nothing allocated: waking it
// queues them in `READY` and wakes the lot task. Tokio's I/O driver wakes
// it on the worker's own thread (a current-thread runtime drives its I/O
// on the thread that runs it), where `READY` is the lot's.
const _: () = assert!(usize::BITS == 64, "a slot waker packs 64 bits");

static SLOT_WAKER: RawWakerVTable = RawWakerVTable::new(
    |data| RawWaker::new(data, &SLOT_WAKER),
    slot_wake,
    slot_wake,
    |_| {},
);

fn slot_wake(data: *const ()) {
    let data = data as usize as u64;
    // `try_`: a wake from a thread's teardown finds nothing to do.
    let _ = READY.try_with(|r| r.borrow_mut().push(data));
    let _ = LOT_WAKER.try_with(|w| {
        if let Some(w) = w.take() {
            w.wake();
        }
    });
}

fn slot_waker(key: u32, gen: u32) -> Waker {
    let data = (u64::from(gen) << 32 | u64::from(key)) as usize as *const ();
    // SAFETY: the vtable's functions never dereference `data` (it is a
    // number), are safe to call from any thread and in any order, and hold
    // no resource, so cloning and dropping need no bookkeeping.
    unsafe { Waker::from_raw(RawWaker::new(data, &SLOT_WAKER)) }
}
