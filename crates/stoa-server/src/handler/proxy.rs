//! The reverse proxy: a request goes to an HTTP/1.1 application server of a
//! pool (`protocol = "http"`) over a kept-alive connection from the
//! upstream layer's stash; the head is rewritten by the sans-IO
//! `stoa_h1::proxy` (hop-by-hop fields, `Forwarded`, `X-Forwarded-*`), and
//! the response comes back through the exchange with backpressure.
//!
//! The keep-alive race (the application closes an idle connection just as
//! a request goes out on it) costs no request: a connection reused for a
//! request that could not be sent again is peeked first, and a request
//! that fails on a reused connection before any response byte goes again
//! on a fresh one — any method when the upstream reset the connection (it
//! closed without reading the request), an idempotent one (or one with
//! `Idempotency-Key`) when it closed cleanly. Never once a response byte
//! reached the client.

mod h2;

use super::proxy_rules::{Expanded, HeaderRules, HeaderRulesConfig};
use super::Outcome;
use crate::exchange::Exchange;
use crate::gateway::life::{self, Fail, Retry};
use crate::gateway::spool::{Spool, SpoolLimits};
use crate::gateway::{self, Bufs, Input};
use crate::upstream::{AppStream, Lease, Pool};
use std::borrow::Cow;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use stoa_h1::body::BodyDecoder;
use stoa_h1::proxy::{
    inspect_response, write_request_head, write_response_headers, ClientRequest, ForwardOptions,
    KeepAlive, Node, RedirectRule, ResponseKind, ResponseOptions, SentRequest, TrustedProxies,
    UpstreamBody,
};
use stoa_h1::{Framing, Method, Version};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout;

/// Largest response head accepted from an upstream.
const MAX_HEAD: usize = 64 * 1024;
/// Read size from the upstream; also bounds what a slow client makes Stoa
/// hold per request (the next read waits for the client).
const READ_CHUNK: usize = 64 * 1024;
/// How long an application may take to answer `Expect: 100-continue`
/// before the body goes anyway (curl waits 1 s too).
const EXPECT_WAIT: Duration = Duration::from_secs(1);

/// A `proxy = {...}` route, validated.
#[derive(Debug)]
pub struct ProxyRoute {
    /// Index into the running pools.
    pub pool: usize,
    pub pool_name: String,
    /// Remove this prefix (the route's) from the path sent upstream.
    pub strip_prefix: Option<String>,
    /// Send the client's Host (else the upstream's address).
    pub preserve_host: bool,
    /// Peers whose `Forwarded` / `X-Forwarded-*` fields are kept (and
    /// appended to); from anyone else they are replaced.
    pub trusted: TrustedProxies,
    pub forwarded: bool,
    pub x_forwarded: bool,
    /// Read the request body before a connection is taken (default true):
    /// a slow client then holds no upstream connection, and any request
    /// can be sent again after the keep-alive race.
    pub buffering: bool,
    /// An upgraded connection (WebSocket) closes after this long with no
    /// byte either way.
    pub tunnel_timeout: Duration,
    /// Connecting gives up after this (then another server, or 502).
    pub connect_timeout: Duration,
    /// Writing the request may stall this long (default: the route's
    /// `timeout`, else the pool's).
    pub send_timeout: Option<Duration>,
    /// The response head, then each piece of the body, may take this long
    /// (default: the route's `timeout`, else the pool's).
    pub read_timeout: Option<Duration>,
    /// When a failed try goes again (`gateway::life`).
    pub(crate) retries: life::Retries,
    /// The upstream speaks HTTP/1.0: no chunked bodies toward it, and a
    /// connection is kept only when it says `Connection: keep-alive`.
    pub http10: bool,
    /// The upstream speaks HTTP/2 (`http_version = "2"`, or `h2c://`
    /// addresses): see `proxy/h2.rs`.
    pub http2: bool,
    /// `header_up` and `header_down` (super::proxy_rules).
    pub(crate) header_up: Option<HeaderRules>,
    pub(crate) header_down: Option<HeaderRules>,
    /// `response_buffering` (crate::gateway::spool): the body is taken
    /// in first and the connection released before the client reads it.
    pub(crate) spool: Option<SpoolLimits>,
}

