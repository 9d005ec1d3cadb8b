//! HTTP/2 upstreams and gRPC through the proxy: a real grpcio service and
//! client (tests/grpc-peers/server.py and client.py, Debian's
//! python3-grpcio, raw-bytes methods so no protoc is needed) and a plain
//! HTTP/2 server on the `h2` library (h2_server.py, python3-h2), started by
//! each test on a loopback port. What nginx's `grpc_pass` and Caddy's
//! `reverse_proxy h2c://` carry, Stoa must carry, and Stoa's own failures
//! answer as "gRPC over HTTP/2" says.

mod common;

use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's python3-grpcio and python3-h2 are for the system Python.
const PY: &str = "/usr/bin/python3";

fn peers_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/grpc-peers")
}

fn require_module(module: &str, package: &str) {
    require(PY, "python3");
    let ok = Command::new(PY)
        .args(["-c", &format!("import {module}")])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "Python module `{module}` is missing: this test needs the Debian package `{package}` \
         (apt-get install {package}); test.sh installs it when run as root"
    );
}

/// A peer process (server.py or h2_server.py), killed on drop.
struct Peer {
    child: Child,
    addr: SocketAddr,
}

impl Peer {
    fn start(script: &str) -> Peer {
        Peer::start_with(script, &[])
    }

    fn start_with(script: &str, args: &[&str]) -> Peer {
        if script == "server.py" {
            require_module("grpc", "python3-grpcio");
        } else {
            require_module("h2", "python3-h2");
        }
        let mut child = Command::new(PY)
            .arg(peers_dir().join(script))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a peer");
        let out = child.stdout.take().expect("peer stdout");
        let mut line = String::new();
        BufReader::new(out)
            .read_line(&mut line)
            .expect("the peer's first line");
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("{script} said {line:?}"));
        Peer { child, addr }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Stoa with one pool `app` at `address` (as written) and a route for
/// everything to it with `proxy_opts`.
fn stoa(dir: &TempDir, address: &str, proxy_opts: &str) -> Server {
    dir.mkdir("www");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[pool]]\nname = \"app\"\nprotocol = \"http\"\naddress = [\"{address}\"]\n\
             [[site]]\nroot = \"www\"\n[[site.route]]\nprefix = \"/\"\n\
             proxy = {{ pool = \"app\"{proxy_opts} }}\n"
        ),
    );
    Server::with_config(&cfg)
}

/// One call with client.py through `s`; its output lines.
fn call(s: &Server, args: &[&str]) -> Vec<String> {
    let out = Command::new(PY)
        .arg(peers_dir().join("client.py"))
        .arg(s.addr.to_string())
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .expect("run client.py");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// gRPC over HTTP/2, unary call: one request message, one response message
/// and `grpc-status: 0` in trailers, through an `h2c://` pool (nginx
/// `grpc_pass grpc://`, Caddy `reverse_proxy h2c://`).
#[test]
fn a_grpc_unary_call_goes_through_an_h2c_pool_as_through_nginx_grpc_pass() {
    let g = Peer::start("server.py");
    let dir = TempDir::new("grpc-unary");
    let s = stoa(&dir, &format!("h2c://{}", g.addr), "");
    assert_eq!(call(&s, &["unary", "hello"]), ["echo:hello", "status OK"]);
    // Many calls on the kept connections.
    for i in 0..5 {
        let m = format!("m{i}");
        assert_eq!(call(&s, &["unary", &m])[0], format!("echo:{m}"));
    }
}

/// `http_version = "2"` on the route makes a plainly written address an
/// HTTP/2 one, as nginx's `grpc_pass` does with any address.
#[test]
fn http_version_2_on_the_route_speaks_http2_to_a_plain_address() {
    let g = Peer::start("server.py");
    let dir = TempDir::new("grpc-version");
    let s = stoa(&dir, &g.addr.to_string(), ", http_version = \"2\"");
    assert_eq!(call(&s, &["unary", "v2"]), ["echo:v2", "status OK"]);
}

/// Server streaming: each message goes on as it comes, so messages sent
/// 100 ms apart arrive about 100 ms apart, not all at the end (nginx's
/// `grpc_pass` never buffers a gRPC response).
#[test]
fn grpc_server_streaming_messages_sent_100_ms_apart_arrive_100_ms_apart() {
    let g = Peer::start("server.py");
    let dir = TempDir::new("grpc-stream");
    let s = stoa(&dir, &format!("h2c://{}", g.addr), "");
    let out = call(&s, &["stream", "5,100"]);
    assert_eq!(out.len(), 6, "{out:?}");
    assert_eq!(out[5], "status OK");
    let at: Vec<u64> = out[..5]
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let (msg, t) = l.split_once(" +").expect("msg +ms");
            assert_eq!(msg, format!("msg{i}"));
            t.parse().expect("ms")
        })
        .collect();
    for w in at.windows(2) {
        // Held back and sent together, they would arrive within a few ms.
        assert!(w[1] - w[0] >= 60, "messages bunched: {at:?}");
    }
}

