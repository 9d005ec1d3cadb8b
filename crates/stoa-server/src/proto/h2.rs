//! HTTP/2's side of an exchange: one stream of a connection that
//! [`crate::conn::h2`] drives with Stoa's sans-IO codec (`stoa_h2`). The
//! connection task and the streams share one [`Shared`] (the codec, and
//! what each stream received) behind a `RefCell`: everything runs on the
//! worker's thread, so there is no lock, and a stream that writes its
//! response queues frames in the codec's output, which the connection
//! task writes once per turn of its loop.
//!
//! The response head that [`crate::exchange`] encodes as HTTP/1-style
//! header lines is HPACK-encoded (connection-specific fields dropped,
//! RFC 9113 §8.2.2) when the first byte of the response has to leave;
//! the body goes out as DATA frames as the peer's flow-control window and
//! the connection's output bound allow; the request body comes in as DATA
//! frames whose window is given back only as the handler reads, so a
//! slow application slows the client down instead of filling memory.

use super::body::{Piece, Pieces};
use super::{BodyFail, Limits, MAX_DISCARD};
use bytes::Bytes;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::fs::File;
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;
use stoa_h2::hpack::Encoder;
use stoa_h2::{Conn, Reason};
use tokio::time::{timeout, timeout_at, Instant};

/// Largest piece of a file read for one DATA write (the codec cuts it
/// into frames of the peer's max frame size).
const FILE_PIECE: usize = 64 * 1024;

/// Response header fields that only mean something on an HTTP/1
/// connection; HTTP/2 forbids them (RFC 9113 §8.2.2).
const CONNECTION_SPECIFIC: [&[u8]; 5] = [
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"transfer-encoding",
    b"upgrade",
];

/// What the connection task and its streams share.
pub(crate) struct Shared {
    pub(crate) codec: Conn,
    /// The streams a handler runs for, or whose request body is being
    /// dropped after the handler ended.
    pub(crate) slots: Vec<Slot>,
    /// The connection task, woken to write what streams queued.
    pub(crate) writer: Option<Waker>,
    /// The connection task is in its turn (polling a handler inline):
    /// it writes at the end of the turn, no need to wake it.
    pub(crate) in_turn: bool,
    /// Streams waiting for the output to shrink.
    pub(crate) room: Vec<Waker>,
    /// Output (bytes not yet written) past which streams wait: the
    /// `[http2] max_send_buffer` of the whole connection, so a client
    /// that does not read costs this much memory at most.
    pub(crate) max_output: usize,
    /// The connection is gone: every stream fails.
    pub(crate) closed: bool,
    /// The worker's date block (`Date` and `Server` lines) last seen, and
    /// its HPACK encoding: it changes once a second.
    date: (Vec<u8>, Vec<u8>),
    /// The last `content-length` sent and its HPACK encoding: a
    /// connection mostly asks for the same few files (a field Huffman-
    /// coded anew cost ~290 instructions per response).
    length: (u64, Vec<u8>),
    /// Reused for encoding header blocks.
    block: Vec<u8>,
    /// Head buffers of streams that ended, for the next ones.
    spare_heads: Vec<Vec<u8>>,
    /// Request heads of streams that ended, refilled for the next ones
    /// (their buffers reused: two allocations fewer per request).
    pub(crate) spare_requests: Vec<stoa_h1::RequestHead>,
    /// The client's verified certificate (TLS), read once for every
    /// stream of the connection.
    pub(crate) client_cert: Option<Arc<crate::http::client_cert::ClientCert>>,
}

/// One stream's state on the connection side.
pub(crate) struct Slot {
    pub(crate) id: u32,
    /// Request body received and not yet read.
    pub(crate) body: VecDeque<Bytes>,
    /// Bytes in `body`: their window goes back when they are read, or
    /// when the stream ends.
    pub(crate) unread: usize,
    /// END_STREAM came.
    pub(crate) end: bool,
    pub(crate) trailers: Option<Vec<(Bytes, Bytes)>>,
    /// The stream was reset (by the client, or for a stream error).
    pub(crate) reset: bool,
    /// The handler's task, waiting for something on this stream.
    pub(crate) waker: Option<Waker>,
    /// The handler ended before the request body did: the rest is
    /// dropped as it comes, up to this many more bytes.
    pub(crate) discard: Option<u64>,
}

