//! Routing: the site by Host, rewrites, the route and its handler — and
//! the only match over handlers ([`dispatch`]). A handler may end with an
//! internal redirect ([`Outcome::Redirect`], a CGI/FastCGI local redirect);
//! routing then runs again with a head built from parts (never from HTTP/1
//! text), at most [`MAX_REDIRECTS`] deep (h2o's `reprocess`). [`Includer`]
//! runs a path as a subrequest for handlers that include others (SSI, Lua).

use crate::access::{Access, Granted, Start};
use crate::config::{Route, Runtime, Site};
use crate::exchange::{Edge, Exchange, Include, Sub, SubResponse};
use crate::handler::cgi;
use crate::handler::fastcgi;
use crate::handler::lua;
use crate::handler::proxy;
use crate::handler::redirect;
use crate::handler::respond;
use crate::handler::ssi;
use crate::handler::static_files;
use crate::handler::status;
use crate::handler::{Handler, Outcome};
use crate::local::Worker;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use stoa_h1::{Framing, Method, RequestHead};

mod cache;
mod error_page;

/// CGI/FastCGI local redirects followed for one request (RFC 3875 §6.2.2).
pub(crate) const MAX_REDIRECTS: u8 = 10;

/// Subrequests nested in one another (SSI includes, Lua subrequests):
/// Apache's `LimitInternalRecursion` default.
pub(crate) const MAX_INCLUDE_DEPTH: usize = 10;

/// An asynchronous handler's run, boxed: rare next to static files, and
/// its state would otherwise sit in every connection's future.
pub(crate) type Running<'x> = Pin<Box<dyn Future<Output = ()> + 'x>>;

/// Where a request goes: what routing decided. The handlers themselves
/// are one enum, [`Handler`]; this only adds what routing answers without
/// one.
pub(crate) enum Pick<'r> {
    /// A handler, with the decoded, normalized path the route was chosen
    /// by (never the PHP preset, which routing resolves, nor `Deny`).
    Run(&'r Handler, String),
    /// A route (or a site's root) with access checks: the access phase
    /// runs them first ([`guarded`]), then picks again with
    /// [`pick_unguarded`].
    Access(&'r Access),
    /// A route whose checks never wait, before a handler that answers at
    /// once (a static file, the status page: `Access::settle`): routing
    /// chose the handler already, the checks run before it without a
    /// future and without routing again.
    /// The handler is the access phase's own reference to the route's
    /// (`Access::checked_handler`), so a `Pick` stays as large as before.
    Checked(&'r Access, String),
    /// Answered without a handler (404, 413, OPTIONS *...).
    Status(u16),
    /// A cleartext request to a site with `https_redirect`: 308 to the
    /// same URL over https.
    HttpsRedirect,
    /// An ACME HTTP-01 validation on a cleartext listener: the key
    /// authorization to answer with (RFC 8555 §8.3).
    AcmeChallenge(String),
    OptionsStar,
}

impl Pick<'_> {
    /// Whether [`dispatch`] answers at once (static files, the status
    /// page, errors) or hands back a future to await.
    pub(crate) fn runs_async(&self) -> bool {
        match self {
            Pick::Run(h, _) => h.runs_async(),
            Pick::Access(a) => a.runs_async(),
            Pick::Checked(..) => false,
            Pick::Status(_) | Pick::HttpsRedirect | Pick::AcmeChallenge(_) | Pick::OptionsStar => {
                false
            }
        }
    }
}

/// Chooses the handler for a request: limits first, then the site by Host,
/// then the route. When routing changed the target (a rewrite, an index or
/// `try_files` redirect), the request as the handler is to see it comes
/// back too; its REQUEST_URI stays the client's.
pub(crate) fn pick<'r>(head: &RequestHead, rt: &'r Runtime) -> (Pick<'r>, Option<RequestHead>) {
    pick_with(head, rt, true, &mut Edge::none())
}

/// [`pick`] for a request as it arrived on a connection, over TLS or
/// not: first its site's transport rules. A cleartext request to a site
/// with `https_redirect` is redirected (ACME HTTP-01 challenges under
/// `/.well-known/acme-challenge/` excepted: they must be answered over
/// http, RFC 8555 §8.3); a request over TLS to a site with `hsts` gets
/// that value (in `hsts`) to send as `Strict-Transport-Security` (only
/// over TLS: RFC 6797 §7.2). The settings of the route (or site root)
/// routing settled on come back in `edge`, for the exchange
/// ([`Exchange::with_edge`]); [`Edge::NONE`] when none took the request.
#[inline]
pub(crate) fn pick_request<'r>(
    head: &RequestHead,
    rt: &'r Runtime,
    tls: bool,
    hsts: &mut Option<&'r [u8]>,
    edge: &mut &'r Edge,
) -> (Pick<'r>, Option<RequestHead>) {
    if rt.transport_rules {
        return pick_with_rules(head, rt, tls, hsts, edge);
    }
    // The common case costs one test: the same call as before the rules.
    pick_with(head, rt, true, edge)
}

