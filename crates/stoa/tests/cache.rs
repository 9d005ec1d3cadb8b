//! The response cache end to end, point by point of RFC 9111 (HTTP
//! Caching), RFC 5861 (stale-while-revalidate, stale-if-error) and RFC
//! 9211 (Cache-Status), against tests/cache_support/origin.py: an
//! application whose every response the request's query chooses, which
//! names the request (target, key fields, its request count for the path)
//! in the body, so that a response served for the wrong request, or from
//! the wrong fetch, shows. The origin's `/__count` says how many requests
//! reached it.
//!
//! Each test has its own Stoa, origin and paths; waits are conditions
//! with deadlines, never sleeps. Staleness comes from the origin's `Age`
//! (a response that arrives already older than its max-age, RFC 9111
//! §4.2.3), not from waiting.

mod cache_support;
mod common;

use cache_support::*;
use common::*;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(10);

/// Percent-encodes a query value.
fn enc(s: &str) -> String {
    let mut o = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

/// Stoa in front of an origin, one cached `/` route.
struct Lab {
    // The server stops before the directory goes.
    stoa: Server,
    origin: Origin,
    _dir: TempDir,
    cfg: std::path::PathBuf,
}

/// What a lab is made of: the zone's extra keys, the route's `cache`
/// table's extra keys, the workers, the `[log]` table.
struct Setup<'a> {
    zone: &'a str,
    cache: &'a str,
    workers: usize,
    memory: &'a str,
    log: &'a str,
    tag: &'a str,
}

impl Default for Setup<'_> {
    fn default() -> Self {
        Setup {
            zone: "",
            cache: "",
            workers: 1,
            memory: "64M",
            log: "access = \"off\"",
            tag: "cache",
        }
    }
}

fn config_text(s: &Setup, origin: &Origin) -> String {
    format!(
        "listen = [\"127.0.0.1:0\"]\nworkers = {}\nuser = \"root\"\n\n[log]\n{}\n\n\
         [[cache_zone]]\nname = \"z\"\nmemory = \"{}\"\n{}\n\n\
         [[pool]]\nname = \"app\"\nprotocol = \"http\"\naddress = [\"{}\"]\n\n\
         [[site]]\nroot = \"www\"\n\n\
         [[site.route]]\nprefix = \"/stoa-status\"\nstatus = {{}}\n\n\
         [[site.route]]\nprefix = \"/\"\nproxy = {{ pool = \"app\" }}\n\
         cache = {{ zone = \"z\", purge = [\"127.0.0.1\"]{} }}\n",
        s.workers, s.log, s.memory, s.zone, origin.addr, s.cache
    )
}

impl Lab {
    fn new(s: Setup) -> Lab {
        let origin = Origin::start();
        let dir = TempDir::new(s.tag);
        dir.mkdir("www");
        let cfg = dir.write("stoa.toml", config_text(&s, &origin));
        let stoa = Server::with_config(&cfg);
        Lab {
            stoa,
            origin,
            _dir: dir,
            cfg,
        }
    }

    fn plain() -> Lab {
        Lab::new(Setup::default())
    }

    fn with_cache(cache: &str) -> Lab {
        Lab::new(Setup {
            cache,
            ..Setup::default()
        })
    }

    /// `method target` with `Host: t` and `headers`, on a new connection.
    fn send(&self, method: &str, target: &str, headers: &[&str]) -> Response {
        let req = request(method, target, headers);
        let mut c = self.stoa.connect();
        if method == "HEAD" {
            c.send(&req);
            c.read_head()
        } else {
            c.request(&req)
        }
    }

    fn get(&self, target: &str) -> Response {
        self.send("GET", target, &[])
    }

    fn get_with(&self, target: &str, headers: &[&str]) -> Response {
        self.send("GET", target, headers)
    }

    fn count(&self, path: &str) -> u64 {
        self.origin.count(path)
    }
}

fn cache_status(r: &Response) -> String {
    r.header("cache-status").unwrap_or_default().to_owned()
}

/// A hit: `Cache-Status: Stoa; hit...` (RFC 9211 §2.1), the stored body.
fn assert_hit(r: &Response) {
    let cs = cache_status(r);
    assert!(
        cs.starts_with("Stoa; hit"),
        "expected a hit, got {cs:?}: {r:?}"
    );
    assert!(
        r.header("age")
            .and_then(|a| a.parse::<u64>().ok())
            .is_some(),
        "a response from the cache has Age (RFC 9111 §5.1): {r:?}"
    );
}

/// Not a hit: the response was forwarded (`fwd=...`, RFC 9211 §2.2).
fn assert_fwd(r: &Response, what: &str) {
    let cs = cache_status(r);
    assert!(
        cs.starts_with("Stoa;") && cs.contains(&format!("fwd={what}")),
        "expected fwd={what}, got {cs:?}: {r:?}"
    );
}

/// The `n=` of the origin's body line: which of the origin's answers for
/// this path the client got.
fn fetch_no(r: &Response) -> u64 {
    let t = r.text();
    let line = t.lines().next().unwrap_or("");
    line.rsplit_once(" n=")
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or_else(|| panic!("not an origin body: {r:?}"))
}

/// The target the origin answered, from the body's first line.
fn answered_target(r: &Response) -> String {
    let t = r.text();
    let line = t.lines().next().unwrap_or("");
    let mut p = line.split(' ');
    let _method = p.next();
    p.next().unwrap_or("").to_owned()
}

// ---------------------------------------------------------------------------
// RFC 9111 §3: storing responses

/// RFC 9111 §3 and §4: a response with explicit freshness is stored, and
/// the next request for the URL is answered from the cache, with the same
/// bytes, without the origin.
#[test]
fn rfc9111_s3_a_fresh_response_is_stored_and_reused_without_the_origin() {
    let lab = Lab::plain();
    let t = "/s3/a?cc=max-age%3D60&size=3000";
    let first = lab.get(t);
    assert_eq!(first.status, 200, "{}", lab.stoa.stderr());
    assert_fwd(&first, "miss");
    assert!(cache_status(&first).contains("stored"), "{first:?}");
    let second = lab.get(t);
    assert_hit(&second);
    assert_eq!(second.body, first.body);
    assert_eq!(fetch_no(&second), 1);
    assert_eq!(lab.count("/s3/a"), 1);
    // The origin's own fields come through unchanged.
    assert_eq!(second.header("cache-control"), Some("max-age=60"));
    assert_eq!(second.header("x-origin-count"), Some("1"));
}

/// RFC 9111 §5.2.2.5: `no-store` is never stored.
#[test]
fn rfc9111_s5_2_2_5_no_store_responses_are_never_stored() {
    let lab = Lab::plain();
    let t = "/ns/a?cc=no-store%2C%20max-age%3D60";
    for n in 1..=3 {
        let r = lab.get(t);
        assert_eq!(fetch_no(&r), n, "{r:?}");
        assert_fwd(&r, "miss");
        assert!(!cache_status(&r).contains("stored"), "{r:?}");
    }
    assert_eq!(lab.count("/ns/a"), 3);
}

/// RFC 9111 §5.2.2.7: a shared cache does not store `private`.
#[test]
fn rfc9111_s5_2_2_7_private_responses_are_not_stored_by_a_shared_cache() {
    let lab = Lab::plain();
    let t = "/pr/a?cc=private%2C%20max-age%3D60";
    assert_eq!(fetch_no(&lab.get(t)), 1);
    assert_eq!(fetch_no(&lab.get(t)), 2);
}

/// RFC 9111 §3.5: a response to a request with Authorization is stored
/// only when it says `public`, `s-maxage` or `must-revalidate`.
#[test]
fn rfc9111_s3_5_a_response_to_an_authorized_request_is_stored_only_when_it_says_so() {
    let lab = Lab::plain();
    let auth = ["Authorization: Basic YWxpY2U6c2VjcmV0"];
    let t = "/auth/a?cc=max-age%3D60";
    assert_eq!(fetch_no(&lab.get_with(t, &auth)), 1);
    assert_eq!(fetch_no(&lab.get_with(t, &auth)), 2, "stored without leave");
    let t = "/auth/b?cc=public%2C%20max-age%3D60";
    assert_eq!(fetch_no(&lab.get_with(t, &auth)), 1);
    let r = lab.get_with(t, &auth);
    assert_hit(&r);
    let t = "/auth/c?cc=s-maxage%3D60";
    assert_eq!(fetch_no(&lab.get_with(t, &auth)), 1);
    assert_hit(&lab.get_with(t, &auth));
}

