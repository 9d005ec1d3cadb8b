//! `stoa bench` over TLS and HTTP/2 against real servers: the `stoa`
//! binary (certificates made by `stoa cert`) and nginx.
//!
//! TLS: a keep-alive run over HTTPS with the server's CA (curl's
//! `--cacert`), a certificate the client does not trust refused with a
//! clear error unless `--insecure` (curl's `-k`), and the handshakes/s
//! scenario: without keep-alive every request is a new connection and a
//! full handshake (as ab, wrk and h2load do), and with `--tls-resume` the
//! later ones resume a session (RFC 8446 §2.2).
//!
//! HTTP/2 (`--http2`, as h2load): ALPN `h2` over TLS (RFC 9113 §3.2),
//! prior knowledge over TCP (§3.3), against Stoa and nginx.
//!
//! Needs the Debian package nginx for the nginx tests.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

/// `stoa bench ARGS... --json FILE`: (exit status, JSON if written, stderr).
fn bench(dir: &TempDir, args: &[&str]) -> (i32, serde_json::Value, String) {
    let json = dir.join("run.json");
    let _ = std::fs::remove_file(&json);
    let out = Command::new(stoa_bin())
        .arg("bench")
        .args(["-q", "-s", "10"])
        .args(args)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run stoa bench");
    let v = std::fs::read(&json)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(serde_json::Value::Null);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), v, err)
}

fn site() -> (TempDir, Server, PathBuf) {
    let dir = TempDir::new("bench-tls");
    dir.write("www/page.html", pattern(5000, 3));
    let (cert, key) = make_cert(&dir.join("tls"), &["localhost"]);
    let server = Server::serve_dir_tls(&dir.join("www"), &cert, &key);
    (dir, server, cert)
}