/// [`pick_request`] when some site has transport rules.
#[inline(never)]
fn pick_with_rules<'r>(
    head: &RequestHead,
    rt: &'r Runtime,
    tls: bool,
    hsts: &mut Option<&'r [u8]>,
    edge: &mut &'r Edge,
) -> (Pick<'r>, Option<RequestHead>) {
    if !tls && !rt.acme.is_empty() {
        if let Some(answer) = acme_answer(head.path()) {
            return (Pick::AcmeChallenge(answer), None);
        }
    }
    if let Some(site) = rt.site_for(crate::http::host_name(head.host())) {
        if tls {
            *hsts = site.hsts.as_deref();
        } else if site.https_redirect && !is_acme_challenge(head.path()) {
            return (Pick::HttpsRedirect, None);
        }
    }
    pick_with(head, rt, true, edge)
}

/// Whether a path is an ACME HTTP-01 challenge (RFC 8555 §8.3), decoded
/// and normalized as routing will see it.
fn is_acme_challenge(path: &[u8]) -> bool {
    crate::http::path::normalize(path).is_ok_and(|p| p.starts_with("/.well-known/acme-challenge/"))
}

/// The key authorization for an HTTP-01 path whose token a challenge
/// out now has (RFC 8555 §8.3). The path as sent: validators send the
/// token as it is (base64url, nothing to decode), and other requests pay
/// one prefix comparison.
fn acme_answer(path: &[u8]) -> Option<String> {
    if !path.starts_with(crate::acme::tokens::PREFIX.as_bytes()) {
        return None;
    }
    crate::acme::tokens::answer(std::str::from_utf8(path).ok()?)
}

/// The `Location` of an https redirect: the request's host (its port
/// replaced by the https one), path and query, as the client sent them.
/// None when the Host is missing or not a plain host name or address.
fn https_location(head: &RequestHead, port: Option<u16>) -> Option<Vec<u8>> {
    let host = crate::http::host_name(head.host());
    let ok = if let Some(v6) = host.strip_prefix('[') {
        v6.strip_suffix(']')
            .is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok())
    } else {
        !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
    };
    if !ok {
        return None;
    }
    let mut loc = b"https://".to_vec();
    loc.extend_from_slice(host.as_bytes());
    if let Some(p) = port {
        loc.push(b':');
        stoa_h1::push_u64(&mut loc, u64::from(p));
    }
    loc.extend_from_slice(head.path());
    if let Some(q) = head.query() {
        loc.push(b'?');
        loc.extend_from_slice(q);
    }
    Some(loc)
}

/// The port the first TLS listener got when it was configured with port
/// 0 (0: none such), for `https_redirect`. Listen addresses change only
/// on restart, so one value serves every runtime.
static BOUND_HTTPS_PORT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);

/// Records the port a TLS listener configured with port 0 was given.
pub(crate) fn set_bound_https_port(port: u16) {
    let _ = BOUND_HTTPS_PORT.compare_exchange(
        0,
        port,
        std::sync::atomic::Ordering::Relaxed,
        std::sync::atomic::Ordering::Relaxed,
    );
}

/// [`pick`] once the route's access checks let the request through.
pub(crate) fn pick_unguarded<'r>(
    head: &RequestHead,
    rt: &'r Runtime,
) -> (Pick<'r>, Option<RequestHead>) {
    pick_with(head, rt, false, &mut Edge::none())
}

/// Internal redirects (index scripts, `try_files`, front controllers)
/// followed by one routing before giving up with 500.
const MAX_INTERNAL: usize = 10;

/// What one routing step decided.
enum Step<'r> {
    Done(Pick<'r>),
    /// Route again with this path (decoded) and query.
    Redirect(String, Option<Vec<u8>>),
}

fn pick_with<'r>(
    head: &RequestHead,
    rt: &'r Runtime,
    guard: bool,
    edge: &mut &'r Edge,
) -> (Pick<'r>, Option<RequestHead>) {
    // Beyond what any route allows: refused before routing.
    if let Framing::Length(n) = head.framing {
        if n > rt.max_body_ceiling {
            return (Pick::Status(413), None);
        }
    }
    if head.target() == b"*" {
        // Asterisk form is only for server-wide OPTIONS (RFC 9112 §3.2.4).
        let p = if head.method == Method::Options {
            Pick::OptionsStar
        } else {
            Pick::Status(400)
        };
        return (p, None);
    }
    // One site answers every host (`site_for` falls back to the first):
    // then the Host needs no parsing.
    let site = match rt.sites.as_slice() {
        [only] => Some(only),
        _ => rt.site_for(crate::http::host_name(head.host())),
    };
    let Some(site) = site else {
        return (Pick::Status(404), None);
    };
    // Routes see the path decoded and normalized, as the file system will:
    // matching the raw path would let `/index%2ephp` or `//cgi-bin/x` miss
    // their route and reach the static handler as source. Normalizing also
    // refuses control characters (a `%0a` that would steer a PATH_INFO
    // split: CVE-2019-11043) and `..` above the root.
    let Ok(norm) = crate::http::path::normalize(head.path()) else {
        return (Pick::Status(400), None);
    };
    let (p, changed) = pick_in(site, norm, head.query(), head.is_rewritten(), guard, edge);
    // Beyond what the chosen route allows (its `max_body_bytes`, else the
    // server's); a chunked body is cut off as it is read.
    if let Framing::Length(n) = head.framing {
        if n > edge.max_body_bytes.unwrap_or(rt.limits.max_body_bytes) {
            return (Pick::Status(413), None);
        }
    }
    let head = changed.map(|(norm, query)| rewritten_head(head, &norm, query));
    (p, head)
}

