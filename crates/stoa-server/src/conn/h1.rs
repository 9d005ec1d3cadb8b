//! One HTTP/1 client connection: read, parse with stoa-h1, route, queue
//! the response, repeat. Pipelined requests are answered in order and
//! their responses leave in one write once no complete request is left
//! buffered.

use crate::config::Runtime;
use crate::exchange::{Edge, Exchange};
use crate::local::{Proto, Worker};
use crate::log::access::{Combined, Entry};
use crate::proto::h1::{consume_body, linger, Io};
use crate::proto::output::Output;
use crate::proto::settle::settle;
use crate::proto::stream::{Rewind, Stream};
use crate::route;
use std::borrow::Cow;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use stoa_h1::response::push_status_line;
use stoa_h1::{ParseError, RequestHead, RequestLimits};
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

/// Why the connection loop stopped reading.
enum Wait {
    /// The socket is readable (nothing was read yet).
    Ready,
    Data,
    Eof,
    Timeout,
    Shutdown,
    /// Idle for `park::PARK_AFTER`: the connection leaves its task.
    Park,
}

/// Serves a connection until it closes, fails, times out or parks
/// (`resumed`: it comes back from the lot, `conn::park`). True when it
/// parked: the lot holds it (and its count) now.
pub async fn serve(
    stream: Stream,
    peer: SocketAddr,
    worker: Rc<Worker>,
    rt: Arc<Runtime>,
    resumed: bool,
) -> bool {
    let mut rt = rt;
    let mut limits = RequestLimits {
        max_head_bytes: rt.limits.max_header_bytes,
        max_uri_bytes: rt.limits.max_uri_bytes,
    };
    let mut io = Io::new(stream, Vec::new(), peer);
    let mut head = RequestHead::default();
    // The first request must arrive within header_timeout of the accept.
    let mut deadline = Instant::now() + rt.limits.header_timeout;
    let mut awaiting_head = true;
    // A parked connection had Nagle turned off before it parked.
    let mut nodelay = resumed;
    // The last request had a body that may not all have been read: closing
    // then needs a lingering close.
    let mut body_left = false;
    // No request yet: the bytes may be HTTP/2's preface instead.
    let mut first = !resumed;
    let mut h2c = false;
    // The first bytes of a head arrived and its clock (header_timeout) has
    // not been read yet: it is read only if the head turns out incomplete,
    // so a head that arrives whole (nearly all of them) costs no clock read.
    let mut head_clock = false;
    // Nothing read yet: the first read goes straight to the socket (see
    // `read_now`). Over TLS the handshake has read already.
    let mut fresh = !io.stream.is_tls();
    // This idle keep-alive connection parks `PARK_AFTER` into its wait (a
    // flag, not an instant: the connection's future stays as small).
    let mut may_park = false;
    let mut parked = false;

    loop {
        match head.parse(&io.rbuf[io.start..], &limits) {
            Ok(Some(n)) => {
                io.start += n;
                head_clock = false;
                if first {
                    first = false;
                    if let Some(s) = worker.stats() {
                        s.opened(proto(&io));
                    }
                }
                // A reload since the last request: this one (and the
                // limits of the next head) use the new configuration.
                if super::refresh(&mut rt) {
                    limits = RequestLimits {
                        max_head_bytes: rt.limits.max_header_bytes,
                        max_uri_bytes: rt.limits.max_uri_bytes,
                    };
                }
                let closing = *worker.shutdown.borrow();
                let (mut hsts, mut edge) = (None, Edge::none());
                let (p, rewritten) =
                    route::pick_request(&head, &rt, io.stream.is_tls(), &mut hsts, &mut edge);
                let head = rewritten.as_ref().unwrap_or(&head);
                body_left = head.has_body();
                // An error page is fetched by a subrequest, so a route
                // that has them runs asynchronously whatever its handler.
                let mut keep = if p.runs_async() || edge.error_pages.is_some() {
                    // Boxed, exchange and all: rare next to static files,
                    // and its state would otherwise sit in every
                    // connection's future.
                    Box::pin(async {
                        let mut ex = Exchange::h1(&mut io, head, &worker, &rt.limits, closing)
                            .with_hsts(hsts)
                            .with_edge(edge);
                        route::run(p, &mut ex, &rt, 0).await;
                        ex.keeps()
                    })
                    .await
                } else {
                    let mut ex = Exchange::h1(&mut io, head, &worker, &rt.limits, closing)
                        .with_hsts(hsts)
                        .with_edge(edge);
                    let sync = route::dispatch(p, &mut ex, &rt, 0, &[]).is_none();
                    debug_assert!(sync, "runs_async and dispatch disagree");
                    ex.keeps()
                };
                if keep && !io.body_done(head) {
                    // Boxed: rare, and its state would otherwise sit in
                    // every connection's future.
                    keep = Box::pin(consume_body(head, &mut io, &rt.limits)).await;
                }
                if !keep {
                    io.flush(rt.limits.send_timeout).await;
                    break;
                }
                // Kept: the body was read to its end.
                body_left = false;
                awaiting_head = false;
            }
            Ok(None) => {
                if !io.out.is_empty() && !io.flush(rt.limits.send_timeout).await {
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
                        // Only plaintext connections park (a TLS session
                        // is large, and rare next to them), and only where
                        // the keep-alive wait outlasts the park delay.
                        may_park = !io.stream.is_tls()
                            && rt.limits.keepalive_timeout > super::park::PARK_AFTER
                            && super::park::enabled();
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
                    if fresh || io.stream.tls_pending() {
                        Wait::Ready
                    } else {
                        let park_at = may_park
                            .then(|| {
                                deadline.checked_sub(
                                    rt.limits
                                        .keepalive_timeout
                                        .saturating_sub(super::park::PARK_AFTER),
                                )
                            })
                            .flatten();
                        tokio::select! {
                            biased;
                            r = io.stream.tcp().readable() => match r {
                                Ok(()) => Wait::Ready,
                                Err(_) => Wait::Eof,
                            },
                            _ = tokio::time::sleep_until(park_at.unwrap_or(deadline)) => {
                                if park_at.is_some() { Wait::Park } else { Wait::Timeout }
                            }
                            _ = worker.stopped() => Wait::Shutdown,
                        }
                    }
                } else {
                    if head_clock {
                        head_clock = false;
                        deadline = Instant::now() + rt.limits.header_timeout;
                    }
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
                        let got = match &mut io.stream {
                            Stream::Plain(s) if std::mem::take(&mut fresh) => {
                                read_now(s, &mut io.rbuf)
                            }
                            Stream::Plain(s) => read_clearing(s, &mut io.rbuf),
                            tls => tls.try_read_buf(&mut io.rbuf),
                        };
                        match got {
                            Ok(0) => break,
                            // The first bytes of a head start its clock
                            // (read when the head is found incomplete).
                            Ok(_) => {
                                head_clock = true;
                                may_park = false;
                            }
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                            Err(_) => break,
                        }
                        io.out.adopt_buf(worker.take_buf());
                    }
                    Wait::Data => {}
                    Wait::Eof | Wait::Shutdown => break,
                    Wait::Park => {
                        parked = !worker.is_stopping();
                        break;
                    }
                    Wait::Timeout => {
                        if !io.rbuf.is_empty() {
                            // A client too slow to send its head (slowloris).
                            error_page(&mut io.out, &worker, 408);
                            let _ = io.out.flush(&mut io.stream, Duration::from_secs(1)).await;
                        }
                        break;
                    }
                }
            }
            Err(_) if first && io.rbuf[io.start..].starts_with(H2_PREFACE) => {
                // HTTP/2 with prior knowledge (RFC 9113 §3.3): its preface
                // starts like a request line HTTP/1 cannot take.
                h2c = true;
                break;
            }
            Err(e) => {
                refuse(e, &worker, &mut io.out, peer, &io.rbuf[io.start..]);
                io.flush(rt.limits.send_timeout).await;
                // The rest of what the client sent is unread.
                body_left = true;
                break;
            }
        }
    }
    if parked {
        if let Stream::Plain(s) = io.stream {
            super::park::park(s, peer, rt, deadline, &worker);
            return true;
        }
    }
    if !first {
        if let Some(s) = worker.stats() {
            s.closed(proto(&io));
        }
    }
    if h2c {
        // What HTTP/1 kept for the connection (its output buffer) goes
        // now, not when this function ends with the HTTP/2 connection.
        let conn = h2c_stream(io);
        // Boxed: its state would otherwise sit in every HTTP/1
        // connection's future.
        // True when it parked.
        return crate::proto::stream::cold(super::h2::serve(conn, peer, worker, rt)).await;
    }
    if body_left || io.start < io.rbuf.len() {
        linger(&mut io.stream).await;
    } else if io.stream.is_tls() {
        // close_notify: the client can tell the end from a truncation.
        io.stream.shutdown_write();
    }
    if worker.is_stopping() {
        // The process exits soon: the client must have the response's
        // last bytes before the socket is let go (see `proto::settle`).
        // Boxed: rare, and its state would otherwise sit in every
        // connection's future.
        let fd = std::os::fd::AsFd::as_fd(io.stream.tcp());
        crate::proto::stream::cold(settle(fd, rt.limits.send_timeout)).await;
    }
    // Dropping the stream closes it.
    false
}

