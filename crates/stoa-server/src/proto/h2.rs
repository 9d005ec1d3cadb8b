//! HTTP/2's side of an exchange: one stream of an `h2` connection. The
//! response head that [`crate::exchange`] encodes as HTTP/1-style header
//! lines is turned into an `http::Response` (connection-specific fields
//! dropped, RFC 9113 §8.2.2) when the first byte of the response has to
//! leave; the body goes out as DATA frames as the peer's flow-control
//! window allows; the request body comes in as DATA frames whose window
//! is given back only as the handler reads, so a slow application slows
//! the client down instead of filling memory.

use super::{BodyFail, Limits, MAX_DISCARD};
use bytes::Bytes;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use std::collections::VecDeque;
use std::fs::File;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::rc::Rc;
use std::time::Duration;
use tokio::time::{timeout, timeout_at, Instant};

/// Largest piece of a file read for one DATA write (h2 cuts it into
/// frames of the peer's max frame size).
const FILE_PIECE: u64 = 64 * 1024;

/// Response header fields that only mean something on an HTTP/1
/// connection; HTTP/2 forbids them (RFC 9113 §8.2.2).
const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

enum Piece {
    Mem(Bytes),
    File {
        file: Rc<File>,
        offset: u64,
        len: u64,
    },
}

/// One HTTP/2 stream, lent to the exchange of its request.
pub struct H2Stream {
    respond: Option<SendResponse<Bytes>>,
    send: Option<SendStream<Bytes>>,
    recv: RecvStream,
    pub peer: SocketAddr,
    pub local: Option<SocketAddr>,
    /// TLS version and cipher, or None for h2c.
    pub tls: Option<(&'static str, &'static str)>,
    pub(crate) status: u16,
    /// Header lines as `Name: value\r\n`, as the exchange encodes them.
    pub(crate) head: Vec<u8>,
    /// Small writes, gathered until the next flush.
    acc: Vec<u8>,
    queue: VecDeque<Piece>,
    recv_done: bool,
    /// The client asked for `100 Continue` and has not had it.
    continue_pending: bool,
    body_seen: u64,
    body_started: Option<Instant>,
    /// END_STREAM went out, or the stream failed.
    ended: bool,
    /// An NPH script's output being re-emitted (`exchange::nph`).
    pub(crate) nph: Option<Box<NphRelay>>,
    /// Trailer fields to end the response with (a proxied gRPC
    /// response's `grpc-status`): a HEADERS frame carries END_STREAM.
    pub(crate) trailers: Option<http::HeaderMap>,
}

/// Where `exchange::nph` is in an NPH script's output: kept with the
/// stream, the only carrier that needs it, so that an HTTP/1 exchange
/// carries nothing for it.
#[derive(Default)]
pub(crate) struct NphRelay {
    /// Output before the head was complete.
    pub head: Vec<u8>,
    /// Once the head went out: the body's framing.
    pub body: Option<stoa_h1::BodyDecoder>,
    /// The output was not a response: a 502 went out instead, the rest
    /// is dropped.
    pub failed: bool,
}

impl H2Stream {
    pub fn new(
        respond: SendResponse<Bytes>,
        recv: RecvStream,
        peer: SocketAddr,
        local: Option<SocketAddr>,
        tls: Option<(&'static str, &'static str)>,
        expect_continue: bool,
    ) -> H2Stream {
        let recv_done = recv.is_end_stream();
        H2Stream {
            respond: Some(respond),
            send: None,
            recv,
            peer,
            local,
            tls,
            status: 0,
            head: Vec::new(),
            acc: Vec::new(),
            queue: VecDeque::new(),
            recv_done,
            continue_pending: expect_continue && !recv_done,
            body_seen: 0,
            body_started: None,
            ended: false,
            nph: None,
            trailers: None,
        }
    }

    /// A response starts anew (a local redirect, or an error replacing
    /// one that was not sent).
    pub(crate) fn start(&mut self, status: u16) {
        self.status = status;
        self.head.clear();
    }