/// What routing changed of a request's target: the path (decoded,
/// normalized) and query its handler is to see.
type Changed = (String, Option<Vec<u8>>);

/// Routing within a site, for the path `norm` (decoded, normalized) and
/// the request's `query`: rewrites (unless the request was `rewritten`
/// already), dotfiles, the route and its access check, `try_files` and
/// internal redirects. The target to give the handler comes back when
/// routing changed it. It reads nothing else of a request, so a
/// subrequest is routed without building its head first. With `guard`,
/// a route with access checks comes back as [`Pick::Access`]: the access
/// phase runs before the handler.
fn pick_in<'r>(
    site: &'r Site,
    mut norm: String,
    head_query: Option<&[u8]>,
    rewritten: bool,
    guard: bool,
    edge: &mut &'r Edge,
) -> (Pick<'r>, Option<Changed>) {
    let mut changed: Option<Option<Vec<u8>>> = None;
    if !rewritten {
        for rw in &site.rewrites {
            let Some(caps) = rw.from.captures(&norm) else {
                continue;
            };
            let mut to = String::new();
            caps.expand(&rw.to, &mut to);
            let (path, q) = match to.split_once('?') {
                Some((p, q)) => (p.to_owned(), Some(q.to_owned())),
                None => (to, None),
            };
            // The request's own query follows the rule's (nginx `rewrite`).
            let orig = changed
                .clone()
                .unwrap_or_else(|| head_query.map(<[u8]>::to_vec));
            let query = match (q, orig) {
                (Some(q), Some(o)) if !o.is_empty() => {
                    let mut v = q.into_bytes();
                    v.push(b'&');
                    v.extend_from_slice(&o);
                    Some(v)
                }
                (Some(q), _) => Some(q.into_bytes()),
                (None, o) => o,
            };
            match crate::http::path::normalize(path.as_bytes()) {
                Ok(n) => norm = n,
                Err(_) => return (Pick::Status(400), None),
            }
            changed = Some(query);
        }
    }
    for _ in 0..MAX_INTERNAL {
        if !site.allow_dotfiles && has_dotfile(&norm) {
            // Refused before any route: the site's settings (its error
            // pages, its header rules) answer.
            *edge = &site.edge;
            let to = changed.map(|q| (norm, q));
            return (Pick::Status(403), to);
        }
        let route = route(site, &norm);
        // The route routing settles on decides (internal redirects
        // included); no route: the site's root.
        let (e, access) = match route {
            Some(r) => (&r.edge, &r.access),
            None => (&site.edge, &site.access),
        };
        *edge = e;
        // The access phase: one branch when there is no check.
        if guard && !access.is_empty() {
            if !access.runs_async() {
                // Settled at load: this handler answers at once and no
                // index script or `try_files` leads elsewhere.
                if let Some(h) = access.checked_handler() {
                    // The status page sees the request as it came.
                    let to = match (h, changed) {
                        (Handler::Static(_), Some(q)) => Some((norm.clone(), q)),
                        _ => None,
                    };
                    return (Pick::Checked(access, norm), to);
                }
            }
            let to = changed.map(|q| (norm, q));
            return (Pick::Access(access), to);
        }
        let handler = route.map(|r| &r.handler).or(site.fallback.as_ref());
        let query = match &changed {
            Some(q) => q.as_deref(),
            None => head_query,
        };
        let step = match route.and_then(|r| r.try_files.as_deref()) {
            Some(tf) => match try_files(site, tf, &norm, query) {
                TryFiles::Found(path) => {
                    norm = path;
                    route_step(site, handler, norm, query)
                }
                TryFiles::Status(s) => Step::Done(Pick::Status(s)),
                TryFiles::Redirect(path, q) => Step::Redirect(path, q),
            },
            None => route_step(site, handler, norm, query),
        };
        match step {
            Step::Done(p) => {
                let to = match (&p, changed) {
                    // A Lua script and the status page see the request
                    // as it came.
                    (Pick::Run(h, n), Some(q))
                        if !matches!(h, Handler::Lua(_) | Handler::Status(_)) =>
                    {
                        Some((n.clone(), q))
                    }
                    _ => None,
                };
                return (p, to);
            }
            Step::Redirect(path, q) => {
                match crate::http::path::normalize(path.as_bytes()) {
                    Ok(n) => norm = n,
                    Err(_) => return (Pick::Status(400), None),
                }
                changed = Some(q);
            }
        }
    }
    tracing::error!("routing: more than {MAX_INTERNAL} internal redirects for {norm}");
    (Pick::Status(500), None)
}

