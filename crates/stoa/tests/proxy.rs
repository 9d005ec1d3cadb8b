//! The reverse proxy (issue 12) against a real HTTP/1.1 application server:
//! tests/proxy-peers/backend.py (Python's standard library), started by
//! each test on a loopback port.

mod common;

use common::*;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A backend.py process, killed on drop.
struct Backend {
    child: Child,
    addr: SocketAddr,
}

fn peers_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/proxy-peers")
}

impl Backend {
    fn start(args: &[&str]) -> Backend {
        require("python3", "python3");
        let mut child = Command::new("python3")
            .arg(peers_dir().join("backend.py"))
            .args(["--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start backend.py");
        let out = child.stdout.take().expect("backend stdout");
        let mut line = String::new();
        BufReader::new(out)
            .read_line(&mut line)
            .expect("backend's first line");
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("backend.py said {line:?}"));
        Backend { child, addr }
    }

    /// GET straight to the backend (not through Stoa).
    fn get(&self, path: &str) -> Response {
        Conn::connect(self.addr).request(
            format!("GET {path} HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n").as_bytes(),
        )
    }

    fn stat(&self, name: &str) -> u64 {
        let r = self.get("/stats");
        let t = r.text();
        let key = format!("\"{name}\": ");
        let at = t.find(&key).unwrap_or_else(|| panic!("no {name} in {t}"));
        t[at + key.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .expect("a number")
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Stoa with `pools` and one `/app/` route to pool `app` with `proxy`
/// options.
fn stoa(dir: &TempDir, pools: &str, proxy_opts: &str) -> Server {
    dir.mkdir("www");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "{pools}\n[[site]]\nroot = \"www\"\n[[site.route]]\nprefix = \"/app/\"\nproxy = {{ pool = \"app\"{proxy_opts} }}\n"
        ),
    );
    Server::with_config(&cfg)
}

/// Stoa with one `/app/` route to `b` that streams request bodies
/// (`request_buffering = false`).
fn unbuffered(b: &Backend) -> (TempDir, Server) {
    let dir = TempDir::new("proxy-stream");
    dir.mkdir("www");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "{}\n[[site]]\nroot = \"www\"\n[[site.route]]\nprefix = \"/app/\"\nrequest_buffering = false\nproxy = {{ pool = \"app\" }}\n",
            http_pool(&[b.addr], "")
        ),
    );
    let s = Server::with_config(&cfg);
    (dir, s)
}

fn http_pool(addrs: &[SocketAddr], extra: &str) -> String {
    let list: Vec<String> = addrs.iter().map(|a| format!("\"{a}\"")).collect();
    format!(
        "[[pool]]\nname = \"app\"\nprotocol = \"http\"\naddress = [{}]\n{extra}\n",
        list.join(", ")
    )
}

/// RFC 9110 §7.6.1: hop-by-hop fields, and every field the client's
/// Connection names, stop at the proxy; the application learns the client
/// from Forwarded (RFC 7239) and X-Forwarded-*, the Host stays the client's.
#[test]
fn rfc_9110_7_6_1_hop_by_hop_and_connection_named_fields_never_reach_the_application() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("proxy-hop");
    let s = stoa(&dir, &http_pool(&[b.addr], ""), "");
    let r = s.request(
        b"GET /app/echo?q=1 HTTP/1.1\r\nHost: site.test\r\nConnection: keep-alive, X-Secret\r\nX-Secret: s3\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nProxy-Authorization: Basic eA==\r\nX-Forwarded-For: 6.6.6.6\r\nX-Kept: yes\r\n\r\n",
    );
    assert_eq!(r.status, 200, "{}", s.stderr());
    let t = r.text().to_ascii_lowercase();
    for gone in [
        "x-secret",
        "keep-alive",
        "\"te\"",
        "proxy-authorization",
        "6.6.6.6",
    ] {
        assert!(!t.contains(gone), "{gone} reached the application: {t}");
    }
    assert!(t.contains("\"x-kept\", \"yes\""), "{t}");
    assert!(t.contains("\"host\", \"site.test\""), "{t}");
    assert!(t.contains("\"x-forwarded-for\", \"127.0.0.1\""), "{t}");
    assert!(t.contains("\"forwarded\", \"for=127.0.0.1"), "{t}");
    assert!(t.contains("\"target\": \"/app/echo?q=1\""), "{t}");
    // The client's connection is the client's business.
    assert!(r.header("x-backend").is_some());
}