/// A response that sets a cookie is not stored (nginx and Varnish do the
/// same: a session cookie handed to every reader is a leak).
#[test]
fn a_response_with_set_cookie_is_not_stored_as_nginx_and_varnish_do() {
    let lab = Lab::plain();
    let t = "/cookie/a?cc=max-age%3D60&cookie=sid%3D42";
    let first = lab.get(t);
    assert_eq!(first.header("set-cookie"), Some("sid=42"));
    let second = lab.get(t);
    assert_eq!(fetch_no(&second), 2);
    assert_eq!(lab.count("/cookie/a"), 2);
}

/// RFC 9111 §3 and §4.2.2: a status that is not heuristically cacheable
/// (500) is not reused without explicit freshness, Last-Modified or not;
/// a 404 (heuristically cacheable, RFC 9110 §15.1) with max-age is.
#[test]
fn rfc9111_s4_2_2_only_heuristically_cacheable_statuses_get_a_heuristic_lifetime() {
    let lab = Lab::plain();
    let t = "/st/500?status=500&lm=100000";
    assert_eq!(fetch_no(&lab.get(t)), 1);
    assert_eq!(fetch_no(&lab.get(t)), 2);
    let t = "/st/404?status=404&cc=max-age%3D60";
    let r = lab.get(t);
    assert_eq!(r.status, 404);
    let r = lab.get(t);
    assert_eq!(r.status, 404);
    assert_hit(&r);
    assert_eq!(lab.count("/st/404"), 1);
}

/// RFC 9111 §4.2.2: without explicit freshness, a 200 with Last-Modified
/// gets a heuristic lifetime (10 % of its age, as the RFC suggests); one
/// with neither freshness nor validator is not reused (`default_ttl` 0).
#[test]
fn rfc9111_s4_2_2_a_heuristic_lifetime_from_last_modified_and_none_without_it() {
    let lab = Lab::plain();
    // Modified 100,000 s ago: about 10,000 s fresh.
    let t = "/heur/lm?lm=100000";
    lab.get(t);
    let r = lab.get(t);
    assert_hit(&r);
    let t = "/heur/none";
    assert_eq!(fetch_no(&lab.get(t)), 1);
    assert_eq!(fetch_no(&lab.get(t)), 2);
}

/// The route's `default_ttl` is the lifetime of responses that give none
/// (nginx `proxy_cache_valid`); explicit freshness still wins.
#[test]
fn default_ttl_is_the_lifetime_of_responses_without_one_like_proxy_cache_valid() {
    let lab = Lab::with_cache(", default_ttl = \"60s\"");
    let t = "/dttl/a";
    lab.get(t);
    assert_hit(&lab.get(t));
    let t = "/dttl/b?cc=max-age%3D0";
    assert_eq!(fetch_no(&lab.get(t)), 1);
    assert_eq!(fetch_no(&lab.get(t)), 2);
}

// ---------------------------------------------------------------------------
// RFC 9111 §4.2: freshness

/// RFC 9111 §5.2.2.10 and §4.2.1: a shared cache takes `s-maxage` before
/// `max-age`.
#[test]
fn rfc9111_s5_2_2_10_s_maxage_wins_over_max_age_in_a_shared_cache() {
    let lab = Lab::plain();
    let t = "/fr/s1?cc=max-age%3D0%2C%20s-maxage%3D60";
    lab.get(t);
    assert_hit(&lab.get(t));
    let t = "/fr/s2?cc=max-age%3D60%2C%20s-maxage%3D0";
    lab.get(t);
    assert_eq!(fetch_no(&lab.get(t)), 2);
}

/// RFC 9111 §5.3 and §4.2.1: `max-age` wins over `Expires`; `Expires` in
/// the future alone gives freshness, in the past or invalid none.
#[test]
fn rfc9111_s5_3_max_age_wins_over_expires_and_an_invalid_expires_is_stale() {
    let lab = Lab::plain();
    let cases = [
        ("/ex/a?expires=60", true),
        ("/ex/b?expires=-60", false),
        ("/ex/c?expires=60&cc=max-age%3D0", false),
        ("/ex/d?expires=-60&cc=max-age%3D60", true),
        ("/ex/e?expires=raw%3A0", false),
    ];
    for (t, fresh) in cases {
        let path = t.split('?').next().unwrap_or(t);
        lab.get(t);
        let r = lab.get(t);
        if fresh {
            assert_hit(&r);
            assert_eq!(lab.count(path), 1, "{t}");
        } else {
            assert_eq!(lab.count(path), 2, "{t} was reused: {r:?}");
        }
    }
}

/// RFC 9111 §4.2.3: the age counts the upstream's `Age` and the time the
/// response spent here; one older than its max-age on arrival is stale at
/// once.
#[test]
fn rfc9111_s4_2_3_age_counts_upstream_age_and_a_response_can_arrive_stale() {
    let lab = Lab::plain();
    let t = "/age/a?cc=max-age%3D600&age=100";
    let t0 = Instant::now();
    lab.get(t);
    let r = lab.get(t);
    assert_hit(&r);
    let age: u64 = r.header("age").and_then(|a| a.parse().ok()).unwrap_or(0);
    let spent = t0.elapsed().as_secs() + 1;
    assert!(
        (100..=100 + spent).contains(&age),
        "Age {age} (upstream 100, {spent} s here)"
    );
    // Older than its lifetime when it arrives: never served fresh.
    let t = "/age/b?cc=max-age%3D60&age=100";
    lab.get(t);
    assert_eq!(fetch_no(&lab.get(t)), 2);
    // The same from an old Date (apparent age, §4.2.3).
    let t = "/age/c?cc=max-age%3D60&date=-100";
    lab.get(t);
    assert_eq!(fetch_no(&lab.get(t)), 2);
}

// ---------------------------------------------------------------------------
// RFC 9111 §5.2.1: the request's Cache-Control

/// RFC 9111 §5.2.1.4: a request's `no-cache` is not answered from the
/// cache without the origin.
#[test]
fn rfc9111_s5_2_1_4_a_request_no_cache_goes_to_the_origin() {
    let lab = Lab::plain();
    let t = "/rq/nc?cc=max-age%3D60";
    lab.get(t);
    lab.get_with(t, &["Cache-Control: no-cache"]);
    assert_eq!(lab.count("/rq/nc"), 2);
    // And a plain request after it is a hit (of one of the two).
    assert_hit(&lab.get(t));
    assert_eq!(lab.count("/rq/nc"), 2);
}

/// RFC 9111 §5.2.1.1: a request's `max-age` bounds the age it accepts.
#[test]
fn rfc9111_s5_2_1_1_a_request_max_age_bounds_the_age_it_accepts() {
    let lab = Lab::plain();
    let t = "/rq/ma?cc=max-age%3D600&age=100";
    lab.get(t);
    assert_hit(&lab.get_with(t, &["Cache-Control: max-age=3600"]));
    assert_eq!(lab.count("/rq/ma"), 1);
    lab.get_with(t, &["Cache-Control: max-age=50"]);
    assert_eq!(lab.count("/rq/ma"), 2);
}

/// RFC 9111 §5.2.1.3: `min-fresh` refuses a response that will not stay
/// fresh that long.
#[test]
fn rfc9111_s5_2_1_3_min_fresh_refuses_a_response_stale_too_soon() {
    let lab = Lab::plain();
    let t = "/rq/mf?cc=max-age%3D60";
    lab.get(t);
    assert_hit(&lab.get_with(t, &["Cache-Control: min-fresh=10"]));
    lab.get_with(t, &["Cache-Control: min-fresh=120"]);
    assert_eq!(lab.count("/rq/mf"), 2);
}

/// RFC 9111 §5.2.1.2: `max-stale` accepts a stale response, within its
/// bound.
#[test]
fn rfc9111_s5_2_1_2_max_stale_accepts_a_stale_response_within_its_bound() {
    let lab = Lab::plain();
    // Stale by 90 s on arrival.
    let t = "/rq/ms?cc=max-age%3D10&age=100";
    lab.get(t);
    let r = lab.get_with(t, &["Cache-Control: max-stale=1000"]);
    assert_eq!(fetch_no(&r), 1, "{r:?}");
    assert_hit(&r);
    assert_eq!(lab.count("/rq/ms"), 1);
    let r = lab.get_with(t, &["Cache-Control: max-stale=10"]);
    assert_eq!(fetch_no(&r), 2, "{r:?}");
}

/// RFC 9111 §5.2.1.7: `only-if-cached` with nothing stored is a 504 and
/// never reaches the origin; with something stored, it is answered.
#[test]
fn rfc9111_s5_2_1_7_only_if_cached_is_504_when_nothing_is_stored() {
    let lab = Lab::plain();
    let t = "/rq/oic?cc=max-age%3D60";
    let r = lab.get_with(t, &["Cache-Control: only-if-cached"]);
    assert_eq!(r.status, 504, "{r:?}");
    let cs = cache_status(&r);
    assert!(
        cs.contains("fwd=uri-miss") && cs.contains("only-if-cached"),
        "{cs:?}"
    );
    assert_eq!(lab.count("/rq/oic"), 0);
    lab.get(t);
    let r = lab.get_with(t, &["Cache-Control: only-if-cached"]);
    assert_eq!(r.status, 200);
    assert_hit(&r);
}