    pub(crate) fn push(&mut self, data: &[u8]) {
        self.acc.extend_from_slice(data);
    }

    fn seal(&mut self) {
        if !self.acc.is_empty() {
            let b = Bytes::from(std::mem::take(&mut self.acc));
            self.queue.push_back(Piece::Mem(b));
        }
    }

    pub(crate) fn push_mem(&mut self, body: Bytes) {
        self.seal();
        if !body.is_empty() {
            self.queue.push_back(Piece::Mem(body));
        }
    }

    pub(crate) fn push_file(&mut self, file: Rc<File>, offset: u64, len: u64) {
        self.seal();
        if len > 0 {
            self.queue.push_back(Piece::File { file, offset, len });
        }
    }

    /// The client waits for `100 Continue` before sending its body.
    pub fn continue_pending(&self) -> bool {
        self.continue_pending
    }

    pub fn body_done(&self) -> bool {
        self.recv_done
    }

    /// The response head, as `http` wants it.
    fn response(&self) -> http::Response<()> {
        let status = if self.status == 0 { 500 } else { self.status };
        head_of(status, &self.head)
    }

    /// Sends an informational response (103 Early Hints ...) before the
    /// final one; false when the stream is gone.
    pub(crate) fn interim(&mut self, status: u16, lines: &[u8]) -> bool {
        match self.respond.as_mut() {
            Some(r) => r.send_informational(head_of(status, lines)).is_ok(),
            None => false,
        }
    }

    /// Sends the head if it has not gone yet, then every queued piece of
    /// body, each as the flow-control window allows, waiting at most
    /// `idle` for the window to open. `end`: the response is complete
    /// (END_STREAM goes with its last frame). False when the stream is
    /// gone (reset, connection closed, or the client stopped reading).
    pub(crate) async fn flush(&mut self, end: bool, idle: Duration) -> bool {
        if self.ended {
            return false;
        }
        if self.status == 0 && !end {
            // Nothing started yet: there is no head to send.
            return true;
        }
        self.seal();
        // With trailers to send, the last DATA frame does not end the
        // stream: their HEADERS frame does.
        let trailers = if end { self.trailers.take() } else { None };
        let eos = end && trailers.is_none();
        if let Some(mut respond) = self.respond.take() {
            let empty = self.queue.is_empty();
            match respond.send_response(self.response(), eos && empty) {
                Ok(s) => self.send = Some(s),
                Err(e) => {
                    tracing::debug!("h2: sending a response head: {e}");
                    self.ended = true;
                    return false;
                }
            }
            if eos && empty {
                self.ended = true;
                return true;
            }
        }
        let Some(send) = self.send.as_mut() else {
            return false;
        };
        let had_pieces = !self.queue.is_empty();
        while let Some(piece) = self.queue.pop_front() {
            let last_piece = self.queue.is_empty();
            let ok = match piece {
                Piece::Mem(b) => send_bytes(send, b, eos && last_piece, idle).await,
                Piece::File { file, offset, len } => {
                    send_file(send, &file, offset, len, eos && last_piece, idle).await
                }
            };
            if !ok {
                self.ended = true;
                self.queue.clear();
                return false;
            }
        }
        if end {
            self.ended = true;
            if let Some(t) = trailers {
                return send.send_trailers(t).is_ok();
            }
            // Nothing was queued for this last flush: an empty DATA frame
            // carries END_STREAM.
            if !had_pieces && send.send_data(Bytes::new(), true).is_err() {
                return false;
            }
        }
        true
    }

    /// The request's trailer fields, once its body was read to the end
    /// (None: it had none, or the stream failed).
    pub(crate) async fn request_trailers(&mut self, within: Duration) -> Option<http::HeaderMap> {
        if !self.recv_done {
            return None;
        }
        let recv = &mut self.recv;
        match timeout(within, poll_fn(|cx| recv.poll_trailers(cx))).await {
            Ok(Ok(t)) => t,
            Ok(Err(_)) | Err(_) => None,
        }
    }

