//! One client connection: read, parse with stoa-h1, dispatch, queue the
//! response, repeat. Pipelined requests are answered in order and their
//! responses leave in one write once no complete request is left buffered.

use crate::config::{Handler, Route, Runtime, Site};
use crate::output::Output;
use crate::static_files;
use crate::worker::Worker;
use bytes::Bytes;
use std::fs::File;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use stoa_h1::response::push_status_line;
use stoa_h1::{BodyDecoder, Framing, Method, ParseError, RequestHead, RequestLimits, Version};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};

/// Bodies nobody asked for (a POST to a static file) are read and dropped
/// up to this size to keep the connection; past it the connection closes.
const MAX_DISCARD: u64 = 1 << 20;

/// A response being written into the connection's output queue. Handlers
/// see only this: they never learn the HTTP version of the client.
pub struct Reply<'a> {
    out: &'a mut Output,
    worker: &'a Worker,
    pub keep_alive: bool,
    http10: bool,
    head_only: bool,
    pub status: u16,
    pub body_bytes: u64,
}

impl<'a> Reply<'a> {
    /// Status line, Date and Server.
    pub fn start(&mut self, status: u16) {
        self.status = status;
        let b = self.out.buf();
        push_status_line(b, status);
        self.worker.push_date(b);
    }

    pub fn header(&mut self, name: &str, value: &[u8]) {
        stoa_h1::response::push_header(self.out.buf(), name, value);
    }

    /// Pre-encoded header lines, each ending in CRLF.
    pub fn raw_headers(&mut self, lines: &[u8]) {
        self.out.buf().extend_from_slice(lines);
    }

    /// Content-Length (when the status has a body), Connection, blank line.
    pub fn end_head(&mut self, len: Option<u64>) {
        let b = self.out.buf();
        if let Some(len) = len {
            b.extend_from_slice(b"Content-Length: ");
            stoa_h1::push_u64(b, len);
            b.extend_from_slice(b"\r\n");
        }
        if !self.keep_alive {
            b.extend_from_slice(b"Connection: close\r\n\r\n");
        } else if self.http10 {
            b.extend_from_slice(b"Connection: keep-alive\r\n\r\n");
        } else {
            b.extend_from_slice(b"\r\n");
        }
    }

    /// Ends a head whose body length is unknown: chunked for HTTP/1.1,
    /// delimited by closing the connection for HTTP/1.0. Returns whether
    /// the body is to be chunked.
    pub fn end_head_stream(&mut self) -> bool {
        if self.head_only {
            self.end_head(None);
            return false;
        }
        if self.http10 {
            self.keep_alive = false;
            self.end_head(None);
            false
        } else {
            self.out
                .buf()
                .extend_from_slice(b"Transfer-Encoding: chunked\r\n");
            self.end_head(None);
            true
        }
    }

    pub fn is_head(&self) -> bool {
        self.head_only
    }

    /// A shared body (cached file); skipped for HEAD.
    pub fn body_mem(&mut self, body: Bytes) {
        if self.head_only {
            return;
        }
        self.body_bytes += body.len() as u64;
        if body.len() <= 2048 {
            // Cheaper to copy than to add an iovec.
            self.out.buf().extend_from_slice(&body);
        } else {
            self.out.push_mem(body);
        }
    }

    pub fn body_bytes(&mut self, bytes: &[u8]) {
        if !self.head_only {
            self.body_bytes += bytes.len() as u64;
            self.out.buf().extend_from_slice(bytes);
        }
    }

    pub fn body_file(&mut self, file: Rc<File>, offset: u64, len: u64) {
        if !self.head_only {
            self.body_bytes += len;
            self.out.push_file(file, offset, len);
        }
    }

    /// A complete response with a small HTML body saying what happened.
    pub fn error(&mut self, status: u16, headers: &[(&str, &[u8])]) {
        if matches!(status, 400 | 408 | 413 | 414 | 431 | 501 | 505) {
            // After a protocol error the rest of the stream cannot be trusted.
            self.keep_alive = false;
        }
        self.start(status);
        for (n, v) in headers {
            self.header(n, v);
        }
        let reason = stoa_h1::reason_phrase(status);
        let mut body = Vec::with_capacity(96);
        body.extend_from_slice(b"<!DOCTYPE html>\n<title>");
        stoa_h1::push_u64(&mut body, u64::from(status));
        body.push(b' ');
        body.extend_from_slice(reason.as_bytes());
        body.extend_from_slice(b"</title>\n<h1>");
        stoa_h1::push_u64(&mut body, u64::from(status));
        body.push(b' ');
        body.extend_from_slice(reason.as_bytes());
        body.extend_from_slice(b"</h1>\n");
        self.header("Content-Type", b"text/html; charset=utf-8");
        self.end_head(Some(body.len() as u64));
        self.body_bytes(&body);
    }
}

