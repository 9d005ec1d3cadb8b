//! State private to one worker thread: the per-second clock (Date header,
//! log time), the access-log buffer, the buffers idle connections lend
//! back, and counters. Everything below the connection loops may use it;
//! it imports nothing of the server's.
//!
//! Per-worker state that is NOT here, and why: each is a `thread_local!`
//! of a type its own layer defines, which this leaf cannot name, and
//! is reached without a `Worker` in hand (no argument threaded through
//! every call for it):
//! - `handler::static_files::CACHE`: the small-file cache (a handler's);
//! - `handler::lua::VMS`: the Lua interpreters, by script (a handler's);
//! - `gateway::bufs::SPARE`: spare read/write buffers of the gateways;
//! - `proto::output::TLS_BUF`: the buffer file ranges are read into for
//!   TLS;
//! - `conn::LATEST`: this worker's view of the reload channel;
//! - `conn::proxy_protocol::WARNED`: which PROXY refusals were logged.

use std::cell::{Cell, RefCell};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

pub use crate::log::access::AccessLog;
use crate::log::access::{Combined, Dest, Entry, Times};

/// Worker threads serving requests (set once at start).
static WORKERS: AtomicUsize = AtomicUsize::new(1);

pub fn set_worker_count(n: usize) {
    WORKERS.store(n, Ordering::Relaxed);
}

pub fn worker_count() -> usize {
    WORKERS.load(Ordering::Relaxed)
}

thread_local! {
    /// The worker thread this is (0 elsewhere), for the pools' wait queues.
    static WORKER: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Called once by each worker thread at start.
pub fn set_worker_index(i: usize) {
    WORKER.with(|w| w.set(i));
}

pub fn worker_index() -> usize {
    WORKER.with(|w| w.get())
}

/// The access log is written when this much is buffered, or every second.
const LOG_FLUSH_BYTES: usize = 64 * 1024;

/// Size of the read and write buffers connections borrow from the pool.
const BUF_SIZE: usize = 4096;

/// Per-second text: the Date/Server header lines and the log timestamp.
struct Clock {
    secs: u64,
    date_block: Vec<u8>,
    clf: String,
    iso: String,
}

impl Clock {
    fn new() -> Clock {
        let mut c = Clock {
            secs: u64::MAX,
            date_block: Vec::new(),
            clf: String::new(),
            iso: String::new(),
        };
        c.refresh();
        c
    }

    fn refresh(&mut self) {
        let now = SystemTime::now();
        let secs = now
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs();
        if secs == self.secs {
            return;
        }
        self.secs = secs;
        self.date_block.clear();
        self.date_block.extend_from_slice(b"Date: ");
        self.date_block.extend_from_slice(
            httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs)).as_bytes(),
        );
        self.date_block.extend_from_slice(b"\r\nServer: stoa\r\n");
        self.clf = clf_time(secs);
        self.iso = crate::log::iso_time(Duration::from_secs(secs), false);
    }
}

