//! The access phase end to end: `basic_auth` against password files made
//! by Apache's own `htpasswd` (bcrypt `-B`, apr1 `-m`, SHA-1 `-s`; RFC
//! 7617), the user as CGI's REMOTE_USER (RFC 3875 §4.1.11) and in the
//! access log's third field; `address_rules` with IPv4 and IPv6 clients
//! (nginx `allow`/`deny`); `limit_requests` measured with `stoa bench`
//! and over HTTP/2 (429, RFC 6585 §4); `limit_connections` (nginx
//! `limit_conn`: 503 while the client's requests are in flight).
//!
//! Needs the Debian packages apache2-utils (htpasswd) and curl (built
//! with nghttp2, for h2c).

mod common;

use common::*;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// `htpasswd -b [-c] FLAG FILE USER PASSWORD`.
fn htpasswd(file: &Path, create: bool, flag: &str, user: &str, password: &str) {
    require("htpasswd", "apache2-utils");
    let mut cmd = Command::new("htpasswd");
    cmd.arg(if create { "-cb" } else { "-b" });
    if flag == "-B" {
        // htpasswd's default bcrypt cost (5), said out loud.
        cmd.args(["-B", "-C", "5"]);
    } else {
        cmd.arg(flag);
    }
    let out = cmd
        .arg(file)
        .args([user, password])
        .output()
        .expect("run htpasswd");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn basic(user: &str, password: &str) -> String {
    use std::fmt::Write;
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let raw = format!("{user}:{password}").into_bytes();
    let mut out = String::from("Authorization: Basic ");
    for chunk in raw.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                let _ = write!(out, "{}", B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn get_as(server: &Server, path: &str, auth: Option<(&str, &str)>) -> Response {
    let header = auth.map(|(u, p)| basic(u, p));
    let headers: Vec<&str> = header.iter().map(String::as_str).collect();
    server.request(&request("GET", path, &headers))
}

fn executable(dir: &TempDir, rel: &str, body: &str) {
    let p = dir.write(rel, body);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

fn serve(dir: &TempDir, listen: &str, body: &str) -> Server {
    let cfg = dir.write(
        "stoa.toml",
        format!("listen = [{listen}]\nworkers = 2\nuser = \"root\"\n\n{body}"),
    );
    Server::with_config(&cfg)
}

/// Waits until `path`'s text satisfies `pred` (the access log is written
/// once a second).
fn wait_text(path: &Path, within: Duration, pred: impl Fn(&str) -> bool) -> String {
    let until = Instant::now() + within;
    loop {
        let t = std::fs::read_to_string(path).unwrap_or_default();
        if pred(&t) {
            return t;
        }
        assert!(Instant::now() < until, "{}:\n{t}", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A site behind `basic_auth` whose users were made by `htpasswd` with
/// each scheme it writes, a CGI script printing what it was told, and a
/// public route that lifts the site's check.
fn basic_site(tag: &str) -> (TempDir, Server) {
    let dir = TempDir::new(tag);
    dir.write("www/index.html", "secret\n");
    dir.write("www/public/index.html", "public\n");
    executable(
        &dir,
        "cgi-bin/who.sh",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\n\
         echo \"user=$REMOTE_USER type=$AUTH_TYPE auth=$HTTP_AUTHORIZATION\"\n",
    );
    let users = dir.join("htpasswd");
    htpasswd(&users, true, "-B", "alice", "bcrypt secret");
    htpasswd(&users, false, "-m", "bob", "apr1 secret");
    htpasswd(&users, false, "-s", "carol", "sha secret");
    let server = serve(
        &dir,
        "\"127.0.0.1:0\"",
        "[log]\naccess = \"access.log\"\n\n\
         [[site]]\nroot = \"www\"\nbasic_auth = { realm = \"Staff only\", users = \"htpasswd\" }\n\n\
         [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = { dir = \"cgi-bin\" }\n\n\
         [[site.route]]\nprefix = \"/public/\"\nstatic = {}\nbasic_auth = false\n",
    );
    (dir, server)
}

#[test]
fn rfc7617_passwords_htpasswd_made_with_bcrypt_apr1_and_sha_are_accepted_and_wrong_ones_get_401() {
    let (_dir, server) = basic_site("access-basic");
    for (user, pw) in [
        ("alice", "bcrypt secret"),
        ("bob", "apr1 secret"),
        ("carol", "sha secret"),
    ] {
        let r = get_as(&server, "/index.html", Some((user, pw)));
        assert_eq!(r.status, 200, "{user}: {r:?}");
        assert_eq!(r.body, b"secret\n");
        // Twice: bcrypt's second success comes from the cache.
        assert_eq!(get_as(&server, "/index.html", Some((user, pw))).status, 200);
        let r = get_as(&server, "/index.html", Some((user, "wrong")));
        assert_eq!(r.status, 401, "{user} with a wrong password: {r:?}");
    }
    for auth in [None, Some(("nobody", "bcrypt secret")), Some(("alice", ""))] {
        let r = get_as(&server, "/index.html", auth);
        assert_eq!(r.status, 401, "{auth:?}: {r:?}");
        // RFC 7617 §2 and §2.1: the realm, and the charset expected.
        assert_eq!(
            r.header("www-authenticate"),
            Some("Basic realm=\"Staff only\", charset=\"UTF-8\""),
            "{r:?}"
        );
    }
    // A route with `basic_auth = false` lifts the site's.
    let r = get_as(&server, "/public/index.html", None);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"public\n"[..]));
}

#[test]
fn a_changed_htpasswd_file_is_read_again_without_a_reload() {
    let (dir, server) = basic_site("access-reread");
    let users = dir.join("htpasswd");
    assert_eq!(
        get_as(&server, "/", Some(("bob", "apr1 secret"))).status,
        200
    );
    // As an administrator does it: htpasswd rewrites the file.
    htpasswd(&users, false, "-m", "bob", "new secret");
    htpasswd(&users, false, "-s", "dave", "dave secret");
    let until = Instant::now() + Duration::from_secs(10);
    while get_as(&server, "/", Some(("bob", "new secret"))).status != 200 {
        assert!(Instant::now() < until, "the new password never took");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        get_as(&server, "/", Some(("bob", "apr1 secret"))).status,
        401
    );
    assert_eq!(
        get_as(&server, "/", Some(("dave", "dave secret"))).status,
        200
    );
    assert_eq!(
        get_as(&server, "/", Some(("alice", "bcrypt secret"))).status,
        200
    );
}

#[test]
fn rfc3875_4_1_11_the_user_reaches_cgi_as_remote_user_and_the_access_log_as_its_third_field() {
    let (dir, server) = basic_site("access-remote-user");
    let r = get_as(&server, "/cgi-bin/who.sh", Some(("carol", "sha secret")));
    assert_eq!(r.status, 200, "{r:?}");
    // The credentials themselves are the server's (RFC 3875 §4.1.18).
    assert_eq!(r.text(), "user=carol type=Basic auth=\n");
    let r = get_as(&server, "/cgi-bin/who.sh", Some(("alice", "bcrypt secret")));
    assert_eq!(r.text(), "user=alice type=Basic auth=\n");
    let log = wait_text(&dir.join("access.log"), Duration::from_secs(10), |t| {
        t.lines().filter(|l| l.contains("/cgi-bin/who.sh")).count() == 2
    });
    assert!(
        log.contains("127.0.0.1 - carol [") && log.contains("127.0.0.1 - alice ["),
        "{log}"
    );
    // A request refused has no user: `-`, as Apache logs a failed login.
    assert_eq!(get_as(&server, "/index.html", None).status, 401);
    let log = wait_text(&dir.join("access.log"), Duration::from_secs(10), |t| {
        t.contains("\"GET /index.html HTTP/1.1\" 401")
    });
    let line = log
        .lines()
        .find(|l| l.contains("\"GET /index.html HTTP/1.1\" 401"))
        .expect("the 401's line");
    assert!(line.starts_with("127.0.0.1 - - ["), "{line}");
}

/// The address of the `[::1]` listener, from the server's stderr.
fn v6_addr(server: &Server) -> SocketAddr {
    let text = server.stderr();
    let at = text
        .split("listening on http://[::1]:")
        .nth(1)
        .expect("a [::1] listener");
    let port: String = at.chars().take_while(char::is_ascii_digit).collect();
    format!("[::1]:{port}").parse().expect("address")
}

/// `curl [--http2-prior-knowledge]` for each URL, one connection each
/// (curl 7.88 fails to reuse an h2c prior-knowledge connection for a
/// second URL: "Error in the HTTP2 framing layer", before sending it; the
/// server never sees it): the statuses in order.
fn curl_statuses(urls: &[String], h2: bool, extra: &[&str]) -> Vec<u16> {
    require("curl", "curl");
    urls.iter()
        .map(|url| {
            let mut cmd = Command::new("curl");
            cmd.args(["-sS", "--max-time", "20", "-o", "/dev/null"])
                .args(["-w", "%{http_code} %{http_version}"])
                .args(extra);
            if h2 {
                cmd.arg("--http2-prior-knowledge");
            }
            let out = cmd.arg(url).output().expect("run curl");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let (code, version) = text.split_once(' ').unwrap_or((&text, ""));
            assert_eq!(version == "2", h2, "{url}: {text}");
            code.parse().unwrap_or(0)
        })
        .collect()
}

#[test]
fn address_rules_tell_ipv4_and_ipv6_loopback_clients_apart_over_http1_and_http2() {
    let dir = TempDir::new("access-address");
    dir.write("www/v4/index.html", "v4\n");
    dir.write("www/v6/index.html", "v6\n");
    dir.write("www/open/index.html", "open\n");
    dir.write("www/index.html", "root\n");
    let server = serve(
        &dir,
        "\"127.0.0.1:0\", \"[::1]:0\"",
        "[log]\naccess = \"off\"\n\n[[site]]\nroot = \"www\"\n\
         address_rules = [\"allow 127.0.0.0/8\", \"allow [::1]\", \"deny all\"]\n\n\
         [[site.route]]\nprefix = \"/v4/\"\nstatic = {}\n\
         address_rules = [\"allow 127.0.0.1\", \"deny all\"]\n\n\
         [[site.route]]\nprefix = \"/v6/\"\nstatic = {}\naddress_rules = [\"allow ::1\", \"deny all\"]\n\n\
         [[site.route]]\nprefix = \"/open/\"\nstatic = {}\naddress_rules = [\"deny 10.0.0.0/8\"]\n",
    );
    assert!(
        server.wait_stderr(0, "listening on http://[::1]:", Duration::from_secs(10)),
        "{}",
        server.stderr()
    );
    let v4 = server.addr;
    let v6 = v6_addr(&server);
    for h2 in [false, true] {
        let urls = |addr: SocketAddr| -> Vec<String> {
            ["/v4/", "/v6/", "/open/", "/"]
                .iter()
                .map(|p| format!("http://{addr}{p}"))
                .collect()
        };
        let (a, b) = (urls(v4), urls(v6));
        assert_eq!(
            curl_statuses(&a, h2, &[]),
            [200, 403, 200, 200],
            "IPv4, h2 {h2}"
        );
        assert_eq!(
            curl_statuses(&b, h2, &[]),
            [403, 200, 200, 200],
            "IPv6, h2 {h2}"
        );
    }
}

/// `stoa bench --json`: the count of each status.
fn bench_statuses(args: &[&str], url: &str, dir: &TempDir) -> serde_json::Value {
    let json = dir.join("bench.json");
    let out = Command::new(stoa_bin())
        .arg("bench")
        .args(args)
        .args(["-q", "-l", "--json"])
        .arg(&json)
        .arg(url)
        .output()
        .expect("run stoa bench");
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| {
        panic!(
            "no {} ({e}): {}",
            json.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let v: serde_json::Value = serde_json::from_str(&text).expect("bench JSON");
    v["status"].clone()
}

#[test]
fn rfc6585_4_requests_past_rate_and_burst_get_429_with_retry_after_measured_with_stoa_bench() {
    let dir = TempDir::new("access-rate");
    dir.write("www/limited/index.html", "limited\n");
    dir.write("www/h2/index.html", "h2\n");
    dir.write("www/free/index.html", "free\n");
    // One an hour: within the test, only the burst passes, whatever the
    // machine's speed.
    let server = serve(
        &dir,
        "\"127.0.0.1:0\"",
        "[log]\naccess = \"off\"\n\n[[site]]\nroot = \"www\"\n\n\
         [[site.route]]\nprefix = \"/limited/\"\nstatic = {}\n\
         limit_requests = { rate = \"1/h\", burst = 9 }\n\n\
         [[site.route]]\nprefix = \"/h2/\"\nstatic = {}\n\
         limit_requests = { rate = \"1/h\", burst = 4, key = \"header:X-Api-Key\" }\n",
    );
    // Four connections, two workers: the limit is one table for all.
    let url = format!("http://{}/limited/", server.addr);
    let st = bench_statuses(&["-n", "50", "-c", "4", "-k"], &url, &dir);
    assert_eq!(
        (st["200"].as_u64(), st["429"].as_u64()),
        (Some(10), Some(40)),
        "{st}"
    );
    let r = server.get("/limited/");
    assert_eq!(r.status, 429);
    let retry: u64 = r
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("Retry-After in seconds");
    assert!((3000..=3600).contains(&retry), "{retry}");
    // Another route is another limit: not touched.
    let free = format!("http://{}/free/", server.addr);
    let st = bench_statuses(&["-n", "20", "-c", "2", "-k"], &free, &dir);
    assert_eq!(st["200"].as_u64(), Some(20), "{st}");

    // HTTP/2 requests count as HTTP/1 ones; the key is a header, and a
    // request without it is not limited.
    let urls: Vec<String> = (0..8)
        .map(|_| format!("http://{}/h2/", server.addr))
        .collect();
    let keyed = |key: &str| {
        let h = format!("X-Api-Key: {key}");
        curl_statuses(&urls, true, &["-H", &h])
    };
    assert_eq!(keyed("one"), [200, 200, 200, 200, 200, 429, 429, 429]);
    assert_eq!(keyed("two")[..5], [200; 5], "another key, its own burst");
    assert_eq!(
        curl_statuses(&urls, true, &[]),
        [200; 8],
        "no key, no limit"
    );
}

/// nginx's `limit_req` without `nodelay`: requests within the burst are
/// not refused but held back to the rate, so the k-th of a quick series
/// is answered no sooner than (k - 1) / rate after the first.
#[test]
fn with_delay_requests_within_the_burst_wait_their_turn_instead_of_429() {
    let dir = TempDir::new("access-delay");
    dir.write("www/index.html", "hello\n");
    let server = serve(
        &dir,
        "\"127.0.0.1:0\"",
        "[log]\naccess = \"off\"\n\n[[site]]\nroot = \"www\"\n\
         limit_requests = { rate = \"10/s\", burst = 5, delay = true }\n",
    );
    let t0 = Instant::now();
    for i in 0..4 {
        assert_eq!(server.get("/index.html").status, 200, "request {i}");
    }
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(300), "{took:?}");
}

#[test]
fn limit_connections_answers_503_while_the_clients_requests_are_in_flight() {
    let dir = TempDir::new("access-conns");
    dir.write("www/index.html", "hello\n");
    // The script says it started, then waits for the test's word.
    executable(
        &dir,
        "cgi-bin/slow.sh",
        "#!/bin/sh\ntouch \"$STARTED\"\nwhile [ ! -e \"$GO\" ]; do sleep 0.05; done\n\
         printf 'Content-Type: text/plain\\r\\n\\r\\ndone\\n'\n",
    );
    // A local redirect (RFC 3875 §6.2.2) is the same request: its
    // slot is not taken twice.
    executable(
        &dir,
        "cgi-bin/redirect.sh",
        "#!/bin/sh\nprintf 'Location: /index.html\\r\\n\\r\\n'\n",
    );
    let started = dir.join("started");
    let go = dir.join("go");
    let server = serve(
        &dir,
        "\"127.0.0.1:0\"",
        &format!(
            "[log]\naccess = \"off\"\n\n[[site]]\nroot = \"www\"\nlimit_connections = 1\n\n\
             [[site.route]]\nprefix = \"/cgi-bin/\"\n\
             cgi = {{ dir = \"cgi-bin\", env = {{ STARTED = {:?}, GO = {:?} }} }}\n",
            started.display().to_string(),
            go.display().to_string()
        ),
    );
    let r = server.get("/cgi-bin/redirect.sh");
    assert_eq!((r.status, r.text().as_str()), (200, "hello\n"), "{r:?}");
    let mut slow = server.connect();
    slow.send(&get("/cgi-bin/slow.sh"));
    let until = Instant::now() + Duration::from_secs(10);
    while !started.exists() {
        assert!(Instant::now() < until, "the script never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // nginx's limit_conn default status while one is in flight.
    assert_eq!(server.get("/index.html").status, 503);
    std::fs::write(&go, "").expect("go");
    let r = slow.read();
    assert_eq!((r.status, r.text().as_str()), (200, "done\n"));
    // The slot is given back once the response is done.
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let s = server.get("/index.html").status;
        if s == 200 {
            break;
        }
        assert!(Instant::now() < until, "still {s}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
