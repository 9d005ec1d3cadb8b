//! HTTP/2 (RFC 9113) end to end over cleartext with prior knowledge
//! (h2c): curl for what a browser-like client does, the `h2` crate as a
//! raw client for what an attacker or a stopping server does. HTTP/2
//! over TLS (ALPN) is in tls.rs.
//!
//! Needs the Debian package curl (built with nghttp2).

mod common;

use common::*;
use std::ffi::OsStr;
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

const HELLO_FCGI: &str = env!("CARGO_BIN_EXE_stoa-hello-fcgi");

/// `curl --http2-prior-knowledge`: (status, version, body).
fn curl_h2c(addr: SocketAddr, path: &str, extra: &[&str]) -> (u16, String, Vec<u8>) {
    require("curl", "curl");
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--http2-prior-knowledge"])
        .args(extra)
        .args(["-w", "\n%{http_code} %{http_version}"])
        .arg(format!("http://{addr}{path}"))
        .output()
        .expect("run curl");
    let s = out.stdout;
    let cut = s.iter().rposition(|&b| b == b'\n').unwrap_or(s.len());
    let tail = String::from_utf8_lossy(&s[(cut + 1).min(s.len())..]).into_owned();
    let (status, version) = tail.split_once(' ').unwrap_or(("0", ""));
    (
        status.parse().unwrap_or(0),
        version.to_owned(),
        s[..cut].to_vec(),
    )
}

/// The server logs each HTTP/2 connection that parks (`conn::h2`, debug
/// level): tests wait for that line instead of guessing a delay.
const PARK_LOG: [(&str, &str); 1] = [("STOA_LOG", "stoa_server::conn::h2=debug")];

/// What a parked connection's line ends with.
const PARKED: &str = ": idle, parked";

/// `stoa serve --config FILE` with PARK_LOG's logging.
fn serve_logging_parks(cfg: &std::path::Path) -> Server {
    let env: Vec<(&str, &OsStr)> = PARK_LOG.iter().map(|(k, v)| (*k, OsStr::new(*v))).collect();
    let args = [OsStr::new("serve"), OsStr::new("--config"), cfg.as_os_str()];
    Server::try_spawn_program(OsStr::new(stoa_bin()), args, &env)
        .unwrap_or_else(|e| panic!("stoa did not start: {e}"))
}

/// A site with static files, a CGI echo script, a FastCGI pool and the
/// status page, on one cleartext port.
fn site(tag: &str) -> (TempDir, Server) {
    let dir = TempDir::new(tag);
    dir.write("www/index.html", "hello h2\n");
    let scripts = [
        (
            "cgi-bin/echo.sh",
            "#!/bin/sh\nprintf 'Content-Type: application/octet-stream\\r\\n\\r\\n'\nexec cat\n",
        ),
        (
            // Fields HTTP/2 forbids (RFC 9113 §8.2.2), as an HTTP/1
            // application may well send them.
            "cgi-bin/hop.sh",
            "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\nConnection: keep-alive\\r\\nKeep-Alive: timeout=5\\r\\n\\r\\n'\necho \"$SERVER_PROTOCOL\"\n",
        ),
    ];
    for (name, text) in scripts {
        let p = dir.write(name, text);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[pool]]\nname = \"app\"\ncommand = [\"{HELLO_FCGI}\"]\nprocesses = 1\n\n\
             [[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = {{ dir = \"cgi-bin\" }}\n\n\
             [[site.route]]\nprefix = \"/app/\"\nfastcgi = {{ pool = \"app\" }}\n\n\
             [[site.route]]\nprefix = \"/stoa-status\"\nstatus = {{ allow = [\"127.0.0.1\"] }}\n"
        ),
    );
    let server = serve_logging_parks(&cfg);
    (dir, server)
}