    /// The next piece of the request body, appended to `dst`; Ok(false) at
    /// its end. Flow-control window is released as it is read.
    pub(crate) async fn read_body(
        &mut self,
        limits: &Limits,
        max_body: u64,
        dst: &mut Vec<u8>,
    ) -> Result<bool, BodyFail> {
        if self.recv_done {
            return Ok(false);
        }
        if self.continue_pending {
            self.continue_pending = false;
            if let Some(r) = self.respond.as_mut() {
                let mut cont = http::Response::new(());
                *cont.status_mut() = http::StatusCode::CONTINUE;
                let _ = r.send_informational(cont);
            }
        }
        let started = *self.body_started.get_or_insert_with(Instant::now);
        // A client keeping up the minimum rate may take as long as its
        // body needs (as on HTTP/1).
        let earned = Duration::from_millis(
            self.body_seen
                .saturating_mul(1000)
                .checked_div(limits.body_min_rate)
                .unwrap_or(0),
        );
        let deadline = started + limits.body_timeout + earned;
        let recv = &mut self.recv;
        match timeout_at(deadline, poll_fn(|cx| recv.poll_data(cx))).await {
            Err(_) => Err(BodyFail::Slow),
            Ok(None) => {
                self.recv_done = true;
                Ok(false)
            }
            Ok(Some(Ok(data))) => {
                let n = data.len();
                self.body_seen += n as u64;
                // The window is given back for what was read, so the
                // client may send this much more.
                let _ = self.recv.flow_control().release_capacity(n);
                if self.body_seen > max_body {
                    return Err(BodyFail::TooLarge);
                }
                dst.extend_from_slice(&data);
                if self.recv.is_end_stream() {
                    self.recv_done = true;
                }
                Ok(n > 0 || !self.recv_done)
            }
            Ok(Some(Err(e))) => {
                tracing::debug!("h2: request body: {e}");
                if e.is_reset() || e.is_io() || e.is_go_away() {
                    Err(BodyFail::Gone)
                } else {
                    Err(BodyFail::Malformed)
                }
            }
        }
    }

    /// After a complete response, reads and drops what is left of the
    /// request body — at most [`MAX_DISCARD`] bytes, each piece within
    /// [`DRAIN_READ`] — so the stream ends as the client meant it to. A
    /// frame that breaks the protocol on the stream meanwhile still gets
    /// its stream error (RFC 9113 §5.4.2, §8.1.1) instead of landing on a
    /// stream already closed, whatever order the frames were read in.
    /// Past the bounds the stream is dropped, which resets it with
    /// NO_ERROR (§8.1). A client still waiting for `100 Continue` sends
    /// no body (RFC 9110 §10.1.1), so it is not waited for.
    pub(crate) async fn drain(&mut self) {
        if self.recv_done || self.continue_pending || !self.ended {
            return;
        }
        let mut dropped = 0u64;
        while dropped <= MAX_DISCARD {
            let recv = &mut self.recv;
            match timeout(DRAIN_READ, poll_fn(|cx| recv.poll_data(cx))).await {
                Ok(Some(Ok(data))) => {
                    dropped += data.len() as u64;
                    let _ = self.recv.flow_control().release_capacity(data.len());
                    if self.recv.is_end_stream() {
                        return;
                    }
                }
                // The end, a stream error, or no more within the bound.
                Ok(None) | Ok(Some(Err(_))) | Err(_) => return,
            }
        }
    }

    /// Resolves when the client resets the stream (true).
    pub async fn client_gone(&mut self) -> bool {
        if let Some(s) = self.send.as_mut() {
            let _ = poll_fn(|cx| s.poll_reset(cx)).await;
            return true;
        }
        if let Some(r) = self.respond.as_mut() {
            let _ = poll_fn(|cx| r.poll_reset(cx)).await;
            return true;
        }
        std::future::pending().await
    }

