//! TLS to upstreams: a pool's `tls` key and `https://` addresses, against
//! tests/proxy-peers/backend.py serving HTTPS with Python's `ssl`
//! (OpenSSL) and certificates from a test CA made here (rcgen). What nginx
//! does with `proxy_pass https://` and `proxy_ssl_verify on`,
//! `proxy_ssl_trusted_certificate`, `proxy_ssl_name`,
//! `proxy_ssl_certificate`/`_key` and `proxy_ssl_session_reuse`, and Caddy
//! with `reverse_proxy https://` and its `transport http { tls_* }`.

mod common;
mod proxy_peer;

use common::*;
use proxy_peer::Backend;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// A test CA: its certificate (written to `DIR/NAME.pem`) and key.
struct Ca {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
    path: PathBuf,
}

fn ca(dir: &TempDir, name: &str) -> Ca {
    let key = rcgen::KeyPair::generate().expect("CA key");
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(rcgen::DnType::CommonName, format!("{name} test CA"));
    p.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let cert = p.self_signed(&key).expect("CA certificate");
    let path = dir.write(&format!("{name}.pem"), cert.pem());
    Ca { cert, key, path }
}

/// A certificate for `names` signed by `ca`, with CN `cn` (server or
/// client use): `DIR/FILE.pem` and `DIR/FILE.key`.
fn issue(
    dir: &TempDir,
    ca: &Ca,
    file: &str,
    cn: &str,
    names: &[&str],
    client: bool,
) -> (PathBuf, PathBuf) {
    let key = rcgen::KeyPair::generate().expect("key");
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut p = rcgen::CertificateParams::new(names).expect("params");
    p.distinguished_name.push(rcgen::DnType::CommonName, cn);
    p.extended_key_usages = vec![if client {
        rcgen::ExtendedKeyUsagePurpose::ClientAuth
    } else {
        rcgen::ExtendedKeyUsagePurpose::ServerAuth
    }];
    let cert = p.signed_by(&key, &ca.cert, &ca.key).expect("sign");
    (
        dir.write(&format!("{file}.pem"), cert.pem()),
        dir.write(&format!("{file}.key"), key.serialize_pem()),
    )
}