/// Client streaming: every message of the request stream reaches the
/// service, then its one answer comes back.
#[test]
fn grpc_client_streaming_gets_every_message_to_the_service() {
    let g = Peer::start("server.py");
    let dir = TempDir::new("grpc-client-stream");
    let s = stoa(&dir, &format!("h2c://{}", g.addr), "");
    assert_eq!(call(&s, &["client", "a,b,c,d"]), ["a+b+c+d", "status OK"]);
}

/// Bidirectional streaming: the client sends each message only once the
/// previous one was answered, which works only when the proxy passes
/// each request message on as it comes (no request buffering, as nginx's
/// grpc module) and each answer back likewise.
#[test]
fn grpc_bidirectional_streaming_passes_each_message_on_as_it_comes() {
    let g = Peer::start("server.py");
    let dir = TempDir::new("grpc-bidi");
    let s = stoa(&dir, &format!("h2c://{}", g.addr), "");
    assert_eq!(
        call(&s, &["bidi", "x,y,z"]),
        ["bidi:x", "bidi:y", "bidi:z", "status OK"]
    );
}

/// RFC 9113 §8.1: the response's trailers (gRPC's trailing metadata beside
/// `grpc-status`) reach an HTTP/2 client as trailers.
#[test]
fn grpc_trailing_metadata_reaches_the_client_rfc_9113_8_1() {
    let g = Peer::start("server.py");
    let dir = TempDir::new("grpc-trailers");
    let s = stoa(&dir, &format!("h2c://{}", g.addr), "");
    assert_eq!(
        call(&s, &["trailers"]),
        ["ok", "trailer x-trail=yes", "status OK"]
    );
}

/// An application's own gRPC status and message pass through unchanged.
#[test]
fn an_applications_grpc_status_and_message_pass_through_unchanged() {
    let g = Peer::start("server.py");
    let dir = TempDir::new("grpc-status");
    let s = stoa(&dir, &format!("h2c://{}", g.addr), "");
    assert_eq!(call(&s, &["fail"]), ["status NOT_FOUND no such thing"]);
}

/// The client's metadata reaches the application, with the proxy's
/// `X-Forwarded-For` and `Forwarded` (RFC 7239) as for HTTP/1 upstreams.
#[test]
fn grpc_metadata_reaches_the_application_with_the_forwarded_fields() {
    let g = Peer::start("server.py");
    let dir = TempDir::new("grpc-meta");
    let s = stoa(&dir, &format!("h2c://{}", g.addr), "");
    let out = call(&s, &["meta"]);
    assert!(out.iter().any(|l| l == "x-who=me"), "{out:?}");
    assert!(
        out.iter().any(|l| l == "x-forwarded-for=127.0.0.1"),
        "{out:?}"
    );
    assert!(
        out.iter().any(|l| l.starts_with("forwarded=for=127.0.0.1")),
        "{out:?}"
    );
}

/// "gRPC over HTTP/2" and its HTTP-to-gRPC status mapping: a proxy that
/// cannot reach the service answers HTTP 200 with `grpc-status: 14`
/// (UNAVAILABLE), as nginx's `grpc_pass` and Envoy do, not a bare 502
/// the client would read as a malformed response. The log line names the
/// pool, the server's address, the request and the client.
#[test]
fn an_unreachable_upstream_gives_grpc_status_14_unavailable() {
    // A port nothing listens on.
    let free = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = free.local_addr().expect("addr");
    drop(free);
    require_module("grpc", "python3-grpcio");
    let dir = TempDir::new("grpc-unreachable");
    let s = stoa(&dir, &format!("h2c://{addr}"), "");
    let out = call(&s, &["unary", "x"]);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(out[0].starts_with("status UNAVAILABLE"), "{out:?}");
    assert!(
        s.wait_stderr(0, "POST /test.Echo/Unary", Duration::from_secs(5)),
        "{}",
        s.stderr()
    );
    let log = s.stderr();
    let line = log
        .lines()
        .find(|l| l.contains("connect"))
        .unwrap_or_else(|| panic!("no connect failure logged: {log}"));
    assert!(line.contains("pool app"), "{line}");
    assert!(line.contains(&addr.to_string()), "{line}");
    assert!(line.contains("client: 127.0.0.1"), "{line}");
    assert!(line.contains("POST /test.Echo/Unary"), "{line}");
}

