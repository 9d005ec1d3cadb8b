//! TLS state and small TLS behaviours, end to end against the real
//! `stoa` binary, curl and openssl: what `stoa cert` writes, `curl
//! --http1.0` over TLS, session tickets sealed with keys from files that
//! several instances share (nginx `ssl_session_ticket_key`), and OCSP
//! stapling with `openssl ocsp` as the responder.
//!
//! Needs the Debian packages curl and openssl.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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

/// What a command printed, stdout then stderr.
fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd.stdin(Stdio::null()).output().expect("run a command");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// `openssl x509 -noout ARGS -in cert`.
fn x509(cert: &Path, args: &[&str]) -> (bool, String) {
    require("openssl", "openssl");
    run(Command::new("openssl")
        .args(["x509", "-noout", "-in"])
        .arg(cert)
        .args(args))
}

/// Seconds since the epoch of an openssl date ("Nov 27 03:12:00 2026 GMT").
fn epoch(date: &str) -> i64 {
    let (ok, out) = run(Command::new("date").args(["-u", "-d", date, "+%s"]));
    assert!(ok, "date -d {date}: {out}");
    out.trim().parse().expect("seconds")
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[test]
fn stoa_cert_names_the_first_name_in_cn_and_lives_397_days_from_an_hour_ago_cab_forum_398_days() {
    let dir = TempDir::new("tlsstate-cert");
    let (cert, _) = make_cert(&dir.join("c"), &["dev.example.test", "127.0.0.1"]);
    let (ok, subject) = x509(&cert, &["-subject"]);
    assert!(ok, "{subject}");
    assert!(
        subject.contains("CN=dev.example.test") || subject.contains("CN = dev.example.test"),
        "{subject}"
    );
    let (_, start) = x509(&cert, &["-startdate"]);
    let (_, end) = x509(&cert, &["-enddate"]);
    let start = epoch(start.trim().trim_start_matches("notBefore="));
    let end = epoch(end.trim().trim_start_matches("notAfter="));
    let t = now();
    // Starts about an hour before now (a client clock a little behind).
    assert!(
        start <= t - 3000 && start >= t - 3 * 3600,
        "start {start}, now {t}"
    );
    // At most 398 days: Apple's and Chrome's limit for TLS server certificates.
    assert_eq!(end - start, 397 * 86400);
    let (_, ext) = x509(&cert, &["-ext", "subjectAltName,extendedKeyUsage"]);
    assert!(ext.contains("DNS:dev.example.test"), "{ext}");
    assert!(ext.contains("IP Address:127.0.0.1"), "{ext}");
    assert!(ext.contains("TLS Web Server Authentication"), "{ext}");
}

#[test]
fn curl_http1_0_over_tls_offering_only_http_1_0_by_alpn_gets_an_http_1_answer_as_from_nginx() {
    require("curl", "curl");
    let dir = TempDir::new("tlsstate-h10");
    dir.write("www/index.html", "one point oh\n");
    let (cert, key) = make_cert(&dir.join("certs"), &["localhost"]);
    let server = Server::serve_dir_tls(&dir.join("www"), &cert, &key);
    let port = server.addr.port();
    let (ok, out) = run(Command::new("curl")
        .args(["-sS", "--http1.0", "--max-time", "10", "--resolve"])
        .arg(format!("localhost:{port}:127.0.0.1"))
        .arg("--cacert")
        .arg(&cert)
        .args(["-w", "\n%{http_code} %{http_version}"])
        .arg(format!("https://localhost:{port}/index.html")));
    assert!(ok, "{out}");
    assert!(out.starts_with("one point oh\n"), "{out}");
    assert!(
        out.trim_end().ends_with("200 1.1") || out.trim_end().ends_with("200 1.0"),
        "{out}"
    );
    // RFC 7301 §3.2: the server selected the client's only protocol.
    let (_, s) = run(Command::new("timeout")
        .args(["10", "openssl", "s_client", "-alpn", "http/1.0", "-connect"])
        .arg(format!("127.0.0.1:{port}")));
    assert!(s.contains("ALPN protocol: http/1.0"), "{s}");
    // A protocol Stoa does not speak is still refused, as by nginx.
    let (_, s) = run(Command::new("timeout")
        .args(["10", "openssl", "s_client", "-alpn", "spdy/3", "-connect"])
        .arg(format!("127.0.0.1:{port}")));
    assert!(s.contains("no application protocol"), "{s}");
}
