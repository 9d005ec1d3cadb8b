//! HTTP/2 to the application (`http_version = "2"`, or a pool whose
//! addresses are written `h2c://`): prior knowledge in clear (RFC 9113
//! §3.3), ALPN `h2` over TLS (§3.2), with the `h2` crate. Each worker keeps a few connections per
//! server and multiplexes requests over them: one is opened when none has
//! room under the server's SETTINGS_MAX_CONCURRENT_STREAMS, and one that
//! went away (GOAWAY, closed, idle too long) is forgotten.
//!
//! Both bodies stream with flow control end to end: a piece of the
//! client's body is read only once the previous one fitted in the
//! upstream's window, and a piece of the upstream's body is given back to
//! its window only once the client took it, so a slow client holds at
//! most one stream window here. The two directions run at once (gRPC's
//! bidirectional calls), and trailers pass both ways.
//!
//! A request whose `content-type` is `application/grpc*` gets Stoa's own
//! failures the gRPC way ("gRPC over HTTP/2", and nginx's `grpc_pass`,
//! Envoy): HTTP 200 with `grpc-status` and `grpc-message` (a trailers-only
//! response), unreachable -> 14 UNAVAILABLE, timeout -> 4
//! DEADLINE_EXCEEDED; its `grpc-timeout` caps the wait for the upstream.

use super::ProxyRoute;
use crate::exchange::{BodyFail, Exchange};
use crate::gateway;
use crate::gateway::life::{self, Fail, Retry};
use crate::gateway::Input;
use crate::handler::Outcome;
use crate::upstream::tls::Alpn;
use crate::upstream::{AppStream, Lease, Pool, Target};
use bytes::Bytes;
use h2::client::{ResponseFuture, SendRequest};
use h2::{RecvStream, SendStream};
use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use stoa_h1::proxy::FieldRules;
use stoa_h1::proxy::{write_request_head, ClientRequest, ForwardOptions, Node, UpstreamBody};
use stoa_h1::Version;
use tokio::time::{sleep_until, Instant};

/// Each stream's receive window toward the upstream: what one slow client
/// can make Stoa hold of a response.
const STREAM_WINDOW: u32 = 1 << 20;
/// The connection's receive window: several streams at full speed.
const CONN_WINDOW: u32 = 16 << 20;
/// A connection with no stream open this long is closed.
const IDLE: Duration = Duration::from_secs(60);

/// One connection to a server, shared by the requests of this worker.
struct Conn {
    send: SendRequest<Bytes>,
    /// Streams open on it now (ours: h2 also counts streams it queued).
    open: Rc<Cell<usize>>,
    /// Its driver ended (closed, GOAWAY, error): no new streams.
    gone: Rc<Cell<bool>>,
}

thread_local! {
    /// The request head as `stoa_h1::proxy` writes it, before it becomes
    /// HTTP/2 fields: one buffer per worker.
    static HEAD: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(4096));
    /// This worker's HTTP/2 connections, by server address.
    /// (A list: a pool has few servers, and comparing a `Target` costs
    /// less than formatting it into a key.)
    static CONNS: RefCell<Vec<(Target, Vec<Conn>)>> = const { RefCell::new(Vec::new()) };
}