/// `22/Nov/2026:10:03:07 +0000` (Common Log Format time, in UTC).
pub fn clf_time(secs: u64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let rem = secs % 86400;
    let (y, m, d) = crate::log::civil(secs / 86400);
    format!(
        "{:02}/{}/{}:{:02}:{:02}:{:02} +0000",
        d,
        MONTHS[(m - 1) as usize],
        y,
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// State private to one worker thread.
pub struct Worker {
    clock: RefCell<Clock>,
    /// Access-log buffers, one per destination: the server's `[log]
    /// access` first, then those routes named.
    sinks: RefCell<Vec<Sink>>,
    /// The server's access log format needs the request's duration.
    timed: Cell<bool>,
    /// The server's access log is on (its sink's destination is not
    /// `off`): checked before the sinks are borrowed.
    logs: Cell<bool>,
    pub shutdown: watch::Receiver<bool>,
    /// Set by [`Worker::stop_idle`]: idle connections close.
    stopping: Cell<bool>,
    /// The tasks of keep-alive connections waiting for their next request
    /// (see [`Stopped`]), woken when the worker stops.
    idle: RefCell<slab::Slab<Waker>>,
    /// Connections open on this worker.
    pub active: Cell<usize>,
    /// Buffers of idle connections, for reuse by busy ones.
    bufs: RefCell<Vec<Vec<u8>>>,
    pub shared: Arc<Shared>,
    index: usize,
    /// `Alt-Svc` values by the TCP port of a TLS listener that also
    /// speaks HTTP/3 (RFC 9114 §3.1.1): empty without one, the usual
    /// case, which costs a response one test.
    alt_svc: RefCell<Vec<(u16, std::rc::Rc<[u8]>)>>,
}

impl Worker {
    pub fn new(
        access_log: &AccessLog,
        shutdown: watch::Receiver<bool>,
        shared: Arc<Shared>,
    ) -> Worker {
        Worker {
            shared,
            index: worker_index(),
            clock: RefCell::new(Clock::new()),
            sinks: RefCell::new(vec![Sink::new(access_log.clone())]),
            timed: Cell::new(access_log.format.timed()),
            logs: Cell::new(!access_log.is_off()),
            shutdown,
            stopping: Cell::new(false),
            idle: RefCell::new(slab::Slab::new()),
            active: Cell::new(0),
            alt_svc: RefCell::new(Vec::new()),
            bufs: RefCell::new(Vec::new()),
        }
    }

    /// Resolves once the worker stops ([`Worker::stop_idle`]): what an idle
    /// keep-alive connection waits on besides its socket and its timer.
    pub fn stopped(&self) -> Stopped<'_> {
        Stopped {
            worker: self,
            key: None,
        }
    }

    /// Responses of the TLS listener on TCP port `tcp` advertise HTTP/3
    /// on UDP port `udp`, for a day (`ma=86400`, as Caddy and nginx
    /// examples do).
    pub(crate) fn advertise_h3(&self, tcp: u16, udp: u16) {
        let value: std::rc::Rc<[u8]> = format!("h3=\":{udp}\"; ma=86400").into_bytes().into();
        let mut a = self.alt_svc.borrow_mut();
        a.retain(|(p, _)| *p != tcp);
        a.push((tcp, value));
    }

    /// Whether any listener of this worker advertises HTTP/3.
    #[inline]
    pub(crate) fn advertises_h3(&self) -> bool {
        !self.alt_svc.borrow().is_empty()
    }

    /// The `Alt-Svc` value for responses on TCP port `tcp`.
    pub(crate) fn alt_svc(&self, tcp: u16) -> Option<std::rc::Rc<[u8]>> {
        self.alt_svc
            .borrow()
            .iter()
            .find(|(p, _)| *p == tcp)
            .map(|(_, v)| v.clone())
    }

    /// Whether the worker is stopping (set by [`Worker::stop_idle`]).
    pub fn is_stopping(&self) -> bool {
        self.stopping.get()
    }

    /// The worker stops: every connection waiting in [`Worker::stopped`]
    /// (and every later one) is told so.
    pub fn stop_idle(&self) {
        self.stopping.set(true);
        let wakers: Vec<Waker> = self.idle.borrow_mut().drain().collect();
        for w in wakers {
            w.wake();
        }
    }

    /// A client connection of this worker closed: it no longer counts
    /// against `max_connections` nor for the drain at stop.
    pub(crate) fn connection_closed(&self) {
        self.shared.connections.fetch_sub(1, Ordering::Relaxed);
        self.active.set(self.active.get() - 1);
    }

    /// This worker's counters.
    pub fn stats(&self) -> Option<&WorkerStats> {
        self.shared.stats.get(self.index)
    }

    /// Appends the Date and Server header lines for the current second.
    pub fn push_date(&self, buf: &mut Vec<u8>) {
        let mut c = self.clock.borrow_mut();
        c.refresh();
        buf.extend_from_slice(&c.date_block);
    }

    /// A buffer for a connection that has bytes to read or write.
    #[inline]
    pub fn take_buf(&self) -> Vec<u8> {
        self.bufs
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(BUF_SIZE))
    }

    /// Returns a connection's buffer to the pool; large or surplus ones are
    /// freed so the pool stays small.
    #[inline]
    pub fn give_buf(&self, mut buf: Vec<u8>) {
        let mut pool = self.bufs.borrow_mut();
        if buf.capacity() >= BUF_SIZE && buf.capacity() <= 64 * 1024 && pool.len() < 1024 {
            buf.clear();
            pool.push(buf);
        }
    }

    /// Whether the access log a request goes to (`route`: its route's
    /// own, else the server's) needs the request's duration.
    #[inline]
    pub fn log_timed(&self, route: Option<&AccessLog>) -> bool {
        match route {
            None => self.timed.get(),
            Some(l) => !l.is_off() && l.format.timed(),
        }
    }

    /// Counts a response by status class, for the status page.
    #[inline]
    pub fn count_response(&self, status: u16) {
        if let (Some(w), 100..=599) = (self.shared.stats.get(self.index), status) {
            w.responses[usize::from(status / 100 - 1)].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a response and appends its access-log line, to the route's
    /// own log (`route`) or the server's. The line's fields are asked for
    /// only when that log is on (finding them was a few hundred
    /// instructions a response with the log off), and only those its
    /// format prints: `combined` (the default, on every request's path)
    /// for the Combined format, `entry` for the others.
    #[inline]
    pub fn log_access<'r>(
        &self,
        route: Option<&AccessLog>,
        status: u16,
        combined: impl FnOnce() -> Combined<'r>,
        entry: impl FnOnce() -> Entry<'r>,
    ) {
        self.count_response(status);
        if self.logs_to(route) {
            self.write_access(route, combined, entry);
        }
    }

    /// Whether the access log a response goes to (`route`: its route's
    /// own, else the server's) is on: checked before a line's fields are
    /// gathered, so that with the log off a response costs only this.
    #[inline]
    pub fn logs_to(&self, route: Option<&AccessLog>) -> bool {
        match route {
            None => self.logs.get(),
            Some(l) => !l.is_off(),
        }
    }

    /// The line of [`Worker::log_access`], into its sink's buffer (out of
    /// line: its frame is not set up for the responses that are not
    /// logged).
    #[inline(never)]
    pub fn write_access<'r>(
        &self,
        route: Option<&AccessLog>,
        combined: impl FnOnce() -> Combined<'r>,
        entry: impl FnOnce() -> Entry<'r>,
    ) {
        let full = {
            let mut sinks = self.sinks.borrow_mut();
            let i = match route {
                None => 0,
                Some(l) if l.is_off() => return,
                Some(l) => match sinks.iter().position(|s| s.log.dest == l.dest) {
                    Some(i) => i,
                    None => {
                        sinks.push(Sink::new(l.clone()));
                        sinks.len() - 1
                    }
                },
            };
            let sink = &mut sinks[i];
            if sink.log.dest == Dest::Off {
                return;
            }
            let format = match route {
                Some(l) => &l.format,
                None => &sink.log.format,
            };
            let clock = self.clock.borrow();
            if let crate::log::access::Format::Combined = format {
                crate::log::access::write_combined_line(&mut sink.buf, &combined(), &clock.clf);
            } else {
                let times = Times {
                    clf: &clock.clf,
                    iso: &clock.iso,
                    now: SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .unwrap_or(Duration::ZERO),
                };
                crate::log::access::write_line(&mut sink.buf, format, &entry(), &times);
            }
            sink.buf.len() >= LOG_FLUSH_BYTES
        };
        if full {
            self.flush_log();
        }
    }

    /// Writes every buffered access-log line out, each buffer whole to
    /// one file: after a reopen ([`crate::log::reopen`]) to the new one.
    pub fn flush_log(&self) {
        let generation = crate::log::generation();
        for sink in self.sinks.borrow_mut().iter_mut() {
            sink.flush(generation);
        }
        ACCESS_ERRORS.flush();
    }

    /// A reload named another access log (or format); routes' own logs
    /// are found again from the new configuration.
    pub fn set_access_log(&self, access_log: &AccessLog) {
        self.flush_log();
        let mut sinks = self.sinks.borrow_mut();
        sinks.truncate(1);
        if sinks[0].log.dest != access_log.dest {
            sinks[0] = Sink::new(access_log.clone());
        } else {
            sinks[0].log = access_log.clone();
        }
        self.timed.set(access_log.format.timed());
        self.logs.set(!access_log.is_off());
    }
}

