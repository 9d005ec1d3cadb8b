//! `headers`, `expires` and `cache_control` end to end: response header
//! fields set, added and removed on static and FastCGI responses, over
//! HTTP/1.1 (raw sockets) and HTTP/2 (curl with prior knowledge); errors
//! left alone unless `always` (nginx `add_header ... always`); `expires`
//! as nginx's directive; a route's value replacing its site's; a
//! configuration that names a framing field refused with its line.
//!
//! Needs curl (Debian package curl, built with nghttp2).

mod common;

use common::*;
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, SystemTime};

const HELLO_FCGI: &str = env!("CARGO_BIN_EXE_stoa-hello-fcgi");

/// `curl --http2-prior-knowledge -D-`: (status, header lines lower-cased,
/// body).
fn curl_h2c(addr: SocketAddr, path: &str) -> (u16, Vec<(String, String)>, Vec<u8>) {
    require("curl", "curl");
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--http2-prior-knowledge", "-D-"])
        .arg(format!("http://{addr}{path}"))
        .output()
        .expect("run curl");
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = out.stdout;
    let end = find(&s, b"\r\n\r\n").expect("a head");
    let head = String::from_utf8_lossy(&s[..end]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let fields = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, fields, s[end + 4..].to_vec())
}

fn values<'a>(fields: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    fields
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// A site with static files and a FastCGI application (which sends
/// `X-Pid` and `Content-Type: text/plain`), with header rules on the site
/// and routes that override them.
fn site(tag: &str) -> (TempDir, Server) {
    let dir = TempDir::new(tag);
    dir.write("www/index.html", "hello\n");
    dir.write("www/assets/app.css", "body{}\n");
    dir.write("www/fresh/x.txt", "x\n");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[pool]]\nname = \"app\"\ncommand = [\"{HELLO_FCGI}\"]\nprocesses = 1\n\n\
             [[site]]\nroot = \"www\"\n\
             headers = {{ set = {{ X-Frame-Options = \"DENY\", X-Pid = \"hidden\" }}, \
             add = {{ Link = [\"</a.css>; rel=preload\", \"</b.js>; rel=preload\"] }}, \
             remove = [\"Server\"] }}\n\n\
             [[site.route]]\nprefix = \"/app/\"\nfastcgi = {{ pool = \"app\" }}\n\n\
             [[site.route]]\nprefix = \"/always/\"\nstatic = {{}}\n\
             headers = {{ add = {{ X-Always = \"yes\" }}, always = true }}\n\n\
             [[site.route]]\nprefix = \"/assets/\"\nstatic = {{}}\nexpires = \"30d\"\n\n\
             [[site.route]]\nprefix = \"/fresh/\"\nstatic = {{}}\nexpires = \"epoch\"\n\
             cache_control = \"no-store\"\n"
        ),
    );
    let server = Server::with_config(&cfg);
    (dir, server)
}

/// nginx `add_header` adds, Caddy `header` sets and `header -Name`
/// removes: the site's rules reach every handler's responses, on HTTP/1.1
/// and HTTP/2 alike.
#[test]
fn header_rules_set_add_and_remove_fields_on_static_and_fastcgi_responses_over_h1_and_h2() {
    let (_dir, server) = site("headers-rules");
    for path in ["/index.html", "/app/x"] {
        let r = server.get(path);
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("x-frame-options"), Some("DENY"), "{path}");
        assert_eq!(r.header_count("x-frame-options"), 1, "{path}");
        assert_eq!(r.header_count("link"), 2, "{path}");
        assert_eq!(r.header("server"), None, "{path}: removed");
        assert!(
            r.header("date").is_some(),
            "{path}: Date stays (RFC 9110 §6.6.1)"
        );
        let (status, fields, _) = curl_h2c(server.addr, path);
        assert_eq!(status, 200, "{path} h2");
        assert_eq!(values(&fields, "x-frame-options"), ["DENY"], "{path} h2");
        assert_eq!(
            values(&fields, "link"),
            ["</a.css>; rel=preload", "</b.js>; rel=preload"],
            "{path} h2"
        );
        assert!(values(&fields, "server").is_empty(), "{path} h2");
    }
    // `set` replaced the application's own field; its other fields and
    // its body are as it sent them.
    let app = server.get("/app/x");
    assert_eq!(app.header("x-pid"), Some("hidden"));
    assert_eq!(app.header_count("x-pid"), 1);
    assert_eq!(app.header("content-type"), Some("text/plain"));
    assert!(app.text().contains("role=Responder"), "{}", app.text());
}

/// nginx adds `add_header` fields to 2xx and 3xx responses only, unless
/// `always`; the same here, for the server's own errors and an
/// application's.
#[test]
fn errors_get_the_header_rules_only_with_always_as_nginx_add_header_always() {
    let (dir, server) = site("headers-always");
    dir.write("www/always/here.txt", "here\n");
    dir.write("www/always/sub/index.html", "sub\n");
    let missing = server.get("/missing.html");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.header("x-frame-options"), None);
    assert_eq!(missing.header("server"), Some("stoa"), "left as it was");
    let app_error = server.get("/app/x?status=500");
    assert_eq!(app_error.status, 500);
    assert_eq!(app_error.header("x-pid").map(|p| p != "hidden"), Some(true));
    // A redirect is 3xx: it gets them.
    let dir_redirect = server.get("/always/sub");
    assert_eq!(dir_redirect.status, 301);
    assert_eq!(dir_redirect.header("x-always"), Some("yes"));
    for path in ["/always/here.txt", "/always/nothere.txt"] {
        let r = server.get(path);
        assert_eq!(r.header("x-always"), Some("yes"), "{path} ({})", r.status);
        let (_, fields, _) = curl_h2c(server.addr, path);
        assert_eq!(values(&fields, "x-always"), ["yes"], "{path} h2");
    }
    assert_eq!(server.get("/always/nothere.txt").status, 404);
}

