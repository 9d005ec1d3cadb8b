//! The response cache end to end, first steps: a proxy route with a
//! cache zone in front of tests/proxy-peers/backend.py. The RFC-by-RFC
//! suite is tests/cache.rs.

mod common;
mod proxy_peer;

use common::*;
use proxy_peer::Backend;

/// Stoa with one `/app/` proxy route to `b`, cached in zone `z` with
/// `cache_opts` added to its `cache` table.
fn cached(dir: &TempDir, b: &Backend, cache_opts: &str) -> Server {
    dir.mkdir("www");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[pool]]\nname = \"app\"\nprotocol = \"http\"\naddress = [\"{}\"]\n\
             [[cache_zone]]\nname = \"z\"\nmemory = \"8 MiB\"\n\
             [[site]]\nroot = \"www\"\n[[site.route]]\nprefix = \"/app/\"\n\
             proxy = {{ pool = \"app\" }}\ncache = {{ zone = \"z\"{cache_opts} }}\n",
            b.addr
        ),
    );
    Server::with_config(&cfg)
}

fn get(s: &Server, path: &str) -> Response {
    s.request(
        format!("GET {path} HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

/// RFC 9111 §4: a stored response answers the second request for the
/// same URL without the application (`Cache-Status: Stoa; hit`, RFC
/// 9211 §2); the first was a miss that stored it.
#[test]
fn rfc_9111_4_a_second_get_is_a_hit_and_the_application_sees_one_request() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("cache-smoke");
    let s = cached(&dir, &b, ", default_ttl = \"60s\"");
    let before = b.requests();
    let first = get(&s, "/app/page?x=1");
    assert_eq!(first.status, 200, "{}", s.stderr());
    let cs = first.header("cache-status").unwrap_or_default();
    assert!(cs.contains("fwd=miss"), "{cs:?}");
    let second = get(&s, "/app/page?x=1");
    assert_eq!(second.status, 200, "{}", s.stderr());
    let cs = second.header("cache-status").unwrap_or_default();
    assert!(cs.starts_with("Stoa; hit"), "{cs:?}");
    assert_eq!(second.body, first.body);
    assert!(second.header("age").is_some());
    // One request for the page, and this one for the counter.
    assert_eq!(b.requests() - before, 2);
    // Another URL is another object.
    let other = get(&s, "/app/page?x=2");
    assert!(other
        .header("cache-status")
        .unwrap_or_default()
        .contains("fwd=miss"));
}

/// A request a bypass rule matches goes to the application and is
/// neither answered from nor stored in the cache (nginx
/// `proxy_cache_bypass`), with `Cache-Status: Stoa; fwd=bypass`.
#[test]
fn a_bypassed_request_goes_to_the_application_every_time() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("cache-bypass");
    let s = cached(
        &dir,
        &b,
        ", default_ttl = \"60s\", bypass = { headers = [\"X-No-Cache\"] }",
    );
    let req =
        b"GET /app/p HTTP/1.1\r\nHost: site.test\r\nX-No-Cache: 1\r\nConnection: close\r\n\r\n";
    let before = b.requests();
    for _ in 0..2 {
        let r = s.request(req);
        assert_eq!(r.status, 200, "{}", s.stderr());
        assert_eq!(r.header("cache-status"), Some("Stoa; fwd=bypass"));
    }
    assert_eq!(b.requests() - before, 3);
}

mod cache_support;
use cache_support::Origin;

/// Stoa with `/` proxied to the test origin and cached in zone `z`.
fn cached_origin(dir: &TempDir, o: &Origin, cache_opts: &str) -> Server {
    dir.mkdir("www");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[pool]]\nname = \"app\"\nprotocol = \"http\"\naddress = [\"{}\"]\n\
             [[cache_zone]]\nname = \"z\"\nmemory = \"8 MiB\"\n\
             [[site]]\nroot = \"www\"\n[[site.route]]\nprefix = \"/\"\n\
             proxy = {{ pool = \"app\" }}\ncache = {{ zone = \"z\"{cache_opts} }}\n",
            o.addr
        ),
    );
    Server::with_config(&cfg)
}

fn send(s: &Server, method: &str, target: &str, fields: &str) -> Response {
    s.request(
        format!("{method} {target} HTTP/1.1\r\nHost: t\r\n{fields}Connection: close\r\n\r\n")
            .as_bytes(),
    )
}