/// The connection's stream with the bytes read so far put back in
/// front, for HTTP/2; the rest of `io` is dropped here.
fn h2c_stream(io: Io) -> Rewind {
    Rewind::new(io.rbuf, io.stream)
}

/// What the status page counts this connection as.
fn proto(io: &Io) -> Proto {
    if io.stream.is_tls() {
        Proto::Http1Tls
    } else {
        Proto::Http1
    }
}

/// The start of HTTP/2's connection preface (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n";

/// Reads what the socket holds into `buf` (returns 0 at EOF, `WouldBlock`
/// when nothing was there). A short read (fewer bytes than `buf` had room
/// for) means the kernel's receive queue was empty at that moment, so the
/// socket's read readiness is cleared then, as nginx does after a short
/// `recv` (`rev->ready = 0`). Tokio clears it only on `EAGAIN`, which cost
/// one failing `recvfrom` after every response (issue 11's seam guard:
/// 2.001 recvfrom per request, 1.000 of them EAGAIN).
///
/// No wake-up is lost: `try_io` clears readiness only if its tick is still
/// the one it saw before the read (`ScheduledIo::set_readiness` with
/// `Tick::Clear`); bytes that arrive after the read raise a new edge-
/// triggered event, which bumps the tick and sets readiness again.
fn read_clearing(stream: &tokio::net::TcpStream, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    if buf.capacity() - buf.len() < 1024 {
        buf.reserve(4096);
    }
    let room = buf.capacity() - buf.len();
    let mut got = 0;
    let r = stream.try_io(tokio::io::Interest::READABLE, || {
        let n = stream.try_read_buf(buf)?;
        got = n;
        if n > 0 && n < room {
            // Short: report "would block" so that readiness is cleared.
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    });
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && got > 0 => Ok(got),
        r => r,
    }
}

