//! HTTP/3's side of an exchange: one request stream of a QUIC connection
//! that [`crate::conn::h3`] accepted, framed and QPACK-coded with
//! `stoa-h3` directly over quinn's streams. Unlike HTTP/2's side, the
//! stream is owned here: quinn keeps each stream's flow control and send
//! buffer, so the exchange's writes are awaited on the stream itself.
//!
//! The response head that [`crate::exchange`] writes as HTTP/1-style
//! header lines is QPACK-encoded (static table and literals: names
//! lowercased, connection-specific fields dropped, RFC 9114 §4.2) when
//! the first byte of the response has to leave, in the same write as the
//! first DATA frame when the body is small; the body goes out as DATA
//! frames as quinn's send buffer takes them, each wait bounded by
//! `send_timeout`, so a client that stops reading is dropped (its stream
//! reset) instead of holding memory. The request body comes in as
//! quinn's flow control lets it: a slow handler slows the client down.
//! Its DATA frames are checked against the content-length (RFC 9114
//! §4.1.2) as they arrive.

use super::body::{Piece, Pieces};
use super::{BodyFail, Limits};
use bytes::Bytes;
use std::cell::RefCell;
use std::fs::File;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use stoa_h3::qpack::{Decoded, Decoder, Encoder, Fields};
use stoa_h3::{frame, BodyLength, Code, Event, RequestReader, Scope};
use tokio::sync::Notify;
use tokio::time::{timeout, timeout_at, Instant};

/// Largest piece of a file read for one DATA frame.
const FILE_PIECE: usize = 64 * 1024;

/// Bodies up to this size go in the same write as the frame before them
/// (one copy, one call into quinn); larger ones are handed over whole.
const GATHER: usize = 16 * 1024;

/// Largest chunk taken from quinn at once.
const READ_CHUNK: usize = 64 * 1024;

/// Response header fields that only mean something on an HTTP/1
/// connection; HTTP/3 forbids them (RFC 9114 §4.2).
const CONNECTION_SPECIFIC: [&[u8]; 5] = [
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"transfer-encoding",
    b"upgrade",
];

/// An application error code as quinn takes it.
pub(crate) fn code(c: Code) -> quinn::VarInt {
    quinn::VarInt::from_u64(c.value()).unwrap_or(quinn::VarInt::from_u32(0x102))
}

/// What the streams of one connection share: the QUIC connection, the
/// peer's QPACK encoder state, and the wake-ups between the streams that
/// feed it and those that wait on it.
pub(crate) struct H3Conn {
    pub(crate) quic: quinn::Connection,
    pub(crate) qpack: RefCell<Decoder>,
    /// The peer's encoder stream inserted entries: blocked streams retry.
    pub(crate) inserted: Notify,
    /// Our decoder stream has bytes to send (acknowledgments).
    pub(crate) to_send: Notify,
    /// Our SETTINGS_MAX_FIELD_SECTION_SIZE.
    pub(crate) max_field_section_size: u64,
}

impl H3Conn {
    /// Ends the connection with an HTTP/3 connection error.
    pub(crate) fn close(&self, e: stoa_h3::Error) {
        tracing::debug!("h3: {}: closing: {e}", self.quic.remote_address());
        self.quic.close(code(e.code), e.why.as_bytes());
    }

    /// Decodes the field section of stream `id` into `fields`, waiting
    /// (blocked, RFC 9204 §2.1.2) until the entries it refers to arrive.
    pub(crate) async fn decode(
        &self,
        id: u64,
        section: &[u8],
        fields: &mut Fields,
    ) -> Result<(), stoa_h3::Error> {
        let max = usize::try_from(self.max_field_section_size).unwrap_or(usize::MAX);
        loop {
            // No await between the check and the registration below: on
            // this single-threaded runtime no insert can slip between.
            let (r, owed) = {
                let mut q = self.qpack.borrow_mut();
                let r = q.decode(id, section, max, fields);
                (r, !q.output().is_empty())
            };
            if owed {
                // A Section Acknowledgment (sections that used the table
                // only: most requests wake nothing).
                self.to_send.notify_one();
            }
            match r {
                Ok(Decoded::Done) => return Ok(()),
                Ok(Decoded::Blocked) => self.inserted.notified().await,
                Err(e) => return Err(e.to_error()),
            }
        }
    }