/// The request with its target replaced by what routing changed it to.
fn rewritten_head(head: &RequestHead, norm: &str, query: Option<Vec<u8>>) -> RequestHead {
    let mut target = crate::http::path::encode(norm).into_bytes();
    if let Some(q) = query {
        target.push(b'?');
        target.extend_from_slice(&q);
    }
    head.rewritten(&target)
}

/// A path segment starting with '.' (`.git`, `.env`, `.htpasswd`), other
/// than `/.well-known/` (RFC 8615).
fn has_dotfile(norm: &str) -> bool {
    // A byte scan: `str::find("/.")` sets up a two-way searcher on every
    // request (callgrind: 2 % of a small static response).
    let b = norm.as_bytes();
    for i in 0..b.len().saturating_sub(1) {
        if b[i] == b'/' && b[i + 1] == b'.' {
            let seg = norm[i + 1..].split('/').next().unwrap_or("");
            if !(i == 0 && seg == ".well-known") {
                return true;
            }
        }
    }
    false
}

/// The handler for a path that routing settled on.
fn route_step<'r>(
    site: &'r Site,
    handler: Option<&'r Handler>,
    mut norm: String,
    query: Option<&[u8]>,
) -> Step<'r> {
    let Some(h) = handler else {
        return Step::Done(Pick::Status(404));
    };
    match h {
        Handler::Static(cfg) => {
            // An index that a script route runs is run (an internal
            // redirect), never served.
            if let Some(name) = cfg.script_index(&norm) {
                norm.push_str(name);
                return Step::Redirect(norm, query.map(<[u8]>::to_vec));
            }
        }
        Handler::Cgi(cfg) => {
            if let Some(name) = cfg.dir_index(&norm, &site.index) {
                norm.push_str(name);
                return Step::Redirect(norm, query.map(<[u8]>::to_vec));
            }
        }
        Handler::Php(php) => return php_step(site, php, norm),
        Handler::Deny => return Step::Done(Pick::Status(403)),
        _ => {}
    }
    Step::Done(Pick::Run(h, norm))
}

/// The PHP preset (Caddy's `php_fastcgi`): a path through a `.php` file
/// runs it (the rest is PATH_INFO); another existing file is static (never
/// a `.php`); a directory runs its index.php; anything else runs the front
/// controller.
fn php_step<'r>(
    site: &'r Site,
    php: &'r crate::handler::php::PhpRoute,
    mut norm: String,
) -> Step<'r> {
    let Some(root) = site.root.as_deref() else {
        return Step::Done(Pick::Status(404));
    };
    let root = root.to_string_lossy();
    let is_file = |p: &str| std::fs::metadata(format!("{root}{p}")).is_ok_and(|m| m.is_file());
    if let Some(at) = crate::config::split_at(&norm, ".php") {
        if is_file(&norm[..at]) {
            return Step::Done(Pick::Run(&php.fastcgi, norm));
        }
    } else {
        match std::fs::metadata(format!("{root}{norm}")) {
            Ok(m) if m.is_file() => return Step::Done(Pick::Run(&php.statics, norm)),
            Ok(m) if m.is_dir() => {
                if norm.ends_with('/') && is_file(&format!("{norm}index.php")) {
                    norm.push_str("index.php");
                    return Step::Done(Pick::Run(&php.fastcgi, norm));
                }
                // The static handler redirects to the slash, or serves
                // another index or a listing.
                return Step::Done(Pick::Run(&php.statics, norm));
            }
            _ => {}
        }
    }
    match &php.front_controller {
        Some(fc) if is_file(fc) => Step::Done(Pick::Run(&php.fastcgi, fc.clone())),
        _ => Step::Done(Pick::Status(404)),
    }
}

enum TryFiles {
    /// This file or directory exists: serve it with the route's handler.
    Found(String),
    Status(u16),
    /// The last entry: route again.
    Redirect(String, Option<Vec<u8>>),
}

/// nginx `try_files`: each entry but the last names a file (a directory
/// when it ends in '/') under the site root; `$uri` is the path,
/// `$query_string` (or `$args`) the query. The last is a URI or `=CODE`.
fn try_files(site: &Site, entries: &[String], norm: &str, query: Option<&[u8]>) -> TryFiles {
    let q = String::from_utf8_lossy(query.unwrap_or(b""));
    let expand = |e: &str| {
        e.replace("$uri", norm)
            .replace("$query_string", &q)
            .replace("$args", &q)
    };
    let root = site
        .root
        .as_deref()
        .map(|r| r.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (last, files) = entries.split_last().unwrap_or((&entries[0], &[]));
    for e in files {
        let path = expand(e);
        let Ok(n) = crate::http::path::normalize(path.as_bytes()) else {
            continue;
        };
        let found = std::fs::metadata(format!("{root}{n}")).is_ok_and(|m| {
            if n.ends_with('/') {
                m.is_dir()
            } else {
                m.is_file()
            }
        });
        if found {
            return TryFiles::Found(n);
        }
    }
    if let Some(code) = last.strip_prefix('=') {
        return TryFiles::Status(code.parse().unwrap_or(404));
    }
    let to = expand(last);
    match to.split_once('?') {
        Some((p, q)) => TryFiles::Redirect(p.to_owned(), Some(q.as_bytes().to_vec())),
        None => TryFiles::Redirect(to, query.map(<[u8]>::to_vec)),
    }
}

/// The first route that takes a path, in the order the config sorted
/// them (deny, suffixes, prefixes longest first); None: the site's root.
fn route<'s>(site: &'s Site, path: &str) -> Option<&'s Route> {
    site.routes.iter().find(|r| r.matcher.matches(path))
}