/// A stream counted open on its connection until dropped.
struct Open(Rc<Cell<usize>>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// One of this worker's connections to `target` with room
/// for one more stream (under its SETTINGS_MAX_CONCURRENT_STREAMS), the
/// stream counted.
fn shared(target: &Target) -> Option<Share> {
    CONNS.with(|m| {
        let mut m = m.borrow_mut();
        let (_, list) = m.iter_mut().find(|(t, _)| t == target)?;
        list.retain(|c| !c.gone.get());
        list.iter()
            .find(|c| c.open.get() < c.send.current_max_send_streams().max(1))
            .map(|c| {
                c.open.set(c.open.get() + 1);
                (c.send.clone(), Open(c.open.clone()), c.gone.clone())
            })
    })
}

/// A connection being opened by a request of this worker, by address:
/// the others wait for it instead of opening one each.
struct Connecting {
    target: Target,
    done: Rc<tokio::sync::Notify>,
}

impl Drop for Connecting {
    /// Also when the opening request went away mid-connect.
    fn drop(&mut self) {
        OPENING.with(|m| m.borrow_mut().retain(|(t, _)| *t != self.target));
        self.done.notify_waiters();
    }
}

thread_local! {
    static OPENING: RefCell<Vec<(Target, Rc<tokio::sync::Notify>)>> =
        const { RefCell::new(Vec::new()) };
}

/// A stream on a new connection to `target`, or on the one another request
/// of this worker is opening (requests that arrive together at a cold
/// pool share one connection, which HTTP/2 is for, instead of opening one
/// each).
async fn connect(target: &Target, limit: Duration) -> io::Result<Share> {
    let until = Instant::now() + limit;
    let opening = || {
        OPENING.with(|m| {
            m.borrow()
                .iter()
                .find(|(t, _)| t == target)
                .map(|(_, n)| n.clone())
        })
    };
    while let Some(done) = opening() {
        let wait = done.notified();
        if tokio::time::timeout_at(until, wait).await.is_err() {
            break;
        }
        if let Some(s) = shared(target) {
            return Ok(s);
        }
    }
    let done = Rc::new(tokio::sync::Notify::new());
    OPENING.with(|m| m.borrow_mut().push((target.clone(), done.clone())));
    let _opening = Connecting {
        target: target.clone(),
        done,
    };
    open(target, until.saturating_duration_since(Instant::now())).await
}

/// Opens a connection to `target`, kept for this worker's next requests;
/// the first stream counted on it.
async fn open(target: &Target, limit: Duration) -> io::Result<Share> {
    // Over TLS the server must agree to h2 by ALPN (RFC 9113 §3.2); in
    // clear it is spoken with prior knowledge (§3.3).
    let stream = AppStream::connect_alpn(target, limit, Alpn::H2).await?;
    match &stream {
        AppStream::Tcp(s) => {
            // Frames are written whole; Nagle would hold a small one back
            // for the peer's delayed ACK (40 ms per gRPC message).
            let _ = s.set_nodelay(true);
        }
        AppStream::Tls(_) if stream.alpn() != Some(b"h2") => {
            return Err(io::Error::other(
                "the server did not agree to HTTP/2 (ALPN h2) in the TLS handshake",
            ));
        }
        _ => {}
    }
    let hs = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONN_WINDOW)
        .handshake::<_, Bytes>(stream);
    let (send, conn) = tokio::time::timeout(limit, hs)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "HTTP/2 handshake timed out"))?
        .map_err(io::Error::other)?;
    let open = Rc::new(Cell::new(1));
    let gone = Rc::new(Cell::new(false));
    let (o, g) = (open.clone(), gone.clone());
    tokio::task::spawn_local(async move {
        let mut conn = std::pin::pin!(conn);
        let mut idle_since = None;
        loop {
            tokio::select! {
                r = &mut conn => {
                    if let Err(e) = r {
                        tracing::debug!("h2 upstream connection: {e}");
                    }
                    break;
                }
                () = tokio::time::sleep(IDLE / 4) => {
                    if o.get() > 0 {
                        idle_since = None;
                    } else if idle_since.get_or_insert_with(Instant::now).elapsed() >= IDLE {
                        break;
                    }
                }
            }
        }
        g.set(true);
    });
    let conn = Conn {
        send: send.clone(),
        open: open.clone(),
        gone: gone.clone(),
    };
    CONNS.with(|m| {
        let mut m = m.borrow_mut();
        match m.iter_mut().find(|(t, _)| t == target) {
            Some((_, list)) => list.push(conn),
            None => m.push((target.clone(), vec![conn])),
        }
    });
    Ok((send, Open(open), gone))
}

/// gRPC status codes Stoa answers with ("gRPC over HTTP/2", "Status codes").
mod code {
    pub const DEADLINE_EXCEEDED: u8 = 4;
    pub const RESOURCE_EXHAUSTED: u8 = 8;
    pub const INTERNAL: u8 = 13;
    pub const UNAVAILABLE: u8 = 14;
}

