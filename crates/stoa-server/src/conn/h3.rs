//! HTTP/3 (RFC 9114) over QUIC (RFC 9000/9001): the UDP side of the TLS
//! addresses whose `[[tls]]` blocks name "h3". Each worker has its own
//! UDP socket on the address, bound with SO_REUSEPORT where the TCP ones
//! are (`listen::acquire`: by root, before privileges drop; the kernel
//! keeps a client's 4-tuple on one socket, so a connection stays with the
//! worker that accepted it), and runs a quinn endpoint on its
//! current-thread runtime; quinn-udp batches datagrams (recvmmsg, GSO and GRO where the
//! kernel has them). Each connection is a local task that sends our
//! control stream (SETTINGS, then GOAWAY at a graceful stop), reads the
//! client's control and QPACK streams (`stoa-h3`'s readers and QPACK
//! decoder, whose dynamic table `[http3] qpack_max_table_capacity`
//! bounds) and accepts request streams; each request is a local task,
//! routed and run through an [`Exchange`] over [`H3Stream`], as an
//! HTTP/1 or HTTP/2 request is.
//!
//! Under attack: Initial packets past `[http3] max_handshakes` handshakes
//! in progress are refused; with `retry = "under_load"` (the default)
//! clients prove their address with a Retry (RFC 9000 §8.1.2) once half
//! of them are in use, and always with `retry = "always"`; QUIC's own
//! amplification limit (three times what a client sent, RFC 9000 §8.1)
//! is quinn's. Streams are bounded by `max_concurrent_streams`, the
//! request head by `max_field_section_size`, QPACK by its table capacity
//! and `qpack_blocked_streams`; a client that stops reading
//! holds a stream for `send_timeout` at most (`proto::h3`).

use crate::config::{H3Retry, Runtime};
use crate::exchange::{Edge, Exchange};
use crate::local::{Handshake, Proto, Worker};
use crate::proto::h3::{code, read_head, H3Conn, H3Stream, Opened};
use crate::route;
use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use stoa_h1::{Framing, Method, RequestHead, Version};
use stoa_h3::qpack::Decoder;
use stoa_h3::{frame, Code, ControlReader, RequestReader, Scope, Settings, UniKind, UniStreams};
use tokio::sync::{watch, Notify};

/// How long a connection told to go away (GOAWAY at stop) waits, once
/// its last request ended, for the client to close it: quinn drops data
/// not yet acknowledged when the server closes first.
const GOAWAY_GRACE: Duration = Duration::from_secs(2);

/// A worker's QUIC endpoint on one address.
pub(crate) struct Endpoint {
    endpoint: quinn::Endpoint,
    /// The address the config names the listener by (the key of
    /// `Runtime::h3`).
    configured: SocketAddr,
}

