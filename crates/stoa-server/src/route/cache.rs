//! The response cache's request path (RFC 9111), for routes whose `Edge`
//! has a cache and whose handler reaches an application (proxy, FastCGI,
//! PHP, CGI): `route::run_handler` hands them here.
//!
//! 1. A method the route does not answer from the cache runs the handler
//!    as usual (`Cache-Status: Stoa; fwd=method`); PURGE is `purge`.
//! 2. A request a bypass rule matches runs the handler (`fwd=bypass`).
//! 3. The key; the stored object; fresh: delivered at once, without a
//!    future (a memory hit costs about what a static file's does).
//! 4. Otherwise a fetch, collapsed by key (`Zone::begin`): the first
//!    request leads and spawns the fetch as a local task that runs the
//!    route's handler on a subrequest exchange whose `Sub` fills the
//!    object ([`FillSink`]), so the application is read at its own pace
//!    whatever the clients do; every client (lead and waiters) is
//!    answered from the fill as it grows. Waiters wait `lock_timeout` at
//!    most, then fetch for themselves, uncached.

use super::{follow, Nest, Running};
use crate::cache::config::CacheRoute;
use crate::cache::policy;
use crate::cache::store::{Begin, Chunk, Fill, FillGuard, Meta, Object};
use crate::config::Runtime;
use crate::exchange::{Edge, Exchange, Sink, Sub};
use crate::handler::{cgi, fastcgi, proxy, Handler, Outcome};
use crate::local::Worker;
use bytes::Bytes;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use stoa_h1::{Method, RequestHead};

/// `Cache-Status` values (RFC 9211) that need no number.
const FWD_MISS: &[u8] = b"Stoa; fwd=miss; stored";
const FWD_MISS_NOT_STORED: &[u8] = b"Stoa; fwd=miss";
const FWD_BYPASS: &[u8] = b"Stoa; fwd=bypass";
const FWD_METHOD: &[u8] = b"Stoa; fwd=method";

/// A request for a cached route (see the module's documentation).
#[allow(clippy::too_many_arguments)]
pub(super) fn serve<'x>(
    c: &'x Arc<CacheRoute>,
    h: &'x Handler,
    norm: String,
    ex: &'x mut Exchange<'_>,
    rt: &'x Runtime,
    depth: u8,
    vars: &'x [(String, Vec<u8>)],
    nest: Option<&'x Nest>,
) -> Option<Running<'x>> {
    let cacheable = match ex.req().method {
        Method::Get => c.get,
        Method::Head => c.head,
        _ => false,
    };
    if !cacheable {
        ex.set_cache_status("", Some(FWD_METHOD));
        return Some(app(h, norm, ex, rt, depth, vars, nest));
    }
    if c.bypass.matches(ex.req()) {
        ex.set_cache_status("BYPASS", Some(FWD_BYPASS));
        return Some(app(h, norm, ex, rt, depth, vars, nest));
    }
    let key = c.key.key(ex.req(), ex.scheme());
    let now = SystemTime::now();
    let stored = c.zone.lookup(&key);
    if let Some(obj) = &stored {
        let age = age(&obj.meta, now);
        if age < obj.meta.ttl {
            ex.set_cache_status("HIT", None);
            deliver(ex, obj, age, obj.meta.ttl - age);
            ex.finish();
            return None;
        }
    }
    let status = if stored.is_some() { "EXPIRED" } else { "MISS" };
    Some(Box::pin(async move {
        fetch(c, key, h, norm, ex, rt, depth, vars, status).await;
    }))
}

/// The route's handler on the client's exchange, as without a cache.
fn app<'x>(
    h: &'x Handler,
    norm: String,
    ex: &'x mut Exchange<'_>,
    rt: &'x Runtime,
    depth: u8,
    vars: &'x [(String, Vec<u8>)],
    nest: Option<&'x Nest>,
) -> Running<'x> {
    Box::pin(async move {
        run_app(h, norm, ex, rt, depth, vars, nest).await;
    })
}

/// Runs an application's handler (proxy, FastCGI, CGI) on `ex`, a local
/// redirect followed.
async fn run_app(
    h: &Handler,
    norm: String,
    ex: &mut Exchange<'_>,
    rt: &Runtime,
    depth: u8,
    vars: &[(String, Vec<u8>)],
    nest: Option<&Nest>,
) {
    let o = match h {
        Handler::Proxy(cfg) => proxy::serve(cfg, &norm, ex, &rt.pools, vars).await,
        Handler::FastCgi(cfg) => fastcgi::serve(cfg, norm, ex, &rt.pools, vars).await,
        Handler::Cgi(cfg) => cgi::serve(cfg, norm, ex, vars).await,
        _ => {
            ex.error(500, &[]);
            ex.finish();
            Outcome::Done
        }
    };
    follow(o, ex, rt, depth, nest).await;
}

