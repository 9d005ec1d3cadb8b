//! Invalidation after unsafe methods (RFC 9111 §4.4): a POST, PUT,
//! DELETE or PATCH that the application answered with a 2xx or 3xx
//! makes what is stored for its URL stale: it is removed.

use crate::cache::config::CacheRoute;
use crate::exchange::Exchange;
use stoa_h1::Method;

/// Whether a method is unsafe (RFC 9110 §9.2.1): it may change the
/// resource, so a success invalidates what the cache holds of it.
pub(crate) fn unsafe_method(m: &Method) -> bool {
    !matches!(
        m,
        Method::Get | Method::Head | Method::Options | Method::Trace
    )
}

/// After the handler answered an unsafe request on `ex`: a 2xx or 3xx
/// removes the stored responses of the request's URL.
pub(crate) fn after(c: &CacheRoute, ex: &Exchange<'_>) {
    if !(200..400).contains(&ex.status()) {
        return;
    }
    c.zone.remove(&super::store_key(c, ex));
}