/// RFC 9111 §4.3.1 and §4.3.4: a stale object with a validator is
/// revalidated with a conditional GET; the application's 304 makes it
/// fresh again and the client gets the stored body (REVALIDATED).
#[test]
fn rfc_9111_4_3_4_a_304_from_the_application_revalidates_the_stored_object() {
    let o = Origin::start();
    let dir = TempDir::new("cache-reval");
    let s = cached_origin(&dir, &o, "");
    let t = "/r?cc=max-age=0&etag=v1";
    let first = send(&s, "GET", t, "");
    assert_eq!(first.status, 200, "{}", s.stderr());
    let second = send(&s, "GET", t, "");
    assert_eq!(second.status, 200, "{}", s.stderr());
    assert_eq!(second.body, first.body);
    let cs = second.header("cache-status").unwrap_or_default();
    assert!(cs.contains("fwd-status=304"), "{cs:?}");
    assert_eq!(o.count("/r"), 2);
}

/// RFC 9111 §4.3.5 and RFC 9110 §13.1.2, §14.2: HEAD, If-None-Match and
/// Range are answered from a stored GET without the application.
#[test]
fn rfc_9111_4_3_5_head_conditionals_and_ranges_come_from_the_stored_get() {
    let o = Origin::start();
    let dir = TempDir::new("cache-cond");
    let s = cached_origin(&dir, &o, "");
    let t = "/c?cc=max-age=60&etag=e1&size=1000";
    let full = send(&s, "GET", t, "");
    assert_eq!(full.status, 200, "{}", s.stderr());
    let mut c = Conn::connect(s.addr);
    c.send(format!("HEAD {t} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes());
    let head = c.read_head();
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(head.header("content-length"), Some("1000"));
    let nm = send(&s, "GET", t, "If-None-Match: \"e1\"\r\n");
    assert_eq!(nm.status, 304);
    let r = send(&s, "GET", t, "Range: bytes=10-19\r\n");
    assert_eq!(r.status, 206);
    assert_eq!(r.body, full.body[10..20].to_vec());
    assert_eq!(o.count("/c"), 1);
}

/// Varnish-style PURGE from an allowed address removes the stored URL
/// (200, then 404 when nothing is left); from others it is refused.
#[test]
fn purge_from_an_allowed_address_removes_the_stored_url() {
    let o = Origin::start();
    let dir = TempDir::new("cache-purge");
    let s = cached_origin(&dir, &o, ", purge = [\"127.0.0.1\"]");
    let t = "/p?cc=max-age=60";
    send(&s, "GET", t, "");
    let p = send(&s, "PURGE", t, "");
    assert_eq!(p.status, 200, "{}", s.stderr());
    assert_eq!(p.text().trim(), "{\"purged\": 1}");
    assert_eq!(send(&s, "PURGE", t, "").status, 404);
    let again = send(&s, "GET", t, "");
    assert!(again
        .header("cache-status")
        .unwrap_or_default()
        .contains("fwd=miss"));
    assert_eq!(o.count("/p"), 2);
}

/// RFC 9111 §4.4: a successful POST to a URL invalidates what is stored
/// for it.
#[test]
fn rfc_9111_4_4_a_successful_post_invalidates_the_stored_url() {
    let o = Origin::start();
    let dir = TempDir::new("cache-inval");
    let s = cached_origin(&dir, &o, "");
    let t = "/i?cc=max-age=60";
    send(&s, "GET", t, "");
    let post = send(&s, "POST", t, "Content-Length: 0\r\n");
    assert_eq!(post.status, 200, "{}", s.stderr());
    assert_eq!(post.header("cache-status"), Some("Stoa; fwd=method"));
    let again = send(&s, "GET", t, "");
    assert!(again
        .header("cache-status")
        .unwrap_or_default()
        .contains("fwd=miss"));
}

/// A miss is delivered as the application framed it (RFC 9112 §6.3): a
/// body whose length the application announced goes with that
/// `Content-Length`, not chunked; one the application chunked is chunked.
#[test]
fn a_miss_keeps_the_applications_content_length() {
    let o = Origin::start();
    let dir = TempDir::new("cache-length");
    let s = cached_origin(&dir, &o, "");
    let sized = send(&s, "GET", "/l?cc=max-age=60&size=5000", "");
    assert_eq!(sized.status, 200, "{}", s.stderr());
    assert!(sized
        .header("cache-status")
        .unwrap_or_default()
        .contains("fwd=miss"));
    assert_eq!(sized.header("content-length"), Some("5000"));
    assert_eq!(sized.header("transfer-encoding"), None);
    assert_eq!(sized.body.len(), 5000);
    let chunked = send(&s, "GET", "/k?cc=max-age=60&size=5000&chunked=1", "");
    assert_eq!(chunked.status, 200, "{}", s.stderr());
    assert_eq!(chunked.header("content-length"), None);
    assert_eq!(chunked.body.len(), 5000);
}
