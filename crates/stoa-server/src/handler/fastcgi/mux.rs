//! Multiplexed FastCGI connections (FCGI_MPXS_CONNS=1, §3.3): for an
//! application that says it multiplexes, each worker keeps one connection
//! per process and puts every request of its own on it, each with its own
//! request id.
//!
//! A driver task owns the socket: it writes what requests queue (records
//! from the shared `gateway::Connection`) and reads the application,
//! sorting records into per-request queues. FastCGI has no per-request flow
//! control, so a request whose client reads slowly fills its queue; past
//! [`STREAM_CAP`] the driver stops reading the connection until that queue
//! drains (the slow client's send timeout bounds how long). Memory stays
//! bounded either way.
//!
//! A request's queue belongs to the request, not to its id: the gateway
//! frees an id as soon as its END_REQUEST is read, and the next request on
//! the connection may get that id while the first has its last records
//! still queued (found by the lab: a lookup by id gave the new request's
//! queue to the old one, and the new request waited forever).

use crate::upstream::pool::{Proc, ProcState};
use crate::upstream::AppStream;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use stoa_fastcgi::gateway::{Connection, Event};
use stoa_fastcgi::{Error, Role};
use tokio::io::AsyncWrite;
use tokio::sync::Notify;

/// Output queued for one request before the driver stops reading.
const STREAM_CAP: usize = 256 * 1024;
/// Records queued to the application before a request body waits.
const WRITE_CAP: usize = 256 * 1024;

thread_local! {
    /// This worker's multiplexed connections, by process (the address of
    /// its `Proc`, which lives as long as the pool).
    static MUXES: RefCell<HashMap<usize, Slot>> = RefCell::new(HashMap::new());
}

#[derive(Clone)]
enum Slot {
    /// A request is opening the connection; the others wait for it rather
    /// than each opening one of their own.
    Connecting(Rc<Notify>),
    Open(Rc<Shared>),
}

struct Shared {
    st: RefCell<State>,
    /// Wakes the driver: records to write, or a queue drained.
    driver: Notify,
    /// Wakes requests whose body waits: the write backlog was taken.
    drained: Notify,
    key: usize,
    proc: Arc<Proc>,
}

struct State {
    gw: Connection,
    wbuf: Vec<u8>,
    /// Requests whose END_REQUEST has not come yet, by id.
    streams: HashMap<u16, Rc<Stream>>,
    /// Connection lost: every active request fails, no new one starts.
    dead: bool,
    /// Reading stopped: some request's queue is full.
    paused: bool,
}

struct Stream {
    q: RefCell<Queue>,
    notify: Notify,
}

#[derive(Default)]
struct Queue {
    events: VecDeque<Event>,
    bytes: usize,
    /// The request went away; its remaining records are dropped.
    orphan: bool,
    /// Its END_REQUEST came: the id is no longer this request's.
    ended: bool,
}

impl Stream {
    fn over_cap(&self) -> bool {
        self.q.borrow().bytes > STREAM_CAP
    }
}

/// One request on a multiplexed connection.
pub struct MuxRequest {
    sh: Rc<Shared>,
    pub id: u16,
    stream: Rc<Stream>,
    /// This request took its END_REQUEST (or saw the connection lost).
    ended: bool,
}

/// Starts a request on this worker's multiplexed connection to `proc`,
/// opening one if there is none (or it is lost or full).
pub async fn start(
    proc: &Arc<Proc>,
    role: Role,
    params: &stoa_cgi::Env,
    connect_limit: std::time::Duration,
) -> Result<MuxRequest, StartError> {
    let key = Arc::as_ptr(proc) as usize;
    let sh = loop {
        let slot = MUXES.with(|m| m.borrow().get(&key).cloned());
        match slot {
            Some(Slot::Open(sh)) if sh.usable() => break sh,
            Some(Slot::Connecting(ready)) => {
                // Registered before the check below, so the wake-up of a
                // connect finishing meanwhile is not lost.
                let notified = ready.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if matches!(
                    MUXES.with(|m| m.borrow().get(&key).cloned()),
                    Some(Slot::Connecting(_))
                ) {
                    notified.await;
                }
            }
            // None, lost or full: this request opens the next one.
            _ => {
                let ready = Rc::new(Notify::new());
                MUXES.with(|m| m.borrow_mut().insert(key, Slot::Connecting(ready.clone())));
                // Clears the placeholder however this ends (a failed
                // connect, or this request dropped while connecting) and
                // wakes the waiters, one of which then tries in its turn.
                let _done = Connected { key, ready };
                let app = match proc.take_idle().map(AppStream::from_idle) {
                    Some(Ok(s)) => s,
                    _ => AppStream::connect(&proc.target, connect_limit)
                        .await
                        .map_err(StartError::Connect)?,
                };
                break open(key, app, proc);
            }
        }
    };
    let stream = Rc::new(Stream {
        q: RefCell::new(Queue::default()),
        notify: Notify::new(),
    });
    let id = {
        let mut st = sh.st.borrow_mut();
        let st = &mut *st;
        let id = st
            .gw
            .start_request(role, true, params.iter(), &mut st.wbuf)
            .map_err(StartError::Protocol)?;
        st.streams.insert(id, stream.clone());
        id
    };
    sh.driver.notify_one();
    Ok(MuxRequest {
        sh,
        id,
        stream,
        ended: false,
    })
}

