//! The keys a site sets for all its routes and a route overrides: where
//! they are declared ([`edge_keys!`], once for `[[site]]` and
//! `[[site.route]]`), and how they are resolved, once at load, into what
//! the phases read at run time:
//!
//! - [`resolve`] -> [`Edge`] (`exchange/edge.rs`): what the exchange, its
//!   response filters and the handlers read;
//! - [`access`] -> [`Access`]: the checks of the access phase, which
//!   routing runs before the handler (`route::guarded`, over `crate::access`).
//!
//! A route's value replaces its site's whole (nginx inherits a
//! directive into a location the same way, unless the location sets it).
//! A feature adds: its key(s) in [`edge_keys!`], its field in `Edge`
//! (or a check in `Access`), and one line here that resolves it.

use super::{ConfigError, ErrAt, RouteConfig, RouteLogConfig, SiteConfig};
use crate::access::Access;
use crate::exchange::Edge;
use crate::local::AccessLog;
use crate::log::access::Format;
use std::path::PathBuf;
use std::sync::Arc;

/// Declares `[[site]]` and `[[site.route]]` (config/mod.rs) with the keys
/// both take appended: every key below exists on both tables, with the
/// same type, so [`resolve`] reads `route.KEY` else `site.KEY`. The
/// fields written in the invocation come first and must end with a comma.
/// A key is `Option<Spanned<T>>` (None: not written; the span names the
/// line in errors), `T` the key's serde table, defined beside the
/// feature's code.
macro_rules! edge_keys {
    ($(#[$meta:meta])* pub struct $name:ident { $($field:tt)* }) => {
        $(#[$meta])*
        pub struct $name {
            $($field)*

            /// Gzip, brotli and zstd on the fly (`crate::filter::compress`):
            /// `true`, `false` or a table.
            pub(crate) compress: Option<Spanned<crate::filter::CompressSetting>>,

            /// Response header fields set, added, removed
            /// (`crate::filter::headers`).
            pub(crate) headers: Option<Spanned<crate::filter::headers::HeadersTable>>,
            /// `Expires` and `Cache-Control: max-age` (nginx `expires`).
            pub(crate) expires: Option<Spanned<String>>,
            /// `Cache-Control` on 2xx and 3xx responses.
            pub(crate) cache_control: Option<Spanned<String>>,
            /// Errors replaced by another URI's body, status kept
            /// (`crate::filter::error_pages`).
            pub(crate) error_pages:
                Option<Spanned<std::collections::BTreeMap<String, String>>>,
            /// Applications' errors replaced too.
            pub(crate) intercept_errors: Option<Spanned<bool>>,

            // access: `basic_auth`, `address_rules`, `require_client_cert`, `limit_requests`,
            // `limit_connections` (access/, docs/CONFIG.md "Access").
            /// `["allow 10.0.0.0/8", "deny all"]`: first match wins.
            pub(crate) address_rules: Option<toml::Spanned<Vec<String>>>,
            /// A verified TLS client certificate (`[[tls]] client_auth`):
            /// 403 without one; `false` lifts the site's.
            pub(crate) require_client_cert: Option<toml::Spanned<bool>>,
            /// `{ realm, users }`, or `false` to lift the site's.
            pub(crate) basic_auth: Option<toml::Spanned<crate::access::basic::BasicAuthKey>>,
            /// `{ rate, burst, key, delay }`.
            pub(crate) limit_requests: Option<toml::Spanned<crate::access::limit::LimitRequestsTable>>,
            /// Requests in flight per client address.
            pub(crate) limit_connections: Option<toml::Spanned<u32>>,

            // routes: `max_body_bytes`, `timeout`, `default_type`.
            /// The largest request body here, replacing `[limits]
            /// max_body_bytes` (smaller or larger): 413 beyond it.
            pub max_body_bytes: Option<toml::Spanned<crate::config::Size>>,
            /// How long the route's application (CGI script, FastCGI or
            /// proxy pool) may keep a request waiting for output, replacing
            /// the pool's `timeout` (or the `cgi` table's).
            pub timeout: Option<toml::Spanned<crate::config::Dur>>,
            /// The `Content-Type` of static files whose extension names
            /// none (nginx `default_type`).
            pub default_type: Option<toml::Spanned<String>>,

            // cache: the response cache of routes that reach an
            // application (`crate::cache`, docs/CONFIG.md "Caching").
            /// `{ zone, key, bypass, default_ttl, lock_timeout, ... }`.
            pub(crate) cache: Option<toml::Spanned<crate::cache::config::CacheTable>>,
        }
    };
}
pub(crate) use edge_keys;

/// What resolving needs of the file being loaded.
pub(crate) struct Ctx<'a> {
    /// `site[0]` or `site[0].route[2]`: the table whose keys these are,
    /// for errors (`site[0].route[2].compress`).
    pub(crate) key: &'a str,
    pub(crate) err: &'a ErrAt<'a>,
    /// A path as written, made absolute (relative to the file).
    pub(crate) resolve: &'a dyn Fn(&str) -> PathBuf,
    /// The server's access-log format (`[log] format`).
    pub(crate) log_format: &'a Format,
    /// The pools, for checks that name one (`authorizer`).
    pub(crate) pools: &'a [crate::upstream::pool::PoolSpec],
    /// `[lua.shared]`, for Lua scripts.
    pub(crate) lua_dicts: &'a crate::handler::lua::Dicts,
    /// The site's access checks being built: the limits' tables one per
    /// distinct setting, shared by the routes that inherit it.
    pub(crate) access: &'a std::cell::RefCell<crate::access::Builder>,
    /// `[[cache_zone]]`s, for `cache`.
    pub(crate) cache_zones: &'a [Arc<crate::cache::store::Zone>],
    /// The route's handler reaches an application (proxy, FastCGI, PHP,
    /// CGI): only such a route may be cached.
    pub(crate) reaches_app: bool,
}

/// The [`Edge`] of a route (`route` Some) or of a site's root (None):
/// each key from the route, else from the site ([`inherit`]). Each
/// feature sets its field in its own slot below (merges stay apart).
pub(crate) fn resolve(
    site: &SiteConfig,
    route: Option<&RouteConfig>,
    cx: &Ctx<'_>,
) -> Result<Edge, ConfigError> {
    let _ = site;
    let mut edge = Edge::NONE;
    // `access_log`: a route's only.
    edge.access_log = match route.and_then(|r| r.access_log.as_ref()) {
        None | Some(RouteLogConfig::On(true)) => None,
        Some(RouteLogConfig::On(false)) => Some(AccessLog::OFF),
        Some(RouteLogConfig::File(p)) => Some(AccessLog {
            dest: super::parse_access_log(p, cx.resolve),
            format: cx.log_format.clone(),
        }),
    };

    // compress: the route's value, else the site's; `false` lifts it.
    let mut filters = crate::filter::Filters::default();
    if let Some(v) = inherit(route.map(|r| &r.compress), &site.compress) {
        filters.compress = v
            .get_ref()
            .build()
            .map_err(|m| (cx.err)(Some(v.span()), &cx.key_of("compress"), m))?;
    }

    // headers: `headers`, `expires` and `cache_control` are one filter;
    // `error_pages` and `intercept_errors` one setting.
    let h = inherit(route.map(|r| &r.headers), &site.headers);
    let e = inherit(route.map(|r| &r.expires), &site.expires);
    let c = inherit(route.map(|r| &r.cache_control), &site.cache_control);
    filters.headers = crate::filter::headers::HeaderRules::build(
        h.map(|v| v.get_ref()),
        e.map(|v| v.get_ref().as_str()),
        c.map(|v| v.get_ref().as_str()),
    )
    .map_err(|(key, m)| {
        let span = match key {
            "expires" => e.map(|v| v.span()),
            "cache_control" => c.map(|v| v.span()),
            _ => h.map(|v| v.span()),
        };
        (cx.err)(span, &cx.key_of(key), m)
    })?;
    let p = inherit(route.map(|r| &r.error_pages), &site.error_pages);
    let i = inherit(route.map(|r| &r.intercept_errors), &site.intercept_errors);
    edge.error_pages = crate::filter::error_pages::ErrorPages::build(
        p.map(|v| v.get_ref()),
        i.is_some_and(|v| *v.get_ref()),
    )
    .map_err(|m| match p {
        Some(p) => (cx.err)(Some(p.span()), &cx.key_of("error_pages"), m),
        None => (cx.err)(i.map(|v| v.span()), &cx.key_of("intercept_errors"), m),
    })?;

    // routes:
    if let Some(v) = inherit(route.map(|r| &r.max_body_bytes), &site.max_body_bytes) {
        edge.max_body_bytes = Some(v.get_ref().0);
    }
    if let Some(v) = inherit(route.map(|r| &r.timeout), &site.timeout) {
        if v.get_ref().0.is_zero() {
            let m = "must be more than 0".to_owned();
            return Err((cx.err)(Some(v.span()), &cx.key_of("timeout"), m));
        }
        edge.timeout = Some(v.get_ref().0);
    }
    if let Some(v) = inherit(route.map(|r| &r.default_type), &site.default_type) {
        let t = v.get_ref();
        // A media type (RFC 9110 §8.3.1), parameters allowed: no
        // control characters, something before and after the `/`.
        let ok = t
            .split(';')
            .next()
            .and_then(|m| m.trim().split_once('/'))
            .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty())
            && !t.bytes().any(|b| b.is_ascii_control());
        if !ok {
            let m = format!("`{t}` is not a media type (e.g. \"text/plain; charset=utf-8\")");
            return Err((cx.err)(Some(v.span()), &cx.key_of("default_type"), m));
        }
        edge.default_type = Some(t.as_bytes().into());
    }

    // cache: a route's own `cache` on a handler that reaches no
    // application is refused; a site's applies to its routes that do.
    let own = route.and_then(|r| r.cache.as_ref());
    if let Some(v) = inherit(route.map(|r| &r.cache), &site.cache) {
        if cx.reaches_app {
            let c = v
                .get_ref()
                .build(cx.cache_zones)
                .map_err(|(k, m)| (cx.err)(Some(v.span()), &cx.key_of(&format!("cache.{k}")), m))?;
            edge.cache = Some(Arc::new(c));
        } else if own.is_some() {
            let m = "caches responses of applications (`proxy`, `fastcgi`, `php`, `cgi`); \
                     static files are kept by `[cache]` already"
                .to_owned();
            return Err((cx.err)(Some(v.span()), &cx.key_of("cache"), m));
        }
    }

    // Last: every filter's slot above filled `filters`.
    edge.filters = (!filters.is_empty()).then_some(filters);
    Ok(edge)
}