/// The keep-alive race (jetty#2306, ingress-nginx#11244): the application
/// closes an idle kept-alive connection just as the proxy sends a request
/// on it. The backend closes after 0.5 s idle and answers a request that
/// crosses its close within 5 ms with a reset (a network's delay); GETs and
/// POSTs are sent around that moment. None of them may fail.
#[test]
fn issue_12_the_keep_alive_race_costs_no_request() {
    let b = Backend::start(&["--idle-close", "0.5", "--race-window", "5"]);
    let dir = TempDir::new("proxy-race");
    let s = stoa(
        &dir,
        &http_pool(&[b.addr], "keepalive_timeout = \"10s\""),
        "",
    );
    let mut statuses = Vec::new();
    let mut conn = s.connect();
    for k in 0..16u64 {
        let wait = Duration::from_millis(497 + k);
        std::thread::sleep(wait);
        let req = if k % 2 == 0 {
            format!("GET /app/g{k} HTTP/1.1\r\nHost: t\r\n\r\n")
        } else {
            format!("POST /app/p{k} HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello")
        };
        let r = conn.request(req.as_bytes());
        statuses.push(r.status);
    }
    assert!(
        statuses.iter().all(|&st| st == 200),
        "{statuses:?}\n{}",
        s.stderr()
    );
    // The race was run: the backend closed idle connections under Stoa.
    let closes = b.stat("idle_closes");
    assert!(
        closes >= 8,
        "only {closes} idle closes: the test did not race"
    );
    // And some requests crossed a close (30 runs of 30 by hand: 12).
    let raced = b.stat("race_resets");
    assert!(
        raced >= 1,
        "no request crossed a close: the test did not race"
    );
    assert!(
        s.wait_stderr(0, "retrying on a new one", Duration::from_secs(10)),
        "{}",
        s.stderr()
    );
}

/// The keep-alive race for requests that cannot go again: a backend
/// announces `Keep-Alive: timeout=1` and, as a real one across a network
/// would, drops (reads, then closes without an answer) a request that
/// reaches it in the last 5 % of that second. A POST that met it could
/// have been acted on, so it cannot be sent again: Stoa must not send it
/// on a connection that close to its announced end. It closes parked
/// connections a margin before it (half of N, at most a second), as
/// HAProxy's `http-reuse` and Envoy's upstream idle timeouts keep
/// connections away from a server's close, and checks that life when it
/// takes a connection, not only in its periodic sweep.
#[test]
fn a_post_is_never_sent_on_a_connection_near_its_announced_keep_alive_end() {
    let b = Backend::start(&["--idle-close", "1", "--advertise", "--late-close", "50"]);
    let dir = TempDir::new("proxy-ka-margin");
    let s = stoa(
        &dir,
        &http_pool(&[b.addr], "keepalive_timeout = \"10s\""),
        "",
    );
    let mut statuses = Vec::new();
    let mut conn = s.connect();
    for k in 0..8u64 {
        let req = if k % 2 == 0 {
            format!("GET /app/g{k} HTTP/1.1\r\nHost: t\r\n\r\n")
        } else {
            format!("POST /app/p{k} HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello")
        };
        let r = conn.request(req.as_bytes());
        statuses.push(r.status);
        // Into the backend's last 50 ms of its second (the gap is
        // measured from the response, the backend's from a moment
        // earlier).
        std::thread::sleep(Duration::from_millis(960 + 4 * k));
    }
    assert!(
        statuses.iter().all(|&st| st == 200),
        "{statuses:?}\n{}",
        s.stderr()
    );
    assert_eq!(b.stat("late_closes"), 0, "{}", s.stderr());
}