/// Whether the request is a gRPC call: `content-type: application/grpc`
/// or `application/grpc+proto` and the like.
pub(crate) fn is_grpc(content_type: Option<&[u8]>) -> bool {
    content_type.is_some_and(|v| {
        v.len() >= 16
            && v[..16].eq_ignore_ascii_case(b"application/grpc")
            && matches!(v.get(16), None | Some(b'+' | b';'))
    })
}

/// `grpc-timeout`: at most 8 digits and a unit, H M S m u n ("gRPC over
/// HTTP/2", Requests).
pub(crate) fn grpc_timeout(v: &[u8]) -> Option<Duration> {
    let (&unit, digits) = v.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// Stoa's own failure, before any of the response went: a gRPC call gets
/// HTTP 200 with `grpc-status` in a trailers-only response (nginx's
/// `grpc_pass` and Envoy do the same), anything else `status`.
fn fail(ex: &mut Exchange<'_>, grpc: bool, status: u16, code: u8, msg: &str) {
    if !grpc {
        gateway::simple_now(ex, status);
        return;
    }
    ex.start(200);
    ex.header("content-type", b"application/grpc");
    let mut c = Vec::with_capacity(2);
    stoa_h1::push_u64(&mut c, code.into());
    ex.header("grpc-status", &c);
    ex.header("grpc-message", msg.as_bytes());
    if ex.protocol() == "HTTP/2.0" {
        // No content-length: the HEADERS frame ends the stream, as a
        // trailers-only response does.
        ex.end_head(None);
    } else {
        ex.end_head(Some(0));
    }
    ex.finish();
}

/// The same after the response head went: the status as trailers (gRPC
/// over HTTP/2, or HTTP/1.1 with `TE: trailers`), else the response is
/// cut so the client sees it failed.
fn fail_late(ex: &mut Exchange<'_>, grpc: bool, code: u8, msg: &str) {
    if !grpc {
        ex.abort();
        return;
    }
    let mut t = http::HeaderMap::new();
    t.insert("grpc-status", http::HeaderValue::from(u16::from(code)));
    if let Ok(v) = http::HeaderValue::from_str(msg) {
        t.insert("grpc-message", v);
    }
    ex.trailers(t);
    ex.finish();
}

/// Serves a request of `route` from `pool` over HTTP/2, on the one
/// upstream life cycle (`gateway::life`); `target` is the path and query
/// to send.
pub(super) async fn serve(
    route: &ProxyRoute,
    pool: &Arc<Pool>,
    target: &[u8],
    ex: &mut Exchange<'_>,
    up: Option<(&FieldRules, &[Vec<u8>])>,
) -> Outcome {
    let head = ex.req();
    let grpc = is_grpc(head.header("content-type"));
    let deadline = if grpc {
        head.header("grpc-timeout")
            .and_then(grpc_timeout)
            .map(|d| Instant::now() + d)
    } else {
        None
    };
    let mut steps = H2 {
        route,
        pool,
        target,
        grpc,
        deadline,
        up,
    };
    // The body streams both ways as it comes (gRPC's streaming calls: no
    // request buffering, as nginx's grpc module); a try goes again only
    // while nothing of it was taken from the client, which `exchange`
    // says in its `Fail`.
    let plan = life::Plan {
        pool,
        retries: &route.retries,
        streamed: false,
    };
    life::run(&mut steps, &plan, ex, &mut Input::None).await;
    Outcome::Done
}

/// The HTTP/2 steps of the upstream life cycle.
struct H2<'a> {
    route: &'a ProxyRoute,
    pool: &'a Arc<Pool>,
    target: &'a [u8],
    /// A gRPC call: Stoa's failures answer with `grpc-status`.
    grpc: bool,
    /// Its `grpc-timeout`, from when the request came.
    deadline: Option<Instant>,
    /// The route's `header_up` rules and their values for this request.
    up: Option<(&'a FieldRules, &'a [Vec<u8>])>,
}

/// A stream's share of a connection.
type Share = (SendRequest<Bytes>, Open, Rc<Cell<bool>>);