    /// The stream `id` ended before its head was decoded.
    pub(crate) fn cancel(&self, id: u64) {
        let mut q = self.qpack.borrow_mut();
        let had = !q.output().is_empty();
        q.cancel_stream(id);
        if !had && !q.output().is_empty() {
            self.to_send.notify_one();
        }
    }
}

/// One HTTP/3 request stream, lent to the exchange of its request.
pub struct H3Stream {
    send: quinn::SendStream,
    recv: quinn::RecvStream,
    conn: Rc<H3Conn>,
    id: u64,
    /// The request stream's frames after its head.
    reader: RequestReader,
    /// Bytes read from the stream and not yet parsed.
    buf: Vec<u8>,
    body: BodyLength,
    /// The stream's FIN was read.
    fin: bool,
    pub peer: SocketAddr,
    pub local: Option<SocketAddr>,
    /// TLS version and cipher suite (always TLS 1.3 on QUIC).
    pub tls: Option<(&'static str, &'static str)>,
    pub(crate) status: u16,
    /// Header lines as `Name: value\r\n`, as the exchange writes them.
    pub(crate) head: Vec<u8>,
    /// The body: small writes gathered, then pieces to send.
    queue: Pieces,
    head_sent: bool,
    recv_done: bool,
    body_started: Option<Instant>,
    /// The stream's end (FIN) went, or the stream was reset.
    ended: bool,
    /// Trailer fields to end the response with.
    pub(crate) trailers: Option<http::HeaderMap>,
    /// The request's trailers, once read.
    req_trailers: Option<http::HeaderMap>,
    /// An NPH script's output being re-emitted (`exchange::nph`).
    pub(crate) nph: Option<Box<crate::proto::h2::NphRelay>>,
    /// The connection's verified client certificate (`client_auth`),
    /// shared by its requests: `tls::client::admit_quic`.
    pub(crate) client_cert: Option<Arc<crate::http::client_cert::ClientCert>>,
}

/// A request stream whose head was read: what [`H3Stream::new`] takes.
pub(crate) struct Opened {
    pub(crate) send: quinn::SendStream,
    pub(crate) recv: quinn::RecvStream,
    pub(crate) conn: Rc<H3Conn>,
    pub(crate) reader: RequestReader,
    /// What followed the HEADERS frame.
    pub(crate) buf: Vec<u8>,
    pub(crate) fin: bool,
}

impl H3Stream {
    /// `expected`: the request's content-length.
    pub(crate) fn new(
        o: Opened,
        peer: SocketAddr,
        local: Option<SocketAddr>,
        tls: Option<(&'static str, &'static str)>,
        expected: Option<u64>,
    ) -> H3Stream {
        H3Stream {
            id: u64::from(o.recv.id()),
            send: o.send,
            recv: o.recv,
            conn: o.conn,
            reader: o.reader,
            buf: o.buf,
            body: BodyLength::new(expected),
            fin: o.fin,
            peer,
            local,
            tls,
            status: 0,
            head: Vec::new(),
            queue: Pieces::default(),
            head_sent: false,
            recv_done: false,
            body_started: None,
            ended: false,
            trailers: None,
            req_trailers: None,
            nph: None,
            client_cert: None,
        }
    }

    /// The request has no body to read.
    pub(crate) fn no_body(&mut self) {
        self.recv_done = true;
    }

    /// A response starts anew (a local redirect, or an error replacing
    /// one that was not sent).
    pub(crate) fn start(&mut self, status: u16) {
        self.status = status;
        self.head.clear();
    }

    /// The head's `content-length`.
    pub(crate) fn content_length(&mut self, len: u64) {
        self.head.extend_from_slice(b"content-length: ");
        stoa_h1::push_u64(&mut self.head, len);
        self.head.extend_from_slice(b"\r\n");
    }

