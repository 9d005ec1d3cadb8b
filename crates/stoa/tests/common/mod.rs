//! Shared harness for the integration tests: temporary document roots, a
//! `Server` that runs the real `stoa` binary, and a raw-bytes HTTP/1.x
//! client with bounded reads, so that no test can hang.
//!
//! Every test gets its own directory and its own port (127.0.0.1:0), so the
//! tests of a file run in parallel.

#![allow(dead_code)]

pub mod postgres;

use std::ffi::OsStr;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// The longest any single read may block.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the server may take to print its ready line.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// The top of every generated config: one worker on an ephemeral port, no
/// access log, and (when the tests run as root, as in CI) still root:
/// these tests are about other things than privileges, and their peers
/// (php-fpm sockets, files in temp dirs) are root's. `privileges.rs`
/// tests the drop to another user.
pub const CONFIG_PRELUDE: &str =
    "listen = [\"127.0.0.1:0\"]\nworkers = 1\nuser = \"root\"\n\n[log]\naccess = \"off\"\n\n";

// ---------------------------------------------------------------------------
// Temporary directories

/// A directory under the system temp dir, unique to one test, removed on
/// drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = std::env::temp_dir().join(format!(
            "stoa-test-{tag}-{}-{}-{nanos:x}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        // Canonical, so symlink targets and comparisons are stable.
        let path = path.canonicalize().expect("canonicalize temp dir");
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, rel: &str) -> PathBuf {
        self.path.join(rel)
    }

    /// Writes `bytes` to `rel`, creating parent directories.
    pub fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("create parent dirs");
        }
        std::fs::write(&p, bytes).expect("write file");
        p
    }

    pub fn mkdir(&self, rel: &str) -> PathBuf {
        let p = self.path.join(rel);
        std::fs::create_dir_all(&p).expect("mkdir");
        p
    }

    /// Creates a symlink at `rel` pointing to `target`.
    pub fn symlink(&self, target: impl AsRef<Path>, rel: &str) -> PathBuf {
        let p = self.path.join(rel);
        std::os::unix::fs::symlink(target, &p).expect("symlink");
        p
    }

    /// Writes a config file: [`CONFIG_PRELUDE`] followed by `body`.
    pub fn config(&self, rel: &str, body: &str) -> PathBuf {
        self.write(rel, format!("{CONFIG_PRELUDE}{body}"))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Deterministic, incompressible-looking bytes, so that a misplaced byte
/// range shows up as a mismatch.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The server process

/// A running `stoa serve`. Stopped (by PID: SIGTERM, then SIGKILL) and reaped on drop.
pub struct Server {
    child: Child,
    pub addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
    status: Option<ExitStatus>,
}

pub fn stoa_bin() -> &'static str {
    env!("CARGO_BIN_EXE_stoa")
}

impl Server {
    /// `stoa serve DIR --listen 127.0.0.1:0 --workers 1 --access-log off`.
    pub fn serve_dir(dir: &Path) -> Server {
        Server::spawn([
            OsStr::new("serve"),
            dir.as_os_str(),
            OsStr::new("--listen"),
            OsStr::new("127.0.0.1:0"),
            OsStr::new("--workers"),
            OsStr::new("1"),
            OsStr::new("--access-log"),
            OsStr::new("off"),
        ])
    }

    /// `stoa serve DIR` over HTTPS with this certificate and key, otherwise
    /// as [`Server::serve_dir`].
    pub fn serve_dir_tls(dir: &Path, cert: &Path, key: &Path) -> Server {
        Server::spawn([
            OsStr::new("serve"),
            dir.as_os_str(),
            OsStr::new("--listen"),
            OsStr::new("127.0.0.1:0"),
            OsStr::new("--workers"),
            OsStr::new("1"),
            OsStr::new("--access-log"),
            OsStr::new("off"),
            OsStr::new("--tls-cert"),
            cert.as_os_str(),
            OsStr::new("--tls-key"),
            key.as_os_str(),
        ])
    }

    /// `stoa serve --config FILE`.
    pub fn with_config(file: &Path) -> Server {
        Server::spawn([
            OsStr::new("serve"),
            OsStr::new("--config"),
            file.as_os_str(),
        ])
    }