// ---------------------------------------------------------------------------
// RFC 9111 §4.3: validation

/// RFC 9111 §4.3.1, §4.3.3 and §4.3.4: a stale response with an ETag is
/// revalidated with If-None-Match; the origin's 304 updates the stored
/// header fields and the stored body is reused.
#[test]
fn rfc9111_s4_3_4_a_304_updates_the_stored_fields_and_keeps_the_body() {
    let lab = Lab::plain();
    let t = format!(
        "/val/etag?cc=max-age%3D10&age=100&etag=v1&size=2000&h304={}&h304={}&h304={}",
        enc("X-Updated: yes"),
        enc("Cache-Control: max-age=60"),
        enc("Age: 0")
    );
    let first = lab.get(&t);
    assert_eq!(fetch_no(&first), 1);
    let second = lab.get(&t);
    assert_eq!(second.status, 200, "{second:?}");
    assert_eq!(second.body, first.body, "the stored body");
    assert_eq!(second.header("x-updated"), Some("yes"), "{second:?}");
    assert_eq!(second.header("x-origin-count"), Some("2"));
    let cs = cache_status(&second);
    assert!(
        cs.contains("fwd=stale") && cs.contains("fwd-status=304"),
        "{cs:?}"
    );
    assert_eq!(lab.count("/val/etag"), 2);
    // Stored with the 304's fields: fresh for 60 s now.
    let third = lab.get(&t);
    assert_hit(&third);
    assert_eq!(third.header("x-updated"), Some("yes"));
    assert_eq!(third.header("cache-control"), Some("max-age=60"));
    assert_eq!(third.body, first.body);
    assert_eq!(lab.count("/val/etag"), 2);
}

/// RFC 9111 §5.2.1.5 and §4.3.4: a request with `no-store` that causes
/// a revalidation is answered from the stored object, which a 304 leaves
/// as it was (nothing of a response to it is stored) and never removes:
/// a client cannot evict others' objects with `no-cache, no-store`.
#[test]
fn rfc9111_s5_2_1_5_a_no_store_revalidation_leaves_the_stored_object() {
    let lab = Lab::plain();
    let t = "/val/nostore?cc=max-age%3D10&age=100&etag=v1&size=1200";
    let first = lab.get(t);
    assert!(cache_status(&first).contains("stored"), "{first:?}");
    let r = lab.get_with(t, &["Cache-Control: no-cache, no-store"]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, first.body);
    assert_eq!(lab.count("/val/nostore"), 2, "validated");
    // Still stored: the next request revalidates it (304), no full miss.
    let r = lab.get(t);
    assert_eq!(r.body, first.body);
    let cs = cache_status(&r);
    assert!(
        cs.contains("fwd=stale") && cs.contains("fwd-status=304"),
        "{cs:?}"
    );
}

/// RFC 9111 §4.3.1: with only Last-Modified, revalidation sends
/// If-Modified-Since, and the 304 keeps the body.
#[test]
fn rfc9111_s4_3_1_revalidation_with_last_modified_uses_if_modified_since() {
    let lab = Lab::plain();
    let t = "/val/lm?cc=max-age%3D10&age=100&lm=5000&size=1500";
    let first = lab.get(t);
    let second = lab.get(t);
    assert_eq!(second.body, first.body);
    assert_eq!(second.header("x-origin-count"), Some("2"), "{second:?}");
    assert!(
        cache_status(&second).contains("fwd-status=304"),
        "{second:?}"
    );
}

/// RFC 9111 §4.3.2: a conditional request is answered 304 from a fresh
/// stored response whose validator matches, 200 otherwise.
#[test]
fn rfc9111_s4_3_2_if_none_match_and_if_modified_since_are_answered_from_the_cache() {
    let lab = Lab::plain();
    let t = "/cond/a?cc=max-age%3D60&etag=v1&lm=1000";
    let full = lab.get(t);
    let r = lab.get_with(t, &["If-None-Match: \"v1\""]);
    assert_eq!(r.status, 304, "{r:?}");
    assert_eq!(r.header("etag"), Some("\"v1\""));
    let r = lab.get_with(t, &["If-None-Match: \"other\""]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, full.body);
    let lm = full.header("last-modified").unwrap_or_default().to_owned();
    let r = lab.get_with(t, &[&format!("If-Modified-Since: {lm}")]);
    assert_eq!(r.status, 304, "{r:?}");
    assert_eq!(lab.count("/cond/a"), 1);
}

/// RFC 9111 §5.2.2.2: a stale `must-revalidate` response is not served,
/// even to a request with `max-stale`; when the origin fails, the client
/// gets an error (504 or the origin's), never the stale body.
#[test]
fn rfc9111_s5_2_2_2_must_revalidate_is_never_served_stale() {
    let lab = Lab::plain();
    let t = "/mr/a?cc=max-age%3D10%2C%20must-revalidate&age=100&etag=v1&fail_after=1";
    assert_eq!(lab.get(t).status, 200);
    let r = lab.get_with(t, &["Cache-Control: max-stale=1000"]);
    assert!(r.status >= 500, "stale served: {r:?}");
    assert_eq!(lab.count("/mr/a"), 2);
}

/// RFC 9111 §5.2.2.8: `proxy-revalidate` is `must-revalidate` for a
/// shared cache.
#[test]
fn rfc9111_s5_2_2_8_proxy_revalidate_binds_a_shared_cache() {
    let lab = Lab::plain();
    let t = "/mr/p?cc=max-age%3D10%2C%20proxy-revalidate&age=100&etag=v1&fail_after=1";
    assert_eq!(lab.get(t).status, 200);
    let r = lab.get_with(t, &["Cache-Control: max-stale=1000"]);
    assert!(r.status >= 500, "stale served: {r:?}");
}

/// RFC 9111 §5.2.2.4: a `no-cache` response is stored but every reuse is
/// validated first.
#[test]
fn rfc9111_s5_2_2_4_a_no_cache_response_is_validated_before_each_reuse() {
    let lab = Lab::plain();
    let t = "/nc/a?cc=no-cache%2C%20max-age%3D60&etag=v1&size=800";
    let first = lab.get(t);
    for n in 2..=3 {
        let r = lab.get(t);
        assert_eq!(r.body, first.body);
        assert_eq!(lab.count("/nc/a"), n);
        assert_eq!(r.header("x-origin-count"), Some(n.to_string().as_str()));
    }
}

/// RFC 9111 §5.2.2.4: `no-cache="Field"` lets the response be reused
/// without the named field (or validated: either is allowed), never with
/// it.
#[test]
fn rfc9111_s5_2_2_4_no_cache_with_field_names_never_reuses_those_fields() {
    let lab = Lab::plain();
    let t = format!(
        "/nc/f?cc={}&hdr={}",
        enc("no-cache=\"X-Secret\", max-age=60"),
        enc("X-Secret: s1")
    );
    assert_eq!(lab.get(&t).header("x-secret"), Some("s1"));
    let r = lab.get(&t);
    if lab.count("/nc/f") == 1 {
        assert_eq!(r.header("x-secret"), None, "reused with the field: {r:?}");
    }
}

// ---------------------------------------------------------------------------
// RFC 9111 §4.1: Vary

/// RFC 9111 §4.1: `Vary` keeps one stored response per value of the
/// named request fields (secondary keys); each request gets its own.
#[test]
fn rfc9111_s4_1_vary_stores_one_variant_per_accept_encoding() {
    let lab = Lab::plain();
    let t = "/vary/ae?cc=max-age%3D60&vary=Accept-Encoding";
    let gz = ["Accept-Encoding: gzip"];
    let br = ["Accept-Encoding: br"];
    assert!(lab
        .get_with(t, &gz)
        .text()
        .contains("accept-encoding: gzip\n"));
    assert!(lab
        .get_with(t, &br)
        .text()
        .contains("accept-encoding: br\n"));
    for _ in 0..2 {
        let r = lab.get_with(t, &gz);
        assert_hit(&r);
        assert!(r.text().contains("accept-encoding: gzip\n"), "{r:?}");
        let r = lab.get_with(t, &br);
        assert_hit(&r);
        assert!(r.text().contains("accept-encoding: br\n"), "{r:?}");
    }
    // A request without the field is another variant.
    let r = lab.get(t);
    assert!(!r.text().contains("accept-encoding"), "{r:?}");
    assert_eq!(lab.count("/vary/ae"), 3);
}