/// Why the connection loop stopped reading.
enum Wait {
    /// The socket is readable (nothing was read yet).
    Ready,
    Data,
    Eof,
    Timeout,
    Shutdown,
}

/// A connection's socket and buffers, lent to handlers that need to read a
/// request body or stream a response.
pub struct Io {
    pub stream: TcpStream,
    /// Bytes read and not yet consumed start at `start`.
    pub rbuf: Vec<u8>,
    pub start: usize,
    pub out: Output,
    pub peer: SocketAddr,
    /// The local address, looked up once (CGI and FastCGI want it for
    /// every request).
    local: std::cell::Cell<Option<SocketAddr>>,
}

impl Io {
    pub fn new(stream: TcpStream, rbuf: Vec<u8>, peer: SocketAddr) -> Io {
        Io {
            stream,
            rbuf,
            start: 0,
            out: Output::default(),
            peer,
            local: std::cell::Cell::new(None),
        }
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        if self.local.get().is_none() {
            self.local.set(self.stream.local_addr().ok());
        }
        self.local.get()
    }

    /// Writes everything queued; fails when a client stops reading for
    /// longer than the send timeout (slow but steady readers are fine).
    pub async fn flush(&mut self, rt: &Runtime) -> bool {
        self.out
            .flush(&mut self.stream, rt.limits.send_timeout)
            .await
            .is_ok()
    }
}

/// What a request needs from the worker and the configuration.
pub struct Ctx<'a> {
    pub worker: &'a Worker,
    pub rt: &'a Runtime,
    /// The server is shutting down: answer, then close.
    pub closing: bool,
}

impl<'a> Ctx<'a> {
    pub fn reply<'o>(&'o self, out: &'o mut Output, head: &RequestHead) -> Reply<'o> {
        new_reply(
            out,
            self.worker,
            head.version == Version::Http10,
            head.method == Method::Head,
            head.keep_alive && !self.closing,
        )
    }
}