/// The age of a stored response now (RFC 9111 §4.2.3, without an `Age`
/// the application sent).
fn age(meta: &Meta, now: SystemTime) -> Duration {
    now.duration_since(meta.response_time)
        .unwrap_or(Duration::ZERO)
}

/// A complete stored object to the client: its status and stored header
/// lines, `Age`, `Cache-Status`, and its body (shared bytes).
fn deliver(ex: &mut Exchange<'_>, obj: &Object, age: Duration, ttl: Duration) {
    ex.start(obj.meta.status);
    ex.raw_headers(&obj.meta.head);
    let mut n = [0u8; 20];
    ex.header("Age", num(&mut n, age.as_secs()));
    let mut v = [0u8; 48];
    let prefix = b"Stoa; hit; ttl=";
    v[..prefix.len()].copy_from_slice(prefix);
    let mut t = [0u8; 20];
    let t = num(&mut t, ttl.as_secs());
    v[prefix.len()..prefix.len() + t.len()].copy_from_slice(t);
    ex.header("Cache-Status", &v[..prefix.len() + t.len()]);
    ex.end_head(Some(obj.body.len() as u64));
    ex.body_mem(obj.body.clone());
}

/// `n` in decimal, in `buf`.
fn num(buf: &mut [u8; 20], mut n: u64) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// A request the cache cannot answer from what it holds: it joins the
/// fetch of its key, or leads one.
#[allow(clippy::too_many_arguments)]
async fn fetch(
    c: &Arc<CacheRoute>,
    key: crate::cache::key::Key,
    h: &Handler,
    norm: String,
    ex: &mut Exchange<'_>,
    rt: &Runtime,
    depth: u8,
    vars: &[(String, Vec<u8>)],
    status: &'static str,
) {
    let fill = match c.zone.begin(&key) {
        Begin::Lead(guard) => {
            let Some(fill) = spawn_fill(c, guard, h, &norm, ex, rt, depth, vars) else {
                // No shared runtime (an in-process test): uncached.
                ex.set_cache_status(status, Some(FWD_MISS_NOT_STORED));
                return run_app(h, norm, ex, rt, depth, vars, None).await;
            };
            fill
        }
        Begin::Wait(fill) => {
            // Collapsed forwarding: the first fetch answers this one too,
            // unless it takes longer than `lock_timeout` to begin.
            if tokio::time::timeout(c.lock_timeout, fill.head())
                .await
                .ok()
                .flatten()
                .is_none()
            {
                ex.set_cache_status(status, Some(FWD_MISS_NOT_STORED));
                return run_app(h, norm, ex, rt, depth, vars, None).await;
            }
            fill
        }
    };
    ex.set_cache_status(status, None);
    deliver_fill(ex, &fill).await;
}

/// A response being fetched to the client as it comes.
async fn deliver_fill(ex: &mut Exchange<'_>, fill: &Fill) {
    let Some(meta) = fill.head().await else {
        // The fetch failed before any head: what the application's
        // failure is to a proxy.
        ex.error(502, &[]);
        ex.finish();
        return;
    };
    ex.start(meta.status);
    ex.raw_headers(&meta.head);
    ex.header("Cache-Status", FWD_MISS);
    if matches!(meta.status, 204 | 304) {
        ex.end_head(None);
        ex.finish();
        return;
    }
    ex.end_head_stream();
    let mut i = 0;
    loop {
        match fill.read(i).await {
            Chunk::Mem(b) => {
                ex.body_mem(b);
                if !ex.flush().await {
                    // The client left; the fetch goes on for the others.
                    return;
                }
            }
            Chunk::End => break,
            Chunk::Failed => {
                ex.abort();
                return;
            }
        }
        i += 1;
    }
    ex.finish();
}

thread_local! {
    /// The worker state fetches run with: made once per worker thread
    /// from the first exchange's (same counters), since a fetch outlives
    /// the request that started it. Fills write no log lines.
    static FILL_WORKER: std::cell::OnceCell<Rc<Worker>> = const { std::cell::OnceCell::new() };
}

fn fill_worker(w: &Worker) -> Rc<Worker> {
    FILL_WORKER.with(|c| {
        c.get_or_init(|| {
            Rc::new(Worker::new(
                &crate::local::AccessLog::OFF,
                w.shutdown.clone(),
                w.shared.clone(),
            ))
        })
        .clone()
    })
}

