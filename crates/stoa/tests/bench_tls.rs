//! `stoa bench` over TLS against the real `stoa` binary (certificates made
//! by `stoa cert`): a keep-alive run over HTTPS with the server's CA
//! (curl's `--cacert`), a certificate the client does not trust refused
//! with a clear error unless `--insecure` (curl's `-k`), and the
//! handshakes/s scenario: without keep-alive every request is a new
//! connection and a full handshake (as ab, wrk and h2load do), and with
//! `--tls-resume` the later ones resume a session (RFC 8446 §2.2).

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

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