/// Runs the handler routing chose. Synchronous handlers (static files,
/// the status page, errors) answer at once and `None` comes back; the
/// others come back as a future to await. `vars` are an Authorizer's
/// grants; `depth` counts local redirects. This is the one match over
/// handlers: a new handler is one arm here and one in `route_step`.
pub(crate) fn dispatch<'x>(
    p: Pick<'x>,
    ex: &'x mut Exchange<'_>,
    rt: &'x Runtime,
    depth: u8,
    vars: &'x [(String, Vec<u8>)],
) -> Option<Running<'x>> {
    if ex.edge().error_pages.is_none() {
        return dispatch_in(p, ex, rt, depth, vars, None);
    }
    // An error the route has a page for is caught by the exchange and
    // replaced here, whichever handler answered (even a synchronous one).
    Some(Box::pin(error_page::run_in(p, ex, rt, depth, vars, None)))
}

/// [`dispatch`] inside a subrequest: `nest` is what the including
/// documents pass down (their chain, for loop detection; SSI's shared
/// environment).
fn dispatch_in<'x>(
    p: Pick<'x>,
    ex: &'x mut Exchange<'_>,
    rt: &'x Runtime,
    depth: u8,
    vars: &'x [(String, Vec<u8>)],
    nest: Option<&'x Nest>,
) -> Option<Running<'x>> {
    match p {
        Pick::Run(Handler::Static(cfg), norm) => {
            static_files::serve(cfg, ex, &norm);
            ex.finish();
            None
        }
        Pick::Run(h, norm) => run_handler(h, norm, ex, rt, depth, vars, nest),
        Pick::Access(a) => guarded(a, ex, rt, depth, nest),
        Pick::Checked(a, norm) => {
            match (a.start(ex), a.checked_handler()) {
                (Start::Granted(g), Some(h)) => {
                    let ran = dispatch_in(Pick::Run(h, norm), ex, rt, depth, &[], nest).is_none();
                    debug_assert!(ran, "a checked route's handler answers at once");
                    // A `limit_connections` slot is held until here.
                    drop(g);
                }
                (Start::Answered, _) => {}
                (Start::Pending(_) | Start::Granted(_), _) => {
                    // Cannot be: `Access::settle` saw no check that waits
                    // and kept the handler it hands over.
                    ex.error(500, &[]);
                    ex.finish();
                }
            }
            None
        }
        Pick::OptionsStar => {
            ex.start(204);
            ex.header("Allow", b"GET, HEAD, OPTIONS");
            ex.end_head(None);
            ex.finish();
            None
        }
        Pick::Status(s) => {
            ex.error(s, &[]);
            ex.finish();
            None
        }
        Pick::AcmeChallenge(answer) => {
            ex.start(200);
            ex.header("Content-Type", b"application/octet-stream");
            ex.end_head(Some(answer.len() as u64));
            ex.write(answer.as_bytes());
            ex.finish();
            None
        }
        Pick::HttpsRedirect => {
            let port = match rt.https_port {
                Some(0) => Some(BOUND_HTTPS_PORT.load(std::sync::atomic::Ordering::Relaxed)),
                p => p,
            };
            match https_location(ex.req(), port) {
                // 308 keeps the method and body (RFC 9110 §15.4.9).
                Some(loc) => ex.error(308, &[("Location", &loc)]),
                None => ex.error(400, &[]),
            }
            ex.finish();
            None
        }
    }
}

