//! The one interface between the connections that carry requests and the
//! handlers that answer them.
//!
//! A handler reads the request through an [`Exchange`] (method, path,
//! query, host, headers, peer and local address, the body with
//! [`Exchange::read_body`]) and writes the response through it (status,
//! headers, pre-encoded header blocks, a body from memory, shared bytes or
//! a file range, flush, end). What carries the exchange is a [`Side`]: an
//! HTTP/1 connection today, an in-process subrequest ([`Sub`]); an HTTP/2
//! stream is a third variant. It is an enum, so the static-file path pays
//! a match, not a virtual call or a box. `100 Continue`, chunking,
//! `Connection` and close-delimited bodies are decided here for HTTP/1
//! only: handlers never branch on the framing of either direction.

mod edge;
mod nph;
mod sub;

pub use crate::proto::{BodyFail, Limits};
pub(crate) use edge::Edge;
pub(crate) use sub::Sink;
pub use sub::{Sub, SubResponse};

use crate::filter::{Active, Fields, FileVersion, Filters, Head, Length, Whole};
use crate::local::{AccessLog, Worker};
use crate::log::access::{CacheStatus, Combined, Entry};
use crate::proto::h1::Io;
use crate::proto::h2::H2Stream;
use crate::proto::h3::H3Stream;
use bytes::Bytes;
use std::borrow::Cow;
use std::fs::File;
use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};
use stoa_h1::body::{push_chunk_header, CHUNK_END, LAST_CHUNK};
use stoa_h1::response::push_status_line;
use stoa_h1::{Framing, Method, RequestHead, Version};

/// What carries an exchange.
pub enum Side<'a> {
    H1(&'a mut Io),
    Sub(&'a mut Sub),
    H2(&'a mut H2Stream),
    H3(&'a mut H3Stream),
    /// A response caught for an error page (`error_pages`): nothing of it
    /// reaches the carrier, which waits inside until routing writes the
    /// page ([`Exchange::take_caught`]).
    Caught(Box<Caught<'a>>),
}

/// An error response held back from the client (see [`Side::Caught`]).
pub(crate) struct Caught<'a> {
    /// The carrier, given back for the error page (None only while it is
    /// being given back).
    carrier: Option<Side<'a>>,
    status: u16,
    /// The caught response's header lines, for the fields its status
    /// needs (`Allow`, `WWW-Authenticate`...).
    head: Vec<u8>,
    /// Body bytes thrown away: past [`MAX_DRAIN`], flushing says the
    /// client is gone, so the application is cut off instead of read to
    /// its end.
    dropped: u64,
}

/// An application's caught error body read to its end (so that its
/// connection is kept) up to this; a longer one is abandoned.
const MAX_DRAIN: u64 = 1 << 20;

impl Side<'_> {
    /// The same carrier, borrowed again (for a local redirect).
    fn reborrow(&mut self) -> Side<'_> {
        match self {
            Side::H1(io) => Side::H1(io),
            Side::Sub(s) => Side::Sub(s),
            Side::H2(s) => Side::H2(s),
            Side::H3(s) => Side::H3(s),
            Side::Caught(c) => Side::Caught(Box::new(Caught {
                carrier: c.carrier.as_mut().map(Side::reborrow),
                status: c.status,
                head: Vec::new(),
                dropped: 0,
            })),
        }
    }
}

/// One request and its response, as a handler sees them.
pub struct Exchange<'a> {
    req: &'a RequestHead,
    side: Side<'a>,
    worker: &'a Worker,
    limits: &'a Limits,
    /// The connection may carry another request after this one.
    keep: bool,
    head_only: bool,
    status: u16,
    /// Body bytes sent (for the log).
    sent: u64,
    /// The body being written is framed in chunks.
    chunked: bool,
    /// Body bytes still allowed, once a head announced a length.
    remaining: Option<u64>,
    /// `Strict-Transport-Security`, sent with every head (over TLS).
    hsts: Option<&'a [u8]>,
    /// The settings of the route the request was routed to (response
    /// filters', handlers'); [`Edge::NONE`] until `with_edge`.
    edge: &'a Edge,
    /// The route's own access log (`access_log` of a route), else the
    /// server's.
    log: Option<&'a AccessLog>,
    /// The access-log line is written (by [`Exchange::finish`] or
    /// [`Exchange::abort`]); otherwise dropping the exchange writes it,
    /// marked cut: every request has its line.
    logged: bool,
    /// When the request began, when the log's format wants durations.
    began: Option<Instant>,
    /// Head bytes of the response.
    head_bytes: u64,
    /// Request body bytes read.
    received: u64,
    /// The application that answers, for the log.
    upstream: Option<Box<UpstreamTrace>>,
    /// The route's response filters; None when it has none, the common
    /// case, which costs one test per response call.
    filters: Option<&'a Filters>,
    /// The body filters at work on this response, once its head chose
    /// them (`crate::filter`).
    active: Option<Box<Active>>,
    /// Where the header fields start in the head's buffer (after the
    /// status line), for filters to read and edit them.
    fields_at: usize,
    /// An error may be caught for its error page: whoever runs the
    /// handler writes the page afterwards (routing's `error_page::run_in`).
    /// Off on a redirected exchange until its runner says so, so that a
    /// path that would not write the page gives the built-in error rather
    /// than nothing.
    may_catch: bool,
    /// The user the access phase authenticated (the log's `$remote_user`).
    user: Option<Box<str>>,
    /// A local redirect of a request already admitted: the request
    /// limits counted it once (nginx counts `limit_req`/`limit_conn`
    /// once per main request).
    redirected: bool,
    /// The response cache's word on this request: the log's
    /// `$upstream_cache_status` (None: not cached).
    cache_status: Option<CacheStatus>,
    /// A `Cache-Status` field (RFC 9211) every head of this exchange
    /// carries (a request the cache passed to the handler).
    cache_field: Option<&'static [u8]>,
    /// Response fields kept when the head ends, for whoever asked
    /// ([`Exchange::capture_locations`]); None, the usual case, costs one
    /// test per head.
    captured: Option<Box<Captured>>,
}

/// The `Location` and `Content-Location` of a response, as the head
/// ended (the response cache's invalidation after unsafe methods, RFC
/// 9111 §4.4, reads them after the handler is done, when the head may
/// long have left the buffer).
#[derive(Debug, Default)]
pub(crate) struct Captured {
    pub(crate) location: Option<Box<[u8]>>,
    pub(crate) content_location: Option<Box<[u8]>>,
}

/// The application a gateway took the response from, for the access log
/// (`$upstream_addr`, `$upstream_response_time`).
struct UpstreamTrace {
    addr: UpstreamAddr,
    /// `addr` as text, made by the first line that prints it.
    text: std::cell::OnceCell<String>,
    since: Instant,
    took: Option<Duration>,
}

