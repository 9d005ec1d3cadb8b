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

/// A server on 127.0.0.1:0 over TLS with `cert`/`key` and these ticket
/// key files, serving `dir/www`.
fn ticket_server(dir: &TempDir, name: &str, cert: &Path, key: &Path, keys: &[&Path]) -> Server {
    ticket_server_as(dir, name, "root", cert, key, keys)
}

/// [`ticket_server`] running as `user`.
fn ticket_server_as(
    dir: &TempDir,
    name: &str,
    user: &str,
    cert: &Path,
    key: &Path,
    keys: &[&Path],
) -> Server {
    let keys: Vec<String> = keys
        .iter()
        .map(|k| format!("\"{}\"", k.display()))
        .collect();
    let cfg = dir.write(
        &format!("{name}.toml"),
        format!(
            "workers = 2\nuser = \"{user}\"\n\n[log]\naccess = \"off\"\n\n\
             [[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"{}\"\nkey = \"{}\"\n\
             session_ticket_keys = [{}]\n\n\
             [[site]]\nroot = \"www\"\n",
            cert.display(),
            key.display(),
            keys.join(", ")
        ),
    );
    let server = Server::with_config(&cfg);
    server.wait_for_handler(libc::SIGHUP);
    server
}

/// `openssl s_client` to `server` with `args`, sending an HTTP/1.0
/// request and reading until the server closes: by then a TLS 1.3
/// ticket, sent after the handshake, has arrived and is in `-sess_out`.
fn s_client_get(server: &Server, args: &[&str]) -> String {
    require("openssl", "openssl");
    use std::io::Write;
    let mut child = Command::new("timeout")
        .args(["10", "openssl", "s_client", "-ign_eof", "-connect"])
        .arg(format!("127.0.0.1:{}", server.addr.port()))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl s_client");
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(b"GET /index.html HTTP/1.0\r\nHost: localhost\r\n\r\n");
    }
    let out = child.wait_with_output().expect("openssl s_client");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// A new ticket key file (`openssl rand 80`, as nginx's docs make one).
fn ticket_key(dir: &TempDir, name: &str) -> PathBuf {
    let path = dir.join(name);
    let (ok, out) = run(Command::new("openssl")
        .args(["rand", "-out"])
        .arg(&path)
        .arg("80"));
    assert!(ok, "{out}");
    path
}

#[test]
fn a_session_from_one_instance_resumes_on_another_sharing_the_ticket_key_file_rfc5077_rfc8446_4_6_1(
) {
    let dir = TempDir::new("tlsstate-tickets");
    dir.write("www/index.html", "ticket\n");
    let (cert, key) = make_cert(&dir.join("certs"), &["localhost"]);
    let shared = ticket_key(&dir, "shared.key");
    let foreign = ticket_key(&dir, "foreign.key");
    let a = ticket_server(&dir, "a", &cert, &key, &[&shared]);
    let b = ticket_server(&dir, "b", &cert, &key, &[&shared]);
    let c = ticket_server(&dir, "c", &cert, &key, &[&foreign]);
    for version in ["-tls1_2", "-tls1_3"] {
        let v = &version[4..].replace('_', ".");
        let sess = dir
            .join(&format!("sess{version}.pem"))
            .display()
            .to_string();
        let first = s_client_get(&a, &[version, "-sess_out", &sess]);
        assert!(first.contains(&format!("New, TLSv{v}")), "{first}");
        assert!(first.contains("ticket\n"), "{first}");
        let on_b = s_client_get(&b, &[version, "-sess_in", &sess]);
        assert!(on_b.contains(&format!("Reused, TLSv{v}")), "{on_b}");
        assert!(on_b.contains("ticket\n"), "{on_b}");
        // An instance with another key cannot open it: a full handshake.
        let on_c = s_client_get(&c, &[version, "-sess_in", &sess]);
        assert!(on_c.contains(&format!("New, TLSv{v}")), "{on_c}");
    }
}