impl life::Steps for H2<'_> {
    type Conn = Share;
    type Out = ();
    /// As for HTTP/1: a server that failed a new connection is not asked
    /// again at once.
    const SAME_SERVER_PAUSE: Option<Duration> = None;
    /// A shared connection that went away (GOAWAY, a close) takes the
    /// request to a new one to the same server, as over HTTP/1.
    const RACE_ELSEWHERE: bool = false;
    const KIND: &'static str = "proxy";
    const ANOTHER: &'static str = "trying another server";

    /// A shared connection to the server with room for a stream; "park"
    /// is then a no-op: the connection stays shared.
    fn reuse(&mut self, lease: &Lease, _strict: bool) -> Option<Share> {
        shared(&lease.proc.target)
    }

    async fn connect(&mut self, lease: &Lease) -> Result<Share, Fail> {
        let mut limit = self.route.connect_timeout;
        if let Some(d) = self.deadline {
            limit = limit.min(d.saturating_duration_since(Instant::now()));
        }
        connect(&lease.proc.target, limit)
            .await
            .map_err(|e| Fail::connect(&e))
    }

    async fn exchange(
        &mut self,
        ex: &mut Exchange<'_>,
        lease: Lease,
        (send, open, gone): Share,
        _input: &mut Input,
        t: &life::Try<'_>,
    ) -> Result<(), Fail> {
        let began = std::time::Instant::now();
        let r = exchange(self, ex, &lease, send, t).await;
        if let Err(f) = &r {
            if f.cause == life::Cause::Error {
                // The connection is suspect: the next try opens a new one.
                gone.set(true);
            }
        } else {
            lease.proc.record_latency(began.elapsed());
            lease.served();
        }
        drop(open);
        r
    }

    async fn answer(&self, ex: &mut Exchange<'_>, status: u16, retry_after: bool, sent: bool) {
        if !self.grpc {
            if retry_after {
                gateway::simple(ex, status, &[("Retry-After", b"1")]);
            } else if sent {
                gateway::fail_now(ex, status).await;
            } else {
                gateway::simple(ex, status, &[]);
            }
            return;
        }
        // The HTTP-to-gRPC status mapping of the gRPC spec, but a timeout
        // of Stoa's own is the call's deadline (as Envoy reports it).
        let (code, msg) = match status {
            504 => (code::DEADLINE_EXCEEDED, "upstream timed out"),
            503 => (code::UNAVAILABLE, "no upstream server free"),
            400 => (code::INTERNAL, "request not forwarded"),
            _ => (code::UNAVAILABLE, "upstream unavailable"),
        };
        // No flush here: over HTTP/2 the head must leave with END_STREAM
        // (a trailers-only response), which the stream's last flush does.
        fail(ex, true, status, code, msg);
    }
}

/// What happened next on the client's side.
enum ClientEv {
    Body(Result<bool, BodyFail>),
    Gone(bool),
}

async fn client_ev(ex: &mut Exchange<'_>, buf: &mut Vec<u8>, reading: bool) -> ClientEv {
    if reading {
        ClientEv::Body(ex.read_body(buf).await)
    } else if ex.can_watch() {
        ClientEv::Gone(ex.client_gone().await)
    } else {
        std::future::pending().await
    }
}

enum Down {
    Head(ResponseFuture),
    Body(RecvStream),
}

enum DownEv {
    Head(Result<http::Response<RecvStream>, h2::Error>),
    Data(Option<Result<Bytes, h2::Error>>),
}

async fn down_ev(down: &mut Down) -> DownEv {
    match down {
        Down::Head(f) => {
            DownEv::Head(poll_fn(|cx| std::future::Future::poll(Pin::new(&mut *f), cx)).await)
        }
        Down::Body(r) => DownEv::Data(r.data().await),
    }
}

/// Waits for window on the upstream stream for (part of) `want` bytes.
async fn capacity(up: &mut SendStream<Bytes>, want: usize) -> Option<usize> {
    loop {
        let have = up.capacity();
        if have > 0 {
            return Some(have.min(want));
        }
        match poll_fn(|cx| up.poll_capacity(cx)).await {
            Some(Ok(n)) if n > 0 => return Some(n.min(want)),
            Some(Ok(_)) => continue,
            _ => return None,
        }
    }
}