/// Serves a request from an HTTP pool.
/// `norm` is the path routing matched, decoded and normalized.
pub async fn serve(
    route: &ProxyRoute,
    norm: &str,
    ex: &mut Exchange<'_>,
    pools: &[Arc<Pool>],
    granted: &[(String, Vec<u8>)],
) -> Outcome {
    let Some(pool) = pools.get(route.pool).cloned() else {
        tracing::error!(
            "proxy: pool {} is not running; {}",
            route.pool_name,
            ex.who()
        );
        gateway::simple(ex, 503, &[]);
        return Outcome::Done;
    };
    // `header_up` / `header_down` values for this request (nothing to
    // do without rules).
    let rules = Expanded::new(
        route.header_up.as_ref(),
        route.header_down.as_ref(),
        ex,
        norm,
        granted,
    );
    if route.http2 || pool.spec.h2c {
        let target = upstream_target(route, ex.req(), norm);
        // Boxed: its state (both bodies in flight at once) would otherwise
        // grow every request's future, the static path's included.
        return Box::pin(h2::serve(route, &pool, &target, ex, rules.up())).await;
    }
    // Without buffering, a chunked body streams to an HTTP/1.1 upstream
    // in chunks of Stoa's own as it arrives (it cannot be sent again).
    let rechunk = !route.buffering && !route.http10 && ex.body_length().is_none();
    let mut input = if rechunk {
        Input::None
    } else {
        match gateway::read_input(ex, route.buffering).await {
            Some(i) => i,
            None => return Outcome::Done,
        }
    };
    let head = ex.req();
    // The path routing matched (decoded and normalized), encoded again: an
    // upstream never sees `/app/../admin` that the route table saw as
    // `/admin` (path confusion between proxy and application).
    // When the client's path is already that (the usual case), its target
    // is sent as it came, without building a copy.
    let target: Cow<[u8]> = if head.path() == norm.as_bytes() && crate::http::path::is_encoded(norm)
    {
        Cow::Borrowed(head.origin_form())
    } else {
        let mut t = crate::http::path::encode(norm).into_bytes();
        if let Some(q) = head.query() {
            t.push(b'?');
            t.extend_from_slice(q);
        }
        Cow::Owned(t)
    };
    // The query rides along: a prefix is only ever stripped from the
    // front, and `strip_prefix` stops a prefix without a slash at `?`.
    // `strip_prefix` gives a tail of the target: where it starts.
    let start = route
        .strip_prefix
        .as_ref()
        .and_then(|p| stoa_h1::proxy::strip_prefix(&target, p.as_bytes()))
        .map_or(0, |rest| target.len() - rest.len());
    let target = &target[start..];
    let mut steps = Http {
        route,
        pool: &pool,
        target,
        rechunk,
        rules: &rules,
    };
    let plan = life::Plan {
        pool: &pool,
        retries: &route.retries,
        streamed: rechunk,
    };
    life::run(&mut steps, &plan, ex, &mut input).await;
    Outcome::Done
}

/// The HTTP/1 steps of the upstream life cycle (`gateway::life`).
struct Http<'a, 'r> {
    route: &'a ProxyRoute,
    pool: &'a Arc<Pool>,
    /// The request target sent upstream.
    target: &'a [u8],
    /// The body streams as it comes, in chunks of Stoa's own.
    rechunk: bool,
    /// `header_up` / `header_down`, expanded for this request.
    rules: &'a Expanded<'r>,
}

impl life::Steps for Http<'_, '_> {
    type Conn = AppStream;
    type Out = ();
    /// An HTTP server that closed a new connection is failing: trying it
    /// again would only put off the 502 (nginx tries each server once).
    const SAME_SERVER_PAUSE: Option<Duration> = None;
    /// An HTTP server closes idle connections on its own timer and stays
    /// up: the same server takes the request on a new connection (its
    /// affinity kept).
    const RACE_ELSEWHERE: bool = false;
    const KIND: &'static str = "proxy";
    const ANOTHER: &'static str = "trying another server";

    fn reuse(&mut self, lease: &Lease, strict: bool) -> Option<AppStream> {
        // A parked connection the upstream closed meanwhile fails before
        // any response byte; one for a request that could not go again is
        // checked first (one recv(MSG_PEEK)).
        std::iter::from_fn(|| lease.take_idle())
            .filter_map(|c| AppStream::from_idle(c).ok())
            .find(|s| !strict || s.looks_open())
    }

    async fn connect(&mut self, lease: &Lease) -> Result<AppStream, Fail> {
        AppStream::connect(&lease.proc.target, self.route.connect_timeout)
            .await
            .map_err(|e| Fail::connect(&e))
    }

