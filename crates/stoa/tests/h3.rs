//! HTTP/3 (RFC 9114) end to end, with aioquic's HTTP/3 client (PyPI
//! `aioquic`, installed in a venv this test makes under the target
//! directory) as the peer: a static file, a CGI script, a FastCGI
//! application and a proxied application answer over HTTP/3 as over the
//! other protocols (the same `Exchange`); request bodies and a large
//! download arrive byte-exact; the listener's HTTP/1.1 and HTTP/2
//! responses advertise it with `Alt-Svc` (RFC 9114 §3.1.1, as Caddy and
//! nginx do); the status page counts its connections and streams; the
//! access log says `HTTP/3.0`; a graceful stop lets a request in flight
//! finish (GOAWAY, §5.2). Attacks with raw QUIC (h3raw.py): an Initial
//! flood is answered with Retry packets, a client that stops reading is
//! dropped.
//!
//! Needs python3 with venv (Debian `python3-venv`), network access to
//! PyPI the first time, and curl (for the TCP side). Certificates are
//! Stoa's own `self_signed` ones.

mod common;
mod proxy_peer;

use common::*;
use proxy_peer::Backend;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const HELLO_FCGI: &str = env!("CARGO_BIN_EXE_stoa-hello-fcgi");
const AIOQUIC: &str = "aioquic==1.7.2";

/// The venv's python, with aioquic installed (once per target directory;
/// the test threads of this file share it).
fn python() -> &'static Path {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        require("python3", "python3");
        let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("h3-venv");
        let py = venv.join("bin/python");
        let ok = |py: &Path| {
            Command::new(py)
                .args(["-c", "import aioquic.h3.connection"])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if !ok(&py) {
            let made = Command::new("python3")
                .args(["-m", "venv"])
                .arg(&venv)
                .status()
                .expect("run python3 -m venv");
            assert!(made.success(), "python3 -m venv failed (python3-venv)");
            let pip = Command::new(venv.join("bin/pip"))
                .args(["install", "-q", AIOQUIC])
                .status()
                .expect("run pip");
            assert!(pip.success(), "pip install {AIOQUIC} failed");
        }
        assert!(ok(&py), "aioquic does not import in {}", venv.display());
        py
    })
}

/// One answer as h3get.py prints it.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    length: usize,
    text: String,
    reset: Option<u64>,
    /// QPACK encoder-stream bytes the client had sent by then.
    encoder_bytes: u64,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// aioquic's client against the server's UDP port: `args` then `paths`,
/// one answer per path (and per `--count`).
fn h3get(port: u16, args: &[&str], paths: &[&str]) -> Vec<Answer> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/h3_support/h3get.py");
    let out = Command::new(python())
        .arg(script)
        .args(["--port", &port.to_string()])
        .args(args)
        .args(paths)
        .output()
        .expect("run h3get.py");
    assert!(
        out.status.success(),
        "h3get.py {args:?} {paths:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            Answer {
                status: v["status"].as_u64().unwrap_or(0) as u16,
                headers: v["headers"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|p| {
                                (
                                    p[0].as_str().unwrap_or("").to_owned(),
                                    p[1].as_str().unwrap_or("").to_owned(),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                length: v["length"].as_u64().unwrap_or(0) as usize,
                text: v["text"].as_str().unwrap_or("").to_owned(),
                reset: v["reset"].as_u64(),
                encoder_bytes: v["encoder_bytes"].as_u64().unwrap_or(0),
            }
        })
        .collect()
}