/// The first read of a connection, straight from the socket rather than
/// through tokio's readiness, which is empty for a socket just registered
/// (its first epoll event comes with the next turn of the loop: one more
/// wake-up and poll per connection). The listeners defer the accept until
/// the client's first bytes are in (`listen::defer_accept`), so this read
/// nearly always finds the request; when it finds nothing (`WouldBlock`)
/// the loop waits for readiness as usual.
fn read_now(stream: &tokio::net::TcpStream, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    if buf.capacity() - buf.len() < 1024 {
        buf.reserve(4096);
    }
    let n = socket2::SockRef::from(stream).recv(buf.spare_capacity_mut())?;
    // SAFETY: `recv` initialized the first `n` bytes of the spare capacity
    // (it returns at most that capacity's length).
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}

/// A complete error response on a connection about to close, outside any
/// exchange (a head that could not be parsed, a head too slow to come).
fn error_page(out: &mut Output, worker: &Worker, status: u16) -> u64 {
    let b = out.buf();
    push_status_line(b, status);
    worker.push_date(b);
    let reason = stoa_h1::reason_phrase(status);
    let body =
        format!("<!DOCTYPE html>\n<title>{status} {reason}</title>\n<h1>{status} {reason}</h1>\n");
    b.extend_from_slice(b"Content-Type: text/html; charset=utf-8\r\nContent-Length: ");
    stoa_h1::push_u64(b, body.len() as u64);
    b.extend_from_slice(b"\r\nConnection: close\r\n\r\n");
    b.extend_from_slice(body.as_bytes());
    body.len() as u64
}

/// Answers a head that could not be parsed, and logs it.
fn refuse(e: ParseError, worker: &Worker, out: &mut Output, peer: SocketAddr, raw: &[u8]) {
    let status = e.status();
    let bytes = error_page(out, worker, status);
    // The request line as far as it can be read, for the log.
    let end = raw
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(raw.len())
        .min(512);
    let line = &raw[..end];
    worker.log_access(
        None,
        status,
        || Combined {
            peer,
            request_line: line,
            spoken: None,
            status,
            body_bytes: bytes,
            head: None,
            user: None,
        },
        || Entry {
            peer,
            request_line: Cow::Borrowed(line),
            head: None,
            protocol: "",
            tls: false,
            status,
            body_bytes: bytes,
            bytes_sent: bytes,
            body_received: raw.len().saturating_sub(line.len()) as u64,
            request_time: None,
            upstream_addr: None,
            upstream_time: None,
            user: None,
            complete: true,
            cache_status: None,
        },
    );
}

#[cfg(test)]
mod tests {
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
            let rt = std::sync::Arc::new(
                crate::config::for_dir_with(&ov, &crate::config::Files::disk()).expect("config"),
            );
            let (_tx, rx) = tokio::sync::watch::channel(false);
            let shared = std::sync::Arc::new(crate::local::Shared::new(1));
            let w = std::rc::Rc::new(crate::local::Worker::new(&rt.access_log, rx, shared));
            let f = super::serve(crate::proto::stream::Stream::Plain(c), a, w, rt, false);
            // 1256 bytes before the connection/handler seam, 1288 after
            // it (the connection's Io carries the request's body reader).
            assert!(
                std::mem::size_of_val(&f) <= 1344,
                "{}",
                std::mem::size_of_val(&f)
            );
        });
    }
}