    async fn exchange(
        &mut self,
        ex: &mut Exchange<'_>,
        lease: Lease,
        mut app: AppStream,
        input: &mut Input,
        t: &life::Try<'_>,
    ) -> Result<(), Fail> {
        match exchange(self, ex, &lease, &mut app, input, t).await? {
            Done::Upgraded => {
                // A tunnel is not a request in flight: the slot goes back
                // (a server's `capacity` bounds requests, not WebSockets).
                lease.served();
                drop(lease);
                ex.tunnel(&mut app, self.route.tunnel_timeout).await;
                // Logged when the tunnel closes, with the bytes it
                // carried down (as nginx logs a WebSocket's 101).
                ex.finish();
            }
            Done::Sent { reuse, spool } => {
                // The response has come (a spooled body's rest goes to the
                // client after): `$upstream_response_time` and the
                // latency sample, from one clock read.
                if let Some(took) = ex.upstream_ended() {
                    lease.proc.record_latency(took);
                }
                lease.served();
                if let Some(ttl) = reuse {
                    let mut idle = app.into_idle();
                    idle.ttl = ttl;
                    lease.park(idle);
                } else {
                    drop(app);
                }
                // A buffered body goes to the client with the server's
                // connection and slot already given back.
                drop(lease);
                if let Some(mut sp) = spool {
                    if sp.drain(ex).await {
                        ex.finish();
                    } else {
                        ex.abort();
                    }
                }
            }
            Done::Failed => {}
        }
        Ok(())
    }
}

/// The target sent upstream over HTTP/2: the path routing matched
/// (encoded again), the query, the route's prefix stripped.
fn upstream_target(route: &ProxyRoute, head: &stoa_h1::RequestHead, norm: &str) -> Vec<u8> {
    let mut t = if head.path() == norm.as_bytes() && crate::http::path::is_encoded(norm) {
        head.origin_form().to_vec()
    } else {
        let mut t = crate::http::path::encode(norm).into_bytes();
        if let Some(q) = head.query() {
            t.push(b'?');
            t.extend_from_slice(q);
        }
        t
    };
    if let Some(rest) = route
        .strip_prefix
        .as_ref()
        .and_then(|p| stoa_h1::proxy::strip_prefix(&t, p.as_bytes()))
    {
        t = rest.to_vec();
    }
    t
}

/// The connection closed before any response byte. A reset of a parked
/// connection means the upstream closed it with the request unread (the
/// keep-alive race), so any method may go again; a clean close might
/// have followed a crash mid-request, and so might a reset of a new one:
/// only an idempotent request then.
fn stale(reused: bool, reset: bool) -> Fail {
    Fail::closed(
        reused,
        if reused && reset {
            Retry::Unsent
        } else {
            Retry::MaybeSent
        },
        format!(
            "closed the {} connection without a response",
            if reused { "kept-alive" } else { "new" }
        ),
    )
}

/// How one try ended, once something went to the client.
enum Done {
    /// A response went to the client; `Some(ttl)`: the connection may
    /// carry another request (for at most `ttl` when the upstream said).
    /// `spool`: the body, buffered, still to go to the client.
    Sent {
        reuse: Option<Option<Duration>>,
        spool: Option<Spool>,
    },
    /// Answered with an error or aborted; the connection is dropped.
    Failed,
    /// A 101 went to the client: copy both ways from here.
    Upgraded,
}

fn is_reset(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted
    )
}