    pub fn spawn<I, S>(args: I) -> Server
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        match Server::try_spawn(args) {
            Ok(s) => s,
            Err(e) => panic!("stoa did not start: {e}"),
        }
    }

    /// Starts the binary and waits for `stoa: listening on http(s)://ADDR/` on
    /// its stderr. Stderr keeps being collected for the server's lifetime.
    pub fn try_spawn<I, S>(args: I) -> Result<Server, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Server::try_spawn_program(OsStr::new(stoa_bin()), args, &[])
    }

    /// As [`Server::try_spawn`], with another program in front (a symlink
    /// to `stoa`, `systemd-socket-activate stoa ...`) and more environment.
    pub fn try_spawn_program<I, S>(
        program: &OsStr,
        args: I,
        env: &[(&str, &OsStr)],
    ) -> Result<Server, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut child = Command::new(program)
            .args(args)
            // The caller's STOA_LOG, if it gives one, not the test run's.
            .env_remove("STOA_LOG")
            .envs(env.iter().copied())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", program.to_string_lossy()))?;
        let pipe = child.stderr.take().expect("stderr is piped");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel::<SocketAddr>();
        {
            let stderr = stderr.clone();
            std::thread::spawn(move || {
                let mut tx = Some(tx);
                let mut r = BufReader::new(pipe);
                let mut line = String::new();
                loop {
                    line.clear();
                    match r.read_line(&mut line) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                    // The first address, plain or TLS.
                    let rest = line
                        .split("listening on http://")
                        .nth(1)
                        .or_else(|| line.split("listening on https://").nth(1));
                    if let Some(rest) = rest {
                        let addr = rest.trim().trim_end_matches('/');
                        if let (Ok(a), Some(tx)) = (addr.parse::<SocketAddr>(), tx.take()) {
                            let _ = tx.send(a);
                        }
                    }
                    if let Ok(mut s) = stderr.lock() {
                        s.push_str(&line);
                    }
                }
            });
        }
        match rx.recv_timeout(START_TIMEOUT) {
            Ok(addr) => Ok(Server {
                child,
                addr,
                stderr,
                status: None,
            }),
            Err(_) => {
                let _ = child.kill();
                let status = child.wait();
                // Give the reader thread a moment to collect the last lines.
                std::thread::sleep(Duration::from_millis(50));
                let text = stderr.lock().map(|s| s.clone()).unwrap_or_default();
                Err(format!("exit {status:?}; stderr:\n{text}"))
            }
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends `sig` once the server has installed its handler for it, so
    /// that a test about reloading or stopping is not a test of start-up
    /// timing (see [`Server::signal_now`] for that).
    pub fn signal(&self, sig: i32) {
        self.wait_for_handler(sig);
        self.signal_now(sig);
    }

    /// Sends `sig` at once, handler or not.
    pub fn signal_now(&self, sig: i32) {
        // SAFETY: kill(2) with a PID we spawned and have not reaped yet.
        let r = unsafe { libc::kill(self.pid(), sig) };
        assert_eq!(r, 0, "kill({}, {sig}) failed", self.pid());
    }

    /// Whether the process catches `sig` (the SigCgt mask in
    /// /proc/PID/status).
    pub fn catches(&self, sig: i32) -> bool {
        catches(self.pid(), sig)
    }

    /// Waits up to 5 s for the server to catch `sig`.
    pub fn wait_for_handler(&self, sig: i32) {
        let until = Instant::now() + Duration::from_secs(5);
        while !self.catches(sig) {
            assert!(
                Instant::now() < until,
                "the server never installed a handler for signal {sig}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Everything the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits until stderr, past byte `from`, contains `needle`.
    pub fn wait_stderr(&self, from: usize, needle: &str, within: Duration) -> bool {
        let until = Instant::now() + within;
        loop {
            let s = self.stderr();
            if s.get(from..).is_some_and(|t| t.contains(needle)) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the process to exit, up to `within`.
    pub fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        if self.status.is_some() {
            return self.status;
        }
        let until = Instant::now() + within;
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                self.status = Some(st);
                return self.status;
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn connect(&self) -> Conn {
        Conn::connect(self.addr)
    }

    /// One request on a fresh connection.
    pub fn request(&self, bytes: &[u8]) -> Response {
        self.connect().request(bytes)
    }

    /// `GET path` on a fresh connection.
    pub fn get(&self, path: &str) -> Response {
        self.request(&get(path))
    }
}

impl Drop for Server {
    /// SIGTERM first, as an operator stops it: a server killed outright
    /// cannot remove its pools' socket directory (`/tmp/stoa-PID`), and
    /// one per test run piled up by the thousand. SIGKILL after 2 s (a
    /// test that left a response hanging).
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        // SAFETY: kill(2) with a PID we spawned and have not reaped yet.
        unsafe {
            libc::kill(self.pid(), libc::SIGTERM);
        }
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------
// Requests

/// `GET path HTTP/1.1` with `Host: t`.
pub fn get(path: &str) -> Vec<u8> {
    request("GET", path, &[])
}

/// A request with `Host: t` and the given extra header lines ("Name: value").
pub fn request(method: &str, path: &str, headers: &[&str]) -> Vec<u8> {
    let mut s = format!("{method} {path} HTTP/1.1\r\nHost: t\r\n");
    for h in headers {
        s.push_str(h);
        s.push_str("\r\n");
    }
    s.push_str("\r\n");
    s.into_bytes()
}

// ---------------------------------------------------------------------------
// Responses

#[derive(Clone)]
pub struct Response {
    pub version: String,
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let body = String::from_utf8_lossy(&self.body[..self.body.len().min(300)]);
        f.debug_struct("Response")
            .field("status", &self.status)
            .field("reason", &self.reason)
            .field("headers", &self.headers)
            .field("body_len", &self.body.len())
            .field("body", &body)
            .finish()
    }
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn header_count(&self, name: &str) -> usize {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .count()
    }

    /// Whether a list header (e.g. Connection) holds `token`.
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    pub fn content_length(&self) -> Option<u64> {
        self.header("content-length").and_then(|v| v.parse().ok())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Finds `needle` in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    find(hay, needle).is_some()
}

// ---------------------------------------------------------------------------
// Connections

/// A client connection with its own receive buffer, so that pipelined
/// responses are read one at a time.
pub struct Conn {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub fn connect(addr: SocketAddr) -> Conn {
        Conn::try_connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"))
    }

    pub fn try_connect(addr: SocketAddr) -> io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: Vec::new(),
        })
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send request bytes");
    }

    pub fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Sends `bytes` and reads one final response (1xx skipped).
    pub fn request(&mut self, bytes: &[u8]) -> Response {
        self.send(bytes);
        self.read_final()
    }

    /// Reads one response to a GET (or other non-HEAD request).
    pub fn read(&mut self) -> Response {
        self.try_read(false)
            .unwrap_or_else(|e| panic!("reading a response: {e}"))
    }

    /// Reads one response to a HEAD request (no body, whatever the headers).
    pub fn read_head(&mut self) -> Response {
        self.try_read(true)
            .unwrap_or_else(|e| panic!("reading a response to HEAD: {e}"))
    }

    /// Reads responses until a final (non-1xx) one.
    pub fn read_final(&mut self) -> Response {
        self.try_read_final()
            .unwrap_or_else(|e| panic!("reading a response: {e}"))
    }

    pub fn try_read_final(&mut self) -> io::Result<Response> {
        for _ in 0..10 {
            let r = self.try_read(false)?;
            if r.status >= 200 {
                return Ok(r);
            }
        }
        Err(io::Error::other("too many 1xx responses"))
    }

    /// Bytes received but not yet parsed into a response.
    pub fn pending(&self) -> &[u8] {
        &self.buf
    }

    /// Takes the bytes received but not yet parsed, before reading the
    /// stream by hand.
    pub fn take_pending(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut tmp = [0u8; 64 * 1024];
        // A read on a socket with a timeout is not restarted after a stop
        // signal (signal(7)): EINTR says nothing about the server.
        let n = loop {
            match self.stream.read(&mut tmp) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => break r?,
            }
        };
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(n)
    }

    fn eof(what: &str) -> io::Error {
        io::Error::new(io::ErrorKind::UnexpectedEof, what.to_owned())
    }

    /// Reads one response; `head_only` for the response to a HEAD.
    pub fn try_read(&mut self, head_only: bool) -> io::Result<Response> {
        let head_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i + 4;
            }
            if self.buf.len() > 256 * 1024 {
                return Err(io::Error::other("response head larger than 256 KiB"));
            }
            if self.fill()? == 0 {
                return Err(Self::eof(&format!(
                    "connection closed before a complete response head (got {:?})",
                    String::from_utf8_lossy(&self.buf)
                )));
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end - 4]).into_owned();
        self.buf.drain(..head_end);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or("").to_owned();
        let status: u16 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io::Error::other(format!("bad status line {status_line:?}")))?;
        let reason = parts.next().unwrap_or("").to_owned();
        if !version.starts_with("HTTP/1.") {
            return Err(io::Error::other(format!("bad status line {status_line:?}")));
        }
        let mut headers = Vec::new();
        for line in lines {
            let (n, v) = line
                .split_once(':')
                .ok_or_else(|| io::Error::other(format!("bad header line {line:?}")))?;
            if n.is_empty() || n.ends_with(' ') || n.ends_with('\t') {
                return Err(io::Error::other(format!("bad header name {line:?}")));
            }
            headers.push((n.to_owned(), v.trim().to_owned()));
        }
        let mut resp = Response {
            version,
            status,
            reason,
            headers,
            body: Vec::new(),
        };
        if head_only || status < 200 || status == 204 || status == 304 {
            return Ok(resp);
        }
        let chunked = resp
            .header("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        if chunked {
            resp.body = self.read_chunked()?;
        } else if let Some(cl) = resp.header("content-length") {
            let n: usize = cl
                .parse()
                .map_err(|_| io::Error::other(format!("bad Content-Length {cl:?}")))?;
            if resp.header_count("content-length") != 1 {
                return Err(io::Error::other("several Content-Length headers"));
            }
            while self.buf.len() < n {
                if self.fill()? == 0 {
                    return Err(Self::eof(&format!(
                        "connection closed after {} of {n} body bytes (status {status})",
                        self.buf.len()
                    )));
                }
            }
            resp.body = self.buf.drain(..n).collect();
        } else {
            // Close-delimited.
            while self.fill()? > 0 {}
            resp.body = std::mem::take(&mut self.buf);
        }
        Ok(resp)
    }

    fn read_line(&mut self) -> io::Result<String> {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..i]).into_owned();
                self.buf.drain(..i + 2);
                return Ok(line);
            }
            if self.fill()? == 0 {
                return Err(Self::eof("connection closed inside a chunked body"));
            }
        }
    }

    fn read_chunked(&mut self) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line = self.read_line()?;
            let size = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size, 16)
                .map_err(|_| io::Error::other(format!("bad chunk size {line:?}")))?;
            if size == 0 {
                // Trailer section up to the blank line.
                while !self.read_line()?.is_empty() {}
                return Ok(body);
            }
            while self.buf.len() < size + 2 {
                if self.fill()? == 0 {
                    return Err(Self::eof("connection closed inside a chunk"));
                }
            }
            body.extend(self.buf.drain(..size));
            if self.buf.drain(..2).collect::<Vec<_>>() != b"\r\n" {
                return Err(io::Error::other("chunk not followed by CRLF"));
            }
        }
    }

    /// Waits up to `within` for the server to close the connection. Returns
    /// how long that took and whatever bytes arrived before the close (not
    /// yet parsed), or None if the connection was still open.
    pub fn wait_closed(&mut self, within: Duration) -> Option<(Duration, Vec<u8>)> {
        let t0 = Instant::now();
        let until = t0 + within;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let _ = self
                .stream
                .set_read_timeout(Some(left.min(Duration::from_millis(200))));
            match self.fill() {
                Ok(0) => break,
                Ok(_) => {}
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.kind() == io::ErrorKind::TimedOut
                        || e.kind() == io::ErrorKind::Interrupted => {}
                // A reset is a close too.
                Err(_) => break,
            }
        }
        let _ = self.stream.set_read_timeout(Some(IO_TIMEOUT));
        Some((t0.elapsed(), std::mem::take(&mut self.buf)))
    }

    /// True if nothing arrives and the connection stays open for `quiet`.
    pub fn stays_silent(&mut self, quiet: Duration) -> bool {
        let _ = self.stream.set_read_timeout(Some(quiet));
        let r = self.fill();
        let _ = self.stream.set_read_timeout(Some(IO_TIMEOUT));
        match r {
            Err(e) => e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut,
            Ok(_) => false,
        }
    }

    /// Shrinks the socket's receive buffer, so that a slow reader really
    /// holds the server back instead of the kernel buffering the response.
    pub fn set_recv_buffer(&self, bytes: i32) {
        use std::os::fd::AsRawFd;
        // SAFETY: setsockopt on a socket we own, with a valid int option.
        let r = unsafe {
            libc::setsockopt(
                self.stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                &bytes as *const i32 as *const libc::c_void,
                std::mem::size_of::<i32>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0, "setsockopt(SO_RCVBUF)");
    }

    /// Reads exactly `n` raw bytes (for a body read by hand).
    pub fn read_raw(&mut self, n: usize) -> io::Result<Vec<u8>> {
        while self.buf.len() < n {
            if self.fill()? == 0 {
                return Err(Self::eof("connection closed"));
            }
        }
        Ok(self.buf.drain(..n).collect())
    }
}