/// Serves a connection until it closes, fails or times out.
pub async fn serve(stream: TcpStream, peer: SocketAddr, worker: Rc<Worker>, rt: Arc<Runtime>) {
    let limits = RequestLimits {
        max_head_bytes: rt.limits.max_header_bytes,
        max_uri_bytes: rt.limits.max_uri_bytes,
    };
    let mut shutdown = worker.shutdown.clone();
    let mut io = Io::new(stream, Vec::new(), peer);
    let mut head = RequestHead::default();
    // The first request must arrive within header_timeout of the accept.
    let mut deadline = Instant::now() + rt.limits.header_timeout;
    let mut awaiting_head = true;
    let mut nodelay = false;
    // The last request had a body that may not all have been read: closing
    // then needs a lingering close.
    let mut body_left = false;

    loop {
        match head.parse(&io.rbuf[io.start..], &limits) {
            Ok(Some(n)) => {
                io.start += n;
                let ctx = Ctx {
                    worker: &worker,
                    rt: &rt,
                    closing: *shutdown.borrow(),
                };
                let (p, rewritten) = pick(&head, &rt);
                let head = rewritten.as_ref().unwrap_or(&head);
                body_left = head.has_body();
                let keep = match p {
                    Pick::Cgi(..) | Pick::FastCgi(..) | Pick::Guarded(_) => {
                        Box::pin(dispatch(p, head, &mut io, &ctx, 0, &[])).await
                    }
                    other => {
                        let keep = answer(other, head, &ctx, &mut io.out, peer);
                        // Boxed: rare, and its state would otherwise sit in
                        // every connection's future.
                        keep && (!head.has_body()
                            || Box::pin(consume_body(head, &mut io, &rt)).await)
                    }
                };
                if !keep {
                    io.flush(&rt).await;
                    break;
                }
                // Kept: the body was read to its end.
                body_left = false;
                awaiting_head = false;
            }
            Ok(None) => {
                if !io.out.is_empty() && !io.flush(&rt).await {
                    break;
                }
                if io.start > 0 {
                    io.rbuf.drain(..io.start);
                    io.start = 0;
                }
                if !awaiting_head {
                    // Between requests: the idle limit applies until the
                    // first byte of the next one, then the head limit.
                    awaiting_head = true;
                    if !nodelay {
                        // Like nginx, only a connection that stays open needs
                        // Nagle off (later small responses must not wait for
                        // an ACK); one-shot connections save the syscall.
                        nodelay = true;
                        let _ = io.stream.set_nodelay(true);
                    }
                    deadline = if io.rbuf.is_empty() {
                        Instant::now() + rt.limits.keepalive_timeout
                    } else {
                        Instant::now() + rt.limits.header_timeout
                    };
                }
                let idle = io.rbuf.is_empty();
                let wait = if idle {
                    // Nothing buffered: hand the buffers back to the worker
                    // while waiting, so an idle connection holds no buffer
                    // memory (10,000 idle keep-alive clients cost little).
                    worker.give_buf(std::mem::take(&mut io.rbuf));
                    worker.give_buf(io.out.take_buf());
                    tokio::select! {
                        biased;
                        r = io.stream.readable() => match r {
                            Ok(()) => Wait::Ready,
                            Err(_) => Wait::Eof,
                        },
                        _ = tokio::time::sleep_until(deadline) => Wait::Timeout,
                        _ = shutdown.changed() => Wait::Shutdown,
                    }
                } else {
                    if io.rbuf.capacity() - io.rbuf.len() < 1024 {
                        io.rbuf.reserve(4096);
                    }
                    tokio::select! {
                        biased;
                        r = io.stream.read_buf(&mut io.rbuf) => match r {
                            Ok(0) | Err(_) => Wait::Eof,
                            Ok(_) => Wait::Data,
                        },
                        _ = tokio::time::sleep_until(deadline) => Wait::Timeout,
                    }
                };
                match wait {
                    Wait::Ready => {
                        io.rbuf = worker.take_buf();
                        match io.stream.try_read_buf(&mut io.rbuf) {
                            Ok(0) => break,
                            // The first byte of a head starts its clock.
                            Ok(_) => deadline = Instant::now() + rt.limits.header_timeout,
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                            Err(_) => break,
                        }
                        io.out.adopt_buf(worker.take_buf());
                    }
                    Wait::Data => {}
                    Wait::Eof | Wait::Shutdown => break,
                    Wait::Timeout => {
                        if !io.rbuf.is_empty() {
                            // A client too slow to send its head (slowloris).
                            let mut reply = new_reply(&mut io.out, &worker, false, false, false);
                            reply.error(408, &[]);
                            let _ = io.out.flush(&mut io.stream, Duration::from_secs(1)).await;
                        }
                        break;
                    }
                }
            }
            Err(e) => {
                refuse(e, &worker, &mut io.out, peer, &io.rbuf[io.start..]);
                io.flush(&rt).await;
                // The rest of what the client sent is unread.
                body_left = true;
                break;
            }
        }
    }
    if body_left || io.start < io.rbuf.len() {
        linger(&mut io.stream).await;
    }
    // Dropping the stream closes it.
}

/// Lingering close (RFC 9112 §9.6; Apache's and nginx's
/// `lingering_close`): the client may still be sending (a body nobody
/// read, pipelined requests), and closing a socket with unread bytes makes
/// the kernel answer RST, which destroys the response still in flight to
/// the client. So: shut down writing (the client sees the response, then
/// EOF), then read and discard until the client closes, each read waiting
/// at most [`LINGER_READ`], in all at most [`LINGER_TOTAL`].
async fn linger(stream: &mut TcpStream) {
    let _ = socket2::SockRef::from(&*stream).shutdown(std::net::Shutdown::Write);
    // A heap buffer: a stack array here would sit in every connection's
    // future for its whole life.
    let mut sink = vec![0u8; 16 * 1024];
    let until = Instant::now() + LINGER_TOTAL;
    loop {
        let step = (Instant::now() + LINGER_READ).min(until);
        match timeout_at(step, stream.read(&mut sink)).await {
            Ok(Ok(n)) if n > 0 => {}
            _ => break,
        }
    }
}

/// How long a lingering close waits for each piece (nginx's
/// `lingering_timeout`) and in all (its `lingering_time`).
const LINGER_READ: Duration = Duration::from_secs(5);
const LINGER_TOTAL: Duration = Duration::from_secs(30);

fn new_reply<'a>(
    out: &'a mut Output,
    worker: &'a Worker,
    http10: bool,
    head_only: bool,
    keep_alive: bool,
) -> Reply<'a> {
    Reply {
        out,
        worker,
        keep_alive,
        http10,
        head_only,
        status: 0,
        body_bytes: 0,
    }
}