/// One access-log destination of a worker: its lines waiting to be
/// written, and its file.
struct Sink {
    log: AccessLog,
    buf: Vec<u8>,
    file: Option<std::fs::File>,
    /// The generation ([`crate::log::generation`]) `file` was opened in.
    generation: u64,
}

impl Sink {
    fn new(log: AccessLog) -> Sink {
        Sink {
            log,
            buf: Vec::with_capacity(LOG_FLUSH_BYTES + 1024),
            file: None,
            generation: 0,
        }
    }

    fn flush(&mut self, generation: u64) {
        if self.buf.is_empty() {
            return;
        }
        match &self.log.dest {
            Dest::Off => {}
            Dest::Stdout => {
                let _ = std::io::stdout().lock().write_all(&self.buf);
            }
            Dest::File(path) => {
                if self.file.is_none() || self.generation != generation {
                    match crate::log::open_append(path) {
                        Ok(f) => {
                            self.file = Some(f);
                            self.generation = generation;
                        }
                        // The old file, if any, keeps the lines meanwhile.
                        Err(e) => {
                            ACCESS_ERRORS.warn(&format!("access log {}: {e}", path.display()))
                        }
                    }
                }
                if let Some(file) = self.file.as_mut() {
                    if let Err(e) = file.write_all(&self.buf) {
                        ACCESS_ERRORS.warn(&format!("access log {}: {e}", path.display()));
                    }
                }
            }
        }
        self.buf.clear();
    }
}