/// Reads a whole response head with a slow reader: `chunk` bytes every
/// `pause`, then checks framing by hand. Returns (head, body).
pub fn slow_download(
    conn: &mut Conn,
    chunk: usize,
    pause: Duration,
) -> io::Result<(Response, Vec<u8>)> {
    // Read just the head first, without the body (as for HEAD), then the
    // body at the chosen pace.
    let head = conn.try_read(true)?;
    let len = head
        .content_length()
        .ok_or_else(|| io::Error::other("no Content-Length"))? as usize;
    let mut body = std::mem::take(&mut conn.buf);
    let mut tmp = vec![0u8; chunk];
    while body.len() < len {
        let want = chunk.min(len - body.len());
        let n = conn.stream.read(&mut tmp[..want])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("closed after {} of {len} body bytes", body.len()),
            ));
        }
        body.extend_from_slice(&tmp[..n]);
        std::thread::sleep(pause);
    }
    Ok((head, body))
}

/// (pid, state, ppid, pgrp) of every process.
pub fn processes() -> Vec<(i32, char, i32, i32)> {
    let mut v = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return v;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The command name is in parentheses and may hold spaces.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() < 3 {
            continue;
        }
        let state = f[0].chars().next().unwrap_or('?');
        let ppid = f[1].parse().unwrap_or(0);
        let pgrp = f[2].parse().unwrap_or(0);
        v.push((pid, state, ppid, pgrp));
    }
    v
}