/// A key's value for a route: the route's, else its site's (`route` None:
/// the site's root, the site's). The route's replaces the site's whole.
// The features' resolve lines use it.
#[allow(dead_code)]
pub(crate) fn inherit<'a, T>(route: Option<&'a Option<T>>, site: &'a Option<T>) -> Option<&'a T> {
    match route {
        Some(Some(v)) => Some(v),
        _ => site.as_ref(),
    }
}

impl Ctx<'_> {
    /// The full key of one of this table's keys, for errors:
    /// `site[0].route[2].compress`.
    pub(crate) fn key_of(&self, name: &str) -> String {
        format!("{}.{name}", self.key)
    }
}

/// The [`Access`] of a route (`route` Some) or of a site's root (None).
/// Its checks run in the fixed order of `crate::access`, whatever the
/// order of the keys.
pub(crate) fn access(
    site: &SiteConfig,
    route: Option<&RouteConfig>,
    cx: &Ctx<'_>,
) -> Result<Access, ConfigError> {
    let mut b = cx.access.borrow_mut();
    // Each key: the route's, else the site's; its span names the line.
    let at = |v: std::ops::Range<usize>, key: &str| {
        let k = cx.key_of(key);
        move |m: String| (cx.err)(Some(v), &k, m)
    };
    if let Some(v) = inherit(route.map(|r| &r.address_rules), &site.address_rules) {
        b.address_rules(v.get_ref())
            .map_err(at(v.span(), "address_rules"))?;
    }
    if let Some(v) = inherit(
        route.map(|r| &r.require_client_cert),
        &site.require_client_cert,
    ) {
        if *v.get_ref() {
            b.require_client_cert();
        }
    }
    if let Some(v) = inherit(route.map(|r| &r.basic_auth), &site.basic_auth) {
        b.basic_auth(v.get_ref(), cx.resolve)
            .map_err(at(v.span(), "basic_auth"))?;
    }
    if let Some(v) = inherit(route.map(|r| &r.limit_requests), &site.limit_requests) {
        b.limit_requests(v.get_ref())
            .map_err(at(v.span(), "limit_requests"))?;
    }
    if let Some(v) = inherit(route.map(|r| &r.limit_connections), &site.limit_connections) {
        b.limit_connections(*v.get_ref())
            .map_err(at(v.span(), "limit_connections"))?;
    }
    let Some(rc) = route else {
        return Ok(b.finish());
    };
    if let Some(lu) = &rc.lua {
        let c = lu.get_ref();
        match &c.access {
            Some(a) => {
                if rc.authorizer.is_some() {
                    return Err((cx.err)(
                        Some(lu.span()),
                        &cx.key_of("lua.access"),
                        "a route has one access check: `authorizer` or `lua.access`".into(),
                    ));
                }
                let cfg = c
                    .script_config(a, cx.resolve, cx.lua_dicts)
                    .map_err(|m| (cx.err)(Some(lu.span()), &cx.key_of("lua.access"), m))?;
                b.lua(Arc::new(cfg));
            }
            None if c.script.is_none() => {
                return Err((cx.err)(
                    Some(lu.span()),
                    &cx.key_of("lua"),
                    "needs a `script` (the handler) or an `access` script".into(),
                ))
            }
            None => {}
        }
    }
    if let Some(a) = &rc.authorizer {
        let k = cx.key_of("authorizer");
        let name = a.get_ref();
        let i = cx
            .pools
            .iter()
            .position(|p| &p.name == name)
            .ok_or_else(|| (cx.err)(Some(a.span()), &k, format!("no [[pool]] named `{name}`")))?;
        if cx.pools[i].protocol != crate::upstream::Protocol::FastCgi {
            return Err((cx.err)(
                Some(a.span()),
                &k,
                format!("pool `{name}` speaks HTTP: use `proxy`"),
            ));
        }
        b.authorizer(i);
    }
    Ok(b.finish())
}

#[cfg(test)]
mod tests {
    use super::inherit;

    /// A route's value replaces its site's whole (nginx: a directive in a
    /// location replaces the server's); a route without it, or a site's
    /// root (`route` None), has the site's.
    #[test]
    fn a_routes_key_replaces_its_sites_and_otherwise_the_site_decides() {
        let site = Some(vec!["site"]);
        assert_eq!(
            inherit(Some(&Some(vec!["route"])), &site),
            Some(&vec!["route"])
        );
        assert_eq!(inherit(Some(&None), &site), Some(&vec!["site"]));
        assert_eq!(inherit(None, &site), Some(&vec!["site"]));
        assert_eq!(inherit::<Vec<&str>>(Some(&None), &None), None);
    }
}