/// RFC 9211 §2.2: a request for a URL with stored variants, none of them
/// its own, says `fwd=vary-miss`; a URL with nothing stored says `miss`.
#[test]
fn rfc9211_s2_2_a_miss_among_stored_variants_is_a_vary_miss() {
    let lab = Lab::plain();
    let t = "/vary/cs?cc=max-age%3D60&vary=Accept-Encoding";
    let r = lab.get_with(t, &["Accept-Encoding: gzip"]);
    assert_eq!(cache_status(&r), "Stoa; fwd=miss; stored");
    let r = lab.get_with(t, &["Accept-Encoding: br"]);
    assert_eq!(cache_status(&r), "Stoa; fwd=vary-miss; stored");
    assert_hit(&lab.get_with(t, &["Accept-Encoding: br"]));
}

/// RFC 9111 §4.1: values that differ only in whitespace (and, for a
/// list of tokens like Accept-Encoding, in case) select the same variant.
#[test]
fn rfc9111_s4_1_vary_normalises_whitespace_and_token_case() {
    let lab = Lab::plain();
    let t = "/vary/norm?cc=max-age%3D60&vary=Accept-Encoding";
    lab.get_with(t, &["Accept-Encoding: gzip, deflate"]);
    assert_hit(&lab.get_with(t, &["Accept-Encoding: gzip,deflate"]));
    assert_hit(&lab.get_with(t, &["Accept-Encoding:   gzip ,  deflate"]));
    assert_hit(&lab.get_with(t, &["Accept-Encoding: GZIP, Deflate"]));
    assert_eq!(lab.count("/vary/norm"), 1);
}

/// RFC 9111 §4.1: `Vary: *` never matches.
#[test]
fn rfc9111_s4_1_vary_star_never_matches() {
    let lab = Lab::plain();
    let t = "/vary/star?cc=max-age%3D60&vary=*";
    lab.get(t);
    lab.get(t);
    assert_eq!(lab.count("/vary/star"), 2);
}

/// RFC 9111 §4.1: a variant stored for a request without the varying
/// field answers only requests that lack it too; several fields in Vary
/// all count.
#[test]
fn rfc9111_s4_1_vary_on_a_missing_field_and_on_several_fields() {
    let lab = Lab::plain();
    let t = "/vary/dev?cc=max-age%3D60&vary=X-Device%2C%20Accept-Language";
    lab.get(t);
    let m = lab.get_with(t, &["X-Device: mobile"]);
    assert_eq!(fetch_no(&m), 2);
    let mfr = lab.get_with(t, &["X-Device: mobile", "Accept-Language: fr"]);
    assert_eq!(fetch_no(&mfr), 3);
    assert_eq!(fetch_no(&lab.get(t)), 1);
    assert_eq!(fetch_no(&lab.get_with(t, &["X-Device: mobile"])), 2);
    let r = lab.get_with(t, &["Accept-Language: fr", "X-Device: mobile"]);
    assert_eq!(fetch_no(&r), 3);
    assert_eq!(lab.count("/vary/dev"), 3);
}

// ---------------------------------------------------------------------------
// RFC 9111 §4.4: invalidation

/// RFC 9111 §4.4: a successful POST invalidates the stored responses of
/// its URL.
#[test]
fn rfc9111_s4_4_a_successful_post_invalidates_its_url() {
    let lab = Lab::plain();
    let t = "/inv/p?cc=max-age%3D60";
    lab.get(t);
    assert_hit(&lab.get(t));
    let r = lab.send("POST", t, &["Content-Length: 0"]);
    assert_eq!(r.status, 200);
    assert_fwd(&r, "method");
    let r = lab.get(t);
    assert_eq!(fetch_no(&r), 3, "not invalidated: {r:?}");
}

/// RFC 9111 §4.4: a POST that fails (5xx) invalidates nothing.
#[test]
fn rfc9111_s4_4_a_failed_post_invalidates_nothing() {
    let lab = Lab::plain();
    // The origin answers 503 from its second request for the path on.
    let t = "/inv/h?cc=max-age%3D60&fail_after=1&fail_status=503";
    lab.get(t);
    let r = lab.send("POST", t, &["Content-Length: 0"]);
    assert_eq!(r.status, 503);
    let r = lab.get(t);
    assert_hit(&r);
    assert_eq!(fetch_no(&r), 1);
}

/// RFC 9111 §4.4: a successful POST also invalidates the same-host URLs
/// in its Location and Content-Location; another host's are left alone.
#[test]
fn rfc9111_s4_4_a_post_invalidates_its_same_host_location_and_content_location() {
    let lab = Lab::plain();
    let page = "/inv/page?cc=max-age%3D60";
    let other = "/inv/other?cc=max-age%3D60";
    let foreign = "/inv/foreign?cc=max-age%3D60";
    for t in [page, other, foreign] {
        lab.get(t);
        assert_hit(&lab.get(t));
    }
    let post = format!(
        "/inv/form?status=303&loc={}&cloc={}",
        enc(page),
        enc(&format!("http://t{other}"))
    );
    let r = lab.send("POST", &post, &["Content-Length: 0"]);
    assert_eq!(r.status, 303);
    assert_eq!(fetch_no(&lab.get(page)), 2, "Location not invalidated");
    assert_eq!(
        fetch_no(&lab.get(other)),
        2,
        "Content-Location not invalidated"
    );
    let post = format!(
        "/inv/form2?status=303&loc={}",
        enc(&format!("http://elsewhere.example{foreign}"))
    );
    lab.send("POST", &post, &["Content-Length: 0"]);
    assert_hit(&lab.get(foreign));
}

// ---------------------------------------------------------------------------
// HEAD, ranges

/// RFC 9110 §9.3.2 with RFC 9111 §4: HEAD is answered from a stored GET
/// (same fields, no body), and a HEAD on a cold URL fills it with a GET.
#[test]
fn head_is_answered_from_a_stored_get_and_a_cold_head_fills_with_a_get() {
    let lab = Lab::plain();
    let t = "/head/a?cc=max-age%3D60&size=4000";
    let g = lab.get(t);
    let h = lab.send("HEAD", t, &[]);
    assert_eq!(h.status, 200);
    assert_hit(&h);
    assert_eq!(h.header("content-length"), Some("4000"));
    assert_eq!(h.header("x-origin-count"), g.header("x-origin-count"));
    assert_eq!(lab.count("/head/a"), 1);
    let t = "/head/cold?cc=max-age%3D60&size=4000";
    let h = lab.send("HEAD", t, &[]);
    assert_eq!(h.status, 200);
    let g = lab.get(t);
    assert_hit(&g);
    assert!(g.text().starts_with("GET "), "filled with a GET: {g:?}");
    assert_eq!(g.body.len(), 4000);
    assert_eq!(lab.count("/head/cold"), 1);
}

/// RFC 9111 §3.3 and RFC 9110 §14: a Range request is answered 206 from
/// the stored full response; the origin is asked for the whole of it
/// (no Range), once.
#[test]
fn a_range_is_answered_206_from_the_stored_full_response() {
    let lab = Lab::plain();
    let t = "/range/a?cc=max-age%3D60&size=5000";
    let r = lab.get_with(t, &["Range: bytes=100-199"]);
    assert!(r.status == 206 || r.status == 200, "{r:?}");
    let full = lab.get(t);
    assert_hit(&full);
    assert_eq!(full.body.len(), 5000);
    assert!(!full.text().contains("range:"), "Range sent to the origin");
    assert!(filler_ok(&full.body, text_end(&full.body)));
    let r = lab.get_with(t, &["Range: bytes=1000-1999"]);
    assert_eq!(r.status, 206, "{r:?}");
    assert_eq!(r.header("content-range"), Some("bytes 1000-1999/5000"));
    assert_eq!(r.body, &full.body[1000..2000]);
    let r = lab.get_with(t, &["Range: bytes=-10"]);
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &full.body[4990..]);
    let r = lab.get_with(t, &["Range: bytes=9000-"]);
    assert_eq!(r.status, 416, "{r:?}");
    assert_eq!(lab.count("/range/a"), 1);
}

// ---------------------------------------------------------------------------
// RFC 5861