/// "gRPC over HTTP/2": `grpc-timeout` bounds the call. A server that takes
/// the request and never answers is given up on when it passes (not after
/// the pool's 60 s), with `grpc-status: 4` (DEADLINE_EXCEEDED). The client
/// here is curl, which does not enforce the deadline itself.
#[test]
fn grpc_timeout_caps_the_wait_for_a_silent_upstream_with_status_4() {
    require("curl", "curl");
    // Accepts, reads and never writes: not even HTTP/2 SETTINGS.
    let hole = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = hole.local_addr().expect("addr");
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in hole.incoming().flatten() {
            let mut r = c.try_clone().expect("clone");
            std::thread::spawn(move || {
                let mut b = [0u8; 4096];
                while matches!(r.read(&mut b), Ok(n) if n > 0) {}
            });
            held.push(c);
        }
    });
    let dir = TempDir::new("grpc-deadline");
    let s = stoa(&dir, &format!("h2c://{addr}"), "");
    let body = dir.write("msg.bin", b"\0\0\0\0\x01x");
    let t0 = Instant::now();
    let out = Command::new("curl")
        .args([
            "-s",
            "--http2-prior-knowledge",
            "-D",
            "-",
            "-o",
            "/dev/null",
        ])
        .args(["-H", "content-type: application/grpc", "-H", "te: trailers"])
        .args(["-H", "grpc-timeout: 300m", "--max-time", "20"])
        .arg("--data-binary")
        .arg(format!("@{}", body.display()))
        .arg(format!("http://{}/test.Echo/Unary", s.addr))
        .output()
        .expect("run curl");
    let took = t0.elapsed();
    let head = String::from_utf8_lossy(&out.stdout).to_lowercase();
    assert!(head.starts_with("http/2 200"), "{head}");
    assert!(head.contains("grpc-status: 4\r\n"), "{head}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(took >= Duration::from_millis(250), "took {took:?}");
}

/// A plain (not gRPC) HTTP/2 request reaches an h2c server: method, path
/// and query, `:authority` from the client's Host (RFC 9113 §8.3.1), the
/// body; the server's trailers reach an HTTP/2 client (RFC 9113 §8.1).
#[test]
fn a_plain_http2_request_reaches_an_h2c_server_and_its_trailers_come_back() {
    require("curl", "curl");
    let b = Peer::start("h2_server.py");
    let dir = TempDir::new("h2-plain");
    let s = stoa(&dir, &format!("h2c://{}", b.addr), "");
    let out = Command::new("curl")
        .args(["-s", "--http2-prior-knowledge", "-D", "-"])
        .args(["-H", "x-want-trailers: 1", "-d", "hello"])
        .arg(format!("http://{}/app/a?b=1", s.addr))
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("HTTP/2 200"), "{text}");
    assert!(text.contains("method POST\n"), "{text}");
    assert!(text.contains("path /app/a?b=1\n"), "{text}");
    assert!(text.contains(&format!("authority {}\n", s.addr)), "{text}");
    assert!(text.contains("body 5\n"), "{text}");
    assert!(text.contains("x-forwarded-for: 127.0.0.1\n"), "{text}");
    // curl -D prints trailers after the body.
    assert!(text.contains("x-sum: 5"), "{text}");
}

/// nginx `proxy_set_header` / Caddy `header_up` reach an HTTP/2 upstream
/// too: a route's `header_up.set` replaces the client's field of that
/// name, `remove` takes one out.
#[test]
fn header_up_rules_apply_to_an_http2_upstream() {
    require("curl", "curl");
    let b = Peer::start("h2_server.py");
    let dir = TempDir::new("h2-header-up");
    let s = stoa(
        &dir,
        &format!("h2c://{}", b.addr),
        ", header_up = { set = { \"X-Team\" = \"blue\" }, remove = [\"X-Secret\"] }",
    );
    let out = Command::new("curl")
        .args(["-s", "--http2-prior-knowledge", "-D", "-"])
        .args(["-H", "X-Team: forged", "-H", "X-Secret: s3"])
        .arg(format!("http://{}/app/h", s.addr))
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("HTTP/2 200"), "{text}\n{}", s.stderr());
    assert!(text.contains("x-team: blue\n"), "{text}");
    assert!(!text.contains("forged"), "{text}");
    assert!(!text.contains("x-secret"), "{text}");
}