/// An HTTPS backend with a certificate for `app.test`, `localhost` and
/// 127.0.0.1 from `ca`; `more` are extra backend.py options.
fn https_backend(dir: &TempDir, ca: &Ca, more: &[&str]) -> Backend {
    let (cert, key) = issue(
        dir,
        ca,
        "backend",
        "app.test",
        &["app.test", "localhost", "127.0.0.1"],
        false,
    );
    let mut args = vec![
        "--tls-cert".to_owned(),
        cert.display().to_string(),
        "--tls-key".to_owned(),
        key.display().to_string(),
    ];
    args.extend(more.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Backend::start(&args)
}

/// Stoa with one pool `app` (`pool` is its body after `name`) behind the
/// route `/`, and `workers` workers.
fn stoa(dir: &TempDir, pool: &str, workers: usize) -> Server {
    dir.mkdir("www");
    let cfg = dir.write(
        "stoa.toml",
        format!(
            "listen = [\"127.0.0.1:0\"]\nworkers = {workers}\nuser = \"root\"\n\n[log]\naccess = \"off\"\n\n\
             [[pool]]\nname = \"app\"\nprotocol = \"http\"\n{pool}\n\n\
             [[site]]\nroot = \"www\"\n[[site.route]]\nprefix = \"/\"\nproxy = {{ pool = \"app\" }}\n"
        ),
    );
    Server::with_config(&cfg)
}

/// The backend's echo of one GET on a new client connection.
fn echo(s: &Server, path: &str) -> (u16, serde_json::Value) {
    send(
        s,
        path,
        "GET {path} HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n",
    )
}

/// [`echo`] of `req` (`{path}` in it replaced).
fn send(s: &Server, path: &str, req: &str) -> (u16, serde_json::Value) {
    let mut c = s.connect();
    c.send(req.replace("{path}", path).as_bytes());
    let r = c
        .try_read_final()
        .unwrap_or_else(|e| panic!("GET {path}: {e}\n{}", s.stderr()));
    let v = serde_json::from_slice(&r.body).unwrap_or(serde_json::Value::Null);
    (r.status, v)
}

/// nginx `proxy_ssl_verify on` with `proxy_ssl_trusted_certificate` and
/// `proxy_ssl_name`; Caddy `reverse_proxy https://` with `tls_trust_pool`:
/// the backend's certificate is verified against the pool's CA for the
/// configured name, and the request goes through over TLS 1.3. An address
/// written `https://localhost:PORT` verifies the name `localhost`.
#[test]
fn an_https_backend_signed_by_the_pools_ca_answers_through_a_verified_tls_1_3_connection() {
    let dir = TempDir::new("ptls-ok");
    let ca = ca(&dir, "good");
    let b = https_backend(&dir, &ca, &[]);
    let s = stoa(
        &dir,
        &format!(
            "address = [\"{}\"]\ntls = {{ ca = \"good.pem\", server_name = \"app.test\" }}",
            b.addr
        ),
        1,
    );
    let (status, v) = echo(&s, "/app/hello");
    assert_eq!(status, 200, "{}", s.stderr());
    assert_eq!(v["tls_version"], "TLSv1.3", "{v}");
    assert_eq!(v["target"], "/app/hello", "{v}");
    drop(s);

    let dir2 = TempDir::new("ptls-ok-url");
    std::fs::copy(&ca.path, dir2.join("good.pem")).expect("copy CA");
    let s = stoa(
        &dir2,
        &format!(
            "address = [\"https://localhost:{}\"]\ntls = {{ ca = \"good.pem\" }}",
            b.addr.port()
        ),
        1,
    );
    let (status, v) = echo(&s, "/app/url");
    assert_eq!(status, 200, "{}", s.stderr());
    assert_eq!(v["tls_version"], "TLSv1.3", "{v}");
}

/// nginx with `proxy_ssl_verify on` answers 502 and logs "upstream SSL
/// certificate verify error"; Caddy 502. A certificate from a CA the pool
/// does not trust is refused, and the log line names the pool, the server
/// and the certificate error.
#[test]
fn a_backend_signed_by_another_ca_is_refused_with_502_and_a_log_line_saying_unknown_issuer() {
    let dir = TempDir::new("ptls-ca");
    let other = ca(&dir, "other");
    let _trusted = ca(&dir, "trusted");
    let b = https_backend(&dir, &other, &[]);
    let s = stoa(
        &dir,
        &format!(
            "address = [\"{}\"]\ntls = {{ ca = \"trusted.pem\", server_name = \"app.test\" }}",
            b.addr
        ),
        1,
    );
    let (status, _) = echo(&s, "/app/x");
    assert_eq!(status, 502, "{}", s.stderr());
    assert!(
        s.wait_stderr(
            0,
            "certificate verify failed: UnknownIssuer",
            Duration::from_secs(5)
        ),
        "{}",
        s.stderr()
    );
    let err = s.stderr();
    let line = err
        .lines()
        .find(|l| l.contains("UnknownIssuer"))
        .unwrap_or_default();
    assert!(line.contains("pool app"), "{line}");
    assert!(line.contains(&b.addr.to_string()), "{line}");
}

/// nginx verifies the certificate against `proxy_ssl_name`; a certificate
/// for other names is refused (502), as Caddy's `tls_server_name` does.
#[test]
fn a_backend_certificate_for_another_name_is_refused_with_502_and_not_valid_for_name() {
    let dir = TempDir::new("ptls-name");
    let ca = ca(&dir, "good");
    let b = https_backend(&dir, &ca, &[]);
    let s = stoa(
        &dir,
        &format!(
            "address = [\"{}\"]\ntls = {{ ca = \"good.pem\", server_name = \"other.test\" }}",
            b.addr
        ),
        1,
    );
    let (status, _) = echo(&s, "/app/x");
    assert_eq!(status, 502, "{}", s.stderr());
    assert!(
        s.wait_stderr(
            0,
            "certificate verify failed: NotValidForName",
            Duration::from_secs(5)
        ),
        "{}",
        s.stderr()
    );
    let err = s.stderr();
    let line = err
        .lines()
        .find(|l| l.contains("NotValidForName"))
        .unwrap_or_default();
    assert!(
        line.contains("pool app") && line.contains("other.test"),
        "{line}"
    );
}

/// `verify = false` is nginx's default `proxy_ssl_verify off` and Caddy's
/// `tls_insecure_skip_verify`: any certificate is taken, and Stoa says so
/// at start.
#[test]
fn verify_false_accepts_a_certificate_from_any_ca_and_warns_at_start() {
    let dir = TempDir::new("ptls-noverify");
    let other = ca(&dir, "other");
    let b = https_backend(&dir, &other, &[]);
    let s = stoa(
        &dir,
        &format!("address = [\"{}\"]\ntls = {{ verify = false }}", b.addr),
        1,
    );
    assert!(
        s.wait_stderr(0, "verify = false", Duration::from_secs(5)),
        "{}",
        s.stderr()
    );
    let (status, v) = echo(&s, "/app/x");
    assert_eq!(status, 200, "{}", s.stderr());
    assert_eq!(v["tls_version"], "TLSv1.3", "{v}");
}

/// nginx `proxy_ssl_certificate`/`proxy_ssl_certificate_key`, Caddy
/// `tls_client_auth`: a backend that requires a client certificate gets
/// the pool's; a pool without one is refused (502).
#[test]
fn a_backend_that_requires_a_client_certificate_gets_the_pools_and_refuses_a_pool_without_one() {
    let dir = TempDir::new("ptls-client");
    let ca = ca(&dir, "good");
    let (cc, ck) = issue(&dir, &ca, "client", "stoa-client", &["stoa.test"], true);
    let ca_path = ca.path.display().to_string();
    let b = https_backend(&dir, &ca, &["--tls-client-ca", &ca_path]);
    let s = stoa(
        &dir,
        &format!(
            "address = [\"{}\"]\ntls = {{ ca = \"good.pem\", server_name = \"app.test\", \
             client_cert = \"{}\", client_key = \"{}\" }}",
            b.addr,
            cc.display(),
            ck.display()
        ),
        1,
    );
    let (status, v) = echo(&s, "/app/x");
    assert_eq!(status, 200, "{}", s.stderr());
    assert_eq!(v["client_cert"], "stoa-client", "{v}");
    drop(s);

    let dir2 = TempDir::new("ptls-client-none");
    std::fs::copy(&ca.path, dir2.join("good.pem")).expect("copy CA");
    let s = stoa(
        &dir2,
        &format!(
            "address = [\"{}\"]\ntls = {{ ca = \"good.pem\", server_name = \"app.test\" }}",
            b.addr
        ),
        1,
    );
    let (status, _) = echo(&s, "/app/x");
    assert_eq!(status, 502, "{}", s.stderr());
}

/// nginx `keepalive` in an upstream block with `proxy_ssl_session_reuse
/// on`: a TLS connection is kept between requests and taken by whichever
/// worker gets the next one (two workers, a new client connection each
/// time, so both take parked connections the other parked); one
/// connection carries all the requests. A POST, which cannot be sent
/// again, takes a parked connection only when a peek finds it open: it
/// does over TLS too (the session tickets were read with the first
/// response).
#[test]
fn kept_alive_tls_connections_are_reused_by_any_worker() {
    let dir = TempDir::new("ptls-keep");
    let ca = ca(&dir, "good");
    let b = https_backend(&dir, &ca, &[]);
    let s = stoa(
        &dir,
        &format!(
            "address = [\"{}\"]\ntls = {{ ca = \"good.pem\", server_name = \"app.test\" }}",
            b.addr
        ),
        2,
    );
    let mut conns = std::collections::BTreeSet::new();
    let mut last = serde_json::Value::Null;
    for k in 0..24 {
        let (status, v) = if k % 2 == 0 {
            echo(&s, &format!("/app/r{k}"))
        } else {
            send(
                &s,
                &format!("/app/p{k}"),
                "POST {path} HTTP/1.1\r\nHost: site.test\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
            )
        };
        assert_eq!(status, 200, "{}", s.stderr());
        conns.insert(v["conn"].as_u64().unwrap_or(0));
        last = v;
    }
    assert_eq!(
        conns.len(),
        1,
        "connections used: {conns:?}\n{}",
        s.stderr()
    );
    assert_eq!(last["conn_requests"], 24, "{last}");
}

/// `proxy_ssl_session_reuse on` (nginx's default): a new connection to a
/// server resumes the session of an earlier one (an abbreviated
/// handshake, RFC 8446 §2.2). The backend closes after every response
/// (HTTP/1.0), so every request needs a new connection.
#[test]
fn new_tls_connections_to_a_backend_resume_the_session_of_earlier_ones() {
    let dir = TempDir::new("ptls-resume");
    let ca = ca(&dir, "good");
    let b = https_backend(&dir, &ca, &["--http10"]);
    let s = stoa(
        &dir,
        &format!(
            "address = [\"{}\"]\ntls = {{ ca = \"good.pem\", server_name = \"app.test\" }}",
            b.addr
        ),
        1,
    );
    let mut resumed = Vec::new();
    let mut conns = std::collections::BTreeSet::new();
    for k in 0..4 {
        let (status, v) = echo(&s, &format!("/app/r{k}"));
        assert_eq!(status, 200, "{}", s.stderr());
        conns.insert(v["conn"].as_u64().unwrap_or(0));
        resumed.push(v["tls_resumed"].as_bool().unwrap_or(false));
    }
    assert_eq!(conns.len(), 4, "the backend was to close every connection");
    assert_eq!(resumed, [false, true, true, true]);
}

/// `stoa check` reads the CA and key files (nginx -t reads
/// `proxy_ssl_trusted_certificate`): a missing one is an error naming it.
#[test]
fn stoa_check_refuses_a_pool_whose_ca_file_is_missing_and_names_it() {
    let dir = TempDir::new("ptls-check");
    dir.mkdir("www");
    let cfg = dir.config(
        "stoa.toml",
        "[[pool]]\nname = \"app\"\nprotocol = \"http\"\naddress = [\"https://127.0.0.1:9\"]\n\
         tls = { ca = \"missing-ca.pem\" }\n\n[[site]]\nroot = \"www\"\n[[site.route]]\n\
         prefix = \"/app/\"\nproxy = { pool = \"app\" }\n",
    );
    let o = Command::new(stoa_bin())
        .arg("check")
        .arg(&cfg)
        .output()
        .expect("run stoa check");
    let text =
        String::from_utf8_lossy(&o.stderr).into_owned() + &String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success(), "{text}");
    assert!(text.contains("missing-ca.pem"), "{text}");
}