/// RFC 5861 §3: within stale-while-revalidate a stale response is served
/// at once while the cache refreshes it in the background; the next
/// request gets the refreshed one.
#[test]
fn rfc5861_s3_stale_while_revalidate_serves_at_once_and_refreshes_behind() {
    let lab = Lab::plain();
    // Stale on arrival, servable stale for 600 s; refreshes take 2 s.
    let t = "/swr/a?cc=max-age%3D1%2C%20stale-while-revalidate%3D600&age=5&delay=2&slow_after=1";
    assert_eq!(fetch_no(&lab.get(t)), 1);
    let t0 = Instant::now();
    let r = lab.get(t);
    let took = t0.elapsed();
    assert_eq!(fetch_no(&r), 1);
    assert!(
        took < Duration::from_millis(1500),
        "waited {took:?} for the refresh"
    );
    let cs = cache_status(&r);
    assert!(
        cs.starts_with("Stoa; hit") && cs.contains("stale-while-revalidate"),
        "{cs:?}"
    );
    assert!(
        lab.origin.wait_completed("/swr/a", 2, WAIT),
        "no background refresh"
    );
    // The refreshed response replaced the stored one.
    let ok = wait_for(WAIT, || {
        let r = lab.get_with(t, &["Cache-Control: max-stale=100000"]);
        fetch_no(&r) >= 2
    });
    assert!(ok, "the refreshed response was not stored");
}

/// RFC 5861 §4: within stale-if-error an error from the origin (5xx, or
/// no answer at all) is replaced with the stale response.
#[test]
fn rfc5861_s4_stale_if_error_serves_stale_when_the_origin_fails() {
    let lab = Lab::plain();
    let t = "/sie/a?cc=max-age%3D1%2C%20stale-if-error%3D600&age=5&etag=v1&fail_after=1";
    let first = lab.get(t);
    let r = lab.get(t);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, first.body);
    assert_eq!(lab.count("/sie/a"), 2);
    let t = "/sie/b?cc=max-age%3D1%2C%20stale-if-error%3D600&age=5&fail_after=1&fail_mode=close";
    let first = lab.get(t);
    let r = lab.get(t);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, first.body);
    // Without stale-if-error the error goes through.
    let t = "/sie/c?cc=max-age%3D1&age=5&fail_after=1";
    lab.get(t);
    assert_eq!(lab.get(t).status, 500);
}

/// The route's `stale_if_error` applies to responses that give none
/// (RFC 5861 §4's extension as a cache default, as Varnish's grace).
#[test]
fn rfc5861_the_routes_stale_if_error_is_the_default() {
    let lab = Lab::with_cache(", stale_if_error = \"600s\"");
    let t = "/sie/d?cc=max-age%3D1&age=5&fail_after=1&fail_status=502";
    let first = lab.get(t);
    let r = lab.get(t);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, first.body);
}

// ---------------------------------------------------------------------------
// RFC 9211: Cache-Status