/// As nginx's master reads `ssl_session_ticket_key` files as root: a key
/// file only root may read (0600) is read by the privileged parent and
/// used by server processes running as www-data.
#[test]
fn a_root_only_ticket_key_file_is_read_by_the_privileged_parent_for_servers_running_as_www_data() {
    use std::os::unix::fs::PermissionsExt;
    require_root();
    let dir = TempDir::new("tlsstate-tickets-priv");
    dir.write("www/index.html", "ticket\n");
    let (cert, key) = make_cert(&dir.join("certs"), &["localhost"]);
    let shared = ticket_key(&dir, "shared.key");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let a = ticket_server_as(&dir, "a", "www-data", &cert, &key, &[&shared]);
    let b = ticket_server_as(&dir, "b", "www-data", &cert, &key, &[&shared]);
    let sess = dir.join("sess.pem").display().to_string();
    let first = s_client_get(&a, &["-tls1_3", "-sess_out", &sess]);
    assert!(first.contains("New, TLSv1.3"), "{first}");
    let on_b = s_client_get(&b, &["-tls1_3", "-sess_in", &sess]);
    assert!(on_b.contains("Reused, TLSv1.3"), "{on_b}");
    assert!(on_b.contains("ticket\n"), "{on_b}");
}

#[test]
fn a_reload_reads_rotated_ticket_keys_and_the_old_key_second_still_opens_as_nginx() {
    let dir = TempDir::new("tlsstate-rotate");
    dir.write("www/index.html", "ticket\n");
    let (cert, key) = make_cert(&dir.join("certs"), &["localhost"]);
    let old = ticket_key(&dir, "old.key");
    // As rotated by cron for nginx: current.key seals, previous.key is
    // the one before.
    let current = dir.join("current.key");
    let previous = ticket_key(&dir, "previous.key");
    std::fs::copy(&old, &current).expect("copy");
    let a = ticket_server(&dir, "a", &cert, &key, &[&current, &previous]);
    let b = ticket_server(&dir, "b", &cert, &key, &[&old]);
    let sess_old = dir.join("old.pem").display().to_string();
    let first = s_client_get(&b, &["-tls1_3", "-sess_out", &sess_old]);
    assert!(first.contains("New, TLSv1.3"), "{first}");

    // Rotation: the current key becomes the previous, a new one current;
    // SIGHUP.
    std::fs::copy(&current, &previous).expect("copy");
    let new = ticket_key(&dir, "new.key");
    std::fs::copy(&new, &current).expect("copy");
    let from = a.stderr().len();
    a.signal(libc::SIGHUP);
    assert!(
        a.wait_stderr(from, "reloaded", std::time::Duration::from_secs(5)),
        "{}",
        a.stderr()
    );
    // The old key still opens B's ticket on A...
    let again = s_client_get(&a, &["-tls1_3", "-sess_in", &sess_old]);
    assert!(again.contains("Reused, TLSv1.3"), "{again}");
    // ...and A now seals with the new key, which B does not have.
    let sess_new = dir.join("new.pem").display().to_string();
    let fresh = s_client_get(&a, &["-tls1_3", "-sess_out", &sess_new]);
    assert!(fresh.contains("New, TLSv1.3"), "{fresh}");
    let on_b = s_client_get(&b, &["-tls1_3", "-sess_in", &sess_new]);
    assert!(on_b.contains("New, TLSv1.3"), "{on_b}");
}

#[test]
fn a_ticket_key_file_of_the_wrong_size_stops_start_up_naming_the_file() {
    let dir = TempDir::new("tlsstate-badkey");
    dir.write("www/index.html", "x");
    let (cert, key) = make_cert(&dir.join("certs"), &["localhost"]);
    let bad = dir.write("bad.key", [7u8; 32]);
    let cfg = dir.write(
        "stoa.toml",
        format!(
            "user = \"root\"\n[[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"{}\"\nkey = \"{}\"\n\
             session_ticket_keys = [\"{}\"]\n\n[[site]]\nroot = \"www\"\n",
            cert.display(),
            key.display(),
            bad.display()
        ),
    );
    let (ok, out) = run(Command::new(stoa_bin())
        .args(["serve", "--config"])
        .arg(&cfg));
    assert!(!ok, "{out}");
    assert!(out.contains(&bad.display().to_string()), "{out}");
    assert!(out.contains("80 or 48 bytes"), "{out}");
}