    pub(crate) fn head_for_filters(&mut self) -> (&mut Vec<u8>, usize) {
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

    /// HTTP/3 clients do not wait for `100 Continue` here: Stoa reads the
    /// body when the handler asks (RFC 9110 §10.1.1 lets a server skip it).
    pub fn continue_pending(&self) -> bool {
        false
    }

    pub fn body_done(&self) -> bool {
        self.recv_done
    }

    /// The client's verified certificate, as on TCP (`client_auth`).
    pub fn client_cert(&self) -> Option<Arc<crate::http::client_cert::ClientCert>> {
        self.client_cert.clone()
    }

    /// Sends an informational response (103 Early Hints ...) before the
    /// final one: a HEADERS frame of its own (RFC 9114 §4.1). False when
    /// the stream is gone.
    pub(crate) async fn interim(&mut self, status: u16, lines: &[u8], idle: Duration) -> bool {
        if self.ended || self.head_sent {
            return false;
        }
        let mut section = Vec::with_capacity(lines.len() / 2 + 8);
        response_section(&mut section, status, lines);
        let mut out = Vec::with_capacity(section.len() + 8);
        frame::put_frame(&mut out, frame::HEADERS, &section);
        self.write(&mut out, idle).await || self.fail(Code::RequestCancelled)
    }

    /// Hands `out` to quinn, within `idle`. False: the stream is gone.
    async fn write(&mut self, out: &mut Vec<u8>, idle: Duration) -> bool {
        if out.is_empty() {
            return true;
        }
        let chunk = Bytes::from(std::mem::take(out));
        matches!(
            timeout(idle, self.send.write_chunk(chunk)).await,
            Ok(Ok(()))
        )
    }

    /// Sends the head if it has not gone yet, then every queued piece of
    /// body, each wait for quinn's send buffer bounded by `idle`. `end`:
    /// the response is complete (the stream's FIN follows). False when
    /// the stream is gone (reset, connection closed, or the client
    /// stopped reading).
    pub(crate) async fn flush(&mut self, end: bool, idle: Duration) -> bool {
        if self.ended {
            return false;
        }
        if self.status == 0 && !end {
            return true;
        }
        self.queue.seal();
        let mut out = Vec::new();
        if !self.head_sent {
            self.head_sent = true;
            let status = if self.status == 0 { 500 } else { self.status };
            let mut section = Vec::with_capacity(self.head.len() / 2 + 8);
            response_section(&mut section, status, &self.head);
            frame::put_frame(&mut out, frame::HEADERS, &section);
        }
        while let Some(piece) = self.queue.pop_front() {
            match piece {
                Piece::Mem(b) => {
                    frame::put_header(&mut out, frame::DATA, b.len() as u64);
                    if b.len() <= GATHER {
                        out.extend_from_slice(&b);
                        continue;
                    }
                    if !self.write(&mut out, idle).await
                        || !matches!(timeout(idle, self.send.write_chunk(b)).await, Ok(Ok(())))
                    {
                        return self.fail(Code::RequestCancelled);
                    }
                }
                Piece::File {
                    file,
                    mut offset,
                    mut len,
                } => {
                    while len > 0 {
                        let n = len.min(FILE_PIECE as u64) as usize;
                        let mut hdr = Vec::with_capacity(8);
                        frame::put_header(&mut hdr, frame::DATA, n as u64);
                        let at = out.len();
                        out.extend_from_slice(&hdr);
                        out.resize(at + hdr.len() + n, 0);
                        match file.read_at(&mut out[at + hdr.len()..], offset) {
                            Ok(got) if got == n => {}
                            // The file shrank or failed under us: the
                            // length promised cannot be kept.
                            _ => return self.fail(Code::InternalError),
                        }
                        offset += n as u64;
                        len -= n as u64;
                        if out.len() > GATHER && !self.write(&mut out, idle).await {
                            return self.fail(Code::RequestCancelled);
                        }
                    }
                }
            }
        }
        if end {
            if let Some(t) = self.trailers.take() {
                let mut section = Vec::new();
                Encoder::prefix(&mut section);
                for (n, v) in t.iter() {
                    Encoder::field(&mut section, n.as_str().as_bytes(), v.as_bytes());
                }
                frame::put_frame(&mut out, frame::HEADERS, &section);
            }
        }
        if !self.write(&mut out, idle).await {
            return self.fail(Code::RequestCancelled);
        }
        if end {
            if self.send.finish().is_err() {
                return self.fail(Code::RequestCancelled);
            }
            self.ended = true;
            if !self.fin {
                // A GET's FIN is often there already: read it, so the
                // stream closes without a STOP_SENDING.
                if let Ok(Ok(None)) = timeout(Duration::ZERO, self.recv.read_chunk(1, true)).await {
                    self.fin = true;
                }
            }
        }
        true
    }

    /// The stream cannot go on: it is reset, so that the client does not
    /// take a cut body for a whole one (a FIN would say it is whole).
    fn fail(&mut self, c: Code) -> bool {
        let _ = self.send.reset(code(c));
        self.ended = true;
        self.queue.clear();
        false
    }

    /// The request's trailer fields, once its body was read to the end.
    pub(crate) async fn request_trailers(&mut self, _within: Duration) -> Option<http::HeaderMap> {
        if !self.recv_done {
            return None;
        }
        self.req_trailers.take()
    }

    /// A malformed request body (RFC 9114 §4.1.2): the stream is refused
    /// both ways with H3_MESSAGE_ERROR.
    fn malformed(&mut self) -> BodyFail {
        let _ = self.recv.stop(code(Code::MessageError));
        self.fin = true;
        self.recv_done = true;
        BodyFail::Malformed
    }

    /// An error the codec found in the request stream.
    fn stream_error(&mut self, e: stoa_h3::Error) -> BodyFail {
        if e.scope == Scope::Connection {
            self.conn.close(e);
            self.recv_done = true;
            return BodyFail::Gone;
        }
        self.malformed()
    }

    /// The next piece of the request body, appended to `dst`; Ok(false) at
    /// its end. Bounded by `body_timeout` and `body_min_rate` as on the
    /// other protocols, and by `max_body`; a body longer or shorter than
    /// its content-length is malformed (RFC 9114 §4.1.2).
    pub(crate) async fn read_body(
        &mut self,
        limits: &Limits,
        max_body: u64,
        dst: &mut Vec<u8>,
    ) -> Result<bool, BodyFail> {
        if self.recv_done {
            return Ok(false);
        }
        let started = *self.body_started.get_or_insert_with(Instant::now);
        let earned = Duration::from_millis(
            self.body
                .seen()
                .saturating_mul(1000)
                .checked_div(limits.body_min_rate)
                .unwrap_or(0),
        );
        let deadline = started + limits.body_timeout + earned;
        loop {
            let step = match self.reader.next(&self.buf) {
                Ok(s) => s,
                Err(e) => return Err(self.stream_error(e)),
            };
            match step.event {
                Some(Event::Data(r)) => {
                    if let Err(e) = self.body.data(r.len()) {
                        return Err(self.stream_error(e));
                    }
                    if self.body.seen() > max_body {
                        return Err(BodyFail::TooLarge);
                    }
                    dst.extend_from_slice(&self.buf[r]);
                    self.buf.drain(..step.used);
                    return Ok(true);
                }
                Some(Event::Trailers(r)) | Some(Event::Headers(r)) => {
                    let section = self.buf[r].to_vec();
                    self.buf.drain(..step.used);
                    let mut fields = Fields::new();
                    let conn = self.conn.clone();
                    let decoded = timeout_at(deadline, conn.decode(self.id, &section, &mut fields));
                    match decoded.await {
                        Err(_) => return Err(BodyFail::Slow),
                        Ok(Err(e)) => return Err(self.stream_error(e)),
                        Ok(Ok(())) => {}
                    }
                    if let Err(e) = stoa_h3::check_trailers(&fields) {
                        return Err(self.stream_error(e));
                    }
                    self.req_trailers = Some(header_map(&fields));
                    continue;
                }
                None if step.used > 0 => {
                    self.buf.drain(..step.used);
                    continue;
                }
                None => {}
            }
            let chunk = if self.fin {
                Ok(Ok(None))
            } else {
                timeout_at(deadline, self.recv.read_chunk(READ_CHUNK, true)).await
            };
            match chunk {
                Err(_) => return Err(BodyFail::Slow),
                Ok(Err(_)) => {
                    self.recv_done = true;
                    self.fin = true;
                    return Err(BodyFail::Gone);
                }
                Ok(Ok(Some(c))) => self.buf.extend_from_slice(&c.bytes),
                Ok(Ok(None)) => {
                    self.fin = true;
                    if let Err(e) = self.reader.finish(self.buf.len()) {
                        return Err(self.stream_error(e));
                    }
                    if let Err(e) = self.body.end() {
                        return Err(self.stream_error(e));
                    }
                    self.recv_done = true;
                    return Ok(false);
                }
            }
        }
    }

    /// Never resolves: quinn tells a client's reset to the stream's
    /// reader only, and the exchange does not watch HTTP/3 streams
    /// (`Exchange::can_watch`).
    pub async fn client_gone(&mut self) -> bool {
        std::future::pending().await
    }

    /// Resets the stream (a response that cannot be completed).
    pub fn reset(&mut self) {
        if !self.ended {
            let _ = self.send.reset(code(Code::InternalError));
        }
        self.ended = true;
    }
}

impl Drop for H3Stream {
    /// A response never ended is cancelled (quinn would otherwise end
    /// the stream with a FIN, which says the body is whole); a request
    /// body nobody read is refused with STOP_SENDING and H3_NO_ERROR, as
    /// RFC 9114 §4.1 lets a server that answered before it.
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.send.reset(code(Code::RequestCancelled));
        }
        if !self.fin {
            let _ = self.recv.stop(code(Code::NoError));
        }
    }
}