impl Endpoint {
    /// A quinn endpoint on `socket`, the UDP side of the TLS listener
    /// configured as `configured` (bound with the TCP sockets:
    /// `listen::acquire`).
    pub(crate) fn open(
        configured: SocketAddr,
        socket: std::net::UdpSocket,
        rt: &Runtime,
    ) -> Option<Endpoint> {
        let (_, config) = rt.h3.iter().find(|(a, _)| *a == configured)?;
        let local = socket.local_addr().ok();
        let endpoint = quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            Some((**config).clone()),
            socket,
            Arc::new(quinn::TokioRuntime),
        );
        match endpoint {
            Ok(endpoint) => Some(Endpoint {
                endpoint,
                configured,
            }),
            Err(e) => {
                tracing::error!("h3: UDP {local:?}: {e}");
                None
            }
        }
    }

    /// The reloaded runtime's certificates and limits, for connections
    /// from now on.
    pub(crate) fn reload(&self, rt: &Runtime) {
        if let Some((_, config)) = rt.h3.iter().find(|(a, _)| *a == self.configured) {
            self.endpoint.set_server_config(Some((**config).clone()));
        }
    }

    /// New connections are refused from now on (the worker stops).
    pub(crate) fn stop(&self) {
        self.endpoint.set_server_config(None);
    }

    /// The UDP port.
    pub(crate) fn port(&self) -> Option<u16> {
        self.endpoint.local_addr().ok().map(|a| a.port())
    }

    /// Accepts connections until the worker stops (the task is aborted),
    /// each served by a task of its own.
    pub(crate) async fn accept_loop(
        self: Rc<Self>,
        runtime: watch::Receiver<Arc<Runtime>>,
        worker: Rc<Worker>,
    ) {
        let local = self.endpoint.local_addr().ok();
        let handshaking = Rc::new(Cell::new(0usize));
        while let Some(incoming) = self.endpoint.accept().await {
            let rt = runtime.borrow().clone();
            let limits = &rt.http3;
            let stats = worker.stats();
            let validated = incoming.remote_address_validated();
            let busy = handshaking.get();
            let retry = match limits.retry {
                H3Retry::Always => true,
                H3Retry::UnderLoad => busy * 2 >= limits.max_handshakes,
                H3Retry::Never => false,
            };
            if retry && !validated && incoming.may_retry() {
                if let Some(s) = stats {
                    s.h3_attempts[0].fetch_add(1, Ordering::Relaxed);
                }
                // An error only says the client's address was validated
                // already: it may not be asked twice.
                let _ = incoming.retry();
                continue;
            }
            if busy >= limits.max_handshakes {
                if let Some(s) = stats {
                    s.h3_attempts[1].fetch_add(1, Ordering::Relaxed);
                }
                incoming.refuse();
                continue;
            }
            let n = worker.shared.connections.fetch_add(1, Ordering::Relaxed);
            if n >= rt.limits.max_connections {
                worker.shared.connections.fetch_sub(1, Ordering::Relaxed);
                if let Some(s) = stats {
                    s.h3_attempts[1].fetch_add(1, Ordering::Relaxed);
                }
                incoming.refuse();
                continue;
            }
            worker.active.set(worker.active.get() + 1);
            let guard = Counted(worker.clone());
            handshaking.set(busy + 1);
            let shaking = Handshaking(handshaking.clone());
            let (w, r) = (worker.clone(), runtime.clone());
            let configured = self.configured;
            tokio::task::spawn_local(async move {
                serve(incoming, local, configured, w, r, shaking).await;
                drop(guard);
            });
        }
    }

    /// Tells every connection the endpoint is closing (once they are gone)
    /// and waits, at most `within`, for what was sent to be acknowledged.
    pub(crate) async fn close(&self, within: Duration) {
        let _ = tokio::time::timeout(within, self.endpoint.wait_idle()).await;
    }
}

/// The worker's counts of connections (`max_connections`, the drain at
/// stop), kept until the connection ends.
struct Counted(Rc<Worker>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.connection_closed();
    }
}

/// Counts a handshake in progress on this worker until it ends.
struct Handshaking(Rc<Cell<usize>>);

impl Drop for Handshaking {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// Counts an HTTP/3 connection open, for the status page.
struct Open(Rc<Worker>);

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(s) = self.0.stats() {
            s.closed(Proto::H3);
        }
    }
}

/// Keeps the connection's count of live request streams, and the
/// worker's.
struct Live {
    count: Rc<Cell<usize>>,
    worker: Rc<Worker>,
}

impl Drop for Live {
    fn drop(&mut self) {
        self.count.set(self.count.get() - 1);
        if let Some(s) = self.worker.stats() {
            s.h3_stream_closed();
        }
    }
}