/// A full disk or a removed directory fails every flush: said once with
/// a count.
static ACCESS_ERRORS: crate::log::Repeats = crate::log::Repeats::new(crate::log::REPEAT_INTERVAL);

/// Shared between workers: the open connection count (for
/// max_connections) and what the status page reports.
pub struct Shared {
    pub connections: AtomicUsize,
    pub started: std::time::Instant,
    /// One per worker thread, each written only by its own worker.
    pub stats: Vec<WorkerStats>,
    /// A stop in progress waits for every response (SIGQUIT) rather than
    /// `shutdown_timeout` (SIGTERM, or a SIGTERM after the SIGQUIT).
    pub graceful: std::sync::atomic::AtomicBool,
}

impl Shared {
    pub fn new(workers: usize) -> Shared {
        Shared {
            connections: AtomicUsize::new(0),
            started: std::time::Instant::now(),
            stats: (0..workers.max(1))
                .map(|_| WorkerStats::default())
                .collect(),
            graceful: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Sums a per-worker array of counters over all workers.
    pub fn sum<const N: usize, A: Counter>(
        &self,
        field: impl Fn(&WorkerStats) -> &[A; N],
    ) -> [u64; N] {
        let mut t = [0u64; N];
        for w in &self.stats {
            for (i, c) in field(w).iter().enumerate() {
                t[i] += c.get();
            }
        }
        t
    }

    /// Responses sent, by status class (1xx to 5xx), over all workers.
    pub fn responses(&self) -> [u64; 5] {
        let mut t = [0u64; 5];
        for w in &self.stats {
            for (i, c) in w.responses.iter().enumerate() {
                t[i] += c.load(Ordering::Relaxed);
            }
        }
        t
    }
}

/// An atomic counter or gauge, read as a u64.
pub trait Counter {
    fn get(&self) -> u64;
}

impl Counter for std::sync::atomic::AtomicU64 {
    fn get(&self) -> u64 {
        self.load(Ordering::Relaxed)
    }
}

impl Counter for AtomicUsize {
    fn get(&self) -> u64 {
        self.load(Ordering::Relaxed) as u64
    }
}

/// A worker's counters, on a cache line of their own so that counting
/// never contends with another worker.
#[derive(Default)]
#[repr(align(64))]
pub struct WorkerStats {
    /// Responses by status class: 1xx, 2xx, 3xx, 4xx, 5xx.
    pub responses: [std::sync::atomic::AtomicU64; 5],
    /// Connections by protocol ([`Proto`] order), counted once the
    /// protocol is known (HTTP/1: at the first request; HTTP/2: after
    /// its handshake; HTTP/3: after QUIC's).
    pub connections: [std::sync::atomic::AtomicU64; 5],
    /// Of those, the ones open now.
    pub connections_open: [AtomicUsize; 5],
    /// Streams accepted: HTTP/2 over TLS (`h2`) and cleartext (`h2c`),
    /// HTTP/3 (`h3`).
    pub streams: [std::sync::atomic::AtomicU64; 3],
    pub streams_open: [AtomicUsize; 3],
    /// TLS handshakes (QUIC's included): full, resumed, failed.
    pub handshakes: [std::sync::atomic::AtomicU64; 3],
    /// QUIC connection attempts answered with a Retry (address
    /// validation, RFC 9000 §8.1.2), and refused (too many handshakes or
    /// connections).
    pub h3_attempts: [std::sync::atomic::AtomicU64; 2],
}

/// The protocol a client connection speaks, for the status page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// HTTP/1.x over cleartext.
    Http1 = 0,
    /// HTTP/1.x over TLS.
    Http1Tls = 1,
    /// HTTP/2 over TLS (ALPN `h2`).
    H2 = 2,
    /// HTTP/2 over cleartext with prior knowledge.
    H2c = 3,
    /// HTTP/3 over QUIC.
    H3 = 4,
}

impl Proto {
    pub const ALL: [Proto; 5] = [
        Proto::Http1,
        Proto::Http1Tls,
        Proto::H2,
        Proto::H2c,
        Proto::H3,
    ];