#[test]
fn rfc9113_3_3_h2c_with_prior_knowledge_and_http1_share_the_cleartext_port() {
    let (_dir, server) = site("h2c-basic");
    let (status, version, body) = curl_h2c(server.addr, "/index.html", &[]);
    assert_eq!((status, version.as_str()), (200, "2"));
    assert_eq!(body, b"hello h2\n");
    // HEAD: the length, no body.
    let (status, _, body) = curl_h2c(server.addr, "/index.html", &["-I"]);
    assert_eq!(status, 200);
    let head = String::from_utf8_lossy(&body).to_ascii_lowercase();
    assert!(head.contains("content-length: 9"), "{head}");
    // HTTP/1.1 on the same port is untouched.
    let r = server.get("/index.html");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hello h2\n"[..]));
}

#[test]
fn the_access_log_names_the_protocol_http_2_0() {
    let dir = TempDir::new("h2c-log");
    dir.write("www/index.html", "logged\n");
    let log = dir.join("access.log");
    let server = Server::spawn([
        "serve".as_ref(),
        dir.join("www").as_os_str(),
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--workers".as_ref(),
        "1".as_ref(),
        "--access-log".as_ref(),
        log.as_os_str(),
    ]);
    let (status, _, _) = curl_h2c(server.addr, "/index.html?q=1", &[]);
    assert_eq!(status, 200);
    // Lines are written once a second.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut text = String::new();
    while Instant::now() < deadline {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        if !text.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        text.contains("\"GET /index.html?q=1 HTTP/2.0\" 200 7"),
        "{text}"
    );
}

#[test]
fn rfc9113_8_every_handler_kind_answers_over_h2c_cgi_fastcgi_and_status() {
    let (_dir, server) = site("h2c-handlers");
    let (status, _, body) = curl_h2c(server.addr, "/cgi-bin/hop.sh", &[]);
    // curl refuses a response carrying connection-specific fields, so a
    // 200 here also says they were dropped (RFC 9113 §8.2.2).
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(body, b"HTTP/2.0\n");

    let (status, _, body) = curl_h2c(server.addr, "/app/x?params=1", &[]);
    assert_eq!(status, 200);
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains("param SERVER_PROTOCOL=HTTP/2.0"), "{text}");
    assert!(!text.contains("param HTTPS="), "{text}");

    let (status, _, body) = curl_h2c(server.addr, "/stoa-status?format=json", &[]);
    assert_eq!(status, 200);
    assert!(body.starts_with(b"{"), "{}", String::from_utf8_lossy(&body));
}

#[test]
fn rfc9113_5_2_a_request_body_larger_than_the_flow_control_windows_reaches_cgi_whole() {
    let (dir, server) = site("h2c-body");
    // 3 MB: three times the 1 MiB stream and connection windows, so the
    // client can only finish if the window is given back as the body is
    // read.
    let body = pattern(3_000_000, 11);
    let file = dir.write("upload.bin", &body);
    let arg = format!("@{}", file.display());
    let (status, _, echoed) = curl_h2c(server.addr, "/cgi-bin/echo.sh", &["--data-binary", &arg]);
    assert_eq!(status, 200);
    assert!(echoed == body, "{} bytes back", echoed.len());
}

/// The header lines of `curl --http2-prior-knowledge -I`, lowercased,
/// without `date` (which changes with the second).
fn head_fields(addr: SocketAddr, path: &str) -> Vec<String> {
    let (status, _, head) = curl_h2c(addr, path, &["-I"]);
    assert_eq!(status, 200, "{path}");
    let mut fields: Vec<String> = String::from_utf8_lossy(&head)
        .to_ascii_lowercase()
        .lines()
        .skip(1)
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty() && !l.starts_with("date:"))
        .collect();
    fields.sort();
    fields
}