/// RFC 9211: every response of a cached route says what the cache did.
#[test]
fn rfc9211_every_response_of_a_cached_route_has_cache_status() {
    let lab = Lab::with_cache(", bypass = { headers = [\"X-No-Cache\"] }");
    let t = "/cs/a?cc=max-age%3D60";
    let r = lab.get(t);
    assert_eq!(cache_status(&r), "Stoa; fwd=miss; stored");
    let r = lab.get(t);
    let cs = cache_status(&r);
    assert!(cs.starts_with("Stoa; hit; ttl="), "{cs:?}");
    let ttl: i64 = cs
        .split("ttl=")
        .nth(1)
        .and_then(|v| v.split(';').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(-1);
    assert!((55..=60).contains(&ttl), "{cs:?}");
    assert_fwd(&lab.get("/cs/b?cc=no-store"), "miss");
    assert_fwd(&lab.send("POST", "/cs/c", &["Content-Length: 0"]), "method");
    assert_eq!(
        cache_status(&lab.get_with(t, &["X-No-Cache: 1"])),
        "Stoa; fwd=bypass"
    );
    let r = lab.get("/cs/e?status=404");
    assert!(cache_status(&r).starts_with("Stoa;"), "{r:?}");
}

// ---------------------------------------------------------------------------
// For applications as they are: bypass, key, lifetimes

/// A bypass cookie (WordPress's `wordpress_logged_in_*`), argument or
/// header sends the request to the origin and stores nothing (nginx
/// `proxy_cache_bypass` + `proxy_no_cache`).
#[test]
fn bypass_rules_skip_lookup_and_store_like_nginx_proxy_cache_bypass() {
    let lab = Lab::with_cache(
        ", bypass = { cookies = [\"wordpress_logged_in_*\"], args = [\"nocache\"], headers = [\"X-No-Cache\"] }",
    );
    let t = "/by/a?cc=max-age%3D60";
    assert_eq!(fetch_no(&lab.get(t)), 1);
    let r = lab.get_with(t, &["Cookie: a=1; wordpress_logged_in_abc=alice"]);
    assert_eq!(fetch_no(&r), 2);
    assert_eq!(cache_status(&r), "Stoa; fwd=bypass");
    let r = lab.get_with(t, &["X-No-Cache: yes"]);
    assert_eq!(fetch_no(&r), 3);
    // The bypassed responses were not stored.
    assert_eq!(fetch_no(&lab.get(t)), 1);
    let t = "/by/b?cc=max-age%3D60&nocache=1";
    assert_eq!(fetch_no(&lab.get(t)), 1);
    assert_eq!(fetch_no(&lab.get(t)), 2);
    // A cookie not in the list does not bypass.
    let r = lab.get_with(
        "/by/a?cc=max-age%3D60",
        &["Cookie: wordpress_test_cookie=1"],
    );
    assert_hit(&r);
}

/// The key may hold a request header and a cookie: each value is its own
/// object (nginx `proxy_cache_key "$scheme$host$request_uri$cookie_lang"`).
#[test]
fn the_key_can_hold_a_header_and_a_cookie() {
    let lab = Lab::with_cache(
        ", key = [\"scheme\", \"host\", \"path\", \"query\", \"header:X-Device\", \"cookie:lang\"]",
    );
    let t = "/key/a?cc=max-age%3D60";
    let cases: [&[&str]; 4] = [
        &["X-Device: mobile"],
        &["X-Device: desktop"],
        &["X-Device: mobile", "Cookie: lang=fr"],
        &["X-Device: mobile", "Cookie: lang=en"],
    ];
    for (i, h) in cases.iter().enumerate() {
        assert_eq!(fetch_no(&lab.get_with(t, h)), i as u64 + 1);
    }
    for (i, h) in cases.iter().enumerate() {
        let r = lab.get_with(t, h);
        assert_hit(&r);
        assert_eq!(fetch_no(&r), i as u64 + 1, "{h:?}");
    }
    // Another cookie beside lang does not change the key.
    let r = lab.get_with(t, &["X-Device: mobile", "Cookie: sid=9; lang=fr"]);
    assert_eq!(fetch_no(&r), 3);
}

/// The default key is scheme, host, path and query: another host or
/// another query is another object.
#[test]
fn the_default_key_tells_hosts_and_queries_apart() {
    let lab = Lab::plain();
    let a = lab.send("GET", "/key/h?cc=max-age%3D60", &[]);
    let mut c = lab.stoa.connect();
    let b = c.request(b"GET /key/h?cc=max-age%3D60 HTTP/1.1\r\nHost: other.test\r\n\r\n");
    assert_eq!(fetch_no(&a), 1);
    assert_eq!(fetch_no(&b), 2);
    assert!(b.text().contains("host: other.test"), "{b:?}");
    let q = lab.get("/key/h?cc=max-age%3D60&x=1");
    assert_eq!(fetch_no(&q), 3);
    let b2 = c.request(b"GET /key/h?cc=max-age%3D60 HTTP/1.1\r\nHost: other.test\r\n\r\n");
    assert_hit(&b2);
    assert!(b2.text().contains("host: other.test"), "{b2:?}");
}

/// `Surrogate-Control: max-age=N` (W3C Edge Architecture, as Varnish and
/// Fastly) sets the cache's lifetime; clients see the origin's
/// Cache-Control and never Surrogate-Control.
#[test]
fn surrogate_control_sets_the_cache_lifetime_and_clients_never_see_it() {
    let lab = Lab::plain();
    let t = "/sur/a?cc=max-age%3D0&sc=max-age%3D60";
    let first = lab.get(t);
    assert_eq!(first.header("surrogate-control"), None, "{first:?}");
    let r = lab.get(t);
    assert_hit(&r);
    assert_eq!(r.header("surrogate-control"), None);
    assert_eq!(r.header("cache-control"), Some("max-age=0"));
}

/// `X-Accel-Expires` (nginx) sets the cache's lifetime in seconds or as
/// `@unix-time`; 0 keeps it out; clients never see it.
#[test]
fn x_accel_expires_sets_the_cache_lifetime_and_clients_never_see_it() {
    let lab = Lab::plain();
    let t = "/xae/a?cc=no-cache&xae=60";
    let first = lab.get(t);
    assert_eq!(first.header("x-accel-expires"), None, "{first:?}");
    let r = lab.get(t);
    assert_hit(&r);
    assert_eq!(r.header("x-accel-expires"), None);
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        + 120;
    let t = format!("/xae/b?xae=%40{at}");
    lab.get(&t);
    assert_hit(&lab.get(&t));
    let t = "/xae/c?cc=max-age%3D60&xae=0";
    lab.get(t);
    assert_eq!(fetch_no(&lab.get(t)), 2);
}

// ---------------------------------------------------------------------------
// Under load

fn spawn_get(
    addr: std::net::SocketAddr,
    target: String,
    headers: Vec<String>,
    barrier: Arc<Barrier>,
) -> std::thread::JoinHandle<(String, Vec<String>, Response)> {
    std::thread::spawn(move || {
        let mut c = Conn::connect(addr);
        let h: Vec<&str> = headers.iter().map(String::as_str).collect();
        let req = request("GET", &target, &h);
        barrier.wait();
        let r = c.request(&req);
        (target, headers, r)
    })
}

/// Collapsed forwarding: many clients asking at once for one cold, slow
/// object cause one origin request, and all get the same, right bytes;
/// other keys asked for at the same time (other paths, another Vary
/// variant) get their own (Varnish's request coalescing, nginx
/// `proxy_cache_lock`).
#[test]
fn concurrent_misses_on_one_cold_object_reach_the_origin_once() {
    let lab = Lab::new(Setup {
        workers: 2,
        ..Setup::default()
    });
    let hot = "/cf/hot?cc=max-age%3D60&delay=0.5&pieces=4&pause=0.05&size=200000".to_owned();
    let n_hot = 40;
    let n_other = 10;
    let barrier = Arc::new(Barrier::new(n_hot + n_other));
    let mut hs = Vec::new();
    for _ in 0..n_hot {
        hs.push(spawn_get(
            lab.stoa.addr,
            hot.clone(),
            vec![],
            barrier.clone(),
        ));
    }
    for i in 0..n_other {
        let t = format!("/cf/other{i}?cc=max-age%3D60&delay=0.2&size=3000&vary=Accept-Encoding");
        hs.push(spawn_get(
            lab.stoa.addr,
            t,
            vec![format!("Accept-Encoding: v{i}")],
            barrier.clone(),
        ));
    }
    let results: Vec<_> = hs.into_iter().map(|h| h.join().expect("client")).collect();
    let mut hot_body: Option<Vec<u8>> = None;
    for (target, headers, r) in &results {
        assert_eq!(r.status, 200, "{target}: {r:?}");
        assert_eq!(&answered_target(r), target, "mixed response");
        for h in headers {
            let v = h.split(": ").nth(1).unwrap_or("");
            assert!(
                r.text().contains(&format!("accept-encoding: {v}\n")),
                "{r:?}"
            );
        }
        assert!(filler_ok(&r.body, text_end(&r.body)), "{target}: bytes");
        if target == &hot {
            assert_eq!(r.body.len(), 200_000);
            match &hot_body {
                None => hot_body = Some(r.body.clone()),
                Some(b) => assert!(b == &r.body, "different bytes for one object"),
            }
        }
    }
    assert_eq!(lab.count("/cf/hot"), 1, "collapsed forwarding");
    for i in 0..n_other {
        assert_eq!(lab.count(&format!("/cf/other{i}")), 1);
    }
}

/// Collapsed requests on a response that turns out private (Set-Cookie)
/// are not given the first client's response: each waiter asks the
/// origin itself (Varnish's hit-for-miss; nginx's proxy_cache_lock lets
/// them go to the origin), so no session leaks to another client.
#[test]
fn concurrent_misses_on_a_response_with_set_cookie_each_get_their_own() {
    let lab = Lab::new(Setup {
        workers: 2,
        ..Setup::default()
    });
    let t = "/cf/cookie?cc=max-age%3D60&delay=0.3&cookie=sid%3Dsecret".to_owned();
    let n = 8;
    let barrier = Arc::new(Barrier::new(n));
    let hs: Vec<_> = (0..n)
        .map(|_| spawn_get(lab.stoa.addr, t.clone(), vec![], barrier.clone()))
        .collect();
    let mut seen = std::collections::HashSet::new();
    for h in hs {
        let (_, _, r) = h.join().expect("client");
        assert_eq!(r.status, 200);
        assert!(
            seen.insert(fetch_no(&r)),
            "two clients were given one origin response with Set-Cookie: {r:?}"
        );
    }
    assert_eq!(lab.count("/cf/cookie"), n as u64);
}

/// RFC 9111 §3.5: a response to a request with Authorization that does
/// not say it may be stored is for that request only. Requests for the
/// same key that wait for its fetch (the key holds no credentials) are
/// not given it: they fetch their own, which is stored as usual (no
/// hit-for-miss mark from another user's credentials).
#[test]
fn rfc9111_s3_5_waiters_never_get_the_response_to_anothers_authorization() {
    let lab = Lab::new(Setup {
        workers: 2,
        ..Setup::default()
    });
    let path = "/cf/auth";
    let t = format!("{path}?cc=max-age%3D60&delay=1");
    let lead = {
        let barrier = Arc::new(Barrier::new(1));
        spawn_get(
            lab.stoa.addr,
            t.clone(),
            vec!["Authorization: Basic YWxpY2U6c2VjcmV0".to_owned()],
            barrier,
        )
    };
    assert!(
        lab.origin.wait_count(path, 1, WAIT),
        "the authorised request reached the origin"
    );
    let n = 4;
    let barrier = Arc::new(Barrier::new(n));
    let waiters: Vec<_> = (0..n)
        .map(|_| spawn_get(lab.stoa.addr, t.clone(), vec![], barrier.clone()))
        .collect();
    let (_, _, r) = lead.join().expect("client");
    assert_eq!(r.status, 200);
    assert_eq!(fetch_no(&r), 1);
    assert!(!cache_status(&r).contains("stored"), "{r:?}");
    let mut joined = 0;
    for h in waiters {
        let (_, _, r) = h.join().expect("client");
        assert_eq!(r.status, 200);
        assert_eq!(
            fetch_no(&r),
            2,
            "a waiter was given the authorised request's response: {r:?}"
        );
        // RFC 9211 §2.6: those that waited for another's fetch say so.
        joined += usize::from(cache_status(&r).ends_with("; collapsed"));
    }
    assert!(joined >= 1, "some waiters joined the first one's fetch");
    assert_eq!(lab.count(path), 2, "the waiters' own fetch, collapsed");
    assert_hit(&lab.get(&t));
}

/// Many clients, many keys, Vary and concurrent misses mixed on purpose:
/// every response names exactly the request it answers (a response for
/// one key is never served for another).
#[test]
fn a_response_for_one_key_is_never_served_for_another_under_concurrency() {
    let lab = Lab::new(Setup {
        workers: 2,
        ..Setup::default()
    });
    let threads = 16;
    let barrier = Arc::new(Barrier::new(threads));
    let addr = lab.stoa.addr;
    let hs: Vec<_> = (0..threads)
        .map(|k| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let mut c = Conn::connect(addr);
                let mut x = (k as u64 + 1) * 0x9E37_79B9;
                for i in 0..40 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let key = x % 12;
                    let ae = ["gzip", "br", "identity"][(x >> 8) as usize % 3];
                    let size = 500 + key * 997;
                    let t = format!(
                        "/mix/k{key}?cc=max-age%3D60&vary=Accept-Encoding&size={size}&delay=0.0{}",
                        key % 5
                    );
                    let r = c.request(&request("GET", &t, &[&format!("Accept-Encoding: {ae}")]));
                    assert_eq!(r.status, 200, "{t} #{i}");
                    assert_eq!(answered_target(&r), t, "another key's response");
                    assert!(
                        r.text().contains(&format!("accept-encoding: {ae}\n")),
                        "another variant's response for {ae}: {r:?}"
                    );
                    assert_eq!(r.body.len() as u64, size);
                    assert!(filler_ok(&r.body, text_end(&r.body)));
                }
            })
        })
        .collect();
    for h in hs {
        h.join().expect("client thread");
    }
    // At most one fetch per variant (collapsed), 12 keys x 3 variants.
    let total: u64 = (0..12).map(|k| lab.count(&format!("/mix/k{k}"))).sum();
    assert!(total <= 36, "{total} origin requests for 36 variants");
}