/// Sends the request on `app` and passes the response to the client;
/// a [`Fail`] while nothing reached the client.
async fn exchange(
    call: &Http<'_, '_>,
    ex: &mut Exchange<'_>,
    lease: &Lease,
    app: &mut AppStream,
    input: &mut Input,
    t: &life::Try<'_>,
) -> Result<Done, Fail> {
    let Http {
        route,
        pool,
        target,
        rechunk,
        rules,
    } = *call;
    let head = ex.req();
    // The route's `send_timeout` / `read_timeout`, else its `timeout`,
    // else the pool's.
    let route_limit = ex.edge().timeout.unwrap_or(pool.spec.timeout);
    let send_limit = route.send_timeout.unwrap_or(route_limit);
    let limit = route.read_timeout.unwrap_or(route_limit);
    let peer = ex.peer();
    let local = ex.local_addr();
    let upstream_host = &lease.proc.authority;
    let body = match input {
        Input::None if rechunk => UpstreamBody::Chunked,
        Input::None => UpstreamBody::None,
        _ => UpstreamBody::Length(input.content_length().unwrap_or(0)),
    };
    // The request head (then the response's fields) and the upstream's
    // output, in buffers the worker keeps between requests.
    let mut bufs = Bufs::take(READ_CHUNK);
    let Bufs {
        w,
        r: rbuf,
        head: rh,
        ..
    } = &mut bufs;
    let upgrade = stoa_h1::proxy::upgrade_protocols(head.version, head.headers());
    // The client's `Expect: 100-continue` goes on when its body is still
    // with it (streamed, not buffered): the application decides.
    let expect = ex.awaits_continue()
        && !route.http10
        && !ex.body_done()
        && (rechunk || matches!(input, Input::Stream(n) if *n > 0));
    let req = ClientRequest {
        method: head.method.as_str(),
        target,
        version: head.version,
        headers: head.headers(),
        host: head.host(),
        peer,
        scheme: ex.scheme(),
        expect_continue: expect,
        upgrade,
    };
    let opts = ForwardOptions {
        version: if route.http10 {
            Version::Http10
        } else {
            Version::Http11
        },
        upstream_host: upstream_host.as_bytes(),
        preserve_host: route.preserve_host,
        trusted: &route.trusted,
        forwarded: route.forwarded,
        x_forwarded: route.x_forwarded,
        for_node: Some(Node::Ip(peer.ip())),
        by: local.map(|a| Node::Ip(a.ip())),
        via: None,
        keep_alive: true,
        prefix: route.strip_prefix.as_deref().map(str::as_bytes),
        rules: rules.up(),
    };
    if let Err(e) = write_request_head(w, &req, &opts, body) {
        tracing::warn!(
            "proxy pool {}: request not forwarded: {e:?}; {}",
            pool.spec.name,
            ex.who()
        );
        gateway::simple(ex, e.status(), &[]);
        return Ok(Done::Failed);
    }
    // The head and a body in memory leave in one write.
    if let Input::Memory(b) = input {
        w.extend_from_slice(b);
    }
    match timeout(send_limit, app.write_all(w)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            // Nothing of the request is known to have arrived.
            return Err(stale(t.reused, is_reset(&e)));
        }
        Err(_) => {
            return Err(Fail::timeout(
                t.reused,
                format!("took the request head for longer than {send_limit:?}"),
            ));
        }
    }
    let mut wire = Wire {
        app,
        rbuf,
        rh,
        send_limit,
        limit,
    };
    let sent_all = match send_body(call, ex, &mut wire, input, expect, t).await {
        Ok(all) => all,
        Err(ended) => return ended,
    };
    let info = match response_head(call, ex, &mut wire, w, expect, upgrade.is_some(), t).await {
        Ok(i) => i,
        Err(ended) => return ended,
    };
    let rh = &*wire.rh;
    // A session cookie this server gave out sticks to it.
    gateway::learn_session(pool, lease.proc.index, rh.headers());

    // The client's head.
    let status = rh.status;
    let client_host = head.host().unwrap_or(b"");
    let strip = route.strip_prefix.as_deref().unwrap_or("");
    // What the upstream calls itself in absolute URLs: the Host it got.
    let sent_host = match head.host() {
        Some(h) if route.preserve_host && !h.is_empty() => h,
        _ => upstream_host.as_bytes(),
    };
    let rule = RedirectRule {
        upstream_host: sent_host,
        upstream_prefix: b"",
        client_scheme: ex.scheme(),
        client_host,
        client_prefix: strip.trim_end_matches('/').as_bytes(),
    };
    let bodyless = stoa_h1::response::bodyless(ex.is_head(), status);
    let fields = w;
    fields.clear();
    let ropts = ResponseOptions {
        redirect: (!route.preserve_host || !strip.is_empty()).then_some(&rule),
        via: None,
        keep_content_length: ex.is_head() || status == 304,
        // A cache fill keeps the application's Date (RFC 9111 §4.2.3);
        // the cache never sends it on (its deliveries have Stoa's own).
        drop: if ex.is_cache_fill() {
            &["server"]
        } else {
            &["server", "date"]
        },
        rules: rules.down(),
    };
    if write_response_headers(fields, rh, &ropts).is_err() {
        tracing::error!(
            "proxy pool {}: a response field cannot be passed on; {}",
            pool.spec.name,
            ex.who()
        );
        gateway::fail_now(ex, 502).await;
        return Ok(Done::Failed);
    }
    if !sent_all || !ex.body_done() {
        // The upstream answered before taking the whole body: this
        // connection's stream cannot be trusted for the next request.
        ex.close();
    }
    ex.start(status);
    ex.raw_headers(fields);
    let framing = info.framing;
    if bodyless {
        ex.end_head(None);
    } else if let Framing::Length(n) = framing {
        ex.end_head(Some(n));
    } else {
        ex.end_head_stream();
    }
    let spool = match pass_body(call, ex, &mut wire, framing, bodyless).await {
        Ok(spool) => spool,
        Err(done) => return Ok(done),
    };
    let rbuf = &*wire.rbuf;
    if spool.is_none() {
        ex.finish();
    }
    let reusable = info.reusable(sent_all, true, rbuf.len());
    Ok(Done::Sent {
        reuse: reusable.then(|| ttl(pool.spec.keepalive_timeout, &info.keep_alive_params)),
        spool,
    })
}

/// How a step of the exchange ended the try early: what went to the
/// client (`Ok`), or a [`Fail`] while nothing did.
type Ended = Result<Done, Fail>;

/// What the exchange's steps share: the upstream connection, the
/// worker's buffers (the response is parsed into `rh`, read into `rbuf`),
/// and the limits.
struct Wire<'b> {
    app: &'b mut AppStream,
    rbuf: &'b mut Vec<u8>,
    rh: &'b mut stoa_h1::ResponseHead,
    send_limit: Duration,
    limit: Duration,
}