/// The handler of an application, owned, for a fetch that outlives the
/// request.
enum OwnedApp {
    Proxy(Arc<proxy::ProxyRoute>),
    FastCgi(Arc<fastcgi::FastCgiRoute>),
    Cgi(Arc<cgi::CgiConfig>),
}

/// Starts the fetch that fills `guard` as a local task; the fill to read
/// the response from. None when the runtime is not shared (no fetch can
/// outlive the request then).
#[allow(clippy::too_many_arguments)]
fn spawn_fill(
    c: &Arc<CacheRoute>,
    guard: FillGuard,
    h: &Handler,
    norm: &str,
    ex: &Exchange<'_>,
    rt: &Runtime,
    depth: u8,
    vars: &[(String, Vec<u8>)],
) -> Option<Arc<Fill>> {
    let rt = rt.shared()?;
    let app = match h {
        Handler::Proxy(cfg) => OwnedApp::Proxy(cfg.clone()),
        Handler::FastCgi(cfg) => OwnedApp::FastCgi(cfg.clone()),
        Handler::Cgi(cfg) => OwnedApp::Cgi(cfg.clone()),
        _ => return None,
    };
    let fill = guard.fill();
    let worker = fill_worker(ex.worker());
    let head = fetch_head(ex.req());
    let (peer, local) = (ex.peer(), ex.local_addr());
    let edge = ex.edge();
    // The route's limits for the application, no filters (the object is
    // stored as the application sent it), no log of its own.
    let fill_edge = Edge {
        timeout: edge.timeout,
        max_body_bytes: edge.max_body_bytes,
        ..Edge::NONE
    };
    let norm = norm.to_owned();
    let vars = vars.to_vec();
    let sink = FillSink {
        guard: Some(guard),
        c: c.clone(),
        request_time: SystemTime::now(),
    };
    tokio::task::spawn_local(async move {
        let mut sub = Sub::into_sink(peer, local, Box::new(sink));
        let mut fex = Exchange::sub(&mut sub, &head, &worker, &rt.limits).with_edge(&fill_edge);
        let o = match &app {
            OwnedApp::Proxy(cfg) => proxy::serve(cfg, &norm, &mut fex, &rt.pools, &vars).await,
            OwnedApp::FastCgi(cfg) => fastcgi::serve(cfg, norm, &mut fex, &rt.pools, &vars).await,
            OwnedApp::Cgi(cfg) => cgi::serve(cfg, norm, &mut fex, &vars).await,
        };
        follow(o, &mut fex, &rt, depth, None).await;
    });
    Some(fill)
}

/// The GET a fetch sends: the client's request less what would make the
/// answer other than the whole representation (a range, a 304), less
/// what described a body. HEAD is fetched as GET (RFC 9111 §4.3.5 lets a
/// stored GET answer HEAD).
fn fetch_head(orig: &RequestHead) -> RequestHead {
    const DROP: [&str; 10] = [
        "content-length",
        "transfer-encoding",
        "content-type",
        "expect",
        "range",
        "if-range",
        "if-match",
        "if-none-match",
        "if-modified-since",
        "if-unmodified-since",
    ];
    RequestHead::from_parts(
        Method::Get,
        orig.target(),
        orig.version,
        orig.headers()
            .filter(|(n, _)| !DROP.iter().any(|h| n.eq_ignore_ascii_case(h.as_bytes()))),
    )
}

/// Where a fetch's response goes: the fill of a stored object. At head
/// time RFC 9111 §3 decides whether it may be stored; it is delivered to
/// the waiting clients either way.
struct FillSink {
    guard: Option<FillGuard>,
    c: Arc<CacheRoute>,
    request_time: SystemTime,
}

impl Sink for FillSink {
    fn head(&mut self, status: u16, head: &[u8]) {
        let Some(g) = self.guard.as_mut() else { return };
        let ttl = policy::storable(status, head, self.c.default_ttl);
        let meta = Meta {
            status,
            head: Bytes::copy_from_slice(head),
            request_time: self.request_time,
            response_time: SystemTime::now(),
            ttl: ttl.unwrap_or_default(),
        };
        g.set_head(meta, ttl.is_some());
    }

    fn body(&mut self, data: &[u8]) {
        if let Some(g) = self.guard.as_mut() {
            g.append(data);
        }
    }

    fn finish(&mut self, whole: bool) {
        if let Some(g) = self.guard.take() {
            g.finish(whole);
        }
    }
}