impl UpstreamTrace {
    fn addr_text(&self) -> &str {
        match &self.addr {
            UpstreamAddr::Named(s) => s,
            UpstreamAddr::Tcp(a) => self.text.get_or_init(|| a.to_string()),
        }
    }
}

/// An application's address as the logs name it (nginx's
/// `$upstream_addr`): `127.0.0.1:9000`, `unix:/run/php.sock`, a CGI
/// script's path. A socket address stays one until a line prints it:
/// written out for every proxied request, with the access log off, it was
/// 9 % of the request's instructions (callgrind, `SocketAddr`'s `Display`).
pub(crate) enum UpstreamAddr {
    Tcp(SocketAddr),
    Named(String),
}

impl From<SocketAddr> for UpstreamAddr {
    fn from(a: SocketAddr) -> Self {
        UpstreamAddr::Tcp(a)
    }
}

impl From<String> for UpstreamAddr {
    fn from(s: String) -> Self {
        UpstreamAddr::Named(s)
    }
}

impl<'a> Exchange<'a> {
    /// A fresh response on `side` for `req`.
    fn on(
        side: Side<'a>,
        req: &'a RequestHead,
        worker: &'a Worker,
        limits: &'a Limits,
        keep: bool,
    ) -> Exchange<'a> {
        Exchange {
            req,
            side,
            worker,
            limits,
            keep,
            head_only: req.method == Method::Head,
            status: 0,
            sent: 0,
            chunked: false,
            remaining: None,
            hsts: None,
            edge: Edge::none(),
            log: None,
            logged: false,
            // The request's clock, read only when the log wants durations.
            began: worker.log_timed(None).then(Instant::now),
            head_bytes: 0,
            received: 0,
            upstream: None,
            filters: None,
            active: None,
            fields_at: 0,
            may_catch: true,
            user: None,
            redirected: false,
            cache_status: None,
            cache_field: None,
            captured: None,
        }
    }

    /// This request was routed to a route (or a site's root) with these
    /// settings: its response filters, its handler's limits, its own
    /// access log (`access_log` of a route: off, or another file).
    #[inline]
    pub(crate) fn with_edge(mut self, edge: &'a Edge) -> Exchange<'a> {
        self.edge = edge;
        self.filters = edge.filters.as_ref();
        let log = edge.access_log.as_ref();
        if log.is_some() {
            self.log = log;
            self.began = self.worker.log_timed(log).then(Instant::now);
        }
        self
    }

    /// The settings of the route this request was routed to.
    // Read by the features that put their settings in `Edge`.
    #[allow(dead_code)]
    #[inline]
    pub(crate) fn edge(&self) -> &'a Edge {
        self.edge
    }

    /// Every response head of this exchange carries
    /// `Strict-Transport-Security: value` (routing decides, over TLS only).
    #[inline]
    pub fn with_hsts(mut self, value: Option<&'a [u8]>) -> Exchange<'a> {
        self.hsts = value;
        self
    }

    /// An exchange on an HTTP/1 connection. `closing`: the server is
    /// shutting down, so the connection ends after this response.
    pub fn h1(
        io: &'a mut Io,
        req: &'a RequestHead,
        worker: &'a Worker,
        limits: &'a Limits,
        closing: bool,
    ) -> Exchange<'a> {
        io.reader = None;
        let keep = req.keep_alive && !closing;
        Exchange::on(Side::H1(io), req, worker, limits, keep)
    }

    /// An exchange on an HTTP/2 stream.
    pub fn h2(
        stream: &'a mut H2Stream,
        req: &'a RequestHead,
        worker: &'a Worker,
        limits: &'a Limits,
    ) -> Exchange<'a> {
        Exchange::on(Side::H2(stream), req, worker, limits, true)
    }

    /// An exchange on an HTTP/3 request stream.
    pub fn h3(
        stream: &'a mut H3Stream,
        req: &'a RequestHead,
        worker: &'a Worker,
        limits: &'a Limits,
    ) -> Exchange<'a> {
        Exchange::on(Side::H3(stream), req, worker, limits, true)
    }

    /// A subrequest: the response is collected in `sub`.
    pub fn sub(
        sub: &'a mut Sub,
        req: &'a RequestHead,
        worker: &'a Worker,
        limits: &'a Limits,
    ) -> Exchange<'a> {
        Exchange::on(Side::Sub(sub), req, worker, limits, true)
    }

    /// The same carrier with another request (a local redirect): the
    /// response starts anew; whether the connection stays carries over.
    pub fn redirected<'b>(&'b mut self, req: &'b RequestHead) -> Exchange<'b> {
        let side = self.side.reborrow();
        // The redirected request writes the line; this one has none.
        self.logged = true;
        let mut ex = Exchange::on(side, req, self.worker, self.limits, self.keep);
        ex.hsts = self.hsts;
        // The route first routed to keeps deciding (its log, its filters).
        ex.edge = self.edge;
        ex.log = self.log;
        ex.filters = self.filters;
        ex.began = self.began;
        ex.received = self.received;
        ex.may_catch = false;
        ex.user = self.user.take();
        ex.redirected = true;
        ex.cache_status = self.cache_status;
        ex.cache_field = self.cache_field;
        ex
    }

    /// What the response cache did with this request: `status` for the
    /// access log (`$upstream_cache_status`), and `field`, a
    /// `Cache-Status` value for every head the exchange writes (None: the
    /// cache writes its own).
    pub(crate) fn set_cache_status(
        &mut self,
        status: Option<CacheStatus>,
        field: Option<&'static [u8]>,
    ) {
        self.cache_status = status;
        self.cache_field = field;
    }

    /// Keep the response's `Location` and `Content-Location` when its
    /// head ends, for [`Exchange::captured`].
    pub(crate) fn capture_locations(&mut self) {
        self.captured = Some(Box::default());
    }

    /// The fields kept since [`Exchange::capture_locations`] (empty
    /// until a head ended).
    pub(crate) fn captured(&self) -> Option<&Captured> {
        self.captured.as_deref()
    }

    /// Copies the fields asked for out of the head being ended.
    #[cold]
    #[inline(never)]
    fn capture_fields(&mut self) {
        let (buf, at) = match &mut self.side {
            Side::H1(io) => (io.out.buf(), self.fields_at),
            Side::Sub(s) => (&mut s.head, self.fields_at),
            Side::H2(s) => (&mut s.head, 0),
            Side::H3(s) => (&mut s.head, 0),
            Side::Caught(c) => (&mut c.head, 0),
        };
        let fields = Fields::new(buf, at);
        let keep = |name| fields.get(name).map(Box::from);
        let (location, content_location) = (keep("location"), keep("content-location"));
        if let Some(c) = self.captured.as_deref_mut() {
            c.location = location;
            c.content_location = content_location;
        }
    }

    /// Takes back whether the connection stays from a redirected
    /// exchange (which wrote and logged the response).
    pub fn absorb_keep(&mut self, keep: bool) {
        self.keep = keep;
    }

    // ---- the request ----

    /// The request head: method, target, headers. Its framing and
    /// connection fields belong to the carrier; handlers ask
    /// [`Exchange::body_length`] and [`Exchange::read_body`] instead.
    pub fn req(&self) -> &'a RequestHead {
        self.req
    }

    pub fn worker(&self) -> &'a Worker {
        self.worker
    }

    /// Whether this is a subrequest (an SSI include, a Lua subrequest):
    /// nginx runs no access phase for those, and neither does Stoa's
    /// own checks.
    pub(crate) fn is_sub(&self) -> bool {
        matches!(self.side, Side::Sub(_))
    }

    /// Whether this exchange fills a response cache's object: a handler
    /// keeps the application's `Date` then (RFC 9111 §4.2.3 needs it).
    pub(crate) fn is_cache_fill(&self) -> bool {
        matches!(&self.side, Side::Sub(s) if s.has_sink())
    }

    /// Whether this is a local redirect of a request (its limits were
    /// counted for the first).
    pub(crate) fn is_redirected(&self) -> bool {
        self.redirected
    }

    /// Records the user the access phase authenticated, for the access
    /// log's user field.
    pub(crate) fn set_user(&mut self, user: &str) {
        self.user = Some(user.into());
    }

    /// The side that carries the request: a caught response's carrier.
    #[inline]
    fn carrier(&self) -> &Side<'a> {
        match &self.side {
            Side::Caught(c) => c.carrier.as_ref().unwrap_or(&self.side),
            s => s,
        }
    }

    #[inline]
    fn carrier_mut(&mut self) -> &mut Side<'a> {
        if matches!(&self.side, Side::Caught(c) if c.carrier.is_some()) {
            if let Side::Caught(c) = &mut self.side {
                if let Some(s) = c.carrier.as_mut() {
                    return s;
                }
            }
            // The test above saw it.
            unreachable!();
        }
        &mut self.side
    }

    pub fn peer(&self) -> SocketAddr {
        match self.carrier() {
            Side::H1(io) => io.peer,
            Side::Sub(s) => s.peer,
            Side::H2(s) => s.peer,
            Side::H3(s) => s.peer,
            Side::Caught(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
        }
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self.carrier() {
            Side::H1(io) => io.local_addr(),
            Side::Sub(s) => s.local,
            Side::H2(s) => s.local,
            Side::H3(s) => s.local,
            Side::Caught(_) => None,
        }
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        let tls = match self.carrier() {
            Side::H1(io) => io.is_tls(),
            Side::Sub(_) | Side::Caught(_) => false,
            Side::H2(s) => s.tls.is_some(),
            Side::H3(s) => s.tls.is_some(),
        };
        if tls {
            "https"
        } else {
            "http"
        }
    }

    /// The TLS version and cipher suite (SSL_PROTOCOL, SSL_CIPHER), over
    /// TLS.
    pub fn tls_info(&self) -> Option<(&'static str, &'static str)> {
        match self.carrier() {
            Side::H1(io) => io.stream.tls_info(),
            Side::Sub(_) | Side::Caught(_) => None,
            Side::H2(s) => s.tls,
            Side::H3(s) => s.tls,
        }
    }

    /// The client's verified TLS certificate, if it sent one.
    pub fn client_cert(&self) -> Option<std::sync::Arc<crate::http::client_cert::ClientCert>> {
        match self.carrier() {
            Side::H1(io) => io.stream.client_cert().map(std::sync::Arc::new),
            Side::Sub(_) | Side::Caught(_) => None,
            Side::H2(s) => s.client_cert(),
            Side::H3(s) => s.client_cert(),
        }
    }

    /// The protocol name applications see (SERVER_PROTOCOL).
    pub fn protocol(&self) -> &'static str {
        match self.carrier() {
            Side::H2(_) => "HTTP/2.0",
            Side::H3(_) => "HTTP/3.0",
            _ => self.req.version.as_str(),
        }
    }

    pub fn is_head(&self) -> bool {
        self.head_only
    }

    /// The body's length: `Some(0)` without one, `None` when it is not
    /// known before its end (chunked).
    pub fn body_length(&self) -> Option<u64> {
        match self.req.framing {
            Framing::None => Some(0),
            Framing::Length(n) => Some(n),
            Framing::Chunked | Framing::Close => None,
        }
    }

    /// The client asked for `100 Continue` and has not had it: it sends
    /// no body until the first [`Exchange::read_body`] asks for it, and a
    /// final answer given before that ends the wait (RFC 9110 §10.1.1).
    pub fn awaits_continue(&self) -> bool {
        match self.carrier() {
            Side::H1(io) => io.reader.is_none() && self.req.expect_continue && self.req.has_body(),
            Side::Sub(_) | Side::Caught(_) => false,
            Side::H2(s) => s.continue_pending(),
            Side::H3(s) => s.continue_pending(),
        }
    }

    /// Appends the next piece of the request body to `dst`; Ok(false) once
    /// it is complete. Bounded by `max_body_bytes`, `body_timeout` and
    /// `body_min_rate`.
    pub async fn read_body(&mut self, dst: &mut Vec<u8>) -> Result<bool, BodyFail> {
        let before = dst.len();
        // The route's `max_body_bytes`, else the server's.
        let max = self
            .edge
            .max_body_bytes
            .unwrap_or(self.limits.max_body_bytes);
        let (req, limits) = (self.req, self.limits);
        let r = match self.carrier_mut() {
            Side::H1(io) => io.read_body(req, limits, max, dst).await,
            Side::Sub(_) | Side::Caught(_) => Ok(false),
            Side::H2(s) => s.read_body(limits, max, dst).await,
            Side::H3(s) => s.read_body(limits, max, dst).await,
        };
        self.received += dst.len().saturating_sub(before) as u64;
        r
    }

    /// Whether the request body was read to its end (or there is none).
    pub fn body_done(&self) -> bool {
        match self.carrier() {
            Side::H1(io) => io.body_done(self.req),
            Side::Sub(_) | Side::Caught(_) => true,
            Side::H2(s) => s.body_done(),
            Side::H3(s) => s.body_done(),
        }
    }

    /// Whether it makes sense to watch for the client leaving now (HTTP/1:
    /// not while a large amount of pipelined input is already buffered).
    pub fn can_watch(&self) -> bool {
        match self.carrier() {
            Side::H1(io) => io.rbuf.len() < 64 * 1024,
            Side::Sub(_) | Side::Caught(_) => false,
            Side::H2(_) => true,
            // Nothing tells an HTTP/3 client's leaving without reading
            // its stream (quinn reports a reset to the reader only).
            Side::H3(_) => false,
        }
    }

    /// Resolves when the client goes away (true) or sends more (false).
    pub async fn client_gone(&mut self) -> bool {
        match self.carrier_mut() {
            Side::H1(io) => io.client_gone().await,
            Side::Sub(_) | Side::Caught(_) => std::future::pending().await,
            Side::H2(s) => s.client_gone().await,
            Side::H3(s) => s.client_gone().await,
        }
    }

    // ---- the response ----

    fn buf(&mut self) -> &mut Vec<u8> {
        match &mut self.side {
            Side::H1(io) => io.out.buf(),
            Side::Sub(s) => &mut s.head,
            Side::H2(s) => &mut s.head,
            Side::H3(s) => &mut s.head,
            Side::Caught(c) => &mut c.head,
        }
    }

    /// Status line, Date and Server. An application's error status that
    /// the route replaces with an error page (`intercept_errors`) is
    /// caught instead: what follows of the response goes nowhere.
    pub fn start(&mut self, status: u16) {
        if self.edge.error_pages.as_ref().is_some_and(|p| p.intercept) && self.catch(status, &[]) {
            return;
        }
        self.begin(status);
    }

    /// Holds back a response with `status` for its error page, if the
    /// route has one for it and nothing of the response was sent; true
    /// when the response is caught (now or before).
    #[inline(never)]
    fn catch(&mut self, status: u16, headers: &[(&str, &[u8])]) -> bool {
        if let Side::Caught(_) = self.side {
            return true;
        }
        let Some(pages) = self.edge.error_pages.as_ref().filter(|_| self.may_catch) else {
            return false;
        };
        if self.status != 0 || pages.page(status).is_none() || matches!(self.side, Side::Sub(_)) {
            return false;
        }
        let mut head = Vec::new();
        for (n, v) in headers {
            stoa_h1::response::push_header(&mut head, n, v);
        }
        let caught = Side::Caught(Box::new(Caught {
            carrier: None,
            status,
            head,
            dropped: 0,
        }));
        let carrier = std::mem::replace(&mut self.side, caught);
        if let Side::Caught(c) = &mut self.side {
            c.carrier = Some(carrier);
        }
        self.status = status;
        true
    }

    /// The caller writes the error page of a response caught here
    /// ([`Exchange::take_caught`]); a redirected exchange needs this to
    /// catch.
    pub(crate) fn catch_errors(&mut self) {
        self.may_catch = true;
    }

    /// Whether the response was caught for an error page.
    #[inline]
    pub(crate) fn is_caught(&self) -> bool {
        matches!(self.side, Side::Caught(_))
    }

    /// Gives a caught response's carrier back, for its error page to be
    /// written as a fresh response: its status and the header lines it
    /// had.
    pub(crate) fn take_caught(&mut self) -> Option<(u16, Vec<u8>)> {
        let Side::Caught(c) = &mut self.side else {
            return None;
        };
        let carrier = c.carrier.take()?;
        let Side::Caught(c) = std::mem::replace(&mut self.side, carrier) else {
            return None;
        };
        self.status = 0;
        self.sent = 0;
        self.chunked = false;
        self.remaining = None;
        self.active = None;
        self.head_bytes = 0;
        Some((c.status, c.head))
    }

    /// [`Exchange::start`], never caught: for an error page, whose own
    /// errors are not replaced.
    pub(crate) fn begin(&mut self, status: u16) {
        self.status = status;
        // A response that starts anew (an error replacing one not sent)
        // starts its filters anew too.
        if self.active.is_some() {
            self.active = None;
        }
        if let Side::H1(io) = &self.side {
            if io.reader.is_none() && self.req.expect_continue && self.req.has_body() {
                // Answered before the body was asked for: the client waits
                // for a final status and sends no body (RFC 9110 §10.1.1),
                // so the connection cannot be reused.
                self.keep = false;
            }
        }
        // `head_bytes` holds where the head starts until `end_head`.
        match &mut self.side {
            Side::H1(io) => {
                let b = io.out.buf();
                self.head_bytes = b.len() as u64;
                push_status_line(b, status);
                self.fields_at = b.len();
                self.worker.push_date(b);
            }
            Side::Sub(s) => {
                s.status = status;
                self.fields_at = s.head.len();
            }
            Side::H2(s) => {
                s.start(status);
                self.head_bytes = 0;
                self.fields_at = 0;
                self.worker.push_date(&mut s.head);
            }
            Side::H3(s) => {
                s.start(status);
                self.head_bytes = 0;
                self.fields_at = 0;
                self.worker.push_date(&mut s.head);
            }
            Side::Caught(_) => return,
        }
        if let Some(v) = self.hsts {
            self.header("Strict-Transport-Security", v);
        }
        if self.worker.advertises_h3() {
            self.alt_svc();
        }
        if let Some(v) = self.cache_field {
            self.header("Cache-Status", v);
        }
    }

    /// `Alt-Svc` on a response over TLS (HTTP/1.1 or HTTP/2) of a
    /// listener that speaks HTTP/3 too: how clients learn of it (RFC 9114
    /// §3.1.1).
    #[inline(never)]
    fn alt_svc(&mut self) {
        let local = match &self.side {
            Side::H1(io) if io.is_tls() => io.local_addr(),
            Side::H2(s) if s.tls.is_some() => s.local,
            _ => None,
        };
        if let Some(v) = local.and_then(|a| self.worker.alt_svc(a.port())) {
            self.header("Alt-Svc", &v);
        }
    }

    pub fn header(&mut self, name: &str, value: &[u8]) {
        stoa_h1::response::push_header(self.buf(), name, value);
    }

    /// Pre-encoded header lines, each ending in CRLF.
    pub fn raw_headers(&mut self, lines: &[u8]) {
        self.buf().extend_from_slice(lines);
    }

    /// [`Exchange::raw_headers`] for lines that stay the same from one
    /// response to the next (a cached file's): on HTTP/2 their HPACK
    /// form is made once, kept in `h2`, and sent as it is unless a
    /// response filter changes the head.
    pub(crate) fn cached_headers(&mut self, lines: &[u8], h2: &std::cell::OnceCell<Rc<[u8]>>) {
        if let Side::H2(s) = &mut self.side {
            let enc = h2.get_or_init(|| crate::proto::h2::encoded(lines));
            s.pre_encoded(lines, enc);
            return;
        }
        self.raw_headers(lines);
    }

    /// Ends a head whose body has this length (`None`: a status without a
    /// body, or HEAD).
    pub fn end_head(&mut self, len: Option<u64>) {
        if let Some(f) = self.filters {
            let announced = match len {
                Some(n) => Length::Known(n),
                None => Length::Empty,
            };
            if self.run_filters(f, announced) == Length::Unknown {
                // A filter made the length unknown (it rewrites the
                // body): streamed; what the handler announced still
                // bounds what it may write, and tells a cut body.
                self.head_stream();
                self.remaining = len.map(|n| if self.head_only { 0 } else { n });
                return;
            }
        }
        self.head_length(len);
    }

    /// Runs the route's filters on the head so far; the body's length as
    /// they leave it.
    #[inline(never)]
    fn run_filters(&mut self, filters: &Filters, length: Length) -> Length {
        if let Side::Caught(_) = self.side {
            // Filters run on the error page that replaces it.
            return length;
        }
        let http10 = self.req.version == Version::Http10 && matches!(self.side, Side::H1(_));
        let sub = matches!(self.side, Side::Sub(_));
        let (buf, at) = match &mut self.side {
            Side::H1(io) => (io.out.buf(), self.fields_at),
            Side::Sub(s) => (&mut s.head, self.fields_at),
            Side::H2(s) => s.head_for_filters(),
            Side::H3(s) => s.head_for_filters(),
            Side::Caught(c) => (&mut c.head, 0),
        };
        let mut head = Head {
            req: self.req,
            status: self.status,
            fields: Fields::new(buf, at),
            length,
            head_only: self.head_only,
            http10,
            sub,
        };
        self.active = filters.head(&mut head);
        head.length
    }

    /// [`Exchange::end_head`] once the filters ran. Inlined: on the path
    /// without filters `end_head` is this and one test.
    #[inline(always)]
    fn head_length(&mut self, len: Option<u64>) {
        if self.captured.is_some() {
            self.capture_fields();
        }
        self.remaining = Some(if self.head_only { 0 } else { len.unwrap_or(0) });
        if let Side::H2(s) = &mut self.side {
            if let Some(len) = len {
                s.content_length(len);
            }
            self.head_bytes = (s.head.len() as u64).saturating_sub(self.head_bytes);
            return;
        }
        if let Side::H3(s) = &mut self.side {
            if let Some(len) = len {
                s.content_length(len);
            }
            self.head_bytes = (s.head.len() as u64).saturating_sub(self.head_bytes);
            return;
        }
        let io = match &mut self.side {
            Side::H1(io) => io,
            Side::Sub(s) => return s.head_ended(self.remaining),
            _ => return,
        };
        let b = io.out.buf();
        if let Some(len) = len {
            b.extend_from_slice(b"Content-Length: ");
            stoa_h1::push_u64(b, len);
            b.extend_from_slice(b"\r\n");
        }
        if !self.keep {
            b.extend_from_slice(b"Connection: close\r\n\r\n");
        } else if self.req.version == Version::Http10 {
            b.extend_from_slice(b"Connection: keep-alive\r\n\r\n");
        } else {
            b.extend_from_slice(b"\r\n");
        }
        self.head_bytes = (b.len() as u64).saturating_sub(self.head_bytes);
    }

    /// Ends a head whose body length is not known yet: HTTP/1.1 chunks it,
    /// HTTP/1.0 delimits it by closing the connection.
    pub fn end_head_stream(&mut self) {
        if let Some(f) = self.filters {
            self.run_filters(f, Length::Unknown);
        }
        self.head_stream();
    }

    /// [`Exchange::end_head_stream`] once the filters ran.
    fn head_stream(&mut self) {
        if self.head_only {
            self.head_length(None);
            return;
        }
        match &mut self.side {
            Side::H1(io) => {
                if self.req.version == Version::Http10 {
                    self.keep = false;
                } else {
                    io.out
                        .buf()
                        .extend_from_slice(b"Transfer-Encoding: chunked\r\n");
                    self.chunked = true;
                }
            }
            Side::Sub(s) => {
                // A sink learns that the length is not known.
                self.remaining = None;
                return s.head_ended(None);
            }
            Side::H2(_) | Side::H3(_) | Side::Caught(_) => {}
        }
        self.head_length(None);
        self.remaining = None;
    }

    /// A shared body (a cached file); skipped for HEAD.
    pub fn body_mem(&mut self, body: Bytes) {
        if self.head_only {
            return;
        }
        if self.active.is_some() {
            return self.filter_mem(body);
        }
        match &mut self.side {
            Side::H1(io) if !self.chunked => {
                self.sent += body.len() as u64;
                if let Some(r) = self.remaining.as_mut() {
                    *r = r.saturating_sub(body.len() as u64);
                }
                if body.len() <= 2048 {
                    // Cheaper to copy than to add an iovec.
                    io.out.buf().extend_from_slice(&body);
                } else {
                    io.out.push_mem(body);
                }
            }
            Side::H2(s) => {
                let n = body.len() as u64;
                let n = self.remaining.map_or(n, |r| r.min(n));
                self.sent += n;
                if let Some(r) = self.remaining.as_mut() {
                    *r -= n;
                }
                s.push_mem(body.slice(..n as usize));
            }
            Side::H3(s) => {
                let n = body.len() as u64;
                let n = self.remaining.map_or(n, |r| r.min(n));
                self.sent += n;
                if let Some(r) = self.remaining.as_mut() {
                    *r -= n;
                }
                s.push_mem(body.slice(..n as usize));
            }
            _ => self.write(&body),
        }
    }

    /// A piece of body, framed as the head said (chunked, or cut at the
    /// announced length); skipped for HEAD.
    pub fn write(&mut self, data: &[u8]) {
        if self.head_only {
            return;
        }
        let mut data = data;
        if let Some(r) = self.remaining.as_mut() {
            let take = (*r).min(data.len() as u64) as usize;
            data = &data[..take];
            *r -= take as u64;
        }
        if data.is_empty() {
            return;
        }
        if self.active.is_some() {
            return self.filter_data(data);
        }
        self.emit(data);
    }

    /// Body bytes to the carrier, framed as the head said.
    fn emit(&mut self, data: &[u8]) {
        if data.is_empty() {
            // An empty chunk would end a chunked body.
            return;
        }
        self.sent += data.len() as u64;
        match &mut self.side {
            Side::H1(io) => {
                let buf = io.out.buf();
                if self.chunked {
                    push_chunk_header(buf, data.len());
                    buf.extend_from_slice(data);
                    buf.extend_from_slice(CHUNK_END);
                } else {
                    buf.extend_from_slice(data);
                }
            }
            Side::Sub(s) => s.push_body(data),
            Side::H2(s) => s.push(data),
            Side::H3(s) => s.push(data),
            // Caught: the error page replaces it.
            Side::Caught(c) => c.dropped += data.len() as u64,
        }
    }

    /// A range of a file; skipped for HEAD.
    pub fn body_file(&mut self, file: Rc<File>, offset: u64, len: u64) {
        if self.head_only {
            return;
        }
        if self.active.is_some() {
            return self.filter_file(&file, offset, len);
        }
        if let Some(r) = self.remaining.as_mut() {
            *r = r.saturating_sub(len);
        }
        match &mut self.side {
            Side::H1(io) if self.chunked => {
                // A file's range inside a chunked body (a cache fill that
                // spilled to a file): one chunk around it.
                if len == 0 {
                    // An empty chunk would end the body.
                    return;
                }
                self.sent += len;
                push_chunk_header(io.out.buf(), len as usize);
                io.out.push_file(file, offset, len);
                io.out.buf().extend_from_slice(CHUNK_END);
            }
            Side::H1(io) => {
                self.sent += len;
                io.out.push_file(file, offset, len);
            }
            Side::Sub(s) => {
                self.sent += len;
                s.push_file(&file, offset, len);
            }
            Side::H2(s) => {
                self.sent += len;
                s.push_file(file, offset, len);
            }
            Side::H3(s) => {
                self.sent += len;
                s.push_file(file, offset, len);
            }
            Side::Caught(c) => c.dropped += len,
        }
    }

    /// An informational response (1xx other than 100 and 101, such as 103
    /// Early Hints) ahead of the final one, sent at once. `lines`: header
    /// lines, each ending in CRLF. HTTP/1.1, HTTP/2 and HTTP/3 clients get
    /// it; an HTTP/1.0 client and a subrequest get none (RFC 9110 §15.2).
    /// False when the client is gone.
    pub async fn interim(&mut self, status: u16, lines: &[u8]) -> bool {
        if self.status != 0 || !(102..200).contains(&status) {
            return true;
        }
        match &mut self.side {
            Side::H1(io) => {
                if self.req.version != stoa_h1::Version::Http11 {
                    return true;
                }
                let b = io.out.buf();
                push_status_line(b, status);
                b.extend_from_slice(lines);
                b.extend_from_slice(b"\r\n");
                io.out.seal();
                io.flush(self.limits.send_timeout).await
            }
            Side::Sub(_) | Side::Caught(_) => true,
            Side::H2(s) => s.interim(status, lines),
            Side::H3(s) => s.interim(status, lines, self.limits.send_timeout).await,
        }
    }

    /// Output that is already a whole HTTP/1 response (an NPH script),
    /// in as many pieces as it comes: on HTTP/1 it goes to the client
    /// untouched and the connection closes after it; on HTTP/2 its head
    /// is parsed and sent as the stream's response and its body
    /// de-framed ([`nph`]); in a subrequest it is taken as the body.
    pub fn raw(&mut self, data: &[u8], status: u16) {
        match &mut self.side {
            Side::H1(io) => io.out.buf().extend_from_slice(data),
            Side::Sub(s) => s.push_body(data),
            Side::H2(_) | Side::H3(_) => return self.relay_nph(data),
            Side::Caught(_) => {}
        }
        self.status = status;
        self.keep = false;
        self.sent += data.len() as u64;
    }

    /// A complete response with a small HTML body saying what happened.
    pub fn error(&mut self, status: u16, headers: &[(&str, &[u8])]) {
        if matches!(status, 400 | 408 | 413 | 414 | 431 | 505) {
            // After a protocol error the rest of the stream cannot be trusted.
            // (A 501 here is an unknown method, whose framing is known: the
            // connection goes on, as after a 405.)
            self.keep = false;
        }
        // The route's error page for it, if it has one, replaces it.
        if self.edge.error_pages.is_some() && self.catch(status, headers) {
            return;
        }
        self.begin(status);
        for (n, v) in headers {
            self.header(n, v);
        }
        self.error_body(status);
    }

    /// The built-in error response, with header lines (each ending in
    /// CRLF): for an error page that could not be had.
    pub(crate) fn error_lines(&mut self, status: u16, lines: &[u8]) {
        self.begin(status);
        self.raw_headers(lines);
        self.error_body(status);
    }

    /// The small HTML body of an error, and its head's end.
    fn error_body(&mut self, status: u16) {
        let reason = stoa_h1::reason_phrase(status);
        let mut body = Vec::with_capacity(96);
        body.extend_from_slice(b"<!DOCTYPE html>\n<title>");
        stoa_h1::push_u64(&mut body, u64::from(status));
        body.push(b' ');
        body.extend_from_slice(reason.as_bytes());
        body.extend_from_slice(b"</title>\n<h1>");
        stoa_h1::push_u64(&mut body, u64::from(status));
        body.push(b' ');
        body.extend_from_slice(reason.as_bytes());
        body.extend_from_slice(b"</h1>\n");
        self.header("Content-Type", b"text/html; charset=utf-8");
        self.end_head(Some(body.len() as u64));
        self.write(&body);
    }

    /// The connection is not to carry another request.
    pub fn close(&mut self) {
        self.keep = false;
    }

    /// Whether the connection may carry another request (so far).
    pub fn keeps(&self) -> bool {
        self.keep
    }

    /// The response's status (0 before `start`).
    // For the phases after the handler (response filters, error pages).
    #[allow(dead_code)]
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Whether every byte an announced length promised has been written.
    pub fn is_complete(&self) -> bool {
        self.remaining == Some(0)
    }

    /// Fewer bytes were written than the head announced.
    pub fn truncated(&self) -> bool {
        self.remaining.is_some_and(|r| r > 0)
    }

    /// Writes everything queued; false when the client is gone or stopped
    /// reading for longer than the send timeout.
    pub async fn flush(&mut self) -> bool {
        if self.active.is_some() {
            self.filter_flush();
        }
        match &mut self.side {
            Side::H1(io) => io.flush(self.limits.send_timeout).await,
            Side::Sub(_) => true,
            Side::Caught(c) => c.dropped <= MAX_DRAIN,
            Side::H2(s) => s.flush(false, self.limits.send_timeout).await,
            Side::H3(s) => s.flush(false, self.limits.send_timeout).await,
        }
    }

    /// After a `101 Switching Protocols` written with [`Exchange::raw`]:
    /// copies bytes both ways between the client and `other` until either
    /// side closes or neither sends for `idle` (HTTP/1 only: an HTTP/2
    /// stream or a subrequest has no connection to give away, and says
    /// false at once). The connection closes afterwards.
    pub async fn tunnel<S>(&mut self, other: &mut S, idle: std::time::Duration) -> bool
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        self.keep = false;
        let Side::H1(io) = &mut self.side else {
            return false;
        };
        if !io.flush(self.limits.send_timeout).await {
            return false;
        }
        // What the client sent after its request head (a first frame).
        if io.start < io.rbuf.len() {
            if other.write_all(&io.rbuf[io.start..]).await.is_err() {
                return false;
            }
            io.start = io.rbuf.len();
        }
        let mut up = vec![0u8; 16 * 1024];
        let mut down = vec![0u8; 16 * 1024];
        loop {
            let step = tokio::select! {
                r = io.stream.read(&mut up) => match r {
                    Ok(n) if n > 0 => other.write_all(&up[..n]).await.is_ok(),
                    _ => false,
                },
                r = other.read(&mut down) => match r {
                    Ok(n) if n > 0 => {
                        self.sent += n as u64;
                        io.stream.write_all(&down[..n]).await.is_ok()
                    }
                    _ => false,
                },
                _ = tokio::time::sleep(idle) => false,
            };
            if !step {
                let _ = other.shutdown().await;
                return true;
            }
        }
    }

    /// Trailer fields to end the response with (RFC 9110 §6.5): on
    /// HTTP/2 a HEADERS frame after the body; on HTTP/1.1 in the last
    /// chunk when the body is chunked and the client said `TE: trailers`
    /// (RFC 9110 §10.1.4), as nginx's `grpc_pass` does; else dropped. Call
    /// it after the body and before [`Exchange::finish`].
    pub fn trailers(&mut self, fields: http::HeaderMap) {
        if fields.is_empty() || self.head_only {
            return;
        }
        let te = self.req.header("te").is_some_and(|v| {
            v.split(|&b| b == b',').any(|t| {
                let t = stoa_h1::trim(t);
                t.len() >= 8 && t[..8].eq_ignore_ascii_case(b"trailers")
            })
        });
        match &mut self.side {
            Side::H2(s) => s.trailers = Some(fields),
            Side::H3(s) => s.trailers = Some(fields),
            // A body filter still holds output that goes before the last
            // chunk: the trailers cannot follow it there.
            Side::H1(io) if self.chunked && te && self.active.is_none() => {
                self.chunked = false;
                let b = io.out.buf();
                b.extend_from_slice(b"0\r\n");
                for (name, value) in &fields {
                    b.extend_from_slice(name.as_str().as_bytes());
                    b.extend_from_slice(b": ");
                    b.extend_from_slice(value.as_bytes());
                    b.extend_from_slice(b"\r\n");
                }
                b.extend_from_slice(b"\r\n");
            }
            Side::H1(_) | Side::Sub(_) | Side::Caught(_) => {}
        }
    }

    /// The request's trailer fields, once its body was read to its end
    /// (HTTP/2 only: the HTTP/1 decoder drops chunked trailers).
    pub async fn request_trailers(&mut self) -> Option<http::HeaderMap> {
        let within = self.limits.body_timeout;
        match &mut self.side {
            Side::H2(s) => s.request_trailers(within).await,
            Side::H3(s) => s.request_trailers(within).await,
            Side::H1(_) | Side::Sub(_) | Side::Caught(_) => None,
        }
    }

    /// Ends a response cut short (the producer failed mid-body): no last
    /// chunk, so a chunked client sees the truncation; the connection
    /// closes; the access log line is written, marked cut.
    pub fn abort(&mut self) {
        self.chunked = false;
        self.keep = false;
        self.end(false);
    }

    /// Ends the response: the last chunk, and the access log line. A body
    /// shorter than its announced length closes the connection: that is
    /// how the client learns of the truncation.
    pub fn finish(&mut self) {
        self.end(true);
    }

    fn end(&mut self, whole: bool) {
        if let Side::Caught(_) = self.side {
            // Its error page ends it (`take_caught`).
            return;
        }
        let nph = match &self.side {
            Side::H2(s) => s.nph.is_some(),
            Side::H3(s) => s.nph.is_some(),
            _ => false,
        };
        if nph {
            self.relay_end();
        }
        if self.active.is_some() {
            self.filter_end(whole);
        }
        if self.chunked {
            self.chunked = false;
            if let Side::H1(io) = &mut self.side {
                io.out.buf().extend_from_slice(LAST_CHUNK);
            }
        }
        if self.truncated() {
            self.keep = false;
        }
        let complete = whole && !self.truncated();
        if let Side::Sub(s) = &mut self.side {
            s.ended(complete);
        }
        self.log_line(complete);
    }

    // ---- the body through filters (`crate::filter`) ----

    /// The body about to be written is this version of a file (the static
    /// handler's whole 200): a filter may answer it with what it made of
    /// that version before (a compressed form), instead of reworking it.
    /// `version` is called only when a filter takes the body: without
    /// filters this costs one test.
    #[inline]
    pub(crate) fn body_version(&mut self, version: impl FnOnce() -> FileVersion) {
        if let Some(a) = self.active.as_deref_mut() {
            a.version = Some(version());
        }
    }

    #[inline(never)]
    fn filter_data(&mut self, data: &[u8]) {
        let Some(mut a) = self.active.take() else {
            return;
        };
        a.data(data);
        self.emit_filtered(&mut a);
        self.active = Some(a);
    }

    fn emit_filtered(&mut self, a: &mut Active) {
        self.emit(&a.out);
        a.out.clear();
    }

    /// A shared body through the filters: whole, when it is the version
    /// the exchange was told of (a kept form may answer it).
    #[inline(never)]
    fn filter_mem(&mut self, body: Bytes) {
        let whole = self
            .active
            .as_deref()
            .is_some_and(|a| a.version.is_some_and(|v| v.size == body.len() as u64))
            && self.remaining.is_none_or(|r| r == body.len() as u64);
        if whole {
            if let Some(made) = self
                .active
                .as_deref_mut()
                .and_then(|a| a.whole(Whole::Mem(&body)))
            {
                self.remaining = self.remaining.map(|_| 0);
                return self.emit_mem(made);
            }
        }
        self.write(&body)
    }

    /// A file range through the filters: whole when it is the version
    /// the exchange was told of, else read and fed in pieces.
    #[inline(never)]
    fn filter_file(&mut self, file: &File, offset: u64, len: u64) {
        let len = self.remaining.map_or(len, |r| r.min(len));
        let whole = offset == 0
            && self
                .active
                .as_deref()
                .is_some_and(|a| a.version.is_some_and(|v| v.size == len));
        if let Some(r) = self.remaining.as_mut() {
            *r -= len;
        }
        if whole {
            if let Some(made) = self
                .active
                .as_deref_mut()
                .and_then(|a| a.whole(Whole::File(file)))
            {
                return self.emit_mem(made);
            }
        }
        use std::os::unix::fs::FileExt;
        let mut piece = vec![0; len.min(64 * 1024) as usize];
        let mut at = offset;
        let end = offset + len;
        while at < end {
            let n = (end - at).min(piece.len() as u64) as usize;
            if let Err(e) = file.read_exact_at(&mut piece[..n], at) {
                // The head is gone: the body ends here, short of its
                // length, so the response is cut (the connection closes,
                // an HTTP/2 stream is reset).
                tracing::error!("reading a file for a response: {e}");
                self.remaining = Some(self.remaining.unwrap_or(0) + (end - at));
                return;
            }
            self.filter_data(&piece[..n]);
            at += n as u64;
        }
    }

    /// Encoded output that came whole (a kept form) to the carrier.
    fn emit_mem(&mut self, made: Bytes) {
        if made.is_empty() {
            return;
        }
        self.sent += made.len() as u64;
        match &mut self.side {
            Side::H1(io) => {
                if self.chunked {
                    push_chunk_header(io.out.buf(), made.len());
                    io.out.push_mem(made);
                    io.out.buf().extend_from_slice(CHUNK_END);
                } else {
                    io.out.push_mem(made);
                }
            }
            Side::Sub(s) => s.push_body(&made),
            Side::H2(s) => s.push_mem(made),
            Side::H3(s) => s.push_mem(made),
            Side::Caught(c) => c.dropped += made.len() as u64,
        }
    }

    /// The application flushed: what the filters hold goes out with it.
    #[inline(never)]
    fn filter_flush(&mut self) {
        let Some(mut a) = self.active.take() else {
            return;
        };
        a.flush();
        self.emit_filtered(&mut a);
        self.active = Some(a);
    }

    /// The end of the response: the filters' tails, unless the body was
    /// cut (then the client must see a truncation, not a whole stream).
    #[inline(never)]
    fn filter_end(&mut self, whole: bool) {
        let Some(mut a) = self.active.take() else {
            return;
        };
        if whole && !self.truncated() {
            a.finish();
            self.emit_filtered(&mut a);
        }
    }

    /// The application answering this request (`unix:/path` or
    /// `host:port`), from now: `$upstream_addr`, and the clock of
    /// `$upstream_response_time`. Another call (a retry elsewhere)
    /// replaces it.
    pub fn upstream_began(&mut self, addr: impl Into<UpstreamAddr>) {
        self.upstream = Some(Box::new(UpstreamTrace {
            addr: addr.into(),
            text: std::cell::OnceCell::new(),
            since: Instant::now(),
            took: None,
        }));
    }

    /// The application's response has all come: how long it took since
    /// `upstream_began` (also the proxy's latency sample, so the clock is
    /// read once).
    pub fn upstream_ended(&mut self) -> Option<std::time::Duration> {
        self.upstream
            .as_mut()
            .map(|u| *u.took.get_or_insert_with(|| u.since.elapsed()))
    }

    /// Who asked for what, for error lines: `client: 192.0.2.7:5555,
    /// request: "GET /x HTTP/1.1"` (escaped: a request cannot forge a line).
    pub fn who(&self) -> Who<'_> {
        Who {
            peer: self.peer(),
            line: self.req.request_line(),
            upstream: self.upstream.as_ref().map(|u| u.addr_text()),
        }
    }

    /// Writes the access-log line once: counted, and to the route's or
    /// the server's log unless it is off.
    fn log_line(&mut self, complete: bool) {
        if self.logged {
            return;
        }
        self.logged = true;
        if let Side::Sub(_) = self.carrier() {
            return;
        }
        // nginx's 499: the client went before any response was begun.
        let status = if self.status == 0 { 499 } else { self.status };
        self.worker.count_response(status);
        // Checked before the line's fields are gathered: with the log off,
        // a response costs no more than this.
        if !self.worker.logs_to(self.log) {
            return;
        }
        let (peer, spoken) = match self.carrier() {
            Side::H1(io) => (io.peer, None),
            Side::H2(s) => (s.peer, Some("HTTP/2.0")),
            Side::H3(s) => (s.peer, Some("HTTP/3.0")),
            Side::Sub(_) | Side::Caught(_) => return,
        };
        let req = self.req;
        // The rest is read only by the format that prints it (the
        // Combined one, on every request's path, needs none of it).
        let this = &*self;
        self.worker.write_access(
            self.log,
            || Combined {
                peer,
                request_line: req.request_line(),
                spoken,
                status,
                body_bytes: this.sent,
                head: Some(req),
                user: this.user.as_deref(),
            },
            || {
                let up = this.upstream.as_deref();
                Entry {
                    peer,
                    request_line: if let Some(v) = spoken {
                        // The head was built as HTTP/1.1; the log says
                        // what the client spoke.
                        let line = req.request_line();
                        let mut l = line.strip_suffix(b"HTTP/1.1").unwrap_or(line).to_vec();
                        l.extend_from_slice(v.as_bytes());
                        Cow::Owned(l)
                    } else {
                        Cow::Borrowed(req.request_line())
                    },
                    head: Some(req),
                    protocol: spoken.unwrap_or(req.version.as_str()),
                    tls: match this.carrier() {
                        Side::H1(io) => io.is_tls(),
                        Side::H2(s) => s.tls.is_some(),
                        Side::H3(s) => s.tls.is_some(),
                        Side::Sub(_) | Side::Caught(_) => false,
                    },
                    status,
                    body_bytes: this.sent,
                    bytes_sent: if this.status == 0 { 0 } else { this.head_bytes } + this.sent,
                    body_received: this.received,
                    request_time: this.began.map(|b| b.elapsed()),
                    upstream_addr: up.map(|u| u.addr_text()),
                    upstream_time: up.map(|u| u.took.unwrap_or_else(|| u.since.elapsed())),
                    user: this.user.as_deref(),
                    complete,
                    cache_status: this.cache_status,
                }
            },
        );
    }
}