/// nginx sets `proxy_read_timeout` per location: a route's `read_timeout`
/// replaces the pool's `timeout` (60 s) for its requests, and a response
/// head that takes longer is a 504 at once (the pool's only server: no
/// other to try).
#[test]
fn a_routes_read_timeout_replaces_the_pools_timeout() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("proxy-read-timeout");
    let s = stoa(
        &dir,
        &http_pool(&[b.addr], ""),
        ", read_timeout = \"300ms\"",
    );
    let t = Instant::now();
    let r = s.get("/app/slow?delay=2");
    let took = t.elapsed();
    assert_eq!(r.status, 504, "{r:?}\n{}", s.stderr());
    assert!(took < Duration::from_millis(1500), "504 after {took:?}");
    assert_eq!(s.get("/app/quick").status, 200);
    // The line is written before the 504; stderr comes through a pipe.
    s.wait_stderr(0, "no response within", Duration::from_secs(5));
    let log = s.stderr();
    let line = log
        .lines()
        .find(|l| l.contains("no response within"))
        .unwrap_or_else(|| panic!("no log line for the timeout:\n{log}"));
    assert!(line.contains(&b.addr.to_string()), "{line}");
    assert!(line.contains("GET /app/slow"), "{line}");
    assert!(line.contains("client: 127.0.0.1"), "{line}");
}

/// nginx `proxy_next_upstream http_503`: a server's 503 is not passed on
/// while another server is left, for an idempotent request; a POST gets
/// the 503 as the server gave it (RFC 9110 §9.2.2: it may have acted).
#[test]
fn retries_on_http_503_send_a_get_to_the_next_server_but_not_a_post() {
    let down = Backend::start(&["--name", "down", "--health-down"]);
    let up = Backend::start(&["--name", "up"]);
    let dir = TempDir::new("proxy-retry-503");
    let s = stoa(
        &dir,
        &http_pool(&[down.addr, up.addr], "balance = \"round-robin\""),
        ", strip_prefix = true, retries = { on = [\"error\", \"http_503\"] }",
    );
    for _ in 0..6 {
        let r = s.get("/app/health");
        assert_eq!(r.status, 200, "{r:?}\n{}", s.stderr());
        assert_eq!(r.text(), "ok up\n");
    }
    let posts: Vec<u16> = (0..4)
        .map(|_| {
            s.request(b"POST /app/health HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi")
                .status
        })
        .collect();
    assert!(posts.contains(&503), "{posts:?}");
    assert!(posts.contains(&200), "{posts:?}");
}