struct Connected {
    key: usize,
    ready: Rc<Notify>,
}

impl Drop for Connected {
    fn drop(&mut self) {
        MUXES.with(|m| {
            let mut m = m.borrow_mut();
            if matches!(m.get(&self.key), Some(Slot::Connecting(r)) if Rc::ptr_eq(r, &self.ready)) {
                m.remove(&self.key);
            }
        });
        self.ready.notify_waiters();
    }
}

#[derive(Debug)]
pub enum StartError {
    /// The process could not be reached (try another).
    Connect(std::io::Error),
    Protocol(Error),
}

impl Shared {
    fn usable(&self) -> bool {
        let st = self.st.borrow();
        !st.dead && st.gw.has_capacity()
    }
}

fn open(key: usize, app: AppStream, proc: &Arc<Proc>) -> Rc<Shared> {
    let mut gw = Connection::new();
    gw.set_max_concurrent(proc.capacity());
    let sh = Rc::new(Shared {
        st: RefCell::new(State {
            gw,
            wbuf: Vec::new(),
            streams: HashMap::new(),
            dead: false,
            paused: false,
        }),
        driver: Notify::new(),
        drained: Notify::new(),
        key,
        proc: proc.clone(),
    });
    MUXES.with(|m| m.borrow_mut().insert(key, Slot::Open(sh.clone())));
    tokio::task::spawn_local(drive(sh.clone(), app));
    sh
}

/// Owns the socket until the connection is lost or closes.
async fn drive(sh: Rc<Shared>, mut app: AppStream) {
    let mut rbuf: Vec<u8> = Vec::with_capacity(32 * 1024);
    let mut out: Vec<u8> = Vec::new();
    let mut pos = 0usize;
    loop {
        if pos == out.len() {
            out.clear();
            pos = 0;
            std::mem::swap(&mut out, &mut sh.st.borrow_mut().wbuf);
            if !out.is_empty() {
                sh.drained.notify_waiters();
            }
        }
        // Done once idle when no new request can come: the application
        // closes, stopped multiplexing (CANT_MPX_CONN), or another
        // connection took this one's place.
        let (reading, closing) = {
            let st = sh.st.borrow();
            let replaced = !MUXES.with(
                |m| matches!(m.borrow().get(&sh.key), Some(Slot::Open(o)) if Rc::ptr_eq(o, &sh)),
            );
            let last = st.gw.is_closing()
                || !sh.proc.multiplexes()
                || replaced
                || sh.proc.state() != ProcState::Running;
            (!st.paused, last && st.gw.active() == 0)
        };
        if closing && pos == out.len() {
            break;
        }
        let driver = sh.driver.notified();
        tokio::pin!(driver);
        // Read, write what is queued, or wait to be told there is more;
        // one stream polled both ways (splitting it would allocate).
        let lost = std::future::poll_fn(|cx| {
            if reading {
                rbuf.clear();
                if let Poll::Ready(r) = app.poll_read_into(cx, &mut rbuf) {
                    return Poll::Ready(match r {
                        Ok(0) | Err(_) => true,
                        Ok(_) => sh.received(&rbuf),
                    });
                }
            }
            if pos < out.len() {
                if let Poll::Ready(r) = Pin::new(&mut app).poll_write(cx, &out[pos..]) {
                    return Poll::Ready(match r {
                        Ok(n) if n > 0 => {
                            pos += n;
                            false
                        }
                        _ => true,
                    });
                }
            }
            driver.as_mut().poll(cx).map(|()| false)
        })
        .await;
        if lost {
            break;
        }
    }
    sh.lost();
}

impl Shared {
    /// Bytes from the application: records sorted into request queues.
    /// Returns true when the connection is unusable.
    fn received(&self, data: &[u8]) -> bool {
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        let failed = match st.gw.feed(data) {
            Ok(()) => false,
            Err(e) => {
                tracing::error!("fastcgi: protocol error on a multiplexed connection: {e}");
                true
            }
        };
        while let Some(ev) = st.gw.poll_event() {
            let id = match &ev {
                Event::Stdout { id, .. } | Event::Stderr { id, .. } | Event::End { id, .. } => *id,
                _ => continue,
            };
            let Some(s) = st.streams.get(&id).cloned() else {
                continue;
            };
            let end = matches!(ev, Event::End { .. });
            let mut q = s.q.borrow_mut();
            if !q.orphan {
                if let Event::Stdout { data, .. } | Event::Stderr { data, .. } = &ev {
                    q.bytes += data.len();
                    if q.bytes > STREAM_CAP {
                        st.paused = true;
                    }
                }
                q.ended = end;
                q.events.push_back(ev);
                drop(q);
                s.notify.notify_one();
            }
            if end {
                // The id is free again; the request keeps its queue.
                st.streams.remove(&id);
            }
        }
        failed
    }

