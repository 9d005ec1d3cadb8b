//! Invalidation after unsafe methods (RFC 9111 §4.4): a POST, PUT,
//! DELETE or PATCH that the application answered with a 2xx or 3xx may
//! have changed the resource, so what the cache holds of the target URL
//! is removed, and of the URLs in the response's `Location` and
//! `Content-Location` when they are on the same host (another host's
//! URLs are left alone: a response must not evict what another origin
//! answered, the denial of service §4.4 warns of). Every stored variant
//! of each URL goes (`Zone::purge_url`), as a PURGE of it would.
//!
//! A URL is the store's URL form of a request (host and target, as
//! `route::cache::store_key` builds it), so a relative reference is
//! resolved against the request (RFC 3986 §5.2) and written the same way.

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

/// Before the handler answers an unsafe request on `ex`: keep the
/// response's `Location` and `Content-Location` for [`after`].
pub(crate) fn before(ex: &mut Exchange<'_>) {
    ex.capture_locations();
}

/// After the handler answered an unsafe request on `ex`: a 2xx or 3xx
/// removes what is stored for the request's URL and for its same-host
/// `Location` / `Content-Location`. How many objects went.
pub(crate) fn after(c: &CacheRoute, ex: &Exchange<'_>) -> usize {
    if !(200..400).contains(&ex.status()) {
        return 0;
    }
    let target = super::store_key(c, ex).url;
    let mut n = c.zone.purge_url(&target);
    let req = ex.req();
    let base = Base {
        scheme: ex.scheme(),
        host: req.header("host").unwrap_or(b""),
        path: req.path(),
    };
    if let Some(cap) = ex.captured() {
        let refs = [cap.location.as_deref(), cap.content_location.as_deref()];
        let mut done: Vec<Vec<u8>> = Vec::with_capacity(2);
        for r in refs.into_iter().flatten() {
            let Some(url) = resolve(&base, r) else {
                continue;
            };
            if *url == *target || done.contains(&url) {
                continue;
            }
            n += c.zone.purge_url(&url);
            done.push(url);
        }
    }
    n
}

/// What a reference is resolved against: the request's scheme, `Host`
/// and path (without its query).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Base<'r> {
    pub(crate) scheme: &'r str,
    pub(crate) host: &'r [u8],
    pub(crate) path: &'r [u8],
}

/// The store's URL form (host, path, query) of `reference` resolved
/// against `base` (RFC 3986 §5.2, fragment dropped), or None when it
/// names another origin (scheme, host or port) or is not a URL at all.
pub(crate) fn resolve(base: &Base<'_>, reference: &[u8]) -> Option<Vec<u8>> {
    let r = stoa_h1::trim(reference);
    let r = r.split(|&b| b == b'#').next().unwrap_or(r);
    if r.is_empty() {
        return None;
    }
    let (path_query, absolute_path) = if let Some(c) = scheme_end(r) {
        let scheme = &r[..c];
        if !scheme.eq_ignore_ascii_case(base.scheme.as_bytes()) {
            return None;
        }
        let rest = r[c + 1..].strip_prefix(b"//")?;
        let (authority, pq) = split_authority(rest);
        if !same_host(base.scheme, authority, base.host) {
            return None;
        }
        (pq, true)
    } else if let Some(rest) = r.strip_prefix(b"//") {
        let (authority, pq) = split_authority(rest);
        if !same_host(base.scheme, authority, base.host) {
            return None;
        }
        (pq, true)
    } else {
        (r, r.first() == Some(&b'/'))
    };
    let (path, query) = match path_query.iter().position(|&b| b == b'?') {
        Some(q) => (&path_query[..q], Some(&path_query[q..])),
        None => (path_query, None),
    };
    let merged: Vec<u8> = if absolute_path {
        if path.is_empty() {
            b"/".to_vec()
        } else {
            path.to_vec()
        }
    } else if path.is_empty() {
        // `?q` alone: the base's path with another query.
        base.path.to_vec()
    } else {
        // RFC 3986 §5.2.3: the base's path up to its last `/`, then the
        // reference.
        let dir = match base.path.iter().rposition(|&b| b == b'/') {
            Some(i) => &base.path[..=i],
            None => b"/",
        };
        [dir, path].concat()
    };
    let mut url = base.host.to_vec();
    url.extend_from_slice(&remove_dot_segments(&merged));
    if let Some(q) = query {
        url.extend_from_slice(q);
    }
    Some(url)
}

/// Where a reference's scheme ends (the `:`), if it starts with one
/// (RFC 3986 §3.1: a letter, then letters, digits, `+`, `-`, `.`).
fn scheme_end(r: &[u8]) -> Option<usize> {
    let c = r.iter().position(|&b| b == b':')?;
    let s = &r[..c];
    let ok = s.first().is_some_and(u8::is_ascii_alphabetic)
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    ok.then_some(c)
}