    /// The name the status page uses.
    pub fn name(self) -> &'static str {
        match self {
            Proto::Http1 => "http/1.1",
            Proto::Http1Tls => "http/1.1+tls",
            Proto::H2 => "h2",
            Proto::H2c => "h2c",
            Proto::H3 => "h3",
        }
    }
}

/// How a TLS handshake ended, for the status page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    Full = 0,
    Resumed = 1,
    Failed = 2,
}

impl WorkerStats {
    /// A connection's protocol is known: counted, and open until
    /// [`WorkerStats::closed`].
    pub fn opened(&self, p: Proto) {
        self.connections[p as usize].fetch_add(1, Ordering::Relaxed);
        self.connections_open[p as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn closed(&self, p: Proto) {
        self.connections_open[p as usize].fetch_sub(1, Ordering::Relaxed);
    }

    /// An HTTP/2 stream was accepted (`tls`: over h2, else h2c).
    pub fn stream_opened(&self, tls: bool) {
        let i = usize::from(!tls);
        self.streams[i].fetch_add(1, Ordering::Relaxed);
        self.streams_open[i].fetch_add(1, Ordering::Relaxed);
    }

    pub fn stream_closed(&self, tls: bool) {
        self.streams_open[usize::from(!tls)].fetch_sub(1, Ordering::Relaxed);
    }

    /// An HTTP/3 request stream was accepted.
    pub fn h3_stream_opened(&self) {
        self.streams[2].fetch_add(1, Ordering::Relaxed);
        self.streams_open[2].fetch_add(1, Ordering::Relaxed);
    }

    pub fn h3_stream_closed(&self) {
        self.streams_open[2].fetch_sub(1, Ordering::Relaxed);
    }

    pub fn handshake(&self, h: Handshake) {
        self.handshakes[h as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// The future of [`Worker::stopped`]. Per keep-alive wait it costs a slab
/// slot and a waker clone; `watch::Receiver::changed`, used before, took a
/// lock to enter the channel's waiter list and another to leave it, ~600
/// instructions of a small static response (callgrind, issue 16). The
/// worker's tasks all run on its one thread, so a `RefCell` list does.
pub struct Stopped<'w> {
    worker: &'w Worker,
    /// This wait's slot in `Worker::idle`, once polled.
    key: Option<usize>,
}

impl std::future::Future for Stopped<'_> {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.worker.stopping.get() {
            return std::task::Poll::Ready(());
        }
        let mut idle = self.worker.idle.borrow_mut();
        match self.key {
            Some(k) => match idle.get_mut(k) {
                Some(w) => {
                    if !w.will_wake(cx.waker()) {
                        w.clone_from(cx.waker());
                    }
                }
                None => {
                    // Not possible before stopping (slots leave only by
                    // `drop` or `stop_idle`); register again all the same.
                    let k = idle.insert(cx.waker().clone());
                    drop(idle);
                    self.key = Some(k);
                }
            },
            None => {
                let k = idle.insert(cx.waker().clone());
                drop(idle);
                self.key = Some(k);
            }
        }
        std::task::Poll::Pending
    }
}

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        if let Some(k) = self.key {
            if let Ok(mut idle) = self.worker.idle.try_borrow_mut() {
                // Gone already when `stop_idle` drained the list.
                idle.try_remove(k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clf_time_formats_utc() {
        assert_eq!(clf_time(0), "01/Jan/1970:00:00:00 +0000");
        assert_eq!(clf_time(1_795_000_000), "18/Nov/2026:11:06:40 +0000");
        assert_eq!(clf_time(951_782_400), "29/Feb/2000:00:00:00 +0000");
    }
}
