//! HTTP/1's side of an exchange: the connection's socket and buffers, the
//! request body as framed on the wire (Content-Length or chunked, with
//! `100 Continue` sent before the first read), discarding a body nobody
//! read, and the lingering close. The response's HTTP/1 framing (status
//! line, `Connection`, chunks) is written by [`crate::exchange`] into
//! [`Io::out`]; nothing here knows about handlers.

use super::output::Output;
use super::stream::Stream;
use super::{BodyFail, Limits, MAX_DISCARD};
use std::net::SocketAddr;
use std::time::Duration;
use stoa_h1::{BodyDecoder, Framing, RequestHead};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{timeout_at, Instant};

/// A connection's socket and buffers, lent to the exchange of each request.
pub struct Io {
    pub stream: Stream,
    /// Bytes read and not yet consumed start at `start`.
    pub rbuf: Vec<u8>,
    pub start: usize,
    pub out: Output,
    pub peer: SocketAddr,
    /// The local address, looked up once (CGI and FastCGI want it for
    /// every request).
    local: std::cell::Cell<Option<SocketAddr>>,
    /// The current request's body, once something asked for it (boxed:
    /// it would otherwise sit in every connection's future).
    pub(crate) reader: Option<Box<BodyReader>>,
}

impl Io {
    pub fn new(stream: Stream, rbuf: Vec<u8>, peer: SocketAddr) -> Io {
        Io {
            stream,
            rbuf,
            start: 0,
            out: Output::default(),
            peer,
            local: std::cell::Cell::new(None),
            reader: None,
        }
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        if self.local.get().is_none() {
            self.local.set(self.stream.local_addr().ok());
        }
        self.local.get()
    }

    pub fn is_tls(&self) -> bool {
        self.stream.is_tls()
    }

    /// Writes everything queued; fails when a client stops reading for
    /// longer than the send timeout (slow but steady readers are fine).
    pub async fn flush(&mut self, send_timeout: Duration) -> bool {
        self.out.flush(&mut self.stream, send_timeout).await.is_ok()
    }

    /// The next piece of the request body (see [`BodyReader::next`]), of
    /// at most `max_body` bytes (the route's limit or `limits`').
    pub async fn read_body(
        &mut self,
        head: &RequestHead,
        limits: &Limits,
        max_body: u64,
        dst: &mut Vec<u8>,
    ) -> Result<bool, BodyFail> {
        let mut r = match self.reader.take() {
            Some(r) => r,
            None => {
                let mut r = Box::new(BodyReader::new(head, limits));
                r.limit = max_body;
                r
            }
        };
        let res = r.next(self, dst).await;
        self.reader = Some(r);
        res
    }

    /// Whether the request body was read to its end (or there is none).
    pub fn body_done(&self, head: &RequestHead) -> bool {
        match &self.reader {
            Some(r) => r.is_done(),
            None => !head.has_body(),
        }
    }

    /// Waits until the client closes or sends more (pipelined bytes are
    /// kept for the next request). True when it is gone.
    pub async fn client_gone(&mut self) -> bool {
        match self
            .stream
            .readable()
            .await
            .and_then(|_| self.stream.try_read_buf(&mut self.rbuf))
        {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
            Err(_) => true,
        }
    }
}

/// Reads a request body from the connection: what is buffered first, then
/// the socket, decoded from its framing, bounded by size and time.
pub(crate) struct BodyReader {
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
    pub(crate) fn new(head: &RequestHead, limits: &Limits) -> BodyReader {
        let now = Instant::now();
        BodyReader {
            dec: BodyDecoder::new(head.framing),
            seen: 0,
            limit: limits.max_body_bytes,
            deadline: now + limits.body_timeout,
            started: now,
            grace: limits.body_timeout,
            min_rate: limits.body_min_rate,
            continue_pending: head.expect_continue,
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        self.dec.is_done()
    }

    /// Appends the next piece of the body to `dst`. Returns Ok(false) once
    /// the body is complete.
    async fn next(&mut self, io: &mut Io, dst: &mut Vec<u8>) -> Result<bool, BodyFail> {
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
                if timeout_at(self.deadline, async {
                    io.stream
                        .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                        .await?;
                    // TLS may hold the record back until flushed.
                    io.stream.flush().await
                })
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

/// After a response: reads past the rest of a request body nobody read, so
/// the next request on the connection is parsed from the right place.
/// Returns false when the connection should close instead: a body whose
/// reading a handler started and left, a client still waiting for
/// `100 Continue`, a body too large to be worth reading.
pub async fn consume_body(head: &RequestHead, io: &mut Io, limits: &Limits) -> bool {
    if io.body_done(head) {
        return true;
    }
    if io.reader.is_some() {
        return false;
    }
    // The answer (an error, usually: 404, 405, 401, 503) goes out now, not
    // once the body is in: the client may be slow, or waiting for it.
    if !io.out.is_empty() && !io.flush(limits.send_timeout).await {
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
    let mut reader = BodyReader::new(head, limits);
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

/// Lingering close (RFC 9112 §9.6; Apache's and nginx's
/// `lingering_close`): the client may still be sending (a body nobody
/// read, pipelined requests), and closing a socket with unread bytes makes
/// the kernel answer RST, which destroys the response still in flight to
/// the client. So: shut down writing (the client sees the response, then
/// EOF), then read and discard until the client closes, each read waiting
/// at most [`LINGER_READ`], in all at most [`LINGER_TOTAL`].
pub async fn linger(stream: &mut Stream) {
    stream.shutdown_write();
    // A heap buffer: a stack array here would sit in every connection's
    // future for its whole life.
    let mut sink = vec![0u8; 16 * 1024];
    let until = Instant::now() + LINGER_TOTAL;
    loop {
        let step = (Instant::now() + LINGER_READ).min(until);
        match timeout_at(step, stream.tcp_mut().read(&mut sink)).await {
            Ok(Ok(n)) if n > 0 => {}
            _ => break,
        }
    }
}

/// How long a lingering close waits for each piece (nginx's
/// `lingering_timeout`) and in all (its `lingering_time`).
const LINGER_READ: Duration = Duration::from_secs(5);
const LINGER_TOTAL: Duration = Duration::from_secs(30);