/// RFC 9110 §6.5 and §10.1.4: an HTTP/1.1 client gets the server's
/// trailers in the last chunk only when it said `TE: trailers`; otherwise
/// they are dropped (as nginx does).
#[test]
fn an_http1_client_gets_trailers_in_the_last_chunk_only_with_te_trailers() {
    let b = Peer::start("h2_server.py");
    let dir = TempDir::new("h2-h1-trailers");
    let s = stoa(&dir, &format!("h2c://{}", b.addr), "");
    let raw = |te: &str| {
        let mut c = TcpStream::connect(s.addr).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        write!(
            c,
            "POST /x HTTP/1.1\r\nHost: h\r\n{te}x-want-trailers: 1\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
        )
        .expect("send");
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    };
    let with = raw("TE: trailers\r\n");
    assert!(with.contains("Transfer-Encoding: chunked"), "{with}");
    assert!(with.ends_with("\r\n0\r\nx-sum: 5\r\n\r\n"), "{with}");
    let without = raw("");
    assert!(without.contains("body 5\n"), "{without}");
    assert!(!without.contains("x-sum"), "{without}");
}

/// Flow control end to end: a response far larger than the stream window
/// arrives whole at an HTTP/2 and an HTTP/1.1 client.
#[test]
fn a_response_larger_than_the_http2_windows_arrives_whole() {
    require("curl", "curl");
    let b = Peer::start("h2_server.py");
    let dir = TempDir::new("h2-big");
    let s = stoa(&dir, &format!("h2c://{}", b.addr), "");
    for proto in ["--http2-prior-knowledge", "--http1.1"] {
        let out = Command::new("curl")
            .args(["-s", proto])
            .arg(format!("http://{}/big/5000000", s.addr))
            .output()
            .expect("run curl");
        assert_eq!(out.stdout.len(), 5_000_000, "{proto}");
        assert!(out.stdout.iter().all(|&c| c == b'x'), "{proto}");
    }
}

/// gRPC over TLS: the pool's `tls` table (a test CA, verification on)
/// and ALPN `h2` (RFC 9113 §3.2), as nginx `grpc_pass grpcs://` with
/// `grpc_ssl_verify on`: the four call kinds go through.
#[test]
fn grpc_calls_of_all_four_kinds_go_through_tls_with_alpn_h2_and_a_verified_certificate() {
    let dir = TempDir::new("grpc-tls");
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(rcgen::DnType::CommonName, "grpc test CA");
    p.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let ca = p.self_signed(&ca_key).expect("CA certificate");
    let ca_path = dir.write("ca.pem", ca.pem());
    let key = rcgen::KeyPair::generate().expect("key");
    let mut p = rcgen::CertificateParams::new(vec!["grpc.test".to_owned()]).expect("params");
    p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = p.signed_by(&key, &ca, &ca_key).expect("sign");
    let cert_path = dir.write("server.pem", cert.pem());
    let key_path = dir.write("server.key", key.serialize_pem());
    let g = Peer::start_with(
        "server.py",
        &[
            "--tls",
            &cert_path.display().to_string(),
            &key_path.display().to_string(),
        ],
    );
    dir.mkdir("www");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[pool]]\nname = \"app\"\nprotocol = \"http\"\naddress = [\"{}\"]\n\
             tls = {{ ca = \"{}\", server_name = \"grpc.test\" }}\n\
             [[site]]\nroot = \"www\"\n[[site.route]]\nprefix = \"/\"\n\
             proxy = {{ pool = \"app\", http_version = \"2\" }}\n",
            g.addr,
            ca_path.display()
        ),
    );
    let s = Server::with_config(&cfg);
    assert_eq!(call(&s, &["unary", "tls"]), ["echo:tls", "status OK"]);
    let out = call(&s, &["stream", "3,50"]);
    assert_eq!(out.len(), 4, "{out:?}");
    assert!(out[2].starts_with("msg2 +"), "{out:?}");
    assert_eq!(call(&s, &["client", "a,b"]), ["a+b", "status OK"]);
    assert_eq!(
        call(&s, &["bidi", "p,q"]),
        ["bidi:p", "bidi:q", "status OK"]
    );
    assert_eq!(
        call(&s, &["trailers"]),
        ["ok", "trailer x-trail=yes", "status OK"]
    );
}