/// A server with one TLS listener speaking h3, h2 and http/1.1 on a free
/// port, a self-signed certificate, a static tree, a CGI directory, a
/// FastCGI pool and, with `backend`, a proxied route; `extra` is more
/// TOML at the top.
fn server(dir: &TempDir, backend: Option<&Backend>, extra: &str) -> Server {
    dir.write("www/index.html", "hello over h3\n");
    script(
        dir,
        "cgi-bin/env.sh",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\nenv\n",
    );
    script(
        dir,
        "cgi-bin/echo.sh",
        "#!/bin/sh\nprintf 'Content-Type: application/octet-stream\\r\\n\\r\\n'\ncat\n",
    );
    let proxy = backend.map_or(String::new(), |b| {
        format!(
            "[[pool]]\nname = \"echo\"\nprotocol = \"http\"\naddress = [\"{}\"]\n\n",
            b.addr
        )
    });
    let proxy_route = if backend.is_some() {
        "[[site.route]]\nprefix = \"/echo/\"\nproxy = { pool = \"echo\" }\n\n"
    } else {
        ""
    };
    let cfg = dir.write(
        "stoa.toml",
        format!(
            "workers = 1\nuser = \"root\"\n{extra}\n\
             [[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"cert.pem\"\nkey = \"key.pem\"\n\
             self_signed = true\nprotocols = [\"h3\", \"h2\", \"http/1.1\"]\n\n\
             [[pool]]\nname = \"app\"\ncommand = [\"{HELLO_FCGI}\"]\nprocesses = 1\n\n\
             {proxy}\
             [[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = {{ dir = \"cgi-bin\" }}\n\n\
             [[site.route]]\nprefix = \"/app/\"\nfastcgi = {{ pool = \"app\" }}\n\n\
             [[site.route]]\nprefix = \"/status\"\nstatus = {{}}\n\n\
             {proxy_route}"
        ),
    );
    Server::with_config(&cfg)
}

fn script(dir: &TempDir, rel: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.write(rel, body);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

fn var<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
}

/// curl over TCP to the same listener (`proto`: `--http1.1`, `--http2`):
/// the response head.
fn curl_head(port: u16, proto: &str, path: &str) -> String {
    require("curl", "curl");
    let out = Command::new("curl")
        .args([
            "-sSk",
            "--max-time",
            "10",
            "-o",
            "/dev/null",
            "-D",
            "-",
            proto,
        ])
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("run curl");
    assert!(out.status.success(), "curl {proto}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn rfc9114_a_static_file_a_cgi_a_fastcgi_and_a_proxied_response_arrive_over_http3() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("h3-handlers");
    let s = server(&dir, Some(&b), "");
    let port = s.addr.port();
    let got = h3get(
        port,
        &[],
        &[
            "/index.html",
            "/cgi-bin/env.sh?a=1",
            "/app/x?params=1",
            "/echo/y?z=2",
        ],
    );
    assert_eq!(got.len(), 4, "{got:?}");
    let (st, cgi, fcgi, proxied) = (&got[0], &got[1], &got[2], &got[3]);

    assert_eq!(st.status, 200, "{st:?}");
    assert_eq!(st.text, "hello over h3\n");
    assert_eq!(st.header("content-length"), Some("14"));
    assert_eq!(st.header("server"), Some("stoa"));

    assert_eq!(cgi.status, 200, "{cgi:?}");
    // RFC 3875 §4.1.16: the protocol the client spoke.
    assert_eq!(
        var(&cgi.text, "SERVER_PROTOCOL"),
        Some("HTTP/3.0"),
        "{}",
        cgi.text
    );
    assert_eq!(var(&cgi.text, "HTTPS"), Some("on"));
    assert_eq!(var(&cgi.text, "QUERY_STRING"), Some("a=1"));
    assert_eq!(var(&cgi.text, "SERVER_PORT"), Some(&*port.to_string()));

    assert_eq!(fcgi.status, 200, "{fcgi:?}");
    assert_eq!(var(&fcgi.text, "method"), Some("GET"), "{}", fcgi.text);
    assert!(
        fcgi.text.contains("param SERVER_PROTOCOL=HTTP/3.0"),
        "{}",
        fcgi.text
    );

    assert_eq!(proxied.status, 200, "{proxied:?}");
    let echo: serde_json::Value = serde_json::from_str(&proxied.text).expect("the echo");
    assert_eq!(echo["target"], "/echo/y?z=2");
    assert_eq!(echo["method"], "GET");
    // `:authority` became Host (RFC 9114 §4.3.1).
    let host = echo["headers"]
        .as_array()
        .and_then(|h| h.iter().find(|p| p[0].as_str() == Some("Host")))
        .map(|p| p[1].clone());
    assert_eq!(host, Some(serde_json::json!(format!("localhost:{port}"))));
}

#[test]
fn rfc9114_4_1_a_post_body_reaches_cgi_fastcgi_and_the_proxy_byte_exact() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("h3-post");
    let s = server(&dir, Some(&b), "");
    let port = s.addr.port();
    let body = pattern(300_000, 7);
    let file = dir.write("body.bin", &body);
    let out = dir.join("echoed.bin");
    let file = file.to_string_lossy().into_owned();
    let outs = out.to_string_lossy().into_owned();
    let args = ["--method", "POST", "--data-file", &file, "--out", &outs];
    let cgi = h3get(port, &args, &["/cgi-bin/echo.sh"]);
    assert_eq!(cgi[0].status, 200, "{:?}", cgi[0]);
    let echoed = std::fs::read(&out).expect("the echoed body");
    assert!(
        echoed == body,
        "CGI echoed {} bytes of {}",
        echoed.len(),
        body.len()
    );

    let fcgi = h3get(port, &args[..4], &["/app/post"]);
    assert_eq!(fcgi[0].status, 200, "{:?}", fcgi[0]);
    assert_eq!(
        var(&fcgi[0].text, "body_len"),
        Some("300000"),
        "{}",
        fcgi[0].text
    );
    assert_eq!(var(&fcgi[0].text, "content_length"), Some("300000"));

    let proxied = h3get(port, &args[..4], &["/echo/post"]);
    assert_eq!(proxied[0].status, 200, "{:?}", proxied[0]);
    let echo: serde_json::Value = serde_json::from_str(&proxied[0].text).expect("the echo");
    assert_eq!(echo["method"], "POST");
    assert_eq!(echo["body_length"], 300_000);
}