/// Builds the upstream request: the head `stoa_h1::proxy` writes for an
/// HTTP/1.1 upstream (hop-by-hop fields out, `Forwarded`, `X-Forwarded-*`),
/// turned into HTTP/2's fields; `Host` becomes `:authority` (RFC 9113
/// §8.3.1) and `TE: trailers` is kept, the one TE HTTP/2 allows and
/// which gRPC servers require (§8.2.2).
fn request(
    ex: &Exchange<'_>,
    route: &ProxyRoute,
    authority: &str,
    target: &[u8],
    up: Option<(&FieldRules, &[Vec<u8>])>,
) -> Result<http::Request<()>, String> {
    let head = ex.req();
    let peer = ex.peer();
    let req = ClientRequest {
        method: head.method.as_str(),
        target,
        version: head.version,
        headers: head.headers(),
        host: head.host(),
        peer,
        scheme: ex.scheme(),
        expect_continue: false,
        upgrade: None,
    };
    let opts = ForwardOptions {
        version: Version::Http11,
        upstream_host: authority.as_bytes(),
        preserve_host: route.preserve_host,
        trusted: &route.trusted,
        forwarded: route.forwarded,
        x_forwarded: route.x_forwarded,
        for_node: Some(Node::Ip(peer.ip())),
        by: ex.local_addr().map(|a| Node::Ip(a.ip())),
        via: None,
        keep_alive: true,
        prefix: route.strip_prefix.as_deref().map(str::as_bytes),
        rules: up,
    };
    let body = if ex.body_done() {
        UpstreamBody::None
    } else {
        match ex.body_length() {
            Some(n) => UpstreamBody::Length(n),
            None => UpstreamBody::Chunked,
        }
    };
    // Written into this worker's buffer, then one copy the fields' values
    // share (no allocation per field).
    let raw = HEAD.with(|h| {
        let mut h = h.borrow_mut();
        h.clear();
        write_request_head(&mut h, &req, &opts, body).map(|()| Bytes::copy_from_slice(&h))
    });
    let raw = raw.map_err(|e| format!("{e:?}"))?;
    let mut b = http::Request::builder().method(
        http::Method::from_bytes(head.method.as_str().as_bytes()).map_err(|e| e.to_string())?,
    );
    let mut host = None;
    let mut lines = raw.split(|&c| c == b'\n');
    // The request line's target is the one to send.
    let path = lines
        .next()
        .and_then(|l| l.split(|&c| c == b' ').nth(1))
        .ok_or("no request line")?;
    let path = http::uri::PathAndQuery::from_maybe_shared(raw.slice_ref(path))
        .map_err(|e| e.to_string())?;
    let headers = b.headers_mut().ok_or("bad method")?;
    for line in lines {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&c| c == b':') else {
            continue;
        };
        let name = &line[..colon];
        let value = stoa_h1::trim(&line[colon + 1..]);
        if name.eq_ignore_ascii_case(b"host") {
            host = Some(value);
            continue;
        }
        if name.eq_ignore_ascii_case(b"transfer-encoding")
            || name.eq_ignore_ascii_case(b"connection")
            || name.eq_ignore_ascii_case(b"keep-alive")
        {
            continue;
        }
        let name = http::HeaderName::from_bytes(name).map_err(|e| e.to_string())?;
        let value = http::HeaderValue::from_maybe_shared(raw.slice_ref(value))
            .map_err(|e| e.to_string())?;
        headers.append(name, value);
    }
    let te = head.header("te").is_some_and(|v| {
        v.split(|&c| c == b',')
            .any(|t| stoa_h1::trim(t).eq_ignore_ascii_case(b"trailers"))
    });
    if te {
        headers.insert(http::header::TE, http::HeaderValue::from_static("trailers"));
    }
    let authority = match host {
        Some(h) => http::uri::Authority::from_maybe_shared(raw.slice_ref(h)),
        None => http::uri::Authority::try_from(authority.as_bytes()),
    }
    .map_err(|e| e.to_string())?;
    let mut parts = http::uri::Parts::default();
    parts.scheme = Some(http::uri::Scheme::HTTP);
    parts.authority = Some(authority);
    parts.path_and_query = Some(path);
    let uri = http::Uri::from_parts(parts).map_err(|e| e.to_string())?;
    b.uri(uri).body(()).map_err(|e| e.to_string())
}