/// Active health checks: a server whose /health fails is taken out of
/// rotation and put back once it passes again.
#[test]
fn issue_12_a_failing_server_leaves_the_rotation_and_comes_back() {
    let a = Backend::start(&["--name", "a"]);
    let c = Backend::start(&["--name", "c"]);
    let dir = TempDir::new("proxy-health");
    let s = stoa(
        &dir,
        &http_pool(
            &[a.addr, c.addr],
            "balance = \"round-robin\"\nhealth = { path = \"/health\", interval = \"100ms\", timeout = \"1s\", fails = 2, passes = 2 }",
        ),
        "",
    );
    let names = |n: usize| -> Vec<String> {
        (0..n)
            .map(|i| {
                let r = s.get(&format!("/app/x{i}"));
                assert_eq!(r.status, 200, "{}", s.stderr());
                r.header("x-backend").unwrap_or("").to_owned()
            })
            .collect()
    };
    let both = names(6);
    assert!(
        both.iter().any(|n| n == "a") && both.iter().any(|n| n == "c"),
        "{both:?}"
    );
    assert_eq!(a.get("/health/down").status, 200);
    std::thread::sleep(Duration::from_millis(600));
    let only = names(6);
    assert!(only.iter().all(|n| n == "c"), "{only:?}\n{}", s.stderr());
    assert_eq!(a.get("/health/up").status, 200);
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        if names(4).iter().any(|n| n == "a") {
            break;
        }
        assert!(Instant::now() < until, "a never came back\n{}", s.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Bodies both ways arrive whole: a 1 MiB POST, a chunked response and a
/// 16 MiB one read by the client as it comes.
#[test]
fn issue_12_bodies_pass_through_whole_in_both_directions() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("proxy-bodies");
    let s = stoa(&dir, &http_pool(&[b.addr], ""), ", strip_prefix = true");
    let body = pattern(1 << 20, 7);
    let mut req = format!(
        "POST /app/upload HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    let r = s.request(&req);
    assert_eq!(r.status, 200, "{}", s.stderr());
    assert!(
        r.text().contains("\"body_length\": 1048576"),
        "{}",
        r.text()
    );

    let r = s.get("/app/big?size=300000&chunked=1&chunk=7000");
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 300_000);

    let mut c = s.connect();
    c.send(b"GET /app/big?size=16777216 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let mut all = c.take_pending();
    c.stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    c.stream.read_to_end(&mut all).expect("read the response");
    let head_end = find(&all, b"\r\n\r\n").expect("a head") + 4;
    assert!(
        all.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&all[..head_end])
    );
    assert_eq!(all.len() - head_end, 16 << 20);
}

/// CL.TE request smuggling: a request with both Content-Length and
/// Transfer-Encoding is refused (RFC 9112 §6.1) and the upstream never
/// sees it, so no second request can hide in its body.
#[test]
fn rfc_9112_6_1_a_cl_te_request_never_reaches_the_upstream() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("proxy-smuggle");
    let s = stoa(&dir, &http_pool(&[b.addr], ""), "");
    let before = b.stat("requests");
    let r = s.request(
        b"POST /app/x HTTP/1.1\r\nHost: t\r\nContent-Length: 44\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /app/smuggled HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    assert_eq!(r.status, 400);
    // /stats itself counts as one request.
    assert_eq!(b.stat("requests"), before + 1);
}

/// `strip_prefix` sends the path without the route's prefix, and a
/// redirect the application makes to its own address comes back to the
/// client in the client's terms (nginx's `proxy_redirect default`).
#[test]
fn issue_12_strip_prefix_and_redirects_are_rewritten_for_the_client() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("proxy-strip");
    let s = stoa(
        &dir,
        &http_pool(&[b.addr], ""),
        ", strip_prefix = true, preserve_host = false",
    );
    let r = s.get("/app/echo");
    assert_eq!(r.status, 200, "{}", s.stderr());
    assert!(r.text().contains("\"target\": \"/echo\""), "{}", r.text());
    let to = format!("http://{}/next", b.addr);
    let r = s.get(&format!("/app/redirect?to={to}"));
    assert_eq!(r.status, 302, "{}", s.stderr());
    let loc = r.header("location").unwrap_or("");
    assert!(loc.ends_with("/app/next"), "{loc}");
}

/// What the upstream gets as the request target: the path routing
/// matched (dot segments resolved, RFC 3986 §5.2.4; bytes outside the
/// unreserved set percent-encoded), the prefix stripped, the query as the
/// client sent it. A client path that is already in that form goes as it
/// came; any other is rebuilt, so `/app/x/../../admin` cannot reach the
/// upstream as anything but `/admin` (path confusion between proxy and
/// application).
#[test]
fn issue_12_the_upstream_gets_the_normalized_path_without_the_prefix_and_the_query_as_sent() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("proxy-target");
    let s = stoa(&dir, &http_pool(&[b.addr], ""), ", strip_prefix = true");
    for (path, want) in [
        ("/app/echo", "/echo"),
        ("/app/echo?a=1&b=%20x", "/echo?a=1&b=%20x"),
        ("/app/echo?", "/echo?"),
        ("/app/x/../echo?q", "/echo?q"),
        ("/app/./echo", "/echo"),
        ("/app/%65cho", "/echo"),
        ("/app/e%20cho?q", "/e%20cho?q"),
        ("/app/a:b", "/a%3Ab"),
        ("/app//echo", "/echo"),
    ] {
        let r = s.get(path);
        assert_eq!(r.status, 200, "{path}: {}", s.stderr());
        let needle = format!("\"target\": \"{want}\"");
        assert!(r.text().contains(&needle), "{path}: {}", r.text());
    }
}

