//! TLS (RFC 8446) end to end: the real `stoa` binary with certificates
//! made by `stoa cert`, checked with curl and openssl s_client: HTTPS over
//! HTTP/1.1 and HTTP/2 (ALPN), files larger than a record, SNI selection
//! between two certificates, session resumption, no TLS 1.1, reload of
//! certificates on SIGHUP (a bad one keeps the old), clear start-up
//! errors, what CGI and FastCGI applications see (HTTPS=on), the
//! testssl-style checks that matter (no TLS 1.0/1.1, no weak suites),
//! `https_redirect` and `hsts`, and the status page's counts by protocol.
//!
//! Needs the Debian packages curl (with HTTP/2) and openssl.

mod common;

use common::*;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const HELLO_FCGI: &str = env!("CARGO_BIN_EXE_stoa-hello-fcgi");

/// `stoa cert DIR NAMES...`: returns (cert, key).
fn make_cert(dir: &Path, names: &[&str]) -> (PathBuf, PathBuf) {
    let out = Command::new(stoa_bin())
        .arg("cert")
        .arg(dir)
        .args(names)
        .output()
        .expect("run stoa cert");
    assert!(out.status.success(), "stoa cert: {out:?}");
    (dir.join("cert.pem"), dir.join("key.pem"))
}

/// What curl got: status, HTTP version ("1.1", "2") and body.
#[derive(Debug)]
struct Got {
    ok: bool,
    status: u16,
    version: String,
    body: Vec<u8>,
    stderr: String,
}

/// `curl` with bounded time, `NAME` resolving to the server's address,
/// trusting `ca`. The last line of stdout is "status version".
fn curl(server: &Server, name: &str, ca: &Path, path: &str, extra: &[&str]) -> Got {
    curl_port(server.addr.port(), name, ca, path, extra)
}