/// Answers a head that could not be parsed, and logs it.
fn refuse(e: ParseError, worker: &Worker, out: &mut Output, peer: SocketAddr, raw: &[u8]) {
    let mut reply = new_reply(out, worker, false, false, false);
    reply.error(e.status(), &[]);
    let status = reply.status;
    let bytes = reply.body_bytes;
    // The request line as far as it can be read, for the log.
    let end = raw
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(raw.len())
        .min(512);
    worker.log_access(peer, &raw[..end], status, bytes, None, None);
}

/// Where a request goes.
pub enum Pick<'r> {
    /// With the decoded, normalized path the route was chosen by.
    Static(&'r static_files::StaticConfig, String),
    Cgi(&'r crate::cgi::CgiConfig, String),
    FastCgi(&'r crate::fastcgi::FastCgiRoute, String),
    /// A route with a FastCGI Authorizer (the pool's index): ask it first,
    /// then pick again with [`pick_unguarded`].
    Guarded(usize),
    /// The status page.
    ServerStatus(&'r crate::status::StatusConfig),
    /// Answered without a handler (404, 413, OPTIONS *...).
    Status(u16),
    OptionsStar,
}

/// Chooses the handler for a request: limits first, then the site by Host,
/// then the route. When routing changed the target (a rewrite, an index or
/// `try_files` redirect), the request as the handler is to see it comes
/// back too; its REQUEST_URI stays the client's.
pub fn pick<'r>(head: &RequestHead, rt: &'r Runtime) -> (Pick<'r>, Option<RequestHead>) {
    pick_with(head, rt, true)
}

/// [`pick`] once the route's Authorizer said yes.
pub fn pick_unguarded<'r>(head: &RequestHead, rt: &'r Runtime) -> (Pick<'r>, Option<RequestHead>) {
    pick_with(head, rt, false)
}

/// Internal redirects (index scripts, `try_files`, front controllers)
/// followed by one routing before giving up with 500.
const MAX_INTERNAL: usize = 10;

/// What one routing step decided.
enum Step<'r> {
    Done(Pick<'r>),
    /// Route again with this path (decoded) and query.
    Redirect(String, Option<Vec<u8>>),
}

fn pick_with<'r>(
    head: &RequestHead,
    rt: &'r Runtime,
    guard: bool,
) -> (Pick<'r>, Option<RequestHead>) {
    if let Framing::Length(n) = head.framing {
        if n > rt.limits.max_body_bytes {
            return (Pick::Status(413), None);
        }
    }
    if head.target() == b"*" {
        // Asterisk form is only for server-wide OPTIONS (RFC 9112 §3.2.4).
        let p = if head.method == Method::Options {
            Pick::OptionsStar
        } else {
            Pick::Status(400)
        };
        return (p, None);
    }
    let Some(site) = rt.site_for(host_name(head.host())) else {
        return (Pick::Status(404), None);
    };
    // Routes see the path decoded and normalized, as the file system will:
    // matching the raw path would let `/index%2ephp` or `//cgi-bin/x` miss
    // their route and reach the static handler as source. Normalizing also
    // refuses control characters (a `%0a` that would steer a PATH_INFO
    // split: CVE-2019-11043) and `..` above the root.
    let Ok(mut norm) = crate::http::path::normalize(head.path()) else {
        return (Pick::Status(400), None);
    };
    let mut changed: Option<Option<Vec<u8>>> = None;
    if !head.is_rewritten() {
        for rw in &site.rewrites {
            let Some(caps) = rw.from.captures(&norm) else {
                continue;
            };
            let mut to = String::new();
            caps.expand(&rw.to, &mut to);
            let (path, q) = match to.split_once('?') {
                Some((p, q)) => (p.to_owned(), Some(q.to_owned())),
                None => (to, None),
            };
            // The request's own query follows the rule's (nginx `rewrite`).
            let orig = changed
                .clone()
                .unwrap_or_else(|| head.query().map(<[u8]>::to_vec));
            let query = match (q, orig) {
                (Some(q), Some(o)) if !o.is_empty() => {
                    let mut v = q.into_bytes();
                    v.push(b'&');
                    v.extend_from_slice(&o);
                    Some(v)
                }
                (Some(q), _) => Some(q.into_bytes()),
                (None, o) => o,
            };
            match crate::http::path::normalize(path.as_bytes()) {
                Ok(n) => norm = n,
                Err(_) => return (Pick::Status(400), None),
            }
            changed = Some(query);
        }
    }
    for _ in 0..MAX_INTERNAL {
        if !site.allow_dotfiles && has_dotfile(&norm) {
            return (Pick::Status(403), rewritten_head(head, &norm, &changed));
        }
        let route = route(site, &norm);
        if let (Some(pool), true) = (route.and_then(|r| r.authorizer), guard) {
            return (Pick::Guarded(pool), rewritten_head(head, &norm, &changed));
        }
        let handler = route.map(|r| &r.handler).or(site.fallback.as_ref());
        let query = match &changed {
            Some(q) => q.as_deref(),
            None => head.query(),
        };
        let step = match route.and_then(|r| r.try_files.as_deref()) {
            Some(tf) => match try_files(site, tf, &norm, query) {
                TryFiles::Found(path) => {
                    norm = path;
                    route_step(site, handler, norm, query)
                }
                TryFiles::Status(s) => Step::Done(Pick::Status(s)),
                TryFiles::Redirect(path, q) => Step::Redirect(path, q),
            },
            None => route_step(site, handler, norm, query),
        };
        match step {
            Step::Done(p) => {
                let head = match &p {
                    Pick::Static(_, n) | Pick::Cgi(_, n) | Pick::FastCgi(_, n) => {
                        rewritten_head(head, n, &changed)
                    }
                    _ => None,
                };
                return (p, head);
            }
            Step::Redirect(path, q) => {
                match crate::http::path::normalize(path.as_bytes()) {
                    Ok(n) => norm = n,
                    Err(_) => return (Pick::Status(400), None),
                }
                changed = Some(q);
            }
        }
    }
    tracing::error!("routing: more than {MAX_INTERNAL} internal redirects for {norm}");
    (Pick::Status(500), None)
}