/// Sends the request body after its head (for an `Expect: 100-continue`
/// the application asked to see, once it says 100); whether all of it
/// went.
async fn send_body(
    call: &Http<'_, '_>,
    ex: &mut Exchange<'_>,
    wire: &mut Wire<'_>,
    input: &mut Input,
    expect: bool,
    t: &life::Try<'_>,
) -> Result<bool, Ended> {
    let Http { pool, rechunk, .. } = *call;
    let Wire {
        app,
        rbuf,
        rh,
        send_limit,
        ..
    } = wire;
    let (app, rbuf, rh, send_limit) = (&mut **app, &mut **rbuf, &mut **rh, *send_limit);
    let mut sent_all = true;
    // Expect end to end: the application's 100 lets the body come (the
    // exchange sends the client its own 100 on the first read); its final
    // answer (401, 413, 417) goes back without the body ever being asked
    // for. One that says nothing within EXPECT_WAIT gets the body anyway
    // (RFC 9110 §10.1.1).
    // `rh`: parsed into the worker's spare head (its allocations reused).
    let mut hold_body = false;
    // (`loop` inside `if`: the expectation is fixed for the request.)
    if expect {
        loop {
            match rh.parse(rbuf, MAX_HEAD) {
                Ok(Some(n)) if rh.status == 100 => {
                    rbuf.drain(..n);
                    break;
                }
                Ok(Some(n)) if rh.status > 101 && rh.status < 200 => {
                    rbuf.drain(..n);
                }
                // A final answer, or a bad head the response loop reports.
                Ok(Some(_)) | Err(_) => {
                    hold_body = true;
                    break;
                }
                Ok(None) => match read_more(app, rbuf, EXPECT_WAIT, ex).await {
                    Read::Data => {}
                    Read::Timeout => break,
                    Read::Eof if rbuf.is_empty() => {
                        return Err(Err(stale(t.reused, refused_unread(app).await)))
                    }
                    Read::Reset if rbuf.is_empty() => return Err(Err(stale(t.reused, true))),
                    Read::Eof | Read::Reset => {
                        hold_body = true;
                        break;
                    }
                    Read::ClientGone => {
                        ex.close();
                        return Err(Ok(Done::Failed));
                    }
                },
            }
        }
    }
    if hold_body {
        sent_all = false;
    }
    match input {
        _ if hold_body => {}
        Input::File(f, _) => {
            let mut chunk = vec![0u8; READ_CHUNK];
            loop {
                let n = match std::io::Read::read(f, &mut chunk) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) => {
                        tracing::error!(
                            "proxy pool {}: request body spool: {e}; {}",
                            pool.spec.name,
                            ex.who()
                        );
                        gateway::fail_now(ex, 500).await;
                        return Err(Ok(Done::Failed));
                    }
                };
                if !matches!(
                    timeout(send_limit, app.write_all(&chunk[..n])).await,
                    Ok(Ok(()))
                ) {
                    // An upstream that answers early (413) stops reading:
                    // its answer may still be there.
                    sent_all = false;
                    break;
                }
            }
        }
        Input::Stream(_) => {
            let mut piece = Vec::with_capacity(READ_CHUNK);
            loop {
                piece.clear();
                match ex.read_body(&mut piece).await {
                    Ok(more) => {
                        if !piece.is_empty()
                            && !matches!(
                                timeout(send_limit, app.write_all(&piece)).await,
                                Ok(Ok(()))
                            )
                        {
                            sent_all = false;
                            break;
                        }
                        if !more {
                            break;
                        }
                    }
                    Err(_) => {
                        // The client's body broke off: the upstream got a
                        // short request, which it will take as an error.
                        ex.close();
                        return Err(Ok(Done::Failed));
                    }
                }
            }
        }
        Input::None if rechunk => {
            let mut piece = Vec::with_capacity(READ_CHUNK);
            let mut framed = Vec::with_capacity(READ_CHUNK + 16);
            loop {
                piece.clear();
                framed.clear();
                let more = match ex.read_body(&mut piece).await {
                    Ok(more) => more,
                    Err(_) => {
                        ex.close();
                        return Err(Ok(Done::Failed));
                    }
                };
                stoa_h1::proxy::push_chunk(&mut framed, &piece);
                if !more {
                    framed.extend_from_slice(stoa_h1::body::LAST_CHUNK);
                }
                if !framed.is_empty()
                    && !matches!(
                        timeout(send_limit, app.write_all(&framed)).await,
                        Ok(Ok(()))
                    )
                {
                    sent_all = false;
                    break;
                }
                if !more {
                    break;
                }
            }
        }
        Input::None | Input::Memory(_) => {}
    }

    Ok(sent_all)
}