/// RFC 9113 §8.1: a client's request trailers (after its DATA) end the
/// upstream stream as trailers, and reach the server.
#[test]
fn a_clients_request_trailers_reach_the_http2_server_rfc_9113_8_1() {
    let b = Peer::start("h2_server.py");
    let dir = TempDir::new("h2-req-trailers");
    let s = stoa(&dir, &format!("h2c://{}", b.addr), "");
    let out = Command::new(PY)
        .arg(peers_dir().join("h2_client.py"))
        .arg(s.addr.to_string())
        .args(["/up", "hello", "x-checksum=abc"])
        .output()
        .expect("run h2_client.py");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("body 5\n"), "{text}");
    assert!(text.contains("trailer x-checksum: abc\n"), "{text}");
}

/// Requests share a few multiplexed connections per worker (nginx opens
/// one per request in flight, up to `keepalive`): sixty requests, twenty
/// at once at a cold pool, open one connection for Stoa's one worker.
#[test]
fn many_requests_share_a_few_multiplexed_connections_to_the_server() {
    require("curl", "curl");
    let b = Peer::start("h2_server.py");
    let dir = TempDir::new("h2-mux");
    let s = stoa(&dir, &format!("h2c://{}", b.addr), "");
    for _ in 0..3 {
        let out = Command::new(PY)
            .arg(peers_dir().join("h2_client.py"))
            .arg(s.addr.to_string())
            .args(["--many", "20", "/r"])
            .output()
            .expect("run h2_client.py");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "20");
    }
    let conns = Command::new("curl")
        .args(["-s", &format!("http://{}/conns", s.addr)])
        .output()
        .expect("run curl");
    let n: u32 = String::from_utf8_lossy(&conns.stdout)
        .trim()
        .parse()
        .expect("a count");
    // One worker (the tests' prelude): one connection, the twenty
    // requests that found none waited for it instead of opening their own.
    assert_eq!(n, 1, "{n} connections for 60 requests");
}

/// A pool speaks one protocol: `h2c://` on some addresses and not others,
/// health checks (HTTP/1.1) on an `h2c://` pool and an unknown
/// `http_version` are configuration errors that `stoa check` names.
#[test]
fn h2c_addresses_and_http_version_2_are_checked_at_load() {
    let dir = TempDir::new("h2-config");
    dir.mkdir("www");
    let check = |pool: &str, proxy: &str| {
        let cfg = dir.write(
            "stoa.toml",
            format!(
                "[[pool]]\nname = \"app\"\n{pool}\n[[site]]\nroot = \"www\"\n\
                 [[site.route]]\nprefix = \"/\"\nproxy = {{ pool = \"app\"{proxy} }}\n"
            ),
        );
        let out = Command::new(stoa_bin())
            .arg("check")
            .arg(&cfg)
            .env("NO_COLOR", "1")
            .output()
            .expect("run stoa check");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned()
                + &String::from_utf8_lossy(&out.stdout),
        )
    };
    let (ok, text) = check(
        "protocol = \"http\"\naddress = [\"h2c://127.0.0.1:1\", \"127.0.0.1:2\"]",
        "",
    );
    assert!(!ok && text.contains("h2c://"), "{text}");
    let (ok, text) = check(
        "protocol = \"http\"\naddress = [\"h2c://127.0.0.1:1\"]\nhealth = { path = \"/h\" }",
        "",
    );
    assert!(!ok && text.contains("health"), "{text}");
    let (ok, text) = check(
        "protocol = \"http\"\naddress = [\"127.0.0.1:1\"]",
        ", http_version = \"3\"",
    );
    assert!(!ok && text.contains("\"2\""), "{text}");
    let (ok, text) = check(
        "protocol = \"http\"\naddress = [\"h2c://127.0.0.1:1\", \"h2c://127.0.0.1:2\"]",
        "",
    );
    assert!(ok, "{text}");
    let (ok, text) = check(
        "protocol = \"http\"\naddress = [\"127.0.0.1:1\"]",
        ", http_version = \"2\"",
    );
    assert!(ok, "{text}");
}