/// The request with its target replaced, when routing changed it.
fn rewritten_head(
    head: &RequestHead,
    norm: &str,
    changed: &Option<Option<Vec<u8>>>,
) -> Option<RequestHead> {
    let query = changed.as_ref()?;
    let mut target = crate::http::path::encode(norm).into_bytes();
    if let Some(q) = query {
        target.push(b'?');
        target.extend_from_slice(q);
    }
    Some(head.rewritten(&target))
}

/// A path segment starting with '.' (`.git`, `.env`, `.htpasswd`), other
/// than `/.well-known/` (RFC 8615).
fn has_dotfile(norm: &str) -> bool {
    let mut rest = norm;
    while let Some(i) = rest.find("/.") {
        let seg = &rest[i + 1..];
        let seg = seg.split('/').next().unwrap_or("");
        if !(i == 0 && std::ptr::eq(rest, norm) && seg == ".well-known") {
            return true;
        }
        rest = &rest[i + 2..];
    }
    false
}

/// The handler for a path that routing settled on.
fn route_step<'r>(
    site: &'r Site,
    handler: Option<&'r Handler>,
    mut norm: String,
    query: Option<&[u8]>,
) -> Step<'r> {
    match handler {
        Some(Handler::Static(cfg)) => {
            // An index that a script route runs is run (an internal
            // redirect), never served.
            if let Some(name) = cfg.script_index(&norm) {
                norm.push_str(name);
                return Step::Redirect(norm, query.map(<[u8]>::to_vec));
            }
            Step::Done(Pick::Static(cfg, norm))
        }
        Some(Handler::Cgi(cfg)) => {
            if let Some(name) = cfg.dir_index(&norm, &site.index) {
                norm.push_str(name);
                return Step::Redirect(norm, query.map(<[u8]>::to_vec));
            }
            Step::Done(Pick::Cgi(cfg, norm))
        }
        Some(Handler::FastCgi(cfg)) => Step::Done(Pick::FastCgi(cfg, norm)),
        Some(Handler::Status(cfg)) => Step::Done(Pick::ServerStatus(cfg)),
        Some(Handler::Php(php)) => php_step(site, php, norm),
        Some(Handler::Deny) => Step::Done(Pick::Status(403)),
        None => Step::Done(Pick::Status(404)),
    }
}