/// A cached file's fields are HPACK-encoded once (RFC 7541 §6.2.2,
/// literals without indexing, so the block stands alone) and reused by
/// every later response; header rules that change those fields still
/// apply, to the first response and the later ones alike.
#[test]
fn rfc7541_a_static_files_pre_encoded_head_is_its_head_and_header_rules_still_change_it() {
    let dir = TempDir::new("h2c-pre-encoded");
    dir.write("www/index.html", "hello h2\n");
    dir.write("www/ruled/index.html", "ruled\n");
    let cfg = dir.config(
        "stoa.toml",
        "[[site]]\nroot = \"www\"\n\n\
         [[site.route]]\nprefix = \"/ruled/\"\nstatic = {}\n\
         headers = { remove = [\"ETag\", \"Accept-Ranges\"], set = { X-Rule = \"on\" } }\n",
    );
    let server = Server::with_config(&cfg);
    let first = head_fields(server.addr, "/index.html");
    for name in [
        "content-type:",
        "etag:",
        "last-modified:",
        "accept-ranges:",
        "content-length: 9",
    ] {
        assert!(
            first.iter().any(|f| f.starts_with(name)),
            "{name} in {first:?}"
        );
    }
    for _ in 0..3 {
        assert_eq!(head_fields(server.addr, "/index.html"), first);
    }
    let ruled = head_fields(server.addr, "/ruled/index.html");
    for _ in 0..3 {
        let again = head_fields(server.addr, "/ruled/index.html");
        assert_eq!(again, ruled);
        assert!(!again.iter().any(|f| f.starts_with("etag:")), "{again:?}");
        assert!(
            !again.iter().any(|f| f.starts_with("accept-ranges:")),
            "{again:?}"
        );
        assert!(again.iter().any(|f| f == "x-rule: on"), "{again:?}");
        assert!(
            again.iter().any(|f| f.starts_with("last-modified:")),
            "{again:?}"
        );
    }
}

/// Runs `f` on a current-thread runtime, bounded by `limit`.
fn block_on<T>(limit: Duration, f: impl std::future::Future<Output = T>) -> T {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        tokio::time::timeout(limit, f)
            .await
            .expect("the raw HTTP/2 client took too long")
    })
}

fn get(addr: SocketAddr, path: &str) -> http::Request<()> {
    http::Request::get(format!("http://{addr}{path}"))
        .body(())
        .expect("request")
}

/// One GET on a fresh h2c connection: its status and body length.
async fn one_get(addr: SocketAddr, path: &str) -> Result<(u16, usize), String> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let (client, conn) = h2::client::handshake(tcp)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut client = client.ready().await.map_err(|e| e.to_string())?;
    let (resp, _) = client
        .send_request(get(addr, path), true)
        .map_err(|e| e.to_string())?;
    let resp = resp.await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut n = 0;
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| e.to_string())?;
        n += chunk.len();
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    Ok((status, n))
}

/// An HTTP/2 connection idle for a while gives back the buffers it
/// keeps for its next request (as an idle HTTP/1 connection parks); its
/// HPACK table stays, since the client's encoder refers to it (RFC 7541
/// §2.3.2): a request whose fields the `h2` client sends as references to
/// that table, after the idle spell, must still be understood.
#[test]
fn rfc7541_2_3_2_a_connection_idle_past_the_shrink_delay_keeps_its_hpack_table_and_serves_on() {
    let (_dir, server) = site("h2c-idle-shrink");
    let addr = server.addr;
    let got = block_on(Duration::from_secs(30), async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (client, conn) = h2::client::handshake(tcp).await.expect("handshake");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut client = client;
        let mut got = Vec::new();
        for round in 0..3 {
            if round > 0 {
                // Past the 250 ms after which an idle connection shrinks.
                tokio::time::sleep(Duration::from_millis(700)).await;
            }
            let mut c = client.ready().await.expect("ready");
            let req = http::Request::get(format!("http://{addr}/index.html"))
                .header("x-custom-field", "the same value every time")
                .body(())
                .expect("request");
            let (resp, _) = c.send_request(req, true).expect("send");
            let resp = resp.await.expect("response");
            let status = resp.status().as_u16();
            let mut body = resp.into_body();
            let mut n = 0;
            while let Some(chunk) = body.data().await {
                let chunk = chunk.expect("data");
                n += chunk.len();
                let _ = body.flow_control().release_capacity(chunk.len());
            }
            got.push((status, n));
            client = c;
        }
        got
    });
    assert_eq!(got, vec![(200, 9); 3]);
}

