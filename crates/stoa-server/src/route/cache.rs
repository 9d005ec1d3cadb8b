//! The response cache's request path (RFC 9111), for routes whose `Edge`
//! has a cache and whose handler reaches an application (proxy, FastCGI,
//! PHP, CGI): `route::run_handler` hands them here.
//!
//! 1. A method the route does not answer from the cache runs the handler
//!    as usual (`Cache-Status: Stoa; fwd=method`); PURGE is `purge`.
//! 2. A request a bypass rule matches runs the handler (`fwd=bypass`).
//! 3. The key (built in this worker's buffers), the stored variant that
//!    matches the request's `Vary` fields, `policy::decide` on its
//!    derived freshness: fresh (or stale as `max-stale` or
//!    stale-while-revalidate allow) is delivered at once, without a
//!    future, parsing no header (a memory hit costs about what a static
//!    file's does).
//! 4. Otherwise a fetch, collapsed by key (`Zone::begin`): the first
//!    request leads and spawns the fetch as a local task that runs the
//!    route's handler on a subrequest exchange whose `Sub` fills the
//!    object ([`FillSink`]), so the application is read at its own pace
//!    whatever the clients do; every client (lead and waiters) is
//!    answered from the fill as it grows. Waiters wait `lock_timeout` at
//!    most, then fetch for themselves, uncached; a waiter is never given
//!    a response that may not be shared or another variant's.

mod invalidate;
mod purge;