/// Polls `left` until it returns nothing: how long that took, or what was
/// still there after `within`.
pub fn wait_until_empty(
    within: std::time::Duration,
    left: impl Fn() -> Vec<i32>,
) -> Result<std::time::Duration, Vec<i32>> {
    let t0 = std::time::Instant::now();
    loop {
        let l = left();
        if l.is_empty() {
            return Ok(t0.elapsed());
        }
        if t0.elapsed() >= within {
            return Err(l);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// php-cgi as Debian installs it (CGI and FastCGI tests).
pub const PHP_CGI: &str = "/usr/bin/php-cgi";

/// Fails (never skips) when `program` (a path, or a name looked up in PATH)
/// is missing, naming the Debian package that provides it.
pub fn require(program: &str, package: &str) {
    let found = if program.contains('/') {
        Path::new(program).is_file()
    } else {
        std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
    };
    assert!(
        found,
        "`{program}` is missing: this test needs the Debian package `{package}` \
         (apt-get install {package}); test.sh installs it when run as root"
    );
}

/// Live children of `ppid` (from /proc).
pub fn live_children(ppid: i32) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|&(_, st, pp, _)| pp == ppid && st != 'Z' && st != 'X')
        .map(|(p, ..)| p)
        .collect()
}

/// Stops a server the test started that has worker children (php-fpm):
/// SIGTERM (php-fpm's fast stop) to the master, up to 3 s for it to exit,
/// then SIGKILL to it and to any worker of it that outlived it.
pub fn stop_master(child: &mut Child) {
    let pid = child.id() as i32;
    let workers = live_children(pid);
    // SAFETY: our child, not yet reaped.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    for w in workers {
        // SAFETY: a worker of our child that may have outlived it; ESRCH
        // when it is gone is fine.
        unsafe {
            libc::kill(w, libc::SIGKILL);
        }
    }
}

