//! One client connection: read, parse with stoa-h1, dispatch, queue the
//! response, repeat. Pipelined requests are answered in order and their
//! responses leave in one write once no complete request is left buffered.

use crate::config::{Handler, Matcher, Runtime, Site};
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
use tokio::io::AsyncReadExt;
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
        if status >= 400
            && status != 404
            && status != 403
            && status != 405
            && status != 412
            && status != 416
        {
            // After a protocol error the rest of the stream cannot be trusted.
            if matches!(status, 400 | 413 | 414 | 431 | 501 | 505 | 408) {
                self.keep_alive = false;
            }
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

/// Serves a connection until it closes, fails or times out.
pub async fn serve(mut stream: TcpStream, peer: SocketAddr, worker: Rc<Worker>, rt: Arc<Runtime>) {
    let limits = RequestLimits {
        max_head_bytes: rt.limits.max_header_bytes,
        max_uri_bytes: rt.limits.max_uri_bytes,
    };
    let mut shutdown = worker.shutdown.clone();
    let mut rbuf: Vec<u8> = Vec::new();
    let mut start = 0usize;
    let mut out = Output::default();
    let mut head = RequestHead::default();
    // The first request must arrive within header_timeout of the accept.
    let mut deadline = Instant::now() + rt.limits.header_timeout;
    let mut awaiting_head = true;

    loop {
        match head.parse(&rbuf[start..], &limits) {
            Ok(Some(n)) => {
                start += n;
                let closing = *shutdown.borrow();
                let keep = handle(&head, &rt, &worker, &mut out, peer, closing);
                let keep =
                    keep && consume_body(&head, &mut stream, &mut rbuf, &mut start, &rt).await;
                if !keep {
                    let _ = timeout_at(
                        Instant::now() + rt.limits.send_timeout,
                        out.flush(&mut stream),
                    )
                    .await;
                    break;
                }
                awaiting_head = false;
            }
            Ok(None) => {
                if !out.is_empty() {
                    match timeout_at(
                        Instant::now() + rt.limits.send_timeout,
                        out.flush(&mut stream),
                    )
                    .await
                    {
                        Ok(Ok(())) => {}
                        _ => break,
                    }
                }
                if start > 0 {
                    rbuf.drain(..start);
                    start = 0;
                }
                if !awaiting_head {
                    // Between requests: the idle limit applies until the
                    // first byte of the next one, then the head limit.
                    awaiting_head = true;
                    deadline = if rbuf.is_empty() {
                        Instant::now() + rt.limits.keepalive_timeout
                    } else {
                        Instant::now() + rt.limits.header_timeout
                    };
                }
                let idle = rbuf.is_empty();
                let wait = if idle {
                    // Nothing buffered: hand the buffers back to the worker
                    // while waiting, so an idle connection holds no buffer
                    // memory (10,000 idle keep-alive clients cost little).
                    worker.give_buf(std::mem::take(&mut rbuf));
                    worker.give_buf(out.take_buf());
                    tokio::select! {
                        biased;
                        r = stream.readable() => match r {
                            Ok(()) => Wait::Ready,
                            Err(_) => Wait::Eof,
                        },
                        _ = tokio::time::sleep_until(deadline) => Wait::Timeout,
                        _ = shutdown.changed() => Wait::Shutdown,
                    }
                } else {
                    if rbuf.capacity() - rbuf.len() < 1024 {
                        rbuf.reserve(4096);
                    }
                    tokio::select! {
                        biased;
                        r = stream.read_buf(&mut rbuf) => match r {
                            Ok(0) | Err(_) => Wait::Eof,
                            Ok(_) => Wait::Data,
                        },
                        _ = tokio::time::sleep_until(deadline) => Wait::Timeout,
                    }
                };
                match wait {
                    Wait::Ready => {
                        rbuf = worker.take_buf();
                        match stream.try_read_buf(&mut rbuf) {
                            Ok(0) => break,
                            // The first byte of a head starts its clock.
                            Ok(_) => deadline = Instant::now() + rt.limits.header_timeout,
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                            Err(_) => break,
                        }
                        out.adopt_buf(worker.take_buf());
                    }
                    Wait::Data => {}
                    Wait::Eof | Wait::Shutdown => break,
                    Wait::Timeout => {
                        if !rbuf.is_empty() {
                            // A client too slow to send its head (slowloris).
                            let mut reply = new_reply(&mut out, &worker, false, true, false);
                            reply.error(408, &[]);
                            let _ = timeout_at(
                                Instant::now() + Duration::from_secs(1),
                                out.flush(&mut stream),
                            )
                            .await;
                        }
                        break;
                    }
                }
            }
            Err(e) => {
                refuse(e, &head, &worker, &mut out, peer, &rbuf[start..]);
                let _ = timeout_at(
                    Instant::now() + rt.limits.send_timeout,
                    out.flush(&mut stream),
                )
                .await;
                break;
            }
        }
    }
    // Dropping the stream closes it. Lingering close (RFC 9112 §9.6) matters
    // when unread request bytes remain: shut down writing first so the
    // client sees the response before any reset.
    if start < rbuf.len() {
        let _ = socket2::SockRef::from(&stream).shutdown(std::net::Shutdown::Write);
        // Drain into a heap buffer: a stack array here would sit in every
        // connection's future for its whole life.
        let mut sink = vec![0u8; 4096];
        let until = Instant::now() + Duration::from_secs(2);
        while let Ok(Ok(n)) = timeout_at(until, stream.read(&mut sink)).await {
            if n == 0 {
                break;
            }
        }
    }
}

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
fn refuse(
    e: ParseError,
    head: &RequestHead,
    worker: &Worker,
    out: &mut Output,
    peer: SocketAddr,
    raw: &[u8],
) {
    let mut reply = new_reply(out, worker, false, false, false);
    reply.error(e.status(), &[]);
    let status = reply.status;
    let bytes = reply.body_bytes;
    let _ = head;
    // The request line as far as it can be read, for the log.
    let end = raw
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(raw.len())
        .min(512);
    worker.log_access(peer, &raw[..end], status, bytes, None, None);
}

/// Routes and answers one request. Returns whether the connection may
/// carry another request.
fn handle(
    head: &RequestHead,
    rt: &Runtime,
    worker: &Worker,
    out: &mut Output,
    peer: SocketAddr,
    closing: bool,
) -> bool {
    let keep_alive = head.keep_alive && !closing;
    let mut reply = new_reply(
        out,
        worker,
        head.version == Version::Http10,
        head.method == Method::Head,
        keep_alive,
    );
    if head.has_body() && head.expect_continue {
        // No handler here reads bodies yet: answer with the final status
        // and close rather than read a body the client has not sent
        // (RFC 9110 §10.1.1).
        reply.keep_alive = false;
    }
    if let Framing::Length(n) = head.framing {
        if n > rt.limits.max_body_bytes {
            reply.keep_alive = false;
            reply.error(413, &[]);
            return finish(head, worker, peer, reply);
        }
    }
    if head.target() == b"*" {
        // Asterisk form is only for server-wide OPTIONS (RFC 9112 §3.2.4).
        if head.method == Method::Options {
            reply.start(204);
            reply.header("Allow", b"GET, HEAD, OPTIONS");
            reply.end_head(None);
        } else {
            reply.error(400, &[]);
        }
        return finish(head, worker, peer, reply);
    }
    let host = host_name(head.host());
    match rt.site_for(host) {
        Some(site) => match route(site, head.path()) {
            Some(Handler::Static(cfg)) => {
                let mut cache = worker.cache.borrow_mut();
                static_files::serve(cfg, head, &mut cache, &mut reply);
            }
            None => reply.error(404, &[]),
        },
        None => reply.error(404, &[]),
    }
    finish(head, worker, peer, reply)
}

fn finish(head: &RequestHead, worker: &Worker, peer: SocketAddr, reply: Reply<'_>) -> bool {
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

/// The host name from a Host header: lowercase, without port or brackets'
/// port. Invalid or absent hosts select the first site.
fn host_name(h: Option<&[u8]>) -> &str {
    let Some(h) = h else { return "" };
    let h = match h.iter().rposition(|&b| b == b':') {
        Some(i) if !h[i..].contains(&b']') => &h[..i],
        _ => h,
    };
    std::str::from_utf8(h).unwrap_or("")
}

fn route<'s>(site: &'s Site, path: &[u8]) -> Option<&'s Handler> {
    for r in &site.routes {
        let hit = match &r.matcher {
            Matcher::Prefix(p) => path.starts_with(p.as_bytes()),
            Matcher::Suffix(s) => path.ends_with(s.as_bytes()),
        };
        if hit {
            return Some(&r.handler);
        }
    }
    site.fallback.as_ref()
}