/// A parked HTTP/2 connection is still a connection with its idle
/// limit: at the keep-alive deadline the server says GOAWAY (RFC 9113
/// §6.8, NO_ERROR) and closes, as it does for one waiting in its task
/// (and as nginx's `keepalive_timeout` does for HTTP/2), instead of
/// keeping it forever or dropping it without a word.
#[test]
fn rfc9113_6_8_a_parked_h2c_connection_gets_goaway_at_its_keepalive_deadline() {
    let dir = TempDir::new("h2c-parked-deadline");
    dir.write("www/index.html", "hello h2\n");
    let cfg = dir.config(
        "stoa.toml",
        "[limits]\nheader_timeout = \"1s\"\nkeepalive_timeout = \"1s\"\n\n[[site]]\nroot = \"www\"\n",
    );
    let server = serve_logging_parks(&cfg);
    let addr = server.addr;
    let (end, took) = block_on(Duration::from_secs(30), async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (client, conn) = h2::client::handshake(tcp).await.expect("handshake");
        let start = Instant::now();
        let driver = tokio::spawn(conn);
        let mut c = client.ready().await.expect("ready");
        let (resp, _) = c
            .send_request(get(addr, "/index.html"), true)
            .expect("send");
        let resp = resp.await.expect("response");
        assert_eq!(resp.status(), 200);
        // The client keeps its handle (the connection is not given up on
        // its side) and waits for the server to end it.
        let end = driver.await.expect("driver task");
        drop(c);
        (end, start.elapsed())
    });
    assert!(end.is_ok(), "not a clean GOAWAY and close: {end:?}");
    // Not before the idle limit (the first stream's spell counts from
    // the header timeout, then a keep-alive period), nor long after.
    assert!(took >= Duration::from_millis(900), "{took:?}");
    assert!(took < Duration::from_secs(15), "{took:?}");
    assert!(server.stderr().contains(PARKED), "{}", server.stderr());
    // And the server serves on.
    assert_eq!(server.get("/index.html").status, 200);
}

/// The client's FIN wakes a parked HTTP/2 connection as its next frame
/// would: the server reads the end and closes its side too (no half-open
/// socket left), as for a parked HTTP/1 connection (keepalive.rs).
#[test]
fn rfc9113_a_parked_h2c_connection_the_client_closes_is_let_go() {
    let (_dir, server) = site("h2c-parked-fin");
    let mut c = server.connect();
    // Preface, empty SETTINGS, then GET / on stream 1 (HEADERS with
    // END_STREAM | END_HEADERS): :method GET, :scheme http, :path / from
    // the static table (RFC 7541 Appendix A), :authority as a literal
    // without indexing (§6.2.2).
    let host = b"localhost";
    let mut block = vec![0x82, 0x86, 0x84, 0x01, host.len() as u8];
    block.extend_from_slice(host);
    let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    bytes.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    bytes.extend_from_slice(&[0, 0, block.len() as u8, 1, 0x5, 0, 0, 0, 1]);
    bytes.extend_from_slice(&block);
    c.send(&bytes);
    assert!(
        server.wait_stderr(0, PARKED, Duration::from_secs(10)),
        "never parked: {}",
        server.stderr()
    );
    c.stream
        .shutdown(std::net::Shutdown::Write)
        .expect("shutdown");
    let (_, got) = c
        .wait_closed(Duration::from_secs(5))
        .expect("the server must close a parked connection the client ended");
    // The response came before: a HEADERS frame (type 1) on stream 1
    // among the frames (RFC 9113 §4.1: 9-byte headers).
    let mut frames = Vec::new();
    let mut at = 0;
    while at + 9 <= got.len() {
        let len =
            usize::from(got[at]) << 16 | usize::from(got[at + 1]) << 8 | usize::from(got[at + 2]);
        let id = u32::from_be_bytes([got[at + 5], got[at + 6], got[at + 7], got[at + 8]]);
        frames.push((got[at + 3], id));
        at += 9 + len;
    }
    assert!(
        frames.contains(&(1, 1)),
        "frames (type, stream): {frames:?}"
    );
    assert_eq!(server.get("/index.html").status, 200);
}

