//! `stoa bench --http3` against real servers: the `stoa` binary with `h3`
//! in a TLS listener's `protocols` (certificates made by `stoa cert`), and
//! Caddy 2.6 (Debian `caddy`, which serves HTTP/3 on its HTTPS sites).
//!
//! HTTP/3 (RFC 9114) over QUIC (RFC 9000, TLS by RFC 9001): ALPN `h3`
//! (RFC 9114 §3.1), one QUIC connection per `--streams` clients, request
//! bodies in DATA frames (§4.1), a certificate the client does not trust
//! refused with a clear error unless `--insecure`, and `--threshold` on an
//! HTTP/3 run as on any other.
//!
//! Needs the Debian package caddy for the Caddy test.

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

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

/// `stoa bench -q ARGS... --json FILE`: (exit status, JSON if written,
/// stdout, stderr).
fn bench(dir: &TempDir, args: &[&str]) -> (i32, serde_json::Value, String, String) {
    let json = dir.join("run.json");
    let _ = std::fs::remove_file(&json);
    let out = Command::new(stoa_bin())
        .arg("bench")
        .args(["-q", "-s", "20"])
        .args(args)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run stoa bench");
    let v = std::fs::read(&json)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        v,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A Stoa with one TLS listener speaking h3 (and h2, http/1.1), a static
/// tree with a 1358-byte page and a CGI that echoes a POST body.
fn site() -> (TempDir, Server, PathBuf) {
    let dir = TempDir::new("bench-h3");
    dir.write("www/page.html", pattern(1358, 7));
    dir.write("www/big.bin", pattern(3 << 20, 8));
    let echo = dir.write(
        "cgi-bin/echo.sh",
        "#!/bin/sh\nprintf 'Content-Type: application/octet-stream\\r\\n\\r\\n'\ncat\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&echo, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let (cert, key) = make_cert(&dir.join("tls"), &["localhost"]);
    let cfg = dir.write(
        "stoa.toml",
        format!(
            "workers = 1\nuser = \"root\"\n\n\
             [[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"{}\"\nkey = \"{}\"\n\
             protocols = [\"h3\", \"h2\", \"http/1.1\"]\n\n\
             [[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = {{ dir = \"cgi-bin\" }}\n",
            cert.display(),
            key.display()
        ),
    );
    let server = Server::with_config(&cfg);
    (dir, server, cert)
}

#[test]
fn rfc9114_a_get_over_http3_counts_the_files_bytes_and_reports_tls_and_phases() {
    let (dir, server, cert) = site();
    let url = format!("https://localhost:{}/page.html", server.addr.port());
    let ca = cert.to_string_lossy();
    let (code, v, _, err) = bench(
        &dir,
        &["--http3", "-n", "40", "-c", "2", "--cacert", &ca, &url],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["responses"].as_u64(), Some(40), "{v}");
    assert_eq!(v["failed"].as_u64(), Some(0), "{v}");
    assert_eq!(v["status"]["200"].as_u64(), Some(40), "{v}");
    assert_eq!(v["document_length"].as_u64(), Some(1358), "{v}");
    assert_eq!(v["bytes"]["body"].as_u64(), Some(40 * 1358), "{v}");
    assert_eq!(v["server_software"].as_str(), Some("stoa"), "{v}");
    assert_eq!(v["settings"]["http_version"].as_str(), Some("3"), "{v}");
    // QUIC is TLS 1.3 (RFC 9001 §4.2) and HTTP/3 is ALPN h3 (RFC 9114 §3.1).
    let tls = &v["tls"];
    assert_eq!(tls["version"].as_str(), Some("TLSv1.3"), "{tls}");
    assert_eq!(tls["alpn"].as_str(), Some("h3"), "{tls}");
    // The suite the server chose over QUIC is the one it chooses over TCP
    // (the same rustls configuration).
    let (code, tcp, _, err) = bench(&dir, &["-n", "1", "--cacert", &ca, &url]);
    assert_eq!(code, 0, "{err}");
    let suite = tcp["tls"]["cipher"].as_str().expect("a suite over TCP");
    assert_eq!(tls["cipher"].as_str(), Some(suite), "{tls}");
    // Two clients, one connection each (--streams 1), kept for the run.
    assert_eq!(tls["handshakes"].as_u64(), Some(2), "{tls}");
    assert_eq!(v["connections"].as_u64(), Some(2), "{v}");
    // The two requests that opened a connection have its handshake as
    // their tls phase; every request has a first byte.
    let p = &v["phases_ms"];
    assert_eq!(p["tls"]["n"].as_u64(), Some(2), "{p}");
    assert!(p["tls"]["mean"].as_f64().is_some_and(|x| x > 0.0), "{p}");
    assert_eq!(p["first_byte"]["n"].as_u64(), Some(40), "{p}");
}

#[test]
fn client_and_seq_placeholders_are_rendered_for_each_request_over_http3() {
    // Each request's HEADERS carry its own :path (RFC 9114 §4.3.1), with
    // one stream per connection and with two clients on one connection.
    let (dir, server, cert) = site();
    let seen = seen_cgi(&dir);
    let url = format!(
        "https://localhost:{}/cgi-bin/seen.sh?u=c{{client}}s{{seq}}",
        server.addr.port()
    );
    let ca = cert.to_string_lossy();
    for streams in ["1", "2"] {
        let (code, v, _, err) = bench(
            &dir,
            &[
                "--http3",
                "-n",
                "12",
                "-c",
                "2",
                "--streams",
                streams,
                "--cacert",
                &ca,
                &url,
            ],
        );
        assert_eq!(code, 0, "--streams {streams}: {err}");
        assert_eq!(v["status"]["200"].as_u64(), Some(12), "{v}");
        let got = seen_templated(&seen, 12);
        // Every client of the run sent some of them (2 or 4 clients).
        let clients = got.iter().map(|r| r.0).max().unwrap_or(0);
        assert_eq!(clients, if streams == "1" { 2 } else { 4 }, "{got:?}");
    }
}

#[test]
fn tls_resume_over_http3_resumes_the_sessions_of_later_connections() {
    // RFC 9001 §4.5: a QUIC client resumes with a TLS 1.3 ticket (RFC 8446
    // §2.2); Stoa sends tickets after each handshake. Clients that make one
    // request and leave open a connection each.
    let (dir, server, cert) = site();
    let url = format!("https://localhost:{}/page.html", server.addr.port());
    let scenario = dir.write(
        "resume.toml",
        format!(
            "[run]\nhttp = \"3\"\ncacert = \"{}\"\n\n\
             [clients]\nstart = 1\nadd = 1\nevery = \"300ms\"\nmax = 8\nrequests = 1\n",
            cert.display()
        ),
    );
    let sc = scenario.to_string_lossy();
    let (code, v, _, err) = bench(&dir, &["--scenario", &sc, &url]);
    assert_eq!(code, 0, "{err}");
    let tls = &v["tls"];
    assert_eq!(tls["handshakes"].as_u64(), Some(8), "{tls}");
    assert_eq!(
        tls["resumed"].as_u64(),
        Some(0),
        "without --tls-resume: {tls}"
    );
    let (code, v, _, err) = bench(&dir, &["--scenario", &sc, "--tls-resume", &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["status"]["200"].as_u64(), Some(8), "{v}");
    let tls = &v["tls"];
    assert_eq!(tls["handshakes"].as_u64(), Some(8), "{tls}");
    // The first is a full handshake (no ticket yet); a later client starts
    // 300 ms after the one before and finds its tickets.
    let resumed = tls["resumed"].as_u64().unwrap_or(0);
    assert!((1..=7).contains(&resumed), "{tls}");
}

#[test]
fn ten_streams_per_connection_share_one_handshake_and_a_large_file_arrives_whole() {
    let (dir, server, cert) = site();
    let port = server.addr.port();
    let ca = cert.to_string_lossy();
    let url = format!("https://localhost:{port}/page.html");
    let (code, v, _, err) = bench(
        &dir,
        &[
            "--http3",
            "-n",
            "300",
            "-c",
            "2",
            "--streams",
            "10",
            "--cacert",
            &ca,
            &url,
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["responses"].as_u64(), Some(300), "{v}");
    assert_eq!(v["failed"].as_u64(), Some(0), "{v}");
    assert_eq!(v["settings"]["concurrency"].as_u64(), Some(20), "{v}");
    assert_eq!(v["settings"]["streams"].as_u64(), Some(10), "{v}");
    // -c 2 --streams 10: two QUIC connections, 20 clients.
    assert_eq!(v["connections"].as_u64(), Some(2), "{v}");
    assert_eq!(v["tls"]["handshakes"].as_u64(), Some(2), "{v}");
    // A body larger than the client's stream window at first and many
    // packets long: QUIC flow control (RFC 9000 §4) moves it all.
    let url = format!("https://localhost:{port}/big.bin");
    let (code, v, _, err) = bench(&dir, &["--http3", "-n", "3", "--cacert", &ca, &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["bytes"]["body"].as_u64(), Some(3 * (3 << 20)), "{v}");
}

#[test]
fn rfc9114_4_1_a_post_body_goes_in_data_frames_and_comes_back_whole() {
    let (dir, server, cert) = site();
    let body = dir.write("post.bin", pattern(100_000, 9));
    let url = format!("https://localhost:{}/cgi-bin/echo.sh", server.addr.port());
    let ca = cert.to_string_lossy();
    let (code, v, _, err) = bench(
        &dir,
        &[
            "--http3",
            "-n",
            "6",
            "-c",
            "3",
            "-p",
            &body.to_string_lossy(),
            "-T",
            "application/octet-stream",
            "--cacert",
            &ca,
            &url,
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["status"]["200"].as_u64(), Some(6), "{v}");
    assert_eq!(v["bytes"]["body_sent"].as_u64(), Some(600_000), "{v}");
    // The CGI echoes what it read: every body arrived whole.
    assert_eq!(v["bytes"]["body"].as_u64(), Some(600_000), "{v}");
    // A body larger than the server's stream window, to a static file: the
    // server answers (405) before it has read the body, and the client
    // takes the response and abandons the rest of its request (RFC 9114
    // §4.1), without waiting for flow control that will not come.
    let big = dir.write("big-post.bin", pattern(4 << 20, 10));
    let url = format!("https://localhost:{}/page.html", server.addr.port());
    let (code, v, _, err) = bench(
        &dir,
        &[
            "--http3",
            "-n",
            "4",
            "-c",
            "2",
            "-p",
            &big.to_string_lossy(),
            "--cacert",
            &ca,
            &url,
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["status"]["405"].as_u64(), Some(4), "{v}");
    assert_eq!(v["failed"].as_u64(), Some(0), "{v}");
}

#[test]
fn a_certificate_the_client_does_not_trust_stops_an_http3_run_with_a_clear_error_unless_insecure() {
    let (dir, server, _) = site();
    let url = format!("https://localhost:{}/page.html", server.addr.port());
    // The system's roots do not hold `stoa cert`'s CA (RFC 9001 §4.4: the
    // TLS handshake inside QUIC checks it as over TCP).
    let (code, v, _, err) = bench(&dir, &["--http3", "-n", "5", &url]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("invalid peer certificate"), "{err}");
    assert!(
        err.contains("--cacert") && err.contains("--insecure"),
        "{err}"
    );
    assert!(v["errors"]["tls"].as_u64().is_some_and(|n| n >= 1), "{v}");
    let (code, v, _, err) = bench(&dir, &["--http3", "-n", "5", "--insecure", &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["responses"].as_u64(), Some(5), "{v}");
    assert_eq!(v["tls"]["insecure"].as_bool(), Some(true), "{v}");
}

#[test]
fn thresholds_pass_and_fail_on_an_http3_run() {
    let (dir, server, cert) = site();
    let url = format!("https://localhost:{}/page.html", server.addr.port());
    let ca = cert.to_string_lossy();
    let (code, v, out, err) = bench(
        &dir,
        &[
            "--http3",
            "-n",
            "30",
            "--cacert",
            &ca,
            "--threshold",
            "errors<1%",
            "--threshold",
            "p99<20s",
            &url,
        ],
    );
    assert_eq!(code, 0, "{err}{out}");
    assert_eq!(v["thresholds"][0]["pass"].as_bool(), Some(true), "{v}");
    // No response of a real network comes back in a microsecond: exit 3.
    let (code, v, _, err) = bench(
        &dir,
        &[
            "--http3",
            "-n",
            "30",
            "--cacert",
            &ca,
            "--threshold",
            "p50<1us",
            &url,
        ],
    );
    assert_eq!(code, 3, "{err}");
    assert_eq!(v["thresholds"][0]["pass"].as_bool(), Some(false), "{v}");
}

/// Caddy on a free port, serving `root` over HTTPS with this certificate;
/// killed (by PID) on drop.
struct Caddy {
    child: Child,
    port: u16,
}

impl Drop for Caddy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn caddy(dir: &TempDir, root: &Path, cert: &Path, key: &Path) -> Caddy {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let file = dir.write(
        "Caddyfile",
        format!(
            "{{\n\tadmin off\n\tauto_https off\n\tservers {{\n\t\tprotocols h1 h2 h3\n\t}}\n}}\n\
             https://localhost:{port} {{\n\tbind 127.0.0.1\n\ttls {} {}\n\troot * {}\n\tfile_server\n}}\n",
            cert.display(),
            key.display(),
            root.display()
        ),
    );
    let mut child = Command::new("caddy")
        .args(["run", "--adapter", "caddyfile", "--config"])
        .arg(&file)
        .env("HOME", dir.path())
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_DATA_HOME", dir.join("data"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run caddy (Debian package caddy)");
    // Caddy logs "enabling HTTP/3 listener" before it serves h3.
    let stderr = child.stderr.take().expect("caddy's stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("HTTP/3 listener") || line.contains("serving initial configuration") {
                let _ = tx.send(line);
            }
        }
    });
    let mut c = Caddy { child, port };
    let mut h3 = false;
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(20)) {
        if line.contains("HTTP/3 listener") {
            h3 = true;
        }
        if h3 && line.contains("serving initial configuration") {
            return c;
        }
        if !h3 && line.contains("serving initial configuration") {
            // The h3 line may follow.
            continue;
        }
    }
    let _ = c.child.kill();
    panic!("caddy did not start serving HTTP/3 on port {}", c.port);
}

#[test]
fn an_http3_run_against_caddy_negotiates_h3_and_reads_its_responses() {
    let dir = TempDir::new("bench-h3-caddy");
    dir.write("www/page.html", pattern(1358, 7));
    let (cert, key) = make_cert(&dir.join("tls"), &["localhost"]);
    let c = caddy(&dir, &dir.join("www"), &cert, &key);
    let url = format!("https://localhost:{}/page.html", c.port);
    let ca = cert.to_string_lossy();
    let (code, v, _, err) = bench(
        &dir,
        &[
            "--http3",
            "-n",
            "100",
            "-c",
            "2",
            "--streams",
            "5",
            "--cacert",
            &ca,
            &url,
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["status"]["200"].as_u64(), Some(100), "{v}");
    assert_eq!(v["document_length"].as_u64(), Some(1358), "{v}");
    assert_eq!(v["server_software"].as_str(), Some("Caddy"), "{v}");
    assert_eq!(v["tls"]["alpn"].as_str(), Some("h3"), "{v}");
    assert!(
        v["tls"]["cipher"]
            .as_str()
            .is_some_and(|c| c.starts_with("TLS13_")),
        "{v}"
    );
    assert_eq!(v["connections"].as_u64(), Some(2), "{v}");
}