/// Reads the response head, passing 1xx interim responses on (a 100 was
/// for Stoa) and a 101 as the start of a tunnel.
async fn response_head(
    call: &Http<'_, '_>,
    ex: &mut Exchange<'_>,
    wire: &mut Wire<'_>,
    w: &mut Vec<u8>,
    expect: bool,
    upgrade: bool,
    t: &life::Try<'_>,
) -> Result<stoa_h1::proxy::ResponseInfo, Ended> {
    let pool = call.pool;
    let head = ex.req();
    let Wire {
        app,
        rbuf,
        rh,
        limit,
        ..
    } = wire;
    let (app, rbuf, rh, limit) = (&mut **app, &mut **rbuf, &mut **rh, *limit);
    // The response head (1xx interim responses are dropped).
    let sent = SentRequest {
        head: head.method == Method::Head,
        upgrade,
        client_expects_continue: expect,
        client_version: head.version,
    };
    loop {
        // Nothing read yet (the usual first pass): nothing to parse.
        let parsed = if rbuf.is_empty() {
            Ok(None)
        } else {
            rh.parse(rbuf, MAX_HEAD)
        };
        let n = match parsed {
            Ok(Some(n)) => n,
            Ok(None) => match read_more(app, rbuf, limit, ex).await {
                Read::Data => continue,
                Read::Eof if rbuf.is_empty() => {
                    return Err(Err(stale(t.reused, refused_unread(app).await)))
                }
                Read::Reset if rbuf.is_empty() => return Err(Err(stale(t.reused, true))),
                Read::Eof | Read::Reset => {
                    tracing::error!(
                        "proxy pool {}: connection closed in the response head; {}",
                        pool.spec.name,
                        ex.who()
                    );
                    gateway::fail_now(ex, 502).await;
                    return Err(Ok(Done::Failed));
                }
                Read::Timeout => {
                    return Err(Err(Fail::timeout(
                        t.reused,
                        format!("sent no response within {limit:?}"),
                    )));
                }
                Read::ClientGone => {
                    ex.close();
                    return Err(Ok(Done::Failed));
                }
            },
            Err(e) => {
                tracing::error!(
                    "proxy pool {}: bad response head: {e:?}; {}",
                    pool.spec.name,
                    ex.who()
                );
                gateway::fail_now(ex, 502).await;
                return Err(Ok(Done::Failed));
            }
        };
        match inspect_response(rh, &sent) {
            Ok(i) if matches!(i.kind, ResponseKind::Interim { .. }) => {
                // 103 Early Hints and the like go on to the client as they
                // come (its fields cleaned as a final response's are); a
                // 100 was for Stoa, which sends the client its own.
                if i.kind == (ResponseKind::Interim { forward: true }) && rh.status != 100 {
                    w.clear();
                    let ropts = ResponseOptions {
                        drop: &["server", "date"],
                        ..ResponseOptions::default()
                    };
                    if write_response_headers(w, rh, &ropts).is_ok()
                        && !ex.interim(rh.status, w).await
                    {
                        ex.close();
                        return Err(Ok(Done::Failed));
                    }
                }
                rbuf.drain(..n);
            }
            Ok(i) if i.kind == ResponseKind::Final => {
                if t.retry_statuses.contains(&rh.status) {
                    // The route retries on this status and a try is left:
                    // the response is not passed on (nor the connection
                    // kept: its body is unread).
                    return Err(Err(Fail::status(t.reused, rh.status)));
                }
                rbuf.drain(..n);
                return Ok(i);
            }
            Ok(i) if i.kind == ResponseKind::Tunnel => {
                // 101: the head as HTTP/1 (the fields the upgrade needs
                // put back), then whatever the server sent after it.
                let mut raw = b"HTTP/1.1 101 Switching Protocols\r\n".to_vec();
                let ropts = ResponseOptions {
                    drop: &["server", "date"],
                    ..ResponseOptions::default()
                };
                if write_response_headers(&mut raw, rh, &ropts).is_err() {
                    gateway::fail_now(ex, 502).await;
                    return Err(Ok(Done::Failed));
                }
                raw.extend_from_slice(b"Connection: Upgrade\r\nUpgrade: ");
                raw.extend_from_slice(rh.header("upgrade").unwrap_or(b""));
                raw.extend_from_slice(b"\r\n\r\n");
                raw.extend_from_slice(&rbuf[n..]);
                ex.raw(&raw, 101);
                ex.finish();
                return Err(Ok(Done::Upgraded));
            }
            Ok(_) | Err(_) => {
                tracing::error!(
                    "proxy pool {}: response not passed on; {}",
                    pool.spec.name,
                    ex.who()
                );
                gateway::fail_now(ex, 502).await;
                return Err(Ok(Done::Failed));
            }
        }
    }
}