/// Decoded fields as an `http::HeaderMap` (the exchange's trailer type).
pub(crate) fn header_map(fields: &Fields) -> http::HeaderMap {
    let mut map = http::HeaderMap::with_capacity(fields.len());
    for (n, v) in fields.iter() {
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(n),
            http::HeaderValue::from_bytes(v),
        ) {
            map.append(n, v);
        }
    }
    map
}

/// The QPACK field section of a response: `:status`, then the header
/// lines the exchange wrote (`Name: value\r\n`), names lowercased,
/// without the fields HTTP/3 forbids and without invalid ones.
pub(crate) fn response_section(out: &mut Vec<u8>, status: u16, lines: &[u8]) {
    Encoder::prefix(out);
    Encoder::status(out, status);
    let mut name = Vec::with_capacity(32);
    for line in lines.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let value = stoa_h1::trim(&line[colon + 1..]);
        name.clear();
        name.extend(line[..colon].iter().map(u8::to_ascii_lowercase));
        let token = !name.is_empty()
            && name
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token || value.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n')) {
            tracing::debug!("h3: dropped an invalid header field");
            continue;
        }
        if CONNECTION_SPECIFIC.contains(&&name[..]) {
            continue;
        }
        Encoder::field(out, &name, value);
    }
}

/// Reads what a request stream carries up to its head: the HEADERS frame
/// decoded (waiting for QPACK inserts if it must) and checked; what
/// follows it stays in `buf`. Err(None): the stream went away first.
pub(crate) async fn read_head(
    recv: &mut quinn::RecvStream,
    conn: &H3Conn,
    reader: &mut RequestReader,
    buf: &mut Vec<u8>,
    fin: &mut bool,
) -> Result<stoa_h3::Request, Option<stoa_h3::Error>> {
    let id = u64::from(recv.id());
    loop {
        let step = reader.next(buf).map_err(Some)?;
        if let Some(Event::Headers(r)) = step.event {
            let mut fields = Fields::new();
            conn.decode(id, &buf[r], &mut fields).await.map_err(Some)?;
            buf.drain(..step.used);
            return stoa_h3::Request::from_fields(fields).map_err(Some);
        }
        if step.used > 0 {
            buf.drain(..step.used);
            continue;
        }
        if *fin {
            return Err(reader.finish(buf.len()).err());
        }
        match recv.read_chunk(READ_CHUNK, true).await {
            Ok(Some(c)) => buf.extend_from_slice(&c.bytes),
            Ok(None) => *fin = true,
            Err(_) => return Err(None),
        }
    }
}

