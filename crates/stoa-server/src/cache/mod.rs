//! The response cache (RFC 9111) of routes that reach applications
//! (proxy, FastCGI, PHP, CGI): a low layer, like `upstream`. It imports
//! only the leaves (`local`, `log`, `http`, `units`, `fs`) and `stoa_h1`;
//! the request path that uses it (lookup, the fetch, delivery through the
//! exchange, purge) is routing's, `route::cache`.
//!
//! - [`config`]: `[[cache_zone]]` and a route's `cache = {...}`, checked
//!   into [`config::CacheRoute`] (on the route's `Edge`);
//! - `policy`: RFC 9111's rules as pure functions (what may be stored,
//!   freshness, age, what a request allows, `Vary`, 304 merges);
//! - `status`: the `Cache-Status` field (RFC 9211);
//! - `key`: the cache key of a request, and bypass rules;
//! - `store`: zones (memory and disk), objects, fills and collapsed
//!   forwarding, tags and purges, counters.

pub(crate) mod config;
pub(crate) mod key;
pub(crate) mod policy;
pub(crate) mod status;
pub(crate) mod store;