#[test]
fn cve_2023_44487_a_rapid_reset_burst_does_not_stall_the_server() {
    let (_dir, server) = site("h2c-rapid-reset");
    let addr = server.addr;
    let (opened, took) = block_on(Duration::from_secs(60), async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (mut client, conn) = h2::client::handshake(tcp).await.expect("handshake");
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        let start = Instant::now();
        let mut opened = 0;
        // Open a stream and cancel it at once, as fast as the client can:
        // the server either keeps up or sends GOAWAY; it must not spend
        // its time on work nobody waits for.
        for _ in 0..20_000 {
            let ready = tokio::time::timeout(Duration::from_secs(5), client.clone().ready()).await;
            let Ok(Ok(mut c)) = ready else { break };
            let Ok((_resp, mut stream)) = c.send_request(get(addr, "/index.html"), false) else {
                break;
            };
            stream.send_reset(h2::Reason::CANCEL);
            opened += 1;
            client = c;
        }
        drop(client);
        let _ = tokio::time::timeout(Duration::from_secs(5), driver).await;
        (opened, start.elapsed())
    });
    eprintln!("rapid reset: {opened} streams opened and cancelled in {took:?}");
    assert!(opened > 0, "no stream could be opened");
    assert!(
        took < Duration::from_secs(30),
        "{opened} streams in {took:?}"
    );
    // Right after, a new client is served at once.
    let t = Instant::now();
    let got = block_on(Duration::from_secs(10), one_get(addr, "/index.html"));
    assert_eq!(got, Ok((200, 9)), "after {opened} reset streams");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let r = server.get("/index.html");
    assert_eq!(r.status, 200);
}

#[test]
fn rfc9113_6_8_a_graceful_stop_sends_goaway_and_closes_an_idle_h2_connection() {
    graceful_stop_after_idle("h2c-goaway", false);
}

/// An HTTP/2 connection idle past the park delay (250 ms) waits in the
/// worker's lot, out of its task: the stop must still reach it, with
/// GOAWAY and a clean close (nginx sends GOAWAY to idle HTTP/2
/// connections at a graceful stop too), not a silent drop or a reset.
#[test]
fn rfc9113_6_8_a_graceful_stop_sends_goaway_to_a_parked_h2c_connection() {
    graceful_stop_after_idle("h2c-goaway-parked", true);
}

/// One GET on an h2c connection, then (`parked`) until it parked,
/// SIGQUIT: the connection must end cleanly (GOAWAY, then the server's
/// close).
fn graceful_stop_after_idle(tag: &str, parked: bool) {
    let (_dir, mut server) = site(tag);
    let addr = server.addr;
    server.wait_for_handler(libc::SIGQUIT);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (client, conn) = h2::client::handshake(tcp).await.expect("handshake");
        let driver = tokio::spawn(conn);
        let mut c = client.ready().await.expect("ready");
        let (resp, _) = c
            .send_request(get(addr, "/index.html"), true)
            .expect("send");
        let resp = tokio::time::timeout(Duration::from_secs(5), resp)
            .await
            .expect("in time")
            .expect("response");
        assert_eq!(resp.status(), 200);
        // The client's connection stays open, its driver task reading.
        // (Blocking this thread holds the client's driver meanwhile: an
        // idle connection has nothing to say.)
        if parked {
            let seen = server.wait_stderr(0, PARKED, Duration::from_secs(10));
            assert!(seen, "never parked: {}", server.stderr());
        }
        server.signal(libc::SIGQUIT);
        // GOAWAY, then the server closes: the client's connection ends
        // cleanly, not with a reset or an I/O error.
        let end = tokio::time::timeout(Duration::from_secs(5), driver)
            .await
            .expect("the connection ended in time")
            .expect("driver task");
        assert!(end.is_ok(), "{end:?}");
    });
    assert!(
        server.wait_exit(Duration::from_secs(10)).is_some(),
        "{}",
        server.stderr()
    );
}