#[test]
fn a_keep_alive_https_run_checks_the_certificate_against_cacert_and_reports_its_phases() {
    let (dir, server, cert) = site();
    let url = format!("https://localhost:{}/page.html", server.addr.port());
    let ca = cert.to_string_lossy();
    let (code, v, err) = bench(&dir, &["-n", "60", "-c", "3", "-k", "--cacert", &ca, &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["responses"].as_u64(), Some(60), "{v}");
    assert_eq!(v["failed"].as_u64(), Some(0), "{v}");
    assert_eq!(v["document_length"].as_u64(), Some(5000), "{v}");
    assert_eq!(v["url"].as_str(), Some(url.as_str()));
    let tls = &v["tls"];
    // Stoa speaks TLS 1.3 and offers http/1.1 by ALPN (RFC 7301).
    assert_eq!(tls["version"].as_str(), Some("TLSv1.3"), "{tls}");
    assert_eq!(tls["alpn"].as_str(), Some("http/1.1"), "{tls}");
    // One connection per client, kept alive: three handshakes.
    assert_eq!(tls["handshakes"].as_u64(), Some(3), "{tls}");
    assert_eq!(v["connections"].as_u64(), Some(3), "{v}");
    let ph = &v["phases_ms"];
    assert_eq!(ph["connect"]["n"].as_u64(), Some(3), "{ph}");
    assert_eq!(ph["tls"]["n"].as_u64(), Some(3), "{ph}");
    assert!(ph["tls"]["p50"].as_f64().is_some_and(|x| x > 0.0), "{ph}");
    assert_eq!(ph["first_byte"]["n"].as_u64(), Some(60), "{ph}");
    assert_eq!(ph["transfer"]["n"].as_u64(), Some(60), "{ph}");
}

#[test]
fn a_certificate_the_client_does_not_trust_fails_with_a_clear_error_unless_insecure() {
    let (dir, server, _cert) = site();
    let url = format!("https://localhost:{}/page.html", server.addr.port());
    // `stoa cert` makes a self-signed certificate: no system root vouches
    // for it (curl: "SSL certificate problem: self-signed certificate").
    let (code, v, err) = bench(&dir, &["-n", "20", "-c", "2", &url]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("invalid peer certificate"), "{err}");
    assert!(err.contains("--insecure"), "{err}");
    // The first refusal stops the run: every handshake would fail alike.
    assert!(v["errors"]["tls"].as_u64().is_some_and(|n| n >= 1), "{v}");
    assert!(v["requests"].as_u64().is_some_and(|n| n < 20), "{v}");
    let (code, v, err) = bench(&dir, &["-n", "20", "-c", "2", "--insecure", &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["responses"].as_u64(), Some(20), "{v}");
    assert_eq!(v["tls"]["insecure"].as_bool(), Some(true), "{v}");
    // A certificate for another name is refused as well (RFC 6125).
    let other = format!("https://127.0.0.1:{}/page.html", server.addr.port());
    let ca = dir.join("tls/cert.pem");
    let (code, _, err) = bench(
        &dir,
        &["-n", "1", "--cacert", &ca.to_string_lossy(), &other],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("invalid peer certificate"), "{err}");
}

#[test]
fn without_keep_alive_every_request_is_a_full_handshake_and_tls_resume_resumes_them() {
    let (dir, server, cert) = site();
    let url = format!("https://localhost:{}/page.html", server.addr.port());
    let ca = cert.to_string_lossy();
    let (code, v, err) = bench(&dir, &["-n", "30", "-c", "2", "--cacert", &ca, &url]);
    assert_eq!(code, 0, "{err}");
    let tls = &v["tls"];
    assert_eq!(tls["handshakes"].as_u64(), Some(30), "{tls}");
    assert_eq!(tls["resumed"].as_u64(), Some(0), "{tls}");
    assert!(tls["handshakes_per_second"]
        .as_f64()
        .is_some_and(|x| x > 0.0));
    assert_eq!(v["phases_ms"]["tls"]["n"].as_u64(), Some(30), "{v}");
    // With resumption, each client's first handshake is full and gives a
    // ticket; later ones use it (Stoa sends tickets after a full one).
    let (code, v, err) = bench(
        &dir,
        &["-n", "30", "-c", "2", "--cacert", &ca, "--tls-resume", &url],
    );
    assert_eq!(code, 0, "{err}");
    let tls = &v["tls"];
    assert_eq!(tls["handshakes"].as_u64(), Some(30), "{tls}");
    let resumed = tls["resumed"].as_u64().unwrap_or(0);
    assert!((20..=28).contains(&resumed), "{tls}");
}

#[test]
fn http2_over_tls_negotiates_h2_by_alpn_and_keeps_one_connection_per_client() {
    let (dir, server, cert) = site();
    let url = format!("https://localhost:{}/page.html", server.addr.port());
    let ca = cert.to_string_lossy();
    // No -k: HTTP/2 connections are persistent (h2load has no other kind).
    let (code, v, err) = bench(
        &dir,
        &["-n", "60", "-c", "3", "--http2", "--cacert", &ca, &url],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["responses"].as_u64(), Some(60), "{v}");
    assert_eq!(v["failed"].as_u64(), Some(0), "{v}");
    assert_eq!(v["document_length"].as_u64(), Some(5000), "{v}");
    assert_eq!(v["settings"]["http_version"].as_str(), Some("2"), "{v}");
    assert_eq!(v["tls"]["alpn"].as_str(), Some("h2"), "{v}");
    assert_eq!(v["connections"].as_u64(), Some(3), "{v}");
    assert_eq!(v["server_software"].as_str(), Some("stoa"), "{v}");
    assert_eq!(v["status"]["200"].as_u64(), Some(60), "{v}");
}

#[test]
fn http2_with_prior_knowledge_reaches_stoa_over_plain_tcp() {
    let dir = TempDir::new("bench-h2c");
    dir.write("www/page.html", pattern(70_000, 5));
    let server = Server::serve_dir(&dir.join("www"));
    let url = format!("http://127.0.0.1:{}/page.html", server.addr.port());
    // 70,000 bytes: more than the 65,535 of a default window and several
    // DATA frames of 16 KB (RFC 9113 §6.9.2: the window we announce).
    let (code, v, err) = bench(&dir, &["-n", "40", "-c", "2", "--http2", &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["responses"].as_u64(), Some(40), "{v}");
    assert_eq!(v["failed"].as_u64(), Some(0), "{v}");
    assert_eq!(v["document_length"].as_u64(), Some(70_000), "{v}");
    assert_eq!(v["connections"].as_u64(), Some(2), "{v}");
    assert!(v["tls"].is_null(), "{v}");
}

#[test]
fn client_and_seq_placeholders_are_rendered_for_each_request_over_http2() {
    // Each request's HEADERS carry its own :path (RFC 9113 §8.3.1): a
    // connection per client (-m 1) and two clients' streams on one (-m 2).
    let dir = TempDir::new("bench-h2-tpl");
    let seen = seen_cgi(&dir);
    let server = counting_site(&dir, "", None);
    let url = format!(
        "http://127.0.0.1:{}/cgi-bin/seen.sh?u=c{{client}}s{{seq}}",
        server.addr.port()
    );
    for m in ["1", "2"] {
        let (code, v, err) = bench(
            &dir,
            &[
                "-n",
                "12",
                "-c",
                "2",
                "--http2",
                "--max-concurrent-streams",
                m,
                &url,
            ],
        );
        assert_eq!(code, 0, "-m {m}: {err}");
        assert_eq!(v["status"]["200"].as_u64(), Some(12), "{v}");
        let got = seen_templated(&seen, 12);
        let clients = got.iter().map(|r| r.0).max().unwrap_or(0);
        assert_eq!(clients, if m == "1" { 2 } else { 4 }, "{got:?}");
    }
}

/// nginx on a free port of 127.0.0.1 with this `server` block body
/// (`{PORT}` replaced); stopped (by its PID) when dropped.
struct Nginx {
    child: Child,
    port: u16,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn nginx(dir: &TempDir, server_block: &str) -> Nginx {
    require("nginx", "nginx");
    let prefix = dir.join("nginx");
    std::fs::create_dir_all(prefix.join("logs")).expect("nginx prefix");
    // The port comes from the kernel; another process may take it between
    // our close and nginx's bind: a few tries.
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let conf = format!(
            "worker_processes 1;\nerror_log {p}/logs/error.log;\npid {p}/nginx.pid;\n\
             events {{ worker_connections 256; }}\n\
             http {{\n access_log off;\n client_body_temp_path {p}/body;\n\
             proxy_temp_path {p}/proxy;\n fastcgi_temp_path {p}/fcgi;\n\
             uwsgi_temp_path {p}/uwsgi;\n scgi_temp_path {p}/scgi;\n\
             server {{\n{b}\n }}\n}}\n",
            p = prefix.display(),
            b = server_block.replace("{PORT}", &port.to_string())
        );
        let conf_path = prefix.join("nginx.conf");
        std::fs::write(&conf_path, conf).expect("write nginx.conf");
        let mut child = Command::new("nginx")
            .arg("-p")
            .arg(&prefix)
            .arg("-c")
            .arg(&conf_path)
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn nginx");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Nginx { child, port };
            }
            if let Ok(Some(_)) = child.try_wait() {
                break; // the port was taken: try another
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    panic!(
        "nginx did not start: {}",
        std::fs::read_to_string(prefix.join("logs/error.log")).unwrap_or_default()
    );
}

#[test]
fn http2_runs_against_nginx_over_tls_and_with_prior_knowledge() {
    let dir = TempDir::new("bench-nginx");
    dir.write("www/page.html", pattern(20_000, 9));
    let (cert, key) = make_cert(&dir.join("tls"), &["localhost"]);
    let www = dir.join("www");
    let tls = nginx(
        &dir,
        &format!(
            "listen 127.0.0.1:{{PORT}} ssl http2;\nssl_certificate {};\nssl_certificate_key {};\nroot {};",
            cert.display(),
            key.display(),
            www.display()
        ),
    );
    let url = format!("https://localhost:{}/page.html", tls.port);
    let ca = cert.to_string_lossy();
    let (code, v, err) = bench(
        &dir,
        &["-n", "50", "-c", "2", "--http2", "--cacert", &ca, &url],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["responses"].as_u64(), Some(50), "{v}");
    assert_eq!(v["failed"].as_u64(), Some(0), "{v}");
    assert_eq!(v["document_length"].as_u64(), Some(20_000), "{v}");
    assert_eq!(v["tls"]["alpn"].as_str(), Some("h2"), "{v}");
    assert!(
        v["server_software"]
            .as_str()
            .is_some_and(|s| s.starts_with("nginx")),
        "{v}"
    );
    drop(tls);
    // nginx's `listen ... http2` without ssl takes prior knowledge only.
    let plain = nginx(
        &dir,
        &format!("listen 127.0.0.1:{{PORT}} http2;\nroot {};", www.display()),
    );
    let url = format!("http://127.0.0.1:{}/page.html", plain.port);
    let (code, v, err) = bench(&dir, &["-n", "50", "-c", "2", "--http2", &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["responses"].as_u64(), Some(50), "{v}");
    assert_eq!(v["document_length"].as_u64(), Some(20_000), "{v}");
    // The same server refuses HTTP/1.1 (it expects the preface): without
    // --http2 nothing comes back.
    let (code, _, _) = bench(&dir, &["-n", "1", &url]);
    assert_ne!(code, 0);
}

#[test]
fn a_server_that_does_not_choose_h2_by_alpn_stops_an_http2_run_with_a_clear_error() {
    let dir = TempDir::new("bench-noh2");
    dir.write("www/page.html", "x");
    let (cert, key) = make_cert(&dir.join("tls"), &["localhost"]);
    // nginx without http2 on the listener offers only http/1.1 by ALPN.
    let srv = nginx(
        &dir,
        &format!(
            "listen 127.0.0.1:{{PORT}} ssl;\nssl_certificate {};\nssl_certificate_key {};\nroot {};",
            cert.display(),
            key.display(),
            dir.join("www").display()
        ),
    );
    let url = format!("https://localhost:{}/page.html", srv.port);
    let (code, _, err) = bench(
        &dir,
        &[
            "-n",
            "5",
            "--http2",
            "--cacert",
            &cert.to_string_lossy(),
            &url,
        ],
    );
    assert_eq!(code, 1, "{err}");
    // nginx (OpenSSL) answers no_application_protocol (RFC 7301 §3.2); a
    // server that picks http/1.1 anyway gets "did not choose h2".
    assert!(err.contains("ALPN"), "{err}");
    assert!(!err.contains("--cacert"), "{err}");
}

#[test]
fn several_streams_per_connection_share_one_handshake_and_end_independently() {
    // h2load's -m: -c connections, each with -m requests in flight
    // (RFC 9113 §5.1.2: concurrent streams on one connection).
    let (dir, server, cert) = site();
    let url = format!("https://localhost:{}/page.html", server.addr.port());
    let ca = cert.to_string_lossy();
    let (code, v, err) = bench(
        &dir,
        &[
            "-n",
            "400",
            "-c",
            "2",
            "--max-concurrent-streams",
            "10",
            "--http2",
            "--cacert",
            &ca,
            &url,
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["responses"].as_u64(), Some(400), "{v}");
    assert_eq!(v["failed"].as_u64(), Some(0), "{v}");
    assert_eq!(v["document_length"].as_u64(), Some(5000), "{v}");
    assert_eq!(v["connections"].as_u64(), Some(2), "{v}");
    assert_eq!(v["tls"]["handshakes"].as_u64(), Some(2), "{v}");
    assert_eq!(v["settings"]["concurrency"].as_u64(), Some(20), "{v}");
    assert_eq!(v["settings"]["streams"].as_u64(), Some(10), "{v}");
    assert_eq!(v["server_software"].as_str(), Some("stoa"), "{v}");
    // The connect and TLS phases belong to the request that opened each
    // connection.
    assert_eq!(v["phases_ms"]["tls"]["n"].as_u64(), Some(2), "{v}");
    assert_eq!(v["phases_ms"]["first_byte"]["n"].as_u64(), Some(400), "{v}");
}

#[test]
fn several_streams_of_large_responses_reach_nginx_with_prior_knowledge() {
    let dir = TempDir::new("bench-nginx-m");
    // Larger than a default window (65,535): our window of 2^30 - 1 per
    // stream and connection lets 8 of them come at once.
    dir.write("www/page.html", pattern(200_000, 4));
    let www = dir.join("www");
    let srv = nginx(
        &dir,
        &format!("listen 127.0.0.1:{{PORT}} http2;\nroot {};", www.display()),
    );
    let url = format!("http://127.0.0.1:{}/page.html", srv.port);
    let (code, v, err) = bench(
        &dir,
        &["-n", "80", "-c", "1", "--streams", "8", "--http2", &url],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["responses"].as_u64(), Some(80), "{v}");
    assert_eq!(v["failed"].as_u64(), Some(0), "{v}");
    assert_eq!(v["document_length"].as_u64(), Some(200_000), "{v}");
    assert_eq!(v["connections"].as_u64(), Some(1), "{v}");
}

/// A site whose CGI script counts the request body it reads: 200 when it
/// read as many bytes as the query string says, 500 otherwise; and the
/// server's HTTP/2 limits in `[http2]` (`h2`: extra lines). Over TLS
/// with `tls` = (cert, key).
fn counting_site(dir: &TempDir, h2: &str, tls: Option<(&Path, &Path)>) -> Server {
    dir.write("www/index.html", "x");
    let script = dir.write(
        "cgi-bin/count.sh",
        "#!/bin/sh\nn=$(wc -c | tr -d ' ')\nif [ \"$n\" = \"$QUERY_STRING\" ]; then s=200; else s=500; fi\n\
         printf 'Status: %s\\r\\nContent-Type: text/plain\\r\\n\\r\\n%s' \"$s\" \"$n\"\n",
    );
    let mut perm = std::fs::metadata(&script).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&script, perm).expect("chmod");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "\n[limits]\nmax_body_bytes = \"16 MiB\"\n\n[http2]\n{h2}\n\n[[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = {{ dir = \"cgi-bin\", timeout = \"30s\" }}\n"
        ),
    );
    let mut args: Vec<std::ffi::OsString> =
        ["serve", "--config"].iter().map(|s| s.into()).collect();
    args.push(cfg.into());
    args.extend(
        [
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--access-log",
            "off",
        ]
        .iter()
        .map(|s| s.into()),
    );
    if let Some((cert, key)) = tls {
        args.extend([
            "--tls-cert".into(),
            cert.into(),
            "--tls-key".into(),
            key.into(),
        ]);
    }
    Server::spawn(args)
}

#[test]
fn a_server_allowing_fewer_streams_than_asked_gets_no_more_open_and_the_report_says_so() {
    // RFC 9113 §5.1.2: no more open streams than the server's
    // SETTINGS_MAX_CONCURRENT_STREAMS; the rest wait for streams to end
    // (no REFUSED_STREAM, no protocol error). Stoa's `[http2]
    // max_concurrent_streams`, then nginx's `http2_max_concurrent_streams`.
    let dir = TempDir::new("bench-h2-limit");
    let server = counting_site(&dir, "max_concurrent_streams = 10", None);
    let url = format!("http://127.0.0.1:{}/index.html", server.addr.port());
    let html = dir.join("run.html");
    let (code, v, err) = bench(
        &dir,
        &[
            "-n",
            "2000",
            "-c",
            "1",
            "--streams",
            "100",
            "--http2",
            "--html",
            &html.to_string_lossy(),
            &url,
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["responses"].as_u64(), Some(2000), "{v}");
    assert_eq!(v["failed"].as_u64(), Some(0), "{v}");
    assert_eq!(v["connections"].as_u64(), Some(1), "{v}");
    assert_eq!(v["streams_limited_to"].as_u64(), Some(10), "{v}");
    let page = std::fs::read_to_string(&html).expect("html report");
    assert!(
        page.contains("allowed 10 concurrent streams"),
        "no note in the HTML"
    );
    drop(server);
    let srv = nginx(
        &dir,
        &format!(
            "listen 127.0.0.1:{{PORT}} http2;\nhttp2_max_concurrent_streams 10;\nroot {};",
            dir.join("www").display()
        ),
    );
    let url = format!("http://127.0.0.1:{}/index.html", srv.port);
    let (code, v, err) = bench(
        &dir,
        &["-n", "2000", "-c", "2", "--streams", "100", "--http2", &url],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["responses"].as_u64(), Some(2000), "{v}");
    assert_eq!(v["failed"].as_u64(), Some(0), "{v}");
    // nginx ends a connection after 1000 requests (`keepalive_requests`)
    // with GOAWAY: the requests still waiting for a stream were never
    // sent and go on a new connection (RFC 9113 §6.8).
    assert!(v["connections"].as_u64() >= Some(2), "{v}");
    assert_eq!(v["streams_limited_to"].as_u64(), Some(10), "{v}");
    // Within the limit: no note.
    let (code, v, err) = bench(
        &dir,
        &["-n", "200", "-c", "1", "--streams", "10", "--http2", &url],
    );
    assert_eq!(code, 0, "{err}");
    assert!(v["streams_limited_to"].is_null(), "{v}");
}

#[test]
fn request_bodies_of_1_and_5_mib_reach_a_cgi_whole_over_h2c_and_h2() {
    // RFC 9113 §6.9: the body goes as the server's windows open
    // (WINDOW_UPDATE); Stoa announces a 64 KiB stream window here
    // (`[http2] initial_window_size`), so a 5 MiB body needs 80 of them.
    let dir = TempDir::new("bench-h2-body");
    let (cert, key) = make_cert(&dir.join("tls"), &["localhost"]);
    let h2 = "initial_window_size = \"64 KiB\"\ninitial_connection_window_size = \"64 KiB\"";
    for len in [1usize << 20, 5 << 20] {
        let body = dir.write(&format!("body-{len}"), pattern(len, 11));
        let body = body.to_string_lossy();
        for tls in [false, true] {
            let server = counting_site(&dir, h2, tls.then_some((&cert, &key)));
            let url = if tls {
                format!(
                    "https://localhost:{}/cgi-bin/count.sh?{len}",
                    server.addr.port()
                )
            } else {
                format!(
                    "http://127.0.0.1:{}/cgi-bin/count.sh?{len}",
                    server.addr.port()
                )
            };
            let ca = cert.to_string_lossy();
            let mut args = vec!["-n", "4", "-c", "2", "--http2", "-p", &body];
            if tls {
                args.extend(["--cacert", &ca]);
            }
            args.push(&url);
            let (code, v, err) = bench(&dir, &args);
            assert_eq!(code, 0, "{len} tls={tls}: {err}");
            assert_eq!(v["status"]["200"].as_u64(), Some(4), "{len} tls={tls}: {v}");
            assert_eq!(v["failed"].as_u64(), Some(0), "{v}");
            assert_eq!(
                v["bytes"]["body_sent"].as_u64(),
                Some(4 * len as u64),
                "{v}"
            );
        }
    }
}

#[test]
fn a_5_mib_body_reaches_nginx_over_several_streams() {
    // nginx's windows (RFC 9113 §6.9.2: its initial stream window is
    // 64 KiB by default, `http2_body_preread_size`) and its early
    // response: `return` answers before the body is read, and the rest of
    // the stream is reset (§8.1).
    let dir = TempDir::new("bench-nginx-body");
    dir.write("www/index.html", "x");
    let body = dir.write("body", pattern(5 << 20, 13));
    let srv = nginx(
        &dir,
        &format!(
            "listen 127.0.0.1:{{PORT}} http2;\nclient_max_body_size 16m;\nroot {};\n\
             location /up {{ return 200 \"ok\"; }}",
            dir.join("www").display()
        ),
    );
    let url = format!("http://127.0.0.1:{}/up", srv.port);
    let (code, v, err) = bench(
        &dir,
        &[
            "-n",
            "6",
            "-c",
            "1",
            "--streams",
            "3",
            "--http2",
            "-p",
            &body.to_string_lossy(),
            &url,
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["status"]["200"].as_u64(), Some(6), "{v}");
    assert_eq!(v["failed"].as_u64(), Some(0), "{v}");
}

#[test]
fn the_next_requests_on_a_shared_connection_go_out_in_the_same_turn_not_after_a_poll_timeout() {
    // One connection, 4 streams, closed loop: when all 4 responses are in,
    // the 4 next requests must be written before the engine waits for
    // events again. Written only after the poll's timeout (up to 100 ms:
    // nothing else would wake it), 200 rounds took 10 s; on time, well
    // under a second even in a debug build on a loaded box.
    let dir = TempDir::new("bench-h2-turn");
    dir.write("www/page.html", pattern(1000, 2));
    let server = Server::serve_dir(&dir.join("www"));
    let url = format!("http://127.0.0.1:{}/page.html", server.addr.port());
    let (code, v, err) = bench(
        &dir,
        &["-n", "800", "-c", "1", "--streams", "4", "--http2", &url],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["responses"].as_u64(), Some(800), "{v}");
    let secs = v["duration_s"].as_f64().expect("duration");
    assert!(secs < 4.0, "200 rounds took {secs} s: {v}");
}