impl Slot {
    pub(crate) fn new(id: u32, end: bool) -> Slot {
        Slot {
            id,
            body: VecDeque::new(),
            unread: 0,
            end,
            trailers: None,
            reset: false,
            waker: None,
            discard: None,
        }
    }

    pub(crate) fn wake(&mut self) {
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }
}

impl Shared {
    pub(crate) fn new(codec: Conn, max_output: usize) -> Shared {
        Shared {
            codec,
            slots: Vec::new(),
            writer: None,
            in_turn: false,
            room: Vec::new(),
            max_output,
            closed: false,
            date: (Vec::new(), Vec::new()),
            length: (u64::MAX, Vec::new()),
            block: Vec::new(),
            spare_heads: Vec::new(),
            spare_requests: Vec::new(),
            client_cert: None,
        }
    }

    /// The codec, when the connection parks (everything else here is
    /// made again when it comes back).
    pub(crate) fn into_codec(self) -> Conn {
        self.codec
    }

    /// Where stream `id`'s slot is (the newest streams are looked for
    /// first: they are the likeliest).
    #[inline]
    pub(crate) fn find(&self, id: u32) -> Option<usize> {
        self.slots.iter().rposition(|s| s.id == id)
    }

    pub(crate) fn slot(&mut self, id: u32) -> Option<&mut Slot> {
        let i = self.find(id)?;
        Some(&mut self.slots[i])
    }

    /// Wakes the connection task to write what was queued.
    #[inline]
    pub(crate) fn wake_writer(&mut self) {
        if self.in_turn {
            return;
        }
        if let Some(w) = self.writer.as_ref() {
            w.wake_by_ref();
        }
    }

    /// Wakes every stream (the connection ended, or a window opened on
    /// all of them).
    pub(crate) fn wake_all(&mut self) {
        for s in &mut self.slots {
            s.wake();
        }
        for w in self.room.drain(..) {
            w.wake();
        }
    }

    /// Bytes the output may still grow by.
    #[inline]
    fn room(&self) -> usize {
        self.max_output.saturating_sub(self.codec.output_len())
    }

    /// Whether stream `id` can no longer be written to.
    fn gone(&self, id: u32) -> bool {
        self.closed || self.find(id).is_none_or(|i| self.slots[i].reset)
    }

    /// HEADERS for a response head: `status`, then the header lines
    /// (`pre`: those from..to are already encoded, as this).
    fn send_head(
        &mut self,
        id: u32,
        status: u16,
        lines: &[u8],
        pre: Option<&(usize, usize, Rc<[u8]>)>,
        length: Option<(usize, u64)>,
        end: bool,
    ) {
        let mut block = std::mem::take(&mut self.block);
        block.clear();
        Encoder::status(&mut block, status);
        let (lines, length) = match length {
            Some((at, n)) if at <= lines.len() => (&lines[..at], Some(n)),
            _ => (lines, None),
        };
        match pre {
            Some((from, to, enc)) if *to <= lines.len() => {
                self.encode_lines(&mut block, &lines[..*from]);
                block.extend_from_slice(enc);
                encode_fields(&mut block, &lines[*to..]);
            }
            _ => self.encode_lines(&mut block, lines),
        }
        if let Some(n) = length {
            let (last, enc) = &mut self.length;
            if *last != n || enc.is_empty() {
                *last = n;
                enc.clear();
                encode_length(enc, n);
            }
            block.extend_from_slice(enc);
        }
        self.codec.send_headers(id, &block, end);
        self.block = block;
    }

    /// A whole response that is only a head (END_STREAM with it), sent by
    /// the connection itself (a 431 for a header list too large).
    pub(crate) fn send_whole_head(&mut self, id: u32, status: u16, lines: &[u8]) {
        self.send_head(id, status, lines, None, None, true);
    }