/// `authority` and the path-and-query after it.
fn split_authority(rest: &[u8]) -> (&[u8], &[u8]) {
    match rest.iter().position(|&b| matches!(b, b'/' | b'?')) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, b""),
    }
}

/// Whether an authority names the request's host: the same name (in any
/// case) and port, a scheme's default port written or not. One with
/// user information is never the same (nothing the cache stored was
/// reached that way).
fn same_host(scheme: &str, authority: &[u8], host: &[u8]) -> bool {
    if authority.contains(&b'@') {
        return false;
    }
    let default: &[u8] = if scheme == "https" { b":443" } else { b":80" };
    let norm = |h: &[u8]| -> Vec<u8> {
        let h = h.strip_suffix(default).unwrap_or(h);
        h.to_ascii_lowercase()
    };
    !authority.is_empty() && norm(authority) == norm(host)
}

/// RFC 3986 §5.2.4: `.` and `..` segments removed from a path.
fn remove_dot_segments(path: &[u8]) -> Vec<u8> {
    let mut out: Vec<&[u8]> = Vec::new();
    let segments: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    let last = segments.len() - 1;
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            b"." | b".." => {
                if *seg == b".." && out.len() > 1 {
                    out.pop();
                }
                // A path that ends in a dot segment ends in `/`.
                if i == last {
                    out.push(b"");
                }
            }
            s => out.push(s),
        }
    }
    let mut v = out.join(&b'/');
    if v.first() != Some(&b'/') {
        v.insert(0, b'/');
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: Base<'static> = Base {
        scheme: "http",
        host: b"example.com",
        path: b"/blog/post/12",
    };

    fn url(r: &str) -> Option<String> {
        resolve(&BASE, r.as_bytes()).map(|v| String::from_utf8(v).expect("ASCII"))
    }

    /// RFC 9111 §4.4 with RFC 3986 §5.2: a Location relative to the
    /// request (absolute path, relative path, dot segments, a query
    /// alone) invalidates the URL it resolves to, in the store's form.
    #[test]
    fn rfc9111_s4_4_relative_locations_resolve_against_the_request() {
        assert_eq!(url("/blog/"), Some("example.com/blog/".into()));
        assert_eq!(url("/a?b=1#frag"), Some("example.com/a?b=1".into()));
        assert_eq!(url("13"), Some("example.com/blog/post/13".into()));
        assert_eq!(url("../feed?x"), Some("example.com/blog/feed?x".into()));
        assert_eq!(url("./"), Some("example.com/blog/post/".into()));
        assert_eq!(url("../../../../up"), Some("example.com/up".into()));
        assert_eq!(
            url("?page=2"),
            Some("example.com/blog/post/12?page=2".into())
        );
        assert_eq!(url("/x/./y/../z"), Some("example.com/x/z".into()));
        assert_eq!(url("/x/.."), Some("example.com/".into()));
        assert_eq!(url(""), None);
        assert_eq!(url("#top"), None);
    }

    /// RFC 9111 §4.4: absolute URLs invalidate only on the same origin:
    /// the request's host (any case, default port written or not) and
    /// scheme; another host, port or scheme is ignored, so a response
    /// cannot evict another origin's objects.
    #[test]
    fn rfc9111_s4_4_absolute_locations_count_only_on_the_same_host() {
        assert_eq!(
            url("http://example.com/blog/?p=1"),
            Some("example.com/blog/?p=1".into())
        );
        assert_eq!(url("HTTP://Example.COM:80"), Some("example.com/".into()));
        assert_eq!(url("//example.com/feed"), Some("example.com/feed".into()));
        assert_eq!(url("http://other.example/blog/"), None);
        assert_eq!(url("//other.example/blog/"), None);
        assert_eq!(url("http://example.com:8080/blog/"), None);
        assert_eq!(url("https://example.com/blog/"), None);
        assert_eq!(url("http://user@example.com/blog/"), None);
        assert_eq!(url("mailto:someone@example.com"), None);
        let tls = Base {
            scheme: "https",
            host: b"example.com:443",
            ..BASE
        };
        assert_eq!(
            resolve(&tls, b"https://example.com/a").as_deref(),
            Some(&b"example.com:443/a"[..])
        );
    }

    /// RFC 9110 §9.2.1: GET, HEAD, OPTIONS and TRACE are safe; every
    /// other method (POST, PUT, DELETE, PATCH, extensions) invalidates.
    #[test]
    fn rfc9110_s9_2_1_only_safe_methods_leave_the_cache_alone() {
        for m in [Method::Get, Method::Head, Method::Options, Method::Trace] {
            assert!(!unsafe_method(&m), "{m:?}");
        }
        for m in [Method::Post, Method::Put, Method::Delete, Method::Patch] {
            assert!(unsafe_method(&m), "{m:?}");
        }
        assert!(unsafe_method(&Method::Other("PROPPATCH".into())));
    }
}
