//! [`Edge`]: what the exchange, its response filters and the handlers read
//! of the route a request was routed to — the per-route settings of the
//! phases around the handler (nginx's location configuration, h2o's
//! pathconf).
//!
//! One `Edge` is built per route (and one per site, for requests its root
//! answers) when the configuration is loaded: `config::edge::resolve`
//! takes each key from the route, else from its site (the route's value
//! replaces the site's whole). Routing hands the chosen route's `Edge` to
//! the connection, which gives it to the [`Exchange`](super::Exchange)
//! with `with_edge`; a request routed nowhere (400, 413, no site) has
//! [`Edge::NONE`]. Reading it costs a pointer load: a feature that is not
//! configured is a `None` (or `false`, `0`) here, tested with one
//! predictable branch.
//!
//! A feature adds ONE field here (its runtime type, defined beside its
//! code at or below the exchange: a filter's in `exchange/`, a handler's
//! in its module), its `NONE` value below (it must be `const`), and one
//! line in `config::edge::resolve`. Data only: the phases that act on it
//! live with their code.

use crate::local::AccessLog;

/// The resolved per-route settings (see the module's documentation).
#[derive(Debug)]
pub(crate) struct Edge {
    /// The route's own access log (`access_log` of a route: off, or
    /// another file); None: the server's.
    pub(crate) access_log: Option<AccessLog>,
    /// The response filters (`crate::filter`): `compress`, and the
    /// filters of `headers`; None when the route has none.
    pub(crate) filters: Option<crate::filter::Filters>,

    // headers: `headers`, `expires`, `cache_control` are a filter (in
    // `filters`).
    /// `error_pages` and `intercept_errors`: errors answered with another
    /// URI's body, by routing (`route::error_page`).
    pub(crate) error_pages: Option<crate::filter::error_pages::ErrorPages>,
    // routes: `max_body_bytes`, `timeout`, `default_type`.
    /// The largest request body (None: `[limits] max_body_bytes`).
    pub(crate) max_body_bytes: Option<u64>,
    /// How long an application (CGI script, FastCGI or proxy pool) may
    /// keep a request waiting for output (None: the pool's or the `cgi`
    /// table's).
    pub(crate) timeout: Option<std::time::Duration>,
    /// The `Content-Type` of static files whose extension names none
    /// (None: `application/octet-stream`).
    pub(crate) default_type: Option<Box<[u8]>>,

    // cache:
    /// The response cache of a route that reaches an application
    /// (`route::cache`); None: not cached.
    pub(crate) cache: Option<std::sync::Arc<crate::cache::config::CacheRoute>>,
}

impl Edge {
    /// Nothing configured: what a request has that no route or site took.
    pub(crate) const NONE: Edge = Edge {
        access_log: None,
        filters: None,
        // headers:
        error_pages: None,
        // routes:
        max_body_bytes: None,
        timeout: None,
        default_type: None,
        // cache:
        cache: None,
    };

    /// [`Edge::NONE`], for a reference that outlives any runtime.
    pub(crate) fn none() -> &'static Edge {
        static NONE: Edge = Edge::NONE;
        &NONE
    }
}

impl Default for Edge {
    fn default() -> Edge {
        Edge::NONE
    }
}