    /// HPACK for header lines as the exchange writes them (`Name:
    /// value\r\n`), names lowercased, without the fields HTTP/2 forbids.
    /// The worker's date block, which starts most heads, is encoded once
    /// a second.
    fn encode_lines(&mut self, block: &mut Vec<u8>, mut lines: &[u8]) {
        if lines.starts_with(b"Date: ") {
            if let Some(end) = date_block_len(lines) {
                let (src, enc) = &mut self.date;
                if src.as_slice() != &lines[..end] {
                    src.clear();
                    src.extend_from_slice(&lines[..end]);
                    enc.clear();
                    encode_fields(enc, &lines[..end]);
                }
                block.extend_from_slice(enc);
                lines = &lines[end..];
            }
        }
        encode_fields(block, lines);
    }
}

/// `content-length: n` as HPACK (a literal without indexing, its name
/// from the static table: the same bytes whatever the connection's
/// dynamic table holds, RFC 7541 §6.2.2).
fn encode_length(block: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    Encoder::field(block, b"content-length", &digits[at..]);
}

/// The length of the worker's date block at the start of `lines`
/// (`Date: <29 bytes>\r\nServer: stoa\r\n`), if that is what starts them.
fn date_block_len(lines: &[u8]) -> Option<usize> {
    const SERVER: &[u8] = b"\r\nServer: stoa\r\n";
    let end = 6 + 29 + SERVER.len();
    (lines.len() >= end && &lines[6 + 29..end] == SERVER).then_some(end)
}

/// The HPACK encoding of header lines, to keep and reuse.
pub(crate) fn encoded(lines: &[u8]) -> Rc<[u8]> {
    let mut b = Vec::with_capacity(lines.len());
    encode_fields(&mut b, lines);
    b.into()
}

/// Appends the HPACK encoding of header lines to `block`.
pub(crate) fn encode_fields(block: &mut Vec<u8>, lines: &[u8]) {
    if lines.is_empty() {
        // The usual case after a cached file's fields.
        return;
    }
    let mut name_buf = [0u8; 64];
    let mut long = Vec::new();
    for line in lines.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let name = &line[..colon];
        let value = stoa_h1::trim(&line[colon + 1..]);
        if name.is_empty() || !name.iter().all(|&b| stoa_h1::is_tchar(b)) {
            tracing::debug!("h2: dropped a header field with an invalid name");
            continue;
        }
        if value.iter().any(|&b| b == 0 || b == b'\r' || b == b'\n') {
            tracing::debug!("h2: dropped a header field with an invalid value");
            continue;
        }
        let lower: &[u8] = if name.len() <= name_buf.len() {
            let b = &mut name_buf[..name.len()];
            for (d, s) in b.iter_mut().zip(name) {
                *d = s.to_ascii_lowercase();
            }
            b
        } else {
            long.clear();
            long.extend(name.iter().map(u8::to_ascii_lowercase));
            &long
        };
        if CONNECTION_SPECIFIC.contains(&lower) {
            continue;
        }
        Encoder::field(block, lower, value);
    }
}

/// One HTTP/2 stream, lent to the exchange of its request.
pub struct H2Stream {
    shared: Rc<RefCell<Shared>>,
    id: u32,
    pub peer: SocketAddr,
    pub local: Option<SocketAddr>,
    /// TLS version and cipher, or None for h2c.
    pub tls: Option<(&'static str, &'static str)>,
    pub(crate) status: u16,
    /// Header lines as `Name: value\r\n`, as the exchange encodes them.
    pub(crate) head: Vec<u8>,
    /// Lines of `head` (from, to) whose HPACK encoding was made before
    /// (a cached file's fields), and that encoding.
    pre: Option<(usize, usize, Rc<[u8]>)>,
    /// Where the `content-length` line starts in `head`, and its value:
    /// the last line, encoded without being parsed again.
    length: Option<(usize, u64)>,
    /// The body: small writes gathered, then pieces waiting for window.
    queue: Pieces,
    /// The response's HEADERS went.
    head_sent: bool,
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
    /// The stream `id` of the connection `shared`, whose slot the
    /// connection task made; `ended`: the request came with END_STREAM.
    /// The client's verified certificate, over TLS with one.
    pub fn client_cert(&self) -> Option<Arc<crate::http::client_cert::ClientCert>> {
        self.shared.borrow().client_cert.clone()
    }