/// A route may not name a FastCGI pool for `proxy`, nor an HTTP one for
/// `fastcgi`: the config says which to use, with the line.
#[test]
fn issue_12_a_route_naming_a_pool_of_the_other_protocol_is_refused() {
    let dir = TempDir::new("proxy-mismatch");
    dir.mkdir("www");
    let cfg = dir.config(
        "stoa.toml",
        "[[pool]]\nname = \"app\"\nprotocol = \"http\"\naddress = [\"127.0.0.1:9\"]\n[[site]]\nroot = \"www\"\n[[site.route]]\nprefix = \"/a/\"\nfastcgi = { pool = \"app\" }\n",
    );
    let out = Command::new(stoa_bin())
        .arg("check")
        .arg(&cfg)
        .output()
        .expect("run stoa check");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("fastcgi.pool") && err.contains("use `proxy`"),
        "{err}"
    );
}

/// A WebSocket through the proxy (RFC 6455 §4, RFC 9110 §7.8 Upgrade): the
/// 101 comes back with its Upgrade and Connection fields, then frames
/// cross both ways (the server speaks first, then 5 echoes of 70 kB, after
/// an idle second) until the client closes.
#[test]
fn rfc_9110_7_8_a_websocket_upgrade_is_tunnelled_both_ways() {
    require("python3", "python3");
    let ws = peers_dir().join("ws_echo.py");
    let mut server = Command::new("python3")
        .arg(&ws)
        .args(["serve", "--port", "0", "--hello", "hi"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start ws_echo.py");
    let mut line = String::new();
    BufReader::new(server.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("its first line");
    let addr: SocketAddr = line
        .trim()
        .strip_prefix("listening on ")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("ws_echo.py said {line:?}"));
    let dir = TempDir::new("proxy-ws");
    let s = stoa(&dir, &http_pool(&[addr], ""), ", tunnel_timeout = \"5s\"");
    let out = Command::new("python3")
        .arg(&ws)
        .args(["client", &s.addr.to_string(), "--path", "/app/ws"])
        .args(["--count", "5", "--size", "70000", "--hello", "--idle", "1"])
        .output()
        .expect("run the client");
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success(),
        "{}{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        s.stderr()
    );
}

/// A server that dies under load (its sockets reset) costs no idempotent
/// request: each goes again on the other server, and the dead one is left
/// out of rotation meanwhile (issue 12: "only in-flight non-idempotent
/// requests may fail").
#[test]
fn issue_12_a_server_killed_under_load_fails_no_idempotent_request() {
    let dying = Backend::start(&["--name", "dying", "--die-after", "7"]);
    let other = Backend::start(&["--name", "other"]);
    let dir = TempDir::new("proxy-die");
    let s = stoa(
        &dir,
        &http_pool(&[dying.addr, other.addr], "balance = \"round-robin\""),
        "",
    );
    let statuses: Vec<u16> = (0..40)
        .map(|i| s.get(&format!("/app/r{i}")).status)
        .collect();
    assert!(
        statuses.iter().all(|&st| st == 200),
        "{statuses:?}\n{}",
        s.stderr()
    );
    // The death was met (and the request went again), not missed.
    let log = s.stderr();
    assert!(
        log.contains("retrying on a new one") || log.contains("trying another server"),
        "{log}"
    );
}

/// A large response to a client that stops reading: Stoa holds a bounded
/// amount of it (one read from the upstream, and the sockets' buffers),
/// not the response (issue 12: "a slow client never makes Stoa hold a
/// large response").
#[test]
fn issue_12_a_client_that_stops_reading_makes_stoa_hold_little() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("proxy-slow");
    let s = stoa(&dir, &http_pool(&[b.addr], ""), ", strip_prefix = true");
    let rss = |pid: i32| -> u64 {
        let st = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
        st.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .expect("VmRSS")
    };
    let before = rss(s.pid());
    let mut c = s.connect();
    c.set_recv_buffer(64 * 1024);
    c.send(b"GET /app/big?size=268435456 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let head = c.read_head();
    assert_eq!(head.status, 200, "{}", s.stderr());
    // Not reading: the upstream keeps sending for a while, Stoa must not
    // buffer what the client does not take.
    std::thread::sleep(Duration::from_secs(2));
    let during = rss(s.pid());
    assert!(
        during < before + 16 * 1024,
        "RSS grew from {before} kB to {during} kB while the client did not read"
    );
    // And the response is intact when the client reads it after all.
    let mut total = c.take_pending().len() as u64;
    let mut buf = vec![0u8; 1 << 20];
    c.stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    loop {
        match c.stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(e) => panic!("reading the body: {e}"),
        }
    }
    assert_eq!(total, 268_435_456);
}