impl Drop for Exchange<'_> {
    /// A response never finished (the client left, the application died,
    /// a send timed out, the task was cancelled) still gets its line,
    /// marked cut, as nginx logs every request with `$request_completion`
    /// empty for those.
    fn drop(&mut self) {
        if !self.logged {
            self.log_line(false);
        }
    }
}

/// See [`Exchange::who`].
pub struct Who<'a> {
    peer: SocketAddr,
    line: &'a [u8],
    upstream: Option<&'a str>,
}

impl std::fmt::Display for Who<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut line = Vec::with_capacity(self.line.len().min(512));
        crate::log::access::escape_into(&mut line, &self.line[..self.line.len().min(512)]);
        write!(
            f,
            "client: {}, request: \"{}\"",
            self.peer,
            String::from_utf8_lossy(&line)
        )?;
        if let Some(u) = self.upstream {
            write!(f, ", upstream: \"{u}\"")?;
        }
        Ok(())
    }
}

/// Runs a path through routing as a subrequest of the request being
/// served (SSI's `include virtual`, Lua's `stoa.subrequest`): a trait so
/// that handlers call it without knowing routing, which implements it.
pub trait Include {
    /// What routing chose for a subrequest, for [`Include::run`].
    type Routed;

    /// Routes a GET for `target` (origin-form, with its query) carrying
    /// the parent's headers: its response when it is known at once (a
    /// cached static file, a refused loop), otherwise what to run.
    fn route(&self, parent: &RequestHead, target: &[u8]) -> Result<SubResponse, Self::Routed>;

    /// Runs what [`Include::route`] chose; its response, collected.
    fn run(&self, routed: Self::Routed) -> impl Future<Output = SubResponse>;

    /// [`Include::route`], then [`Include::run`] if need be.
    fn include(&self, parent: &RequestHead, target: &[u8]) -> impl Future<Output = SubResponse> {
        let routed = self.route(parent, target);
        async move {
            match routed {
                Ok(resp) => resp,
                Err(r) => self.run(r).await,
            }
        }
    }
}
