//! HTTP/3's side of an exchange: one request stream of a QUIC connection
//! that [`crate::conn::h3`] accepted (quinn for QUIC, the `h3` crate for
//! HTTP/3 framing and QPACK). Unlike HTTP/2's side, the stream is owned
//! here: quinn keeps each stream's flow control and send buffer, so
//! the exchange's writes are awaited on the stream itself.
//!
//! The response head that [`crate::exchange`] writes as HTTP/1-style
//! header lines is turned into an `http::HeaderMap` (names lowercased,
//! connection-specific fields dropped: RFC 9114 §4.2) when the first
//! byte of the response has to leave; the body goes out as DATA frames as
//! quinn's send buffer takes them, each wait bounded by `send_timeout`,
//! so a client that stops reading is dropped (its stream reset) instead
//! of holding memory. The request body comes in as quinn's flow control
//! lets it: a slow handler slows the client down.

use super::body::{Piece, Pieces};
use super::{BodyFail, Limits};
use bytes::{Buf, Bytes};
use h3::error::Code;
use h3::server::RequestStream;
use std::fs::File;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{timeout, timeout_at, Instant};

/// Largest piece of a file read for one DATA frame.
const FILE_PIECE: usize = 64 * 1024;

/// Response header fields that only mean something on an HTTP/1
/// connection; HTTP/3 forbids them (RFC 9114 §4.2).
const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// The stream type quinn gives `h3`.
pub(crate) type Quic = RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// One HTTP/3 request stream, lent to the exchange of its request.
pub struct H3Stream {
    stream: Quic,
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
    /// The request's `content-length`: the body must be exactly this long
    /// (RFC 9114 §4.1.2).
    expected: Option<u64>,
    body_seen: u64,
    body_started: Option<Instant>,
    /// The stream's end (FIN) went, or the stream was reset.
    ended: bool,
    /// Trailer fields to end the response with.
    pub(crate) trailers: Option<http::HeaderMap>,
    /// An NPH script's output being re-emitted (`exchange::nph`).
    pub(crate) nph: Option<Box<crate::proto::h2::NphRelay>>,
    /// The connection's verified client certificate (`client_auth`),
    /// shared by its requests: `tls::client::admit_quic`.
    pub(crate) client_cert: Option<Arc<crate::http::client_cert::ClientCert>>,
}