/// Passes the response body on, a piece at a time, or into the route's
/// spool (`response_buffering`), which comes back to be drained once the
/// server's connection and slot are given back.
async fn pass_body(
    call: &Http<'_, '_>,
    ex: &mut Exchange<'_>,
    wire: &mut Wire<'_>,
    framing: Framing,
    bodyless: bool,
) -> Result<Option<Spool>, Done> {
    let Http { pool, route, .. } = *call;
    let Wire {
        app, rbuf, limit, ..
    } = wire;
    let (app, rbuf, limit) = (&mut **app, &mut **rbuf, *limit);
    // The body, a piece at a time: each is flushed to the client before
    // the next is read (a slow client holds at most READ_CHUNK here).
    let mut dec = BodyDecoder::new(if bodyless { Framing::None } else { framing });
    let mut spool = route.spool.as_ref().filter(|_| !bodyless).map(Spool::new);
    // The head goes at once (a few hundred bytes a client's socket takes
    // without waiting): the client need not wait for the whole body to
    // learn the status.
    if spool.is_some() && !ex.flush().await {
        ex.abort();
        return Err(Done::Failed);
    }
    loop {
        let mut consumed = 0;
        while !dec.is_done() {
            match dec.decode(&rbuf[consumed..]) {
                Ok((0, _)) => break,
                Ok((n, data)) => {
                    if let Some(sp) = spool.as_mut() {
                        if sp.push(data) {
                            consumed += n;
                            continue;
                        }
                        // Beyond its bounds: what it holds goes first,
                        // then the rest streams (nginx past
                        // `proxy_max_temp_file_size`).
                        if !sp.drain(ex).await {
                            ex.abort();
                            return Err(Done::Failed);
                        }
                        spool = None;
                    }
                    ex.write(data);
                    consumed += n;
                }
                Err(_) => {
                    tracing::error!(
                        "proxy pool {}: bad response body framing; {}",
                        pool.spec.name,
                        ex.who()
                    );
                    ex.abort();
                    return Err(Done::Failed);
                }
            }
        }
        rbuf.drain(..consumed);
        if dec.is_done() {
            break;
        }
        if spool.is_none() && !ex.flush().await {
            ex.abort();
            return Err(Done::Failed);
        }
        match read_more(app, rbuf, limit, ex).await {
            Read::Data => {}
            Read::Eof if dec.eof() => break,
            Read::Eof | Read::Reset => {
                // Cut short: no last chunk, so the client sees the
                // truncation instead of taking it for a whole body.
                tracing::error!(
                    "proxy pool {}: connection lost mid-response; {}",
                    pool.spec.name,
                    ex.who()
                );
                ex.abort();
                return Err(Done::Failed);
            }
            Read::Timeout => {
                tracing::error!(
                    "proxy pool {}: no output for {limit:?}; {}",
                    pool.spec.name,
                    ex.who()
                );
                ex.abort();
                return Err(Done::Failed);
            }
            Read::ClientGone => {
                ex.abort();
                return Err(Done::Failed);
            }
        }
    }
    Ok(spool)
}