/// An HTTP pool Stoa spawns and supervises: the listening socket reaches
/// the application as fd 0, or by systemd socket activation (fd 3 with
/// LISTEN_FDS=1 and LISTEN_PID its own pid), and requests are served.
#[test]
fn issue_12_spawned_http_servers_get_their_socket_as_fd_0_or_by_socket_activation() {
    require("python3", "python3");
    let backend = peers_dir().join("backend.py");
    for (tag, args, extra) in [
        ("fd0", "\"--fd\", \"0\", \"--name\", \"fd0\"", ""),
        ("sd", "\"--name\", \"sd\"", "socket_activation = true\n"),
    ] {
        let dir = TempDir::new(&format!("proxy-spawn-{tag}"));
        let pool = format!(
            "[[pool]]\nname = \"app\"\nprotocol = \"http\"\ncommand = [\"/usr/bin/python3\", \"{}\", {args}]\nprocesses = 2\n{extra}",
            backend.display()
        );
        let s = stoa(&dir, &pool, "");
        let until = Instant::now() + Duration::from_secs(10);
        let r = loop {
            let r = s.get("/app/echo");
            if r.status == 200 || Instant::now() > until {
                break r;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert_eq!(r.status, 200, "{tag}: {}", s.stderr());
        assert_eq!(r.header("x-backend"), Some(tag), "{}", s.stderr());
    }
}

/// `balance = "p2c-ewma"`: of two servers, the one answering in 200 ms
/// gets (after its first answer) no more requests while the fast one has
/// no queue; the status page shows each one's latency estimate.
#[test]
fn issue_12_p2c_ewma_sends_requests_to_the_faster_server() {
    let slow = Backend::start(&["--name", "slow", "--delay", "0.2"]);
    let fast = Backend::start(&["--name", "fast"]);
    let dir = TempDir::new("proxy-p2c");
    dir.mkdir("www");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "{}\n[[site]]\nroot = \"www\"\n[[site.route]]\nprefix = \"/app/\"\nproxy = {{ pool = \"app\" }}\n[[site.route]]\nprefix = \"/status\"\nstatus = {{}}\n",
            http_pool(&[slow.addr, fast.addr], "balance = \"p2c-ewma\"")
        ),
    );
    let s = Server::with_config(&cfg);
    let mut to_slow = 0;
    for i in 0..30 {
        let r = s.get(&format!("/app/p{i}"));
        assert_eq!(r.status, 200, "{}", s.stderr());
        if r.header("x-backend") == Some("slow") {
            to_slow += 1;
        }
    }
    assert!(
        (1..=2).contains(&to_slow),
        "{to_slow} of 30 to the slow server"
    );
    let st = s.get("/status?format=json").text();
    assert!(st.contains("\"latency_ewma_ms\""), "{st}");
    assert!(st.contains("\"healthy\":true"), "{st}");
}

/// An HTTP/1.0 upstream (RFC 9112 §6.3: its response ends when it closes):
/// the request goes as HTTP/1.0 with a Content-Length, the close-delimited
/// response reaches an HTTP/1.1 client chunked and whole, and the
/// connection, which the server closes, is not kept.
#[test]
fn rfc_9112_6_3_an_http_1_0_upstream_is_spoken_to_in_http_1_0() {
    let b = Backend::start(&["--http10"]);
    let dir = TempDir::new("proxy-10");
    let s = stoa(&dir, &http_pool(&[b.addr], ""), ", http_version = \"1.0\"");
    for i in 0..3 {
        let req = format!(
            "POST /app/e{i} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
        )
        .into_bytes();
        let r = s.request(&req);
        assert_eq!(r.status, 200, "{}", s.stderr());
        let t = r.text();
        assert!(t.contains("\"version\": \"HTTP/1.0\""), "{t}");
        assert!(t.contains("\"body_length\": 5"), "{t}");
    }
    assert_eq!(
        b.stat("connections"),
        4,
        "a connection per request (and /stats)"
    );
}