    /// The connection is gone: wake every request (they see the loss).
    fn lost(&self) {
        let mut st = self.st.borrow_mut();
        st.dead = true;
        for s in st.streams.values() {
            s.notify.notify_one();
        }
        st.streams.clear();
        drop(st);
        MUXES.with(|m| {
            let mut m = m.borrow_mut();
            if matches!(m.get(&self.key), Some(Slot::Open(sh)) if std::ptr::eq(&**sh, self)) {
                m.remove(&self.key);
            }
        });
    }
}

/// What a request sees next.
pub enum MuxEvent {
    Event(Event),
    /// The connection was lost before the request ended.
    Lost,
}

impl MuxRequest {
    /// Queues request body bytes (FCGI_STDIN).
    pub fn stdin(&self, data: &[u8]) {
        let mut st = self.sh.st.borrow_mut();
        let st = &mut *st;
        if st.gw.stdin(self.id, data, &mut st.wbuf).is_ok() {
            self.sh.driver.notify_one();
        }
    }

    /// Ends the request body.
    pub fn end_stdin(&self) {
        let mut st = self.sh.st.borrow_mut();
        let st = &mut *st;
        if st.gw.end_stdin(self.id, &mut st.wbuf).is_ok() {
            self.sh.driver.notify_one();
        }
    }

    /// True while records wait to be written beyond the high-water mark:
    /// the request body should wait.
    pub fn backlogged(&self) -> bool {
        self.sh.st.borrow().wbuf.len() > WRITE_CAP
    }

    /// The next event for this request, or `None` when none is queued.
    pub fn poll(&mut self) -> Option<MuxEvent> {
        if self.ended {
            return None;
        }
        let mut st = self.sh.st.borrow_mut();
        let mut q = self.stream.q.borrow_mut();
        match q.events.pop_front() {
            Some(ev) => {
                if let Event::Stdout { data, .. } | Event::Stderr { data, .. } = &ev {
                    q.bytes -= data.len();
                    if st.paused && q.bytes <= STREAM_CAP / 2 {
                        drop(q);
                        st.paused = st.streams.values().any(|s| s.over_cap());
                        if !st.paused {
                            self.sh.driver.notify_one();
                        }
                    }
                }
                if matches!(ev, Event::End { .. }) {
                    self.ended = true;
                }
                Some(MuxEvent::Event(ev))
            }
            None if st.dead => {
                self.ended = true;
                Some(MuxEvent::Lost)
            }
            None => None,
        }
    }

    /// Waits until [`MuxRequest::poll`] has something, or, when the
    /// request body waits on a full write backlog (`blocked`: the caller
    /// found [`MuxRequest::backlogged`]), until it drains: at once if it
    /// has drained already. The caller's look and this wait are not one
    /// step (tokio's `select!` may yield before polling this, when the
    /// task's budget is spent), and the driver may take the backlog in
    /// between: waiting then for a response that needs the rest of the
    /// body would never end (found by a test under load: one upload of
    /// three stalled with its body half sent).
    pub async fn ready(&self, blocked: bool) {
        let drained = self.sh.drained.notified();
        tokio::pin!(drained);
        // Registered before the checks, so a drain meanwhile is not missed.
        drained.as_mut().enable();
        if self.ended || self.sh.st.borrow().dead || !self.stream.q.borrow().events.is_empty() {
            return;
        }
        if blocked {
            if !self.backlogged() {
                return;
            }
            tokio::select! {
                _ = self.stream.notify.notified() => {}
                _ = drained => {}
            }
        } else {
            self.stream.notify.notified().await;
        }
    }
}

impl Drop for MuxRequest {
    /// A request dropped before its end is aborted (§5.4); records still
    /// coming for it are discarded until its END_REQUEST frees the id.
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let mut st = self.sh.st.borrow_mut();
        let st = &mut *st;
        let ended = {
            let mut q = self.stream.q.borrow_mut();
            q.orphan = true;
            q.events.clear();
            q.bytes = 0;
            q.ended
        };
        if st.dead {
            return;
        }
        // Once its END_REQUEST came the id may be another request's: only
        // a request still running is aborted.
        if !ended && st.gw.abort(self.id, &mut st.wbuf).is_ok() {
            self.sh.driver.notify_one();
        }
        if st.paused {
            st.paused = st.streams.values().any(|s| s.over_cap());
            self.sh.driver.notify_one();
        }
    }
}
