//! `PURGE`: removing stored responses on an application's or an
//! operator's word (Varnish's `PURGE` in VCL, nginx's `proxy_cache_purge`),
//! from the route's `purge` addresses only (403 otherwise). `PURGE /url`
//! removes what is stored for that URL: 200, or 404 when nothing was.
//! The answer is JSON: `{"purged": N}`.

use crate::cache::config::CacheRoute;
use crate::exchange::Exchange;

/// Answers a PURGE request on a cached route.
pub(crate) fn purge(c: &CacheRoute, ex: &mut Exchange<'_>) {
    if !c.purge.contains(ex.peer().ip()) {
        ex.error(403, &[]);
        ex.finish();
        return;
    }
    let n = c.zone.remove(&super::store_key(c, ex)) as u64;
    let mut body = Vec::with_capacity(16);
    body.extend_from_slice(b"{\"purged\": ");
    stoa_h1::push_u64(&mut body, n);
    body.extend_from_slice(b"}\n");
    ex.start(if n > 0 { 200 } else { 404 });
    ex.header("Content-Type", b"application/json");
    ex.end_head(Some(body.len() as u64));
    ex.write(&body);
    ex.finish();
}