/// Unidirectional streams a client may open: its control stream, QPACK's
/// encoder and decoder streams (RFC 9114 §6.2, RFC 9204 §4.2), and room
/// for reserved (grease) types it may send.
const UNI_STREAMS: u32 = 8;

/// `[http3]`'s limits, as quinn takes them.
pub(crate) struct QuicLimits {
    pub(crate) max_concurrent_streams: u32,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_handshakes: usize,
    pub(crate) max_datagram_size: u16,
}

/// The quinn config of a TLS address with "h3", over its QUIC rustls
/// config (`tls::Acceptor::quic_config`).
pub(crate) fn server_config(
    tls: rustls::ServerConfig,
    limits: &QuicLimits,
) -> Result<quinn::ServerConfig, String> {
    let crypto =
        quinn::crypto::rustls::QuicServerConfig::try_from(tls).map_err(|e| format!("TLS: {e}"))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut t = quinn::TransportConfig::default();
    t.max_concurrent_bidi_streams(limits.max_concurrent_streams.into());
    t.max_concurrent_uni_streams(UNI_STREAMS.into());
    let idle = quinn::IdleTimeout::try_from(limits.idle_timeout)
        .map_err(|_| "idle_timeout: too long for QUIC".to_owned())?;
    t.max_idle_timeout(Some(idle));
    // Datagrams start at 1200 bytes; MTU discovery (RFC 8899: only sizes
    // the peer acknowledged are used) raises them up to this bound.
    let mut mtu = quinn::MtuDiscoveryConfig::default();
    mtu.upper_bound(limits.max_datagram_size);
    t.mtu_discovery_config(Some(mtu));
    config.transport_config(Arc::new(t));
    config.max_incoming(limits.max_handshakes);
    // Datagrams held for connections not yet accepted: a few Initials
    // each, so that a flood of them costs bounded memory.
    config.incoming_buffer_size(16 << 10);
    config.incoming_buffer_size_total((limits.max_handshakes as u64).saturating_mul(16 << 10));
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stoa_h3::qpack::QpackError;

    #[test]
    fn rfc9114_4_2_names_are_lowercased_and_connection_specific_fields_dropped() {
        let mut out = Vec::new();
        response_section(
            &mut out,
            200,
            b"Content-Type: text/html\r\nConnection: close\r\nKeep-Alive: 5\r\n\
              Transfer-Encoding: chunked\r\nUpgrade: h2c\r\nX-Thing:  b \r\nBad Name: x\r\n\
              Set-Cookie: a=1\r\nSet-Cookie: b=2\r\n",
        );
        let mut dec = Decoder::new(0, 0);
        let mut fields = Fields::new();
        assert_eq!(
            dec.decode(0, &out, usize::MAX, &mut fields),
            Ok(Decoded::Done)
        );
        let got: Vec<(String, String)> = fields
            .iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect();
        let want: Vec<(String, String)> = [
            (":status", "200"),
            ("content-type", "text/html"),
            ("x-thing", "b"),
            ("set-cookie", "a=1"),
            ("set-cookie", "b=2"),
        ]
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_status_without_a_static_entry_goes_as_a_literal() {
        let mut out = Vec::new();
        response_section(&mut out, 418, b"");
        let mut dec = Decoder::new(0, 0);
        let mut fields = Fields::new();
        assert!(dec.decode(0, &out, usize::MAX, &mut fields).is_ok());
        assert_eq!(stoa_h3::response_status(&fields), Ok(418));
    }

    #[test]
    fn qpack_errors_map_to_their_http3_codes() {
        assert_eq!(
            QpackError::Decompression("x").to_error().code,
            Code::QpackDecompressionFailed
        );
    }
}