/// Serves one QUIC connection: the handshake (by `header_timeout`),
/// then request streams until the client or the server ends it.
async fn serve(
    incoming: quinn::Incoming,
    local: Option<SocketAddr>,
    configured: SocketAddr,
    worker: Rc<Worker>,
    runtime: watch::Receiver<Arc<Runtime>>,
    shaking: Handshaking,
) {
    let rt = runtime.borrow().clone();
    let deadline = rt.limits.header_timeout;
    let peer = incoming.remote_address();
    let conn = match incoming.accept() {
        Ok(connecting) => tokio::time::timeout(deadline, connecting).await,
        Err(e) => Ok(Err(e)),
    };
    drop(shaking);
    let conn = match conn {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            crate::proto::tls::client::log_quic_handshake_error(peer, &e);
            if let Some(s) = worker.stats() {
                s.handshake(Handshake::Failed);
            }
            return;
        }
        Err(_) => {
            tracing::debug!("h3: handshake with {peer}: timed out");
            if let Some(s) = worker.stats() {
                s.handshake(Handshake::Failed);
            }
            return;
        }
    };
    let Ok(client) = crate::proto::tls::client::admit_quic(&rt.tls, configured, &conn) else {
        if let Some(s) = worker.stats() {
            s.handshake(Handshake::Failed);
        }
        return;
    };
    if let Some(s) = worker.stats() {
        s.handshake(Handshake::Full);
        s.opened(Proto::H3);
    }
    let _open = Open(worker.clone());
    let limits = &rt.http3;
    let h3 = Rc::new(H3Conn {
        quic: conn.clone(),
        qpack: RefCell::new(Decoder::new(
            limits.qpack_max_table_capacity,
            limits.qpack_blocked_streams,
        )),
        inserted: Notify::new(),
        to_send: Notify::new(),
        max_field_section_size: limits.max_field_section_size,
    });
    // Our control stream: its type, then SETTINGS (RFC 9114 §6.2.1).
    let settings = Settings {
        qpack_max_table_capacity: limits.qpack_max_table_capacity,
        max_field_section_size: Some(limits.max_field_section_size),
        qpack_blocked_streams: limits.qpack_blocked_streams,
    };
    let mut first = vec![frame::STREAM_CONTROL as u8];
    settings.put_frame(&mut first);
    let mut control = match conn.open_uni().await {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!("h3: {peer}: {e}");
            return;
        }
    };
    if control.write_all(&first).await.is_err() {
        return;
    }
    if limits.qpack_max_table_capacity > 0 {
        tokio::task::spawn_local(decoder_stream(h3.clone()));
    }
    let uni = Rc::new(RefCell::new(UniStreams::default()));
    let live = Rc::new(Cell::new(0usize));
    // The first request stream id refused after a GOAWAY.
    let mut goaway: Option<u64> = None;
    let mut next_id = 0u64;
    loop {
        tokio::select! {
            r = conn.accept_bi() => match r {
                Ok((send, recv)) => {
                    let id = u64::from(recv.id());
                    next_id = next_id.max(id + 4);
                    if goaway.is_some_and(|g| id >= g) {
                        // RFC 9114 §5.2: past the GOAWAY, not processed.
                        let (mut send, mut recv) = (send, recv);
                        let _ = send.reset(code(Code::RequestRejected));
                        let _ = recv.stop(code(Code::RequestRejected));
                        continue;
                    }
                    live.set(live.get() + 1);
                    if let Some(s) = worker.stats() {
                        s.h3_stream_opened();
                    }
                    let guard = Live { count: live.clone(), worker: worker.clone() };
                    let rt = runtime.borrow().clone();
                    let w = worker.clone();
                    let c = client.clone();
                    tokio::task::spawn_local(request(send, recv, h3.clone(), peer, local, c, w, rt, guard));
                }
                Err(e) => {
                    if !matches!(e, quinn::ConnectionError::ApplicationClosed(_)
                        | quinn::ConnectionError::LocallyClosed) {
                        tracing::debug!("h3: {peer}: {e}");
                    }
                    break;
                }
            },
            r = conn.accept_uni() => match r {
                Ok(recv) => {
                    tokio::task::spawn_local(unidirectional(recv, h3.clone(), uni.clone()));
                }
                Err(_) => break,
            },
            _ = worker.stopped(), if goaway.is_none() => {
                // GOAWAY: no new requests; those begun finish (RFC 9114
                // §5.2). One more is let in for a request already on
                // its way.
                let id = next_id + 4;
                goaway = Some(id);
                let mut f = Vec::new();
                frame::put_goaway(&mut f, id);
                let _ = control.write_all(&f).await;
            }
            _ = ended(&live), if goaway.is_some() => break,
        }
    }
    if goaway.is_some() {
        // Let the client acknowledge the last responses and close.
        let _ = tokio::time::timeout(GOAWAY_GRACE, conn.closed()).await;
    }
    let st = conn.stats();
    tracing::debug!(
        "h3: {peer}: closed; rtt {:?}, cwnd {}, sent {} datagrams, lost {} packets, {} congestion events",
        st.path.rtt,
        st.path.cwnd,
        st.udp_tx.datagrams,
        st.path.lost_packets,
        st.path.congestion_events
    );
}

/// Our QPACK decoder stream (RFC 9204 §4.2): its type, then the
/// acknowledgments the decoder owes, as they come, until the connection
/// ends.
async fn decoder_stream(h3: Rc<H3Conn>) {
    let Ok(mut send) = h3.quic.open_uni().await else {
        return;
    };
    let mut out = vec![frame::STREAM_QPACK_DECODER as u8];
    loop {
        out.append(h3.qpack.borrow_mut().output());
        if !out.is_empty() && send.write_all(&out).await.is_err() {
            return;
        }
        out.clear();
        tokio::select! {
            _ = h3.to_send.notified() => {}
            _ = h3.quic.closed() => return,
        }
    }
}