/// `openssl ARGS` in `dir`, which must succeed.
fn openssl(dir: &Path, args: &[&str]) {
    require("openssl", "openssl");
    let (ok, out) = run(Command::new("openssl").current_dir(dir).args(args));
    assert!(ok, "openssl {args:?}: {out}");
}

/// A test CA in `dir` (ca.pem, ca.key), a delegated OCSP responder
/// certificate (resp.pem, resp.key: id-kp-OCSPSigning, RFC 6960
/// §4.2.2.2), and the responder's index.txt with serial 0x1001 in state
/// `index`: "V" (valid) or "R" (revoked).
fn ocsp_ca(dir: &Path, index: &str) {
    std::fs::create_dir_all(dir).expect("mkdir");
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "30",
            "-subj",
            "/CN=Stoa Test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
    std::fs::write(dir.join("resp.ext"), "extendedKeyUsage=OCSPSigning\n").expect("write");
    issue(dir, "resp", "0x2002", "resp.ext");
    let revoked = if index == "R" { "251127000000Z" } else { "" };
    std::fs::write(
        dir.join("index.txt"),
        format!("{index}\t301231000000Z\t{revoked}\t1001\tunknown\t/CN=leaf\n"),
    )
    .expect("index");
}

/// The certificate for localhost, serial 0x1001, issued by `dir`'s CA,
/// whose authorityInfoAccess names `http://127.0.0.1:{port}/`:
/// chain.pem (leaf then CA) and leaf.key.
fn ocsp_leaf(dir: &Path, port: u16) {
    std::fs::write(
        dir.join("leaf.ext"),
        format!(
            "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n\
             authorityInfoAccess=OCSP;URI:http://127.0.0.1:{port}/\n"
        ),
    )
    .expect("write");
    issue(dir, "leaf", "0x1001", "leaf.ext");
    let leaf = std::fs::read(dir.join("leaf.pem")).expect("leaf");
    let ca = std::fs::read(dir.join("ca.pem")).expect("ca");
    std::fs::write(dir.join("chain.pem"), [leaf, ca].concat()).expect("chain");
}

/// NAME.pem and NAME.key (ECDSA P-256), signed by the CA in `dir`.
fn issue(dir: &Path, name: &str, serial: &str, ext: &str) {
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            &format!("/CN={name}"),
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-set_serial",
            serial,
            "-days",
            "30",
            "-extfile",
            ext,
            "-out",
            &format!("{name}.pem"),
        ],
    );
}