/// The php-fpm binary (`/usr/sbin/php-fpm8.2` or whichever version the
/// package installed); a clear failure naming the package when missing.
pub fn php_fpm_binary() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/sbin")
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("php-fpm"))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found.pop().unwrap_or_else(|| {
        panic!(
            "no /usr/sbin/php-fpm*: this test needs the Debian package `php-fpm` \
             (apt-get install php-fpm); test.sh installs it when run as root"
        )
    })
}

// ---------------------------------------------------------------------------
// Started as root: the one process, or a root parent and its server process

/// `user` for one process started as root.
pub const ONE_PROCESS: &str = "root";
/// `user` for a root parent and its unprivileged server process.
pub const TWO_PROCESSES: &str = "www-data";

/// Fails a test that checks what Stoa does when started as root unless it
/// runs as root.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "this test checks what Stoa does when started as root: run it as root (CI and `sudo ./test.sh` do)"
    );
}

/// The uid of the account `user`.
pub fn account_uid(user: &str) -> u32 {
    let out = Command::new("id")
        .args(["-u", user])
        .output()
        .expect("run id");
    assert!(out.status.success(), "no user {user} on this machine");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a uid")
}

/// Whether process `pid` catches `sig` (the SigCgt mask in
/// /proc/PID/status).
pub fn catches(pid: i32, sig: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|mask| mask & (1u64 << (sig - 1)) != 0)
}