/// The PHP preset (Caddy's `php_fastcgi`): a path through a `.php` file
/// runs it (the rest is PATH_INFO); another existing file is static (never
/// a `.php`); a directory runs its index.php; anything else runs the front
/// controller.
fn php_step<'r>(site: &'r Site, php: &'r crate::config::PhpRoute, mut norm: String) -> Step<'r> {
    let Some(root) = site.root.as_deref() else {
        return Step::Done(Pick::Status(404));
    };
    let root = root.to_string_lossy();
    let is_file = |p: &str| std::fs::metadata(format!("{root}{p}")).is_ok_and(|m| m.is_file());
    if let Some(at) = crate::config::split_at(&norm, ".php") {
        if is_file(&norm[..at]) {
            return Step::Done(Pick::FastCgi(&php.fastcgi, norm));
        }
    } else {
        match std::fs::metadata(format!("{root}{norm}")) {
            Ok(m) if m.is_file() => return Step::Done(Pick::Static(&php.statics, norm)),
            Ok(m) if m.is_dir() => {
                if norm.ends_with('/') && is_file(&format!("{norm}index.php")) {
                    norm.push_str("index.php");
                    return Step::Done(Pick::FastCgi(&php.fastcgi, norm));
                }
                // The static handler redirects to the slash, or serves
                // another index or a listing.
                return Step::Done(Pick::Static(&php.statics, norm));
            }
            _ => {}
        }
    }
    match &php.front_controller {
        Some(fc) if is_file(fc) => Step::Done(Pick::FastCgi(&php.fastcgi, fc.clone())),
        _ => Step::Done(Pick::Status(404)),
    }
}

enum TryFiles {
    /// This file or directory exists: serve it with the route's handler.
    Found(String),
    Status(u16),
    /// The last entry: route again.
    Redirect(String, Option<Vec<u8>>),
}

/// nginx `try_files`: each entry but the last names a file (a directory
/// when it ends in '/') under the site root; `$uri` is the path,
/// `$query_string` (or `$args`) the query. The last is a URI or `=CODE`.
fn try_files(site: &Site, entries: &[String], norm: &str, query: Option<&[u8]>) -> TryFiles {
    let q = String::from_utf8_lossy(query.unwrap_or(b""));
    let expand = |e: &str| {
        e.replace("$uri", norm)
            .replace("$query_string", &q)
            .replace("$args", &q)
    };
    let root = site
        .root
        .as_deref()
        .map(|r| r.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (last, files) = entries.split_last().unwrap_or((&entries[0], &[]));
    for e in files {
        let path = expand(e);
        let Ok(n) = crate::http::path::normalize(path.as_bytes()) else {
            continue;
        };
        let found = std::fs::metadata(format!("{root}{n}")).is_ok_and(|m| {
            if n.ends_with('/') {
                m.is_dir()
            } else {
                m.is_file()
            }
        });
        if found {
            return TryFiles::Found(n);
        }
    }
    if let Some(code) = last.strip_prefix('=') {
        return TryFiles::Status(code.parse().unwrap_or(404));
    }
    let to = expand(last);
    match to.split_once('?') {
        Some((p, q)) => TryFiles::Redirect(p.to_owned(), Some(q.as_bytes().to_vec())),
        None => TryFiles::Redirect(to, query.map(<[u8]>::to_vec)),
    }
}

/// Answers a request whose handler runs synchronously. Returns whether the
/// connection may carry another request.
pub fn answer(
    p: Pick<'_>,
    head: &RequestHead,
    ctx: &Ctx<'_>,
    out: &mut Output,
    peer: SocketAddr,
) -> bool {
    let mut reply = ctx.reply(out, head);
    if head.has_body() && head.expect_continue {
        // These handlers never read a body: answer with the final status
        // and close rather than wait for a body the client has not sent
        // (RFC 9110 §10.1.1).
        reply.keep_alive = false;
    }
    match p {
        Pick::Static(cfg, norm) => {
            let mut cache = ctx.worker.cache.borrow_mut();
            static_files::serve(cfg, head, &norm, &mut cache, &mut reply);
        }
        Pick::OptionsStar => {
            reply.start(204);
            reply.header("Allow", b"GET, HEAD, OPTIONS");
            reply.end_head(None);
        }
        Pick::Status(s) => reply.error(s, &[]),
        Pick::ServerStatus(cfg) => crate::status::serve(cfg, head, ctx, peer.ip(), &mut reply),
        Pick::Cgi(..) | Pick::FastCgi(..) | Pick::Guarded(_) => reply.error(500, &[]),
    }
    finish(head, ctx.worker, peer, reply)
}

/// Logs the exchange; returns whether the connection stays open.
pub fn finish(head: &RequestHead, worker: &Worker, peer: SocketAddr, reply: Reply<'_>) -> bool {
    worker.log_access(
        peer,
        head.request_line(),
        reply.status,
        reply.body_bytes,
        head.header("referer"),
        head.header("user-agent"),
    );
    reply.keep_alive
}

/// The host name from a Host header, without its port (case is kept;
/// matching ignores it). Invalid or absent hosts select the first site.
pub fn host_name(h: Option<&[u8]>) -> &str {
    let Some(h) = h else { return "" };
    let h = match h.iter().rposition(|&b| b == b':') {
        Some(i) if !h[i..].contains(&b']') => &h[..i],
        _ => h,
    };
    std::str::from_utf8(h).unwrap_or("")
}

/// The first route that takes a path, in the order the config sorted
/// them (deny, suffixes, prefixes longest first); None: the site's root.
fn route<'s>(site: &'s Site, path: &str) -> Option<&'s Route> {
    site.routes.iter().find(|r| r.matcher.matches(path))
}