/// A child process killed (by PID) and reaped on drop.
struct Peer(std::process::Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `openssl ocsp` answering from `dir/index.txt` on a port of its
/// choosing, signing with `signer` (`ca` itself or the delegated `resp`),
/// and that port, once it accepts (its "ACCEPT [::]:PORT" line on stdout:
/// a probe connection would hang its one-at-a-time loop).
fn ocsp_responder(dir: &Path, signer: &str) -> (Peer, u16) {
    ocsp_responder_for(dir, signer, &["-ndays", "1"])
}

/// [`ocsp_responder`] whose answers are valid for `validity` (`-ndays N`
/// or `-nmin N`: nextUpdate that far after thisUpdate).
fn ocsp_responder_for(dir: &Path, signer: &str, validity: &[&str]) -> (Peer, u16) {
    use std::io::BufRead;
    require("openssl", "openssl");
    let mut child = Command::new("openssl")
        .current_dir(dir)
        .args(["ocsp", "-index", "index.txt", "-CA", "ca.pem", "-port", "0"])
        .args(validity)
        .args([
            "-rsigner",
            &format!("{signer}.pem"),
            "-rkey",
            &format!("{signer}.key"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl ocsp");
    let stdout = child.stdout.take().expect("stdout");
    let peer = Peer(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Drained to the end, so that the responder never blocks on it.
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let port = line
                .strip_prefix("ACCEPT ")
                .and_then(|a| a.split_whitespace().next())
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| p.parse::<u16>().ok());
            if let Some(p) = port {
                let _ = tx.send(p);
            }
        }
    });
    let port = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("openssl ocsp says where it listens");
    (peer, port)
}

/// A server over TLS with the PKI's chain and `ocsp_stapling = true`.
fn stapling_server(dir: &TempDir, pki: &Path) -> Server {
    stapling_server_with(dir, pki, "")
}

/// [`stapling_server`] with more lines in its `[[tls]]` block.
fn stapling_server_with(dir: &TempDir, pki: &Path, more: &str) -> Server {
    dir.write("www/index.html", "stapled\n");
    let cfg = dir.write(
        "stoa.toml",
        format!(
            "workers = 1\nuser = \"root\"\n\n[log]\naccess = \"off\"\n\n\
             [[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"{}\"\nkey = \"{}\"\n\
             ocsp_stapling = true\n{more}\n[[site]]\nroot = \"www\"\n",
            pki.join("chain.pem").display(),
            pki.join("leaf.key").display(),
        ),
    );
    Server::with_config(&cfg)
}

/// `/index.html` by curl over HTTPS to localhost, trusting `ca`.
fn page(server: &Server, ca: &Path) -> String {
    let (ok, out) = page_with(server, ca, &[]);
    assert!(ok, "{out}");
    out
}

/// [`page`] with more curl arguments: whether curl succeeded, and what it
/// printed.
fn page_with(server: &Server, ca: &Path, extra: &[&str]) -> (bool, String) {
    require("curl", "curl");
    let port = server.addr.port();
    run(Command::new("curl")
        .args(["-sS", "--max-time", "10", "--resolve"])
        .arg(format!("localhost:{port}:127.0.0.1"))
        .arg("--cacert")
        .arg(ca)
        .args(extra)
        .arg(format!("https://localhost:{port}/index.html")))
}

/// What `openssl s_client -status` says of the stapled answer.
fn status(server: &Server) -> String {
    status_with(server, &[])
}

/// [`status`] with more `s_client` arguments (a TLS version).
fn status_with(server: &Server, extra: &[&str]) -> String {
    let (_, out) = run(Command::new("timeout")
        .args([
            "10",
            "openssl",
            "s_client",
            "-status",
            "-servername",
            "localhost",
        ])
        .args(extra)
        .arg("-connect")
        .arg(format!("127.0.0.1:{}", server.addr.port())));
    out
}

#[test]
fn a_good_answer_from_openssl_ocsp_is_stapled_and_seen_by_s_client_status_rfc6960_rfc6066_8() {
    let dir = TempDir::new("tlsstate-ocsp");
    let pki = dir.join("pki");
    ocsp_ca(&pki, "V");
    // Signed by a delegated responder, not the CA itself.
    let (_responder, port) = ocsp_responder(&pki, "resp");
    ocsp_leaf(&pki, port);
    let server = stapling_server(&dir, &pki);
    assert!(
        server.wait_stderr(
            0,
            "good answer from http://127.0.0.1",
            std::time::Duration::from_secs(20)
        ),
        "{}",
        server.stderr()
    );
    for args in [&["-tls1_3"][..], &["-tls1_2"][..]] {
        let out = status_with(&server, args);
        assert!(
            out.contains("OCSP Response Status: successful"),
            "{args:?}: {out}"
        );
        assert!(out.contains("Cert Status: good"), "{out}");
        assert!(out.contains("Serial Number: 1001"), "{out}");
    }
    // curl --cert-status insists on a stapled, verified, good answer.
    let (ok, out) = page_with(&server, &pki.join("ca.pem"), &["--cert-status"]);
    assert!(ok && out == "stapled\n", "{out}");
}

#[test]
fn an_answer_signed_by_the_issuer_itself_is_stapled_too_rfc6960_4_2_2_2() {
    let dir = TempDir::new("tlsstate-ocsp-ca");
    let pki = dir.join("pki");
    ocsp_ca(&pki, "V");
    let (_responder, port) = ocsp_responder(&pki, "ca");
    ocsp_leaf(&pki, port);
    let server = stapling_server(&dir, &pki);
    assert!(
        server.wait_stderr(0, "good answer from", std::time::Duration::from_secs(20)),
        "{}",
        server.stderr()
    );
    let out = status(&server);
    assert!(out.contains("Cert Status: good"), "{out}");
}

#[test]
fn a_revoked_answer_is_not_stapled_rfc6960_2_2() {
    let dir = TempDir::new("tlsstate-ocsp-rev");
    let pki = dir.join("pki");
    ocsp_ca(&pki, "R");
    let (_responder, port) = ocsp_responder(&pki, "resp");
    ocsp_leaf(&pki, port);
    let server = stapling_server(&dir, &pki);
    assert!(
        server.wait_stderr(
            0,
            "the certificate is revoked",
            std::time::Duration::from_secs(20)
        ),
        "{}",
        server.stderr()
    );
    let out = status(&server);
    assert!(out.contains("OCSP response: no response sent"), "{out}");
    // The handshake without a staple still serves, to a client that
    // checks the chain.
    assert_eq!(page(&server, &pki.join("ca.pem")), "stapled\n");
    let (ok, out) = page_with(&server, &pki.join("ca.pem"), &["--cert-status"]);
    assert!(!ok, "{out}");
}

#[test]
fn a_responder_answering_garbage_gets_nothing_stapled_and_the_site_still_serves() {
    let dir = TempDir::new("tlsstate-ocsp-junk");
    // A responder that answers 200 with bytes that are no OCSP response.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            use std::io::{Read, Write};
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(
                b"HTTP/1.0 200 OK\r\nContent-Type: application/ocsp-response\r\n\
                  Content-Length: 7\r\n\r\ngarbage",
            );
        }
    });
    let pki = dir.join("pki");
    ocsp_ca(&pki, "V");
    ocsp_leaf(&pki, port);
    let server = stapling_server(&dir, &pki);
    assert!(
        server.wait_stderr(
            0,
            "not an OCSP response",
            std::time::Duration::from_secs(20)
        ),
        "{}",
        server.stderr()
    );
    let out = status(&server);
    assert!(out.contains("OCSP response: no response sent"), "{out}");
    // The handshake without a staple still serves, to a client that
    // checks the chain.
    assert_eq!(page(&server, &pki.join("ca.pem")), "stapled\n");
}