/// Passes the upstream's response head to the client; whether a body
/// follows.
fn pass_head(ex: &mut Exchange<'_>, resp: &http::Response<RecvStream>) {
    let status = resp.status().as_u16();
    let ended = resp.body().is_end_stream();
    let bodyless = stoa_h1::response::bodyless(ex.is_head(), status);
    let mut lines = Vec::with_capacity(512);
    let mut length = None;
    for (name, value) in resp.headers() {
        let n = name.as_str();
        if n == "server" || n == "date" {
            continue;
        }
        if n == "content-length" && !bodyless {
            length = stoa_h1::parse_u64(value.as_bytes());
            continue;
        }
        lines.extend_from_slice(n.as_bytes());
        lines.extend_from_slice(b": ");
        lines.extend_from_slice(value.as_bytes());
        lines.extend_from_slice(b"\r\n");
    }
    ex.start(status);
    ex.raw_headers(&lines);
    if bodyless || (ended && ex.protocol() == "HTTP/2.0") {
        // Over HTTP/2 a HEADERS frame that ends the stream stays one
        // (gRPC's trailers-only response).
        ex.end_head(None);
    } else if ended {
        ex.end_head(Some(0));
    } else if let Some(n) = length {
        ex.end_head(Some(n));
    } else {
        ex.end_head_stream();
    }
}