/// A request for a route with a FastCGI Authorizer (§6.3): the application
/// answers first; on 200 the route's handler runs with the variables it
/// granted, otherwise its response goes to the client. Local redirects come
/// through here too, so they are authorized like any request.
pub(crate) async fn guarded(
    head: &RequestHead,
    pool: usize,
    io: &mut Io,
    ctx: &Ctx<'_>,
    depth: u8,
) -> bool {
    let vars = match crate::fastcgi::authorize(head, pool, io, ctx).await {
        crate::fastcgi::Authz::Allow(v) => v,
        crate::fastcgi::Authz::Answered(keep) => {
            // The request body was not the Authorizer's to read.
            return keep && (!head.has_body() || consume_body(head, io, ctx.rt).await);
        }
    };
    let (p, rewritten) = pick_unguarded(head, ctx.rt);
    let head = rewritten.as_ref().unwrap_or(head);
    dispatch(p, head, io, ctx, depth, &vars).await
}

/// Runs the handler routing chose. `vars` are an Authorizer's grants;
/// `depth` counts local redirects.
pub(crate) async fn dispatch(
    p: Pick<'_>,
    head: &RequestHead,
    io: &mut Io,
    ctx: &Ctx<'_>,
    depth: u8,
    vars: &[(String, Vec<u8>)],
) -> bool {
    match p {
        Pick::Cgi(c, norm) => {
            Box::pin(crate::cgi::serve(head, c, norm, io, ctx, depth, vars)).await
        }
        Pick::FastCgi(c, norm) => {
            Box::pin(crate::fastcgi::serve(head, c, norm, io, ctx, depth, vars)).await
        }
        Pick::Guarded(pool) => Box::pin(guarded(head, pool, io, ctx, depth)).await,
        other => {
            let keep = answer(other, head, ctx, &mut io.out, io.peer);
            keep && (!head.has_body() || Box::pin(consume_body(head, io, ctx.rt)).await)
        }
    }
}

/// Why a request body could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFail {
    /// Larger than `max_body_bytes` (413).
    TooLarge,
    /// Bad chunked framing (400).
    Malformed,
    /// The client went away.
    Gone,
    /// The client sent too slowly (408).
    Slow,
    /// The body could not be kept (a temporary file failed: 500).
    Spool,
}

/// Reads a request body from the connection: what is buffered first, then
/// the socket, decoded from its framing, bounded by size and time.
pub struct BodyReader {
    dec: BodyDecoder,
    seen: u64,
    limit: u64,
    /// When the body must be in by if no more arrives: `body_timeout`
    /// after the start, moved on a second per `body_min_rate` bytes.
    deadline: Instant,
    started: Instant,
    grace: Duration,
    min_rate: u64,
    /// `100 Continue` still to be sent before the first read.
    continue_pending: bool,
}

impl BodyReader {
    pub fn new(head: &RequestHead, rt: &Runtime) -> BodyReader {
        let now = Instant::now();
        BodyReader {
            dec: BodyDecoder::new(head.framing),
            seen: 0,
            limit: rt.limits.max_body_bytes,
            deadline: now + rt.limits.body_timeout,
            started: now,
            grace: rt.limits.body_timeout,
            min_rate: rt.limits.body_min_rate,
            continue_pending: head.expect_continue,
        }
    }

    pub fn is_done(&self) -> bool {
        self.dec.is_done()
    }