/// nginx `ssl_stapling_responder`: the configured responder is asked
/// instead of the one in the certificate (here a port nothing answers
/// on), and a reload staples the answer in hand at once, even with the
/// responder gone.
#[test]
fn ocsp_responder_overrides_the_certificates_and_a_reload_keeps_the_staple_without_asking_again() {
    let dir = TempDir::new("tlsstate-ocsp-override");
    let pki = dir.join("pki");
    ocsp_ca(&pki, "V");
    let (responder, port) = ocsp_responder(&pki, "resp");
    // The certificate names a port that was free a moment ago.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a port")
        .port();
    ocsp_leaf(&pki, dead);
    let server = stapling_server_with(
        &dir,
        &pki,
        &format!("ocsp_responder = \"http://127.0.0.1:{port}/\"\n"),
    );
    server.wait_for_handler(libc::SIGHUP);
    assert!(
        server.wait_stderr(
            0,
            &format!("good answer from http://127.0.0.1:{port}/"),
            std::time::Duration::from_secs(20)
        ),
        "{}",
        server.stderr()
    );
    assert!(status(&server).contains("Cert Status: good"));
    drop(responder);
    let from = server.stderr().len();
    server.signal(libc::SIGHUP);
    assert!(
        server.wait_stderr(from, "reloaded", std::time::Duration::from_secs(5)),
        "{}",
        server.stderr()
    );
    let out = status(&server);
    assert!(out.contains("Cert Status: good"), "{out}");
    assert!(
        !server.stderr()[from..].contains("OCSP"),
        "{}",
        server.stderr()
    );
}