/// A slow client never holds the origin: the fill reads the origin at
/// its own pace and the origin's response is complete while the client
/// has read nothing of the body; the client then gets every byte.
#[test]
fn a_slow_client_does_not_hold_the_origin() {
    let lab = Lab::plain();
    let size = 8 << 20;
    let t = format!("/slow/a?cc=max-age%3D60&size={size}");
    let mut c = lab.stoa.connect();
    c.set_recv_buffer(4096);
    c.send(&request("GET", &t, &[]));
    assert!(
        lab.origin.wait_completed("/slow/a", 1, WAIT),
        "the origin is held by a client that reads nothing"
    );
    let r = c.read();
    assert_eq!(r.body.len(), size);
    assert!(filler_ok(&r.body, text_end(&r.body)));
    // A client that leaves does not cut the fill either.
    let t2 = format!("/slow/b?cc=max-age%3D60&size={size}&pieces=8&pause=0.05");
    {
        let mut c = lab.stoa.connect();
        c.send(&request("GET", &t2, &[]));
        assert!(lab.origin.wait_count("/slow/b", 1, WAIT));
    }
    assert!(lab.origin.wait_completed("/slow/b", 1, WAIT));
    let ok = wait_for(WAIT, || {
        let r = lab.get_with(&t2, &["Cache-Control: only-if-cached"]);
        r.status == 200 && r.body.len() == size
    });
    assert!(ok, "the fill stopped with its client");
    assert_eq!(lab.count("/slow/b"), 1);
}

/// An object larger than the zone's memory streams to the client and the
/// disk at once, correct, and is then served from disk.
#[test]
fn an_object_larger_than_memory_streams_and_is_served_from_disk() {
    let disk = TempDir::new("cache-big-disk");
    let zone = format!("disk = \"{}\"\nmax_object = \"64M\"", disk.path().display());
    let lab = Lab::new(Setup {
        zone: &zone,
        memory: "1M",
        ..Setup::default()
    });
    let stoa = &lab.stoa;
    let size = 12 << 20;
    let t = format!("/big/a?cc=max-age%3D60&size={size}&pieces=12&pause=0.02");
    let r = stoa.get(&t);
    assert_eq!(r.status, 200, "{}", stoa.stderr());
    assert_eq!(r.body.len(), size);
    assert!(filler_ok(&r.body, text_end(&r.body)));
    let r2 = stoa.get(&t);
    assert!(cache_status(&r2).starts_with("Stoa; hit"), "{r2:?}");
    assert_eq!(r2.body, r.body);
    assert_eq!(lab.origin.count("/big/a"), 1);
}

/// An object past `max_object` is streamed through whole and not stored.
#[test]
fn an_object_past_max_object_is_streamed_and_not_stored() {
    let lab = Lab::new(Setup {
        zone: "max_object = \"100K\"",
        ..Setup::default()
    });
    let t = "/max/a?cc=max-age%3D60&size=300000&pieces=3";
    let r = lab.get(t);
    assert_eq!(r.body.len(), 300_000);
    assert!(filler_ok(&r.body, text_end(&r.body)));
    assert!(!cache_status(&r).contains("stored"), "{r:?}");
    assert_eq!(fetch_no(&lab.get(t)), 2);
    // Chunked, no length known in advance: the same.
    let t = "/max/b?cc=max-age%3D60&size=300000&pieces=3&chunked=1";
    assert_eq!(lab.get(t).body.len(), 300_000);
    assert_eq!(fetch_no(&lab.get(t)), 2);
}

// ---------------------------------------------------------------------------
// Operations: disk, restarts, reloads

fn disk_lab(tag: &str, disk: &std::path::Path) -> Lab {
    let zone = format!("disk = \"{}\"\n", disk.display());
    Lab::new(Setup {
        zone: &zone,
        tag,
        ..Setup::default()
    })
}

fn stop(s: &mut Server) {
    s.signal(libc::SIGTERM);
    assert!(s.wait_exit(WAIT).is_some(), "stoa did not stop");
}

fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Objects on disk survive a restart (nginx proxy_cache_path, Varnish's
/// file storage does not): after a restart they are found again (the
/// index is rebuilt in the background: wait for it with only-if-cached).
#[test]
fn objects_on_disk_survive_a_restart() {
    let disk = TempDir::new("cache-disk-restart");
    let mut lab = disk_lab("cache-restart", disk.path());
    let t = "/disk/a?cc=max-age%3D600&size=20000";
    let first = lab.get(t);
    assert!(wait_for(WAIT, || !files_under(disk.path()).is_empty()));
    stop(&mut lab.stoa);
    lab.stoa = Server::with_config(&lab.cfg);
    let ok = wait_for(WAIT, || {
        lab.get_with(t, &["Cache-Control: only-if-cached"]).status == 200
    });
    assert!(ok, "not found after the restart: {}", lab.stoa.stderr());
    let r = lab.get(t);
    assert_hit(&r);
    assert_eq!(r.body, first.body);
    assert_eq!(lab.count("/disk/a"), 1);
}

/// A corrupt or truncated cache file is a miss (the origin is asked
/// again, the client gets right bytes) and a log line, never a wrong
/// response.
#[test]
fn a_corrupt_cache_file_is_a_miss_and_a_log_line() {
    let disk = TempDir::new("cache-disk-corrupt");
    let mut lab = disk_lab("cache-corrupt", disk.path());
    let targets = [
        "/corrupt/head?cc=max-age%3D600&size=20000",
        "/corrupt/trunc?cc=max-age%3D600&size=20000",
        "/corrupt/body?cc=max-age%3D600&size=20000",
    ];
    for t in targets {
        lab.get(t);
    }
    assert!(wait_for(WAIT, || files_under(disk.path()).len() >= 3));
    stop(&mut lab.stoa);
    for f in files_under(disk.path()) {
        let mut b = std::fs::read(&f).expect("cache file");
        let pos = |needle: &[u8]| find(&b, needle);
        if pos(b"/corrupt/head").is_some() {
            // A byte of the header (after the magic): the stored key.
            let at = pos(b"/corrupt/head").unwrap_or(16);
            b[at + 3] ^= 0x20;
        } else if pos(b"/corrupt/trunc").is_some() {
            b.truncate(b.len() - 5000);
        } else if pos(b"/corrupt/body").is_some() {
            let n = b.len();
            b[n - 100] ^= 0xff;
        }
        std::fs::write(&f, b).expect("write cache file");
    }
    lab.stoa = Server::with_config(&lab.cfg);
    for t in targets {
        let r = lab.get(t);
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len(), 20000);
        assert!(
            filler_ok(&r.body, text_end(&r.body)),
            "corrupt bytes served for {t}"
        );
        assert_eq!(answered_target(&r), t);
        let path = t.split('?').next().unwrap_or(t);
        assert_eq!(lab.count(path), 2, "{t} served from a corrupt file: {r:?}");
    }
    let err = lab.stoa.stderr().to_ascii_lowercase();
    assert!(
        ["corrupt", "checksum", "truncated", "invalid"]
            .iter()
            .any(|w| err.contains(w)),
        "no log line: {err}"
    );
}

/// A reload (SIGHUP) keeps the zone and its objects in memory.
#[test]
fn a_reload_keeps_the_objects_in_memory() {
    let lab = Lab::plain();
    let t = "/reload/a?cc=max-age%3D600";
    lab.get(t);
    let mark = lab.stoa.stderr().len();
    lab.stoa.signal(libc::SIGHUP);
    assert!(lab.stoa.wait_stderr(mark, "reload", WAIT));
    assert!(!lab.stoa.stderr().contains("reload failed"));
    // New connections after the reload are served by the new config.
    let r = lab.get(t);
    assert_hit(&r);
    assert_eq!(lab.count("/reload/a"), 1);
}

// ---------------------------------------------------------------------------
// Operations: purge, access log, status page

fn purged(r: &Response) -> u64 {
    let v: serde_json::Value =
        serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {r:?}"));
    v["purged"].as_u64().unwrap_or_else(|| panic!("{r:?}"))
}