    /// Appends the next piece of the body to `dst`. Returns Ok(false) once
    /// the body is complete.
    pub async fn next(&mut self, io: &mut Io, dst: &mut Vec<u8>) -> Result<bool, BodyFail> {
        loop {
            if self.dec.is_done() {
                return Ok(false);
            }
            let before = dst.len();
            loop {
                match self.dec.decode(&io.rbuf[io.start..]) {
                    Ok((0, _)) => break,
                    Ok((n, data)) => {
                        dst.extend_from_slice(data);
                        io.start += n;
                    }
                    Err(_) => return Err(BodyFail::Malformed),
                }
                if self.dec.is_done() {
                    break;
                }
            }
            let got = (dst.len() - before) as u64;
            self.seen += got;
            // A chunk whose size line already passes the limit is refused
            // before its data is read.
            if self.seen.saturating_add(self.dec.announced()) > self.limit {
                return Err(BodyFail::TooLarge);
            }
            if got > 0 && self.min_rate > 0 {
                // A client keeping up the minimum rate may take as long as
                // its body needs; one that stalls is cut off.
                let earned = Duration::from_millis(self.seen.saturating_mul(1000) / self.min_rate);
                self.deadline = self.started + self.grace + earned;
            }
            if got > 0 || self.dec.is_done() {
                return Ok(!self.dec.is_done() || got > 0);
            }
            if self.continue_pending {
                // The client waits for this before sending the body
                // (RFC 9110 §10.1.1).
                self.continue_pending = false;
                if timeout_at(
                    self.deadline,
                    io.stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n"),
                )
                .await
                .is_err()
                {
                    return Err(BodyFail::Gone);
                }
            }
            io.rbuf.drain(..io.start);
            io.start = 0;
            if io.rbuf.capacity() - io.rbuf.len() < 4096 {
                io.rbuf.reserve(16 * 1024);
            }
            match timeout_at(self.deadline, io.stream.read_buf(&mut io.rbuf)).await {
                Ok(Ok(n)) if n > 0 => {}
                Ok(_) => return Err(BodyFail::Gone),
                Err(_) => return Err(BodyFail::Slow),
            }
        }
    }
}

/// Reads past the body of a request whose handler did not want it, so the
/// next request on the connection is parsed from the right place. Returns
/// false when the connection should close instead.
pub async fn consume_body_pub(head: &RequestHead, io: &mut Io, rt: &Runtime) -> bool {
    consume_body(head, io, rt).await
}

async fn consume_body(head: &RequestHead, io: &mut Io, rt: &Runtime) -> bool {
    if !head.has_body() {
        return true;
    }
    // The answer (an error, usually: 404, 405, 401, 503) goes out now, not
    // once the body is in: the client may be slow, or waiting for it.
    if !io.out.is_empty() && !io.flush(rt).await {
        return false;
    }
    if head.expect_continue {
        return false;
    }
    if let Framing::Length(n) = head.framing {
        if n > MAX_DISCARD {
            return false;
        }
    }
    let mut reader = BodyReader::new(head, rt);
    reader.limit = MAX_DISCARD;
    let mut sink = Vec::new();
    loop {
        sink.clear();
        match reader.next(io, &mut sink).await {
            Ok(true) => {}
            Ok(false) => return true,
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn dot_segments_other_than_well_known_are_dotfiles() {
        for p in [
            "/.git/config",
            "/a/.env",
            "/a/b/.htpasswd",
            "/.well-known/x/.git",
            "/x/..y",
        ] {
            assert!(super::has_dotfile(p), "{p}");
        }
        for p in ["/", "/a.b/c", "/.well-known/acme-challenge/x", "/a/b."] {
            assert!(!super::has_dotfile(p), "{p}");
        }
        // Only the top-level /.well-known/ is special (RFC 8615).
        assert!(super::has_dotfile("/a/.well-known/x"));
    }

    /// Every connection, idle or not, holds its task's future (about 1 KiB
    /// now; the bound only catches a regression): a large one
    /// multiplies by 10,000 idle keep-alive clients. Buffers are borrowed
    /// from the worker only while there are bytes to move.
    #[test]
    fn a_connection_future_stays_small() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let a = l.local_addr().expect("addr");
            let c = tokio::net::TcpStream::connect(a).await.expect("connect");
            let ov = crate::config::Overrides {
                root: Some(".".into()),
                ..Default::default()
            };
            let rt = std::sync::Arc::new(crate::config::for_dir(&ov).expect("config"));
            let (_tx, rx) = tokio::sync::watch::channel(false);
            let shared = std::sync::Arc::new(crate::worker::Shared::new(1));
            let w = std::rc::Rc::new(crate::worker::Worker::new(&rt, rx, shared));
            let f = super::serve(c, a, w, rt);
            assert!(
                std::mem::size_of_val(&f) <= 1280,
                "{}",
                std::mem::size_of_val(&f)
            );
        });
    }
}