/// The server process under the privileged parent `parent`: its only
/// child (scripts and pools are the server process's children), within
/// `within`; else the children it has.
pub fn only_child(parent: i32, within: Duration) -> Result<i32, Vec<i32>> {
    let until = Instant::now() + within;
    loop {
        let kids = live_children(parent);
        if let [one] = kids[..] {
            return Ok(one);
        }
        if Instant::now() >= until {
            return Err(kids);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The real, effective, saved and filesystem uids of `pid`
/// (/proc/PID/status).
pub fn uids(pid: i32) -> Vec<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc status");
    let line = s
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .expect("a Uid line");
    line.split_whitespace()
        .skip(1)
        .map(|n| n.parse().expect("a uid"))
        .collect()
}

/// Raises a stop flag when dropped, also while a panic unwinds: load
/// threads that run until the flag is up then end even when the test
/// fails before it would raise the flag itself, so a failed assertion
/// fails the test instead of hanging it (a `thread::scope` joins them).
pub struct StopOnDrop<'a>(pub &'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A CGI script at `DIR/cgi-bin/seen.sh` that appends its request's query
/// string to `DIR/seen/seen.txt` and answers "ok": what a templated run sent,
/// seen from the server. Returns the path of `seen.txt`.
pub fn seen_cgi(dir: &TempDir) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    // Writable by the user the script runs as (nobody when the tests run
    // as root and the server drops to it).
    let room = dir.join("seen");
    std::fs::create_dir_all(&room).expect("mkdir seen");
    std::fs::set_permissions(&room, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let seen = room.join("seen.txt");
    let script = dir.write(
        "cgi-bin/seen.sh",
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$QUERY_STRING\" >> '{}'\n\
             printf 'Content-Type: text/plain\\r\\n\\r\\nok'\n",
            seen.display()
        ),
    );
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    seen
}

/// The query strings `seen_cgi` recorded, as `(client, seq)` from
/// `u=c{client}s{seq}`, checked: `n` of them, none twice, and each
/// client's request numbers 1, 2, ... without a gap (a closed loop's
/// client counts its own requests). The file is emptied for the next run.
pub fn seen_templated(seen: &Path, n: usize) -> Vec<(u64, u64)> {
    let text = std::fs::read_to_string(seen).unwrap_or_default();
    let _ = std::fs::remove_file(seen);
    let mut got: Vec<(u64, u64)> = text
        .lines()
        .map(|l| {
            let (c, s) = l
                .strip_prefix("u=c")
                .and_then(|r| r.split_once('s'))
                .unwrap_or_else(|| panic!("not a rendered template: {l:?}"));
            (
                c.parse().unwrap_or_else(|_| panic!("client in {l:?}")),
                s.parse().unwrap_or_else(|_| panic!("seq in {l:?}")),
            )
        })
        .collect();
    got.sort_unstable();
    assert_eq!(got.len(), n, "{text}");
    let mut want = got.clone();
    want.dedup();
    assert_eq!(want.len(), n, "a request sent twice: {text}");
    for (i, &(c, s)) in got.iter().enumerate() {
        let first = i == 0 || got[i - 1].0 != c;
        let expected = if first { 1 } else { got[i - 1].1 + 1 };
        assert!(c >= 1, "{text}");
        assert_eq!(
            s, expected,
            "client {c}'s requests are not numbered 1, 2, ...: {text}"
        );
    }
    got
}