/// [`curl`] to another port of 127.0.0.1.
fn curl_port(port: u16, name: &str, ca: &Path, path: &str, extra: &[&str]) -> Got {
    require("curl", "curl");
    let out: Output = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--resolve"])
        .arg(format!("{name}:{port}:127.0.0.1"))
        .arg("--cacert")
        .arg(ca)
        .args(extra)
        .args(["-w", "\n%{http_code} %{http_version}"])
        .arg(format!("https://{name}:{port}{path}"))
        .output()
        .expect("run curl");
    let stdout = out.stdout;
    let cut = stdout
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap_or(stdout.len());
    let tail = String::from_utf8_lossy(&stdout[(cut + 1).min(stdout.len())..]).into_owned();
    let (status, version) = tail.split_once(' ').unwrap_or(("0", ""));
    Got {
        ok: out.status.success(),
        status: status.parse().unwrap_or(0),
        version: version.to_owned(),
        body: stdout[..cut].to_vec(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A directory with `www/index.html`, `www/big.bin` (3 MB), a certificate
/// for localhost, and a server on it with `--tls-cert`/`--tls-key`.
fn tls_dir(tag: &str) -> (TempDir, Server, PathBuf, Vec<u8>) {
    let dir = TempDir::new(tag);
    dir.write("www/index.html", "hello over tls\n");
    let big = pattern(3_000_000, 7);
    dir.write("www/big.bin", &big);
    let (cert, key) = make_cert(&dir.join("certs"), &["localhost", "127.0.0.1"]);
    let server = Server::serve_dir_tls(&dir.join("www"), &cert, &key);
    (dir, server, cert, big)
}

#[test]
fn rfc8446_https_serves_a_file_to_curl_trusting_a_certificate_from_stoa_cert() {
    let (_dir, server, cert, _) = tls_dir("tls-basic");
    let g = curl(&server, "localhost", &cert, "/index.html", &["--http1.1"]);
    assert!(g.ok, "{g:?}");
    assert_eq!((g.status, g.version.as_str()), (200, "1.1"), "{g:?}");
    assert_eq!(g.body, b"hello over tls\n");
    // Several requests on one TLS connection (keep-alive).
    let port = server.addr.port();
    let url = format!("https://localhost:{port}/index.html");
    let out = Command::new("curl")
        .args(["-sS", "--http1.1", "--max-time", "10", "--resolve"])
        .arg(format!("localhost:{port}:127.0.0.1"))
        .arg("--cacert")
        .arg(&cert)
        .args([&url, &url, &url])
        .output()
        .expect("curl");
    assert_eq!(out.stdout, b"hello over tls\n".repeat(3), "{out:?}");
}

#[test]
fn rfc7301_alpn_chooses_http2_for_curl_http2_over_tls_rfc9113_3_2() {
    let (_dir, server, cert, _) = tls_dir("tls-alpn");
    let g = curl(&server, "localhost", &cert, "/index.html", &["--http2"]);
    assert_eq!((g.status, g.version.as_str()), (200, "2"), "{g:?}");
    assert_eq!(g.body, b"hello over tls\n");
}

#[test]
fn rfc8446_a_file_larger_than_many_records_arrives_whole_without_sendfile_over_both_protocols() {
    let (_dir, server, cert, big) = tls_dir("tls-big");
    for proto in ["--http1.1", "--http2"] {
        let g = curl(&server, "localhost", &cert, "/big.bin", &[proto]);
        assert_eq!(g.status, 200, "{proto}: {}", g.stderr);
        assert!(g.body == big, "{proto}: {} bytes differ", g.body.len());
        // A range from the middle, read with pread over TLS.
        let g = curl(
            &server,
            "localhost",
            &cert,
            "/big.bin",
            &[proto, "-r", "1000000-1000099"],
        );
        assert_eq!(g.status, 206, "{proto}: {}", g.stderr);
        assert_eq!(g.body, &big[1_000_000..1_000_100], "{proto}");
    }
}

#[test]
fn rfc6066_3_sni_selects_the_certificate_of_the_name_the_client_asks_for() {
    let dir = TempDir::new("tls-sni");
    dir.write("www/index.html", "sni\n");
    let (a_cert, a_key) = make_cert(&dir.join("a"), &["a.test"]);
    let (b_cert, b_key) = make_cert(&dir.join("b"), &["b.test"]);
    let cfg = dir.write(
        "stoa.toml",
        format!(
            "workers = 1\nuser = \"root\"\n\n[log]\naccess = \"off\"\n\n\
             [[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"{}\"\nkey = \"{}\"\nhosts = [\"a.test\"]\n\n\
             [[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"{}\"\nkey = \"{}\"\nhosts = [\"b.test\"]\n\n\
             [[site]]\nroot = \"www\"\n",
            a_cert.display(),
            a_key.display(),
            b_cert.display(),
            b_key.display()
        ),
    );
    let server = Server::with_config(&cfg);
    for (name, ca) in [("a.test", &a_cert), ("b.test", &b_cert)] {
        let g = curl(&server, name, ca, "/index.html", &[]);
        assert_eq!(g.status, 200, "{name}: {g:?}");
        assert_eq!(g.body, b"sni\n");
    }
    // b.test is not served with a.test's certificate: trusting only that
    // one, the client refuses the connection.
    let g = curl(&server, "b.test", &a_cert, "/index.html", &[]);
    assert!(!g.ok && g.status == 0, "{g:?}");
    // A name no block lists gets the first block's certificate.
    let g = curl(
        &server,
        "a.test",
        &a_cert,
        "/index.html",
        &["-H", "Host: other"],
    );
    assert_eq!(g.status, 200, "{g:?}");
}

#[test]
fn rfc8446_2_2_a_session_is_resumed_with_a_ticket_and_tls_1_1_is_refused() {
    require("openssl", "openssl");
    let (dir, server, _cert, _) = tls_dir("tls-resume");
    let sess = dir.join("session.pem");
    let connect = format!("127.0.0.1:{}", server.addr.port());
    let s_client = |args: &[&str]| -> String {
        let out = Command::new("timeout")
            .args(["10", "openssl", "s_client", "-connect", &connect])
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("openssl s_client");
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    let sess_s = sess.display().to_string();
    let first = s_client(&["-tls1_2", "-sess_out", &sess_s]);
    assert!(first.contains("New, TLSv1.2"), "{first}");
    let again = s_client(&["-tls1_2", "-sess_in", &sess_s]);
    assert!(again.contains("Reused, TLSv1.2"), "{again}");
    let old = s_client(&["-tls1_1"]);
    assert!(
        !old.contains("New, TLSv1.1") && !old.contains("Cipher is ECDHE"),
        "{old}"
    );
}

#[test]
fn a_missing_or_mismatched_key_stops_start_up_with_a_message_naming_the_file() {
    let dir = TempDir::new("tls-badkey");
    dir.write("www/index.html", "x");
    let (cert, _) = make_cert(&dir.join("a"), &["localhost"]);
    let (_, other_key) = make_cert(&dir.join("b"), &["localhost"]);
    let missing = dir.join("nope.key");
    for (key, says) in [
        (&missing, "nope.key"),
        (&other_key, "does not belong to the certificate"),
    ] {
        let out = Command::new(stoa_bin())
            .arg("serve")
            .arg(dir.join("www"))
            .args(["--listen", "127.0.0.1:0", "--tls-cert"])
            .arg(&cert)
            .arg("--tls-key")
            .arg(key)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run stoa");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(says), "{err}");
        assert!(err.contains(&key.display().to_string()), "{err}");
    }
}

#[test]
fn sighup_reloads_certificates_and_a_bad_one_keeps_the_old_and_names_its_path() {
    let dir = TempDir::new("tls-reload");
    dir.write("www/index.html", "reload\n");
    let (cert, key) = make_cert(&dir.join("live"), &["localhost"]);
    let first = dir.join("first.pem");
    std::fs::copy(&cert, &first).expect("copy");
    let cfg = dir.write(
        "stoa.toml",
        format!(
            "workers = 1\nuser = \"root\"\n\n[log]\naccess = \"off\"\n\n\
             [[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"{}\"\nkey = \"{}\"\n\n\
             [[site]]\nroot = \"www\"\n",
            cert.display(),
            key.display()
        ),
    );
    let server = Server::with_config(&cfg);
    server.wait_for_handler(libc::SIGHUP);
    assert_eq!(curl(&server, "localhost", &first, "/", &[]).status, 200);

    // A broken certificate: the reload fails, the old one stays.
    std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\nbroken\n").expect("write");
    let from = server.stderr().len();
    server.signal(libc::SIGHUP);
    assert!(
        server.wait_stderr(from, "reload failed", Duration::from_secs(5)),
        "{}",
        server.stderr()
    );
    assert!(
        server.stderr()[from..].contains(&cert.display().to_string()),
        "{}",
        server.stderr()
    );
    let g = curl(&server, "localhost", &first, "/", &[]);
    assert_eq!(g.status, 200, "{g:?}");

    // A good new certificate: new connections get it.
    let (cert2, key2) = make_cert(&dir.join("second"), &["localhost"]);
    std::fs::copy(&cert2, &cert).expect("copy");
    std::fs::copy(&key2, &key).expect("copy");
    let from = server.stderr().len();
    server.signal(libc::SIGHUP);
    assert!(
        server.wait_stderr(from, "reloaded", Duration::from_secs(5)),
        "{}",
        server.stderr()
    );
    assert_eq!(curl(&server, "localhost", &cert2, "/", &[]).status, 200);
    assert!(!curl(&server, "localhost", &first, "/", &[]).ok);
}

/// A site over TLS with a CGI script and a FastCGI pool that print their
/// environment.
fn gateway_site(tag: &str) -> (TempDir, Server, PathBuf) {
    let dir = TempDir::new(tag);
    dir.write("www/index.html", "x");
    let env = dir.write(
        "cgi-bin/env.sh",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\nenv\n",
    );
    let echo = dir.write(
        "cgi-bin/echo.sh",
        "#!/bin/sh\nprintf 'Content-Type: application/octet-stream\\r\\n\\r\\n'\nexec cat\n",
    );
    for p in [env, echo] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let (cert, key) = make_cert(&dir.join("certs"), &["localhost"]);
    let cfg = dir.write(
        "stoa.toml",
        format!(
            "workers = 1\nuser = \"root\"\n\n[log]\naccess = \"off\"\n\n\
             [[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"{}\"\nkey = \"{}\"\n\n\
             [[pool]]\nname = \"app\"\ncommand = [\"{HELLO_FCGI}\"]\nprocesses = 1\n\n\
             [[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = {{ dir = \"cgi-bin\" }}\n\n\
             [[site.route]]\nprefix = \"/app/\"\nfastcgi = {{ pool = \"app\" }}\n",
            cert.display(),
            key.display()
        ),
    );
    let server = Server::with_config(&cfg);
    (dir, server, cert)
}

fn var<'a>(text: &'a str, prefix: &str, name: &str) -> Option<&'a str> {
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
}

#[test]
fn rfc3875_cgi_and_fastcgi_see_https_on_and_the_tls_version_over_both_protocols() {
    let (_dir, server, cert) = gateway_site("tls-cgi");
    for (proto, version) in [("--http1.1", "HTTP/1.1"), ("--http2", "HTTP/2.0")] {
        let g = curl(&server, "localhost", &cert, "/cgi-bin/env.sh", &[proto]);
        assert_eq!(g.status, 200, "{proto}: {g:?}");
        let text = String::from_utf8_lossy(&g.body);
        assert_eq!(var(&text, "", "HTTPS"), Some("on"), "{proto}: {text}");
        assert_eq!(var(&text, "", "REQUEST_SCHEME"), Some("https"), "{text}");
        assert_eq!(var(&text, "", "SSL_PROTOCOL"), Some("TLSv1.3"), "{text}");
        assert_eq!(var(&text, "", "SERVER_PROTOCOL"), Some(version), "{text}");

        let g = curl(&server, "localhost", &cert, "/app/x?params=1", &[proto]);
        assert_eq!(g.status, 200, "{proto}: {g:?}");
        let text = String::from_utf8_lossy(&g.body);
        assert_eq!(var(&text, "param ", "HTTPS"), Some("on"), "{text}");
        assert_eq!(var(&text, "param ", "SERVER_PROTOCOL"), Some(version));
    }
}

#[test]
fn rfc9110_10_1_1_a_request_body_with_100_continue_reaches_cgi_whole_over_tls_on_both_protocols() {
    let (dir, server, cert) = gateway_site("tls-body");
    let body = pattern(2_500_000, 5);
    let file = dir.write("upload.bin", &body);
    let arg = format!("@{}", file.display());
    for proto in ["--http1.1", "--http2"] {
        let g = curl(
            &server,
            "localhost",
            &cert,
            "/cgi-bin/echo.sh",
            &[proto, "-H", "Expect: 100-continue", "--data-binary", &arg],
        );
        assert_eq!(g.status, 200, "{proto}: {}", g.stderr);
        assert!(g.body == body, "{proto}: {} bytes back", g.body.len());
    }
}

/// `n` GETs of `path`, one after the other on one h2c connection: their
/// statuses.
fn h2c_gets(addr: std::net::SocketAddr, path: &str, n: usize) -> Vec<u16> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (client, conn) = h2::client::handshake(tcp).await.expect("handshake");
        let driver = tokio::spawn(conn);
        let mut statuses = Vec::new();
        for _ in 0..n {
            let mut c = client.clone().ready().await.expect("ready");
            let req = http::Request::get(format!("http://{addr}{path}"))
                .body(())
                .expect("request");
            let (resp, _) = c.send_request(req, true).expect("send");
            let resp = tokio::time::timeout(Duration::from_secs(5), resp)
                .await
                .expect("in time")
                .expect("response");
            statuses.push(resp.status().as_u16());
            let mut body = resp.into_body();
            while let Some(chunk) = body.data().await {
                let chunk = chunk.expect("body");
                let _ = body.flow_control().release_capacity(chunk.len());
            }
        }
        drop(client);
        let _ = tokio::time::timeout(Duration::from_secs(5), driver).await;
        statuses
    })
}