/// Reads a stream the client opened one way: its type (RFC 9114 §6.2),
/// then its control frames or QPACK instructions. Unknown types are
/// refused with STOP_SENDING (§6.2: H3_STREAM_CREATION_ERROR); the end
/// of a critical stream closes the connection (§6.2.1,
/// H3_CLOSED_CRITICAL_STREAM).
async fn unidirectional(mut recv: quinn::RecvStream, h3: Rc<H3Conn>, uni: Rc<RefCell<UniStreams>>) {
    let mut buf = Vec::new();
    let ty = loop {
        if let Some((ty, n)) = stoa_h3::varint::decode(&buf) {
            buf.drain(..n);
            break ty;
        }
        match recv.read_chunk(64, true).await {
            Ok(Some(c)) => buf.extend_from_slice(&c.bytes),
            _ => return,
        }
    };
    let kind = match uni.borrow_mut().open(ty, true) {
        Ok(k) => k,
        Err(e) => return h3.close(e),
    };
    let mut control = ControlReader::new(true);
    loop {
        let r = match kind {
            UniKind::Control => loop {
                match control.next(&buf) {
                    Ok(step) => {
                        buf.drain(..step.used);
                        if step.used == 0 {
                            break Ok(());
                        }
                        // The client's SETTINGS bound what we send it;
                        // our encoder never inserts and our heads are
                        // small, so none of them changes what we do.
                        // GOAWAY from a client (§5.2) is about pushes,
                        // which Stoa never makes.
                    }
                    Err(e) => break Err(e),
                }
            },
            UniKind::QpackEncoder => {
                let r = h3.qpack.borrow_mut().feed_encoder(&buf);
                buf.clear();
                h3.inserted.notify_waiters();
                h3.to_send.notify_one();
                r.map_err(|e| e.to_error())
            }
            UniKind::QpackDecoder => match stoa_h3::qpack::read_decoder_stream(&buf) {
                Ok(n) => {
                    buf.drain(..n);
                    Ok(())
                }
                Err(e) => Err(e.to_error()),
            },
            UniKind::Push | UniKind::Other(_) => {
                let _ = recv.stop(code(Code::StreamCreationError));
                return;
            }
        };
        if let Err(e) = r {
            return h3.close(e);
        }
        match recv.read_chunk(READ_CHUNK, true).await {
            Ok(Some(c)) => buf.extend_from_slice(&c.bytes),
            Ok(None) | Err(quinn::ReadError::Reset(_)) => {
                return h3.close(stoa_h3::Error::conn(
                    Code::ClosedCriticalStream,
                    "a critical stream ended",
                ))
            }
            Err(_) => return,
        }
    }
}

/// Largest chunk taken from quinn at once on a client's one-way stream.
const READ_CHUNK: usize = 16 * 1024;