#[test]
fn an_ocsp_responder_that_is_not_http_is_a_config_error() {
    let dir = TempDir::new("tlsstate-ocsp-badurl");
    let (cert, key) = make_cert(&dir.join("certs"), &["localhost"]);
    dir.write("www/index.html", "x");
    let cfg = dir.write(
        "stoa.toml",
        format!(
            "user = \"root\"\n[[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"{}\"\nkey = \"{}\"\n\
             ocsp_stapling = true\nocsp_responder = \"ldap://ocsp.example\"\n\n\
             [[site]]\nroot = \"www\"\n",
            cert.display(),
            key.display()
        ),
    );
    let (ok, out) = run(Command::new(stoa_bin())
        .args(["serve", "--config"])
        .arg(&cfg));
    assert!(!ok, "{out}");
    assert!(out.contains("tls.ocsp_responder"), "{out}");
}

/// As Caddy keeps staples in its storage: with `ocsp_cache`, a server
/// started after the responder went away staples the kept answer from its
/// first handshake.
#[test]
fn ocsp_cache_lets_a_restart_staple_at_once_with_the_responder_gone() {
    let dir = TempDir::new("tlsstate-ocsp-cache");
    let pki = dir.join("pki");
    ocsp_ca(&pki, "V");
    let (responder, port) = ocsp_responder(&pki, "resp");
    ocsp_leaf(&pki, port);
    let cache = dir.join("ocsp-cache");
    let more = format!("ocsp_cache = \"{}\"\n", cache.display());
    let first = stapling_server_with(&dir, &pki, &more);
    assert!(
        first.wait_stderr(
            0,
            "good answer from http://",
            std::time::Duration::from_secs(20)
        ),
        "{}",
        first.stderr()
    );
    let kept: Vec<_> = std::fs::read_dir(&cache)
        .expect("the cache directory")
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "ocsp"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    drop(first);
    drop(responder);

    let second = stapling_server_with(&dir, &pki, &more);
    let out = status(&second);
    assert!(out.contains("Cert Status: good"), "{out}");
    assert!(
        second
            .stderr()
            .contains(&format!("good answer from {}", cache.display())),
        "{}",
        second.stderr()
    );
}

/// RFC 6960 §4.2.2.1 (nextUpdate) and Caddy's rule: an answer valid for
/// one minute is asked for again halfway, before it lapses, and the new
/// one is stapled.
#[test]
fn a_short_lived_answer_is_fetched_again_before_its_next_update() {
    let dir = TempDir::new("tlsstate-ocsp-refresh");
    let pki = dir.join("pki");
    ocsp_ca(&pki, "V");
    let (_responder, port) = ocsp_responder_for(&pki, "resp", &["-nmin", "1"]);
    ocsp_leaf(&pki, port);
    let server = stapling_server(&dir, &pki);
    let good = "good answer from http://";
    assert!(
        server.wait_stderr(0, good, std::time::Duration::from_secs(20)),
        "{}",
        server.stderr()
    );
    let first = server
        .stderr()
        .find(good)
        .map(|i| i + good.len())
        .unwrap_or(0);
    // Halfway is 30 s; nextUpdate is 60 s.
    assert!(
        server.wait_stderr(first, good, std::time::Duration::from_secs(55)),
        "{}",
        server.stderr()
    );
    let out = status(&server);
    assert!(out.contains("Cert Status: good"), "{out}");
    assert!(
        !server.stderr().contains("nothing is stapled"),
        "{}",
        server.stderr()
    );
}