/// [`dispatch_in`] for a handler other than static files (which it runs
/// itself, first: the path most requests take).
fn run_handler<'x>(
    h: &'x Handler,
    norm: String,
    ex: &'x mut Exchange<'_>,
    rt: &'x Runtime,
    depth: u8,
    vars: &'x [(String, Vec<u8>)],
    nest: Option<&'x Nest>,
) -> Option<Running<'x>> {
    match h {
        Handler::Static(cfg) => {
            static_files::serve(cfg, ex, &norm);
            ex.finish();
            None
        }
        Handler::Status(cfg) => {
            status::serve(cfg, ex, &rt.pools);
            ex.finish();
            None
        }
        Handler::Redirect(cfg) => {
            redirect::serve(cfg, ex, &norm);
            ex.finish();
            None
        }
        Handler::Respond(cfg) => {
            respond::serve(cfg, ex);
            ex.finish();
            None
        }
        // A cached route: the cache answers, or runs the handler
        // (`route::cache`).
        Handler::Cgi(_) | Handler::FastCgi(_) | Handler::Proxy(_) if ex.edge().cache.is_some() => {
            let c = ex.edge().cache.as_ref()?;
            cache::serve(c, h, norm, ex, rt, depth, vars, nest)
        }
        Handler::Cgi(cfg) => Some(Box::pin(async move {
            let o = cgi::serve(cfg, norm, ex, vars).await;
            follow(o, ex, rt, depth, nest).await;
        })),
        Handler::FastCgi(cfg) => Some(Box::pin(async move {
            let o = fastcgi::serve(cfg, norm, ex, &rt.pools, vars).await;
            follow(o, ex, rt, depth, nest).await;
        })),
        Handler::Proxy(cfg) => Some(Box::pin(async move {
            proxy::serve(cfg, &norm, ex, &rt.pools, vars).await;
        })),
        Handler::Ssi(cfg) => Some(Box::pin(async move {
            // A nested page runs in the environment of the page that
            // started the includes (Apache's "kludge" in includes_filter).
            let shared = nest.and_then(|n| n.ssi.clone()).unwrap_or_default();
            let inc = Includer::inside(rt, ex, cfg.max_include, nest, &norm, Some(shared.clone()));
            let o = ssi::serve(cfg, norm, ex, &inc, &shared, vars).await;
            follow(o, ex, rt, depth, nest).await;
        })),
        Handler::Lua(cfg) => Some(Box::pin(async move {
            let inc = Includer::inside(rt, ex, cfg.max_subrequest, nest, &norm, None);
            let o = lua::serve(cfg, norm, ex, &inc, vars).await;
            follow(o, ex, rt, depth, nest).await;
        })),
        // Routing answers these itself (`route_step`): never picked.
        Handler::Php(_) | Handler::Deny => {
            ex.error(403, &[]);
            ex.finish();
            None
        }
    }
}

/// Runs what [`dispatch`] chose to its end.
pub(crate) async fn run(p: Pick<'_>, ex: &mut Exchange<'_>, rt: &Runtime, depth: u8) {
    if let Some(f) = dispatch(p, ex, rt, depth, &[]) {
        f.await;
    }
}

/// A handler's outcome: a local redirect is routed again, as a GET for
/// the new target with the client's headers but no body (RFC 3875
/// §6.2.2).
async fn follow(o: Outcome, ex: &mut Exchange<'_>, rt: &Runtime, depth: u8, nest: Option<&Nest>) {
    let Outcome::Redirect(location) = o else {
        return;
    };
    if depth >= MAX_REDIRECTS {
        tracing::error!(
            "local redirect loop at {}",
            String::from_utf8_lossy(ex.req().path())
        );
        ex.close();
        ex.error(500, &[]);
        ex.finish();
        return;
    }
    let new = redirect_head(ex.req(), &location);
    let (p, rewritten) = pick(&new, rt);
    let new = rewritten.unwrap_or(new);
    let mut sub = ex.redirected(&new);
    error_page::run_in(p, &mut sub, rt, depth + 1, &[], nest).await;
    let keep = sub.keeps();
    drop(sub);
    ex.absorb_keep(keep);
}

/// The GET a local redirect to `location` makes of `orig`: its headers
/// less those that described its body.
fn redirect_head(orig: &RequestHead, location: &[u8]) -> RequestHead {
    const BODY: [&str; 4] = [
        "content-length",
        "transfer-encoding",
        "content-type",
        "expect",
    ];
    RequestHead::from_parts(
        Method::Get,
        location,
        orig.version,
        orig.headers()
            .filter(|(n, _)| !BODY.iter().any(|h| n.eq_ignore_ascii_case(h.as_bytes()))),
    )
}

