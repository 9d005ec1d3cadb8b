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
        assert_eq!(
            r.header("cache-status").as_deref(),
            Some("Stoa; fwd=bypass")
        );
    }
    assert_eq!(b.requests() - before, 3);
}
