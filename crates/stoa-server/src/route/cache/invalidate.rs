//! Invalidation after unsafe methods (RFC 9111 §4.4): a POST, PUT,
//! DELETE or PATCH that the application answered with a 2xx or 3xx may
//! have changed the resource, so what the cache holds of the target URL
//! is removed, and of the URLs in the response's `Location` and
//! `Content-Location` when they are on the same origin (another origin's
//! URLs are left alone: a response must not evict what another origin
//! answered). Every stored variant of each URL goes (`Zone::purge_url`),
//! as a PURGE of it would. The rules (which methods and statuses, how a
//! reference resolves, what the same origin is) are policy's
//! ([`policy::invalidates`], [`policy::invalidation_urls`]); this file
//! gets them the response's fields, which the Exchange keeps as the head
//! ends (the head may have left its buffer long before the handler is
//! done).

use crate::cache::config::CacheRoute;
use crate::cache::{key, policy};
use crate::exchange::{Captured, Exchange};
use stoa_h1::Method;

/// Whether a method is unsafe (RFC 9110 §9.2.1): it may change the
/// resource, so a success invalidates what the cache holds of it.
pub(crate) fn unsafe_method(m: &Method) -> bool {
    policy::invalidates(m, 200)
}

/// Before the handler answers an unsafe request on `ex`: keep the
/// response's `Location` and `Content-Location` for [`after`].
pub(crate) fn before(ex: &mut Exchange<'_>) {
    ex.capture_locations();
}

/// After the handler answered an unsafe request on `ex`: a 2xx or 3xx
/// removes what is stored for the request's URL and for its same-origin
/// `Location` / `Content-Location`. How many objects went.
pub(crate) fn after(c: &CacheRoute, ex: &Exchange<'_>) -> usize {
    let req = ex.req();
    if !policy::invalidates(&req.method, ex.status()) {
        return 0;
    }
    urls(&key::url(req, ex.scheme()), ex.captured())
        .iter()
        .map(|u| c.zone.purge_url(u.as_bytes()))
        .sum()
}

/// The URLs (the store's form, `key::url`) that a success on `target`
/// invalidates, given the response's captured fields.
fn urls(target: &str, captured: Option<&Captured>) -> Vec<String> {
    let mut head = Vec::new();
    if let Some(c) = captured {
        for (name, v) in [
            (&b"Location"[..], &c.location),
            (b"Content-Location", &c.content_location),
        ] {
            if let Some(v) = v {
                head.extend_from_slice(name);
                head.extend_from_slice(b": ");
                head.extend_from_slice(v);
                head.extend_from_slice(b"\r\n");
            }
        }
    }
    policy::invalidation_urls(target, &head)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(location: Option<&str>, content_location: Option<&str>) -> Captured {
        let b = |v: Option<&str>| v.map(|s| Box::from(s.as_bytes()));
        Captured {
            location: b(location),
            content_location: b(content_location),
        }
    }

    const POST: &str = "http://example.com/blog/post/12";

    fn invalidated(location: &str) -> Vec<String> {
        urls(POST, Some(&captured(Some(location), None)))
    }

    /// RFC 9111 §4.4 with RFC 3986 §5.2: a Location relative to the
    /// request (absolute path, relative path, dot segments, a query
    /// alone) invalidates the URL it resolves to, besides the target.
    #[test]
    fn rfc9111_s4_4_relative_locations_resolve_against_the_request() {
        for (loc, url) in [
            ("/blog/", "http://example.com/blog/"),
            ("/a?b=1#frag", "http://example.com/a?b=1"),
            ("13", "http://example.com/blog/post/13"),
            ("../feed?x", "http://example.com/blog/feed?x"),
            ("?page=2", "http://example.com/blog/post/12?page=2"),
            ("/x/./y/../z", "http://example.com/x/z"),
        ] {
            assert_eq!(invalidated(loc), [POST, url], "{loc}");
        }
        // The target itself is named once.
        assert_eq!(invalidated("12"), [POST]);
    }

    /// RFC 9111 §4.4: absolute URLs invalidate only on the same origin
    /// (host in any case, the default port written or not); another
    /// host, port or scheme is ignored, so a response cannot evict
    /// another origin's objects.
    #[test]
    fn rfc9111_s4_4_other_hosts_are_ignored() {
        assert_eq!(
            invalidated("HTTP://Example.COM:80/blog/?p=1"),
            [POST, "http://example.com/blog/?p=1"]
        );
        assert_eq!(
            invalidated("//example.com/feed"),
            [POST, "http://example.com/feed"]
        );
        for other in [
            "http://other.example/blog/",
            "//other.example/blog/",
            "http://example.com:8080/blog/",
            "https://example.com/blog/",
            "mailto:someone@example.com",
        ] {
            assert_eq!(invalidated(other), [POST], "{other}");
        }
    }

    /// Both fields count (Location and Content-Location), and without a
    /// capture (the head never ended) the target alone is invalidated.
    #[test]
    fn rfc9111_s4_4_location_and_content_location_both_count() {
        let c = captured(Some("/list"), Some("/blog/post/12?v=2"));
        assert_eq!(
            urls(POST, Some(&c)),
            [
                POST,
                "http://example.com/list",
                "http://example.com/blog/post/12?v=2"
            ]
        );
        assert_eq!(urls(POST, None), [POST]);
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