/// Reads past the body of a request whose handler did not want it, so the
/// next request on the connection is parsed from the right place. Returns
/// false when the connection should close instead.
async fn consume_body(
    head: &RequestHead,
    stream: &mut TcpStream,
    rbuf: &mut Vec<u8>,
    start: &mut usize,
    rt: &Runtime,
) -> bool {
    if !head.has_body() {
        return true;
    }
    if head.expect_continue {
        return false;
    }
    if let Framing::Length(n) = head.framing {
        if n > MAX_DISCARD {
            return false;
        }
    }
    let mut dec = BodyDecoder::new(head.framing);
    let mut seen: u64 = 0;
    let deadline = Instant::now() + rt.limits.body_timeout;
    loop {
        loop {
            match dec.decode(&rbuf[*start..]) {
                Ok((0, _)) => break,
                Ok((n, data)) => {
                    seen += data.len() as u64;
                    *start += n;
                }
                Err(_) => return false,
            }
            if dec.is_done() {
                return true;
            }
        }
        if seen > MAX_DISCARD {
            return false;
        }
        rbuf.drain(..*start);
        *start = 0;
        if rbuf.capacity() - rbuf.len() < 1024 {
            rbuf.reserve(8192);
        }
        match timeout_at(deadline, stream.read_buf(rbuf)).await {
            Ok(Ok(n)) if n > 0 => {}
            _ => return false,
        }
    }
}
#[cfg(test)]
mod tests {
    /// Every connection, idle or not, holds its task's future: a large one
    /// multiplies by 10,000 idle keep-alive clients. Buffers are borrowed
    /// from the worker only while there are bytes to move.
    #[test]
    fn a_connection_future_stays_under_one_kib() {
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
            let w = std::rc::Rc::new(crate::worker::Worker::new(&rt, rx));
            let f = super::serve(c, a, w, rt);
            assert!(
                std::mem::size_of_val(&f) <= 1024,
                "{}",
                std::mem::size_of_val(&f)
            );
        });
    }
}
