//! The response cache as an operator sees it, end to end: the status
//! page's per-zone figures (text, JSON, Prometheus) counted by real
//! requests, purges and invalidations counted in the zone, zones a
//! reload dropped, invalidation over HTTP/2, and the access log's
//! `$upstream_cache_status` beside a route without a cache.

mod common;

use common::*;

mod cache_support;
use cache_support::{wait_for, Origin};
use std::time::Duration;

/// Stoa with `/` proxied to the test origin and cached in zone `pages`
/// (PURGE from loopback), `/plain/` proxied
/// without a cache, `/status` the status page, and an access log at
/// `access.log` in `format`.
fn server(dir: &TempDir, o: &Origin, format: &str) -> Server {
    config(dir, o, &format!("'{format}'"))
}

/// [`server`] with the JSON access log.
fn server_json(dir: &TempDir, o: &Origin) -> Server {
    config(dir, o, "\"json\"")
}

fn config(dir: &TempDir, o: &Origin, format: &str) -> Server {
    dir.mkdir("www");
    // CONFIG_PRELUDE's keys, with an access log of our own.
    let cfg = dir.write(
        "stoa.toml",
        format!(
            "listen = [\"127.0.0.1:0\"]\nworkers = 1\nuser = \"root\"\n\
             [log]\naccess = \"{}\"\nformat = {format}\n\
             [[pool]]\nname = \"app\"\nprotocol = \"http\"\naddress = [\"{}\"]\n\
             [[cache_zone]]\nname = \"pages\"\nmemory = \"8 MiB\"\n\
             [[site]]\nroot = \"www\"\n\
             [[site.route]]\nprefix = \"/status\"\nstatus = {{}}\n\
             [[site.route]]\nprefix = \"/plain/\"\nproxy = {{ pool = \"app\" }}\n\
             [[site.route]]\nprefix = \"/\"\nproxy = {{ pool = \"app\" }}\n\
             cache = {{ zone = \"pages\", purge = [\"127.0.0.1\"] }}\n",
            dir.path().join("access.log").display(),
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

fn cache_status(r: &Response) -> String {
    r.header("cache-status").unwrap_or_default().to_owned()
}

fn zone(s: &Server) -> serde_json::Value {
    let v: serde_json::Value =
        serde_json::from_slice(&s.get("/status?format=json").body).expect("status JSON");
    let zones = v["cache_zones"].as_array().expect("cache_zones");
    assert_eq!(zones.len(), 1, "{v}");
    zones[0].clone()
}

/// The zone's `purges` on the status page count every object removed:
/// by `PURGE /url`, by `PURGE` with `Surrogate-Key` (Fastly, Varnish
/// xkey) and by the invalidation after a successful POST (RFC 9111
/// §4.4); `objects` and `memory_bytes` fall back to 0 with them. The text
/// page and Prometheus (`stoa_cache_purges_total{zone="pages"}`) agree.
#[test]
fn the_status_page_counts_purges_and_invalidations_per_zone() {
    let o = Origin::start();
    let dir = TempDir::new("cache-ops-status");
    let s = server(&dir, &o, "$request_uri $upstream_cache_status");
    let (a, b, c) = (
        "/a?cc=max-age=60",
        "/b?cc=max-age=60&skey=home",
        "/c?cc=max-age=60",
    );
    for t in [a, b, c] {
        assert!(
            cache_status(&send(&s, "GET", t, "")).contains("stored"),
            "{t}"
        );
    }
    let z = zone(&s);
    assert_eq!(z["name"], "pages");
    assert_eq!(z["objects"], 3, "{z}");
    assert_eq!(z["purges"], 0, "{z}");
    assert!(z["memory_bytes"].as_u64().unwrap_or(0) > 0, "{z}");
    assert_eq!(z["disk_bytes"], 0, "memory only: {z}");

    assert_eq!(send(&s, "PURGE", a, "").text().trim(), "{\"purged\": 1}");
    let tag = send(&s, "PURGE", "/", "Surrogate-Key: home nobody\r\n");
    assert_eq!(tag.text().trim(), "{\"purged\": 1}");
    let post = send(&s, "POST", c, "Content-Length: 0\r\n");
    assert_eq!(post.status, 200, "{}", s.stderr());

    let z = zone(&s);
    assert_eq!(z["purges"], 3, "{z}");
    assert_eq!(z["objects"], 0, "{z}");
    assert_eq!(z["memory_bytes"], 0, "{z}");
    assert_eq!(z["misses"], 3, "{z}");
    let text = s.get("/status").text();
    assert!(
        text.contains("cache zone pages: hits 0, misses 3, "),
        "{text}"
    );
    assert!(text.contains(", purges 3, "), "{text}");
    let p = s.get("/status?format=prometheus").text();
    for line in [
        "# TYPE stoa_cache_purges_total counter\n",
        "stoa_cache_purges_total{zone=\"pages\"} 3\n",
        "# TYPE stoa_cache_objects gauge\n",
        "stoa_cache_objects{zone=\"pages\"} 0\n",
    ] {
        assert!(p.contains(line), "{line}: {p}");
    }
}

/// nginx's `$upstream_cache_status` (JSON `upstream_cache_status`): the
/// word on the cached route, and nothing (`-`, JSON null) on a route
/// without a cache and for a method the cache does not answer, where
/// nginx leaves it empty too.
#[test]
fn the_access_log_has_no_cache_status_where_the_cache_took_no_part() {
    let o = Origin::start();
    let dir = TempDir::new("cache-ops-log");
    let s = server(
        &dir,
        &o,
        "$request_method $request_uri $upstream_cache_status",
    );
    let t = "/l?cc=max-age=60";
    send(&s, "GET", t, "");
    send(&s, "GET", t, "");
    send(&s, "GET", "/plain/x", "");
    send(&s, "POST", "/other", "Content-Length: 0\r\n");
    let want = [
        format!("GET {t} MISS"),
        format!("GET {t} HIT"),
        "GET /plain/x -".to_owned(),
        "POST /other -".to_owned(),
    ];
    let log = dir.path().join("access.log");
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    let complete = wait_for(Duration::from_secs(10), || {
        read().lines().count() >= want.len()
    });
    let text = read();
    assert!(complete, "{text}");
    assert_eq!(text.lines().collect::<Vec<_>>(), want);

    let dir = TempDir::new("cache-ops-json");
    let s = server_json(&dir, &o);
    send(&s, "GET", "/j?cc=max-age=60", "");
    send(&s, "GET", "/plain/j", "");
    let log = dir.path().join("access.log");
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(wait_for(Duration::from_secs(10), || read().lines().count() >= 2));
    let v: Vec<serde_json::Value> = read()
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(v[0]["upstream_cache_status"], "MISS", "{}", v[0]);
    assert!(v[1]["upstream_cache_status"].is_null(), "{}", v[1]);
}

/// A reload that renames the zone: the status page lists the zone the
/// routes now use and no longer the dropped one (whose objects leave
/// memory with the old configuration; zones of the same name are kept
/// across reloads, `cache::store::zone`).
#[test]
fn a_zone_dropped_by_a_reload_leaves_the_status_page() {
    let o = Origin::start();
    let dir = TempDir::new("cache-ops-reload");
    let s = server(&dir, &o, "$request_uri $upstream_cache_status");
    send(&s, "GET", "/r?cc=max-age=60", "");
    assert_eq!(zone(&s)["name"], "pages");
    let cfg = dir.path().join("stoa.toml");
    let text = std::fs::read_to_string(&cfg)
        .expect("config")
        .replace("\"pages\"", "\"articles\"");
    std::fs::write(&cfg, text).expect("config");
    let mark = s.stderr().len();
    s.signal(libc::SIGHUP);
    assert!(
        s.wait_stderr(mark, "reloaded", Duration::from_secs(10)),
        "{}",
        s.stderr()
    );
    let z = zone(&s);
    assert_eq!(z["name"], "articles", "{z}");
    assert_eq!(z["objects"], 0, "{z}");
    let r = send(&s, "GET", "/r?cc=max-age=60", "");
    assert!(cache_status(&r).contains("fwd=miss; stored"), "{r:?}");
}

/// `curl --http2-prior-knowledge` with `args`: (status, the response's
/// header block as curl prints it).
fn curl_h2c(s: &Server, path: &str, args: &[&str]) -> (u16, String) {
    require("curl", "curl");
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "10", "--http2-prior-knowledge"])
        .args(["-D", "-", "-o", "/dev/null"])
        .args(args)
        .arg(format!("http://{}{path}", s.addr))
        .output()
        .expect("run curl");
    let head = String::from_utf8_lossy(&out.stdout).into_owned();
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_ascii_lowercase())
}