/// Resolves once no request stream is live (checked every few ms: only
/// a stopping connection waits on it).
async fn ended(live: &Cell<usize>) {
    while live.get() > 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One request stream: its head read (by `header_timeout`), routed and
/// handled as on the other protocols, its response ended.
#[allow(clippy::too_many_arguments)]
async fn request(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    h3: Rc<H3Conn>,
    peer: SocketAddr,
    local: Option<SocketAddr>,
    client: Option<Arc<crate::http::client_cert::ClientCert>>,
    worker: Rc<Worker>,
    rt: Arc<Runtime>,
    guard: Live,
) {
    let id = u64::from(recv.id());
    let mut reader = RequestReader::server(h3.max_field_section_size);
    let mut buf = Vec::new();
    let mut fin = false;
    let head = tokio::time::timeout(
        rt.limits.header_timeout,
        read_head(&mut recv, &h3, &mut reader, &mut buf, &mut fin),
    )
    .await;
    let refuse = |send: &mut quinn::SendStream, recv: &mut quinn::RecvStream, c: Code| {
        let _ = send.reset(code(c));
        let _ = recv.stop(code(c));
    };
    let req = match head {
        Ok(Ok(req)) => req,
        Ok(Err(Some(e))) if e.scope == Scope::Connection => return h3.close(e),
        Ok(Err(Some(e))) => {
            // Malformed (RFC 9114 §4.1.2) or too large: reset, not
            // ended with a FIN.
            tracing::debug!("h3: {peer}: request: {e}");
            h3.cancel(id);
            return refuse(&mut send, &mut recv, e.code);
        }
        Ok(Err(None)) | Err(_) => {
            h3.cancel(id);
            return refuse(&mut send, &mut recv, Code::RequestCancelled);
        }
    };
    let Some((head, expected, no_body)) = request_head(&req) else {
        return refuse(&mut send, &mut recv, Code::MessageError);
    };
    let opened = Opened {
        send,
        recv,
        conn: h3,
        reader,
        buf,
        fin,
    };
    // The exchange's TLS facts: QUIC is always TLS 1.3.
    let mut side = H3Stream::new(opened, peer, local, Some(("TLSv1.3", "")), expected);
    side.client_cert = client;
    if no_body {
        side.no_body();
    }
    let (mut hsts, mut edge) = (None, Edge::none());
    let (p, rewritten) = route::pick_request(&head, &rt, true, &mut hsts, &mut edge);
    let head = rewritten.as_ref().unwrap_or(&head);
    let truncated = {
        let mut ex = Exchange::h3(&mut side, head, &worker, &rt.limits)
            .with_hsts(hsts)
            .with_edge(edge);
        route::run(p, &mut ex, &rt, 0).await;
        ex.truncated()
    };
    if truncated {
        side.reset();
    } else {
        side.flush(true, rt.limits.send_timeout).await;
    }
    drop(side);
    drop(guard);
}

/// The request as an HTTP/1.1 head, which is what routing and handlers
/// read: `:authority` becomes Host (RFC 9114 §4.3.1), `cookie` fields are
/// joined with "; " (§4.2.1); the body's length is its content-length.
/// Also that length, and whether the request has no body: a method that
/// has none without a content-length (GET, HEAD...) is taken to have
/// none, others to run to the stream's end. None: not a request Stoa
/// can route (`stoa-h3` checked the pseudo-headers already).
fn request_head(req: &stoa_h3::Request) -> Option<(RequestHead, Option<u64>, bool)> {
    let method = Method::from_token(req.method())?;
    let path = req.path().filter(|p| !p.is_empty()).unwrap_or(b"/");
    let target: &[u8] = if method == Method::Options && (path == b"*" || path == b"/*") {
        b"*"
    } else {
        path
    };
    let authority = req.authority();
    let length = req.content_length();
    let mut cookie = Vec::new();
    for (_, v) in req.fields().filter(|(n, _)| *n == b"cookie") {
        if !cookie.is_empty() {
            cookie.extend_from_slice(b"; ");
        }
        cookie.extend_from_slice(v);
    }
    let fields = authority
        .map(|a| (&b"host"[..], a))
        .into_iter()
        .chain(req.fields().filter(|(n, _)| {
            let replaced = *n == b"host" && authority.is_some();
            *n != b"cookie" && !replaced
        }))
        .chain((!cookie.is_empty()).then_some((&b"cookie"[..], &cookie[..])));
    let mut head = RequestHead::from_parts(method, target, Version::Http11, fields);
    let no_body = length == Some(0)
        || (length.is_none()
            && matches!(
                head.method,
                Method::Get | Method::Head | Method::Delete | Method::Options | Method::Trace
            ));
    head.framing = match length {
        _ if no_body => Framing::None,
        Some(n) => Framing::Length(n),
        // Delimited by the stream's end: like chunked, its length is
        // known at its end only.
        None => Framing::Chunked,
    };
    head.expect_continue = false;
    Some((head, length, no_body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use stoa_h3::qpack::Fields;

    fn req(method: &str, path: &str, fields: &[(&str, &str)]) -> stoa_h3::Request {
        let mut f = Fields::new();
        f.push(b":method", method.as_bytes());
        f.push(b":scheme", b"https");
        f.push(b":authority", b"example.com:8443");
        f.push(b":path", path.as_bytes());
        for (n, v) in fields {
            f.push(n.as_bytes(), v.as_bytes());
        }
        stoa_h3::Request::from_fields(f).expect("a valid request")
    }

    #[test]
    fn rfc9114_4_3_1_authority_becomes_host_and_cookies_are_joined() {
        let r = req(
            "GET",
            "/a?b=1",
            &[("cookie", "a=1"), ("cookie", "b=2"), ("x-y", "z")],
        );
        let (head, length, no_body) = request_head(&r).expect("a request");
        assert_eq!(head.target(), b"/a?b=1");
        assert_eq!(head.header("host"), Some(&b"example.com:8443"[..]));
        assert_eq!(head.header("cookie"), Some(&b"a=1; b=2"[..]));
        assert_eq!(head.header("x-y"), Some(&b"z"[..]));
        assert_eq!((length, no_body), (None, true));
        assert_eq!(head.framing, Framing::None);
    }

    #[test]
    fn a_post_without_content_length_runs_to_the_end_of_its_stream() {
        let r = req("POST", "/up", &[]);
        let (head, _, no_body) = request_head(&r).expect("a request");
        assert!(!no_body);
        assert_eq!(head.framing, Framing::Chunked);
        let r = req("PUT", "/up", &[("content-length", "12")]);
        let (head, length, _) = request_head(&r).expect("a request");
        assert_eq!((head.framing, length), (Framing::Length(12), Some(12)));
    }
}
