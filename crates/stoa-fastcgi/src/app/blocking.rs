//! A blocking, std-only driver for FastCGI applications.
//!
//! ```no_run
//! use std::io::Write;
//! use stoa_fastcgi::app::{blocking, Settings};
//!
//! fn main() -> std::io::Result<()> {
//!     blocking::run(Settings::default(), |req: &stoa_fastcgi::app::Request, out: &mut blocking::Output| {
//!         let _ = write!(out, "Content-Type: text/plain\r\n\r\nhello {}\n",
//!                        req.param("QUERY_STRING").unwrap_or(""));
//!         0
//!     })
//! }
//! ```
//!
//! Threads: one per connection (at most `max_conns`) reads the web server's
//! records, and one per request runs the [`Handler`], so requests on a
//! multiplexed connection run concurrently and an FCGI_ABORT_REQUEST is seen
//! while a handler runs. Output records of concurrent requests interleave
//! whole on the connection. Over `max_reqs` requests in the process, new
//! ones are answered OVERLOADED.
//!
//! The web server must read while it writes (any event-driven server does):
//! the reader thread may have to wait behind a handler's output to write a
//! management answer.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::{AppEvent, Connection, Request, Settings};
use crate::record::{self, ProtocolStatus, RecordType, MAX_STREAM_CHUNK};

/// The application's code, run once per request on its own thread.
pub trait Handler: Send + Sync + 'static {
    /// Answers `request`: a CGI response on `out` for a Responder (§6.2),
    /// `Status: 200` and `Variable-*` fields, or another response, for an
    /// Authorizer (§6.3). Returns the application status of
    /// FCGI_END_REQUEST (0 for success, like an exit status).
    fn handle(&self, request: &Request, out: &mut Output) -> u32;
}

impl<F> Handler for F
where
    F: Fn(&Request, &mut Output) -> u32 + Send + Sync + 'static,
{
    fn handle(&self, request: &Request, out: &mut Output) -> u32 {
        self(request, out)
    }
}

/// A listening socket.
#[derive(Debug)]
pub enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

impl From<UnixListener> for Listener {
    fn from(l: UnixListener) -> Self {
        Listener::Unix(l)
    }
}

impl From<TcpListener> for Listener {
    fn from(l: TcpListener) -> Self {
        Listener::Tcp(l)
    }
}

impl Listener {
    /// The listening socket a web server passes as file descriptor 0
    /// (FCGI_LISTENSOCK_FILENO, §2.2), or `None` when fd 0 is something else
    /// (a terminal, a file, a pipe, a connected socket): the program was not
    /// started as a FastCGI application.
    pub fn from_fd0() -> io::Result<Option<Listener>> {
        // std keeps fds 0-2 open (on /dev/null if need be), so stdin's fd is
        // always there to duplicate; the duplicate is ours to own.
        let fd: OwnedFd = io::stdin().as_fd().try_clone_to_owned()?;
        // A listening socket has no peer: getpeername fails with ENOTCONN.
        // Anything else (ENOTSOCK, or a peer) is not a FastCGI listener.
        match UnixStream::from(fd.try_clone()?).peer_addr() {
            Err(e) if e.kind() == io::ErrorKind::NotConnected => {}
            _ => return Ok(None),
        }
        let listener = if UnixListener::from(fd.try_clone()?).local_addr().is_ok() {
            let l = UnixListener::from(fd);
            l.set_nonblocking(false)?;
            Listener::Unix(l)
        } else if TcpListener::from(fd.try_clone()?).local_addr().is_ok() {
            let l = TcpListener::from(fd);
            l.set_nonblocking(false)?;
            Listener::Tcp(l)
        } else {
            return Ok(None);
        };
        Ok(Some(listener))
    }

    pub fn accept(&self) -> io::Result<Stream> {
        match self {
            Listener::Unix(l) => l.accept().map(|(s, _)| Stream::Unix(s)),
            Listener::Tcp(l) => l.accept().map(|(s, _)| Stream::Tcp(s)),
        }
    }
}

/// A transport connection to the web server.
#[derive(Debug)]
pub enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl From<UnixStream> for Stream {
    fn from(s: UnixStream) -> Self {
        Stream::Unix(s)
    }
}

impl From<TcpStream> for Stream {
    fn from(s: TcpStream) -> Self {
        Stream::Tcp(s)
    }
}