/// Sends the request on a new stream of `send` and passes the response
/// on, both bodies at once.
async fn exchange(
    steps: &H2<'_>,
    ex: &mut Exchange<'_>,
    lease: &Lease,
    send: SendRequest<Bytes>,
    t: &life::Try<'_>,
) -> Result<(), Fail> {
    let H2 {
        route,
        pool,
        target,
        grpc,
        deadline,
        up,
    } = *steps;
    // The route's `read_timeout`, else its `timeout`, else the pool's: for
    // the head, then between pieces of the body.
    let limit = route
        .read_timeout
        .unwrap_or_else(|| ex.edge().timeout.unwrap_or(pool.spec.timeout));
    let server = &lease.proc.target;
    let req = request(ex, route, &lease.proc.authority, target, up)
        .map_err(|e| Fail::local(400, format!("request not forwarded over HTTP/2: {e}")))?;
    // The connection went away (or refused the stream) before the server
    // took the request, and nothing of it came from the client yet: it
    // goes again, any method (RFC 9113 §8.7: REFUSED_STREAM and streams
    // above a GOAWAY's last id were not processed).
    let unsent = |what: String| Fail::closed(t.reused, Retry::Unsent, what);
    let mut send = send
        .ready()
        .await
        .map_err(|e| unsent(format!("connection not usable: {e}")))?;
    let no_body = ex.body_done();
    let (resp, stream) = send
        .send_request(req, no_body)
        .map_err(|e| unsent(format!("stream not opened: {e}")))?;
    let mut up = (!no_body).then_some(stream);
    let mut pending: Option<Bytes> = None;
    let mut client_done = no_body;
    let mut read_any = false;
    let mut buf = Vec::new();
    let mut down = Down::Head(resp);
    let mut head_sent = false;
    let mut read_by = Instant::now() + limit;
    loop {
        let until = deadline.map_or(read_by, |d| d.min(read_by));
        let reading = up.is_some() && pending.is_none() && !client_done;
        let want = pending.as_ref().map_or(0, Bytes::len);
        enum Ev {
            Client(ClientEv),
            Cap(Option<usize>),
            Down(DownEv),
            Timeout,
        }
        let ev = tokio::select! {
            e = client_ev(ex, &mut buf, reading) => Ev::Client(e),
            c = async {
                match up.as_mut() {
                    Some(u) if want > 0 => capacity(u, want).await,
                    _ => std::future::pending().await,
                }
            } => Ev::Cap(c),
            d = down_ev(&mut down) => Ev::Down(d),
            () = sleep_until(until) => Ev::Timeout,
        };
        match ev {
            Ev::Client(ClientEv::Body(Ok(more))) => {
                read_any = true;
                if !buf.is_empty() {
                    let piece = Bytes::from(std::mem::take(&mut buf));
                    if let Some(u) = up.as_mut() {
                        u.reserve_capacity(piece.len());
                    }
                    pending = Some(piece);
                }
                client_done = !more;
                if client_done && pending.is_none() {
                    end_up(ex, &mut up).await;
                }
            }
            Ev::Client(ClientEv::Body(Err(e))) => {
                if let Some(mut u) = up.take() {
                    u.send_reset(h2::Reason::CANCEL);
                }
                if head_sent {
                    ex.abort();
                    return Ok(());
                }
                match e {
                    BodyFail::Gone => ex.close(),
                    BodyFail::TooLarge => {
                        fail(ex, grpc, 413, code::RESOURCE_EXHAUSTED, "request too large")
                    }
                    BodyFail::Slow => fail(
                        ex,
                        grpc,
                        408,
                        code::DEADLINE_EXCEEDED,
                        "request body too slow",
                    ),
                    BodyFail::Malformed | BodyFail::Spool => {
                        fail(ex, grpc, 400, code::INTERNAL, "bad request body")
                    }
                }
                return Ok(());
            }
            Ev::Client(ClientEv::Gone(gone)) => {
                if gone {
                    // Dropping the streams resets them (CANCEL): the
                    // server stops working for nobody.
                    ex.abort();
                    return Ok(());
                }
            }
            Ev::Cap(Some(n)) => {
                let (Some(u), Some(p)) = (up.as_mut(), pending.as_mut()) else {
                    continue;
                };
                let piece = p.split_to(n);
                if u.send_data(piece, false).is_err() {
                    up = None;
                    pending = None;
                    continue;
                }
                if p.is_empty() {
                    pending = None;
                    if client_done {
                        end_up(ex, &mut up).await;
                    }
                }
            }
            Ev::Cap(None) => {
                // The upstream closed its side of the stream (it answered,
                // or reset it): the response side tells which.
                up = None;
                pending = None;
            }
            Ev::Down(DownEv::Head(Ok(resp))) => {
                let status = resp.status().as_u16();
                if t.retry_statuses.contains(&status) && !read_any && pending.is_none() {
                    return Err(Fail::status(t.reused, status));
                }
                gateway::learn_session(pool, lease.proc.index, response_fields(resp.headers()));
                pass_head(ex, &resp);
                head_sent = true;
                let body = resp.into_body();
                if body.is_end_stream() {
                    ex.finish();
                    return Ok(());
                }
                if !ex.flush().await {
                    ex.abort();
                    return Ok(());
                }
                down = Down::Body(body);
                read_by = Instant::now() + limit;
            }
            Ev::Down(DownEv::Head(Err(e))) => {
                let refused = e.reason() == Some(h2::Reason::REFUSED_STREAM)
                    || (e.is_go_away() && e.reason() == Some(h2::Reason::NO_ERROR))
                    || e.is_io();
                let nothing_read = !read_any && pending.is_none();
                if refused && nothing_read {
                    return Err(unsent(format!("no response: {e}")));
                }
                let mut f = Fail::closed(t.reused, Retry::MaybeSent, format!("no response: {e}"));
                if !nothing_read {
                    // Part of a streamed body is gone: it cannot go again.
                    f.retry = Retry::Never;
                }
                return Err(f);
            }
            Ev::Down(DownEv::Data(Some(Ok(data)))) => {
                let n = data.len();
                if n > 0 {
                    ex.body_mem(data);
                    if !ex.flush().await {
                        ex.abort();
                        return Ok(());
                    }
                }
                if let Down::Body(r) = &mut down {
                    // The client took it: the upstream may send as much
                    // again.
                    let _ = r.flow_control().release_capacity(n);
                }
                read_by = Instant::now() + limit;
            }
            Ev::Down(DownEv::Data(None)) => {
                if let Down::Body(r) = &mut down {
                    match poll_fn(|cx| r.poll_trailers(cx)).await {
                        Ok(Some(t)) => ex.trailers(t),
                        Ok(None) => {}
                        Err(e) => {
                            tracing::error!(
                                "proxy pool {}: server #{} ({server}): response trailers: {e}; {}",
                                pool.spec.name,
                                lease.proc.index,
                                ex.who()
                            );
                            fail_late(ex, grpc, code::UNAVAILABLE, "upstream failed");
                            return Ok(());
                        }
                    }
                }
                ex.finish();
                return Ok(());
            }
            Ev::Down(DownEv::Data(Some(Err(e)))) => {
                tracing::error!(
                    "proxy pool {}: server #{} ({server}): response cut over HTTP/2: {e}; {}",
                    pool.spec.name,
                    lease.proc.index,
                    ex.who()
                );
                fail_late(ex, grpc, code::UNAVAILABLE, "upstream failed mid-response");
                return Ok(());
            }
            Ev::Timeout => {
                let by_deadline = deadline.is_some_and(|d| d <= Instant::now());
                let what = if by_deadline {
                    "grpc-timeout passed".to_owned()
                } else if head_sent {
                    format!("no output for {limit:?}")
                } else {
                    format!("no response within {limit:?}")
                };
                if let Some(mut u) = up.take() {
                    u.send_reset(h2::Reason::CANCEL);
                }
                if !head_sent {
                    let mut f = Fail::timeout(t.reused, what);
                    if by_deadline || read_any || pending.is_some() {
                        f.retry = Retry::Never;
                    }
                    return Err(f);
                }
                tracing::error!(
                    "proxy pool {}: server #{} ({server}): {what}; {}",
                    pool.spec.name,
                    lease.proc.index,
                    ex.who()
                );
                fail_late(ex, grpc, code::DEADLINE_EXCEEDED, "upstream timed out");
                return Ok(());
            }
        }
    }
}