use super::{follow, not_whole, Nest, Running};
use crate::cache::config::CacheRoute;
use crate::cache::key;
use crate::cache::policy;
use crate::cache::policy::{StaleWhy, Use};
use crate::cache::status::LogStatus as Log;
use crate::cache::status::{
    CacheStatus, Fwd, StatusBuf, FWD_BYPASS, FWD_METHOD, FWD_MISS_NOT_STORED, ONLY_IF_CACHED,
};
use crate::cache::store::{
    Begin, Body, Chunk, Derived, Event, Fill, FillGuard, Meta, Object, StoreKey,
};
use crate::config::Runtime;
use crate::exchange::{Edge, Exchange, Sink, Sub};
use crate::handler::{cgi, fastcgi, proxy, Handler, Outcome};
use crate::http::{conditional, range};
use crate::local::Worker;
use bytes::Bytes;
use std::borrow::Cow;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use stoa_h1::{Method, RequestHead};

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
        let m = &ex.req().method;
        if matches!(m, Method::Other(o) if o == "PURGE") {
            purge::purge(c, ex);
            return None;
        }
        ex.set_cache_status(None, Some(FWD_METHOD));
        if invalidate::unsafe_method(m) {
            invalidate::before(ex);
            return Some(Box::pin(async move {
                run_app(h, norm, ex, rt, depth, vars, nest).await;
                invalidate::after(c, ex);
            }));
        }
        return Some(app(h, norm, ex, rt, depth, vars, nest));
    }
    if c.bypass.matches(ex.req()) {
        mark(c, ex, Log::Bypass, Some(FWD_BYPASS));
        return Some(app(h, norm, ex, rt, depth, vars, nest));
    }
    let now = SystemTime::now();
    let req = ex.req();
    let reqd = policy::request_directives(req);
    // The stored variant whose secondary key matches (RFC 9111 §4.1),
    // most recent first. The key is built in this worker's buffers: a
    // hit allocates nothing for it.
    let variants = KEY.with(|b| {
        let (k, scratch) = &mut *b.borrow_mut();
        c.key.key_into(req, ex.scheme(), k, scratch);
        c.zone.lookup_bytes(k)
    });
    // RFC 9211 §2.2: `vary-miss` when the URL has variants but none for
    // this request, else `miss` (the design's word for a URL miss).
    let mut fwd = if variants.is_empty() {
        Fwd::Miss
    } else {
        Fwd::VaryMiss
    };
    let stored = variants.into_iter().find(|o| {
        if derived(c, o).vary {
            policy::vary_matches(&o.meta.head, &o.meta.variant, req)
        } else {
            // No `Vary`: the secondary key `vary_key` would make is
            // empty; no header scan.
            o.meta.variant.is_empty()
        }
    });
    if let Some(obj) = &stored {
        let d = derived(c, obj);
        let f = d.freshness;
        match policy::decide(&f, &reqd, now) {
            Use::Fresh { age, ttl } => {
                mark(c, ex, Log::Hit, None);
                deliver(ex, obj, d, age, CacheStatus::hit(secs(ttl)));
                ex.finish();
                return None;
            }
            Use::Stale {
                age,
                why: StaleWhy::MaxStale,
            } => {
                // RFC 9111 §5.2.1.2: the client accepts it this stale.
                mark(c, ex, Log::Stale, None);
                let cs = CacheStatus::hit(f.ttl(now)).with_detail("max-stale");
                deliver(ex, obj, d, age, cs);
                ex.finish();
                return None;
            }
            Use::Stale {
                age,
                why: StaleWhy::WhileRevalidate,
            } => {
                // RFC 5861 §3: served now, refreshed in the background
                // once per key (only the request that leads a fill starts
                // one; others find it running).
                // Not by a request with Authorization (no fetch of its
                // may be shared: policy::collapsible).
                if policy::collapsible(ex.req()) {
                    if let Begin::Lead(guard) = c.zone.begin(&store_key(c, ex)) {
                        spawn_fill(c, guard, Some(obj.clone()), h, &norm, ex, rt, depth, vars);
                    }
                }
                mark(c, ex, Log::Updating, None);
                let cs = CacheStatus::hit(f.ttl(now))
                    .with_fwd(Fwd::Stale)
                    .with_detail("stale-while-revalidate");
                deliver(ex, obj, d, age, cs);
                ex.finish();
                return None;
            }
            Use::Validate { why, .. } => {
                fwd = if why.by_request() {
                    Fwd::Request
                } else {
                    Fwd::Stale
                };
            }
            Use::GatewayTimeout => {
                // RFC 9111 §5.2.1.7: nothing stored may be used without
                // the application, which the client will not have asked.
                mark(c, ex, Log::Miss, None);
                let mut b = [0; 160];
                let cs = CacheStatus::fwd(Fwd::Stale).with_detail("only-if-cached");
                ex.error(504, &[("Cache-Status", cs.write(&mut b))]);
                ex.finish();
                return None;
            }
        }
    } else if reqd.only_if_cached {
        mark(c, ex, Log::Miss, Some(ONLY_IF_CACHED));
        ex.error(504, &[]);
        ex.finish();
        return None;
    }
    let status = if stored.is_some() {
        Log::Expired
    } else {
        Log::Miss
    };
    let key = store_key(c, ex);
    Some(Box::pin(async move {
        fetch(c, key, stored, fwd, h, norm, ex, rt, depth, vars, status).await;
    }))
}

thread_local! {
    /// This worker's key buffers (the key, and scratch for its parts),
    /// kept from one lookup to the next.
    static KEY: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Whole seconds of a duration, for `Cache-Status: ttl`.
fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// The route's rules for responses that say less than RFC 9111 needs.
fn rules(c: &CacheRoute) -> policy::Rules {
    policy::Rules {
        default_ttl: c.default_ttl,
        stale_while_revalidate: c.stale_while_revalidate,
        stale_if_error: c.stale_if_error,
    }
}

/// A stored response's freshness (RFC 9111 §4.2) under the route's rules.
fn freshness(c: &CacheRoute, meta: &Meta) -> policy::Freshness {
    policy::freshness(
        &policy::Received {
            status: meta.status,
            head: &meta.head,
            request_time: meta.request_time,
            response_time: meta.response_time,
        },
        &rules(c),
    )
}

/// What is derived once from a stored object's head (its freshness and
/// the head clients get): a hit parses no header.
fn derived<'o>(c: &CacheRoute, obj: &'o Object) -> &'o Derived {
    obj.derived.get_or_init(|| Derived {
        freshness: freshness(c, &obj.meta),
        client_head: match policy::client_head(&obj.meta.head) {
            Cow::Borrowed(_) => obj.meta.head.clone(),
            Cow::Owned(h) => Bytes::from(h),
        },
        vary: policy::field(&obj.meta.head, "vary").is_some(),
    })
}