    pub(crate) fn new(
        shared: Rc<RefCell<Shared>>,
        id: u32,
        peer: SocketAddr,
        local: Option<SocketAddr>,
        tls: Option<(&'static str, &'static str)>,
        expect_continue: bool,
        ended: bool,
    ) -> H2Stream {
        let head = shared.borrow_mut().spare_heads.pop().unwrap_or_default();
        H2Stream {
            shared,
            id,
            peer,
            local,
            tls,
            status: 0,
            head,
            pre: None,
            length: None,
            queue: Pieces::default(),
            head_sent: false,
            recv_done: ended,
            continue_pending: expect_continue && !ended,
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
        self.pre = None;
        self.length = None;
    }

    /// The head's `content-length` (its last field).
    pub(crate) fn content_length(&mut self, len: u64) {
        self.length = Some((self.head.len(), len));
        self.head.extend_from_slice(b"content-length: ");
        stoa_h1::push_u64(&mut self.head, len);
        self.head.extend_from_slice(b"\r\n");
    }

    /// Header lines whose HPACK encoding `enc` was made before.
    pub(crate) fn pre_encoded(&mut self, lines: &[u8], enc: &Rc<[u8]>) {
        let at = self.head.len();
        self.head.extend_from_slice(lines);
        self.pre = Some((at, self.head.len(), enc.clone()));
    }

    /// The head's lines for response filters, which may change any of
    /// them: an encoding made before no longer holds.
    pub(crate) fn head_for_filters(&mut self) -> (&mut Vec<u8>, usize) {
        self.pre = None;
        (&mut self.head, 0)
    }

    pub(crate) fn push(&mut self, data: &[u8]) {
        self.queue.push(data);
    }

    pub(crate) fn push_mem(&mut self, body: Bytes) {
        self.queue.push_mem(body);
    }

    pub(crate) fn push_file(&mut self, file: Rc<File>, offset: u64, len: u64) {
        self.queue.push_file(file, offset, len);
    }

    /// The client waits for `100 Continue` before sending its body.
    pub fn continue_pending(&self) -> bool {
        self.continue_pending
    }

    pub fn body_done(&self) -> bool {
        self.recv_done
    }

    /// Sends an informational response (103 Early Hints ...) before the
    /// final one; false when the stream is gone.
    pub(crate) fn interim(&mut self, status: u16, lines: &[u8]) -> bool {
        if self.ended || self.head_sent {
            return false;
        }
        let mut sh = self.shared.borrow_mut();
        if sh.gone(self.id) {
            return false;
        }
        sh.send_head(self.id, status, lines, None, None, false);
        sh.wake_writer();
        true
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
        self.queue.seal();
        // With trailers to send, the last DATA frame does not end the
        // stream: their HEADERS frame does.
        let trailers = if end { self.trailers.take() } else { None };
        let eos = end && trailers.is_none();
        if !self.head_sent {
            self.head_sent = true;
            let empty = self.queue.is_empty();
            let status = if self.status == 0 { 500 } else { self.status };
            let mut sh = self.shared.borrow_mut();
            if sh.gone(self.id) {
                self.ended = true;
                return false;
            }
            sh.send_head(
                self.id,
                status,
                &self.head,
                self.pre.as_ref(),
                self.length,
                eos && empty,
            );
            if eos && empty {
                self.ended = true;
                sh.wake_writer();
                return true;
            }
        }
        let had_pieces = !self.queue.is_empty();
        while !self.queue.is_empty() {
            if !self.send_piece(eos, idle).await {
                self.ended = true;
                self.queue.clear();
                self.shared.borrow_mut().wake_writer();
                return false;
            }
        }
        let mut sh = self.shared.borrow_mut();
        if end {
            self.ended = true;
            if sh.gone(self.id) {
                return false;
            }
            if let Some(t) = trailers {
                let mut block = std::mem::take(&mut sh.block);
                block.clear();
                for (name, value) in &t {
                    Encoder::field(&mut block, name.as_str().as_bytes(), value.as_bytes());
                }
                sh.codec.send_trailers(self.id, &block);
                sh.block = block;
            } else if !had_pieces {
                // Nothing was queued for this last flush: an empty DATA
                // frame carries END_STREAM.
                sh.codec.send_data(self.id, &[], true);
            }
        }
        sh.wake_writer();
        true
    }

    /// Sends what the window and the output allow of the first queued
    /// piece (all of it, when they allow); false when the stream failed.
    async fn send_piece(&mut self, eos: bool, idle: Duration) -> bool {
        let want = match self.queue.front() {
            Some(Piece::Mem(b)) => b.len(),
            Some(Piece::File { len, .. }) => (*len).min(FILE_PIECE as u64) as usize,
            None => return true,
        };
        let Some(n) = self.capacity(want, idle).await else {
            return false;
        };
        let last = self.queue.len() == 1;
        let id = self.id;
        let mut sh = self.shared.borrow_mut();
        let sh = &mut *sh;
        let done = match self.queue.front_mut() {
            Some(Piece::Mem(b)) => {
                // Sent from its own buffer (a cached file's body is not
                // copied): the part the windows take now is cut off it.
                if n == b.len() {
                    // What the windows do not take stays in `b`.
                    sh.codec.send_data_shared(id, b, eos && last);
                } else {
                    // The output's room bounds it too.
                    let mut part = b.split_to(n);
                    sh.codec.send_data_shared(id, &mut part, false);
                    if !part.is_empty() {
                        // Not taken whole (the windows were read just
                        // before, on this thread: not expected): what is
                        // left goes back in front.
                        let mut back = bytes::BytesMut::from(&part[..]);
                        back.extend_from_slice(b);
                        *b = back.freeze();
                    }
                }
                b.is_empty()
            }
            Some(Piece::File { file, offset, len }) => {
                // A buffer per piece (at most 64 KiB, as costly to read
                // as to allocate), not kept: an idle connection holds
                // none; it goes out as it is, not copied again.
                let mut buf = vec![0; n];
                let got = match file.read_at(&mut buf, *offset) {
                    Ok(0) | Err(_) => {
                        // The file shrank or failed under us: the length
                        // promised in the head cannot be kept.
                        sh.codec.reset(id, Reason::INTERNAL_ERROR);
                        return false;
                    }
                    Ok(got) => got,
                };
                buf.truncate(got);
                let whole = got as u64 == *len;
                let mut data = Bytes::from(buf);
                let took = sh
                    .codec
                    .send_data_shared(id, &mut data, eos && last && whole);
                *offset += took as u64;
                *len -= took as u64;
                *len == 0
            }
            None => true,
        };
        if done {
            self.queue.pop_front();
        }
        // What was queued leaves now, even if the rest has to wait.
        sh.wake_writer();
        true
    }

    /// How much of `want` may be sent now: the stream's and the
    /// connection's windows and the room left in the output, waiting at
    /// most `idle` for some; None when the stream failed or none came.
    async fn capacity(&mut self, want: usize, idle: Duration) -> Option<usize> {
        let (id, shared) = (self.id, &self.shared);
        let mut wait = poll_fn(|cx| {
            let mut sh = shared.borrow_mut();
            let Some(i) = sh.find(id).filter(|_| !sh.closed) else {
                return Poll::Ready(None);
            };
            if sh.slots[i].reset {
                return Poll::Ready(None);
            }
            let room = sh.room();
            let n = sh.codec.send_window(id).min(room).min(want);
            if n > 0 {
                return Poll::Ready(Some(n));
            }
            if room == 0 {
                sh.room.push(cx.waker().clone());
                sh.wake_writer();
            } else {
                sh.slots[i].waker = Some(cx.waker().clone());
            }
            Poll::Pending
        });
        // Most of the time there is window at once: no timer then.
        let mut cx = std::task::Context::from_waker(Waker::noop());
        if let Poll::Ready(r) = std::pin::Pin::new(&mut wait).poll(&mut cx) {
            return r;
        }
        timeout(idle, wait).await.ok().flatten()
    }

    /// The request's trailer fields, once its body was read to the end
    /// (None: it had none, or the stream failed).
    pub(crate) async fn request_trailers(&mut self, _within: Duration) -> Option<http::HeaderMap> {
        if !self.recv_done {
            return None;
        }
        // Trailers end the stream: once the body is done they are here.
        let fields = self.shared.borrow_mut().slot(self.id)?.trailers.take()?;
        let mut map = http::HeaderMap::with_capacity(fields.len());
        for (name, value) in fields {
            let (Ok(n), Ok(v)) = (
                http::HeaderName::from_bytes(&name),
                http::HeaderValue::from_maybe_shared(value),
            ) else {
                continue;
            };
            map.append(n, v);
        }
        Some(map)
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
            if !self.head_sent {
                let mut sh = self.shared.borrow_mut();
                if !sh.gone(self.id) {
                    sh.send_head(self.id, 100, &[], None, None, false);
                    sh.wake_writer();
                }
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
        let (id, shared) = (self.id, &self.shared);
        let next = poll_fn(|cx| {
            let mut sh = shared.borrow_mut();
            let closed = sh.closed;
            let Some(i) = sh.find(id) else {
                return Poll::Ready(Err(BodyFail::Gone));
            };
            let slot = &mut sh.slots[i];
            if let Some(b) = slot.body.pop_front() {
                slot.unread -= b.len();
                let last = slot.end && slot.body.is_empty();
                // The window is given back for what was read, so the
                // client may send this much more.
                sh.codec.release(id, b.len());
                if !sh.codec.output().is_empty() {
                    sh.wake_writer();
                }
                return Poll::Ready(Ok(Some((b, last))));
            }
            if slot.reset || closed {
                return Poll::Ready(Err(BodyFail::Gone));
            }
            if slot.end {
                return Poll::Ready(Ok(None));
            }
            slot.waker = Some(cx.waker().clone());
            Poll::Pending
        });
        let data = match timeout_at(deadline, next).await {
            Err(_) => return Err(BodyFail::Slow),
            Ok(r) => r?,
        };
        let Some((data, last)) = data else {
            self.recv_done = true;
            return Ok(false);
        };
        let n = data.len();
        self.body_seen += n as u64;
        if self.body_seen > max_body {
            return Err(BodyFail::TooLarge);
        }
        dst.extend_from_slice(&data);
        self.recv_done = last;
        Ok(n > 0 || !self.recv_done)
    }

    /// The stream's request head, read to the end: kept for the next
    /// stream's (up to 16, none large).
    pub(crate) fn give_back_request(&self, head: stoa_h1::RequestHead) {
        let Ok(mut sh) = self.shared.try_borrow_mut() else {
            return;
        };
        if head.held() <= 4096 && sh.spare_requests.len() < 16 {
            sh.spare_requests.push(head);
        }
    }

    /// Resolves when the client resets the stream or the connection ends
    /// (true).
    pub async fn client_gone(&mut self) -> bool {
        let (id, shared) = (self.id, &self.shared);
        poll_fn(|cx| {
            let mut sh = shared.borrow_mut();
            if sh.closed {
                return Poll::Ready(true);
            }
            match sh.slot(id) {
                None => Poll::Ready(true),
                Some(s) if s.reset => Poll::Ready(true),
                Some(s) => {
                    s.waker = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// Resets the stream (a response that cannot be completed: the
    /// client must not take a truncated body for a whole one).
    pub fn reset(&mut self) {
        let mut sh = self.shared.borrow_mut();
        if !sh.gone(self.id) {
            sh.codec.reset(self.id, Reason::INTERNAL_ERROR);
            if let Some(s) = sh.slot(self.id) {
                s.reset = true;
            }
            sh.wake_writer();
        }
        self.ended = true;
    }
}

impl Drop for H2Stream {
    /// The handler is done with the stream: a response never ended is
    /// cancelled; a request body nobody read to its end is left to the
    /// connection, which drops it as it comes (at most [`MAX_DISCARD`]
    /// bytes, then the stream is reset with NO_ERROR, RFC 9113 §8.1), so
    /// that the stream ends as the client meant it to and a bad frame on
    /// it still gets its stream error (§5.4.2) rather than landing on a
    /// stream already reset. A client still waiting for `100 Continue`
    /// sends no body (RFC 9110 §10.1.1): its stream is reset at once.
    fn drop(&mut self) {
        let Ok(mut sh) = self.shared.try_borrow_mut() else {
            return;
        };
        let sh = &mut *sh;
        if self.head.capacity() <= 4096 && sh.spare_heads.len() < 16 {
            let mut head = std::mem::take(&mut self.head);
            head.clear();
            sh.spare_heads.push(head);
        }
        let id = self.id;
        let Some(i) = sh.find(id) else { return };
        if sh.closed {
            sh.slots.swap_remove(i);
            return;
        }
        let slot = &mut sh.slots[i];
        let unread = std::mem::take(&mut slot.unread);
        slot.body.clear();
        slot.waker = None;
        if unread > 0 {
            // Its connection window comes back whatever the stream's fate.
            sh.codec.release(id, unread);
        }
        let slot = &mut sh.slots[i];
        if slot.reset {
            sh.slots.swap_remove(i);
        } else if !self.ended {
            sh.codec.reset(id, Reason::CANCEL);
            sh.slots.swap_remove(i);
        } else if slot.end {
            sh.slots.swap_remove(i);
        } else if self.continue_pending {
            sh.codec.reset(id, Reason::NO_ERROR);
            sh.slots.swap_remove(i);
        } else {
            slot.discard = Some(MAX_DISCARD);
        }
        sh.wake_writer();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stoa_h2::hpack::Decoder;

    fn decode(block: &[u8]) -> Vec<(String, String)> {
        let mut d = Decoder::new(4096);
        let mut out = Vec::new();
        d.decode(block, 1 << 20, &mut |n, v| {
            out.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ));
        })
        .expect("a valid block");
        out
    }

    #[test]
    fn rfc9113_8_2_names_are_lowercased_and_connection_specific_fields_dropped() {
        let mut block = Vec::new();
        encode_fields(
            &mut block,
            b"Content-Type: text/html\r\nConnection: close\r\nKeep-Alive: 5\r\n\
              Transfer-Encoding: chunked\r\nUpgrade: h2c\r\nX-Thing:  b \r\nBad Name: x\r\n",
        );
        assert_eq!(
            decode(&block),
            [
                ("content-type".to_owned(), "text/html".to_owned()),
                ("x-thing".to_owned(), "b".to_owned()),
            ]
        );
    }

    #[test]
    fn rfc7541_6_2_2_the_kept_content_length_encoding_is_redone_when_the_length_changes() {
        let mut sh = Shared::new(Conn::new(&stoa_h2::Config::default()), 1 << 20);
        let head = b"ETag: \"x\"\r\ncontent-length: 0\r\n";
        let at = head.len() - b"content-length: 0\r\n".len();
        for n in [1358u64, 1358, 7, 0, 18_446_744_073_709_551_614, 1358] {
            sh.send_head(1, 200, head, None, Some((at, n)), false);
            assert_eq!(
                decode(&sh.block),
                [
                    (":status".to_owned(), "200".to_owned()),
                    ("etag".to_owned(), "\"x\"".to_owned()),
                    ("content-length".to_owned(), n.to_string()),
                ]
            );
        }
    }

    #[test]
    fn the_date_block_encoded_once_a_second_is_what_encoding_it_gives() {
        let lines = b"Date: Fri, 27 Nov 2026 01:45:38 GMT\r\nServer: stoa\r\nETag: \"x\"\r\n";
        assert_eq!(date_block_len(lines), Some(51));
        let mut fresh = Vec::new();
        encode_fields(&mut fresh, lines);
        let mut sh = Shared::new(Conn::new(&stoa_h2::Config::default()), 1 << 20);
        // The first head encodes the block and keeps it; the second reuses
        // it; a new second's block replaces it.
        for _ in 0..2 {
            let mut block = Vec::new();
            sh.encode_lines(&mut block, lines);
            assert_eq!(block, fresh);
        }
        let later = b"Date: Fri, 27 Nov 2026 01:45:39 GMT\r\nServer: stoa\r\n";
        let mut block = Vec::new();
        sh.encode_lines(&mut block, later);
        assert_eq!(
            decode(&block),
            [
                (
                    "date".to_owned(),
                    "Fri, 27 Nov 2026 01:45:39 GMT".to_owned()
                ),
                ("server".to_owned(), "stoa".to_owned()),
            ]
        );
        assert_eq!(
            decode(&fresh),
            [
                (
                    "date".to_owned(),
                    "Fri, 27 Nov 2026 01:45:38 GMT".to_owned()
                ),
                ("server".to_owned(), "stoa".to_owned()),
                ("etag".to_owned(), "\"x\"".to_owned()),
            ]
        );
    }
}