/// A request for a route with an access phase (crate::access): address
/// rules, basic auth, limits, a FastCGI Authorizer (§6.3), a Lua `access`
/// script. When it lets the request through, the route's handler runs
/// with the variables it granted, otherwise its answer went to the
/// client. Checks that need no waiting run here, and a static file behind
/// them is served at once; the rest continues as a future. Local
/// redirects come through routing again, so they are checked too.
fn guarded<'x>(
    a: &'x Access,
    ex: &'x mut Exchange<'_>,
    rt: &'x Runtime,
    depth: u8,
    nest: Option<&'x Nest>,
) -> Option<Running<'x>> {
    match a.start(ex) {
        Start::Answered => None,
        Start::Granted(g) => {
            let (p, rewritten) = pick_unguarded(ex.req(), rt);
            if !p.runs_async() {
                // The usual case behind address rules and limits: a
                // static file (or an error), served now; handlers that
                // answer at once take no variables. A connection slot is
                // held until the response is written.
                let ran = match &rewritten {
                    None => dispatch_in(p, ex, rt, depth, &[], nest).is_none(),
                    Some(new) => {
                        let mut sub = ex.redirected(new);
                        let ran = dispatch_in(p, &mut sub, rt, depth, &[], nest).is_none();
                        let keep = sub.keeps();
                        drop(sub);
                        ex.absorb_keep(keep);
                        ran
                    }
                };
                debug_assert!(ran, "runs_async and dispatch disagree");
                drop(g);
                return None;
            }
            if !a.runs_async() {
                // The configuration promised a handler that answers at
                // once (`Access::settle`) and routing found another: answer
                // rather than drop a future the caller will not run.
                tracing::error!(
                    "access: {} routed to an asynchronous handler on a synchronous route",
                    String::from_utf8_lossy(ex.req().path())
                );
                ex.error(500, &[]);
                ex.finish();
                return None;
            }
            Some(Box::pin(async move {
                granted(g, p, rewritten, ex, rt, depth, nest).await;
            }))
        }
        Start::Pending(_) if !a.runs_async() => {
            // Cannot be: a synchronous route has no check that waits.
            ex.error(500, &[]);
            ex.finish();
            None
        }
        Start::Pending(pending) => Some(Box::pin(async move {
            let g = {
                let norm = crate::http::path::normalize(ex.req().path()).unwrap_or_default();
                let max = a.lua_max_subrequest();
                let inc = Includer::inside(rt, ex, max, nest, &norm, None);
                a.finish(pending, ex, &rt.pools, &inc).await
            };
            let Some(g) = g else {
                return;
            };
            let (p, rewritten) = pick_unguarded(ex.req(), rt);
            granted(g, p, rewritten, ex, rt, depth, nest).await;
        })),
    }
}

/// Runs the handler a request that passed its access phase was routed
/// to, with what the phase granted.
async fn granted(
    g: Granted,
    p: Pick<'_>,
    rewritten: Option<RequestHead>,
    ex: &mut Exchange<'_>,
    rt: &Runtime,
    depth: u8,
    nest: Option<&Nest>,
) {
    match rewritten {
        None => {
            if let Some(f) = dispatch_in(p, ex, rt, depth, &g.vars, nest) {
                f.await;
            }
        }
        Some(new) => {
            let mut sub = ex.redirected(&new);
            error_page::run_in(p, &mut sub, rt, depth, &g.vars, nest).await;
            let keep = sub.keeps();
            drop(sub);
            ex.absorb_keep(keep);
        }
    }
    // Held to here: `limit_connections` counts the request until its
    // handler is done.
    drop(g);
}

/// What a document passes down to the subrequests it makes.
#[derive(Default, Clone)]
pub(crate) struct Nest {
    /// The documents being included, outermost first, as (normalized
    /// path, query): including one of them again is a loop.
    pub(crate) chain: Vec<(String, Vec<u8>)>,
    /// SSI: the environment and `set` variables nested pages share.
    pub(crate) ssi: Option<Rc<RefCell<ssi::Shared>>>,
}

/// Subrequests through routing, for handlers that include others.
pub(crate) struct Includer<'r> {
    pub(crate) rt: &'r Runtime,
    pub(crate) worker: &'r Worker,
    pub(crate) peer: std::net::SocketAddr,
    pub(crate) local: Option<std::net::SocketAddr>,
    /// Body bytes kept from one subrequest.
    pub(crate) max_body: usize,
    /// The including documents, this one last.
    pub(crate) nest: Nest,
}

impl<'r> Includer<'r> {
    /// The includer of the document `norm` being served on `ex`, itself
    /// included by `outer` (if any).
    pub(crate) fn inside(
        rt: &'r Runtime,
        ex: &Exchange<'r>,
        max_body: usize,
        outer: Option<&Nest>,
        norm: &str,
        ssi: Option<Rc<RefCell<ssi::Shared>>>,
    ) -> Includer<'r> {
        let mut chain = Vec::with_capacity(outer.map_or(0, |n| n.chain.len()) + 1);
        if let Some(n) = outer {
            chain.extend_from_slice(&n.chain);
        }
        chain.push((norm.to_owned(), ex.req().query().unwrap_or(b"").to_vec()));
        Includer {
            rt,
            worker: ex.worker(),
            peer: ex.peer(),
            local: ex.local_addr(),
            max_body,
            nest: Nest { chain, ssi },
        }
    }
}

/// The handler routing chose for a subrequest, and the head it runs on.
pub(crate) struct Routed<'r>(Pick<'r>, RequestHead);