/// The port of the server's first TLS listener, from its ready lines.
fn tls_port(server: &Server) -> u16 {
    // The lines come one after the other; the harness returns on the first.
    assert!(server.wait_stderr(0, "listening on https://", Duration::from_secs(5)));
    server
        .stderr()
        .lines()
        .find_map(|l| l.split("listening on https://").nth(1))
        .and_then(|a| {
            a.trim()
                .trim_end_matches('/')
                .parse::<std::net::SocketAddr>()
                .ok()
        })
        .map(|a| a.port())
        .expect("a TLS listener")
}

/// `openssl s_client` against `port` with `args`: what it printed.
fn s_client(port: u16, args: &[&str]) -> String {
    require("openssl", "openssl");
    let out = Command::new("timeout")
        .args(["10", "openssl", "s_client", "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl s_client");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// The cipher suite a handshake agreed on, if it succeeded.
fn negotiated(out: &str) -> Option<&str> {
    out.lines()
        .find_map(|l| l.split("Cipher is ").nth(1))
        .map(str::trim)
        .filter(|c| *c != "(NONE)")
}

#[test]
fn testssl_tls_1_0_and_1_1_and_weak_cipher_suites_are_refused_by_the_server() {
    let (_dir, server, _cert, _) = tls_dir("tls-testssl");
    let port = server.addr.port();
    // `@SECLEVEL=0` lets OpenSSL 3 offer what it would otherwise refuse
    // itself, so the refusal seen is the server's (a handshake_failure
    // alert in answer to the ClientHello), not the client's.
    let weak: &[(&str, &[&str])] = &[
        ("TLS 1.0", &["-tls1", "-cipher", "DEFAULT:@SECLEVEL=0"]),
        ("TLS 1.1", &["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"]),
        (
            "NULL, anonymous, export, RC4, DES, MD5, static RSA, PSK, SRP suites",
            &[
                "-tls1_2",
                "-cipher",
                "NULL:aNULL:eNULL:EXPORT:RC4:3DES:DES:MD5:kRSA:PSK:SRP:CAMELLIA:SEED:IDEA:ARIA:@SECLEVEL=0",
            ],
        ),
        (
            "CBC suites (Lucky13, no AEAD)",
            &[
                "-tls1_2",
                "-cipher",
                "ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA:ECDHE-ECDSA-AES128-SHA256:\
                 ECDHE-ECDSA-AES256-SHA384:ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA:@SECLEVEL=0",
            ],
        ),
    ];
    for (what, args) in weak {
        let out = s_client(port, args);
        assert_eq!(negotiated(&out), None, "{what} was accepted:\n{out}");
        assert!(
            out.contains("alert handshake failure") || out.contains("alert protocol version"),
            "{what}: not refused by the server:\n{out}"
        );
    }
    // What is left: forward-secret AEAD suites only.
    let out = s_client(port, &["-tls1_2"]);
    let suite = negotiated(&out).unwrap_or_else(|| panic!("TLS 1.2 failed:\n{out}"));
    assert!(
        suite.starts_with("ECDHE-") && (suite.contains("GCM") || suite.contains("CHACHA20")),
        "{suite}"
    );
    let out = s_client(port, &["-tls1_3"]);
    assert!(
        negotiated(&out).is_some_and(|c| c.starts_with("TLS_")),
        "{out}"
    );
}

/// A cleartext port and a TLS port; `localhost` redirects to https and
/// sends HSTS, `plain.test` only sends HSTS (over TLS).
fn redirect_site(tag: &str) -> (TempDir, Server, PathBuf) {
    let dir = TempDir::new(tag);
    dir.write("www/dir/page.html", "page\n");
    dir.write("www/.well-known/acme-challenge/tok3n", "acme-response\n");
    let (cert, key) = make_cert(&dir.join("certs"), &["localhost", "plain.test"]);
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"{}\"\nkey = \"{}\"\n\n\
             [[site]]\nhosts = [\"localhost\"]\nroot = \"www\"\nhttps_redirect = true\n\
             hsts = \"max-age=31536000; includeSubDomains\"\n\n\
             [[site]]\nhosts = [\"plain.test\"]\nroot = \"www\"\nhsts = \"max-age=60\"\n",
            cert.display(),
            key.display()
        ),
    );
    let server = Server::with_config(&cfg);
    (dir, server, cert)
}