impl Stream {
    pub fn try_clone(&self) -> io::Result<Stream> {
        match self {
            Stream::Unix(s) => s.try_clone().map(Stream::Unix),
            Stream::Tcp(s) => s.try_clone().map(Stream::Tcp),
        }
    }

    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.shutdown(how),
            Stream::Tcp(s) => s.shutdown(how),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Serves on the listening socket passed as fd 0, as a web server starts a
/// FastCGI application (§2.2), with FCGI_WEB_SERVER_ADDRS read from the
/// environment unless `settings` has a list (§3.2). Returns only on error.
pub fn run<H: Handler>(settings: Settings, handler: H) -> io::Result<()> {
    let listener = Listener::from_fd0()?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "fd 0 is not a listening socket: start this FastCGI application from a web server",
        )
    })?;
    let settings = if settings.web_server_addrs.is_none() {
        settings.with_env()
    } else {
        settings
    };
    serve(listener, settings, handler)
}

/// Accepts connections and serves each on its own thread, at most
/// `max_conns` at once. Returns only when accepting keeps failing.
pub fn serve<H: Handler>(listener: Listener, settings: Settings, handler: H) -> io::Result<()> {
    let max_conns = (settings.max_conns as usize).max(1);
    let shared = Arc::new(Shared {
        handler,
        settings,
        in_flight: AtomicUsize::new(0),
    });
    let open = Arc::new((Mutex::new(0usize), Condvar::new()));
    let mut failures = 0;
    loop {
        {
            let (count, cv) = &*open;
            let mut n = lock(count);
            while *n >= max_conns {
                n = cv.wait(n).unwrap_or_else(|e| e.into_inner());
            }
        }
        let stream = match listener.accept() {
            Ok(s) => {
                failures = 0;
                s
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                // Out of descriptors, an aborted handshake: wait and retry;
                // give up on a listener that keeps failing.
                failures += 1;
                if failures > 100 {
                    return Err(e);
                }
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if !shared.allowed(&stream) {
            continue;
        }
        *lock(&open.0) += 1;
        let slot = OpenSlot(open.clone());
        let shared = shared.clone();
        let spawned = thread::Builder::new()
            .name("fcgi-conn".into())
            .spawn(move || {
                let _slot = slot;
                let _ = serve_stream(stream, shared);
            });
        // On failure the closure (and its slot) is dropped: count restored.
        drop(spawned);
    }
}

/// Serves one connection until it closes, on the calling thread. Requests
/// still run on threads of their own.
pub fn serve_connection<H: Handler>(
    stream: Stream,
    settings: Settings,
    handler: H,
) -> io::Result<()> {
    let shared = Arc::new(Shared {
        handler,
        settings,
        in_flight: AtomicUsize::new(0),
    });
    serve_stream(stream, shared)
}

/// Releases a connection slot of [`serve`] when dropped.
struct OpenSlot(Arc<(Mutex<usize>, Condvar)>);

impl Drop for OpenSlot {
    fn drop(&mut self) {
        let (count, cv) = &*self.0;
        let mut n = lock(count);
        *n = n.saturating_sub(1);
        cv.notify_one();
    }
}

struct Shared<H> {
    handler: H,
    settings: Settings,
    /// Requests running in the process, for `max_reqs`.
    in_flight: AtomicUsize,
}

impl<H> Shared<H> {
    fn allowed(&self, stream: &Stream) -> bool {
        let (Stream::Tcp(s), Some(list)) = (stream, &self.settings.web_server_addrs) else {
            return true;
        };
        let Ok(peer) = s.peer_addr() else {
            return false;
        };
        let ip = match peer.ip() {
            std::net::IpAddr::V6(v6) => v6
                .to_ipv4_mapped()
                .map(std::net::IpAddr::V4)
                .unwrap_or(peer.ip()),
            v4 => v4,
        };
        list.contains(&ip)
    }
}

/// What the reader thread and the request threads of a connection share.
struct Link {
    state: Mutex<LinkState>,
    /// The write side; whole records are written under this lock.
    sink: Mutex<Stream>,
    /// For shutdown without waiting on `sink`.
    ctl: Stream,
}

struct LinkState {
    core: Connection,
    aborts: HashMap<u16, Arc<AtomicBool>>,
}

impl Link {
    fn write(&self, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        lock(&self.sink).write_all(bytes)
    }

    fn close(&self) {
        let _ = self.ctl.shutdown(Shutdown::Both);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn serve_stream<H: Handler>(stream: Stream, shared: Arc<Shared<H>>) -> io::Result<()> {
    let mut reader = stream.try_clone()?;
    let link = Arc::new(Link {
        state: Mutex::new(LinkState {
            core: Connection::new(shared.settings.clone()),
            aborts: HashMap::new(),
        }),
        ctl: stream.try_clone()?,
        sink: Mutex::new(stream),
    });
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::new();
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    let mut result = Ok(());
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let mut requests = Vec::new();
        let (fed, close) = {
            let mut st = lock(&link.state);
            let fed = st.core.feed(&buf[..n], &mut out);
            while let Some(ev) = st.core.poll_event() {
                match ev {
                    AppEvent::Request(r) => requests.push(r),
                    AppEvent::Abort(id) => {
                        if let Some(flag) = st.aborts.get(&id) {
                            flag.store(true, Ordering::Relaxed);
                        }
                    }
                }
            }
            (fed, st.core.should_close())
        };
        if link.write(&out).is_err() {
            break;
        }
        out.clear();
        for req in requests {
            dispatch(&link, &shared, req, &mut workers);
        }
        workers.retain(|w| !w.is_finished());
        if let Err(e) = fed {
            result = Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
        if result.is_err() || close {
            link.close();
            break;
        }
    }
    // The web server may half-close and still read: let handlers finish.
    for w in workers {
        let _ = w.join();
    }
    result
}

fn dispatch<H: Handler>(
    link: &Arc<Link>,
    shared: &Arc<Shared<H>>,
    req: Request,
    workers: &mut Vec<JoinHandle<()>>,
) {
    let id = req.id;
    let max = (shared.settings.max_reqs as usize).max(1);
    if shared.in_flight.fetch_add(1, Ordering::AcqRel) < max {
        let aborted = Arc::new(AtomicBool::new(false));
        lock(&link.state).aborts.insert(id, aborted.clone());
        let (l, s) = (link.clone(), shared.clone());
        let spawned = thread::Builder::new()
            .name(format!("fcgi-request-{id}"))
            .spawn(move || run_request(&l, &s, req, aborted));
        match spawned {
            Ok(w) => return workers.push(w),
            Err(_) => {
                lock(&link.state).aborts.remove(&id);
            }
        }
    }
    shared.in_flight.fetch_sub(1, Ordering::AcqRel);
    let mut out = Vec::new();
    let close =
        lock(&link.state)
            .core
            .end_request_with(id, 0, ProtocolStatus::Overloaded, &mut out);
    let _ = link.write(&out);
    if close {
        link.close();
    }
}

fn run_request<H: Handler>(
    link: &Arc<Link>,
    shared: &Shared<H>,
    req: Request,
    aborted: Arc<AtomicBool>,
) {
    let mut output = Output {
        id: req.id,
        link: link.clone(),
        buf: Vec::new(),
        aborted,
    };
    let status = catch_unwind(AssertUnwindSafe(|| {
        shared.handler.handle(&req, &mut output)
    }))
    .unwrap_or_else(|_| {
        let _ = output.stderr(b"FastCGI handler panicked\n");
        1
    });
    let _ = output.flush_stdout();
    shared.in_flight.fetch_sub(1, Ordering::AcqRel);
    let mut end = Vec::new();
    let close = {
        let mut st = lock(&link.state);
        st.aborts.remove(&req.id);
        st.core.end_request(req.id, status, &mut end)
    };
    let _ = link.write(&end);
    if close {
        link.close();
    }
}

/// A request's output: `Write` sends FCGI_STDOUT, [`Output::stderr`]
/// FCGI_STDERR. Stdout is buffered up to one record (64 KiB); `flush`
/// sends what is buffered. After an FCGI_ABORT_REQUEST writes are dropped.
pub struct Output {
    id: u16,
    link: Arc<Link>,
    buf: Vec<u8>,
    aborted: Arc<AtomicBool>,
}

impl Output {
    pub fn request_id(&self) -> u16 {
        self.id
    }

    /// True once the web server asked to abort the request (§5.4), e.g.
    /// because its client went away: stop early.
    pub fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::Relaxed)
    }

    /// Sends bytes on FCGI_STDERR (the web server's error log), after the
    /// stdout written so far.
    pub fn stderr(&mut self, data: &[u8]) -> io::Result<()> {
        self.flush_stdout()?;
        if self.is_aborted() || data.is_empty() {
            return Ok(());
        }
        let mut rec = Vec::with_capacity(data.len() + 16);
        record::push_stream(&mut rec, RecordType::Stderr, self.id, data);
        self.link.write(&rec)
    }

    fn flush_stdout(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if self.is_aborted() {
            self.buf.clear();
            return Ok(());
        }
        let mut rec = Vec::with_capacity(self.buf.len() + 16);
        record::push_stream(&mut rec, RecordType::Stdout, self.id, &self.buf);
        self.buf.clear();
        self.link.write(&rec)
    }
}

impl Write for Output {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.is_aborted() {
            return Ok(data.len());
        }
        let room = MAX_STREAM_CHUNK - self.buf.len();
        let n = data.len().min(room);
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() >= MAX_STREAM_CHUNK {
            self.flush_stdout()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flush_stdout()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fd_0_of_a_test_process_is_not_a_listening_socket_spec_2_2() {
        // cargo test's stdin is a terminal, a pipe or /dev/null.
        assert!(matches!(Listener::from_fd0(), Ok(None)));
    }
}