/// Active health checks reach the server the way requests do, over TLS
/// (Caddy's `health_uri` uses the transport's TLS; nginx's `health_check`
/// its `proxy_ssl_*`): each check is a verified handshake the backend
/// counts, and the server stays in rotation. Spoken in clear to a TLS
/// port they would fail and take it out (503).
#[test]
fn health_checks_of_an_https_pool_speak_tls_and_keep_the_server_in_rotation() {
    let dir = TempDir::new("ptls-health");
    let ca = ca(&dir, "good");
    let b = https_backend(&dir, &ca, &[]);
    let s = stoa(
        &dir,
        &format!(
            "address = [\"{}\"]\ntls = {{ ca = \"good.pem\", server_name = \"app.test\" }}\n\
             health = {{ path = \"/health\", interval = \"100ms\", fails = 1, passes = 1 }}",
            b.addr
        ),
        1,
    );
    // The backend's count of connections (its /stats, through Stoa on
    // the pool's one kept connection): every health check is a new one.
    let count = |s: &Server| {
        let mut c = s.connect();
        c.send(b"GET /stats HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n");
        let r = c
            .try_read_final()
            .unwrap_or_else(|e| panic!("GET /stats: {e}\n{}", s.stderr()));
        assert_eq!(r.status, 200, "{}", s.stderr());
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
        v["connections"].as_u64().unwrap_or(0)
    };
    let first = count(&s);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut now = first;
    while now < first + 5 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        now = count(&s);
    }
    assert!(
        now >= first + 5,
        "{first} then {now} backend connections: no health checks over TLS\n{}",
        s.stderr()
    );
    assert!(!s.stderr().contains("out of rotation"), "{}", s.stderr());
}

