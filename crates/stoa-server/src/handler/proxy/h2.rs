//! HTTP/2 to the application (`http_version = "2"`, or a pool whose
//! addresses are written `h2c://`): prior knowledge in clear (RFC 9113
//! §3.3), with the `h2` crate. Each worker keeps a few connections per
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
use crate::handler::Outcome;
use crate::upstream::{AppStream, NoProcess, Pool, Target};
use bytes::Bytes;
use h2::client::{ResponseFuture, SendRequest};
use h2::{RecvStream, SendStream};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
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
    /// This worker's HTTP/2 connections, by server address.
    static CONNS: RefCell<HashMap<String, Vec<Conn>>> = RefCell::new(HashMap::new());
}

/// A stream counted open on its connection until dropped.
struct Open(Rc<Cell<usize>>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// A connection to `target` with room for one more stream: one of this
/// worker's, else a new one.
async fn stream_on(
    target: &Target,
    limit: Duration,
) -> io::Result<(SendRequest<Bytes>, Open, Rc<Cell<bool>>)> {
    let key = target.to_string();
    let found = CONNS.with(|m| {
        let mut m = m.borrow_mut();
        let list = m.entry(key.clone()).or_default();
        list.retain(|c| !c.gone.get());
        list.iter()
            .find(|c| c.open.get() < c.send.current_max_send_streams().max(1))
            .map(|c| {
                c.open.set(c.open.get() + 1);
                (c.send.clone(), Open(c.open.clone()), c.gone.clone())
            })
    });
    if let Some(f) = found {
        return Ok(f);
    }
    let stream = AppStream::connect(target, limit).await?;
    if let AppStream::Tcp(s) = &stream {
        // Frames are written whole; Nagle would hold a small one back
        // for the peer's delayed ACK (40 ms per gRPC message).
        let _ = s.set_nodelay(true);
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
    CONNS.with(|m| {
        m.borrow_mut().entry(key).or_default().push(Conn {
            send: send.clone(),
            open: open.clone(),
            gone: gone.clone(),
        })
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

/// Serves a request of `route` from `pool` over HTTP/2; `target` is the
/// path and query to send.
pub(super) async fn serve(
    route: &ProxyRoute,
    pool: &Arc<Pool>,
    target: &[u8],
    ex: &mut Exchange<'_>,
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
    let key = gateway::affinity_key(&pool.spec.affinity, ex);
    let mut skip = None;
    let mut tries = pool.procs.len().clamp(2, 4);
    loop {
        tries -= 1;
        let lease = match pool.lease(key.as_deref(), skip).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(
                    "proxy pool {}: {} ({} waiting); {}; {}",
                    pool.spec.name,
                    match e {
                        NoProcess::QueueFull => "queue full",
                        NoProcess::Timeout => "none free in time",
                        NoProcess::Stopped => "stopped by a reload that removed it",
                    },
                    pool.waiting(),
                    if grpc { "grpc-status 14" } else { "503" },
                    ex.who()
                );
                fail(ex, grpc, 503, code::UNAVAILABLE, "no upstream server free");
                return Outcome::Done;
            }
        };
        ex.upstream_began(gateway::target_addr(&lease.proc.target));
        let mut connect = route.connect_timeout;
        if let Some(d) = deadline {
            connect = connect.min(d.saturating_duration_since(Instant::now()));
        }
        let (send, open, gone) = match stream_on(&lease.proc.target, connect).await {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(
                    "proxy pool {}: server {}: HTTP/2 connect: {e}; {}",
                    pool.spec.name,
                    lease.proc.target,
                    ex.who()
                );
                lease.hold_off(super::HOLD_OFF);
                if tries > 0 && pool.procs.len() > 1 {
                    skip = Some(lease.proc.index);
                    continue;
                }
                let (status, c, m) = if e.kind() == io::ErrorKind::TimedOut {
                    (504, code::UNAVAILABLE, "upstream connect timed out")
                } else {
                    (502, code::UNAVAILABLE, "upstream unreachable")
                };
                fail(ex, grpc, status, c, m);
                return Outcome::Done;
            }
        };
        let began = std::time::Instant::now();
        match exchange(ex, route, pool, &lease, send, target, grpc, deadline).await {
            Try::Done => {
                lease.proc.record_latency(began.elapsed());
                lease.served();
                return Outcome::Done;
            }
            Try::Refused(why) => {
                // The connection went away (or refused the stream) before
                // the server took the request, and nothing of it came from
                // the client yet: it goes again, any method (RFC 9113
                // §8.7: REFUSED_STREAM and streams above a GOAWAY's last
                // id were not processed).
                gone.set(true);
                drop(open);
                if tries == 0 {
                    tracing::error!(
                        "proxy pool {}: server {}: {why}; tried enough; {}",
                        pool.spec.name,
                        lease.proc.target,
                        ex.who()
                    );
                    fail(ex, grpc, 502, code::UNAVAILABLE, "upstream connection failed");
                    return Outcome::Done;
                }
                tracing::info!(
                    "proxy pool {}: server {}: {why}; sent again on a new connection; {}",
                    pool.spec.name,
                    lease.proc.target,
                    ex.who()
                );
                lease.proc.retried();
            }
        }
    }
}

enum Try {
    /// Answered (well or not): nothing more to do.
    Done,
    /// Not taken by the server, nothing read from the client: may go again.
    Refused(String),
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
        Down::Head(f) => DownEv::Head(poll_fn(|cx| std::future::Future::poll(Pin::new(&mut *f), cx)).await),
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
    };
    let body = if ex.body_done() {
        UpstreamBody::None
    } else {
        match ex.body_length() {
            Some(n) => UpstreamBody::Length(n),
            None => UpstreamBody::Chunked,
        }
    };
    let mut raw = Vec::with_capacity(1024);
    write_request_head(&mut raw, &req, &opts, body).map_err(|e| format!("{e:?}"))?;
    let mut b = http::Request::builder()
        .method(http::Method::from_bytes(head.method.as_str().as_bytes()).map_err(|e| e.to_string())?);
    let mut host: &[u8] = authority.as_bytes();
    let mut lines = raw.split(|&c| c == b'\n').skip(1);
    let headers = b.headers_mut().ok_or("bad method")?;
    for line in lines.by_ref() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&c| c == b':') else {
            continue;
        };
        let name = &line[..colon];
        let value = stoa_h1::trim(&line[colon + 1..]);
        if name.eq_ignore_ascii_case(b"host") {
            host = value;
            continue;
        }
        if name.eq_ignore_ascii_case(b"transfer-encoding")
            || name.eq_ignore_ascii_case(b"connection")
            || name.eq_ignore_ascii_case(b"keep-alive")
        {
            continue;
        }
        let name = http::HeaderName::from_bytes(name).map_err(|e| e.to_string())?;
        let value = http::HeaderValue::from_bytes(value).map_err(|e| e.to_string())?;
        headers.append(name, value);
    }
    let te = head.header("te").is_some_and(|v| {
        v.split(|&c| c == b',')
            .any(|t| stoa_h1::trim(t).eq_ignore_ascii_case(b"trailers"))
    });
    if te {
        headers.insert(http::header::TE, http::HeaderValue::from_static("trailers"));
    }
    let uri = http::Uri::builder()
        .scheme("http")
        .authority(host)
        .path_and_query(target)
        .build()
        .map_err(|e| e.to_string())?;
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
#[allow(clippy::too_many_arguments)]
async fn exchange(
    ex: &mut Exchange<'_>,
    route: &ProxyRoute,
    pool: &Pool,
    lease: &crate::upstream::Lease,
    send: SendRequest<Bytes>,
    target: &[u8],
    grpc: bool,
    deadline: Option<Instant>,
) -> Try {
    // The route's `timeout`, else the pool's: for the head, then between
    // pieces of the body.
    let limit = ex.edge().timeout.unwrap_or(pool.spec.timeout);
    let server = &lease.proc.target;
    let req = match request(ex, route, &lease.proc.authority, target) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(
                "proxy pool {}: server {server}: request not forwarded over HTTP/2: {e}; {}",
                pool.spec.name,
                ex.who()
            );
            fail(ex, grpc, 400, code::INTERNAL, "request not forwarded");
            return Try::Done;
        }
    };
    let mut send = match send.ready().await {
        Ok(s) => s,
        Err(e) => return Try::Refused(format!("connection not usable: {e}")),
    };
    let no_body = ex.body_done();
    let (resp, stream) = match send.send_request(req, no_body) {
        Ok(x) => x,
        Err(e) => return Try::Refused(format!("stream not opened: {e}")),
    };
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
                    return Try::Done;
                }
                match e {
                    BodyFail::Gone => ex.close(),
                    BodyFail::TooLarge => {
                        fail(ex, grpc, 413, code::RESOURCE_EXHAUSTED, "request too large")
                    }
                    BodyFail::Slow => {
                        fail(ex, grpc, 408, code::DEADLINE_EXCEEDED, "request body too slow")
                    }
                    BodyFail::Malformed | BodyFail::Spool => {
                        fail(ex, grpc, 400, code::INTERNAL, "bad request body")
                    }
                }
                return Try::Done;
            }
            Ev::Client(ClientEv::Gone(gone)) => {
                if gone {
                    // Dropping the streams resets them (CANCEL): the
                    // server stops working for nobody.
                    ex.abort();
                    return Try::Done;
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
                gateway::learn_session(pool, lease.proc.index, response_fields(resp.headers()));
                pass_head(ex, &resp);
                head_sent = true;
                let body = resp.into_body();
                if body.is_end_stream() {
                    ex.finish();
                    return Try::Done;
                }
                if !ex.flush().await {
                    ex.abort();
                    return Try::Done;
                }
                down = Down::Body(body);
                read_by = Instant::now() + limit;
            }
            Ev::Down(DownEv::Head(Err(e))) => {
                let refused = e.reason() == Some(h2::Reason::REFUSED_STREAM)
                    || (e.is_go_away() && e.reason() == Some(h2::Reason::NO_ERROR))
                    || e.is_io();
                if refused && !read_any && pending.is_none() {
                    return Try::Refused(format!("no response: {e}"));
                }
                tracing::error!(
                    "proxy pool {}: server {server}: no response over HTTP/2: {e}; {}",
                    pool.spec.name,
                    ex.who()
                );
                fail(ex, grpc, 502, code::UNAVAILABLE, "upstream failed");
                return Try::Done;
            }
            Ev::Down(DownEv::Data(Some(Ok(data)))) => {
                let n = data.len();
                if n > 0 {
                    ex.body_mem(data);
                    if !ex.flush().await {
                        ex.abort();
                        return Try::Done;
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
                                "proxy pool {}: server {server}: response trailers: {e}; {}",
                                pool.spec.name,
                                ex.who()
                            );
                            fail_late(ex, grpc, code::UNAVAILABLE, "upstream failed");
                            return Try::Done;
                        }
                    }
                }
                ex.finish();
                return Try::Done;
            }
            Ev::Down(DownEv::Data(Some(Err(e)))) => {
                tracing::error!(
                    "proxy pool {}: server {server}: response cut over HTTP/2: {e}; {}",
                    pool.spec.name,
                    ex.who()
                );
                fail_late(ex, grpc, code::UNAVAILABLE, "upstream failed mid-response");
                return Try::Done;
            }
            Ev::Timeout => {
                let by_deadline = deadline.is_some_and(|d| d <= Instant::now());
                tracing::error!(
                    "proxy pool {}: server {server}: {}; {}",
                    pool.spec.name,
                    if by_deadline {
                        "grpc-timeout passed".to_owned()
                    } else if head_sent {
                        format!("no output for {limit:?}")
                    } else {
                        format!("no response within {limit:?}")
                    },
                    ex.who()
                );
                if let Some(mut u) = up.take() {
                    u.send_reset(h2::Reason::CANCEL);
                }
                if head_sent {
                    fail_late(ex, grpc, code::DEADLINE_EXCEEDED, "upstream timed out");
                } else {
                    fail(ex, grpc, 504, code::DEADLINE_EXCEEDED, "upstream timed out");
                }
                return Try::Done;
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
        assert_eq!(grpc_timeout(b"99999999u"), Some(Duration::from_micros(99_999_999)));
        assert_eq!(grpc_timeout(b"5n"), Some(Duration::from_nanos(5)));
        assert_eq!(grpc_timeout(b"123456789m"), None);
        assert_eq!(grpc_timeout(b"10"), None);
        assert_eq!(grpc_timeout(b"m"), None);
        assert_eq!(grpc_timeout(b"1x"), None);
    }
}