/// With `request_buffering = false`, a chunked request body streams to an
/// HTTP/1.1 upstream as chunks (RFC 9112 §7.1) while the client sends it:
/// the application has the first part before the client sends the rest.
#[test]
fn rfc_9112_7_1_an_unbuffered_chunked_body_streams_to_the_upstream() {
    let b = Backend::start(&[]);
    let (_dir, s) = unbuffered(&b);
    let mut c = s.connect();
    c.send(
        b"POST /app/up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nfirst \r\n",
    );
    std::thread::sleep(Duration::from_millis(300));
    // The upstream is reading the body by now: it has one connection.
    assert_eq!(
        b.stat("connections"),
        2,
        "the request did not reach the upstream while the body came"
    );
    c.send(b"4\r\nlast\r\n0\r\n\r\n");
    let r = c.read();
    assert_eq!(r.status, 200, "{}", s.stderr());
    let t = r.text();
    assert!(t.contains("\"body_length\": 10"), "{t}");
    assert!(t.contains("first last"), "{t}");
}

/// RFC 9110 §10.1.1: with the body still with the client
/// (`request_buffering = false`), `Expect: 100-continue` goes to the
/// application, which decides: its 417 reaches the client before any body
/// is asked for; its 100 lets the body through; one that never answers the
/// expectation gets the body after a second all the same.
#[test]
fn rfc_9110_10_1_1_expect_100_continue_is_decided_by_the_application_end_to_end() {
    for (mode, first) in [("reject", 417), ("continue", 100), ("ignore", 100)] {
        let b = Backend::start(&["--expect", mode]);
        let (_dir, s) = unbuffered(&b);
        let mut c = s.connect();
        c.send(
            b"POST /app/up HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
        );
        let r = c.read_head();
        assert_eq!(r.status, first, "{mode}: {}", s.stderr());
        if first != 100 {
            // The body was never asked for, so the connection ends.
            assert!(c.wait_closed(Duration::from_secs(5)).is_some(), "{mode}");
            continue;
        }
        c.send(b"hello");
        let r = c.read_final();
        assert_eq!(r.status, 200, "{mode}: {}", s.stderr());
        let t = r.text();
        assert!(t.contains("\"body\": \"hello\""), "{mode}: {t}");
        assert!(
            t.contains("[\"Expect\", \"100-continue\"]"),
            "{mode}: the application did not see the expectation: {t}"
        );
    }
}

/// RFC 9110 §15.2 and RFC 8297: an application's 103 Early Hints reaches an
/// HTTP/1.1 client ahead of the final response, with its fields; an
/// HTTP/1.0 client, which cannot take a 1xx, gets only the final one.
#[test]
fn rfc_8297_early_hints_from_the_application_reach_http_1_1_clients_only() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("proxy-103");
    let s = stoa(&dir, &http_pool(&[b.addr], ""), ", strip_prefix = true");
    let mut c = s.connect();
    c.send(b"GET /app/early-hints HTTP/1.1\r\nHost: t\r\n\r\n");
    let hints = c.read_head();
    assert_eq!(hints.status, 103, "{}", s.stderr());
    assert_eq!(
        hints.header("link"),
        Some("</style.css>; rel=preload; as=style")
    );
    let r = c.read();
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "final\n");

    let mut c = s.connect();
    c.send(b"GET /app/early-hints HTTP/1.0\r\nHost: t\r\n\r\n");
    let r = c.read();
    assert_eq!(r.status, 200, "an HTTP/1.0 client got a 1xx first");
    assert_eq!(r.text(), "final\n");

    // Over HTTP/2 (h2c) the hints are a HEADERS frame of their own.
    require("curl", "curl");
    let out = Command::new("curl")
        .args(["-sv", "--http2-prior-knowledge", "--max-time", "10"])
        .arg(format!("http://{}/app/early-hints", s.addr))
        .output()
        .expect("curl");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("< HTTP/2 103"), "{err}");
    assert!(err.contains("< link: </style.css>"), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "final\n");
}