/// After a clean close with no response: whether the upstream also reset
/// the connection, which it does when our request reached a socket it had
/// already closed (its FIN was in flight as the request went out: the
/// keep-alive race), so the request was never read. The FIN is read
/// first (a read after it returns 0), so the reset shows only in
/// SO_ERROR, and on a network it comes a round trip after the FIN: a few
/// short looks, only on this rare path.
async fn refused_unread(app: &AppStream) -> bool {
    for _ in 0..10 {
        if let Some(e) = app.take_error() {
            return is_reset(&e);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    false
}

/// How long a connection may stay parked: the pool's own limit, shorter
/// when the upstream said it keeps idle connections less long.
fn ttl(own: Duration, ka: &KeepAlive) -> Option<Duration> {
    let t = stoa_h1::proxy::idle_timeout(own, ka);
    (t < own).then_some(t)
}

enum Read {
    Data,
    Eof,
    Reset,
    Timeout,
    ClientGone,
}

/// Reads more from the upstream, watching for the client leaving.
async fn read_more(
    app: &mut AppStream,
    rbuf: &mut Vec<u8>,
    limit: Duration,
    ex: &mut Exchange<'_>,
) -> Read {
    if rbuf.capacity() - rbuf.len() < 4096 {
        rbuf.reserve(READ_CHUNK);
    }
    let watch = ex.can_watch();
    tokio::select! {
        biased;
        r = timeout(limit, app.read_buf(rbuf)) => match r {
            Ok(Ok(0)) => Read::Eof,
            Ok(Ok(_)) => Read::Data,
            Ok(Err(e)) if is_reset(&e) => Read::Reset,
            Ok(Err(_)) => Read::Eof,
            Err(_) => Read::Timeout,
        },
        gone = ex.client_gone(), if watch => if gone { Read::ClientGone } else { Read::Data },
    }
}

// ---- configuration: `proxy = {...}` of a route ----

/// `proxy = {...}`: a route served by an HTTP `[[pool]]`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyRouteConfig {
    pub pool: String,
    /// Remove the route's prefix from the path sent upstream (default false).
    #[serde(default)]
    pub strip_prefix: bool,
    /// Send the client's Host (default true); else the upstream's address.
    pub preserve_host: Option<bool>,
    /// Peers (addresses or CIDR blocks) whose Forwarded / X-Forwarded-*
    /// fields are kept and appended to; from others they are replaced.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// Add `Forwarded` (RFC 7239; default true).
    pub forwarded: Option<bool>,
    /// Add `X-Forwarded-For/-Proto/-Host` (default true).
    pub x_forwarded: Option<bool>,
    /// An upgraded (WebSocket) connection closes after this long idle
    /// (default 1 h).
    pub tunnel_timeout: Option<crate::units::Dur>,
    /// Connecting gives up after this (default 5 s).
    pub connect_timeout: Option<crate::units::Dur>,
    /// "1.1" (default), "1.0" or "2": the protocol the upstream speaks.
    pub http_version: Option<String>,
    /// Writing the request may stall this long (nginx `proxy_send_timeout`).
    pub send_timeout: Option<crate::units::Dur>,
    /// The response may take this long, between pieces too (nginx
    /// `proxy_read_timeout`).
    pub read_timeout: Option<crate::units::Dur>,
    /// When a failed try goes again (nginx `proxy_next_upstream`).
    pub retries: Option<life::RetriesConfig>,
    /// Fields set, added or removed toward the application.
    pub header_up: Option<HeaderRulesConfig>,
    /// Fields set, added or removed (hidden) toward the client.
    pub header_down: Option<HeaderRulesConfig>,
}

impl super::configure::Configure for ProxyRouteConfig {
    fn configure(
        &self,
        cx: &super::configure::Ctx<'_>,
    ) -> Result<super::Handler, super::configure::Fail> {
        use super::configure::Fail;
        let pool = (cx.pool)(&self.pool, crate::upstream::Protocol::Http)
            .map_err(Fail::at("proxy.pool"))?;
        let trusted =
            stoa_h1::proxy::TrustedProxies::parse(self.trusted_proxies.iter().map(String::as_str))
                .map_err(|e| Fail::new("proxy.trusted_proxies", e.to_string()))?;
        let strip_prefix = match (cx.prefix, self.strip_prefix) {
            (Some(p), true) => Some(p.trim_end_matches('/').to_owned()),
            (None, true) => return Err(Fail::new("proxy.strip_prefix", "needs a `prefix` route")),
            (_, false) => None,
        };
        let (http10, http2) = match self.http_version.as_deref() {
            None | Some("1.1") => (false, false),
            Some("1.0") => (true, false),
            Some("2") => (false, true),
            Some(other) => {
                return Err(Fail::new(
                    "proxy.http_version",
                    format!("`{other}`: \"1.1\", \"1.0\" or \"2\""),
                ))
            }
        };
        let retries = match &self.retries {
            Some(r) => r.validate().map_err(|e| Fail::new("proxy.retries", e))?,
            None => life::Retries::default(),
        };
        let rules = |c: &Option<HeaderRulesConfig>, toward, key: &'static str| {
            c.as_ref()
                .map(|c| HeaderRules::compile(c, toward, cx.regex).map_err(Fail::at(key)))
                .transpose()
                .map(Option::flatten)
        };
        let header_up = rules(
            &self.header_up,
            stoa_h1::proxy::Toward::Upstream,
            "proxy.header_up",
        )?;
        let header_down = rules(
            &self.header_down,
            stoa_h1::proxy::Toward::Client,
            "proxy.header_down",
        )?;
        let spool = cx
            .response_buffering
            .map(|c| c.limits(cx.resolve))
            .transpose()
            .map_err(|e| Fail::new("response_buffering", e))?
            .flatten();
        Ok(super::Handler::Proxy(Arc::new(ProxyRoute {
            pool,
            pool_name: self.pool.clone(),
            strip_prefix,
            preserve_host: self.preserve_host.unwrap_or(true),
            trusted,
            forwarded: self.forwarded.unwrap_or(true),
            x_forwarded: self.x_forwarded.unwrap_or(true),
            buffering: cx.request_buffering,
            tunnel_timeout: self
                .tunnel_timeout
                .map_or(Duration::from_secs(3600), |d| d.0),
            connect_timeout: self.connect_timeout.map_or(Duration::from_secs(5), |d| d.0),
            send_timeout: self.send_timeout.map(|d| d.0),
            read_timeout: self.read_timeout.map(|d| d.0),
            retries,
            http10,
            http2,
            header_up,
            header_down,
            spool,
        })))
    }
}