#[test]
fn a_large_download_arrives_byte_exact_from_a_file_and_from_fastcgi() {
    let dir = TempDir::new("h3-large");
    let big = pattern(8 << 20, 3);
    dir.write("www/big.bin", &big);
    let s = server(&dir, None, "");
    let port = s.addr.port();
    let out = dir.join("got.bin");
    let outs = out.to_string_lossy().into_owned();
    let got = h3get(port, &["--out", &outs, "--timeout", "120"], &["/big.bin"]);
    assert_eq!(got[0].status, 200, "{:?}", got[0]);
    assert_eq!(got[0].length, big.len());
    assert!(
        std::fs::read(&out).expect("the download") == big,
        "the file's bytes differ"
    );

    let n = 2_000_000;
    let got = h3get(
        port,
        &["--out", &outs, "--timeout", "120"],
        &[&format!("/app/big?big={n}&seed=9")],
    );
    assert_eq!(got[0].status, 200, "{:?}", got[0]);
    assert!(
        std::fs::read(&out).expect("the download") == pattern(n, 9),
        "FastCGI's bytes differ"
    );
}

#[test]
fn rfc9114_3_1_1_alt_svc_advertises_h3_on_the_listeners_http1_and_http2_responses() {
    let dir = TempDir::new("h3-altsvc");
    let s = server(&dir, None, "");
    let port = s.addr.port();
    for proto in ["--http1.1", "--http2"] {
        let head = curl_head(port, proto, "/index.html");
        let want = format!("alt-svc: h3=\":{port}\"; ma=86400");
        assert!(
            head.to_ascii_lowercase()
                .contains(&want.to_ascii_lowercase()),
            "{proto}: {head}"
        );
    }
    // Not on HTTP/3's own responses: the client is there already.
    let got = h3get(port, &[], &["/index.html"]);
    assert_eq!(got[0].header("alt-svc"), None, "{:?}", got[0]);
}

#[test]
fn a_tls_listener_without_h3_advertises_nothing_and_opens_no_udp_port() {
    let dir = TempDir::new("h3-off");
    dir.write("www/index.html", "x");
    let cfg = dir.write(
        "stoa.toml",
        "workers = 1\nuser = \"root\"\n[[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"cert.pem\"\n\
         key = \"key.pem\"\nself_signed = true\n\n[[site]]\nroot = \"www\"\n",
    );
    let s = Server::with_config(&cfg);
    let head = curl_head(s.addr.port(), "--http2", "/index.html");
    assert!(!head.to_ascii_lowercase().contains("alt-svc"), "{head}");
    // The UDP port is free: nothing of Stoa's is bound there.
    assert!(std::net::UdpSocket::bind(("127.0.0.1", s.addr.port())).is_ok());
}