    /// Whether the client already reset the stream (checked once, without
    /// waiting: a stream opened and cancelled at once is not worth
    /// serving, CVE-2023-44487).
    pub fn was_reset(&mut self) -> bool {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match self.respond.as_mut() {
            Some(r) => r.poll_reset(&mut cx).is_ready(),
            None => false,
        }
    }

    /// Resets the stream (a response that cannot be completed: the
    /// client must not take a truncated body for a whole one).
    pub fn reset(&mut self) {
        if let Some(s) = self.send.as_mut() {
            s.send_reset(h2::Reason::INTERNAL_ERROR);
        } else if let Some(r) = self.respond.as_mut() {
            r.send_reset(h2::Reason::INTERNAL_ERROR);
        }
        self.ended = true;
    }
}

/// A response head from `status` and header lines as the exchange encodes
/// them (`Name: value\r\n`), without the fields HTTP/2 forbids.
fn head_of(status: u16, lines: &[u8]) -> http::Response<()> {
    let mut resp = http::Response::new(());
    *resp.status_mut() =
        http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = resp.headers_mut();
    for line in lines.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let name = &line[..colon];
        let value = stoa_h1::trim(&line[colon + 1..]);
        let Ok(name) = http::HeaderName::from_bytes(name) else {
            tracing::debug!("h2: dropped a header field with an invalid name");
            continue;
        };
        if CONNECTION_SPECIFIC.contains(&name.as_str()) {
            continue;
        }
        match http::HeaderValue::from_bytes(value) {
            Ok(v) => {
                headers.append(name, v);
            }
            Err(_) => tracing::debug!("h2: dropped header {name}: invalid value"),
        }
    }
    resp
}

/// How long [`H2Stream::drain`] waits for each piece of an unread body.
const DRAIN_READ: Duration = Duration::from_secs(2);

/// Waits for window to send up to `want` bytes; the amount granted, or
/// None when the stream failed or no window came within `idle`.
async fn capacity(send: &mut SendStream<Bytes>, want: usize, idle: Duration) -> Option<usize> {
    send.reserve_capacity(want);
    loop {
        let have = send.capacity();
        if have > 0 {
            return Some(have.min(want));
        }
        match timeout(idle, poll_fn(|cx| send.poll_capacity(cx))).await {
            Ok(Some(Ok(n))) if n > 0 => return Some(n.min(want)),
            Ok(Some(Ok(_))) => continue,
            _ => return None,
        }
    }
}

async fn send_bytes(send: &mut SendStream<Bytes>, mut b: Bytes, eos: bool, idle: Duration) -> bool {
    if b.is_empty() {
        return !eos || send.send_data(b, true).is_ok();
    }
    while !b.is_empty() {
        let Some(n) = capacity(send, b.len(), idle).await else {
            return false;
        };
        let chunk = b.split_to(n);
        if send.send_data(chunk, eos && b.is_empty()).is_err() {
            return false;
        }
    }
    true
}

async fn send_file(
    send: &mut SendStream<Bytes>,
    file: &File,
    mut offset: u64,
    mut left: u64,
    eos: bool,
    idle: Duration,
) -> bool {
    while left > 0 {
        let want = left.min(FILE_PIECE) as usize;
        let Some(n) = capacity(send, want, idle).await else {
            return false;
        };
        // A fresh buffer per piece: h2 keeps it until the frame is
        // written, so it cannot be reused.
        let mut buf = vec![0u8; n];
        let got = match file.read_at(&mut buf, offset) {
            Ok(0) | Err(_) => {
                // The file shrank or failed under us: the length promised
                // in the head cannot be kept.
                send.send_reset(h2::Reason::INTERNAL_ERROR);
                return false;
            }
            Ok(got) => got,
        };
        buf.truncate(got);
        offset += got as u64;
        left -= got as u64;
        if send.send_data(Bytes::from(buf), eos && left == 0).is_err() {
            return false;
        }
    }
    true
}