/// `PURGE /url` from an allowed address removes every stored variant of
/// the URL (200 `{"purged": N}`, 404 when nothing was stored); the origin
/// never sees a PURGE.
#[test]
fn purge_by_url_removes_every_variant_of_the_url() {
    let lab = Lab::plain();
    let t = "/pg/a?cc=max-age%3D600&vary=Accept-Encoding";
    lab.get_with(t, &["Accept-Encoding: gzip"]);
    lab.get_with(t, &["Accept-Encoding: br"]);
    let keep = "/pg/b?cc=max-age%3D600";
    lab.get(keep);
    let r = lab.send("PURGE", t, &[]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(purged(&r), 2);
    assert_eq!(fetch_no(&lab.get_with(t, &["Accept-Encoding: gzip"])), 3);
    assert_eq!(fetch_no(&lab.get_with(t, &["Accept-Encoding: br"])), 4);
    assert_hit(&lab.get(keep));
    let r = lab.send("PURGE", "/pg/never", &[]);
    assert_eq!(r.status, 404, "{r:?}");
    assert_eq!(lab.count("/pg/never"), 0);
}

/// `PURGE` with `Surrogate-Key: a b` removes every object tagged with
/// any of those keys (Fastly, Varnish xkey); clients never see
/// Surrogate-Key.
#[test]
fn purge_by_surrogate_key_removes_the_tagged_objects() {
    let lab = Lab::plain();
    let ts = [
        "/tag/1?cc=max-age%3D600&skey=post-1%20home",
        "/tag/2?cc=max-age%3D600&skey=post-2%20home",
        "/tag/3?cc=max-age%3D600&skey=post-3",
    ];
    for t in ts {
        let r = lab.get(t);
        assert_eq!(r.header("surrogate-key"), None, "{r:?}");
    }
    let r = lab.send("PURGE", "/", &["Surrogate-Key: home"]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(purged(&r), 2);
    assert_eq!(fetch_no(&lab.get(ts[0])), 2);
    assert_eq!(fetch_no(&lab.get(ts[1])), 2);
    let r = lab.get(ts[2]);
    assert_hit(&r);
    assert_eq!(r.header("surrogate-key"), None);
    let r = lab.send("PURGE", "/", &["Surrogate-Key: post-3 nothing"]);
    assert_eq!(purged(&r), 1);
}

/// PURGE from an address outside `purge` is 403 and removes nothing.
#[test]
fn purge_from_an_address_not_allowed_is_403() {
    let lab = Lab::plain();
    let text = std::fs::read_to_string(&lab.cfg).expect("config").replace(
        "purge = [\"127.0.0.1\"]",
        "purge = [\"10.0.0.0/8\", \"::1\"]",
    );
    std::fs::write(&lab.cfg, text).expect("config");
    let mark = lab.stoa.stderr().len();
    lab.stoa.signal(libc::SIGHUP);
    assert!(lab.stoa.wait_stderr(mark, "reload", WAIT));
    let t = "/deny/a?cc=max-age%3D600";
    lab.get(t);
    let mark = lab.stoa.stderr().len();
    let r = lab.send("PURGE", t, &[]);
    assert_eq!(r.status, 403, "{r:?}");
    // The refusal is in the error log, with the address refused.
    assert!(
        lab.stoa.wait_stderr(mark, "PURGE /deny/a", WAIT),
        "{}",
        lab.stoa.stderr()
    );
    let r = lab.send("PURGE", "/", &["Surrogate-Key: x"]);
    assert_eq!(r.status, 403, "{r:?}");
    assert_hit(&lab.get(t));
}

/// The access log's `$upstream_cache_status` (nginx's variable) and the
/// JSON field `upstream_cache_status`: MISS, HIT, BYPASS, EXPIRED or
/// REVALIDATED, STALE.
#[test]
fn the_access_log_has_the_cache_status() {
    let logdir = TempDir::new("cache-log");
    let log = logdir.join("access.log");
    let logcfg = format!(
        "access = \"{}\"\nformat = '$request_uri $upstream_cache_status'",
        log.display()
    );
    let lab = Lab::new(Setup {
        log: &logcfg,
        cache: ", bypass = { headers = [\"X-No-Cache\"] }",
        ..Setup::default()
    });
    let t = "/log/a?cc=max-age%3D60";
    lab.get(t);
    lab.get(t);
    lab.get_with(t, &["X-No-Cache: 1"]);
    let v = "/log/v?cc=max-age%3D10&age=100&etag=v1";
    lab.get(v);
    lab.get(v);
    let want = [
        format!("{t} MISS"),
        format!("{t} HIT"),
        format!("{t} BYPASS"),
        format!("{v} MISS"),
        format!("{v} REVALIDATED"),
    ];
    let ok = wait_for(WAIT, || {
        let s = std::fs::read_to_string(&log).unwrap_or_default();
        s.lines().count() >= want.len()
    });
    let s = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(ok, "log: {s}");
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines, want);
}

/// The status page counts per zone: hits, misses, bypasses, stored
/// objects and bytes (JSON and Prometheus).
#[test]
fn the_status_page_counts_hits_misses_and_objects_per_zone() {
    let lab = Lab::with_cache(", bypass = { headers = [\"X-No-Cache\"] }");
    for t in [
        "/stat/a?cc=max-age%3D60&size=1000",
        "/stat/b?cc=max-age%3D60&size=1000",
    ] {
        lab.get(t);
        lab.get(t);
        lab.get(t);
    }
    lab.get_with("/stat/a", &["X-No-Cache: 1"]);
    let r = lab.get("/stoa-status?format=json");
    assert_eq!(r.status, 200, "{r:?}");
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("status JSON");
    let zone = find_zone(&v, "z").unwrap_or_else(|| panic!("no zone z in {v}"));
    let num = |k: &str| {
        zone[k]
            .as_u64()
            .unwrap_or_else(|| panic!("no {k} in zone {zone}"))
    };
    assert_eq!(num("hits"), 4, "{zone}");
    assert_eq!(num("misses"), 2, "{zone}");
    assert_eq!(num("bypasses"), 1, "{zone}");
    assert_eq!(num("objects"), 2, "{zone}");
    let r = lab.get("/stoa-status?format=prometheus");
    let p = r.text();
    assert!(
        p.lines().any(|l| l.contains("cache")
            && l.contains("hit")
            && l.contains("zone=\"z\"")
            && l.ends_with(" 4")),
        "{p}"
    );
}

/// The object of the status JSON that describes zone `name`.
fn find_zone<'a>(v: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    match v {
        serde_json::Value::Object(m) => {
            if m.get("name").and_then(|n| n.as_str()) == Some(name) && m.contains_key("hits") {
                return Some(v);
            }
            if let Some(z) = m.get(name) {
                if z.get("hits").is_some() {
                    return Some(z);
                }
            }
            m.values().find_map(|x| find_zone(x, name))
        }
        serde_json::Value::Array(a) => a.iter().find_map(|x| find_zone(x, name)),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// FastCGI

/// A server whose `/app/` is stoa-hello-fcgi, cached in zone `f` for 60 s
/// (the application gives no freshness).
fn fastcgi_cached(name: &str) -> (TempDir, Server) {
    let dir = TempDir::new(name);
    dir.mkdir("www");
    let hello = env!("CARGO_BIN_EXE_stoa-hello-fcgi");
    let cfg = dir.write(
        "stoa.toml",
        format!(
            "listen = [\"127.0.0.1:0\"]\nworkers = 1\nuser = \"root\"\n\n[log]\naccess = \"off\"\n\n\
             [[cache_zone]]\nname = \"f\"\nmemory = \"8M\"\n\n\
             [[pool]]\nname = \"fcgi\"\ncommand = [\"{hello}\"]\n\n\
             [[site]]\nroot = \"www\"\n\n[[site.route]]\nprefix = \"/app/\"\n\
             fastcgi = {{ pool = \"fcgi\" }}\ncache = {{ zone = \"f\", default_ttl = \"60s\" }}\n"
        ),
    );
    let s = Server::with_config(&cfg);
    (dir, s)
}

/// A FastCGI route is cached as a proxy route is (nginx fastcgi_cache):
/// stoa-hello-fcgi gives no freshness, the route's `default_ttl` does.
#[test]
fn a_fastcgi_route_is_cached_too() {
    let (_dir, s) = fastcgi_cached("cache-fcgi");
    let first = s.get("/app/page?x=1");
    assert_eq!(first.status, 200, "{}", s.stderr());
    assert_fwd(&first, "miss");
    let second = s.get("/app/page?x=1");
    assert_hit(&second);
    assert_eq!(second.body, first.body, "served= would differ on a refetch");
    let other = s.get("/app/page?x=2");
    assert_ne!(other.body, first.body);
    let post = s.request(&request("POST", "/app/page?x=1", &["Content-Length: 0"]));
    assert_eq!(post.status, 200);
    let after = s.get("/app/page?x=1");
    assert_fwd(&after, "miss");
}

/// A response is stored once its announced length has come, not when the
/// FastCGI exchange ends: the application may send FCGI_END_REQUEST
/// later (here 5 s later, `linger`), and a client that read the whole
/// body and asked again in between got a collapsed miss that waited for
/// it. nginx likewise ends an upstream response at its Content-Length.
#[test]
fn a_response_is_a_hit_as_soon_as_its_whole_body_came() {
    let (_dir, s) = fastcgi_cached("cache-fcgi-linger");
    let first = s.get("/app/page?linger=5000");
    assert_eq!(first.status, 200, "{}", s.stderr());
    assert_fwd(&first, "miss");
    let second = s.get("/app/page?linger=5000");
    assert_hit(&second);
    assert_eq!(second.body, first.body);
}