#[test]
fn rfc9110_15_4_9_https_redirect_sends_cleartext_requests_to_the_same_url_over_https_with_308() {
    let (_dir, server, cert) = redirect_site("tls-redirect");
    let tls = tls_port(&server);
    let plain = server.addr.port();
    for method in ["GET", "POST", "HEAD"] {
        let mut c = server.connect();
        c.send(
            format!(
                "{method} /dir/page.html?q=1&r=%2F HTTP/1.1\r\nHost: localhost:{plain}\r\n\
                 Content-Length: 0\r\n\r\n"
            )
            .as_bytes(),
        );
        let r = if method == "HEAD" {
            c.read_head()
        } else {
            c.read()
        };
        assert_eq!(r.status, 308, "{method}: {r:?}");
        assert_eq!(
            r.header("location"),
            Some(format!("https://localhost:{tls}/dir/page.html?q=1&r=%2F").as_str()),
            "{method}"
        );
        // HSTS only over TLS (RFC 6797 §7.2).
        assert_eq!(r.header("strict-transport-security"), None, "{r:?}");
    }
    // An ACME HTTP-01 challenge is answered over http (RFC 8555 §8.3).
    let mut c = server.connect();
    let r = c.request(b"GET /.well-known/acme-challenge/tok3n HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, &b"acme-response\n"[..])
    );
    // h2c is cleartext too.
    let out = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "10",
            "--http2-prior-knowledge",
            "-o",
            "/dev/null",
        ])
        .args(["-w", "%{http_code} %{redirect_url}"])
        .arg(format!("http://localhost:{plain}/dir/page.html"))
        .output()
        .expect("curl");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("308 https://localhost:{tls}/dir/page.html")
    );
    // Followed, it lands on the page over https, which carries HSTS on
    // both protocols.
    for proto in ["--http1.1", "--http2"] {
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "10", "-L", "-i", proto, "--cacert"])
            .arg(&cert)
            .arg(format!("http://localhost:{plain}/dir/page.html"))
            .output()
            .expect("curl");
        let text = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
        assert!(text.contains(" 308"), "{proto}: {text}");
        assert!(text.ends_with("\r\n\r\npage\n"), "{proto}: {text}");
        let https_part = &text[text.find(" 308").expect("308")..];
        assert!(
            https_part.contains("strict-transport-security: max-age=31536000; includesubdomains"),
            "{proto}: {text}"
        );
    }
    // A site without https_redirect: served over http, without HSTS; with
    // it over https.
    let mut c = server.connect();
    let r = c.request(b"GET /dir/page.html HTTP/1.1\r\nHost: plain.test\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("strict-transport-security"), None);
    let g = curl_port(tls, "plain.test", &cert, "/dir/page.html", &["-i"]);
    let text = String::from_utf8_lossy(&g.body).to_ascii_lowercase();
    assert!(
        text.contains("strict-transport-security: max-age=60\r\n"),
        "{text}"
    );
}