/// RFC 9111 §4.4 over HTTP/2: the Exchange keeps the `Location` of an
/// h2 response too (its head is kept apart from the H1 buffer), so a
/// successful POST invalidates the URL it redirects to (a relative
/// reference, resolved against the request) and leaves others stored.
#[test]
fn rfc9111_s4_4_a_post_over_h2_invalidates_the_url_it_redirects_to() {
    let o = Origin::start();
    let dir = TempDir::new("cache-ops-h2");
    let s = server(&dir, &o, "$request_uri $upstream_cache_status");
    let (post, page) = ("/h2/post?cc=max-age=60", "/h2/page?cc=max-age=60");
    for t in [post, page] {
        let (status, head) = curl_h2c(&s, t, &[]);
        assert_eq!(status, 200, "{head}");
        assert!(
            head.contains("cache-status: stoa; fwd=miss; stored"),
            "{head}"
        );
        let (_, head) = curl_h2c(&s, t, &[]);
        assert!(head.contains("cache-status: stoa; hit"), "{head}");
    }
    let (status, head) = curl_h2c(
        &s,
        "/h2/post?cc=max-age=60&status=303&loc=page%3Fcc%3Dmax-age%3D60",
        &["-X", "POST", "-d", "comment=hi"],
    );
    assert_eq!(status, 303, "{head}");
    assert!(head.contains("cache-status: stoa; fwd=method"), "{head}");
    let (_, head) = curl_h2c(&s, page, &[]);
    assert!(
        head.contains("fwd=miss"),
        "the Location was invalidated: {head}"
    );
    assert_eq!(o.count("/h2/page"), 2);
    let (_, head) = curl_h2c(&s, post, &[]);
    assert!(
        head.contains("cache-status: stoa; hit"),
        "another URL: {head}"
    );
    let v: serde_json::Value =
        serde_json::from_slice(&s.get("/status?format=json").body).expect("status JSON");
    // The POST's own target (its query names the answer) was never
    // stored: only the page went.
    assert_eq!(v["cache_zones"][0]["purges"], 1, "{v}");
}