/// Bodies larger than the socket buffers and than TLS records (16 KiB)
/// pass whole both ways over a TLS upstream, as over a plain one: a
/// 3 MiB upload (each write waits for the backend to read) and a 16 MiB
/// download, then the same connection carries the next request.
#[test]
fn bodies_larger_than_many_records_pass_through_a_tls_upstream_whole_both_ways() {
    let dir = TempDir::new("ptls-bodies");
    let ca = ca(&dir, "good");
    let b = https_backend(&dir, &ca, &[]);
    let s = stoa(
        &dir,
        &format!(
            "address = [\"{}\"]\ntls = {{ ca = \"good.pem\", server_name = \"app.test\" }}",
            b.addr
        ),
        1,
    );
    let body = pattern(3 << 20, 11);
    let mut req = format!(
        "POST /app/upload HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    let mut c = s.connect();
    c.send(&req);
    let r = c
        .try_read_final()
        .unwrap_or_else(|e| panic!("POST: {e}\n{}", s.stderr()));
    assert_eq!(r.status, 200, "{}", s.stderr());
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
    assert_eq!(v["body_length"], 3 << 20, "{}", s.stderr());

    let mut c = s.connect();
    c.send(b"GET /big?size=16777216 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let mut all = c.take_pending();
    c.stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    std::io::Read::read_to_end(&mut c.stream, &mut all).expect("read the response");
    let head_end = find(&all, b"\r\n\r\n").expect("a head") + 4;
    assert!(all.starts_with(b"HTTP/1.1 200"), "{}", s.stderr());
    assert_eq!(all.len() - head_end, 16 << 20);

    let (status, v) = echo(&s, "/app/after");
    assert_eq!(status, 200, "{}", s.stderr());
    assert!(v["conn_requests"].as_u64().unwrap_or(0) >= 2, "{v}");
}