impl H3Stream {
    /// `expected`: the request's content-length.
    pub(crate) fn new(
        stream: Quic,
        peer: SocketAddr,
        local: Option<SocketAddr>,
        tls: Option<(&'static str, &'static str)>,
        expected: Option<u64>,
    ) -> H3Stream {
        H3Stream {
            stream,
            peer,
            local,
            tls,
            status: 0,
            head: Vec::new(),
            queue: Pieces::default(),
            head_sent: false,
            recv_done: false,
            expected,
            body_seen: 0,
            body_started: None,
            ended: false,
            trailers: None,
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

    /// The response head as `http` wants it.
    fn response(&self) -> http::Response<()> {
        let status = if self.status == 0 { 500 } else { self.status };
        let mut resp = http::Response::new(());
        *resp.status_mut() =
            http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
        fields_into(&self.head, resp.headers_mut());
        resp
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
        if !self.head_sent {
            self.head_sent = true;
            let resp = self.response();
            if !matches!(
                timeout(idle, self.stream.send_response(resp)).await,
                Ok(Ok(()))
            ) {
                return self.fail(Code::H3_REQUEST_CANCELLED);
            }
        }
        while let Some(piece) = self.queue.pop_front() {
            match piece {
                Piece::Mem(b) => {
                    if !matches!(timeout(idle, self.stream.send_data(b)).await, Ok(Ok(()))) {
                        return self.fail(Code::H3_REQUEST_CANCELLED);
                    }
                }
                Piece::File {
                    file,
                    mut offset,
                    mut len,
                } => {
                    while len > 0 {
                        let n = len.min(FILE_PIECE as u64) as usize;
                        let mut buf = vec![0; n];
                        let got = match file.read_at(&mut buf, offset) {
                            Ok(0) | Err(_) => {
                                // The file shrank or failed under us: the
                                // length promised cannot be kept.
                                return self.fail(Code::H3_INTERNAL_ERROR);
                            }
                            Ok(got) => got,
                        };
                        buf.truncate(got);
                        let send = self.stream.send_data(Bytes::from(buf));
                        if !matches!(timeout(idle, send).await, Ok(Ok(()))) {
                            return self.fail(Code::H3_REQUEST_CANCELLED);
                        }
                        offset += got as u64;
                        len -= got as u64;
                    }
                }
            }
        }
        if end {
            if let Some(t) = self.trailers.take() {
                if !matches!(
                    timeout(idle, self.stream.send_trailers(t)).await,
                    Ok(Ok(()))
                ) {
                    return self.fail(Code::H3_REQUEST_CANCELLED);
                }
            }
            if !matches!(timeout(idle, self.stream.finish()).await, Ok(Ok(()))) {
                return self.fail(Code::H3_REQUEST_CANCELLED);
            }
            self.ended = true;
        }
        true
    }

    /// The stream cannot go on: it is reset, so that the client does not
    /// take a cut body for a whole one (a FIN would say it is whole).
    fn fail(&mut self, code: Code) -> bool {
        self.stream.stop_stream(code);
        self.ended = true;
        self.queue.clear();
        false
    }

    /// The request's trailer fields, once its body was read to the end.
    pub(crate) async fn request_trailers(&mut self, within: Duration) -> Option<http::HeaderMap> {
        if !self.recv_done {
            return None;
        }
        timeout(within, self.stream.recv_trailers())
            .await
            .ok()?
            .ok()
            .flatten()
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
            self.body_seen
                .saturating_mul(1000)
                .checked_div(limits.body_min_rate)
                .unwrap_or(0),
        );
        let deadline = started + limits.body_timeout + earned;
        let data = match timeout_at(deadline, self.stream.recv_data()).await {
            Err(_) => return Err(BodyFail::Slow),
            Ok(Err(_)) => return Err(BodyFail::Gone),
            Ok(Ok(d)) => d,
        };
        let Some(mut data) = data else {
            self.recv_done = true;
            if self.expected.is_some_and(|n| n != self.body_seen) {
                self.stream.stop_sending(Code::H3_MESSAGE_ERROR);
                return Err(BodyFail::Malformed);
            }
            return Ok(false);
        };
        let n = data.remaining();
        self.body_seen += n as u64;
        if self.expected.is_some_and(|e| self.body_seen > e) {
            self.stream.stop_sending(Code::H3_MESSAGE_ERROR);
            return Err(BodyFail::Malformed);
        }
        if self.body_seen > max_body {
            return Err(BodyFail::TooLarge);
        }
        dst.reserve(n);
        while data.has_remaining() {
            let c = data.chunk();
            dst.extend_from_slice(c);
            let l = c.len();
            data.advance(l);
        }
        Ok(true)
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
            self.stream.stop_stream(Code::H3_INTERNAL_ERROR);
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
            self.stream.stop_stream(Code::H3_REQUEST_CANCELLED);
        }
        if !self.recv_done {
            self.stream.stop_sending(Code::H3_NO_ERROR);
        }
    }
}

/// Header lines as the exchange writes them (`Name: value\r\n`) into a
/// header map, without the fields HTTP/3 forbids and without invalid
/// ones (names lowercased by `http`).
pub(crate) fn fields_into(lines: &[u8], map: &mut http::HeaderMap) {
    for line in lines.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let value = stoa_h1::trim(&line[colon + 1..]);
        let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(&line[..colon]),
            http::HeaderValue::from_bytes(value),
        ) else {
            tracing::debug!("h3: dropped an invalid header field");
            continue;
        };
        if CONNECTION_SPECIFIC.contains(&name.as_str()) {
            continue;
        }
        map.append(name, value);
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

    #[test]
    fn rfc9114_4_2_names_are_lowercased_and_connection_specific_fields_dropped() {
        let mut map = http::HeaderMap::new();
        fields_into(
            b"Content-Type: text/html\r\nConnection: close\r\nKeep-Alive: 5\r\n\
              Transfer-Encoding: chunked\r\nUpgrade: h2c\r\nX-Thing:  b \r\nBad Name: x\r\n\
              Set-Cookie: a=1\r\nSet-Cookie: b=2\r\n",
            &mut map,
        );
        let got: Vec<(String, String)> = map
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("?").to_owned()))
            .collect();
        assert_eq!(
            got,
            [
                ("content-type".to_owned(), "text/html".to_owned()),
                ("x-thing".to_owned(), "b".to_owned()),
                ("set-cookie".to_owned(), "a=1".to_owned()),
                ("set-cookie".to_owned(), "b=2".to_owned()),
            ]
        );
    }
}