/// What the cache did with the request: the access log's
/// `$upstream_cache_status`, the zone's counter of it, and a
/// `Cache-Status` field for heads the cache does not write itself.
fn mark(c: &CacheRoute, ex: &mut Exchange<'_>, s: Log, field: Option<&'static [u8]>) {
    c.zone.count(match s {
        Log::Hit => Event::Hit,
        Log::Miss => Event::Miss,
        Log::Expired => Event::Expired,
        // Both serve a stale copy: the zone counts them as one.
        Log::Stale | Log::Updating => Event::Stale,
        Log::Revalidated => Event::Revalidated,
        Log::Bypass => Event::Bypass,
    });
    ex.set_cache_status(Some(s), field);
}

/// The store's key of the request: the route's key, and the URL (host,
/// path and query) that a purge names.
pub(super) fn store_key(c: &CacheRoute, ex: &Exchange<'_>) -> StoreKey {
    let req = ex.req();
    let url = key::url(req, ex.scheme());
    StoreKey::new(c.key.key(req, ex.scheme()).bytes(), url.as_bytes())
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

/// A complete stored object to the client: its status and stored header
/// lines, `Age`, `Cache-Status`, and its body (shared bytes). A HEAD gets
/// the head alone (RFC 9111 §4.3.5: a stored GET answers it); a request
/// whose preconditions the stored validators satisfy gets 304, and one
/// range of a stored 200 gets 206 (RFC 9110 §13, §14), as the static
/// handler answers them.
fn deliver(ex: &mut Exchange<'_>, obj: &Object, d: &Derived, age: Duration, cs: CacheStatus) {
    let mut v: StatusBuf = [0; 160];
    let status_field = cs.write(&mut v);
    let req = ex.req();
    let (mut status, mut range) = (obj.meta.status, None);
    let len = obj.len();
    if status == 200 && has_preconditions(req) {
        let etag = policy::field(&obj.meta.head, "etag");
        let modified = policy::field(&obj.meta.head, "last-modified").and_then(http_date);
        let cond = conditional::Request {
            is_get_or_head: true,
            if_match: req.header("if-match").filter(|_| etag.is_some()),
            if_none_match: req.header("if-none-match").filter(|_| etag.is_some()),
            if_modified_since: req
                .header("if-modified-since")
                .filter(|_| modified.is_some()),
            if_unmodified_since: req
                .header("if-unmodified-since")
                .filter(|_| modified.is_some()),
        };
        match conditional::evaluate(&cond, etag.unwrap_or(b""), modified.unwrap_or(0)) {
            conditional::Outcome::Proceed => {}
            conditional::Outcome::NotModified => status = 304,
            conditional::Outcome::PreconditionFailed => status = 412,
        }
    }
    if status == 200 {
        if let Some(r) = req.header("range") {
            let etag = policy::field(&obj.meta.head, "etag");
            let modified = policy::field(&obj.meta.head, "last-modified").and_then(http_date);
            let current = req.header("if-range").is_none_or(|v| {
                conditional::if_range_matches(v, etag.unwrap_or(b""), modified.unwrap_or(0))
            });
            if current {
                match range::parse(r, len) {
                    range::Ranges::Satisfiable(rs) if rs.len() == 1 => {
                        status = 206;
                        range = Some(rs[0].clone());
                    }
                    range::Ranges::Unsatisfiable => status = 416,
                    // Several ranges: the whole, 200 (RFC 9110 §14.2).
                    _ => {}
                }
            }
        }
    }
    let mut n = [0u8; 20];
    match status {
        304 | 412 | 416 => {
            if status == 412 {
                ex.error(412, &[]);
                return;
            }
            if status == 416 {
                let cr = range::unsatisfied_range(len);
                ex.error(416, &[("Content-Range", cr.as_bytes())]);
                return;
            }
            // 304: the stored fields that describe the representation
            // (RFC 9110 §15.4.5), without a body.
            ex.start(304);
            ex.raw_headers(&d.client_head);
            ex.header("Age", num(&mut n, policy::age_secs(age)));
            ex.header("Cache-Status", status_field);
            ex.end_head(None);
        }
        206 => {
            let r = range.unwrap_or(0..len);
            ex.start(206);
            ex.raw_headers(&d.client_head);
            ex.header("Age", num(&mut n, policy::age_secs(age)));
            ex.header("Cache-Status", status_field);
            ex.header("Content-Range", range::content_range(&r, len).as_bytes());
            ex.end_head(Some(r.end - r.start));
            body(ex, obj, r.start, r.end - r.start);
        }
        _ => {
            ex.start(status);
            ex.raw_headers(&d.client_head);
            ex.header("Age", num(&mut n, policy::age_secs(age)));
            ex.header("Cache-Status", status_field);
            ex.end_head(Some(len));
            body(ex, obj, 0, len);
        }
    }
}

/// `len` bytes of a stored object's body from `from`: shared memory, or
/// its file by sendfile.
fn body(ex: &mut Exchange<'_>, obj: &Object, from: u64, len: u64) {
    match &obj.body {
        Body::Mem(b) => ex.body_mem(b.slice(from as usize..(from + len) as usize)),
        Body::Disk(_) => match obj
            .file()
            .and_then(|(f, at, _)| f.try_clone().map(|f| (f, at)))
        {
            Ok((f, at)) => ex.body_file(Rc::new(f), at + from, len),
            // The file went (evicted) after the head was sent.
            Err(_) => ex.abort(),
        },
    }
}

/// Whether the request has a precondition field at all (the usual hit
/// has none: one look at the header names' lengths).
fn has_preconditions(req: &RequestHead) -> bool {
    req.header("if-none-match").is_some()
        || req.header("if-modified-since").is_some()
        || req.header("if-match").is_some()
        || req.header("if-unmodified-since").is_some()
}

/// An HTTP date in seconds since the epoch.
fn http_date(v: &[u8]) -> Option<u64> {
    policy::http_date(v)?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
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
/// fetch of its key, or leads one. With a stale object (`stored`) the
/// fetch is conditional on its validators (RFC 9111 §4.3.1); a 304 makes
/// the stored object fresh again (§4.3.4, REVALIDATED); an application
/// error or failure within stale-if-error serves the stale object (RFC
/// 5861 §4).
#[allow(clippy::too_many_arguments)]
async fn fetch(
    c: &Arc<CacheRoute>,
    key: StoreKey,
    stored: Option<Arc<Object>>,
    fwd: Fwd,
    h: &Handler,
    norm: String,
    ex: &mut Exchange<'_>,
    rt: &Runtime,
    depth: u8,
    vars: &[(String, Vec<u8>)],
    status: Log,
) {
    // Waiters give up collapsing at this time (nginx
    // `proxy_cache_lock_timeout`).
    let deadline = tokio::time::Instant::now() + c.lock_timeout;
    let mut tries = 0;
    // This request waited for another's fetch (RFC 9211 §2.6).
    let mut collapsed = false;
    let fill = loop {
        tries += 1;
        match c.zone.begin(&key) {
            Begin::Uncacheable => {
                // Hit-for-miss: the last response could not be stored;
                // each request asks the application itself.
                mark(c, ex, status, Some(FWD_MISS_NOT_STORED));
                return run_app(h, norm, ex, rt, depth, vars, None).await;
            }
            Begin::Lead(guard) => {
                let Some(fill) =
                    spawn_fill(c, guard, stored.clone(), h, &norm, ex, rt, depth, vars)
                else {
                    // No shared runtime (an in-process test): uncached.
                    mark(c, ex, status, Some(FWD_MISS_NOT_STORED));
                    return run_app(h, norm, ex, rt, depth, vars, None).await;
                };
                break fill;
            }
            Begin::Wait(fill) => {
                // Collapsed forwarding: the first fetch answers this one
                // too, unless it takes longer than `lock_timeout` to begin.
                match tokio::time::timeout_at(deadline, fill.head()).await {
                    Ok(Some(m)) if !policy::vary_matches(&m.head, &m.variant, ex.req()) => {
                        // Another variant of the URL is being fetched
                        // (RFC 9111 §4.1): never given to this request.
                        // Once it ends, this request leads its own fetch
                        // (or joins the one another request of its variant
                        // leads).
                        let ended = tokio::time::timeout_at(deadline, fill.read(u64::MAX)).await;
                        if ended.is_err() || tries >= 8 {
                            mark(c, ex, status, Some(FWD_MISS_NOT_STORED));
                            return run_app(h, norm, ex, rt, depth, vars, None).await;
                        }
                        continue;
                    }
                    Ok(Some(meta)) if shareable(c, &meta) => {
                        collapsed = true;
                        break fill;
                    }
                    Ok(Some(m)) if !policy::is_error_status(m.status) => {
                        // The response may not be shared (Set-Cookie,
                        // no-store, private): this client asks for its
                        // own, as Varnish's hit-for-miss does; no one's
                        // session goes to another.
                        mark(c, ex, status, Some(FWD_MISS_NOT_STORED));
                        return run_app(h, norm, ex, rt, depth, vars, None).await;
                    }
                    // An error: the stale object if stale-if-error allows
                    // it, else the error, below.
                    Ok(Some(_)) => {
                        collapsed = true;
                        break fill;
                    }
                    _ => {
                        if deliver_stale_if_error(c, ex, stored.as_deref()) {
                            return;
                        }
                        mark(c, ex, status, Some(FWD_MISS_NOT_STORED));
                        return run_app(h, norm, ex, rt, depth, vars, None).await;
                    }
                }
            }
        }
    };
    let meta = fill.head().await;
    // RFC 5861 §4: no answer, or an error status, with a stale object
    // the response or the route lets us serve instead.
    let failed = meta
        .as_ref()
        .is_none_or(|m| policy::is_error_status(m.status));
    if failed && deliver_stale_if_error(c, ex, stored.as_deref()) {
        return;
    }
    let revalidated = match (&meta, &stored) {
        (Some(m), Some(old)) => {
            m.status == old.meta.status
                && m.response_time != old.meta.response_time
                && same_validators(&m.head, &old.meta.head)
                && m.len == Some(old.len())
        }
        _ => false,
    };
    let mut cs = CacheStatus::fwd(fwd);
    if let Some(m) = &meta {
        if revalidated {
            cs = cs.with_fwd_status(304);
        } else if stored.is_some() {
            cs = cs.with_fwd_status(m.status);
        }
        if shareable(c, m) && m.len.is_none_or(|n| n <= c.zone.max_object()) {
            cs = cs.stored();
        }
    }
    if collapsed {
        cs = cs.collapsed();
    }
    mark(
        c,
        ex,
        if revalidated {
            Log::Revalidated
        } else {
            status
        },
        None,
    );
    deliver_fill(c, ex, &fill, cs).await;
}

/// Whether a fetched response may be given to the clients that waited
/// for it: only one the cache may store (RFC 9111 §3), so that nothing
/// private reaches a client it was not meant for, and never a response
/// to Authorization that may not be stored (§3.5: its variant is
/// `OWN_REQUEST_ONLY`).
fn shareable(c: &CacheRoute, meta: &Meta) -> bool {
    *meta.variant != *policy::OWN_REQUEST_ONLY
        && policy::shareable(
            meta.status,
            &meta.head,
            meta.request_time,
            meta.response_time,
            &rules(c),
        )
}

/// RFC 5861 §4: the stale object to the client, if the response, the
/// route or the request's `stale-if-error` allow serving it now that
/// the application failed. Whether it was delivered.
fn deliver_stale_if_error(c: &CacheRoute, ex: &mut Exchange<'_>, stored: Option<&Object>) -> bool {
    let Some(obj) = stored else { return false };
    let now = SystemTime::now();
    let d = derived(c, obj);
    let f = d.freshness;
    if !policy::stale_if_error(&f, &policy::request_directives(ex.req()), now) {
        return false;
    }
    mark(c, ex, Log::Stale, None);
    let cs = CacheStatus::hit(f.ttl(now))
        .with_fwd(Fwd::Stale)
        .with_detail("stale-if-error");
    deliver(ex, obj, d, f.age(now), cs);
    ex.finish();
    true
}

/// Both heads carry the same validators (a 304 merged into the stored
/// head keeps them).
fn same_validators(a: &[u8], b: &[u8]) -> bool {
    let v = |h| (policy::field(h, "etag"), policy::field(h, "last-modified"));
    let (x, y) = (v(a), v(b));
    x == y && (x.0.is_some() || x.1.is_some())
}

/// A response being fetched to the client as it comes.
async fn deliver_fill(c: &CacheRoute, ex: &mut Exchange<'_>, fill: &Fill, cs: CacheStatus) {
    let Some(meta) = fill.head().await else {
        // The fetch failed before any head: what the application's
        // failure is to a proxy.
        ex.error(502, &[]);
        ex.finish();
        return;
    };
    ex.start(meta.status);
    ex.raw_headers(&policy::client_head(&meta.head));
    if policy::field(&meta.head, "age").is_some() {
        // An age from upstream: the age now (RFC 9111 §5.1); a response
        // the application made for this request has none.
        let age = freshness(c, &meta).age(SystemTime::now());
        if !age.is_zero() {
            let mut n = [0u8; 20];
            ex.header("Age", num(&mut n, policy::age_secs(age)));
        }
    }
    let mut v: StatusBuf = [0; 160];
    ex.header("Cache-Status", cs.write(&mut v));
    if matches!(meta.status, 204 | 304) {
        ex.end_head(None);
        ex.finish();
        return;
    }
    // The length the application announced, as it announced it (no
    // chunking of a body whose size is known).
    match meta.len {
        Some(n) => ex.end_head(Some(n)),
        None => ex.end_head_stream(),
    }
    let mut offset = 0;
    loop {
        match fill.read(offset).await {
            Chunk::Mem(b) => {
                offset += b.len() as u64;
                ex.body_mem(b);
                if !ex.flush().await {
                    // The client left; the fetch goes on for the others.
                    return;
                }
            }
            Chunk::File(f, at, len) => {
                offset += len;
                let Ok(f) = f.try_clone() else {
                    ex.abort();
                    return;
                };
                ex.body_file(Rc::new(f), at, len);
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
    stored: Option<Arc<Object>>,
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
    let head = fetch_head(ex.req(), stored.as_deref());
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
        stored,
        c: c.clone(),
        req: head.clone(),
        request_time: SystemTime::now(),
        left: None,
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
/// stored GET answer HEAD). With a stored object, its validators make it
/// conditional (RFC 9111 §4.3.1).
fn fetch_head(orig: &RequestHead, stored: Option<&Object>) -> RequestHead {
    let v = stored.map_or_else(Default::default, |o| {
        policy::validation_fields(&[&o.meta.head])
    });
    let etag = v
        .if_none_match
        .as_deref()
        .map(|v| (&b"If-None-Match"[..], v));
    let modified = (v.if_modified_since.as_deref()).map(|v| (&b"If-Modified-Since"[..], v));
    RequestHead::from_parts(
        Method::Get,
        orig.target(),
        orig.version,
        orig.headers()
            .filter(|(n, _)| !not_whole(n))
            .chain(etag)
            .chain(modified),
    )
}

/// Where a fetch's response goes: the fill of a stored object. At head
/// time RFC 9111 §3 decides whether it may be stored; it is delivered to
/// the waiting clients either way.
struct FillSink {
    guard: Option<FillGuard>,
    /// The stale object a conditional fetch revalidates.
    stored: Option<Arc<Object>>,
    c: Arc<CacheRoute>,
    /// The fetch's request: what RFC 9111 §3 (Authorization, no-store)
    /// and the response's `Vary` (§4.1) are read against.
    req: RequestHead,
    request_time: SystemTime,
    /// Body bytes still to come when the response announced its length.
    /// The fill is finished when the last one arrives, not when the
    /// exchange ends: a FastCGI application sends FCGI_END_REQUEST after
    /// its body, and a client that read the whole body and asked again
    /// in between would join a fill that was already complete.
    left: Option<u64>,
}

/// How long a key whose response could not be stored is fetched without
/// collapsing (Varnish's hit-for-miss; its builtin VCL uses 120 s).
const HIT_FOR_MISS: Duration = Duration::from_secs(30);

impl Sink for FillSink {
    fn head(&mut self, status: u16, head: &[u8], len: Option<u64>) {
        let Some(g) = self.guard.as_mut() else { return };
        let response_time = SystemTime::now();
        let rules = rules(&self.c);
        if let (304, Some(old)) = (status, self.stored.take()) {
            // RFC 9111 §4.3.4: the stored response, its header fields
            // updated from the 304's, fresh again; its body reused.
            let merged = policy::merge_304(&old.meta.head, head);
            let received = policy::Received {
                status: old.meta.status,
                head: &merged,
                request_time: self.request_time,
                response_time,
            };
            let refresh = policy::refresh(&self.req, &received, &rules);
            if refresh == policy::Refresh::Keep {
                // The request's no-store: the object stays as it was and
                // answers it.
                if let Some(g) = self.guard.take() {
                    g.finish_with(&old);
                }
                return;
            }
            let tags = policy::tags(&merged).map(Box::from).collect();
            let meta = Meta {
                head: Bytes::from(merged),
                request_time: self.request_time,
                response_time,
                tags,
                ..old.meta.clone()
            };
            let new = self.c.zone.update_meta(&old, meta);
            if refresh == policy::Refresh::Remove {
                self.c.zone.remove_object(&new);
            }
            if let Some(g) = self.guard.take() {
                g.finish_with(&new);
            }
            return;
        }
        let received = policy::Received {
            status,
            head,
            request_time: self.request_time,
            response_time,
        };
        // Stored or not (RFC 9111 §3, `Vary: *` §4.1), the secondary
        // key (a response to Authorization that may not be stored gets
        // one no waiter matches), hit-for-miss.
        let f = policy::fetched(&self.req, &received, &rules);
        let store = f.store.is_ok();
        let variant = f.variant.into_boxed_slice();
        if f.hit_for_miss {
            // The next requests for the key go to the application each,
            // uncollapsed, for a while.
            self.c.zone.mark_uncacheable(g.key(), HIT_FOR_MISS);
        }
        let meta = Meta {
            status,
            head: Bytes::copy_from_slice(head),
            variant,
            request_time: self.request_time,
            response_time,
            tags: policy::tags(head).map(Box::from).collect(),
            len,
        };
        g.set_head(meta, store);
        self.left = len;
        if len == Some(0) {
            self.finish(true);
        }
    }

    fn body(&mut self, data: &[u8]) {
        let Some(g) = self.guard.as_mut() else { return };
        let data = match self.left {
            Some(left) => &data[..usize::try_from(left).map_or(data.len(), |l| data.len().min(l))],
            None => data,
        };
        if g.append(data).is_err() {
            // Nowhere to hold it: the fill has failed.
            self.guard = None;
            return;
        }
        if let Some(left) = self.left.as_mut() {
            *left -= data.len() as u64;
            if *left == 0 {
                self.finish(true);
            }
        }
    }

    fn finish(&mut self, whole: bool) {
        if let Some(g) = self.guard.take() {
            if whole {
                g.finish();
            }
            // Dropped unfinished: failed, nothing stored.
        }
    }
}
