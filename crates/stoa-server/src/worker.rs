//! A worker: one thread, one current-thread tokio runtime, its own
//! SO_REUSEPORT listeners, caches and log buffer. Nothing on the request
//! path is shared with other workers except the connection counter.

use crate::config::{AccessLog, Runtime};
use crate::conn;
use crate::static_files::FileCache;
use std::cell::{Cell, RefCell};
use std::io::Write;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;
use tokio::sync::watch;

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
    pub cache: RefCell<FileCache>,
    clock: RefCell<Clock>,
    log: RefCell<Vec<u8>>,
    log_target: RefCell<AccessLog>,
    log_file: RefCell<Option<std::fs::File>>,
    pub shutdown: watch::Receiver<bool>,
    /// Connections open on this worker.
    pub active: Cell<usize>,
    /// Buffers of idle connections, for reuse by busy ones.
    bufs: RefCell<Vec<Vec<u8>>>,
    pub shared: Arc<Shared>,
    index: usize,
}

impl Worker {
    pub fn new(rt: &Runtime, shutdown: watch::Receiver<bool>, shared: Arc<Shared>) -> Worker {
        Worker {
            shared,
            index: crate::pool::worker_index(),
            cache: RefCell::new(FileCache::new(
                rt.cache.max_bytes,
                rt.cache.max_file_bytes,
                rt.cache.revalidate,
            )),
            clock: RefCell::new(Clock::new()),
            log: RefCell::new(Vec::with_capacity(LOG_FLUSH_BYTES + 1024)),
            log_target: RefCell::new(rt.access_log.clone()),
            log_file: RefCell::new(None),
            shutdown,
            active: Cell::new(0),
            bufs: RefCell::new(Vec::new()),
        }
    }

    /// Appends the Date and Server header lines for the current second.
    pub fn push_date(&self, buf: &mut Vec<u8>) {
        let mut c = self.clock.borrow_mut();
        c.refresh();
        buf.extend_from_slice(&c.date_block);
    }

    /// A buffer for a connection that has bytes to read or write.
    pub fn take_buf(&self) -> Vec<u8> {
        self.bufs
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(BUF_SIZE))
    }

    /// Returns a connection's buffer to the pool; large or surplus ones are
    /// freed so the pool stays small.
    pub fn give_buf(&self, mut buf: Vec<u8>) {
        let mut pool = self.bufs.borrow_mut();
        if buf.capacity() >= BUF_SIZE && buf.capacity() <= 64 * 1024 && pool.len() < 1024 {
            buf.clear();
            pool.push(buf);
        }
    }

    /// Appends one Combined Log Format line.
    pub fn log_access(
        &self,
        peer: SocketAddr,
        request_line: &[u8],
        status: u16,
        bytes: u64,
        referer: Option<&[u8]>,
        user_agent: Option<&[u8]>,
    ) {
        if let (Some(w), 100..=599) = (self.shared.stats.get(self.index), status) {
            w.responses[usize::from(status / 100 - 1)].fetch_add(1, Ordering::Relaxed);
        }
        if *self.log_target.borrow() == AccessLog::Off {
            return;
        }
        let full = {
            let clock = self.clock.borrow();
            let mut log = self.log.borrow_mut();
            let _ = write!(log, "{} - - [{}] \"", peer.ip(), clock.clf);
            escape_into(&mut log, request_line);
            let _ = write!(log, "\" {status} ");
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

    fn set_runtime(&self, rt: &Runtime) {
        self.cache.borrow_mut().set_limits(
            rt.cache.max_bytes,
            rt.cache.max_file_bytes,
            rt.cache.revalidate,
        );
        let mut target = self.log_target.borrow_mut();
        if *target != rt.access_log {
            drop(target);
            self.flush_log();
            target = self.log_target.borrow_mut();
            *target = rt.access_log.clone();
            *self.log_file.borrow_mut() = None;
        }
    }
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

/// A worker's counters, on a cache line of their own so that counting
/// never contends with another worker.
#[derive(Default)]
#[repr(align(64))]
pub struct WorkerStats {
    /// Responses by status class: 1xx, 2xx, 3xx, 4xx, 5xx.
    pub responses: [std::sync::atomic::AtomicU64; 5],
}

/// Decrements the shared and per-worker counts when a connection ends.
struct ConnGuard {
    shared: Arc<Shared>,
    worker: Rc<Worker>,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.shared.connections.fetch_sub(1, Ordering::Relaxed);
        self.worker.active.set(self.worker.active.get() - 1);
    }
}

/// Runs a worker until shutdown: accepts on its listeners, serves each
/// connection as a local task, and drains them when told to stop.
pub async fn run(
    listeners: Vec<std::net::TcpListener>,
    mut runtime: watch::Receiver<Arc<Runtime>>,
    shutdown: watch::Receiver<bool>,
    shared: Arc<Shared>,
) {
    let rt = runtime.borrow_and_update().clone();
    let worker = Rc::new(Worker::new(&rt, shutdown.clone(), shared.clone()));
    let mut tokio_listeners = Vec::new();
    for l in listeners {
        match TcpListener::from_std(l) {
            Ok(l) => tokio_listeners.push(Rc::new(l)),
            Err(e) => tracing::error!("listener: {e}"),
        }
    }
    // The log is flushed off the request path, once a second.
    let flusher = {
        let worker = worker.clone();
        tokio::task::spawn_local(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                worker.flush_log();
            }
        })
    };
    let mut accepts = Vec::new();
    for l in &tokio_listeners {
        accepts.push(tokio::task::spawn_local(accept_loop(
            l.clone(),
            runtime.clone(),
            worker.clone(),
            shared.clone(),
        )));
    }
    let mut sd = shutdown.clone();
    loop {
        tokio::select! {
            r = runtime.changed() => {
                if r.is_err() { break; }
                let rt = runtime.borrow_and_update().clone();
                worker.set_runtime(&rt);
            }
            r = sd.changed() => {
                if r.is_err() || *sd.borrow() { break; }
            }
        }
    }
    for a in &accepts {
        a.abort();
    }
    drop(tokio_listeners);
    // Let in-flight requests finish; idle connections close themselves. A
    // graceful stop waits for all of them; a fast one (or a graceful one
    // turned fast) gives them `shutdown_timeout` from then.
    let limit = runtime.borrow().limits.shutdown_timeout;
    let mut until = None;
    while worker.active.get() > 0 {
        if !shared.graceful.load(Ordering::Relaxed) {
            let u = *until.get_or_insert_with(|| tokio::time::Instant::now() + limit);
            if tokio::time::Instant::now() >= u {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    flusher.abort();
    worker.flush_log();
}

async fn accept_loop(
    listener: Rc<TcpListener>,
    runtime: watch::Receiver<Arc<Runtime>>,
    worker: Rc<Worker>,
    shared: Arc<Shared>,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let rt = runtime.borrow().clone();
        let n = shared.connections.fetch_add(1, Ordering::Relaxed);
        if n >= rt.limits.max_connections {
            shared.connections.fetch_sub(1, Ordering::Relaxed);
            // Refuse politely without waiting on this client: one
            // non-blocking write, then close.
            let _ = stream.try_write(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\nRetry-After: 1\r\n\r\n",
            );
            continue;
        }
        worker.active.set(worker.active.get() + 1);
        let guard = ConnGuard {
            shared: shared.clone(),
            worker: worker.clone(),
        };
        let w = worker.clone();
        tokio::task::spawn_local(async move {
            conn::serve(stream, peer, w, rt).await;
            drop(guard);
        });
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