#[test]
fn the_status_page_counts_connections_and_streams_by_protocol_and_tls_handshakes() {
    let dir = TempDir::new("tls-status");
    dir.write("www/index.html", "counted\n");
    let (cert, key) = make_cert(&dir.join("certs"), &["localhost"]);
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"{}\"\nkey = \"{}\"\n\n\
             [[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nprefix = \"/stoa-status\"\nstatus = {{}}\n",
            cert.display(),
            key.display()
        ),
    );
    let server = Server::with_config(&cfg);
    let tls = tls_port(&server);
    // Cleartext HTTP/1.1: two connections.
    for _ in 0..2 {
        assert_eq!(server.get("/index.html").status, 200);
    }
    // h2c: one connection, two streams (with the h2 crate: curl 7.88
    // cannot reuse a prior-knowledge connection, curl/curl#10634).
    assert_eq!(h2c_gets(server.addr, "/index.html", 2), [200, 200]);
    // HTTPS/1.1: one connection; h2 over TLS: one connection, three streams.
    let g = curl_port(tls, "localhost", &cert, "/index.html", &["--http1.1"]);
    assert_eq!(g.status, 200, "{g:?}");
    let url = format!("https://localhost:{tls}/index.html");
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--http2", "--resolve"])
        .arg(format!("localhost:{tls}:127.0.0.1"))
        .arg("--cacert")
        .arg(&cert)
        .args([&url, &url, &url])
        .output()
        .expect("curl");
    assert_eq!(out.stdout, b"counted\n".repeat(3), "{out:?}");
    // A full handshake then a resumed one (no request on either), and a
    // failed one (cleartext to the TLS port).
    let sess = dir.join("session.pem").display().to_string();
    assert!(s_client(tls, &["-tls1_2", "-sess_out", &sess]).contains("New, TLSv1.2"));
    assert!(s_client(tls, &["-tls1_2", "-sess_in", &sess]).contains("Reused, TLSv1.2"));
    let mut c = Conn::connect(std::net::SocketAddr::from(([127, 0, 0, 1], tls)));
    c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(c.wait_closed(Duration::from_secs(5)).is_some());

    // The counts settle once the clients' connections are seen closed.
    let until = std::time::Instant::now() + Duration::from_secs(5);
    let v = loop {
        let r = server.get("/stoa-status?format=json");
        assert_eq!(r.status, 200, "{r:?}");
        let v: serde_json::Value = serde_json::from_slice(&r.body).expect("json");
        let p = &v["protocols"];
        let settled = p["h2"]["connections_open"] == 0
            && p["h2c"]["connections_open"] == 0
            && p["http/1.1+tls"]["connections_open"] == 0
            && v["tls_handshakes"]["failed"] == 1;
        if settled || std::time::Instant::now() > until {
            break v;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let p = &v["protocols"];
    // Two GETs and the status requests so far (each on its own connection).
    assert!(
        p["http/1.1"]["connections_total"].as_u64() >= Some(3),
        "{v}"
    );
    assert_eq!(p["http/1.1"]["connections_open"], 1, "{v}");
    assert_eq!(p["http/1.1+tls"]["connections_total"], 1, "{v}");
    assert_eq!(p["h2"]["connections_total"], 1, "{v}");
    assert_eq!(p["h2"]["streams_total"], 3, "{v}");
    assert_eq!(p["h2"]["streams_open"], 0, "{v}");
    assert_eq!(p["h2c"]["connections_total"], 1, "{v}");
    assert_eq!(p["h2c"]["streams_total"], 2, "{v}");
    // curl twice (no session kept between processes) and s_client once.
    assert_eq!(v["tls_handshakes"]["full"], 3, "{v}");
    assert_eq!(v["tls_handshakes"]["resumed"], 1, "{v}");
    assert_eq!(v["tls_handshakes"]["failed"], 1, "{v}");

    let r = server.get("/stoa-status?format=prometheus");
    let text = r.text();
    for line in [
        "stoa_protocol_connections_total{protocol=\"h2\"} 1",
        "stoa_protocol_connections_total{protocol=\"h2c\"} 1",
        "stoa_protocol_connections_total{protocol=\"http/1.1+tls\"} 1",
        "stoa_protocol_connections_open{protocol=\"h2\"} 0",
        "stoa_h2_streams_total{protocol=\"h2\"} 3",
        "stoa_h2_streams_total{protocol=\"h2c\"} 2",
        "stoa_h2_streams_open{protocol=\"h2c\"} 0",
        "stoa_tls_handshakes_total{result=\"full\"} 3",
        "stoa_tls_handshakes_total{result=\"resumed\"} 1",
        "stoa_tls_handshakes_total{result=\"failed\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
    }
    // The status page itself over h2: a stream is open while it is served.
    let g = curl_port(
        tls,
        "localhost",
        &cert,
        "/stoa-status?format=json",
        &["--http2"],
    );
    let v: serde_json::Value = serde_json::from_slice(&g.body).expect("json");
    assert_eq!(v["protocols"]["h2"]["streams_open"], 1, "{v}");
    let text = server.get("/stoa-status").text();
    assert!(text.contains("h2: 2 connections"), "{text}");
    assert!(
        text.contains("tls handshakes: 4 full, 1 resumed, 1 failed"),
        "{text}"
    );
}

/// An HTTP/2 connection over TLS idle for the park delay (250 ms)
/// leaves its task for the worker's lot with its TLS session and codec
/// state: its next request must be served on the same connection, and
/// the HPACK table must have survived (RFC 7541 §2.3.2: the client's
/// encoder refers to it): the second request's `:authority` is only an
/// index into the table the first request filled. openssl s_client
/// carries raw HTTP/2 frames (RFC 9113 §3.4, §4.1).
#[test]
fn rfc7541_2_3_2_a_parked_tls_h2_connection_keeps_its_session_and_hpack_table() {
    require("openssl", "openssl");
    let dir = TempDir::new("tls-h2-parked");
    dir.write("www/index.html", "hello over tls\n");
    let (cert, key) = make_cert(&dir.join("certs"), &["localhost", "127.0.0.1"]);
    // As `Server::serve_dir_tls`, logging each HTTP/2 connection that
    // parks (debug level): the test waits for that line.
    let www = dir.join("www");
    let args = [
        OsStr::new("serve"),
        www.as_os_str(),
        OsStr::new("--listen"),
        OsStr::new("127.0.0.1:0"),
        OsStr::new("--workers"),
        OsStr::new("1"),
        OsStr::new("--access-log"),
        OsStr::new("off"),
        OsStr::new("--tls-cert"),
        cert.as_os_str(),
        OsStr::new("--tls-key"),
        key.as_os_str(),
    ];
    let env = [("STOA_LOG", OsStr::new("stoa_server::conn::h2=debug"))];
    let server = Server::try_spawn_program(OsStr::new(stoa_bin()), args, &env)
        .unwrap_or_else(|e| panic!("stoa did not start: {e}"));
    let connect = format!("127.0.0.1:{}", server.addr.port());
    let mut child = Command::new("timeout")
        .args([
            "20",
            "openssl",
            "s_client",
            "-quiet",
            "-no_ign_eof",
            "-alpn",
            "h2",
        ])
        .args(["-servername", "localhost", "-connect", &connect])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("openssl s_client");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let reader = {
        let got = got.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = std::io::Read::read(&mut stdout, &mut buf) {
                got.lock().expect("lock").extend_from_slice(&buf[..n]);
            }
        })
    };
    // (type, stream, first payload byte) of each whole frame so far.
    let frames = || {
        let b = got.lock().expect("lock").clone();
        let mut out = Vec::new();
        let mut at = 0;
        while at + 9 <= b.len() {
            let len =
                usize::from(b[at]) << 16 | usize::from(b[at + 1]) << 8 | usize::from(b[at + 2]);
            if at + 9 + len > b.len() {
                break;
            }
            let id = u32::from_be_bytes([b[at + 5], b[at + 6], b[at + 7], b[at + 8]]);
            out.push((b[at + 3], id, b.get(at + 9).copied().filter(|_| len > 0)));
            at += 9 + len;
        }
        out
    };
    // A response's HEADERS frame (type 1) on `id`, waited for.
    let response = |id: u32| {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(f) = frames().into_iter().find(|f| f.0 == 1 && f.1 == id) {
                return Some(f);
            }
            if Instant::now() > until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let headers = |id: u32, block: &[u8]| {
        let mut f = vec![0, 0, block.len() as u8, 1, 0x5];
        f.extend_from_slice(&id.to_be_bytes());
        f.extend_from_slice(block);
        f
    };
    // :method GET, :scheme https, :path / (static table), :authority
    // "localhost" as a literal with incremental indexing (RFC 7541
    // §6.2.1): it becomes dynamic entry 62.
    let mut first = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    first.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    first.extend_from_slice(&headers(1, b"\x82\x87\x84\x41\x09localhost"));
    std::io::Write::write_all(&mut stdin, &first).expect("write");
    let one = response(1);
    // Once it parked, the same request with :authority as index 62 only
    // (§6.1).
    assert!(
        server.wait_stderr(0, ": idle, parked", Duration::from_secs(10)),
        "never parked: {}",
        server.stderr()
    );
    std::io::Write::write_all(&mut stdin, &headers(3, b"\x82\x87\x84\xbe")).expect("write");
    let three = response(3);
    let all = frames();
    // End of input: s_client closes the connection and exits.
    drop(stdin);
    let _ = child.wait();
    let _ = reader.join();
    // :status 200 is static entry 8, sent indexed (0x88).
    assert_eq!(one, Some((1, 1, Some(0x88))), "frames: {all:?}");
    assert_eq!(three, Some((1, 3, Some(0x88))), "frames: {all:?}");
    // No GOAWAY (type 7) meanwhile: the table was understood.
    assert!(!all.iter().any(|f| f.0 == 7), "frames: {all:?}");
}