impl<'r> Includer<'r> {
    /// Routes a subrequest for `target` as [`pick`] routes
    /// `include_head(parent, target)` (the same [`pick_in`] on the same
    /// site, path, query and host). When that is a static file whose
    /// body the cache holds fresh, the answer is taken from the cache at
    /// once, as the static handler would give it (a GET without
    /// conditional, range or `Accept-Encoding` fields): no head is built,
    /// no response head is written and thrown away, nothing is copied.
    /// Anything else (a script, an SSI page, a rewrite, an access check)
    /// runs its handler as before.
    // The plan (a pick and a head) is moved once, into `run`: boxing it
    // would add an allocation to every include that runs a handler.
    #[allow(clippy::result_large_err)]
    fn route_sub(&self, parent: &RequestHead, target: &[u8]) -> Result<SubResponse, Routed<'r>> {
        let (path, query) = match target.iter().position(|&b| b == b'?') {
            Some(i) => (&target[..i], Some(&target[i + 1..])),
            None => (target, None),
        };
        let norm = crate::http::path::normalize(path);
        // Apache refuses an include of a document already being
        // included with the same arguments, and stops at a depth.
        let key = (norm.as_deref().unwrap_or(""), query.unwrap_or(b""));
        let looped = self
            .nest
            .chain
            .iter()
            .any(|(p, q)| (p.as_str(), q.as_slice()) == key);
        if looped || self.nest.chain.len() > MAX_INCLUDE_DEPTH {
            let why = if looped {
                "includes itself"
            } else {
                "nests too deep"
            };
            tracing::error!(
                "subrequest for {}: {why} (via {})",
                String::from_utf8_lossy(target),
                self.nest
                    .chain
                    .iter()
                    .map(|(p, _)| p.as_str())
                    .collect::<Vec<_>>()
                    .join(" -> ")
            );
            return Ok(SubResponse {
                status: 508,
                ..SubResponse::default()
            });
        }
        // `pick_with`'s first steps for this head: a subrequest has no
        // body, so no 413; `*` and the site by Host as it does.
        let host = parent
            .headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(b"host"))
            .map(|(_, v)| v);
        let site = self.rt.site_for(crate::http::host_name(host));
        let (Ok(norm), Some(site), false) = (norm, site, target == b"*") else {
            let head = include_head(parent, target);
            let (p, rewritten) = pick(&head, self.rt);
            return Err(Routed(p, rewritten.unwrap_or(head)));
        };
        let (p, changed) = pick_in(site, norm, query, false, true, &mut Edge::none());
        if let (Pick::Run(Handler::Static(cfg), n), None) = (&p, &changed) {
            if let Some((head, body)) = static_files::cached_whole(cfg, n) {
                // As `Sub::push_body` keeps it.
                let cut = body.len() > self.max_body;
                let body = if cut {
                    body.slice(..self.max_body)
                } else {
                    body
                };
                return Ok(SubResponse {
                    status: 200,
                    head,
                    body,
                    cut,
                });
            }
        }
        let head = include_head(parent, target);
        let head = match changed {
            Some((norm, query)) => rewritten_head(&head, &norm, query),
            None => head,
        };
        Err(Routed(p, head))
    }
}

impl<'r> Include for Includer<'r> {
    type Routed = Routed<'r>;

    fn route(&self, parent: &RequestHead, target: &[u8]) -> Result<SubResponse, Routed<'r>> {
        self.route_sub(parent, target)
    }

    fn run(&self, routed: Routed<'r>) -> impl Future<Output = SubResponse> {
        let Routed(p, head) = routed;
        async move {
            let mut sub = Sub::new(self.peer, self.local, self.max_body);
            {
                let mut ex = Exchange::sub(&mut sub, &head, self.worker, &self.rt.limits);
                // Boxed: an include may include again.
                let f: Running<'_> = Box::pin(async {
                    if let Some(f) = dispatch_in(p, &mut ex, self.rt, 0, &[], Some(&self.nest)) {
                        f.await;
                    }
                });
                f.await;
            }
            sub.into_response()
        }
    }
}

/// Request fields a GET made from another request leaves out: those that
/// described its body, and those that would make the answer other than
/// the whole representation as is (a 304, a 412, a range). A subrequest
/// and a cache fill both drop them.
const NOT_WHOLE: [&str; 10] = [
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

/// Whether `name` is one of [`NOT_WHOLE`].
fn not_whole(name: &[u8]) -> bool {
    NOT_WHOLE
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h.as_bytes()))
}

/// The GET a subrequest makes: the parent's headers less [`NOT_WHOLE`]
/// and `Accept-Encoding` (a precompressed variant): mod_include would
/// otherwise paste those into the page.
fn include_head(orig: &RequestHead, target: &[u8]) -> RequestHead {
    RequestHead::from_parts(
        Method::Get,
        target,
        orig.version,
        orig.headers()
            .filter(|(n, _)| !not_whole(n) && !n.eq_ignore_ascii_case(b"accept-encoding")),
    )
}

#[cfg(test)]
mod order_tests;
#[cfg(test)]
mod pick_tests;

#[cfg(test)]
mod tests {
    #[test]
    fn dot_segments_other_than_well_known_are_dotfiles() {
        for p in [
            "/.git/config",
            "/a/.env",
            "/a/b/.htpasswd",
            "/.well-known/x/.git",
            "/x/..y",
        ] {
            assert!(super::has_dotfile(p), "{p}");
        }
        for p in ["/", "/a.b/c", "/.well-known/acme-challenge/x", "/a/b."] {
            assert!(!super::has_dotfile(p), "{p}");
        }
        // Only the top-level /.well-known/ is special (RFC 8615).
        assert!(super::has_dotfile("/a/.well-known/x"));
    }
}