#[test]
fn the_status_page_counts_h3_connections_and_streams_and_the_log_says_http3() {
    let dir = TempDir::new("h3-status");
    let log = dir.join("access.log");
    let s = server(
        &dir,
        None,
        &format!("[log]\naccess = \"{}\"\n", log.display()),
    );
    let port = s.addr.port();
    let got = h3get(port, &["--count", "3"], &["/index.html"]);
    assert!(got.iter().all(|a| a.status == 200), "{got:?}");
    let status = h3get(port, &[], &["/status"]);
    let text = &status[0].text;
    // Three requests on one connection, then the status page's own.
    let line = text
        .lines()
        .find(|l| l.starts_with("h3: "))
        .unwrap_or_else(|| panic!("no h3 line in {text}"));
    // "h3: 2 connections, N open; 4 streams, M open" (the first
    // connection may not be seen closed yet: its client's CONNECTION_CLOSE
    // and this request race).
    let n: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(n.len(), 5, "{line}");
    assert_eq!((n[1], n[3]), (2, 4), "{line}");
    assert!(n[4] >= 1, "the status page's own stream is open: {line}");
    // The log is flushed once a second.
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let l = std::fs::read_to_string(&log).unwrap_or_default();
        if l.lines()
            .filter(|l| l.contains("\"GET /index.html HTTP/3.0\" 200 14"))
            .count()
            == 3
        {
            break;
        }
        assert!(
            Instant::now() < until,
            "the log has no three HTTP/3.0 lines: {l}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn rfc9114_5_2_a_graceful_stop_lets_a_request_in_flight_finish() {
    let dir = TempDir::new("h3-stop");
    let mut s = server(&dir, None, "");
    let port = s.addr.port();
    let slow = std::thread::spawn(move || h3get(port, &[], &["/app/slow?sleep=5000"]));
    // The request is with the application once the pool has a request in
    // flight: wait for it on the status page.
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let st = h3get(port, &[], &["/status"]);
        // Two streams open: the slow one and the status page's own.
        if st[0]
            .text
            .lines()
            .any(|l| l.starts_with("h3: ") && l.ends_with("streams, 2 open"))
        {
            break;
        }
        assert!(
            Instant::now() < until,
            "the slow request never started: {}",
            st[0].text
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    s.signal(libc::SIGQUIT);
    let got = slow.join().expect("the slow client");
    assert_eq!(got[0].status, 200, "{:?}", got[0]);
    assert_eq!(got[0].reset, None);
    assert!(
        s.wait_exit(Duration::from_secs(10)).is_some(),
        "stoa did not stop"
    );
}

/// h3raw.py (misbehaving clients) with `args`: its one JSON line.
fn h3raw(port: u16, args: &[&str]) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/h3_support/h3raw.py");
    let out = Command::new(python())
        .arg(script)
        .args(args)
        .args(["--port", &port.to_string()])
        .output()
        .expect("run h3raw.py");
    assert!(
        out.status.success(),
        "h3raw.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().next().unwrap_or("")).expect("a JSON line")
}

/// The status page's line that starts with `prefix`, read over HTTP/2.
fn status_line(port: u16, prefix: &str) -> String {
    require("curl", "curl");
    let out = Command::new("curl")
        .args(["-sSk", "--max-time", "10", "--http2"])
        .arg(format!("https://127.0.0.1:{port}/status"))
        .output()
        .expect("run curl");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_default()
        .to_owned()
}

/// RFC 9000 §8.1.2 and §21.1.1: a flood of Initial packets (real
/// ClientHellos, never followed up) gets Retry packets once half of
/// `max_handshakes` are in progress, so the server keeps no state for
/// the rest, and a client that answers the Retry is still served.
#[test]
fn rfc9000_8_1_2_an_initial_flood_is_answered_with_retries_and_a_real_client_still_gets_in() {
    let dir = TempDir::new("h3-flood");
    let s = server(&dir, None, "[http3]\nmax_handshakes = 32\n");
    let port = s.addr.port();
    let flood = h3raw(port, &["initial-flood", "--count", "300"]);
    let retries = flood["retries"].as_u64().unwrap_or(0);
    // At most max_handshakes / 2 attempts begin a handshake; the rest are
    // asked to prove their address.
    assert!(retries >= 300 - 32, "{flood}");
    let line = status_line(port, "h3 retries: ");
    let counted: u64 = line
        .strip_prefix("h3 retries: ")
        .and_then(|l| l.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert_eq!(counted, retries, "{line}");
    let got = h3get(port, &[], &["/index.html"]);
    assert_eq!(got[0].status, 200, "{:?}", got[0]);
}

/// A client that takes part of a large response and then neither reads
/// nor acknowledges any more is dropped once `[http3] idle_timeout`
/// passes without a packet from it (RFC 9000 §10.1), its stream with it:
/// it holds no connection, stream or buffer past that.
#[test]
fn rfc9000_10_1_a_client_that_stops_reading_is_dropped_after_the_idle_timeout() {
    let dir = TempDir::new("h3-stall");
    dir.write("www/big.bin", pattern(16 << 20, 5));
    let s = server(&dir, None, "[http3]\nidle_timeout = \"2s\"\n");
    let port = s.addr.port();
    let stalled = std::thread::spawn(move || {
        h3raw(
            port,
            &[
                "stall", "--path", "/big.bin", "--take", "65536", "--hold", "20",
            ],
        )
    });
    // The stalled client got part of the body, then went quiet.
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        let line = status_line(port, "h3: ");
        if line.starts_with("h3: 1 connections, 0 open; 1 streams, 0 open") {
            break;
        }
        assert!(
            Instant::now() < until,
            "the stalled client is still held: {line}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The connection ended while the client still holds its socket (it
    // sleeps 20 s after going quiet): the server dropped it, not the
    // client. A new client is served meanwhile.
    let fresh = h3get(port, &[], &["/index.html"]);
    assert_eq!(fresh[0].status, 200);
    let got = stalled.join().expect("the stalled client");
    assert!(got["received"].as_u64().unwrap_or(0) > 0, "{got}");
}

/// The base64 SHA-256 of the certificate's public key (what Chromium's
/// `--ignore-certificate-errors-spki-list` takes), from openssl.
fn spki_hash(cert: &Path) -> String {
    require("openssl", "openssl");
    let sh = format!(
        "openssl x509 -in '{}' -pubkey -noout | openssl pkey -pubin -outform der \
         | openssl dgst -sha256 -binary | base64",
        cert.display()
    );
    let out = Command::new("sh")
        .args(["-c", &sh])
        .output()
        .expect("run openssl");
    assert!(out.status.success(), "openssl: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Headless Chromium, forced to QUIC for the test origin
/// (`--origin-to-force-quic-on`) and trusting the self-signed key by its
/// hash, loads a page over HTTP/3: the DOM it dumps is the page, and the
/// access log's lines for its requests say `HTTP/3.0` with its
/// user agent.
#[test]
fn chromium_forced_to_quic_loads_a_page_over_http3() {
    require("chromium", "chromium");
    let dir = TempDir::new("h3-chromium");
    let log = dir.join("access.log");
    let s = server(
        &dir,
        None,
        &format!("[log]\naccess = \"{}\"\n", log.display()),
    );
    let port = s.addr.port();
    let origin = format!("127.0.0.1:{port}");
    let out = Command::new("timeout")
        .args([
            "60",
            "chromium",
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg(format!("--origin-to-force-quic-on={origin}"))
        .arg(format!(
            "--ignore-certificate-errors-spki-list={}",
            spki_hash(&dir.join("cert.pem"))
        ))
        .arg("--dump-dom")
        .arg(format!("https://{origin}/index.html"))
        .output()
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(dom.contains("hello over h3"), "chromium: {dom} {out:?}");
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let l = std::fs::read_to_string(&log).unwrap_or_default();
        let over_h3 = l.lines().any(|l| {
            l.contains("\"GET /index.html HTTP/3.0\" 200 14") && l.contains("HeadlessChrome")
        });
        if over_h3 {
            break;
        }
        assert!(
            Instant::now() < until,
            "no HTTP/3.0 line from Chromium: {l}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Started as root with `user = "nobody"`, the privileged parent binds
/// the UDP sockets with the TCP ones and hands them to the server
/// process, which runs as nobody: HTTP/3 works there, as it must on port
/// 443, which nobody could not bind itself.
#[test]
fn the_udp_sockets_are_bound_before_privileges_drop_and_served_by_the_unprivileged_process() {
    require_root();
    let dir = TempDir::new("h3-privileges");
    let cfg = dir.write(
        "stoa.toml",
        "workers = 2\nuser = \"nobody\"\n[[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"cert.pem\"\n\
         key = \"key.pem\"\nself_signed = true\nprotocols = [\"h3\", \"h2\", \"http/1.1\"]\n\n\
         [[site]]\n\n[[site.route]]\nprefix = \"/status\"\nstatus = {}\n",
    );
    let s = Server::with_config(&cfg);
    let got = h3get(s.addr.port(), &[], &["/status"]);
    assert_eq!(got[0].status, 200, "{:?}", got[0]);
    assert!(got[0].text.contains("h3: 1 connections"), "{}", got[0].text);
    let stderr = s.stderr();
    assert!(stderr.contains("as nobody"), "{stderr}");
}

/// A stream flood: a client that opens streams past the server's
/// MAX_STREAMS is closed by QUIC with STREAM_LIMIT_ERROR (RFC 9000 §4.6,
/// 0x04); one that opens and resets streams as fast as the limit lets it
/// (HTTP/2's Rapid Reset, CVE-2023-44487, on QUIC) gets no more than
/// `max_concurrent_streams` handlers at once, since a stream's credit
/// comes back only once the server is done with it, and the connection
/// goes on.
#[test]
fn rfc9000_4_6_a_stream_flood_is_bounded_by_max_concurrent_streams() {
    let dir = TempDir::new("h3-streams");
    let s = server(&dir, None, "[http3]\nmax_concurrent_streams = 10\n");
    let port = s.addr.port();
    let path = "/app/x?sleep=200";
    let over = h3raw(
        port,
        &[
            "stream-flood",
            "--path",
            path,
            "--count",
            "40",
            "--hold",
            "3",
        ],
    );
    assert_eq!(over["closed"], true, "{over}");
    assert_eq!(over["error"], 4, "STREAM_LIMIT_ERROR: {over}");
    let flood = std::thread::spawn(move || {
        h3raw(
            port,
            &[
                "stream-flood",
                "--obey",
                "--path",
                path,
                "--count",
                "300",
                "--hold",
                "5",
            ],
        )
    });
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        let line = status_line(port, "h3: ");
        let open: u64 = line
            .rsplit("streams, ")
            .next()
            .and_then(|l| l.strip_suffix(" open"))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(open <= 10, "{line}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let got = flood.join().expect("the flood");
    assert_eq!(got["opened"], 300, "{got}");
    assert_eq!(got["closed"], false, "{got}");
    let fresh = h3get(port, &[], &["/index.html"]);
    assert_eq!(fresh[0].status, 200);
}

/// aioquic's encoder (ls-qpack) inserts fields it sees repeated into the
/// server's dynamic table once our SETTINGS allow it (RFC 9204 §2.1):
/// the requests that refer to those entries reach the handler with the
/// same fields, and with the table turned off the encoder sends none.
#[test]
fn rfc9204_an_aioquic_client_using_the_qpack_dynamic_table_gets_right_answers() {
    let token = "a-token-long-enough-to-be-worth-an-entry-0123456789";
    let header = format!("x-token: {token}");
    for (extra, dynamic) in [
        ("", true),
        ("[http3]\nqpack_max_table_capacity = 0\n", false),
    ] {
        let dir = TempDir::new("h3-qpack");
        let s = server(&dir, None, extra);
        let got = h3get(
            s.addr.port(),
            &["--count", "6", "--header", &header],
            &["/cgi-bin/env.sh"],
        );
        assert_eq!(got.len(), 6, "{got:?}");
        for a in &got {
            assert_eq!(a.status, 200, "{a:?}");
            assert_eq!(var(&a.text, "HTTP_X_TOKEN"), Some(token), "{}", a.text);
            assert_eq!(
                var(&a.text, "HTTP_HOST"),
                Some(&*format!("localhost:{}", s.addr.port()))
            );
        }
        let inserted = got.last().map_or(0, |a| a.encoder_bytes);
        assert_eq!(
            inserted > 0,
            dynamic,
            "encoder bytes: {inserted} ({extra:?})"
        );
    }
}

fn hx(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A frame: type, length, payload (all types and lengths here < 64).
fn h3frame(ty: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![ty, payload.len() as u8];
    f.extend_from_slice(payload);
    f
}

/// A GET of `/` with static entries and one literal field `name: value`.
fn get_headers(name: &str, value: &str) -> Vec<u8> {
    // Required Insert Count 0, Base 0; :method GET (static 17), :scheme
    // https (23), :authority (0) "localhost", :path / (1).
    let mut s = vec![0x00, 0x00, 0xd1, 0xd7, 0x50, 9];
    s.extend_from_slice(b"localhost");
    s.push(0xc1);
    // Literal field line with literal name (RFC 9204 §4.5.6).
    s.push(0x20 | name.len() as u8);
    s.extend_from_slice(name.as_bytes());
    s.push(value.len() as u8);
    s.extend_from_slice(value.as_bytes());
    h3frame(0x01, &s)
}

/// Protocol errors a client can make, each answered with the code RFC
/// 9114 or RFC 9204 gives it: connection errors close the connection,
/// a malformed request resets its stream only.
#[test]
fn rfc9114_8_protocol_errors_close_the_connection_or_reset_the_stream_with_their_codes() {
    let dir = TempDir::new("h3-errors");
    let s = server(&dir, None, "");
    let port = s.addr.port();
    let control = format!("00{}", hx(&h3frame(0x04, &[])));
    let cases: Vec<(&str, Vec<String>, Option<String>, u64)> = vec![
        // §6.2.1: the control stream must start with SETTINGS.
        (
            "GOAWAY before SETTINGS",
            vec![format!("00{}", hx(&h3frame(0x07, &[0])))],
            None,
            0x10a,
        ),
        // §6.2.1: one control stream.
        (
            "a second control stream",
            vec![control.clone(), control.clone()],
            None,
            0x103,
        ),
        // §6.2.2: only servers push.
        (
            "a push stream",
            vec![control.clone(), "0100".into()],
            None,
            0x103,
        ),
        // §4.1: DATA before HEADERS.
        (
            "DATA first",
            vec![control.clone()],
            Some(hx(&h3frame(0x00, b"x"))),
            0x105,
        ),
        // §7.2.8: HTTP/2's PING type on a request stream (before its
        // HEADERS: a GET's stream is not read past them).
        (
            "an HTTP/2 frame type",
            vec![control.clone()],
            Some(hx(
                &[h3frame(0x06, &[0; 8]), get_headers("x-a", "1")].concat()
            )),
            0x105,
        ),
        // RFC 9204 §4.3.1: a capacity above ours (4096): 4097.
        (
            "a QPACK capacity too large",
            vec![control.clone(), "023fe21f".into()],
            None,
            0x201,
        ),
        // RFC 9204 §2.2.3: a dynamic reference in a section whose
        // Required Insert Count is 0 (absolute index -1).
        (
            "a QPACK reference to a missing entry",
            vec![control.clone(), "023f21".into()],
            Some(hx(&h3frame(0x01, &[0x00, 0x00, 0x80]))),
            0x200,
        ),
    ];
    for (why, uni, bidi, code) in cases {
        let mut args = vec!["raw".to_owned(), "--hold".into(), "5".into()];
        for u in &uni {
            args.push("--uni".into());
            args.push(u.clone());
        }
        if let Some(b) = &bidi {
            args.push("--bidi".into());
            args.push(b.clone());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let got = h3raw(port, &args);
        assert_eq!(got["closed"], true, "{why}: {got}");
        assert_eq!(got["error"], code, "{why}: {got}");
    }
    // §4.1.2, §4.2: an uppercase field name is malformed: the stream is
    // reset with H3_MESSAGE_ERROR, the connection goes on.
    let got = h3raw(
        port,
        &[
            "raw",
            "--hold",
            "5",
            "--uni",
            &control,
            "--bidi",
            &hx(&get_headers("X-Up", "1")),
        ],
    );
    assert_eq!(got["closed"], false, "{got}");
    assert_eq!(got["reset"], 0x10e, "{got}");
    // And a well-formed one on the same raw client gets its answer.
    let got = h3raw(
        port,
        &[
            "raw",
            "--hold",
            "5",
            "--uni",
            &control,
            "--bidi",
            &hx(&get_headers("x-ok", "1")),
        ],
    );
    assert_eq!(got["closed"], false, "{got}");
    assert!(
        got["answer"].as_str().is_some_and(|a| a.len() > 10),
        "{got}"
    );
}