/// The client's body ended: its trailers, if any, end the upstream stream
/// (RFC 9113 §8.1), else an empty DATA frame does.
async fn end_up(ex: &mut Exchange<'_>, up: &mut Option<SendStream<Bytes>>) {
    let Some(mut u) = up.take() else { return };
    match ex.request_trailers().await {
        Some(t) if !t.is_empty() => {
            let _ = u.send_trailers(t);
        }
        _ => {
            let _ = u.send_data(Bytes::new(), true);
        }
    }
}

/// A response's fields as `(name, value)` bytes, for what reads them so.
fn response_fields(h: &http::HeaderMap) -> impl Iterator<Item = (&[u8], &[u8])> {
    h.iter().map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_content_types_are_recognised_as_the_grpc_spec_writes_them() {
        // "gRPC over HTTP/2": Content-Type → "application/grpc"
        // [("+proto" / "+json" / {custom})].
        assert!(is_grpc(Some(b"application/grpc")));
        assert!(is_grpc(Some(b"application/grpc+proto")));
        assert!(is_grpc(Some(b"Application/GRPC+json")));
        assert!(!is_grpc(Some(b"application/grpc-web")));
        assert!(!is_grpc(Some(b"application/json")));
        assert!(!is_grpc(None));
    }

    #[test]
    fn grpc_timeout_is_read_in_every_unit_of_the_grpc_spec() {
        // TimeoutValue: at most 8 digits; TimeoutUnit: H M S m u n.
        assert_eq!(grpc_timeout(b"1H"), Some(Duration::from_secs(3600)));
        assert_eq!(grpc_timeout(b"2M"), Some(Duration::from_secs(120)));
        assert_eq!(grpc_timeout(b"3S"), Some(Duration::from_secs(3)));
        assert_eq!(grpc_timeout(b"250m"), Some(Duration::from_millis(250)));
        assert_eq!(
            grpc_timeout(b"99999999u"),
            Some(Duration::from_micros(99_999_999))
        );
        assert_eq!(grpc_timeout(b"5n"), Some(Duration::from_nanos(5)));
        assert_eq!(grpc_timeout(b"123456789m"), None);
        assert_eq!(grpc_timeout(b"10"), None);
        assert_eq!(grpc_timeout(b"m"), None);
        assert_eq!(grpc_timeout(b"1x"), None);
    }
}