/// The h2spec binary: on PATH, or where `go install` puts it.
fn h2spec() -> std::path::PathBuf {
    let mut places: Vec<std::path::PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Ok(out) = Command::new("go").args(["env", "GOPATH"]).output() {
        let gopath = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !gopath.is_empty() {
            places.push(std::path::Path::new(&gopath).join("bin"));
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        places.push(std::path::Path::new(&home).join("go/bin"));
    }
    places
        .into_iter()
        .map(|d| d.join("h2spec"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "h2spec is missing: go install \
                 github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible (test.sh does it)"
            )
        })
}

/// Runs h2spec (every RFC 7540/7541 case, the strict ones included) and
/// returns the ids of the failed cases, e.g. "http2/3.5/2".
fn h2spec_failures(addr: SocketAddr, tls: bool) -> (Vec<String>, String) {
    let mut cmd = Command::new(h2spec());
    let dir = TempDir::new("h2spec-report");
    let report = dir.join("report.xml");
    cmd.args([
        "-h",
        "127.0.0.1",
        "-p",
        &addr.port().to_string(),
        "-o",
        "3",
        "-S",
    ]);
    if tls {
        cmd.args(["-t", "-k"]);
    }
    cmd.arg("-j").arg(&report);
    let out = cmd.output().expect("run h2spec");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let xml = std::fs::read_to_string(&report).unwrap_or_default();
    // JUnit report: <testsuite package="http2/3.5" ...> holds
    // <testcase package="http2/3.5" classname="..." ...><failure>.
    let mut failed = Vec::new();
    let mut suite = String::new();
    let mut case = 0;
    for line in xml.lines() {
        let line = line.trim();
        if line.starts_with("<testsuite ") {
            suite = attr(line, "package").unwrap_or_default();
            case = 0;
        } else if line.starts_with("<testcase ") {
            case += 1;
        } else if line.starts_with("<failure") || line.starts_with("<error") {
            failed.push(format!("{suite}/{case}"));
        }
    }
    assert!(
        text.contains("tests,") && !xml.is_empty(),
        "h2spec did not run: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (failed, text)
}

fn attr(tag: &str, name: &str) -> Option<String> {
    let start = tag.find(&format!("{name}=\""))? + name.len() + 2;
    let len = tag[start..].find('"')?;
    Some(tag[start..start + len].to_owned())
}

/// h2spec's cases Stoa is allowed to fail, each with its reason
/// (docs/ARCHITECTURE.md lists them too).
const H2SPEC_EXCEPTIONS: &[(&str, &str)] = &[
    // h2c only: an invalid preface on the cleartext port is an HTTP/1
    // request to Stoa, which answers 400 before it closes; h2spec wants
    // the close alone.
    ("http2/3.5/2", "h2c shares the port with HTTP/1"),
];

#[test]
fn h2spec_passes_over_h2c_and_tls_except_the_listed_cases_rfc9113() {
    let (_dir, plain) = site("h2spec-h2c");
    let dir = TempDir::new("h2spec-tls");
    dir.write("www/index.html", "h2spec\n");
    let out = Command::new(stoa_bin())
        .arg("cert")
        .arg(dir.join("certs"))
        .output()
        .expect("stoa cert");
    assert!(out.status.success(), "{out:?}");
    let tls = Server::serve_dir_tls(
        &dir.join("www"),
        &dir.join("certs/cert.pem"),
        &dir.join("certs/key.pem"),
    );
    for (server, is_tls) in [(&plain, false), (&tls, true)] {
        let (failed, text) = h2spec_failures(server.addr, is_tls);
        let unexpected: Vec<&String> = failed
            .iter()
            .filter(|f| !H2SPEC_EXCEPTIONS.iter().any(|(id, _)| id == f))
            .collect();
        assert!(
            unexpected.is_empty(),
            "tls={is_tls}: {unexpected:?} failed\n{text}"
        );
        eprintln!("h2spec tls={is_tls}: failed {failed:?}");
    }
}