/// A server that accepts connections and closes them without a word.
struct Slammer {
    addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Slammer {
    fn start() -> Slammer {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (st, acc) = (stop.clone(), accepted.clone());
        std::thread::spawn(move || {
            for c in l.incoming() {
                if st.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                acc.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                drop(c);
            }
        });
        Slammer {
            addr,
            stop,
            accepted,
        }
    }
}

impl Drop for Slammer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        // Wakes the accept loop so that it sees `stop`.
        let _ = std::net::TcpStream::connect(self.addr);
    }
}

/// nginx answers 502 within milliseconds when its only upstream accepts the
/// connection and closes it without a response ("upstream prematurely
/// closed connection", and `proxy_next_upstream` has no other server): no
/// wait in the queue for a server that will not be tried again. The log
/// line says what happened and names the server's address.
#[test]
fn an_upstream_that_accepts_and_closes_without_answering_gets_502_at_once() {
    let up = Slammer::start();
    let dir = TempDir::new("proxy-slam");
    let s = stoa(&dir, &http_pool(&[up.addr], ""), "");
    for req in [
        get("/app/x"),
        b"POST /app/y HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi".to_vec(),
    ] {
        let t = Instant::now();
        let r = s.request(&req);
        let took = t.elapsed();
        assert_eq!(r.status, 502, "{r:?}\n{}", s.stderr());
        assert!(
            took < Duration::from_millis(100),
            "502 after {took:?} (queue_timeout is 10 s)"
        );
    }
    assert!(up.accepted.load(std::sync::atomic::Ordering::Relaxed) >= 2);
    // The line is written before the 502; the test reads stderr through a
    // pipe, so it may arrive after the response.
    s.wait_stderr(0, "no other server to try", Duration::from_secs(10));
    let log = s.stderr();
    let line = log
        .lines()
        .find(|l| l.contains("without a response") && l.contains("GET"))
        .unwrap_or_else(|| panic!("no log line for the GET:\n{log}"));
    assert!(line.contains(&up.addr.to_string()), "{line}");
    assert!(line.contains("no other server to try"), "{line}");
    assert!(!log.contains("trying another server"), "{log}");
    assert!(!log.contains("none free in time"), "{log}");

    // Two such servers: a GET tries the other one, then gets 502 at once
    // too (nginx tries each server once).
    let up2 = Slammer::start();
    let dir = TempDir::new("proxy-slam2");
    let s = stoa(&dir, &http_pool(&[up.addr, up2.addr], ""), "");
    let t = Instant::now();
    let r = s.get("/app/z");
    let took = t.elapsed();
    assert_eq!(r.status, 502, "{r:?}\n{}", s.stderr());
    assert!(took < Duration::from_secs(1), "502 after {took:?}");
    assert!(
        s.wait_stderr(0, "trying another server", Duration::from_secs(10)),
        "{}",
        s.stderr()
    );
}

/// The status page counts the requests each server of an HTTP pool has
/// served (as nginx Plus's `upstreams` API does per peer) and names each
/// by its address, since its processes are not Stoa's to know a pid of.
#[test]
fn the_status_page_counts_served_requests_of_an_http_pool_and_names_its_address() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("proxy-status");
    dir.mkdir("www");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "{}\n[[site]]\nroot = \"www\"\n[[site.route]]\nprefix = \"/app/\"\nproxy = {{ pool = \"app\" }}\n[[site.route]]\nprefix = \"/status\"\nstatus = {{}}\n",
            http_pool(&[b.addr], "")
        ),
    );
    let s = Server::with_config(&cfg);
    for i in 0..5 {
        assert_eq!(s.get(&format!("/app/n{i}")).status, 200, "{}", s.stderr());
    }
    // The count moves once a response is written: wait for it.
    let until = Instant::now() + Duration::from_secs(5);
    let proc = loop {
        let st: serde_json::Value =
            serde_json::from_slice(&s.get("/status?format=json").body).expect("status JSON");
        let p = st["pools"][0]["processes"][0].clone();
        if p["served"] == 5 {
            break p;
        }
        assert!(Instant::now() < until, "served never reached 5: {st}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(proc["address"], b.addr.to_string(), "{proc}");
    assert!(proc.get("pid").is_none(), "{proc}");
    let text = s.get("/status").text();
    assert!(
        text.contains(&format!(" running address {} ", b.addr)),
        "{text}"
    );
    assert!(text.contains(" served 5 "), "{text}");
}