/// nginx `expires 30d`: `Expires` thirty days after the response's Date
/// and `Cache-Control: max-age=2592000`; `expires epoch` the epoch and
/// no-cache, where `cache_control` says Cache-Control itself. A route's
/// value replaces the site's (here the site has none).
#[test]
fn expires_gives_expires_and_max_age_and_cache_control_replaces_the_field() {
    let (_dir, server) = site("headers-expires");
    let r = server.get("/assets/app.css");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("cache-control"), Some("max-age=2592000"));
    let date = httpdate(r.header("date").expect("Date"));
    let expires = httpdate(r.header("expires").expect("Expires"));
    assert_eq!(
        expires.duration_since(date).ok(),
        Some(Duration::from_secs(30 * 86400))
    );
    let (_, fields, _) = curl_h2c(server.addr, "/assets/app.css");
    assert_eq!(values(&fields, "cache-control"), ["max-age=2592000"]);
    assert_eq!(values(&fields, "expires").len(), 1);
    let fresh = server.get("/fresh/x.txt");
    assert_eq!(
        fresh.header("expires"),
        Some("Thu, 01 Jan 1970 00:00:01 GMT")
    );
    assert_eq!(fresh.header("cache-control"), Some("no-store"));
    // Elsewhere: none.
    let plain = server.get("/index.html");
    assert_eq!(plain.header("expires"), None);
    assert_eq!(plain.header("cache-control"), None);
    // Not on an error: a 404 is not to be cached for a month.
    let missing = server.get("/assets/nothere.css");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.header("expires"), None);
}

/// An HTTP date (IMF-fixdate, RFC 9110 §5.6.7) as a time.
fn httpdate(s: &str) -> SystemTime {
    // "Thu, 26 Nov 2026 16:41:08 GMT"
    let parts: Vec<&str> = s.split([' ', ':']).collect();
    assert_eq!(parts.len(), 8, "{s}");
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == parts[2])
    .expect("a month") as i64
        + 1;
    let n = |i: usize| parts[i].parse::<i64>().expect("a number");
    let (y, d) = (n(3), n(1));
    // Days from civil (Howard Hinnant's algorithm).
    let (y2, m2) = if month <= 2 {
        (y - 1, month + 9)
    } else {
        (y, month - 3)
    };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * m2 + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86400 + n(4) * 3600 + n(5) * 60 + n(6);
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs as u64)
}

fn check(dir: &TempDir, body: &str) -> (bool, String) {
    let cfg = dir.config("stoa.toml", body);
    let o = Command::new(stoa_bin())
        .args(["check", cfg.to_str().expect("utf-8")])
        .env("NO_COLOR", "1")
        .output()
        .expect("run stoa check");
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

/// A rule that would make a response unreadable (a framing or
/// connection field, RFC 9112 §6, RFC 9110 §7.6.1) or split its head (a
/// CR LF in a value, RFC 9110 §5.5) is refused at load, with the key and
/// its line.
#[test]
fn a_rule_on_a_framing_field_or_with_a_bad_value_is_refused_with_its_line() {
    let dir = TempDir::new("headers-check");
    dir.mkdir("www");
    let (ok, out) = check(
        &dir,
        "[[site]]\nroot = \"www\"\nheaders = { add = { X-Ok = \"1\" } }\nexpires = \"1h\"\n",
    );
    assert!(ok, "{out}");
    for (body, key, what) in [
        (
            "[[site]]\nroot = \"www\"\nheaders = { set = { Content-Length = \"1\" } }\n",
            "site[0].headers",
            "Content-Length",
        ),
        (
            "[[site]]\nroot = \"www\"\nheaders = { remove = [\"Transfer-Encoding\"] }\n",
            "site[0].headers",
            "Transfer-Encoding",
        ),
        (
            "[[site]]\nroot = \"www\"\nheaders = { add = { Connection = \"close\" } }\n",
            "site[0].headers",
            "Connection",
        ),
        (
            "[[site]]\nroot = \"www\"\nheaders = { add = { X-A = \"a\\r\\nX-Injected: 1\" } }\n",
            "site[0].headers",
            "control character",
        ),
        (
            "[[site]]\nroot = \"www\"\nexpires = \"soon\"\n",
            "site[0].expires",
            "soon",
        ),
        (
            "[[site]]\nroot = \"www\"\n\n[[site.route]]\nprefix = \"/x/\"\nstatic = {}\n\
             cache_control = \"a\\nb\"\n",
            "site[0].route[0].cache_control",
            "control character",
        ),
    ] {
        let (ok, out) = check(&dir, body);
        assert!(!ok, "accepted: {body}");
        assert!(out.contains(key) && out.contains(what), "{body}\n{out}");
        // The line of the key (after the 7 lines of the prelude).
        let name = key.rsplit('.').next().unwrap_or(key);
        let at = body
            .lines()
            .position(|l| l.starts_with(name))
            .expect("the key's line");
        assert!(out.contains(&format!("stoa.toml:{}:", 7 + at + 1)), "{out}");
    }
}
