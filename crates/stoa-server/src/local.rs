//! State private to one worker thread: the per-second clock (Date header,
//! log time), the access-log buffer, the buffers idle connections lend
//! back, and counters. Everything below the connection loops may use it;
//! it imports nothing of the server's.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// Where the access log goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLog {
    Off,
    Stdout,
    File(PathBuf),
}

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
}

impl Clock {
    fn new() -> Clock {
        let mut c = Clock {
            secs: u64::MAX,
            date_block: Vec::new(),
            clf: String::new(),
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
    }
}

/// `22/Nov/2026:10:03:07 +0000` (Common Log Format time, in UTC).
pub fn clf_time(secs: u64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs / 86400;
    let rem = secs % 86400;
    // Civil-from-days (proleptic Gregorian), for days since 1970-01-01.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
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
    log: RefCell<Vec<u8>>,
    log_target: RefCell<AccessLog>,
    log_file: RefCell<Option<std::fs::File>>,
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
            log: RefCell::new(Vec::with_capacity(LOG_FLUSH_BYTES + 1024)),
            log_target: RefCell::new(access_log.clone()),
            log_file: RefCell::new(None),
            shutdown,
            stopping: Cell::new(false),
            idle: RefCell::new(slab::Slab::new()),
            active: Cell::new(0),
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

    /// Whether access lines are written; when not, [`Worker::count_response`]
    /// is all a response needs (no request line or fields to look up).
    #[inline]
    fn logs_access(&self) -> bool {
        *self.log_target.borrow() != AccessLog::Off
    }

    /// Counts a response by status class, for the status page.
    #[inline]
    fn count_response(&self, status: u16) {
        if let (Some(w), 100..=599) = (self.shared.stats.get(self.index), status) {
            w.responses[usize::from(status / 100 - 1)].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a response and appends its Combined Log Format line. The
    /// line's fields are asked for only when the log is on (finding them
    /// was a few hundred instructions a response with the log off).
    pub fn log_access<'r>(
        &self,
        peer: SocketAddr,
        status: u16,
        bytes: u64,
        fields: impl FnOnce() -> LogFields<'r>,
    ) {
        self.count_response(status);
        if !self.logs_access() {
            return;
        }
        let LogFields {
            request_line,
            referer,
            user_agent,
        } = fields();
        let full = {
            let clock = self.clock.borrow();
            let mut log = self.log.borrow_mut();
            // Not `write!`: `Display` for an address goes through
            // `core::fmt`'s padding, several hundred instructions a line.
            match peer.ip() {
                std::net::IpAddr::V4(a) => stoa_h1::push_ipv4(&mut log, a),
                ip => {
                    let _ = write!(log, "{ip}");
                }
            }
            log.extend_from_slice(b" - - [");
            log.extend_from_slice(clock.clf.as_bytes());
            log.extend_from_slice(b"] \"");
            escape_into(&mut log, &request_line);
            log.extend_from_slice(b"\" ");
            stoa_h1::push_u64(&mut log, u64::from(status));
            log.push(b' ');
            if bytes == 0 {
                log.push(b'-');
            } else {
                stoa_h1::push_u64(&mut log, bytes);
            }
            log.extend_from_slice(b" \"");
            escape_into(&mut log, referer.unwrap_or(b"-"));
            log.extend_from_slice(b"\" \"");
            escape_into(&mut log, user_agent.unwrap_or(b"-"));
            log.extend_from_slice(b"\"\n");
            log.len() >= LOG_FLUSH_BYTES
        };
        if full {
            self.flush_log();
        }
    }

    pub fn flush_log(&self) {
        let mut log = self.log.borrow_mut();
        if log.is_empty() {
            return;
        }
        let target = self.log_target.borrow().clone();
        match target {
            AccessLog::Off => {}
            AccessLog::Stdout => {
                let _ = std::io::stdout().lock().write_all(&log);
            }
            AccessLog::File(path) => {
                let mut f = self.log_file.borrow_mut();
                if f.is_none() {
                    *f = adopted_log_file(&path);
                }
                if f.is_none() {
                    match std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&path)
                    {
                        Ok(file) => *f = Some(file),
                        Err(e) => tracing::error!("access log {}: {e}", path.display()),
                    }
                }
                if let Some(file) = f.as_mut() {
                    if let Err(e) = file.write_all(&log) {
                        tracing::error!("access log {}: {e}", path.display());
                    }
                }
            }
        }
        log.clear();
    }

    /// A reload named another access log.
    pub fn set_access_log(&self, access_log: &AccessLog) {
        let mut target = self.log_target.borrow_mut();
        if *target != *access_log {
            drop(target);
            self.flush_log();
            target = self.log_target.borrow_mut();
            *target = access_log.clone();
            *self.log_file.borrow_mut() = None;
        }
    }
}

/// Log files opened at start-up (by the privileged parent when there is
/// one), which workers write through instead of opening the path as the
/// user.
static ADOPTED: std::sync::Mutex<Vec<(std::path::PathBuf, std::fs::File)>> =
    std::sync::Mutex::new(Vec::new());

/// Gives the workers an open log file for `path`.
pub fn adopt_log_file(path: &std::path::Path, file: std::fs::File) {
    if let Ok(mut a) = ADOPTED.lock() {
        a.retain(|(p, _)| p != path);
        a.push((path.to_path_buf(), file));
    }
}

fn adopted_log_file(path: &std::path::Path) -> Option<std::fs::File> {
    let a = ADOPTED.lock().ok()?;
    let (_, f) = a.iter().find(|(p, _)| p == path)?;
    f.try_clone().ok()
}

/// Escapes bytes for a quoted log field: `"` and `\` and anything not
/// printable ASCII become `\"`, `\\` or `\xHH`, so a request cannot forge
/// log lines.
fn escape_into(out: &mut Vec<u8>, s: &[u8]) {
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x20..=0x7e => out.push(b),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[
                    b'\\',
                    b'x',
                    HEX[(b >> 4) as usize],
                    HEX[(b & 15) as usize],
                ]);
            }
        }
    }
}

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
    /// its handshake).
    pub connections: [std::sync::atomic::AtomicU64; 4],
    /// Of those, the ones open now.
    pub connections_open: [AtomicUsize; 4],
    /// HTTP/2 streams accepted, over TLS (`h2`) and cleartext (`h2c`).
    pub streams: [std::sync::atomic::AtomicU64; 2],
    pub streams_open: [AtomicUsize; 2],
    /// TLS handshakes: full, resumed, failed.
    pub handshakes: [std::sync::atomic::AtomicU64; 3],
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
}

impl Proto {
    pub const ALL: [Proto; 4] = [Proto::Http1, Proto::Http1Tls, Proto::H2, Proto::H2c];

    /// The name the status page uses.
    pub fn name(self) -> &'static str {
        match self {
            Proto::Http1 => "http/1.1",
            Proto::Http1Tls => "http/1.1+tls",
            Proto::H2 => "h2",
            Proto::H2c => "h2c",
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

    pub fn handshake(&self, h: Handshake) {
        self.handshakes[h as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// What an access log line says of the request, found only when the log
/// is on ([`Worker::log_access`]).
pub struct LogFields<'r> {
    pub request_line: Cow<'r, [u8]>,
    pub referer: Option<&'r [u8]>,
    pub user_agent: Option<&'r [u8]>,
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

    #[test]
    fn log_fields_cannot_forge_lines() {
        let mut v = Vec::new();
        escape_into(&mut v, b"GET /\"x\n\\ \x7f");
        assert_eq!(v, b"GET /\\\"x\\x0a\\\\ \\x7f");
    }
}
